//! Concatenation of the files of one sorted run: at most one file open at a time.

use std::sync::Arc;

use super::InternalIterator;
use crate::error::Result;
use crate::key::user_key;
use crate::sstable::cache::SstCache;
use crate::sstable::tile::PageSkip;
use crate::sstable::{BlockIter, Fill, SstIter};
use crate::version::TableFile;

/// The files a [`RunIter`] walks. A short scan meets one file in most runs: that one
/// is held without a vector of its own (an allocation per run and scan saved).
enum RunFiles {
    One(Arc<TableFile>),
    Many(Vec<Arc<TableFile>>),
}

impl RunFiles {
    fn as_slice(&self) -> &[Arc<TableFile>] {
        match self {
            RunFiles::One(f) => std::slice::from_ref(f),
            RunFiles::Many(v) => v,
        }
    }
}

/// Iterates a run's files in key order, opening each through the table cache.
pub struct RunIter {
    files: RunFiles,
    cache: Arc<SstCache>,
    idx: usize,
    cur: Option<SstIter>,
    fill: Fill,
    skip: Option<PageSkip>,
}

impl RunIter {
    /// A cursor over `files` (sorted, disjoint) for a foreground read.
    pub fn new(files: &[Arc<TableFile>], cache: Arc<SstCache>) -> Self {
        Self::with_fill(files, cache, Fill::Cache)
    }

    /// A cursor over `files` that uses the block cache as `fill` says.
    pub fn with_fill(files: &[Arc<TableFile>], cache: Arc<SstCache>, fill: Fill) -> Self {
        let files = match files {
            [f] => RunFiles::One(f.clone()),
            _ => RunFiles::Many(files.to_vec()),
        };
        RunIter {
            files,
            cache,
            idx: 0,
            cur: None,
            fill,
            skip: None,
        }
    }

    /// Skips the pages `skip` names in the files' delete tiles, unread.
    pub fn skipping(mut self, skip: PageSkip) -> Self {
        self.skip = Some(skip);
        self
    }

    fn open(&mut self, idx: usize) -> Result<bool> {
        self.cur = None;
        self.idx = idx;
        match self.files.as_slice().get(idx) {
            Some(f) => {
                let t = self.cache.get(f.meta.number, f.meta.global_seq)?;
                // Pages the version dropped are never read, patched ones come from their
                // patch files (`FileMeta::pages`).
                self.cur = Some(match (&self.skip, f.meta.pages.is_empty()) {
                    (Some(s), true) => t.iter_skipping(self.fill, s.clone()),
                    (None, true) => t.iter_with(self.fill),
                    (s, false) => t.iter_paged(self.fill, s.clone(), f.meta.pages.clone(), self.cache.clone()),
                });
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The current data block's cursor ([`SstIter::block_mut`]): a reader may step
    /// through it directly, then call `next` to go on past the block's end. With the
    /// file's global seqno, if it has one.
    pub fn block_mut(&mut self) -> Option<(&mut BlockIter, Option<crate::key::SeqNo>)> {
        self.cur.as_mut().and_then(SstIter::block_mut)
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|c| !c.valid()) {
            if !self.open(self.idx + 1)? {
                break;
            }
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|c| !c.valid()) {
            if self.idx == 0 {
                self.cur = None;
                break;
            }
            self.open(self.idx - 1)?;
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for RunIter {
    fn valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        if self.open(0)?
            && let Some(c) = self.cur.as_mut()
        {
            c.seek_to_first()?;
        }
        self.skip_forward()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        if self.files.as_slice().is_empty() {
            self.cur = None;
            return Ok(());
        }
        self.open(self.files.as_slice().len() - 1)?;
        if let Some(c) = self.cur.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        let i = self
            .files
            .as_slice()
            .partition_point(|f| f.meta.largest.as_slice() < uk);
        if self.open(i)?
            && let Some(c) = self.cur.as_mut()
        {
            c.seek(target)?;
        }
        self.skip_forward()
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        // Last file whose smallest key is <= the target's user key.
        let i = self
            .files
            .as_slice()
            .partition_point(|f| f.meta.smallest.as_slice() <= uk);
        if i == 0 {
            self.cur = None;
            return Ok(());
        }
        self.open(i - 1)?;
        if let Some(c) = self.cur.as_mut() {
            c.seek_for_prev(target)?;
        }
        self.skip_backward()
    }
    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.cur.as_mut() {
            c.next()?;
        }
        self.skip_forward()
    }
    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.cur.as_mut() {
            c.prev()?;
        }
        self.skip_backward()
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|c| c.key()).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|c| c.value()).unwrap_or(&[])
    }
}
