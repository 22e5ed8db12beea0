//! `Db::stats`, snapshots and `wait_for_background` called over and over while writes
//! keep flushes and compactions busy must never deadlock with the background workers
//! (they share the snapshot list and the background state).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use strata::{Db, Options, WriteBatch};

const WATCHDOG: Duration = Duration::from_secs(40);

#[test]
fn stats_snapshots_and_background_work_do_not_deadlock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        memtable_budget: 8 << 10,
        target_file_size: 4 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 10,
        size_ratio: 2.0,
        background_threads: 2,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), opts).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let stats_calls = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel::<&'static str>();

    let writer = {
        let (db, done) = (db.clone(), done_tx.clone());
        thread::spawn(move || {
            let ks = db.default_keyspace();
            for round in 0..40u32 {
                for chunk in 0..10u32 {
                    let mut b = WriteBatch::new();
                    for i in 0..50u32 {
                        let k = format!("key{:05}", (chunk * 50 + i) * 7 % 500);
                        b.put(&ks, k.as_bytes(), format!("{round}:{:0>80}", i).as_bytes());
                    }
                    db.write(b).expect("write");
                }
                if round % 10 == 9 {
                    db.wait_for_background().expect("wait_for_background");
                }
            }
            let _ = done.send("writer");
        })
    };
    let observers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop, calls) = (db.clone(), stop.clone(), stats_calls.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let snap = db.snapshot();
                    let s = db.stats();
                    assert!(s.snapshots >= 1, "stats do not count a live snapshot");
                    drop(snap);
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    match done_rx.recv_timeout(WATCHDOG) {
        Ok(_) => {}
        Err(_) => {
            // Dropping the handle would join the stuck background threads: leak it.
            std::mem::forget(db);
            panic!(
                "writer did not finish within {WATCHDOG:?} ({} stats calls made): the database deadlocked \
             (e.g. stats() holding the snapshot list while taking the background state, and a \
             background worker holding the background state while reading the snapshot list)",
                stats_calls.load(Ordering::Relaxed)
            )
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer panicked");
    for o in observers {
        o.join().expect("observer panicked");
    }
    let stats = db.stats();
    assert!(
        stats.flushes > 0 && stats.compactions > 0,
        "no background work happened:\n{stats}"
    );
    assert!(stats_calls.load(Ordering::Relaxed) > 100);
    assert_eq!(db.scan(..).expect("scan").count(), 500);
}
