//! Keys and values shared by the tests of keyspaces with a delete key: the delete key
//! is a value's first 4 bytes, big-endian.

#![allow(dead_code)]

/// The `i`-th sort key.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value whose delete key (its first 4 bytes, big-endian) is `dk`.
pub fn value(dk: u32, tag: u32) -> Vec<u8> {
    let mut v = dk.to_be_bytes().to_vec();
    v.extend_from_slice(format!(":{tag}:").as_bytes());
    v.resize(40, b'.');
    v
}

/// The delete key of a value written by [`value`].
pub fn dk_of(v: &[u8]) -> u32 {
    u32::from_be_bytes([v[0], v[1], v[2], v[3]])
}
