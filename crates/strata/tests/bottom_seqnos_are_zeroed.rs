//! A bottommost compaction rewrites the seqno of a surviving `Put` to 0 when every live
//! snapshot sees it (`compaction::job`): reads at every snapshot stay as they were,
//! versions newer than the oldest snapshot keep their seqnos, and a table's keyspaces,
//! whose seqnos the table layer compares, keep theirs. Also the scan path these bottom
//! runs make common: one run of visible puts, read without merge checks.

use strata::table::catalog::{index_keyspace_name, primary_keyspace_name};
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, Keyspace, Options, Snapshot};

fn options() -> Options {
    Options {
        memtable_budget: 32 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn seq_of(ks: &Keyspace, k: &[u8]) -> u64 {
    ks.get_versioned(k).expect("get").expect("present").0
}

fn value_at(snap: &Snapshot, ks: &Keyspace, k: &[u8]) -> Option<Vec<u8>> {
    snap.get(ks, k).expect("snapshot get")
}

#[test]
fn seqnos_are_zeroed_only_where_every_snapshot_sees_the_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let ks = db.create_keyspace("kv").expect("ks");
    let n = 2_000u32;
    for i in 0..n {
        ks.put(&key(i), b"old").expect("put");
    }
    let snap = db.snapshot();
    // After the snapshot: overwrite the even keys, delete every third, add new ones.
    for i in (0..n).step_by(2) {
        ks.put(&key(i), b"new").expect("put");
    }
    for i in (0..n).step_by(3) {
        ks.delete(&key(i)).expect("delete");
    }
    for i in n..n + 100 {
        ks.put(&key(i), b"added").expect("put");
    }
    db.compact_range().expect("compact");

    for i in 0..n + 100 {
        let k = key(i);
        let at_snap = value_at(&snap, &ks, &k);
        assert_eq!(
            at_snap.as_deref(),
            (i < n).then_some(&b"old"[..]),
            "key {i} at the snapshot"
        );
        let latest = ks.get(&k).expect("get");
        let want: Option<&[u8]> = match i {
            _ if i >= n => Some(b"added"),
            _ if i % 3 == 0 => None,
            _ if i % 2 == 0 => Some(b"new"),
            _ => Some(b"old"),
        };
        assert_eq!(latest.as_deref(), want, "key {i} latest");
        if want.is_some() {
            let untouched = i < n && i % 2 != 0 && i % 3 != 0;
            // Written before the snapshot and never since: visible to it, so zeroed.
            // Written after it: the snapshot must not see it, so the seqno stays.
            assert_eq!(seq_of(&ks, &k) == 0, untouched, "key {i}: seqno {}", seq_of(&ks, &k));
        }
    }
    // The snapshot still reads its versions in order, forward and backward.
    let old: Vec<_> = snap.scan(&ks, ..).expect("scan").map(|r| r.expect("entry").0).collect();
    assert_eq!(old, (0..n).map(key).collect::<Vec<_>>());

    drop(snap);
    db.compact_range().expect("compact");
    for i in 0..n + 100 {
        if ks.get(&key(i)).expect("get").is_some() {
            assert_eq!(seq_of(&ks, &key(i)), 0, "key {i} after the snapshot went");
        }
    }
    // Zeroed versions are still older than anything written later.
    ks.put(&key(1), b"newest").expect("put");
    db.compact_range().expect("compact");
    assert_eq!(ks.get(&key(1)).expect("get").as_deref(), Some(&b"newest"[..]));
    drop(db);
    let db = Db::open(dir.path(), options()).expect("reopen");
    let ks = db.keyspace("kv").expect("ks");
    assert_eq!(ks.get(&key(1)).expect("get").as_deref(), Some(&b"newest"[..]));
    assert_eq!(ks.get(&key(5)).expect("get").as_deref(), Some(&b"old"[..]));
}

#[test]
fn a_tables_keyspaces_keep_their_seqnos() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    for mode in ["eager", "deferred"] {
        let name = format!("t{}", mode.len());
        let schema = format!("table {name} (id u64, a u64) primary key (id) index by_a (a) {mode}");
        let t = db.create_table(Schema::parse(&schema).expect("schema")).expect("table");
        // Two overlapping flushes, so the compaction merges rather than moves files.
        for half in [0, 1] {
            for i in (half..500u64).step_by(2) {
                t.insert(vec![Value::U64(i), Value::U64(i % 7)]).expect("insert");
            }
            db.flush().expect("flush");
        }
        db.compact_range().expect("compact");
        for ks_name in [primary_keyspace_name(&name), index_keyspace_name(&name, "by_a")] {
            let ks = db.keyspace(&ks_name).expect("keyspace");
            let mut seen = 0;
            for e in ks.scan(..).expect("scan") {
                let (k, _) = e.expect("entry");
                assert_ne!(seq_of(&ks, &k), 0, "{ks_name}: a table entry lost its seqno");
                seen += 1;
            }
            assert_eq!(seen, 500, "{ks_name}");
        }
    }
}

/// A scan over one run of visible puts takes each key's first entry unchecked
/// (`db::read`, `DirIter::step_plain`): a run that holds two versions of a key (a
/// snapshot was live when it was written) still yields the newest once, inside the
/// bounds, forward and backward.
#[test]
fn a_scan_of_one_run_with_two_versions_yields_the_newest_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let ks = db.create_keyspace("kv").expect("ks");
    for i in 0..300 {
        ks.put(&key(i), b"v1").expect("put");
    }
    let snap = db.snapshot();
    for i in (0..300).step_by(2) {
        ks.put(&key(i), b"v2").expect("put");
    }
    db.compact_range().expect("compact");
    drop(snap);
    let want = |i: u32| -> (Vec<u8>, Vec<u8>) {
        (
            key(i),
            if i.is_multiple_of(2) {
                b"v2".to_vec()
            } else {
                b"v1".to_vec()
            },
        )
    };
    let all: Vec<_> = ks.scan(..).expect("scan").map(|r| r.expect("entry")).collect();
    assert_eq!(all, (0..300).map(want).collect::<Vec<_>>());
    let later = db.snapshot();
    let bounded: Vec<_> = later
        .scan(
            &ks,
            (std::ops::Bound::Excluded(key(10)), std::ops::Bound::Included(key(20))),
        )
        .expect("scan")
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(bounded, (11..=20).map(want).collect::<Vec<_>>());
    let back: Vec<_> = ks
        .scan(key(5)..key(9))
        .expect("scan")
        .rev()
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(back, (5..9).rev().map(want).collect::<Vec<_>>());
    // A write in the memtable joins the merge again.
    ks.put(&key(12), b"v3").expect("put");
    ks.delete(&key(13)).expect("delete");
    let mixed: Vec<_> = ks
        .scan(key(11)..key(15))
        .expect("scan")
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(mixed, vec![want(11), (key(12), b"v3".to_vec()), want(14)]);
}
