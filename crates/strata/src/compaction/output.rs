//! Writing the output of a flush or compaction: a sorted stream of entries cut into
//! SSTables of about `target_file_size`, never splitting one user key across files.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::warm::{CacheWarmer, HotRanges};
use crate::error::Result;
use crate::fs::FileSystem;
use crate::key::user_key;
use crate::options::Clock;
use crate::range_tombstone::RangeTombstone;
use crate::sstable::cache::SstCache;
use crate::sstable::{SstOptions, SstWriter, sst_file_name};
use crate::version::{FileMeta, NewFile};

/// Everything a background job needs to write files.
#[derive(Clone)]
pub struct JobContext {
    /// File system.
    pub fs: Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: PathBuf,
    /// Open-table cache.
    pub sst_cache: Arc<SstCache>,
    /// Format options for new tables.
    pub sst_opts: SstOptions,
    /// Shared file-number counter.
    pub file_numbers: Arc<AtomicU64>,
    /// Split outputs at about this size.
    pub target_file_size: u64,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Delete keys, tile sizes and secondary range deletes of the keyspaces that
    /// declare a delete key (filled in per job).
    pub deletes: super::tiles::DeleteJobs,
    /// What the filters of each keyspace's tables hold, where not whole keys (filled in
    /// per job, `Keyspace::set_filter_key`).
    pub filter_keys: Arc<std::collections::BTreeMap<u32, crate::sstable::bloom::FilterKey>>,
}

impl JobContext {
    /// This context writing keyspace `ks`'s level `level`: with its delete tiles, if it
    /// declares a delete key, and its kind of filter.
    pub fn for_output(&self, ks: u32, level: usize) -> JobContext {
        let mut c = self.clone();
        c.sst_opts.tiles = self.deletes.get(&ks).map(|d| d.tile_options(level));
        c.sst_opts.filter_key = self.filter_keys.get(&ks).copied().unwrap_or_default();
        c
    }
}

struct Current {
    number: u64,
    builder: SstWriter,
}

/// Cuts a sorted entry stream into SSTables for one keyspace, level and run.
pub struct OutputWriter {
    ctx: JobContext,
    keyspace: u32,
    level: u32,
    run: u64,
    cur: Option<Current>,
    range_dels: Vec<RangeTombstone>,
    lower: Option<Vec<u8>>,
    last_user_key: Vec<u8>,
    tombstone_time: Option<u64>,
    track_obligations: bool,
    hot: Option<Arc<HotRanges>>,
    created: Vec<PathBuf>,
    /// Files finished so far.
    pub files: Vec<NewFile>,
    /// Bytes written so far.
    pub bytes_written: u64,
}

impl OutputWriter {
    /// Starts an output; `range_dels` are distributed over the files by key.
    pub fn new(ctx: JobContext, keyspace: u32, level: u32, run: u64, range_dels: Vec<RangeTombstone>) -> Self {
        OutputWriter {
            ctx,
            keyspace,
            level,
            run,
            cur: None,
            range_dels,
            lower: None,
            last_user_key: Vec::new(),
            tombstone_time: None,
            track_obligations: false,
            hot: None,
            created: Vec::new(),
            files: Vec::new(),
            bytes_written: 0,
        }
    }

    /// Records the noted time in every output file even without tombstones: the primary
    /// files of a deferred table carry the age of their pending purges this way (a put
    /// may have overwritten a version whose secondary entries await a deferred delete).
    pub fn track_obligations(&mut self) {
        self.track_obligations = true;
    }

    /// Caches the output blocks that overlap `hot` as they are written.
    pub fn warm_cache(&mut self, hot: HotRanges) {
        if !hot.is_empty() {
            self.hot = Some(Arc::new(hot));
        }
    }

    /// Records that the output holds tombstones at least as old as `t`.
    pub fn note_tombstone_time(&mut self, t: u64) {
        self.tombstone_time = Some(self.tombstone_time.map_or(t, |o| o.min(t)));
    }

    fn open(&mut self) -> Result<()> {
        let number = self.ctx.file_numbers.fetch_add(1, Ordering::SeqCst);
        let path = self.ctx.dir.join(sst_file_name(number));
        let file = self.ctx.fs.create(&path)?;
        self.created.push(path.clone());
        let mut opts = self.ctx.sst_opts.clone();
        opts.created_at = self.ctx.clock.now_micros();
        let mut builder = SstWriter::new(file, path, opts);
        if let (Some(hot), Some(cache)) = (&self.hot, self.ctx.sst_cache.block_cache()) {
            builder.observe_data_blocks(Box::new(CacheWarmer::new(Arc::clone(cache), number, Arc::clone(hot))));
        }
        self.cur = Some(Current { number, builder });
        Ok(())
    }

    /// Appends an entry. REQUIRES: internal keys strictly increasing.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let uk = user_key(ikey);
        let cut = self.cur.as_ref().is_some_and(|c| {
            c.builder.estimated_size() >= self.ctx.target_file_size && uk != self.last_user_key.as_slice()
        });
        if cut {
            self.finish_file(Some(uk.to_vec()))?;
        }
        if self.cur.is_none() {
            self.open()?;
        }
        if let Some(c) = self.cur.as_mut() {
            c.builder.add(ikey, value)?;
        }
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(uk);
        Ok(())
    }

    fn finish_file(&mut self, upper: Option<Vec<u8>>) -> Result<()> {
        let Some(mut c) = self.cur.take() else {
            return Ok(());
        };
        for t in &self.range_dels {
            let start = match &self.lower {
                Some(l) if l > &t.start => l.clone(),
                _ => t.start.clone(),
            };
            let end = match &upper {
                Some(u) if u < &t.end => u.clone(),
                _ => t.end.clone(),
            };
            if start < end {
                c.builder.add_range_tombstone(RangeTombstone { start, end, seq: t.seq });
            }
        }
        if let Some(t) = self.tombstone_time {
            c.builder.note_tombstone_time(t);
        }
        let (size, props) = c.builder.finish()?;
        self.bytes_written += size;
        let tombstones = props.deletes + props.deferred_deletes + props.range_deletes;
        self.files.push(NewFile {
            keyspace: self.keyspace,
            level: self.level,
            run: self.run,
            meta: FileMeta {
                number: c.number,
                size,
                smallest: props.smallest_user_key.clone(),
                largest: props.largest_user_key.clone(),
                min_seq: props.min_seq,
                max_seq: props.max_seq,
                entries: props.entries,
                tombstones,
                range_tombstones: props.range_deletes,
                oldest_tombstone_time: if tombstones > 0 {
                    props.oldest_tombstone_time
                } else if self.track_obligations {
                    // Puts alone, which may still have overwritten versions whose index
                    // entries await their deferred deletes.
                    self.tombstone_time
                } else {
                    None
                },
                raw_bytes: props.raw_key_bytes + props.raw_value_bytes,
                global_seq: None,
                pages: Default::default(),
                deletes_applied: 0,
            },
        });
        self.lower = upper;
        Ok(())
    }

    /// Finishes the last file (a file holding only range tombstones if that is all
    /// there is) and returns the files written.
    pub fn finish(mut self) -> Result<(Vec<NewFile>, u64)> {
        if self.cur.is_none() && self.files.is_empty() && !self.range_dels.is_empty() {
            self.open()?;
        }
        self.finish_file(None)?;
        self.created.clear();
        Ok((std::mem::take(&mut self.files), self.bytes_written))
    }
}

impl Drop for OutputWriter {
    fn drop(&mut self) {
        // Outputs of a failed job are never installed: remove them.
        for p in &self.created {
            let _ = self.ctx.fs.remove(p);
        }
    }
}
