//! `strata check`: verifies every file of the database (see `db::verify`: SSTable
//! blocks and checksums, the manifest against the directory, the logs), then that
//! every table's indexes agree with its rows:
//!
//! * every live row is in every secondary index;
//! * every secondary entry either validates against the primary or is provably dirty
//!   (its row is gone or has another key); eager tables must have no dirty entry,
//!   except tables with a delete key (entries of rows a `delete_where` killed, until
//!   compactions delete them: deferred invariant 12);
//! * unique indexes hold at most one valid entry per key;
//! * with `compact_first`, after a full compaction (no snapshots held), each secondary
//!   index of a table that emits deferred deletes (deferred, or with a delete key) holds
//!   exactly one entry per live row and no tombstone.
//!
//! Damage found while scanning a table (an unreadable block, an undecodable row or
//! index entry) is reported as a problem and the check goes on; it returns `Err` only
//! when it cannot run at all.

use std::sync::Arc;

use super::layer::Tables;
use super::layout::Layout;
use super::state::TableRuntime;
use crate::db::{Db, Keyspace, ManualHold, Snapshot};
use crate::error::Result;

/// What to verify.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Flush and compact everything first, then also verify that secondary indexes hold
    /// exactly one entry per live row. That count compares the files with the rows at
    /// the check's snapshot, so it expects no concurrent writes or ingests: their
    /// entries, flushed or ingested meanwhile, would be counted without their rows.
    pub compact_first: bool,
}

/// Findings for one secondary index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexCheck {
    /// Index name.
    pub name: String,
    /// Visible entries scanned.
    pub entries: u64,
    /// Entries that validate.
    pub valid: u64,
    /// Entries whose row version is gone (deferred garbage).
    pub dirty: u64,
    /// Live rows missing from the index.
    pub missing: u64,
    /// Entries in its SSTables (after compaction, when requested).
    pub file_entries: u64,
}

/// Findings for one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableCheck {
    /// Table name.
    pub name: String,
    /// Live rows.
    pub rows: u64,
    /// Per secondary index.
    pub indexes: Vec<IndexCheck>,
}

/// The result of a check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// What the file pass read.
    pub files: crate::db::FilesCheck,
    /// Per table.
    pub tables: Vec<TableCheck>,
    /// Every inconsistency found (empty when the database is consistent).
    pub problems: Vec<String>,
}

impl CheckReport {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in &self.tables {
            writeln!(f, "table {}: {} rows", t.name, t.rows)?;
            for i in &t.indexes {
                writeln!(
                    f,
                    "  index {}: {} entries ({} valid, {} dirty), {} missing, {} in files",
                    i.name, i.entries, i.valid, i.dirty, i.missing, i.file_entries
                )?;
            }
        }
        writeln!(f, "{}", self.files)?;
        if self.problems.is_empty() {
            write!(f, "ok")
        } else {
            for p in &self.problems {
                writeln!(f, "PROBLEM: {p}")?;
            }
            write!(f, "{} problem(s)", self.problems.len())
        }
    }
}

/// Checks every table of `db`.
pub fn check(db: &Db, opts: CheckOptions) -> Result<CheckReport> {
    let inner = db.inner().clone();
    // Counted as a manual compaction for the whole check, so that no background round
    // slips new files in between the full compaction and the counting of its result
    // (writes and ingests are the caller's to hold off: `CheckOptions::compact_first`).
    let _hold = opts.compact_first.then(|| ManualHold::new(&inner));
    if opts.compact_first {
        db.compact_range()?;
    }
    let tables: Vec<TableRuntime> = Tables::of(&inner)?.catalog().tables.values().cloned().collect();
    let mut problems = Vec::new();
    let files = crate::db::verify_files(&inner, &mut problems)?;
    let mut report = CheckReport {
        files,
        problems,
        ..Default::default()
    };
    for rt in tables {
        let mut tc = TableCheck {
            name: rt.layout.name.clone(),
            ..Default::default()
        };
        if let Err(e) = check_table(db, &rt.layout, opts, &mut tc, &mut report.problems) {
            // Damage stops this table's scan, not the check.
            report
                .problems
                .push(format!("table {}: check stopped: {e}", rt.layout.name));
        }
        report.tables.push(tc);
    }
    Ok(report)
}

fn check_table(
    db: &Db,
    layout: &Arc<Layout>,
    opts: CheckOptions,
    tc: &mut TableCheck,
    problems: &mut Vec<String>,
) -> Result<()> {
    let inner = db.inner().clone();
    let snap = Snapshot::new(inner.clone());
    let ks = |id: u32| Keyspace::unnamed(inner.clone(), id);
    let primary = ks(layout.primary);
    let ready: Vec<_> = layout.indexes.iter().filter(|i| !i.building).collect();
    tc.indexes = ready
        .iter()
        .map(|i| IndexCheck {
            name: i.name.clone(),
            ..Default::default()
        })
        .collect();
    let mut scan = snap.scan(&primary, ..)?;
    while let Some(e) = scan.next_versioned() {
        let (pk, _, bytes) = e?;
        tc.rows += 1;
        let row = match layout.decode(&bytes) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("table {}: undecodable row: {e}", layout.name));
                continue;
            }
        };
        for (ix, ic) in ready.iter().zip(tc.indexes.iter_mut()) {
            let key = layout.secondary_key(ix, &row, &pk);
            if snap.get(&ks(ix.keyspace), &key)?.is_none() {
                ic.missing += 1;
                problems.push(format!(
                    "table {}: a row is missing from index {}",
                    layout.name, ix.name
                ));
            }
        }
    }
    for (ix, ic) in ready.iter().zip(tc.indexes.iter_mut()) {
        let mut last_unique: Option<Vec<u8>> = None;
        let mut scan = snap.scan(&ks(ix.keyspace), ..)?;
        while let Some(e) = scan.next_versioned() {
            let (key, seq, _) = e?;
            ic.entries += 1;
            let Ok((ikey, pk)) = layout.split_secondary(ix, &key) else {
                problems.push(format!(
                    "table {}: index {} holds an undecodable entry",
                    layout.name, ix.name
                ));
                continue;
            };
            let valid = match snap.get_versioned(&primary, pk)? {
                Some((row_seq, bytes)) => match layout.decode(&bytes) {
                    Ok(row) => {
                        let mut k = Vec::new();
                        ix.shape.encode_row_key(&row, &mut k);
                        row_seq == seq || k == ikey
                    }
                    // Reported by the row pass.
                    Err(_) => false,
                },
                None => false,
            };
            if valid {
                ic.valid += 1;
                let has_null = match ix.shape.decode(ikey) {
                    Ok(vals) => vals.iter().any(|v| v.is_null()),
                    Err(_) => {
                        problems.push(format!(
                            "table {}: index {} holds an undecodable key",
                            layout.name, ix.name
                        ));
                        continue;
                    }
                };
                if ix.unique && !has_null {
                    if last_unique.as_deref() == Some(ikey) {
                        problems.push(format!(
                            "table {}: unique index {} holds a duplicate key",
                            layout.name, ix.name
                        ));
                    }
                    last_unique = Some(ikey.to_vec());
                }
            } else {
                ic.dirty += 1;
                if !layout.deferred() && layout.schema.delete_key.is_none() {
                    problems.push(format!(
                        "table {}: eager index {} holds a stale entry",
                        layout.name, ix.name
                    ));
                }
            }
        }
        let sv = inner.current();
        if let Some(tree) = sv.version.keyspace(ix.keyspace) {
            ic.file_entries = tree.files().map(|f| f.meta.entries).sum();
            if opts.compact_first && (layout.deferred() || layout.schema.delete_key.is_some()) {
                let tombstones: u64 = tree.files().map(|f| f.meta.tombstones).sum();
                if ic.file_entries != tc.rows || tombstones != 0 {
                    problems.push(format!(
                        "table {}: after full compaction index {} holds {} entries ({} tombstones) for {} rows",
                        layout.name, ix.name, ic.file_entries, tombstones, tc.rows
                    ));
                }
            }
        }
    }
    Ok(())
}
