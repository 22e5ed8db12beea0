//! The delete key of a keyspace and the secondary range deletes that name it.
//!
//! A keyspace sorted by its key may declare a *delete key*: a big-endian field of the
//! value at a fixed offset and width (a timestamp, a tenant id). Delete tiles
//! ([`crate::sstable::tile`]) partition pages by it, and [`DeleteWhere`] records delete
//! by it ("every row whose delete key lies in `[lo, hi)`").
//!
//! Invariant (DW): a [`DeleteWhere`] at seqno `s` kills exactly the `Put` versions with
//! seqno `< s` whose delete key lies in `[lo, hi)`, for readers whose snapshot is `>= s`.
//! A killed version reads as a point tombstone at its own seqno: it hides the row, and
//! older versions of the key stay hidden behind it, whatever their delete key. Entries
//! without a delete key (tombstones, values too short) are never killed.

use crate::error::{Error, Result};
use crate::key::SeqNo;

/// Widest delete key accepted, in bytes.
pub const MAX_DELETE_KEY_WIDTH: u8 = 16;

/// A delete key: `value[offset .. offset + width]`, compared as bytes (big-endian).
///
/// ```
/// use strata::delete_key::DeleteKey;
/// let dk = DeleteKey::new(2, 4).unwrap();
/// assert_eq!(dk.of(b"ab\x00\x00\x01\x00rest"), Some(&b"\x00\x00\x01\x00"[..]));
/// assert_eq!(dk.of(b"short"), None);
/// assert!(DeleteKey::new(0, 0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeleteKey {
    /// Offset of the field's first byte in the value.
    pub offset: u32,
    /// Width of the field in bytes, 1..=[`MAX_DELETE_KEY_WIDTH`].
    pub width: u8,
}

impl DeleteKey {
    /// A delete key of `width` bytes at `offset`; `width` must be 1..=16.
    pub fn new(offset: u32, width: u8) -> Result<DeleteKey> {
        if width == 0 || width > MAX_DELETE_KEY_WIDTH {
            return Err(Error::InvalidArgument(format!(
                "delete key width {width} is not in 1..={MAX_DELETE_KEY_WIDTH}"
            )));
        }
        Ok(DeleteKey { offset, width })
    }

    /// The delete key of `value`, or `None` when the value is too short to hold it.
    pub fn of<'a>(&self, value: &'a [u8]) -> Option<&'a [u8]> {
        let start = self.offset as usize;
        value.get(start..start.checked_add(self.width as usize)?)
    }
}

/// A secondary range delete: kills the versions older than `seq` whose delete key lies
/// in `[lo, hi)` (invariant DW in the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeleteWhere {
    /// The record's seqno.
    pub seq: SeqNo,
    /// Inclusive lower bound of the delete key.
    pub lo: Vec<u8>,
    /// Exclusive upper bound of the delete key.
    pub hi: Vec<u8>,
}

impl DeleteWhere {
    /// True if the record lies in `[lo, hi)`.
    pub fn covers(&self, dk: &[u8]) -> bool {
        self.lo.as_slice() <= dk && dk < self.hi.as_slice()
    }

    /// True if the closed delete-key range `[min, max]` lies inside `[lo, hi)`.
    pub fn covers_all(&self, min: &[u8], max: &[u8]) -> bool {
        self.lo.as_slice() <= min && max < self.hi.as_slice()
    }

    /// True if the closed range `[min, max]` meets `[lo, hi)`.
    pub fn meets(&self, min: &[u8], max: &[u8]) -> bool {
        self.lo.as_slice() <= max && min < self.hi.as_slice()
    }
}

/// True if a `Put` at `seq` with value `value` is killed by one of `records` for a reader
/// at `snapshot` (invariant DW).
pub fn killed(dk: &DeleteKey, records: &[DeleteWhere], value: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
    let Some(k) = dk.of(value) else {
        return false;
    };
    records.iter().any(|r| r.seq <= snapshot && seq < r.seq && r.covers(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn killed_follows_seqnos_snapshots_and_range() {
        let dk = DeleteKey { offset: 0, width: 2 };
        let rs = [DeleteWhere {
            seq: 10,
            lo: vec![0, 5],
            hi: vec![0, 9],
        }];
        assert!(killed(&dk, &rs, &[0, 5, 1], 9, 10));
        assert!(!killed(&dk, &rs, &[0, 5, 1], 10, 20), "same seqno or newer survives");
        assert!(!killed(&dk, &rs, &[0, 5, 1], 9, 9), "older snapshot still sees it");
        assert!(!killed(&dk, &rs, &[0, 9], 1, 20), "hi is exclusive");
        assert!(!killed(&dk, &rs, &[0], 1, 20), "no delete key, never killed");
        assert!(rs[0].covers_all(&[0, 5], &[0, 8]) && !rs[0].covers_all(&[0, 4], &[0, 8]));
        assert!(rs[0].meets(&[0, 0], &[0, 5]) && !rs[0].meets(&[0, 9], &[1, 0]));
    }
}
