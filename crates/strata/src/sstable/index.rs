//! The index: one fence pointer per data block, and the decoded, in-memory
//! [`FenceIndex`] a reader searches.
//!
//! A data block's *fence key* `f` is an internal key with `last <= f < next`, where `last`
//! is the block's last key and `next` the next block's first. The first fence `>= target`
//! therefore names the block that holds the first entry `>= target`, or, when that
//! block's entries are all smaller, the block just before the one that does (a reader
//! then moves on).
//!
//! # Format version 3 (written)
//!
//! ```text
//! index  = varint count ++ varint first_offset ++ entry * count
//! entry  = varint shared ++ varint unshared ++ user_key[shared..]
//!          ++ varint (size << 1 | explicit) ++ [trailer: u64 BE, if explicit]
//! ```
//!
//! Fence keys are stored as user keys, prefix-compressed against the previous one. The
//! fence is that user key's *last* internal key (trailer 0, after every version of it):
//! the shortest user key `s` with `last_uk <= s < next_uk` (see [`separator`]). Only when
//! one user key spans two blocks is the fence the last internal key itself, with its
//! trailer stored (`explicit`). Data blocks are contiguous, so a block's offset is where
//! the previous one's trailer ends; only the first offset is stored. An entry is about
//! 12 bytes for 16-byte random keys, a third of version 2's.
//!
//! # Versions 1 and 2 (read)
//!
//! An ordinary [`Block`](super::Block) whose keys are the internal fence keys and whose
//! values are [`FenceValue`]s.
//!
//! Invariants checked by [`FenceIndex::decode`]: fences strictly increase, explicit
//! trailers carry a valid kind, offsets do not overflow, the fences fit the caller's
//! key budget, and nothing trails the entries.

use std::cmp::Ordering;

use super::format::BlockHandle;
use crate::codec::{DecodeError, Decoder, put_varint};
use crate::key::{SeqNo, TRAILER_LEN, compare_internal, user_key, user_key_prefix};

/// A user key `s` with `last <= s < next` (user keys, `last < next`) shorter than
/// `last`: `last` cut one byte past the common prefix and that byte raised, or, when
/// it cannot be raised, cut at the first later byte that can. `None` keeps `last`: when
/// it is a prefix of `next` or no such cut is shorter (like RocksDB, this never looks
/// at `next`'s own prefixes, which could sometimes be shorter still).
///
/// Short fences are what RocksDB's `FindShortestSeparator` buys: for random 16-byte keys
/// a fence shrinks to about 9 bytes.
pub fn separator(last: &[u8], next: &[u8]) -> Option<Vec<u8>> {
    let p = last.iter().zip(next).take_while(|(x, y)| x == y).count();
    // last < next with both longer than p, so last[p] < next[p].
    let (&ap, &bp) = (last.get(p)?, next.get(p)?);
    let end = if ap.checked_add(1).is_some_and(|c| c < bp) {
        p
    } else {
        // Keep last[p] (still below next there) and raise the first later byte that can
        // grow.
        (p + 1..last.len()).find(|&j| last[j] < u8::MAX)?
    };
    if end + 1 >= last.len() {
        return None;
    }
    let mut s = last[..=end].to_vec();
    s[end] += 1;
    Some(s)
}

/// Writes a version-3 index (see the module docs).
#[derive(Debug, Default)]
pub struct IndexBuilder {
    entries: Vec<u8>,
    count: u64,
    first_offset: u64,
    prev: Vec<u8>,
}

impl IndexBuilder {
    /// An empty index.
    pub fn new() -> Self {
        IndexBuilder::default()
    }

    /// Appends the fence of the block at `handle`: `user_key`'s last internal key, or,
    /// with `trailer`, `user_key ++ trailer`. REQUIRES: fences increase and blocks are
    /// contiguous (`handle` starts where the previous block's trailer ends); the table
    /// builder guarantees both, and a violation yields an index that fails to decode or
    /// names the wrong blocks.
    pub fn add(&mut self, user_key: &[u8], trailer: Option<u64>, handle: BlockHandle) {
        if self.count == 0 {
            self.first_offset = handle.offset;
        }
        let shared = self.prev.iter().zip(user_key).take_while(|(a, b)| a == b).count();
        put_varint(&mut self.entries, shared as u64);
        put_varint(&mut self.entries, (user_key.len() - shared) as u64);
        self.entries.extend_from_slice(&user_key[shared..]);
        put_varint(&mut self.entries, (handle.size << 1) | u64::from(trailer.is_some()));
        if let Some(t) = trailer {
            self.entries.extend_from_slice(&t.to_be_bytes());
        }
        self.prev.clear();
        self.prev.extend_from_slice(user_key);
        self.count += 1;
    }

    /// Appends a fence given as an internal key: a zero trailer is the implicit one.
    pub fn add_fence(&mut self, fence: &[u8], handle: BlockHandle) {
        let t = crate::key::trailer(fence);
        self.add(user_key(fence), (t != 0).then_some(t), handle);
    }

    /// Bytes [`finish`](Self::finish) would return, give or take the header.
    pub fn estimated_size(&self) -> usize {
        self.entries.len() + 20
    }

    /// The encoded index.
    pub fn finish(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() + 20);
        put_varint(&mut out, self.count);
        put_varint(&mut out, self.first_offset);
        out.extend_from_slice(&self.entries);
        out
    }
}

/// A table's fences, decoded once at open: internal keys and block handles in order,
/// and each fence's user-key prefix as an integer, which settles most comparisons of
/// a seek.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FenceIndex {
    keys: Vec<u8>,
    ends: Vec<usize>,
    prefixes: Vec<u64>,
    handles: Vec<BlockHandle>,
}

impl FenceIndex {
    /// Number of fences (data blocks).
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// True when the table has no data block.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// The fence key of block `i` (empty past the end).
    pub fn key(&self, i: usize) -> &[u8] {
        let start = match i.checked_sub(1) {
            Some(j) => self.ends.get(j).copied().unwrap_or(usize::MAX),
            None => 0,
        };
        let end = self.ends.get(i).copied().unwrap_or(0);
        self.keys.get(start..end).unwrap_or(&[])
    }

    /// Where block `i` is.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// The first block whose fence is `>= target` (`len()` if none).
    pub fn seek(&self, target: &[u8]) -> usize {
        let prefix = user_key_prefix(user_key(target));
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let order = match self.prefixes.get(mid).map(|p| p.cmp(&prefix)) {
                Some(Ordering::Equal) | None => compare_internal(self.key(mid), target),
                Some(o) => o,
            };
            if order == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Fences and handles, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], BlockHandle)> + '_ {
        (0..self.len()).map(|i| (self.key(i), self.handles[i]))
    }

    /// Heap bytes held.
    pub fn memory(&self) -> usize {
        self.keys.capacity() + (self.ends.capacity() + self.prefixes.capacity()) * 8 + self.handles.capacity() * 16
    }

    /// Appends a fence; `Err` names why it cannot follow the previous one, or why the
    /// fences would outgrow `key_budget` bytes in all.
    pub(crate) fn push(&mut self, key: &[u8], handle: BlockHandle, key_budget: u64) -> Result<(), &'static str> {
        if (self.keys.len() + key.len()) as u64 > key_budget {
            return Err("fences longer than the table's keys");
        }
        if crate::key::parse_internal_key(key).is_none() {
            return Err("fence is not an internal key");
        }
        if let Some(prev) = self.len().checked_sub(1)
            && compare_internal(self.key(prev), key) != Ordering::Less
        {
            return Err("fence keys out of order");
        }
        self.keys.extend_from_slice(key);
        self.ends.push(self.keys.len());
        self.prefixes.push(user_key_prefix(user_key(key)));
        self.handles.push(handle);
        Ok(())
    }

    /// Decodes a version-3 index payload whose fences take at most `key_budget` bytes
    /// in all (as internal keys).
    ///
    /// A fence is no longer than its block's last key, so a table's fences never exceed
    /// the bytes of all its keys ([`Properties::raw_key_bytes`](super::Properties)): the
    /// budget keeps a crafted index, whose entries can each repeat a long shared
    /// prefix for a few bytes, from growing memory with the square of its size.
    pub fn decode(payload: &[u8], key_budget: u64) -> Result<FenceIndex, DecodeError> {
        let mut d = Decoder::new(payload);
        let count = d.varint()?;
        let mut offset = d.varint()?;
        let mut ix = FenceIndex::default();
        // An entry takes at least 3 bytes: never trust `count` for the allocation.
        let cap = usize::try_from(count).unwrap_or(usize::MAX).min(d.remaining() / 3);
        ix.handles.reserve(cap);
        ix.ends.reserve(cap);
        ix.prefixes.reserve(cap);
        let mut key = Vec::new();
        for _ in 0..count {
            let at = d.position();
            let err = |reason| DecodeError { offset: at, reason };
            let prev_len = key.len().saturating_sub(TRAILER_LEN);
            let shared = d.varint_len(prev_len)?;
            let unshared = d.varint_len(d.remaining())?;
            key.truncate(shared);
            key.extend_from_slice(d.bytes(unshared)?);
            let v = d.varint()?;
            if v & 1 == 1 {
                // `push` checks the kind.
                key.extend_from_slice(d.bytes(TRAILER_LEN)?);
            } else {
                key.extend_from_slice(&[0; TRAILER_LEN]);
            }
            let handle = BlockHandle { offset, size: v >> 1 };
            offset = handle.end_with_trailer().ok_or_else(|| err("block handle overflows"))?;
            ix.push(&key, handle, key_budget).map_err(err)?;
        }
        d.finish("trailing bytes after the index")?;
        Ok(ix)
    }
}

/// A version-1 or -2 index entry value: where a data block is, with statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceValue {
    /// Where the block is.
    pub handle: BlockHandle,
    /// Smallest seqno in the block.
    pub min_seq: SeqNo,
    /// Largest seqno in the block.
    pub max_seq: SeqNo,
    /// Entries in the block.
    pub entries: u64,
}

impl FenceValue {
    /// Encodes the index entry value (`varint offset ++ varint size ++ varint min_seq
    /// ++ varint max_seq ++ varint entries`).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        self.handle.encode_varint(&mut out);
        put_varint(&mut out, self.min_seq);
        put_varint(&mut out, self.max_seq);
        put_varint(&mut out, self.entries);
        out
    }

    /// Decodes an index entry value, rejecting trailing bytes and inverted seqno bounds.
    pub fn decode(bytes: &[u8]) -> Result<FenceValue, DecodeError> {
        let mut d = Decoder::new(bytes);
        let v = FenceValue {
            handle: BlockHandle::decode_varint(&mut d)?,
            min_seq: d.varint()?,
            max_seq: d.varint()?,
            entries: d.varint()?,
        };
        d.finish("trailing bytes in fence pointer")?;
        if v.min_seq > v.max_seq {
            return Err(DecodeError {
                offset: 0,
                reason: "fence pointer seqno bounds inverted",
            });
        }
        Ok(v)
    }
}

/// One fence, for tools (`dump-sst`) and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencePointer {
    /// The block's fence key: at or after its last internal key, before the next
    /// block's first.
    pub key: Vec<u8>,
    /// Where the block is.
    pub handle: BlockHandle,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, internal_key, last_key_of};
    use proptest::prelude::*;

    fn small_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(254), Just(255)], 0..6)
    }

    /// Keys around the 8-byte integer prefix: shorter, equal up to it, longer.
    fn prefix_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..12)
    }

    proptest! {
        #[test]
        fn separators_lie_between_the_keys_and_are_shorter(a in small_key(), b in small_key()) {
            prop_assume!(a < b);
            if let Some(s) = separator(&a, &b) {
                prop_assert!(a <= s && s < b, "{:?} <= {:?} < {:?}", a, s, b);
                prop_assert!(s.len() < a.len());
            } else {
                // A user key one byte past the common prefix, when it fits, is shorter.
                let p = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let one_byte_fits = p + 1 < a.len() && p < b.len() && u16::from(a[p]) + 1 < u16::from(b[p]);
                prop_assert!(!one_byte_fits, "{:?} | {:?} kept the last key", a, b);
            }
        }

        /// Whatever fences a builder is given (sorted, any mix of implicit and explicit
        /// trailers), the decoded index has exactly those fences and contiguous blocks,
        /// and every truncation of the encoding fails to decode.
        #[test]
        fn the_index_round_trips_and_truncations_fail(
            mut fences in proptest::collection::btree_set((prop_oneof![small_key(), prefix_key()], 0u64..4, any::<bool>()), 0..40),
            sizes in proptest::collection::vec(0u64..100_000, 40),
            first in 0u64..1 << 40,
            targets in proptest::collection::vec((proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(255)], 0..12), 0u64..6), 0..20),
        ) {
            let mut keys: Vec<Vec<u8>> = std::mem::take(&mut fences)
                .into_iter()
                .map(|(k, seq, explicit)| if explicit { internal_key(&k, seq + 1, ValueKind::Put) } else { last_key_of(&k) })
                .collect();
            keys.sort_by(|a, b| compare_internal(a, b));
            keys.dedup();
            let mut b = IndexBuilder::new();
            let mut want = Vec::new();
            let mut offset = first;
            for (k, &size) in keys.iter().zip(&sizes) {
                let h = BlockHandle { offset, size };
                b.add_fence(k, h);
                want.push((k.clone(), h));
                offset = h.end_with_trailer().expect("small");
            }
            let bytes = b.finish();
            let ix = FenceIndex::decode(&bytes, u64::MAX).expect("decodes");
            let got: Vec<(Vec<u8>, BlockHandle)> = ix.iter().map(|(k, h)| (k.to_vec(), h)).collect();
            prop_assert_eq!(&got, &want);
            for n in 0..bytes.len() {
                prop_assert!(FenceIndex::decode(&bytes[..n], u64::MAX).is_err(), "prefix of {} bytes decoded", n);
            }
            // Seeks (integer prefixes first, whole keys on ties) agree with a linear scan.
            for (t, seq) in targets {
                let target = crate::key::seek_key(&t, seq);
                let first = want.iter().position(|(k, _)| compare_internal(k, &target) != Ordering::Less);
                prop_assert_eq!(ix.seek(&target), first.unwrap_or(ix.len()));
            }
        }
    }

    fn h(offset: u64, size: u64) -> BlockHandle {
        BlockHandle { offset, size }
    }

    #[test]
    fn seek_finds_the_first_fence_at_or_after_the_target() {
        let mut b = IndexBuilder::new();
        b.add(b"b", None, h(0, 10));
        b.add(b"d", Some(crate::key::pack_trailer(7, ValueKind::Put)), h(15, 10));
        b.add(b"d", None, h(30, 10));
        let ix = FenceIndex::decode(&b.finish(), u64::MAX).expect("decodes");
        assert_eq!(ix.len(), 3);
        let at = |k: &[u8], seq| ix.seek(&crate::key::seek_key(k, seq));
        assert_eq!(at(b"a", 9), 0);
        assert_eq!(at(b"b", 0), 0, "the implicit fence is after every version of b");
        assert_eq!(at(b"c", 9), 1);
        assert_eq!(at(b"d", 9), 1, "d@9 is before the explicit fence d@7");
        assert_eq!(at(b"d", 7), 1);
        assert_eq!(at(b"d", 6), 2);
        assert_eq!(at(b"e", 9), 3);
        assert_eq!(ix.handle(1), Some(h(15, 10)));
        assert_eq!(ix.handle(3), None);
        assert_eq!(ix.key(3), b"");
    }

    #[test]
    fn decode_rejects_disorder_bad_kinds_and_trailing_bytes() {
        let mut b = IndexBuilder::new();
        b.add(b"b", None, h(0, 10));
        b.add(b"a", None, h(15, 10));
        assert_eq!(
            FenceIndex::decode(&b.finish(), u64::MAX).map_err(|e| e.reason),
            Err("fence keys out of order")
        );

        let mut b = IndexBuilder::new();
        b.add(b"b", Some((9 << 8) | 0x7f), h(0, 10));
        assert_eq!(
            FenceIndex::decode(&b.finish(), u64::MAX).map_err(|e| e.reason),
            Err("fence is not an internal key")
        );

        let mut b = IndexBuilder::new();
        b.add(b"b", None, h(0, 10));
        let mut bytes = b.finish();
        bytes.push(0);
        assert_eq!(
            FenceIndex::decode(&bytes, u64::MAX).map_err(|e| e.reason),
            Err("trailing bytes after the index")
        );

        // A count far beyond the bytes present fails without a huge allocation.
        let mut huge = Vec::new();
        put_varint(&mut huge, u64::MAX);
        put_varint(&mut huge, 0);
        assert!(FenceIndex::decode(&huge, u64::MAX).is_err());
        // An offset near the top of the range cannot overflow.
        let mut b = IndexBuilder::new();
        b.add(b"a", None, h(u64::MAX - 3, 1));
        b.add(b"b", None, h(0, 1));
        assert_eq!(
            FenceIndex::decode(&b.finish(), u64::MAX).map_err(|e| e.reason),
            Err("block handle overflows")
        );
    }

    #[test]
    fn fences_repeating_a_long_prefix_stop_at_the_key_budget() {
        // Each entry after the first costs 13 bytes but decodes to a 4 KiB fence.
        let long = vec![b'k'; 4096];
        let mut b = IndexBuilder::new();
        for i in 0..200u64 {
            b.add(
                &long,
                Some(crate::key::pack_trailer(1000 - i, ValueKind::Put)),
                h(i * 6, 1),
            );
        }
        let bytes = b.finish();
        assert!(bytes.len() < 4096 + 200 * 16);
        let all = FenceIndex::decode(&bytes, u64::MAX).expect("decodes");
        assert_eq!(all.len(), 200);
        let budget = 50 * (4096 + 8);
        assert_eq!(
            FenceIndex::decode(&bytes, budget).map_err(|e| e.reason),
            Err("fences longer than the table's keys")
        );
        assert_eq!(FenceIndex::decode(&bytes, 200 * (4096 + 8)).map(|ix| ix.len()), Ok(200));
    }

    #[test]
    fn fence_value_roundtrip_and_rejects() {
        let v = FenceValue {
            handle: BlockHandle {
                offset: 4096,
                size: 4000,
            },
            min_seq: 5,
            max_seq: 1 << 40,
            entries: 77,
        };
        assert_eq!(FenceValue::decode(&v.encode()), Ok(v));
        let mut trailing = v.encode();
        trailing.push(0);
        assert!(FenceValue::decode(&trailing).is_err());
        let inverted = FenceValue {
            min_seq: 9,
            max_seq: 8,
            ..v
        };
        assert!(FenceValue::decode(&inverted.encode()).is_err());
        assert!(FenceValue::decode(&v.encode()[..3]).is_err());
    }
}
