//! The memtable: a concurrent skiplist of internal entries for all keyspaces, plus the
//! range tombstones written since it was created.
//!
//! One memtable serves every keyspace (entries are ordered by keyspace id first), so a
//! flush turns one memtable into one level-0 run per keyspace, installed in one manifest
//! edit: all keyspaces of a table are always flushed together. Each memtable belongs to
//! exactly one WAL file, which can be deleted once the memtable is flushed.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtOrd};

use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;
use smallvec::SmallVec;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, compare_internal, parse_internal_key};
use crate::range_tombstone::RangeTombstone;

/// Internal keys up to this long live inside the skiplist node: comparisons during a
/// search then touch no other cache line (the search dominates write cost).
const INLINE_KEY: usize = 40;

/// Skiplist key: keyspace id, then internal key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemKey {
    ks: u32,
    ikey: SmallVec<[u8; INLINE_KEY]>,
}

impl Ord for MemKey {
    fn cmp(&self, o: &Self) -> Ordering {
        self.ks.cmp(&o.ks).then_with(|| compare_internal(&self.ikey, &o.ikey))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Rough per-entry overhead of the skiplist (node, tower, boxes).
const ENTRY_OVERHEAD: usize = 80;

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    map: SkipMap<MemKey, Box<[u8]>>,
    range_dels: RwLock<Vec<(u32, RangeTombstone)>>,
    bytes: AtomicUsize,
    entries: AtomicUsize,
    tombstones: AtomicUsize,
    wal_number: u64,
    created_at: u64,
    max_seq: AtomicU64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `wal_number`.
    pub fn new(wal_number: u64, created_at: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            range_dels: RwLock::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            tombstones: AtomicUsize::new(0),
            wal_number,
            created_at,
            max_seq: AtomicU64::new(0),
        }
    }

    /// The WAL file holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Clock time when it was created (bounds the age of its tombstones).
    pub fn created_at(&self) -> u64 {
        self.created_at
    }

    /// Approximate memory used.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtOrd::Relaxed)
    }

    /// Number of point entries.
    pub fn len(&self) -> usize {
        self.entries.load(AtOrd::Relaxed)
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_dels.read().is_empty()
    }

    /// Number of point tombstones (deletes and deferred deletes) plus range tombstones.
    pub fn tombstones(&self) -> usize {
        self.tombstones.load(AtOrd::Relaxed) + self.range_dels.read().len()
    }

    /// Records that a batch ending at `seq` was applied.
    pub fn note_seq(&self, seq: SeqNo) {
        self.max_seq.fetch_max(seq, AtOrd::Relaxed);
    }

    /// Highest batch seqno applied.
    pub fn max_seq(&self) -> SeqNo {
        self.max_seq.load(AtOrd::Relaxed)
    }

    /// Inserts a point entry.
    pub fn add(&self, ks: u32, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let mut ikey: SmallVec<[u8; INLINE_KEY]> = SmallVec::with_capacity(key.len() + 8);
        ikey.extend_from_slice(key);
        ikey.extend_from_slice(&crate::key::pack_trailer(seq, kind).to_be_bytes());
        self.bytes
            .fetch_add(ikey.len() + value.len() + ENTRY_OVERHEAD, AtOrd::Relaxed);
        self.entries.fetch_add(1, AtOrd::Relaxed);
        if kind.is_tombstone() {
            self.tombstones.fetch_add(1, AtOrd::Relaxed);
        }
        if kind != ValueKind::DeferredDelete {
            // A deferred delete carries an old seqno; the batch's own is noted apart.
            self.max_seq.fetch_max(seq, AtOrd::Relaxed);
        }
        self.map.insert(MemKey { ks, ikey }, value.into());
    }

    /// Inserts a range tombstone.
    pub fn add_range_delete(&self, ks: u32, start: &[u8], end: &[u8], seq: SeqNo) {
        self.bytes
            .fetch_add(start.len() + end.len() + ENTRY_OVERHEAD, AtOrd::Relaxed);
        self.max_seq.fetch_max(seq, AtOrd::Relaxed);
        self.range_dels.write().push((
            ks,
            RangeTombstone {
                start: start.to_vec(),
                end: end.to_vec(),
                seq,
            },
        ));
    }

    /// The newest entry for `key` in keyspace `ks` with seqno <= `snapshot`.
    pub fn get(&self, ks: u32, key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        let start = MemKey {
            ks,
            ikey: SmallVec::from_vec(crate::key::seek_key(key, snapshot)),
        };
        let e = self.map.lower_bound(Bound::Included(&start))?;
        if e.key().ks != ks {
            return None;
        }
        let p = parse_internal_key(&e.key().ikey)?;
        if p.user_key != key {
            return None;
        }
        Some((p.seq, p.kind, e.value().to_vec()))
    }

    /// Range tombstones of keyspace `ks`.
    pub fn range_tombstones(&self, ks: u32) -> Vec<RangeTombstone> {
        self.range_dels
            .read()
            .iter()
            .filter(|(k, _)| *k == ks)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// The highest seqno <= `snapshot` of a range tombstone of `ks` covering `key`.
    pub fn covering_range_delete(&self, ks: u32, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let rds = self.range_dels.read();
        rds.iter()
            .filter(|(k, t)| *k == ks && t.seq <= snapshot && t.contains(key))
            .map(|(_, t)| t.seq)
            .max()
    }

    /// Keyspaces that hold at least one entry or range tombstone.
    pub fn keyspaces(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self.range_dels.read().iter().map(|(k, _)| *k).collect();
        let mut cur = self.map.front();
        while let Some(e) = cur {
            let ks = e.key().ks;
            out.push(ks);
            // Jump past this keyspace.
            cur = match ks.checked_add(1) {
                Some(next) => self.map.lower_bound(Bound::Included(&MemKey {
                    ks: next,
                    ikey: SmallVec::new(),
                })),
                None => None,
            };
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A cursor over keyspace `ks`.
    pub fn iter(self: &std::sync::Arc<Self>, ks: u32) -> MemTableIter {
        MemTableIter {
            mem: self.clone(),
            ks,
            cur: None,
        }
    }

    /// Calls `f` for every entry of keyspace `ks` in order (faster than the cursor).
    pub fn for_each(&self, ks: u32, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        let lo = MemKey {
            ks,
            ikey: SmallVec::new(),
        };
        for e in self.map.range(lo..) {
            if e.key().ks != ks {
                break;
            }
            f(&e.key().ikey, e.value())?;
        }
        Ok(())
    }
}

fn owned(e: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>>, ks: u32) -> Option<(MemKey, Box<[u8]>)> {
    match e {
        Some(e) if e.key().ks == ks => Some((e.key().clone(), e.value().clone())),
        _ => None,
    }
}

/// A positioned cursor over one keyspace of a memtable.
///
/// It keeps a copy of the current entry and re-seeks the skiplist to move, which keeps it
/// free of borrowed lifetimes at the cost of one O(log n) search per step.
pub struct MemTableIter {
    mem: std::sync::Arc<MemTable>,
    ks: u32,
    cur: Option<(MemKey, Box<[u8]>)>,
}

impl MemTableIter {
    fn probe(&self, ikey: &[u8]) -> MemKey {
        MemKey {
            ks: self.ks,
            ikey: SmallVec::from_slice(ikey),
        }
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        let p = self.probe(&[]);
        let e = self.mem.map.lower_bound(Bound::Included(&p));
        let cur = owned(e, self.ks);
        self.cur = cur;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        let e = match self.ks.checked_add(1) {
            Some(n) => self.mem.map.upper_bound(Bound::Excluded(&MemKey {
                ks: n,
                ikey: SmallVec::new(),
            })),
            None => self.mem.map.back(),
        };
        let cur = owned(e, self.ks);
        self.cur = cur;
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let p = self.probe(target);
        let e = self.mem.map.lower_bound(Bound::Included(&p));
        let cur = owned(e, self.ks);
        self.cur = cur;
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let p = self.probe(target);
        let e = self.mem.map.upper_bound(Bound::Included(&p));
        let cur = owned(e, self.ks);
        self.cur = cur;
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if let Some((k, _)) = self.cur.take() {
            let e = self.mem.map.lower_bound(Bound::Excluded(&k));
            let cur = owned(e, self.ks);
            self.cur = cur;
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if let Some((k, _)) = self.cur.take() {
            let e = self.mem.map.upper_bound(Bound::Excluded(&k));
            let cur = owned(e, self.ks);
            self.cur = cur;
        }
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|(k, _)| &*k.ikey).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|(_, v)| &**v).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::user_key;
    use std::sync::Arc;

    #[test]
    fn get_sees_newest_visible_version() {
        let m = MemTable::new(1, 0);
        m.add(1, b"a", 5, ValueKind::Put, b"v5");
        m.add(1, b"a", 9, ValueKind::Put, b"v9");
        m.add(2, b"a", 7, ValueKind::Put, b"other");
        assert_eq!(m.get(1, b"a", 100).map(|e| e.2), Some(b"v9".to_vec()));
        assert_eq!(m.get(1, b"a", 8).map(|e| e.2), Some(b"v5".to_vec()));
        assert_eq!(m.get(1, b"a", 4), None);
        assert_eq!(m.get(1, b"b", 100), None);
        assert_eq!(m.keyspaces(), vec![1, 2]);
    }

    #[test]
    fn cursor_walks_one_keyspace_both_ways() {
        let m = Arc::new(MemTable::new(1, 0));
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            m.add(3, *k, i as u64 + 1, ValueKind::Put, b"x");
        }
        m.add(2, b"zz", 9, ValueKind::Put, b"x");
        m.add(4, b"0", 9, ValueKind::Put, b"x");
        let mut it = m.iter(3);
        it.seek_to_first().unwrap();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(user_key(it.key()).to_vec());
            it.next().unwrap();
        }
        assert_eq!(fwd, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(user_key(it.key()).to_vec());
            it.prev().unwrap();
        }
        assert_eq!(back, vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    }
}
