//! Loading a database's default keyspace in write batches, for tests that need many
//! files on disk before they start.

use strata::{Db, WriteBatch};

/// Writes keys `key(0..n)`, each with `value`, in batches of `per_batch`, then flushes
/// and waits for background work so the data sits in files.
pub fn load_in_batches(db: &Db, n: u64, per_batch: u64, key: impl Fn(u64) -> String, value: &[u8]) {
    for chunk in 0..n / per_batch {
        let mut b = WriteBatch::new();
        for i in chunk * per_batch..(chunk + 1) * per_batch {
            b.put(&db.default_keyspace(), key(i).as_bytes(), value);
        }
        db.write(b).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_background().expect("background");
}
