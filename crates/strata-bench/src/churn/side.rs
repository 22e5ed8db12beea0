//! One side of the comparison: a database holding the micro table in one maintenance
//! mode, and the counters read from it once a second.

use std::path::Path;
use std::time::Duration;

use strata::Options;
use strata::table::Table;

use crate::BenchResult;
use crate::engines::strata::{MicroSettings, StrataTables, paper_options};

/// Index the selects go through (on `f2`).
pub const SELECT_INDEX: &str = "i2";

/// Delete-aware compaction settings of the deferred side.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct DeleteSettings {
    /// `Options.delete_persistence_threshold` (FADE), seconds.
    pub persistence_secs: Option<f64>,
    /// `Options.tombstone_density_trigger`.
    pub density_trigger: Option<f64>,
}

/// The engine options of a mode: the micro paper settings, plus `deletes` if given.
pub fn options(settings: MicroSettings, deletes: Option<DeleteSettings>) -> Options {
    let mut o = paper_options(settings);
    if let Some(d) = deletes {
        o.delete_persistence_threshold = d.persistence_secs.map(Duration::from_secs_f64);
        o.tombstone_density_trigger = d.density_trigger;
    }
    o
}

/// An open database with table `test` in one mode.
pub struct Side {
    /// The side's name in reports: its mode (`eager`, `deferred`), or `eager-2` /
    /// `deferred-2` for the second side of an A/A control.
    pub mode: &'static str,
    /// The database with table `test`.
    pub tables: StrataTables,
    /// Bytes per entry of each secondary index right after the preload (which left no
    /// garbage: one entry per row), summed over the indexes: the size a clean index
    /// takes per live row.
    pub clean_bytes_per_row: f64,
    /// Counters when the timed phase started.
    pub base: Counters,
}

/// Monotonic counters of one side.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Selects through the select index.
    pub reads: u64,
    /// Rows it returned.
    pub hits: u64,
    /// Dirty entries it skipped.
    pub dirty: u64,
    /// Primary lookups of all secondary selects of the table.
    pub primary_lookups: u64,
    /// Blind writes (deferred mode).
    pub blind_writes: u64,
    /// Deferred deletes emitted into all indexes.
    pub deferred_deletes: u64,
    /// Compactions.
    pub compactions: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
    /// Data blocks read from files (block cache misses), all readers of the database.
    pub block_misses: u64,
}

/// What one reading of a side's stats gives besides the counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// Bytes of the secondary indexes' SSTables.
    pub secondary_bytes: u64,
    /// Bytes of all SSTables.
    pub disk_bytes: u64,
    /// Age of the oldest pending purge (deferred), seconds.
    pub oldest_pending_purge_secs: Option<f64>,
}

impl Side {
    /// Creates a fresh database in `dir` with the micro table in `mode`, named `label`.
    pub fn open(dir: &Path, label: &'static str, mode: &str, opts: Options) -> BenchResult<Side> {
        Ok(Side {
            mode: label,
            tables: StrataTables::open_micro(dir, mode, opts)?,
            clean_bytes_per_row: 0.0,
            base: Counters::default(),
        })
    }

    /// After the preload: flush, wait for compactions, and measure the clean index size.
    pub fn settle(&mut self, rows: u64) -> BenchResult<()> {
        self.tables.settle()?;
        let t = self.table().stats()?;
        let bytes: u64 = t.indexes.iter().map(|i| i.bytes).sum();
        self.clean_bytes_per_row = bytes as f64 / rows.max(1) as f64;
        Ok(())
    }

    /// Table `test`.
    pub fn table(&self) -> &Table {
        self.tables.table(0)
    }

    /// Counters and shape now.
    pub fn read(&self) -> BenchResult<(Counters, Shape)> {
        if let Some(e) = self.tables.db().stats().background_error {
            return Err(format!("{}: background error: {e}", self.mode).into());
        }
        let t = self.table().stats()?;
        let s = self.tables.db().stats();
        let ix = t.indexes.iter().find(|i| i.name == SELECT_INDEX);
        let c = Counters {
            reads: ix.map_or(0, |i| i.reads),
            hits: ix.map_or(0, |i| i.hits),
            dirty: ix.map_or(0, |i| i.dirty_hits_skipped),
            primary_lookups: t.primary_lookups,
            blind_writes: t.blind_writes,
            deferred_deletes: t.deferred_deletes_emitted,
            compactions: s.compactions,
            compaction_bytes: s.compaction_bytes_written,
            block_misses: s.block_cache_misses,
        };
        let shape = Shape {
            secondary_bytes: t.indexes.iter().map(|i| i.bytes).sum(),
            disk_bytes: s.total_bytes(),
            oldest_pending_purge_secs: t.oldest_pending_purge_age_micros.map(|m| m as f64 / 1e6),
        };
        Ok((c, shape))
    }
}
