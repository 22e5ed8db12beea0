//! The database: keyspaces, the write path and the read path, and the background work
//! that keeps the trees in shape.
//!
//! Write path: `WriteBatch` -> group commit (`write`) -> WAL -> memtable; a full
//! memtable is frozen and flushed by a background thread into one level-0 run per
//! keyspace (`background`). Read path (`read`): memtables newest first, then each
//! level's runs newest first, merged by seqno; a read at a snapshot sees exactly the
//! entries with seqno <= the snapshot.
//!
//! What a reader sees is one `SuperVersion`: the active memtable, the frozen ones and
//! the SSTable version, swapped together so no entry is ever missed or seen half-moved.

mod background;
mod extension;
mod files;
pub(crate) mod filter_key;
mod ingest;
mod key_batch;
mod keyspace;
mod killed;
mod open;
mod patch;
mod read;
mod snapshot;
mod stats;
mod verify;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::compaction::{CompactionPicker, JobContext, Obligations};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::cache::{BlockCache, SstCache};
use crate::version::Version;
use crate::version::set::VersionSet;
use crate::wal;

pub(crate) use background::ManualHold;
pub(crate) use extension::Extension;
pub use files::LiveFile;
pub(crate) use ingest::CheckedFile;
pub use ingest::{IngestOptions, IngestReport, IngestedFile};
pub(crate) use key_batch::KeyBatch;
pub use keyspace::Keyspace;
pub(crate) use read::{Entry, ScanRange};
pub use read::{KeyRange, Scan};
pub use snapshot::Snapshot;
pub use stats::{KeyspaceStats, LevelStats, Stats};
pub use verify::FilesCheck;
pub(crate) use verify::verify_files;

/// Keyspace names starting with this belong to tables.
pub const RESERVED_PREFIX: &str = "table:";

/// Name of the keyspace every database has.
pub const DEFAULT_KEYSPACE: &str = "default";

/// What one reader works against: memtables and SSTables swapped as one.
pub(crate) struct SuperVersion {
    pub mem: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
    /// Whether a keyspace of `version` declares a delete key: when none does, every
    /// read skips looking for delete-where records (`read::deletes_in`).
    pub any_delete_key: bool,
}

impl SuperVersion {
    pub(crate) fn new(mem: Arc<MemTable>, imm: Vec<Arc<MemTable>>, version: Arc<Version>) -> SuperVersion {
        SuperVersion {
            any_delete_key: crate::delete_key::any_config(&version.meta),
            mem,
            imm,
            version,
        }
    }
}

pub(crate) struct BgState {
    pub busy: HashSet<u64>,
    /// Keyspaces whose compactions are held back (an index being built).
    pub paused: HashSet<u32>,
    pub flushing: bool,
    /// Compactions picked and not yet installed.
    pub compacting: usize,
    pub manual: usize,
    /// Foreground jobs running ([`DbInner::begin_job`]).
    pub foreground: usize,
    pub error: Option<String>,
    pub shutdown: bool,
}

impl BgState {
    /// Whether waiting for the background still makes sense: not after a failure, and
    /// not once the database is closing.
    pub fn check(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(Error::Background(e.clone()));
        }
        if self.shutdown {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

/// A running foreground job ([`DbInner::begin_job`]).
pub(crate) struct ForegroundJob<'a>(&'a DbInner);

impl Drop for ForegroundJob<'_> {
    fn drop(&mut self) {
        self.0.bg.lock().foreground -= 1;
        self.0.bg_cv.notify_all();
    }
}

pub(crate) struct WalState {
    pub writer: wal::Writer,
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    /// The next file number when the database was opened: files numbered from here on
    /// were made by this process (a job's outputs exist before the manifest lists
    /// them), older unlisted ones are orphans `check` reports.
    pub first_own_file: u64,
    pub opts: Options,
    pub sst_cache: Arc<SstCache>,
    /// Removed SSTables whose last holder let go, for the workers to unlink.
    pub retired: Arc<crate::version::ObsoleteFiles>,
    pub block_cache: Option<Arc<BlockCache>>,
    pub versions: Mutex<VersionSet>,
    pub sv: RwLock<Arc<SuperVersion>>,
    pub wal: Mutex<Option<WalState>>,
    pub queue: Mutex<write::WriteQueue>,
    pub queue_cv: Condvar,
    /// Last seqno handed to a writer.
    pub last_seq: AtomicU64,
    /// Last seqno whose batch is fully in the memtable (what new readers see).
    pub visible_seq: AtomicU64,
    pub snapshots: Mutex<snapshot::SnapshotList>,
    pub bg: Mutex<BgState>,
    pub bg_cv: Condvar,
    pub picker: Mutex<CompactionPicker>,
    /// Files the picker found owing no secondary range delete, by file number, with
    /// the seqno through which every record was checked (`db::killed`).
    pub killed_checked: Arc<Mutex<HashMap<u64, SeqNo>>>,
    pub counters: stats::Counters,
    pub job_ctx: JobContext,
    /// The layer above the engine, if any (the table layer).
    pub ext: Arc<dyn Extension>,
    /// Which keyspaces owe deletes for the versions they drop, as `ext` last said.
    pub obligations: RwLock<Arc<dyn Obligations>>,
    /// Held through a whole `catalog_changed`, so the catalog and obligations last
    /// published are those of the newest version read.
    pub catalog_gate: Mutex<()>,
    pub closed: AtomicBool,
    /// The directory lock; released at close even while handles live on.
    pub lock: Mutex<Option<std::fs::File>>,
}

/// An open database.
///
/// ```
/// use strata::{Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put(b"k1", b"v1").unwrap();
/// db.put(b"k2", b"v2").unwrap();
/// db.delete(b"k1").unwrap();
/// assert_eq!(db.get(b"k1").unwrap(), None);
/// let all: Vec<_> = db.scan(..).unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(all, vec![(b"k2".to_vec(), b"v2".to_vec())]);
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
    default: Keyspace,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Opens the engine with `ext` plugged in. `Db::open`, which plugs in the table
    /// layer, is defined by that layer.
    pub(crate) fn open_with(path: &Path, opts: Options, ext: Arc<dyn Extension>) -> Result<Db> {
        let inner = Arc::new(open::open_inner(path, opts, ext)?);
        let mut threads = Vec::new();
        // A read-only database runs no flushes, compactions or purges: they write.
        let workers = if inner.opts.read_only {
            0
        } else {
            inner.opts.background_threads
        };
        // A start that fails stops what it started, and releases the directory lock.
        let abandon = |inner: Arc<DbInner>, threads: Vec<JoinHandle<()>>, e: Error| {
            let mut db = Db {
                default: Keyspace::new(inner.clone(), 0, DEFAULT_KEYSPACE.into()),
                inner,
                threads,
            };
            let _ = db.shutdown();
            Err(e)
        };
        for i in 0..workers {
            let inner2 = inner.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("strata-bg-{i}"))
                .spawn(move || background::worker(&inner2));
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let e = Error::io(&inner.dir, e);
                    return abandon(inner, threads, e);
                }
            }
        }
        if !inner.opts.read_only {
            match inner.ext.start(&inner) {
                Ok(hs) => threads.extend(hs),
                Err(e) => return abandon(inner, threads, e),
            }
        }
        let default = Keyspace::new(inner.clone(), 0, DEFAULT_KEYSPACE.into());
        inner.bg_cv.notify_all();
        Ok(Db {
            inner,
            threads,
            default,
        })
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The keyspace named "default".
    pub fn default_keyspace(&self) -> Keyspace {
        self.default.clone()
    }

    /// Creates a new keyspace (an independent LSM tree sharing this database's WAL,
    /// seqnos and manifest).
    pub fn create_keyspace(&self, name: &str) -> Result<Keyspace> {
        let id = self.inner.create_keyspace(name)?;
        Ok(Keyspace::new(self.inner.clone(), id, name.into()))
    }

    /// Opens an existing keyspace by name.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        let id = self.inner.keyspace_id(name)?;
        Ok(Keyspace::new(self.inner.clone(), id, name.into()))
    }

    /// Opens a keyspace, creating it if needed.
    pub fn keyspace_or_create(&self, name: &str) -> Result<Keyspace> {
        match self.keyspace(name) {
            Err(Error::NotFound(_)) => self.create_keyspace(name),
            r => r,
        }
    }

    /// Names of all keyspaces, sorted.
    pub fn list_keyspaces(&self) -> Vec<String> {
        let v = self.inner.current().version.clone();
        let mut names: Vec<String> = v.keyspaces.values().map(|k| k.name.clone()).collect();
        names.sort();
        names
    }

    /// Drops a keyspace and (once no reader uses them) deletes its files.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.inner.drop_keyspace(name)
    }

    /// Sets `key` to `value` in the default keyspace.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.default.put(key, value)
    }

    /// Reads `key` from the default keyspace.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.default.get(key)
    }

    /// Deletes `key` from the default keyspace.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.default.delete(key)
    }

    /// Deletes every key in `range` (`start..end`) of the default keyspace.
    pub fn delete_range(&self, range: std::ops::Range<&[u8]>) -> Result<()> {
        self.default.delete_range(range)
    }

    /// Scans the default keyspace; the iterator also runs in reverse (`.rev()`).
    pub fn scan(&self, range: impl KeyRange) -> Result<Scan> {
        self.default.scan(range)
    }

    /// Applies a batch atomically; returns when it is acknowledged (durable under the
    /// sync policy).
    ///
    /// A table's internal keyspaces (`table:...`) are refused: write rows through the
    /// table API.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write_user(batch).map(|_| ())
    }

    /// Applies a batch and returns the seqno of its last operation.
    pub fn write_with_seq(&self, batch: WriteBatch) -> Result<SeqNo> {
        self.inner.write_user(batch)
    }

    /// A consistent read view at the current moment; held versions are not compacted
    /// away until it is dropped.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    /// Flushes the memtable to level 0 and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Compacts every keyspace fully (all levels into the last), after a flush. Work the
    /// layer above queued (a table's background purges) lands first, so the compaction
    /// includes it.
    pub fn compact_range(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.ext.settle(&self.inner);
        self.inner.flush_and_wait()?;
        let ids: Vec<u32> = self.inner.current().version.keyspaces.keys().copied().collect();
        for id in ids {
            self.inner.compact_keyspace(id, None, None)?;
        }
        Ok(())
    }

    /// Waits until no flush or compaction is pending or running (tests, benchmarks).
    pub fn wait_for_background(&self) -> Result<()> {
        self.inner.wait_idle()
    }

    /// A report of levels, files, sizes, tombstones and work done.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Last committed seqno.
    pub fn last_seq(&self) -> SeqNo {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    /// Catalog entry by name (used by the table layer).
    pub fn meta(&self, name: &str) -> Option<Vec<u8>> {
        self.inner.current().version.meta.get(name).cloned()
    }

    /// Sets or removes catalog entries durably in one manifest edit.
    pub fn set_meta(&self, entries: Vec<(String, Option<Vec<u8>>)>) -> Result<()> {
        self.inner.set_meta(entries)
    }

    /// Shuts down cleanly, reporting any error (dropping does the same silently).
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        {
            let mut bg = self.inner.bg.lock();
            bg.shutdown = true;
        }
        self.inner.bg_cv.notify_all();
        self.inner.queue_cv.notify_all();
        self.inner.ext.stop();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        {
            // Invariant of `DbInner::begin_job`; the jobs see `shutdown` where they
            // wait for the background, so none waits for this close.
            let mut bg = self.inner.bg.lock();
            while bg.foreground > 0 {
                self.inner.bg_cv.wait(&mut bg);
            }
        }
        self.inner.retired.close();
        let r = {
            let mut wal = self.inner.wal.lock();
            match wal.take() {
                Some(mut w) => w.writer.flush().and_then(|_| w.writer.sync()).map(|()| Some(w)),
                None => Ok(None),
            }
        };
        // Record the synced point of the last log, so that recovery can tell damage that
        // cuts it from a torn tail. Only after a clean sync, and never after a failure.
        let r = match r {
            Ok(Some(w)) if self.inner.bg.lock().error.is_none() => {
                let sv = self.inner.current();
                let synced = open::SyncedWal {
                    number: sv.mem.wal_number(),
                    len: w.writer.len(),
                    last_seq: self.inner.last_seq.load(Ordering::Acquire),
                };
                self.inner
                    .versions
                    .lock()
                    .log_and_apply(crate::version::VersionEdit {
                        meta: vec![(open::SYNCED_WAL_META.to_string(), Some(synced.encode()))],
                        ..Default::default()
                    })
                    .map(drop)
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        // Old handles now only answer Closed: let the directory be opened again.
        self.inner.lock.lock().take();
        r
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl DbInner {
    pub fn current(&self) -> Arc<SuperVersion> {
        self.sv.read().clone()
    }

    /// Refuses changes to a database opened with `Options::read_only`.
    pub fn check_writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::InvalidArgument("the database was opened read-only".into()));
        }
        Ok(())
    }

    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Registers a foreground job that writes files or the manifest (a manual
    /// compaction, an ingest, an index build, a page drop, a catalog edit) until the
    /// guard drops.
    /// Invariant: **nothing writes into the directory once a close returns**: the close
    /// waits for the jobs running and refuses new ones with [`Error::Closed`] (its lock
    /// released, another handle may own the directory and its file numbers).
    pub(crate) fn begin_job(&self) -> Result<ForegroundJob<'_>> {
        let mut bg = self.bg.lock();
        if bg.shutdown || self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        bg.foreground += 1;
        Ok(ForegroundJob(self))
    }

    /// Installs a new SSTable version, keeping the memtables (minus `flushed`).
    pub fn install_version(&self, version: Arc<Version>, flushed: Option<&Arc<MemTable>>) {
        let mut sv = self.sv.write();
        let imm = sv
            .imm
            .iter()
            .filter(|m| flushed.is_none_or(|f| !Arc::ptr_eq(m, f)))
            .cloned()
            .collect();
        *sv = Arc::new(SuperVersion::new(sv.mem.clone(), imm, version));
    }

    /// Makes `edit` durable and installs it. New files of keyspaces dropped meanwhile
    /// (deferred deletes of a concurrently dropped index) are left out and deleted, and
    /// their new delete-where records left out.
    pub fn install_edit(&self, mut edit: crate::version::VersionEdit, flushed: Option<&Arc<MemTable>>) -> Result<()> {
        let mut vs = self.versions.lock();
        let cur = vs.current();
        let (keep, gone): (Vec<_>, Vec<_>) = edit
            .new_files
            .into_iter()
            .partition(|f| cur.keyspace(f.keyspace).is_some() || edit.new_keyspaces.iter().any(|k| k.0 == f.keyspace));
        edit.new_files = keep;
        // Likewise the delete-where records a flush took from the memtable: the drop
        // removed only those already in the manifest.
        let new_keyspaces = &edit.new_keyspaces;
        edit.meta.retain(|(name, _)| {
            crate::delete_key::parse_record_name(name)
                .is_none_or(|(ks, _)| cur.keyspace(ks).is_some() || new_keyspaces.iter().any(|k| k.0 == ks))
        });
        if !edit.new_files.is_empty() {
            // The new files' names must be durable before the manifest names them.
            self.opts.fs.sync_dir(&self.dir)?;
        }
        // Judged under the lock, against the version this edit applies to.
        if crate::delete_key::any_config(&cur.meta) {
            killed::retire_records(&self.sst_cache, &cur, &mut edit);
        }
        let v = vs.log_and_apply(edit)?;
        self.install_version(v, flushed);
        drop(vs);
        for f in gone {
            let _ = self
                .opts
                .fs
                .remove(&self.dir.join(crate::sstable::sst_file_name(f.meta.number)));
        }
        Ok(())
    }

    /// Which keyspaces owe deletes for the versions they drop.
    pub fn obligations(&self) -> Arc<dyn Obligations> {
        self.obligations.read().clone()
    }

    /// Lets the layer above read the catalog of the current version again.
    pub fn catalog_changed(&self) -> Result<()> {
        // Unserialised, a change that read an older version could publish after one
        // that read a newer: a table just created would be missing from the catalog,
        // or from the obligations (its dropped versions would emit no index deletes).
        let _gate = self.catalog_gate.lock();
        let v = self.current().version.clone();
        #[cfg(test)]
        crate::test_gate::CATALOG_GATE.pass(&self.dir);
        *self.obligations.write() = self.ext.catalog_changed(&v)?;
        Ok(())
    }

    /// Makes every committed write durable (a no-op cost-wise when commits sync).
    pub fn sync_wal(&self) -> Result<()> {
        if self.opts.sync != crate::options::SyncPolicy::None {
            return Ok(());
        }
        let mut wal = self.wal.lock();
        match wal.as_mut() {
            Some(w) => w.writer.flush().and_then(|_| w.writer.sync()),
            None => Err(Error::Closed),
        }
    }

    pub fn keyspace_id(&self, name: &str) -> Result<u32> {
        let v = self.current().version.clone();
        v.keyspaces
            .values()
            .find(|k| k.name == name)
            .map(|k| k.id)
            .ok_or_else(|| Error::NotFound(format!("keyspace {name:?}")))
    }

    fn create_keyspace(&self, name: &str) -> Result<u32> {
        if name.starts_with(RESERVED_PREFIX) {
            return Err(Error::InvalidArgument(format!(
                "keyspace names starting with {RESERVED_PREFIX:?} are reserved for tables"
            )));
        }
        let ids = self.catalog_edit(&[name], &[], Vec::new())?;
        ids.first().copied().ok_or(Error::Closed)
    }

    fn drop_keyspace(&self, name: &str) -> Result<()> {
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument("the default keyspace cannot be dropped".into()));
        }
        if name.starts_with(RESERVED_PREFIX) {
            return Err(Error::InvalidArgument(format!(
                "{name:?} belongs to a table: drop the table or index instead"
            )));
        }
        let id = self.keyspace_id(name)?;
        self.catalog_edit(&[], &[id], Vec::new())?;
        Ok(())
    }

    fn set_meta(&self, entries: Vec<(String, Option<Vec<u8>>)>) -> Result<()> {
        self.catalog_edit(&[], &[], entries)?;
        Ok(())
    }

    /// Creates and drops keyspaces and changes catalog entries in one durable edit;
    /// returns the ids of the created keyspaces. Dropping waits until no background job
    /// holds the keyspaces' files. The layer above reads the new catalog after.
    pub fn catalog_edit(
        &self,
        create: &[&str],
        dropped: &[u32],
        meta: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<Vec<u32>> {
        self.catalog_edit_with(create, dropped, false, |_| Ok(meta))
    }

    /// Like [`DbInner::catalog_edit`], with catalog entries computed from the new
    /// keyspace ids, and optionally pausing compactions of the new keyspaces.
    pub fn catalog_edit_with(
        &self,
        create: &[&str],
        dropped: &[u32],
        pause_created: bool,
        meta: impl FnOnce(&[u32]) -> Result<Vec<(String, Option<Vec<u8>>)>>,
    ) -> Result<Vec<u32>> {
        let _job = self.begin_job()?;
        for name in create {
            if name.is_empty() || name.len() > 255 {
                return Err(Error::InvalidArgument("keyspace names must be 1 to 255 bytes".into()));
            }
        }
        let mut bg = self.bg.lock();
        loop {
            let v = self.current().version.clone();
            let mut busy = false;
            for id in dropped {
                let ks = v
                    .keyspace(*id)
                    .ok_or_else(|| Error::NotFound(format!("keyspace id {id}")))?;
                busy |= ks.files().any(|f| bg.busy.contains(&f.number()));
            }
            if !busy {
                break;
            }
            if bg.shutdown {
                return Err(Error::Closed);
            }
            self.bg_cv.wait_for(&mut bg, std::time::Duration::from_millis(20));
        }
        let mut vs = self.versions.lock();
        let cur = vs.current();
        let mut edit = crate::version::VersionEdit {
            dropped_keyspaces: dropped.to_vec(),
            ..Default::default()
        };
        let mut ids = Vec::new();
        for (i, name) in create.iter().enumerate() {
            if cur.keyspaces.values().any(|k| k.name == *name) || create[..i].contains(name) {
                return Err(Error::AlreadyExists(format!("keyspace {name:?}")));
            }
            let id = vs.next_keyspace_id + i as u32;
            edit.new_keyspaces.push((id, name.to_string()));
            ids.push(id);
        }
        edit.meta = meta(&ids)?;
        // A dropped keyspace's delete key, secondary range deletes and filter setting go
        // with it.
        for id in dropped {
            edit.meta
                .extend(crate::delete_key::meta_names_of(&cur.meta, *id).map(|n| (n, None)));
            let filter = filter_key::name(*id);
            if cur.meta.contains_key(&filter) {
                edit.meta.push((filter, None));
            }
        }
        if pause_created {
            bg.paused.extend(ids.iter().copied());
        }
        edit.next_keyspace_id = Some(vs.next_keyspace_id + create.len() as u32);
        let v = vs.log_and_apply(edit)?;
        self.install_version(v, None);
        drop(vs);
        drop(bg);
        self.catalog_changed()?;
        Ok(ids)
    }

    pub fn background_error(&self) -> Result<()> {
        self.bg.lock().check()
    }

    /// Live snapshot seqnos, ascending.
    pub fn snapshot_list(&self) -> Vec<SeqNo> {
        self.snapshots.lock().seqs().collect()
    }

    fn stats(&self) -> Stats {
        use stats::Counters as C;
        let sv = self.current();
        let c = &self.counters;
        // Taken one at a time: background workers take the background state, then the
        // snapshot list; holding both here in the other order would deadlock.
        let snapshots = self.snapshots.lock().count();
        let (background_error, flush_running, compactions_running) = {
            let bg = self.bg.lock();
            (bg.error.clone(), bg.flushing, bg.compacting)
        };
        let mut s = Stats {
            user_bytes_written: C::get(&c.user_bytes),
            user_ops_written: C::get(&c.user_ops),
            wal_bytes_written: C::get(&c.wal_bytes),
            wal_syncs: C::get(&c.wal_syncs),
            flushes: C::get(&c.flushes),
            flush_bytes_written: C::get(&c.flush_bytes),
            compactions: C::get(&c.compactions),
            trivial_moves: C::get(&c.trivial_moves),
            compaction_bytes_read: C::get(&c.compaction_read),
            compaction_bytes_written: C::get(&c.compaction_written),
            stalls: C::get(&c.stalls),
            stall_micros: C::get(&c.stall_micros),
            memtable_bytes: sv.mem.approximate_bytes() as u64,
            immutable_memtables: sv.imm.len(),
            block_cache_usage: self.block_cache.as_ref().map_or(0, |b| b.usage_bytes()),
            block_cache_capacity: self.block_cache.as_ref().map_or(0, |b| b.capacity_bytes()),
            block_cache_hits: self.block_cache.as_ref().map_or(0, |b| b.hits()),
            block_cache_misses: self.block_cache.as_ref().map_or(0, |b| b.misses()),
            block_cache_warmed: self.block_cache.as_ref().map_or(0, |b| b.warmed()),
            open_sst_files: self.sst_cache.len(),
            flush_running,
            compactions_running,
            last_seq: self.visible_seq.load(Ordering::Acquire),
            snapshots,
            background_error,
            delete_wheres: C::get(&c.delete_wheres),
            delete_pages_dropped: C::get(&c.pages_dropped),
            delete_pages_partial: C::get(&c.pages_partial),
            delete_pages_patched: C::get(&c.pages_patched),
            delete_rewrite_bytes_read: C::get(&c.kill_rewrite_read),
            delete_rewrite_bytes_written: C::get(&c.kill_rewrite_written),
            ..Default::default()
        };
        let written = s.flush_bytes_written + s.compaction_bytes_written;
        s.write_amplification = if s.user_bytes_written == 0 {
            0.0
        } else {
            written as f64 / s.user_bytes_written as f64
        };
        for ks in sv.version.keyspaces.values() {
            let levels = ks
                .levels
                .iter()
                .enumerate()
                .map(|(i, l)| LevelStats {
                    level: i,
                    runs: l.runs.len(),
                    files: l.file_count(),
                    bytes: l.size(),
                    entries: l.files().map(|f| f.meta.entries).sum(),
                    tombstones: l.files().map(|f| f.meta.tombstones).sum(),
                    oldest_tombstone_time: l.files().filter_map(|f| f.meta.oldest_tombstone_time).min(),
                    ..LevelStats::default()
                })
                .collect::<Vec<_>>();
            let mut levels = levels;
            if let Ok(Some((_, plan))) = self.tile_plan(&sv, ks.id) {
                for (l, (h, why)) in levels.iter_mut().zip(plan) {
                    l.tile_h = Some(h);
                    l.tile_reason = Some(why);
                }
            }
            s.keyspaces.push(KeyspaceStats {
                name: ks.name.clone(),
                id: ks.id,
                levels,
            });
        }
        s
    }
}
