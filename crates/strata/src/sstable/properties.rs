//! SSTable properties: counts, key and seqno bounds, and sizes, stored in their own block.
//!
//! Encoding (all varints unless noted): `version (1) ++ entries ++ puts ++ deletes ++
//! deferred_deletes ++ range_deletes ++ smallest_user_key (length-prefixed) ++
//! largest_user_key (length-prefixed) ++ min_seq ++ max_seq ++ has_oldest_tombstone_time
//! (u8 0/1) [++ oldest_tombstone_time] ++ raw_key_bytes ++ raw_value_bytes ++ data_blocks
//! ++ index_size ++ filter_size ++ created_at`. Decoding rejects trailing bytes and
//! counts that do not add up.

use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::key::SeqNo;

const PROPERTIES_VERSION: u64 = 1;

/// What a table holds, computed by the builder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Properties {
    /// Point entries of every kind (`puts + deletes + deferred_deletes`).
    pub entries: u64,
    /// `Put` entries.
    pub puts: u64,
    /// Point `Delete` entries.
    pub deletes: u64,
    /// `DeferredDelete` entries.
    pub deferred_deletes: u64,
    /// Range tombstones.
    pub range_deletes: u64,
    /// Smallest user key, including range-tombstone starts (empty for an empty table).
    pub smallest_user_key: Vec<u8>,
    /// Largest user key, including range-tombstone ends (exclusive ends, so this bound
    /// is conservative).
    pub largest_user_key: Vec<u8>,
    /// Smallest seqno of any entry or range tombstone (0 for an empty table).
    pub min_seq: SeqNo,
    /// Largest seqno of any entry or range tombstone.
    pub max_seq: SeqNo,
    /// Caller-supplied time of the oldest tombstone, if the table holds tombstones and
    /// the writer noted a time.
    pub oldest_tombstone_time: Option<u64>,
    /// Sum of the internal keys' lengths (user key + 8-byte trailer).
    pub raw_key_bytes: u64,
    /// Sum of the values' lengths.
    pub raw_value_bytes: u64,
    /// Number of data blocks.
    pub data_blocks: u64,
    /// Stored size of the index block, trailer excluded.
    pub index_size: u64,
    /// Stored size of the filter block, trailer excluded (0: no filter).
    pub filter_size: u64,
    /// Caller-supplied creation time.
    pub created_at: u64,
}

impl Properties {
    /// Point deletes + deferred deletes + range tombstones.
    pub fn tombstones(&self) -> u64 {
        self.deletes + self.deferred_deletes + self.range_deletes
    }

    /// True when the table holds no entry and no range tombstone.
    pub fn is_empty(&self) -> bool {
        self.entries == 0 && self.range_deletes == 0
    }

    /// Encodes as described in the module docs.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.smallest_user_key.len() + self.largest_user_key.len());
        put_varint(&mut out, PROPERTIES_VERSION);
        for v in [
            self.entries,
            self.puts,
            self.deletes,
            self.deferred_deletes,
            self.range_deletes,
        ] {
            put_varint(&mut out, v);
        }
        put_bytes(&mut out, &self.smallest_user_key);
        put_bytes(&mut out, &self.largest_user_key);
        put_varint(&mut out, self.min_seq);
        put_varint(&mut out, self.max_seq);
        match self.oldest_tombstone_time {
            Some(t) => {
                out.push(1);
                put_varint(&mut out, t);
            }
            None => out.push(0),
        }
        for v in [
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_blocks,
            self.index_size,
            self.filter_size,
            self.created_at,
        ] {
            put_varint(&mut out, v);
        }
        out
    }

    /// Decodes and sanity-checks encoded properties. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<Properties, DecodeError> {
        let err = |offset, reason| Err(DecodeError { offset, reason });
        let mut d = Decoder::new(bytes);
        if d.varint()? != PROPERTIES_VERSION {
            return err(0, "unknown properties version");
        }
        let mut p = Properties {
            entries: d.varint()?,
            puts: d.varint()?,
            deletes: d.varint()?,
            deferred_deletes: d.varint()?,
            range_deletes: d.varint()?,
            smallest_user_key: d.length_prefixed()?.to_vec(),
            largest_user_key: d.length_prefixed()?.to_vec(),
            min_seq: d.varint()?,
            max_seq: d.varint()?,
            ..Properties::default()
        };
        let flag_at = d.position();
        p.oldest_tombstone_time = match d.u8()? {
            0 => None,
            1 => Some(d.varint()?),
            _ => return err(flag_at, "bad oldest-tombstone-time flag"),
        };
        p.raw_key_bytes = d.varint()?;
        p.raw_value_bytes = d.varint()?;
        p.data_blocks = d.varint()?;
        p.index_size = d.varint()?;
        p.filter_size = d.varint()?;
        p.created_at = d.varint()?;
        if !d.is_empty() {
            return err(d.position(), "trailing bytes after properties");
        }
        let kinds = p
            .puts
            .checked_add(p.deletes)
            .and_then(|s| s.checked_add(p.deferred_deletes));
        if kinds != Some(p.entries) {
            return err(0, "entry counts by kind do not add up");
        }
        if p.entries.checked_add(p.range_deletes).is_none() {
            return err(0, "entry and range tombstone counts overflow");
        }
        if !p.is_empty() && (p.min_seq > p.max_seq || p.smallest_user_key > p.largest_user_key) {
            return err(0, "inverted key or seqno bounds");
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Properties {
        Properties {
            entries: 10,
            puts: 6,
            deletes: 3,
            deferred_deletes: 1,
            range_deletes: 2,
            smallest_user_key: b"a".to_vec(),
            largest_user_key: b"zz".to_vec(),
            min_seq: 3,
            max_seq: 99,
            oldest_tombstone_time: Some(12345),
            raw_key_bytes: 100,
            raw_value_bytes: 1000,
            data_blocks: 2,
            index_size: 50,
            filter_size: 70,
            created_at: 777,
        }
    }

    #[test]
    fn counts_whose_sum_overflows_are_rejected() {
        // Found by the sst_properties fuzz target: `tombstones()` overflowed.
        let mut p = sample();
        p.puts = u64::MAX - 4;
        p.entries = u64::MAX;
        assert!(Properties::decode(&p.encode()).is_err());
    }

    #[test]
    fn roundtrip_and_checks() {
        let p = sample();
        assert_eq!(Properties::decode(&p.encode()), Ok(p.clone()));
        let none = Properties {
            oldest_tombstone_time: None,
            ..p.clone()
        };
        assert_eq!(Properties::decode(&none.encode()), Ok(none));
        assert_eq!(
            Properties::decode(&Properties::default().encode()),
            Ok(Properties::default())
        );
        let bad = Properties { puts: 7, ..p.clone() };
        assert!(Properties::decode(&bad.encode()).is_err());
        let mut trailing = p.encode();
        trailing.push(0);
        assert!(Properties::decode(&trailing).is_err());
        assert_eq!(p.tombstones(), 6);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = Properties::decode(&bytes);
        }

        #[test]
        fn mutated_encodings_never_panic(at: usize, x in 1u8..) {
            let mut b = sample().encode();
            let i = at % b.len();
            b[i] ^= x;
            let _ = Properties::decode(&b);
        }
    }
}
