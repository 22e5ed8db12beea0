//! The in-memory side of the catalog: resolved layouts, per-table counters and locks.
//!
//! Layouts are rebuilt from the manifest's catalog after every catalog change; counters
//! and locks live per table name so they survive those rebuilds.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::catalog::{load_tables, registry_for};
use super::deferred::emit::{PurgedVersions, Registry};
use super::layout::Layout;
use super::locks::{KeyLocks, LockStripes};
use crate::error::Result;
use crate::version::Version;

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
    /// Blind REPLACE and DELETE statements (deferred mode): each may leave a row version
    /// whose secondary entries await a deferred delete.
    pub blind_writes: AtomicU64,
    /// Blind writes that found the old row in a memtable and purged its secondary
    /// entries at commit.
    pub commit_purges: AtomicU64,
    /// Blind writes whose old row was on disk and whose changed secondary entries the
    /// purge thread deleted after commit (`deferred::purge`).
    pub background_purges: AtomicU64,
    /// Blind writes handed to the purge thread but dropped (queue full, snapshot held
    /// too long, error): compaction purges them.
    pub purges_dropped: AtomicU64,
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
    /// Per index, the (hits, dirty) totals seen at the last urgency check.
    pub seen: Mutex<HashMap<String, (u64, u64)>>,
    /// Pending purges are urgent until then (dirty reads seen recently).
    pub urgent_until: Mutex<Option<std::time::Instant>>,
    pub indexes: Mutex<HashMap<String, Arc<IndexCounters>>>,
    pub pk_locks: KeyLocks,
    pub unique_locks: LockStripes,
    /// When this state was made: the epoch of `last_secondary_read`.
    born: std::time::Instant,
    /// Microseconds after `born` of the last secondary select (0: none yet).
    last_secondary_read: AtomicU64,
}

/// Blind writes purge old secondary entries at commit while a secondary select was seen
/// this recently: purging costs the writer the deletes, and pays only when reads would
/// otherwise skip dirty entries. A write-only phase stays fully blind.
const PURGE_AT_COMMIT_AFTER_READS: std::time::Duration = std::time::Duration::from_secs(5);

impl TableState {
    pub(crate) fn new() -> Self {
        TableState {
            counters: TableCounters::default(),
            seen: Mutex::new(HashMap::new()),
            urgent_until: Mutex::new(None),
            indexes: Mutex::new(HashMap::new()),
            pk_locks: KeyLocks::new(),
            unique_locks: LockStripes::new(),
            born: std::time::Instant::now(),
            last_secondary_read: AtomicU64::new(0),
        }
    }

    /// Records that a secondary index of the table is being read.
    pub fn note_secondary_read(&self) {
        let now = self.born.elapsed().as_micros() as u64;
        self.last_secondary_read.store(now.max(1), Ordering::Relaxed);
    }

    /// Whether blind writes should purge old secondary entries found in the memtables.
    pub fn purge_at_commit(&self) -> bool {
        let last = self.last_secondary_read.load(Ordering::Relaxed);
        last != 0
            && (self.born.elapsed().as_micros() as u64).saturating_sub(last)
                <= PURGE_AT_COMMIT_AFTER_READS.as_micros() as u64
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
    /// `state`'s counters of each index of `layout`, by position: looked up once per
    /// layout rather than by name on every select.
    pub index_counters: Arc<[Arc<IndexCounters>]>,
}

/// Tables and the deferred registry, rebuilt together.
pub(crate) struct Catalog {
    pub tables: BTreeMap<String, TableRuntime>,
    pub registry: Arc<Registry>,
}

impl Catalog {
    /// No tables (before the first catalog is read).
    pub fn empty() -> Catalog {
        Catalog {
            tables: BTreeMap::new(),
            registry: Arc::new(Registry::default()),
        }
    }

    /// Builds the catalog of `version`, reusing states by table name.
    pub fn build(
        version: &Version,
        states: &Mutex<HashMap<String, Arc<TableState>>>,
        purged: &Arc<PurgedVersions>,
    ) -> Result<Catalog> {
        let defs = load_tables(version)?;
        let registry = Arc::new(registry_for(&defs, purged.clone())?);
        let mut states = states.lock();
        states.retain(|name, _| defs.contains_key(name));
        let mut tables = BTreeMap::new();
        for (name, def) in &defs {
            let state = states
                .entry(name.clone())
                .or_insert_with(|| Arc::new(TableState::new()))
                .clone();
            tables.insert(name.clone(), {
                let mut layout = Layout::new(def)?;
                for ix in &mut layout.indexes {
                    ix.filter = crate::db::filter_key::of(&version.meta, ix.keyspace)?;
                }
                TableRuntime {
                    index_counters: layout.indexes.iter().map(|i| state.index(&i.name)).collect(),
                    layout: Arc::new(layout),
                    state,
                }
            });
        }
        Ok(Catalog { tables, registry })
    }
}
