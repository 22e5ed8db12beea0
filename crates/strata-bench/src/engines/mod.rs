//! The storage engines the benchmarks drive, each adapted once, in a file of its own:
//!
//! * [`strata`]: Strata, for every benchmark (tables in eager or deferred mode, and the
//!   default keyspace for `kv`);
//! * [`sqlite`]: SQLite (bundled), for the table benchmarks `micro` and `linkbench`;
//! * [`tarantool`]: Tarantool Vinyl, for `micro`; it runs the workload itself, as a Lua
//!   script in its own process, so it has no in-process adapter;
//! * `rocksdb`: RocksDB, for `kv` (only with the `rocksdb` feature).
//!
//! Two capabilities, one trait each:
//!
//! * [`TableEngine`]: a database holding one table benchmark's tables, driven in this
//!   process by client sessions ([`Session`]). The benchmark is a type parameter
//!   ([`TableBench`]): it says what a client sends and which counters the engine reports,
//!   and an engine implements the trait once for each benchmark it serves (the
//!   benchmark's requests in the engine's own terms: Strata transactions, SQL).
//!   `churn` drives Strata alone and uses [`strata::StrataTables`] directly.
//! * [`KvEngine`]: a key-value store for `kv` (Strata's default keyspace, RocksDB), with
//!   [`open_kv`] to open one by name.

pub mod sqlite;
pub mod strata;
pub mod tarantool;

#[cfg(feature = "rocksdb")]
pub mod rocksdb;

use std::path::Path;

use crate::BenchResult;
use crate::kv::KvConfig;

/// A table benchmark, as far as engines are concerned: the requests its clients send
/// and the counters it reads from an engine.
pub trait TableBench {
    /// One client request, applied as one transaction (or as few as the engine allows).
    type Request<'a>;
    /// What a request returned.
    type Reply;
    /// Counters read once a second while clients run (cheap; absent ones default).
    type Probe;
    /// Counters read once at the end of a run.
    type Stats;
}

/// A database holding benchmark `B`'s tables, opened fresh in a directory.
pub trait TableEngine<B: TableBench>: Sync {
    /// A client connection, used by one thread.
    fn session(&self) -> BenchResult<Box<dyn Session<B> + '_>>;
    /// Loader threads worth using for `requested` (SQLite serializes writers: 1).
    fn load_threads(&self, requested: usize) -> usize {
        requested
    }
    /// After the load: persist it (flush and wait for compactions, or checkpoint) and
    /// take the baseline of the counters, which then cover the run only.
    fn settle(&self) -> BenchResult<()>;
    /// Counters for one sample.
    fn probe(&self) -> B::Probe;
    /// Counters at the end of the run.
    fn stats(&self) -> BenchResult<B::Stats>;
}

/// One client connection of benchmark `B`.
pub trait Session<B: TableBench>: Send {
    /// Executes one request.
    fn run(&mut self, request: B::Request<'_>) -> BenchResult<B::Reply>;
}

/// One write of a key-value batch.
#[derive(Debug, Clone, Copy)]
pub enum WriteOp<'a> {
    /// Insert or overwrite `key` with `value`.
    Put(&'a [u8], &'a [u8]),
    /// Delete `key`.
    Delete(&'a [u8]),
}

/// Work counters of a key-value engine, cumulative since open; phases report
/// differences.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct KvStats {
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

/// A key-value engine under test (`kv`). Both engines get the same settings from
/// [`KvConfig`]: memtable size, bloom bits, block size, block cache, size ratio,
/// background threads, WAL on, no compression. Every method may be called from many
/// threads.
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
    fn stats(&self) -> BenchResult<KvStats>;
}

/// Key-value engine names `kv --engine` accepts.
pub const KV_ENGINES: [&str; 2] = ["strata", "rocksdb"];

/// Checks `kv --engine` names before anything runs: unknown names, and `rocksdb` in a
/// build without the `rocksdb` feature.
pub fn check_kv_engines(names: &[String]) -> BenchResult<()> {
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
            other => return Err(format!("unknown engine {other:?} (known: {})", KV_ENGINES.join(", ")).into()),
        }
    }
    Ok(())
}

/// Opens key-value engine `name` in `dir` (created if missing). `sync`: every write is
/// fsynced.
pub fn open_kv(name: &str, dir: &Path, cfg: &KvConfig, sync: bool) -> BenchResult<Box<dyn KvEngine>> {
    match name {
        "strata" => Ok(Box::new(strata::StrataKv::open(dir, cfg, sync)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(self::rocksdb::RocksKv::open(dir, cfg, sync)?)),
        other => {
            check_kv_engines(&[other.to_string()])?;
            Err(format!("engine {other:?} is not available").into())
        }
    }
}

/// Reads a child process's output line by line on a thread of its own, so the caller
/// can wait for lines with a timeout; the channel closes when the output ends. (For
/// engines run as child processes: Tarantool, and Strata in the crash test.)
pub fn line_reader(
    out: impl std::io::Read + Send + 'static,
) -> (std::sync::mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}
