//! Keeping the block cache warm across a compaction.
//!
//! A compaction replaces its inputs with new files whose blocks no reader has cached
//! yet, so without help every hot key's next read after a compaction goes to the file:
//! a latency spike after each compaction, and a steady one under delete-driven (FADE)
//! compactions that rewrite files every few seconds. Before the merge, the job notes
//! the user-key ranges of the input data blocks that are cached ([`HotRanges`]); each
//! output data block whose keys overlap one of them is decoded and cached as it is
//! written ([`CacheWarmer`]). Cold ranges stay cold, so a compaction caches about as
//! many bytes as its inputs had cached, and the inputs' blocks age out once the files
//! are gone (file numbers are never reused).

use std::sync::Arc;

use crate::error::Result;
use crate::key::user_key;
use crate::sstable::cache::BlockCache;
use crate::sstable::{Block, DataBlockObserver, SstReader};

/// Disjoint, sorted, inclusive user-key ranges whose blocks were cached.
#[derive(Debug, Default)]
pub struct HotRanges {
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl HotRanges {
    /// The key ranges of the data blocks of `tables` that `cache` holds now. A block's
    /// range runs from the previous block's fence key (its first key is not stored) to
    /// its own, at or past its last key, so it may be a little wider than the block.
    pub fn of_inputs<'a>(tables: impl IntoIterator<Item = &'a SstReader>, cache: &BlockCache) -> Result<HotRanges> {
        let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for t in tables {
            if let Some(tiles) = t.tiles() {
                for p in &tiles.pages {
                    if cache.contains(t.number(), p.handle.offset) {
                        ranges.push((user_key(&p.first).to_vec(), user_key(&p.last).to_vec()));
                    }
                }
                continue;
            }
            let mut lo = t.properties().smallest_user_key.clone();
            for (fence, handle) in t.fences() {
                let hi = user_key(fence).to_vec();
                if cache.contains(t.number(), handle.offset) {
                    ranges.push((lo, hi.clone()));
                }
                lo = hi;
            }
        }
        ranges.sort();
        let mut merged: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => {
                    if hi > last.1 {
                        last.1 = hi;
                    }
                }
                _ => merged.push((lo, hi)),
            }
        }
        Ok(HotRanges { ranges: merged })
    }

    /// True when some range meets `first..=last`.
    pub fn overlaps(&self, first: &[u8], last: &[u8]) -> bool {
        let i = self.ranges.partition_point(|(_, hi)| hi.as_slice() < first);
        self.ranges.get(i).is_some_and(|(lo, _)| lo.as_slice() <= last)
    }

    /// True when no input block was cached.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Caches the data blocks of output file `number` that overlap hot input ranges.
pub struct CacheWarmer {
    cache: Arc<BlockCache>,
    number: u64,
    hot: Arc<HotRanges>,
}

impl CacheWarmer {
    /// A warmer for output file `number`.
    pub fn new(cache: Arc<BlockCache>, number: u64, hot: Arc<HotRanges>) -> Self {
        CacheWarmer { cache, number, hot }
    }
}

impl DataBlockObserver for CacheWarmer {
    fn data_block(&mut self, offset: u64, first: &[u8], last: &[u8], payload: Vec<u8>) {
        if !self.hot.overlaps(first, last) {
            return;
        }
        // The builder just encoded this payload, so it decodes; if it somehow did not,
        // a reader would report the corruption when it reads the block from the file.
        if let Ok(b) = Block::decode(payload) {
            self.cache.warm(self.number, offset, Arc::new(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot(ranges: &[(&str, &str)]) -> HotRanges {
        HotRanges {
            ranges: ranges
                .iter()
                .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn overlap_is_inclusive_at_both_ends_and_misses_the_gaps() {
        let h = hot(&[("c", "e"), ("m", "p")]);
        assert!(h.overlaps(b"a", b"c"));
        assert!(h.overlaps(b"e", b"f"));
        assert!(h.overlaps(b"d", b"d"));
        assert!(h.overlaps(b"f", b"z"));
        assert!(!h.overlaps(b"a", b"b"));
        assert!(!h.overlaps(b"f", b"l"));
        assert!(!h.overlaps(b"q", b"z"));
        assert!(!HotRanges::default().overlaps(b"a", b"z"));
    }
}
