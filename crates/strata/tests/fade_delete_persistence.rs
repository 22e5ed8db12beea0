//! FADE: with a delete persistence threshold D and a driven clock, once D of simulated
//! time has passed with the background threads running, no tombstone, deferred delete or
//! dirty secondary entry older than D is left on disk. Without the threshold they stay.

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng, rngs::StdRng};
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, ManualClock, Options, WriteBatch};

const D: Duration = Duration::from_secs(100);
const SEC: u64 = 1_000_000;

fn options(clock: Arc<ManualClock>, fade: bool) -> Options {
    Options {
        memtable_budget: 32 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        size_ratio: 4.0,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 16,
        delete_persistence_threshold: fade.then_some(D),
        clock,
        ..Options::default()
    }
}

/// Runs 30 s of simulated writes and deletes, then lets `idle` seconds pass.
fn run(fade: bool, idle: u64) -> (Db, Arc<ManualClock>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000 * SEC));
    let db = Db::open(dir.path(), options(clock.clone(), fade)).unwrap();
    let kv = db.default_keyspace();
    let t = db
        .create_table(
            Schema::parse("table t (id u64, a u64, b u64) primary key (id) index by_a (a) index by_b (b) deferred")
                .unwrap(),
        )
        .unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for step in 0..30u64 {
        let mut b = WriteBatch::new();
        for _ in 0..300 {
            let k: u32 = rng.gen_range(0..3000);
            b.put(&kv, format!("k{k:05}").as_bytes(), &[b'v'; 64]);
        }
        for _ in 0..50 {
            let k: u32 = rng.gen_range(0..3000);
            b.delete(&kv, format!("k{k:05}").as_bytes());
        }
        if step % 5 == 0 {
            let s: u32 = rng.gen_range(0..2900);
            b.delete_range(&kv, format!("k{s:05}").as_bytes(), format!("k{:05}", s + 50).as_bytes());
        }
        db.write(b).unwrap();
        let mut tx = t.transaction();
        for _ in 0..100 {
            let id = rng.gen_range(0..500u64);
            if rng.gen_bool(0.3) {
                tx.delete(vec![Value::U64(id)]);
            } else {
                tx.replace(vec![
                    Value::U64(id),
                    Value::U64(rng.gen_range(0..50)),
                    Value::U64(rng.gen_range(0..50)),
                ]);
            }
        }
        tx.commit().unwrap();
        clock.advance(SEC);
    }
    db.wait_for_background().unwrap();
    for _ in 0..idle / 10 {
        clock.advance(10 * SEC);
        db.wait_for_background().unwrap();
    }
    (db, clock, dir)
}

fn oldest_tombstone_age(db: &Db, now: u64) -> Option<u64> {
    db.stats()
        .keyspaces
        .iter()
        .flat_map(|k| k.levels.iter())
        .filter_map(|l| l.oldest_tombstone_time)
        .map(|t| now - t)
        .max()
}

#[test]
fn every_tombstone_and_dirty_entry_is_gone_within_the_threshold() {
    let (db, clock, _dir) = run(true, D.as_secs() + 20);
    let now = strata::Clock::now_micros(clock.as_ref());
    let age = oldest_tombstone_age(&db, now);
    assert!(
        age.is_none_or(|a| a < D.as_micros() as u64),
        "a tombstone {age:?} us old survived: {}",
        db.stats()
    );
    let tombstones: u64 = db.stats().keyspaces.iter().map(|k| k.tombstones()).sum();
    assert_eq!(tombstones, 0, "{}", db.stats());
    // No dirty secondary entry is left, without any manual compaction.
    let report = db.check(CheckOptions::default()).unwrap();
    assert!(report.ok(), "{report}");
    for ix in &report.tables[0].indexes {
        assert_eq!(ix.dirty, 0, "{report}");
        assert_eq!(ix.file_entries, report.tables[0].rows, "{report}");
    }
}

#[test]
fn without_a_threshold_tombstones_stay() {
    let (db, clock, _dir) = run(false, D.as_secs() + 20);
    let now = strata::Clock::now_micros(clock.as_ref());
    // Which of them survive depends on where size-driven compaction happened to run;
    // that something older than D survives does not.
    let old_tombstone = oldest_tombstone_age(&db, now).is_some_and(|a| a >= D.as_micros() as u64);
    let report = db.check(CheckOptions::default()).unwrap();
    let dirty = report.tables[0].indexes.iter().any(|ix| ix.dirty > 0);
    assert!(old_tombstone || dirty, "{report}\n{}", db.stats());
}

/// The puts a delete-where kills are written as tombstones where they hide older
/// versions, in a flush or a compaction; those files carry a tombstone time like any
/// other, so FADE takes the tombstones to the last level within the threshold.
#[test]
fn tombstones_a_delete_where_makes_are_timed_and_persisted() {
    use strata::delete_key::{DeleteKey, TileChoice};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000 * SEC));
    let db = Db::open(dir.path(), options(clock.clone(), true)).unwrap();
    let ks = db.create_keyspace("k").unwrap();
    ks.set_delete_key(DeleteKey::new(0, 1).unwrap(), TileChoice::Fixed(4))
        .unwrap();
    let key = |i: u32| format!("k{i:05}").into_bytes();
    for i in 0..400 {
        ks.put(&key(i), &[50; 40]).unwrap();
    }
    db.compact_range().unwrap();
    // Newer versions the delete covers, over older ones it does not.
    for i in 0..400 {
        ks.put(&key(i), &[5; 40]).unwrap();
    }
    ks.delete_where(&[0], &[10]).unwrap();
    db.flush().unwrap();
    let timed = |db: &Db| {
        db.live_files()
            .iter()
            .filter(|f| f.keyspace_name == "k" && f.tombstones > 0)
            .all(|f| f.oldest_tombstone_time.is_some())
    };
    assert!(
        db.live_files()
            .iter()
            .any(|f| f.keyspace_name == "k" && f.tombstones > 0)
    );
    assert!(timed(&db), "{:?}", db.live_files());
    assert_eq!(ks.get(&key(7)).unwrap(), None);
    // Past the threshold, with the background running, no tombstone is left.
    for _ in 0..(D.as_secs() + 20) / 10 {
        clock.advance(10 * SEC);
        db.wait_for_background().unwrap();
    }
    let now = strata::Clock::now_micros(clock.as_ref());
    let age = oldest_tombstone_age(&db, now);
    assert!(age.is_none_or(|a| a < D.as_micros() as u64), "{}", db.stats());
    assert!(timed(&db));
    assert_eq!(ks.scan(..).unwrap().count(), 0);
}

/// Replaces alone (no deletes, so no tombstone anywhere) leave dirty index entries
/// that only a compaction of the primary's files purges: those files carry the age of
/// their pending purges, and FADE compacts them within the threshold.
#[test]
fn dirty_entries_of_replaces_alone_go_within_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000 * SEC));
    // One flush of the replaces, below the level-0 trigger: no size-driven compaction
    // meets the old versions.
    let opts = Options {
        memtable_budget: 4 << 20,
        l0_compaction_trigger: 4,
        ..options(clock.clone(), true)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db
        .create_table(Schema::parse("table t (id u64, a u64) primary key (id) index by_a (a) deferred").unwrap())
        .unwrap();
    for id in 0..1000u64 {
        t.insert(vec![Value::U64(id), Value::U64(id)]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range().unwrap();
    for id in 0..1000u64 {
        t.replace(vec![Value::U64(id), Value::U64(id + 5000)]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    for _ in 0..30 {
        clock.advance(10 * SEC);
        db.wait_for_background().unwrap();
    }
    let report = db.check(CheckOptions::default()).unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.tables[0].indexes[0].dirty, 0, "{report}\n{}", db.stats());
}

/// A tombstone still in the memtable at a close is replayed at the next open with the
/// time its memtable was made, not the open's: the time the database was down counts
/// toward the threshold, as it would have had the memtable been flushed.
#[test]
fn a_restart_does_not_restart_the_clock_of_unflushed_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000 * SEC));
    let t0 = strata::Clock::now_micros(clock.as_ref());
    {
        let db = Db::open(dir.path(), options(clock.clone(), true)).unwrap();
        let kv = db.default_keyspace();
        kv.put(b"k", b"v").unwrap();
        db.flush().unwrap();
        db.compact_range().unwrap();
        kv.delete(b"k").unwrap();
        db.close().unwrap();
    }
    clock.advance(150 * SEC);
    let db = Db::open(dir.path(), options(clock.clone(), true)).unwrap();
    let times: Vec<u64> = db.live_files().iter().filter_map(|f| f.oldest_tombstone_time).collect();
    assert!(times.iter().all(|&t| t <= t0), "{times:?} after {t0}");
    db.wait_for_background().unwrap();
    let tombstones: u64 = db.stats().keyspaces.iter().map(|k| k.tombstones()).sum();
    assert_eq!(tombstones, 0, "{}", db.stats());
    assert_eq!(db.default_keyspace().get(b"k").unwrap(), None);
}
