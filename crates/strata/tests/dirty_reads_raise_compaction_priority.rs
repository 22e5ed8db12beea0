//! Selects that meet many dirty entries make the table's pending purges urgent: the
//! primary's old versions are compacted down (emitting deferred deletes) and the
//! secondaries' purge entries follow, so later selects meet no dirty entry, with no
//! deadline configured and no size trigger due.

use std::time::Duration;

use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, Options};

fn dirty_per_select(t: &strata::table::Table) -> (u64, u64) {
    let before = t.stats().unwrap().dirty_hits_skipped;
    let n = t.select("by_a").count().unwrap();
    (n, t.stats().unwrap().dirty_hits_skipped - before)
}

#[test]
fn dirty_reads_push_pending_purges_down() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        memtable_budget: 256 << 10,
        target_file_size: 64 << 10,
        l0_compaction_trigger: 8,
        l0_stall_trigger: 30,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db
        .create_table(Schema::parse("table t (id u64, a u64) primary key (id) index by_a (a) deferred").unwrap())
        .unwrap();
    for round in 0..3u64 {
        let mut tx = t.transaction();
        for id in 0..2000u64 {
            tx.replace(vec![Value::U64(id), Value::U64(id * 3 + round)]);
        }
        tx.commit().unwrap();
        db.flush().unwrap();
    }
    db.wait_for_background().unwrap();
    let (rows, first) = dirty_per_select(&t);
    assert_eq!(rows, 2000);
    assert!(first >= 2000, "expected dirty entries before any purge, got {first}");
    let mut last = first;
    for _ in 0..50 {
        db.wait_for_background().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (rows, dirty) = dirty_per_select(&t);
        assert_eq!(rows, 2000);
        last = dirty;
        if dirty == 0 {
            break;
        }
    }
    assert_eq!(
        last,
        0,
        "dirty entries still met after the urgency loop: {}",
        t.stats().unwrap()
    );
}

#[test]
fn dirty_reads_flush_the_memtable_holding_the_newer_versions() {
    // The old versions are on disk, the blind writes that made their index entries
    // dirty only in the memtable: no compaction can purge anything until it is
    // flushed, and with no deadline and a memtable far from full nothing else would.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        memtable_budget: 4 << 20,
        target_file_size: 256 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db
        .create_table(Schema::parse("table t (id u64, a u64) primary key (id) index by_a (a) deferred").unwrap())
        .unwrap();
    let write = |round: u64| {
        let mut tx = t.transaction();
        for id in 0..5000u64 {
            tx.replace(vec![Value::U64(id), Value::U64(id * 3 + round)]);
        }
        tx.commit().unwrap();
    };
    write(0);
    db.flush().unwrap();
    write(1);
    db.wait_for_background().unwrap();
    let flushes = db.stats().flushes;
    let (rows, first) = dirty_per_select(&t);
    assert_eq!(rows, 5000);
    assert_eq!(first, 5000, "every version on disk is dirty before any purge");
    let mut last = first;
    for _ in 0..100 {
        db.wait_for_background().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let (rows, dirty) = dirty_per_select(&t);
        assert_eq!(rows, 5000);
        last = dirty;
        if dirty == 0 {
            break;
        }
    }
    assert_eq!(last, 0, "dirty entries still met: {}", t.stats().unwrap());
    assert!(
        db.stats().flushes > flushes,
        "the memtable was flushed for the dirty reads"
    );
}
