//! Counters and the [`Stats`] snapshot returned by `Db::stats`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters. Those describing work on the tree (user bytes, flushes,
/// compactions) are saved in the manifest with every flush and compaction, so they span
/// reopens; the rest count since open.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes: AtomicU64,
    pub user_ops: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub compaction_read: AtomicU64,
    pub compaction_written: AtomicU64,
    pub stall_micros: AtomicU64,
    pub stalls: AtomicU64,
    /// Point lookups, range scans and secondary range deletes since open: the mix the
    /// delete tiles' cost model sees (`compaction::tiles`).
    pub point_reads: AtomicU64,
    pub range_reads: AtomicU64,
    pub delete_wheres: AtomicU64,
    /// Delete-tile pages compactions dropped unread, and read while partly deleted.
    pub pages_dropped: AtomicU64,
    pub pages_partial: AtomicU64,
    /// Bytes read and written by compactions that rewrote files still holding entries
    /// a secondary range delete killed (`picker::deletes::KilledPutsTrigger`).
    pub kill_rewrite_read: AtomicU64,
    pub kill_rewrite_written: AtomicU64,
    /// Delete-tile pages rewritten alone into patch files (`db::patch`).
    pub pages_patched: AtomicU64,
}

/// Catalog entry holding the work counters, so write amplification spans reopens.
pub(crate) const STATS_META: &str = "stats/work";

impl Counters {
    /// The counters that describe work done to the tree, in a fixed order.
    fn persisted(&self) -> [&AtomicU64; 7] {
        [
            &self.user_bytes,
            &self.user_ops,
            &self.flushes,
            &self.flush_bytes,
            &self.compactions,
            &self.compaction_read,
            &self.compaction_written,
        ]
    }

    /// Encodes the persisted counters for the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for c in self.persisted() {
            crate::codec::put_varint(&mut out, Self::get(c));
        }
        out
    }

    /// Starts from counters saved by an earlier run (ignores undecodable input: they
    /// are statistics, not data).
    pub fn restore(&self, bytes: &[u8]) {
        let mut d = crate::codec::Decoder::new(bytes);
        for c in self.persisted() {
            match d.varint() {
                Ok(v) => c.store(v, Ordering::Relaxed),
                Err(_) => return,
            }
        }
    }

    pub fn add(c: &AtomicU64, v: u64) {
        c.fetch_add(v, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// One level of one keyspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// Sorted runs.
    pub runs: usize,
    /// SSTables.
    pub files: usize,
    /// Bytes on disk.
    pub bytes: u64,
    /// Point entries.
    pub entries: u64,
    /// Point, deferred and range tombstones.
    pub tombstones: u64,
    /// Clock time (microseconds) of the oldest tombstone (or pending purge of a deferred
    /// table's primary) in the level's files.
    pub oldest_tombstone_time: Option<u64>,
    /// Pages per delete tile of the tables written to this level, when the keyspace
    /// declares a delete key.
    pub tile_h: Option<u32>,
    /// Why that h: fixed by the user, or the cost model's figures.
    pub tile_reason: Option<String>,
}

/// One keyspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyspaceStats {
    /// Name.
    pub name: String,
    /// Id.
    pub id: u32,
    /// Levels, 0 first (empty trailing levels omitted).
    pub levels: Vec<LevelStats>,
}

impl KeyspaceStats {
    /// Bytes on disk over all levels.
    pub fn bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }
    /// Entries over all levels.
    pub fn entries(&self) -> u64 {
        self.levels.iter().map(|l| l.entries).sum()
    }
    /// Tombstones over all levels.
    pub fn tombstones(&self) -> u64 {
        self.levels.iter().map(|l| l.tombstones).sum()
    }
}

/// A point-in-time report of the database's shape and work.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Per keyspace.
    pub keyspaces: Vec<KeyspaceStats>,
    /// Key and value bytes written by users (kept across reopens, as of the last flush).
    pub user_bytes_written: u64,
    /// Operations written by users (kept across reopens, as of the last flush).
    pub user_ops_written: u64,
    /// Bytes appended to the WAL since open.
    pub wal_bytes_written: u64,
    /// WAL fsyncs since open.
    pub wal_syncs: u64,
    /// Memtable flushes (kept across reopens).
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Compactions (kept across reopens) (trivial moves included).
    pub compactions: u64,
    /// Compactions that only moved files.
    pub trivial_moves: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// (flush + compaction bytes written) / user bytes written.
    pub write_amplification: f64,
    /// Times writers stalled.
    pub stalls: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Block cache bytes in use.
    pub block_cache_usage: u64,
    /// Block cache capacity.
    pub block_cache_capacity: u64,
    /// Data-block lookups served by the block cache since open (point reads and scans;
    /// compactions read their inputs past the cache; 0 without a cache). With
    /// [`block_cache_misses`](Self::block_cache_misses), the data blocks touched:
    /// their difference over a read-only phase divided by its lookups is the read
    /// amplification in blocks per lookup.
    pub block_cache_hits: u64,
    /// Data-block lookups that missed the block cache and read the file since open.
    pub block_cache_misses: u64,
    /// Compaction output blocks cached as they were written because their keys were
    /// cached in the compaction's inputs (see `compaction::warm`).
    pub block_cache_warmed: u64,
    /// SSTables held open by the table cache (bounded by `Options::max_open_files`).
    pub open_sst_files: usize,
    /// Whether a memtable flush is running now.
    pub flush_running: bool,
    /// Compactions running now.
    pub compactions_running: usize,
    /// Last committed seqno.
    pub last_seq: u64,
    /// Live snapshots.
    pub snapshots: usize,
    /// Background error, if the database is in a failed state.
    pub background_error: Option<String>,
    /// Secondary range deletes since open.
    pub delete_wheres: u64,
    /// Delete-tile pages compactions dropped without reading them, since open.
    pub delete_pages_dropped: u64,
    /// Delete-tile pages compactions read (and rewrote the survivors of) because a
    /// secondary range delete covered them in part, since open.
    pub delete_pages_partial: u64,
    /// Bytes compactions read to rewrite files that still held entries a secondary
    /// range delete killed (pages it covered in part), since open; part of
    /// `compaction_bytes_read`.
    pub delete_rewrite_bytes_read: u64,
    /// Bytes those rewrites wrote, since open; part of `compaction_bytes_written`.
    /// Both include page patches.
    pub delete_rewrite_bytes_written: u64,
    /// Delete-tile pages a secondary range delete covered in part that were rewritten
    /// alone into patch files, without their file (`sstable::patch`), since open.
    pub delete_pages_patched: u64,
}

impl Stats {
    /// Bytes on disk of all SSTables.
    pub fn total_bytes(&self) -> u64 {
        self.keyspaces.iter().map(KeyspaceStats::bytes).sum()
    }

    /// A keyspace's stats by name.
    pub fn keyspace(&self, name: &str) -> Option<&KeyspaceStats> {
        self.keyspaces.iter().find(|k| k.name == name)
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for ks in &self.keyspaces {
            writeln!(
                f,
                "keyspace {} (id {}): {} bytes, {} entries, {} tombstones",
                ks.name,
                ks.id,
                ks.bytes(),
                ks.entries(),
                ks.tombstones()
            )?;
            for l in &ks.levels {
                writeln!(
                    f,
                    "  L{:<2} runs {:>3}  files {:>5}  bytes {:>12}  entries {:>10}  tombstones {:>9}",
                    l.level, l.runs, l.files, l.bytes, l.entries, l.tombstones
                )?;
                if let (Some(h), Some(why)) = (l.tile_h, &l.tile_reason) {
                    writeln!(f, "      delete tiles: h = {h} ({why})")?;
                }
            }
        }
        writeln!(f, "user bytes written   {}", self.user_bytes_written)?;
        writeln!(
            f,
            "wal bytes written    {} ({} syncs)",
            self.wal_bytes_written, self.wal_syncs
        )?;
        writeln!(
            f,
            "flushes              {} ({} bytes)",
            self.flushes, self.flush_bytes_written
        )?;
        writeln!(
            f,
            "compactions          {} ({} moves; read {} bytes, wrote {} bytes)",
            self.compactions, self.trivial_moves, self.compaction_bytes_read, self.compaction_bytes_written
        )?;
        writeln!(f, "write amplification  {:.2}", self.write_amplification)?;
        writeln!(f, "stalls               {} ({} us)", self.stalls, self.stall_micros)?;
        writeln!(
            f,
            "memtable             {} bytes, {} immutable",
            self.memtable_bytes, self.immutable_memtables
        )?;
        writeln!(
            f,
            "block cache          {} / {} bytes, {} hits, {} misses, {} warmed by compaction",
            self.block_cache_usage,
            self.block_cache_capacity,
            self.block_cache_hits,
            self.block_cache_misses,
            self.block_cache_warmed
        )?;
        if self.delete_wheres > 0 || self.delete_pages_dropped > 0 {
            writeln!(
                f,
                "delete_where         {} ({} pages dropped unread, {} read in part, {} patched; rewrites read {} bytes, wrote {} bytes)",
                self.delete_wheres,
                self.delete_pages_dropped,
                self.delete_pages_partial,
                self.delete_pages_patched,
                self.delete_rewrite_bytes_read,
                self.delete_rewrite_bytes_written
            )?;
        }
        write!(f, "last seqno           {}", self.last_seq)?;
        if let Some(e) = &self.background_error {
            write!(f, "\nbackground error     {e}")?;
        }
        Ok(())
    }
}
