//! Builder/reader round trips, corruption detection and model-checked seeks.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::FOOTER_LEN;
use super::*;
use crate::error::Error;
use crate::fs::{FileSystem, RealFs};
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, compare_internal, internal_key, last_key_of, parse_internal_key, seek_key};
use crate::range_tombstone::RangeTombstone;
use crate::sstable::cache::BlockCache;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// User key `i` of the model; a few hold non-printable bytes.
fn uk_of(i: usize) -> Vec<u8> {
    if i % 50 == 7 {
        format!("k{i:05}\x00\u{ff}").into_bytes()
    } else {
        format!("k{i:05}").into_bytes()
    }
}

/// Sorted entries: `n` user keys with 1..=4 versions of random kinds, plus some
/// deferred deletes sharing a Put's seqno.
fn model(n: usize, seed: u64) -> Entries {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let kinds = [ValueKind::Put, ValueKind::Delete, ValueKind::DeferredDelete];
    for i in 0..n {
        let uk = uk_of(i);
        let mut seq: SeqNo = rng.gen_range(1..1000);
        for _ in 0..rng.gen_range(1..=4) {
            let kind = kinds[rng.gen_range(0..3)];
            let value = if kind == ValueKind::Put {
                vec![b'a' + (i % 26) as u8; rng.gen_range(0..40)]
            } else {
                Vec::new()
            };
            if kind == ValueKind::Put && rng.gen_bool(0.1) {
                out.push((internal_key(&uk, seq, ValueKind::DeferredDelete), Vec::new()));
            }
            out.push((internal_key(&uk, seq, kind), value));
            seq += rng.gen_range(1..500);
        }
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out
}

fn tombstones() -> Vec<RangeTombstone> {
    vec![
        RangeTombstone {
            start: b"k00010".to_vec(),
            end: b"k00020".to_vec(),
            seq: 5000,
        },
        RangeTombstone {
            start: b"a".to_vec(),
            end: b"b".to_vec(),
            seq: 1,
        },
        RangeTombstone {
            start: b"k00100".to_vec(),
            end: b"zz".to_vec(),
            seq: 7,
        },
    ]
}

fn write(dir: &Path, number: u64, es: &Entries, ts: &[RangeTombstone], opts: SstOptions) -> (PathBuf, u64, Properties) {
    let path = dir.join(sst_file_name(number));
    let mut b = SstWriter::new(RealFs.create(&path).expect("create"), path.clone(), opts);
    for (k, v) in es {
        b.add(k, v).expect("add");
    }
    for t in ts {
        b.add_range_tombstone(t.clone());
    }
    b.note_tombstone_time(300);
    b.note_tombstone_time(200);
    let (size, props) = b.finish().expect("finish");
    (path, size, props)
}

fn open(path: &Path, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<SstReader>> {
    Ok(Arc::new(SstReader::open(RealFs.open(path)?, 1, cache)?))
}

fn scan_fwd(t: &Arc<SstReader>) -> crate::Result<Entries> {
    let mut it = t.iter();
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn model_get(es: &Entries, uk: &[u8], snap: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
    es.iter().find_map(|(k, v)| {
        let p = parse_internal_key(k)?;
        (p.user_key == uk && p.seq <= snap).then(|| (p.seq, p.kind, v.clone()))
    })
}

/// `None` (format version 3) for 0, else tiles of `h` pages by the value's first byte.
fn tiles(h: u32) -> Option<TileOptions> {
    (h > 0).then_some(TileOptions {
        h,
        delete_key: Some(crate::delete_key::DeleteKey { offset: 0, width: 1 }),
    })
}

fn small_blocks(compression: Compression) -> SstOptions {
    SstOptions {
        block_size: 512,
        compression,
        created_at: 42,
        ..SstOptions::default()
    }
}

/// Table 1 in `dir`: `model(n, seed)` and the tombstones, in small LZ4 blocks.
fn lz4_table(dir: &Path, n: usize, seed: u64) -> (Entries, PathBuf, u64) {
    let es = model(n, seed);
    let (path, size, _) = write(dir, 1, &es, &tombstones(), small_blocks(Compression::Lz4));
    (es, path, size)
}

#[test]
fn roundtrip_get_iterate_properties_with_and_without_lz4() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(3000, 1);
    let mut sizes = Vec::new();
    for (n, c) in [(1, Compression::None), (2, Compression::Lz4)] {
        let (path, size, props) = write(dir.path(), n, &es, &tombstones(), small_blocks(c));
        assert_eq!(size, std::fs::metadata(&path).expect("stat").len());
        sizes.push(size);
        let t = open(&path, Some(Arc::new(BlockCache::new(1 << 20)))).expect("open");
        assert_eq!(t.properties(), &props);
        assert_eq!(scan_fwd(&t).expect("scan"), es);

        let mut rev = Vec::new();
        let mut it = t.iter();
        it.seek_to_last().expect("seek_to_last");
        while it.valid() {
            rev.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().expect("prev");
        }
        rev.reverse();
        assert_eq!(rev, es);

        let mut sorted_ts = tombstones();
        sorted_ts.sort();
        assert_eq!(t.range_tombstones(), sorted_ts.as_slice());

        let kinds = |k| {
            es.iter()
                .filter(|(key, _)| parse_internal_key(key).map(|p| p.kind) == Some(k))
                .count() as u64
        };
        assert_eq!(props.entries, es.len() as u64);
        assert_eq!(props.puts, kinds(ValueKind::Put));
        assert_eq!(props.deletes, kinds(ValueKind::Delete));
        assert_eq!(props.deferred_deletes, kinds(ValueKind::DeferredDelete));
        assert_eq!(props.range_deletes, 3);
        assert_eq!(props.smallest_user_key, b"a");
        assert_eq!(props.largest_user_key, b"zz");
        let seqs: Vec<SeqNo> = es
            .iter()
            .filter_map(|(k, _)| parse_internal_key(k).map(|p| p.seq))
            .collect();
        assert_eq!(props.min_seq, 1);
        assert_eq!(props.max_seq, seqs.iter().copied().max().unwrap_or(0).max(5000));
        assert_eq!(props.raw_key_bytes, es.iter().map(|e| e.0.len() as u64).sum::<u64>());
        assert_eq!(props.raw_value_bytes, es.iter().map(|e| e.1.len() as u64).sum::<u64>());
        assert_eq!(props.oldest_tombstone_time, Some(200));
        assert_eq!(props.created_at, 42);
        assert!(props.data_blocks > 10);
        assert_eq!(t.fence_pointers().len() as u64, props.data_blocks);
        assert!(props.filter_size > 0 && props.index_size > 0);

        for i in (0..3000).step_by(7) {
            let uk = uk_of(i);
            for snap in [0, 1, 50, 400, 900, 1500, 2500, crate::key::MAX_SEQNO, u64::MAX] {
                assert_eq!(t.get(&uk, snap).expect("get"), model_get(&es, &uk, snap), "{i} @{snap}");
            }
            assert!(t.may_contain(&uk));
            let absent = format!("k{i:05}x").into_bytes();
            assert_eq!(t.get(&absent, u64::MAX).expect("get"), None);
        }
    }
    assert!(sizes[1] < sizes[0], "LZ4 should shrink compressible data: {sizes:?}");
}

#[test]
fn fence_keys_are_short_and_lookups_between_them_find_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es: Entries = [&b"apple"[..], b"banana", b"cherry"]
        .iter()
        .map(|k| (internal_key(k, 5, ValueKind::Put), b"v".to_vec()))
        .collect();
    // One entry per block, and no filter to answer the lookups before the index does.
    let opts = SstOptions {
        block_size: 1,
        bloom_fpr: 0.0,
        ..SstOptions::default()
    };
    let (path, _, _) = write(dir.path(), 1, &es, &[], opts);
    let t = open(&path, None).expect("open");
    let fences: Vec<Vec<u8>> = t.fence_pointers().into_iter().map(|f| f.key).collect();
    // "apple" | "banana": 'a' + 1 is not below 'b', so the next byte grows (likewise
    // for "banana" | "cherry"); the last block keeps its last key.
    let user = |k: &[u8]| crate::key::user_key(k).to_vec();
    assert_eq!(
        fences.iter().map(|f| user(f)).collect::<Vec<_>>(),
        [&b"aq"[..], b"bb", b"cherry"]
    );
    // "apricot" < "aq": the index sends it to the first block, which ends before it.
    assert_eq!(t.get(b"apricot", 9).expect("get"), None);
    assert_eq!(t.get(b"bz", 9).expect("get"), None);
    assert_eq!(
        t.get(b"banana", 9).expect("get"),
        Some((5, ValueKind::Put, b"v".to_vec()))
    );
    let mut it = t.iter();
    it.seek(&seek_key(b"apricot", 9)).expect("seek");
    assert_eq!(it.key(), es[1].0.as_slice());
    it.seek_for_prev(&seek_key(b"apricot", 9)).expect("seek_for_prev");
    assert_eq!(it.key(), es[0].0.as_slice());
}

#[test]
fn gets_find_the_versions_of_a_key_split_across_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es: Entries = vec![
        (internal_key(b"a", 5, ValueKind::Put), b"a5".to_vec()),
        (internal_key(b"b", 300, ValueKind::Put), b"b300".to_vec()),
        (internal_key(b"c", 250, ValueKind::Put), b"c250".to_vec()),
        (internal_key(b"c", 20, ValueKind::Delete), Vec::new()),
    ];
    let opts = SstOptions {
        block_size: 1,
        bloom_fpr: 0.0,
        ..SstOptions::default()
    };
    let (path, _, props) = write(dir.path(), 1, &es, &[], opts);
    assert_eq!(props.data_blocks, 4);
    assert_eq!(props.filter_size, 0);
    let t = open(&path, None).expect("open");
    assert!(t.filter().is_none());
    // Between whole user keys a fence is the user key's last internal key; inside "c"
    // it is c@250 itself, so that c@100 is sent to the block after it.
    let fences: Vec<Vec<u8>> = t.fence_pointers().into_iter().map(|f| f.key).collect();
    assert_eq!(
        fences,
        [
            last_key_of(b"a"),
            last_key_of(b"b"),
            internal_key(b"c", 250, ValueKind::Put),
            last_key_of(b"c")
        ]
    );
    assert_eq!(
        t.get(b"c", 100).expect("get"),
        Some((20, ValueKind::Delete, Vec::new()))
    );
    for uk in [&b"a"[..], b"b", b"c", b"d"] {
        for snap in [0, 5, 19, 20, 100, 250, 299, 300, 1000] {
            assert_eq!(t.get(uk, snap).expect("get"), model_get(&es, uk, snap));
        }
    }
}

/// Rewrites table `path` (written in the current format) with a version-2 index: an
/// ordinary block of the same fence keys with offset, size, seqno bounds and entry
/// count per block, as version-2 builders wrote it. Returns the data block count.
fn rewrite_with_version_2_index(path: &Path) -> u64 {
    let t = open(path, None).expect("open");
    let mut index = block::BlockBuilder::new(1);
    for fp in t.fence_pointers() {
        let mut it = t.block_iter(fp.handle).expect("block");
        it.seek_to_first().expect("first");
        let (mut min_seq, mut max_seq, mut entries) = (SeqNo::MAX, 0, 0);
        while it.valid() {
            let seq = parse_internal_key(it.key()).expect("key").seq;
            (min_seq, max_seq, entries) = (min_seq.min(seq), max_seq.max(seq), entries + 1);
            it.next().expect("next");
        }
        let v = index::FenceValue {
            handle: fp.handle,
            min_seq,
            max_seq,
            entries,
        };
        index.add(&fp.key, &v.encode());
    }
    let mut footer = *t.footer();
    let blocks = t.properties().data_blocks;
    drop(t);
    let mut bytes = std::fs::read(path).expect("read");
    bytes.truncate(footer.index.offset as usize);
    let (sealed, size) = format::seal_block(&index.finish(), Compression::None);
    bytes.extend_from_slice(&sealed);
    footer.index.size = size;
    footer.version = 2;
    bytes.extend_from_slice(&footer.encode());
    std::fs::write(path, &bytes).expect("write");
    blocks
}

#[test]
fn version_2_tables_read_like_version_3_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut es = model(400, 5);
    // A user key whose versions span blocks: its fences carry trailers.
    es.extend((0..40).map(|i| (internal_key(b"zz-many", 1000 - i, ValueKind::Put), vec![b'v'; 20])));
    let (path, _, props) = write(dir.path(), 1, &es, &tombstones(), small_blocks(Compression::None));
    let v3 = open(&path, None).expect("open");
    let v3_fences = v3.fence_pointers();
    assert!(v3.footer().version == 3 && v3_fences.len() > 10);
    drop(v3);
    let v3_bytes = std::fs::read(&path).expect("read");
    assert_eq!(rewrite_with_version_2_index(&path), props.data_blocks);
    let v2_bytes = std::fs::read(&path).expect("read");
    assert!(v2_bytes.len() > v3_bytes.len(), "the version-3 index is the smaller");
    let t = open(&path, None).expect("open version 2");
    assert_eq!(t.footer().version, 2);
    assert_eq!(t.fence_pointers(), v3_fences);
    assert_eq!(scan_fwd(&t).expect("scan"), es);
    for (ik, _) in es.iter().step_by(7) {
        let p = parse_internal_key(ik).expect("key");
        for snap in [p.seq - 1, p.seq, p.seq + 1] {
            assert_eq!(t.get(p.user_key, snap).expect("get"), model_get(&es, p.user_key, snap));
        }
    }
}

#[test]
fn an_index_of_fences_longer_than_the_tables_keys_is_corruption() {
    // Well-formed and checksummed, in order, naming the right blocks, but each fence is
    // 5 KB: more than all the table's keys together, which no builder writes.
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _, props) = write(dir.path(), 1, &model(100, 8), &[], small_blocks(Compression::None));
    let t = open(&path, None).expect("open");
    let mut index = index::IndexBuilder::new();
    for fp in t.fence_pointers() {
        let mut k = vec![b'z'; 5000];
        k.extend_from_slice(crate::key::user_key(&fp.key));
        index.add(&k, None, fp.handle);
    }
    assert!(5000 * props.data_blocks > props.raw_key_bytes);
    let mut footer = *t.footer();
    drop(t);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.truncate(footer.index.offset as usize);
    let (sealed, size) = format::seal_block(&index.finish(), Compression::None);
    bytes.extend_from_slice(&sealed);
    footer.index.size = size;
    bytes.extend_from_slice(&footer.encode());
    std::fs::write(&path, &bytes).expect("write");
    match open(&path, None) {
        Err(Error::Corruption { file, reason, .. }) => {
            assert_eq!(file, path);
            assert!(reason.contains("fences longer than the table's keys"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn builder_rejects_bad_keys_without_panicking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.sst");
    let mut b = SstWriter::new(
        RealFs.create(&path).expect("create"),
        path.clone(),
        SstOptions::default(),
    );
    assert!(b.is_empty());
    b.add(&internal_key(b"m", 5, ValueKind::Put), b"v").expect("first");
    for bad in [
        internal_key(b"m", 5, ValueKind::Put),
        internal_key(b"a", 9, ValueKind::Put),
        internal_key(b"m", 6, ValueKind::Put),
        b"short".to_vec(),
    ] {
        assert!(matches!(b.add(&bad, b""), Err(Error::InvalidArgument(_))));
    }
    b.add(&internal_key(b"m", 5, ValueKind::Delete), b"")
        .expect("lower kind, same seq sorts after");
    assert_eq!(b.num_entries(), 2);
    assert!(b.estimated_size() > 0);
    let (_, props) = b.finish().expect("finish");
    assert_eq!((props.entries, props.puts, props.deletes), (2, 1, 1));
}

#[test]
fn empty_and_tombstone_only_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _, props) = write(dir.path(), 1, &vec![], &[], SstOptions::default());
    assert!(props.is_empty());
    assert_eq!(props.oldest_tombstone_time, None, "no tombstone, no time");
    let t = open(&path, None).expect("open empty");
    assert!(scan_fwd(&t).expect("scan").is_empty());
    assert_eq!(t.get(b"a", 10).expect("get"), None);
    let mut it = t.iter();
    it.seek_for_prev(b"zzzzzzzzzz").expect("seek_for_prev");
    assert!(!it.valid());

    let ts = vec![RangeTombstone {
        start: b"c".to_vec(),
        end: b"f".to_vec(),
        seq: 9,
    }];
    let (path, _, props) = write(dir.path(), 2, &vec![], &ts, SstOptions::default());
    assert_eq!((props.min_seq, props.max_seq, props.range_deletes), (9, 9, 1));
    assert_eq!(
        (props.smallest_user_key.as_slice(), props.largest_user_key.as_slice()),
        (&b"c"[..], &b"f"[..])
    );
    assert_eq!(props.oldest_tombstone_time, Some(200));
    assert_eq!(open(&path, None).expect("open").range_tombstones(), ts.as_slice());
}

/// Opens and fully reads a table; the first error, if any.
fn read_everything(path: &Path) -> crate::Result<()> {
    let t = open(path, None)?;
    scan_fwd(&t)?;
    t.get(b"k00001", u64::MAX)?;
    Ok(())
}

fn assert_corruption_naming(r: crate::Result<()>, path: &Path, what: &str) {
    match r {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

#[test]
fn flipped_bytes_in_every_region_are_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path, size) = lz4_table(dir.path(), 500, 2);
    let t = open(&path, None).expect("open");
    let f = *t.footer();
    let fences = t.fence_pointers();
    drop(t);
    let original = std::fs::read(&path).expect("read");
    let mid = |h: format::BlockHandle| h.offset + h.size / 2;
    let regions = [
        ("first data block", mid(fences[0].handle)),
        ("last data block", mid(fences[fences.len() - 1].handle)),
        ("data block trailer", fences[3].handle.offset + fences[3].handle.size),
        ("index", mid(f.index)),
        ("filter", mid(f.filter)),
        ("properties", mid(f.properties)),
        ("range-del", mid(f.range_del)),
        ("footer", size - FOOTER_LEN as u64 / 2),
        ("footer magic", size - 10),
    ];
    for (what, at) in regions {
        let mut bytes = original.clone();
        bytes[at as usize] ^= 0x41;
        std::fs::write(&path, &bytes).expect("write");
        assert_corruption_naming(read_everything(&path), &path, what);
    }
    for len in [0, 10, FOOTER_LEN as u64, size / 2, size - FOOTER_LEN as u64, size - 1] {
        std::fs::write(&path, &original[..len as usize]).expect("truncate");
        assert_corruption_naming(read_everything(&path), &path, &format!("truncated to {len}"));
    }
}

#[test]
fn index_must_agree_with_properties() {
    // A well-checksummed properties block claiming one more data block than the index
    // holds: open must refuse it rather than trust either.
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _, props) = write(dir.path(), 1, &model(100, 6), &[], small_blocks(Compression::None));
    let h = open(&path, None).expect("open").footer().properties;
    let lying = Properties {
        data_blocks: props.data_blocks + 1,
        ..props.clone()
    };
    let (sealed, size) = format::seal_block(&lying.encode(), Compression::None);
    assert_eq!(size, h.size, "same length so the file layout is unchanged");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[h.offset as usize..][..sealed.len()].copy_from_slice(&sealed);
    std::fs::write(&path, &bytes).expect("write");
    assert_corruption_naming(open(&path, None).map(drop), &path, "index/properties mismatch");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_single_byte_flip_is_detected(at in any::<prop::sample::Index>(), x in 1u8..) {
        let dir = tempfile::tempdir().expect("tempdir");
        let es = model(60, 3);
        let (path, _, _) = write(dir.path(), 1, &es, &tombstones(), SstOptions { block_size: 128, ..small_blocks(Compression::Lz4) });
        let mut bytes = std::fs::read(&path).expect("read");
        let i = at.index(bytes.len());
        bytes[i] ^= x;
        std::fs::write(&path, &bytes).expect("write");
        let r = read_everything(&path);
        prop_assert!(r.as_ref().is_err_and(Error::is_corruption), "flip at {} undetected: {:?}", i, r);
    }

    #[test]
    fn gets_and_seeks_between_blocks_match_the_model(
        keys in proptest::collection::btree_set(proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(7), Just(254), Just(255)], 1..5), 1..120),
        probes in proptest::collection::vec((proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(8), Just(255)], 0..6), 0u64..40), 1..40),
        block_size in 32usize..256,
        h in 0u32..9,
    ) {
        // Few distinct bytes, 0 and 255 among them: user keys that are prefixes of
        // others, fence keys raised past a 255, and targets between a block's last key
        // and its fence key.
        let mut es: Entries = Vec::new();
        for (i, uk) in keys.iter().enumerate() {
            for seq in [30 - (i as u64 % 20), 10] {
                es.push((internal_key(uk, seq, ValueKind::Put), vec![i as u8; 3]));
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        // Without a filter, absent keys reach the index and the blocks.
        let opts = SstOptions { block_size, bloom_fpr: 0.0, tiles: tiles(h), ..SstOptions::default() };
        let (path, _, _) = write(dir.path(), 1, &es, &[], opts);
        let t = open(&path, None).expect("open");
        let mut it = t.iter();
        for (uk, snap) in probes {
            prop_assert_eq!(t.get(&uk, snap).expect("get"), model_get(&es, &uk, snap));
            let target = seek_key(&uk, snap);
            it.seek(&target).expect("seek");
            let ge = es.iter().find(|e| compare_internal(&e.0, &target) != Ordering::Less);
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), ge.map(|e| e.0.clone()));
            it.seek_for_prev(&target).expect("seek_for_prev");
            let le = es.iter().rev().find(|e| compare_internal(&e.0, &target) != Ordering::Greater);
            prop_assert_eq!(it.valid().then(|| it.key().to_vec()), le.map(|e| e.0.clone()));
        }
    }

    #[test]
    fn seeks_and_steps_match_sorted_model(
        n in 1usize..300,
        seed: u64,
        block_size in 64usize..2048,
        restart_interval in 1usize..20,
        ops in proptest::collection::vec((0usize..320, 0u64..2000, 0u8..4, any::<u8>()), 1..30),
        h in 0u32..9,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let es = model(n, seed);
        let opts = SstOptions { block_size, restart_interval, tiles: tiles(h), ..SstOptions::default() };
        let (path, _, _) = write(dir.path(), 1, &es, &[], opts);
        let t = open(&path, Some(Arc::new(BlockCache::new(64 << 10)))).expect("open");
        let mut it = t.iter();
        for (uk, snap, op, dirs) in ops {
            let target = seek_key(format!("k{uk:05}").as_bytes(), snap);
            // Model position: index of the entry the iterator should be on.
            let mut pos: Option<usize> = match op {
                0 => {
                    it.seek_to_first().expect("seek_to_first");
                    (!es.is_empty()).then_some(0)
                }
                1 => {
                    it.seek(&target).expect("seek");
                    es.iter().position(|e| compare_internal(&e.0, &target) != Ordering::Less)
                }
                2 => {
                    it.seek_for_prev(&target).expect("seek_for_prev");
                    es.iter().rposition(|e| compare_internal(&e.0, &target) != Ordering::Greater)
                }
                _ => {
                    it.seek_to_last().expect("seek_to_last");
                    es.len().checked_sub(1)
                }
            };
            // Each bit of `dirs` is one step: 1 = next, 0 = prev.
            for step in 0..6 {
                prop_assert_eq!(it.valid(), pos.is_some());
                if let Some(p) = pos {
                    prop_assert_eq!((it.key(), it.value()), (es[p].0.as_slice(), es[p].1.as_slice()));
                    if dirs >> step & 1 == 1 {
                        it.next().expect("next");
                        pos = Some(p + 1).filter(|&q| q < es.len());
                    } else {
                        it.prev().expect("prev");
                        pos = p.checked_sub(1);
                    }
                }
            }
            prop_assert_eq!(it.valid(), pos.is_some());
        }
    }
}

#[test]
fn dump_shows_layout_and_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(100, 4);
    let (path, _, props) = write(dir.path(), 7, &es, &tombstones(), small_blocks(Compression::None));
    let short = dump(&RealFs, &path, DumpOptions::default()).expect("dump");
    for needle in [
        "magic 0x5354524154415354",
        "bloom:",
        "range tombstones (3)",
        "[\"k00010\", \"k00020\") @5000",
        "\\x00\\xc3\\xbf",
    ] {
        assert!(short.contains(needle), "missing {needle:?} in\n{short}");
    }
    assert!(short.contains(&format!("data blocks ({}; index ", props.data_blocks)));
    assert!(!short.contains("entries:\n"));
    let entries = DumpOptions {
        entries: true,
        hex: false,
    };
    let long = dump(&RealFs, &path, entries).expect("dump entries");
    assert_eq!(long.lines().count(), short.lines().count() + 1 + es.len());
    // With hex every key and value is hex: the same lines, no escapes or quotes.
    let hex = dump(&RealFs, &path, DumpOptions { hex: true, ..entries }).expect("dump hex");
    assert_eq!(hex.lines().count(), long.lines().count());
    assert!(hex.contains("[0x6b3030303130, 0x6b3030303230) @5000"), "{hex}");
    assert!(!hex.contains("\\x") && !hex.contains("=> \""), "{hex}");
    let missing = dir.path().join("missing.sst");
    assert!(dump(&RealFs, &missing, DumpOptions::default()).is_err());
}

#[test]
fn block_cache_serves_repeated_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(200, 5);
    let (path, _, _) = write(dir.path(), 1, &es, &[], small_blocks(Compression::Lz4));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = open(&path, Some(Arc::clone(&cache))).expect("open");
    scan_fwd(&t).expect("scan");
    let (hits, misses) = (cache.hits(), cache.misses());
    assert_eq!(misses, t.properties().data_blocks);
    scan_fwd(&t).expect("scan again");
    assert_eq!(cache.misses(), misses);
    assert!(cache.hits() >= hits + t.properties().data_blocks);
    assert_eq!(sst_file_name(123), "000123.sst");
    assert_eq!(sst_file_name(12_345_678), "12345678.sst");
}

#[test]
fn tiled_tables_read_like_untiled_ones_at_every_h() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (es, v3, _) = lz4_table(dir.path(), 2000, 9);
    let old = open(&v3, None).expect("open v3");
    assert_eq!(old.footer().version, format::FORMAT_VERSION, "no tiles: the old format");
    for (n, h) in [(2, 1), (3, 2), (4, 8), (5, 64)] {
        let opts = SstOptions {
            tiles: tiles(h),
            ..small_blocks(Compression::Lz4)
        };
        let (path, _, props) = write(dir.path(), n, &es, &tombstones(), opts);
        let t = open(&path, Some(Arc::new(BlockCache::new(1 << 20)))).expect("open tiled");
        assert_eq!(t.footer().version, format::TILED_FORMAT_VERSION);
        assert_eq!(t.properties(), &props);
        assert_eq!(t.range_tombstones(), old.range_tombstones());
        assert_eq!(scan_fwd(&t).expect("scan"), es, "h = {h}");
        let tix = t.tiles().expect("tile index");
        assert_eq!(tix.h, h);
        assert!(tix.tiles.iter().all(|x| x.pages.len() <= h as usize));
        assert_eq!(tix.pages.len() as u64, props.data_blocks);
        if h > 1 {
            // Pages of a tile split by delete key: their keyed ranges barely overlap.
            assert!(tix.tiles.iter().any(|x| x.pages.len() > 1));
        }
        for i in (0..2000).step_by(7) {
            for snap in [0, 300, 900, u64::MAX] {
                let uk = uk_of(i);
                assert_eq!(t.get(&uk, snap).expect("get"), model_get(&es, &uk, snap), "h = {h}");
            }
        }
        // Whole pages skipped by the iterator are never read and their entries vanish.
        let dropped: Vec<_> = tix.pages.iter().filter(|p| p.whole).map(|p| p.handle).collect();
        let skip_set = dropped.clone();
        let mut it = t.iter_skipping(
            Fill::Bypass,
            Arc::new(move |p: &tile::PageMeta| skip_set.contains(&p.handle)),
        );
        it.seek_to_first().expect("seek");
        let mut n_left = 0;
        while it.valid() {
            n_left += 1;
            it.next().expect("next");
        }
        let in_dropped: usize = dropped
            .iter()
            .map(|&hd| {
                let mut b = t.block_iter(hd).expect("block");
                b.seek_to_first().expect("first");
                let mut n = 0;
                while b.valid() {
                    n += 1;
                    b.next().expect("next");
                }
                n
            })
            .sum();
        assert_eq!(n_left + in_dropped, es.len());
    }
}

#[test]
fn damaged_tiled_tables_are_corruption_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(400, 3);
    let opts = SstOptions {
        tiles: tiles(4),
        ..small_blocks(Compression::None)
    };
    let (path, _, _) = write(dir.path(), 1, &es, &tombstones(), opts);
    let t = open(&path, None).expect("open");
    let f = *t.footer();
    let page = t.tiles().expect("tiles").pages[5].handle;
    drop(t);
    let original = std::fs::read(&path).expect("read");
    for (what, at) in [
        ("tile index", f.index.offset + f.index.size / 2),
        ("page", page.offset + page.size / 2),
    ] {
        let mut bytes = original.clone();
        bytes[at as usize] ^= 0x41;
        std::fs::write(&path, &bytes).expect("write");
        let r = open(&path, None).and_then(|t| scan_fwd(&t).map(|_| ()));
        assert_corruption_naming(r, &path, what);
    }
}

/// A compressed block whose checksum holds but whose entries do not decode is reported
/// at the block's offset: its decompressed offsets would point past it, into the next
/// block, and `repair` would resume after the wrong one.
#[test]
fn a_bad_compressed_block_is_reported_at_its_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("blocks");
    // Zeros compress well and decode as no block (no restart point).
    let (sealed, size) = format::seal_block(&[0u8; 4000], format::Compression::Lz4);
    assert!(size < 200, "compressed to {size}");
    let mut bytes = vec![7u8; 100];
    bytes.extend_from_slice(&sealed);
    std::fs::write(&path, &bytes).expect("write");
    let file = RealFs.open(&path).expect("open");
    let h = format::BlockHandle { offset: 100, size };
    match reader::read_block(&*file, 1, None, h, reader::Fill::Bypass) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 100),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// A tile size past the largest is clamped where tiles are cut too, not only where the
/// index records it: the table opens, and its tiles hold at most that many pages.
#[test]
fn a_tile_size_past_the_largest_is_clamped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(2000, 3);
    let opts = SstOptions {
        tiles: tiles(tile::MAX_TILE_PAGES + 44),
        block_size: 64,
        ..small_blocks(Compression::None)
    };
    let (path, _, props) = write(dir.path(), 1, &es, &[], opts);
    assert!(
        props.data_blocks > u64::from(tile::MAX_TILE_PAGES),
        "{} pages",
        props.data_blocks
    );
    let t = open(&path, None).expect("open");
    let tix = t.tiles().expect("tile index");
    assert_eq!(tix.h, tile::MAX_TILE_PAGES);
    assert!(tix.tiles.iter().all(|x| x.pages.len() <= tile::MAX_TILE_PAGES as usize));
    assert_eq!(scan_fwd(&t).expect("scan"), es);
}

/// A patched page's entry outside its base page's fences (a patch that passed its
/// checksum but holds the wrong entries) is corruption for a point lookup as for a
/// scan, never a value.
#[test]
fn a_patched_entry_outside_its_page_is_corruption_for_gets_and_scans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let es = model(400, 5);
    let opts = SstOptions {
        tiles: tiles(2),
        ..small_blocks(Compression::None)
    };
    let (path, _, _) = write(dir.path(), 1, &es, &[], opts);
    let t = open(&path, None).expect("open");
    let page = t.tiles().expect("tiled").pages[0].clone();
    let first = parse_internal_key(&page.first).expect("first key");
    // A version of the page's first key newer than any the page holds.
    let (uk, seq) = (first.user_key.to_vec(), first.seq + 10);
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let mut w = patch::PatchWriter::create(fs.clone(), dir.path(), 2, Compression::None).expect("patch file");
    let mut b = block::BlockBuilder::new(16);
    b.add(&internal_key(&uk, seq, ValueKind::Put), b"bogus");
    let handle = w.add(&b.finish()).expect("add");
    w.finish().expect("finish");
    let map = patch::PageMap::default().patching([patch::PagePatch {
        page: page.handle.offset,
        file: 2,
        handle,
        applied: 0,
    }]);
    let cache = Arc::new(SstCache::new(fs, dir.path().to_path_buf(), 8, None));
    let pages = Some(reader::Pages {
        map: &map,
        patches: &cache,
    });
    let got = t.get_paged(&uk, crate::key::MAX_SEQNO, pages, false);
    assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
    let mut it = t.iter_paged(reader::Fill::Bypass, None, Arc::new(map.clone()), cache.clone());
    assert!(matches!(it.seek_to_first(), Err(Error::Corruption { .. })));
}
