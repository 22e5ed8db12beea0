//! Fence pointers: the index block's entries, one per data block.
//!
//! The index block uses the ordinary block format (so seeks binary-search its restart
//! points). Entry key = the data block's last internal key; value = `varint offset ++
//! varint size ++ varint min_seq ++ varint max_seq ++ varint entries`. Because the key is
//! the block's *last* key, the first fence whose key is `>= target` names the only block
//! that can hold the first entry `>= target`.

use super::format::BlockHandle;
use crate::codec::{DecodeError, Decoder, put_varint};
use crate::key::SeqNo;

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
    /// The block's last internal key.
    pub last_key: Vec<u8>,
    /// Location, seqno range and entry count.
    pub value: FenceValue,
}

#[cfg(test)]
mod tests {
    use super::*;

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
