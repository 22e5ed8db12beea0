//! Flags of `strata-bench kv`, named as RocksDB's `db_bench` names them (with
//! dash-separated aliases), and the settings both engines are opened with.

use std::path::PathBuf;

/// Arguments of `strata-bench kv`.
#[derive(clap::Args, Debug, Clone)]
pub struct KvArgs {
    /// Comma-separated workloads, run in this order: fillseq, fillrandom, overwrite,
    /// readrandom, seekrandom, deleterandom, readwhilewriting, fillsync. fillseq,
    /// fillrandom and fillsync start from an empty database; the others use the one left
    /// by the workloads before them.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillseq,fillrandom,overwrite,readrandom,seekrandom,deleterandom,readwhilewriting,fillsync"
    )]
    pub benchmarks: Vec<String>,
    /// Comma-separated engines: strata, rocksdb (needs `--features rocksdb`). With
    /// several, each round runs them one after the other (A, B, A, B, ...).
    #[arg(long, value_delimiter = ',', default_value = "strata")]
    pub engine: Vec<String>,
    /// Keys in the key space; writes per write workload (split over the threads).
    #[arg(long, default_value_t = 5_000_000)]
    pub num: u64,
    /// Operations of the read workloads (default: --num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Key size in bytes (at least 8: the key number is stored big-endian in front).
    #[arg(long = "key_size", alias = "key-size", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long = "value_size", alias = "value-size", default_value_t = 100)]
    pub value_size: usize,
    /// Client threads of each workload (readwhilewriting: readers, plus one writer).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Writes per write batch.
    #[arg(long = "batch_size", alias = "batch-size", default_value_t = 1)]
    pub batch_size: usize,
    /// Memtable size in bytes (Strata: memtable_budget; RocksDB: write_buffer_size).
    #[arg(long = "write_buffer_size", alias = "write-buffer-size", default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Bloom filter bits per key (0: no filters).
    #[arg(long = "bloom_bits", alias = "bloom-bits", default_value_t = 10.0)]
    pub bloom_bits: f64,
    /// Data block size in bytes.
    #[arg(long = "block_size", alias = "block-size", default_value_t = 4096)]
    pub block_size: usize,
    /// Block cache capacity in bytes (0: no block cache).
    #[arg(long = "cache_size", alias = "cache-size", default_value_t = 8 << 20)]
    pub cache_size: usize,
    /// Size ratio between adjacent levels (RocksDB: max_bytes_for_level_multiplier).
    #[arg(
        long = "max_bytes_for_level_multiplier",
        alias = "size_ratio",
        alias = "size-ratio",
        default_value_t = 10.0
    )]
    pub size_ratio: f64,
    /// Entries each seekrandom seek reads after the one it lands on.
    #[arg(long = "seek_nexts", alias = "seek-nexts", default_value_t = 10)]
    pub seek_nexts: usize,
    /// Writes of fillsync (default: --num / 1000, at least 1,000).
    #[arg(long = "sync_ops", alias = "sync-ops")]
    pub sync_ops: Option<u64>,
    /// Writer threads of fillsync, comma-separated: one fillsync row per count.
    #[arg(
        long = "sync_threads",
        alias = "sync-threads",
        value_delimiter = ',',
        default_value = "1,4"
    )]
    pub sync_threads: Vec<usize>,
    /// Fsync the WAL on every write of every workload (fillsync always does).
    #[arg(long)]
    pub sync: bool,
    /// Background flush and compaction threads of each engine.
    #[arg(long = "max_background_jobs", alias = "background-threads", default_value_t = 2)]
    pub background_threads: usize,
    /// Rounds: each runs every engine once over all workloads, on fresh directories.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Database directory (default: a fresh temporary directory); each engine and round
    /// uses a subdirectory.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Keep what is in `--db` at the start instead of emptying it.
    #[arg(long = "use_existing_db", alias = "use-existing-db")]
    pub use_existing_db: bool,
    /// Skip the `dd` measurement of the disk's sequential write bandwidth.
    #[arg(long = "no_dd", alias = "no-dd")]
    pub no_dd: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A run of a few seconds: 100,000 keys, 50,000 reads, 1,000 sync writes, 64 MiB dd.
    #[arg(long)]
    pub quick: bool,
}

/// The settings of one run, after `--quick` and the defaults are applied.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KvConfig {
    pub num: u64,
    pub reads: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads: usize,
    pub batch_size: usize,
    pub write_buffer_size: usize,
    pub bloom_bits: f64,
    pub block_size: usize,
    pub cache_size: usize,
    pub size_ratio: f64,
    pub seek_nexts: usize,
    pub sync_ops: u64,
    pub sync_threads: Vec<usize>,
    pub sync: bool,
    pub background_threads: usize,
    pub rounds: usize,
    pub dd_mib: u64,
}

impl KvArgs {
    /// The run's settings; rejects values the generator cannot honour.
    pub fn config(&self) -> crate::BenchResult<KvConfig> {
        let num = if self.quick { 100_000 } else { self.num };
        let reads = match (self.reads, self.quick) {
            (Some(r), _) => r,
            (None, true) => 50_000,
            (None, false) => num,
        };
        let sync_ops = match (self.sync_ops, self.quick) {
            (Some(n), _) => n,
            (None, true) => 1_000,
            (None, false) => (num / 1000).max(1000),
        };
        if self.key_size < 8 {
            return Err("--key_size must be at least 8".into());
        }
        if num == 0 || self.threads == 0 || self.batch_size == 0 || self.rounds == 0 {
            return Err("--num, --threads, --batch_size and --rounds must be positive".into());
        }
        if self.sync_threads.contains(&0) {
            return Err("--sync_threads must be positive".into());
        }
        if self.bloom_bits.is_nan() || self.bloom_bits < 0.0 {
            return Err("--bloom_bits must not be negative".into());
        }
        Ok(KvConfig {
            num,
            reads,
            key_size: self.key_size,
            value_size: self.value_size,
            threads: self.threads,
            batch_size: self.batch_size,
            write_buffer_size: self.write_buffer_size,
            bloom_bits: self.bloom_bits,
            block_size: self.block_size,
            cache_size: self.cache_size,
            size_ratio: self.size_ratio,
            seek_nexts: self.seek_nexts,
            sync_ops,
            sync_threads: self.sync_threads.clone(),
            sync: self.sync,
            background_threads: self.background_threads,
            rounds: self.rounds,
            dd_mib: if self.quick { 64 } else { 512 },
        })
    }
}
