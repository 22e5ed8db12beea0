//! Version edits: the delta records of the manifest.
//!
//! One edit is applied atomically. It may add and remove files in several keyspaces at
//! once (a primary compaction installs its deferred deletes into the secondary
//! keyspaces in the same edit), create or drop keyspaces, and change catalog entries.

use crate::key::SeqNo;

/// What the manifest remembers about one SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number; the file is `<number>.sst` in the database directory.
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest user key (point keys and range-tombstone starts).
    pub smallest: Vec<u8>,
    /// Largest user key, inclusive (point keys and range-tombstone ends, conservatively).
    pub largest: Vec<u8>,
    /// Smallest seqno in the file.
    pub min_seq: SeqNo,
    /// Largest seqno in the file.
    pub max_seq: SeqNo,
    /// Number of point entries (all kinds).
    pub entries: u64,
    /// Point deletes + deferred deletes + range tombstones.
    pub tombstones: u64,
    /// Range tombstones alone.
    pub range_tombstones: u64,
    /// Clock time (microseconds) of the oldest tombstone, if any.
    pub oldest_tombstone_time: Option<u64>,
    /// Sum of raw key and value bytes of the entries.
    pub raw_bytes: u64,
    /// For an ingested external file: the seqno all its entries are read with (they are
    /// stored with seqno 0; `db::ingest`). `None` for files the engine wrote.
    pub global_seq: Option<SeqNo>,
    /// Offsets of the pages of a tiled file that secondary range deletes dropped
    /// without rewriting it, ascending (readers skip them; `compaction::tiles`).
    pub dropped_pages: Vec<u64>,
}

/// A file added to a keyspace's level, as a piece of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Keyspace id.
    pub keyspace: u32,
    /// Level, 0 = newest.
    pub level: u32,
    /// Run id: files of one sorted run share it; larger is newer.
    pub run: u64,
    /// The file.
    pub meta: FileMeta,
}

/// A change to the current version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Keyspaces created: (id, name).
    pub new_keyspaces: Vec<(u32, String)>,
    /// Keyspaces dropped (their files are removed as well).
    pub dropped_keyspaces: Vec<u32>,
    /// Files added.
    pub new_files: Vec<NewFile>,
    /// Files removed: (keyspace, file number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Highest seqno durable in SSTables (recovery replays WAL records above it).
    pub last_seq: Option<SeqNo>,
    /// WAL files numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next unused keyspace id.
    pub next_keyspace_id: Option<u32>,
    /// Catalog entries set (`Some`) or removed (`None`), by name.
    pub meta: Vec<(String, Option<Vec<u8>>)>,
}
