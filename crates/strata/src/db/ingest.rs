//! Ingest: installing external SSTables (`sstable::external`) into keyspaces, all of
//! them in one manifest edit.
//!
//! Steps, each leaving the database as it was if it fails (files brought in are removed,
//! unless the manifest cannot tell whether it holds the edit; then the next open does):
//! 1. each file gets a new file number and is checked (`sstable::external::check_copy`,
//!    errors naming the source) as it is copied into the database directory in one pass
//!    (each piece read is checked, then written: the bytes served are the bytes
//!    checked), then synced; or hard-linked, the linked file checked, then synced. One
//!    file per core;
//! 2. the files for one keyspace must not overlap each other, the caller's check runs,
//!    and the directory is synced;
//! 3. running flushes and compactions are waited for while writes go on; then, with
//!    writes held (this call leads the write queue), memtables that overlap a file are
//!    flushed, and if a job runs again the ingest lets writes go and waits once more (a
//!    few times, then it waits with writes held); no new job starts until the edit is
//!    in;
//! 4. the ingest takes one seqno `G` above every write so far (logged in the WAL as an
//!    empty batch, so the log's seqnos stay contiguous), and every file is listed
//!    with `global_seq = G` (its entries, stored at seqno 0, are read at `G`) at the
//!    deepest level above every level holding data in its key range, or, when no level
//!    does, at the last level or deeper, where the ingest's bytes fit (`place`; in the
//!    level's newest run when the level has one, else a new run); one manifest edit
//!    adds them all, then the version is installed and `G` becomes visible. Once
//!    logged, `G` is taken even if the edit fails (an empty batch at `G` changes
//!    nothing): a later write logging `G` again would make recovery refuse the WAL.
//!
//! A crash before the edit is durable leaves unlisted files that the next open deletes;
//! after it, all of them are in. Snapshots taken before see none of it (their seqno is
//! below `G`). Recovery raises the seqno counter to at least the largest seqno of a live
//! file (`db::open`: a listed file's `G`, or a compaction output's `max_seq` once its
//! entries were rewritten), whether or not the WAL still holds `G`.
//!
//! Placement keeps the version invariants (`version`): the files are newer than
//! everything (invariant 2 and 3 need only care about overlapping keys, and no level at
//! or above the chosen one holds any in the range), and a level's run stays disjoint
//! because no file of the level overlaps the range. Waiting for running jobs keeps a
//! merge in progress from writing a file across the new one's range into the same run.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{BgState, Db, DbInner, Keyspace, RESERVED_PREFIX};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQNO, SeqNo, seek_key, user_key};
use crate::sstable::{ExternalFileInfo, external, sst_file_name};
use crate::version::{FileMeta, NewFile, VersionEdit};

/// How [`Db::ingest`] brings files in.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Hard-link each file into the database directory instead of copying it (falling
    /// back to a copy when linking fails, e.g. across devices). The database then
    /// shares the file with its source path: never change or rewrite the source after.
    pub link_files: bool,
}

/// One file as installed by an ingest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestedFile {
    /// The path it was ingested from.
    pub source: PathBuf,
    /// The keyspace it went into.
    pub keyspace: String,
    /// Its file number in the database (`<number>.sst`).
    pub number: u64,
    /// The level it was placed at (0 = newest).
    pub level: u32,
    /// Entries.
    pub entries: u64,
    /// Bytes.
    pub bytes: u64,
    /// True if hard-linked, false if copied.
    pub linked: bool,
}

/// What an ingest did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestReport {
    /// The seqno every ingested entry reads at.
    pub global_seq: SeqNo,
    /// The files, in the order given.
    pub files: Vec<IngestedFile>,
    /// True if memtables overlapping the files were flushed first.
    pub flushed_memtable: bool,
}

impl Db {
    /// Installs external SSTables (written by
    /// [`ExternalSstWriter`](crate::sstable::ExternalSstWriter)) into `keyspace`,
    /// atomically: after a crash at any moment either all of them are in or none. The
    /// files must not overlap each other. Newer than every write before the call, they
    /// replace older values of their keys; snapshots taken before do not see them.
    /// A bad file (another format version, damaged, unsorted, holding seqnos) is an
    /// error naming it, and nothing changes. See `docs/design/ingest.md`.
    ///
    /// ```
    /// use strata::sstable::ExternalSstWriter;
    /// use strata::{Db, IngestOptions, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// db.put(b"b", b"old").unwrap();
    /// let before = db.snapshot();
    /// let path = dir.path().join("f.sst");
    /// let mut w = ExternalSstWriter::create(&path).unwrap();
    /// w.put(b"a", b"1").unwrap();
    /// w.put(b"b", b"2").unwrap();
    /// w.finish().unwrap();
    /// let report = db.ingest(&db.default_keyspace(), &[&path], IngestOptions::default()).unwrap();
    /// assert_eq!(report.files[0].entries, 2);
    /// assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    /// assert_eq!(before.get(&db.default_keyspace(), b"b").unwrap().as_deref(), Some(&b"old"[..]));
    /// ```
    pub fn ingest<P: AsRef<Path>>(
        &self,
        keyspace: &Keyspace,
        files: &[P],
        opts: IngestOptions,
    ) -> Result<IngestReport> {
        let items: Vec<(&Keyspace, &Path)> = files.iter().map(|p| (keyspace, p.as_ref())).collect();
        self.ingest_many(&items, opts)
    }

    /// Like [`ingest`](Self::ingest) for files going into several keyspaces, all in one
    /// manifest edit with one seqno. A table's keyspaces (`table:...`) are refused:
    /// tables ingest through their own API, which keeps their indexes consistent.
    pub fn ingest_many(&self, files: &[(&Keyspace, &Path)], opts: IngestOptions) -> Result<IngestReport> {
        let mut items = Vec::with_capacity(files.len());
        for (ks, path) in files {
            if !std::sync::Arc::ptr_eq(ks.inner(), self.inner()) {
                return Err(Error::InvalidArgument(
                    "keyspace belongs to a different database".into(),
                ));
            }
            if ks.name().starts_with(RESERVED_PREFIX) {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {:?} belongs to a table: ingest through the table API",
                    ks.name()
                )));
            }
            items.push((ks.id(), path.to_path_buf()));
        }
        self.inner().ingest(items, &opts, &|_| Ok(()))
    }
}

/// How many times an ingest that finds a job running once it leads the write queue
/// lets writes go on while it waits again (`DbInner::install_ingest`).
const PATIENT_AFTER: usize = 3;

/// A file brought in and checked, on its way to the manifest.
pub(crate) struct CheckedFile {
    pub keyspace: u32,
    /// What the file holds; its `path` names the source, for messages.
    pub info: ExternalFileInfo,
    /// Its copy (or link) in the database directory: what will be installed, and what
    /// a caller's check reads (the source may change after the copy).
    pub staged: PathBuf,
}

/// A caller's judgement of the checked files, in the caller's order.
pub(crate) type FilesCheck<'a> = dyn Fn(&[CheckedFile]) -> Result<()> + 'a;

/// A file on its way in: numbered, then copied (checked on the way) or linked and
/// checked (`info`).
struct Staged {
    keyspace: u32,
    source: PathBuf,
    info: Option<ExternalFileInfo>,
    number: u64,
    linked: bool,
}

impl Staged {
    fn checked(&self) -> Result<&ExternalFileInfo> {
        self.info
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument(format!("{} was not checked", self.source.display())))
    }
}

impl DbInner {
    /// Ingests `(keyspace id, path)` pairs in one edit (the table layer calls this for
    /// its internal keyspaces, with `check` judging the files once they are read, before
    /// anything changes). See the module docs.
    pub(crate) fn ingest(
        &self,
        items: Vec<(u32, PathBuf)>,
        opts: &IngestOptions,
        check: &FilesCheck<'_>,
    ) -> Result<IngestReport> {
        let _job = self.begin_job()?;
        self.check_writable()?;
        self.background_error()?;
        if items.is_empty() {
            return Err(Error::InvalidArgument("no files to ingest".into()));
        }
        let fs = self.opts.fs.clone();
        let names = {
            let v = self.current().version.clone();
            let mut names = BTreeMap::new();
            for (ks, _) in &items {
                let tree = v
                    .keyspace(*ks)
                    .ok_or_else(|| Error::NotFound(format!("keyspace id {ks} (dropped or never created)")))?;
                names.insert(*ks, tree.name.clone());
            }
            names
        };
        // 1 and 2, one file per core: bring each into the directory, checking the bytes
        // that will be served as they are copied (or once linked); then across files. Numbered first, so a
        // failure anywhere knows every file to remove.
        let mut staged: Vec<Staged> = Vec::with_capacity(items.len());
        for (keyspace, source) in &items {
            staged.push(Staged {
                keyspace: *keyspace,
                source: source.clone(),
                info: None,
                number: self.versions.lock().new_file_number(),
                linked: false,
            });
        }
        // Set when the manifest cannot tell whether it holds the edit (`list_ingested`).
        let uncertain = Cell::new(false);
        let r = self.stage_all(opts, &mut staged).and_then(|()| {
            let checked: Vec<CheckedFile> = staged
                .iter()
                .filter_map(|s| {
                    s.info.clone().map(|info| CheckedFile {
                        keyspace: s.keyspace,
                        info,
                        staged: self.dir.join(sst_file_name(s.number)),
                    })
                })
                .collect();
            check_disjoint(&checked, &names)?;
            // Before the caller's check, which may hold its own writers off (a table's
            // DDL lock) until the install: running jobs are waited for with them flowing.
            self.wait_for_jobs()?;
            check(&checked)?;
            // The new names must be durable before the manifest lists them.
            fs.sync_dir(&self.dir)?;
            self.install_ingest(&staged, &names, &uncertain)
        });
        if r.is_err() {
            for s in &staged {
                self.sst_cache.evict(s.number);
                // The manifest may hold the edit after all (its rewrite failed): the
                // files stay, and the next open removes them if no version lists them.
                if !uncertain.get() {
                    let _ = fs.remove(&self.dir.join(sst_file_name(s.number)));
                }
            }
        }
        r
    }

    fn stage_all(&self, opts: &IngestOptions, staged: &mut [Staged]) -> Result<()> {
        let fs = self.opts.fs.as_ref();
        // Files are checked and copied one per thread.
        let done = crate::parallel::map(staged.len(), |i| {
            let s = &staged[i];
            let dest = self.dir.join(sst_file_name(s.number));
            if opts.link_files && fs.hard_link(&s.source, &dest).is_ok() {
                let info = external::check_copy(fs.open(&dest)?.as_ref(), &s.source, None)?;
                // The source's writer may not have synced it (copied onto shared storage).
                // A file this process may not write (read-only build output) cannot be
                // opened to sync: it is copied instead, as when it cannot be linked.
                match fs.open_append(&dest) {
                    Ok(mut f) => {
                        f.sync()?;
                        return Ok((true, info));
                    }
                    Err(_) => fs.remove(&dest)?,
                }
            }
            // One pass: each piece read is checked, then written; synced once at the end.
            let mut out = fs.create(&dest)?;
            let info = external::check_copy(fs.open(&s.source)?.as_ref(), &s.source, Some(out.as_mut()))?;
            out.sync()?;
            Ok((false, info))
        })?;
        for (s, (linked, info)) in staged.iter_mut().zip(done) {
            s.linked = linked;
            s.info = Some(info);
        }
        Ok(())
    }

    /// Steps 3 and 4 of the module docs.
    fn install_ingest(
        &self,
        staged: &[Staged],
        names: &BTreeMap<u32, String>,
        uncertain: &Cell<bool>,
    ) -> Result<IngestReport> {
        let mut flushed_memtable = false;
        let mut tries = 0;
        loop {
            // Running jobs are waited for with writes flowing; a job that starts before
            // this ingest leads the queue sends it back here, up to `PATIENT_AFTER`
            // times, then it waits for the job with writes held.
            self.wait_for_jobs()?;
            tries += 1;
            let patient = tries > PATIENT_AFTER;
            let done = self.with_writes_held(|| {
                flushed_memtable |= self.flush_overlapping_memtables(staged)?;
                let mut bg = self.bg.lock();
                if !self.wait_for_jobs_locked(&mut bg, patient)? {
                    return Ok(None);
                }
                let seq = self.last_seq.load(Ordering::Acquire) + 1;
                if seq > MAX_SEQNO {
                    return Err(Error::InvalidArgument("seqnos exhausted".into()));
                }
                self.log_seq_held(seq, &mut bg)?;
                // The WAL holds `seq` from here: it is taken even if the edit fails, or
                // the next write would log it again and recovery would refuse the repeat.
                let listed = self.list_ingested(staged, names, seq, uncertain);
                // Readers see the files only from here on: their seqno was below `seq`.
                self.last_seq.store(seq, Ordering::Release);
                self.visible_seq.store(seq, Ordering::Release);
                drop(bg);
                self.bg_cv.notify_all();
                Ok(Some(IngestReport {
                    global_seq: seq,
                    files: listed?,
                    flushed_memtable,
                }))
            })?;
            if let Some(report) = done {
                return Ok(report);
            }
        }
    }

    /// Waits until no flush or compaction runs, manual ones included (they count in
    /// `compacting`), but not for holds (`ManualHold`), whose holder may be waiting for
    /// the write queue an ingest leads.
    fn wait_for_jobs(&self) -> Result<()> {
        let mut bg = self.bg.lock();
        self.wait_for_jobs_locked(&mut bg, true).map(|_| ())
    }

    /// [`wait_for_jobs`](Self::wait_for_jobs) under `bg`'s lock; when not `patient`,
    /// returns `false` at once if a job runs, `true` when none does.
    fn wait_for_jobs_locked(&self, bg: &mut parking_lot::MutexGuard<'_, BgState>, patient: bool) -> Result<bool> {
        loop {
            bg.check()?;
            if bg.compacting == 0 && !bg.flushing {
                return Ok(true);
            }
            if !patient {
                return Ok(false);
            }
            self.bg_cv.wait_for(bg, Duration::from_millis(20));
        }
    }

    /// Step 4 after the WAL record: one manifest edit lists every staged file at seqno
    /// `seq`, and the version is installed. Sets `uncertain` when the edit failed and the
    /// manifest could not be rewritten without it (`Error::Background` from
    /// `log_and_apply`): the edit may be on disk.
    fn list_ingested(
        &self,
        staged: &[Staged],
        names: &BTreeMap<u32, String>,
        seq: SeqNo,
        uncertain: &Cell<bool>,
    ) -> Result<Vec<IngestedFile>> {
        let mut vs = self.versions.lock();
        let version = vs.current();
        let mut edit = VersionEdit::default();
        let mut fresh_runs: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        let mut files = Vec::with_capacity(staged.len());
        let now = self.opts.clock.now_micros();
        // Each file's keyspace and the first level holding data in its range; and what
        // the ingest brings to each keyspace below all of its data (files over data go
        // above it, whatever their size).
        let mut found = Vec::with_capacity(staged.len());
        let mut below: BTreeMap<u32, u64> = BTreeMap::new();
        for s in staged {
            let info = s.checked()?;
            let tree = version
                .keyspace(s.keyspace)
                .ok_or_else(|| Error::NotFound(format!("keyspace id {} (dropped during the ingest)", s.keyspace)))?;
            let overlap = first_overlap(tree, &info.smallest, &info.largest);
            if overlap.is_none() {
                *below.entry(s.keyspace).or_default() += info.file_size;
            }
            found.push((s, info, tree, overlap));
        }
        for (s, info, tree, overlap) in found {
            let bytes = below.get(&s.keyspace).copied().unwrap_or_default();
            let (level, run) = place(&self.opts, tree, overlap, bytes);
            let run = match run {
                Some(r) => r,
                None => *fresh_runs
                    .entry((s.keyspace, level))
                    .or_insert_with(|| vs.new_file_number()),
            };
            let meta = FileMeta {
                number: s.number,
                size: info.file_size,
                smallest: info.smallest.clone(),
                largest: info.largest.clone(),
                min_seq: seq,
                max_seq: seq,
                entries: info.entries,
                tombstones: info.deletes,
                range_tombstones: 0,
                oldest_tombstone_time: (info.deletes > 0).then_some(now),
                raw_bytes: info.raw_bytes,
                global_seq: Some(seq),
                pages: Default::default(),
                deletes_applied: 0,
            };
            // Opened (and checked once more) before the manifest names it.
            self.sst_cache.get(meta.number, meta.global_seq)?;
            files.push(IngestedFile {
                source: info.path.clone(),
                keyspace: names.get(&s.keyspace).cloned().unwrap_or_default(),
                number: s.number,
                level,
                entries: info.entries,
                bytes: info.file_size,
                linked: s.linked,
            });
            edit.new_files.push(NewFile {
                keyspace: s.keyspace,
                level,
                run,
                meta,
            });
        }
        let v = vs
            .log_and_apply(edit)
            .inspect_err(|e| uncertain.set(matches!(e, Error::Background(_))))?;
        self.install_version(v, None);
        Ok(files)
    }

    /// Writes held: flushes every memtable if any holds a key (or range tombstone) of a
    /// staged file's range in its keyspace, since readers look in memtables before any
    /// SSTable. Returns whether it flushed.
    fn flush_overlapping_memtables(&self, staged: &[Staged]) -> Result<bool> {
        let sv = self.current();
        let mut overlap = false;
        'outer: for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            for s in staged {
                let info = s.checked()?;
                let (lo, hi) = (&info.smallest, &info.largest);
                if m.range_tombstones(s.keyspace)
                    .iter()
                    .any(|t| t.start.as_slice() <= hi.as_slice() && t.end.as_slice() > lo.as_slice())
                {
                    overlap = true;
                    break 'outer;
                }
                let mut it = m.iter(s.keyspace);
                it.seek(&seek_key(lo, MAX_SEQNO))?;
                if it.valid() && user_key(it.key()) <= hi.as_slice() {
                    overlap = true;
                    break 'outer;
                }
            }
        }
        if !overlap {
            return Ok(false);
        }
        self.freeze_memtable_held()?;
        let mut bg = self.bg.lock();
        loop {
            bg.check()?;
            if self.current().imm.is_empty() {
                return Ok(true);
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut bg, Duration::from_millis(20));
        }
    }
}

/// Where a file goes whose range first meets data at level `overlap` (from the top),
/// its ingest bringing `bytes` into the keyspace below all of its data: the deepest
/// level above `overlap`. When there is no overlap, the last level, or the first level
/// whose capacity holds `bytes` if that is deeper: a large ingest into a small tree
/// would otherwise sit over capacity near the top and be rewritten by every compaction
/// from above until it worked its way down (invariant 4 of `version`). In that level's
/// newest run, or when the level has no run, the leveled run id or a new run (`None`).
fn place(
    opts: &crate::Options,
    tree: &crate::version::KeyspaceVersion,
    overlap: Option<usize>,
    bytes: u64,
) -> (u32, Option<u64>) {
    let level = match overlap {
        Some(0) => return (0, None),
        Some(k) => k - 1,
        None => tree.levels.len().saturating_sub(1).max(fitting_level(opts, bytes)),
    };
    let run = match tree.levels.get(level).and_then(|l| l.runs.first()) {
        Some(r) => Some(r.id),
        // An empty leveled level gets the one run id every compaction into it uses; a
        // level below every other is the last level once the edit is in.
        None if opts.is_leveled(level, tree.last_level().max(level)) => Some(crate::compaction::picker::LEVELED_RUN),
        None => None,
    };
    (level as u32, run)
}

/// The first level (from the top) holding a file that overlaps `[lo, hi]`.
fn first_overlap(tree: &crate::version::KeyspaceVersion, lo: &[u8], hi: &[u8]) -> Option<usize> {
    tree.levels
        .iter()
        .position(|l| l.files().any(|f| f.overlaps(Some(lo), Some(hi))))
}

/// The first level (from 1) whose capacity holds `bytes`.
fn fitting_level(opts: &crate::Options, bytes: u64) -> usize {
    // `size_ratio` >= 2 (`Options::validate`), so capacities pass any u64 long before.
    const DEEPEST: usize = 64;
    (1..DEEPEST)
        .find(|&i| opts.level_capacity(i) >= bytes)
        .unwrap_or(DEEPEST)
}

/// Refuses files of one keyspace whose key ranges overlap (naming both).
fn check_disjoint(files: &[CheckedFile], names: &BTreeMap<u32, String>) -> Result<()> {
    let mut by_ks: BTreeMap<u32, Vec<&ExternalFileInfo>> = BTreeMap::new();
    for f in files {
        by_ks.entry(f.keyspace).or_default().push(&f.info);
    }
    for (ks, mut files) in by_ks {
        files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for w in files.windows(2) {
            if let [a, b] = w
                && b.smallest <= a.largest
            {
                return Err(Error::InvalidArgument(format!(
                    "{} and {} overlap in keyspace {:?}: files ingested together must hold disjoint key ranges",
                    a.path.display(),
                    b.path.display(),
                    names.get(&ks).map(String::as_str).unwrap_or("?")
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::db::ManualHold;
    use crate::sstable::ExternalSstWriter;
    use crate::{Db, IngestOptions, Options};

    /// A database in `dir` and, beside it, an external file holding `k` = `v`.
    fn db_and_file(dir: &std::path::Path) -> (Db, std::path::PathBuf) {
        let db = Db::open(dir.join("db"), Options::default()).unwrap();
        let path = dir.join("a.sst");
        let mut w = ExternalSstWriter::create(&path).unwrap();
        w.put(b"k", b"v").unwrap();
        w.finish().unwrap();
        (db, path)
    }

    /// An ingest waits for a running job with writes flowing: a write goes through
    /// meanwhile, and the ingest finishes once the job does.
    #[test]
    fn writes_go_on_while_an_ingest_waits_for_a_running_job() {
        let tmp = tempfile::tempdir().unwrap();
        let (db, path) = db_and_file(tmp.path());
        let job = |running: bool| {
            let mut bg = db.inner().bg.lock();
            if running {
                bg.compacting += 1;
            } else {
                bg.compacting -= 1;
            }
            drop(bg);
            db.inner().bg_cv.notify_all();
        };
        job(true);
        let (ingested_tx, ingested) = std::sync::mpsc::channel();
        let (written_tx, written) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = db.ingest(&db.default_keyspace(), &[&path], IngestOptions::default());
                let _ = ingested_tx.send(r.map(|_| ()));
            });
            // Give the ingest time to reach its wait.
            std::thread::sleep(Duration::from_millis(200));
            s.spawn(|| {
                let _ = written_tx.send(db.put(b"w", b"1"));
            });
            let wrote = written.recv_timeout(Duration::from_secs(10));
            let waited = ingested.try_recv().is_err();
            job(false);
            assert!(
                matches!(wrote, Ok(Ok(()))),
                "the write waited for the ingest: {wrote:?}"
            );
            assert!(waited, "the ingest did not wait for the running job");
            let done = ingested.recv_timeout(Duration::from_secs(10));
            assert!(matches!(done, Ok(Ok(()))), "{done:?}");
        });
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(db.get(b"w").unwrap().as_deref(), Some(&b"1"[..]));
    }

    /// `check --compact-first` holds the background's picks and then flushes through
    /// the write queue; an ingest leading the queue meanwhile must not wait for that
    /// hold, or each waits for the other.
    #[test]
    fn an_ingest_does_not_wait_for_a_hold_on_the_background() {
        let tmp = tempfile::tempdir().unwrap();
        let (db, path) = db_and_file(tmp.path());
        let hold = ManualHold::new(db.inner());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = db.ingest(&db.default_keyspace(), &[&path], IngestOptions::default());
                let _ = tx.send(r.map(|_| ()));
            });
            let done = rx.recv_timeout(Duration::from_secs(10));
            // Let a stuck ingest go before the scope joins it.
            drop(hold);
            assert!(matches!(done, Ok(Ok(()))), "{done:?}");
        });
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
