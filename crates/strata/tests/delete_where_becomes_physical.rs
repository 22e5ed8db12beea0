//! A secondary range delete becomes physical in the background (invariant KR of
//! `compaction::tiles`): after `delete_where` and waiting for background work, no live
//! file holds a `Put` the delete killed (counted by reading every live file, dropped
//! pages skipped), whole pages were dropped unread and the files holding partly covered
//! pages were rewritten, and every other row is intact. For a plain keyspace with a
//! delete key (leveled and tiered) and for tables with a secondary index in both
//! maintenance modes, whose killed rows' index entries go too (deferred invariant 12).

mod delete_key_harness;
mod table_harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use delete_key_harness::{dk_of, key, value};
use strata::delete_key::{DeleteKey, TileChoice};
use strata::fs::{FileSystem, RealFs};
use strata::iter::InternalIterator;
use strata::key::{ValueKind, parse_internal_key};
use strata::sstable::patch::PageMap;
use strata::sstable::{Fill, SstCache, SstReader, sst_file_name};
use strata::table::catalog::{index_keyspace_name, primary_keyspace_name};
use strata::table::value::Value;
use strata::{Db, Keyspace, Options};
use table_harness::{all_rows, check_ok, create_table, s, small_options, tempdir, u};

/// One entry of a live file: user key, kind, value.
type Entry = (Vec<u8>, ValueKind, Vec<u8>);

/// Every entry of keyspace `name`'s live files, read as the version's page maps say:
/// dropped pages skipped, patched pages read from their patch files.
fn file_entries(db: &Db, dir: &std::path::Path, name: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let patches = Arc::new(SstCache::new(Arc::new(RealFs), dir.to_path_buf(), 0, None));
    for f in db.live_files().into_iter().filter(|f| f.keyspace_name == name) {
        let file = RealFs.open(&dir.join(sst_file_name(f.number))).expect("open sst");
        let t = Arc::new(SstReader::open(file, f.number, None).expect("read sst"));
        let map = PageMap {
            dropped: f.dropped_pages.clone(),
            patched: f.patched_pages.clone(),
        };
        let mut it = t.iter_paged(Fill::Bypass, None, Arc::new(map), patches.clone());
        it.seek_to_first().expect("seek");
        while it.valid() {
            let p = parse_internal_key(it.key()).expect("internal key");
            out.push((p.user_key.to_vec(), p.kind, it.value().to_vec()));
            it.next().expect("next");
        }
    }
    out
}

/// `Put`s among `entries` whose value `killed` says a delete killed.
fn killed_puts(entries: &[Entry], killed: impl Fn(&[u8]) -> bool) -> usize {
    entries
        .iter()
        .filter(|(_, kind, v)| *kind == ValueKind::Put && killed(v))
        .count()
}

fn kv_options(tiered: bool) -> Options {
    Options {
        memtable_budget: 64 << 10,
        target_file_size: 32 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        size_ratio: 4.0,
        runs_per_level: if tiered { 3 } else { 1 },
        ..Options::default()
    }
}

fn scan_all(ks: &Keyspace) -> BTreeMap<Vec<u8>, Vec<u8>> {
    ks.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item")
}

#[test]
fn a_keyspace_delete_leaves_no_killed_entry_on_disk() {
    for tiered in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), kv_options(tiered)).expect("open");
        let ks = db.create_keyspace("orders").expect("create");
        ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(8))
            .expect("set dk");
        let mut model = BTreeMap::new();
        // Delete keys independent of the sort key, spread over several levels, some
        // keys rewritten with a new delete key (older versions behind them).
        for round in 0..3u32 {
            for i in 0..3000u32 {
                if round > 0 && i % (3 + round) != 0 {
                    continue;
                }
                let dk = (i.wrapping_mul(2_654_435_761) ^ round.wrapping_mul(97)) % 1000;
                ks.put(&key(i), &value(dk, round)).expect("put");
                model.insert(key(i), value(dk, round));
            }
            if round == 0 {
                db.compact_range().expect("compact");
            }
        }
        // Everything in files, so the rewrites (not a flush) must remove what dies.
        db.flush().expect("flush");
        db.wait_for_background().expect("settle");
        let name = format!("tiered {tiered}");
        let before = file_entries(&db, dir.path(), "orders");
        let in_range = |v: &[u8]| (200..450).contains(&dk_of(v));
        assert!(killed_puts(&before, in_range) > 100, "{name}: nothing to delete");
        // Deletes delete keys [lo, hi) and waits for the background: no killed entry
        // may stay in any file. Returns the files' entries after it.
        let delete_and_settle = |model: &mut BTreeMap<Vec<u8>, Vec<u8>>, lo: u32, hi: u32| {
            let dies = |v: &[u8]| (lo..hi).contains(&dk_of(v));
            ks.delete_where(&lo.to_be_bytes(), &hi.to_be_bytes())
                .expect("delete_where");
            model.retain(|_, v| !dies(v));
            db.wait_for_background().expect("background");
            let after = file_entries(&db, dir.path(), "orders");
            assert_eq!(
                killed_puts(&after, dies),
                0,
                "{name}: [{lo}, {hi}) left entries on disk"
            );
            after
        };
        let s0 = db.stats();
        let after = delete_and_settle(&mut model, 200, 450);
        let s1 = db.stats();
        assert!(
            s1.delete_rewrite_bytes_written > s0.delete_rewrite_bytes_written,
            "{name}: no file rewritten for pages covered in part: {s1}"
        );
        if !tiered {
            // A leveled last level's files are patched page by page (`db::patch`).
            assert!(s1.delete_pages_patched > 0, "{name}: no page patched: {s1}");
            assert!(
                db.live_files().iter().any(|f| !f.patched_pages.is_empty()),
                "{name}: no live file reads a patched page"
            );
        }
        // Every other row is intact, on disk and through reads.
        let newest: BTreeMap<Vec<u8>, Vec<u8>> = after
            .iter()
            .filter(|(_, kind, _)| *kind == ValueKind::Put)
            .map(|(k, _, v)| (k.clone(), v.clone()))
            .filter(|(k, v)| model.get(k) == Some(v))
            .collect();
        assert_eq!(newest.len(), model.len(), "{name}: rows missing from the files");
        assert_eq!(scan_all(&ks), model, "{name}: scan after the rewrite");
        // A second delete over rewritten files: its whole pages and partial ones go too.
        let after = delete_and_settle(&mut model, 600, 700);
        assert_eq!(
            killed_puts(&after, in_range),
            0,
            "{name}: first delete's entries came back"
        );
        db.close().expect("close");
        let db = Db::open(dir.path(), kv_options(tiered)).expect("reopen");
        let ks = db.keyspace("orders").expect("ks");
        assert_eq!(scan_all(&ks), model, "{name}: after reopen");
    }
}

#[test]
fn a_snapshot_holds_the_rewrite_back_until_it_is_released() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), kv_options(false)).expect("open");
    let ks = db.create_keyspace("orders").expect("create");
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(4))
        .expect("set dk");
    for i in 0..3000u32 {
        ks.put(&key(i), &value(i % 100, 0)).expect("put");
    }
    db.compact_range().expect("compact");
    let snap = db.snapshot();
    ks.delete_where(&10u32.to_be_bytes(), &30u32.to_be_bytes())
        .expect("delete_where");
    db.wait_for_background().expect("background");
    let in_range = |v: &[u8]| (10..30).contains(&dk_of(v));
    // The snapshot still reads the rows, so they stay on disk and nothing loops.
    assert_eq!(killed_puts(&file_entries(&db, dir.path(), "orders"), in_range), 600);
    assert_eq!(snap.scan(&ks, ..).expect("scan").count(), 3000);
    drop(snap);
    ks.put(b"poke", &value(99, 1)).expect("put");
    db.wait_for_background().expect("background");
    assert_eq!(
        killed_puts(&file_entries(&db, dir.path(), "orders"), in_range),
        0,
        "released snapshot: the rewrite ran"
    );
    assert_eq!(ks.scan(..).expect("scan").count(), 2401);
}

/// The row's delete key: a version-2 row's bytes 1..9 hold its `ts` (deferred
/// invariant 10).
fn row_ts(v: &[u8]) -> Option<u64> {
    (v.first() == Some(&2)).then(|| u64::from_be_bytes(v[1..9].try_into().expect("8 bytes")))
}

#[test]
fn a_table_delete_leaves_no_killed_row_on_disk_in_both_modes() {
    for mode in ["eager", "deferred"] {
        let dir = tempdir();
        let db = Db::open(dir.path(), small_options()).expect("open");
        let t = create_table(
            &db,
            &format!(
                "table t (id u64, ts u64, name str, pad bytes) primary key (id) index by_name (name) \
                 delete key (ts) {mode}"
            ),
        );
        t.set_delete_key("ts", TileChoice::Fixed(8)).expect("h");
        let row = |id: u64, ts: u64| vec![u(id), u(ts), s(&format!("n{}", id % 13)), Value::Bytes(vec![b'p'; 60])];
        for id in 0..3000u64 {
            t.replace(row(id, id.wrapping_mul(2_654_435_761) % 500))
                .expect("replace");
        }
        db.compact_range().expect("compact");
        for id in (0..3000u64).step_by(7) {
            t.replace(row(id, 400 + id % 100)).expect("replace");
        }
        db.flush().expect("flush");
        db.wait_for_background().expect("settle");
        let primary = primary_keyspace_name("t");
        let killed = |v: &[u8]| row_ts(v).is_some_and(|ts| ts < 150);
        assert!(killed_puts(&file_entries(&db, dir.path(), &primary), killed) > 100);
        t.delete_where("ts", u(0)..u(150)).expect("delete_where");
        db.wait_for_background().expect("background");
        let left = killed_puts(&file_entries(&db, dir.path(), &primary), killed);
        assert_eq!(left, 0, "{mode}: killed rows left in the primary's files");
        let want: Vec<_> = all_rows(&t);
        assert!(want.iter().all(|r| r[1].as_u64().is_some_and(|ts| ts >= 150)));
        let expect = (0..3000u64)
            .filter(|id| {
                let ts = if id % 7 == 0 {
                    400 + id % 100
                } else {
                    id.wrapping_mul(2_654_435_761) % 500
                };
                ts >= 150
            })
            .count();
        assert_eq!(want.len(), expect, "{mode}: every other row is intact");
        let by_name: usize = (0..13)
            .map(|n| {
                t.select("by_name")
                    .eq(vec![s(&format!("n{n}"))])
                    .count()
                    .expect("count") as usize
            })
            .sum();
        assert_eq!(by_name, expect, "{mode}: the index reads the survivors");
        // The rewrites emitted the killed rows' index deletes: once they meet their
        // entries at the bottom, the index holds the survivors alone.
        check_ok(&db, false);
        let r = check_ok(&db, true);
        let ix = index_keyspace_name("t", "by_name");
        let puts = file_entries(&db, dir.path(), &ix)
            .iter()
            .filter(|(_, kind, _)| *kind == ValueKind::Put)
            .count();
        assert_eq!(puts, expect, "{mode}: index entries of killed rows on disk: {r}");
    }
}
