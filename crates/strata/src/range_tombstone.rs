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

/// Range tombstones visible at one snapshot, fragmented into disjoint pieces so that
/// "which tombstone covers this key" is a binary search.
#[derive(Debug, Clone, Default)]
pub struct RangeDelIndex {
    /// Disjoint `[start, end)` fragments in order, each with the highest covering seqno.
    frags: Vec<(Vec<u8>, Vec<u8>, SeqNo)>,
}

impl RangeDelIndex {
    /// Builds the index from tombstones, keeping only those visible at `snapshot`.
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone>, snapshot: SeqNo) -> Self {
        let ts: Vec<RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| t.seq <= snapshot && t.start < t.end)
            .collect();
        if ts.is_empty() {
            return RangeDelIndex::default();
        }
        let mut bounds: Vec<&[u8]> = ts.iter().flat_map(|t| [t.start.as_slice(), t.end.as_slice()]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        // One sweep over the bounds: at each, the tombstones with `start <= lo < end`
        // cover the fragment `[lo, hi)` (`hi` being the next bound, at most any `end`
        // above `lo`). O(n log n), where testing every tombstone per fragment was n^2.
        let mut starts: Vec<(&[u8], SeqNo)> = ts.iter().map(|t| (t.start.as_slice(), t.seq)).collect();
        let mut ends: Vec<(&[u8], SeqNo)> = ts.iter().map(|t| (t.end.as_slice(), t.seq)).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        let (mut si, mut ei) = (0, 0);
        let mut active: std::collections::BTreeMap<SeqNo, usize> = Default::default();
        let mut frags = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while let Some(&(k, seq)) = starts.get(si)
                && k <= lo
            {
                *active.entry(seq).or_default() += 1;
                si += 1;
            }
            while let Some(&(k, seq)) = ends.get(ei)
                && k <= lo
            {
                if let std::collections::btree_map::Entry::Occupied(mut e) = active.entry(seq) {
                    *e.get_mut() -= 1;
                    if *e.get() == 0 {
                        e.remove();
                    }
                }
                ei += 1;
            }
            if let Some((&seq, _)) = active.last_key_value() {
                frags.push((lo.to_vec(), hi.to_vec(), seq));
            }
        }
        RangeDelIndex { frags }
    }

    /// True when there are no tombstones.
    pub fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The highest seqno of a tombstone covering `key`, if any.
    pub fn covering_seq(&self, key: &[u8]) -> Option<SeqNo> {
        let i = self.frags.partition_point(|f| f.1.as_slice() <= key);
        self.frags.get(i).filter(|f| f.0.as_slice() <= key).map(|f| f.2)
    }

    /// True when the version `(key, seq)` is deleted by a tombstone.
    pub fn deletes(&self, key: &[u8], seq: SeqNo) -> bool {
        self.covering_seq(key).is_some_and(|s| s > seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, e: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: s.into(),
            end: e.into(),
            seq,
        }
    }

    #[test]
    fn fragments_take_the_highest_seq() {
        let idx = RangeDelIndex::new(vec![t("a", "m", 5), t("f", "z", 9), t("b", "c", 20)], 10);
        assert_eq!(idx.covering_seq(b"a"), Some(5));
        assert_eq!(idx.covering_seq(b"b"), Some(5)); // seq 20 is above the snapshot
        assert_eq!(idx.covering_seq(b"g"), Some(9));
        assert_eq!(idx.covering_seq(b"m"), Some(9));
        assert_eq!(idx.covering_seq(b"z"), None);
        assert_eq!(idx.covering_seq(b"0"), None);
        assert!(idx.deletes(b"g", 8));
        assert!(!idx.deletes(b"g", 9));
    }

    proptest::proptest! {
        /// The fragments answer as the tombstones do: the highest seqno (at or below the
        /// snapshot) of those covering a key.
        #[test]
        fn fragments_match_the_tombstones(
            ts in proptest::collection::vec((0u8..12, 0u8..12, 1u64..20), 0..24),
            snapshot in 1u64..20,
        ) {
            let ts: Vec<RangeTombstone> = ts
                .into_iter()
                .map(|(a, b, seq)| RangeTombstone { start: vec![a], end: vec![b], seq })
                .collect();
            let idx = RangeDelIndex::new(ts.clone(), snapshot);
            for k in 0u8..13 {
                let want = ts
                    .iter()
                    .filter(|t| t.seq <= snapshot && t.contains(&[k]))
                    .map(|t| t.seq)
                    .max();
                proptest::prop_assert_eq!(idx.covering_seq(&[k]), want, "key {}", k);
            }
        }
    }
}
