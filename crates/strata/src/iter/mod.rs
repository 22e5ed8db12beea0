//! Iterators over internal entries, and the merge that combines them.
//!
//! Every source (memtable, SSTable, level of files) exposes [`InternalIterator`]. The
//! [`merge::MergingIter`] combines them into one stream in internal-key order; the user
//! iterator in `db` then applies snapshots and tombstones.

pub mod level;
pub mod merge;
pub mod vec;

use crate::error::Result;

/// A positioned cursor over internal entries in internal-key order.
///
/// REQUIRES: `key`/`value` only while `valid()`. Errors leave the iterator invalid.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions on the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions on the first entry with internal key >= `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions on the last entry with internal key <= `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
}

/// Iteration direction of a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending internal-key order.
    Forward,
    /// Descending internal-key order.
    Reverse,
}
