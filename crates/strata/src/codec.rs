//! Little binary helpers shared by every on-disk format: varints, length-prefixed
//! slices, fixed-width integers, and a bounds-checked [`Decoder`].
//!
//! Decoders never panic on bad input: every read is checked and a failure reports the
//! offset (relative to the slice being decoded) so callers can name file and offset.

/// Appends a LEB128 varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a varint length followed by the bytes.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends a little-endian u32.
#[inline]
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian u64.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Why a [`Decoder`] read failed, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset within the decoded slice.
    pub offset: usize,
    /// What was expected.
    pub reason: &'static str,
}

/// A bounds-checked cursor over a byte slice.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Starts at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Current offset.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Ok when everything was consumed; otherwise an error at the first unread byte.
    pub fn finish(&self, reason: &'static str) -> Result<(), DecodeError> {
        if self.is_empty() { Ok(()) } else { self.err(reason) }
    }

    fn err<T>(&self, reason: &'static str) -> Result<T, DecodeError> {
        Err(DecodeError {
            offset: self.pos,
            reason,
        })
    }

    /// Reads a varint.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return self.err("truncated varint");
            };
            if shift >= 64 || (shift == 63 && b > 1) {
                return self.err("varint overflows 64 bits");
            }
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    /// Reads a varint that must fit in `usize` and be at most `max`.
    pub fn varint_len(&mut self, max: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let v = self.varint()?;
        if v > max as u64 {
            return Err(DecodeError {
                offset: at,
                reason: "length out of range",
            });
        }
        Ok(v as usize)
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return self.err("truncated bytes");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a varint-length-prefixed slice.
    pub fn length_prefixed(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint_len(self.remaining())?;
        self.bytes(n)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_roundtrip(v: u64) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::new(&b);
            prop_assert_eq!(d.varint().ok(), Some(v));
            prop_assert!(d.is_empty());
        }

        #[test]
        fn decoder_never_panics(bytes: Vec<u8>) {
            let mut d = Decoder::new(&bytes);
            while d.length_prefixed().is_ok() {}
        }
    }

    #[test]
    fn overlong_varint_is_error() {
        let b = [0xffu8; 11];
        assert!(Decoder::new(&b).varint().is_err());
    }
}
