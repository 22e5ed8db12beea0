//! Snapshots: read views pinned at a seqno.

use std::sync::Arc;

use super::{DbInner, KeyRange, Keyspace, Scan};
use crate::error::{Error, Result};
use crate::key::SeqNo;

/// A consistent read view. While it lives, compactions keep every version it can see.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
/// db.put(b"k", b"old").unwrap();
/// let snap = db.snapshot();
/// db.put(b"k", b"new").unwrap();
/// let ks = db.default_keyspace();
/// assert_eq!(snap.get(&ks, b"k").unwrap().as_deref(), Some(&b"old"[..]));
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
/// ```
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: SeqNo,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

impl Snapshot {
    pub(crate) fn new(inner: Arc<DbInner>) -> Snapshot {
        let mut snaps = inner.snapshots.lock();
        // Read under the lock so a compaction listing snapshots cannot miss this one.
        let seq = inner.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        *snaps.entry(seq).or_insert(0) += 1;
        drop(snaps);
        Snapshot { inner, seq }
    }

    /// The seqno it reads at.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }

    fn check(&self, ks: &Keyspace) -> Result<()> {
        if !Arc::ptr_eq(&self.inner, ks.inner()) {
            return Err(Error::InvalidArgument(
                "snapshot and keyspace belong to different databases".into(),
            ));
        }
        self.inner.check_open()
    }

    /// Reads `key` of `ks` as of the snapshot.
    pub fn get(&self, ks: &Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(ks)?;
        Ok(self.inner.get_versioned(ks.id(), key, self.seq)?.map(|(_, v)| v))
    }

    /// Reads `key` of `ks` as of the snapshot, with the seqno of the visible version.
    pub fn get_versioned(&self, ks: &Keyspace, key: &[u8]) -> Result<Option<(SeqNo, Vec<u8>)>> {
        self.check(ks)?;
        self.inner.get_versioned(ks.id(), key, self.seq)
    }

    /// Scans `ks` as of the snapshot.
    pub fn scan(&self, ks: &Keyspace, range: impl KeyRange) -> Result<Scan> {
        self.check(ks)?;
        let (lo, hi) = range.into_bounds();
        Scan::new(&self.inner, ks.id(), self.seq, lo, hi, None)
    }
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        *self.inner.snapshots.lock().entry(self.seq).or_insert(0) += 1;
        Snapshot {
            inner: self.inner.clone(),
            seq: self.seq,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.inner.snapshots.lock();
        if let Some(c) = snaps.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                snaps.remove(&self.seq);
            }
        }
    }
}
