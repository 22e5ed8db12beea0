//! SQLite as a benchmark peer: one database file in WAL mode, 8 KiB pages, connections
//! with `synchronous=OFF` and a per-connection page cache.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::BenchResult;

/// A fresh SQLite database file shared by the benchmark's connections.
pub struct SqliteFile {
    path: PathBuf,
    cache_bytes: usize,
}

impl SqliteFile {
    /// Creates `path` with `schema`; `cache_bytes` is each connection's page cache.
    pub fn create(path: &Path, cache_bytes: usize, schema: &str) -> BenchResult<SqliteFile> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "page_size", 8192)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(schema)?;
        Ok(SqliteFile {
            path: path.to_path_buf(),
            cache_bytes,
        })
    }

    /// A new connection (SQLite serializes writers; waits rather than fails).
    pub fn connect(&self) -> BenchResult<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(std::time::Duration::from_secs(600))?;
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.pragma_update(None, "cache_size", -((self.cache_bytes / 1024).max(1) as i64))?;
        Ok(conn)
    }

    /// Bytes of the database file and its WAL.
    pub fn file_bytes(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", self.path.display())).ok())
            .map(|m| m.len())
            .sum()
    }
}
