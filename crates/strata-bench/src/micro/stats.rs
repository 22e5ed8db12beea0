//! What `micro` asks of an in-process engine ([`crate::engines::TableEngine`]): its
//! requests, and the counters engines report.

use serde::Serialize;

use super::workload::Stmt;
use crate::engines::TableBench;

/// `micro` as a table benchmark: clients commit batches of REPLACE/DELETE statements;
/// engines report [`Probe`] once a second and [`EngineStats`] at the end.
pub struct Micro;

impl TableBench for Micro {
    /// One batch, applied atomically (one transaction).
    type Request<'a> = &'a [Stmt];
    type Reply = ();
    type Probe = Probe;
    type Stats = EngineStats;
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
