//! What the tests measuring that a stream stays in bounded memory share: the row
//! count from an environment variable and a database whose own buffers are small.

use strata::{Db, Options};
use tempfile::TempDir;

/// The count in environment variable `var`, or `default` when unset or unparsable.
pub fn env_count(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A fresh database with a 1 MiB block cache and an 8 MiB memtable: the cache is
/// bounded memory of its own, kept small so the measurement is about the stream.
pub fn small_buffers_db() -> (TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        block_cache_bytes: 1 << 20,
        memtable_budget: 8 << 20,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    (dir, db)
}
