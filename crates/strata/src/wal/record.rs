//! Record framing shared by the WAL and the manifest.
//!
//! Layout of one record (all integers little-endian):
//!
//! ```text
//! offset 0   u32  payload length N (at most MAX_PAYLOAD_LEN)
//! offset 4   u32  masked crc32c over (bytes 0..4 ++ payload)
//! offset 8   N bytes of payload
//! ```
//!
//! Records follow each other with no padding. The checksum covers the length bytes, so a
//! damaged length is caught whenever the claimed record still fits in the file. The CRC
//! is masked (LevelDB style) because payloads may themselves embed CRCs, and a CRC over
//! data containing its own CRC is weak. A header of all zeros is never valid (see
//! `zero_header_is_invalid` in the tests), so zero-filled space is recognisable.

use crate::codec::{Decoder, put_u32};

/// Bytes in a record header: payload length + masked checksum.
pub const HEADER_LEN: usize = 8;

/// Largest payload a record may carry (1 GiB); a longer length field is corruption.
pub const MAX_PAYLOAD_LEN: usize = 1 << 30;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC so that CRCs of data containing CRCs stay strong.
#[inline]
fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The stored checksum of a record with these length bytes and payload.
#[inline]
pub(super) fn record_crc(len_bytes: &[u8], payload: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(len_bytes), payload))
}

/// Builds the header for `payload`. The caller has checked `payload.len()` against
/// [`MAX_PAYLOAD_LEN`], so the cast cannot truncate.
pub(super) fn encode_header(payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = Vec::with_capacity(HEADER_LEN);
    put_u32(&mut h, payload.len() as u32);
    let crc = record_crc(&h, payload);
    put_u32(&mut h, crc);
    let mut out = [0u8; HEADER_LEN];
    out.copy_from_slice(&h);
    out
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    /// Payload length as stored (not yet checked against the limit).
    pub len: u32,
    /// Stored masked checksum.
    pub crc: u32,
}

/// Decodes a header from exactly [`HEADER_LEN`] bytes; `None` if `b` is shorter.
pub(super) fn decode_header(b: &[u8]) -> Option<Header> {
    let mut d = Decoder::new(b);
    let len = d.u32().ok()?;
    let crc = d.u32().ok()?;
    Some(Header { len, crc })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_header_is_invalid() {
        // Zero-filled (preallocated) space must never parse as an empty record.
        assert_ne!(record_crc(&[0; 4], &[]), 0);
    }

    #[test]
    fn header_roundtrip_and_crc_covers_length() {
        let h = encode_header(b"hello");
        let d = decode_header(&h).expect("8 bytes");
        assert_eq!(d.len, 5);
        assert_eq!(d.crc, record_crc(&h[..4], b"hello"));
        // Same payload, different length bytes: different checksum.
        assert_ne!(record_crc(&6u32.to_le_bytes(), b"hello"), d.crc);
        assert!(decode_header(&h[..7]).is_none());
    }
}
