//! An external sorter of internal entries within a memory bound: entries are buffered,
//! and past the bound each buffer is sorted and spilled to a temporary SSTable; the
//! final stream merges the last buffer with every spilled run.
//!
//! Deferred deletes emitted by a primary compaction and the entries of an index build
//! go through it, so neither ever needs memory proportional to the data.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtOrd;

use super::output::JobContext;
use crate::error::Result;
use crate::iter::merge::MergingIter;
use crate::iter::{Direction, InternalIterator};
use crate::key::{compare_internal, user_key, user_key_prefix};
use crate::sstable::{Table, TableBuilder};

/// A buffered entry: its bytes in [`Buffer::data`] and the first 8 bytes of its user key,
/// which settle most comparisons of a sort without touching the data.
#[derive(Debug, Clone, Copy)]
struct Slot {
    prefix: u64,
    off: usize,
    key_len: u32,
    value_len: u32,
}

/// Entries back to back in one allocation (a compaction emits millions of deferred
/// deletes: one heap block each made the allocator a fifth of the job) with their slots.
#[derive(Debug, Default)]
struct Buffer {
    data: Vec<u8>,
    slots: Vec<Slot>,
}

impl Buffer {
    fn bytes(&self) -> usize {
        self.data.len() + self.slots.len() * std::mem::size_of::<Slot>()
    }

    fn push(&mut self, ikey: &[u8], value: &[u8]) {
        self.slots.push(Slot {
            prefix: user_key_prefix(user_key(ikey)),
            off: self.data.len(),
            key_len: ikey.len() as u32,
            value_len: value.len() as u32,
        });
        self.data.extend_from_slice(ikey);
        self.data.extend_from_slice(value);
    }

    fn key(&self, s: &Slot) -> &[u8] {
        &self.data[s.off..s.off + s.key_len as usize]
    }

    fn value(&self, s: &Slot) -> &[u8] {
        let v = s.off + s.key_len as usize;
        &self.data[v..v + s.value_len as usize]
    }

    /// Sorts the slots by internal key and drops repeated keys (the first pushed stays
    /// among equal ones only by chance: equal keys carry equal values here).
    fn sort(&mut self) {
        let Buffer { data, slots } = self;
        let key = |s: &Slot| &data[s.off..s.off + s.key_len as usize];
        slots.sort_unstable_by(|a, b| a.prefix.cmp(&b.prefix).then_with(|| compare_internal(key(a), key(b))));
        slots.dedup_by(|a, b| key(a) == key(b));
    }

    fn clear(&mut self) {
        self.data.clear();
        self.slots.clear();
    }
}

/// Buffers entries for one keyspace and hands them back sorted.
pub struct ExternalSorter {
    ctx: JobContext,
    buf: Buffer,
    limit: usize,
    spills: Vec<(PathBuf, Arc<Table>)>,
    len: u64,
}

impl ExternalSorter {
    /// A sorter that spills past `limit` bytes.
    pub fn new(ctx: JobContext, limit: usize) -> Self {
        ExternalSorter {
            ctx,
            buf: Buffer::default(),
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
        self.buf.push(ikey, value);
        self.len += 1;
        if self.buf.bytes() >= self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.buf.sort();
        let number = self.ctx.file_numbers.fetch_add(1, AtOrd::SeqCst);
        let path = self.ctx.dir.join(format!("{number:06}.sort.tmp"));
        let file = self.ctx.fs.create(&path)?;
        let mut opts = self.ctx.table_opts.clone();
        opts.bloom_fpr = 0.0;
        let mut b = TableBuilder::new(file, path.clone(), opts);
        for s in &self.buf.slots {
            b.add(self.buf.key(s), self.buf.value(s))?;
        }
        b.finish()?;
        let table = Arc::new(Table::open(self.ctx.fs.open(&path)?, number, None)?);
        self.spills.push((path, table));
        self.buf.clear();
        Ok(())
    }

    /// The sorted stream of everything pushed. The sorter must outlive the stream's
    /// use only through the returned iterator (temporary files are removed on drop).
    pub fn finish(mut self) -> Result<SortedStream> {
        self.buf.sort();
        let buf = BufferIter {
            buf: std::mem::take(&mut self.buf),
            pos: None,
        };
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

/// A cursor over a sorted [`Buffer`].
struct BufferIter {
    buf: Buffer,
    pos: Option<usize>,
}

impl BufferIter {
    fn at(&mut self, i: usize) {
        self.pos = (i < self.buf.slots.len()).then_some(i);
    }

    fn slot(&self) -> Option<&Slot> {
        self.pos.and_then(|p| self.buf.slots.get(p))
    }
}

impl InternalIterator for BufferIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.at(0);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.buf.slots.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let b = &self.buf;
        let i = b
            .slots
            .partition_point(|s| compare_internal(b.key(s), target) == Ordering::Less);
        self.at(i);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let b = &self.buf;
        let i = b
            .slots
            .partition_point(|s| compare_internal(b.key(s), target) != Ordering::Greater);
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
        self.slot().map(|s| self.buf.key(s)).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.slot().map(|s| self.buf.value(s)).unwrap_or(&[])
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
    use crate::cache::TableCache;
    use crate::fs::{FileSystem, RealFs};
    use crate::key::{ValueKind, internal_key};
    use crate::options::SystemClock;
    use crate::sstable::TableOptions;
    use std::sync::atomic::AtomicU64;

    fn ctx(dir: &std::path::Path) -> JobContext {
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        JobContext {
            table_cache: Arc::new(TableCache::new(fs.clone(), dir.to_path_buf(), 16, None)),
            fs,
            dir: dir.to_path_buf(),
            table_opts: TableOptions::default(),
            file_numbers: Arc::new(AtomicU64::new(1)),
            target_file_size: 1 << 20,
            clock: Arc::new(SystemClock),
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

    #[test]
    fn orders_keys_whose_prefixes_tie_or_are_padded_like_a_plain_sort() {
        // Short keys (zero-padded prefixes), keys ending in zero bytes, and long keys that
        // share their first 8 bytes: every way the prefix can decide wrongly.
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(ctx(dir.path()), 1 << 20);
        let mut expected = Vec::new();
        let mut x = 11u64;
        for i in 0..5_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = (x >> 33) % 300;
            let key: Vec<u8> = match n % 4 {
                0 => vec![b'k'; (n % 7) as usize],
                1 => [b"k".as_slice(), &vec![0u8; (n % 10) as usize]].concat(),
                2 => format!("sharedpfx{n:03}").into_bytes(),
                _ => (n as u16).to_be_bytes().to_vec(),
            };
            let ikey = internal_key(&key, i % 5, ValueKind::Put);
            let value = (x % 1000).to_be_bytes().to_vec();
            s.push(&ikey, &value).unwrap();
            expected.push((ikey, value));
        }
        expected.sort_by(|a, b| compare_internal(&a.0, &b.0));
        expected.dedup_by(|a, b| a.0 == b.0);
        let mut stream = s.finish().unwrap();
        let mut got = Vec::new();
        while let Some((k, v)) = stream.next_entry().unwrap() {
            got.push((k.to_vec(), v.to_vec()));
        }
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.0, e.0);
        }
    }
}
