//! A cursor over a sorted in-memory vector of internal entries.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;

/// Iterates `(internal key, value)` pairs sorted by internal key.
pub struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl VecIter {
    /// REQUIRES: `entries` sorted by [`compare_internal`].
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        VecIter { entries, pos: None }
    }

    fn at(&mut self, i: usize) {
        self.pos = (i < self.entries.len()).then_some(i);
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.at(0);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.entries.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
        self.at(i);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) != Ordering::Greater);
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
        self.pos
            .and_then(|p| self.entries.get(p))
            .map(|e| e.0.as_slice())
            .unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.entries.get(p))
            .map(|e| e.1.as_slice())
            .unwrap_or(&[])
    }
}
