//! Emission: the row versions a primary flush or compaction drops become
//! `DeferredDelete(secondary key ++ pk, version seqno)` in every secondary index
//! (invariants 2 and 3 of [`super`]).
//!
//! The engine asks the table layer's [`Registry`] (its `compaction::Obligations`) for a
//! [`DeferredDeleteCollector`] whenever it flushes or compacts a deferred table's
//! primary keyspace; the collector sorts the deletes per secondary keyspace (within a
//! memory bound, spilling to temporary runs past it) and the engine places them, in the
//! same manifest edit as the primary's output (`compaction::obligations`).
//!
//! Versions the purge thread cleaned already are recorded in [`PurgedVersions`]; a
//! compaction that drops one of them emits nothing for it (invariant 6).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::compaction::obligations::{Collector, Obligations};
use crate::compaction::sorter::{ExternalSorter, SortedStream};
use crate::compaction::{DropSink, JobContext};
use crate::error::Result;
use crate::key::{SeqNo, ValueKind, encode_internal_key};

/// Extracts the secondary index keys of a stored row.
pub trait SecondaryKeys: Send + Sync {
    /// Appends `(secondary keyspace, secondary key ++ pk)` for every secondary index of
    /// the row stored under primary key `pk` with encoded `row`.
    fn secondary_keys(&self, pk: &[u8], row: &[u8], out: &mut Vec<(u32, Vec<u8>)>) -> Result<()>;
}

/// The deferred tables of a catalog, as flushes and compactions see them.
#[derive(Clone, Default)]
pub struct Registry {
    /// Primary keyspaces of deferred tables, with their key extractors.
    pub primaries: HashMap<u32, Arc<dyn SecondaryKeys>>,
    /// Secondary keyspaces of deferred tables (they receive deferred deletes).
    pub secondaries: HashSet<u32>,
    /// Every keyspace of every table: selects and checks compare the seqnos of index
    /// entries and rows, so compactions must keep them.
    pub seqno_readers: HashSet<u32>,
    /// Versions the purge thread cleaned; shared by every registry of one database.
    pub purged: Arc<PurgedVersions>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("primaries", &self.primaries.keys().collect::<Vec<_>>())
            .field("secondaries", &self.secondaries)
            .finish()
    }
}

impl Obligations for Registry {
    fn owes(&self, ks: u32) -> bool {
        self.primaries.contains_key(&ks)
    }

    fn receives(&self, ks: u32) -> bool {
        self.secondaries.contains(&ks)
    }

    fn reads_seqnos(&self, ks: u32) -> bool {
        self.seqno_readers.contains(&ks)
    }

    fn collector(&self, ks: u32, ctx: &JobContext, sort_memory: usize, compaction: bool) -> Option<Box<dyn Collector>> {
        let indexer = self.primaries.get(&ks)?.clone();
        let c = DeferredDeleteCollector::new(indexer, ctx.clone(), sort_memory);
        // Only compactions meet purged versions: the purge cleans rows found on disk.
        Some(Box::new(if compaction {
            c.sparing(ks, self.purged.clone())
        } else {
            c
        }))
    }
}

/// Versions recorded at most; past it the record starts over. Forgetting is safe: a
/// compaction then emits deferred deletes the purge already wrote, which is what it did
/// before versions were recorded at all (duplicates annihilate).
const PURGED_CAP: usize = 1 << 16;

/// A row version of a primary keyspace: `(keyspace, seqno)`.
type VersionId = (u32, SeqNo);

/// Row versions `(primary keyspace, pk, seqno)` whose secondary entries all have their
/// deferred deletes committed already. Those deletes may sit in a WAL not yet synced,
/// so a compaction that spares a version syncs the WAL before its result is installed.
/// Kept in memory only: after a restart compactions emit the duplicates.
#[derive(Debug, Default)]
pub struct PurgedVersions {
    /// `(keyspace, seqno)` -> primary key. Every operation has its own seqno, so the
    /// pair names one version; the key is kept to check it, and a lookup allocates
    /// nothing (compactions ask for every version they drop).
    set: Mutex<HashMap<VersionId, Box<[u8]>>>,
    /// `set.len()`, readable without the lock (compactions skip the lookup at 0).
    len: AtomicUsize,
    /// Per primary keyspace, versions a compaction dropped without emitting.
    spared: Mutex<BTreeMap<u32, u64>>,
}

impl PurgedVersions {
    /// Records that every secondary entry of `(ks, pk, seq)` has its deferred delete
    /// written. REQUIRES: those deletes are committed.
    pub fn record(&self, ks: u32, pk: &[u8], seq: SeqNo) {
        let mut set = self.set.lock();
        if set.len() >= PURGED_CAP {
            set.clear();
        }
        set.insert((ks, seq), pk.into());
        self.len.store(set.len(), Ordering::Relaxed);
    }

    /// True (and forgets it) if `(ks, pk, seq)` was recorded.
    pub fn take(&self, ks: u32, pk: &[u8], seq: SeqNo) -> bool {
        if self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut set = self.set.lock();
        let hit = set.get(&(ks, seq)).is_some_and(|k| **k == *pk);
        if hit {
            set.remove(&(ks, seq));
            self.len.store(set.len(), Ordering::Relaxed);
        }
        drop(set);
        if hit {
            *self.spared.lock().entry(ks).or_default() += 1;
        }
        hit
    }

    /// Versions recorded and not yet taken.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// True when nothing is recorded.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Versions of primary keyspace `ks` that compactions dropped without emitting.
    pub fn spared(&self, ks: u32) -> u64 {
        self.spared.lock().get(&ks).copied().unwrap_or(0)
    }
}

/// A [`DropSink`] that turns dropped primary versions into sorted deferred deletes.
pub struct DeferredDeleteCollector {
    indexer: Arc<dyn SecondaryKeys>,
    /// The primary keyspace and the versions of it already purged.
    purged: Option<(u32, Arc<PurgedVersions>)>,
    /// Versions dropped without emitting, because they were purged.
    spared: u64,
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
            purged: None,
            spared: 0,
            ctx,
            limit: memory_limit,
            sorters: BTreeMap::new(),
            scratch: Vec::new(),
            ikey: Vec::new(),
        }
    }

    /// Emits nothing for the versions of primary keyspace `ks` that `purged` holds.
    pub fn sparing(mut self, ks: u32, purged: Arc<PurgedVersions>) -> Self {
        self.purged = Some((ks, purged));
        self
    }
}

impl Collector for DeferredDeleteCollector {
    fn spared(&self) -> u64 {
        self.spared
    }

    fn finish(self: Box<Self>) -> Result<BTreeMap<u32, (u64, SortedStream)>> {
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
        if let Some((ks, purged)) = &self.purged
            && purged.take(*ks, pk, seq)
        {
            self.spared += 1;
            return Ok(());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purged_versions_are_taken_once_per_keyspace_and_version_and_forgotten_past_the_cap() {
        let p = PurgedVersions::default();
        assert!(!p.take(1, b"k", 5), "nothing recorded");
        p.record(1, b"k", 5);
        assert!(!p.take(2, b"k", 5), "another keyspace");
        assert!(!p.take(1, b"k", 6), "another version");
        assert!(!p.take(1, b"j", 5), "another key");
        assert!(p.take(1, b"k", 5));
        assert!(!p.take(1, b"k", 5), "taken once");
        assert_eq!((p.spared(1), p.spared(2)), (1, 0));
        for i in 0..PURGED_CAP as u64 {
            p.record(1, &i.to_be_bytes(), 100 + i);
        }
        assert_eq!(p.len(), PURGED_CAP);
        p.record(1, b"new", 1);
        assert_eq!(p.len(), 1, "past the cap the record starts over");
        assert!(p.take(1, b"new", 1));
        assert!(p.is_empty());
    }
}
