//! Runs the built `strata` binary against temporary directories.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_fails, new_db, ok, run, run_raw};

fn put_all(db: &Path, pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        ok(db, &["put", k, v]);
    }
}

/// The paths in `dir`, sorted.
fn dir_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn sst_files(db: &Path) -> Vec<PathBuf> {
    let mut v = dir_entries(db);
    v.retain(|p| p.extension().is_some_and(|e| e == "sst"));
    v
}

fn dir_names(dir: &Path) -> Vec<String> {
    dir_entries(dir)
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

const ABCDE: [(&str, &str); 5] = [("c", "3"), ("a", "1"), ("e", "5"), ("b", "2"), ("d", "4")];

#[test]
fn put_get_overwrite_and_del_round_trip() {
    let (_t, db) = new_db();
    assert!(!db.exists());
    ok(&db, &["put", "k", "v1"]);
    assert!(db.join("CURRENT").exists(), "put creates the database");
    assert_eq!(ok(&db, &["get", "k"]), "v1\n");
    ok(&db, &["put", "k", "v2"]);
    assert_eq!(ok(&db, &["get", "k"]), "v2\n");
    // Values (and keys) that start with a hyphen are data, not flags.
    ok(&db, &["put", "neg", "-5"]);
    assert_eq!(ok(&db, &["get", "neg"]), "-5\n");
    ok(&db, &["del", "k"]);
    let r = run(&db, &["get", "k"]);
    assert_fails(&r, 1, &["not found"]);
    assert!(r.stdout.is_empty());
    assert_eq!(ok(&db, &["get", "neg"]), "-5\n", "del removes only its key");
}

#[test]
fn scan_forward_reverse_limit_and_bounds() {
    let (_t, db) = new_db();
    put_all(&db, &ABCDE);
    assert_eq!(ok(&db, &["scan"]), "a\t1\nb\t2\nc\t3\nd\t4\ne\t5\n");
    assert_eq!(ok(&db, &["scan", "--reverse"]), "e\t5\nd\t4\nc\t3\nb\t2\na\t1\n");
    assert_eq!(ok(&db, &["scan", "--limit", "2"]), "a\t1\nb\t2\n");
    assert_eq!(ok(&db, &["scan", "--reverse", "--limit", "2"]), "e\t5\nd\t4\n");
    assert_eq!(ok(&db, &["scan", "--limit", "0"]), "");
    // --from is inclusive, --to exclusive.
    assert_eq!(ok(&db, &["scan", "--from", "b", "--to", "d"]), "b\t2\nc\t3\n");
    assert_eq!(
        ok(&db, &["scan", "--from", "b", "--to", "d", "--reverse"]),
        "c\t3\nb\t2\n"
    );
    assert_eq!(ok(&db, &["scan", "--from", "d", "--keys-only"]), "d\ne\n");
    assert_eq!(ok(&db, &["scan", "--to", "b", "--keys-only"]), "a\n");
    assert_eq!(ok(&db, &["scan", "--from", "c", "--to", "c"]), "");
    let r = run(&db, &["scan", "--from", "d", "--to", "b"]);
    assert_fails(&r, 2, &["sorts after"]);
}

#[test]
fn del_range_deletes_a_half_open_range() {
    let (_t, db) = new_db();
    put_all(&db, &ABCDE);
    ok(&db, &["del-range", "b", "d"]);
    assert_eq!(ok(&db, &["scan", "--keys-only"]), "a\nd\ne\n");
    assert_fails(&run(&db, &["get", "c"]), 1, &["not found"]);
    // Still deleted after the range tombstone is flushed and compacted.
    ok(&db, &["flush"]);
    ok(&db, &["compact"]);
    assert_eq!(ok(&db, &["scan", "--keys-only"]), "a\nd\ne\n");
    assert_eq!(ok(&db, &["get", "d"]), "4\n");
}

#[test]
fn empty_del_range_is_rejected_and_changes_nothing() {
    let (_t, db) = new_db();
    put_all(&db, &ABCDE);
    assert_fails(&run(&db, &["del-range", "d", "b"]), 2, &["empty range"]);
    assert_fails(&run(&db, &["del-range", "c", "c"]), 2, &["empty range"]);
    assert_eq!(ok(&db, &["scan", "--keys-only"]), "a\nb\nc\nd\ne\n");
}

#[test]
fn keyspaces_create_list_use_and_drop() {
    let (_t, db) = new_db();
    ok(&db, &["create-keyspace", "idx"]);
    assert_eq!(ok(&db, &["keyspaces"]), "default\nidx\n");
    ok(&db, &["put", "k", "in-default"]);
    ok(&db, &["put", "--keyspace", "idx", "k", "in-idx"]);
    assert_eq!(ok(&db, &["get", "k"]), "in-default\n");
    assert_eq!(ok(&db, &["get", "-k", "idx", "k"]), "in-idx\n");
    assert_eq!(ok(&db, &["scan", "-k", "idx"]), "k\tin-idx\n");
    assert_fails(&run(&db, &["create-keyspace", "idx"]), 1, &["already exists"]);
    ok(&db, &["drop-keyspace", "idx"]);
    assert_eq!(ok(&db, &["keyspaces"]), "default\n");
    assert_fails(
        &run(&db, &["get", "-k", "idx", "k"]),
        1,
        &["keyspace \"idx\" not found"],
    );
    assert_eq!(ok(&db, &["get", "k"]), "in-default\n");
    assert_fails(&run(&db, &["drop-keyspace", "default"]), 1, &["cannot be dropped"]);
}

#[test]
fn unknown_keyspace_is_an_error() {
    let (_t, db) = new_db();
    ok(&db, &["put", "k", "v"]);
    let r = run(&db, &["get", "--keyspace", "nope", "k"]);
    assert_fails(&r, 1, &["keyspace \"nope\" not found"]);
    assert!(r.stderr.contains("existing keyspaces: default"), "{}", r.stderr);
    assert_fails(&run(&db, &["put", "-k", "nope", "k", "v"]), 1, &["not found"]);
    assert_fails(&run(&db, &["scan", "-k", "nope"]), 1, &["not found"]);
    assert_fails(&run(&db, &["compact", "-k", "nope"]), 1, &["not found"]);
    assert_fails(&run(&db, &["drop-keyspace", "nope"]), 1, &["not found"]);
    assert_eq!(ok(&db, &["keyspaces"]), "default\n", "nothing was created");
}

#[test]
fn flush_compact_and_stats() {
    let (_t, db) = new_db();
    // Few commands before the first check: every open replays the WAL into a level-0
    // table, and four of those would let a background compaction drop the tombstone.
    ok(&db, &["put", "a", "1"]);
    ok(&db, &["put", "b", "2"]);
    ok(&db, &["del", "a"]);
    ok(&db, &["flush"]);
    assert!(!sst_files(&db).is_empty(), "flush writes SSTables");
    let text = ok(&db, &["stats"]);
    assert!(text.starts_with("keyspace default (id 0): "), "{text}");
    assert!(text.contains("  L0 "), "{text}");
    assert!(text.contains("write amplification"), "{text}");
    let json = ok(&db, &["stats", "--json"]);
    assert!(
        json.starts_with("{\"keyspaces\":[{\"name\":\"default\",\"id\":0,"),
        "{json}"
    );
    assert!(json.trim_end().ends_with('}'), "{json}");
    assert!(json.contains("\"write_amplification\":"), "{json}");
    // Before compaction the tombstone of "a" is on disk.
    assert!(
        !json.contains("\"tombstones\":0,\"levels\""),
        "tombstone missing:\n{json}"
    );

    ok(&db, &["compact"]);
    let json = ok(&db, &["stats", "--json"]);
    // Fully compacted: the one live key, no tombstones, nothing left in level 0.
    assert!(json.contains("\"entries\":1,\"tombstones\":0,\"levels\""), "{json}");
    assert!(json.contains("{\"level\":0,\"runs\":0,\"files\":0,"), "{json}");
    assert_eq!(ok(&db, &["scan"]), "b\t2\n");

    ok(&db, &["put", "c", "3"]);
    ok(&db, &["compact", "--keyspace", "default"]);
    let json = ok(&db, &["stats", "--json"]);
    assert!(json.contains("\"entries\":2,\"tombstones\":0,\"levels\""), "{json}");
    assert_eq!(ok(&db, &["scan", "--keys-only"]), "b\nc\n");
}

#[test]
fn hex_mode_and_escaped_output() {
    let (_t, db) = new_db();
    ok(&db, &["--hex", "put", "00ff", "0x0a0b5c"]);
    ok(&db, &["put", "tab\tkey", "é"]);
    // Text output escapes what is not printable UTF-8, one entry per line.
    assert_eq!(ok(&db, &["scan"]), "\\x00\\xff\t\\n\\x0b\\\\\ntab\\tkey\té\n");
    assert_eq!(ok(&db, &["scan", "--hex"]), "00ff\t0a0b5c\n746162096b6579\tc3a9\n");
    assert_eq!(ok(&db, &["get", "--hex", "00FF"]), "0a0b5c\n");
    assert_eq!(
        ok(&db, &["scan", "--hex", "--from", "01", "--keys-only"]),
        "746162096b6579\n"
    );
    let r = run(&db, &["get", "--hex", "0g"]);
    assert_fails(&r, 2, &["not valid hex"]);
    assert_fails(
        &run(&db, &["put", "--hex", "abc", "00"]),
        2,
        &["odd number of hex digits"],
    );
    assert_fails(&run(&db, &["get", "--hex", "0102"]), 1, &["0x0102 not found"]);
}

#[test]
fn database_from_strata_db_env() {
    let (_t, db) = new_db();
    let r = run_raw(&["put", "k", "from-env"], Some(&db));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(ok(&db, &["get", "k"]), "from-env\n");
    let r = run_raw(&["get", "k"], Some(&db));
    assert_eq!(r.stdout, "from-env\n");
}

#[test]
fn dump_sst_shows_fence_pointers_and_bloom() {
    let (_t, db) = new_db();
    ok(&db, &["create-keyspace", "x"]);
    put_all(&db, &[("apple", "red"), ("banana", "yellow"), ("cherry", "dark")]);
    ok(&db, &["flush"]);
    let files = sst_files(&db);
    assert!(!files.is_empty());
    // Every table holds one keyspace; find the one with "banana".
    let dumps: Vec<String> = files
        .iter()
        .map(|f| {
            let r = run_raw(&["dump-sst", f.to_str().unwrap()], None);
            assert_eq!(r.code, Some(0), "{}", r.stderr);
            r.stdout
        })
        .collect();
    let d = dumps
        .iter()
        .find(|d| d.contains("\"banana\""))
        .expect("a table with banana");
    assert!(d.starts_with("table "), "{d}");
    assert!(d.contains("bloom: ") && d.contains(" probes"), "no bloom info:\n{d}");
    assert!(
        d.contains("data blocks (") && d.contains("  #0 offset "),
        "no fence pointers:\n{d}"
    );
    assert!(d.contains(" fence \""), "fence pointer lacks its key:\n{d}");
    assert!(!d.contains("=> \"yellow\""), "entries shown without --entries:\n{d}");

    let f = files
        .iter()
        .zip(&dumps)
        .find(|(_, d)| d.contains("\"banana\""))
        .unwrap()
        .0;
    let r = run_raw(&["dump-sst", f.to_str().unwrap(), "--entries"], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("\"banana\"@") && r.stdout.contains("=> \"yellow\""),
        "{}",
        r.stdout
    );
    let r = run_raw(&["dump-sst", f.to_str().unwrap(), "--entries", "--hex"], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("0x62616e616e61@") && r.stdout.contains("=> 0x79656c6c6f77"),
        "banana => yellow not in hex:\n{}",
        r.stdout
    );
}

#[test]
fn dump_sst_of_bad_files_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("000001.sst");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, &bytes).unwrap();
    assert_fails(
        &run_raw(&["dump-sst", garbage.to_str().unwrap()], None),
        1,
        &["corruption"],
    );

    let empty = dir.path().join("empty.sst");
    std::fs::write(&empty, b"").unwrap();
    assert_fails(
        &run_raw(&["dump-sst", empty.to_str().unwrap()], None),
        1,
        &["too small"],
    );

    let missing = dir.path().join("missing.sst");
    assert_fails(
        &run_raw(&["dump-sst", missing.to_str().unwrap()], None),
        1,
        &["missing.sst"],
    );
}

#[test]
fn get_on_missing_directory_fails_without_creating_it() {
    let (_t, db) = new_db();
    for args in [
        &["get", "k"][..],
        &["scan"],
        &["del", "k"],
        &["stats"],
        &["flush"],
        &["keyspaces"],
    ] {
        assert_fails(&run(&db, args), 1, &["not a Strata database"]);
    }
    assert!(!db.exists(), "a read command created the database");
}

#[test]
fn commands_on_a_non_database_directory_fail_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    for args in [
        &["get", "k"][..],
        &["put", "k", "v"],
        &["compact"],
        &["create-keyspace", "x"],
    ] {
        let r = run(dir.path(), args);
        assert_fails(&r, 1, &["not a Strata database"]);
        assert!(r.stderr.contains("notes.txt"), "{}", r.stderr);
    }
    assert_eq!(dir_names(dir.path()), vec!["notes.txt".to_string()]);

    // An empty directory is not a database either, for commands that only read.
    let empty = tempfile::tempdir().unwrap();
    assert_fails(&run(empty.path(), &["get", "k"]), 1, &["not a Strata database"]);
    assert!(dir_names(empty.path()).is_empty());

    // A regular file given as the database.
    let file = dir.path().join("notes.txt");
    assert_fails(&run(&file, &["get", "k"]), 1, &["not a Strata database"]);
}

#[test]
fn usage_errors_exit_2() {
    let r = run_raw(&["get", "k"], None);
    assert_fails(&r, 2, &["--db"]);
    let r = run_raw(&["frobnicate"], None);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.starts_with("error: "), "{}", r.stderr);
    let (_t, db) = new_db();
    let r = run(&db, &["scan", "--limit", "many"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--limit"), "{}", r.stderr);
    assert!(!db.exists());
}

/// Issue 20: `check` reads every SSTable, key-value ones included, and names the
/// damaged file (exit 1) instead of saying ok.
#[test]
fn check_finds_damage_in_a_key_value_sstable() {
    let (_dir, db) = new_db();
    for i in 0..200 {
        ok(&db, &["put", &format!("key{i:04}"), &"v".repeat(50)]);
        if i % 100 == 99 {
            ok(&db, &["flush"]);
        }
    }
    let out = ok(&db, &["check"]);
    assert!(out.ends_with("ok\n"), "{out}");
    let sst = sst_files(&db).into_iter().next().expect("an SSTable");
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&sst, bytes).unwrap();
    let r = run(&db, &["check"]);
    let name = sst.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(r.code, Some(1), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("PROBLEM: corruption in"), "{}", r.stdout);
    assert!(r.stdout.contains(&name), "{}", r.stdout);
}

/// A plain `check` reads the directory as it is: an SSTable the manifest does not list
/// is reported, not swept away by the open first (only `check --compact` writes).
#[test]
fn check_reports_an_unlisted_sstable_and_leaves_it() {
    let (_dir, db) = new_db();
    put_all(&db, &[("a", "1"), ("b", "2")]);
    ok(&db, &["flush"]);
    let ssts = sst_files(&db);
    let number = |p: &PathBuf| -> u64 { p.file_stem().unwrap().to_string_lossy().parse().unwrap() };
    // A number from before the check's open (a later one could be its own job's).
    let free = (1..).find(|n| !ssts.iter().any(|p| number(p) == *n)).unwrap();
    let stray = db.join(format!("{free:06}.sst"));
    std::fs::copy(&ssts[0], &stray).unwrap();
    let r = run(&db, &["check"]);
    assert_eq!(r.code, Some(1), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!("{free:06}.sst")) && r.stdout.contains("does not list"),
        "{}",
        r.stdout
    );
    assert!(stray.exists(), "check removed the file it reports");
    assert_eq!(ok(&db, &["get", "b"]), "2\n");
}

/// Every file of `d` with its bytes, by name.
fn listing(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// `--read-only` reads without creating LOCK or writing anything; writes fail.
#[test]
fn read_only_reads_and_refuses_writes() {
    let (_dir, db) = new_db();
    put_all(&db, &[("a", "1"), ("b", "2")]);
    std::fs::remove_file(db.join("LOCK")).unwrap();
    let before = listing(&db);
    assert_eq!(ok(&db, &["--read-only", "get", "b"]), "2\n");
    assert_eq!(ok(&db, &["--read-only", "scan"]), "a\t1\nb\t2\n");
    assert!(ok(&db, &["--read-only", "check"]).ends_with("ok\n"));
    assert_fails(&run(&db, &["--read-only", "put", "c", "3"]), 1, &["read-only"]);
    assert_eq!(listing(&db), before, "a read-only command changed the directory");
}

/// Commands that only read open the database read-only, without `--read-only`: the
/// directory is byte for byte as before (a read-write open replays the WAL into a new
/// one, writes a manifest and sweeps unlisted files, which `check` must see). Before,
/// each of these rewrote the directory.
#[test]
fn reading_commands_change_nothing() {
    let (_dir, db) = new_db();
    put_all(&db, &[("a", "1"), ("b", "2")]);
    ok(
        &db,
        &[
            "create-table",
            "table users (id u64, age i64) primary key (id) index by_age (age)",
        ],
    );
    ok(&db, &["insert", "users", r#"{"id": 1, "age": 30}"#]);
    let before = listing(&db);
    assert_eq!(ok(&db, &["get", "b"]), "2\n");
    assert_eq!(ok(&db, &["scan"]), "a\t1\nb\t2\n");
    ok(&db, &["stats"]);
    assert_eq!(ok(&db, &["keyspaces"]), "default\n", "a table's keyspaces listed");
    assert_eq!(
        ok(&db, &["keyspaces", "--all"]),
        "default\ntable:users\ntable:users:by_age\n"
    );
    assert_eq!(ok(&db, &["tables"]), "users\n");
    assert!(ok(&db, &["row-get", "users", "1"]).contains("30"));
    assert!(ok(&db, &["select", "users", "--index", "by_age"]).contains("30"));
    ok(&db, &["table-stats", "users"]);
    assert_eq!(listing(&db), before, "a reading command changed the directory");
    // A missing database is not created by a read.
    let missing = db.with_file_name("missing");
    assert_fails(&run(&missing, &["get", "a"]), 1, &[]);
    assert!(!missing.exists());
}

/// A table's internal keyspace cannot be written through `put`; `check` stays clean.
#[test]
fn put_into_a_tables_keyspace_is_refused() {
    let (_dir, db) = new_db();
    ok(
        &db,
        &[
            "create-table",
            "table u (id u64, a u64) primary key (id) index by_a (a)",
        ],
    );
    assert_fails(
        &run(&db, &["put", "--keyspace", "table:u", "k", "v"]),
        1,
        &["belongs to a table"],
    );
    assert_fails(
        &run(
            &db,
            &[
                "create-table",
                "table w (id u64, a u64) primary key (id) index primary (a)",
            ],
        ),
        1,
        &["reserved"],
    );
    assert!(ok(&db, &["check"]).ends_with("ok\n"));
}

/// `repair --to` copies a readable database whole (exit 0), and refuses an existing
/// destination; the source is not changed.
#[test]
fn repair_copies_into_a_new_database() {
    let (dir, db) = new_db();
    put_all(&db, &[("a", "1"), ("b", "2"), ("c", "3")]);
    ok(&db, &["flush"]);
    ok(&db, &["put", "d", "4"]);
    let to = dir.path().join("copy");
    let out = ok(&db, &["repair", "--to", to.to_str().unwrap()]);
    assert!(out.contains("salvaged 4 keys"), "{out}");
    assert_eq!(ok(&to, &["scan"]), "a\t1\nb\t2\nc\t3\nd\t4\n");
    assert!(ok(&to, &["check"]).ends_with("ok\n"));
    assert_fails(&run(&db, &["repair", "--to", to.to_str().unwrap()]), 1, &["exists"]);
    assert_eq!(ok(&db, &["get", "d"]), "4\n");
}

#[test]
fn delete_where_hides_entries_by_a_value_field() {
    let (_dir, db) = new_db();
    let db = db.as_path();
    ok(db, &["create-keyspace", "orders"]);
    let bad = run(db, &["delete-where", "-k", "orders", "a", "b"]);
    assert_fails(&bad, 1, &["declares no delete key"]);
    let delete_key = |h| ["delete-key", "-k", "orders", "--offset", "0", "--width", "1", "--h", h];
    assert_fails(&run(db, &delete_key("0")), 2, &["h = 0"]);
    ok(db, &delete_key("4"));
    ok(db, &["put", "-k", "orders", "o1", "a-old"]);
    ok(db, &["put", "-k", "orders", "o2", "m-mid"]);
    ok(db, &["put", "-k", "orders", "o3", "z-new"]);
    ok(db, &["flush"]);
    assert_fails(
        &run(db, &["delete-where", "-k", "orders", "aa", "n"]),
        1,
        &["must be 1 bytes"],
    );
    ok(db, &["delete-where", "-k", "orders", "a", "n"]);
    assert_eq!(ok(db, &["scan", "-k", "orders"]), "o3\tz-new\n");
    ok(db, &["compact"]);
    assert_eq!(ok(db, &["scan", "-k", "orders"]), "o3\tz-new\n");
    ok(db, &["check"]);
    let stats = ok(db, &["stats"]);
    assert!(stats.contains("delete tiles: h = 4 (fixed)"), "{stats}");
}
