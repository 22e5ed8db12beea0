//! The one small trait every engine of `kv` implements, and how an engine is opened by
//! name. Both engines get the same settings from [`KvConfig`]: memtable size, bloom bits,
//! block size, block cache, size ratio, background threads, WAL on, no compression.

use std::path::Path;

use super::args::KvConfig;
use crate::BenchResult;

/// One write of a batch.
#[derive(Debug, Clone, Copy)]
pub enum WriteOp<'a> {
    /// Insert or overwrite `key` with `value`.
    Put(&'a [u8], &'a [u8]),
    /// Delete `key`.
    Delete(&'a [u8]),
}

/// Work counters of an engine, cumulative since open; phases report differences.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct EngineStats {
    /// Bytes written by memtable flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
    /// Bytes of live SSTables on disk now.
    pub sst_bytes: u64,
    /// Data blocks looked up in the block cache (hits plus misses): the data blocks a
    /// read touched. 0 when the engine runs without a block cache.
    pub data_blocks: u64,
    /// Of those, the ones read from the file.
    pub data_block_misses: u64,
}

/// A key-value engine under test. Every method may be called from many threads.
pub trait KvEngine: Send + Sync {
    /// Applies `ops` atomically (WAL on; fsynced when the engine was opened with sync).
    fn write(&self, ops: &[WriteOp<'_>]) -> BenchResult<()>;
    /// Inserts or overwrites one key.
    fn put(&self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.write(&[WriteOp::Put(key, value)])
    }
    /// Deletes one key.
    fn delete(&self, key: &[u8]) -> BenchResult<()> {
        self.write(&[WriteOp::Delete(key)])
    }
    /// Whether `key` holds a value (the value is read, and dropped).
    fn get(&self, key: &[u8]) -> BenchResult<bool>;
    /// Seeks to the first key >= `key` and steps `nexts` times; returns the entries read
    /// (key and value bytes) and their count.
    fn seek(&self, key: &[u8], nexts: usize) -> BenchResult<(usize, u64)>;
    /// Flushes the memtable and waits until no flush or compaction is pending.
    fn flush(&self) -> BenchResult<()>;
    /// Work counters and disk usage.
    fn stats(&self) -> BenchResult<EngineStats>;
}

/// Engine names `--engine` accepts.
pub const ENGINES: [&str; 2] = ["strata", "rocksdb"];

/// Checks `--engine` names before anything runs: unknown names, and `rocksdb` in a
/// build without the `rocksdb` feature.
pub fn check_engines(names: &[String]) -> BenchResult<()> {
    if names.is_empty() {
        return Err("--engine names no engine".into());
    }
    for n in names {
        match n.as_str() {
            "strata" => {}
            "rocksdb" => {
                if !cfg!(feature = "rocksdb") {
                    return Err("this strata-bench was built without RocksDB: install its build \
                                dependencies (crates/strata-bench/scripts/install-rocksdb-deps.sh) and \
                                rebuild with `cargo build --release -p strata-bench --features rocksdb`"
                        .into());
                }
            }
            other => return Err(format!("unknown engine {other:?} (known: {})", ENGINES.join(", ")).into()),
        }
    }
    Ok(())
}

/// Opens engine `name` in `dir` (created if missing). `sync`: every write is fsynced.
pub fn open(name: &str, dir: &Path, cfg: &KvConfig, sync: bool) -> BenchResult<Box<dyn KvEngine>> {
    match name {
        "strata" => Ok(Box::new(super::strata_engine::StrataEngine::open(dir, cfg, sync)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(super::rocksdb_engine::RocksEngine::open(dir, cfg, sync)?)),
        other => {
            check_engines(&[other.to_string()])?;
            Err(format!("engine {other:?} is not available").into())
        }
    }
}
