//! Write batches: a group of writes, possibly across keyspaces, applied atomically.
//!
//! The encoded form is what the WAL stores: `[seq u64 LE][count u32 LE]` followed by
//! `count` operations, each `tag u8, keyspace varint, key bytes, value-or-end bytes`.
//! Operations normally take consecutive seqnos; an operation whose tag has the high bit
//! ([`SHARES_SEQ`]) set takes the seqno of the one before it, so that one table row
//! version is written to its primary and secondary keyspaces under a single seqno.

use crate::codec::{Decoder, put_bytes, put_u32, put_u64, put_varint};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::{MAX_BATCH_SIZE, MAX_KEY_SIZE, MAX_VALUE_SIZE};

const TAG_DELETE: u8 = 0;
const TAG_PUT: u8 = 1;
const TAG_DEFERRED_DELETE: u8 = 2;
const TAG_RANGE_DELETE: u8 = 3;
const TAG_DELETE_WHERE: u8 = 4;
/// Tag bit: this operation shares the previous operation's seqno.
pub const SHARES_SEQ: u8 = 0x80;

/// One decoded operation of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// Keyspace id.
        keyspace: u32,
        /// User key.
        key: &'a [u8],
        /// Value.
        value: &'a [u8],
    },
    /// Delete `key`.
    Delete {
        /// Keyspace id.
        keyspace: u32,
        /// User key.
        key: &'a [u8],
    },
    /// Delete the version of `key` written at `seq` (deferred secondary delete).
    DeferredDelete {
        /// Keyspace id.
        keyspace: u32,
        /// User key.
        key: &'a [u8],
        /// The version it removes.
        seq: SeqNo,
    },
    /// Delete every key in `[start, end)`.
    DeleteRange {
        /// Keyspace id.
        keyspace: u32,
        /// Inclusive start.
        start: &'a [u8],
        /// Exclusive end.
        end: &'a [u8],
    },
    /// Delete every version older than this operation whose delete key lies in
    /// `[lo, hi)` (a secondary range delete, `crate::delete_key`).
    DeleteWhere {
        /// Keyspace id.
        keyspace: u32,
        /// Inclusive lower bound of the delete key.
        lo: &'a [u8],
        /// Exclusive upper bound of the delete key.
        hi: &'a [u8],
    },
}

impl BatchOp<'_> {
    /// The keyspace the operation writes to.
    pub fn keyspace(&self) -> u32 {
        match *self {
            BatchOp::Put { keyspace, .. }
            | BatchOp::Delete { keyspace, .. }
            | BatchOp::DeferredDelete { keyspace, .. }
            | BatchOp::DeleteRange { keyspace, .. }
            | BatchOp::DeleteWhere { keyspace, .. } => keyspace,
        }
    }
}

/// An atomic group of writes.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
/// let users = db.create_keyspace("users").unwrap();
/// let mut batch = strata::WriteBatch::new();
/// batch.put(&users, b"alice", b"1");
/// batch.delete(&db.default_keyspace(), b"stale");
/// db.write(batch).unwrap();
/// assert_eq!(users.get(b"alice").unwrap().as_deref(), Some(&b"1"[..]));
/// ```
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    seqs: u32,
    share_next: bool,
    error: Option<String>,
}

/// Something that names a keyspace inside a batch.
pub trait KeyspaceId {
    /// The keyspace's id.
    fn keyspace_id(&self) -> u32;
}

impl KeyspaceId for u32 {
    fn keyspace_id(&self) -> u32 {
        *self
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when it holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of seqnos the batch consumes (operations not sharing a seqno).
    pub fn seq_count(&self) -> u64 {
        u64::from(self.seqs)
    }

    /// The next operation added takes the seqno of the previous one (no effect on an
    /// empty batch). Used to write one row version to several keyspaces. Puts and
    /// deletes sharing a seqno must name different keys (or keyspaces): a write
    /// refuses the batch otherwise.
    pub fn share_seq(&mut self) {
        self.share_next = self.count > 0;
    }

    fn tag(&mut self, tag: u8) {
        if std::mem::take(&mut self.share_next) {
            self.rep.push(tag | SHARES_SEQ);
        } else {
            self.rep.push(tag);
            self.seqs += 1;
        }
        self.count += 1;
    }

    /// Encoded size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.rep.len()
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
        self.seqs = 0;
        self.share_next = false;
        self.error = None;
    }

    fn check(&mut self, what: &str, len: usize, max: usize) {
        if len > max && self.error.is_none() {
            self.error = Some(format!("{what} of {len} bytes exceeds the limit of {max} bytes"));
        }
    }

    /// Sets `key` to `value` in keyspace `ks`.
    pub fn put(&mut self, ks: &impl KeyspaceId, key: &[u8], value: &[u8]) {
        self.check("key", key.len(), MAX_KEY_SIZE);
        self.check("value", value.len(), MAX_VALUE_SIZE);
        self.tag(TAG_PUT);
        put_varint(&mut self.rep, u64::from(ks.keyspace_id()));
        put_bytes(&mut self.rep, key);
        put_bytes(&mut self.rep, value);
    }

    /// Deletes `key` in keyspace `ks`.
    pub fn delete(&mut self, ks: &impl KeyspaceId, key: &[u8]) {
        self.check("key", key.len(), MAX_KEY_SIZE);
        self.tag(TAG_DELETE);
        put_varint(&mut self.rep, u64::from(ks.keyspace_id()));
        put_bytes(&mut self.rep, key);
    }

    /// Deletes every key in `[start, end)` of keyspace `ks`. An empty range is an error
    /// reported by `Db::write`.
    pub fn delete_range(&mut self, ks: &impl KeyspaceId, start: &[u8], end: &[u8]) {
        self.check("range start", start.len(), MAX_KEY_SIZE);
        self.check("range end", end.len(), MAX_KEY_SIZE);
        if start >= end && self.error.is_none() {
            self.error = Some("delete_range needs start < end (the range is empty)".into());
        }
        self.tag(TAG_RANGE_DELETE);
        put_varint(&mut self.rep, u64::from(ks.keyspace_id()));
        put_bytes(&mut self.rep, start);
        put_bytes(&mut self.rep, end);
    }

    /// Deletes every version in keyspace `ks` whose delete key lies in `[lo, hi)` (a
    /// secondary range delete; the keyspace must declare a delete key, which
    /// `Db::write` checks with the bounds' width).
    pub fn delete_where(&mut self, ks: &impl KeyspaceId, lo: &[u8], hi: &[u8]) {
        if lo >= hi && self.error.is_none() {
            self.error = Some("delete_where needs lo < hi (the range is empty)".into());
        }
        self.check("delete key bound", lo.len().max(hi.len()), MAX_KEY_SIZE);
        self.tag(TAG_DELETE_WHERE);
        put_varint(&mut self.rep, u64::from(ks.keyspace_id()));
        put_bytes(&mut self.rep, lo);
        put_bytes(&mut self.rep, hi);
    }

    /// Removes exactly the version of `key` written at `seq` (used by the table layer's
    /// deferred index maintenance).
    pub fn deferred_delete(&mut self, ks: &impl KeyspaceId, key: &[u8], seq: SeqNo) {
        self.check("key", key.len(), MAX_KEY_SIZE);
        self.tag(TAG_DEFERRED_DELETE);
        put_varint(&mut self.rep, u64::from(ks.keyspace_id()));
        put_bytes(&mut self.rep, key);
        put_varint(&mut self.rep, seq);
    }

    /// Appends every operation of `other`.
    pub fn append(&mut self, other: &WriteBatch) {
        if self.count == 0 && other.count > 0 && other.rep.first().is_some_and(|t| t & SHARES_SEQ != 0) {
            // Cannot happen through the public API: a batch never starts sharing.
            self.error
                .get_or_insert_with(|| "appended batch starts with a shared seqno".into());
        }
        self.rep.extend_from_slice(&other.rep);
        self.count += other.count;
        self.seqs += other.seqs;
        self.share_next = false;
        if self.error.is_none() {
            self.error.clone_from(&other.error);
        }
    }

    /// The first invalid argument recorded while building, if any.
    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(Error::InvalidArgument(e.clone()));
        }
        if self.rep.len() > MAX_BATCH_SIZE {
            return Err(Error::InvalidArgument(format!(
                "batch of {} bytes exceeds the limit of {MAX_BATCH_SIZE} bytes",
                self.rep.len()
            )));
        }
        Ok(())
    }

    /// Decoded operations, in order.
    pub fn ops(&self) -> impl Iterator<Item = std::result::Result<BatchOp<'_>, String>> {
        self.ops_with_seq(1).map(|r| r.map(|(_, op)| op))
    }

    /// Decoded operations with the seqno each gets when the batch starts at `base`.
    pub fn ops_with_seq(&self, base: SeqNo) -> BatchIter<'_> {
        BatchIter {
            d: Decoder::new(&self.rep),
            left: self.count,
            next_seq: base,
            first: true,
        }
    }

    /// The WAL payload for this batch at base seqno `seq`.
    pub(crate) fn encode_record(&self, seq: SeqNo, out: &mut Vec<u8>) {
        out.reserve(12 + self.rep.len());
        put_u64(out, seq);
        put_u32(out, self.count);
        out.extend_from_slice(&self.rep);
    }

    /// Decodes a WAL payload into (base seqno, batch).
    pub(crate) fn decode_record(payload: &[u8]) -> std::result::Result<(SeqNo, WriteBatch), String> {
        let mut d = Decoder::new(payload);
        let seq = d.u64().map_err(|e| e.reason.to_string())?;
        let count = d.u32().map_err(|e| e.reason.to_string())?;
        let rep = payload[d.position()..].to_vec();
        let mut batch = WriteBatch {
            rep,
            count,
            seqs: 0,
            share_next: false,
            error: None,
        };
        // Validate the whole body now so replay never meets a half-decodable batch.
        let mut n = 0u32;
        let mut last = 0;
        for op in batch.ops_with_seq(1) {
            last = op?.0;
            n += 1;
        }
        if n != count {
            return Err(format!("batch says {count} ops but holds {n}"));
        }
        batch.seqs = last as u32;
        // Seqnos start at 1 and fit in the 56 bits a key's trailer keeps; replay adds
        // the count to the base.
        if seq == 0
            || seq
                .checked_add(batch.seq_count())
                .is_none_or(|end| end - 1 > crate::key::MAX_SEQNO)
        {
            return Err(format!(
                "seqnos {seq} and on (for {} operations) are outside 1..={}",
                batch.seq_count(),
                crate::key::MAX_SEQNO
            ));
        }
        Ok((seq, batch))
    }
}

/// Iterator over a batch's operations.
pub struct BatchIter<'a> {
    d: Decoder<'a>,
    left: u32,
    next_seq: SeqNo,
    first: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<(SeqNo, BatchOp<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if !self.d.is_empty() {
                self.d = Decoder::new(&[]);
                return Some(Err("trailing bytes after the last batch operation".into()));
            }
            return None;
        }
        self.left -= 1;
        let r = (|| {
            let raw = self.d.u8()?;
            let shares = raw & SHARES_SEQ != 0;
            if shares && self.first {
                return Err(crate::codec::DecodeError {
                    offset: self.d.position(),
                    reason: "first batch operation cannot share a seqno",
                });
            }
            if !shares && !self.first {
                self.next_seq += 1;
            }
            self.first = false;
            let tag = raw & !SHARES_SEQ;
            let keyspace = u32::try_from(self.d.varint()?).map_err(|_| crate::codec::DecodeError {
                offset: self.d.position(),
                reason: "keyspace id out of range",
            })?;
            let key = self.d.length_prefixed()?;
            Ok(match tag {
                TAG_PUT => BatchOp::Put {
                    keyspace,
                    key,
                    value: self.d.length_prefixed()?,
                },
                TAG_DELETE => BatchOp::Delete { keyspace, key },
                TAG_DEFERRED_DELETE => BatchOp::DeferredDelete {
                    keyspace,
                    key,
                    seq: self.d.varint()?,
                },
                TAG_RANGE_DELETE => BatchOp::DeleteRange {
                    keyspace,
                    start: key,
                    end: self.d.length_prefixed()?,
                },
                TAG_DELETE_WHERE => BatchOp::DeleteWhere {
                    keyspace,
                    lo: key,
                    hi: self.d.length_prefixed()?,
                },
                _ => {
                    return Err(crate::codec::DecodeError {
                        offset: self.d.position(),
                        reason: "unknown batch operation tag",
                    });
                }
            })
        })();
        match r {
            Ok(op) => Some(Ok((self.next_seq, op))),
            Err(e) => {
                self.left = 0;
                self.d = Decoder::new(&[]);
                Some(Err(format!("{} at batch offset {}", e.reason, e.offset)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_roundtrip() {
        let mut b = WriteBatch::new();
        b.put(&1u32, b"k", b"v");
        b.delete(&2u32, b"d");
        b.delete_range(&3u32, b"a", b"z");
        b.deferred_delete(&4u32, b"s", 77);
        let mut rec = Vec::new();
        b.encode_record(42, &mut rec);
        let (seq, back) = WriteBatch::decode_record(&rec).expect("decodes");
        assert_eq!(seq, 42);
        let ops: Vec<_> = back.ops().collect::<std::result::Result<_, _>>().expect("ops");
        assert_eq!(ops.len(), 4);
        assert_eq!(
            ops[3],
            BatchOp::DeferredDelete {
                keyspace: 4,
                key: b"s",
                seq: 77
            }
        );
        assert!(WriteBatch::decode_record(&rec[..rec.len() - 1]).is_err());
        assert_eq!(back.seq_count(), 4);
    }

    /// A record's seqnos must fit a key's trailer: replay adds the count to the base,
    /// and a checksum-valid record with a base near the top would wrap or be cut.
    #[test]
    fn records_with_seqnos_out_of_range_are_refused() {
        let mut b = WriteBatch::new();
        b.put(&1u32, b"a", b"1");
        b.put(&1u32, b"b", b"2");
        let decode = |base: SeqNo| {
            let mut rec = Vec::new();
            b.encode_record(base, &mut rec);
            WriteBatch::decode_record(&rec).map(|(s, _)| s)
        };
        assert_eq!(decode(1), Ok(1));
        assert_eq!(decode(crate::key::MAX_SEQNO - 1), Ok(crate::key::MAX_SEQNO - 1));
        for base in [
            0,
            crate::key::MAX_SEQNO,
            crate::key::MAX_SEQNO + 1,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let e = decode(base).expect_err("out of range");
            assert!(e.contains("outside"), "{base}: {e}");
        }
        // An empty batch (an ingest's seqno) takes one seqno's place, and none past it.
        let mut rec = Vec::new();
        WriteBatch::new().encode_record(crate::key::MAX_SEQNO, &mut rec);
        assert!(WriteBatch::decode_record(&rec).is_ok());
    }

    #[test]
    fn shared_seqnos() {
        let mut b = WriteBatch::new();
        b.put(&1u32, b"pk", b"row");
        b.share_seq();
        b.put(&2u32, b"sk", b"");
        b.delete(&1u32, b"other");
        assert_eq!(b.seq_count(), 2);
        let seqs: Vec<SeqNo> = b.ops_with_seq(10).map(|r| r.expect("op").0).collect();
        assert_eq!(seqs, vec![10, 10, 11]);
        let mut rec = Vec::new();
        b.encode_record(10, &mut rec);
        let (_, back) = WriteBatch::decode_record(&rec).expect("decodes");
        assert_eq!(back.seq_count(), 2);
    }

    #[test]
    fn limits_are_reported() {
        let mut b = WriteBatch::new();
        b.put(&0u32, &vec![0u8; MAX_KEY_SIZE + 1], b"");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
        let mut b = WriteBatch::new();
        b.delete_range(&0u32, b"b", b"a");
        assert!(b.validate().is_err());
    }
}
