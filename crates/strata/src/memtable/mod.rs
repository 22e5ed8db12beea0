//! The memtable: a concurrent skiplist of internal entries for all keyspaces, plus the
//! range tombstones written since it was created.
//!
//! One memtable serves every keyspace (entries are ordered by keyspace id first), so a
//! flush turns one memtable into one level-0 run per keyspace, installed in one manifest
//! edit: all keyspaces of a table are always flushed together. Each memtable belongs to
//! exactly one WAL file, which can be deleted once the memtable is flushed.
//!
//! The skiplist (`skiplist`) is our own: nodes live in the memtable's `arena`, so
//! the size a memtable reports is the memory it holds, and a batch's entries are
//! inserted together with their searches interleaved (inserting is where write-heavy
//! workloads spend their CPU, almost all of it waiting for cache misses).

mod arena;
mod skiplist;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtOrd};

use parking_lot::RwLock;

use self::skiplist::{Position, SkipList};
use crate::delete_key::DeleteWhere;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, parse_internal_key};
use crate::range_tombstone::RangeTombstone;

/// Accounted size of a range tombstone beside its bounds.
const RANGE_DEL_OVERHEAD: usize = 64;

/// A point entry for [`MemTable::add_many`].
#[derive(Debug, Clone, Copy)]
pub struct PointEntry<'a> {
    /// Keyspace id.
    pub ks: u32,
    /// User key.
    pub key: &'a [u8],
    /// Its seqno.
    pub seq: SeqNo,
    /// Put, delete or deferred delete.
    pub kind: ValueKind,
    /// Value (empty for tombstones).
    pub value: &'a [u8],
}

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    map: SkipList,
    range_dels: RwLock<Vec<(u32, RangeTombstone)>>,
    /// Secondary range deletes by keyspace; a flush moves them into the manifest.
    delete_wheres: RwLock<Vec<(u32, DeleteWhere)>>,
    range_bytes: AtomicUsize,
    tombstones: AtomicUsize,
    wal_number: u64,
    created_at: u64,
    max_seq: AtomicU64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `wal_number`.
    pub fn new(wal_number: u64, created_at: u64) -> Self {
        MemTable {
            map: SkipList::new(),
            range_dels: RwLock::new(Vec::new()),
            delete_wheres: RwLock::new(Vec::new()),
            range_bytes: AtomicUsize::new(0),
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

    /// Memory used: the skiplist's arena plus the range tombstones.
    pub fn approximate_bytes(&self) -> usize {
        self.map.memory() + self.range_bytes.load(AtOrd::Relaxed)
    }

    /// Number of point entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        !self.has_entries() && self.range_dels.read().is_empty() && self.delete_wheres.read().is_empty()
    }

    /// Whether a point entry (put or delete) was written; range deletes and
    /// delete-where records aside.
    pub fn has_entries(&self) -> bool {
        self.map.len() > 0
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

    /// Inserts a point entry. Inserting an internal key already present (a replayed
    /// record) changes nothing.
    pub fn add(&self, ks: u32, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        self.add_many(&[PointEntry {
            ks,
            key,
            seq,
            kind,
            value,
        }]);
    }

    /// Inserts point entries as [`add`](Self::add) would, faster for many: the skiplist
    /// searches of neighbouring entries run interleaved.
    pub fn add_many(&self, entries: &[PointEntry<'_>]) {
        self.map.insert_many(entries, |i| {
            if let Some(e) = entries.get(i) {
                self.note_added(e.seq, e.kind);
            }
        });
    }

    fn note_added(&self, seq: SeqNo, kind: ValueKind) {
        if kind.is_tombstone() {
            self.tombstones.fetch_add(1, AtOrd::Relaxed);
        }
        if kind != ValueKind::DeferredDelete {
            // A deferred delete carries an old seqno; the batch's own is noted apart.
            self.max_seq.fetch_max(seq, AtOrd::Relaxed);
        }
    }

    /// Inserts a range tombstone.
    pub fn add_range_delete(&self, ks: u32, start: &[u8], end: &[u8], seq: SeqNo) {
        self.note_range(start, end, seq);
        let (start, end) = (start.to_vec(), end.to_vec());
        self.range_dels.write().push((ks, RangeTombstone { start, end, seq }));
    }

    /// Records a secondary range delete of keyspace `ks` at `seq`.
    pub fn add_delete_where(&self, ks: u32, lo: &[u8], hi: &[u8], seq: SeqNo) {
        self.note_range(lo, hi, seq);
        let (lo, hi) = (lo.to_vec(), hi.to_vec());
        self.delete_wheres.write().push((ks, DeleteWhere { seq, lo, hi }));
    }

    /// Counts a range operation's bytes and seqno.
    fn note_range(&self, from: &[u8], to: &[u8], seq: SeqNo) {
        self.range_bytes
            .fetch_add(from.len() + to.len() + RANGE_DEL_OVERHEAD, AtOrd::Relaxed);
        self.max_seq.fetch_max(seq, AtOrd::Relaxed);
    }

    /// Secondary range deletes of keyspace `ks`.
    pub fn delete_wheres(&self, ks: u32) -> Vec<DeleteWhere> {
        of_keyspace(&self.delete_wheres, ks)
    }

    /// Every secondary range delete, with its keyspace.
    pub fn all_delete_wheres(&self) -> Vec<(u32, DeleteWhere)> {
        self.delete_wheres.read().clone()
    }

    /// The newest entry for `key` in keyspace `ks` with seqno <= `snapshot`.
    pub fn get(&self, ks: u32, key: &[u8], snapshot: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        let e = self.map.seek(ks, &crate::key::seek_key(key, snapshot), false)?;
        if e.ks() != ks {
            return None;
        }
        let p = parse_internal_key(e.key())?;
        if p.user_key != key {
            return None;
        }
        Some((p.seq, p.kind, e.value().to_vec()))
    }

    /// Range tombstones of keyspace `ks`.
    pub fn range_tombstones(&self, ks: u32) -> Vec<RangeTombstone> {
        of_keyspace(&self.range_dels, ks)
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
        let mut cur = self.map.first();
        while let Some(e) = cur {
            let ks = e.ks();
            out.push(ks);
            // Jump past this keyspace.
            cur = ks.checked_add(1).and_then(|next| self.map.seek_keyspace(next));
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
            back: Vec::new(),
        }
    }

    /// Calls `f` for every entry of keyspace `ks` in order (faster than the cursor).
    pub fn for_each(&self, ks: u32, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        let mut cur = self.map.seek_keyspace(ks);
        while let Some(e) = cur {
            if e.ks() != ks {
                break;
            }
            f(e.key(), e.value())?;
            cur = self.map.next_entry(e);
        }
        Ok(())
    }
}

/// A positioned cursor over one keyspace of a memtable. It holds the memtable, so the
/// entry it points at stays valid; moving forward follows a link, moving back searches
/// (the list has no back links) for the run of entries before the current one and then
/// steps through that run.
///
/// The run is read once, so an entry inserted into it afterwards is not visited going
/// back. Such an entry is newer than every snapshot the cursor serves: a batch becomes
/// visible only after all its entries are in the memtable.
pub struct MemTableIter {
    mem: std::sync::Arc<MemTable>,
    ks: u32,
    cur: Option<Position>,
    /// Entries just before `cur`, ascending; the next `prev` steps take them from the end.
    /// Empty whenever `cur` is `None`.
    back: Vec<Position>,
}

impl MemTableIter {
    /// The position of `e` if it belongs to keyspace `ks`.
    fn position_in(ks: u32, e: Option<skiplist::Entry<'_>>) -> Option<Position> {
        e.filter(|e| e.ks() == ks).map(|e| e.position())
    }

    /// Moves to the last entry of `back` (taking it out), or past the start.
    fn step_back(&mut self) {
        // SAFETY: `back` holds positions of `self.mem`'s list only, which it keeps alive.
        let e = self.back.pop().map(|p| unsafe { self.mem.map.at(p) });
        self.cur = Self::position_in(self.ks, e);
        if self.cur.is_none() {
            self.back.clear();
        }
    }

    fn entry(&self) -> Option<skiplist::Entry<'_>> {
        // SAFETY: positions are only taken from entries of `self.mem`'s list, which
        // `self.mem` keeps alive.
        self.cur.map(|p| unsafe { self.mem.map.at(p) })
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.back.clear();
        self.cur = Self::position_in(self.ks, self.mem.map.seek_keyspace(self.ks));
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.back.clear();
        let e = match self.ks.checked_add(1) {
            Some(n) => self.mem.map.seek_back_keyspace(n),
            None => self.mem.map.last(),
        };
        self.cur = Self::position_in(self.ks, e);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.back.clear();
        self.cur = Self::position_in(self.ks, self.mem.map.seek(self.ks, target, false));
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // One search finds the entry and the run before it, for the `prev`s that follow.
        self.mem.map.run_before(self.ks, target, true, &mut self.back);
        self.step_back();
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.back.clear();
        let e = self.entry().and_then(|e| self.mem.map.next_entry(e));
        self.cur = Self::position_in(self.ks, e);
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if self.back.is_empty()
            && let Some(p) = self.cur
        {
            // SAFETY: `cur` is a position of `self.mem`'s list, which it keeps alive.
            let e = unsafe { self.mem.map.at(p) };
            self.mem.map.run_before(self.ks, e.key(), false, &mut self.back);
        }
        self.step_back();
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.entry().map(|e| e.key()).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.entry().map(|e| e.value()).unwrap_or(&[])
    }
}

/// The items of keyspace `ks` in a list of `(keyspace, item)`.
fn of_keyspace<T: Clone>(list: &RwLock<Vec<(u32, T)>>, ks: u32) -> Vec<T> {
    list.read()
        .iter()
        .filter(|(k, _)| *k == ks)
        .map(|(_, t)| t.clone())
        .collect()
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
        // The user keys from where the cursor stands on, stepping with `step`.
        let walk = |it: &mut MemTableIter, step: fn(&mut MemTableIter) -> Result<()>| {
            let mut keys = Vec::new();
            while it.valid() {
                keys.push(user_key(it.key()).to_vec());
                step(it).unwrap();
            }
            keys
        };
        it.seek_to_first().unwrap();
        assert_eq!(
            walk(&mut it, MemTableIter::next),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        it.seek_to_last().unwrap();
        assert_eq!(
            walk(&mut it, MemTableIter::prev),
            vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]
        );
    }

    proptest::proptest! {
        /// Any mix of seeks and steps in both directions lands where a sorted model
        /// says: the run a backward step keeps must be dropped by every other move.
        #[test]
        fn cursor_moves_in_any_order_match_a_sorted_model(
            keys in proptest::collection::btree_set((0u32..3, 0u16..300), 1..300),
            ops in proptest::collection::vec((0u8..6, 0u16..300), 1..60),
        ) {
            let m = Arc::new(MemTable::new(1, 0));
            let ik = |k: u16| crate::key::internal_key(&k.to_be_bytes(), 1, ValueKind::Put);
            for &(ks, k) in &keys {
                m.add(ks, &k.to_be_bytes(), 1, ValueKind::Put, b"v");
            }
            let model: Vec<Vec<u8>> = keys.iter().filter(|(ks, _)| *ks == 1).map(|&(_, k)| ik(k)).collect();
            let mut it = m.iter(1);
            let mut at: Option<usize> = None;
            for (op, k) in ops {
                let target = ik(k);
                match op {
                    0 => {
                        it.seek(&target).expect("seek");
                        at = model.iter().position(|x| crate::key::compare_internal(x, &target).is_ge());
                    }
                    1 => {
                        it.seek_for_prev(&target).expect("seek_for_prev");
                        at = model.iter().rposition(|x| crate::key::compare_internal(x, &target).is_le());
                    }
                    2 => {
                        it.next().expect("next");
                        at = at.map(|i| i + 1).filter(|&i| i < model.len());
                    }
                    3 => {
                        it.prev().expect("prev");
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                    4 => {
                        it.seek_to_first().expect("first");
                        at = (!model.is_empty()).then_some(0);
                    }
                    _ => {
                        it.seek_to_last().expect("last");
                        at = model.len().checked_sub(1);
                    }
                }
                proptest::prop_assert_eq!(it.valid(), at.is_some());
                if let Some(i) = at {
                    proptest::prop_assert_eq!(it.key(), model[i].as_slice());
                }
            }
        }
    }

    #[test]
    fn gets_at_a_snapshot_ignore_newer_versions_being_inserted() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let m = Arc::new(MemTable::new(1, 0));
        for k in 0..300u64 {
            m.add(1, &k.to_be_bytes(), 1, ValueKind::Put, &1u64.to_be_bytes());
        }
        let visible = AtomicU64::new(1);
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let (m2, visible, stop) = (m.clone(), &visible, &stop);
            sc.spawn(move || {
                let mut seq = 2u64;
                while !stop.load(AtOrd::Relaxed) && seq < 200_000 {
                    let k = (seq * 7919) % 300;
                    m2.add(1, &k.to_be_bytes(), seq, ValueKind::Put, &seq.to_be_bytes());
                    visible.store(seq, AtOrd::Release);
                    seq += 1;
                }
                stop.store(true, AtOrd::Relaxed);
            });
            let m = m.clone();
            sc.spawn(move || {
                while !stop.load(AtOrd::Relaxed) {
                    let snap = visible.load(AtOrd::Acquire);
                    for k in 0..300u64 {
                        let got = m.get(1, &k.to_be_bytes(), snap);
                        let Some((seq, _, v)) = got else {
                            panic!("key {k} at {snap}: none")
                        };
                        assert!(seq <= snap && v == seq.to_be_bytes(), "key {k} at {snap}: {seq}");
                        // The newest write of k at or below snap: s = r (mod 300).
                        let r = (0..300u64).find(|r| (r * 7919) % 300 == k).unwrap_or(0);
                        let newest = snap
                            .checked_sub((snap + 300 - r) % 300)
                            .filter(|x| *x >= 2)
                            .unwrap_or(1);
                        assert_eq!(seq, newest, "key {k} at {snap}");
                    }
                }
            });
        });
    }
}
