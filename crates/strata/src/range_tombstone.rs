//! Range tombstones: `delete_range(start..end)` at a seqno.

use crate::key::SeqNo;

/// Deletes every key in `[start, end)` whose version is older than `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// Inclusive lower bound.
    pub start: Vec<u8>,
    /// Exclusive upper bound.
    pub end: Vec<u8>,
    /// The tombstone's version.
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// True if it covers `key` (ignores seqnos).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// True if it deletes the version `(key, seq)` for a reader at `snapshot`.
    #[inline]
    pub fn deletes(&self, key: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
        self.seq <= snapshot && seq < self.seq && self.contains(key)
    }
}
