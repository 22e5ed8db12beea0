//! Fence pointers: the index block's entries, one per data block.
//!
//! The index block uses the ordinary block format (so seeks binary-search its restart
//! points). Entry key = the *fence key* `f` of the data block: `last <= f < next`, where
//! `last` is the block's last internal key and `next` the next block's first (see
//! [`fence_key`]); value = `varint offset ++ varint size ++ varint min_seq ++ varint
//! max_seq ++ varint entries`. The first fence whose key is `>= target` therefore names
//! the block that holds the first entry `>= target`, or, when that block's entries are
//! all smaller, the block just before the one that does (a reader then moves on).

use super::format::BlockHandle;
use crate::codec::{DecodeError, Decoder, put_varint};
use crate::key::{MAX_SEQNO, SeqNo, TRAILER_LEN, ValueKind, internal_key, user_key};

/// The fence key between a block ending at internal key `last` and the next block,
/// starting at `next` (`last < next`): a user key strictly between theirs, as short as
/// one byte past their common prefix allows, at the newest version so it sorts before
/// every real entry of that user key. `None` keeps `last` itself: when the two user keys
/// are equal or one is a prefix of the other, or nothing shorter exists.
///
/// Short fences are what RocksDB's `FindShortestSeparator` buys: for random 16-byte keys
/// an index entry shrinks from the 24-byte last key to about 12 bytes.
pub fn fence_key(last: &[u8], next: &[u8]) -> Option<Vec<u8>> {
    let (a, b) = (user_key(last), user_key(next));
    let p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    // a < b with both longer than p, so a[p] < b[p].
    let (&ap, &bp) = (a.get(p)?, b.get(p)?);
    let end = if ap.checked_add(1).is_some_and(|c| c < bp) {
        p
    } else {
        // Keep a[p] (still below b there) and raise the first later byte that can grow.
        (p + 1..a.len()).find(|&j| a[j] < u8::MAX)?
    };
    if end + 1 + TRAILER_LEN >= last.len() {
        return None;
    }
    let mut s = a[..=end].to_vec();
    s[end] += 1;
    Some(internal_key(&s, MAX_SEQNO, ValueKind::DeferredDelete))
}

/// What the index knows about one data block.
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
    /// Encodes the index entry value.
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
        if !d.is_empty() {
            return Err(DecodeError {
                offset: d.position(),
                reason: "trailing bytes in fence pointer",
            });
        }
        if v.min_seq > v.max_seq {
            return Err(DecodeError {
                offset: 0,
                reason: "fence pointer seqno bounds inverted",
            });
        }
        Ok(v)
    }
}

/// A decoded index entry, for tools (`dump-sst`) and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencePointer {
    /// The block's fence key: at or after its last internal key, before the next
    /// block's first (see [`fence_key`]).
    pub key: Vec<u8>,
    /// Location, seqno range and entry count.
    pub value: FenceValue,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::compare_internal;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    proptest! {
        #[test]
        fn fence_keys_lie_between_the_blocks_and_are_shorter(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(254), Just(255)], 0..6),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(254), Just(255)], 0..6),
            (sa, sb) in (0u64..5, 0u64..5),
        ) {
            let (last, next) = (internal_key(&a, sa, ValueKind::Put), internal_key(&b, sb, ValueKind::Delete));
            prop_assume!(compare_internal(&last, &next) == Ordering::Less);
            if let Some(f) = fence_key(&last, &next) {
                prop_assert!(crate::key::parse_internal_key(&f).is_some());
                prop_assert_eq!(compare_internal(&last, &f), Ordering::Less);
                prop_assert_eq!(compare_internal(&f, &next), Ordering::Less);
                prop_assert!(f.len() < last.len());
            } else {
                // A user key one byte past the common prefix, when it fits, is shorter.
                let p = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let one_byte_fits = p + 1 < a.len() && p < b.len() && u16::from(a[p]) + 1 < u16::from(b[p]);
                prop_assert!(!one_byte_fits, "{:?} | {:?} kept the last key", a, b);
            }
        }
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
