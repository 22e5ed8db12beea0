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

use super::block::{Block, BlockIter};
use super::bloom::BloomFilter;
use super::format::{BlockHandle, FOOTER_LEN, Footer, unseal_block_owned};
use super::index::{FenceIndex, FencePointer, FenceValue};
use super::properties::Properties;
use super::range_del::decode_range_dels;
use crate::codec::DecodeError;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQNO, SeqNo, ValueKind, parse_internal_key, seek_key};
use crate::range_tombstone::RangeTombstone;
use crate::sstable::cache::BlockCache;

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
    filter: Option<BloomFilter>,
    props: Properties,
    range_dels: Vec<RangeTombstone>,
    cache: Option<Arc<BlockCache>>,
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
            filter,
            props,
            range_dels,
            cache,
        })
    }

    /// Reads a data block through the cache.
    fn read_data_block(&self, h: BlockHandle, fill: Fill) -> Result<Arc<Block>> {
        let cached = self.cache.as_ref().and_then(|c| match fill {
            Fill::Cache => c.get(self.number, h.offset),
            Fill::Bypass => c.peek(self.number, h.offset),
        });
        if let Some(b) = cached {
            return Ok(b);
        }
        let raw = read_payload(&*self.file, h, "data block")?;
        let block = Arc::new(Block::decode(raw).map_err(|e| corrupt(&self.path, h.offset, "data block", e))?);
        if let (Some(c), Fill::Cache) = (&self.cache, fill) {
            c.insert(self.number, h.offset, Arc::clone(&block));
        }
        Ok(block)
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
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let target = seek_key(user_key, snapshot.min(MAX_SEQNO));
        let Some(handle) = self.index.handle(self.index.seek(&target)) else {
            return Ok(None);
        };
        let block = self.read_data_block(handle, Fill::Cache)?;
        let mut it = BlockIter::new(block, Arc::clone(&self.path), handle.offset);
        it.seek(&target)?;
        if !it.valid() {
            // The target lies between the block's last key and its fence key, whose user
            // key sorts strictly before the next block's: no version of `user_key` here.
            return Ok(None);
        }
        match parse_internal_key(it.key()) {
            Some(p) if p.user_key == user_key => Ok(Some((p.seq, p.kind, it.value().to_vec()))),
            Some(_) => Ok(None),
            None => Err(Error::corruption(&*self.path, handle.offset, "malformed internal key")),
        }
    }

    /// An unpositioned iterator over all point entries.
    pub fn iter(self: &Arc<Self>) -> SstIter {
        self.iter_with(Fill::Cache)
    }

    /// An unpositioned iterator over all point entries that reads through the block
    /// cache as `fill` says.
    pub fn iter_with(self: &Arc<Self>, fill: Fill) -> SstIter {
        SstIter {
            index: self.index.len(),
            table: Arc::clone(self),
            data: None,
            fill,
        }
    }

    /// Every fence key and block handle, in order, borrowed from the decoded index.
    pub fn fences(&self) -> impl Iterator<Item = (&[u8], BlockHandle)> + '_ {
        self.index.iter()
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
        self.index.memory()
    }

    /// An iterator over one data block (for tools).
    pub fn block_iter(&self, handle: BlockHandle) -> Result<BlockIter> {
        self.block_iter_with(handle, Fill::Cache)
    }

    fn block_iter_with(&self, handle: BlockHandle, fill: Fill) -> Result<BlockIter> {
        let block = self.read_data_block(handle, fill)?;
        Ok(BlockIter::new(block, Arc::clone(&self.path), handle.offset))
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

/// Two-level iterator over a table: the index picks the block, the block iterator the
/// entry. `index` is a block number (`len()` when past either end); `data` is `None`
/// when unpositioned or past either end.
pub struct SstIter {
    table: Arc<SstReader>,
    index: usize,
    data: Option<(u64, BlockIter)>,
    fill: Fill,
}

impl SstIter {
    /// Points `data` at the block the index is on (reusing it if already loaded).
    /// Returns false when the index is exhausted.
    fn load_block(&mut self) -> Result<bool> {
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
        self.data = Some((handle.offset, it));
        Ok(true)
    }

    fn data_mut(&mut self) -> Option<&mut BlockIter> {
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
            // Before the first block is past the end too.
            self.index = self.index.checked_sub(1).unwrap_or(self.table.index.len());
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
        r
    }

    /// Runs `f` on the current block after loading it; `data` stays `None` if the index
    /// is exhausted.
    fn position(&mut self, f: impl FnOnce(&mut BlockIter) -> Result<()>) -> Result<()> {
        if self.load_block()?
            && let Some(d) = self.data_mut()
        {
            f(d)?;
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
            s.index = s.table.index.len().saturating_sub(1);
            s.position(|d| d.seek_to_last())?;
            s.skip_backward()
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guard(|s| {
            s.index = s.table.index.seek(target);
            s.position(|d| d.seek(target))?;
            s.skip_forward()
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.guard(|s| {
            // The first block whose fence key is >= target holds the answer or follows it.
            let n = s.table.index.len();
            s.index = s.table.index.seek(target).min(n.saturating_sub(1));
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
        self.data.as_ref().map_or(&[], |(_, it)| it.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, it)| it.value())
    }
}
