//! Deferred secondary deletes: when a flush or compaction of a deferred table's primary
//! keyspace drops a row version `V`, every secondary index gets a
//! `DeferredDelete(secondary key ++ pk, V.seqno)`.
//!
//! The deletes are sorted per secondary keyspace (within a memory bound, spilling to
//! temporary runs past it) and written as new level-0 runs of the secondary keyspaces,
//! installed in the same manifest edit as the primary's output: either both happen or
//! neither does, and a crash before the edit leaves the old files, which the next
//! compaction re-discovers.
//!
//! Invariant relied on by point lookups: a `DeferredDelete(k, s)` always lands in a run
//! at least as new as the run holding `Put(k, s)`. The put was flushed together with its
//! primary version (one memtable serves all keyspaces), and the delete's run is created
//! only after that version was on disk.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::job::DropSink;
use super::output::JobContext;
use super::sorter::{ExternalSorter, SortedStream};
use crate::error::Result;
use crate::key::{SeqNo, ValueKind, encode_internal_key};

/// Extracts the secondary index keys of a stored row (implemented by the table layer).
pub trait SecondaryKeys: Send + Sync {
    /// Appends `(secondary keyspace, secondary key ++ pk)` for every secondary index of
    /// the row stored under primary key `pk` with encoded `row`.
    fn secondary_keys(&self, pk: &[u8], row: &[u8], out: &mut Vec<(u32, Vec<u8>)>) -> Result<()>;
}

/// Which keyspaces take part in deferred index maintenance.
#[derive(Clone, Default)]
pub struct DeferredRegistry {
    /// Primary keyspaces of deferred tables, with their key extractors.
    pub primaries: HashMap<u32, Arc<dyn SecondaryKeys>>,
    /// Secondary keyspaces of deferred tables (they receive deferred deletes).
    pub secondaries: HashSet<u32>,
}

impl std::fmt::Debug for DeferredRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredRegistry")
            .field("primaries", &self.primaries.keys().collect::<Vec<_>>())
            .field("secondaries", &self.secondaries)
            .finish()
    }
}

/// A [`DropSink`] that turns dropped primary versions into sorted deferred deletes.
pub struct DeferredDeleteCollector {
    indexer: Arc<dyn SecondaryKeys>,
    ctx: JobContext,
    limit: usize,
    sorters: BTreeMap<u32, ExternalSorter>,
    scratch: Vec<(u32, Vec<u8>)>,
    ikey: Vec<u8>,
}

impl DeferredDeleteCollector {
    /// Collects with at most `memory_limit` bytes buffered in all.
    pub fn new(indexer: Arc<dyn SecondaryKeys>, ctx: JobContext, memory_limit: usize) -> Self {
        DeferredDeleteCollector {
            indexer,
            ctx,
            limit: memory_limit,
            sorters: BTreeMap::new(),
            scratch: Vec::new(),
            ikey: Vec::new(),
        }
    }

    /// The sorted deferred deletes per secondary keyspace, with their counts.
    pub fn finish(self) -> Result<BTreeMap<u32, (u64, SortedStream)>> {
        let mut out = BTreeMap::new();
        for (ks, s) in self.sorters {
            let n = s.len();
            out.insert(ks, (n, s.finish()?));
        }
        Ok(out)
    }
}

impl DropSink for DeferredDeleteCollector {
    fn dropped_put(&mut self, pk: &[u8], seq: SeqNo, row: &[u8]) -> Result<()> {
        self.scratch.clear();
        self.indexer.secondary_keys(pk, row, &mut self.scratch)?;
        let per_sorter = self.limit / self.scratch.len().max(1);
        for (ks, key) in self.scratch.drain(..) {
            let sorter = self
                .sorters
                .entry(ks)
                .or_insert_with(|| ExternalSorter::new(self.ctx.clone(), per_sorter));
            self.ikey.clear();
            encode_internal_key(&mut self.ikey, &key, seq, ValueKind::DeferredDelete);
            sorter.push(&self.ikey, &[])?;
        }
        Ok(())
    }
}
