//! Multimap behaviour beyond the model test: bad input changes nothing, batches are
//! atomic across multimaps and keyspaces, delete_all is one range tombstone, bulk
//! loads on one database and on partitions, and what a value costs on disk.

use strata::multimap::{MultiMap, encoding::MAX_ENTRY_SIZE};
use strata::partition::{MAX_PARTITIONS, Partitions};
use strata::sstable::FilterKey;
use strata::{Db, Error, Options, WriteBatch};

fn small() -> Options {
    Options {
        memtable_budget: 64 << 10,
        target_file_size: 256 << 10,
        ..Options::default()
    }
}

/// A small-files database holding one multimap, "mm".
fn open_mm() -> (tempfile::TempDir, Db, MultiMap) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    let mm = MultiMap::new(db.create_keyspace("mm").expect("ks"));
    (dir, db, mm)
}

fn values(mm: &MultiMap, k: &[u8]) -> Vec<Vec<u8>> {
    mm.get(k).expect("get").map(|r| r.expect("value")).collect()
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let (dir, db, mm) = open_mm();
    mm.put(b"k", b"v").expect("put");
    let seq = db.last_seq();
    let big = vec![7u8; MAX_ENTRY_SIZE];
    let attempts: Vec<(&str, strata::Result<()>)> = vec![
        ("empty key put", mm.put(b"", b"v")),
        ("empty key delete", mm.delete(b"", b"v")),
        ("empty key delete_all", mm.delete_all(b"")),
        ("oversize value", mm.put(b"k", &big)),
        ("oversize delete", mm.delete(b"k", &big)),
        ("empty key contains", mm.contains(b"", b"v").map(|_| ())),
        ("empty key get", mm.get(b"").map(|_| ())),
    ];
    for (what, r) in attempts {
        let e = r.expect_err(what);
        assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}");
    }
    let e = mm.put(b"k", &big).expect_err("oversize");
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
    // A batch keeps its earlier operations and gets none of the bad ones.
    let mut b = WriteBatch::new();
    mm.put_in(&mut b, b"k", b"w").expect("put_in");
    assert!(mm.put_in(&mut b, b"", b"x").is_err());
    assert!(mm.put_in(&mut b, b"k", &big).is_err());
    assert_eq!(b.len(), 1);
    // A load stops at the bad pair, naming it; nothing after it is written.
    let pairs = vec![
        (b"x".to_vec(), b"1".to_vec()),
        (Vec::new(), b"2".to_vec()),
        (b"y".to_vec(), b"3".to_vec()),
    ];
    let e = mm.load(pairs, 2).expect_err("bad pair");
    assert!(e.to_string().contains("pair 1"), "{e}");
    assert_eq!(db.last_seq(), seq, "a refused write consumed a seqno");
    assert_eq!(values(&mm, b"k"), vec![b"v".to_vec()]);
    assert!(values(&mm, b"y").is_empty());
    for n in [0, MAX_PARTITIONS + 1] {
        let target = dir.path().join(format!("parts{n}"));
        let e = Partitions::open(&target, n, small()).expect_err("bad count");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(
            !target.exists(),
            "a refused partition count created {}",
            target.display()
        );
    }
}

#[test]
fn a_batch_spans_multimaps_and_keyspaces_atomically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    let comments = db.create_keyspace("comments").expect("ks");
    let by_author = MultiMap::new(db.create_keyspace("by_author").expect("ks"));
    let by_sub = MultiMap::new(db.create_keyspace("by_subreddit").expect("ks"));
    by_author.put(b"alice", b"c0").expect("put");
    let before = db.snapshot();
    let mut b = WriteBatch::new();
    b.put(&comments, b"c1", b"{text}");
    by_author.put_in(&mut b, b"alice", b"c1").expect("put_in");
    by_sub.put_in(&mut b, b"rust", b"c1").expect("put_in");
    by_author.delete_in(&mut b, b"alice", b"c0").expect("delete_in");
    db.write(b).expect("write");
    assert_eq!(values(&by_author, b"alice"), vec![b"c1".to_vec()]);
    assert_eq!(values(&by_sub, b"rust"), vec![b"c1".to_vec()]);
    // The snapshot from before sees none of the batch in any of the three.
    let old: Vec<_> = by_author
        .get_at(&before, b"alice", ..)
        .expect("get_at")
        .map(|r| r.expect("v"))
        .collect();
    assert_eq!(old, vec![b"c0".to_vec()]);
    assert_eq!(by_sub.get_at(&before, b"rust", ..).expect("get_at").count(), 0);
    assert_eq!(before.get(&comments, b"c1").expect("get"), None);
    // A snapshot of another database is refused.
    let other = Db::open(dir.path().join("other"), small()).expect("open");
    let e = by_author
        .get_at(&other.snapshot(), b"alice", ..)
        .expect_err("foreign snapshot");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn delete_all_is_one_range_tombstone_and_spares_neighbours() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    let ks = db.create_keyspace("mm").expect("ks");
    let mm = MultiMap::new(ks.clone());
    // Keys that are prefixes of each other and contain zero bytes.
    for k in [&b"a"[..], b"a\x00", b"ab", b"a\x00b"] {
        mm.load((0..500u32).map(|i| (k, i.to_be_bytes())), 1).expect("load");
    }
    db.flush().expect("flush");
    let seq = db.last_seq();
    mm.delete_all(b"a").expect("delete_all");
    assert_eq!(db.last_seq(), seq + 1, "delete_all is one operation");
    db.flush().expect("flush");
    let st = db.stats();
    let ks_stats = st.keyspace("mm").expect("stats");
    assert!(ks_stats.tombstones() <= 1, "tombstones: {}", ks_stats.tombstones());
    assert!(values(&mm, b"a").is_empty());
    for k in [&b"a\x00"[..], b"ab", b"a\x00b"] {
        assert_eq!(mm.get(k).expect("get").count(), 500, "{k:?}");
    }
    db.compact_range().expect("compact");
    assert!(values(&mm, b"a").is_empty());
    assert_eq!(mm.entries().expect("entries").count(), 1500);
}

#[test]
fn paging_walks_a_key_in_pages_both_ways() {
    let (_dir, db, mm) = open_mm();
    mm.load((0..1000u32).map(|i| (b"k", i.to_be_bytes())), 2).expect("load");
    db.flush().expect("flush");
    let mut seen = Vec::new();
    let mut from: Option<Vec<u8>> = None;
    loop {
        let page: Vec<Vec<u8>> = match &from {
            None => mm.get(b"k").expect("get").take(64).map(|r| r.expect("v")).collect(),
            Some(f) => mm
                .get_range(
                    b"k",
                    (std::ops::Bound::Excluded(f.as_slice()), std::ops::Bound::Unbounded),
                )
                .expect("get")
                .take(64)
                .map(|r| r.expect("v"))
                .collect(),
        };
        let Some(last) = page.last() else { break };
        from = Some(last.clone());
        seen.extend(page);
    }
    let want: Vec<Vec<u8>> = (0..1000u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(seen, want);
    let back: Vec<Vec<u8>> = mm
        .get_range(b"k", ..500u32.to_be_bytes().as_slice())
        .expect("get")
        .rev()
        .take(3)
        .map(|r| r.expect("v"))
        .collect();
    assert_eq!(back, vec![want[499].clone(), want[498].clone(), want[497].clone()]);
}

#[test]
fn partitioned_load_puts_each_key_in_one_partition_and_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = Partitions::open(dir.path(), 4, small()).expect("open");
    let mm = MultiMap::partitioned(parts.keyspace("by_author").expect("ks"));
    let pairs = (0..20_000u32).map(|i| (format!("author{}", i % 97), format!("{i:07}")));
    let mut last = 0;
    let n = mm
        .load_with_progress(pairs, 3, |done| {
            assert!(done > last);
            last = done;
        })
        .expect("load");
    assert_eq!((n, last), (20_000, 20_000));
    for k in 0..97u32 {
        let key = format!("author{k}");
        let home = mm.partition_of(key.as_bytes());
        for p in 0..4 {
            let here = MultiMap::new(mm.partition(p).expect("partition").clone())
                .get(key.as_bytes())
                .expect("get")
                .count();
            assert_eq!(here > 0, p == home, "key {key} partition {p}");
        }
    }
    drop(mm);
    parts.close().expect("close");
    let parts = Partitions::open_existing(dir.path(), small()).expect("reopen");
    let mm = MultiMap::partitioned(parts.keyspace("by_author").expect("ks"));
    let total: usize = (0..97u32)
        .map(|k| {
            let v = values(&mm, format!("author{k}").as_bytes());
            assert!(v.windows(2).all(|w| w[0] < w[1]), "values sorted");
            v.len()
        })
        .sum();
    assert_eq!(total, 20_000);
    let keys: Vec<Vec<u8>> = mm.entries().expect("entries").map(|r| r.expect("e").0).collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "entries merge in key order");
}

#[test]
fn both_ends_of_a_stream_meet_once() {
    let (_dir, db, mm) = open_mm();
    mm.load((0..301u32).map(|i| (b"k", i.to_be_bytes())), 1).expect("load");
    db.flush().expect("flush");
    mm.put(b"k", &1000u32.to_be_bytes()).expect("put");
    let mut it = mm.get(b"k").expect("get");
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let f = it.next().map(|r| r.expect("v"));
        let b = it.next_back().map(|r| r.expect("v"));
        if f.is_none() && b.is_none() {
            break;
        }
        front.extend(f);
        back.extend(b);
    }
    back.reverse();
    front.extend(back);
    let want: Vec<Vec<u8>> = (0..301u32).chain([1000]).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(front, want, "every value exactly once");
}

/// What a value costs once compacted: the key's bytes are prefix-compressed away, so a
/// 7-byte value under a 40-byte key costs about the value, its 8-byte seqno trailer and
/// a few bytes of entry header, not the key again.
#[test]
fn a_value_costs_close_to_its_own_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let mm = MultiMap::new(db.create_keyspace("mm").expect("ks"));
    let key = vec![b'k'; 40];
    let n = 100_000u32;
    mm.load((0..n).map(|i| (&key, format!("{:07}", i * 7))), 1)
        .expect("load");
    db.compact_range().expect("compact");
    let bytes = db.stats().keyspace("mm").expect("stats").bytes();
    let per_value = bytes as f64 / f64::from(n);
    eprintln!("{bytes} bytes for {n} values: {per_value:.2} bytes per value");
    // value 7 + trailer 8 + header 3 = 18, plus restarts, index and filter.
    assert!(per_value < 22.0, "{per_value:.2} bytes per value");
}

/// Bytes of bloom filter in `db`'s live tables, read from their properties.
fn filter_bytes(db: &Db) -> u64 {
    let fs = strata::fs::RealFs;
    db.live_files()
        .iter()
        .map(|f| {
            let path = db.path().join(strata::sstable::sst_file_name(f.number));
            let file = strata::fs::FileSystem::open(&fs, &path).expect("open table");
            strata::sstable::SstReader::open(file, f.number, None)
                .expect("read table")
                .properties()
                .filter_size
        })
        .sum()
}

#[test]
fn filters_by_key_hold_one_entry_per_key_and_still_answer_contains() {
    let mut sizes = Vec::new();
    for by_key in [false, true] {
        let (_dir, db, mm) = open_mm();
        if by_key {
            mm.filter_by_key().expect("filter by key");
        }
        for k in 0..100u32 {
            mm.load((0..100u32).map(|v| (format!("key{k}"), format!("v{v:04}"))), 1)
                .expect("load");
        }
        db.compact_range().expect("compact");
        sizes.push(filter_bytes(&db));
        assert!(mm.contains(b"key7", b"v0042").expect("contains"));
        assert!(!mm.contains(b"key7", b"v9999").expect("contains"));
        assert!(!mm.contains(b"key100", b"v0042").expect("contains"));
        assert_eq!(values(&mm, b"key99").len(), 100);
    }
    // 100 keys against 10,000 entries.
    assert!(sizes[1] * 20 < sizes[0], "filter bytes whole / by key: {sizes:?}");
}

#[test]
fn tables_of_both_kinds_of_filter_serve_one_keyspace_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ks_of = |db: &Db| db.keyspace("mm").expect("ks");
    {
        let db = Db::open(dir.path(), small()).expect("open");
        let mm = MultiMap::new(db.create_keyspace("mm").expect("ks"));
        mm.put(b"old", b"1").expect("put");
        db.flush().expect("flush");
        mm.filter_by_key().expect("filter by key");
        mm.put(b"new", b"2").expect("put");
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), small()).expect("reopen");
    assert_eq!(ks_of(&db).filter_key().expect("filter key"), FilterKey::KeyPrefix);
    let mm = MultiMap::new(ks_of(&db));
    for (k, v, want) in [
        (b"old", b"1", true),
        (b"new", b"2", true),
        (b"old", b"2", false),
        (b"new", b"1", false),
    ] {
        assert_eq!(mm.contains(k, v).expect("contains"), want, "{k:?} {v:?}");
    }
    db.compact_range().expect("compact");
    assert!(mm.contains(b"old", b"1").expect("contains"));
    assert!(!mm.contains(b"gone", b"1").expect("contains"));
    // Dropping the keyspace drops its setting: a new one of the same name starts whole.
    drop(mm);
    db.drop_keyspace("mm").expect("drop");
    assert_eq!(
        db.create_keyspace("mm").expect("ks").filter_key().expect("filter key"),
        FilterKey::Whole
    );
}

/// Large pairs are handed to the writers in batches bounded by bytes as well as by
/// count: 300 pairs of 60 KiB go in batches of at most 4 MiB (70 pairs), not in one
/// batch of 18 MiB.
#[test]
fn load_batches_are_bounded_in_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small()).expect("open");
    let mm = MultiMap::new(db.create_keyspace("big").expect("ks"));
    let value = |i: u32| {
        let mut v = vec![b'x'; 60 << 10];
        v[..4].copy_from_slice(&i.to_be_bytes());
        v
    };
    let mut steps = Vec::new();
    let mut last = 0;
    let n = mm
        .load_with_progress((0..300u32).map(|i| (b"k".to_vec(), value(i))), 1, |done| {
            steps.push(done - last);
            last = done;
        })
        .expect("load");
    assert_eq!(n, 300);
    assert!(steps.len() >= 5 && steps.iter().all(|&s| s <= 70), "{steps:?}");
    assert_eq!(mm.get(b"k").expect("get").count(), 300);
}
