//! Strata with the paper's engine settings, one table in eager or deferred mode.

use std::path::Path;
use std::sync::Mutex;

use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::{Row as StrataRow, Table};
use strata::{Db, Options, SyncPolicy};

use super::engine::{Engine, EngineStats, Probe, Session};
use super::workload::{Row, Stmt};
use crate::BenchResult;

/// Cache and I/O settings the user may change.
#[derive(Debug, Clone, Copy)]
pub struct StrataSettings {
    /// `Options.block_cache_bytes`.
    pub cache_bytes: usize,
    /// `Options.direct_reads`.
    pub direct_reads: bool,
}

/// The paper's settings: memtable 128 MiB, size ratio 3.5, 2 runs per level, bloom 5 %,
/// 8 KiB pages, 2 background threads, WAL written but not fsynced.
pub fn paper_options(s: StrataSettings) -> Options {
    Options {
        memtable_budget: 128 << 20,
        size_ratio: 3.5,
        runs_per_level: 2,
        bloom_fpr: 0.05,
        block_size: 8 << 10,
        background_threads: 2,
        block_cache_bytes: s.cache_bytes,
        direct_reads: s.direct_reads,
        sync: SyncPolicy::None,
        ..Options::default()
    }
}

/// The table's schema text in `mode` (`eager` or `deferred`).
pub fn schema_text(mode: &str) -> String {
    format!(
        "table test (f1 u64, f2 u64, f3 u64, f4 u64, f5 u64) primary key (f1) \
         index i2 (f2) index i3 (f3) index i4 (f4) index i5 (f5) {mode}"
    )
}

/// An open database with table `test`.
pub struct StrataEngine {
    db: Db,
    table: Table,
    /// Counters when the preload was settled: reported counters cover the run only.
    baseline: Mutex<Baseline>,
}

/// Monotonic counters subtracted from later readings.
#[derive(Debug, Clone, Copy, Default)]
struct Baseline {
    flushes: u64,
    compactions: u64,
    hidden_reads: u64,
    deferred_deletes: u64,
    user_bytes: u64,
    written_bytes: u64,
    stalls: u64,
    stall_micros: u64,
}

impl StrataEngine {
    /// Creates a fresh database in `dir` with table `test` in `mode`.
    pub fn open(dir: &Path, mode: &str, s: StrataSettings) -> BenchResult<StrataEngine> {
        let db = Db::open(dir, paper_options(s))?;
        let table = db.create_table(Schema::parse(&schema_text(mode))?)?;
        Ok(StrataEngine {
            db,
            table,
            baseline: Mutex::new(Baseline::default()),
        })
    }

    fn counters(&self) -> BenchResult<Baseline> {
        let s = self.db.stats();
        let t = self.table.stats()?;
        Ok(Baseline {
            flushes: s.flushes,
            compactions: s.compactions,
            hidden_reads: t.hidden_reads,
            deferred_deletes: t.deferred_deletes_emitted,
            user_bytes: s.user_bytes_written,
            written_bytes: s.flush_bytes_written + s.compaction_bytes_written,
            stalls: s.stalls,
            stall_micros: s.stall_micros,
        })
    }

    fn baseline(&self) -> Baseline {
        self.baseline.lock().map(|b| *b).unwrap_or_default()
    }
}

fn row_values(r: &Row) -> StrataRow {
    r.iter().map(|v| Value::U64(*v)).collect()
}

struct StrataSession {
    table: Table,
}

/// Applies `batch` to `table` as one transaction (REPLACE and DELETE by primary key).
pub fn commit(table: &Table, batch: &[Stmt]) -> BenchResult<()> {
    let mut tx = table.transaction();
    for s in batch {
        match s {
            Stmt::Replace(r) => tx.replace(row_values(r)),
            Stmt::Delete(k) => tx.delete(vec![Value::U64(*k)]),
        };
    }
    tx.commit()?;
    Ok(())
}

impl Session for StrataSession {
    fn commit(&mut self, batch: &[Stmt]) -> BenchResult<()> {
        commit(&self.table, batch)
    }
}

impl Engine for StrataEngine {
    fn session(&self) -> BenchResult<Box<dyn Session + '_>> {
        Ok(Box::new(StrataSession {
            table: self.table.clone(),
        }))
    }

    fn settle(&self) -> BenchResult<()> {
        self.db.flush()?;
        self.db.wait_for_background()?;
        let now = self.counters()?;
        if let Ok(mut b) = self.baseline.lock() {
            *b = now;
        }
        Ok(())
    }

    fn probe(&self) -> Probe {
        let s = self.db.stats();
        let b = self.baseline();
        Probe {
            flushes: Some(s.flushes - b.flushes),
            compactions: Some(s.compactions - b.compactions),
            entries: Some(s.keyspaces.iter().map(|k| k.entries()).sum()),
            bytes: Some(s.total_bytes()),
        }
    }

    fn finish(&self) -> BenchResult<EngineStats> {
        if let Some(e) = self.db.stats().background_error {
            return Err(format!("background error: {e}").into());
        }
        let (b, now) = (self.baseline(), self.counters()?);
        let user = now.user_bytes - b.user_bytes;
        Ok(EngineStats {
            probe: self.probe(),
            hidden_reads: Some(now.hidden_reads - b.hidden_reads),
            deferred_deletes: Some(now.deferred_deletes - b.deferred_deletes),
            write_amplification: (user > 0).then(|| (now.written_bytes - b.written_bytes) as f64 / user as f64),
            stalls: Some(now.stalls - b.stalls),
            stall_secs: Some((now.stall_micros - b.stall_micros) as f64 / 1e6),
        })
    }
}
