//! Secondary range deletes (`Keyspace::delete_where`) on a keyspace with a delete key:
//! every read path hides the qualifying entries at once, snapshots taken before still
//! see them, the delete survives reopen (from the WAL and from the manifest), bottommost
//! compactions drop delete-tile pages unread, and bad input changes nothing. A
//! model-based property test interleaves it with writes, flushes, compactions,
//! snapshots and reopens at several tile sizes.

mod delete_key_harness;

use delete_key_harness::{Model, check_reads as check, dk_of, key, opts, scan_all, scan_back, value};

use proptest::prelude::*;
use strata::delete_key::{DeleteKey, TileChoice};
use strata::{Db, Error, Keyspace, Options, WriteBatch};

fn delete_where(ks: &Keyspace, model: &mut Model, lo: u32, hi: u32) {
    ks.delete_where(&lo.to_be_bytes(), &hi.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| !(lo..hi).contains(&dk_of(v)));
}

#[test]
fn delete_where_hides_at_once_persists_and_drops_pages_in_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::new();
    {
        let db = Db::open(dir.path(), opts()).expect("open");
        let ks = db.create_keyspace("orders").expect("create");
        ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(8))
            .expect("set dk");
        for i in 0..4000u32 {
            // Delete keys independent of the sort key.
            let dk = i.wrapping_mul(2_654_435_761) % 1000;
            ks.put(&key(i), &value(dk, 0)).expect("put");
            model.insert(key(i), value(dk, 0));
        }
        db.compact_range().expect("compact");
        let before = db.snapshot();
        let seen_before = model.clone();
        delete_where(&ks, &mut model, 0, 300);
        check(&ks, &model, "after delete_where");
        // The snapshot holds the delete back: no page dropped yet.
        assert_eq!(db.stats().delete_pages_dropped, 0);
        let old: Model = before
            .scan(&ks, ..)
            .expect("snapshot scan")
            .collect::<Result<_, _>>()
            .expect("item");
        assert_eq!(old, seen_before, "a snapshot taken before still sees the rows");
        // Rewrites after the delete survive it even with a qualifying delete key.
        ks.put(&key(1), &value(5, 1)).expect("put");
        model.insert(key(1), value(5, 1));
        drop(before);
        check(&ks, &model, "after a newer write");
        // With the snapshot gone the next delete drops whole pages of the last level by
        // a manifest edit, reading and writing no data.
        // (The background rewrite of the files it covers in part may start at once: its
        // bytes are counted apart.)
        let s0 = db.stats();
        let written = s0.compaction_bytes_written - s0.delete_rewrite_bytes_written;
        delete_where(&ks, &mut model, 300, 500);
        let s = db.stats();
        assert!(s.delete_pages_dropped > 0, "no page dropped: {s}");
        assert_eq!(s.compaction_bytes_written - s.delete_rewrite_bytes_written, written);
        check(&ks, &model, "after pages were dropped");
    }
    // Replayed from the WAL.
    {
        let db = Db::open(dir.path(), opts()).expect("reopen");
        let ks = db.keyspace("orders").expect("ks");
        check(&ks, &model, "after reopen (WAL)");
        db.flush().expect("flush");
    }
    // From the manifest, then made physical.
    let db = Db::open(dir.path(), opts()).expect("reopen");
    let ks = db.keyspace("orders").expect("ks");
    check(&ks, &model, "after reopen (manifest)");
    let entries_before = db.stats().keyspace("orders").expect("stats").entries();
    ks.compact_range(..).expect("compact");
    check(&ks, &model, "after compaction");
    let entries_after = db.stats().keyspace("orders").expect("stats").entries();
    assert_eq!(
        entries_after,
        model.len() as u64,
        "the killed rows are gone ({entries_before} before)"
    );
    assert_eq!(
        ks.delete_where_records().expect("records"),
        vec![],
        "satisfied records are forgotten"
    );
    // A delete on the compacted (tiled) files drops whole pages unread.
    // A snapshot older than the delete keeps the killed rows, and so the record.
    let held = db.snapshot();
    delete_where(&ks, &mut model, 500, 700);
    db.flush().expect("flush");
    ks.compact_range(..).expect("compact");
    check(&ks, &model, "after a compaction under a snapshot");
    assert_eq!(
        ks.delete_where_records().expect("records").len(),
        1,
        "a snapshot needs it"
    );
    drop(held);
    ks.compact_range(..).expect("compact");
    check(&ks, &model, "after a second delete and compaction");
    assert_eq!(
        ks.delete_where_records().expect("records"),
        vec![],
        "satisfied records are forgotten"
    );
    assert_eq!(
        db.stats().keyspace("orders").expect("stats").entries(),
        model.len() as u64
    );
    let s = db.stats();
    assert!(s.delete_pages_dropped > 0, "no page dropped unread: {s}");
    assert!(s.delete_pages_partial > 0, "{s}");
    let l = s
        .keyspace("orders")
        .expect("stats")
        .levels
        .last()
        .cloned()
        .expect("a level");
    assert_eq!(l.tile_h, Some(8));
    assert!(s.to_string().contains("delete tiles: h = 8 (fixed)"), "{s}");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), opts()).expect("open");
    let ks = db.create_keyspace("plain").expect("create");
    ks.put(b"a", &value(1, 0)).expect("put");
    let seq = db.last_seq();
    let invalid = |r: strata::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    };
    invalid(ks.delete_where(&[0; 4], &[9; 4]), "no delete key declared");
    assert!(DeleteKey::new(0, 0).is_err() && DeleteKey::new(0, 17).is_err());
    invalid(
        ks.set_delete_key(DeleteKey { offset: 0, width: 0 }, TileChoice::Auto),
        "width 0",
    );
    invalid(
        ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(0)),
        "h = 0",
    );
    invalid(
        ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(257)),
        "h = 257",
    );
    assert_eq!(ks.delete_config().expect("config"), None, "nothing declared");
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Auto)
        .expect("set");
    invalid(ks.delete_where(&[0; 3], &[9; 4]), "a bound of the wrong width");
    invalid(ks.delete_where(&[9; 4], &[1; 4]), "an empty range");
    // Two records at one seqno would share a name in the manifest, the second hiding
    // the first at flush.
    let mut b = WriteBatch::new();
    b.delete_where(&ks, &[0; 4], &[0, 0, 0, 2]);
    b.share_seq();
    b.delete_where(&ks, &[0, 0, 0, 7], &[0, 0, 0, 8]);
    match db.write(b) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("share a seqno"), "{m}"),
        r => panic!("two delete_wheres at one seqno: {r:?}"),
    }
    assert_eq!(db.last_seq(), seq, "no refused write took a seqno");
    assert!(ks.get(b"a").expect("get").is_some());
    // Held, the snapshot keeps the killed row, and so the record, through the flush.
    let held = db.snapshot();
    ks.delete_where(&[0; 4], &[0, 0, 0, 2]).expect("delete_where");
    assert_eq!(ks.get(b"a").expect("get"), None);
    invalid(
        ks.set_delete_key(DeleteKey::new(4, 4).expect("dk"), TileChoice::Auto),
        "changing the key once used",
    );
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(4))
        .expect("changing h is fine");
    // Dropping the keyspace takes its delete key and records along.
    db.flush().expect("flush");
    assert!(db.meta("strata.delete_key.1").is_some());
    assert!(
        db.meta(&format!("strata.delete_where.1.{:020}", seq + 1)).is_some(),
        "flushed into the manifest"
    );
    db.drop_keyspace("plain").expect("drop");
    assert!(db.meta("strata.delete_key.1").is_none());
    assert!(db.meta(&format!("strata.delete_where.1.{:020}", seq + 1)).is_none());
    drop(held);
}

/// A record that kills nothing on disk is not kept past the flush that moves it out of
/// its memtable, even if nothing else writes to the keyspace afterwards: every read of
/// the keyspace would check it.
#[test]
fn a_record_that_kills_nothing_is_forgotten_at_its_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), opts()).expect("open");
    let ks = db.create_keyspace("orders").expect("create");
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(4))
        .expect("set dk");
    for i in 0..500u32 {
        ks.put(&key(i), &value(i % 100, 0)).expect("put");
    }
    db.flush().expect("flush");
    ks.compact_range(..).expect("compact");
    ks.delete_where(&5000u32.to_be_bytes(), &6000u32.to_be_bytes())
        .expect("delete_where");
    assert_eq!(ks.delete_where_records().expect("records"), vec![], "in the memtable");
    db.flush().expect("flush");
    assert_eq!(
        ks.delete_where_records().expect("records"),
        vec![],
        "not kept by the flush"
    );
    assert_eq!(scan_all(&ks).len(), 500);
    // Nor by the flush of a recovery.
    ks.delete_where(&7000u32.to_be_bytes(), &8000u32.to_be_bytes())
        .expect("delete_where");
    drop(ks);
    db.close().expect("close");
    let db = Db::open(dir.path(), opts()).expect("reopen");
    let ks = db.keyspace("orders").expect("ks");
    assert_eq!(
        ks.delete_where_records().expect("records"),
        vec![],
        "not kept by recovery"
    );
    assert_eq!(scan_all(&ks).len(), 500);
}

/// Files keep their pages' delete-key ranges, not the key they were taken by: once
/// data is flushed under a delete key, a new key is refused (under it, a delete would
/// drop pages of rows it does not cover); before, it is taken.
#[test]
fn the_delete_key_cannot_change_once_data_is_flushed_under_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), opts()).expect("open");
    let ks = db.create_keyspace("k").expect("create");
    let by = |offset| DeleteKey::new(offset, 1).expect("dk");
    ks.set_delete_key(by(0), TileChoice::Fixed(4)).expect("set");
    for i in 0..1000u32 {
        ks.put(&key(i), &[5, 50]).expect("put");
    }
    // In the memtable only: nothing is grouped by the key yet.
    ks.set_delete_key(by(1), TileChoice::Fixed(4))
        .expect("changed before a flush");
    ks.set_delete_key(by(0), TileChoice::Fixed(4)).expect("and back");
    db.compact_range().expect("compact");
    let e = ks.set_delete_key(by(1), TileChoice::Fixed(4)).expect_err("refused");
    assert!(
        matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("flushed under it"),
        "{e}"
    );
    assert_eq!(ks.delete_config().expect("config").map(|c| c.key), Some(by(0)));
    // Under the kept key, a delete of [0, 10) covers nothing of byte 1's 50.
    ks.delete_where(&[10], &[20]).expect("delete_where");
    db.compact_range().expect("compact");
    assert_eq!(scan_all(&ks).len(), 1000);
    ks.delete_where(&[0], &[10]).expect("delete_where");
    assert_eq!(scan_all(&ks).len(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Put(u32, u32),
    /// Puts keys `k..k + 60` with delete keys from `d` on.
    Fill(u32, u32),
    Delete(u32),
    DeleteWhere(u32, u32),
    Flush,
    Compact,
    /// Waits for the background, which patches the pages a delete covers in part.
    Settle,
    Snapshot,
    DropSnapshots,
    CheckSnapshots,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u32..300, 0u32..100).prop_map(|(k, d)| Op::Put(k, d)),
        1 => (0u32..300, 0u32..100).prop_map(|(k, d)| Op::Fill(k, d)),
        2 => (0u32..300).prop_map(Op::Delete),
        2 => (0u32..100, 1u32..40).prop_map(|(lo, w)| Op::DeleteWhere(lo, lo + w)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        2 => Just(Op::Settle),
        1 => Just(Op::Snapshot),
        1 => Just(Op::DropSnapshots),
        1 => Just(Op::CheckSnapshots),
        1 => Just(Op::Reopen),
    ]
}

/// Runs one case against the model; returns the pages patched (`Stats`, summed over
/// the case's opens).
fn run_model(ops: Vec<Op>, h: TileChoice) -> Result<u64, TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = Options {
        memtable_budget: 8 << 10,
        target_file_size: 8 << 10,
        block_size: 256,
        ..opts()
    };
    let mut db = Db::open(dir.path(), small.clone()).expect("open");
    let mut ks = db.create_keyspace("t").expect("create");
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), h).expect("set");
    let mut model = Model::new();
    let mut snaps: Vec<(strata::Snapshot, Model)> = Vec::new();
    let mut patched = 0;
    for (n, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put(k, d) => {
                ks.put(&key(k), &value(d, n as u32)).expect("put");
                model.insert(key(k), value(d, n as u32));
            }
            Op::Fill(k, d) => {
                for i in k..k + 60 {
                    let dk = (d + i * 37) % 100;
                    ks.put(&key(i), &value(dk, n as u32)).expect("put");
                    model.insert(key(i), value(dk, n as u32));
                }
            }
            Op::Delete(k) => {
                ks.delete(&key(k)).expect("delete");
                model.remove(&key(k));
            }
            Op::DeleteWhere(lo, hi) => delete_where(&ks, &mut model, lo, hi),
            Op::Flush => db.flush().expect("flush"),
            Op::Compact => ks.compact_range(..).expect("compact"),
            Op::Settle => db.wait_for_background().expect("settle"),
            Op::Snapshot => snaps.push((db.snapshot(), model.clone())),
            Op::DropSnapshots => snaps.clear(),
            Op::CheckSnapshots => {
                for (s, m) in &snaps {
                    let got: Model = s.scan(&ks, ..).expect("scan").collect::<Result<_, _>>().expect("item");
                    prop_assert_eq!(&got, m);
                    for k in m.keys().take(5) {
                        prop_assert_eq!(s.get(&ks, k).expect("get"), m.get(k).cloned());
                    }
                }
            }
            Op::Reopen => {
                snaps.clear();
                drop(ks);
                patched += db.stats().delete_pages_patched;
                db.close().expect("close");
                db = Db::open(dir.path(), small.clone()).expect("reopen");
                ks = db.keyspace("t").expect("ks");
            }
        }
        prop_assert_eq!(&scan_all(&ks), &model);
    }
    for k in 0..360 {
        prop_assert_eq!(ks.get(&key(k)).expect("get"), model.get(&key(k)).cloned());
    }
    prop_assert_eq!(scan_back(&ks), model.clone().into_iter().rev().collect::<Vec<_>>());
    snaps.clear();
    db.wait_for_background().expect("settle");
    patched += db.stats().delete_pages_patched;
    let r = db
        .check(strata::table::check::CheckOptions { compact_first: false })
        .expect("check runs");
    prop_assert!(r.ok(), "check: {}", r);
    ks.compact_range(..).expect("compact");
    prop_assert_eq!(&scan_all(&ks), &model);
    prop_assert_eq!(db.stats().keyspace("t").expect("stats").entries(), model.len() as u64);
    Ok(patched)
}

/// The model test, at several tile sizes; the page patches it runs are counted, so the
/// test fails if the patch path were never taken.
#[test]
fn delete_where_matches_a_model() {
    let patched = std::sync::atomic::AtomicU64::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 32,
        ..ProptestConfig::default()
    });
    let h = prop_oneof![
        Just(TileChoice::Fixed(1)),
        Just(TileChoice::Fixed(4)),
        Just(TileChoice::Fixed(8)),
        Just(TileChoice::Fixed(16)),
        Just(TileChoice::Auto)
    ];
    let r = runner.run(&(proptest::collection::vec(op(), 1..120), h), |(ops, h)| {
        let n = run_model(ops, h)?;
        patched.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
    let patched = patched.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("pages patched over the cases: {patched}");
    assert!(patched > 0, "no case patched a page");
}
