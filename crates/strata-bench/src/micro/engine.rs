//! The one small trait an in-process engine implements for the micro harness, and the
//! counters engines report.

use serde::Serialize;

use super::workload::Stmt;
use crate::BenchResult;

/// A store driven in this process: sessions commit batches, `probe` is read by the
/// per-second sampler, `finish` once at the end of the run.
pub trait Engine: Sync {
    /// A client connection, used by one thread.
    fn session(&self) -> BenchResult<Box<dyn Session + '_>>;
    /// After the preload: persist it (flush, wait for compactions, checkpoint).
    fn settle(&self) -> BenchResult<()>;
    /// Cheap counters for one sample.
    fn probe(&self) -> Probe;
    /// Counters at the end of the run.
    fn finish(&self) -> BenchResult<EngineStats>;
}

/// One client connection.
pub trait Session: Send {
    /// Applies `batch` atomically (one transaction).
    fn commit(&mut self, batch: &[Stmt]) -> BenchResult<()>;
}

/// Counters sampled every second (absent where an engine has no such notion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Probe {
    /// Memtable flushes (Vinyl: dumps).
    pub flushes: Option<u64>,
    /// Compactions.
    pub compactions: Option<u64>,
    /// Entries (statements) on disk, over all keyspaces / indexes.
    pub entries: Option<u64>,
    /// Bytes on disk.
    pub bytes: Option<u64>,
}

/// Counters at the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EngineStats {
    /// Shape and work counters, as in [`Probe`].
    #[serde(flatten)]
    pub probe: Probe,
    /// Old-row reads done only for index maintenance.
    pub hidden_reads: Option<u64>,
    /// Deferred deletes sent to secondary indexes by flushes and compactions.
    pub deferred_deletes: Option<u64>,
    /// (flush + compaction bytes written) / user bytes written.
    pub write_amplification: Option<f64>,
    /// Times writers stalled waiting for flushes or compactions.
    pub stalls: Option<u64>,
    /// Seconds writers spent stalled (summed over writers).
    pub stall_secs: Option<f64>,
}
