//! `strata multimap ...` against temporary directories: put, paged get, delete, and
//! loading CSV and JSON Lines into one database or hash partitions.

mod common;

use std::path::Path;

use common::{assert_fails, new_db, ok, path_str, run};

fn fails(db: &Path, args: &[&str], code: i32, needle: &str) {
    assert_fails(&run(db, args), code, &[needle]);
}

/// `mm load NAME FILE --key-field KEY --value-field VALUE` followed by `extra`.
fn load_args<'a>(name: &'a str, file: &'a str, key: &'a str, value: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["mm", "load", name, file, "--key-field", key, "--value-field", value];
    args.extend_from_slice(extra);
    args
}

#[test]
fn put_get_pages_and_delete() {
    let (_dir, db) = new_db();
    ok(&db, &["multimap", "put", "by_author", "alice", "c3", "c1", "c2", "c4"]);
    assert_eq!(ok(&db, &["mm", "get", "by_author", "alice"]), "c1\nc2\nc3\nc4\n");
    // Pages of two: the last value of a page starts the next.
    assert_eq!(
        ok(&db, &["mm", "get", "by_author", "alice", "--limit", "2"]),
        "c1\nc2\n"
    );
    assert_eq!(
        ok(
            &db,
            &["mm", "get", "by_author", "alice", "--limit", "2", "--after", "c2"]
        ),
        "c3\nc4\n"
    );
    assert_eq!(
        ok(
            &db,
            &[
                "mm",
                "get",
                "by_author",
                "alice",
                "--reverse",
                "--from",
                "c3",
                "--limit",
                "2"
            ]
        ),
        "c3\nc2\n"
    );
    assert_eq!(ok(&db, &["mm", "get", "by_author", "alice", "--count"]), "4\n");
    ok(&db, &["mm", "del", "by_author", "alice", "c2"]);
    assert_eq!(ok(&db, &["mm", "get", "by_author", "alice"]), "c1\nc3\nc4\n");
    ok(&db, &["mm", "del", "by_author", "alice", "--all"]);
    assert_eq!(ok(&db, &["mm", "get", "by_author", "alice", "--count"]), "0\n");
    fails(&db, &["mm", "del", "by_author", "alice"], 2, "--all");
    fails(&db, &["mm", "put", "by_author", "", "v"], 2, "key is empty");
    fails(&db, &["mm", "get", "nosuch", "alice"], 1, "not found");
    // Hex keys and values.
    ok(&db, &["--hex", "mm", "put", "bin", "00ff", "0001", "00"]);
    assert_eq!(ok(&db, &["--hex", "mm", "get", "bin", "00ff"]), "00\n0001\n");
}

#[test]
fn load_csv_into_partitions_and_jsonl_into_one_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("comments.csv");
    let mut text = String::from("id,author,subreddit\n");
    for i in 0..3000 {
        text.push_str(&format!("{i:07},author{},sub{}\n", i % 10, i % 3));
    }
    std::fs::write(&csv, text).expect("write csv");
    let parts = dir.path().join("parts");
    let csv_s = path_str(&csv);
    let out = ok(
        &parts,
        &load_args(
            "by_author",
            csv_s,
            "author",
            "id",
            &["--partitions", "3", "--threads", "2"],
        ),
    );
    assert_eq!(out, "loaded 3000 pairs into multimap by_author (3 partitions)\n");
    assert!(parts.join("PARTITIONS").exists() && parts.join("p002").is_dir());
    assert_eq!(ok(&parts, &["mm", "get", "by_author", "author7", "--count"]), "300\n");
    assert_eq!(
        ok(&parts, &["mm", "get", "by_author", "author7", "--limit", "2"]),
        "0000007\n0000017\n"
    );
    // A second load into the same directory keeps its partition count.
    fails(
        &parts,
        &load_args("x", csv_s, "author", "id", &["--partitions", "4"]),
        1,
        "holds 3 partitions",
    );
    fails(
        &parts,
        &["mm", "load", "x", csv_s, "--partitions", "0"],
        2,
        "partition count 0",
    );

    let jsonl = dir.path().join("c.jsonl");
    std::fs::write(&jsonl, "{\"k\":\"sub1\",\"v\":42}\n\n{\"k\":\"sub1\",\"v\":\"x\"}\n").expect("write");
    let db = dir.path().join("db");
    let out = ok(&db, &load_args("by_sub", path_str(&jsonl), "k", "v", &[]));
    assert_eq!(out, "loaded 2 pairs into multimap by_sub (1 partition)\n");
    assert_eq!(ok(&db, &["mm", "get", "by_sub", "sub1"]), "42\nx\n");
}

#[test]
fn a_bad_line_loads_nothing() {
    let (dir, db) = new_db();
    ok(&db, &["mm", "put", "m", "k", "before"]);
    let cases = [
        (
            "bad.jsonl",
            "{\"key\":\"k\",\"value\":\"1\"}\n{\"key\":\"\",\"value\":\"2\"}\n",
            "line 2: multimap key is empty",
        ),
        (
            "bad.jsonl",
            "{\"key\":\"k\",\"value\":\"1\"}\nnot json\n",
            "line 2: not JSON",
        ),
        ("bad.csv", "key,other\nk,1\n", "no column \"value\""),
    ];
    for (name, text, needle) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("write");
        fails(&db, &["mm", "load", "m", path_str(&file)], 1, needle);
    }
    assert_eq!(ok(&db, &["mm", "get", "m", "k"]), "before\n");
}

#[test]
fn a_multimap_the_cli_creates_filters_by_key_and_an_existing_one_keeps_its_setting() {
    let (_dir, db) = new_db();
    ok(&db, &["create-keyspace", "plain"]);
    ok(&db, &["mm", "put", "plain", "k", "v"]);
    ok(&db, &["mm", "put", "by_author", "alice", "c1"]);
    let d = strata::Db::open(&db, strata::Options::default()).expect("open");
    let key = |name: &str| d.keyspace(name).expect("keyspace").filter_key().expect("filter key");
    assert_eq!(key("by_author"), strata::sstable::FilterKey::KeyPrefix);
    assert_eq!(key("plain"), strata::sstable::FilterKey::Whole);
}
