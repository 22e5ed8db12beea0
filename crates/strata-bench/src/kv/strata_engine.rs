//! Strata behind the [`KvEngine`] trait.

use std::path::Path;

use strata::{Db, Keyspace, Options, SyncPolicy, WriteBatch};

use super::args::KvConfig;
use super::engine::{EngineStats, KvEngine, WriteOp};
use crate::BenchResult;

/// A Strata database and its default keyspace.
pub struct StrataEngine {
    db: Db,
    ks: Keyspace,
}

/// Strata's options for `cfg`: the settings RocksDB is given too (see
/// `rocksdb_engine::options`).
pub fn options(cfg: &KvConfig, sync: bool) -> Options {
    Options {
        memtable_budget: cfg.write_buffer_size,
        // One active memtable plus two frozen ones (RocksDB: max_write_buffer_number 3).
        max_immutable_memtables: 2,
        size_ratio: cfg.size_ratio,
        runs_per_level: 1,
        block_size: cfg.block_size,
        bloom_fpr: bloom_fpr(cfg.bloom_bits),
        compression: strata::options::Compression::None,
        block_cache_bytes: cfg.cache_size,
        background_threads: cfg.background_threads.max(1),
        target_file_size: 64 << 20,
        l0_compaction_trigger: 4,
        l0_stall_trigger: 20,
        // Concurrent writers share one fsync, as RocksDB's WAL group commit does.
        sync: if sync {
            SyncPolicy::GroupCommit
        } else {
            SyncPolicy::None
        },
        ..Options::default()
    }
}

/// Strata sizes filters by false-positive rate: the rate its own model gives a filter of
/// `bits` bits per key, so that it builds a filter of that size (0: no filter).
pub fn bloom_fpr(bits: f64) -> f64 {
    strata::sstable::bloom::BloomPolicy::from_bits_per_key(bits).map_or(0.0, |p| p.estimated_fpr())
}

impl StrataEngine {
    /// Opens (or creates) a database in `dir`.
    pub fn open(dir: &Path, cfg: &KvConfig, sync: bool) -> BenchResult<StrataEngine> {
        let db = Db::open(dir, options(cfg, sync))?;
        let ks = db.default_keyspace();
        Ok(StrataEngine { db, ks })
    }
}

impl KvEngine for StrataEngine {
    fn write(&self, ops: &[WriteOp<'_>]) -> BenchResult<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match *op {
                WriteOp::Put(k, v) => b.put(&self.ks, k, v),
                WriteOp::Delete(k) => b.delete(&self.ks, k),
            }
        }
        self.db.write(b)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.ks.get(key)?.is_some())
    }

    fn seek(&self, key: &[u8], nexts: usize) -> BenchResult<(usize, u64)> {
        let mut n = 0usize;
        let mut bytes = 0u64;
        for e in self.ks.scan(key..)?.take(nexts + 1) {
            let (k, v) = e?;
            n += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> BenchResult<()> {
        self.db.flush()?;
        self.db.wait_for_background()?;
        Ok(())
    }

    fn stats(&self) -> BenchResult<EngineStats> {
        let s = self.db.stats();
        if let Some(e) = &s.background_error {
            return Err(format!("strata background error: {e}").into());
        }
        Ok(EngineStats {
            flush_bytes: s.flush_bytes_written,
            compaction_bytes: s.compaction_bytes_written,
            sst_bytes: s.total_bytes(),
            data_blocks: s.block_cache_hits + s.block_cache_misses,
            data_block_misses: s.block_cache_misses,
        })
    }
}
