//! A fault-injecting [`FileSystem`] wrapping [`RealFs`], built only on the public
//! `strata::fs` traits.
//!
//! Faults are armed on a shared [`FaultState`] as [`FaultSpec`]s: a target (a file kind or
//! any file), an operation, a fault, how many matching operations to let through first
//! (`after`) and how many to hit (`times`, default: every one until [`FaultState::clear`]).
//! Every injected fault is counted and logged.
//!
//! Faults:
//! - [`Fault::Error`]: the operation fails with `EIO` and does nothing;
//! - [`Fault::NoSpace`]: the operation fails with `ENOSPC` (raw OS error 28, kind
//!   `StorageFull`) and does nothing;
//! - [`Fault::ShortWrite`] (append): only the first part of the buffer is appended, then
//!   the call fails;
//! - [`Fault::ShortRead`] (read, read-all): fewer bytes than asked are returned *as a
//!   success*, which breaks the `read_at` contract: the caller must notice;
//! - [`Fault::BitFlip`] (read, read-all): one random bit of the returned data is flipped
//!   (the file itself is untouched, like a flaky bus or cable);
//! - [`Fault::LyingSync`] (sync): success is reported but nothing becomes durable;
//! - [`Fault::PowerOff`]: the machine dies at this operation (see below).
//!
//! Crash simulation ("lose unsynced data", after LevelDB's `fault_injection_test`): the
//! state remembers, per file written through this file system, the length at the last
//! successful `sync`, and which files were created or renamed since the last `sync_dir`
//! of their directory. [`FaultState::crash`] — to be called once every handle on the
//! database is dropped — truncates every file to its synced length and, with
//! [`CrashMode::LoseUnsyncedDirEntries`], deletes files whose directory entry was never
//! made durable.
//!
//! By default `sync` and `sync_dir` only push data to the OS and record the durable
//! point, without a real `fsync`: the crash simulation only needs the bookkeeping, and
//! the tests stay fast. [`FaultState::set_real_sync`] turns real fsyncs back on.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::fs::{FileSystem, RandomAccessFile, RealFs, WritableFile};
use strata::{Error, Result};

/// What kind of file a path names (by its name, as Strata lays out a directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `<n>.wal`
    Wal,
    /// `<n>.sst`
    Sst,
    /// `MANIFEST-<n>`
    Manifest,
    /// `CURRENT` and `CURRENT.tmp`
    Current,
    /// Other `*.tmp` files (spilled sort runs).
    Temp,
    /// Anything else (directories included).
    Other,
}

impl FileKind {
    /// The kind of `path`.
    pub fn of(path: &Path) -> FileKind {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("CURRENT") {
            FileKind::Current
        } else if name.starts_with("MANIFEST-") {
            FileKind::Manifest
        } else if name.ends_with(".wal") {
            FileKind::Wal
        } else if name.ends_with(".sst") {
            FileKind::Sst
        } else if name.ends_with(".tmp") {
            FileKind::Temp
        } else {
            FileKind::Other
        }
    }
}

/// Which files a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every file.
    Any,
    /// Files of one kind.
    Kind(FileKind),
}

impl Target {
    fn matches(self, kind: FileKind) -> bool {
        match self {
            Target::Any => true,
            Target::Kind(k) => k == kind,
        }
    }
}

/// A file-system operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `FileSystem::create`
    Create,
    /// `FileSystem::open_append`
    OpenAppend,
    /// `FileSystem::open` (for positional reads)
    Open,
    /// `WritableFile::append`
    Append,
    /// `WritableFile::flush`
    Flush,
    /// `WritableFile::sync`
    Sync,
    /// `RandomAccessFile::read_at`
    Read,
    /// `FileSystem::read_all`
    ReadAll,
    /// `FileSystem::rename` (the source's kind is matched)
    Rename,
    /// `FileSystem::remove`
    Remove,
    /// `FileSystem::list`
    List,
    /// `FileSystem::sync_dir`
    SyncDir,
    /// `FileSystem::create_dir_all`
    CreateDir,
}

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// `EIO`, nothing done.
    Error,
    /// `ENOSPC`, nothing done.
    NoSpace,
    /// Append: part of the buffer written, then an error.
    ShortWrite,
    /// Read: fewer bytes returned, as a success.
    ShortRead,
    /// Read: one bit of the returned data flipped.
    BitFlip,
    /// Sync: reports success without making anything durable (a disk cache that ignores
    /// flushes); only meaningful with a later [`FaultState::crash`].
    LyingSync,
    /// The machine dies at this operation: it and every later operation that would
    /// change a file fail, as after [`FaultState::power_off`].
    PowerOff,
}

/// One armed fault.
#[derive(Debug, Clone, Copy)]
pub struct FaultSpec {
    /// Files it applies to.
    pub target: Target,
    /// Operation it applies to.
    pub op: Op,
    /// What happens.
    pub fault: Fault,
    /// Matching operations let through before the first fault.
    pub after: u64,
    /// Faults to inject, `None` for every matching operation until cleared.
    pub times: Option<u64>,
    /// Chance that a matching operation (past `after`) is hit.
    pub probability: f64,
    /// Reads only: match only reads overlapping the last `n` bytes of the file, and
    /// damage only those bytes (to aim at a log's final record).
    pub tail: Option<u64>,
}

impl FaultSpec {
    /// Hits every matching operation until cleared.
    pub fn new(target: Target, op: Op, fault: Fault) -> Self {
        FaultSpec {
            target,
            op,
            fault,
            after: 0,
            times: None,
            probability: 1.0,
            tail: None,
        }
    }
    /// Lets `n` matching operations through first.
    pub fn after(mut self, n: u64) -> Self {
        self.after = n;
        self
    }
    /// Injects at most `n` faults.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }
    /// Reads only: aims at the last `n` bytes of the file.
    pub fn tail(mut self, n: u64) -> Self {
        self.tail = Some(n);
        self
    }
    /// Hits each eligible operation with probability `p`.
    pub fn probability(mut self, p: f64) -> Self {
        self.probability = p;
        self
    }
}

#[derive(Debug)]
struct Armed {
    spec: FaultSpec,
    seen: u64,
    injected: u64,
}

/// How much a simulated crash loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Every file is cut back to its length at its last successful sync.
    LoseUnsyncedData,
    /// As above, and files created (or renamed into place) since the last `sync_dir` of
    /// their directory disappear.
    LoseUnsyncedDirEntries,
}

/// What a simulated crash did.
#[derive(Debug, Default, Clone)]
pub struct CrashReport {
    /// Files cut short, with the bytes they lost.
    pub truncated: Vec<(PathBuf, u64)>,
    /// Files deleted because their directory entry was never synced.
    pub removed: Vec<PathBuf>,
}

#[derive(Debug, Default)]
struct Track {
    /// Bytes appended (as far as this layer knows).
    len: u64,
    /// Length at the last successful sync.
    synced: u64,
}

#[derive(Debug, Default)]
struct Durability {
    files: HashMap<PathBuf, Track>,
    /// Paths whose directory entry is not yet durable.
    dir_dirty: HashSet<PathBuf>,
}

/// The shared, controllable state of a [`FaultyFs`].
pub struct FaultState {
    armed: Mutex<Vec<Armed>>,
    enabled: AtomicBool,
    real_sync: AtomicBool,
    rng: Mutex<StdRng>,
    ops: Mutex<HashMap<(FileKind, Op), u64>>,
    injected: Mutex<HashMap<(Fault, Op), u64>>,
    log: Mutex<Vec<String>>,
    durability: Mutex<Durability>,
    open_writers: AtomicUsize,
    powered_off: AtomicBool,
}

impl fmt::Debug for FaultState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultState")
            .field("armed", &*self.armed.lock())
            .field("injected", &self.injected_total())
            .finish()
    }
}

/// Outcome of checking an operation against the armed faults.
enum Hit {
    None,
    Fault(Fault),
}

/// Where a read is: `(offset, len, file size)`.
type ReadAt = (u64, usize, u64);

impl FaultState {
    fn new(seed: u64) -> Self {
        FaultState {
            armed: Mutex::new(Vec::new()),
            enabled: AtomicBool::new(true),
            real_sync: AtomicBool::new(false),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            ops: Mutex::new(HashMap::new()),
            injected: Mutex::new(HashMap::new()),
            log: Mutex::new(Vec::new()),
            durability: Mutex::new(Durability::default()),
            open_writers: AtomicUsize::new(0),
            powered_off: AtomicBool::new(false),
        }
    }

    /// Arms a fault.
    pub fn arm(&self, spec: FaultSpec) {
        self.armed.lock().push(Armed {
            spec,
            seen: 0,
            injected: 0,
        });
    }

    /// Disarms every fault (counters, log and crash bookkeeping stay).
    pub fn clear(&self) {
        self.armed.lock().clear();
    }

    /// Suspends (false) or resumes (true) injection without disarming.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }

    /// Real fsyncs on `sync` and `sync_dir` (off by default).
    pub fn set_real_sync(&self, on: bool) {
        self.real_sync.store(on, Ordering::SeqCst);
    }

    /// Reseeds the generator used for probabilities, bit positions and short lengths.
    pub fn reseed(&self, seed: u64) {
        *self.rng.lock() = StdRng::seed_from_u64(seed);
    }

    /// Faults injected so far.
    pub fn injected_total(&self) -> u64 {
        self.injected.lock().values().sum()
    }

    /// Faults of kind `fault` injected into operation `op` so far.
    pub fn injected(&self, fault: Fault, op: Op) -> u64 {
        self.injected.lock().get(&(fault, op)).copied().unwrap_or(0)
    }

    /// One line per injected fault.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    /// Operations `op` seen on files of `target` (faulted or not).
    pub fn ops(&self, target: Target, op: Op) -> u64 {
        self.ops
            .lock()
            .iter()
            .filter(|((k, o), _)| *o == op && target.matches(*k))
            .map(|(_, n)| *n)
            .sum()
    }

    /// Writable files currently open.
    pub fn open_writers(&self) -> usize {
        self.open_writers.load(Ordering::SeqCst)
    }

    /// The machine "dies": from now on every operation that would change a file fails
    /// (without counting as an injected fault) until [`crash`](Self::crash). Use it to
    /// stop a database at an arbitrary point without letting its close sync anything.
    pub fn power_off(&self) {
        self.powered_off.store(true, Ordering::SeqCst);
    }

    fn check(&self, path: &Path, op: Op) -> Hit {
        self.check_at(path, op, None).0
    }

    /// Like `check`; for reads also returns the first byte (relative to the read) that
    /// a damaging fault may touch.
    fn check_at(&self, path: &Path, op: Op, read: Option<ReadAt>) -> (Hit, usize) {
        let kind = FileKind::of(path);
        *self.ops.lock().entry((kind, op)).or_default() += 1;
        if self.powered_off.load(Ordering::SeqCst) && !matches!(op, Op::Open | Op::Read | Op::ReadAll | Op::List) {
            return (Hit::Fault(Fault::Error), 0);
        }
        if !self.enabled.load(Ordering::SeqCst) {
            return (Hit::None, 0);
        }
        let mut armed = self.armed.lock();
        for a in armed.iter_mut() {
            if a.spec.op != op || !a.spec.target.matches(kind) {
                continue;
            }
            let mut from = 0usize;
            if let (Some(tail), Some((offset, len, size))) = (a.spec.tail, read) {
                let tail_start = size.saturating_sub(tail);
                let end = offset + len as u64;
                if end <= tail_start {
                    continue;
                }
                from = tail_start.saturating_sub(offset) as usize;
            }
            a.seen += 1;
            if a.seen <= a.spec.after || a.spec.times.is_some_and(|t| a.injected >= t) {
                continue;
            }
            if a.spec.probability < 1.0 && !self.rng.lock().gen_bool(a.spec.probability.clamp(0.0, 1.0)) {
                continue;
            }
            a.injected += 1;
            let fault = a.spec.fault;
            drop(armed);
            if fault == Fault::PowerOff {
                self.powered_off.store(true, Ordering::SeqCst);
            }
            *self.injected.lock().entry((fault, op)).or_default() += 1;
            self.log
                .lock()
                .push(format!("{fault:?} on {op:?} of {}", path.display()));
            return (Hit::Fault(fault), from);
        }
        (Hit::None, 0)
    }

    fn io_error(fault: Fault, path: &Path, op: Op) -> Error {
        let source = match fault {
            Fault::NoSpace => std::io::Error::from_raw_os_error(28),
            Fault::ShortWrite => {
                std::io::Error::new(std::io::ErrorKind::WriteZero, format!("injected short write ({op:?})"))
            }
            _ => std::io::Error::other(format!("injected I/O error ({fault:?} on {op:?})")),
        };
        Error::io(path, source)
    }

    /// Fails `op` on `path` if an armed error fault says so (faults that do not apply
    /// to the operation act as plain errors).
    fn fail_plain(&self, path: &Path, op: Op) -> Result<()> {
        match self.check(path, op) {
            Hit::None => Ok(()),
            Hit::Fault(f) => Err(Self::io_error(f, path, op)),
        }
    }

    fn random_below(&self, n: usize) -> usize {
        if n == 0 { 0 } else { self.rng.lock().gen_range(0..n) }
    }

    /// Reads through `read` unless an error fault hits first; applies read faults to
    /// what was read.
    fn faulty_read(
        &self,
        path: &Path,
        op: Op,
        at: Option<ReadAt>,
        read: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let (fault, from) = match self.check_at(path, op, at) {
            (Hit::None, _) => return read(),
            (Hit::Fault(f @ (Fault::ShortRead | Fault::BitFlip)), from) => (f, from),
            (Hit::Fault(f), _) => return Err(Self::io_error(f, path, op)),
        };
        let mut data = read()?;
        let from = from.min(data.len());
        if fault == Fault::ShortRead {
            let keep = from + self.random_below(data.len() - from);
            data.truncate(keep);
        } else if data.len() > from {
            let bit = from * 8 + self.random_below((data.len() - from) * 8);
            data[bit / 8] ^= 1 << (bit % 8);
        }
        Ok(data)
    }

    // ---- crash bookkeeping ----

    fn track_created(&self, path: &Path, len: u64) {
        let mut d = self.durability.lock();
        d.files.insert(path.to_path_buf(), Track { len, synced: 0 });
        d.dir_dirty.insert(path.to_path_buf());
    }

    fn track_opened(&self, path: &Path, len: u64) {
        let mut d = self.durability.lock();
        // An existing file: what is there counts as durable.
        d.files.entry(path.to_path_buf()).or_insert(Track { len, synced: len });
    }

    fn track_append(&self, path: &Path, n: u64) {
        if let Some(t) = self.durability.lock().files.get_mut(path) {
            t.len += n;
        }
    }

    fn track_synced(&self, path: &Path, len: u64) {
        if let Some(t) = self.durability.lock().files.get_mut(path) {
            t.synced = t.synced.max(len);
        }
    }

    fn track_rename(&self, from: &Path, to: &Path) {
        let mut d = self.durability.lock();
        if let Some(t) = d.files.remove(from) {
            d.files.insert(to.to_path_buf(), t);
        }
        d.dir_dirty.remove(from);
        d.dir_dirty.insert(to.to_path_buf());
    }

    fn track_remove(&self, path: &Path) {
        let mut d = self.durability.lock();
        d.files.remove(path);
        d.dir_dirty.remove(path);
    }

    fn track_dir_synced(&self, dir: &Path) {
        self.durability.lock().dir_dirty.retain(|p| p.parent() != Some(dir));
    }

    /// Simulates a power failure: drops every byte written after its file's last
    /// successful sync (and, per `mode`, files whose directory entry is not durable).
    ///
    /// Call it only after every handle on the database is dropped (it panics if a
    /// writable file is still open, since that file would write on after the "crash").
    /// Bookkeeping restarts from the surviving state.
    pub fn crash(&self, mode: CrashMode) -> CrashReport {
        assert_eq!(
            self.open_writers(),
            0,
            "crash() with writable files still open: drop every Db, Keyspace and Table handle first"
        );
        let mut d = self.durability.lock();
        let mut report = CrashReport::default();
        if mode == CrashMode::LoseUnsyncedDirEntries {
            let mut gone: Vec<PathBuf> = d.dir_dirty.drain().collect();
            gone.sort();
            for p in gone {
                if std::fs::remove_file(&p).is_ok() {
                    report.removed.push(p.clone());
                }
                d.files.remove(&p);
            }
        }
        d.dir_dirty.clear();
        let mut files: Vec<(&PathBuf, &mut Track)> = d.files.iter_mut().collect();
        files.sort_by(|a, b| a.0.cmp(b.0));
        for (p, t) in files {
            let Ok(meta) = std::fs::metadata(p) else { continue };
            if meta.len() > t.synced {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .expect("open for truncation");
                f.set_len(t.synced).expect("truncate");
                report.truncated.push((p.clone(), meta.len() - t.synced));
            }
            t.len = t.synced;
        }
        self.powered_off.store(false, Ordering::SeqCst);
        report
    }
}

/// The fault-injecting file system.
pub struct FaultyFs {
    inner: RealFs,
    state: Arc<FaultState>,
}

impl fmt::Debug for FaultyFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyFs").field("state", &self.state).finish()
    }
}

impl FaultyFs {
    /// A fault-free file system over the real one; `seed` drives random choices.
    pub fn new(seed: u64) -> Arc<FaultyFs> {
        Arc::new(FaultyFs {
            inner: RealFs,
            state: Arc::new(FaultState::new(seed)),
        })
    }

    /// The shared fault state.
    pub fn state(&self) -> &Arc<FaultState> {
        &self.state
    }
}

struct FaultyWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    state: Arc<FaultState>,
}

impl Drop for FaultyWritable {
    fn drop(&mut self) {
        self.state.open_writers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl WritableFile for FaultyWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match self.state.check(&self.path, Op::Append) {
            Hit::None => {
                self.inner.append(data)?;
                self.state.track_append(&self.path, data.len() as u64);
                Ok(())
            }
            Hit::Fault(Fault::ShortWrite) => {
                let part = self.state.random_below(data.len());
                self.inner.append(&data[..part])?;
                self.state.track_append(&self.path, part as u64);
                Err(FaultState::io_error(Fault::ShortWrite, &self.path, Op::Append))
            }
            Hit::Fault(f) => Err(FaultState::io_error(f, &self.path, Op::Append)),
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.state.fail_plain(&self.path, Op::Flush)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        match self.state.check(&self.path, Op::Sync) {
            Hit::None => {}
            Hit::Fault(Fault::LyingSync) => return self.inner.flush(),
            Hit::Fault(f) => return Err(FaultState::io_error(f, &self.path, Op::Sync)),
        }
        if self.state.real_sync.load(Ordering::SeqCst) {
            self.inner.sync()?;
        } else {
            self.inner.flush()?;
        }
        self.state.track_synced(&self.path, self.inner.len());
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultyRandomAccess {
    inner: Arc<dyn RandomAccessFile>,
    state: Arc<FaultState>,
}

impl RandomAccessFile for FaultyRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let at = (offset, len, self.inner.size());
        self.state.faulty_read(self.inner.path(), Op::Read, Some(at), || {
            self.inner.read_at(offset, len)
        })
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl FaultyFs {
    fn wrap_writer(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        self.state.open_writers.fetch_add(1, Ordering::SeqCst);
        Box::new(FaultyWritable {
            inner,
            path: path.to_path_buf(),
            state: self.state.clone(),
        })
    }
}

impl FileSystem for FaultyFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.state.fail_plain(path, Op::Create)?;
        let f = self.inner.create(path)?;
        self.state.track_created(path, 0);
        Ok(self.wrap_writer(path, f))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.state.fail_plain(path, Op::OpenAppend)?;
        let f = self.inner.open_append(path)?;
        self.state.track_opened(path, f.len());
        Ok(self.wrap_writer(path, f))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.state.fail_plain(path, Op::Open)?;
        Ok(Arc::new(FaultyRandomAccess {
            inner: self.inner.open(path)?,
            state: self.state.clone(),
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        self.state
            .faulty_read(path, Op::ReadAll, Some((0, size as usize, size)), || {
                self.inner.read_all(path)
            })
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.state.fail_plain(from, Op::Rename)?;
        self.inner.rename(from, to)?;
        self.state.track_rename(from, to);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.state.fail_plain(path, Op::Remove)?;
        self.inner.remove(path)?;
        self.state.track_remove(path);
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.state.fail_plain(dir, Op::List)?;
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.state.fail_plain(dir, Op::CreateDir)?;
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.state.fail_plain(dir, Op::SyncDir)?;
        if self.state.real_sync.load(Ordering::SeqCst) {
            self.inner.sync_dir(dir)?;
        }
        self.state.track_dir_synced(dir);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
}
