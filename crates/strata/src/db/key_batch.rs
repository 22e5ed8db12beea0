//! A bounded batch of keys read ahead by one end of a scan ([`super::Scan::fill_keys`]).
//!
//! A stream of many short keys (a multimap key's values) is read a batch at a time, so
//! the per-key work of the read path runs in one loop over a block, and handing a key
//! out is a slice of this batch. Keys are kept in the order their end of the scan
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

/// Longest key kept in a slot of its own (see [`KeyBatch`]).
const SLOT: usize = 16;

/// Keys in reading order.
///
/// Two layouts. While every key of the fill is at most [`SLOT`] bytes long (a
/// multimap's values, typically), key `i` is `slots[i][..lens[i]]`: adding one is a
/// fixed-size copy and handing it out an index, with no offsets to keep. The first
/// longer key moves the batch's keys, for the rest of the fill, to one buffer with
/// the offsets of each (`spilled`).
#[derive(Debug)]
pub(crate) struct KeyBatch {
    /// At least `limit` slots (their bytes past a key's length are scratch).
    slots: Vec<[u8; SLOT]>,
    lens: Vec<u8>,
    /// The keys are in `bytes`: key `i` is `bytes[bounds[i]..bounds[i + 1]]`.
    spilled: bool,
    bytes: Vec<u8>,
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
            slots: Vec::new(),
            lens: Vec::new(),
            spilled: false,
            bytes: Vec::new(),
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

    /// True when no further key should be added. Slots hold at most `MAX_KEYS * SLOT`
    /// bytes, under [`MAX_BYTES`], so only a spilled batch counts bytes.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.far >= self.limit || (self.spilled && self.bytes.len() >= MAX_BYTES)
    }

    /// Forgets every key, keeping the buffers' memory, for the next fill (which may
    /// take twice as many keys as the last).
    pub(crate) fn clear(&mut self) {
        self.spilled = false;
        self.bytes.clear();
        self.bounds.truncate(1);
        self.near = 0;
        self.far = 0;
        self.limit = (self.limit * 2).clamp(FIRST_KEYS, MAX_KEYS);
        if self.slots.len() < self.limit {
            self.slots.resize(self.limit, [0; SLOT]);
            self.lens.resize(self.limit, 0);
        }
    }

    /// Adds `key` after the others.
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8]) {
        if !self.spilled
            && key.len() <= SLOT
            && let (Some(slot), Some(len)) = (self.slots.get_mut(self.far), self.lens.get_mut(self.far))
        {
            slot[..key.len()].copy_from_slice(key);
            *len = key.len() as u8;
            self.far += 1;
            return;
        }
        self.push_spilled(key);
    }

    /// `push` of a key no slot takes: the batch's keys move to `bytes` (once a fill)
    /// and `key` joins them there.
    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, key: &[u8]) {
        if !self.spilled {
            self.bytes.clear();
            self.bounds.truncate(1);
            let taken = self.slots.iter().zip(&self.lens).take(self.far);
            for (slot, &n) in taken {
                self.bytes
                    .extend_from_slice(slot.get(..usize::from(n)).unwrap_or_default());
                self.bounds.push(self.bytes.len());
            }
            self.spilled = true;
        }
        self.bytes.extend_from_slice(key);
        self.bounds.push(self.bytes.len());
        self.far += 1;
    }

    #[inline]
    fn slot_key(&self, i: usize) -> &[u8] {
        match (self.slots.get(i), self.lens.get(i)) {
            (Some(s), Some(&n)) => s.get(..usize::from(n)).unwrap_or_default(),
            _ => &[],
        }
    }

    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        if !self.spilled {
            return self.slot_key(i);
        }
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

    /// A longer key moves the batch to one buffer halfway through a fill, with keys
    /// already taken from both ends; the next fill is back in slots.
    #[test]
    fn a_long_key_spills_the_batch_and_keeps_every_key() {
        let long = vec![9u8; SLOT + 1];
        let mut b = KeyBatch::default();
        b.clear();
        for k in [b"a".as_slice(), b"bb", b"", b"0123456789abcdef"] {
            b.push(k);
        }
        assert_eq!(b.take_near(), Some(b"a".as_slice()));
        assert_eq!(b.take_far(), Some(b"0123456789abcdef".as_slice()));
        b.push(&long);
        b.push(b"z");
        assert_eq!(b.take_near(), Some(b"bb".as_slice()));
        assert_eq!(b.take_far(), Some(b"z".as_slice()));
        assert_eq!(b.take_far(), Some(long.as_slice()));
        assert_eq!(b.take_near(), Some(b"".as_slice()));
        assert_eq!(b.take_near(), None);
        b.clear();
        b.push(b"q");
        assert!(!b.spilled);
        assert_eq!(b.take_near(), Some(b"q".as_slice()));
    }
}
