//! Snapshots: read views pinned at a seqno.

use std::sync::Arc;

use super::read::ScanRange;
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
        snaps.hold(seq);
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

    /// [`get_versioned`](Self::get_versioned) of a key that almost surely exists (the
    /// row an index entry names): the oldest run's filter is not probed
    /// ([`Expect::Present`](super::read::Expect)).
    pub(crate) fn get_present(&self, ks: &Keyspace, key: &[u8]) -> Result<Option<(SeqNo, Vec<u8>)>> {
        self.check(ks)?;
        self.inner
            .get_expecting(ks.id(), key, self.seq, super::read::Expect::Present)
    }

    /// Scans `ks` as of the snapshot.
    pub fn scan(&self, ks: &Keyspace, range: impl KeyRange) -> Result<Scan> {
        self.scan_shared(ks, ScanRange::new(range))
    }

    /// [`scan`](Self::scan) of bounds shared with other scans.
    pub(crate) fn scan_shared(&self, ks: &Keyspace, range: Arc<ScanRange>) -> Result<Scan> {
        self.check(ks)?;
        Scan::new(&self.inner, ks.id(), self.seq, range, None)
    }
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        self.inner.snapshots.lock().hold(self.seq);
        Snapshot {
            inner: self.inner.clone(),
            seq: self.seq,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.snapshots.lock().release(self.seq);
    }
}

/// The seqnos live snapshots read at, each with how many read there: compactions keep
/// the versions they can see. A sorted vector rather than a map: a select takes and
/// drops a snapshot per partition, and the vector keeps its room where a map would free
/// its last node and allocate it again.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    held: Vec<(SeqNo, usize)>,
}

impl SnapshotList {
    /// One more snapshot at `seq`.
    pub(crate) fn hold(&mut self, seq: SeqNo) {
        match self.held.binary_search_by_key(&seq, |e| e.0) {
            Ok(i) => self.held[i].1 += 1,
            Err(i) => self.held.insert(i, (seq, 1)),
        }
    }

    /// One snapshot at `seq` fewer.
    pub(crate) fn release(&mut self, seq: SeqNo) {
        if let Ok(i) = self.held.binary_search_by_key(&seq, |e| e.0) {
            if self.held[i].1 > 1 {
                self.held[i].1 -= 1;
            } else {
                self.held.remove(i);
            }
        }
    }

    /// The seqnos held, ascending.
    pub(crate) fn seqs(&self) -> impl Iterator<Item = SeqNo> + '_ {
        self.held.iter().map(|e| e.0)
    }

    /// Whether a snapshot reads at a seqno in `r`.
    pub(crate) fn any_in(&self, r: impl std::ops::RangeBounds<SeqNo>) -> bool {
        use std::ops::Bound;
        let i = match r.start_bound() {
            Bound::Included(s) => self.held.partition_point(|e| e.0 < *s),
            Bound::Excluded(s) => self.held.partition_point(|e| e.0 <= *s),
            Bound::Unbounded => 0,
        };
        self.held.get(i).is_some_and(|e| r.contains(&e.0))
    }

    /// The number of live snapshots.
    pub(crate) fn count(&self) -> usize {
        self.held.iter().map(|e| e.1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::SnapshotList;

    #[test]
    fn snapshots_are_counted_per_seqno_and_listed_in_order() {
        let mut l = SnapshotList::default();
        for s in [7, 3, 7, 9] {
            l.hold(s);
        }
        assert_eq!(l.seqs().collect::<Vec<_>>(), [3, 7, 9]);
        assert_eq!(l.count(), 4);
        assert!(l.any_in(..4) && l.any_in(4..8) && l.any_in(9..) && !l.any_in(4..7) && !l.any_in(10..));
        l.release(7);
        assert_eq!(l.seqs().collect::<Vec<_>>(), [3, 7, 9]);
        l.release(7);
        l.release(4);
        assert_eq!(l.seqs().collect::<Vec<_>>(), [3, 9]);
        l.release(3);
        l.release(9);
        assert_eq!(l.count(), 0);
        assert_eq!(l.seqs().next(), None);
    }
}
