//! The sorted key/value block used for data blocks and the index block.
//!
//! Layout: entries, then `restart offsets: u32 LE × n`, then `n: u32 LE`. An entry is
//! `varint shared ++ varint unshared ++ varint value_len ++ key[shared..] ++ value`,
//! where `shared` is the prefix length it has in common with the previous key. Every
//! `restart_interval`-th entry is a restart point: it stores its whole key (`shared = 0`)
//! and its offset is listed, so seeks binary-search the restart points.
//!
//! Invariant checked by [`Block::decode`]: every entry parses, restart points sit on
//! entry boundaries with `shared = 0`, the first entry is a restart point, and keys are
//! valid internal keys in strictly increasing [`compare_internal`] order. Iteration still
//! re-checks every read and reports errors rather than panicking.
//!
//! A decoded block also keeps its restart keys reduced to integers (`Restarts`),
//! which a seek's binary search reads instead of the entries; the format is unchanged.

use std::cmp::Ordering;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::codec::{DecodeError, Decoder, put_u32, put_varint};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, TRAILER_LEN, compare_internal, parse_internal_key, parse_key_parts, user_key};

/// Bytes a new [`BlockIter`]'s key buffer starts with.
const KEY_ROOM: usize = 64;

/// Longest key delta [`BlockIter`] copies as one fixed-size chunk.
const SHORT_DELTA: usize = 16;

/// Restart interval used when the caller has no preference.
pub const DEFAULT_RESTART_INTERVAL: usize = 16;

fn derr<T, E: From<DecodeError>>(offset: usize, reason: &'static str) -> std::result::Result<T, E> {
    Err(DecodeError { offset, reason }.into())
}

/// Accumulates sorted entries into the block format.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` entries (0 acts as 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: `key` sorts after the previous key (the table
    /// builder checks this; a violation yields a block that fails to decode).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.entries == 0 || self.since_restart >= self.interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Size of the block if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Entries added since the last [`BlockBuilder::finish`].
    pub fn num_entries(&self) -> usize {
        self.entries
    }

    /// True when no entry was added since the last [`BlockBuilder::finish`].
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Returns the encoded block and resets the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            put_u32(&mut out, *r);
        }
        put_u32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.last_key.clear();
        self.since_restart = 0;
        self.entries = 0;
        out
    }
}

/// One entry's parsed header; ranges are absolute offsets into the block.
struct Entry {
    shared: usize,
    delta: Range<usize>,
    value: Range<usize>,
}

/// Parses the entry header at `off`, checking that it ends by `end`.
#[inline(always)]
fn entry_at(data: &[u8], off: usize, end: usize) -> std::result::Result<Entry, DecodeError> {
    // Short keys and values: three one-byte varints, the common case, parsed without a loop.
    if let Some(slice) = data.get(off..end)
        && let [s, u, v, ..] = *slice
        && (s | u | v) < 0x80
    {
        let (unshared, vlen, start) = (usize::from(u), usize::from(v), off + 3);
        if unshared + vlen <= slice.len() - 3 {
            return Ok(Entry {
                shared: usize::from(s),
                delta: start..start + unshared,
                value: start + unshared..start + unshared + vlen,
            });
        }
    }
    entry_at_varints(data, off, end)
}

/// [`entry_at`] for any header (and the errors).
#[inline(never)]
fn entry_at_varints(data: &[u8], off: usize, end: usize) -> std::result::Result<Entry, DecodeError> {
    let Some(slice) = data.get(off..end) else {
        return derr(off, "entry offset out of range");
    };
    let rel = |e: DecodeError| DecodeError {
        offset: off + e.offset,
        reason: e.reason,
    };
    let mut d = Decoder::new(slice);
    let shared = d.varint().map_err(rel)?;
    let unshared = d.varint_len(d.remaining()).map_err(rel)?;
    let vlen = d.varint_len(d.remaining()).map_err(rel)?;
    if unshared + vlen > d.remaining() {
        return derr(off, "entry runs past the end of the block");
    }
    let start = off + d.position();
    Ok(Entry {
        shared: usize::try_from(shared).unwrap_or(usize::MAX),
        delta: start..start + unshared,
        value: start + unshared..start + unshared + vlen,
    })
}

/// A decoded, validated block; shared through the block cache.
#[derive(Debug)]
pub struct Block {
    data: Box<[u8]>,
    data_end: usize,
    restarts: Restarts,
    entries: usize,
    /// Stored compressed: an offset inside `data` is no offset in the file.
    compressed: bool,
}

/// A block's restart points, each with its key reduced to an integer when the block is
/// decoded, so that a seek's binary search reads one small array rather than an entry
/// of the block at each step: in a block not read lately every such read is a cache
/// miss, and they were most of a point lookup's data-block seek in cached tables.
///
/// Keys are compared as user keys zero-padded to a fixed length, which orders them as
/// their user keys do whenever the padded forms differ (a shorter key that is a prefix
/// of a longer one pads to bytes no greater than the longer one's). Only equal padded
/// forms (equal user keys, or keys that differ past the compared bytes) need the keys
/// themselves, which the search then reads.
#[derive(Debug, Default)]
struct Restarts {
    /// The first `common_len` bytes of every user key in the block (at most 16: those
    /// the first and last keys share, which all keys between share too), big-endian and
    /// zero-padded.
    common: u128,
    common_len: usize,
    points: Box<[Restart]>,
}

#[derive(Debug, Clone, Copy)]
struct Restart {
    /// Where the restart entry starts.
    offset: u32,
    /// The 8 bytes of its user key after the block's common ones, big-endian and
    /// zero-padded.
    prefix: u64,
}

/// Most common-prefix bytes [`Restarts`] keeps.
const COMMON_MAX: usize = 16;

/// `bytes`' first `N` bytes, zero-padded.
fn padded<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = bytes.len().min(N);
    out[..n].copy_from_slice(&bytes[..n]);
    out
}

impl Restarts {
    /// The restart points at `offsets` of a block whose entries (`data[..data_end]`)
    /// were validated and whose last key is `last_key`.
    fn new(
        data: &[u8],
        data_end: usize,
        offsets: impl ExactSizeIterator<Item = u32>,
        last_key: &[u8],
    ) -> std::result::Result<Restarts, DecodeError> {
        // The first entry is a restart point (validated).
        let first = match data_end {
            0 => &[][..],
            _ => user_key(restart_key_at(data, 0, data_end)?),
        };
        let common_len = first
            .iter()
            .zip(user_key(last_key))
            .take_while(|(a, b)| a == b)
            .count()
            .min(COMMON_MAX);
        // Sized up front: collected through a `Result`, the vector would grow and then
        // shrink, a reallocation per block read.
        let mut points = Vec::with_capacity(offsets.len());
        for offset in offsets {
            let uk = user_key(restart_key_at(data, offset as usize, data_end)?);
            let prefix = u64::from_be_bytes(padded(uk.get(common_len..).unwrap_or_default()));
            points.push(Restart { offset, prefix });
        }
        Ok(Restarts {
            common: u128::from_be_bytes(padded(first.get(..common_len).unwrap_or_default())),
            common_len,
            points: points.into_boxed_slice(),
        })
    }

    fn len(&self) -> usize {
        self.points.len()
    }

    /// Where restart point `i` starts (`usize::MAX` past the last).
    fn offset(&self, i: usize) -> usize {
        self.points.get(i).map_or(usize::MAX, |r| r.offset as usize)
    }

    /// How `user_key`'s first `common_len` bytes (zero-padded) compare to the block's,
    /// and its next 8 bytes as [`Restart::prefix`] holds them.
    fn reduce(&self, user_key: &[u8]) -> (Ordering, u64) {
        let head = u128::from_be_bytes(padded(user_key));
        let mask = match self.common_len {
            0 => 0,
            n => u128::MAX << (8 * (COMMON_MAX - n)),
        };
        let prefix = u64::from_be_bytes(padded(user_key.get(self.common_len..).unwrap_or_default()));
        ((head & mask).cmp(&self.common), prefix)
    }
}

/// The full key of the restart entry at `off`.
fn restart_key_at(data: &[u8], off: usize, data_end: usize) -> std::result::Result<&[u8], DecodeError> {
    let e = entry_at(data, off, data_end)?;
    if e.shared != 0 {
        return derr(off, "restart entry shares a prefix");
    }
    Ok(data.get(e.delta).unwrap_or_default())
}

impl Block {
    /// Validates `bytes` as a block (see the module docs). Error offsets are relative to
    /// the block's first byte. Never panics.
    pub fn decode(bytes: Vec<u8>) -> std::result::Result<Block, DecodeError> {
        let (data_end, raw_restarts) = split_block(&bytes)?;
        let mut last = Vec::new();
        let entries = validate_entries(&bytes, data_end, raw_restarts, &mut last, |_| Ok::<(), DecodeError>(()))?;
        let offsets = raw_restarts
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let restarts = Restarts::new(&bytes, data_end, offsets, &last)?;
        Ok(Block {
            data: bytes.into_boxed_slice(),
            data_end,
            restarts,
            entries,
            compressed: false,
        })
    }

    /// Notes that the block was stored compressed: its errors then name the block's
    /// offset in the file, not a position in the decompressed bytes.
    pub(crate) fn stored_compressed(mut self, compressed: bool) -> Block {
        self.compressed = compressed;
        self
    }

    /// Number of entries.
    pub fn num_entries(&self) -> usize {
        self.entries
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.restarts.len()
    }

    /// Approximate memory held, used as the block-cache charge.
    pub fn charge(&self) -> usize {
        std::mem::size_of::<Block>() + self.data.len() + std::mem::size_of::<Restart>() * self.restarts.len()
    }

    /// An unpositioned iterator whose errors name no file (for tools and tests).
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self), Arc::from(Path::new("<block>")), 0)
    }

    /// The full key stored at restart point `i`.
    fn restart_key(&self, i: usize) -> std::result::Result<&[u8], DecodeError> {
        restart_key_at(&self.data, self.restarts.offset(i), self.data_end)
    }
}

/// Splits a block into its entries' end and its restart array (`u32 LE` each), checking
/// only that the restart count fits.
fn split_block(bytes: &[u8]) -> std::result::Result<(usize, &[u8]), DecodeError> {
    let len = bytes.len();
    let Some(count_at) = len.checked_sub(4) else {
        return derr(0, "block shorter than its restart count");
    };
    let count = Decoder::new(&bytes[count_at..]).u32()? as usize;
    let Some(data_end) = count.checked_mul(4).and_then(|n| count_at.checked_sub(n)) else {
        return derr(count_at, "restart count exceeds the block size");
    };
    Ok((data_end, &bytes[data_end..count_at]))
}

/// One entry as [`walk_block`] shows it, once checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckedEntry<'a> {
    /// The key, parsed.
    pub key: ParsedKey<'a>,
    /// The value.
    pub value: &'a [u8],
    /// Offset of the entry in the block.
    pub offset: usize,
    /// The key before it in this block when one byte did not show that this key's user
    /// key is the greater one (`None` for the first entry of the block, and when it did).
    pub prev: Option<&'a [u8]>,
}

/// Checks a block's bytes in place as [`Block::decode`] does (no copy of the block, no
/// allocation once `key` has grown), handing each entry to `visit` in order; returns the
/// count. `key` is the caller's buffer, holding the block's last key afterwards. For a
/// bulk check of many blocks (`sstable::external`).
pub(crate) fn walk_block<E: From<DecodeError>>(
    bytes: &[u8],
    key: &mut Vec<u8>,
    visit: impl FnMut(CheckedEntry<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<usize, E> {
    let (data_end, restarts) = split_block(bytes)?;
    validate_entries(bytes, data_end, restarts, key, visit)
}

/// Walks every entry once, checking the invariants in the module docs and handing each
/// to `visit`; returns the count. `restarts` is the raw restart array.
#[inline(always)]
fn validate_entries<E: From<DecodeError>>(
    data: &[u8],
    data_end: usize,
    restarts: &[u8],
    key: &mut Vec<u8>,
    mut visit: impl FnMut(CheckedEntry<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<usize, E> {
    let restart_at = |i: usize| {
        restarts
            .get(4 * i..4 * i + 4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
    };
    let count = restarts.len() / 4;
    if restart_at(0).is_some_and(|r| r != 0) || (count == 0 && data_end != 0) {
        return derr(data_end, "first entry is not a restart point");
    }
    key.clear();
    let mut prev = Vec::<u8>::new();
    let (mut off, mut next_restart, mut n) = (0usize, 0usize, 0usize);
    while off < data_end {
        let restart = restart_at(next_restart);
        if restart.is_some_and(|r| r < off) {
            return derr(off, "restart point not on an entry boundary");
        }
        let e = entry_at(data, off, data_end)?;
        if restart == Some(off) {
            if e.shared != 0 {
                return derr(off, "restart entry shares a prefix");
            }
            next_restart += 1;
        }
        if e.shared > key.len() {
            return derr(off, "shared prefix longer than the previous key");
        }
        // The previous key is kept aside only when one byte cannot settle the order.
        let delta = data.get(e.delta.clone()).unwrap_or_default();
        let settled = if n == 0 {
            Some(true)
        } else {
            first_byte_order(key, e.shared, delta)
        };
        if settled.is_none() {
            prev.clone_from(key);
        }
        extend_key(key, data, &e, delta);
        // The trailer is read from the block when the delta holds it: read back from the
        // key just rebuilt, it would straddle two stores and stall.
        let parsed = match (delta.last_chunk::<TRAILER_LEN>(), key.len().checked_sub(TRAILER_LEN)) {
            (Some(t), Some(uk)) => key.get(..uk).and_then(|uk| parse_key_parts(uk, *t)),
            _ => parse_internal_key(key),
        };
        let Some(parsed) = parsed else {
            return derr(off, "invalid internal key");
        };
        if !settled.unwrap_or_else(|| compare_internal(&prev, key) == Ordering::Less) {
            return derr(off, "keys out of order");
        }
        visit(CheckedEntry {
            key: parsed,
            value: data.get(e.value.clone()).unwrap_or_default(),
            offset: off,
            prev: (n > 0 && settled.is_none()).then_some(prev.as_slice()),
        })?;
        n += 1;
        off = e.value.end;
    }
    if next_restart != count {
        return derr(data_end, "restart point past the last entry");
    }
    Ok(n)
}

/// Whether the key `prev[..shared] ++ delta` sorts after `prev`, when one byte says so.
///
/// Every block read from a file is order-checked entry by entry, so the common case is
/// one byte: when both user keys go past the shared prefix, their first bytes after it
/// decide (the builder shares the longest common prefix, so they differ). `None` asks
/// for the full comparison: keys that differ only in the trailer, one user key a prefix
/// of the other, or a writer that shared less than it could.
#[inline]
fn first_byte_order(prev: &[u8], shared: usize, delta: &[u8]) -> Option<bool> {
    let key_user_len = (shared + delta.len()).saturating_sub(TRAILER_LEN);
    if shared >= key_user_len {
        return None;
    }
    let (a, b) = (*user_key(prev).get(shared)?, *delta.first()?);
    (a != b).then_some(a < b)
}

/// A cursor over one block, implementing [`InternalIterator`].
///
/// Errors are reported as corruption of `path` at `base` + the offset inside the block.
pub struct BlockIter {
    block: Arc<Block>,
    path: Arc<Path>,
    base: u64,
    /// Offset of the current entry.
    current: usize,
    /// Offset just past the current entry.
    next: usize,
    /// Bytes the current key shares with the entry before it in the block (0 at a
    /// restart point).
    shared: usize,
    key: Vec<u8>,
    value: Range<usize>,
    valid: bool,
}

impl BlockIter {
    /// An unpositioned iterator over `block`, which starts at file offset `base` of `path`.
    pub fn new(block: Arc<Block>, path: Arc<Path>, base: u64) -> Self {
        BlockIter {
            block,
            path,
            base,
            current: 0,
            next: 0,
            shared: 0,
            // Room for a typical key and a short delta copied past it (`extend_key`):
            // one allocation, where growing from empty took three.
            key: Vec::with_capacity(KEY_ROOM),
            value: 0..0,
            valid: false,
        }
    }

    /// The file the block is in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The block's offset in its file.
    pub fn base(&self) -> u64 {
        self.base
    }

    fn corrupt(&mut self, e: DecodeError) -> Error {
        self.invalidate();
        let offset = match self.block.compressed {
            true => self.base,
            false => self.base.saturating_add(e.offset as u64),
        };
        Error::corruption(&*self.path, offset, format!("bad block entry: {}", e.reason))
    }

    /// The error for an entry that does not decode.
    #[cold]
    #[inline(never)]
    fn bad_entry(&mut self, e: DecodeError) -> Error {
        self.corrupt(e)
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.key.clear();
        self.value = 0..0;
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.invalidate();
        self.next = self.block.restarts.offset(i);
    }

    /// Steps through the block from the current entry on, calling `f` on each
    /// ([`Walked`]) until `f` returns false (the cursor then moves past that entry) or
    /// the block ends (the cursor is then invalid). One loop with the entry decoding
    /// inlined and the key kept in a local, so a long forward read pays no call per
    /// entry.
    #[inline]
    pub fn walk(&mut self, mut f: impl FnMut(Walked<'_>) -> bool) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let BlockIter {
            block,
            key,
            shared,
            current,
            next,
            value,
            ..
        } = self;
        let (data, end) = (&block.data[..], block.data_end);
        // Out of `self`, the compiler keeps the key's length and pointer in registers.
        let mut k = std::mem::take(key);
        let mut same_user_key = None;
        let stopped = loop {
            let go_on = f(Walked {
                key: &k,
                value: data.get(value.clone()).unwrap_or_default(),
                shared: *shared,
                same_user_key,
                last: *next >= end,
            });
            if *next >= end {
                break Ok(false);
            }
            let off = *next;
            match decode_into::<true>(&mut k, data, off, end) {
                Ok((e, same)) => {
                    *shared = e.shared;
                    *current = off;
                    *next = e.value.end;
                    *value = e.value;
                    same_user_key = Some(same);
                }
                Err(e) => break Err(e),
            }
            if !go_on {
                break Ok(true);
            }
        };
        *key = k;
        match stopped {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.invalidate();
                Ok(())
            }
            Err(e) => Err(self.bad_entry(e)),
        }
    }

    /// Parses the entry at `self.next`; `Ok(false)` (invalid) at the end of the block.
    #[inline(always)]
    fn parse_next(&mut self) -> Result<bool> {
        let off = self.next;
        if off >= self.block.data_end {
            self.invalidate();
            return Ok(false);
        }
        match decode_into::<false>(&mut self.key, &self.block.data, off, self.block.data_end) {
            Ok((e, _)) => {
                self.shared = e.shared;
                self.current = off;
                self.next = e.value.end;
                self.value = e.value;
                self.valid = true;
                Ok(true)
            }
            Err(e) => Err(self.bad_entry(e)),
        }
    }
}

/// One entry as [`BlockIter::walk`] shows it.
#[derive(Debug, Clone, Copy)]
pub struct Walked<'a> {
    /// The entry's key.
    pub key: &'a [u8],
    /// Its value.
    pub value: &'a [u8],
    /// Leading bytes the key shares with the key of the entry before it in the block
    /// (0 at a restart point; a block's first entry is one).
    pub shared: usize,
    /// Whether the key's user key is that of the entry before it, when this walk saw
    /// that entry (`None` for the walk's first entry).
    pub same_user_key: Option<bool>,
    /// True for the block's last entry.
    pub last: bool,
}

/// Decodes the entry at `off` (before `end`) into `key`, which holds the key of the
/// entry before it. With `SAME`, also says whether the two keys have the same user
/// key, compared before the old key is overwritten (false without `SAME`).
#[inline(always)]
fn decode_into<const SAME: bool>(
    key: &mut Vec<u8>,
    data: &[u8],
    off: usize,
    end: usize,
) -> std::result::Result<(Entry, bool), DecodeError> {
    let e = entry_at(data, off, end)?;
    if e.shared > key.len() {
        return derr(off, "bad shared prefix");
    }
    let Some(delta) = data.get(e.delta.clone()) else {
        return derr(off, "entry runs past the end of the block");
    };
    let len = e.shared + delta.len();
    let same = SAME
        && len == key.len()
        && len >= TRAILER_LEN
        && match (len - TRAILER_LEN).checked_sub(e.shared) {
            // The user key lies in the shared prefix.
            None | Some(0) => true,
            // The first differing byte usually settles it.
            Some(n) => key.get(e.shared) == delta.first() && key.get(e.shared..e.shared + n) == delta.get(..n),
        };
    extend_key(key, data, &e, delta);
    Ok((e, same))
}

/// Replaces `key` (the previous entry's key) by entry `e`'s: its shared prefix, then
/// `delta`, the entry's delta bytes in `data`. REQUIRES: `e.shared <= key.len()`.
#[inline(always)]
fn extend_key(key: &mut Vec<u8>, data: &[u8], e: &Entry, delta: &[u8]) {
    let len = e.shared + delta.len();
    key.truncate(e.shared);
    match data.get(e.delta.start..).and_then(<[u8]>::first_chunk::<SHORT_DELTA>) {
        // A short delta (a multimap value, a counter's last bytes) is copied as a
        // fixed-size chunk, which compiles to a few moves rather than a `memcpy` call,
        // and the excess cut off.
        Some(chunk) if delta.len() <= SHORT_DELTA => {
            key.extend_from_slice(chunk);
            key.truncate(len);
        }
        _ => key.extend_from_slice(delta),
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart(0);
        self.parse_next().map(drop)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_to_restart(self.block.restarts.len().saturating_sub(1));
        while self.parse_next()? && self.next < self.block.data_end {}
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.block.restarts.len() == 0 {
            self.invalidate();
            return Ok(());
        }
        // Last restart point whose key is < target (else the first); the answer is at
        // or after it.
        let last = self.block.restarts.len() - 1;
        let restarts = &self.block.restarts;
        let lo = match restarts.reduce(user_key(target)) {
            // Every key in the block is greater, or smaller.
            (Ordering::Less, _) => 0,
            (Ordering::Greater, _) => last,
            (Ordering::Equal, prefix) => {
                let (mut lo, mut hi) = (0, last);
                while lo < hi {
                    let mid = (lo + hi).div_ceil(2);
                    let less = match restarts.points.get(mid).map(|r| r.prefix.cmp(&prefix)) {
                        Some(Ordering::Less) => true,
                        Some(Ordering::Greater) => false,
                        Some(Ordering::Equal) | None => match self.block.restart_key(mid) {
                            Ok(k) => compare_internal(k, target) == Ordering::Less,
                            Err(e) => return Err(self.corrupt(e)),
                        },
                    };
                    if less {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            }
        };
        self.seek_to_restart(lo);
        while self.parse_next()? {
            if compare_internal(&self.key, target) != Ordering::Less {
                break;
            }
        }
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid {
            return self.seek_to_last();
        }
        if compare_internal(&self.key, target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    #[inline]
    fn next(&mut self) -> Result<()> {
        if self.valid {
            self.parse_next()?;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let original = self.current;
        // The last restart point before the current entry.
        let Some(ri) = self
            .block
            .restarts
            .points
            .partition_point(|r| (r.offset as usize) < original)
            .checked_sub(1)
        else {
            self.invalidate();
            return Ok(());
        };
        // Re-scan from that restart point to the entry just before `original`.
        self.seek_to_restart(ri);
        while self.parse_next()? {
            if self.next >= original {
                break;
            }
        }
        if !self.valid || self.next != original {
            let e = DecodeError {
                offset: original,
                reason: "entry chain does not reach entry",
            };
            return Err(self.corrupt(e));
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block.data.get(self.value.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, internal_key};
    use proptest::prelude::*;

    fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let k = internal_key(
                    format!("key{:05}", i / 3).as_bytes(),
                    100 - (i % 3) as u64,
                    ValueKind::Put,
                );
                (k, format!("v{i}").into_bytes())
            })
            .collect()
    }

    fn build(es: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in es {
            b.add(k, v);
        }
        Arc::new(Block::decode(b.finish()).expect("valid block"))
    }

    fn collect_fwd(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first().expect("seek");
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().expect("next");
        }
        out
    }

    #[test]
    fn roundtrip_both_directions_various_intervals() {
        for interval in [1, 2, 16, 1000] {
            let es = entries(300);
            let block = build(&es, interval);
            assert_eq!(block.num_entries(), 300);
            let mut it = block.iter();
            assert_eq!(collect_fwd(&mut it), es);
            let mut rev = Vec::new();
            it.seek_to_last().expect("seek");
            while it.valid() {
                rev.push((it.key().to_vec(), it.value().to_vec()));
                it.prev().expect("prev");
            }
            rev.reverse();
            assert_eq!(rev, es, "interval {interval}");
        }
    }

    #[test]
    fn empty_block_is_valid_and_empty() {
        let block = Arc::new(Block::decode(BlockBuilder::new(16).finish()).expect("empty"));
        let mut it = block.iter();
        it.seek_to_first().expect("ok");
        assert!(!it.valid());
        it.seek_to_last().expect("ok");
        assert!(!it.valid());
        it.seek(b"anything").expect("ok");
        assert!(!it.valid());
    }

    #[test]
    fn decode_rejects_out_of_order_and_bad_restarts() {
        let mut b = BlockBuilder::new(16);
        b.add(&internal_key(b"b", 1, ValueKind::Put), b"");
        b.add(&internal_key(b"a", 1, ValueKind::Put), b"");
        assert!(Block::decode(b.finish()).is_err());
        let mut raw = BlockBuilder::new(16);
        raw.add(&internal_key(b"a", 1, ValueKind::Put), b"x");
        let mut bytes = raw.finish();
        let n = bytes.len();
        bytes[n - 8] = 3; // restart offset inside the first entry
        assert!(Block::decode(bytes).is_err());
    }

    /// Encodes `keys` as one restart run, each sharing `cut[i]` less than it could with
    /// the previous key, so the decoder sees both maximal and lazy writers.
    fn encode_lazily(keys: &[Vec<u8>], cut: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut prev: &[u8] = &[];
        for (i, k) in keys.iter().enumerate() {
            let common = prev.iter().zip(k).take_while(|(a, b)| a == b).count();
            let shared = if i == 0 {
                0
            } else {
                common.saturating_sub(cut[i % cut.len()])
            };
            put_varint(&mut out, shared as u64);
            put_varint(&mut out, (k.len() - shared) as u64);
            put_varint(&mut out, 0);
            out.extend_from_slice(&k[shared..]);
            prev = k;
        }
        put_u32(&mut out, 0);
        put_u32(&mut out, 1);
        out
    }

    /// `seek` and `seek_for_prev` to `t` land where a scan of the sorted `es` says.
    fn check_seeks(it: &mut BlockIter, es: &[(Vec<u8>, Vec<u8>)], t: &[u8]) -> Result<(), TestCaseError> {
        let ge = es.iter().find(|(k, _)| compare_internal(k, t) != Ordering::Less);
        it.seek(t).expect("seek");
        prop_assert_eq!(it.valid().then(|| it.key().to_vec()), ge.map(|e| e.0.clone()));
        let le = es
            .iter()
            .rev()
            .find(|(k, _)| compare_internal(k, t) != Ordering::Greater);
        it.seek_for_prev(t).expect("seek_for_prev");
        prop_assert_eq!(it.valid().then(|| it.key().to_vec()), le.map(|e| e.0.clone()));
        Ok(())
    }

    proptest! {
        #[test]
        fn decode_accepts_exactly_the_strictly_ordered_runs(
            keys in proptest::collection::vec((proptest::collection::vec(0u8..3, 0..4), 0u64..3), 1..12),
            cut in proptest::collection::vec(0usize..3, 1..4),
        ) {
            let keys: Vec<Vec<u8>> = keys.iter().map(|(u, s)| internal_key(u, *s, ValueKind::Put)).collect();
            let ordered = keys.windows(2).all(|w| compare_internal(&w[0], &w[1]) == Ordering::Less);
            prop_assert_eq!(Block::decode(encode_lazily(&keys, &cut)).is_ok(), ordered);
        }

        #[test]
        fn seek_matches_model(n in 1usize..200, interval in 1usize..20, probes in proptest::collection::vec((0u32..80, 95u64..105), 1..40)) {
            let es = entries(n);
            let block = build(&es, interval);
            let mut it = block.iter();
            for (uk, seq) in probes {
                let t = internal_key(format!("key{uk:05}").as_bytes(), seq, ValueKind::Put);
                check_seeks(&mut it, &es, &t)?;
            }
        }

        /// Seeks over keys made to defeat the restart search's integers: short keys, keys
        /// that are prefixes of others, zero bytes (which padding also adds), a common
        /// prefix longer than the search keeps, and versions of one user key across
        /// restart points.
        #[test]
        fn seek_matches_model_on_prefix_heavy_keys(
            head_len in 0usize..24,
            tails in proptest::collection::btree_set(proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..12), 1..60),
            versions in 1u64..4,
            interval in 1usize..6,
            probes in proptest::collection::vec((proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..12), 0u64..6, any::<bool>()), 1..40),
        ) {
            let head = vec![7u8; head_len];
            let with_head = |t: &[u8]| [head.as_slice(), t].concat();
            let es: Vec<(Vec<u8>, Vec<u8>)> = tails
                .iter()
                .flat_map(|t| (0..versions).rev().map(move |s| (t.clone(), s + 1)))
                .map(|(t, s)| (internal_key(&with_head(&t), s, ValueKind::Put), Vec::new()))
                .collect();
            let block = build(&es, interval);
            let mut it = block.iter();
            for (tail, seq, in_head) in probes {
                // Some probes leave the common head, falling before or after the block.
                let uk = if in_head { with_head(&tail) } else { tail.clone() };
                let t = internal_key(&uk, seq, ValueKind::Put);
                check_seeks(&mut it, &es, &t)?;
            }
        }

        #[test]
        fn decode_and_iterate_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            exercise(bytes);
        }

        #[test]
        fn mutated_blocks_never_panic(n in 1usize..40, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
            let mut b = BlockBuilder::new(4);
            for (k, v) in entries(n) {
                b.add(&k, &v);
            }
            let mut bytes = b.finish();
            for (at, x) in flips {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
            exercise(bytes);
        }
    }

    /// Drives every operation over whatever decodes; only errors, never panics or hangs.
    fn exercise(bytes: Vec<u8>) {
        let Ok(block) = Block::decode(bytes) else { return };
        let block = Arc::new(block);
        let mut it = block.iter();
        let mut steps = 0;
        if it.seek_to_first().is_ok() {
            while it.valid() && it.next().is_ok() {
                steps += 1;
                assert!(steps <= block.num_entries());
            }
        }
        steps = 0;
        if it.seek_to_last().is_ok() {
            while it.valid() && it.prev().is_ok() {
                steps += 1;
                assert!(steps <= block.num_entries());
            }
        }
        let _ = it.seek(b"key00003\0\0\0\0\0\0\0\0");
        let _ = it.seek_for_prev(b"key00003\0\0\0\0\0\0\0\0");
    }
}
