//! The tombstone density trigger weighs a file's tombstones against the entries its
//! compaction would rewrite: a small flushed file that is half tombstones does not
//! rewrite the large level below it, while a flush that deletes a good share of that
//! level does get compacted early.

use strata::{Db, Options, SyncPolicy, WriteBatch};

const KEYS: u64 = 20_000;

fn key(i: u64) -> Vec<u8> {
    // Spread over the key space, so every flush overlaps the whole level below.
    format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes()
}

/// A database whose data sits compacted in its last level, with no FADE threshold:
/// only the density trigger (or the size triggers) can start a compaction.
fn loaded(dir: &std::path::Path) -> Db {
    let opts = Options {
        sync: SyncPolicy::None,
        tombstone_density_trigger: Some(0.25),
        ..Options::default()
    };
    let db = Db::open(dir, opts).expect("open");
    let ks = db.default_keyspace();
    let mut b = WriteBatch::new();
    for i in 0..KEYS {
        b.put(&ks, &key(i), &[b'v'; 64]);
    }
    db.write(b).expect("write");
    db.compact_range().expect("compact");
    db
}

/// Writes `deletes` deletes and `puts` puts of existing keys, flushes, and returns the
/// compactions that followed.
fn flush_deletes(db: &Db, deletes: u64, puts: u64) -> u64 {
    let ks = db.default_keyspace();
    let mut b = WriteBatch::new();
    for i in 0..deletes {
        b.delete(&ks, &key(i));
    }
    for i in deletes..deletes + puts {
        b.put(&ks, &key(i), &[b'w'; 64]);
    }
    db.write(b).expect("write");
    let before = db.stats().compactions;
    db.flush().expect("flush");
    db.wait_for_background().expect("background");
    db.stats().compactions - before
}

#[test]
fn a_small_dense_flush_does_not_rewrite_the_level_below() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = loaded(dir.path());
    // Half tombstones, but 100 of them against 20,000 entries below.
    assert_eq!(
        flush_deletes(&db, 100, 100),
        0,
        "a tiny dense file rewrote the level below it"
    );
    assert!(db.default_keyspace().get(&key(5)).expect("get").is_none());
    assert!(db.default_keyspace().get(&key(150)).expect("get").is_some());
}

#[test]
fn a_flush_deleting_much_of_the_level_below_is_compacted_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = loaded(dir.path());
    // 10,000 tombstones against 30,000 entries rewritten: a third.
    assert!(flush_deletes(&db, KEYS / 2, 0) > 0, "a dense merge was not triggered");
    let s = db.stats();
    let tombstones: u64 = s.keyspaces.iter().map(|k| k.tombstones()).sum();
    assert_eq!(tombstones, 0, "the compaction should have dropped the tombstones");
    assert!(db.default_keyspace().get(&key(5)).expect("get").is_none());
    assert!(db.default_keyspace().get(&key(KEYS - 1)).expect("get").is_some());
}
