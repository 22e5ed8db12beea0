//! Page patches: pages of a tiled table served from another file, so that a secondary
//! range delete rewrites only the pages it covers in part, not the whole table
//! (`docs/design/deletes.md`, invariant PP of `compaction::tiles`).
//!
//! A table never changes. What a version says about its pages beyond the table itself
//! is its [`PageMap`] (in `FileMeta::pages`): pages *dropped* (never read), and pages
//! *patched*: read from a block of a patch file instead of the table.
//!
//! A patch file (`<number:06>.patch`) is a sequence of sealed blocks, each an ordinary
//! data block (the table's block format, with the same checksummed trailer) holding a
//! subset of one page's entries, in key order; nothing else. The manifest names each
//! block by `(patch file, offset, size)`, so the file has no index or footer of its own.
//! Patch files take numbers from the table numbers' counter, so cached blocks keyed by
//! (file number, offset) never collide.
//!
//! Invariants of a page map (checked when the manifest is decoded):
//! * `dropped` ascending, `patched` ascending by page, no page in both;
//! * a patched page holds a subset of the base page's entries, except that a `Put` may
//!   read as a `Delete` at its seqno (a killed `Put` with an older version behind it):
//!   the base page's fences, bloom filter, delete-key range, largest seqno and *whole*
//!   flag stay valid, conservative bounds. Readers check each patched entry's user key
//!   and seqno against the base page's fences.

use std::path::Path;
use std::sync::Arc;

use super::block::{Block, BlockIter};
use super::cache::BlockCache;
use super::format::{BlockHandle, Compression, seal_block};
use super::reader::{Fill, read_block};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile, WritableFile};
use crate::key::{SeqNo, parse_internal_key};

/// One page of a tiled table read from a patch file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagePatch {
    /// The base page's offset in the table.
    pub page: u64,
    /// The patch file's number.
    pub file: u64,
    /// The block in the patch file.
    pub handle: BlockHandle,
    /// Every secondary range delete of the table's keyspace at or below this seqno was
    /// applied to the page when it was patched (it holds no `Put` one kills).
    pub applied: SeqNo,
}

/// What a version says about a tiled table's pages (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageMap {
    /// Offsets of pages never read, ascending.
    pub dropped: Vec<u64>,
    /// Pages read from patch files, ascending by `page`.
    pub patched: Vec<PagePatch>,
}

impl PageMap {
    /// True if every page is read from the table.
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty() && self.patched.is_empty()
    }

    /// True if the page at `offset` is dropped.
    pub fn is_dropped(&self, offset: u64) -> bool {
        self.dropped.binary_search(&offset).is_ok()
    }

    /// Where the page at `offset` is read from, if patched.
    pub fn patch(&self, offset: u64) -> Option<&PagePatch> {
        self.patched
            .binary_search_by_key(&offset, |p| p.page)
            .ok()
            .and_then(|i| self.patched.get(i))
    }

    /// The seqno through which the page at `offset` has had every record applied by a
    /// patch (0 if not patched).
    pub fn applied(&self, offset: u64) -> SeqNo {
        self.patch(offset).map_or(0, |p| p.applied)
    }

    /// The patch files the map names, ascending, each once.
    pub fn patch_files(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.patched.iter().map(|p| p.file).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Checks the invariants of the module docs.
    pub fn check(&self) -> std::result::Result<(), &'static str> {
        if self.dropped.windows(2).any(|w| w[0] >= w[1]) {
            return Err("dropped pages out of order");
        }
        if self.patched.windows(2).any(|w| w[0].page >= w[1].page) {
            return Err("patched pages out of order");
        }
        if self.patched.iter().any(|p| self.is_dropped(p.page)) {
            return Err("a page both dropped and patched");
        }
        if self.patched.iter().any(|p| p.handle.end_with_trailer().is_none()) {
            return Err("patch block handle overflows");
        }
        Ok(())
    }

    /// This map with `pages` dropped (and no longer patched).
    pub fn dropping(&self, pages: impl IntoIterator<Item = u64>) -> PageMap {
        let mut dropped: std::collections::BTreeSet<u64> = self.dropped.iter().copied().collect();
        dropped.extend(pages);
        PageMap {
            patched: self
                .patched
                .iter()
                .filter(|p| !dropped.contains(&p.page))
                .copied()
                .collect(),
            dropped: dropped.into_iter().collect(),
        }
    }

    /// This map with `patches` replacing what it said of their pages.
    pub fn patching(&self, patches: impl IntoIterator<Item = PagePatch>) -> PageMap {
        let mut by_page: std::collections::BTreeMap<u64, PagePatch> =
            self.patched.iter().map(|p| (p.page, *p)).collect();
        for p in patches {
            by_page.insert(p.page, p);
        }
        PageMap {
            dropped: self.dropped.clone(),
            patched: by_page.into_values().collect(),
        }
    }
}

/// The file name of patch file `number`: at least six digits, e.g. `000123.patch`.
pub fn patch_file_name(number: u64) -> String {
    format!("{number:06}.patch")
}

/// The number of a patch file's name, if it is one.
pub fn parse_patch_file_name(name: &str) -> Option<u64> {
    name.strip_suffix(".patch").and_then(|s| s.parse().ok())
}

/// An open patch file.
pub struct PatchReader {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    number: u64,
    cache: Option<Arc<BlockCache>>,
}

impl std::fmt::Debug for PatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatchReader").field("path", &self.path).finish()
    }
}

impl PatchReader {
    /// Patch file `number` stored in `file`, reading blocks through `cache`.
    pub fn new(file: Arc<dyn RandomAccessFile>, number: u64, cache: Option<Arc<BlockCache>>) -> PatchReader {
        PatchReader {
            path: Arc::from(file.path()),
            file,
            number,
            cache,
        }
    }

    /// A cursor over the patched page at `handle`: its checksum verified and its block
    /// decoded, errors naming this file and the offset.
    pub fn page(&self, handle: BlockHandle, fill: Fill) -> Result<BlockIter> {
        let block: Arc<Block> = read_block(&*self.file, self.number, self.cache.as_deref(), handle, fill)?;
        Ok(BlockIter::new(block, Arc::clone(&self.path), handle.offset))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes one patch file: pages appended as sealed blocks, then synced. A writer
/// dropped before [`PatchWriter::finish`] succeeded (a failed write) removes its file,
/// so a failed job leaves nothing for the next open to sweep.
pub struct PatchWriter {
    fs: Arc<dyn FileSystem>,
    path: std::path::PathBuf,
    file: Box<dyn WritableFile>,
    number: u64,
    offset: u64,
    compression: Compression,
    finished: bool,
}

impl PatchWriter {
    /// Creates patch file `number` in `dir`.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, number: u64, compression: Compression) -> Result<PatchWriter> {
        let path = dir.join(patch_file_name(number));
        Ok(PatchWriter {
            file: fs.create(&path)?,
            fs,
            path,
            number,
            offset: 0,
            compression,
            finished: false,
        })
    }

    /// Appends a page (an encoded data block) and returns its handle.
    pub fn add(&mut self, payload: &[u8]) -> Result<BlockHandle> {
        let (sealed, size) = seal_block(payload, self.compression);
        self.file.append(&sealed)?;
        let handle = BlockHandle {
            offset: self.offset,
            size,
        };
        self.offset += sealed.len() as u64;
        Ok(handle)
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Makes the file durable; returns its size.
    pub fn finish(mut self) -> Result<u64> {
        self.file.flush()?;
        self.file.sync()?;
        self.finished = true;
        Ok(self.offset)
    }
}

impl Drop for PatchWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.fs.remove(&self.path);
        }
    }
}

/// Orders an entry of a patched page against one of its base page's fences by user key
/// and then seqno, descending (a `Delete` standing for a killed `Put` has the `Put`'s
/// seqno but sorts after it in internal-key order).
fn cmp_user_seq(a: &[u8], b: &[u8]) -> Option<std::cmp::Ordering> {
    let (pa, pb) = (parse_internal_key(a)?, parse_internal_key(b)?);
    Some(pa.user_key.cmp(pb.user_key).then(pb.seq.cmp(&pa.seq)))
}

/// Checks that a patched page's entry lies within its base page's fences `[first,
/// last]` (by user key and seqno); an error names the patch file and block offset.
pub fn check_within(key: &[u8], first: &[u8], last: &[u8], path: &Path, at: u64) -> Result<()> {
    use std::cmp::Ordering::{Greater, Less};
    let ok = matches!(cmp_user_seq(key, first), Some(o) if o != Less)
        && matches!(cmp_user_seq(key, last), Some(o) if o != Greater);
    if ok {
        Ok(())
    } else {
        Err(Error::corruption(
            path,
            at,
            "patched page outside its base page's fences",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(page: u64, file: u64) -> PagePatch {
        PagePatch {
            page,
            file,
            handle: BlockHandle { offset: 0, size: 10 },
            applied: 5,
        }
    }

    #[test]
    fn maps_drop_and_patch_pages() {
        let m = PageMap::default().patching([patch(10, 7), patch(30, 8)]);
        assert!(m.check().is_ok());
        assert_eq!(m.applied(10), 5);
        assert_eq!(m.applied(20), 0);
        assert_eq!(m.patch_files(), vec![7, 8]);
        let d = m.dropping([30, 40]);
        assert!(d.check().is_ok());
        assert!(d.is_dropped(30) && d.patch(30).is_none(), "dropping wins over a patch");
        assert_eq!(d.patch(10).map(|p| p.file), Some(7));
        let bad = PageMap {
            dropped: vec![10],
            patched: vec![patch(10, 7)],
        };
        assert!(bad.check().is_err());
        assert_eq!(parse_patch_file_name(&patch_file_name(42)), Some(42));
        assert_eq!(parse_patch_file_name("000042.sst"), None);
    }

    #[test]
    fn a_writer_dropped_unfinished_removes_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(crate::fs::RealFs);
        let path = |n| dir.path().join(patch_file_name(n));
        let mut w = PatchWriter::create(fs.clone(), dir.path(), 1, Compression::None).expect("create");
        w.add(b"page").expect("add");
        drop(w);
        assert!(!path(1).exists(), "a failed job's patch file stays behind");
        let mut w = PatchWriter::create(fs, dir.path(), 2, Compression::None).expect("create");
        w.add(b"page").expect("add");
        assert!(w.finish().expect("finish") > 0);
        assert!(path(2).exists());
    }
}
