//! An external sorter of internal entries within a memory bound: entries are buffered,
//! and past the bound each buffer is sorted and spilled to a temporary SSTable; the
//! final stream merges the last buffer with every spilled run.
//!
//! Deferred deletes emitted by a primary compaction and the entries of an index build
//! go through it, so neither ever needs memory proportional to the data.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::output::JobContext;
use crate::error::Result;
use crate::iter::merge::MergingIter;
use crate::iter::vec::{EntryBuffer, VecIter};
use crate::iter::{Direction, InternalIterator};
use crate::sstable::{SstReader, SstWriter};

/// Buffers entries for one keyspace and hands them back sorted.
pub struct ExternalSorter {
    ctx: JobContext,
    buf: EntryBuffer,
    limit: usize,
    spills: Vec<(PathBuf, Arc<SstReader>)>,
    len: u64,
}

impl ExternalSorter {
    /// A sorter that spills past `limit` bytes.
    pub fn new(ctx: JobContext, limit: usize) -> Self {
        ExternalSorter {
            ctx,
            buf: EntryBuffer::default(),
            limit: limit.max(1 << 16),
            spills: Vec::new(),
            len: 0,
        }
    }

    /// Entries pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of runs spilled to disk so far.
    pub fn spilled_runs(&self) -> usize {
        self.spills.len()
    }

    /// Adds an entry (any order). Equal internal keys are kept once.
    pub fn push(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.buf.push(ikey, value)?;
        self.len += 1;
        if self.buf.bytes() >= self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.buf.sort();
        let number = self.ctx.file_numbers.fetch_add(1, Ordering::SeqCst);
        let path = self.ctx.dir.join(format!("{number:06}.sort.tmp"));
        let file = self.ctx.fs.create(&path)?;
        let mut opts = self.ctx.sst_opts.clone();
        opts.bloom_fpr = 0.0;
        let mut b = SstWriter::new(file, path.clone(), opts);
        for i in 0..self.buf.len() {
            b.add(self.buf.key(i), self.buf.value(i))?;
        }
        b.finish()?;
        let table = Arc::new(SstReader::open(self.ctx.fs.open(&path)?, number, None)?);
        self.spills.push((path, table));
        self.buf.clear();
        Ok(())
    }

    /// The sorted stream of everything pushed. The sorter must outlive the stream's
    /// use only through the returned iterator (temporary files are removed on drop).
    pub fn finish(mut self) -> Result<SortedStream> {
        self.buf.sort();
        let buf = VecIter::new(std::mem::take(&mut self.buf));
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(buf)];
        for (_, t) in &self.spills {
            children.push(Box::new(t.iter()));
        }
        let mut merge = MergingIter::new(children, Direction::Forward);
        merge.seek_to_start()?;
        Ok(SortedStream {
            merge,
            _sorter: self,
            started: false,
            last: Vec::new(),
        })
    }
}

impl Drop for ExternalSorter {
    fn drop(&mut self) {
        for (p, _) in &self.spills {
            let _ = self.ctx.fs.remove(p);
        }
    }
}

/// The merged, de-duplicated output of an [`ExternalSorter`].
pub struct SortedStream {
    merge: MergingIter,
    _sorter: ExternalSorter,
    /// Whether the first entry was handed out (the merge then sits on the last one).
    started: bool,
    last: Vec<u8>,
}

impl SortedStream {
    /// The next entry, or `None` at the end. Borrowed: the stream copies nothing.
    pub fn next_entry(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        if self.started && self.merge.valid() {
            self.last.clear();
            self.last.extend_from_slice(self.merge.key());
            self.merge.advance()?;
            // The same entry spilled in two runs comes out once.
            while self.merge.valid() && self.merge.key() == self.last.as_slice() {
                self.merge.advance()?;
            }
        }
        self.started = true;
        if !self.merge.valid() {
            return Ok(None);
        }
        Ok(Some((self.merge.key(), self.merge.value())))
    }

    /// Turns the stream into a positioned-at-start iterator for merging with others.
    pub fn into_cursor(self) -> SortedStreamIter {
        SortedStreamIter { s: self, dead: false }
    }
}

/// A forward-only [`InternalIterator`] over a [`SortedStream`] (seeks other than to the
/// start are not supported and leave it invalid).
pub struct SortedStreamIter {
    s: SortedStream,
    /// Set by an unsupported move; the cursor stays invalid.
    dead: bool,
}

impl SortedStreamIter {
    fn invalidate(&mut self) {
        self.dead = true;
    }
}

impl InternalIterator for SortedStreamIter {
    fn valid(&self) -> bool {
        !self.dead && self.s.started && self.s.merge.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        if !self.dead && !self.s.started {
            self.s.next_entry()?;
        }
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.invalidate();
        Ok(())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        self.invalidate();
        Ok(())
    }
    fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
        self.invalidate();
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if !self.dead {
            self.s.next_entry()?;
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.invalidate();
        Ok(())
    }
    fn key(&self) -> &[u8] {
        if self.valid() { self.s.merge.key() } else { &[] }
    }
    fn value(&self) -> &[u8] {
        if self.valid() { self.s.merge.value() } else { &[] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, RealFs};
    use crate::key::{ValueKind, compare_internal, internal_key};
    use crate::options::SystemClock;
    use crate::sstable::SstOptions;
    use crate::sstable::cache::SstCache;
    use std::sync::atomic::AtomicU64;

    fn ctx(dir: &std::path::Path) -> JobContext {
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        JobContext {
            sst_cache: Arc::new(SstCache::new(fs.clone(), dir.to_path_buf(), 16, None)),
            fs,
            dir: dir.to_path_buf(),
            sst_opts: SstOptions::default(),
            file_numbers: Arc::new(AtomicU64::new(1)),
            target_file_size: 1 << 20,
            clock: Arc::new(SystemClock),
            deletes: Default::default(),
            filter_keys: Default::default(),
        }
    }

    #[test]
    fn spills_past_the_memory_bound_and_merges_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(ctx(dir.path()), 1 << 16);
        let mut expected = Vec::new();
        for i in 0..20_000u32 {
            let k = (i.wrapping_mul(2_654_435_761) % 5_000).to_be_bytes();
            let seq = u64::from(i % 7);
            let ikey = internal_key(&k, seq, ValueKind::DeferredDelete);
            expected.push(ikey.clone());
            s.push(&ikey, &[]).unwrap();
        }
        assert!(s.spilled_runs() >= 2, "the bound should force spills");
        let tmp_files = || std::fs::read_dir(dir.path()).unwrap().count();
        assert!(tmp_files() >= 2);
        expected.sort_by(|a, b| compare_internal(a, b));
        expected.dedup();
        let mut stream = s.finish().unwrap();
        let mut got = Vec::new();
        while let Some((k, _)) = stream.next_entry().unwrap() {
            got.push(k.to_vec());
        }
        assert_eq!(got, expected);
        drop(stream);
        assert_eq!(tmp_files(), 0, "temporary runs are removed");
    }
}
