//! While a deferred table's indexes are being read, blind writes whose old row is on
//! disk are purged from the secondary indexes by the purge thread shortly after commit:
//! selects stop meeting their dirty entries long before a compaction would drop the old
//! versions. The writes stay blind, and snapshots older than a write keep seeing the old
//! row through the index.

mod table_harness;

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::Table;
use strata::table::schema::Schema;
use strata::{Db, Options};
use table_harness::{check_ok, collect, small_options, u};

/// Large memtables and no size-triggered compaction: old versions stay on disk,
/// undisturbed, unless the purge thread deals with them.
fn options() -> Options {
    Options {
        memtable_budget: 8 << 20,
        l0_compaction_trigger: 100,
        l0_stall_trigger: 200,
        ..small_options()
    }
}

fn table(db: &Db) -> Table {
    db.create_table(
        Schema::parse("table t (id u64, a u64, b u64) primary key (id) index by_a (a) index by_b (b) deferred")
            .expect("schema"),
    )
    .expect("table")
}

/// Rows `0..n` as `(id, a = id, b = 0)`, flushed to disk.
fn load(db: &Db, t: &Table, n: u64) {
    let mut tx = t.transaction();
    for id in 0..n {
        tx.insert(vec![u(id), u(id), u(0)]);
    }
    tx.commit().expect("load");
    db.flush().expect("flush");
}

/// Replaces rows `ids` with `(id, a(id), b)` in one transaction.
/// A database with `options()` in a fresh directory, its table holding `load`'s `n` rows.
fn loaded(n: u64) -> (tempfile::TempDir, Db, Table) {
    let dir = table_harness::tempdir();
    let db = Db::open(dir.path(), options()).expect("open");
    let t = table(&db);
    load(&db, &t, n);
    (dir, db, t)
}

fn replace_rows(t: &Table, ids: std::ops::Range<u64>, a: impl Fn(u64) -> u64, b: u64) {
    let mut tx = t.transaction();
    for id in ids {
        tx.replace(vec![u(id), u(a(id)), u(b)]);
    }
    tx.commit().expect("replace");
}

/// Waits until the purge thread has purged `n` writes of `t`.
fn wait_for_purges(t: &Table, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = t.stats().expect("stats");
        if s.background_purges >= n {
            assert_eq!(s.background_purges, n, "{s}");
            return;
        }
        assert!(Instant::now() < deadline, "purges did not happen:\n{s}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn dirty(t: &Table) -> u64 {
    t.stats().expect("stats").dirty_hits_skipped
}

#[test]
fn blind_writes_of_rows_on_disk_leave_no_dirty_entries_once_purged() {
    let (dir, db, t) = loaded(200);
    // The indexes are read: purging pays from now on.
    assert_eq!(collect(t.select("by_a").eq(vec![u(7)])).expect("select").len(), 1);
    let mut tx = t.transaction();
    for id in 0..100 {
        tx.replace(vec![u(id), u(1000 + id), u(0)]); // by_a changes, by_b does not
    }
    for id in 100..150 {
        tx.delete(vec![u(id)]);
    }
    tx.commit().expect("churn");
    let s = t.stats().expect("stats");
    assert_eq!(
        (s.hidden_reads, s.commit_purges),
        (0, 0),
        "the writes must stay blind:\n{s}"
    );
    wait_for_purges(&t, 150);
    assert_eq!(t.stats().expect("stats").purges_dropped, 0);

    let before = dirty(&t);
    let by_a = collect(t.select("by_a")).expect("select");
    let want: Vec<_> = (150..200)
        .map(|id| vec![u(id), u(id), u(0)])
        .chain((0..100).map(|id| vec![u(id), u(1000 + id), u(0)]))
        .collect();
    assert_eq!(by_a, want);
    assert_eq!(collect(t.select("by_b").eq(vec![u(0)])).expect("select").len(), 150);
    assert_eq!(
        dirty(&t),
        before,
        "selects met dirty entries the purge thread should have removed"
    );

    // The deferred deletes are durable like any write, and compaction's own duplicates
    // for the same versions leave the indexes consistent.
    drop(t);
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let t = db.table("t").expect("table");
    assert_eq!(collect(t.select("by_a")).expect("select"), want);
    assert_eq!(dirty(&t), 0);
    check_ok(&db, true);
    assert_eq!(collect(t.select("by_a")).expect("select"), want);
}

#[test]
fn a_snapshot_older_than_the_write_keeps_the_old_entries_until_released() {
    let (_dir, db, t) = loaded(20);
    assert_eq!(collect(t.select("by_a")).expect("select").len(), 20);
    let snap = db.snapshot();
    for id in 0..10 {
        t.replace(vec![u(id), u(500 + id), u(1)]).expect("replace");
    }
    // Give the purge thread time to (wrongly) act.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        t.stats().expect("stats").background_purges,
        0,
        "purged under a live older snapshot"
    );
    let old: Vec<_> = (0..20).map(|id| vec![u(id), u(id), u(0)]).collect();
    assert_eq!(collect(t.select("by_a").at(&snap)).expect("select at snapshot"), old);
    assert_eq!(
        collect(t.select("by_b").eq(vec![u(0)]).at(&snap))
            .expect("select")
            .len(),
        20
    );

    drop(snap);
    wait_for_purges(&t, 10);
    let before = dirty(&t);
    let now: Vec<_> = (10..20)
        .map(|id| vec![u(id), u(id), u(0)])
        .chain((0..10).map(|id| vec![u(id), u(500 + id), u(1)]))
        .collect();
    assert_eq!(collect(t.select("by_a")).expect("select"), now);
    assert_eq!(collect(t.select("by_b").eq(vec![u(1)])).expect("select").len(), 10);
    assert_eq!(dirty(&t), before);
    check_ok(&db, true);
}

#[test]
fn nothing_is_purged_while_nobody_reads_the_indexes() {
    let (_dir, db, t) = loaded(50);
    for id in 0..50 {
        t.replace(vec![u(id), u(100 + id), u(0)]).expect("replace");
    }
    // Waits until the purge queue is drained too: a job wrongly queued has run by now.
    db.wait_for_background().expect("settle");
    let s = t.stats().expect("stats");
    assert_eq!((s.background_purges, s.commit_purges, s.hidden_reads), (0, 0, 0), "{s}");
    // The old entries are still there, dirty, and skipped.
    assert_eq!(collect(t.select("by_a")).expect("select").len(), 50);
    assert_eq!(dirty(&t), 50);
}

/// The purge thread's deferred deletes and a primary compaction's for the same versions
/// meet in secondary compactions above the last level: each must come out once (a copy
/// used to fail the compaction with "keys must be strictly increasing").
#[test]
fn purged_versions_compacted_again_keep_the_tree_consistent() {
    let (_dir, db) = table_harness::open_small();
    let t = table(&db);
    let mut rng = StdRng::seed_from_u64(7);
    let rows = 5000;
    let mut tx = t.transaction();
    for id in 0..rows {
        tx.insert(vec![u(id), u(id), u(0)]);
    }
    tx.commit().expect("load");
    let mut model: Vec<Option<u64>> = (0..rows).map(Some).collect();
    for round in 0..150u64 {
        // Reads keep purging on; writes replace and delete rows whose versions are on
        // disk by now, so the purge thread has work and compactions drop them again.
        let a = rng.gen_range(0..rows);
        collect(t.select("by_a").eq(vec![u(a)])).expect("select");
        let mut tx = t.transaction();
        for _ in 0..100 {
            let id = rng.gen_range(0..rows);
            if rng.gen_range(0..4) == 0 {
                tx.delete(vec![u(id)]);
                model[id as usize] = None;
            } else {
                let a = 10_000 + round * 10_000 + rng.gen_range(0..10_000);
                tx.replace(vec![u(id), u(a), u(round)]);
                model[id as usize] = Some(a);
            }
        }
        tx.commit().expect("churn");
        if round % 4 == 3 {
            std::thread::sleep(Duration::from_millis(20)); // let purges land
            db.flush().expect("flush");
        }
    }
    db.wait_for_background().expect("background work fails on no copy");
    let s = t.stats().expect("stats");
    assert!(s.background_purges > 0, "the test needs background purges:\n{s}");
    let mut want: Vec<(u64, u64)> = model
        .iter()
        .enumerate()
        .filter_map(|(id, a)| a.map(|a| (a, id as u64)))
        .collect();
    want.sort();
    let got: Vec<(u64, u64)> = collect(t.select("by_a"))
        .expect("select")
        .iter()
        .map(|r| (r[1].as_u64().expect("a"), r[0].as_u64().expect("id")))
        .collect();
    assert_eq!(got, want);
    check_ok(&db, true);
}

/// A version the purge thread cleaned costs the compaction that drops it nothing: the
/// purge wrote a deferred delete for each of its secondary entries, unchanged ones
/// included, so the compaction emits none. The unchanged entries matter once the next
/// version is purged in turn: a missing delete would let the first version's entry
/// show through again, dirty.
#[test]
fn compaction_emits_nothing_for_versions_the_purge_thread_cleaned() {
    let (_dir, db, t) = loaded(200);
    assert_eq!(collect(t.select("by_a").eq(vec![u(7)])).expect("select").len(), 1);
    replace_rows(&t, 0..100, |id| 1000 + id, 0); // by_b unchanged
    wait_for_purges(&t, 100);
    db.flush().expect("flush");
    let before = t.stats().expect("stats").deferred_deletes_emitted;
    let primary = db
        .keyspace(&strata::table::catalog::primary_keyspace_name("t"))
        .expect("primary keyspace");
    primary.compact_range(..).expect("compact the primary");
    let s = t.stats().expect("stats");
    assert_eq!(
        s.deferred_deletes_emitted, before,
        "the compaction re-emitted purged versions:\n{s}"
    );
    assert_eq!(s.pending_purges_estimate, 0, "{s}");

    // The replaced rows change by_b now; the purge deletes their previous entries.
    collect(t.select("by_a").eq(vec![u(7)])).expect("reads keep purging on");
    replace_rows(&t, 0..100, |id| 2000 + id, 1);
    wait_for_purges(&t, 200);
    db.flush().expect("flush");
    let d = dirty(&t);
    assert_eq!(collect(t.select("by_b").eq(vec![u(0)])).expect("select").len(), 100);
    assert_eq!(collect(t.select("by_b").eq(vec![u(1)])).expect("select").len(), 100);
    assert_eq!(dirty(&t), d, "an entry of a purged version showed through");
    check_ok(&db, true);
}

/// A job held back by a snapshot between a row's old version and its write is retried
/// once that snapshot goes, whatever older snapshots stay: one taken before the rows
/// existed cannot see them, so it never held the purge (it used to hold the job until
/// it was given up and counted dropped).
#[test]
fn a_snapshot_older_than_the_old_rows_does_not_hold_back_their_purge() {
    let dir = table_harness::tempdir();
    let db = Db::open(dir.path(), options()).expect("open");
    let t = table(&db);
    let before_rows = db.snapshot();
    load(&db, &t, 20);
    assert_eq!(collect(t.select("by_a")).expect("select").len(), 20);
    let between = db.snapshot();
    replace_rows(&t, 0..10, |id| 500 + id, 1);
    // Held back by `between`, which sees the old rows.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(t.stats().expect("stats").background_purges, 0, "purged under `between`");
    drop(between);
    wait_for_purges(&t, 10);
    assert_eq!(t.stats().expect("stats").purges_dropped, 0);
    assert_eq!(
        collect(t.select("by_a").at(&before_rows)).expect("select"),
        Vec::<Vec<_>>::new()
    );
    drop(before_rows);
    check_ok(&db, true);
}
