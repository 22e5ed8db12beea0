//! Reads an SSTable: point lookups and a two-level (index, then data block) iterator.
//!
//! `open` reads and validates the footer and the small meta blocks (index, filter,
//! properties, range tombstones) and keeps them in memory, the index decoded into a
//! [`FenceIndex`] that seeks binary-search. Data blocks are read on demand
//! through the shared block cache, keyed by (file number, block offset); every read
//! from disk verifies the block checksum and decodes (validates) the block before it is
//! cached, so cached blocks are always well-formed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use super::block::{Block, BlockIter};
use super::bloom::{BloomFilter, KeyHash};
use super::cache::SstCache;
use super::format::{BlockHandle, FOOTER_LEN, Footer, unseal_block_owned};
use super::index::{FenceIndex, FencePointer, FenceValue};
use super::patch::{PageMap, check_within};
use super::properties::Properties;
use super::range_del::decode_range_dels;
use super::tile::{PageMeta, PageSkip, TileIndex};
use crate::codec::DecodeError;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQNO, SeqNo, TRAILER_LEN, ValueKind, compare_internal, parse_internal_key, seek_key};
use crate::range_tombstone::RangeTombstone;
use crate::sstable::cache::BlockCache;

/// A tiled table's page map as a version has it, with where its patch files are
/// opened ([`crate::sstable::patch`]).
#[derive(Clone, Copy)]
pub struct Pages<'a> {
    /// Dropped and patched pages.
    pub map: &'a PageMap,
    /// Opens patch files.
    pub patches: &'a SstCache,
}

/// How a read uses the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Look up, count the hit or miss, and cache blocks read from the file: foreground
    /// reads, whose blocks are likely to be wanted again.
    Cache,
    /// Use a cached block without promoting it and cache nothing: compaction inputs,
    /// which are about to be deleted and would only push hot blocks out.
    Bypass,
}

/// An open, validated table.
pub struct SstReader {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    number: u64,
    size: u64,
    footer: Footer,
    index: FenceIndex,
    /// Format version 4: the tile index (`index` is then empty).
    tiles: Option<TileIndex>,
    filter: Option<BloomFilter>,
    props: Properties,
    range_dels: Vec<RangeTombstone>,
    cache: Option<Arc<BlockCache>>,
    /// Seqno every entry is read with, for an ingested external file (written with
    /// seqno 0 and one entry per user key, `sstable::external`).
    global_seq: Option<SeqNo>,
}

impl std::fmt::Debug for SstReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstReader")
            .field("path", &self.path)
            .field("size", &self.size)
            .finish()
    }
}

/// Turns a decode error inside the block at `base` into a corruption error.
fn corrupt(path: &Path, base: u64, what: &str, e: DecodeError) -> Error {
    Error::corruption(
        path,
        base.saturating_add(e.offset as u64),
        format!("{what}: {}", e.reason),
    )
}

/// Names the file in an I/O error that does not already.
fn name_io(path: &Path, e: Error) -> Error {
    match e {
        Error::Io { path: None, source } => Error::io(path, source),
        e => e,
    }
}

/// Reads a block, verifies its checksum, and returns the uncompressed payload.
fn read_payload(file: &dyn RandomAccessFile, h: BlockHandle, what: &str) -> Result<Vec<u8>> {
    let path = file.path();
    let end = h.end_with_trailer().filter(|&end| end <= file.size());
    let Some(len) = end.and_then(|end| usize::try_from(end - h.offset).ok()) else {
        return Err(Error::corruption(
            path,
            h.offset,
            format!("{what}: block extends past end of file"),
        ));
    };
    let raw = file.read_at(h.offset, len).map_err(|e| name_io(path, e))?;
    unseal_block_owned(raw).map_err(|e| corrupt(path, h.offset, what, e))
}

/// Reads data block `h` of file `number` (a table or a patch file) through `cache`,
/// verifying its checksum and decoding it before it is cached.
pub(crate) fn read_block(
    file: &dyn RandomAccessFile,
    number: u64,
    cache: Option<&BlockCache>,
    h: BlockHandle,
    fill: Fill,
) -> Result<Arc<Block>> {
    let cached = cache.and_then(|c| match fill {
        Fill::Cache => c.get(number, h.offset),
        Fill::Bypass => c.peek(number, h.offset),
    });
    if let Some(b) = cached {
        return Ok(b);
    }
    let raw = read_payload(file, h, "data block")?;
    // A decompressed block's offsets are not the file's: its errors name the block.
    let compressed = raw.len() as u64 != h.size;
    let block = Block::decode(raw).map_err(|e| match compressed {
        true => Error::corruption(
            file.path(),
            h.offset,
            format!("data block (decompressed): {}", e.reason),
        ),
        false => corrupt(file.path(), h.offset, "data block", e),
    })?;
    let block = Arc::new(block.stored_compressed(compressed));
    if let (Some(c), Fill::Cache) = (cache, fill) {
        c.insert(number, h.offset, Arc::clone(&block));
    }
    Ok(block)
}

/// Decodes a version-1 or -2 index block (fence keys with [`FenceValue`]s), checking
/// that its entry counts add up to the properties' `entries`.
fn legacy_index(
    block: Arc<Block>,
    path: &Arc<Path>,
    at: u64,
    props: &Properties,
    key_budget: u64,
) -> Result<FenceIndex> {
    let mut index = FenceIndex::default();
    let mut total = 0u64;
    let mut it = BlockIter::new(block, Arc::clone(path), at);
    it.seek_to_first()?;
    while it.valid() {
        let v = FenceValue::decode(it.value()).map_err(|e| corrupt(path, at, "fence pointer", e))?;
        index
            .push(it.key(), v.handle, key_budget)
            .map_err(|reason| Error::corruption(&**path, at, reason.to_string()))?;
        total = total.saturating_add(v.entries);
        it.next()?;
    }
    if total != props.entries {
        return Err(Error::corruption(
            &**path,
            at,
            "index disagrees with the properties block".to_string(),
        ));
    }
    Ok(index)
}

/// Checks every fence pointer: ascending, disjoint, inside the data region (which ends
/// where the filter block starts), and one per data block of the properties.
fn validate_index(index: &FenceIndex, path: &Path, footer: &Footer, props: &Properties) -> Result<()> {
    let bad = |reason: &str| Error::corruption(path, footer.index.offset, reason.to_string());
    let mut prev_end = 0u64;
    for (_, h) in index.iter() {
        match h.end_with_trailer() {
            Some(end) if h.offset >= prev_end && end <= footer.filter.offset => prev_end = end,
            _ => return Err(bad("fence pointer outside the data region or out of order")),
        }
    }
    if index.len() as u64 != props.data_blocks {
        return Err(bad("index disagrees with the properties block"));
    }
    Ok(())
}

/// Checks a tile index's pages as [`validate_index`] checks fences.
fn validate_pages(tiles: &TileIndex, path: &Path, footer: &Footer, props: &Properties) -> Result<()> {
    let bad = |reason: &str| Error::corruption(path, footer.index.offset, reason.to_string());
    let mut prev_end = 0u64;
    for p in &tiles.pages {
        match p.handle.end_with_trailer() {
            Some(end) if p.handle.offset >= prev_end && end <= footer.filter.offset => prev_end = end,
            _ => return Err(bad("page outside the data region or out of order")),
        }
    }
    if tiles.pages.len() as u64 != props.data_blocks {
        return Err(bad("tile index disagrees with the properties block"));
    }
    Ok(())
}

impl SstReader {
    /// Opens table `number` stored in `file`, validating footer and meta blocks.
    pub fn open(file: Arc<dyn RandomAccessFile>, number: u64, cache: Option<Arc<BlockCache>>) -> Result<SstReader> {
        let path: Arc<Path> = Arc::from(file.path());
        let size = file.size();
        let Some(footer_at) = size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(
                &*path,
                0,
                format!("file of {size} bytes is too small for an SSTable"),
            ));
        };
        let footer_bytes = file.read_at(footer_at, FOOTER_LEN).map_err(|e| name_io(&path, e))?;
        let footer = Footer::decode(&footer_bytes, size).map_err(|e| corrupt(&path, footer_at, "footer", e))?;

        let props_raw = read_payload(&*file, footer.properties, "properties block")?;
        let props =
            Properties::decode(&props_raw).map_err(|e| corrupt(&path, footer.properties.offset, "properties", e))?;

        let filter_raw = read_payload(&*file, footer.filter, "filter block")?;
        let filter = if filter_raw.is_empty() {
            None
        } else {
            let f = BloomFilter::decode(&filter_raw).map_err(|e| corrupt(&path, footer.filter.offset, "filter", e))?;
            Some(f)
        };

        let rd_raw = read_payload(&*file, footer.range_del, "range-del block")?;
        let range_dels =
            decode_range_dels(&rd_raw).map_err(|e| corrupt(&path, footer.range_del.offset, "range-del", e))?;

        let index_raw = read_payload(&*file, footer.index, "index block")?;
        let at = footer.index.offset;
        // Every fence is at most its block's last key; and keys are in data blocks,
        // which LZ4 shrinks at most 255-fold.
        let key_budget = props.raw_key_bytes.min(footer.filter.offset.saturating_mul(256));
        if footer.version >= 4 {
            let tiles = TileIndex::decode(&index_raw).map_err(|e| corrupt(&path, at, "tile index", e))?;
            validate_pages(&tiles, &path, &footer, &props)?;
            return Ok(SstReader {
                file,
                path,
                number,
                size,
                footer,
                index: FenceIndex::default(),
                tiles: Some(tiles),
                filter,
                props,
                range_dels,
                cache,
                global_seq: None,
            });
        }
        let index = if footer.version >= 3 {
            FenceIndex::decode(&index_raw, key_budget).map_err(|e| corrupt(&path, at, "index block", e))?
        } else {
            let block = Block::decode(index_raw).map_err(|e| corrupt(&path, at, "index block", e))?;
            legacy_index(Arc::new(block), &path, at, &props, key_budget)?
        };
        validate_index(&index, &path, &footer, &props)?;
        Ok(SstReader {
            file,
            path,
            number,
            size,
            footer,
            index,
            tiles: None,
            filter,
            props,
            range_dels,
            cache,
            global_seq: None,
        })
    }

    /// Reads every entry with seqno `seq` instead of its stored one: an ingested
    /// external file (`db::ingest`), whose entries are stored with seqno 0, one per user
    /// key, and no range tombstones (`sstable::external` checks all three).
    pub fn with_global_seq(mut self, seq: Option<SeqNo>) -> SstReader {
        self.global_seq = seq;
        self
    }

    /// The seqno every entry is read with, if this is an ingested file.
    pub fn global_seq(&self) -> Option<SeqNo> {
        self.global_seq
    }

    /// Reads a data block through the cache.
    fn read_data_block(&self, h: BlockHandle, fill: Fill) -> Result<Arc<Block>> {
        read_block(&*self.file, self.number, self.cache.as_deref(), h, fill)
    }

    /// The table's properties.
    pub fn properties(&self) -> &Properties {
        &self.props
    }

    /// The table's range tombstones, sorted by `(start, end, seq)`.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_dels
    }

    /// The bloom filter, if the table has one.
    pub fn filter(&self) -> Option<&BloomFilter> {
        self.filter.as_ref()
    }

    /// The decoded footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// False only if no point entry for `user_key` is in the table.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The newest point entry for `user_key` with seqno <= `snapshot`: `(seq, kind,
    /// value)`. Range tombstones are not applied (see [`SstReader::range_tombstones`]).
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        self.get_paged(user_key, snapshot, None, true)
    }

    /// [`SstReader::get`] reading a tiled table's pages as `pages` says: dropped ones
    /// skipped, patched ones read from their patch files; without `filter`, the table's
    /// filter is not probed (a key expected to be here, `db::read::Expect`).
    pub fn get_paged(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        pages: Option<Pages<'_>>,
        filter: bool,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if filter && self.filter.is_some() {
            LOOKUP_COUNTERS.bloom_probes.fetch_add(1, AtomicOrdering::Relaxed);
            if !self.may_contain(user_key) {
                return Ok(None);
            }
        }
        let target = match self.global_seq {
            Some(g) if g > snapshot => return Ok(None),
            Some(_) => seek_key(user_key, MAX_SEQNO),
            None => seek_key(user_key, snapshot.min(MAX_SEQNO)),
        };
        // An ingested file (global seqno) is never tiled: only the engine tiles files.
        if let Some(tiles) = &self.tiles {
            return self.get_tiled(tiles, user_key, &target, pages);
        }
        let Some(handle) = self.index.handle(self.index.seek(&target)) else {
            return Ok(None);
        };
        LOOKUP_COUNTERS.pages_read.fetch_add(1, AtomicOrdering::Relaxed);
        let block = self.read_data_block(handle, Fill::Cache)?;
        let mut it = BlockIter::new(block, Arc::clone(&self.path), handle.offset);
        it.seek(&target)?;
        if !it.valid() {
            // The target lies between the block's last key and its fence key, whose user
            // key sorts strictly before the next block's: no version of `user_key` here.
            return Ok(None);
        }
        match parse_internal_key(it.key()) {
            Some(p) if p.user_key == user_key => {
                Ok(Some((self.global_seq.unwrap_or(p.seq), p.kind, it.value().to_vec())))
            }
            Some(_) => Ok(None),
            None => Err(Error::corruption(&*self.path, handle.offset, "malformed internal key")),
        }
    }

    /// [`SstReader::get`] on a tiled table: every page of the one tile that can hold
    /// the target whose fences and bloom filter admit the key is searched; the smallest
    /// key at or after the target wins (the newest visible version).
    fn get_tiled(
        &self,
        tiles: &TileIndex,
        user_key: &[u8],
        target: &[u8],
        pages: Option<Pages<'_>>,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        let mut best: Option<(Vec<u8>, Vec<u8>)> = None;
        // Hashed once for every page's filter; probes counted once per lookup.
        let mut key = KeyHash::new(user_key);
        let mut probes = 0;
        for page in tiles.tile_pages(tiles.seek(target)) {
            if pages.is_some_and(|p| p.map.is_dropped(page.handle.offset)) {
                continue;
            }
            let (may, probed) = page.may_hold(&mut key, target);
            probes += u64::from(probed);
            if !may {
                continue;
            }
            LOOKUP_COUNTERS.pages_read.fetch_add(1, AtomicOrdering::Relaxed);
            let Some((mut it, patched)) = self.open_page(page, pages, Fill::Cache)? else {
                continue;
            };
            it.seek(target)?;
            if patched && it.valid() {
                // As a scan checks every entry of a patched page (`load_tile`).
                check_within(it.key(), &page.first, &page.last, it.path(), it.base())?;
            }
            if it.valid()
                && crate::key::user_key(it.key()) == user_key
                && best
                    .as_ref()
                    .is_none_or(|(k, _)| compare_internal(it.key(), k) == std::cmp::Ordering::Less)
            {
                best = Some((it.key().to_vec(), it.value().to_vec()));
            }
        }
        LOOKUP_COUNTERS.bloom_probes.fetch_add(probes, AtomicOrdering::Relaxed);
        match best {
            None => Ok(None),
            Some((k, v)) => match parse_internal_key(&k) {
                Some(p) => Ok(Some((p.seq, p.kind, v))),
                None => Err(Error::corruption(&*self.path, 0, "malformed internal key")),
            },
        }
    }

    /// The tile index of a tiled table (format version 4).
    pub fn tiles(&self) -> Option<&TileIndex> {
        self.tiles.as_ref()
    }

    /// An unpositioned iterator over all point entries.
    pub fn iter(self: &Arc<Self>) -> SstIter {
        self.iter_with(Fill::Cache)
    }

    /// An unpositioned iterator over all point entries that reads through the block
    /// cache as `fill` says.
    pub fn iter_with(self: &Arc<Self>, fill: Fill) -> SstIter {
        SstIter {
            index: self.units(),
            table: Arc::clone(self),
            data: None,
            fill,
            // Room for a typical key, where growing from empty took two allocations.
            global_key: if self.global_seq.is_some() {
                Vec::with_capacity(64)
            } else {
                Vec::new()
            },
            skip: None,
            overlay: None,
        }
    }

    /// Like [`SstReader::iter_with`], but a tiled table's pages for which `skip` is true
    /// are never read: the iterator acts as if they were empty (compaction drops pages
    /// a secondary range delete killed whole this way).
    pub fn iter_skipping(self: &Arc<Self>, fill: Fill, skip: PageSkip) -> SstIter {
        SstIter {
            skip: Some(skip),
            ..self.iter_with(fill)
        }
    }

    /// Like [`SstReader::iter_with`], reading a tiled table's pages as `map` says
    /// (patch files opened through `patches`) and skipping those `skip` names.
    pub fn iter_paged(
        self: &Arc<Self>,
        fill: Fill,
        skip: Option<PageSkip>,
        map: Arc<PageMap>,
        patches: Arc<SstCache>,
    ) -> SstIter {
        SstIter {
            skip,
            overlay: Some((map, patches)),
            ..self.iter_with(fill)
        }
    }

    /// Units an iterator steps through: data blocks, or tiles of a tiled table.
    fn units(&self) -> usize {
        match &self.tiles {
            Some(t) => t.tiles.len(),
            None => self.index.len(),
        }
    }

    /// The first unit that can hold `target` or a key after it.
    fn seek_unit(&self, target: &[u8]) -> usize {
        match &self.tiles {
            Some(t) => t.seek(target),
            None => self.index.seek(target),
        }
    }

    /// Every fence key and block handle, in file order, borrowed from the decoded index;
    /// for a tiled table each page's last key (pages of a tile are not in key order).
    pub fn fences(&self) -> impl Iterator<Item = (&[u8], BlockHandle)> + '_ {
        let pages = self
            .tiles
            .iter()
            .flat_map(|t| t.pages.iter().map(|p| (p.last.as_slice(), p.handle)));
        self.index.iter().chain(pages)
    }

    /// Every fence pointer, in order (owned copies, for tools and tests).
    pub fn fence_pointers(&self) -> Vec<FencePointer> {
        self.fences()
            .map(|(key, handle)| FencePointer {
                key: key.to_vec(),
                handle,
            })
            .collect()
    }

    /// Heap bytes of the decoded index.
    pub fn index_memory(&self) -> usize {
        self.index.memory() + self.tiles.as_ref().map_or(0, TileIndex::memory)
    }

    /// An iterator over one data block (for tools).
    pub fn block_iter(&self, handle: BlockHandle) -> Result<BlockIter> {
        self.block_iter_with(handle, Fill::Cache)
    }

    fn block_iter_with(&self, handle: BlockHandle, fill: Fill) -> Result<BlockIter> {
        let block = self.read_data_block(handle, fill)?;
        Ok(BlockIter::new(block, Arc::clone(&self.path), handle.offset))
    }

    /// A cursor over a tiled table's `page` as `pages` says to read it: `None` if
    /// dropped, else its block (from its patch file if patched) and whether it was
    /// patched.
    pub fn open_page(
        &self,
        page: &PageMeta,
        pages: Option<Pages<'_>>,
        fill: Fill,
    ) -> Result<Option<(BlockIter, bool)>> {
        let at = page.handle.offset;
        let Some(p) = pages else {
            return Ok(Some((self.block_iter_with(page.handle, fill)?, false)));
        };
        if p.map.is_dropped(at) {
            return Ok(None);
        }
        match p.map.patch(at) {
            Some(patch) => Ok(Some((p.patches.patch(patch.file)?.page(patch.handle, fill)?, true))),
            None => Ok(Some((self.block_iter_with(page.handle, fill)?, false))),
        }
    }

    /// The file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> u64 {
        self.size
    }
}

/// Pages searched and bloom filters probed by point lookups ([`SstReader::get`]),
/// process-wide (the `lethe --kiwi` benchmark reports them per lookup).
#[derive(Debug, Default)]
pub struct LookupCounters {
    /// Pages searched.
    pub pages_read: AtomicU64,
    /// Page bloom filters probed.
    pub bloom_probes: AtomicU64,
}

/// The process-wide [`LookupCounters`].
pub static LOOKUP_COUNTERS: LookupCounters = LookupCounters {
    pages_read: AtomicU64::new(0),
    bloom_probes: AtomicU64::new(0),
};

/// The entries of one unit: a data block, or a tiled table's tile merged from its pages.
enum Unit {
    Block(BlockIter),
    Tile(TileCursor),
}

/// A tile's pages merged into key order (pages are read whole anyway, and a tile is
/// `h` pages, so materialising it is cheaper than an h-way heap per step).
struct TileCursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl TileCursor {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == std::cmp::Ordering::Less);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let n = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) != std::cmp::Ordering::Greater);
        self.pos = n.checked_sub(1).unwrap_or(self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
    }
}

impl Unit {
    fn valid(&self) -> bool {
        match self {
            Unit::Block(b) => b.valid(),
            Unit::Tile(t) => t.valid(),
        }
    }
    fn seek_to_first(&mut self) -> Result<()> {
        match self {
            Unit::Block(b) => b.seek_to_first(),
            Unit::Tile(t) => {
                t.pos = 0;
                Ok(())
            }
        }
    }
    fn seek_to_last(&mut self) -> Result<()> {
        match self {
            Unit::Block(b) => b.seek_to_last(),
            Unit::Tile(t) => {
                // An empty tile (every page skipped) stays past its end.
                t.pos = t.entries.len().saturating_sub(1);
                Ok(())
            }
        }
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        match self {
            Unit::Block(b) => b.seek(target),
            Unit::Tile(t) => {
                t.seek(target);
                Ok(())
            }
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        match self {
            Unit::Block(b) => b.seek_for_prev(target),
            Unit::Tile(t) => {
                t.seek_for_prev(target);
                Ok(())
            }
        }
    }
    fn next(&mut self) -> Result<()> {
        match self {
            Unit::Block(b) => b.next(),
            Unit::Tile(t) => {
                t.pos = (t.pos + 1).min(t.entries.len());
                Ok(())
            }
        }
    }
    fn prev(&mut self) -> Result<()> {
        match self {
            Unit::Block(b) => b.prev(),
            Unit::Tile(t) => {
                t.prev();
                Ok(())
            }
        }
    }
    fn key(&self) -> &[u8] {
        match self {
            Unit::Block(b) => b.key(),
            Unit::Tile(t) => t.entries.get(t.pos).map_or(&[], |(k, _)| k),
        }
    }
    fn value(&self) -> &[u8] {
        match self {
            Unit::Block(b) => b.value(),
            Unit::Tile(t) => t.entries.get(t.pos).map_or(&[], |(_, v)| v),
        }
    }
}

/// Two-level iterator over a table: the index picks the unit (a data block, or a tile
/// of a tiled table), the unit the entry. `index` is a unit number (`units()` when past
/// either end); `data` is `None` when unpositioned or past either end.
///
/// Over an ingested file read with a global seqno, seeks translate the target to the
/// stored keys (each user key once, at seqno 0) and `key` returns the current user key
/// with the global seqno, kept in `global_key`.
pub struct SstIter {
    table: Arc<SstReader>,
    index: usize,
    data: Option<(u64, Unit)>,
    fill: Fill,
    global_key: Vec<u8>,
    skip: Option<PageSkip>,
    /// The version's page map of the table and where its patch files are opened.
    overlay: Option<(Arc<PageMap>, Arc<SstCache>)>,
}

impl SstIter {
    /// Reads tile `i`'s pages (except those `skip` drops) and merges them, checking each
    /// page against its fences in the tile index and the merged keys' order.
    fn load_tile(&self, tiles: &TileIndex, i: usize) -> Result<TileCursor> {
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut at = 0u64;
        let pages = self.overlay.as_ref().map(|(map, patches)| Pages { map, patches });
        for page in tiles.tile_pages(i) {
            at = page.handle.offset;
            if self.skip.as_ref().is_some_and(|f| f(page)) {
                continue;
            }
            let Some((mut it, patched)) = self.table.open_page(page, pages, self.fill)? else {
                continue;
            };
            it.seek_to_first()?;
            if patched {
                // A subset of the page: each entry within its fences.
                while it.valid() {
                    check_within(it.key(), &page.first, &page.last, it.path(), it.base())?;
                    entries.push((it.key().to_vec(), it.value().to_vec()));
                    it.next()?;
                }
                continue;
            }
            let mut first = true;
            let mut last: Vec<u8> = Vec::new();
            while it.valid() {
                if first && it.key() != page.first.as_slice() {
                    return Err(Error::corruption(
                        &*self.table.path,
                        at,
                        "page disagrees with its fences",
                    ));
                }
                first = false;
                last.clear();
                last.extend_from_slice(it.key());
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.next()?;
            }
            if last != page.last {
                return Err(Error::corruption(
                    &*self.table.path,
                    at,
                    "page disagrees with its fences",
                ));
            }
        }
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        if entries
            .windows(2)
            .any(|w| compare_internal(&w[0].0, &w[1].0) != std::cmp::Ordering::Less)
        {
            return Err(Error::corruption(
                &*self.table.path,
                at,
                "a key appears in two pages of a tile",
            ));
        }
        Ok(TileCursor { entries, pos: 0 })
    }

    /// Points `data` at the unit the index is on (reusing it if already loaded).
    /// Returns false when the index is exhausted.
    fn load_block(&mut self) -> Result<bool> {
        if let Some(tiles) = &self.table.tiles {
            let Some(first) = tiles.tile_pages(self.index).first() else {
                self.data = None;
                return Ok(false);
            };
            let key = first.handle.offset;
            if self.data.as_ref().is_some_and(|(off, _)| *off == key) {
                return Ok(true);
            }
            self.data = None;
            let cursor = self.load_tile(tiles, self.index)?;
            self.data = Some((key, Unit::Tile(cursor)));
            return Ok(true);
        }
        let Some(handle) = self.table.index.handle(self.index) else {
            self.data = None;
            return Ok(false);
        };
        if self.data.as_ref().is_some_and(|(off, _)| *off == handle.offset) {
            return Ok(true);
        }
        // Cleared first so a failed load leaves the iterator invalid.
        self.data = None;
        let it = self.table.block_iter_with(handle, self.fill)?;
        self.data = Some((handle.offset, Unit::Block(it)));
        Ok(true)
    }

    /// The current data block's cursor, for a reader that steps through a block's
    /// entries itself (the one-run scan path of `db::read`), with the file's global
    /// seqno if it has one: the block holds the keys as stored (seqno 0), and each is
    /// read at that seqno. `None` on a tile. Once the cursor runs off its block's end,
    /// [`next`] moves on to the next block. Stepping the block directly leaves
    /// [`key`] stale for a file with a global seqno until the next positioning call.
    ///
    /// [`next`]: InternalIterator::next
    /// [`key`]: InternalIterator::key
    pub fn block_mut(&mut self) -> Option<(&mut BlockIter, Option<SeqNo>)> {
        match &mut self.data {
            Some((_, Unit::Block(b))) => Some((b, self.table.global_seq)),
            _ => None,
        }
    }

    fn data_mut(&mut self) -> Option<&mut Unit> {
        self.data.as_mut().map(|(_, it)| it)
    }

    fn exhausted_block(&self) -> bool {
        self.data.as_ref().is_some_and(|(_, it)| !it.valid())
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.exhausted_block() {
            self.index += 1;
            if !self.load_block()? {
                break;
            }
            if let Some(d) = self.data_mut() {
                d.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.exhausted_block() {
            // Before the first unit is past the end too.
            self.index = self.index.checked_sub(1).unwrap_or(self.table.units());
            if !self.load_block()? {
                break;
            }
            if let Some(d) = self.data_mut() {
                d.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// Runs a positioning step; an error leaves the iterator invalid.
    fn guard(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.data = None;
        }
        if let (Some(g), Some((_, it))) = (self.table.global_seq, &self.data)
            && it.valid()
        {
            let stored = it.key();
            let kind = stored.last().copied().unwrap_or(ValueKind::Put as u8);
            self.global_key.clear();
            self.global_key.extend_from_slice(crate::key::user_key(stored));
            self.global_key
                .extend_from_slice(&((g << 8) | u64::from(kind)).to_be_bytes());
        }
        r
    }

    /// With a global seqno: the trailer the current entry is read with, and its user
    /// key as stored.
    fn global_current(&self) -> Option<(&[u8], u64)> {
        let (_, it) = self.data.as_ref()?;
        if !it.valid() || self.table.global_seq.is_none() {
            return None;
        }
        let t = self.global_key.get(self.global_key.len().checked_sub(TRAILER_LEN)?..)?;
        let trailer = u64::from_be_bytes(t.try_into().ok()?);
        Some((crate::key::user_key(it.key()), trailer))
    }

    /// Runs `f` on the current unit after loading it; `data` stays `None` if the index
    /// is exhausted.
    fn position(&mut self, f: impl FnOnce(&mut Unit) -> Result<()>) -> Result<()> {
        if self.load_block()?
            && let Some(d) = self.data_mut()
        {
            f(d)?;
        }
        Ok(())
    }
}

/// Splits a seek target into user key and trailer (targets may carry kind 0xff, which
/// `parse_internal_key` refuses).
fn split_target(target: &[u8]) -> (&[u8], u64) {
    let uk = crate::key::user_key(target);
    let trailer = target
        .get(uk.len()..)
        .and_then(|t| <[u8; TRAILER_LEN]>::try_from(t).ok())
        .map_or(u64::MAX, u64::from_be_bytes);
    (uk, trailer)
}

impl SstIter {
    /// `seek` over stored keys read with a global seqno: the first stored entry of a user
    /// key >= the target's, skipped if its global version sorts before the target.
    fn seek_global(&mut self, target: &[u8]) -> Result<()> {
        let (uk, trailer) = split_target(target);
        // A scan's targets are already a user key's first entry (no copy then).
        let first_entry = (MAX_SEQNO << 8) | 0xff;
        let first: std::borrow::Cow<'_, [u8]> = if trailer == first_entry && target.len() >= TRAILER_LEN {
            target.into()
        } else {
            seek_key(uk, MAX_SEQNO).into()
        };
        self.guard(|s| {
            s.index = s.table.index.seek(&first);
            s.position(|d| d.seek(&first))?;
            s.skip_forward()
        })?;
        // Trailers sort descending: a larger one comes first.
        if let Some((cur, t)) = self.global_current()
            && cur == uk
            && t > trailer
        {
            self.next()?;
        }
        Ok(())
    }

    /// `seek_for_prev` over stored keys read with a global seqno.
    fn seek_for_prev_global(&mut self, target: &[u8]) -> Result<()> {
        let (uk, trailer) = split_target(target);
        let last = crate::key::last_key_of(uk);
        self.guard(|s| {
            let n = s.table.index.len();
            s.index = s.table.index.seek(&last).min(n.saturating_sub(1));
            s.position(|d| d.seek_for_prev(&last))?;
            s.skip_backward()
        })?;
        if let Some((cur, t)) = self.global_current()
            && cur == uk
            && t < trailer
        {
            self.prev()?;
        }
        Ok(())
    }
}

impl InternalIterator for SstIter {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|(_, it)| it.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guard(|s| {
            s.index = 0;
            s.position(|d| d.seek_to_first())?;
            s.skip_forward()
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guard(|s| {
            // An empty index leaves 0, past its end.
            s.index = s.table.units().saturating_sub(1);
            s.position(|d| d.seek_to_last())?;
            s.skip_backward()
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.table.global_seq.is_some() {
            return self.seek_global(target);
        }
        self.guard(|s| {
            s.index = s.table.seek_unit(target);
            s.position(|d| d.seek(target))?;
            s.skip_forward()
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if self.table.global_seq.is_some() {
            return self.seek_for_prev_global(target);
        }
        self.guard(|s| {
            // The first unit whose fence key is >= target holds the answer or follows it.
            let n = s.table.units();
            s.index = s.table.seek_unit(target).min(n.saturating_sub(1));
            s.position(|d| d.seek_for_prev(target))?;
            s.skip_backward()
        })
    }

    fn next(&mut self) -> Result<()> {
        self.guard(|s| {
            if let Some(d) = s.data_mut() {
                d.next()?;
            }
            s.skip_forward()
        })
    }

    fn prev(&mut self) -> Result<()> {
        self.guard(|s| {
            if let Some(d) = s.data_mut() {
                d.prev()?;
            }
            s.skip_backward()
        })
    }

    fn key(&self) -> &[u8] {
        if self.table.global_seq.is_some() && self.valid() {
            return &self.global_key;
        }
        self.data.as_ref().map_or(&[], |(_, it)| it.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, it)| it.value())
    }
}
