//! An equality select through a secondary index asks the index's filters first
//! (`IndexLayout::chosen_filter_key`): a value that no file and no memtable holds is answered
//! without a cursor, so no data block is read. A value that is there is found, whether it
//! sits in the files or only in the memtable, in each maintenance mode and after a
//! reopen, for fixed-width (`u64`, nullable `i64`) and string leading fields; `NULL`,
//! which the filters cannot tell apart, is never filtered. Among the runs a value's
//! range meets, those whose filters rule it out are not read.

mod table_harness;

use strata::Db;
use strata::table::value::Value;
use table_harness::{MODES, create_table, i, in_each_mode, s, small_options, u};

const ROWS: u64 = 2000;

/// An index's value for a number.
type ValueOf = fn(u64) -> Value;

fn row(id: u64) -> Vec<Value> {
    let b = if id.is_multiple_of(5) {
        Value::Null
    } else {
        i(id as i64 * 2)
    };
    vec![u(id), u(id * 2), b, s(&format!("s{}", id * 2))]
}

/// Data blocks looked up since open.
fn blocks(db: &Db) -> u64 {
    let st = db.stats();
    st.block_cache_hits + st.block_cache_misses
}

#[test]
fn an_absent_value_is_answered_from_the_filters() {
    let schema = |mode: &str| {
        format!(
            "table t (id u64, a u64, b i64 null, s str) primary key (id) index by_a (a) index by_b (b) index by_s (s) {mode}"
        )
    };
    in_each_mode(
        |db, mode| create_table(db, &schema(mode)),
        |mode, db, t| {
            for id in 0..ROWS {
                t.insert(row(id)).expect("insert");
            }
            db.flush().expect("flush");
            db.wait_for_background().expect("idle");
            let count = |ix: &str, v: Value| t.select(ix).eq(vec![v]).count().expect("select");
            // Stored values are even: odd ones are absent.
            let fields: [(&str, ValueOf); 3] = [
                ("by_a", |x| u(x)),
                ("by_b", |x| i(x as i64)),
                ("by_s", |x| s(&format!("s{x}"))),
            ];
            for (ix, value) in fields {
                let before = blocks(db);
                for k in 0..200 {
                    assert_eq!(count(ix, value(2 * k + 1)), 0, "{mode} {ix}");
                }
                let absent = blocks(db) - before;
                let before = blocks(db);
                // Rows whose id is a multiple of 5 have a null `b`.
                for k in (1..ROWS).filter(|k| !k.is_multiple_of(5)).take(200) {
                    assert_eq!(count(ix, value(2 * k)), 1, "{mode} {ix}");
                }
                let present = blocks(db) - before;
                // A false positive of a filter reads a block: a few of 200 at most.
                assert!(absent <= 20, "{mode} {ix}: {absent} blocks read for 200 absent values");
                assert!(
                    present >= 200,
                    "{mode} {ix}: {present} blocks read for 200 present values"
                );
            }
            // NULL is never filtered out.
            assert_eq!(count("by_b", Value::Null), ROWS / 5, "{mode}");
            // A value only in the memtable is found.
            t.insert(vec![u(ROWS), u(7), i(7), s("s7")]).expect("insert");
            for (ix, v) in [("by_a", u(7)), ("by_b", i(7)), ("by_s", s("s7"))] {
                assert_eq!(count(ix, v), 1, "{mode} {ix} in the memtable");
            }
        },
    );
}

#[test]
fn values_are_found_after_a_reopen() {
    let dir = table_harness::tempdir();
    {
        let db = Db::open(dir.path(), small_options()).expect("open");
        let t = create_table(
            &db,
            "table t (id u64, a u64, b i64 null, s str) primary key (id) index by_a (a) deferred",
        );
        for id in 0..ROWS {
            t.insert(row(id)).expect("insert");
        }
        db.flush().expect("flush");
        t.insert(vec![u(ROWS), u(7), i(7), s("s7")]).expect("insert");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    let t = db.table("t").expect("table");
    for (v, n) in [(7, 1), (8, 1), (9, 0), (2 * ROWS - 2, 1), (2 * ROWS, 0)] {
        assert_eq!(t.select("by_a").eq(vec![u(v)]).count().expect("select"), n, "a = {v}");
    }
}

/// An index created on a table that already has rows gets the same filters.
#[test]
fn an_index_built_later_filters_too() {
    let dir = table_harness::tempdir();
    let db = Db::open(dir.path(), small_options()).expect("open");
    let t = create_table(&db, "table t (id u64, a u64, b i64 null, s str) primary key (id) eager");
    for id in 0..ROWS {
        t.insert(row(id)).expect("insert");
    }
    t.create_index(strata::table::schema::IndexDef::new("by_a", &["a"], false))
        .expect("create index");
    db.flush().expect("flush");
    db.wait_for_background().expect("idle");
    let before = blocks(&db);
    for k in 0..200 {
        assert_eq!(t.select("by_a").eq(vec![u(2 * k + 1)]).count().expect("select"), 0);
    }
    let absent = blocks(&db) - before;
    assert!(absent <= 20, "{absent} blocks read for 200 absent values");
    for k in 1..200 {
        assert_eq!(t.select("by_a").eq(vec![u(2 * k)]).count().expect("select"), 1);
    }
}

/// Three runs of the index span the same key range, each holding a third of the values:
/// an equality select reads the one run holding its value, not the other two.
#[test]
fn a_run_without_the_value_is_not_read() {
    for mode in MODES {
        let dir = table_harness::tempdir();
        let opts = strata::Options {
            memtable_budget: 64 << 20,
            l0_compaction_trigger: 100,
            l0_stall_trigger: 200,
            ..small_options()
        };
        let db = Db::open(dir.path(), opts).expect("open");
        let t = create_table(
            &db,
            &format!("table t (id u64, a u64, b i64 null, s str) primary key (id) index by_a (a) {mode}"),
        );
        for run in 0..3 {
            for id in (0..ROWS).filter(|id| id % 3 == run) {
                t.insert(row(id)).expect("insert");
            }
            db.flush().expect("flush");
        }
        db.wait_for_background().expect("idle");
        let before = blocks(&db);
        for id in (0..ROWS).step_by(3).take(200) {
            assert_eq!(
                t.select("by_a").eq(vec![u(2 * id)]).count().expect("select"),
                1,
                "{mode}"
            );
        }
        let read = blocks(&db) - before;
        // One index block and one primary block a select, and a few false positives;
        // reading every run would take four.
        assert!(read <= 480, "{mode}: {read} blocks read for 200 selects");
        for id in [1, 2, ROWS - 1] {
            assert_eq!(
                t.select("by_a").eq(vec![u(2 * id)]).count().expect("select"),
                1,
                "{mode}"
            );
        }
    }
}

/// A range's unbounded lower end takes the NULLs of a nullable field (they order
/// first); `Excluded(Null)` leaves them out, as SQL's `x < 30` would.
#[test]
fn a_range_from_excluded_null_leaves_the_nulls_out() {
    use std::ops::Bound::{Excluded, Unbounded};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small_options()).expect("open");
    let t = create_table(
        &db,
        "table t (id u64, age i64 null) primary key (id) index by_age (age)",
    );
    t.insert(vec![u(1), Value::Null]).expect("insert");
    t.insert(vec![u(2), i(5)]).expect("insert");
    t.insert(vec![u(3), i(40)]).expect("insert");
    let ids = |lower| -> Vec<Value> {
        t.select("by_age")
            .range(lower, Excluded(i(30)))
            .rows()
            .expect("select")
            .map(|r| r.expect("row")[0].clone())
            .collect()
    };
    assert_eq!(ids(Unbounded), vec![u(1), u(2)]);
    assert_eq!(ids(Excluded(Value::Null)), vec![u(2)]);
}
