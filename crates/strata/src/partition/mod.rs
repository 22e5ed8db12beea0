//! Hash partitions: one directory holding N independent databases, keys routed to one
//! of them by a stable hash.
//!
//! Each partition is a whole [`Db`] in its own subdirectory (`p000`, `p001`, ...), with
//! its own WAL, memtable, levels and compactions, so N writer threads on N partitions
//! never share a lock. The directory's `PARTITIONS` file ([`descriptor`]) records N and
//! the hash function; it is written once the partitions its creator opens exist
//! ([`open_layout`]) and never changes, so a key always routes to the partition that
//! holds it.
//!
//! Invariants:
//! - A key lives only in partition [`HashFn::partition`]`(key, N)`; partitions hold
//!   disjoint keys, so a point operation touches one partition and a scan is a merge
//!   ([`MergedScan`]) of N disjoint scans.
//! - Atomicity and snapshots are per partition: a [`WriteBatch`](crate::WriteBatch) is
//!   atomic within the partition it is written to, and a [`PartitionSnapshot`] is one
//!   snapshot per partition, taken one after another (a consistent cut only while no
//!   writer runs).
//!
//! ```
//! use strata::partition::Partitions;
//! let dir = tempfile::tempdir().unwrap();
//! let parts = Partitions::open(dir.path(), 4, strata::Options::default()).unwrap();
//! let ks = parts.keyspace("events").unwrap();
//! ks.put(b"b", b"2").unwrap();
//! ks.put(b"a", b"1").unwrap();
//! assert_eq!(ks.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
//! let keys: Vec<_> = ks.scan(..).unwrap().map(|r| r.unwrap().0).collect();
//! assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
//! drop(ks);
//! parts.close().unwrap();
//! // Reopening needs the same count; `open_existing` reads it from the directory.
//! assert!(Partitions::open(dir.path(), 8, strata::Options::default()).is_err());
//! assert_eq!(Partitions::open_existing(dir.path(), strata::Options::default()).unwrap().count(), 4);
//! ```

pub mod descriptor;
mod merge;

use std::path::{Path, PathBuf};

pub use descriptor::{DESCRIPTOR_FILE, Descriptor};
pub use merge::MergedScan;

use crate::db::{Db, KeyRange, Keyspace, Scan, Snapshot};
use crate::error::{Error, Result};
use crate::options::Options;

/// Most partitions one directory may hold.
pub const MAX_PARTITIONS: usize = 256;

/// The hash functions keys can be routed by. The id is persisted: a function, once
/// released, never changes its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HashFn {
    /// Id 1: 64-bit FNV-1a over the key's bytes (offset basis 0xcbf29ce484222325, prime
    /// 0x100000001b3), then MurmurHash3's `fmix64` finalizer so that keys differing
    /// only in their last bytes spread over every partition; partition = hash mod N.
    Fnv1aFmix64,
}

impl HashFn {
    /// The persisted id.
    pub fn id(self) -> u32 {
        match self {
            HashFn::Fnv1aFmix64 => 1,
        }
    }

    /// The function with persisted id `id`.
    pub fn from_id(id: u32) -> Option<HashFn> {
        match id {
            1 => Some(HashFn::Fnv1aFmix64),
            _ => None,
        }
    }

    /// The 64-bit hash of `key`.
    ///
    /// ```
    /// // Stable across releases and machines: these values are part of the format.
    /// use strata::partition::HashFn;
    /// assert_eq!(HashFn::Fnv1aFmix64.hash(b""), 0xefd0_1f60_ba99_2926);
    /// assert_eq!(HashFn::Fnv1aFmix64.hash(b"strata"), 0x5a4f_965e_8a9b_0ac3);
    /// ```
    pub fn hash(self, key: &[u8]) -> u64 {
        match self {
            HashFn::Fnv1aFmix64 => {
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for &b in key {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
                fmix64(h)
            }
        }
    }

    /// The partition (`0..count`) of `key`; `count` must be at least 1.
    pub fn partition(self, key: &[u8], count: usize) -> usize {
        (self.hash(key) % count.max(1) as u64) as usize
    }
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Checks a requested partition count.
pub fn check_count(count: usize) -> Result<()> {
    if count == 0 || count > MAX_PARTITIONS {
        return Err(Error::InvalidArgument(format!(
            "partition count {count} outside 1..={MAX_PARTITIONS}"
        )));
    }
    Ok(())
}

/// N databases under one directory, keys routed by hash. See the [module docs](self).
pub struct Partitions {
    dir: PathBuf,
    hash: HashFn,
    dbs: Vec<Db>,
}

impl std::fmt::Debug for Partitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitions")
            .field("dir", &self.dir)
            .field("count", &self.dbs.len())
            .finish()
    }
}

impl Partitions {
    /// Opens the partitioned directory `dir` with `count` partitions, creating it (when
    /// `opts.create_if_missing`) if it has no descriptor. `opts` applies to each
    /// partition (each has its own memtable budget and background threads). A count of
    /// 0 or over [`MAX_PARTITIONS`], or one that differs from the directory's, is
    /// `InvalidArgument` and creates nothing.
    pub fn open(dir: impl AsRef<Path>, count: usize, opts: Options) -> Result<Partitions> {
        check_count(count)?;
        Self::open_inner(dir.as_ref(), Some(count), opts)
    }

    /// Opens an existing partitioned directory with the count its descriptor records.
    pub fn open_existing(dir: impl AsRef<Path>, opts: Options) -> Result<Partitions> {
        Self::open_inner(dir.as_ref(), None, opts)
    }

    fn open_inner(dir: &Path, count: Option<usize>, opts: Options) -> Result<Partitions> {
        let (hash, dbs) = open_layout(dir, count, None, &opts)?;
        Ok(Partitions {
            dir: dir.to_path_buf(),
            hash,
            dbs: dbs.into_iter().flatten().collect(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of partitions.
    pub fn count(&self) -> usize {
        self.dbs.len()
    }

    /// The hash function keys are routed by.
    pub fn hash_fn(&self) -> HashFn {
        self.hash
    }

    /// The partition index of `key`.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        self.hash.partition(key, self.dbs.len())
    }

    /// The database of partition `i` (panics if `i >= count()`, like slice indexing).
    pub fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    /// Every partition's database, in partition order.
    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    /// The database holding `key`.
    pub fn db_for(&self, key: &[u8]) -> &Db {
        &self.dbs[self.partition_of(key)]
    }

    /// The keyspace `name` across every partition, created where missing.
    pub fn keyspace(&self, name: &str) -> Result<PartitionedKeyspace> {
        let parts = self
            .dbs
            .iter()
            .map(|db| db.keyspace_or_create(name))
            .collect::<Result<Vec<_>>>()?;
        Ok(PartitionedKeyspace { hash: self.hash, parts })
    }

    /// One snapshot per partition (see the module docs on consistency).
    pub fn snapshot(&self) -> PartitionSnapshot {
        PartitionSnapshot {
            snaps: self.dbs.iter().map(Db::snapshot).collect(),
        }
    }

    /// Flushes every partition's memtable, the partitions in parallel.
    pub fn flush(&self) -> Result<()> {
        each_in_parallel(&self.dbs, Db::flush)
    }

    /// Compacts every partition fully, the partitions in parallel: a manual compaction
    /// merges in the calling thread, so one partition after another would use one core.
    pub fn compact_range(&self) -> Result<()> {
        each_in_parallel(&self.dbs, Db::compact_range)
    }

    /// Waits until no partition has a flush or compaction pending.
    pub fn wait_for_background(&self) -> Result<()> {
        self.dbs.iter().try_for_each(Db::wait_for_background)
    }

    /// Bytes of live SSTables over all partitions.
    pub fn total_bytes(&self) -> u64 {
        self.dbs.iter().map(|d| d.stats().total_bytes()).sum()
    }

    /// Closes every partition; the first error is returned after all were closed.
    pub fn close(self) -> Result<()> {
        close_all(self.dbs)
    }
}

/// Runs `f` on every one of `dbs`, on as many threads as there are cores (at most one
/// per database); the first error.
pub(crate) fn each_in_parallel<D: std::borrow::Borrow<Db> + Sync>(
    dbs: &[D],
    f: impl Fn(&Db) -> Result<()> + Sync,
) -> Result<()> {
    crate::parallel::map(dbs.len(), |i| dbs.get(i).map_or(Ok(()), |d| f(d.borrow()))).map(drop)
}

/// Closes every one of `dbs`; the first error, returned after all were closed.
pub(crate) fn close_all(dbs: impl IntoIterator<Item = Db>) -> Result<()> {
    let mut first = Ok(());
    for db in dbs {
        let r = db.close();
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Partition `i` of a directory of `count`, which has no such partition.
pub(crate) fn out_of_range(i: usize, count: usize) -> Error {
    Error::InvalidArgument(format!("partition {i} does not exist: there are {count} (0..{count})"))
}

/// Subdirectory name of partition `i`.
pub fn partition_dir_name(i: usize) -> String {
    format!("p{i:03}")
}

/// Opens the partitioned directory `dir`: its databases, partition `i`'s at index `i`,
/// `None` for a partition not in `serve` (every one is opened without `serve`), and its
/// hash. The descriptor is checked against `count` when given; a directory without one
/// is created (with `count` and the default hash, when `opts` allow creating).
///
/// Invariant: **the descriptor is written last**, once the partitions its creator
/// opens exist, so a crash while creating leaves no descriptor (the next open with the
/// count creates again) and a descriptor means those partitions exist. A directory
/// opened whole that lacks partitions is therefore a serving node's (it holds its own
/// only): refused, naming them, rather than given the other nodes' partitions empty.
/// A bad count or serving list is refused before anything is created.
pub(crate) fn open_layout(
    dir: &Path,
    count: Option<usize>,
    serve: Option<&[usize]>,
    opts: &Options,
) -> Result<(HashFn, Vec<Option<Db>>)> {
    opts.validate()?;
    let fs = opts.fs.clone();
    let existing = Descriptor::read(fs.as_ref(), dir)?;
    let desc = match existing {
        Some(d) => {
            if let Some(c) = count
                && c != d.count
            {
                return Err(Error::InvalidArgument(format!(
                    "{} holds {} partitions, not {c}",
                    dir.display(),
                    d.count
                )));
            }
            if opts.error_if_exists {
                return Err(Error::AlreadyExists(dir.display().to_string()));
            }
            d
        }
        None => {
            let Some(count) = count else {
                return Err(Error::NotADatabase {
                    path: dir.to_path_buf(),
                    reason: format!("no {DESCRIPTOR_FILE} file"),
                });
            };
            if !opts.create_if_missing || opts.read_only {
                return Err(Error::NotADatabase {
                    path: dir.to_path_buf(),
                    reason: format!("no {DESCRIPTOR_FILE} file (and creating is off)"),
                });
            }
            Descriptor {
                count,
                hash: HashFn::Fnv1aFmix64,
            }
        }
    };
    if let Some(s) = serve {
        if s.is_empty() {
            return Err(Error::InvalidArgument("no partition to serve".into()));
        }
        if let Some(i) = s.iter().find(|&&i| i >= desc.count) {
            return Err(out_of_range(*i, desc.count));
        }
    } else if existing.is_some() {
        let lacks: Vec<usize> = (0..desc.count)
            .filter(|&i| !fs.exists(&dir.join(partition_dir_name(i))))
            .collect();
        if !lacks.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} lacks partitions {lacks:?} of {}: a serving node's directory, which holds its \
                 own partitions only; open it serving those",
                dir.display(),
                desc.count
            )));
        }
    }
    if existing.is_none() {
        fs.create_dir_all(dir)?;
        if let Some(beyond) = fs
            .list(dir)?
            .iter()
            .filter_map(|n| n.strip_prefix('p').filter(|d| d.len() >= 3)?.parse::<usize>().ok())
            .find(|&i| i >= desc.count)
        {
            return Err(lost_descriptor(dir, beyond));
        }
        // A serving open does not open the partitions it leaves to other nodes, whose
        // data would then be routed anew just the same: their files must show none.
        for i in (0..desc.count).filter(|i| serve.is_some_and(|s| !s.contains(i))) {
            if holds_data(fs.as_ref(), &dir.join(partition_dir_name(i)))? {
                return Err(lost_descriptor(dir, i));
            }
        }
    }
    let mut dbs = Vec::with_capacity(desc.count);
    for i in 0..desc.count {
        dbs.push(match serve {
            Some(s) if !s.contains(&i) => None,
            _ => {
                let mut o = opts.clone();
                // `error_if_exists` is about the directory (checked above), not its
                // partitions.
                o.error_if_exists = false;
                let db = Db::open(dir.join(partition_dir_name(i)), o)?;
                // A creation that crashed before the descriptor wrote nothing into its
                // partitions (tables come after it).
                if existing.is_none() && db.last_seq() > 0 {
                    return Err(lost_descriptor(dir, i));
                }
                Some(db)
            }
        });
    }
    if existing.is_none() {
        desc.write(fs.as_ref(), dir)?;
    }
    Ok((desc.hash, dbs))
}

/// Whether the partition database in `dir` (perhaps open elsewhere, so read from its
/// files alone) holds data: an SSTable, or a WAL with anything written (a partition's
/// creation writes neither).
fn holds_data(fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<bool> {
    if !fs.exists(dir) {
        return Ok(false);
    }
    for name in fs.list(dir)? {
        if name.ends_with(".sst") || (name.ends_with(".wal") && fs.open(&dir.join(&name))?.size() > 0) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A directory without its descriptor whose partition `i` holds data, or lies beyond
/// the count asked for: opening it with a count would route rows anew, to partitions
/// that do not hold them.
fn lost_descriptor(dir: &Path, i: usize) -> Error {
    Error::NotADatabase {
        path: dir.to_path_buf(),
        reason: format!(
            "no {DESCRIPTOR_FILE} file, but partition {} exists from before: the descriptor \
             is lost; restore it rather than create the partitions anew",
            partition_dir_name(i)
        ),
    }
}

/// One snapshot per partition.
#[derive(Debug, Clone)]
pub struct PartitionSnapshot {
    snaps: Vec<Snapshot>,
}

impl PartitionSnapshot {
    /// The snapshot of partition `i` (`InvalidArgument` when `i` is out of range).
    pub fn partition(&self, i: usize) -> Result<&Snapshot> {
        self.snaps.get(i).ok_or_else(|| out_of_range(i, self.snaps.len()))
    }

    /// `parts` partitions are read with a snapshot of as many: a keyspace of another
    /// set of partitions cannot be read with these snapshots.
    pub(crate) fn check_parts(&self, parts: usize) -> Result<()> {
        if parts != self.snaps.len() {
            return Err(Error::InvalidArgument(format!(
                "a keyspace over {parts} partitions read with a snapshot of {}",
                self.snaps.len()
            )));
        }
        Ok(())
    }

    /// Reads `key` of `ks` as of the snapshot.
    pub fn get(&self, ks: &PartitionedKeyspace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_parts(ks.parts.len())?;
        let i = ks.partition_of(key);
        self.snaps[i].get(&ks.parts[i], key)
    }

    /// Scans `ks` as of the snapshot, merged over partitions, ascending.
    pub fn scan(&self, ks: &PartitionedKeyspace, range: impl KeyRange) -> Result<MergedScan<Scan>> {
        self.check_parts(ks.parts.len())?;
        let (lo, hi) = range.into_bounds();
        let scans = (0..ks.parts.len())
            .map(|i| self.snaps[i].scan(&ks.parts[i], (lo.clone(), hi.clone())))
            .collect::<Result<Vec<_>>>()?;
        Ok(MergedScan::ascending(scans))
    }
}

/// One keyspace across all partitions: point operations go to the key's partition,
/// scans merge every partition in key order. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PartitionedKeyspace {
    hash: HashFn,
    parts: Vec<Keyspace>,
}

impl PartitionedKeyspace {
    /// The partition index of `key`.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        self.hash.partition(key, self.parts.len())
    }

    /// The keyspace handle of partition `i`, for batches (a batch goes to one
    /// partition's database); `InvalidArgument` when `i` is out of range.
    pub fn partition(&self, i: usize) -> Result<&Keyspace> {
        self.parts.get(i).ok_or_else(|| out_of_range(i, self.parts.len()))
    }

    /// Every partition's keyspace handle, partition `i`'s at index `i`.
    pub(crate) fn parts(&self) -> &[Keyspace] {
        &self.parts
    }

    /// The keyspace handle of the partition holding `key`.
    pub fn partition_for(&self, key: &[u8]) -> &Keyspace {
        &self.parts[self.partition_of(key)]
    }

    /// Number of partitions.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.partition_for(key).put(key, value)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.partition_for(key).delete(key)
    }

    /// The latest value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.partition_for(key).get(key)
    }

    /// Scans the latest data in `range` over every partition, ascending.
    pub fn scan(&self, range: impl KeyRange) -> Result<MergedScan<Scan>> {
        let (lo, hi) = range.into_bounds();
        let scans = self
            .parts
            .iter()
            .map(|p| p.scan((lo.clone(), hi.clone())))
            .collect::<Result<Vec<_>>>()?;
        Ok(MergedScan::ascending(scans))
    }

    /// Scans the latest data in `range` over every partition, descending.
    pub fn scan_rev(&self, range: impl KeyRange) -> Result<MergedScan<std::iter::Rev<Scan>>> {
        let (lo, hi) = range.into_bounds();
        let scans = self
            .parts
            .iter()
            .map(|p| p.scan((lo.clone(), hi.clone())).map(Iterator::rev))
            .collect::<Result<Vec<_>>>()?;
        Ok(MergedScan::descending(scans))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_spreads_sequential_keys() {
        let n = 8;
        let mut counts = vec![0usize; n];
        for i in 0..8000u32 {
            counts[HashFn::Fnv1aFmix64.partition(format!("user{i}").as_bytes(), n)] += 1;
        }
        for c in counts {
            assert!((800..1200).contains(&c), "uneven spread: {c}");
        }
    }

    #[test]
    fn bad_counts_create_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("parts");
        for n in [0, MAX_PARTITIONS + 1] {
            let e = Partitions::open(&target, n, Options::default()).expect_err("refused");
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(!target.exists());
        }
    }

    #[test]
    fn flush_and_compact_range_reach_every_partition() {
        // More partitions than this machine's cores, so workers take several each.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Partitions::open(dir.path(), 5, Options::default()).expect("open");
        let ks = p.keyspace("k").expect("ks");
        for round in 0..3u32 {
            for i in 0..500u32 {
                ks.put(&i.to_be_bytes(), &round.to_be_bytes()).expect("put");
            }
            p.flush().expect("flush");
        }
        let runs = |p: &Partitions| -> Vec<usize> {
            p.dbs()
                .iter()
                .map(|db| {
                    db.stats()
                        .keyspaces
                        .iter()
                        .flat_map(|k| &k.levels)
                        .map(|l| l.runs)
                        .sum()
                })
                .collect()
        };
        // Three flushes each: at least one run per partition before, exactly one after.
        assert!(runs(&p).iter().all(|&r| r >= 1), "{:?}", runs(&p));
        p.compact_range().expect("compact");
        assert_eq!(runs(&p), vec![1; 5]);
        for i in 0..500u32 {
            assert_eq!(
                ks.get(&i.to_be_bytes()).expect("get"),
                Some(2u32.to_be_bytes().to_vec())
            );
        }
    }

    #[test]
    fn reopen_routes_to_the_same_partition() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Partitions::open(dir.path(), 3, Options::default()).expect("open");
        let ks = p.keyspace("k").expect("ks");
        for i in 0..300u32 {
            ks.put(&i.to_be_bytes(), b"v").expect("put");
        }
        // Each key is in its own partition only.
        for i in 0..300u32 {
            let k = i.to_be_bytes();
            let home = ks.partition_of(&k);
            for j in 0..3 {
                let part = ks.partition(j).expect("partition");
                assert_eq!(part.get(&k).expect("get").is_some(), j == home);
            }
        }
        // Out of range is an error, as is a snapshot of another count.
        assert!(matches!(ks.partition(3), Err(Error::InvalidArgument(_))));
        let snap = p.snapshot();
        assert!(snap.partition(3).is_err() && snap.partition(2).is_ok());
        let other = tempfile::tempdir().expect("tempdir");
        let two = Partitions::open(other.path(), 2, Options::default()).expect("open");
        let ks2 = two.keyspace("k").expect("ks");
        assert!(matches!(snap.get(&ks2, b"k"), Err(Error::InvalidArgument(_))));
        assert!(snap.scan(&ks2, ..).is_err());
        drop((snap, ks2));
        two.close().expect("close");
        drop(ks);
        p.close().expect("close");
        let p = Partitions::open_existing(dir.path(), Options::default()).expect("reopen");
        assert_eq!(p.count(), 3);
        let ks = p.keyspace("k").expect("ks");
        let all: Vec<_> = ks.scan(..).expect("scan").map(|r| r.expect("entry").0).collect();
        let want: Vec<_> = (0..300u32).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(all, want);
        let back: Vec<_> = ks.scan_rev(..).expect("scan").map(|r| r.expect("entry").0).collect();
        assert_eq!(back, want.into_iter().rev().collect::<Vec<_>>());
    }

    /// A lost descriptor is not written anew over partitions holding data, with the
    /// same count or another; partitions a crashed creation left empty are taken.
    #[test]
    fn a_lost_descriptor_is_not_recreated_over_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(DESCRIPTOR_FILE);
        let p = Partitions::open(dir.path(), 4, Options::default()).expect("open");
        let ks = p.keyspace("k").expect("ks");
        for i in 0..40u32 {
            ks.put(&i.to_be_bytes(), b"v").expect("put");
        }
        drop(ks);
        p.close().expect("close");
        let saved = std::fs::read(&path).expect("read");
        std::fs::remove_file(&path).expect("remove");
        for n in [2, 4, 8] {
            let e = Partitions::open(dir.path(), n, Options::default()).expect_err("lost descriptor");
            assert!(
                matches!(e, Error::NotADatabase { .. }) && e.to_string().contains("descriptor is lost"),
                "{e}"
            );
            assert!(!path.exists());
        }
        std::fs::write(&path, saved).expect("restore");
        let p = Partitions::open_existing(dir.path(), Options::default()).expect("restored");
        assert_eq!(p.keyspace("k").expect("ks").scan(..).expect("scan").count(), 40);
        p.close().expect("close");
        // Partitions with nothing written (a creation that crashed before its descriptor).
        let fresh = dir.path().join("fresh");
        Partitions::open(&fresh, 3, Options::default())
            .expect("open")
            .close()
            .expect("close");
        std::fs::remove_file(fresh.join(DESCRIPTOR_FILE)).expect("remove");
        let p = Partitions::open(&fresh, 3, Options::default()).expect("created again");
        assert_eq!(p.count(), 3);
    }

    #[test]
    fn a_damaged_descriptor_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        Partitions::open(dir.path(), 2, Options::default())
            .expect("open")
            .close()
            .expect("close");
        let path = dir.path().join(DESCRIPTOR_FILE);
        let mut b = std::fs::read(&path).expect("read");
        b[13] ^= 1;
        std::fs::write(&path, b).expect("write");
        let e = Partitions::open_existing(dir.path(), Options::default()).expect_err("corrupt");
        assert!(e.is_corruption() && e.to_string().contains(DESCRIPTOR_FILE), "{e}");
    }
}
