//! Salvage: copy what can still be read from a damaged database into a new one (the
//! counterpart of LevelDB's `ldb repair` and SQLite's `.recover`; `strata repair`).
//!
//! The source is opened read-only (nothing in it changes) under a chosen
//! [`RecoveryMode`]; `SkipAnyCorruptedRecords` keeps every readable WAL record. Every
//! key-value keyspace is scanned into the new database; a damaged SSTable block stops a
//! scan with `Corruption` naming the file and block, and the scan resumes after that
//! block's last key (or, if the table's index is unreadable too, after the file's
//! largest key), so only the damaged key range is lost. Tables are re-created from
//! their schemas and their rows re-inserted through the table API, which rebuilds
//! every index consistently; a damaged block stops that table's copy. Every loss is
//! listed in the report. See `docs/design/recovery.md`.
//!
//! A source whose manifest state is not on disk (a missing SSTable, a stale manifest)
//! does not open, so it cannot be salvaged this way; the error names the file.

use std::ops::Bound;
use std::path::Path;

use crate::db::{DEFAULT_KEYSPACE, RESERVED_PREFIX};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::{Db, Options, RecoveryMode, WriteBatch};

/// What a salvage copied and what it lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Key-value keyspaces copied.
    pub keyspaces: u64,
    /// Keys copied.
    pub keys: u64,
    /// Tables copied.
    pub tables: u64,
    /// Rows copied.
    pub rows: u64,
    /// One line per loss: the error, and what was skipped because of it.
    pub lost: Vec<String>,
}

impl std::fmt::Display for SalvageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for l in &self.lost {
            writeln!(f, "LOST: {l}")?;
        }
        write!(
            f,
            "salvaged {} keys in {} keyspaces and {} rows in {} tables; {} loss(es)",
            self.keys,
            self.keyspaces,
            self.rows,
            self.tables,
            self.lost.len()
        )
    }
}

const BATCH_KEYS: usize = 1000;

/// Copies what reads back from the database at `src` into a new database at `dst`
/// (which must not hold one). `src` is opened read-only under `mode`.
pub fn salvage(src: &Path, dst: &Path, mode: RecoveryMode) -> Result<SalvageReport> {
    let from = Db::open(
        src,
        Options {
            read_only: true,
            recovery_mode: mode,
            create_if_missing: false,
            block_cache_bytes: 0,
            ..Options::default()
        },
    )?;
    let to = Db::open(
        dst,
        Options {
            error_if_exists: true,
            ..Options::default()
        },
    )?;
    let mut report = SalvageReport::default();
    for name in from.list_keyspaces() {
        if name.starts_with(RESERVED_PREFIX) {
            continue; // tables are copied through the table API below
        }
        let src_ks = from.keyspace(&name)?;
        let dst_ks = if name == DEFAULT_KEYSPACE {
            to.default_keyspace()
        } else {
            to.create_keyspace(&name)?
        };
        report.keyspaces += 1;
        copy_keyspace(&from, &src_ks, &to, &dst_ks, &mut report)?;
    }
    for name in from.list_tables() {
        let src_t = from.table(&name)?;
        let dst_t = to.create_table(src_t.schema()?)?;
        report.tables += 1;
        let rows = match src_t.select(crate::table::select::PRIMARY).rows() {
            Ok(rows) => rows,
            Err(e) => {
                report.lost.push(format!("table {name}: no row could be read: {e}"));
                continue;
            }
        };
        for row in rows {
            match row {
                Ok(row) => {
                    dst_t.replace(row)?;
                    report.rows += 1;
                }
                Err(e) => {
                    report
                        .lost
                        .push(format!("table {name}: rows after the last one copied: {e}"));
                    break;
                }
            }
        }
    }
    to.close()?;
    Ok(report)
}

fn copy_keyspace(
    from: &Db,
    src: &crate::Keyspace,
    to: &Db,
    dst: &crate::Keyspace,
    report: &mut SalvageReport,
) -> Result<()> {
    let mut start: Bound<Vec<u8>> = Bound::Unbounded;
    let mut batch = WriteBatch::new();
    loop {
        let mut failed = None;
        let mut last: Option<Vec<u8>> = None;
        for item in src.scan((start.clone(), Bound::Unbounded))? {
            match item {
                Ok((k, v)) => {
                    batch.put(dst, &k, &v);
                    report.keys += 1;
                    last = Some(k);
                    if batch.len() >= BATCH_KEYS {
                        to.write(std::mem::take(&mut batch))?;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let Some(e) = failed else { break };
        let resume = resume_after(from, src.id(), &e);
        let floor = last.or(match &start {
            Bound::Excluded(k) | Bound::Included(k) => Some(k.clone()),
            Bound::Unbounded => None,
        });
        let (next, r) = match resume {
            Some(Resume::At(r)) => (Bound::Included(r.clone()), r),
            // The smallest key above `r`, as an included bound: a scan from `Excluded(r)`
            // seeks `r` itself, into the damaged tile or block again.
            Some(Resume::After(r)) => {
                let mut above = r.clone();
                above.push(0);
                (Bound::Included(above), r)
            }
            None => (Bound::Unbounded, Vec::new()),
        };
        match next {
            // Progress only: a resume point at or before what was read would loop.
            Bound::Included(_) | Bound::Excluded(_) if floor.as_ref().is_none_or(|f| r > *f) => {
                report.lost.push(format!(
                    "keyspace {}: keys before {:?} in the damaged range: {e}",
                    src.name(),
                    String::from_utf8_lossy(&r)
                ));
                start = next;
            }
            _ => {
                report.lost.push(format!(
                    "keyspace {}: every key after the last one copied: {e}",
                    src.name()
                ));
                break;
            }
        }
    }
    if !batch.is_empty() {
        to.write(batch)?;
    }
    Ok(())
}

/// Where a scan that failed on a damaged block goes on.
enum Resume {
    /// At this key (the first of the next readable block).
    At(Vec<u8>),
    /// After this key (a tiled table's damaged tile's last, or the damaged file's
    /// largest: its index is unreadable too, or the damaged block was its last).
    After(Vec<u8>),
}

/// Where a scan that failed with `e` can go on: the first key of the block after the
/// damaged one, past the last key of a tiled table's damaged tile, or past the largest
/// key of the damaged file.
fn resume_after(db: &Db, keyspace: u32, e: &Error) -> Option<Resume> {
    let Error::Corruption { file, offset, .. } = e else {
        return None;
    };
    let name = file.file_name()?.to_str()?;
    let version = db.inner().current().version.clone();
    let tree = version.keyspace(keyspace)?;
    // Whether the error's offset lies in the block at `h` (its trailer included).
    let holds = |h: &crate::sstable::format::BlockHandle, at: u64| {
        h.end_with_trailer().is_some_and(|end| (h.offset..end).contains(&at))
    };
    // A damaged block of a patch file stands for the base page it patches: go on as if
    // that page of its table were damaged.
    let (meta, offset) = match crate::sstable::patch::parse_patch_file_name(name) {
        Some(patch) => tree.files().find_map(|f| {
            f.meta
                .pages
                .patched
                .iter()
                .find(|p| p.file == patch && holds(&p.handle, *offset))
                .map(|p| (f.meta.clone(), p.page))
        })?,
        None => {
            let number: u64 = file.file_stem()?.to_str()?.parse().ok()?;
            (tree.files().find(|f| f.meta.number == number)?.meta.clone(), *offset)
        }
    };
    let table_path = file.with_file_name(crate::sstable::sst_file_name(meta.number));
    let fs = db.options().fs.clone();
    let table = fs
        .open(&table_path)
        .and_then(|f| crate::sstable::SstReader::open(f, meta.number, None))
        .ok();
    // A tiled table's pages of one tile overlap in key range, so the page after the
    // damaged one may start inside the damaged tile: go on after that tile's last key.
    if let Some(tiles) = table.as_ref().and_then(|t| t.tiles()) {
        let damaged = tiles.tiles.iter().find(|tile| {
            tiles
                .pages
                .get(tile.pages.clone())
                .unwrap_or_default()
                .iter()
                .any(|p| holds(&p.handle, offset))
        });
        return Some(Resume::After(
            damaged.map_or(meta.largest, |tile| crate::key::user_key(&tile.last).to_vec()),
        ));
    }
    // Resume at the first key of the block after the damaged one (read from that
    // block itself, so it is a real key of the file).
    let from_next_block = table.and_then(|t| {
        let handles: Vec<_> = t.fences().map(|(_, h)| h).collect();
        // The block the error names: the last one starting at or before its offset
        // (which may point into the block's trailer).
        let i = handles.iter().rposition(|h| h.offset <= offset)?;
        let next = handles.get(i + 1)?;
        let mut it = t.block_iter(*next).ok()?;
        it.seek_to_first().ok()?;
        it.valid().then(|| crate::key::user_key(it.key()).to_vec())
    });
    if let Some(k) = from_next_block {
        return Some(Resume::At(k));
    }
    // The manifest records user keys (no trailer).
    Some(Resume::After(meta.largest))
}
