//! Reading counters (`Db::stats`, `Table::stats`) and taking snapshots while writers
//! keep flushes and compactions busy must never block for good. A watchdog turns a
//! deadlock into a failure instead of a hung test run.

mod table_harness;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::schema::Schema;
use strata::table::value::Value;
use table_harness::u;

#[test]
fn stats_and_snapshots_never_deadlock_with_background_work() {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let (_dir, db) = table_harness::open_small();
        let t = db
            .create_table(
                Schema::parse("table t (id u64, a u64, pad bytes) primary key (id) index by_a (a) deferred")
                    .expect("schema"),
            )
            .expect("table");
        let stop = AtomicBool::new(false);
        let mut calls = 0u64;
        std::thread::scope(|sc| {
            let _stop_writers = table_harness::StopOnDrop(&stop);
            sc.spawn(|| {
                let mut g = StdRng::seed_from_u64(7);
                while !stop.load(Ordering::Relaxed) {
                    let id = g.gen_range(0..2000);
                    t.replace(vec![u(id), u(g.gen_range(0..30)), Value::Bytes(vec![1; 200])])
                        .expect("replace");
                    if id.is_multiple_of(7) {
                        t.delete(&[u(id / 2)]).expect("delete");
                    }
                }
            });
            let until = Instant::now() + Duration::from_millis(2500);
            while Instant::now() < until {
                let s = db.stats();
                assert!(s.background_error.is_none(), "{:?}", s.background_error);
                let _snap = db.snapshot();
                t.stats().expect("table stats");
                calls += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        let s = db.stats();
        tx.send((calls, s.flushes, s.compactions)).expect("send");
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok((calls, flushes, compactions)) => {
            worker.join().expect("worker");
            assert!(calls > 100, "only {calls} stats calls");
            assert!(
                flushes > 5 && compactions > 5,
                "flushes {flushes}, compactions {compactions}"
            );
        }
        Err(_) => {
            panic!("Db::stats / Table::stats / Db::snapshot blocked for over 20 s while background work ran (deadlock)")
        }
    }
}
