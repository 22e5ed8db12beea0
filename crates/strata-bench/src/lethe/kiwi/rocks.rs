//! Variant (c) of `lethe --kiwi`: RocksDB doing (a) with its compaction filter, what
//! production engines on RocksDB run for a secondary range delete. Compiled only with the
//! `rocksdb` feature.
//!
//! RocksDB gets the options (a) gives Strata (`super::options`, through
//! `engines::rocksdb::tuned_options`): 4 KiB blocks, Strata's bloom bits for 1 %, an
//! 8 MiB block cache, leveling with T = 10 and L1 = memtable * T, the same memtable and
//! file sizes and background jobs, no compression. It runs the same generator
//! (`super::Work`). A secondary range delete sets the range the filter removes (delete
//! key = the first 8 bytes of the value, big-endian), then compacts the whole key range
//! with the bottommost level forced (`ForceOptimized`: every file of the last level is
//! rewritten once, files the same compaction wrote excepted, which the filter already
//! saw), so every entry passes the filter. The range stays set: later compactions find
//! nothing more in it, as every key in it is older than the cut.
//!
//! Counters: flush and compaction bytes from the statistics tickers (`FLUSH_WRITE_BYTES`,
//! `COMPACT_READ_BYTES`, `COMPACT_WRITE_BYTES`); foreground block reads, blocks searched
//! and bloom probes from this thread's perf context (`block_read_count`,
//! `block_cache_hit_count`, `bloom_sst_{hit,miss}_count`), so background work and the
//! correctness checks' reads (subtracted) stay out of the foreground figures. Index and
//! filter blocks are held by the table readers, outside the block cache, as Strata's.

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::compaction_filter::Decision;
use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel, set_perf_stats};
use rocksdb::{BottommostLevelCompaction, Cache, CompactOptions, DB, Options, ReadOptions};
use strata::sstable::bloom::BloomPolicy;

use super::{
    Counters, Engine, KiwiResult, KiwiShape, LookupCounters, RANGE_LEN, baseline_result, load_and_measure, value,
};
use crate::BenchResult;
use crate::engines::rocksdb::{Tuning, check_background, tickers, tuned_options, wait_idle};

/// The delete-key range `[lo, hi)` the compaction filter removes.
#[derive(Default)]
struct Cut {
    lo: AtomicU64,
    hi: AtomicU64,
}

impl Cut {
    fn covers(&self, v: &[u8]) -> bool {
        let Some(ts) = v.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
            return false;
        };
        let ts = u64::from_be_bytes(ts);
        // Set before the compaction starts and read by its threads after RocksDB's own
        // synchronisation (the scheduling of the job), so relaxed loads see it.
        ts >= self.lo.load(Ordering::Relaxed) && ts < self.hi.load(Ordering::Relaxed)
    }
}

/// RocksDB with the filter, and this thread's perf context.
struct RocksEngine {
    db: DB,
    opts: Options,
    cut: Arc<Cut>,
    perf: PerfContext,
    /// Blocks the correctness checks read from files (left out of the I/O).
    check_reads: Cell<u64>,
    _cache: Option<Cache>,
}

impl RocksEngine {
    fn open(dir: &Path) -> BenchResult<RocksEngine> {
        let s = super::options();
        let bloom_bits = BloomPolicy::from_fpr(s.bloom_fpr).map_or(0.0, |p| p.bits_per_key());
        let (mut opts, cache) = tuned_options(&Tuning {
            write_buffer_size: s.memtable_budget,
            background_jobs: s.background_threads,
            size_ratio: s.size_ratio,
            target_file_size: s.target_file_size,
            block_size: s.block_size,
            bloom_bits,
            cache_size: s.block_cache_bytes,
        });
        let cut = Arc::new(Cut::default());
        let filter_cut = Arc::clone(&cut);
        opts.set_compaction_filter("kiwi-delete-key", move |_level: u32, _key: &[u8], v: &[u8]| {
            if filter_cut.covers(v) {
                Decision::Remove
            } else {
                Decision::Keep
            }
        });
        let db = DB::open(&opts, dir)?;
        set_perf_stats(PerfStatsLevel::EnableCount);
        Ok(RocksEngine {
            db,
            opts,
            cut,
            perf: PerfContext::default(),
            check_reads: Cell::new(0),
            _cache: cache,
        })
    }

    /// Compacts everything, the last level included, through the filter.
    fn compact_through_filter(&self) -> BenchResult<()> {
        let mut c = CompactOptions::default();
        c.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &c);
        check_background(&self.db)
    }
}

impl Engine for RocksEngine {
    fn put(&self, k: &[u8; 16], ts: u64, size: usize) -> BenchResult<()> {
        self.db.put(k, value(ts, size))?;
        Ok(())
    }

    fn get(&self, k: &[u8; 16]) -> BenchResult<bool> {
        Ok(self.db.get_pinned(k)?.is_some())
    }

    fn range(&self, from: &[u8; 16]) -> BenchResult<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(from);
        let mut n = 0;
        while n < RANGE_LEN && it.valid() {
            std::hint::black_box((it.key(), it.value()));
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }

    fn delete_where(&self, lo: u64, hi: u64) -> BenchResult<()> {
        self.cut.lo.store(lo, Ordering::Relaxed);
        self.cut.hi.store(hi, Ordering::Relaxed);
        self.compact_through_filter()
    }

    fn counters(&self) -> Counters {
        let [compaction_read, compaction_written, flush_written] = tickers(
            &self.opts,
            [
                "rocksdb.compact.read.bytes",
                "rocksdb.compact.write.bytes",
                "rocksdb.flush.write.bytes",
            ],
        );
        Counters {
            compaction_read,
            compaction_written,
            flush_written,
            cache_misses: self.perf.metric(PerfMetric::BlockReadCount) - self.check_reads.get(),
            ..Counters::default()
        }
    }

    fn lookup_counters(&self) -> LookupCounters {
        LookupCounters {
            pages: self.blocks_touched(),
            probes: self.perf.metric(PerfMetric::BloomSstHitCount) + self.perf.metric(PerfMetric::BloomSstMissCount),
        }
    }

    fn blocks_touched(&self) -> u64 {
        self.perf.metric(PerfMetric::BlockCacheHitCount) + self.perf.metric(PerfMetric::BlockReadCount)
    }

    fn check(&self, gone: &[[u8; 16]], kept: &[[u8; 16]]) -> BenchResult<()> {
        let reads0 = self.perf.metric(PerfMetric::BlockReadCount);
        let mut ro = ReadOptions::default();
        ro.fill_cache(false);
        let mut wrong = Vec::new();
        for (keys, want) in [(gone, false), (kept, true)] {
            for k in keys {
                if self.db.get_pinned_opt(k, &ro)?.is_some() != want {
                    wrong.push(format!("{k:02x?} reads {}", if want { "absent" } else { "present" }));
                }
            }
        }
        self.check_reads
            .set(self.check_reads.get() + self.perf.metric(PerfMetric::BlockReadCount) - reads0);
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "RocksDB compaction filter: {} of {} sampled keys wrong after a delete, e.g. {}",
                wrong.len(),
                gone.len() + kept.len(),
                wrong[0]
            )
            .into())
        }
    }

    fn compact_all(&self) -> BenchResult<()> {
        self.compact_through_filter()?;
        self.wait()
    }

    /// Waits for running and pending flushes and compactions (without flushing the
    /// memtable, as Strata's `wait_for_background`).
    fn wait(&self) -> BenchResult<()> {
        wait_idle(&self.db)
    }

    fn leftover(&self) -> BenchResult<i64> {
        self.db.flush()?;
        self.wait()?;
        let on_disk: u64 = self.db.live_files()?.iter().map(|f| f.num_entries).sum();
        let mut it = self.db.raw_iterator();
        it.seek_to_first();
        let mut live = 0i64;
        while it.valid() {
            live += 1;
            it.next();
        }
        it.status()?;
        Ok(on_disk as i64 - live)
    }
}

/// Runs (c) on a fresh database in `dir`.
pub(super) fn run_variant(dir: &Path, name: &str, shape: &KiwiShape) -> BenchResult<KiwiResult> {
    let e = RocksEngine::open(dir)?;
    let m = load_and_measure(&e, shape)?;
    Ok(baseline_result(name, &m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u64) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
        k[8..].copy_from_slice(&i.to_be_bytes());
        k
    }

    #[test]
    fn the_filter_removes_the_cut_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        for ts in 0..3000 {
            e.put(&k(ts), ts, 200).expect("put");
        }
        let c0 = e.counters();
        e.delete_where(1000, 2500).expect("delete");
        let c1 = e.counters();
        assert!(c1.compaction_read > c0.compaction_read, "the compaction read the tree");
        assert!(c1.flush_written > c0.flush_written, "the memtable was flushed first");
        // The model: keys whose creation time is outside [1000, 2500).
        let gone: Vec<[u8; 16]> = (1000..2500).map(k).collect();
        let kept: Vec<[u8; 16]> = (0..1000).chain(2500..3000).map(k).collect();
        e.check(&gone, &kept).expect("the filter removed exactly the cut");
        let mut it = e.db.raw_iterator();
        it.seek_to_first();
        let mut live = 0;
        while it.valid() {
            live += 1;
            it.next();
        }
        assert_eq!(live, kept.len());
        assert_eq!(
            e.leftover().expect("leftover"),
            0,
            "nothing deleted is left in the files"
        );
        assert!(
            e.check(&kept[..1], &[]).is_err(),
            "a kept key reading present is caught"
        );
        assert!(
            e.check(&[], &gone[..1]).is_err(),
            "a deleted key reading absent is caught"
        );
    }

    #[test]
    fn a_small_run_counts_the_compactions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run_variant(dir.path(), "(c)", &super::super::small_shape()).expect("run");
        assert_eq!(r.srds, 1);
        assert!(r.srd_pages_read > 0.0 && r.srd_pages_rewritten > 0.0, "{r:?}");
        assert!(r.total_io_pages as f64 >= r.srd_io_measured, "{r:?}");
        assert!(r.lookup_probes > 0.0, "{r:?}");
    }
}
