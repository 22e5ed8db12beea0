//! Options drawn at random from everything the engine accepts, so that model and
//! metamorphic tests run under every compaction shape (leveling, tiering, lazy leveling,
//! FADE deadlines, tombstone density) instead of one fixed configuration.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use strata::options::Compression;
use strata::{ManualClock, Options, SyncPolicy};

/// Options drawn from `seed`: small sizes, so a few hundred operations flush and
/// compact through several levels. `fs` is the file system the test runs on. Time is
/// the returned manual clock, which the caller moves forward (the harness, a
/// millisecond per operation), so FADE deadlines expire within a short history.
pub fn drawn_options(seed: u64, fs: Arc<dyn strata::fs::FileSystem>) -> (Options, Arc<ManualClock>) {
    let mut r = StdRng::seed_from_u64(seed);
    let clock = Arc::new(ManualClock::new(1_000_000));
    let l0_compaction_trigger = r.gen_range(1..=4);
    let opts = Options {
        fs,
        clock: clock.clone(),
        memtable_budget: *[4096usize, 4096, 8192, 16 << 10].choose(&mut r).unwrap_or(&4096),
        max_immutable_memtables: r.gen_range(1..=3),
        target_file_size: *[4096u64, 8192, 32 << 10].choose(&mut r).unwrap_or(&4096),
        block_size: *[256usize, 512, 1024, 4096].choose(&mut r).unwrap_or(&256),
        size_ratio: *[2.0, 3.0, 4.0, 10.0].choose(&mut r).unwrap_or(&2.0),
        runs_per_level: r.gen_range(1..=4),
        lazy_leveling: r.gen_bool(0.3),
        l0_compaction_trigger,
        l0_stall_trigger: l0_compaction_trigger + r.gen_range(2..=8),
        bloom_fpr: *[0.0, 0.001, 0.01, 0.2].choose(&mut r).unwrap_or(&0.01),
        compression: if r.gen_bool(0.5) {
            Compression::Lz4
        } else {
            Compression::None
        },
        sync: *[SyncPolicy::None, SyncPolicy::EveryBatch, SyncPolicy::GroupCommit]
            .choose(&mut r)
            .unwrap_or(&SyncPolicy::None),
        background_threads: r.gen_range(1..=3),
        block_cache_bytes: *[0usize, 16 << 10, 1 << 20].choose(&mut r).unwrap_or(&0),
        delete_persistence_threshold: r.gen_bool(0.5).then(|| Duration::from_millis(r.gen_range(5..=200))),
        tombstone_density_trigger: r.gen_bool(0.4).then(|| r.gen_range(0.05..=0.6)),
        ..Options::default()
    };
    (opts, clock)
}
