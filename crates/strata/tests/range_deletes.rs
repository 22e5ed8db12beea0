//! Range deletes over data spread across deep levels, level 0 and the memtable; snapshots
//! taken before a range delete keep seeing the keys; a full compaction with no snapshot
//! left removes both the covered data and the tombstones.

mod small_db;

use std::collections::BTreeMap;

use strata::{Db, Keyspace, Options, Snapshot, WriteBatch};

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("r{round}:{i}:").into_bytes();
    v.resize(100, b'#');
    v
}

fn leveled() -> Options {
    Options {
        memtable_budget: 32 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        size_ratio: 3.0,
        runs_per_level: 1,
        ..Options::default()
    }
}

fn tiered() -> Options {
    Options {
        runs_per_level: 3,
        size_ratio: 4.0,
        ..leveled()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn put_range(db: &Db, ks: &Keyspace, model: &mut Model, r: std::ops::Range<usize>, round: usize) {
    for chunk in r.collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(ks, &key(i), &value(i, round));
            model.insert(key(i), value(i, round));
        }
        db.write(b).expect("write");
    }
}

/// Opens a database at `dir`, writes keys 0..3000 to the default keyspace and
/// compacts them to the deepest level.
fn open_compacted(dir: &std::path::Path, opts: Options) -> (Db, Keyspace, Model) {
    let db = Db::open(dir, opts).expect("open");
    let ks = db.default_keyspace();
    let mut model = Model::new();
    put_range(&db, &ks, &mut model, 0..3000, 0);
    db.compact_range().expect("compact");
    (db, ks, model)
}

fn delete_range(ks: &Keyspace, model: &mut Model, r: std::ops::Range<usize>) {
    ks.delete_range(&key(r.start)[..]..&key(r.end)[..])
        .expect("delete_range");
    let (s, e) = (key(r.start), key(r.end));
    model.retain(|k, _| !(s <= *k && *k < e));
}

fn check(ks: &Keyspace, model: &Model, when: &str) {
    let got: Vec<_> = ks.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item");
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        got.len(),
        want.len(),
        "{when}: scan returned {} keys, want {}",
        got.len(),
        want.len()
    );
    assert!(got == want, "{when}: scan content differs");
    let rev = small_db::reversed(ks.scan(..).expect("scan"));
    assert!(rev == want, "{when}: reverse scan differs");
    // Bounded scans starting and ending inside deleted ranges.
    for (lo, hi) in [(950, 1050), (1990, 2010), (1500, 2600), (0, 3000)] {
        let got: Vec<_> = ks
            .scan(&key(lo)[..]..&key(hi)[..])
            .expect("scan")
            .collect::<Result<Vec<_>, _>>()
            .expect("scan item");
        let want: Vec<_> = model
            .range(key(lo)..key(hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(
            got == want,
            "{when}: scan {lo}..{hi} differs ({} vs {} keys)",
            got.len(),
            want.len()
        );
        let mut got_rev: Vec<_> = ks
            .scan(&key(lo)[..]..&key(hi)[..])
            .expect("scan")
            .rev()
            .collect::<Result<Vec<_>, _>>()
            .expect("scan item");
        got_rev.reverse();
        assert!(
            got_rev == want,
            "{when}: reverse scan {lo}..{hi} differs ({} vs {} keys)",
            got_rev.len(),
            want.len()
        );
    }
    for i in (0..3100)
        .step_by(7)
        .chain([999, 1000, 1001, 1999, 2000, 2001, 1500, 1501])
    {
        assert_eq!(
            ks.get(&key(i)).expect("get"),
            model.get(&key(i)).cloned(),
            "{when}: get key {i}"
        );
    }
}

fn check_snapshot(snap: &Snapshot, ks: &Keyspace, model: &Model, when: &str) {
    let got: Vec<_> = snap
        .scan(ks, ..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan item");
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        got.len(),
        want.len(),
        "{when}: snapshot scan returned {} keys, want {}",
        got.len(),
        want.len()
    );
    assert!(got == want, "{when}: snapshot scan differs");
    for i in (0..3100).step_by(11).chain([1000, 1999, 2000]) {
        assert_eq!(
            snap.get(ks, &key(i)).expect("get"),
            model.get(&key(i)).cloned(),
            "{when}: snapshot get key {i}"
        );
    }
}

fn deepest_level_with_files(db: &Db, ks: &str) -> usize {
    let stats = db.stats();
    stats
        .keyspace(ks)
        .expect("keyspace stats")
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| l.level)
        .max()
        .unwrap_or(0)
}

/// Data in deep levels, level 0 and the memtable; a range delete spanning all three.
fn range_delete_across_levels(opts: Options) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = open_compacted(dir.path(), opts.clone());
    assert!(
        deepest_level_with_files(&db, "default") >= 1,
        "nothing below level 0:\n{}",
        db.stats()
    );
    // Overwrites of part of the range, flushed to level 0.
    put_range(&db, &ks, &mut model, 1200..1400, 1);
    db.flush().expect("flush");
    // More overwrites, left in the memtable.
    put_range(&db, &ks, &mut model, 1800..1850, 2);
    let before = db.snapshot();
    let before_model = model.clone();

    delete_range(&ks, &mut model, 1000..2000);
    // Boundaries: start deleted, end kept.
    assert_eq!(ks.get(&key(1000)).expect("get"), None);
    assert!(ks.get(&key(2000)).expect("get").is_some());
    // A put after the delete inside its range is visible; in the same batch too.
    put_range(&db, &ks, &mut model, 1500..1502, 3);
    let mut b = WriteBatch::new();
    b.delete_range(&ks, &key(2500), &key(2600));
    b.put(&ks, &key(2550), &value(2550, 4));
    b.put(&ks, &key(2400), &value(2400, 4));
    b.delete_range(&ks, &key(2390), &key(2410));
    db.write(b).expect("write");
    model.retain(|k, _| !(key(2500) <= *k && *k < key(2600)));
    model.insert(key(2550), value(2550, 4));
    model.retain(|k, _| !(key(2390) <= *k && *k < key(2410)));
    // Overlapping range deletes.
    delete_range(&ks, &mut model, 2900..2950);
    delete_range(&ks, &mut model, 2920..2980);
    let after = db.snapshot();
    let after_model = model.clone();

    check(&ks, &model, "memtable");
    check_snapshot(&before, &ks, &before_model, "old snapshot, memtable");
    db.flush().expect("flush");
    check(&ks, &model, "after flush");
    check_snapshot(&before, &ks, &before_model, "old snapshot, after flush");
    db.compact_range().expect("compact");
    db.wait_for_background().expect("idle");
    check(&ks, &model, "after compaction with snapshots");
    check_snapshot(&before, &ks, &before_model, "old snapshot, after compaction");
    check_snapshot(&after, &ks, &after_model, "newer snapshot, after compaction");

    // A snapshot pins the covered data: it must still be on disk.
    let pinned = db.stats().keyspace("default").expect("stats").entries();
    assert!(
        pinned as usize > model.len(),
        "covered data was dropped while a snapshot needs it"
    );

    drop(before);
    drop(after);
    drop(ks);
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    let ks = db.default_keyspace();
    check(&ks, &model, "after reopen");

    // No snapshot left: a full compaction drops covered data and every tombstone.
    db.compact_range().expect("compact");
    db.wait_for_background().expect("idle");
    check(&ks, &model, "after final compaction");
    let stats = db.stats();
    let ksst = stats.keyspace("default").expect("stats");
    assert_eq!(
        ksst.tombstones(),
        0,
        "tombstones survive a full compaction with no snapshot:\n{stats}"
    );
    assert_eq!(
        ksst.entries() as usize,
        model.len(),
        "entries should be exactly the live keys:\n{stats}"
    );
}

#[test]
fn range_delete_across_levels_leveling() {
    range_delete_across_levels(leveled());
}

#[test]
fn range_delete_across_levels_tiering() {
    range_delete_across_levels(tiered());
}

#[test]
fn range_delete_survives_reopen_from_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = open_compacted(dir.path(), leveled());
    // The range delete stays in the memtable / WAL only.
    delete_range(&ks, &mut model, 100..2900);
    drop(ks);
    db.close().expect("close");
    let db = Db::open(dir.path(), leveled()).expect("reopen");
    let ks = db.default_keyspace();
    check(&ks, &model, "after reopen");
    assert_eq!(model.len(), 200);
}

#[test]
fn range_delete_covers_keys_outside_the_files_that_hold_the_tombstone() {
    // The tombstone lands in a small level-0 file whose only point key is far from the
    // covered keys, which live in deeper files: reads must still apply it.
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = open_compacted(dir.path(), leveled());
    assert!(deepest_level_with_files(&db, "default") >= 1);
    put_range(&db, &ks, &mut model, 2999..3000, 1);
    delete_range(&ks, &mut model, 10..20);
    db.flush().expect("flush");
    check(&ks, &model, "tombstone in level 0");
    db.wait_for_background().expect("idle");
    check(&ks, &model, "after background compaction");
}
