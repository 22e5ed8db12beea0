//! Versions: the set of live SSTables per keyspace, level and run, and the manifest
//! that logs every change to it.
//!
//! A [`Version`] is immutable; readers and compactions hold an `Arc` to the one they
//! started with. Each SSTable is a [`TableFile`] shared by every version that lists it;
//! once an edit removes it, it is marked obsolete and the file is deleted when the last
//! version (or iterator) holding it lets go ([`obsolete`]).
//!
//! # Invariants
//!
//! Point lookups stop at the first put or delete they meet, in level order and then
//! run order (`db::read`), so these orders must agree with sequence numbers. Deferred
//! deletes are the one exception everywhere below: they carry the seqno of the entry
//! they remove and may sit above newer puts (readers and compactions compare seqnos,
//! never trust position for them).
//!
//! 1. **Runs.** Within a run, files are sorted by key and their user-key ranges are
//!    disjoint (no user key is split across two files of a run).
//! 2. **Levels.** Every entry in level `i` is newer than every entry of the same user key
//!    in level `i + 1`: data only moves down, and a compaction's inputs include every
//!    file above its output that overlaps them (`compaction::picker`).
//! 3. **Runs of a level.** Runs are ordered by id, largest first, and an entry in a run
//!    is newer than every entry of the same user key in a run of smaller id. The picker
//!    keeps it by how each compaction places its output:
//!    * a flush makes a new level-0 run with a fresh id (flushes run one at a time,
//!      oldest memtable first);
//!    * a merge of level `i - 1` into a new run of level `i` takes a fresh id: its data
//!      is newer than everything already in level `i`, and no second merge from level
//!      `i - 1` can start while its inputs are still there;
//!    * a merge of a level's runs in place takes the id of its newest input, never a
//!      fresh one: a run pushed into the level while it ran holds newer data and must
//!      stay above it, whichever of the two was handed its id first;
//!    * a leveled level has one run, `picker::LEVELED_RUN`; a manual compaction writes
//!      into the oldest run of its output level, and every file it does not take there
//!      lies outside its key range.
//! 4. **Depth.** A level is created only below a level that outgrew its capacity
//!    (`Options::level_capacity`), or by an ingest, no deeper than the first level whose
//!    capacity holds the bytes it brings (`db::ingest`): a compaction of the last level
//!    that is not over capacity writes back into it, whatever triggered it (size, a FADE
//!    deadline, the tombstone density), so the number of levels follows the data's size.

pub mod edit;
pub mod manifest;
pub mod obsolete;
pub mod set;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sstable::cache::SstCache;
pub use edit::{FileMeta, NewFile, VersionEdit};
pub use obsolete::ObsoleteFiles;

/// One SSTable as known to the versions.
pub struct TableFile {
    /// What the manifest records.
    pub meta: FileMeta,
    /// Shared by every handle on the file (a page drop re-adds a file with new
    /// metadata under a new handle): the file goes when the last of them lets go.
    life: Arc<FileLife>,
    /// The patch files `meta.pages` names, one life each, shared with the file's other
    /// handles that name them: a patch file belongs to one table (its job writes one
    /// per table), and goes when the table goes or a re-add stops naming it, once the
    /// last handle naming it lets go.
    patches: Vec<Arc<PatchLife>>,
}

/// A patch file behind one or more [`TableFile`] handles of one table.
pub(crate) struct PatchLife {
    number: u64,
    obsolete: AtomicBool,
    path: PathBuf,
    retired: Arc<ObsoleteFiles>,
    sst_cache: Arc<SstCache>,
}

impl PatchLife {
    fn mark(&self) {
        self.obsolete.store(true, Ordering::SeqCst);
        self.retired.note_removed(&self.path);
    }
}

impl Drop for PatchLife {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::SeqCst) {
            self.sst_cache.evict_patch(self.number);
            self.retired.retire(std::mem::take(&mut self.path));
        }
    }
}

/// What applying an edit removed: files, and patch files that a re-added file no
/// longer names.
#[derive(Default)]
pub(crate) struct Removed {
    pub files: Vec<Arc<TableFile>>,
    pub patches: Vec<Arc<PatchLife>>,
}

/// The file behind one or more [`TableFile`] handles.
struct FileLife {
    number: u64,
    obsolete: AtomicBool,
    path: PathBuf,
    retired: Arc<ObsoleteFiles>,
    sst_cache: Arc<SstCache>,
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile").field("meta", &self.meta).finish()
    }
}

impl TableFile {
    /// The file number.
    pub fn number(&self) -> u64 {
        self.meta.number
    }

    /// True if its user-key range intersects `[lo, hi]` (inclusive; `None` = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        lo.is_none_or(|lo| self.meta.largest.as_slice() >= lo)
            && hi.is_none_or(|hi| self.meta.smallest.as_slice() <= hi)
    }

    /// True if `key` lies in its range.
    pub fn may_hold(&self, key: &[u8]) -> bool {
        self.meta.smallest.as_slice() <= key && key <= self.meta.largest.as_slice()
    }
}

/// Marks files removed by a durable edit: each is queued for unlinking when its last
/// holder drops it.
pub(crate) fn mark_obsolete(removed: &Removed) {
    for f in &removed.files {
        f.life.obsolete.store(true, Ordering::SeqCst);
        f.life.retired.note_removed(&f.life.path);
        for p in &f.patches {
            p.mark();
        }
    }
    for p in &removed.patches {
        p.mark();
    }
}

impl Drop for FileLife {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::SeqCst) {
            self.sst_cache.evict(self.number);
            self.retired.retire(std::mem::take(&mut self.path));
        }
    }
}

/// A sorted run: files with disjoint, ascending key ranges.
#[derive(Debug, Clone)]
pub struct Run {
    /// Run id (larger = newer).
    pub id: u64,
    /// Files in key order.
    pub files: Vec<Arc<TableFile>>,
}

impl Run {
    /// Total bytes.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.meta.size).sum()
    }

    /// The files whose range holds `key`, found by binary search: one, or two when
    /// `key` is where one file's range tombstone ends (exclusive) and the next file
    /// starts, since file ranges count tombstone ends inclusively.
    pub fn files_for<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = &'a Arc<TableFile>> + 'a {
        let i = self.files.partition_point(|f| f.meta.largest.as_slice() < key);
        self.files[i..]
            .iter()
            .take_while(move |f| f.meta.smallest.as_slice() <= key)
    }

    /// Files overlapping `[lo, hi]`.
    pub fn overlapping(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Arc<TableFile>> {
        self.overlapping_slice(lo, hi).to_vec()
    }

    /// Files overlapping `[lo, hi]`, found by binary search: the run's files ascend
    /// by both ends of their ranges.
    pub fn overlapping_slice(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> &[Arc<TableFile>] {
        let start = lo.map_or(0, |lo| self.files.partition_point(|f| f.meta.largest.as_slice() < lo));
        let end = hi.map_or(self.files.len(), |hi| {
            self.files.partition_point(|f| f.meta.smallest.as_slice() <= hi)
        });
        self.files.get(start..end.max(start)).unwrap_or_default()
    }
}

/// One level: runs, newest first.
#[derive(Debug, Clone, Default)]
pub struct Level {
    /// Runs, newest first.
    pub runs: Vec<Run>,
}

impl Level {
    /// Total bytes.
    pub fn size(&self) -> u64 {
        self.runs.iter().map(Run::size).sum()
    }

    /// Number of files.
    pub fn file_count(&self) -> usize {
        self.runs.iter().map(|r| r.files.len()).sum()
    }

    /// Every file of the level.
    pub fn files(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.runs.iter().flat_map(|r| r.files.iter())
    }
}

/// The LSM tree of one keyspace.
#[derive(Debug, Clone)]
pub struct KeyspaceVersion {
    /// Keyspace id.
    pub id: u32,
    /// Keyspace name.
    pub name: String,
    /// Levels, 0 = newest.
    pub levels: Vec<Level>,
}

impl KeyspaceVersion {
    /// Index of the deepest non-empty level (0 if all are empty).
    pub fn last_level(&self) -> usize {
        self.levels.iter().rposition(|l| !l.runs.is_empty()).unwrap_or(0)
    }

    /// Every file of the tree.
    pub fn files(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.levels.iter().flat_map(Level::files)
    }
}

/// The live files of every keyspace at one moment, plus the catalog.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Keyspaces by id.
    pub keyspaces: BTreeMap<u32, KeyspaceVersion>,
    /// Catalog entries (schemas etc.) by name.
    pub meta: BTreeMap<String, Vec<u8>>,
}

/// The lives of the patch files `meta` names: those in `held` (the table's previous
/// handle) kept, the others new.
fn patch_lives(meta: &FileMeta, held: &[Arc<PatchLife>], ctx: &FileContext) -> Vec<Arc<PatchLife>> {
    meta.pages
        .patch_files()
        .into_iter()
        .map(|n| match held.iter().find(|p| p.number == n) {
            Some(p) => p.clone(),
            None => Arc::new(PatchLife {
                number: n,
                obsolete: AtomicBool::new(false),
                path: ctx.dir.join(crate::sstable::patch::patch_file_name(n)),
                retired: ctx.retired.clone(),
                sst_cache: ctx.sst_cache.clone(),
            }),
        })
        .collect()
}

/// What applying an edit needs to create [`TableFile`]s.
pub(crate) struct FileContext {
    pub dir: PathBuf,
    pub fs: Arc<dyn crate::fs::FileSystem>,
    pub retired: Arc<ObsoleteFiles>,
    pub sst_cache: Arc<SstCache>,
}

impl Version {
    /// The tree of keyspace `id`.
    pub fn keyspace(&self, id: u32) -> Option<&KeyspaceVersion> {
        self.keyspaces.get(&id)
    }

    /// Applies an edit, producing the next version and the files it removed (except
    /// those the same edit re-adds: a move or a new page map), with the patch files a
    /// re-added file no longer names. The caller marks what it removed obsolete
    /// with [`mark_obsolete`] once the edit is durable.
    pub(crate) fn apply(&self, edit: &VersionEdit, ctx: &FileContext) -> Result<(Version, Removed), String> {
        let mut v = self.clone();
        for (id, name) in &edit.new_keyspaces {
            if v.keyspaces.contains_key(id) {
                return Err(format!("keyspace id {id} created twice"));
            }
            v.keyspaces.insert(
                *id,
                KeyspaceVersion {
                    id: *id,
                    name: name.clone(),
                    levels: Vec::new(),
                },
            );
        }
        let mut removed: HashMap<u64, Arc<TableFile>> = HashMap::new();
        for id in &edit.dropped_keyspaces {
            let ks = v
                .keyspaces
                .remove(id)
                .ok_or_else(|| format!("dropped keyspace {id} does not exist"))?;
            for f in ks.files() {
                removed.insert(f.number(), f.clone());
            }
        }
        for (ks_id, number) in &edit.deleted_files {
            let ks = v
                .keyspaces
                .get_mut(ks_id)
                .ok_or_else(|| format!("file {number} removed from unknown keyspace {ks_id}"))?;
            let mut found = None;
            for level in &mut ks.levels {
                for run in &mut level.runs {
                    if let Some(pos) = run.files.iter().position(|f| f.number() == *number) {
                        found = Some(run.files.remove(pos));
                    }
                }
                level.runs.retain(|r| !r.files.is_empty());
            }
            let f = found.ok_or_else(|| format!("removed file {number} is not in keyspace {ks_id}"))?;
            removed.insert(*number, f);
        }
        let mut released = Vec::new();
        for nf in &edit.new_files {
            let ks = v
                .keyspaces
                .get_mut(&nf.keyspace)
                .ok_or_else(|| format!("file {} added to unknown keyspace {}", nf.meta.number, nf.keyspace))?;
            let handle = match removed.remove(&nf.meta.number) {
                Some(h) if h.meta == nf.meta => h,
                // Re-added with new metadata (pages dropped by delete tiles): the same
                // file under a new handle sharing its life.
                Some(h) => {
                    let patches = patch_lives(&nf.meta, &h.patches, ctx);
                    released.extend(
                        h.patches
                            .iter()
                            .filter(|p| !patches.iter().any(|q| Arc::ptr_eq(p, q)))
                            .cloned(),
                    );
                    Arc::new(TableFile {
                        meta: nf.meta.clone(),
                        life: h.life.clone(),
                        patches,
                    })
                }
                None => Arc::new(TableFile {
                    meta: nf.meta.clone(),
                    patches: patch_lives(&nf.meta, &[], ctx),
                    life: Arc::new(FileLife {
                        number: nf.meta.number,
                        obsolete: AtomicBool::new(false),
                        path: ctx.dir.join(crate::sstable::sst_file_name(nf.meta.number)),
                        retired: ctx.retired.clone(),
                        sst_cache: ctx.sst_cache.clone(),
                    }),
                }),
            };
            let level = nf.level as usize;
            if level > 64 {
                return Err(format!("file {} at impossible level {level}", nf.meta.number));
            }
            while ks.levels.len() <= level {
                ks.levels.push(Level::default());
            }
            let runs = &mut ks.levels[level].runs;
            let pos = runs.iter().position(|r| r.id <= nf.run);
            match pos {
                Some(p) if runs[p].id == nf.run => {
                    let files = &mut runs[p].files;
                    let at = files.partition_point(|f| f.meta.smallest < handle.meta.smallest);
                    files.insert(at, handle);
                }
                Some(p) => runs.insert(
                    p,
                    Run {
                        id: nf.run,
                        files: vec![handle],
                    },
                ),
                None => runs.push(Run {
                    id: nf.run,
                    files: vec![handle],
                }),
            }
        }
        for ks in v.keyspaces.values_mut() {
            while ks.levels.last().is_some_and(|l| l.runs.is_empty()) {
                ks.levels.pop();
            }
        }
        for (k, val) in &edit.meta {
            match val {
                Some(b) => {
                    v.meta.insert(k.clone(), b.clone());
                }
                None => {
                    v.meta.remove(k);
                }
            }
        }
        Ok((
            v,
            Removed {
                files: removed.into_values().collect(),
                patches: released,
            },
        ))
    }

    /// The edit that recreates this version from nothing (first record of a manifest).
    pub(crate) fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit::default();
        for ks in self.keyspaces.values() {
            e.new_keyspaces.push((ks.id, ks.name.clone()));
            for (li, level) in ks.levels.iter().enumerate() {
                for run in &level.runs {
                    for f in &run.files {
                        e.new_files.push(NewFile {
                            keyspace: ks.id,
                            level: li as u32,
                            run: run.id,
                            meta: f.meta.clone(),
                        });
                    }
                }
            }
        }
        for (k, v) in &self.meta {
            e.meta.push((k.clone(), Some(v.clone())));
        }
        e
    }

    /// Numbers of every live file.
    pub fn live_files(&self) -> Vec<u64> {
        self.keyspaces
            .values()
            .flat_map(|k| k.files().map(|f| f.number()))
            .collect()
    }

    /// Numbers of every patch file a live file names (`sstable::patch`).
    pub fn live_patch_files(&self) -> Vec<u64> {
        self.keyspaces
            .values()
            .flat_map(|k| k.files().flat_map(|f| f.meta.pages.patch_files()))
            .collect()
    }
}

#[cfg(test)]
impl FileContext {
    /// Files in `dir` on the real file system, with a small cache.
    pub(crate) fn for_tests(dir: &std::path::Path) -> FileContext {
        let fs: Arc<dyn crate::fs::FileSystem> = Arc::new(crate::fs::RealFs);
        FileContext {
            dir: dir.to_path_buf(),
            fs: fs.clone(),
            retired: Arc::new(ObsoleteFiles::new(fs.clone())),
            sst_cache: Arc::new(SstCache::new(fs, dir.to_path_buf(), 4, None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(number: u64, smallest: &[u8], largest: &[u8]) -> FileMeta {
        FileMeta {
            number,
            size: 5,
            smallest: smallest.to_vec(),
            largest: largest.to_vec(),
            min_seq: 1,
            max_seq: 1,
            entries: 1,
            tombstones: 0,
            range_tombstones: 0,
            oldest_tombstone_time: None,
            raw_bytes: 2,
            global_seq: None,
            pages: Default::default(),
            deletes_applied: 0,
        }
    }

    proptest! {
        /// The binary search finds exactly the files a scan of every file would.
        #[test]
        fn a_runs_overlapping_files_are_found_by_binary_search(
            points in proptest::collection::btree_set(0u8..200, 0..24),
            lo in proptest::option::of(0u8..210),
            hi in proptest::option::of(0u8..210),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let ctx = FileContext::for_tests(dir.path());
            let points: Vec<u8> = points.into_iter().collect();
            // Disjoint ascending ranges, some of one key.
            let new_files = points
                .chunks(2)
                .enumerate()
                .map(|(i, c)| NewFile {
                    keyspace: 0,
                    level: 1,
                    run: 1,
                    meta: meta(i as u64 + 1, &c[..1], &c[c.len() - 1..]),
                })
                .collect();
            let edit = VersionEdit { new_keyspaces: vec![(0, "default".into())], new_files, ..Default::default() };
            let (v, _) = Version::default().apply(&edit, &ctx).unwrap();
            let Some(run) = v.keyspace(0).and_then(|k| k.levels.get(1)).and_then(|l| l.runs.first()) else {
                prop_assert!(points.is_empty());
                return Ok(());
            };
            let (lo, hi) = (lo.map(|b| vec![b]), hi.map(|b| vec![b]));
            let (lo, hi) = (lo.as_deref(), hi.as_deref());
            let numbers = |fs: &[Arc<TableFile>]| fs.iter().map(|f| f.meta.number).collect::<Vec<_>>();
            let every: Vec<Arc<TableFile>> = run.files.iter().filter(|f| f.overlaps(lo, hi)).cloned().collect();
            prop_assert_eq!(numbers(run.overlapping_slice(lo, hi)), numbers(&every));
        }
    }

    #[test]
    fn the_last_holder_of_a_removed_file_queues_it_instead_of_unlinking() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = FileContext::for_tests(dir.path());
        let path = dir.path().join(crate::sstable::sst_file_name(7));
        std::fs::write(&path, b"table").unwrap();
        let meta = meta(7, b"a", b"z");
        let add = VersionEdit {
            new_keyspaces: vec![(0, "default".into())],
            new_files: vec![NewFile {
                keyspace: 0,
                level: 0,
                run: 1,
                meta,
            }],
            ..Default::default()
        };
        let (v1, _) = Version::default().apply(&add, &ctx).unwrap();
        let remove = VersionEdit {
            deleted_files: vec![(0, 7)],
            ..Default::default()
        };
        let (v2, removed) = v1.apply(&remove, &ctx).unwrap();
        assert!(v2.live_files().is_empty());
        mark_obsolete(&removed);
        drop(removed);
        assert!(path.exists(), "an older version still holds the file");
        assert_eq!(ctx.retired.pending(), 0);
        // The reader holding the old version lets go: nothing is unlinked on its thread.
        drop(v1);
        assert!(path.exists(), "the last holder unlinked the file itself");
        assert_eq!(ctx.retired.pending(), 1);
        assert_eq!(ctx.retired.purge(), 1);
        assert!(!path.exists());
    }
}
