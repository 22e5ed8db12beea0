//! The in-memory side of the catalog: resolved layouts, per-table counters and locks.
//!
//! Layouts are rebuilt from the manifest's catalog after every catalog change; counters
//! and locks live per table name so they survive those rebuilds.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::catalog::{load_tables, registry_for};
use super::layout::Layout;
use crate::compaction::DeferredRegistry;
use crate::error::Result;
use crate::version::Version;

const STRIPES: usize = 4096;

/// A fixed array of mutexes addressed by key hash.
pub(crate) struct LockStripes(Vec<Mutex<()>>);

impl LockStripes {
    fn new() -> Self {
        LockStripes((0..STRIPES).map(|_| Mutex::new(())).collect())
    }

    /// The stripe of a key.
    pub fn stripe(tag: u32, key: &[u8]) -> usize {
        (crc32c::crc32c_append(tag, key) as usize) % STRIPES
    }

    /// Locks the given stripes in ascending order (deadlock-free).
    pub fn lock_all(&self, mut stripes: Vec<usize>) -> Vec<MutexGuard<'_, ()>> {
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .iter()
            .filter_map(|s| self.0.get(*s))
            .map(|m| m.lock())
            .collect()
    }

    /// Tries to lock one stripe without blocking.
    pub fn try_lock(&self, stripe: usize) -> Option<MutexGuard<'_, ()>> {
        self.0.get(stripe).and_then(|m| m.try_lock())
    }
}

/// Counters of one secondary index.
#[derive(Debug, Default)]
pub struct IndexCounters {
    /// Selects through the index.
    pub reads: AtomicU64,
    /// Entries returned after validation.
    pub hits: AtomicU64,
    /// Entries skipped as dirty (their row version is gone).
    pub dirty: AtomicU64,
}

/// Counters of one table.
#[derive(Debug, Default)]
pub struct TableCounters {
    /// Old-row reads done only to maintain secondary indexes (eager REPLACE/DELETE).
    pub hidden_reads: AtomicU64,
    /// Reads that check uniqueness (INSERT of the primary key, unique indexes).
    pub unique_check_reads: AtomicU64,
    /// Old-row reads by UPDATE.
    pub update_reads: AtomicU64,
    /// Statements committed.
    pub statements: AtomicU64,
    /// Primary lookups made to validate secondary hits.
    pub primary_lookups: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// State of a table that outlives catalog rebuilds.
pub(crate) struct TableState {
    pub counters: TableCounters,
    pub indexes: Mutex<HashMap<String, Arc<IndexCounters>>>,
    pub pk_locks: LockStripes,
    pub unique_locks: LockStripes,
}

impl TableState {
    fn new() -> Self {
        TableState {
            counters: TableCounters::default(),
            indexes: Mutex::new(HashMap::new()),
            pk_locks: LockStripes::new(),
            unique_locks: LockStripes::new(),
        }
    }

    /// Counters of an index, created on first use.
    pub fn index(&self, name: &str) -> Arc<IndexCounters> {
        self.indexes.lock().entry(name.to_string()).or_default().clone()
    }
}

/// A table as the running database sees it.
#[derive(Clone)]
pub(crate) struct TableRuntime {
    pub layout: Arc<Layout>,
    pub state: Arc<TableState>,
}

/// Tables and the deferred registry, rebuilt together.
pub(crate) struct Catalog {
    pub tables: BTreeMap<String, TableRuntime>,
    pub registry: Arc<DeferredRegistry>,
}

impl Catalog {
    /// Builds the catalog of `version`, reusing states by table name.
    pub fn build(version: &Version, states: &Mutex<HashMap<String, Arc<TableState>>>) -> Result<Catalog> {
        let defs = load_tables(version)?;
        let registry = Arc::new(registry_for(&defs)?);
        let mut states = states.lock();
        states.retain(|name, _| defs.contains_key(name));
        let mut tables = BTreeMap::new();
        for (name, def) in &defs {
            let state = states
                .entry(name.clone())
                .or_insert_with(|| Arc::new(TableState::new()))
                .clone();
            tables.insert(
                name.clone(),
                TableRuntime {
                    layout: Arc::new(Layout::new(def)?),
                    state,
                },
            );
        }
        Ok(Catalog { tables, registry })
    }
}
