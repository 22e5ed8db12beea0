//! The range-tombstone block: every `delete_range` the table carries.
//!
//! Encoding: `varint count ++ count × (start (length-prefixed) ++ end (length-prefixed)
//! ++ varint seq)`, sorted by `(start, end, seq)`. Every tombstone has `start < end`.

use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::range_tombstone::RangeTombstone;

/// Encodes tombstones (callers pass them sorted).
pub fn encode_range_dels(ts: &[RangeTombstone]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, ts.len() as u64);
    for t in ts {
        put_bytes(&mut out, &t.start);
        put_bytes(&mut out, &t.end);
        put_varint(&mut out, t.seq);
    }
    out
}

/// Decodes a range-tombstone block. Never panics.
pub fn decode_range_dels(bytes: &[u8]) -> Result<Vec<RangeTombstone>, DecodeError> {
    let mut d = Decoder::new(bytes);
    // Each tombstone takes at least 3 bytes, which bounds the allocation.
    let n = d.varint_len(d.remaining() / 3)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let at = d.position();
        let t = RangeTombstone {
            start: d.length_prefixed()?.to_vec(),
            end: d.length_prefixed()?.to_vec(),
            seq: d.varint()?,
        };
        if t.start >= t.end {
            return Err(DecodeError {
                offset: at,
                reason: "empty range tombstone",
            });
        }
        out.push(t);
    }
    d.finish("trailing bytes after range tombstones")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_and_rejects_empty_range() {
        let ts = vec![
            RangeTombstone {
                start: b"a".to_vec(),
                end: b"c".to_vec(),
                seq: 7,
            },
            RangeTombstone {
                start: b"b".to_vec(),
                end: b"\xff\x00".to_vec(),
                seq: 1 << 50,
            },
        ];
        assert_eq!(decode_range_dels(&encode_range_dels(&ts)), Ok(ts));
        assert_eq!(decode_range_dels(&encode_range_dels(&[])), Ok(vec![]));
        let empty = RangeTombstone {
            start: b"x".to_vec(),
            end: b"x".to_vec(),
            seq: 1,
        };
        assert!(decode_range_dels(&encode_range_dels(&[empty])).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decode_range_dels(&bytes);
        }
    }
}
