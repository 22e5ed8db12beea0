//! Memory bounds hold under load: the memtable budget and the number of frozen
//! memtables while writers outpace the flush, and the block cache's capacity while
//! readers sweep data many times larger than it.

mod batched_load;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use strata::{Db, Options, Stats, SyncPolicy, WriteBatch};

const WRITERS: usize = 4;
const BATCH: usize = 10;
const VALUE: usize = 100;

/// Runs `work(i)` on `workers` threads while a sampler folds `fold` over the
/// database's stats every 200 µs; returns the fold once the workers are done.
fn peak_while<T: Send>(
    db: &Db,
    workers: usize,
    work: impl Fn(usize) + Sync,
    init: T,
    fold: impl Fn(T, &Stats) -> T + Sync,
) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut acc = init;
            while !stop.load(Ordering::Relaxed) {
                acc = fold(acc, &db.stats());
                std::thread::sleep(Duration::from_micros(200));
            }
            acc
        });
        let threads: Vec<_> = (0..workers)
            .map(|i| {
                s.spawn({
                    let work = &work;
                    move || work(i)
                })
            })
            .collect();
        for t in threads {
            t.join().expect("worker");
        }
        stop.store(true, Ordering::Relaxed);
        sampler.join().expect("sampler")
    })
}

#[test]
fn memtable_budget_and_frozen_memtables_hold_while_writers_outpace_the_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let budget = 64 << 10;
    let max_imm = 2;
    let opts = Options {
        sync: SyncPolicy::None,
        memtable_budget: budget,
        max_immutable_memtables: max_imm,
        background_threads: 1,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let (max_mem, max_frozen) = peak_while(
        &db,
        WRITERS,
        |t| {
            for n in 0..4_000u64 {
                let mut b = WriteBatch::new();
                for j in 0..BATCH {
                    let k = format!("{t}/{:08}/{j}", n.wrapping_mul(7919) % 100_000);
                    b.put(&db.default_keyspace(), k.as_bytes(), &[b'x'; VALUE]);
                }
                db.write(b).expect("write");
            }
        },
        (0, 0),
        |(mem, frozen), st| (st.memtable_bytes.max(mem), st.immutable_memtables.max(frozen)),
    );
    let st = db.stats();
    // The budget is checked before each group of batches goes in: a memtable may
    // overshoot by one group (at most one batch per writer), with its index overhead.
    let group = (WRITERS * BATCH * (VALUE + 32) * 2) as u64;
    assert!(
        max_mem <= budget as u64 + group,
        "active memtable reached {max_mem} bytes, budget {budget} + one group {group}"
    );
    assert!(max_frozen <= max_imm, "{max_frozen} frozen memtables, limit {max_imm}");
    assert!(
        st.stalls > 0 || max_frozen == max_imm,
        "the writers never filled the frozen memtables: the limit was not put to the test"
    );
    assert!(st.flushes >= 10, "only {} flushes", st.flushes);
}

#[test]
fn block_cache_stays_within_capacity_while_readers_sweep_larger_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let capacity = 128 << 10;
    let opts = Options {
        sync: SyncPolicy::None,
        block_cache_bytes: capacity,
        block_size: 4096,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let keys = 40_000u64;
    batched_load::load_in_batches(&db, keys, 200, |i| format!("{i:08}"), &[b'y'; VALUE]);
    let data = db.stats().total_bytes();
    assert!(
        data >= 20 * capacity as u64,
        "{data} bytes of data: the test needs far more than the cache"
    );
    let max_usage = peak_while(
        &db,
        3,
        |_| {
            let mut rng = rand::thread_rng();
            for _ in 0..30_000 {
                let i: u64 = rng.gen_range(0..keys);
                let v = db.get(format!("{i:08}").as_bytes()).expect("get");
                assert_eq!(v.map(|v| v.len()), Some(VALUE));
            }
        },
        0,
        |max, st| st.block_cache_usage.max(max),
    );
    let st = db.stats();
    assert!(
        max_usage <= capacity as u64,
        "block cache held {max_usage} bytes, capacity {capacity}"
    );
    assert!(
        st.block_cache_usage >= capacity as u64 / 2,
        "the readers filled only {} of {capacity} bytes: the bound was not put to the test",
        st.block_cache_usage
    );
}
