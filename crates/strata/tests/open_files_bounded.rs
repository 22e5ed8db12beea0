//! Open files stay bounded by `Options::max_open_files` however many SSTables the
//! tree holds: readers hitting hundreds of tables at random keep at most that many
//! open in the table cache, plus the few an in-flight read pins. The only test in its
//! binary, so the process's file descriptors are all this test's.

mod batched_load;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use strata::{Db, Options, SyncPolicy};

const MAX_OPEN: usize = 16;
const READERS: usize = 2;

/// SSTable file descriptors of this process.
fn open_sst_fds() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .count()
}

#[test]
fn open_tables_and_descriptors_stay_under_max_open_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        sync: SyncPolicy::None,
        max_open_files: MAX_OPEN,
        memtable_budget: 32 << 10,
        target_file_size: 8 << 10,
        block_size: 1024,
        block_cache_bytes: 64 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let keys = 20_000u64;
    // Spread keys so every file overlaps few others and reads touch them all.
    let spread = |i: u64| format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    batched_load::load_in_batches(&db, keys, 100, spread, &[b'v'; 100]);
    let files: usize = db
        .stats()
        .keyspaces
        .iter()
        .map(|k| k.levels.iter().map(|l| l.files).sum::<usize>())
        .sum();
    assert!(
        files >= 8 * MAX_OPEN,
        "only {files} SSTables: the test needs many more than {MAX_OPEN}"
    );

    let stop = AtomicBool::new(false);
    let (max_tables, max_fds) = std::thread::scope(|s| {
        for _ in 0..READERS {
            s.spawn(|| {
                let mut rng = rand::thread_rng();
                while !stop.load(Ordering::Relaxed) {
                    let i: u64 = rng.gen_range(0..keys);
                    let k = format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let v = db.get(k.as_bytes()).expect("get");
                    assert_eq!(v.as_deref(), Some(&[b'v'; 100][..]), "key {k}");
                }
            });
        }
        let sampler = s.spawn(|| {
            let (mut max_tables, mut max_fds) = (0, 0);
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                max_tables = max_tables.max(db.stats().open_sst_files);
                max_fds = max_fds.max(open_sst_fds());
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::Relaxed);
            (max_tables, max_fds)
        });
        sampler.join().expect("sampler")
    });
    assert!(
        max_tables <= MAX_OPEN,
        "the table cache held {max_tables} tables, limit {MAX_OPEN}"
    );
    assert!(
        max_tables >= MAX_OPEN / 2,
        "readers over {files} files opened only {max_tables}"
    );
    // Each reader may hold one table the cache has since evicted (a read in flight
    // pins it) and be opening the next one, not yet admitted.
    assert!(
        max_fds <= MAX_OPEN + 2 * READERS,
        "{max_fds} SSTable descriptors open over {files} files, limit {MAX_OPEN} + 2 per reader"
    );
    assert!(
        max_fds > 0,
        "no SSTable descriptor was ever seen: the sampler is broken"
    );
}
