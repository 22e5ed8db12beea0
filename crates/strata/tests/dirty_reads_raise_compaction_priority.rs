//! Selects that meet many dirty entries make the table's pending purges urgent: the
//! primary's old versions are compacted down (emitting deferred deletes) and the
//! secondaries' purge entries follow, so later selects meet no dirty entry, with no
//! deadline configured and no size trigger due.

use std::time::Duration;

use strata::table::Table;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, Options};

fn open(dir: &std::path::Path, opts: Options) -> (Db, Table) {
    let db = Db::open(dir, opts).unwrap();
    let t = db
        .create_table(Schema::parse("table t (id u64, a u64) primary key (id) index by_a (a) deferred").unwrap())
        .unwrap();
    (db, t)
}

/// Replaces rows `0..rows` with new index values, blind, in one transaction.
fn replace_all(t: &Table, rows: u64, round: u64) {
    let mut tx = t.transaction();
    for id in 0..rows {
        tx.replace(vec![Value::U64(id), Value::U64(id * 3 + round)]);
    }
    tx.commit().unwrap();
}

fn dirty_per_select(t: &Table) -> (u64, u64) {
    let before = t.stats().unwrap().dirty_hits_skipped;
    let n = t.select("by_a").count().unwrap();
    (n, t.stats().unwrap().dirty_hits_skipped - before)
}

/// Selects every `pause` until one meets no dirty entry (at most `tries` times), each
/// returning all `rows`; the dirty entries the last one met.
fn select_until_clean(db: &Db, t: &Table, rows: u64, tries: usize, pause: Duration) -> u64 {
    let mut last = u64::MAX;
    for _ in 0..tries {
        db.wait_for_background().unwrap();
        std::thread::sleep(pause);
        let (n, dirty) = dirty_per_select(t);
        assert_eq!(n, rows);
        last = dirty;
        if dirty == 0 {
            break;
        }
    }
    last
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
    let (db, t) = open(dir.path(), opts);
    for round in 0..3u64 {
        replace_all(&t, 2000, round);
        db.flush().unwrap();
    }
    db.wait_for_background().unwrap();
    let (rows, first) = dirty_per_select(&t);
    assert_eq!(rows, 2000);
    assert!(first >= 2000, "expected dirty entries before any purge, got {first}");
    let last = select_until_clean(&db, &t, 2000, 50, Duration::from_millis(20));
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
    let (db, t) = open(dir.path(), opts);
    replace_all(&t, 5000, 0);
    db.flush().unwrap();
    replace_all(&t, 5000, 1);
    db.wait_for_background().unwrap();
    let flushes = db.stats().flushes;
    let (rows, first) = dirty_per_select(&t);
    assert_eq!(rows, 5000);
    assert_eq!(first, 5000, "every version on disk is dirty before any purge");
    let last = select_until_clean(&db, &t, 5000, 100, Duration::from_millis(50));
    assert_eq!(last, 0, "dirty entries still met: {}", t.stats().unwrap());
    assert!(
        db.stats().flushes > flushes,
        "the memtable was flushed for the dirty reads"
    );
}
