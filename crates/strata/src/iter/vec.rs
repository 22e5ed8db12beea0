//! Sorted in-memory runs of internal entries: [`EntryBuffer`] packs entries into one
//! allocation and sorts them, [`VecIter`] walks a sorted buffer.
//!
//! Invariant: a buffer handed to [`VecIter::new`] was sorted (and de-duplicated) by
//! [`EntryBuffer::sort`] after its last push.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{compare_internal, user_key, user_key_prefix};

/// An entry of a buffer: where its bytes are, and the first 8 bytes of its user key,
/// which settle most comparisons of a sort without touching the data.
#[derive(Debug, Clone, Copy)]
struct Slot {
    prefix: u64,
    off: usize,
    key_len: u32,
    value_len: u32,
}

/// Internal entries back to back in one allocation, with a slot each (a compaction
/// buffers millions of deferred deletes: one heap block per entry made the allocator a
/// fifth of the job).
#[derive(Debug, Default)]
pub struct EntryBuffer {
    data: Vec<u8>,
    slots: Vec<Slot>,
}

impl EntryBuffer {
    /// Bytes held, counting the slots.
    pub fn bytes(&self) -> usize {
        self.data.len() + self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Appends an entry (any order); keys and values are limited to 4 GiB each.
    pub fn push(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let too_big = || Error::InvalidArgument("a sorted entry's key or value exceeds 4 GiB".into());
        let key_len = u32::try_from(ikey.len()).map_err(|_| too_big())?;
        let value_len = u32::try_from(value.len()).map_err(|_| too_big())?;
        self.slots.push(Slot {
            prefix: user_key_prefix(user_key(ikey)),
            off: self.data.len(),
            key_len,
            value_len,
        });
        self.data.extend_from_slice(ikey);
        self.data.extend_from_slice(value);
        Ok(())
    }

    /// The key of entry `i` (empty past the end).
    pub fn key(&self, i: usize) -> &[u8] {
        self.slots.get(i).map_or(&[], |s| self.key_of(s))
    }

    /// The value of entry `i` (empty past the end).
    pub fn value(&self, i: usize) -> &[u8] {
        self.slots.get(i).map_or(&[], |s| {
            let v = s.off + s.key_len as usize;
            &self.data[v..v + s.value_len as usize]
        })
    }

    fn key_of(&self, s: &Slot) -> &[u8] {
        &self.data[s.off..s.off + s.key_len as usize]
    }

    /// Sorts the entries by [`compare_internal`] and drops repeated keys (which of
    /// equal keys stays is unspecified: callers give equal keys equal values).
    pub fn sort(&mut self) {
        let EntryBuffer { data, slots } = self;
        let key = |s: &Slot| &data[s.off..s.off + s.key_len as usize];
        slots.sort_unstable_by(|a, b| a.prefix.cmp(&b.prefix).then_with(|| compare_internal(key(a), key(b))));
        slots.dedup_by(|a, b| key(a) == key(b));
    }

    /// Empties the buffer, keeping its memory.
    pub fn clear(&mut self) {
        self.data.clear();
        self.slots.clear();
    }
}

/// Iterates a sorted [`EntryBuffer`].
pub struct VecIter {
    buf: EntryBuffer,
    pos: Option<usize>,
}

impl VecIter {
    /// REQUIRES: `buf` sorted by [`EntryBuffer::sort`].
    pub fn new(buf: EntryBuffer) -> Self {
        VecIter { buf, pos: None }
    }

    fn at(&mut self, i: usize) {
        self.pos = (i < self.buf.len()).then_some(i);
    }

    /// Index of the first entry for which `before` is false.
    fn boundary(&self, before: impl Fn(&[u8]) -> bool) -> usize {
        self.buf.slots.partition_point(|s| before(self.buf.key_of(s)))
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.at(0);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.buf.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self.boundary(|k| compare_internal(k, target) == Ordering::Less);
        self.at(i);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let i = self.boundary(|k| compare_internal(k, target) != Ordering::Greater);
        self.pos = i.checked_sub(1);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if let Some(p) = self.pos {
            self.at(p + 1);
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.pos.map_or(&[], |p| self.buf.key(p))
    }
    fn value(&self) -> &[u8] {
        self.pos.map_or(&[], |p| self.buf.value(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, internal_key};

    #[test]
    fn sorted_buffer_walks_and_seeks_like_a_sorted_model() {
        // Short keys (zero-padded prefixes), keys ending in zero bytes, and long keys that
        // share their first 8 bytes: every way the prefix can decide wrongly.
        let mut buf = EntryBuffer::default();
        let mut model = Vec::new();
        let mut x = 11u64;
        for i in 0..3_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = (x >> 33) % 300;
            let key: Vec<u8> = match n % 4 {
                0 => vec![b'k'; (n % 7) as usize],
                1 => [b"k".as_slice(), &vec![0u8; (n % 10) as usize]].concat(),
                2 => format!("sharedpfx{n:03}").into_bytes(),
                _ => (n as u16).to_be_bytes().to_vec(),
            };
            let ikey = internal_key(&key, i % 5, ValueKind::Put);
            // Equal keys get equal values, as callers guarantee.
            let value = ikey.iter().rev().copied().collect::<Vec<u8>>();
            buf.push(&ikey, &value).unwrap();
            model.push((ikey, value));
        }
        model.sort_by(|a, b| compare_internal(&a.0, &b.0));
        model.dedup_by(|a, b| a.0 == b.0);
        buf.sort();
        assert_eq!(buf.len(), model.len());
        let mut it = VecIter::new(buf);
        it.seek_to_first().unwrap();
        for (k, v) in &model {
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
            it.next().unwrap();
        }
        assert!(!it.valid());
        let (k, v) = &model[model.len() / 2];
        it.seek(k).unwrap();
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        it.seek_for_prev(k).unwrap();
        assert_eq!(it.key(), k.as_slice());
        it.prev().unwrap();
        assert_eq!(it.key(), model[model.len() / 2 - 1].0.as_slice());
    }
}
