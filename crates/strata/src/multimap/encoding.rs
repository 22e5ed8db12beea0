//! The composite entry key of a multimap: `escaped(key) ++ 0x00 0x01 ++ value`.
//!
//! The key is written with the byte-string encoding of the table key codec
//! (`table::encoding::key`, "str, bytes"): each `0x00` byte becomes `0x00 0xFF`, other
//! bytes are kept, and `0x00 0x01` ends it. That encoding is order-preserving and
//! prefix-free, so:
//!
//! - entries sort by key, then by value bytewise (`memcmp`, shorter first): a key's
//!   values are contiguous and sorted;
//! - the entries of one key are exactly the range `[prefix(key), prefix_end(key))`
//!   where `prefix_end` replaces the final `0x01` by `0x02` (one range tombstone deletes
//!   them all);
//! - decoding is unambiguous: the first `0x00 0x01` ends the key, the rest is the value.
//!
//! The entry's stored value is empty: the value lives in the key, so the SSTable's
//! block prefix compression stores each entry's key bytes once per restart interval.

use crate::codec::DecodeError;
use crate::options::MAX_KEY_SIZE;

/// Largest encoded entry (escaped key + terminator + value): the engine's key limit.
pub const MAX_ENTRY_SIZE: usize = MAX_KEY_SIZE;

/// Appends the escaped `key` and its terminator: the prefix every entry of `key` has.
pub fn put_prefix(out: &mut Vec<u8>, key: &[u8]) {
    out.reserve(key.len() + 2);
    for &c in key {
        if c == 0 {
            out.extend_from_slice(&[0x00, 0xff]);
        } else {
            out.push(c);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// The prefix of every entry of `key`.
pub fn prefix(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_prefix(&mut out, key);
    out
}

/// The first byte string after every entry of `key` (exclusive end of its range).
pub fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut out = prefix(key);
    if let Some(last) = out.last_mut() {
        *last = 0x02;
    }
    out
}

/// The entry for (`key`, `value`).
pub fn encode(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 2 + value.len());
    put_prefix(&mut out, key);
    out.extend_from_slice(value);
    out
}

/// Size of the entry for (`key`, `value`) without building it.
pub fn encoded_len(key: &[u8], value: &[u8]) -> usize {
    key.len() + key.iter().filter(|&&c| c == 0).count() + 2 + value.len()
}

/// Checks a pair against the multimap's limits: a non-empty key and an entry of at
/// most [`MAX_ENTRY_SIZE`] bytes.
pub fn check(key: &[u8], value: &[u8]) -> Result<(), String> {
    if key.is_empty() {
        return Err("multimap key is empty".into());
    }
    let n = encoded_len(key, value);
    if n > MAX_ENTRY_SIZE {
        return Err(format!(
            "multimap entry of {n} bytes (key {} + value {}) exceeds the limit of {MAX_ENTRY_SIZE} bytes",
            key.len(),
            value.len()
        ));
    }
    Ok(())
}

fn err(offset: usize, reason: &'static str) -> DecodeError {
    DecodeError { offset, reason }
}

/// Length of the prefix (escaped key and terminator) at the start of `entry`, or an
/// error with the offset of the bad byte.
pub fn prefix_len(entry: &[u8]) -> Result<usize, DecodeError> {
    let mut i = 0;
    while i < entry.len() {
        if entry[i] == 0 {
            match entry.get(i + 1) {
                Some(0xff) => i += 2,
                Some(0x01) => return Ok(i + 2),
                Some(_) => return Err(err(i + 1, "invalid byte after 0x00 in a multimap key")),
                None => return Err(err(i, "multimap key ends inside an escape")),
            }
        } else {
            i += 1;
        }
    }
    Err(err(entry.len(), "multimap key has no terminator"))
}

/// Splits an entry into (key, value), unescaping the key.
pub fn decode(entry: &[u8]) -> Result<(Vec<u8>, &[u8]), DecodeError> {
    let n = prefix_len(entry)?;
    let mut key = Vec::with_capacity(n - 2);
    let mut i = 0;
    while i < n - 2 {
        key.push(entry[i]);
        // An escaped zero is two bytes (checked by `prefix_len`).
        i += if entry[i] == 0 { 2 } else { 1 };
    }
    if key.is_empty() {
        return Err(err(0, "multimap key is empty"));
    }
    Ok((key, &entry[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_key_then_value() {
        let pairs: Vec<(&[u8], &[u8])> = vec![
            (b"a", b""),
            (b"a", b"\x00"),
            (b"a", b"z"),
            (b"a\x00", b""),
            (b"a\x00\x00", b"a"),
            (b"a\x01", b""),
            (b"ab", b"\x00"),
            (b"b", b""),
        ];
        let enc: Vec<_> = pairs.iter().map(|(k, v)| encode(k, v)).collect();
        for w in enc.windows(2) {
            assert!(w[0] < w[1], "{:?} !< {:?}", w[0], w[1]);
        }
        for ((k, v), e) in pairs.iter().zip(&enc) {
            let (dk, dv) = decode(e).expect("decodes");
            assert_eq!((&dk[..], dv), (*k, *v));
            assert!(e.starts_with(&prefix(k)) && e[..] < prefix_end(k)[..]);
            assert_eq!(encoded_len(k, v), e.len());
        }
        // Another key's entries are outside the range.
        assert!(encode(b"a\x00", b"") >= prefix_end(b"a"));
    }

    #[test]
    fn bad_entries_and_inputs_are_errors() {
        assert!(decode(b"abc").is_err());
        assert!(decode(b"a\x00").is_err());
        assert!(decode(b"a\x00\x05").is_err());
        assert!(decode(b"\x00\x01v").is_err(), "empty key");
        assert!(check(b"", b"v").is_err());
        assert!(check(b"k", &vec![0; MAX_ENTRY_SIZE]).is_err());
        assert!(check(b"k", &vec![0; MAX_ENTRY_SIZE - 3]).is_ok());
    }
}
