//! Internal keys: a user key plus the version trailer that orders its versions.
//!
//! An internal key is `user_key ++ trailer`, where the trailer is 8 bytes big-endian of
//! `seqno << 8 | kind`. Order: user key ascending, then trailer **descending**, so for
//! one user key the newest version comes first, and at an equal seqno a
//! `DeferredDelete` (kind 2) sorts before the `Put` (kind 1) it names.

use std::cmp::Ordering;

/// A global, monotonically increasing version number assigned at commit.
pub type SeqNo = u64;

/// Largest representable sequence number (56 bits).
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// Length of the version trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry says about its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A point tombstone.
    Delete = 0,
    /// A value.
    Put = 1,
    /// Removes exactly the `Put` of the same key and seqno (deferred secondary delete).
    DeferredDelete = 2,
}

impl ValueKind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::DeferredDelete),
            _ => None,
        }
    }

    /// True for the kinds that remove data.
    pub fn is_tombstone(self) -> bool {
        !matches!(self, ValueKind::Put)
    }
}

/// Packs a seqno and kind into a trailer value.
#[inline]
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    (seq << 8) | kind as u64
}

/// Appends `user_key ++ trailer` to `out`.
#[inline]
pub fn encode_internal_key(out: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    out.reserve(user_key.len() + TRAILER_LEN);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&pack_trailer(seq, kind).to_be_bytes());
}

/// Builds an owned internal key.
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    encode_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The smallest internal key for `user_key` visible at `snapshot` (seek target).
pub fn seek_key(user_key: &[u8], snapshot: SeqNo) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    put_seek_key(&mut v, user_key, snapshot);
    v
}

/// [`seek_key`] written into `out` (cleared first), reusing its room.
pub fn put_seek_key(out: &mut Vec<u8>, user_key: &[u8], snapshot: SeqNo) {
    out.clear();
    out.reserve(user_key.len() + TRAILER_LEN);
    out.extend_from_slice(user_key);
    // Kind 0xff sorts before every real kind at the same seqno.
    out.extend_from_slice(&((snapshot << 8) | 0xff).to_be_bytes());
}

/// The largest internal key for `user_key` (sorts after all its versions).
pub fn last_key_of(user_key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    v.extend_from_slice(user_key);
    v.extend_from_slice(&0u64.to_be_bytes());
    v
}

/// A borrowed, decoded internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The version.
    pub seq: SeqNo,
    /// What the entry says.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is too short or has an unknown kind.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let (uk, t) = ikey.split_at_checked(ikey.len().checked_sub(TRAILER_LEN)?)?;
    parse_key_parts(uk, t.try_into().ok()?)
}

/// [`parse_internal_key`] of `user_key ++ trailer`, the trailer's bytes given apart (a
/// block check reads them from the block, not from the key it just rebuilt).
#[inline]
pub fn parse_key_parts(user_key: &[u8], trailer: [u8; TRAILER_LEN]) -> Option<ParsedKey<'_>> {
    let trailer = u64::from_be_bytes(trailer);
    Some(ParsedKey {
        user_key,
        seq: trailer >> 8,
        kind: ValueKind::from_u8((trailer & 0xff) as u8)?,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// The first 8 bytes of a user key, zero-padded, as a big-endian number: ordering by it
/// agrees with ordering the keys (equal prefixes decide nothing), so a sort or search
/// settles most comparisons on one integer.
#[inline]
pub fn user_key_prefix(user_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = user_key.len().min(8);
    b[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(b)
}

/// The packed `seq << 8 | kind` of an internal key (0 if it is too short).
#[inline]
pub(crate) fn trailer(ikey: &[u8]) -> u64 {
    if ikey.len() < TRAILER_LEN {
        return 0;
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&ikey[ikey.len() - TRAILER_LEN..]);
    u64::from_be_bytes(t)
}

/// Compares two encoded internal keys: user key ascending, trailer descending.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_key_asc_seq_desc_deferred_first() {
        let a1 = internal_key(b"a", 5, ValueKind::Put);
        let a2 = internal_key(b"a", 9, ValueKind::Put);
        let b1 = internal_key(b"b", 1, ValueKind::Put);
        let dd = internal_key(b"a", 5, ValueKind::DeferredDelete);
        assert_eq!(compare_internal(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a1, &b1), Ordering::Less);
        assert_eq!(compare_internal(&dd, &a1), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 5), &dd), Ordering::Less);
        assert_eq!(compare_internal(&a1, &last_key_of(b"a")), Ordering::Less);
        // A shorter user key that is a prefix sorts first regardless of trailer bytes.
        assert_eq!(
            compare_internal(
                &internal_key(b"a", 0, ValueKind::Delete),
                &internal_key(b"a\0", 9, ValueKind::Put)
            ),
            Ordering::Less
        );
    }

    #[test]
    fn parse_roundtrip() {
        let k = internal_key(b"hello", 42, ValueKind::DeferredDelete);
        let p = parse_internal_key(&k).expect("valid key");
        assert_eq!(p.user_key, b"hello");
        assert_eq!(p.seq, 42);
        assert_eq!(p.kind, ValueKind::DeferredDelete);
        assert!(parse_internal_key(b"short").is_none());
    }
}
