//! Strata: an embedded LSM-tree storage engine for write-heavy tables with secondary
//! indexes and heavy deletes.

#![deny(missing_docs)]

pub mod cache;
pub mod codec;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod range_tombstone;
pub mod sstable;
pub mod version;
pub mod wal;

pub use error::{Error, Result};
