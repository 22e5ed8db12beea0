//! Keyspace handles: the per-tree face of the database.

use std::sync::Arc;

use super::{DbInner, KeyRange, Scan};
use crate::batch::{KeyspaceId, WriteBatch};
use crate::error::Result;
use crate::key::SeqNo;

/// A handle on one keyspace (an LSM tree) of a database. Cheap to clone. Operations
/// on a handle whose database was closed return `Error::Closed`; on a dropped keyspace,
/// `Error::NotFound`.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
/// let ks = db.create_keyspace("events").unwrap();
/// ks.put(b"2024-01-01", b"new year").unwrap();
/// ks.put(b"2024-02-01", b"february").unwrap();
/// let newest_first: Vec<_> = ks.scan(..).unwrap().rev().map(|r| r.unwrap().0).collect();
/// assert_eq!(newest_first, vec![b"2024-02-01".to_vec(), b"2024-01-01".to_vec()]);
/// ```
#[derive(Clone)]
pub struct Keyspace {
    inner: Arc<DbInner>,
    id: u32,
    name: Arc<str>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish()
    }
}

impl KeyspaceId for Keyspace {
    fn keyspace_id(&self) -> u32 {
        self.id
    }
}

impl Keyspace {
    pub(crate) fn new(inner: Arc<DbInner>, id: u32, name: Arc<str>) -> Self {
        Keyspace { inner, id, name }
    }

    /// A handle on keyspace `id` with an empty name, for layers that know keyspaces by
    /// id (tables make some for every select, so the name is shared, not allocated).
    pub(crate) fn unnamed(inner: Arc<DbInner>, id: u32) -> Self {
        static EMPTY: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));
        Keyspace::new(inner, id, EMPTY.clone())
    }

    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// The keyspace's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn write1(&self, f: impl FnOnce(&mut WriteBatch)) -> Result<()> {
        let mut b = WriteBatch::new();
        f(&mut b);
        self.inner.write_user(b).map(|_| ())
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write1(|b| b.put(self, key, value))
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.write1(|b| b.delete(self, key))
    }

    /// Deletes every key in `start..end`; an empty range is an `InvalidArgument` error.
    pub fn delete_range(&self, range: std::ops::Range<&[u8]>) -> Result<()> {
        self.write1(|b| b.delete_range(self, range.start, range.end))
    }

    /// The latest value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_versioned(key)?.map(|(_, v)| v))
    }

    /// The latest value of `key` with the seqno that wrote it.
    pub fn get_versioned(&self, key: &[u8]) -> Result<Option<(SeqNo, Vec<u8>)>> {
        self.inner.check_open()?;
        self.inner.get_latest(self.id, key)
    }

    /// Scans the latest data in `range`; use `.rev()` for descending order.
    pub fn scan(&self, range: impl KeyRange) -> Result<Scan> {
        self.inner.check_open()?;
        let range = super::read::ScanRange::new(range);
        // A scan pins its own snapshot so a long scan's versions are not compacted away
        // under it.
        let snap = super::Snapshot::new(self.inner.clone());
        let seq = snap.seq();
        Scan::new(&self.inner, self.id, seq, range, Some(snap))
    }

    /// Declares this keyspace's delete key (a big-endian field of every value) and the
    /// pages per delete tile of the tables written from now on (`docs/design/deletes.md`).
    /// The tile size may change at any time; the key may not once a
    /// [`Keyspace::delete_where`] has used it.
    ///
    /// ```
    /// use strata::delete_key::{DeleteKey, TileChoice};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let orders = db.create_keyspace("orders").unwrap();
    /// // Values start with an 8-byte big-endian creation time.
    /// orders.set_delete_key(DeleteKey::new(0, 8).unwrap(), TileChoice::Fixed(8)).unwrap();
    /// orders.put(b"o1", &[&10u64.to_be_bytes()[..], b"old"].concat()).unwrap();
    /// orders.put(b"o2", &[&99u64.to_be_bytes()[..], b"new"].concat()).unwrap();
    /// orders.delete_where(&0u64.to_be_bytes(), &50u64.to_be_bytes()).unwrap();
    /// assert_eq!(orders.get(b"o1").unwrap(), None);
    /// assert!(orders.get(b"o2").unwrap().is_some());
    /// ```
    pub fn set_delete_key(&self, key: crate::delete_key::DeleteKey, h: crate::delete_key::TileChoice) -> Result<()> {
        use crate::delete_key::{DeleteConfig, TileChoice, config_name, config_of};
        self.inner.check_writable()?;
        // Checked here too: the fields are public.
        crate::delete_key::DeleteKey::new(key.offset, key.width)?;
        if let TileChoice::Fixed(h) = h {
            TileChoice::fixed(h)?;
        }
        if self.inner.current().version.keyspace(self.id).is_none() {
            return Err(crate::Error::NotFound(format!("keyspace {:?} (dropped)", self.name)));
        }
        let c = DeleteConfig { key, h };
        let (id, name) = (self.id, self.name.clone());
        let inner = self.inner.clone();
        // Looked at with writes held and under the version set's lock, where the change
        // is made: no delete_where commits, no memtable is frozen and no flush installs
        // between the look and the change, and a flush starting after it takes the new
        // key.
        self.inner.with_writes_held(|| {
            self.inner.catalog_edit_with(&[], &[], false, move |_| {
                let sv = inner.current();
                let set = vec![(config_name(id), Some(c.encode()))];
                if !config_of(&sv.version.meta, id)?.is_some_and(|old| old.key != key) {
                    return Ok(set);
                }
                if !super::read::delete_wheres_in(&sv, id)?.is_empty() {
                    return Err(crate::Error::InvalidArgument(
                        "the delete key cannot change once delete_where has used it".into(),
                    ));
                }
                // Files record their pages' delete-key ranges, not the key they were
                // taken by: read under another key, they would drop pages of rows no
                // delete covers. A frozen memtable would be flushed into such files.
                if sv.version.keyspace(id).is_some_and(|t| t.files().next().is_some()) || !sv.imm.is_empty() {
                    return Err(crate::Error::InvalidArgument(format!(
                        "the delete key of keyspace {name:?} cannot change once data was flushed \
                         under it (its files' pages are grouped by it); set it before the first \
                         flush, or copy the data into a new keyspace"
                    )));
                }
                Ok(set)
            })
        })?;
        Ok(())
    }

    /// Sets what the bloom filters of this keyspace's tables hold of each key, for the
    /// tables flushes and compactions write from now on (those on disk keep theirs and
    /// are read as they are; no answer changes, only what a filter can rule out).
    /// [`FilterKey::KeyPrefix`] suits a multimap's keyspace: one filter entry per key
    /// instead of one per (key, value), so its filters shrink to a fraction while
    /// `contains` is still filtered by key. Persisted; a dropped keyspace's setting
    /// goes with it.
    ///
    /// ```
    /// use strata::sstable::FilterKey;
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let ks = db.create_keyspace("by_author").unwrap();
    /// assert_eq!(ks.filter_key().unwrap(), FilterKey::Whole);
    /// ks.set_filter_key(FilterKey::KeyPrefix).unwrap();
    /// assert_eq!(ks.filter_key().unwrap(), FilterKey::KeyPrefix);
    /// ```
    ///
    /// [`FilterKey::KeyPrefix`]: crate::sstable::FilterKey::KeyPrefix
    pub fn set_filter_key(&self, key: crate::sstable::FilterKey) -> Result<()> {
        self.inner.check_writable()?;
        if self.inner.current().version.keyspace(self.id).is_none() {
            return Err(crate::Error::NotFound(format!("keyspace {:?} (dropped)", self.name)));
        }
        if self.filter_key()? == key {
            return Ok(());
        }
        self.inner
            .set_meta(vec![(super::filter_key::name(self.id), super::filter_key::encode(key))])
    }

    /// What the filters of the tables this keyspace writes hold
    /// ([`Keyspace::set_filter_key`]).
    pub fn filter_key(&self) -> Result<crate::sstable::FilterKey> {
        super::filter_key::of(&self.inner.current().version.meta, self.id)
    }

    /// The delete key and tile size declared by [`Keyspace::set_delete_key`].
    pub fn delete_config(&self) -> Result<Option<crate::delete_key::DeleteConfig>> {
        crate::delete_key::config_of(&self.inner.current().version.meta, self.id)
    }

    /// The secondary range deletes of this keyspace recorded in the manifest: flushed
    /// and still needed (compactions forget a record once no entry it deletes can
    /// remain: invariant RG of `compaction::tiles`), by seqno.
    pub fn delete_where_records(&self) -> Result<Vec<crate::delete_key::DeleteWhere>> {
        crate::delete_key::records_of(&self.inner.current().version.meta, self.id)
    }

    /// Deletes every entry whose delete key lies in `lo..hi` (bounds of the key's
    /// width): a secondary range delete, logged and atomic like any write. Reads stop
    /// seeing the entries at once (snapshots taken before still do); compactions drop
    /// the delete tiles' pages that lie inside the range without reading them. See
    /// [`Keyspace::set_delete_key`] for an example.
    pub fn delete_where(&self, lo: &[u8], hi: &[u8]) -> Result<()> {
        self.write1(|b| b.delete_where(self, lo, hi))?;
        // Whole pages go at once, by a manifest edit (no data read or written).
        self.inner.drop_deleted_pages(self.id).map(|_| ())
    }

    /// Compacts the part of this keyspace overlapping `range` into its last level.
    pub fn compact_range(&self, range: impl KeyRange) -> Result<()> {
        self.inner.flush_and_wait()?;
        let (lo, hi) = range.into_bounds();
        let b = |x: &std::ops::Bound<Vec<u8>>| match x {
            std::ops::Bound::Included(v) | std::ops::Bound::Excluded(v) => Some(v.clone()),
            std::ops::Bound::Unbounded => None,
        };
        self.inner.compact_keyspace(self.id, b(&lo), b(&hi))
    }
}
