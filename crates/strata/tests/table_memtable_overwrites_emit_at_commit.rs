//! docs/design/deferred.md, "Rules that keep it correct": "If the overwritten row is
//! already in the memtable, emit the secondary deletes at commit: cheap, and it keeps
//! dirty entries from piling up."
//!
//! A deferred table whose rows are overwritten or deleted while their previous version
//! is still in the memtable must not leave dirty entries for selects to skip: the
//! secondary deletes for those versions go into the same batch (no I/O: the old row is
//! read from the memtable).

mod table_harness;

use strata::Db;
use strata::table::schema::Schema;
use strata::table::value::Value;
use table_harness::{check_ok, collect, small_options, u};

#[test]
fn overwrites_of_memtable_rows_leave_no_dirty_entries() {
    let dir = table_harness::tempdir();
    let opts = strata::Options {
        memtable_budget: 8 << 20,
        ..small_options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let t = db
        .create_table(
            Schema::parse("table t (id u64, a u64, b u64) primary key (id) index by_a (a) index by_b (b) deferred")
                .expect("schema"),
        )
        .expect("table");
    // The index is being read: that is when purging at commit pays.
    assert!(collect(t.select("by_a")).expect("select").is_empty());
    // Nothing is flushed: every overwritten version is in the memtable.
    for v in 0..100 {
        for id in 0..10 {
            t.replace(vec![u(id), u(v * 10 + id), u(v)]).expect("replace");
        }
    }
    for id in 5..10 {
        t.delete(&[u(id)]).expect("delete");
    }
    assert_eq!(db.stats().flushes, 0, "the test needs everything in the memtable");
    let rows = collect(t.select("by_a")).expect("select");
    assert_eq!(rows.len(), 5);
    let rows = collect(t.select("by_b").eq(vec![u(99)])).expect("select");
    assert_eq!(rows.len(), 5);
    let ts = t.stats().expect("stats");
    assert_eq!(ts.hidden_reads, 0, "{ts}");
    // Every write but each row's first found its old row in the memtable.
    assert_eq!(ts.commit_purges, 1000 - 10 + 5, "{ts}");
    assert_eq!(
        ts.dirty_hits_skipped, 0,
        "selects skipped {} dirty entries of versions that died in the memtable:\n{ts}",
        ts.dirty_hits_skipped
    );
    check_ok(&db, true);
    assert_eq!(collect(t.select("by_b")).expect("select"), {
        (0..5)
            .map(|id| vec![u(id), u(990 + id), u(99)])
            .collect::<Vec<Vec<Value>>>()
    });
}

#[test]
fn a_table_nobody_reads_through_its_indexes_stays_blind() {
    let (_dir, db) = table_harness::open_small();
    let t = db
        .create_table(
            Schema::parse("table t (id u64, a u64) primary key (id) index by_a (a) deferred").expect("schema"),
        )
        .expect("table");
    for v in 0..20 {
        t.replace(vec![u(1), u(v)]).expect("replace");
    }
    let ts = t.stats().expect("stats");
    assert_eq!(ts.commit_purges, 0, "{ts}");
    // The old versions' entries are dirty until the flush purges them, and skipped.
    assert_eq!(collect(t.select("by_a")).expect("select"), vec![vec![u(1), u(19)]]);
    assert_eq!(t.stats().expect("stats").dirty_hits_skipped, 19);
    // Now that the index is read, the next overwrite purges at commit.
    t.replace(vec![u(1), u(100)]).expect("replace");
    assert_eq!(t.stats().expect("stats").commit_purges, 1);
}
