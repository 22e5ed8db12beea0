//! What `linkbench` asks of an engine ([`crate::engines::TableEngine`]): its requests,
//! and the counters engines report.

use serde::Serialize;

use super::model::{Count, Link, Node};
use super::workload::Op;
use crate::BenchResult;
use crate::engines::TableBench;

/// `linkbench` as a table benchmark: clients load rows and execute requests; engines
/// report [`Counters`] (since the load was settled) once a second and at the end.
pub struct LinkBench;

impl TableBench for LinkBench {
    type Request<'a> = Request<'a>;
    type Reply = OpResult;
    type Probe = Counters;
    type Stats = Counters;
}

/// One client request.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// Loads rows (one transaction per table, or one in all where the engine can);
    /// replies 0 rows.
    Load {
        nodes: &'a [Node],
        links: &'a [Link],
        counts: &'a [Count],
    },
    /// Executes one request as one transaction (or as few as the engine allows).
    Op(&'a Op),
}

/// An engine session's load: nodes, links and counts.
pub type LoadFn<S> = fn(&mut S, &[Node], &[Link], &[Count]) -> BenchResult<()>;

impl Request<'_> {
    /// Runs the request on session `s` of an engine: `load` for [`Request::Load`] (0
    /// rows), `exec` (rows read or written) for [`Request::Op`].
    pub fn dispatch<S>(
        self,
        s: &mut S,
        load: LoadFn<S>,
        exec: fn(&mut S, &Op) -> BenchResult<u64>,
    ) -> BenchResult<OpResult> {
        let rows = match self {
            Request::Load { nodes, links, counts } => {
                load(s, nodes, links, counts)?;
                0
            }
            Request::Op(op) => exec(s, op)?,
        };
        Ok(OpResult { rows })
    }
}

/// Strata settings the user may change (`Options` fields; printed in the notes).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// `Options.block_cache_bytes`.
    pub cache_bytes: usize,
    /// `Options.memtable_budget`.
    pub memtable_bytes: usize,
    /// `Options.direct_reads`.
    pub direct_reads: bool,
}

/// What a request returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpResult {
    /// Rows read (reads) or written (writes).
    pub rows: u64,
}

/// Work counters of a run (absent where the engine has no such notion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counters {
    /// Old-row reads done only to maintain secondary indexes (eager REPLACE/DELETE).
    pub hidden_reads: Option<u64>,
    /// Primary-key reads of INSERT (uniqueness).
    pub unique_check_reads: Option<u64>,
    /// Old-row reads of UPDATE.
    pub update_reads: Option<u64>,
    /// Primary lookups made by secondary selects (one per index entry visited).
    pub primary_lookups: Option<u64>,
    /// Rows the secondary selects returned.
    pub secondary_hits: Option<u64>,
    /// Dirty secondary entries skipped (deferred mode).
    pub dirty_hits_skipped: Option<u64>,
    /// Deferred deletes sent to the link index by flushes and compactions.
    pub deferred_deletes: Option<u64>,
    /// Memtable flushes.
    pub flushes: Option<u64>,
    /// Compactions.
    pub compactions: Option<u64>,
    /// Writer stalls and the microseconds spent in them.
    pub stalls: Option<u64>,
    pub stall_micros: Option<u64>,
    /// Bytes on disk at the end.
    pub bytes_on_disk: Option<u64>,
    /// Entries of the link index's SSTables at the end.
    pub link_index_entries: Option<u64>,
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) | (None, x) => x,
    }
}

impl Counters {
    /// Sums two runs' counters (end-state sizes: the later run's).
    pub fn merge(&self, o: &Counters) -> Counters {
        Counters {
            hidden_reads: add(self.hidden_reads, o.hidden_reads),
            unique_check_reads: add(self.unique_check_reads, o.unique_check_reads),
            update_reads: add(self.update_reads, o.update_reads),
            primary_lookups: add(self.primary_lookups, o.primary_lookups),
            secondary_hits: add(self.secondary_hits, o.secondary_hits),
            dirty_hits_skipped: add(self.dirty_hits_skipped, o.dirty_hits_skipped),
            deferred_deletes: add(self.deferred_deletes, o.deferred_deletes),
            flushes: add(self.flushes, o.flushes),
            compactions: add(self.compactions, o.compactions),
            stalls: add(self.stalls, o.stalls),
            stall_micros: add(self.stall_micros, o.stall_micros),
            bytes_on_disk: o.bytes_on_disk.or(self.bytes_on_disk),
            link_index_entries: o.link_index_entries.or(self.link_index_entries),
        }
    }

    /// Primary lookups per row returned by secondary selects.
    pub fn lookups_per_row(&self) -> Option<f64> {
        match (self.primary_lookups, self.secondary_hits) {
            (Some(l), Some(h)) if h > 0 => Some(l as f64 / h as f64),
            _ => None,
        }
    }
}
