//! `Db::check`'s file pass: every file of the database is read back and verified.
//!
//! - every SSTable the current version lists: it exists with the size the manifest
//!   records, its footer and meta blocks open, every data block's checksum matches and
//!   the block decodes, its keys ascend, and it holds the number of entries the
//!   manifest records;
//! - every patched page (`sstable::patch`) of those SSTables, read from its patch file:
//!   checksum, decoding, keys ascending and within the base page's fences;
//! - the directory against the manifest: SSTables and patch files it does not list,
//!   among those older than the open (outputs of an interrupted job: a writable open
//!   deletes them, so they show under a read-only open, or as files copied in behind
//!   the database's back). Newer files may be outputs of a running job, which exist
//!   before the manifest lists them; files an edit removed that a reader still holds
//!   are not unlisted either;
//! - `CURRENT` and the live manifest read back whole;
//! - every WAL: it reads to its end (a torn tail only in the newest one).
//!
//! Each problem names its file and, for damage, the offset; the pass never stops at
//! the first one. It only reads, so it is safe on a live database.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sstable::patch::{PageMap, PatchReader, check_within, patch_file_name};
use crate::sstable::{Fill, SstReader, sst_file_name};
use crate::wal;

/// What the file pass read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesCheck {
    /// SSTables read.
    pub sstables: u64,
    /// Data blocks read (checksummed and decoded).
    pub blocks: u64,
    /// Entries in those blocks.
    pub entries: u64,
    /// WAL files read.
    pub logs: u64,
    /// WAL records read.
    pub log_records: u64,
    /// Edits in the live manifest.
    pub manifest_edits: u64,
}

impl std::fmt::Display for FilesCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "files: {} SSTables ({} blocks, {} entries), {} logs ({} records), manifest of {} edits",
            self.sstables, self.blocks, self.entries, self.logs, self.log_records, self.manifest_edits
        )
    }
}

/// Verifies every file; appends one line per problem to `problems`.
pub(crate) fn verify_files(inner: &Arc<DbInner>, problems: &mut Vec<String>) -> Result<FilesCheck> {
    let mut out = FilesCheck::default();
    let fs = inner.opts.fs.clone();
    let dir = &inner.dir;
    let version = inner.current().version.clone();
    let mut live = HashSet::new();
    for tree in version.keyspaces.values() {
        for f in tree.files() {
            live.insert(f.meta.number);
            let path = dir.join(sst_file_name(f.meta.number));
            if !fs.exists(&path) {
                problems.push(format!("{}: listed by the manifest but missing", path.display()));
                continue;
            }
            out.sstables += 1;
            let file = match fs.open(&path) {
                Ok(file) => file,
                Err(e) => {
                    problems.push(e.to_string());
                    continue;
                }
            };
            if file.size() != f.meta.size {
                problems.push(format!(
                    "{}: the manifest records {} bytes, the file holds {}",
                    path.display(),
                    f.meta.size,
                    file.size()
                ));
            }
            // No block cache: the check reads the disk, and leaves the cache as it was.
            let table = match SstReader::open(file, f.meta.number, None).map(|t| t.with_global_seq(f.meta.global_seq)) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(e.to_string());
                    continue;
                }
            };
            let entries = verify_table(&table, &mut out, problems);
            verify_patches(fs.as_ref(), dir, &table, &f.meta.pages, &mut out, problems);
            if let Some(n) = entries
                && n != f.meta.entries
            {
                problems.push(format!(
                    "{}: holds {n} entries, the manifest records {}",
                    path.display(),
                    f.meta.entries
                ));
            }
        }
    }
    let names = fs.list(dir)?;
    let live_patches: HashSet<u64> = version.live_patch_files().into_iter().collect();
    // A file the manifest does not list, older than this open, that nothing removed.
    // Files this process made may be a running job's outputs, which exist before the
    // manifest lists them, or outputs of a failed job, deleted at the next open; files
    // an edit removed may still be held by a reader. In this order: a removed file
    // leaves the set only after it is unlinked, so one not in the set that still exists
    // was never removed (the listing above may predate an unlink).
    let unlisted = |num: u64, listed: &HashSet<u64>, n: &str| {
        !listed.contains(&num)
            && num < inner.first_own_file
            && !inner.retired.is_removed(&dir.join(n))
            && fs.exists(&dir.join(n))
    };
    for n in &names {
        if let Some(num) = crate::sstable::patch::parse_patch_file_name(n)
            && unlisted(num, &live_patches, n)
        {
            problems.push(format!(
                "{}: a patch file no live SSTable names (output of an interrupted job)",
                dir.join(n).display()
            ));
        }
        if let Some(num) = n.strip_suffix(".sst").and_then(|s| s.parse::<u64>().ok())
            && unlisted(num, &live, n)
        {
            problems.push(format!(
                "{}: an SSTable the manifest does not list (output of an interrupted job, or copied in)",
                dir.join(n).display()
            ));
        }
    }
    match read_current_settled(fs.as_ref(), dir) {
        Ok(Some((_, edits))) => out.manifest_edits = edits.len() as u64,
        Ok(None) => problems.push(format!("{}: missing", dir.join("CURRENT").display())),
        Err(e) => problems.push(e.to_string()),
    }
    let mut logs: Vec<u64> = names.iter().filter_map(|n| wal::parse_log_file_name(n)).collect();
    logs.sort_unstable();
    let newest = logs.last().copied();
    for number in logs {
        out.logs += 1;
        let path = dir.join(wal::log_file_name(number));
        let mut reader = match wal::Reader::open(fs.as_ref(), &path) {
            Ok(r) => r,
            // A flush deleted it since the listing: its data is in SSTables now.
            Err(_) if !fs.exists(&path) => continue,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        loop {
            match reader.next_record() {
                Ok(Some((offset, payload))) => {
                    out.log_records += 1;
                    if let Err(reason) = crate::batch::WriteBatch::decode_record(&payload) {
                        problems.push(Error::corruption(&path, offset, format!("bad batch: {reason}")).to_string());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    problems.push(e.to_string());
                    break;
                }
            }
        }
        // The newest log is the one being written: its end may be mid-append.
        if let Some(at) = reader.torn_tail_at()
            && Some(number) != newest
        {
            problems.push(
                Error::corruption(&path, at, "torn record at the end of a log that newer logs follow").to_string(),
            );
        }
    }
    Ok(out)
}

/// `CURRENT` and the manifest it names, read again when `CURRENT` changed meanwhile: a
/// manifest roll renames `CURRENT` and then removes the manifest it named, which would
/// read as a `CURRENT` naming a missing file. (Not under the version set's lock, which
/// writers take at every memtable switch, for the length of a manifest read.)
fn read_current_settled(
    fs: &dyn crate::fs::FileSystem,
    dir: &Path,
) -> Result<Option<(u64, Vec<crate::version::VersionEdit>)>> {
    let current = dir.join(crate::version::manifest::CURRENT_FILE_NAME);
    let mut tries = 0;
    loop {
        let before = fs.read_all(&current).ok();
        let r = crate::version::manifest::read_current(fs, dir);
        tries += 1;
        if r.is_ok() || tries == 10 || fs.read_all(&current).ok() == before {
            return r;
        }
    }
}

/// Reads every patched page of `table` from its patch file (no block cache): checksum,
/// decoding, keys ascending and within the base page's fences (`sstable::patch`).
fn verify_patches(
    fs: &dyn crate::fs::FileSystem,
    dir: &std::path::Path,
    table: &SstReader,
    map: &PageMap,
    out: &mut FilesCheck,
    problems: &mut Vec<String>,
) {
    if map.patched.is_empty() {
        return;
    }
    let Some(tiles) = table.tiles() else {
        problems.push(format!(
            "{}: untiled, but the manifest patches its pages",
            table.path().display()
        ));
        return;
    };
    let mut readers = std::collections::HashMap::new();
    for p in &map.patched {
        out.blocks += 1;
        let r = (|| -> Result<()> {
            let Some(base) = tiles.pages.iter().find(|b| b.handle.offset == p.page) else {
                return Err(Error::corruption(
                    table.path(),
                    p.page,
                    "a patched page the table does not have",
                ));
            };
            let reader = match readers.get(&p.file) {
                Some(r) => Arc::clone(r),
                None => {
                    let file = fs.open(&dir.join(patch_file_name(p.file)))?;
                    let r = Arc::new(PatchReader::new(file, p.file, None));
                    readers.insert(p.file, Arc::clone(&r));
                    r
                }
            };
            let mut it = reader.page(p.handle, Fill::Bypass)?;
            it.seek_to_first()?;
            let mut last: Option<Vec<u8>> = None;
            while it.valid() {
                check_within(it.key(), &base.first, &base.last, reader.path(), p.handle.offset)?;
                if last
                    .as_ref()
                    .is_some_and(|l| compare_internal(l, it.key()) != std::cmp::Ordering::Less)
                {
                    return Err(Error::corruption(
                        reader.path(),
                        p.handle.offset,
                        "keys out of order in a patched page",
                    ));
                }
                last = Some(it.key().to_vec());
                out.entries += 1;
                it.next()?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            problems.push(e.to_string());
        }
    }
}

/// Reads every data block of `table`; returns its entry count, or `None` if a block
/// could not be read (already reported).
fn verify_table(table: &SstReader, out: &mut FilesCheck, problems: &mut Vec<String>) -> Option<u64> {
    let mut entries = 0u64;
    let mut whole = true;
    let mut last: Option<Vec<u8>> = None;
    let handles: Vec<_> = table.fences().map(|(_, h)| h).collect();
    // A tiled table's pages are in key order each, but not across a tile's pages (its
    // reader checks the merged order).
    let tiled = table.tiles().is_some();
    for handle in handles {
        out.blocks += 1;
        if tiled {
            last = None;
        }
        let r = (|| -> Result<()> {
            let mut it = table.block_iter(handle)?;
            it.seek_to_first()?;
            while it.valid() {
                if let Some(prev) = &last
                    && compare_internal(prev, it.key()) != std::cmp::Ordering::Less
                {
                    return Err(Error::corruption(
                        table.path(),
                        handle.offset,
                        "keys out of order in the data block (or across blocks)",
                    ));
                }
                last = Some(it.key().to_vec());
                entries += 1;
                it.next()?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            problems.push(e.to_string());
            whole = false;
            // Keys after a damaged block cannot be compared with those before it.
            last = None;
        }
    }
    out.entries += entries;
    whole.then_some(entries)
}
