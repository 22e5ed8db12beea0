//! [`Db::live_files`]: one line per live SSTable (with its page map), for tools that audit tombstones (how
//! old the oldest one on disk is, where they sit) without opening the files.

use super::Db;

/// One live SSTable of one keyspace, as the current version lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveFile {
    /// Keyspace id.
    pub keyspace: u32,
    /// Keyspace name.
    pub keyspace_name: String,
    /// Level, 0 = newest.
    pub level: usize,
    /// True if `level` is the deepest non-empty level of its keyspace.
    pub last_level: bool,
    /// File number.
    pub number: u64,
    /// Bytes on disk.
    pub bytes: u64,
    /// Point entries (all kinds).
    pub entries: u64,
    /// Point deletes, deferred deletes and range tombstones.
    pub tombstones: u64,
    /// Clock time (microseconds of `Options::clock`) of the oldest tombstone in the file,
    /// or of the oldest pending purge for a deferred table's primary file. It is never
    /// later than the time the tombstone was written (flushes use the memtable's
    /// creation time, compactions the oldest time among their inputs, or their own for
    /// a put a delete-where kills, written as a tombstone), so "no live file
    /// has a time older than `now - D`" implies every tombstone written before
    /// `now - D` is gone from disk.
    pub oldest_tombstone_time: Option<u64>,
    /// Offsets of the delete-tile pages the version dropped from the file (still in the
    /// file's bytes, never read; `FileMeta::pages`).
    pub dropped_pages: Vec<u64>,
    /// The delete-tile pages read from patch files instead of the file, ascending by
    /// page (`sstable::patch`): pages a secondary range delete covered in part,
    /// rewritten alone. Their patch files live while a live file names them.
    pub patched_pages: Vec<crate::sstable::patch::PagePatch>,
}

impl Db {
    /// Every live SSTable of every keyspace, with its tombstone count and oldest
    /// tombstone time, from the current version (no I/O). Memtables are not included.
    pub fn live_files(&self) -> Vec<LiveFile> {
        let sv = self.inner().current();
        let mut out = Vec::new();
        for ks in sv.version.keyspaces.values() {
            let last = ks.last_level();
            for (li, level) in ks.levels.iter().enumerate() {
                for f in level.files() {
                    out.push(LiveFile {
                        keyspace: ks.id,
                        keyspace_name: ks.name.clone(),
                        level: li,
                        last_level: li == last,
                        number: f.meta.number,
                        bytes: f.meta.size,
                        entries: f.meta.entries,
                        tombstones: f.meta.tombstones,
                        oldest_tombstone_time: f.meta.oldest_tombstone_time,
                        dropped_pages: f.meta.pages.dropped.clone(),
                        patched_pages: f.meta.pages.patched.clone(),
                    });
                }
            }
        }
        out
    }
}
