//! Strata: an embedded LSM-tree storage engine for write-heavy tables with secondary
//! indexes and heavy deletes.
//!
//! A [`Db`] holds named [`Keyspace`]s (independent LSM trees) that share one WAL, one
//! seqno counter and one manifest, so a [`WriteBatch`] spanning keyspaces is atomic.
//!
//! ```
//! use strata::{Db, Options, WriteBatch};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! let users = db.create_keyspace("users").unwrap();
//! let by_email = db.create_keyspace("users_by_email").unwrap();
//! let mut b = WriteBatch::new();
//! b.put(&users, b"u1", b"alice@example.com");
//! b.put(&by_email, b"alice@example.com", b"u1");
//! db.write(b).unwrap();
//! db.flush().unwrap();
//! assert_eq!(by_email.get(b"alice@example.com").unwrap().as_deref(), Some(&b"u1"[..]));
//! ```
//!
//! Layers, each knowing only those below it:
//!
//! - files and formats: [`fs`], [`wal`], [`sstable`] (with its caches), [`version`]
//!   (the manifest and the tree of runs);
//! - the key-value engine: [`memtable`], [`iter`], [`compaction`], [`db`]. It knows
//!   nothing of tables; a layer above plugs in through `db::Extension`, and tells
//!   compactions which keyspaces owe deletes through [`compaction::Obligations`];
//! - tables: [`table`] (rows, secondary indexes, eager and deferred maintenance; the
//!   deferred algorithm's invariants are numbered in `table::deferred`). [`Db::open`]
//!   opens the engine with the table layer plugged in; [`PartitionedDb`] splits tables
//!   by primary key hash over [`partition`]s;
//! - beside tables, over the engine: [`partition`] (N databases under one directory,
//!   keys routed by a stable hash) and [`multimap`] (keys holding many sorted values,
//!   streamed), which use only `db`.
//!
//! Limits: keys up to [`options::MAX_KEY_SIZE`] bytes, values up to
//! [`options::MAX_VALUE_SIZE`] bytes, batches up to [`options::MAX_BATCH_SIZE`] bytes;
//! larger inputs are refused with [`Error::InvalidArgument`] and nothing is written.

#![deny(missing_docs)]
// Library code never unwraps: I/O, decoding and user input return errors. Tests may.
#![deny(clippy::unwrap_used)]

pub mod batch;
pub mod codec;
pub mod compaction;
pub mod db;
pub mod delete_key;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod memtable;
pub mod multimap;
pub mod options;
mod parallel;
pub mod partition;
pub mod range_tombstone;
pub mod repair;
pub mod sstable;
pub mod table;
#[cfg(test)]
mod test_gate;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{
    Db, IngestOptions, IngestReport, IngestedFile, KeyRange, Keyspace, KeyspaceStats, LevelStats, Scan, Snapshot, Stats,
};
pub use error::{Error, Result};
pub use options::{Clock, ManualClock, Options, RecoveryMode, SyncPolicy, SystemClock};
pub use table::partitioned::{PartitionedDb, PartitionedTable};
