//! Runs the built `strata` binary on partitioned databases: `create-table --partitions`,
//! row commands and `select` routed and merged, `table-write --partition I --of N` and
//! `table-ingest --partition I`, and commands that need one database refusing a
//! partitioned one.

mod common;

use std::path::Path;

use common::{assert_fails, new_db, ok, path_str as s, run};

const SCHEMA: &str = "table users (id u64, name str, age i64) primary key (id) index by_age (age) deferred";

fn ids(jsonl: &str) -> Vec<u64> {
    jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_u64().unwrap()
        })
        .collect()
}

fn load_rows(db: &Path, n: u64) {
    for id in 1..=n {
        ok(
            db,
            &[
                "insert",
                "users",
                &format!(r#"{{"id": {id}, "name": "u{id}", "age": {}}}"#, 20 + id % 4),
            ],
        );
    }
}

#[test]
fn rows_and_selects_on_a_partitioned_table() {
    let (_tmp, db) = new_db();
    ok(&db, &["create-table", "--partitions", "3", SCHEMA]);
    assert!(db.join("PARTITIONS").exists() && db.join("p002").is_dir());
    load_rows(&db, 12);
    assert_eq!(ok(&db, &["tables"]), "users\n");
    let row = ok(&db, &["row-get", "users", "5"]);
    assert!(row.contains(r#""name":"u5""#), "{row}");
    ok(&db, &["replace", "users", r#"{"id": 5, "name": "five", "age": 99}"#]);
    ok(&db, &["update", "users", "6", "--set", "age=99"]);
    ok(&db, &["row-delete", "users", "7"]);
    assert_fails(&run(&db, &["row-get", "users", "7"]), 1, &["not found"]);
    assert_fails(
        &run(&db, &["insert", "users", r#"{"id": 1, "name": "again", "age": 1}"#]),
        1,
        &["constraint"],
    );
    // age 21: ids 1, 5 (moved), 9; 13 absent.
    assert_eq!(
        ids(&ok(&db, &["select", "users", "--index", "by_age", "--eq", "21"])),
        [1, 9]
    );
    assert_eq!(
        ids(&ok(&db, &["select", "users", "--index", "by_age", "--eq", "99"])),
        [5, 6]
    );
    let out = ok(
        &db,
        &[
            "select",
            "users",
            "--index",
            "by_age",
            "--from",
            "22",
            "--reverse",
            "--limit",
            "3",
        ],
    );
    assert_eq!(ids(&out), [6, 5, 11]);
    assert_eq!(ok(&db, &["select", "users", "--count"]), "11\n");
    let all = ids(&ok(&db, &["select", "users"]));
    assert_eq!(all, [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]);
    let stats = ok(&db, &["table-stats", "users", "--json"]);
    assert!(stats.contains(r#""name":"users""#), "{stats}");

    // Commands that work on one database refuse a partitioned one, naming the way out.
    assert_fails(&run(&db, &["check"]), 1, &["is a partitioned database", "p000"]);
    assert_fails(&run(&db, &["get", "k"]), 1, &["is a partitioned database"]);
    assert_fails(
        &run(
            &db,
            &["create-table", "--partitions", "4", "table t (id u64) primary key (id)"],
        ),
        1,
        &["holds 3 partitions, not 4"],
    );
    assert_fails(
        &run(
            &db,
            &["create-table", "--partitions", "0", "table t (id u64) primary key (id)"],
        ),
        1,
        &["partition count 0"],
    );
    // One partition is an ordinary database.
    let p0 = db.join("p000");
    let n0: u64 = ok(&p0, &["select", "users", "--count"]).trim().parse().unwrap();
    assert!(n0 < 11);
}

#[test]
fn table_write_per_partition_then_ingest_matches_row_by_row() {
    let (tmp, db) = new_db();
    ok(&db, &["create-table", "--partitions", "3", SCHEMA]);
    let loaded = tmp.path().join("loaded");
    ok(&loaded, &["create-table", "--partitions", "3", SCHEMA]);
    load_rows(&loaded, 24);
    let csv = tmp.path().join("rows.csv");
    let mut text = String::from("id,name,age\n");
    for id in 1..=24u64 {
        text.push_str(&format!("{id},u{id},{}\n", 20 + id % 4));
    }
    std::fs::write(&csv, text).unwrap();
    let mut written = 0u64;
    for i in 0..3 {
        let out_dir = tmp.path().join(format!("files{i}"));
        let (i, out_dir) = (i.to_string(), out_dir);
        let out = ok(
            &db,
            &[
                "table-write",
                "--table",
                "users",
                "--partition",
                &i,
                "--of",
                "3",
                s(&out_dir),
                s(&csv),
            ],
        );
        let rows: u64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(
            out.contains(&format!("skipped {} rows of other partitions", 24 - rows)),
            "{out}"
        );
        let before = written;
        written += rows;
        if i == "1" {
            // Into the wrong partition: refused, nothing changed.
            assert_fails(
                &run(&db, &["table-ingest", "users", s(&out_dir), "--partition", "2"]),
                1,
                &["written for partition 1 of 3", "not partition 2"],
            );
            assert_fails(&run(&db, &["table-ingest", "users", s(&out_dir)]), 2, &["--partition"]);
            assert_eq!(ok(&db, &["select", "users", "--count"]), format!("{before}\n"));
        }
        let out = ok(&db, &["table-ingest", "users", s(&out_dir), "--partition", &i]);
        assert!(out.contains(&format!("ingested {rows} rows")), "{out}");
    }
    assert_eq!(written, 24);
    for args in [
        &["select", "users", "--index", "by_age", "--eq", "22"][..],
        &[
            "select",
            "users",
            "--index",
            "by_age",
            "--from",
            "21",
            "--to",
            "23",
            "--reverse",
        ][..],
        &["select", "users"][..],
    ] {
        assert_eq!(ok(&db, args), ok(&loaded, args), "{args:?}");
    }
}

#[test]
fn a_serving_node_opens_its_partitions_only() {
    let (_tmp, db) = new_db();
    let node = |serve: &str, args: &[&str]| {
        let mut all = vec!["--serve", serve];
        all.extend_from_slice(args);
        run(&db, &all)
    };
    let r = node("1,3", &["create-table", "--partitions", "4", SCHEMA]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let made = |i: usize| db.join(format!("p{i:03}")).exists();
    assert_eq!((made(0), made(1), made(2), made(3)), (false, true, false, true));

    // Node A (partitions 1 and 3) takes the rows that route there and refuses the rest.
    let insert = |serve: &str, id: u64| {
        node(
            serve,
            &[
                "insert",
                "users",
                &format!(r#"{{"id": {id}, "name": "u{id}", "age": 30}}"#),
            ],
        )
    };
    let mut refused = Vec::new();
    for id in 1..=24 {
        let r = insert("1,3", id);
        if r.code != Some(0) {
            assert_fails(&r, 1, &["not served"]);
            refused.push(id);
        }
    }
    assert!(!refused.is_empty() && refused.len() < 24, "{refused:?}");
    let mut served: Vec<u64> = (1..=24).filter(|id| !refused.contains(id)).collect();
    let selected = |serve: &str| ids(&node(serve, &["select", "users", "--index", "by_age", "--eq", "30"]).stdout);
    assert_eq!(selected("1,3").len(), served.len());
    assert!(!made(0) && !made(2), "a serving node made another's partition");

    // Without --serve the directory is incomplete: refused, and nothing is created.
    assert_fails(
        &run(&db, &["select", "users"]),
        1,
        &["lacks partitions [0, 2]", "serving"],
    );
    assert!(!made(0) && !made(2));

    // Node B creates its own partitions and takes exactly the rows A refused.
    assert_eq!(node("0,2", &["create-table", SCHEMA]).code, Some(0));
    for &id in &refused {
        let r = insert("0,2", id);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
    assert_eq!(insert("0,2", served[0]).code, Some(1), "a row of node A accepted by B");
    assert_eq!(selected("0,2"), refused);

    // The whole directory now holds every row once, in index order (ties by id).
    served.extend(&refused);
    served.sort();
    assert_eq!(
        ids(&ok(&db, &["select", "users", "--index", "by_age", "--eq", "30"])),
        served
    );
    for i in 0..4 {
        ok(&db.join(format!("p{i:03}")), &["check"]);
    }

    // Bad serving lists, and --serve where no partitioned table is opened.
    assert_fails(&node("4", &["tables"]), 1, &["partition 4"]);
    assert_fails(&node("1", &["check"]), 2, &["--serve is for the table commands"]);
    assert_fails(&node("1", &["keyspaces"]), 2, &["--serve is for the table commands"]);
    let (_tmp2, plain) = new_db();
    ok(&plain, &["create-table", SCHEMA]);
    assert_fails(
        &run(&plain, &["--serve", "0", "tables"]),
        1,
        &["not a partitioned database"],
    );
}
