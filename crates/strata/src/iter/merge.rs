//! Merging of several sorted sources into one stream in internal-key order.

use std::cmp::Ordering;

use super::{Direction, InternalIterator};
use crate::error::Result;
use crate::key::compare_internal;

/// Merges children in one direction. Ties (equal internal keys, which only happen when
/// the same entry exists in two sources) go to the child listed first.
///
/// Children are few (memtables + runs), so a linear scan for the minimum beats a heap.
pub struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    dir: Direction,
}

impl MergingIter {
    /// Creates an unpositioned merge.
    pub fn new(children: Vec<Box<dyn InternalIterator>>, dir: Direction) -> Self {
        MergingIter {
            children,
            current: None,
            dir,
        }
    }

    fn pick(&mut self) {
        if let [only] = self.children.as_slice() {
            self.current = only.valid().then_some(0);
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let ord = compare_internal(c.key(), self.children[b].key());
                    let better = match self.dir {
                        Direction::Forward => ord == Ordering::Less,
                        Direction::Reverse => ord == Ordering::Greater,
                    };
                    if better { Some(i) } else { Some(b) }
                }
            };
        }
        self.current = best;
    }

    /// Positions on the first entry >= target (forward) or last entry <= target (reverse).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            match self.dir {
                Direction::Forward => c.seek(target)?,
                Direction::Reverse => c.seek_for_prev(target)?,
            }
        }
        self.pick();
        Ok(())
    }

    /// Positions at the start of the direction.
    pub fn seek_to_start(&mut self) -> Result<()> {
        for c in &mut self.children {
            match self.dir {
                Direction::Forward => c.seek_to_first()?,
                Direction::Reverse => c.seek_to_last()?,
            }
        }
        self.pick();
        Ok(())
    }

    /// True when positioned.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// Advances in the merge's direction.
    pub fn advance(&mut self) -> Result<()> {
        if let Some(i) = self.current {
            match self.dir {
                Direction::Forward => self.children[i].next()?,
                Direction::Reverse => self.children[i].prev()?,
            }
            self.pick();
        }
        Ok(())
    }

    /// Current internal key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    /// Current value. REQUIRES: `valid()`.
    pub fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }
}
