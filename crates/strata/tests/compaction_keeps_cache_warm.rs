//! Compaction and the block cache: a compaction reads its inputs past the cache (their
//! blocks would only push hot ones out) and caches the output blocks whose keys were
//! cached in its inputs, so hot keys stay cached across it and cold ones stay out.

use strata::{Db, Options, SyncPolicy, WriteBatch};

const KEYS: u64 = 4_000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn open(dir: &std::path::Path) -> Db {
    let opts = Options {
        sync: SyncPolicy::None,
        block_size: 1024,
        block_cache_bytes: 16 << 20,
        ..Options::default()
    };
    Db::open(dir, opts).expect("open")
}

/// Two overlapping flushed files, so a full compaction has to merge them.
fn load(db: &Db) {
    let ks = db.default_keyspace();
    for pass in 0..2u8 {
        let mut b = WriteBatch::new();
        for i in (u64::from(pass)..KEYS).step_by(1 + usize::from(pass)) {
            b.put(&ks, &key(i), &[b'a' + pass; 100]);
        }
        db.write(b).expect("write");
        db.flush().expect("flush");
    }
}

fn read(db: &Db, keys: std::ops::Range<u64>) {
    let ks = db.default_keyspace();
    for i in keys {
        assert!(ks.get(&key(i)).expect("get").is_some(), "key {i} lost");
    }
}

#[test]
fn hot_keys_stay_cached_across_a_compaction_and_cold_ones_stay_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    load(&db);
    read(&db, 0..1_000);
    let before = db.stats();
    assert!(before.block_cache_misses > 0, "the reads should have filled the cache");

    db.compact_range().expect("compact");
    let after_compaction = db.stats();
    assert!(after_compaction.block_cache_warmed > 0, "no output block was cached");

    read(&db, 0..1_000);
    let hot = db.stats();
    assert_eq!(
        hot.block_cache_misses, after_compaction.block_cache_misses,
        "hot keys missed the cache after the compaction"
    );
    assert!(hot.block_cache_hits > after_compaction.block_cache_hits);

    read(&db, 3_000..KEYS);
    let cold = db.stats();
    assert!(
        cold.block_cache_misses > hot.block_cache_misses,
        "keys nobody read before the compaction were cached by it"
    );
}

#[test]
fn a_compaction_caches_nothing_when_nothing_was_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    load(&db);
    db.compact_range().expect("compact");
    let s = db.stats();
    assert!(s.compactions > 0, "the test needs a compaction");
    assert_eq!(s.block_cache_usage, 0, "compaction inputs or outputs were cached");
    assert_eq!(s.block_cache_warmed, 0);
    // The data is all there, read from the files.
    read(&db, 0..KEYS);
    assert!(db.stats().block_cache_misses > 0);
}
