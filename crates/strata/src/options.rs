//! Tunables of a database, with the defaults an experienced RocksDB user would expect.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fs::{FileSystem, RealFs};

/// Largest accepted key, in bytes.
pub const MAX_KEY_SIZE: usize = 64 * 1024;
/// Largest accepted value, in bytes.
pub const MAX_VALUE_SIZE: usize = 64 * 1024 * 1024;
/// Largest accepted write batch (encoded), in bytes.
pub const MAX_BATCH_SIZE: usize = 512 * 1024 * 1024;

/// When the write-ahead log is forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Written to the operating system only: survives a process crash, not power loss.
    /// A batch holding a secondary range delete (`delete_where`) is fsynced all the
    /// same, with the writes before it: background jobs apply such a delete to files
    /// before it is flushed, and power loss must not leave it half applied.
    None,
    /// Every batch is fsynced on its own before it is acknowledged.
    EveryBatch,
    /// Concurrent writers share one fsync (group commit); each is acknowledged durable.
    GroupCommit,
}

/// Block compression of SSTables.
pub use crate::sstable::Compression;

/// A source of time, injectable so tests can drive delete-persistence deadlines.
pub trait Clock: Send + Sync + Debug {
    /// Microseconds since an arbitrary fixed origin.
    fn now_micros(&self) -> u64;
}

/// Wall-clock time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Starts at `micros`.
    pub fn new(micros: u64) -> Self {
        ManualClock(AtomicU64::new(micros))
    }
    /// Moves time forward.
    pub fn advance(&self, micros: u64) {
        self.0.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How opening a database treats damaged records in its logs (the WAL and the
/// manifest), after RocksDB's `WALRecoveryMode`. See `docs/design/recovery.md`.
///
/// Whatever the mode, a recovered state that refers to files that are missing (an
/// SSTable, the oldest WAL it needs) or of the wrong size is an error, and no file is
/// deleted before the state has been checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// The default. A torn last record of the newest WAL (or of the manifest) is
    /// dropped: a crash can cut only the last append, which was never acknowledged as
    /// synced. Any other damage (a bad record followed by valid ones, a torn record in
    /// an older WAL, an undecodable record) is `Corruption` naming the file and offset,
    /// and the open changes nothing on disk.
    #[default]
    TolerateCorruptedTail,
    /// Any damage, a torn tail included, is an error: for databases closed cleanly.
    AbsoluteConsistency,
    /// Recover to the last consistent point: replay stops at the first damaged record;
    /// later records and later WALs are not replayed (they are kept, renamed
    /// `<name>.torn`). The manifest is read up to its first damaged record.
    PointInTime,
    /// Salvage: skip each damaged WAL record and replay every valid record after it (a
    /// skipped record's writes are lost, so atomicity across it is not kept). The
    /// manifest is treated as in `PointInTime`: skipping edits could resurrect files.
    SkipAnyCorruptedRecords,
}

/// Options for [`crate::Db::open`].
///
/// ```
/// let mut opts = strata::Options::default();
/// opts.memtable_budget = 8 << 20;
/// opts.runs_per_level = 3; // tiering with size ratio 4
/// opts.size_ratio = 4.0;
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Fail if a database already exists.
    pub error_if_exists: bool,
    /// WAL durability.
    pub sync: SyncPolicy,
    /// Bytes of memtable (all keyspaces together) before it is frozen and flushed.
    pub memtable_budget: usize,
    /// Frozen memtables allowed to wait for flush before writers stall.
    pub max_immutable_memtables: usize,
    /// Size ratio T between adjacent levels.
    pub size_ratio: f64,
    /// Runs per level K: 1 = leveling, T-1 = tiering.
    pub runs_per_level: usize,
    /// Tiering above, leveling at the last level.
    pub lazy_leveling: bool,
    /// Level-0 runs that trigger a compaction.
    pub l0_compaction_trigger: usize,
    /// Level-0 runs at which writers stall until compaction catches up.
    pub l0_stall_trigger: usize,
    /// Target size of one SSTable written by compaction.
    pub target_file_size: u64,
    /// Data block ("page") size.
    pub block_size: usize,
    /// Bloom filter false-positive rate (0 disables filters).
    pub bloom_fpr: f64,
    /// Block compression.
    pub compression: Compression,
    /// Block cache capacity in bytes (0 disables it).
    pub block_cache_bytes: usize,
    /// Open SSTables kept in the table cache (and up to a quarter as many page patch
    /// files, `sstable::patch`).
    pub max_open_files: usize,
    /// Background flush/compaction threads.
    pub background_threads: usize,
    /// Memory for sorting deferred deletes in one flush or compaction before spilling
    /// sorted runs to temporary files.
    pub deferred_sort_memory: usize,
    /// FADE's delete persistence threshold: every tombstone (point, range or deferred
    /// delete) reaches the last level and is dropped, with the data it deletes, within
    /// this time of being written (plus the time the compaction takes). `None` = no bound.
    pub delete_persistence_threshold: Option<std::time::Duration>,
    /// Compact a file early when its tombstones are at least this share of the entries
    /// that compaction would rewrite (its own, plus those of the files it merges with):
    /// a small dense file above a large level waits for its deadline instead of
    /// rewriting the level.
    pub tombstone_density_trigger: Option<f64>,
    /// Read SSTables with direct I/O, bypassing the page cache (when the file system
    /// supports it), so that only the block cache holds data in memory.
    pub direct_reads: bool,
    /// How recovery treats damaged records in the WAL and the manifest.
    pub recovery_mode: RecoveryMode,
    /// Start a fresh manifest (one record of the whole state) once the live one has
    /// grown past this many bytes of edits, as RocksDB's `max_manifest_file_size`.
    pub max_manifest_file_size: u64,
    /// Open without writing anything: no lock file is created (an existing `LOCK` is
    /// locked shared when it can be opened), no recovery flush, no new WAL or manifest,
    /// no file deleted. The WAL is replayed into memory; every write returns
    /// `InvalidArgument`. For inspecting a database on read-only media.
    pub read_only: bool,
    /// File system (tests substitute a faulty one).
    pub fs: Arc<dyn FileSystem>,
    /// Clock (tests substitute a manual one).
    pub clock: Arc<dyn Clock>,
}

/// [`Options::max_manifest_file_size`] by default.
pub(crate) const DEFAULT_MAX_MANIFEST_FILE_SIZE: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            sync: SyncPolicy::None,
            memtable_budget: 64 << 20,
            max_immutable_memtables: 2,
            size_ratio: 10.0,
            runs_per_level: 1,
            lazy_leveling: false,
            l0_compaction_trigger: 4,
            l0_stall_trigger: 20,
            target_file_size: 64 << 20,
            block_size: 8 << 10,
            bloom_fpr: 0.01,
            compression: Compression::None,
            block_cache_bytes: 64 << 20,
            max_open_files: 1000,
            background_threads: 2,
            deferred_sort_memory: 64 << 20,
            direct_reads: false,
            delete_persistence_threshold: None,
            tombstone_density_trigger: None,
            recovery_mode: RecoveryMode::default(),
            max_manifest_file_size: DEFAULT_MAX_MANIFEST_FILE_SIZE,
            read_only: false,
            fs: Arc::new(RealFs),
            clock: Arc::new(SystemClock),
        }
    }
}

/// One line of the settings that shape the tree and its I/O (not the file system,
/// clock or open flags), for logs and failure messages:
///
/// ```
/// let line = strata::Options::default().to_string();
/// assert!(line.starts_with("memtable 67108864 file 67108864 block 8192 T 10 K 1"), "{line}");
/// ```
impl std::fmt::Display for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "memtable {} file {} block {} T {} K {} lazy {} l0 {}/{} bloom {} {:?} {:?} threads {} cache {} \
             fade {:?} density {:?}",
            self.memtable_budget,
            self.target_file_size,
            self.block_size,
            self.size_ratio,
            self.runs_per_level,
            self.lazy_leveling,
            self.l0_compaction_trigger,
            self.l0_stall_trigger,
            self.bloom_fpr,
            self.compression,
            self.sync,
            self.background_threads,
            self.block_cache_bytes,
            self.delete_persistence_threshold,
            self.tombstone_density_trigger
        )
    }
}

impl Options {
    /// Checks the options for values Strata cannot work with.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::Error::InvalidArgument(m.to_string()));
        if self.memtable_budget < 4096 {
            return bad("memtable_budget must be at least 4096 bytes");
        }
        if self.size_ratio.is_nan() || self.size_ratio < 2.0 {
            return bad("size_ratio must be at least 2");
        }
        if self.runs_per_level == 0 {
            return bad("runs_per_level must be at least 1");
        }
        if self.l0_compaction_trigger == 0 || self.l0_stall_trigger <= self.l0_compaction_trigger {
            return bad("need 0 < l0_compaction_trigger < l0_stall_trigger");
        }
        if self.block_size < 256 || self.block_size > 16 << 20 {
            return bad("block_size must be between 256 bytes and 16 MiB");
        }
        if !(0.0..1.0).contains(&self.bloom_fpr) {
            return bad("bloom_fpr must be in [0, 1)");
        }
        if self.background_threads == 0 {
            return bad("background_threads must be at least 1");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if self.tombstone_density_trigger.is_some_and(|d| !(d > 0.0 && d <= 1.0)) {
            return bad("tombstone_density_trigger must be in (0, 1]");
        }
        if self.delete_persistence_threshold.is_some_and(|d| d.is_zero()) {
            return bad("delete_persistence_threshold must be positive");
        }
        if self.target_file_size < 4096 {
            return bad("target_file_size must be at least 4096 bytes");
        }
        Ok(())
    }

    /// Leveled levels hold one run; tiered levels up to `runs_per_level`.
    pub(crate) fn is_leveled(&self, level: usize, last_level: usize) -> bool {
        level > 0 && (self.runs_per_level == 1 || (self.lazy_leveling && level == last_level))
    }

    /// Byte capacity of level `level` (>= 1).
    pub(crate) fn level_capacity(&self, level: usize) -> u64 {
        let base = self.memtable_budget as f64 * self.size_ratio;
        (base * self.size_ratio.powi(level.saturating_sub(1) as i32)) as u64
    }
}
