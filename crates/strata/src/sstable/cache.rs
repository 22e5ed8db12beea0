//! Caches shared by all SSTable readers: decoded data blocks, bounded by bytes
//! ([`BlockCache`]), and open SSTables, bounded by count ([`SstCache`]).
//!
//! Both are sharded `quick_cache` caches (CLOCK-Pro-like eviction), safe to share
//! between threads. Blocks are keyed by (file number, block offset); file numbers are
//! never reused, so a deleted file's blocks can only age out, never be served wrongly.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::error::Result;
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::sstable::patch::{PatchReader, patch_file_name};
use crate::sstable::{Block, SstReader, sst_file_name};

/// Charges each block its memory footprint.
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        // Zero-weight items are never evicted, so charge at least 1.
        block.charge().max(1) as u64
    }
}

/// Assumed average block charge, only used to size the cache's shards.
const TYPICAL_BLOCK_BYTES: u64 = 4096;

/// A byte-bounded cache of decoded blocks keyed by (file number, block offset).
pub struct BlockCache {
    /// `None` when the capacity is 0 (caching disabled).
    inner: Option<Cache<(u64, u64), Arc<Block>, BlockWeighter>>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    warmed: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage_bytes())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks; 0 disables caching.
    pub fn new(capacity_bytes: usize) -> Self {
        let capacity = capacity_bytes as u64;
        let inner = (capacity > 0).then(|| {
            let items = (capacity / TYPICAL_BLOCK_BYTES).max(1) as usize;
            Cache::with_weighter(items, capacity, BlockWeighter)
        });
        BlockCache {
            inner,
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            warmed: AtomicU64::new(0),
        }
    }

    /// The cached block at `offset` of file `file`, counting a hit or a miss.
    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self.inner.as_ref().and_then(|c| c.get(&(file, offset)));
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// The cached block at `offset` of file `file`, without counting the lookup or
    /// making the block any less likely to be evicted.
    pub fn peek(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        self.inner.as_ref().and_then(|c| c.peek(&(file, offset)))
    }

    /// True when the block at `offset` of file `file` is cached (not counted, no effect
    /// on eviction).
    pub fn contains(&self, file: u64, offset: u64) -> bool {
        self.inner.as_ref().is_some_and(|c| c.contains_key(&(file, offset)))
    }

    /// Caches a block no reader asked for yet (a compaction output block whose keys
    /// were cached in its inputs), counting it.
    pub fn warm(&self, file: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.inner {
            self.warmed.fetch_add(1, Ordering::Relaxed);
            c.insert((file, offset), block);
            // A new block enters the cache's cold ring, where a compaction's worth of
            // them would push one another out before any reader came; one reference
            // lets it be promoted over the unreferenced (dead input) blocks instead.
            let _ = c.get(&(file, offset));
        }
    }

    /// Caches a block (a block larger than a cache shard is not admitted).
    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.inner {
            c.insert((file, offset), block);
        }
    }

    /// Bytes currently charged.
    pub fn usage_bytes(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.weight())
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Blocks cached.
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |c| c.len())
    }

    /// True when no block is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Blocks cached by [`warm`](Self::warm).
    pub fn warmed(&self) -> u64 {
        self.warmed.load(Ordering::Relaxed)
    }
}

/// Keeps up to `max_open` tables open, opening `dir/<number:06>.sst` on demand, and up
/// to a quarter as many page patch files (`dir/<number:06>.patch`).
pub struct SstCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    block_cache: Option<Arc<BlockCache>>,
    /// `None` when `max_open` is 0: every `get` opens the file afresh.
    tables: Option<Cache<u64, Arc<SstReader>>>,
    /// Open patch files ([`crate::sstable::patch`]), at most a quarter of `max_open`
    /// (each holds a file descriptor); `None` when `max_open` is 0.
    patches: Option<Cache<u64, Arc<PatchReader>>>,
}

impl std::fmt::Debug for SstCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstCache")
            .field("dir", &self.dir)
            .field("open", &self.len())
            .finish()
    }
}

impl SstCache {
    /// A cache of tables in `dir`, reading data blocks through `block_cache`.
    pub fn new(fs: Arc<dyn FileSystem>, dir: PathBuf, max_open: usize, block_cache: Option<Arc<BlockCache>>) -> Self {
        SstCache {
            fs,
            dir,
            block_cache,
            tables: (max_open > 0).then(|| Cache::new(max_open)),
            patches: (max_open > 0).then(|| Cache::new((max_open / 4).max(1))),
        }
    }

    /// The open patch file `number`, opening it on a miss.
    pub fn patch(&self, number: u64) -> Result<Arc<PatchReader>> {
        let open = || -> Result<Arc<PatchReader>> {
            let file = self.fs.open(&self.dir.join(patch_file_name(number)))?;
            Ok(Arc::new(PatchReader::new(file, number, self.block_cache.clone())))
        };
        match &self.patches {
            Some(c) => c.get_or_insert_with(&number, open),
            None => open(),
        }
    }

    /// Forgets patch file `number` (before its file is deleted).
    pub fn evict_patch(&self, number: u64) {
        if let Some(c) = &self.patches {
            c.remove(&number);
        }
    }

    fn open(&self, number: u64, global_seq: Option<SeqNo>) -> Result<Arc<SstReader>> {
        let file = self.fs.open(&self.dir.join(sst_file_name(number)))?;
        let reader = SstReader::open(file, number, self.block_cache.clone())?;
        Ok(Arc::new(reader.with_global_seq(global_seq)))
    }

    /// The open table `number`, opening (and validating) it on a miss; an ingested file
    /// is read with its `global_seq` (`FileMeta::global_seq`). Concurrent misses for one
    /// number open the file once.
    pub fn get(&self, number: u64, global_seq: Option<SeqNo>) -> Result<Arc<SstReader>> {
        match &self.tables {
            Some(c) => c.get_or_insert_with(&number, || self.open(number, global_seq)),
            None => self.open(number, global_seq),
        }
    }

    /// Forgets table `number` (e.g. before its file is deleted). Readers holding it
    /// keep it open until they drop it.
    pub fn evict(&self, number: u64) {
        if let Some(c) = &self.tables {
            c.remove(&number);
        }
    }

    /// Tables currently open in the cache.
    pub fn len(&self) -> usize {
        self.tables.as_ref().map_or(0, |c| c.len())
    }

    /// True when no table is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The block cache tables read through.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use crate::key::{ValueKind, internal_key};
    use crate::sstable::block::BlockBuilder;
    use crate::sstable::{SstOptions, SstWriter};

    fn block(n: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        for i in 0..n {
            b.add(
                &internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Put),
                &[7u8; 20],
            );
        }
        Arc::new(Block::decode(b.finish()).expect("block"))
    }

    #[test]
    fn block_cache_respects_byte_capacity() {
        let cap = 1 << 20;
        let cache = BlockCache::new(cap);
        let b = block(100);
        assert!(b.charge() > 3000);
        for i in 0..2000u64 {
            cache.insert(i % 7, i * 4096, Arc::clone(&b));
            assert!(
                cache.usage_bytes() <= cap as u64,
                "usage {} after {i}",
                cache.usage_bytes()
            );
        }
        // Most of the capacity is in use, not a token amount.
        assert!(cache.usage_bytes() > cap as u64 / 2);
        assert!(cache.len() < 2000);
        assert!(cache.get(1999 % 7, 1999 * 4096).is_some());
        assert!(cache.get(99, 0).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
    }

    #[test]
    fn zero_capacity_disables_block_cache() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block(3));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage_bytes(), 0);
        assert_eq!(cache.misses(), 1);
    }

    fn write_table(dir: &std::path::Path, number: u64) {
        let path = dir.join(sst_file_name(number));
        let file = RealFs.create(&path).expect("create");
        let mut b = SstWriter::new(file, path, SstOptions::default());
        b.add(
            &internal_key(format!("key{number}").as_bytes(), number, ValueKind::Put),
            b"v",
        )
        .expect("add");
        b.finish().expect("finish");
    }

    #[test]
    fn table_cache_bounds_open_tables_and_reuses_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        for n in 1..=6 {
            write_table(dir.path(), n);
        }
        let blocks = Arc::new(BlockCache::new(1 << 20));
        let tc = SstCache::new(Arc::new(RealFs), dir.path().to_path_buf(), 2, Some(blocks));
        let t1 = tc.get(1, None).expect("open 1");
        assert!(Arc::ptr_eq(&t1, &tc.get(1, None).expect("cached 1")));
        assert_eq!(t1.path(), dir.path().join("000001.sst"));
        for n in 1..=6 {
            let t = tc.get(n, None).expect("open");
            assert_eq!(t.number(), n);
            assert!(t.get(format!("key{n}").as_bytes(), n).expect("get").is_some());
            assert!(tc.len() <= 2, "{} tables open", tc.len());
        }
        tc.evict(6);
        assert!(tc.len() <= 1);
        let err = tc.get(42, None).expect_err("missing file");
        assert!(!err.is_corruption());
        let uncached = SstCache::new(Arc::new(RealFs), dir.path().to_path_buf(), 0, None);
        assert!(uncached.get(3, None).is_ok());
        assert_eq!(uncached.len(), 0);
    }
}
