//! `Table::delete_where` beside secondary indexes (deferred invariants 10 to 13): rows
//! vanish from `get` and every index at once, snapshots keep them, a reopen keeps the
//! delete, compaction removes the index entries in both modes, a table without indexes
//! drops whole pages unread, and bad input changes nothing.

mod table_harness;

use std::ops::Bound;

use strata::Db;
use strata::delete_key::TileChoice;
use strata::table::value::Value;
use strata::table::{Row, Table};
use table_harness::{all_rows, check_ok, collect, create_table, s, small_options, tempdir, u};

fn row(id: u64, ts: u64) -> Row {
    vec![
        u(id),
        u(ts),
        s(&format!("name{}", id % 7)),
        Value::Bytes(vec![b'x'; 200]),
    ]
}

fn fill(t: &Table, n: u64) {
    for id in 0..n {
        t.replace(row(id, id % 100)).expect("replace");
    }
}

/// A fresh small database holding one table of `schema`.
fn open_table(schema: &str) -> (tempfile::TempDir, Db, Table) {
    let dir = tempdir();
    let db = Db::open(dir.path(), small_options()).expect("open");
    let t = create_table(&db, schema);
    (dir, db, t)
}

#[test]
fn deleted_rows_leave_every_read_and_their_index_entries_go_in_both_modes() {
    for mode in ["eager", "deferred"] {
        let (dir, db, t) = open_table(&format!(
            "table t (id u64, ts u64, name str, pad bytes) primary key (id) index by_name (name) \
                 index by_ts (ts) delete key (ts) {mode}"
        ));
        fill(&t, 600);
        db.flush().expect("flush");
        db.compact_range().expect("compact");
        // A rewrite of some old rows after the compaction: they survive the delete.
        for id in [5, 17] {
            t.replace(row(id, 500)).expect("replace");
        }
        let before = db.snapshot();
        t.delete_where("ts", u(0)..u(50)).expect("delete_where");
        let want: Vec<Row> = (0..600)
            .map(|id| {
                if id == 5 || id == 17 {
                    row(id, 500)
                } else {
                    row(id, id % 100)
                }
            })
            .filter(|r| r[1].as_u64().is_some_and(|ts| ts >= 50))
            .collect();
        let check_reads = |t: &Table| {
            assert_eq!(all_rows(t), want, "{mode}: primary scan");
            assert_eq!(t.get(&[u(3)]).expect("get"), None, "{mode}: get of a deleted row");
            assert_eq!(t.get(&[u(5)]).expect("get"), Some(row(5, 500)), "{mode}: rewritten row");
            let by_ts = collect(t.select("by_ts").range(Bound::Unbounded, Bound::Excluded(u(50)))).expect("select");
            assert!(by_ts.is_empty(), "{mode}: by_ts returned {} deleted rows", by_ts.len());
            let n = t.select("by_name").eq(vec![s("name3")]).count().expect("count");
            assert_eq!(
                n as usize,
                want.iter().filter(|r| r[2] == s("name3")).count(),
                "{mode}: by_name"
            );
        };
        check_reads(&t);
        let old = t.select("by_ts").at(&before).count().expect("count");
        assert_eq!(old, 600, "{mode}: a snapshot taken before still sees every row");
        check_ok(&db, false);
        drop(before);
        db.close().expect("close");
        let db = Db::open(dir.path(), small_options()).expect("reopen");
        let t = db.table("t").expect("table");
        check_reads(&t);
        // Compaction turns the delete physical, index entries included.
        let r = check_ok(&db, true);
        let tc = &r.tables[0];
        assert_eq!(tc.rows, want.len() as u64);
        for ic in &tc.indexes {
            assert_eq!(
                ic.file_entries, tc.rows,
                "{mode}: index {} after full compaction: {ic:?}",
                ic.name
            );
        }
        check_reads(&t);
        if mode == "eager" {
            assert!(
                t.stats().expect("stats").deferred_deletes_emitted > 0,
                "{mode}: emitted"
            );
        }
    }
}

#[test]
fn a_table_without_indexes_drops_whole_pages_unread() {
    let (_dir, db, t) = open_table("table t (id u64, ts u64, name str, pad bytes) primary key (id) eager");
    t.set_delete_key("ts", TileChoice::Fixed(8)).expect("set_delete_key");
    // Time ordered by id's blocks: most pages of a tile hold one ts range.
    for id in 0..2000u64 {
        t.replace(row(id, id / 20)).expect("replace");
    }
    db.flush().expect("flush");
    db.compact_range().expect("compact");
    t.delete_where("ts", u(0)..u(60)).expect("delete_where");
    let st = db.stats();
    assert!(st.delete_pages_dropped > 0, "no page dropped: {st:?}");
    assert_eq!(t.count().expect("count"), 2000 - 1200);
    assert_eq!(t.get(&[u(0)]).expect("get"), None);
    assert_eq!(t.get(&[u(1500)]).expect("get"), Some(row(1500, 75)));
    check_ok(&db, true);
    assert_eq!(t.count().expect("count"), 800);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_dir, db, t) = open_table(
        "table t (id u64, ts u64, name str, pad bytes) primary key (id) index by_name (name) delete key (ts) eager",
    );
    fill(&t, 50);
    let err = |r: strata::Result<()>| r.expect_err("must fail").to_string();
    assert!(err(t.delete_where("nope", ..)).contains("no field"));
    assert!(err(t.delete_where("id", ..)).contains("not the delete key"));
    assert!(err(t.delete_where("ts", Value::I64(0)..Value::I64(5))).contains("is u64"));
    assert!(err(t.delete_where("ts", u(5)..u(5))).contains("empty"));
    assert!(err(t.delete_where("ts", (Bound::Excluded(u(u64::MAX)), Bound::Unbounded))).contains("empty"));
    assert!(err(t.set_delete_key("id", TileChoice::Auto)).contains("cannot change"));
    assert!(err(t.set_delete_key("ts", TileChoice::Fixed(300))).contains("1..=256"));
    assert_eq!(t.count().expect("count"), 50, "nothing deleted");
    assert_eq!(
        t.delete_key().expect("delete key"),
        Some(("ts".into(), TileChoice::Auto))
    );
    // The tile size of an existing delete key may change.
    t.set_delete_key("ts", TileChoice::Fixed(4)).expect("change h");
    assert_eq!(
        t.delete_key().expect("delete key"),
        Some(("ts".into(), TileChoice::Fixed(4)))
    );
    // Schemas: a delete key is one non-nullable integer field.
    for bad in [
        "table x (id u64, n str) primary key (id) delete key (n)",
        "table x (id u64, n u64 null) primary key (id) delete key (n)",
        "table x (id u64) primary key (id) delete key (zz)",
        "table x (id u64, n u64) primary key (id) delete key (id, n)",
    ] {
        assert!(strata::table::schema::Schema::parse(bad).is_err(), "{bad}");
    }
    let filled = create_table(&db, "table f (id u64, v i64) primary key (id)");
    filled.replace(vec![u(1), Value::I64(1)]).expect("replace");
    assert!(err(filled.set_delete_key("v", TileChoice::Auto)).contains("empty table"));
    let plain = create_table(&db, "table p (id u64, v i64) primary key (id)");
    assert!(err(plain.delete_where("v", ..)).contains("no delete key"));
    // An i64 delete key deletes by signed order.
    plain.set_delete_key("v", TileChoice::Auto).expect("empty table");
    for (id, v) in [(1, -5i64), (2, -1), (3, 0), (4, 7)] {
        plain.replace(vec![u(id), Value::I64(v)]).expect("replace");
    }
    plain
        .delete_where("v", Value::I64(-2)..=Value::I64(0))
        .expect("delete_where");
    let left: Vec<u64> = all_rows(&plain).iter().filter_map(|r| r[0].as_u64()).collect();
    assert_eq!(left, [1, 4]);
    check_ok(&db, false);
}

/// A delete key does not change to another field, even once the table looks empty:
/// the deleted versions still on disk carry the old key's copy, and flushes and
/// compactions of a schema with the new key could not decode them.
#[test]
fn a_delete_key_does_not_change_to_another_field() {
    let (_dir, db, t) = open_table(
        "table t (id u64, ts u64, name str, pad bytes) primary key (id) index by_name (name) delete key (ts) deferred",
    );
    fill(&t, 200);
    t.delete_where("ts", ..).expect("delete_where");
    assert_eq!(t.count().expect("count"), 0);
    let e = t.set_delete_key("id", TileChoice::Auto).expect_err("refused");
    assert!(e.to_string().contains("cannot change"), "{e}");
    assert_eq!(t.delete_key().expect("delete key").map(|k| k.0), Some("ts".into()));
    db.flush().expect("flush");
    db.compact_range().expect("compact");
    db.wait_for_background().expect("background");
    check_ok(&db, true);
}
