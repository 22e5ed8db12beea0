//! A bounded batch of keys read ahead by one end of a scan ([`super::Scan::fill_keys`]).
//!
//! A stream of many short keys (a multimap key's values) is read a batch at a time, so
//! the per-key work of the read path runs in one loop over a block, and handing a key
//! out is a slice of this buffer. Keys are kept in the order their end of the scan
//! reads them: `take_near` gives the next one, `take_far` the one farthest along (the
//! nearest to the other end, which takes it once the scan is over). Invariant: a fill
//! stops once the batch holds [`MAX_KEYS`] keys or [`MAX_BYTES`] bytes (one key may
//! pass the latter), so memory stays bounded however long the stream.

/// Most keys a batch holds.
pub(crate) const MAX_KEYS: usize = 512;
/// Most keys the first fill of a batch takes: a reader that wants a few keys (a page)
/// does not pay for reading many. Each later fill may take twice as many, up to
/// [`MAX_KEYS`].
const FIRST_KEYS: usize = 16;
/// Most bytes a batch holds once it has one key (a single key may be longer).
pub(crate) const MAX_BYTES: usize = 16 << 10;

/// Room past the bytes in use, so a short key is written as two overlapping
/// fixed-size chunks without growing the buffer.
const SLACK: usize = 16;

/// Keys in reading order, each a range of one buffer.
#[derive(Debug)]
pub(crate) struct KeyBatch {
    /// Zero-filled room; `used` bytes of it hold keys.
    bytes: Vec<u8>,
    used: usize,
    /// Where each key starts in `bytes`, then where the last one ends: key `i` is
    /// `bounds[i]..bounds[i + 1]`.
    bounds: Vec<usize>,
    /// Keys before this index were taken from the near end.
    near: usize,
    /// Keys from this index on were taken from the far end.
    far: usize,
    /// Keys this fill may take (0 before the first).
    limit: usize,
}

impl Default for KeyBatch {
    fn default() -> Self {
        KeyBatch {
            bytes: Vec::new(),
            used: 0,
            bounds: vec![0],
            near: 0,
            far: 0,
            limit: 0,
        }
    }
}

impl KeyBatch {
    /// True when every key was taken.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.near >= self.far
    }

    /// True when no further key should be added.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.far >= self.limit || self.used >= MAX_BYTES
    }

    /// Forgets every key, keeping the buffers' memory, for the next fill (which may
    /// take twice as many keys as the last).
    pub(crate) fn clear(&mut self) {
        self.used = 0;
        self.bounds.truncate(1);
        self.near = 0;
        self.far = 0;
        self.limit = (self.limit * 2).clamp(FIRST_KEYS, MAX_KEYS);
    }

    /// Adds `key` after the others.
    #[inline(always)]
    pub(crate) fn push(&mut self, key: &[u8]) {
        let (at, n) = (self.used, key.len());
        if self.bytes.len() < at + n + SLACK {
            self.grow(at + n + SLACK);
        }
        let dst = &mut self.bytes[at..];
        // Short keys (multimap values) as two overlapping chunks merged into one word
        // and stored whole (the slack past `used` takes the excess): a few moves, where
        // a copy of a length known only at run time calls `memcpy` (separate chunk
        // copies per length were merged back into one such call by the compiler).
        match (
            key.first_chunk::<8>(),
            key.last_chunk::<8>(),
            key.first_chunk::<4>(),
            key.last_chunk::<4>(),
            dst.first_chunk_mut::<16>(),
        ) {
            // 8..=16 bytes.
            (Some(head), Some(tail), _, _, Some(out)) if n <= 16 => {
                let word =
                    u128::from(u64::from_le_bytes(*head)) | u128::from(u64::from_le_bytes(*tail)) << (8 * (n - 8));
                *out = word.to_le_bytes();
            }
            // 4..=7 bytes.
            (None, None, Some(head), Some(tail), Some(out)) => {
                let word = u64::from(u32::from_le_bytes(*head)) | u64::from(u32::from_le_bytes(*tail)) << (8 * (n - 4));
                out[..8].copy_from_slice(&word.to_le_bytes());
            }
            _ => dst[..n].copy_from_slice(key),
        }
        self.used = at + n;
        self.bounds.push(self.used);
        self.far += 1;
    }

    /// Makes `bytes` at least `len` long (doubling, so growth is rare).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, len: usize) {
        let grown = len.max(2 * self.bytes.len()).max(256);
        self.bytes.resize(grown, 0);
    }

    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        match (self.bounds.get(i), self.bounds.get(i + 1)) {
            (Some(&start), Some(&end)) => self.bytes.get(start..end).unwrap_or_default(),
            _ => &[],
        }
    }

    /// The next key in reading order.
    #[inline]
    pub(crate) fn take_near(&mut self) -> Option<&[u8]> {
        if self.is_empty() {
            return None;
        }
        self.near += 1;
        Some(self.key(self.near - 1))
    }

    /// The last key in reading order (the one nearest the other end of the scan).
    pub(crate) fn take_far(&mut self) -> Option<&[u8]> {
        if self.is_empty() {
            return None;
        }
        self.far -= 1;
        Some(self.key(self.far))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_every_length_come_back_whole() {
        let src: Vec<u8> = (1..=40).collect();
        let mut b = KeyBatch::default();
        b.clear();
        for n in 0..=20 {
            b.push(&src[..n]);
        }
        for n in 0..=20 {
            assert_eq!(b.take_near(), Some(&src[..n]), "length {n}");
        }
    }

    #[test]
    fn keys_come_out_from_both_ends_once() {
        let mut b = KeyBatch::default();
        b.clear();
        for k in [b"a".as_slice(), b"", b"ccc", b"dd"] {
            b.push(k);
        }
        assert_eq!(b.take_near(), Some(b"a".as_slice()));
        assert_eq!(b.take_far(), Some(b"dd".as_slice()));
        assert_eq!(b.take_near(), Some(b"".as_slice()));
        assert_eq!(b.take_far(), Some(b"ccc".as_slice()));
        assert!(b.is_empty());
        assert_eq!(b.take_near(), None);
        assert_eq!(b.take_far(), None);
        b.clear();
        b.push(b"x");
        assert_eq!(b.take_far(), Some(b"x".as_slice()));
        assert!(b.is_empty());
    }

    #[test]
    fn fills_grow_to_the_bound_by_count_or_bytes() {
        let mut b = KeyBatch::default();
        let mut limits = Vec::new();
        for _ in 0..8 {
            b.clear();
            let mut n = 0;
            while !b.is_full() {
                b.push(b"k");
                n += 1;
            }
            limits.push(n);
        }
        assert_eq!(limits, [16, 32, 64, 128, 256, 512, 512, 512]);
        b.clear();
        b.push(&vec![7; MAX_BYTES]);
        assert!(b.is_full());
    }
}
