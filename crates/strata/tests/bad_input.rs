//! Invalid arguments, unknown names and unusable paths are refused with the right error,
//! and a refused write leaves no trace (not even the valid part of its batch).

use strata::options::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use strata::{Db, Error, Keyspace, Options, WriteBatch};

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).expect("open")
}

/// A fresh database with keyspace `name` holding `k` = `v`.
fn with_keyspace(name: &str) -> (tempfile::TempDir, Db, Keyspace) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let ks = db.create_keyspace(name).expect("create");
    ks.put(b"k", b"v").expect("put");
    (dir, db, ks)
}

fn everything(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item")
}

fn assert_invalid<T: std::fmt::Debug>(r: strata::Result<T>, what: &str) {
    match r {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

fn assert_not_found<T: std::fmt::Debug>(r: strata::Result<T>, what: &str) {
    match r {
        Err(Error::NotFound(_)) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

#[test]
fn oversized_key_or_value_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    db.put(b"before", b"1").expect("put");
    let seq = db.last_seq();
    let big_key = vec![b'k'; MAX_KEY_SIZE + 1];
    let big_value = vec![b'v'; MAX_VALUE_SIZE + 1];

    assert_invalid(db.put(&big_key, b"v"), "put with an oversized key");
    assert_invalid(db.put(b"k", &big_value), "put with an oversized value");
    assert_invalid(db.delete(&big_key), "delete with an oversized key");
    assert_invalid(
        db.delete_range(&big_key[..]..&big_key[..]),
        "delete_range with an oversized bound",
    );

    // A batch whose valid operations come before and after the bad one: none applied.
    let ks = db.default_keyspace();
    let other = db.create_keyspace("other").expect("keyspace");
    let mut b = WriteBatch::new();
    b.put(&ks, b"a", b"1");
    b.put(&other, b"a", b"1");
    b.delete(&ks, b"before");
    b.put(&ks, b"b", &big_value);
    b.put(&ks, b"c", b"1");
    assert_invalid(db.write(b), "batch with an oversized value");
    let mut b = WriteBatch::new();
    b.put(&ks, b"a", b"1");
    b.put(&other, &big_key, b"1");
    assert_invalid(db.write(b), "batch with an oversized key");

    let check = |db: &Db, when: &str| {
        assert_eq!(
            everything(db),
            vec![(b"before".to_vec(), b"1".to_vec())],
            "{when}: default keyspace changed"
        );
        let other = db.keyspace("other").expect("other");
        assert_eq!(
            other.scan(..).expect("scan").count(),
            0,
            "{when}: other keyspace changed"
        );
    };
    check(&db, "after the refused writes");
    assert_eq!(db.last_seq(), seq, "refused writes consumed seqnos");
    // A key of exactly the maximum size is fine, and survives a flush.
    let max_key = vec![b'm'; MAX_KEY_SIZE];
    db.put(&max_key, b"max")
        .expect("a key of MAX_KEY_SIZE bytes is accepted");
    db.flush().expect("flush");
    assert_eq!(db.get(&max_key).expect("get"), Some(b"max".to_vec()));
    db.delete(&max_key).expect("delete");
    drop((ks, other));
    db.close().expect("close");
    let db = open(dir.path());
    check(&db, "after reopen");
}

#[test]
fn empty_or_inverted_delete_range_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    for k in [&b"a"[..], b"aa", b"b"] {
        db.put(k, b"v").expect("put");
    }
    let seq = db.last_seq();
    assert_invalid(db.delete_range(&b"b"[..]..&b"a"[..]), "delete_range b..a");
    assert_invalid(db.delete_range(&b"a"[..]..&b"a"[..]), "delete_range a..a");
    let ks = db.default_keyspace();
    assert_invalid(ks.delete_range(&b"z"[..]..&b""[..]), "keyspace delete_range z..\"\"");
    let mut b = WriteBatch::new();
    b.put(&ks, b"c", b"v");
    b.delete_range(&ks, b"b", b"a");
    assert_invalid(db.write(b), "batch with an inverted range");
    assert_eq!(db.last_seq(), seq);
    assert_eq!(everything(&db).len(), 3, "refused range deletes changed data");
    assert_eq!(
        db.get(b"c").expect("get"),
        None,
        "the valid part of a refused batch was applied"
    );
}

#[test]
fn unknown_and_dropped_keyspaces_are_not_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    assert_not_found(db.keyspace("nope"), "keyspace(\"nope\")");
    assert_not_found(db.drop_keyspace("nope"), "drop_keyspace(\"nope\")");

    let gone = db.create_keyspace("gone").expect("create");
    gone.put(b"k", b"v").expect("put");
    db.drop_keyspace("gone").expect("drop");
    assert_not_found(db.keyspace("gone"), "keyspace of a dropped name");
    assert_not_found(db.drop_keyspace("gone"), "dropping twice");

    // A batch naming the dropped keyspace fails as a whole.
    let ks = db.default_keyspace();
    let mut b = WriteBatch::new();
    b.put(&ks, b"x", b"1");
    b.put(&gone, b"y", b"1");
    assert_not_found(db.write(b), "batch writing to a dropped keyspace");
    assert_eq!(
        db.get(b"x").expect("get"),
        None,
        "the valid part of a refused batch was applied"
    );
    assert_not_found(gone.put(b"k2", b"v"), "put through a dropped keyspace's handle");
    assert_not_found(gone.delete(b"k"), "delete through a dropped keyspace's handle");
}

#[test]
fn reads_through_a_dropped_keyspace_handle_fail() {
    // Keyspace docs: "on a dropped keyspace, Error::NotFound" - reads included; in
    // particular the dropped data, still in the memtable, must not be served.
    let (_dir, db, gone) = with_keyspace("gone");
    db.drop_keyspace("gone").expect("drop");
    assert_not_found(gone.get(b"k"), "get through a dropped keyspace's handle");
    assert_not_found(
        gone.scan(..).map(|s| s.count()),
        "scan through a dropped keyspace's handle",
    );
    assert_not_found(db.snapshot().get(&gone, b"k"), "snapshot get of a dropped keyspace");
}

#[test]
fn bad_keyspace_names_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    assert_invalid(db.create_keyspace(""), "empty keyspace name");
    assert_invalid(db.create_keyspace(&"n".repeat(256)), "256-byte keyspace name");
    assert_invalid(db.drop_keyspace("default"), "dropping the default keyspace");
    db.create_keyspace("dup").expect("create");
    match db.create_keyspace("dup") {
        Err(Error::AlreadyExists(_)) => {}
        other => panic!("creating a keyspace twice: expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(db.list_keyspaces(), vec!["default".to_string(), "dup".to_string()]);
}

#[test]
fn snapshot_of_another_database_is_refused() {
    let (d1, d2) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (db1, db2) = (open(d1.path()), open(d2.path()));
    db1.put(b"k", b"1").expect("put");
    let snap2 = db2.snapshot();
    assert_invalid(snap2.get(&db1.default_keyspace(), b"k"), "snapshot of db2 reading db1");
    assert_invalid(
        snap2.scan(&db1.default_keyspace(), ..).map(|s| s.count()),
        "snapshot of db2 scanning db1",
    );
}

#[test]
fn directory_with_unrelated_files_is_not_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), b"hello").expect("write");
    match Db::open(dir.path(), Options::default()) {
        Err(Error::NotADatabase { .. }) => {}
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    // Nothing was created or removed.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["notes.txt".to_string()]);
}

/// A database that lost its `CURRENT` is refused, never taken for an interrupted
/// creation and cleared: its manifest describes more than an empty database.
#[test]
fn a_database_that_lost_current_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.create_keyspace("users").expect("keyspace");
        db.close().expect("close");
    }
    let ls = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    std::fs::remove_file(dir.path().join("CURRENT")).expect("rm CURRENT");
    // The WAL aside too: the manifest alone must keep the directory.
    for n in ls().into_iter().filter(|n| n.ends_with(".wal")) {
        std::fs::remove_file(dir.path().join(n)).expect("rm wal");
    }
    let before = ls();
    assert!(before.iter().any(|n| n.starts_with("MANIFEST-")), "{before:?}");
    match Db::open(dir.path(), Options::default()) {
        Err(Error::NotADatabase { reason, .. }) => assert!(reason.contains("no CURRENT"), "{reason}"),
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    assert_eq!(ls(), before, "nothing removed");
}

#[test]
fn regular_file_path_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("plain");
    std::fs::write(&file, b"data").expect("write");
    assert!(
        Db::open(&file, Options::default()).is_err(),
        "opening a regular file succeeded"
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"data", "the file was modified");
}

#[test]
fn create_if_missing_off_refuses_empty_or_missing_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        create_if_missing: false,
        ..Options::default()
    };
    assert!(
        Db::open(dir.path(), opts.clone()).is_err(),
        "opened an empty directory without create_if_missing"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("ls").count(),
        0,
        "files were created in the empty directory"
    );
    let missing = dir.path().join("missing");
    assert!(
        Db::open(&missing, opts.clone()).is_err(),
        "opened a missing directory without create_if_missing"
    );
    assert!(!missing.exists(), "the missing directory was created");
    // An existing database opens without create_if_missing.
    open(dir.path()).close().expect("close");
    Db::open(dir.path(), opts).expect("open an existing database without create_if_missing");
}

#[test]
fn error_if_exists_refuses_an_existing_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    open(dir.path()).close().expect("close");
    let opts = Options {
        error_if_exists: true,
        ..Options::default()
    };
    assert!(Db::open(dir.path(), opts).is_err());
}

#[test]
fn opening_the_same_directory_twice_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    db.put(b"k", b"1").expect("put");
    // Refused as a busy database (an I/O error naming the LOCK), as RocksDB does.
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Io { path: Some(p), source }) => {
            assert_eq!(p, dir.path().join("LOCK"));
            assert_eq!(source.kind(), std::io::ErrorKind::WouldBlock);
            assert!(source.to_string().contains("already open"), "{source}");
        }
        other => panic!("a second handle opened a locked database: {:?}", other.map(|_| ())),
    }
    // The first handle is unharmed.
    db.put(b"k2", b"2").expect("put after the refused open");
    assert_eq!(db.get(b"k").expect("get"), Some(b"1".to_vec()));
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("open after close");
    assert_eq!(everything(&db).len(), 2);
}

#[test]
fn invalid_options_are_refused_before_touching_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let with = |set: fn(&mut Options)| {
        let mut o = Options::default();
        set(&mut o);
        o
    };
    let cases: Vec<(&str, Options)> = vec![
        ("size_ratio 1.0", with(|o| o.size_ratio = 1.0)),
        ("size_ratio NaN", with(|o| o.size_ratio = f64::NAN)),
        ("runs_per_level 0", with(|o| o.runs_per_level = 0)),
        ("background_threads 0", with(|o| o.background_threads = 0)),
        ("bloom_fpr 1.0", with(|o| o.bloom_fpr = 1.0)),
        ("block_size 0", with(|o| o.block_size = 0)),
        (
            "l0_stall_trigger below l0_compaction_trigger",
            with(|o| {
                o.l0_compaction_trigger = 8;
                o.l0_stall_trigger = 4;
            }),
        ),
    ];
    for (what, opts) in cases {
        assert_invalid(Db::open(&path, opts), what);
        assert!(!path.exists(), "{what}: the database directory was created");
    }
}

#[test]
fn operations_after_close_fail_cleanly() {
    let (_dir, db, ks) = with_keyspace("ks");
    let snap = db.snapshot();
    db.close().expect("close");
    assert!(matches!(ks.put(b"k", b"v2"), Err(Error::Closed)), "put after close");
    assert!(matches!(ks.get(b"k"), Err(Error::Closed)), "get after close");
    assert!(
        matches!(snap.get(&ks, b"k"), Err(Error::Closed)),
        "snapshot get after close"
    );
}

#[test]
fn close_releases_the_directory_even_with_live_handles() {
    // After close(), handles only return Closed; they must not keep the directory
    // locked, or the database cannot be reopened until every handle is dropped.
    let (dir, db, ks) = with_keyspace("ks");
    let snap = db.snapshot();
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen after close while old handles are alive");
    assert_eq!(
        db.keyspace("ks").expect("ks").get(b"k").expect("get"),
        Some(b"v".to_vec())
    );
    assert!(
        matches!(ks.get(b"k"), Err(Error::Closed)),
        "old handle must stay closed"
    );
    drop(snap);
}

/// A schema built or changed in code is checked before anything is durable: before, a
/// nullable primary key or a duplicate field reached the manifest, the catalog refused
/// to load it, and every later open of the database failed.
#[test]
fn a_bad_schema_made_in_code_is_refused_and_the_database_still_opens() {
    use strata::table::schema::Schema;
    let dir = tempfile::tempdir().expect("tempdir");
    let good = || Schema::parse("table t (id u64, v u64) primary key (id)").expect("schema");
    {
        let db = open(dir.path());
        let mut nullable_pk = good();
        nullable_pk.fields[0].nullable = true;
        let mut duplicate = good();
        duplicate.fields[1].name = "id".into();
        let mut no_key = good();
        no_key.primary_key.clear();
        let mut bad_name = good();
        bad_name.name = "a:b".into();
        for (s, what) in [
            (nullable_pk, "nullable primary key"),
            (duplicate, "duplicate field"),
            (no_key, "no primary key"),
            (bad_name, "bad table name"),
        ] {
            let r = db.create_table(s);
            assert!(
                matches!(r, Err(Error::InvalidArgument(_) | Error::SchemaMismatch(_))),
                "{what}: {r:?}"
            );
        }
        assert!(db.list_tables().is_empty());
        db.close().expect("close");
    }
    let db = open(dir.path());
    let t = db.create_table(good()).expect("a good schema");
    t.insert(vec![
        strata::table::value::Value::U64(1),
        strata::table::value::Value::U64(2),
    ])
    .expect("insert");
    drop(t);
    db.close().expect("close");
    open(dir.path()).close().expect("reopen");
}

/// Two point operations on one key at one shared seqno would make one internal key, of
/// which the memtable keeps the first (and a `Put` before a `Delete` whatever their
/// order): refused, writing nothing and taking no seqno. One key in two keyspaces, or
/// at two seqnos, is fine.
#[test]
fn one_key_twice_at_a_shared_seqno_is_refused() {
    let (_dir, db, ks) = with_keyspace("x");
    let other = db.create_keyspace("y").expect("keyspace");
    let seq = db.last_seq();
    for second in ["put", "delete"] {
        let mut b = WriteBatch::new();
        b.put(&ks, b"j", b"1");
        b.put(&ks, b"k", b"1");
        b.share_seq();
        match second {
            "put" => b.put(&ks, b"k", b"2"),
            _ => b.delete(&ks, b"k"),
        }
        match db.write(b) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("share a seqno"), "{m}"),
            r => panic!("a {second} of k at k's put's seqno was taken: {r:?}"),
        }
        assert_eq!(db.last_seq(), seq, "a refused write took a seqno");
        assert_eq!(ks.get(b"j").expect("get"), None, "part of a refused batch was written");
        assert_eq!(ks.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
    let mut b = WriteBatch::new();
    b.put(&ks, b"k", b"2");
    b.share_seq();
    b.put(&other, b"k", b"3");
    b.delete(&ks, b"k");
    db.write(b).expect("one key in two keyspaces, then at the next seqno");
    assert_eq!(ks.get(b"k").expect("get"), None);
    assert_eq!(other.get(b"k").expect("get").as_deref(), Some(&b"3"[..]));
}
