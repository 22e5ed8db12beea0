//! A compaction that drops versions the purge thread cleaned emits no deferred deletes
//! for them: the purge's own deletes stand in. After a power loss that follows such a
//! compaction, the index must still lose every entry of those versions.
//!
//! With `SyncPolicy::None` the purge's deletes may sit in a WAL nobody synced; the
//! compaction syncs the WAL before it installs (`db::background::execute`). This test
//! does not reach that window: a manual compaction flushes the memtable first, which
//! makes the deletes durable on its own, and only a background compaction starting
//! between the purge's commit and the next flush would need the sync. It checks the
//! rest of the path: sparing, power loss, recovery, and a clean index after it.

#[allow(unused_imports)] // the support module re-exports more than this test needs
mod fault_harness;

use std::time::{Duration, Instant};

use fault_harness::{CrashMode, FaultyFs};
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::{Db, Options, SyncPolicy};

fn u(v: u64) -> Value {
    Value::U64(v)
}

fn options(fs: &std::sync::Arc<FaultyFs>) -> Options {
    Options {
        sync: SyncPolicy::None,
        memtable_budget: 8 << 20,
        l0_compaction_trigger: 100,
        l0_stall_trigger: 200,
        fs: fs.clone(),
        ..Options::default()
    }
}

#[test]
fn an_index_stays_clean_across_power_loss_after_a_compaction_spared_purged_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultyFs::new(7);
    let db = Db::open(dir.path(), options(&fs)).expect("open");
    let t = db
        .create_table(
            Schema::parse("table t (id u64, a u64, b u64) primary key (id) index by_a (a) index by_b (b) deferred")
                .expect("schema"),
        )
        .expect("table");
    let mut tx = t.transaction();
    for id in 0..100 {
        tx.insert(vec![u(id), u(id), u(0)]);
    }
    tx.commit().expect("load");
    db.flush().expect("flush");
    // The indexes are read, so blind writes of rows on disk go to the purge thread.
    assert_eq!(t.select("by_a").eq(vec![u(7)]).count().expect("select"), 1);

    // A snapshot holds the purge back until the new versions are flushed: the purge's
    // deletes then land in the next WAL, which nothing syncs under SyncPolicy::None.
    let snap = db.snapshot();
    let mut tx = t.transaction();
    for id in 0..50 {
        tx.replace(vec![u(id), u(1000 + id), u(1)]);
    }
    tx.commit().expect("replace");
    db.flush().expect("flush the new versions");
    drop(snap);
    let deadline = Instant::now() + Duration::from_secs(20);
    while t.stats().expect("stats").background_purges < 50 {
        assert!(Instant::now() < deadline, "the purge did not run");
        std::thread::sleep(Duration::from_millis(5));
    }
    let primary = db
        .keyspace(&strata::table::catalog::primary_keyspace_name("t"))
        .expect("primary keyspace");
    primary.compact_range(..).expect("compact the primary");
    let s = t.stats().expect("stats");
    assert_eq!(s.deferred_deletes_emitted, 0, "the test needs spared versions:\n{s}");

    // The power goes: everything not synced is lost.
    fs.state().power_off();
    drop((t, primary));
    drop(db);
    fs.state().crash(CrashMode::LoseUnsyncedData);
    fs.state().clear();

    let db = Db::open(dir.path(), options(&fs)).expect("reopen");
    let t = db.table("t").expect("table");
    assert_eq!(t.select(PRIMARY).count().expect("rows"), 100);
    let report = db.check(CheckOptions { compact_first: true }).expect("check");
    assert!(
        report.ok(),
        "entries of the old versions survived the power loss:\n{report}"
    );
    assert_eq!(t.select("by_b").eq(vec![u(0)]).count().expect("select"), 50);
    assert_eq!(t.stats().expect("stats").dirty_hits_skipped, 0);
}
