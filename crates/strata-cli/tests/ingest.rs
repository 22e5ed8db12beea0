//! Runs the built `strata` binary's bulk-load subcommands (`sst-write`, `ingest`,
//! `table-write`, `table-ingest`) against temporary directories.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_fails, new_db, ok, path_str as s, run};

/// Writes `text` to a new file `name` in `dir` and returns its path.
fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A bulk-load command that must fail with exit 1 and every needle in its error.
fn fails(db: &Path, args: &[&str], needles: &[&str]) {
    assert_fails(&run(db, args), 1, needles);
}

#[test]
fn sst_write_then_ingest_into_a_keyspace() {
    let (tmp, db) = new_db();
    ok(&db, &["put", "b", "old"]);
    let csv = write_file(tmp.path(), "pairs.csv", "key,value\na,1\nb,2\nc,3\n");
    let sst = tmp.path().join("a.sst");
    let out = ok(&db, &["sst-write", s(&sst), s(&csv)]);
    assert!(out.contains("wrote 3 entries"), "{out}");
    let jsonl = write_file(
        tmp.path(),
        "pairs.jsonl",
        "{\"key\":\"z\",\"value\":\"26\"}\n{\"key\":\"x\",\"value\":\"24\"}\n",
    );
    let sst2 = tmp.path().join("b.sst");
    ok(&db, &["sst-write", "--sort", s(&sst2), s(&jsonl)]);
    let out = ok(&db, &["ingest", s(&sst), s(&sst2)]);
    assert!(out.contains("ingested 2 files (5 entries"), "{out}");
    assert_eq!(ok(&db, &["get", "b"]), "2\n");
    assert_eq!(ok(&db, &["scan"]), "a\t1\nb\t2\nc\t3\nx\t24\nz\t26\n");
    ok(&db, &["check"]);
}

#[test]
fn sst_write_refuses_unsorted_input_and_ingest_refuses_overlap() {
    let (tmp, db) = new_db();
    ok(&db, &["put", "k", "v"]);
    let csv = write_file(tmp.path(), "pairs.csv", "key,value\nb,1\na,2\n");
    let sst = tmp.path().join("a.sst");
    fails(
        &db,
        &["sst-write", s(&sst), s(&csv)],
        &["line 3", "sorts before the previous key"],
    );
    assert!(!sst.exists(), "a refused write leaves no file");
    std::fs::write(&csv, "key,value\na,1\na,2\n").unwrap();
    fails(
        &db,
        &["sst-write", "--sort", s(&sst), s(&csv)],
        &["appears twice (lines 2 and 3)"],
    );
    std::fs::write(&csv, "k,v\na,1\n").unwrap();
    fails(&db, &["sst-write", s(&sst), s(&csv)], &["line 1", "key,value"]);
    // Two overlapping files: refused, nothing changes.
    std::fs::write(&csv, "key,value\na,1\nm,2\n").unwrap();
    ok(&db, &["sst-write", s(&sst), s(&csv)]);
    let csv2 = write_file(tmp.path(), "pairs2.csv", "key,value\nc,1\nz,2\n");
    let sst2 = tmp.path().join("b.sst");
    ok(&db, &["sst-write", s(&sst2), s(&csv2)]);
    fails(&db, &["ingest", s(&sst), s(&sst2)], &["overlap"]);
    assert_eq!(ok(&db, &["scan"]), "k\tv\n");
    fails(
        &db,
        &["ingest", "-k", "nope", s(&sst)],
        &["keyspace \"nope\" not found"],
    );
}

#[test]
fn table_write_then_table_ingest_and_check() {
    let (tmp, db) = new_db();
    let schema = "table users (id u64, name str, age i64) primary key (id) index by_age (age) deferred";
    ok(&db, &["create-table", schema]);
    ok(&db, &["insert", "users", r#"{"id": 100, "name": "zed", "age": 9}"#]);
    let csv = write_file(tmp.path(), "rows.csv", "id,name,age\n3,cat,30\n1,ann,31\n2,bob,25\n");
    let out_dir = tmp.path().join("load");
    // Unsorted without --sort: refused with the line.
    fails(
        &db,
        &["table-write", "--table", "users", s(&out_dir), s(&csv)],
        &["line 3", "sorted by primary key"],
    );
    // The failed write left its directory empty: the retry takes it.
    let out = ok(
        &db,
        &[
            "table-write",
            "--table",
            "users",
            "--sort",
            "--no-progress",
            s(&out_dir),
            s(&csv),
        ],
    );
    assert!(out.contains("wrote 3 rows of table users"), "{out}");
    let out = ok(&db, &["table-ingest", "users", s(&out_dir)]);
    assert!(out.contains("ingested 3 rows into table users (2 files"), "{out}");
    let sel = ok(&db, &["select", "users", "--index", "by_age", "--format", "tsv"]);
    assert_eq!(sel, "id\tname\tage\n100\tzed\t9\n2\tbob\t25\n3\tcat\t30\n1\tann\t31\n");
    ok(&db, &["check"]);
    ok(&db, &["check", "--compact"]);
    // The same rows again: insert semantics refuse them.
    fails(&db, &["table-ingest", "users", s(&out_dir)], &["already has a row"]);
    // Files for another schema.
    let other = tmp.path().join("other");
    let jsonl = write_file(tmp.path(), "rows.jsonl", "{\"id\": 7, \"name\": \"x\"}\n");
    ok(
        &db,
        &[
            "table-write",
            "--schema",
            "table users (id u64, name str) primary key (id)",
            s(&other),
            s(&jsonl),
        ],
    );
    let r = run(&db, &["table-ingest", "users", s(&other)]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("schema mismatch"), "{}", r.stderr);
    assert_eq!(ok(&db, &["select", "users", "--count"]), "4\n");
}
