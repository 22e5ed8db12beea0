//! Writes one SSTable from entries given in strictly increasing internal-key order.
//!
//! Data blocks are cut when they reach `block_size`; each cut adds a fence pointer to
//! the index once the next block's first key is known (its fence key lies between).
//! `finish` appends the filter, range-del, properties and index blocks and the footer,
//! in that order, then syncs. After any error the builder must be dropped (the
//! file is then garbage for the caller to delete).

use std::cmp::Ordering;
use std::path::PathBuf;

use super::block::{BlockBuilder, DEFAULT_RESTART_INTERVAL};
use super::bloom::{BloomBuilder, BloomPolicy};
use super::format::{BlockHandle, Compression, Footer, seal_block};
use super::index::{IndexBuilder, separator};
use super::properties::Properties;
use super::range_del::encode_range_dels;
use super::tile::{MAX_TILE_PAGES, TileIndex, TileMeta, partition};
use crate::delete_key::DeleteKey;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{ValueKind, compare_internal, parse_internal_key, user_key};
use crate::range_tombstone::RangeTombstone;

/// Largest key or value accepted: block offsets are u32, so an entry must leave room.
const MAX_ENTRY_PART: usize = 1 << 30;

/// How tables are written.
#[derive(Debug, Clone, PartialEq)]
pub struct SstOptions {
    /// Target uncompressed size of a data block in bytes.
    pub block_size: usize,
    /// Entries between restart points inside a block.
    pub restart_interval: usize,
    /// Target bloom false-positive rate; 0 or >= 1 writes no filter.
    pub bloom_fpr: f64,
    /// What the table's filter holds of each key (tiles' page filters hold whole keys).
    pub filter_key: super::bloom::FilterKey,
    /// Compression of data blocks (meta blocks are never compressed).
    pub compression: Compression,
    /// Creation time recorded in the properties (caller's clock).
    pub created_at: u64,
    /// `Some` writes delete tiles (format version 4, [`super::tile`]); `None` writes
    /// version 3.
    pub tiles: Option<TileOptions>,
}

/// How a tiled table (format version 4) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileOptions {
    /// Pages per tile, 1..=[`MAX_TILE_PAGES`] (a value outside is clamped into it); 1
    /// keeps every page in key order.
    pub h: u32,
    /// The delete key pages are partitioned by (`None`: key order only).
    pub delete_key: Option<DeleteKey>,
}

impl Default for SstOptions {
    fn default() -> Self {
        SstOptions {
            block_size: 8192,
            restart_interval: DEFAULT_RESTART_INTERVAL,
            bloom_fpr: 0.01,
            filter_key: super::bloom::FilterKey::Whole,
            compression: Compression::None,
            created_at: 0,
            tiles: None,
        }
    }
}

/// Sees each data block as it is written (compaction uses it to keep the block cache
/// warm, see `compaction::warm`).
pub trait DataBlockObserver: Send {
    /// The block at `offset` holds user keys `first..=last`; `payload` is its
    /// uncompressed contents, as a reader decodes them (handed over: the builder is done
    /// with it).
    fn data_block(&mut self, offset: u64, first: &[u8], last: &[u8], payload: Vec<u8>);
}

/// Builds one table file.
pub struct SstWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: SstOptions,
    data: BlockBuilder,
    index: IndexBuilder,
    bloom: Option<BloomBuilder>,
    last_key: Vec<u8>,
    props: Properties,
    range_dels: Vec<RangeTombstone>,
    tombstone_time: Option<u64>,
    offset: u64,
    observer: Option<Box<dyn DataBlockObserver>>,
    /// User key of the first entry of the block being filled (only kept for `observer`).
    block_first: Vec<u8>,
    /// The last block cut, waiting for the next key to choose its fence key.
    pending_fence: Option<BlockHandle>,
    /// Tiled tables: the tile being filled, its bytes, and the index so far.
    tile: Vec<(Vec<u8>, Vec<u8>)>,
    tile_bytes: usize,
    tile_index: TileIndex,
}

impl SstWriter {
    /// Starts a table in `file` (named `path` in errors).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, mut opts: SstOptions) -> Self {
        let offset = file.len();
        // Clamped once, so tiles are cut as the index records them.
        if let Some(t) = opts.tiles.as_mut() {
            t.h = t.h.clamp(1, MAX_TILE_PAGES);
        }
        let h = opts.tiles.map_or(1, |t| t.h);
        SstWriter {
            data: BlockBuilder::new(opts.restart_interval),
            index: IndexBuilder::new(),
            // Tiled tables filter per page (see `flush_tile`).
            bloom: BloomPolicy::from_fpr(opts.bloom_fpr)
                .filter(|_| opts.tiles.is_none())
                .map(|p| BloomBuilder::with_key(p, opts.filter_key)),
            last_key: Vec::new(),
            props: Properties {
                created_at: opts.created_at,
                ..Properties::default()
            },
            range_dels: Vec::new(),
            tombstone_time: None,
            file,
            path,
            opts,
            offset,
            observer: None,
            block_first: Vec::new(),
            pending_fence: None,
            tile: Vec::new(),
            tile_bytes: 0,
            tile_index: TileIndex {
                h,
                ..TileIndex::default()
            },
        }
    }

    /// Shows every data block written from now on to `observer`.
    pub fn observe_data_blocks(&mut self, observer: Box<dyn DataBlockObserver>) {
        self.observer = Some(observer);
    }

    /// Appends an entry. REQUIRES: `ikey` is a valid internal key greater than every key
    /// added before; otherwise returns [`Error::InvalidArgument`] and adds nothing.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let Some(parsed) = parse_internal_key(ikey) else {
            return Err(Error::InvalidArgument("malformed internal key".into()));
        };
        if self.props.entries > 0 && compare_internal(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::InvalidArgument("table keys must be strictly increasing".into()));
        }
        if ikey.len() > MAX_ENTRY_PART || value.len() > MAX_ENTRY_PART {
            return Err(Error::InvalidArgument(
                "key or value too large for a table block".into(),
            ));
        }
        let new_user_key = self.props.entries == 0 || user_key(&self.last_key) != parsed.user_key;
        if new_user_key && let Some(b) = &mut self.bloom {
            b.add_key(parsed.user_key);
        }
        let p = &mut self.props;
        if p.entries == 0 {
            p.smallest_user_key = parsed.user_key.to_vec();
            (p.min_seq, p.max_seq) = (parsed.seq, parsed.seq);
        }
        if new_user_key {
            p.largest_user_key = parsed.user_key.to_vec();
        }
        p.entries += 1;
        match parsed.kind {
            ValueKind::Put => p.puts += 1,
            ValueKind::Delete => p.deletes += 1,
            ValueKind::DeferredDelete => p.deferred_deletes += 1,
        }
        p.min_seq = p.min_seq.min(parsed.seq);
        p.max_seq = p.max_seq.max(parsed.seq);
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        if let Some(t) = self.opts.tiles {
            // A tile ends only between user keys (no user key spans two tiles).
            if new_user_key && self.tile_bytes >= t.h as usize * self.opts.block_size {
                self.flush_tile()?;
            }
            self.tile_bytes += ikey.len() + value.len() + 3;
            self.tile.push((ikey.to_vec(), value.to_vec()));
            self.last_key.clear();
            self.last_key.extend_from_slice(ikey);
            return Ok(());
        }
        if self.data.is_empty() && self.observer.is_some() {
            self.block_first.clear();
            self.block_first.extend_from_slice(parsed.user_key);
        }
        if let Some(handle) = self.pending_fence.take() {
            // `last_key` is still the cut block's last key.
            let last = user_key(&self.last_key);
            if last == parsed.user_key {
                // The user key spans the cut: the fence must tell its versions apart.
                self.index.add(last, Some(crate::key::trailer(&self.last_key)), handle);
            } else {
                let s = separator(last, parsed.user_key);
                self.index.add(s.as_deref().unwrap_or(last), None, handle);
            }
        }

        self.data.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Records a range tombstone. Empty ranges (`start >= end`) delete nothing and are
    /// dropped.
    pub fn add_range_tombstone(&mut self, t: RangeTombstone) {
        if t.start < t.end {
            self.range_dels.push(t);
        }
    }

    /// Notes the (caller's clock) time of a tombstone written to this table; the oldest
    /// is kept and recorded if the table holds any tombstone.
    pub fn note_tombstone_time(&mut self, t: u64) {
        self.tombstone_time = Some(self.tombstone_time.map_or(t, |o| o.min(t)));
    }

    /// Bytes the file would have if finished now (approximately).
    pub fn estimated_size(&self) -> u64 {
        let filter = self.bloom.as_ref().map_or(0, BloomBuilder::estimated_size);
        let range_dels: usize = self.range_dels.iter().map(|t| t.start.len() + t.end.len() + 12).sum();
        let tiles = self.tile_bytes + self.tile_index.pages.len() * 64;
        self.offset + (self.data.estimated_size() + self.index.estimated_size() + filter + range_dels + tiles) as u64
    }

    /// Point entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.entries
    }

    /// True when neither an entry nor a range tombstone was added.
    pub fn is_empty(&self) -> bool {
        self.props.entries == 0 && self.range_dels.is_empty()
    }

    /// Names the file in I/O errors that do not already.
    fn with_path(&self, e: Error) -> Error {
        match e {
            Error::Io { path: None, source } => Error::io(&self.path, source),
            e => e,
        }
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.append(bytes).map_err(|e| self.with_path(e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn write_block(&mut self, payload: &[u8], compression: Compression) -> Result<BlockHandle> {
        let (sealed, size) = seal_block(payload, compression);
        let handle = BlockHandle {
            offset: self.offset,
            size,
        };
        self.write_raw(&sealed)?;
        Ok(handle)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let handle = self.write_block(&raw, self.opts.compression)?;
        if let Some(o) = self.observer.as_mut() {
            o.data_block(handle.offset, &self.block_first, user_key(&self.last_key), raw);
        }
        self.pending_fence = Some(handle);
        self.props.data_blocks += 1;
        Ok(())
    }

    /// Writes the buffered tile as up to `h` pages partitioned by delete key.
    fn flush_tile(&mut self) -> Result<()> {
        let Some(t) = self.opts.tiles else {
            return Ok(());
        };
        let entries = std::mem::take(&mut self.tile);
        self.tile_bytes = 0;
        let plans = partition(
            &entries,
            t.h as usize,
            t.delete_key.as_ref(),
            BloomPolicy::from_fpr(self.opts.bloom_fpr),
        );
        let start = self.tile_index.pages.len();
        let mut last: Option<Vec<u8>> = None;
        for mut plan in plans {
            let mut b = BlockBuilder::new(self.opts.restart_interval);
            for &i in &plan.entries {
                b.add(&entries[i].0, &entries[i].1);
            }
            let raw = b.finish();
            let handle = self.write_block(&raw, self.opts.compression)?;
            if let Some(o) = self.observer.as_mut() {
                o.data_block(
                    handle.offset,
                    user_key(&plan.meta.first),
                    user_key(&plan.meta.last),
                    raw,
                );
            }
            self.props.data_blocks += 1;
            plan.meta.handle = handle;
            if last
                .as_ref()
                .is_none_or(|l| compare_internal(l, &plan.meta.last) == Ordering::Less)
            {
                last = Some(plan.meta.last.clone());
            }
            self.tile_index.pages.push(plan.meta);
        }
        if let Some(last) = last {
            self.tile_index.tiles.push(TileMeta {
                pages: start..self.tile_index.pages.len(),
                last,
            });
        }
        Ok(())
    }

    /// Writes the remaining blocks and the footer, syncs, and returns the file size and
    /// the properties.
    pub fn finish(mut self) -> Result<(u64, Properties)> {
        let tiled = self.opts.tiles.is_some();
        if tiled {
            self.flush_tile()?;
        }
        self.flush_data_block()?;
        if let Some(handle) = self.pending_fence.take() {
            self.index.add(user_key(&self.last_key), None, handle);
        }
        let filter_payload = self.bloom.take().map(|b| b.finish().encode()).unwrap_or_default();
        let filter = self.write_block(&filter_payload, Compression::None)?;

        self.range_dels.sort();
        let range_del = self.write_block(&encode_range_dels(&self.range_dels), Compression::None)?;

        // The index goes last but its size is a property: seal it first.
        let index_payload = if tiled {
            self.tile_index.encode()
        } else {
            self.index.finish()
        };
        let (index_sealed, index_size) = seal_block(&index_payload, Compression::None);
        let p = &mut self.props;
        for (i, t) in self.range_dels.iter().enumerate() {
            if p.entries == 0 && i == 0 {
                (p.min_seq, p.max_seq) = (t.seq, t.seq);
            }
            p.min_seq = p.min_seq.min(t.seq);
            p.max_seq = p.max_seq.max(t.seq);
        }
        if let (Some(lo), Some(hi)) = (
            self.range_dels.iter().map(|t| &t.start).min(),
            self.range_dels.iter().map(|t| &t.end).max(),
        ) {
            if p.entries == 0 || *lo < p.smallest_user_key {
                p.smallest_user_key = lo.clone();
            }
            if p.entries == 0 || *hi > p.largest_user_key {
                p.largest_user_key = hi.clone();
            }
        }
        p.range_deletes = self.range_dels.len() as u64;
        p.oldest_tombstone_time = if p.tombstones() > 0 { self.tombstone_time } else { None };
        p.index_size = index_size;
        p.filter_size = filter.size;
        let props_bytes = p.encode();
        let properties = self.write_block(&props_bytes, Compression::None)?;

        let index = BlockHandle {
            offset: self.offset,
            size: index_size,
        };
        self.write_raw(&index_sealed)?;
        let footer = Footer {
            index,
            filter,
            properties,
            range_del,
            version: if tiled {
                super::format::TILED_FORMAT_VERSION
            } else {
                super::format::FORMAT_VERSION
            },
        };
        self.write_raw(&footer.encode())?;
        self.file.sync().map_err(|e| self.with_path(e))?;
        Ok((self.offset, self.props))
    }
}
