//! Opening a database: lock the directory, recover the version set from the manifest,
//! check it against the files on disk, replay the WAL into level 0, sweep files nothing
//! references, and start a new WAL.
//!
//! Invariants (see `docs/design/recovery.md`):
//! - Nothing is written or deleted until the recovered state is proven whole: every
//!   SSTable it lists exists with the recorded size, the oldest WAL it needs
//!   (`log_number`, always created and synced before a manifest names it) exists, and
//!   every WAL record reads back under the [`RecoveryMode`] and writes only keyspaces the
//!   state has allocated. Any failure is an error naming the file and offset, and the
//!   directory is left exactly as it was.
//! - A torn last record of the newest WAL is dropped by default (a crash cut an append
//!   that was never acknowledged as synced); the log is kept as `<name>.torn`.
//! - A read-only open writes nothing: no lock file is created, recovered WAL data stays
//!   in memory, and no file is swept.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::flush_memtable;
use super::{BgState, DEFAULT_KEYSPACE, DbInner, Extension, SuperVersion, WalState};
use crate::RecoveryMode;
use crate::batch::WriteBatch;
use crate::compaction::{CompactionPicker, JobContext, Obligations};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::sstable::SstOptions;
use crate::sstable::cache::{BlockCache, SstCache};
use crate::version::manifest::ManifestRead;
use crate::version::set::VersionSet;
use crate::version::{FileContext, ObsoleteFiles, VersionEdit};
use crate::wal;

const LOCK_FILE: &str = "LOCK";

pub(crate) fn open_inner(path: &Path, mut opts: crate::Options, ext: Arc<dyn Extension>) -> Result<DbInner> {
    opts.validate()?;
    if opts.direct_reads {
        opts.fs = opts.fs.with_direct_reads().ok_or_else(|| {
            Error::InvalidArgument("direct_reads: the file system does not support direct I/O".into())
        })?;
    }
    let fs = opts.fs.clone();
    let dir = path.to_path_buf();
    if dir.exists() && !dir.is_dir() {
        return Err(Error::NotADatabase {
            path: dir,
            reason: "it is a file, not a directory".into(),
        });
    }
    if opts.read_only && !fs.exists(&dir.join("CURRENT")) {
        // Creating a database is a write.
        let foreign = match fs.exists(&dir) {
            true => not_ours(fs.as_ref(), &dir)?,
            false => Vec::new(),
        };
        return Err(Error::NotADatabase {
            path: dir,
            reason: match foreign.is_empty() {
                true => "no database here (a read-only open creates none)".into(),
                false => not_empty(&foreign),
            },
        });
    }
    if !fs.exists(&dir) {
        if !opts.create_if_missing {
            return Err(Error::NotADatabase {
                path: dir,
                reason: "directory does not exist (create_if_missing is off)".into(),
            });
        }
        fs.create_dir_all(&dir)?;
    }
    let has_current = fs.exists(&dir.join("CURRENT"));
    let mut leftovers = false;
    if !has_current {
        let foreign = not_ours(fs.as_ref(), &dir)?;
        // What a creation that stopped before `CURRENT` left: cleared below, under the
        // lock, so the creation can be retried.
        leftovers = !foreign.is_empty()
            && !opts.read_only
            && opts.create_if_missing
            && crate::version::manifest::is_interrupted_creation(fs.as_ref(), &dir, &foreign)?;
        if !foreign.is_empty() && !leftovers {
            return Err(Error::NotADatabase {
                path: dir,
                reason: not_empty(&foreign),
            });
        }
        if !opts.create_if_missing {
            return Err(Error::NotADatabase {
                path: dir,
                reason: "no database here (create_if_missing is off)".into(),
            });
        }
    } else if opts.error_if_exists {
        return Err(Error::AlreadyExists(format!("database at {}", dir.display())));
    }
    let lock_path = dir.join(LOCK_FILE);
    let lock = if opts.read_only {
        lock_shared(&lock_path)?
    } else {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        if let Err(e) = lock.try_lock() {
            return Err(lock_refused(&lock_path, e, "already open"));
        }
        Some(lock)
    };
    if leftovers {
        clear_interrupted_creation(fs.as_ref(), &dir)?;
    }

    let block_cache = (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
    let sst_cache = Arc::new(SstCache::new(
        fs.clone(),
        dir.clone(),
        opts.max_open_files,
        block_cache.clone(),
    ));
    let retired = Arc::new(if opts.read_only {
        ObsoleteFiles::keeping(fs.clone())
    } else {
        ObsoleteFiles::new(fs.clone())
    });
    let ctx = || FileContext {
        dir: dir.clone(),
        fs: fs.clone(),
        retired: retired.clone(),
        sst_cache: sst_cache.clone(),
    };
    let (mut vs, manifest) = match VersionSet::recover(ctx(), opts.recovery_mode, opts.read_only)? {
        Some((vs, read)) => (vs, Some(read)),
        None => {
            // The first edit starts the manifest, whatever its size limit.
            let mut vs = VersionSet::new_empty(ctx());
            vs.log_and_apply(VersionEdit {
                new_keyspaces: vec![(0, DEFAULT_KEYSPACE.to_string())],
                next_keyspace_id: Some(1),
                ..Default::default()
            })?;
            (vs, None)
        }
    };
    vs.max_manifest_bytes = opts.max_manifest_file_size;

    let sst_opts = SstOptions {
        block_size: opts.block_size,
        bloom_fpr: opts.bloom_fpr,
        compression: opts.compression,
        ..SstOptions::default()
    };
    let job_ctx = JobContext {
        fs: fs.clone(),
        dir: dir.clone(),
        sst_cache: sst_cache.clone(),
        sst_opts,
        file_numbers: vs.next_file_number.clone(),
        target_file_size: opts.target_file_size,
        clock: opts.clock.clone(),
        deletes: Default::default(),
        filter_keys: Default::default(),
    };

    if let Some(m) = &manifest {
        verify_state(&vs, m, fs.as_ref(), &dir)?;
    }
    let obligations = ext.catalog_changed(&vs.current())?;
    let parts = Parts {
        lock,
        dir,
        sst_cache,
        retired,
        block_cache,
        ext,
        obligations,
        job_ctx,
        opts,
    };
    let Parts {
        opts,
        dir,
        job_ctx,
        obligations,
        ..
    } = &parts;
    let manifest_at = manifest.as_ref().map(|m| (m.path.clone(), m.valid_len));
    if opts.read_only {
        // Recovered WAL data stays in one memtable, whatever its size: nothing is written.
        let mem = Arc::new(MemTable::new(vs.log_number, log_born(&vs)));
        let flushed_seq = vs.last_seq;
        let mut last_seq = flushed_seq;
        scan_logs(
            &LogScope::of(&vs),
            opts,
            dir,
            manifest_at.as_ref(),
            &mut |version, base, batch| {
                let end = base + batch.seq_count().saturating_sub(1);
                super::write::insert_batch(&mem, batch, base, |ks| version.keyspace(ks).is_some());
                mem.note_seq(end);
                last_seq = last_seq.max(end);
                Ok(())
            },
        )?;
        vs.last_seq = vs.last_seq.max(last_seq).max(highest_file_seq(&vs.current()));
        return parts.finish(vs, mem, None);
    }

    // A dry run over every WAL record first: damage found while replaying would come
    // after recovery flushes had already changed the directory. (A read-only open, above,
    // replays into memory only: its replay is its own dry run.)
    scan_logs(&LogScope::of(&vs), opts, dir, manifest_at.as_ref(), &mut |_, _, _| {
        Ok(())
    })?;
    sweep_unreferenced(&vs, fs.as_ref(), dir)?;
    let (last_seq, torn) = replay_wal(&mut vs, job_ctx, opts, dir, obligations.as_ref(), manifest_at.as_ref())?;

    // New WAL, then a fresh manifest whose log number forgets every replayed log.
    let wal_number = vs.new_file_number();
    let wal_path = dir.join(wal::log_file_name(wal_number));
    let writer = wal::Writer::new(fs.create(&wal_path)?);
    fs.sync_dir(dir)?;
    vs.log_number = wal_number;
    // Only now: raised before the replay, it would skip logged writes below it.
    vs.last_seq = vs.last_seq.max(last_seq).max(highest_file_seq(&vs.current()));
    let born = opts.clock.now_micros();
    vs.apply_in_new_manifest(VersionEdit {
        meta: vec![log_born_entry(wal_number, born)],
        ..Default::default()
    })?;
    let manifest_name = vs.manifest_number().map(|n| format!("MANIFEST-{n:06}"));
    for n in fs.list(dir)? {
        let old_wal = wal::parse_log_file_name(&n).is_some_and(|num| num < wal_number);
        let old_manifest = n.starts_with("MANIFEST-") && Some(&n) != manifest_name.as_ref();
        let is_torn = wal::parse_log_file_name(&n).is_some_and(|num| num < wal_number && torn.contains(&num));
        if is_torn {
            // Its tail did not checksum (or, in a salvaging recovery mode, it was not
            // replayed whole): keep the bytes for an operator rather than destroy what
            // might be a damaged record.
            fs.rename(&dir.join(&n), &dir.join(format!("{n}.torn")))?;
        } else if old_wal || old_manifest {
            fs.remove(&dir.join(&n))?;
        }
    }
    let mem = Arc::new(MemTable::new(wal_number, born));
    parts.finish(vs, mem, Some(writer))
}

/// Meta entry: the oldest log still needed (the manifest's log number) and when its
/// memtable was made. Every log after it was made later, so recovery stamps what it
/// replays with that time: a tombstone's FADE clock then starts no later than its
/// write, as a flush's does (`MemTable::created_at`), however long the database was
/// down.
const LOG_BORN: &str = "strata.log_born";

/// The [`LOG_BORN`] entry for log `number`, whose memtable was made at `micros`.
pub(super) fn log_born_entry(number: u64, micros: u64) -> (String, Option<Vec<u8>>) {
    let mut v = number.to_be_bytes().to_vec();
    v.extend_from_slice(&micros.to_be_bytes());
    (LOG_BORN.to_string(), Some(v))
}

/// When the oldest log still needed was started, or 0 (as old as can be) when the
/// manifest does not say (a database written before the entry existed).
fn log_born(vs: &VersionSet) -> u64 {
    let v = vs.current();
    let Some(b) = v.meta.get(LOG_BORN) else {
        return 0;
    };
    match (b.get(..8), b.get(8..16)) {
        (Some(n), Some(t)) if n == vs.log_number.to_be_bytes() => t.try_into().map_or(0, u64::from_be_bytes),
        _ => 0,
    }
}

/// The names in a directory without `CURRENT`, but for a lock file.
fn not_ours(fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<Vec<String>> {
    Ok(fs.list(dir)?.into_iter().filter(|n| n != LOCK_FILE).collect())
}

/// Why a directory holding `foreign` and no `CURRENT` is not a database.
fn not_empty(foreign: &[String]) -> String {
    format!(
        "directory is not empty and has no CURRENT file (found {:?})",
        &foreign[..foreign.len().min(3)]
    )
}

/// The largest seqno a live file holds or names: new writes must come after it.
/// - An ingest's seqno is in the manifest only through its files (`db::ingest`; its WAL
///   record may be lost with the unsynced tail), as their global seqno or, once a
///   compaction has rewritten them, as its output's `max_seq`.
/// - A file's `deletes_applied` and a patched page's `applied` name the visible seqno
///   when they were written, which without per-commit syncs may be a write lost with
///   the unsynced tail: a secondary range delete given that seqno again would read as
///   already applied to the file, and its rows would come back.
fn highest_file_seq(v: &crate::version::Version) -> u64 {
    v.keyspaces
        .values()
        .flat_map(|k| k.files())
        .map(|f| {
            let patched = f.meta.pages.patched.iter().map(|p| p.applied).max().unwrap_or(0);
            f.meta
                .global_seq
                .unwrap_or(f.meta.max_seq)
                .max(f.meta.deletes_applied)
                .max(patched)
        })
        .max()
        .unwrap_or(0)
}

/// What an open has gathered before it knows its memtable and WAL.
struct Parts {
    lock: Option<std::fs::File>,
    dir: PathBuf,
    sst_cache: Arc<SstCache>,
    retired: Arc<ObsoleteFiles>,
    block_cache: Option<Arc<BlockCache>>,
    ext: Arc<dyn Extension>,
    obligations: Arc<dyn Obligations>,
    job_ctx: JobContext,
    opts: crate::Options,
}

impl Parts {
    /// Builds the open database from its recovered parts.
    fn finish(self, vs: VersionSet, mem: Arc<MemTable>, writer: Option<wal::Writer>) -> Result<DbInner> {
        let version = vs.current();
        let counters = super::stats::Counters::default();
        if let Some(saved) = version.meta.get(super::stats::STATS_META) {
            counters.restore(saved);
        }
        let last = vs.last_seq;
        let first_own_file = vs.next_file_number.load(std::sync::atomic::Ordering::SeqCst);
        Ok(DbInner {
            dir: self.dir,
            first_own_file,
            sst_cache: self.sst_cache,
            retired: self.retired,
            block_cache: self.block_cache,
            versions: Mutex::new(vs),
            sv: RwLock::new(Arc::new(SuperVersion::new(mem, Vec::new(), version))),
            wal: Mutex::new(writer.map(|writer| WalState { writer })),
            queue: Mutex::new(Default::default()),
            queue_cv: Condvar::new(),
            last_seq: AtomicU64::new(last),
            visible_seq: AtomicU64::new(last),
            snapshots: Mutex::new(Default::default()),
            bg: Mutex::new(BgState {
                busy: HashSet::new(),
                paused: HashSet::new(),
                flushing: false,
                compacting: 0,
                manual: 0,
                foreground: 0,
                error: None,
                shutdown: false,
            }),
            bg_cv: Condvar::new(),
            picker: Mutex::new(CompactionPicker::default()),
            killed_checked: Arc::default(),
            counters,
            job_ctx: self.job_ctx,
            ext: self.ext,
            obligations: RwLock::new(self.obligations),
            catalog_gate: Mutex::new(()),
            closed: AtomicBool::new(false),
            lock: Mutex::new(self.lock),
            opts: self.opts,
        })
    }
}

/// Takes a shared lock on `LOCK` if it exists and can be opened for reading, so that a
/// writer cannot open the database meanwhile; a missing or unreadable `LOCK` (read-only
/// media) means no lock, since creating one would be a write.
fn lock_shared(lock_path: &Path) -> Result<Option<std::fs::File>> {
    let Ok(lock) = std::fs::File::open(lock_path) else {
        return Ok(None);
    };
    if let Err(e) = lock.try_lock_shared() {
        return Err(lock_refused(lock_path, e, "open for writing"));
    }
    Ok(Some(lock))
}

/// A LOCK that could not be taken: held elsewhere (`WouldBlock`, as RocksDB and SQLite
/// report a busy database: an I/O error, not the caller's mistake), or failing itself.
fn lock_refused(lock_path: &Path, e: std::fs::TryLockError, held: &str) -> Error {
    let source = match e {
        std::fs::TryLockError::WouldBlock => std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            format!("the database is {held} (LOCK is held by another process or handle)"),
        ),
        std::fs::TryLockError::Error(e) => e,
    };
    Error::io(lock_path, source)
}

/// Removes what a creation that stopped before `CURRENT` left (checked again under the
/// lock: another handle may have finished that creation meanwhile), so this open
/// creates the database anew. Nothing there was ever acknowledged.
fn clear_interrupted_creation(fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
    let names: Vec<String> = fs.list(dir)?.into_iter().filter(|n| n != LOCK_FILE).collect();
    if fs.exists(&dir.join("CURRENT")) || !crate::version::manifest::is_interrupted_creation(fs, dir, &names)? {
        return Err(Error::NotADatabase {
            path: dir.to_path_buf(),
            reason: "another handle changed the directory while this open checked it; open again".into(),
        });
    }
    for name in &names {
        fs.remove(&dir.join(name))?;
    }
    fs.sync_dir(dir)
}

/// Checks the recovered state against the directory before anything is changed: every
/// SSTable it lists exists with its recorded size, and the oldest WAL it needs exists.
///
/// A manifest cut at a record boundary (or whose torn tail was really damage) reads as
/// an older state; that state names logs and tables that later edits deleted, so it
/// fails here instead of leading the sweep to delete every newer file.
fn verify_state(vs: &VersionSet, m: &ManifestRead, fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
    let present: HashSet<String> = fs.list(dir)?.into_iter().collect();
    let stale = |what: String| {
        let torn = match m.stopped_at {
            Some(at) => format!(" (its records end at offset {at}: truncated or damaged?)"),
            None => String::new(),
        };
        Error::corruption(
            &m.path,
            m.valid_len,
            format!("the manifest's state {what}{torn}; nothing was changed"),
        )
    };
    if vs.log_number != 0 {
        let name = wal::log_file_name(vs.log_number);
        if !present.contains(&name) {
            return Err(stale(format!(
                "needs WAL {name} (the oldest log not yet flushed), which is missing"
            )));
        }
    }
    if let Some(synced) = LogScope::of(vs).synced {
        let name = wal::log_file_name(synced.number);
        if !present.contains(&name) {
            return Err(stale(format!(
                "names WAL {name} as synced at the last clean close, but it is missing"
            )));
        }
    }
    // Named as the damaged file: most often it was deleted or lost; the reason names
    // the manifest in case that is older than the directory.
    let missing = |name: &str, what: &str| {
        Error::corruption(
            dir.join(name),
            0,
            format!(
                "{} (valid to offset {}) lists this {what} but it is missing; nothing was changed",
                m.path.display(),
                m.valid_len
            ),
        )
    };
    let version = vs.current();
    for n in version.live_patch_files() {
        let name = crate::sstable::patch::patch_file_name(n);
        if !present.contains(&name) {
            return Err(missing(&name, "patch file"));
        }
    }
    for (_, tree) in version.keyspaces.iter() {
        for f in tree.files() {
            let name = crate::sstable::sst_file_name(f.meta.number);
            if !present.contains(&name) {
                return Err(missing(&name, "SSTable"));
            }
            let size = fs.open(&dir.join(&name))?.size();
            if size != f.meta.size {
                return Err(stale(format!(
                    "lists SSTable {name} of {} bytes, but the file holds {size}",
                    f.meta.size
                )));
            }
        }
    }
    Ok(())
}

/// Removes SSTables no version lists (outputs of a job that crashed before its edit),
/// patch files no live SSTable names, and temporary files. Runs only after [`verify_state`] and a dry run of the WAL.
fn sweep_unreferenced(vs: &VersionSet, fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
    let live: HashSet<u64> = vs.current().live_files().into_iter().collect();
    // Patch files of a job that crashed before its edit, or that no re-added file names
    // any more (superseded by a later patch of the same page).
    let patches: HashSet<u64> = vs.current().live_patch_files().into_iter().collect();
    for n in fs.list(dir)? {
        let orphan_sst = n
            .strip_suffix(".sst")
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|num| !live.contains(&num));
        let orphan_patch = crate::sstable::patch::parse_patch_file_name(&n).is_some_and(|num| !patches.contains(&num));
        if orphan_sst || orphan_patch || n.ends_with(".tmp") {
            fs.remove(&dir.join(&n))?;
        }
    }
    Ok(())
}

/// What [`scan_logs`] needs of the recovered state, copied so that a visitor may
/// change the version set (recovery flushes) while the scan runs.
struct LogScope {
    log_number: u64,
    flushed_seq: u64,
    next_keyspace_id: u32,
    version: Arc<crate::version::Version>,
    /// The WAL and its length synced at the last clean close, if still needed.
    synced: Option<SyncedWal>,
}

impl LogScope {
    fn of(vs: &VersionSet) -> LogScope {
        let version = vs.current();
        let synced = version
            .meta
            .get(SYNCED_WAL_META)
            .and_then(|b| SyncedWal::decode(b))
            .filter(|s| s.number >= vs.log_number);
        LogScope {
            log_number: vs.log_number,
            flushed_seq: vs.last_seq,
            next_keyspace_id: vs.next_keyspace_id,
            version,
            synced,
        }
    }
}

/// Catalog entry a clean close writes: the WAL it synced last, its length and last
/// seqno. Recovery then knows the log's synced point: that log must read back whole to
/// that length, so damage that cuts it at a record boundary (indistinguishable from a
/// torn tail otherwise) is an error. Ignored once the log is older than `log_number`.
pub(crate) const SYNCED_WAL_META: &str = "recovery/synced-wal";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyncedWal {
    pub number: u64,
    pub len: u64,
    pub last_seq: u64,
}

impl SyncedWal {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [self.number, self.len, self.last_seq] {
            crate::codec::put_varint(&mut out, v);
        }
        out
    }

    /// `None` for bytes that do not decode (the entry is advisory: without it recovery
    /// falls back to the torn-tail rule).
    fn decode(b: &[u8]) -> Option<SyncedWal> {
        let mut d = crate::codec::Decoder::new(b);
        let w = SyncedWal {
            number: d.varint().ok()?,
            len: d.varint().ok()?,
            last_seq: d.varint().ok()?,
        };
        d.is_empty().then_some(w)
    }
}

/// Visits every WAL record recovery replays, as `(version, base seqno, batch)`, in
/// order, applying `opts.recovery_mode` to damage. Returns the logs that were not read
/// whole (a dropped torn tail, or damage a salvaging mode skipped).
///
/// Records wholly below the flushed seqno are not visited. A record writing a keyspace
/// id the manifest never allocated means the manifest is older than the log: an error
/// naming the manifest (`manifest` = its path and valid length), whatever the mode.
fn scan_logs(
    vs: &LogScope,
    opts: &crate::Options,
    dir: &Path,
    manifest: Option<&(PathBuf, u64)>,
    visit: &mut dyn FnMut(&crate::version::Version, u64, &WriteBatch) -> Result<()>,
) -> Result<Vec<u64>> {
    let fs = opts.fs.clone();
    let mode = opts.recovery_mode;
    let mut logs: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| wal::parse_log_file_name(n))
        .filter(|n| *n >= vs.log_number)
        .collect();
    logs.sort_unstable();
    let flushed_seq = vs.flushed_seq;
    let version = vs.version.clone();
    // Whether a log after `number` holds a record: asked of a torn log only. A log made
    // by an open or a WAL switch that stopped before anything was written to it (or
    // before its manifest retired the logs before it) carries nothing, and a torn tail
    // before it is still where the log ends. A log that cannot be read counts as
    // holding one (the scan reports it).
    let records_follow = |number: u64| {
        logs.iter().filter(|&&n| n > number).any(|&n| {
            wal::Reader::open(fs.as_ref(), &dir.join(wal::log_file_name(n)))
                .and_then(|mut r| r.next_record())
                .map_or(true, |r| r.is_some())
        })
    };
    let mut not_whole = Vec::new();
    let mut stopped = false;
    // Seqnos run on without gaps from record to record and from log to log (the write
    // path is their only allocator): a gap means records were lost, e.g. an older log
    // cut at a record boundary. Not checked when salvaging skips records.
    let check_gaps = mode != RecoveryMode::SkipAnyCorruptedRecords;
    let mut expect: Option<(u64, PathBuf, u64)> = None; // (next seqno, log, its valid end)
    let enforce_synced = matches!(
        mode,
        RecoveryMode::TolerateCorruptedTail | RecoveryMode::AbsoluteConsistency
    );
    for &number in &logs {
        if stopped {
            // PointInTime: nothing after the first damage is replayed.
            not_whole.push(number);
            continue;
        }
        let path = dir.join(wal::log_file_name(number));
        let mut reader = wal::Reader::open(fs.as_ref(), &path)?;
        loop {
            let (offset, payload) = match reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(Error::Corruption { offset, .. }) if mode == RecoveryMode::PointInTime => {
                    let _ = offset;
                    stopped = true;
                    break;
                }
                Err(Error::Corruption { offset, .. }) if mode == RecoveryMode::SkipAnyCorruptedRecords => {
                    not_whole.push(number);
                    if reader.resume_after_damage(offset + 1)?.is_none() {
                        break;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (base, batch) = match WriteBatch::decode_record(&payload) {
                Ok(b) => b,
                Err(reason) => match mode {
                    RecoveryMode::PointInTime => {
                        stopped = true;
                        break;
                    }
                    RecoveryMode::SkipAnyCorruptedRecords => {
                        not_whole.push(number);
                        continue;
                    }
                    _ => {
                        return Err(Error::corruption(
                            &path,
                            offset,
                            format!("bad batch in WAL record: {reason}"),
                        ));
                    }
                },
            };
            let end = base + batch.seq_count().saturating_sub(1);
            let gap = match &expect {
                Some((next, _, _)) => base != *next,
                // The first record must not start past the flushed point.
                None => base > flushed_seq.saturating_add(1),
            };
            if check_gaps && gap {
                if mode == RecoveryMode::PointInTime {
                    stopped = true;
                    break;
                }
                let reason = match &expect {
                    Some((next, prev, prev_end)) if *prev != path => format!(
                        "WAL {} ends at offset {prev_end} after seqno {}, but the next log starts at seqno {base} \
                         (offset {offset} of {}): records are missing; nothing was changed",
                        prev.display(),
                        next - 1,
                        path.display()
                    ),
                    Some((next, _, _)) => format!(
                        "record holds seqno {base} where {next} was expected: records are missing; nothing was changed"
                    ),
                    None => format!(
                        "first record holds seqno {base}, but the manifest's state ends at seqno {flushed_seq}: \
                         records are missing; nothing was changed"
                    ),
                };
                let file = match &expect {
                    Some((_, prev, _)) => prev.clone(),
                    None => path.clone(),
                };
                let at = match &expect {
                    Some((_, prev, prev_end)) if *prev != path => *prev_end,
                    _ => offset,
                };
                return Err(Error::corruption(file, at, reason));
            }
            expect = Some((end + 1, path.clone(), reader.valid_len()));
            if end <= flushed_seq {
                continue; // already in SSTables
            }
            for op in batch.ops() {
                let ks = op
                    .map_err(|r| Error::corruption(&path, offset, format!("bad batch in WAL record: {r}")))?
                    .keyspace();
                if ks >= vs.next_keyspace_id {
                    let (mpath, mlen) = manifest.cloned().unwrap_or_else(|| (dir.join("CURRENT"), 0));
                    return Err(Error::corruption(
                        mpath,
                        mlen,
                        format!(
                            "the manifest's state is older than WAL {} (its record at offset {offset} writes keyspace {ks}, \
                             which the manifest never allocated): truncated or damaged; nothing was changed",
                            wal::log_file_name(number)
                        ),
                    ));
                }
            }
            visit(&version, base, &batch)?;
        }
        if stopped {
            not_whole.push(number);
            continue;
        }
        if enforce_synced
            && let Some(synced) = vs.synced
            && synced.number == number
            && (reader.valid_len() < synced.len || reader.torn_tail_at().is_some())
        {
            return Err(Error::corruption(
                &path,
                reader.valid_len(),
                format!(
                    "WAL was synced to {} bytes at the last clean close, but its records end at offset {}; \
                     nothing was changed",
                    synced.len,
                    reader.valid_len()
                ),
            ));
        }
        if let Some(at) = reader.torn_tail_at() {
            let is_newest = !records_follow(number);
            match mode {
                RecoveryMode::AbsoluteConsistency => {
                    return Err(Error::corruption(
                        &path,
                        at,
                        "WAL ends in a torn record (recovery mode AbsoluteConsistency); nothing was changed",
                    ));
                }
                // Older logs are synced before a new one starts: only the newest may be
                // cut short by a crash.
                RecoveryMode::TolerateCorruptedTail if !is_newest => {
                    return Err(Error::corruption(
                        &path,
                        at,
                        "WAL ends in a torn record but newer WAL files follow it; nothing was changed",
                    ));
                }
                RecoveryMode::PointInTime if !is_newest => stopped = true,
                _ => {}
            }
            not_whole.push(number);
        }
    }
    not_whole.dedup();
    Ok(not_whole)
}

/// Replays WAL files not yet flushed into level-0 runs; returns the last seqno seen and
/// the logs not read whole (kept as `.torn`).
fn replay_wal(
    vs: &mut VersionSet,
    ctx: &JobContext,
    opts: &crate::Options,
    dir: &Path,
    obligations: &dyn Obligations,
    manifest: Option<&(PathBuf, u64)>,
) -> Result<(u64, Vec<u64>)> {
    let scope = LogScope::of(vs);
    let mut last_seq = scope.flushed_seq;
    let born = log_born(vs);
    let mut mem = Arc::new(MemTable::new(0, born));
    let not_whole = scan_logs(&scope, opts, dir, manifest, &mut |version, base, batch| {
        let end = base + batch.seq_count().saturating_sub(1);
        // Operations on keyspaces dropped since are skipped.
        super::write::insert_batch(&mem, batch, base, |ks| version.keyspace(ks).is_some());
        mem.note_seq(end);
        last_seq = last_seq.max(end);
        maybe_flush(vs, ctx, &mut mem, opts, obligations, born)
    })?;
    if !mem.is_empty() {
        flush_recovered(vs, ctx, &mem, opts, obligations)?;
    }
    vs.last_seq = vs.last_seq.max(last_seq);
    Ok((last_seq, not_whole))
}

fn maybe_flush(
    vs: &mut VersionSet,
    ctx: &JobContext,
    mem: &mut Arc<MemTable>,
    opts: &crate::Options,
    obligations: &dyn Obligations,
    born: u64,
) -> Result<()> {
    if mem.approximate_bytes() >= opts.memtable_budget {
        flush_recovered(vs, ctx, mem, opts, obligations)?;
        *mem = Arc::new(MemTable::new(0, born));
    }
    Ok(())
}

fn flush_recovered(
    vs: &mut VersionSet,
    ctx: &JobContext,
    mem: &Arc<MemTable>,
    opts: &crate::Options,
    obligations: &dyn Obligations,
) -> Result<()> {
    let run = vs.new_file_number();
    let version = vs.current();
    let mut res = flush_memtable(ctx, mem, &version, &[], run, obligations, opts.deferred_sort_memory)?;
    // As `DbInner::install_edit` does: records no file can owe are not kept.
    if crate::delete_key::any_config(&version.meta) {
        super::killed::retire_records(&ctx.sst_cache, &version, &mut res.edit);
    }
    if !res.edit.new_files.is_empty() {
        // The new files' names must be durable before the manifest names them (as in
        // `DbInner::install_edit`): only the first edit of an open rolls the manifest,
        // which syncs the directory.
        ctx.fs.sync_dir(&ctx.dir)?;
    }
    vs.log_and_apply(res.edit)?;
    Ok(())
}
