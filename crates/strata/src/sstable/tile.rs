//! Delete tiles (table format version 4, the KiWi layout of the Lethe article,
//! `docs/design/deletes.md`).
//!
//! A tiled table is a sequence of tiles; a tile is up to `h` consecutive data blocks
//! ("pages"). The tiles hold consecutive runs of the table's entries in internal-key
//! order, and no user key spans two tiles. Inside a tile, entries are partitioned
//! across its pages by delete key (page 0 holds the smallest delete keys) and each page
//! is an ordinary data block, sorted by internal key. Each page carries in the tile
//! index its first and last internal key, its largest seqno, its delete-key minimum
//! and maximum, whether it may be dropped whole, and its own bloom filter.
//!
//! Tile index encoding (the block the footer's index handle names in version 4):
//!
//! ```text
//! varint h ++ varint first_offset ++ varint tiles
//! per tile:  varint pages (1..=h)
//!   per page: varint size ++ bytes first ++ bytes last ++ varint max_seq ++ u8 flags
//!             [++ bytes dk_min ++ bytes dk_max  if flags & 1] ++ bytes bloom
//! ```
//!
//! `bytes` is `varint len ++ len bytes`; pages are contiguous from `first_offset` like
//! the blocks of older versions; an empty bloom means none. Flags: 1 the page has
//! entries with a delete key (`dk_min <= dk_max` over them); 2 the page is *whole*:
//! every entry is a `Put` with a delete key and the only version of its user key in the
//! file, so a secondary range delete covering `[dk_min, dk_max]` kills every entry and
//! nothing older hides behind them in the file.
//!
//! Invariants checked by [`TileIndex::decode`]: `1 <= h <= MAX_TILE_PAGES`; every page
//! has `first <= last` (valid internal keys) and 1..=h pages per tile; each tile's
//! smallest key sorts after the previous tile's largest; flag 2 implies flag 1. The
//! reader checks each page's contents against its `first`/`last` when it merges a tile.

use std::cmp::Ordering;
use std::ops::Range;

use super::bloom::{BloomBuilder, BloomFilter, BloomPolicy, KeyHash};
use super::format::BlockHandle;
use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::delete_key::DeleteKey;
use crate::key::{SeqNo, ValueKind, compare_internal, parse_internal_key, user_key};

/// Says which pages of a tiled table an iterator skips unread (compactions drop pages
/// a secondary range delete killed whole, `compaction::tiles`).
pub type PageSkip = std::sync::Arc<dyn Fn(&PageMeta) -> bool + Send + Sync>;

/// Largest number of pages per tile.
pub const MAX_TILE_PAGES: u32 = 256;

/// What the tile index records of one page.
#[derive(Debug, Clone, PartialEq)]
pub struct PageMeta {
    /// Where the page's data block is.
    pub handle: BlockHandle,
    /// Its smallest internal key.
    pub first: Vec<u8>,
    /// Its largest internal key.
    pub last: Vec<u8>,
    /// Its largest seqno.
    pub max_seq: SeqNo,
    /// The smallest and largest delete key of its entries that have one.
    pub dk: Option<(Vec<u8>, Vec<u8>)>,
    /// Every entry is a `Put` with a delete key and its user key's only version in
    /// the file (see the module docs).
    pub whole: bool,
    /// The page's bloom filter over user keys.
    pub bloom: Option<BloomFilter>,
}

impl PageMeta {
    /// True if the page may hold a version of `key`'s user key at or after `target` (an
    /// internal key of it): fences, then bloom. Returns whether the bloom was probed
    /// too.
    pub fn may_hold(&self, key: &mut KeyHash<'_>, target: &[u8]) -> (bool, bool) {
        let uk = user_key(target);
        // A lookup meets every page of its tile (a tile's pages overlap in key range),
        // so the fences are first compared by their first eight bytes, which settle
        // most pairs without a full comparison.
        let past_last = match head_order(user_key(&self.last), uk) {
            Some(o) => o == Ordering::Less,
            None => compare_internal(&self.last, target) == Ordering::Less,
        };
        let before_first = || match head_order(user_key(&self.first), uk) {
            Some(o) => o == Ordering::Greater,
            None => user_key(&self.first) > uk,
        };
        if past_last || before_first() {
            return (false, false);
        }
        match &self.bloom {
            Some(b) => (b.may_contain_key(key), true),
            None => (true, false),
        }
    }
}

/// The order of `a` and `b` when their first eight bytes differ (`None` when either is
/// shorter or those bytes are equal): big-endian words order as the bytes do.
#[inline]
fn head_order(a: &[u8], b: &[u8]) -> Option<Ordering> {
    let (x, y) = (a.first_chunk::<8>()?, b.first_chunk::<8>()?);
    (x != y).then(|| u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)))
}

/// One tile: a range of pages and its largest key.
#[derive(Debug, Clone, PartialEq)]
pub struct TileMeta {
    /// Indexes into [`TileIndex::pages`].
    pub pages: Range<usize>,
    /// The largest internal key of its pages.
    pub last: Vec<u8>,
}

/// A tiled table's index, decoded once at open.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TileIndex {
    /// Pages per tile the writer aimed for.
    pub h: u32,
    /// The tiles in key order.
    pub tiles: Vec<TileMeta>,
    /// Every page, tile by tile.
    pub pages: Vec<PageMeta>,
}

impl TileIndex {
    /// The first tile whose largest key is `>= target` (`tiles.len()` if none).
    pub fn seek(&self, target: &[u8]) -> usize {
        self.tiles
            .partition_point(|t| compare_internal(&t.last, target) == Ordering::Less)
    }

    /// The pages of tile `i` (empty past the end).
    pub fn tile_pages(&self, i: usize) -> &[PageMeta] {
        self.tiles
            .get(i)
            .and_then(|t| self.pages.get(t.pages.clone()))
            .unwrap_or(&[])
    }

    /// Heap bytes held (approximately).
    pub fn memory(&self) -> usize {
        self.pages
            .iter()
            .map(|p| {
                std::mem::size_of::<PageMeta>()
                    + p.first.len()
                    + p.last.len()
                    + p.dk.as_ref().map_or(0, |(a, b)| a.len() + b.len())
                    + p.bloom.as_ref().map_or(0, |b| (b.num_bits() / 8) as usize)
            })
            .sum::<usize>()
            + self.tiles.iter().map(|t| t.last.len() + 40).sum::<usize>()
    }

    /// Encodes the index (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, u64::from(self.h));
        put_varint(&mut out, self.pages.first().map_or(0, |p| p.handle.offset));
        put_varint(&mut out, self.tiles.len() as u64);
        for t in &self.tiles {
            put_varint(&mut out, t.pages.len() as u64);
            for p in &self.pages[t.pages.clone()] {
                put_varint(&mut out, p.handle.size);
                put_bytes(&mut out, &p.first);
                put_bytes(&mut out, &p.last);
                put_varint(&mut out, p.max_seq);
                let flags = u8::from(p.dk.is_some()) | (u8::from(p.whole && p.dk.is_some()) << 1);
                out.push(flags);
                if let Some((lo, hi)) = &p.dk {
                    put_bytes(&mut out, lo);
                    put_bytes(&mut out, hi);
                }
                put_bytes(&mut out, &p.bloom.as_ref().map(BloomFilter::encode).unwrap_or_default());
            }
        }
        out
    }

    /// Decodes and validates an index (see the module docs). Never panics.
    pub fn decode(payload: &[u8]) -> Result<TileIndex, DecodeError> {
        let mut d = Decoder::new(payload);
        let at = d.position();
        let h = d.varint()?;
        if !(1..=u64::from(MAX_TILE_PAGES)).contains(&h) {
            return Err(DecodeError {
                offset: at,
                reason: "pages per tile out of range",
            });
        }
        let h = h as u32;
        let mut offset = d.varint()?;
        let tiles = d.varint()?;
        let mut ix = TileIndex {
            h,
            ..TileIndex::default()
        };
        for _ in 0..tiles {
            let at = d.position();
            let err = |reason| DecodeError { offset: at, reason };
            let n = d.varint()?;
            if n == 0 || n > u64::from(h) {
                return Err(err("pages per tile out of range"));
            }
            let start = ix.pages.len();
            for _ in 0..n {
                let at = d.position();
                let err = |reason| DecodeError { offset: at, reason };
                let size = d.varint()?;
                let handle = BlockHandle { offset, size };
                offset = handle.end_with_trailer().ok_or_else(|| err("block handle overflows"))?;
                let first = d.length_prefixed()?.to_vec();
                let last = d.length_prefixed()?.to_vec();
                if parse_internal_key(&first).is_none() || parse_internal_key(&last).is_none() {
                    return Err(err("page fence is not an internal key"));
                }
                if compare_internal(&first, &last) == Ordering::Greater {
                    return Err(err("page fences out of order"));
                }
                let max_seq = d.varint()?;
                let flags = d.u8()?;
                if flags > 3 || flags == 2 {
                    return Err(err("bad page flags"));
                }
                let dk = if flags & 1 == 1 {
                    let lo = d.length_prefixed()?.to_vec();
                    let hi = d.length_prefixed()?.to_vec();
                    if lo > hi {
                        return Err(err("page delete keys out of order"));
                    }
                    Some((lo, hi))
                } else {
                    None
                };
                let bloom_at = d.position();
                let bloom_bytes = d.length_prefixed()?;
                let bloom = if bloom_bytes.is_empty() {
                    None
                } else {
                    Some(BloomFilter::decode(bloom_bytes).map_err(|e| DecodeError {
                        offset: bloom_at + e.offset,
                        reason: e.reason,
                    })?)
                };
                ix.pages.push(PageMeta {
                    handle,
                    first,
                    last,
                    max_seq,
                    dk,
                    whole: flags & 2 == 2,
                    bloom,
                });
            }
            let pages = &ix.pages[start..];
            let min = pages.iter().map(|p| &p.first).min_by(|a, b| compare_internal(a, b));
            let max = pages.iter().map(|p| &p.last).max_by(|a, b| compare_internal(a, b));
            let (Some(min), Some(max)) = (min, max) else {
                return Err(err("empty tile"));
            };
            if let Some(prev) = ix.tiles.last()
                && (compare_internal(&prev.last, min) != Ordering::Less || user_key(&prev.last) == user_key(min))
            {
                return Err(err("tiles out of order"));
            }
            let last = max.clone();
            ix.tiles.push(TileMeta {
                pages: start..ix.pages.len(),
                last,
            });
        }
        d.finish("trailing bytes after the tile index")?;
        Ok(ix)
    }
}

/// One page a [`partition`] chose: the tile entries it holds, in key order, and what
/// its tile-index record says.
#[derive(Debug)]
pub struct PagePlan {
    /// Indexes into the tile's entries, ascending.
    pub entries: Vec<usize>,
    /// The record, its handle left for the writer to fill.
    pub meta: PageMeta,
}

/// Splits one tile's entries (internal keys in strictly increasing order, no user key
/// shared with another tile) into at most `h` pages of about equal bytes by delete key;
/// each page lists its entries in key order. Entries without a delete key go first.
pub fn partition(
    entries: &[(Vec<u8>, Vec<u8>)],
    h: usize,
    dk: Option<&DeleteKey>,
    bloom: Option<BloomPolicy>,
) -> Vec<PagePlan> {
    let n = entries.len();
    if n == 0 {
        return Vec::new();
    }
    let parsed: Vec<_> = entries.iter().map(|(k, _)| parse_internal_key(k)).collect();
    let key_of = |i: usize| -> Option<&[u8]> {
        match parsed[i] {
            Some(p) if p.kind == ValueKind::Put => dk.and_then(|d| d.of(&entries[i].1)),
            _ => None,
        }
    };
    let single: Vec<bool> = (0..n)
        .map(|i| {
            let uk = user_key(&entries[i].0);
            let prev = i.checked_sub(1).is_some_and(|j| user_key(&entries[j].0) == uk);
            let next = entries.get(i + 1).is_some_and(|(k, _)| user_key(k) == uk);
            !prev && !next
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    // Entries without a delete key first, then by delete key; key order breaks ties.
    order.sort_by(|&a, &b| key_of(a).cmp(&key_of(b)).then(a.cmp(&b)));
    let size = |i: usize| entries[i].0.len() + entries[i].1.len() + 3;
    let total: usize = (0..n).map(size).sum();
    let pages = h.clamp(1, n);
    let mut plans = Vec::with_capacity(pages);
    let mut cur: Vec<usize> = Vec::new();
    let mut acc = 0usize;
    for (pos, &i) in order.iter().enumerate() {
        cur.push(i);
        acc += size(i);
        let made = plans.len() + 1;
        let left_entries = n - pos - 1;
        let left_pages = pages - made;
        // Cut at each 1/pages of the bytes, keeping an entry for every page left.
        if made < pages && (acc * pages >= total * made || left_entries == left_pages) {
            plans.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        plans.push(cur);
    }
    plans
        .into_iter()
        .map(|mut idx| {
            idx.sort_unstable();
            let first = entries[idx[0]].0.clone();
            let last = entries[idx[idx.len() - 1]].0.clone();
            let mut dk_range: Option<(Vec<u8>, Vec<u8>)> = None;
            let mut whole = true;
            let mut max_seq = 0;
            let mut bb = bloom.map(BloomBuilder::new);
            let mut prev_uk: Option<&[u8]> = None;
            for &i in &idx {
                max_seq = max_seq.max(parsed[i].map_or(0, |p| p.seq));
                let uk = user_key(&entries[i].0);
                if prev_uk != Some(uk)
                    && let Some(b) = &mut bb
                {
                    b.add_key(uk);
                }
                prev_uk = Some(uk);
                match key_of(i) {
                    Some(k) => {
                        dk_range = Some(match dk_range.take() {
                            None => (k.to_vec(), k.to_vec()),
                            Some((lo, hi)) => (lo.min(k.to_vec()), hi.max(k.to_vec())),
                        });
                        whole &= single[i];
                    }
                    None => whole = false,
                }
            }
            let whole = whole && dk_range.is_some();
            PagePlan {
                meta: PageMeta {
                    handle: BlockHandle::default(),
                    first,
                    last,
                    max_seq,
                    dk: dk_range,
                    whole,
                    bloom: bb.map(BloomBuilder::finish),
                },
                entries: idx,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;
    use proptest::prelude::*;

    /// The eight-byte shortcut of the fence checks orders keys as their bytes do, and
    /// answers only when those eight bytes settle it.
    #[test]
    fn head_order_agrees_with_byte_order() {
        let keys: [&[u8]; 8] = [
            b"",
            b"a",
            b"abcdefgh",
            b"abcdefgi",
            b"abcdefgh\x00",
            b"abcdefghz",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"b\x00\x00\x00\x00\x00\x00\x01",
        ];
        let mut settled = 0;
        for a in keys {
            for b in keys {
                if let Some(o) = head_order(a, b) {
                    assert_eq!(o, a.cmp(b), "{a:?} {b:?}");
                    settled += 1;
                }
            }
        }
        assert_eq!(head_order(b"abcdefgh", b"abcdefghz"), None);
        assert!(settled >= 12);
    }

    fn put(k: &str, seq: u64, dk: u8) -> (Vec<u8>, Vec<u8>) {
        (internal_key(k.as_bytes(), seq, ValueKind::Put), vec![dk, b'v'])
    }

    #[test]
    fn partition_groups_by_delete_key_and_sorts_pages_by_key() {
        let dk = DeleteKey { offset: 0, width: 1 };
        let entries: Vec<_> = (0..16u8).map(|i| put(&format!("k{i:02}"), 1, (i * 7) % 16)).collect();
        let plans = partition(&entries, 4, Some(&dk), BloomPolicy::from_fpr(0.01));
        assert_eq!(plans.len(), 4);
        let mut seen = 0;
        let mut prev_hi: Option<Vec<u8>> = None;
        for p in &plans {
            assert!(p.entries.windows(2).all(|w| w[0] < w[1]), "pages in key order");
            let (lo, hi) = p.meta.dk.clone().expect("every entry has a delete key");
            assert!(prev_hi.as_ref().is_none_or(|h| *h < lo), "pages split by delete key");
            prev_hi = Some(hi);
            assert!(p.meta.whole);
            seen += p.entries.len();
            for &i in &p.entries {
                let uk = user_key(&entries[i].0);
                assert!(p.meta.bloom.as_ref().expect("bloom").may_contain(uk));
            }
        }
        assert_eq!(seen, 16);
        // h = 1 is one page in key order.
        let one = partition(&entries, 1, Some(&dk), None);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].entries, (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn tombstones_and_versions_make_pages_partial() {
        let dk = DeleteKey { offset: 0, width: 1 };
        let entries = vec![
            put("a", 5, 1),
            put("a", 4, 1),
            (internal_key(b"b", 3, ValueKind::Delete), vec![]),
        ];
        let plans = partition(&entries, 1, Some(&dk), None);
        assert!(!plans[0].meta.whole);
        assert_eq!(plans[0].meta.max_seq, 5);
    }

    fn index_of(plans: Vec<PagePlan>) -> TileIndex {
        let mut ix = TileIndex {
            h: 4,
            ..TileIndex::default()
        };
        let mut off = 0;
        let start = 0;
        for mut p in plans {
            p.meta.handle = BlockHandle { offset: off, size: 10 };
            off += 15;
            ix.pages.push(p.meta);
        }
        let last = ix
            .pages
            .iter()
            .map(|p| p.last.clone())
            .max_by(|a, b| compare_internal(a, b));
        ix.tiles.push(TileMeta {
            pages: start..ix.pages.len(),
            last: last.expect("pages"),
        });
        ix
    }

    #[test]
    fn index_roundtrips_and_rejects_damage() {
        let dk = DeleteKey { offset: 0, width: 1 };
        let entries: Vec<_> = (0..8u8).map(|i| put(&format!("k{i}"), 1, 8 - i)).collect();
        let ix = index_of(partition(&entries, 4, Some(&dk), BloomPolicy::from_fpr(0.01)));
        let bytes = ix.encode();
        assert_eq!(TileIndex::decode(&bytes), Ok(ix.clone()));
        assert_eq!(ix.seek(&internal_key(b"k3", 9, ValueKind::Put)), 0);
        assert_eq!(ix.seek(&internal_key(b"k9", 9, ValueKind::Put)), 1);
        // h out of range.
        let mut bad = bytes.clone();
        bad[0] = 0;
        assert!(TileIndex::decode(&bad).is_err());
        // Truncation anywhere is an error, not a panic.
        for n in 0..bytes.len() {
            assert!(TileIndex::decode(&bytes[..n]).is_err(), "truncated at {n} accepted");
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = TileIndex::decode(&bytes);
        }

        #[test]
        fn partition_keeps_every_entry_once(dks in proptest::collection::vec(any::<u8>(), 1..60), h in 1usize..9) {
            let dk = DeleteKey { offset: 0, width: 1 };
            let entries: Vec<_> = dks.iter().enumerate().map(|(i, &d)| put(&format!("k{i:03}"), 1, d)).collect();
            let plans = partition(&entries, h, Some(&dk), None);
            prop_assert!(plans.len() <= h && !plans.is_empty());
            let mut all: Vec<usize> = plans.iter().flat_map(|p| p.entries.clone()).collect();
            all.sort_unstable();
            prop_assert_eq!(all, (0..entries.len()).collect::<Vec<_>>());
        }
    }
}
