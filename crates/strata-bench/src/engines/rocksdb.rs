//! RocksDB (the `rocksdb` crate's bundled release build, or the system's library linked
//! by `scripts/build-with-system-rocksdb.sh`), for `kv`, behind the [`KvEngine`] trait; its
//! options ([`tuned_options`]) also serve `lethe --kiwi` (c). Compiled only with the
//! `rocksdb` feature of strata-bench.
//!
//! Only calls of RocksDB's C API that 7.x has too: statistics are read from their text
//! ([`tickers`]) and background work is awaited by polling ([`wait_idle`]), since
//! `rocksdb_options_statistics_get_ticker_count` and `rocksdb_wait_for_compact` came
//! later and Debian's librocksdb is 7.8.

use std::path::Path;
use std::time::Duration;

use rocksdb::{BlockBasedOptions, Cache, DB, DBCompressionType, Options, WriteBatch, WriteOptions};

use super::{KvEngine, KvStats, WriteOp};
use crate::BenchResult;
use crate::kv::KvConfig;

/// The counts of tickers `names` (0 where statistics are off), from one reading of the
/// statistics text, whose lines read `<name> COUNT : <n>`.
pub fn tickers<const N: usize>(opts: &Options, names: [&str; N]) -> [u64; N] {
    let text = opts.get_statistics().unwrap_or_default();
    names.map(|name| {
        text.lines()
            .filter_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix("COUNT :"))
            .find_map(|n| n.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// Fails if RocksDB recorded a background error (its C API drops the status of a
/// manual compaction, and a failed flush or compaction stops further ones).
pub fn check_background(db: &DB) -> BenchResult<()> {
    match db.property_int_value("rocksdb.background-errors")? {
        Some(n) if n > 0 => Err(format!("RocksDB: {n} background errors").into()),
        _ => Ok(()),
    }
}

/// Waits until no flush or compaction runs or is pending; fails on a background error
/// (after one, pending work is never done).
pub fn wait_idle(db: &DB) -> BenchResult<()> {
    const BUSY: [&str; 4] = [
        "rocksdb.num-running-flushes",
        "rocksdb.mem-table-flush-pending",
        "rocksdb.num-running-compactions",
        "rocksdb.compaction-pending",
    ];
    loop {
        check_background(db)?;
        let mut busy = 0;
        for p in BUSY {
            busy += db.property_int_value(p)?.unwrap_or(0);
        }
        if busy == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A RocksDB database with statistics on (for flush and compaction bytes).
pub struct RocksKv {
    db: DB,
    opts: Options,
    write_opts: WriteOptions,
    _cache: Option<Cache>,
}

/// The settings a benchmark gives RocksDB (and Strata alike).
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Bytes of one memtable (`write_buffer_size`; three in all).
    pub write_buffer_size: usize,
    /// Background flush and compaction jobs.
    pub background_jobs: usize,
    /// Size ratio T between levels (L1 = memtable * T).
    pub size_ratio: f64,
    /// Target SSTable size.
    pub target_file_size: u64,
    /// Data block size.
    pub block_size: usize,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits: f64,
    /// LRU block cache bytes (0: no cache).
    pub cache_size: usize,
}

/// RocksDB's options for `t`: leveled compaction with L1 = memtable * size ratio (static
/// level sizes, as Strata's), three memtables in all, Strata's L0 triggers, the given
/// file size, block size, bloom bits, block cache and background jobs, no compression,
/// statistics on (flush and compaction bytes). The cache is returned so it outlives the
/// database.
pub fn tuned_options(t: &Tuning) -> (Options, Option<Cache>) {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(t.write_buffer_size);
    o.set_max_write_buffer_number(3);
    o.set_max_background_jobs(t.background_jobs.max(1) as i32);
    o.set_compression_type(DBCompressionType::None);
    o.set_level_compaction_dynamic_level_bytes(false);
    o.set_max_bytes_for_level_base((t.write_buffer_size as f64 * t.size_ratio) as u64);
    o.set_max_bytes_for_level_multiplier(t.size_ratio);
    o.set_target_file_size_base(t.target_file_size);
    o.set_level_zero_file_num_compaction_trigger(4);
    o.set_level_zero_slowdown_writes_trigger(20);
    o.set_level_zero_stop_writes_trigger(36);
    o.enable_statistics();
    let mut b = BlockBasedOptions::default();
    b.set_block_size(t.block_size);
    if t.bloom_bits > 0.0 {
        b.set_bloom_filter(t.bloom_bits, false);
    }
    let cache = if t.cache_size > 0 {
        let c = Cache::new_lru_cache(t.cache_size);
        b.set_block_cache(&c);
        Some(c)
    } else {
        b.disable_cache();
        None
    };
    o.set_block_based_table_factory(&b);
    (o, cache)
}

/// RocksDB's options for `cfg`, matching Strata's (see `engines::strata::kv_options`):
/// [`tuned_options`] with `kv`'s settings and 64 MiB files.
fn options(cfg: &KvConfig) -> (Options, Option<Cache>) {
    tuned_options(&Tuning {
        write_buffer_size: cfg.write_buffer_size,
        background_jobs: cfg.background_threads,
        size_ratio: cfg.size_ratio,
        target_file_size: 64 << 20,
        block_size: cfg.block_size,
        bloom_bits: cfg.bloom_bits,
        cache_size: cfg.cache_size,
    })
}

impl RocksKv {
    /// Opens (or creates) a database in `dir`.
    pub fn open(dir: &Path, cfg: &KvConfig, sync: bool) -> BenchResult<RocksKv> {
        let (opts, cache) = options(cfg);
        let db = DB::open(&opts, dir)?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(sync);
        Ok(RocksKv {
            db,
            opts,
            write_opts,
            _cache: cache,
        })
    }
}

impl KvEngine for RocksKv {
    fn write(&self, ops: &[WriteOp<'_>]) -> BenchResult<()> {
        let mut b = WriteBatch::default();
        for op in ops {
            match *op {
                WriteOp::Put(k, v) => b.put(k, v),
                WriteOp::Delete(k) => b.delete(k),
            }
        }
        self.db.write_opt(b, &self.write_opts)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.db.get_pinned(key)?.is_some())
    }

    fn seek(&self, key: &[u8], nexts: usize) -> BenchResult<(usize, u64)> {
        let mut it = self.db.raw_iterator();
        it.seek(key);
        let mut n = 0usize;
        let mut bytes = 0u64;
        while n <= nexts && it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                bytes += (k.len() + v.len()) as u64;
            }
            n += 1;
            if n <= nexts {
                it.next();
            }
        }
        it.status()?;
        Ok((n, bytes))
    }

    fn flush(&self) -> BenchResult<()> {
        self.db.flush()?;
        wait_idle(&self.db)
    }

    fn stats(&self) -> BenchResult<KvStats> {
        let sst = self.db.property_int_value("rocksdb.live-sst-files-size")?.unwrap_or(0);
        let [hits, misses, flush_bytes, compaction_bytes] = tickers(
            &self.opts,
            [
                "rocksdb.block.cache.data.hit",
                "rocksdb.block.cache.data.miss",
                "rocksdb.flush.write.bytes",
                "rocksdb.compact.write.bytes",
            ],
        );
        Ok(KvStats {
            flush_bytes,
            compaction_bytes,
            sst_bytes: sst,
            data_blocks: hits + misses,
            data_block_misses: misses,
        })
    }
}
