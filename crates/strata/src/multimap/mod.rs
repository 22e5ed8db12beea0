//! Multimaps: keys holding many values, stored one entry per (key, value) in a
//! keyspace, streamed back from disk in value order.
//!
//! A [`MultiMap`] owns the meaning of its keyspace's entries: each is the composite key
//! of [`encoding`] with an empty stored value, so a key's values are contiguous and
//! sorted, and the SSTable blocks' prefix compression stores the key bytes once per
//! restart interval rather than once per value. A [`Values`] stream is a keyspace
//! scan over one key's range: it holds one block per source (memtables, runs), never
//! the key's values, so memory stays bounded for any number of values.
//!
//! A multimap may sit on one keyspace ([`MultiMap::new`]) or on a keyspace split into
//! hash partitions ([`MultiMap::partitioned`], see [`crate::partition`]); the partition
//! is chosen by the hash of the key alone, so all values of a key are in one
//! partition and a `get` touches only it.
//!
//! ```
//! use strata::multimap::MultiMap;
//! let dir = tempfile::tempdir().unwrap();
//! let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
//! let by_author = MultiMap::new(db.create_keyspace("by_author").unwrap());
//! by_author.put(b"alice", b"c2").unwrap();
//! by_author.put(b"alice", b"c1").unwrap();
//! by_author.put(b"bob", b"c3").unwrap();
//! let vals: Vec<_> = by_author.get(b"alice").unwrap().map(|v| v.unwrap()).collect();
//! assert_eq!(vals, vec![b"c1".to_vec(), b"c2".to_vec()]);
//! // Newest-first, and paging from a value on:
//! assert_eq!(by_author.get(b"alice").unwrap().rev().next().unwrap().unwrap(), b"c2");
//! let page: Vec<_> = by_author.get_range(b"alice", b"c2".as_slice()..).unwrap().map(|v| v.unwrap()).collect();
//! assert_eq!(page, vec![b"c2".to_vec()]);
//! by_author.delete_all(b"alice").unwrap();
//! assert!(!by_author.contains(b"alice", b"c1").unwrap());
//! ```

pub mod encoding;
mod load;

use std::ops::Bound;

use crate::batch::WriteBatch;
use crate::db::{KeyBatch, KeyRange, Keyspace, Scan, Snapshot};
use crate::error::{Error, Result};
use crate::iter::Direction;
use crate::partition::{HashFn, MergedScan, PartitionSnapshot, PartitionedKeyspace};

/// A key -> many values map over a keyspace or a partitioned keyspace. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MultiMap {
    /// One keyspace per partition (one for an unpartitioned multimap).
    parts: Vec<Keyspace>,
    hash: HashFn,
}

fn invalid(e: String) -> Error {
    Error::InvalidArgument(e)
}

impl MultiMap {
    /// A multimap stored in `keyspace`. The keyspace should hold nothing else: entries
    /// not written by a multimap fail to decode when scanned.
    pub fn new(keyspace: Keyspace) -> MultiMap {
        MultiMap {
            parts: vec![keyspace],
            hash: HashFn::Fnv1aFmix64,
        }
    }

    /// A multimap over a hash-partitioned keyspace: a key and all its values live in
    /// the partition of the key.
    pub fn partitioned(keyspace: PartitionedKeyspace) -> MultiMap {
        let parts = keyspace.parts().to_vec();
        MultiMap {
            parts,
            hash: HashFn::Fnv1aFmix64,
        }
    }

    /// Makes the bloom filters of the tables this multimap's keyspaces write from now on
    /// hold keys, not (key, value) entries ([`Keyspace::set_filter_key`] with
    /// [`FilterKey::KeyPrefix`]): one filter entry per key, so the filters shrink to a
    /// fraction (a key's stream never asks a whole-entry filter), while `contains` of an
    /// absent key is still filtered. Persisted; a no-op once set.
    ///
    /// ```
    /// # use strata::multimap::MultiMap;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let mm = MultiMap::new(db.create_keyspace("by_author").unwrap());
    /// mm.filter_by_key().unwrap();
    /// mm.put(b"alice", b"c1").unwrap();
    /// db.flush().unwrap();
    /// assert!(mm.contains(b"alice", b"c1").unwrap());
    /// assert!(!mm.contains(b"bob", b"c1").unwrap());
    /// ```
    ///
    /// [`FilterKey::KeyPrefix`]: crate::sstable::FilterKey::KeyPrefix
    pub fn filter_by_key(&self) -> Result<()> {
        self.parts
            .iter()
            .try_for_each(|p| p.set_filter_key(crate::sstable::FilterKey::KeyPrefix))
    }

    /// Number of partitions (1 when unpartitioned).
    pub fn partition_count(&self) -> usize {
        self.parts.len()
    }

    /// The partition holding `key`'s values.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        self.hash.partition(key, self.parts.len())
    }

    /// The keyspace of partition `i` (`InvalidArgument` when `i` is out of range).
    pub fn partition(&self, i: usize) -> Result<&Keyspace> {
        self.parts
            .get(i)
            .ok_or_else(|| crate::partition::out_of_range(i, self.parts.len()))
    }

    fn home(&self, key: &[u8]) -> &Keyspace {
        &self.parts[self.partition_of(key)]
    }

    fn write(&self, key: &[u8], f: impl FnOnce(&mut WriteBatch, &Keyspace) -> Result<()>) -> Result<()> {
        let ks = self.home(key);
        let mut b = WriteBatch::new();
        f(&mut b, ks)?;
        ks.inner().write_user(b).map(|_| ())
    }

    /// Adds `value` to `key` (a no-op if present). An empty key, or a key and value
    /// over [`encoding::MAX_ENTRY_SIZE`], is `InvalidArgument` and writes nothing.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(key, |b, ks| put_into(b, ks, key, value))
    }

    /// Removes `value` from `key` (a no-op if absent).
    pub fn delete(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(key, |b, ks| delete_into(b, ks, key, value))
    }

    /// Removes every value of `key` with one range tombstone.
    pub fn delete_all(&self, key: &[u8]) -> Result<()> {
        self.write(key, |b, ks| delete_all_into(b, ks, key))
    }

    /// True if `key` holds `value`.
    pub fn contains(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        encoding::check(key, value).map_err(invalid)?;
        Ok(self.home(key).get(&encoding::encode(key, value))?.is_some())
    }

    /// True if `key` held `value` at `snapshot` (a snapshot of `key`'s partition).
    pub fn contains_at(&self, snapshot: &Snapshot, key: &[u8], value: &[u8]) -> Result<bool> {
        encoding::check(key, value).map_err(invalid)?;
        Ok(snapshot.get(self.home(key), &encoding::encode(key, value))?.is_some())
    }

    /// Streams the values of `key` in ascending order; `.rev()` for descending.
    pub fn get(&self, key: &[u8]) -> Result<Values> {
        self.get_range(key, ..)
    }

    /// Streams the values of `key` inside `values` (bounds on the value bytes), e.g.
    /// `last_seen..` to page forward or `..last_seen` with `.rev()` to page back.
    pub fn get_range(&self, key: &[u8], values: impl KeyRange) -> Result<Values> {
        let (lo, hi) = value_bounds(key, values)?;
        let scan = self.home(key).scan((lo, hi))?;
        Ok(Values::new(scan, key))
    }

    /// Like [`get_range`](Self::get_range), as of `snapshot` (a snapshot of the database
    /// holding `key`'s partition; another database's is `InvalidArgument`).
    pub fn get_at(&self, snapshot: &Snapshot, key: &[u8], values: impl KeyRange) -> Result<Values> {
        let (lo, hi) = value_bounds(key, values)?;
        let scan = snapshot.scan(self.home(key), (lo, hi))?;
        Ok(Values::new(scan, key))
    }

    /// Like [`get_at`](Self::get_at) with a snapshot of every partition.
    pub fn get_at_partitioned(
        &self,
        snapshot: &PartitionSnapshot,
        key: &[u8],
        values: impl KeyRange,
    ) -> Result<Values> {
        snapshot.check_parts(self.parts.len())?;
        self.get_at(snapshot.partition(self.partition_of(key))?, key, values)
    }

    /// Streams every (key, value) pair, in key then value order, merged over
    /// partitions.
    pub fn entries(&self) -> Result<Entries> {
        let scans = self.parts.iter().map(|p| p.scan(..)).collect::<Result<Vec<_>>>()?;
        Ok(Entries {
            merge: MergedScan::ascending(scans),
            keyspace: self.parts.first().map(|k| k.name().to_string()).unwrap_or_default(),
        })
    }

    /// Adds (`key`, `value`) to `batch`, to be committed atomically with the batch's
    /// other writes (any keyspace or multimap of the same database) by `Db::write`.
    /// Bad input is `InvalidArgument` and leaves the batch as it was. A batch reaches
    /// one database, so a multimap of several partitions refuses batches
    /// (`InvalidArgument`): use `put`/`delete` or [`load`](Self::load) there.
    pub fn put_in(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) -> Result<()> {
        self.single()?;
        put_into(batch, &self.parts[0], key, value)
    }

    /// Adds the removal of (`key`, `value`) to `batch` (see [`put_in`](Self::put_in)).
    pub fn delete_in(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) -> Result<()> {
        self.single()?;
        delete_into(batch, &self.parts[0], key, value)
    }

    /// Adds the removal of all of `key`'s values to `batch` (see
    /// [`put_in`](Self::put_in)).
    pub fn delete_all_in(&self, batch: &mut WriteBatch, key: &[u8]) -> Result<()> {
        self.single()?;
        delete_all_into(batch, &self.parts[0], key)
    }

    fn single(&self) -> Result<()> {
        if self.parts.len() != 1 {
            return Err(Error::InvalidArgument(format!(
                "a write batch reaches one database, and this multimap has {} partitions: \
                 use put/delete or load",
                self.parts.len()
            )));
        }
        Ok(())
    }
}

fn put_into(b: &mut WriteBatch, ks: &Keyspace, key: &[u8], value: &[u8]) -> Result<()> {
    encoding::check(key, value).map_err(invalid)?;
    b.put(ks, &encoding::encode(key, value), b"");
    Ok(())
}

fn delete_into(b: &mut WriteBatch, ks: &Keyspace, key: &[u8], value: &[u8]) -> Result<()> {
    encoding::check(key, value).map_err(invalid)?;
    b.delete(ks, &encoding::encode(key, value));
    Ok(())
}

fn delete_all_into(b: &mut WriteBatch, ks: &Keyspace, key: &[u8]) -> Result<()> {
    encoding::check(key, b"").map_err(invalid)?;
    b.delete_range(ks, &encoding::prefix(key), &encoding::prefix_end(key));
    Ok(())
}

/// A pair of owned bounds, as scans take them.
type Bounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The entry-key bounds of `key`'s values inside `values`.
fn value_bounds(key: &[u8], values: impl KeyRange) -> Result<Bounds> {
    encoding::check(key, b"").map_err(invalid)?;
    let (lo, hi) = values.into_bounds();
    let at = |v: &[u8]| encoding::encode(key, v);
    let lo = match lo {
        Bound::Included(v) => Bound::Included(at(&v)),
        Bound::Excluded(v) => Bound::Excluded(at(&v)),
        Bound::Unbounded => Bound::Included(encoding::prefix(key)),
    };
    let hi = match hi {
        Bound::Included(v) => Bound::Included(at(&v)),
        Bound::Excluded(v) => Bound::Excluded(at(&v)),
        Bound::Unbounded => Bound::Excluded(encoding::prefix_end(key)),
    };
    Ok((lo, hi))
}

/// The values of one key, streamed from the keyspace in ascending order (or, with
/// `.rev()`, descending). Holds one block per source, never the values. A read error
/// is yielded and ends the stream.
#[derive(Debug)]
pub struct Values {
    scan: Scan,
    /// Length of the key's entry prefix, cut from each entry.
    prefix_len: usize,
    /// Values read ahead by each end: a bounded batch at a time.
    front: KeyBatch,
    back: KeyBatch,
    /// A read error, yielded once the batch read before it is handed out.
    error: Option<Error>,
}

impl Values {
    fn new(scan: Scan, key: &[u8]) -> Values {
        Values {
            scan,
            prefix_len: encoding::encoded_len(key, b""),
            front: KeyBatch::default(),
            back: KeyBatch::default(),
            error: None,
        }
    }

    /// The next value in ascending order, borrowed until the next call: streaming
    /// with no allocation per value (the `Iterator` impl copies each into a `Vec`).
    ///
    /// ```
    /// # use strata::multimap::MultiMap;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let mm = MultiMap::new(db.create_keyspace("mm").unwrap());
    /// mm.put(b"k", b"v2").unwrap();
    /// mm.put(b"k", b"v1").unwrap();
    /// let mut values = mm.get(b"k").unwrap();
    /// let mut total = 0;
    /// while let Some(v) = values.next_value() {
    ///     total += v.unwrap().len();
    /// }
    /// assert_eq!(total, 4);
    /// ```
    pub fn next_value(&mut self) -> Option<Result<&[u8]>> {
        self.step(Direction::Forward)
    }

    /// Calls `f` on every value left, in ascending order, each borrowed for the call:
    /// the fastest way to stream a key's values (`f` runs inside the loop over each
    /// block, on the value in the block cursor's key, with no batch and no returned
    /// `Option<Result>` per value). A read error ends the stream and is returned, after
    /// the values read before it.
    ///
    /// ```
    /// # use strata::multimap::MultiMap;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let mm = MultiMap::new(db.create_keyspace("mm").unwrap());
    /// mm.load((0..1000u32).map(|i| (b"k", i.to_be_bytes())), 1).unwrap();
    /// let (mut n, mut sum) = (0, 0u64);
    /// mm.get(b"k").unwrap().for_each_value(|v| {
    ///     n += 1;
    ///     sum += u64::from(u32::from_be_bytes(v.try_into().unwrap()));
    /// })?;
    /// assert_eq!((n, sum), (1000, 499_500));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn for_each_value(&mut self, mut f: impl FnMut(&[u8])) -> Result<()> {
        // What the front read ahead, then the scan's keys straight from its blocks,
        // then what the back end read ahead (its far end is the nearest to the front).
        while let Some(v) = self.front.take_near() {
            f(v);
        }
        if let Some(e) = self.error.take() {
            self.back.clear();
            return Err(e);
        }
        if let Err(e) = self.scan.for_each_key(self.prefix_len, &mut f) {
            self.back.clear();
            return Err(e);
        }
        while let Some(v) = self.back.take_far() {
            f(v);
        }
        Ok(())
    }

    /// Like [`next_value`](Self::next_value), from the back (descending).
    pub fn next_value_back(&mut self) -> Option<Result<&[u8]>> {
        self.step(Direction::Reverse)
    }

    #[inline]
    fn step(&mut self, dir: Direction) -> Option<Result<&[u8]>> {
        let empty = match dir {
            Direction::Forward => self.front.is_empty(),
            Direction::Reverse => self.back.is_empty(),
        };
        if empty {
            return self.refill(dir);
        }
        // The common case stays small: a value read ahead.
        let mine = match dir {
            Direction::Forward => &mut self.front,
            Direction::Reverse => &mut self.back,
        };
        mine.take_near().map(Ok)
    }

    /// `step` once the batch of `dir` is used up: reads the next batch, or, once the
    /// scan is over, takes from the other end's batch, or yields the read error.
    #[inline(never)]
    fn refill(&mut self, dir: Direction) -> Option<Result<&[u8]>> {
        let Values {
            scan,
            prefix_len,
            front,
            back,
            error,
        } = self;
        let (mine, other) = match dir {
            Direction::Forward => (front, back),
            Direction::Reverse => (back, front),
        };
        if error.is_none() {
            mine.clear();
            if let Err(e) = scan.fill_keys(dir, *prefix_len, mine) {
                *error = Some(e);
            }
        }
        if !mine.is_empty() {
            return mine.take_near().map(Ok);
        }
        if let Some(e) = error.take() {
            // The error ends the stream.
            other.clear();
            return Some(Err(e));
        }
        // The scan is over: what the other end read ahead is all that is left.
        other.take_far().map(Ok)
    }
}

impl Iterator for Values {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_value()?.map(<[u8]>::to_vec))
    }
}

impl DoubleEndedIterator for Values {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(self.next_value_back()?.map(<[u8]>::to_vec))
    }
}

impl std::iter::FusedIterator for Values {}

/// Every (key, value) pair of a multimap, in order. An entry the multimap did not
/// write (undecodable) is a `Corruption` error naming the keyspace and the offset in
/// the entry key.
pub struct Entries {
    merge: MergedScan<Scan>,
    keyspace: String,
}

impl std::fmt::Debug for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entries").field("keyspace", &self.keyspace).finish()
    }
}

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.merge.next()?;
        Some(r.and_then(|(k, _)| match encoding::decode(&k) {
            Ok((key, value)) => Ok((key, value.to_vec())),
            Err(e) => Err(Error::corruption(
                format!("keyspace {}", self.keyspace),
                e.offset as u64,
                format!("{} (entry key {k:02x?})", e.reason),
            )),
        }))
    }
}
