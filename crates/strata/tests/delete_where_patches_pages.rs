//! A secondary range delete on a tiled, leveled tree rewrites only the pages it covers
//! in part, into patch files (`sstable::patch`, invariant PP of `compaction::patch`):
//! the killed rows are gone from every read (their bytes stay in the base files until
//! those are compacted), far fewer bytes are written
//! than a rewrite of the files, a snapshot taken before the delete holds the patch back
//! and still reads the rows, reopening keeps the patches, `check` passes, and a
//! damaged patch file is reported naming the file and the offset; an open deletes
//! patch files no table names and refuses to open without one a table names.

mod delete_key_harness;

use delete_key_harness::{Model, check_reads, dk_of, key, opts, scan_all, value};
use strata::delete_key::{DeleteKey, TileChoice};
use strata::table::check::CheckOptions;
use strata::{Db, Error, Keyspace};

fn check(db: &Db) {
    let r = db.check(CheckOptions { compact_first: false }).expect("check runs");
    assert!(r.ok(), "check failed:\n{r}");
}

/// A tree of 6000 rows at its last level, delete keys 0..1000 independent of the keys.
fn loaded(dir: &std::path::Path) -> (Db, Keyspace, Model) {
    let db = Db::open(dir, opts()).expect("open");
    let ks = db.create_keyspace("orders").expect("create");
    ks.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(16))
        .expect("set dk");
    let mut model = Model::new();
    for i in 0..6000u32 {
        let dk = i.wrapping_mul(2_654_435_761) % 1000;
        ks.put(&key(i), &value(dk, 0)).expect("put");
        model.insert(key(i), value(dk, 0));
    }
    db.compact_range().expect("compact");
    db.wait_for_background().expect("settle");
    (db, ks, model)
}

#[test]
fn a_delete_patches_the_pages_it_covers_in_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = loaded(dir.path());
    let file_bytes: u64 = db.live_files().iter().map(|f| f.bytes).sum();
    // A snapshot before the delete holds the patch back and keeps reading the rows.
    let snap = db.snapshot();
    let before = model.clone();
    ks.delete_where(&100u32.to_be_bytes(), &180u32.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| !(100..180).contains(&dk_of(v)));
    db.wait_for_background().expect("background");
    assert_eq!(db.stats().delete_pages_patched, 0, "a snapshot needs the rows");
    let got: Model = snap
        .scan(&ks, ..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("item");
    assert_eq!(got, before);
    assert_eq!(scan_all(&ks), model);
    drop(snap);
    // Released: the next background round patches the partly covered pages.
    ks.put(b"poke", &value(999, 1)).expect("put");
    model.insert(b"poke".to_vec(), value(999, 1));
    let s0 = db.stats();
    db.wait_for_background().expect("background");
    let s1 = db.stats();
    assert!(s1.delete_pages_patched > 0, "no page patched: {s1}");
    let written = s1.delete_rewrite_bytes_written - s0.delete_rewrite_bytes_written;
    let read = s1.delete_rewrite_bytes_read - s0.delete_rewrite_bytes_read;
    assert!(
        written > 0 && written * 4 < file_bytes,
        "wrote {written} of {file_bytes} file bytes"
    );
    assert!(read * 4 < file_bytes, "read {read} of {file_bytes} file bytes");
    assert!(db.live_files().iter().any(|f| !f.patched_pages.is_empty()));
    check_reads(&ks, &model, "after the patch");
    for k in before.keys().step_by(7) {
        assert_eq!(
            ks.get(k).expect("get"),
            model.get(k).cloned(),
            "killed rows stay unreadable"
        );
    }
    check(&db);
    // A second delete over patched pages: patched again, or dropped whole.
    let snap = db.snapshot();
    let mid = model.clone();
    ks.delete_where(&140u32.to_be_bytes(), &400u32.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| !(140..400).contains(&dk_of(v)));
    assert_eq!(scan_all(&ks), model);
    let got: Model = snap
        .scan(&ks, ..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("item");
    assert_eq!(got, mid, "a snapshot between the deletes");
    drop(snap);
    ks.put(b"poke", &value(999, 2)).expect("put");
    model.insert(b"poke".to_vec(), value(999, 2));
    db.wait_for_background().expect("background");
    assert_eq!(scan_all(&ks), model);
    check(&db);
    db.close().expect("close");
    let db = Db::open(dir.path(), opts()).expect("reopen");
    let ks = db.keyspace("orders").expect("ks");
    assert!(
        db.live_files().iter().any(|f| !f.patched_pages.is_empty()),
        "patches survive reopen"
    );
    assert_eq!(scan_all(&ks), model, "after reopen");
    check(&db);
    // Compacting the files away releases their patch files.
    db.compact_range().expect("compact");
    db.wait_for_background().expect("settle");
    assert_eq!(scan_all(&ks), model, "after compaction");
    assert!(db.live_files().iter().all(|f| f.patched_pages.is_empty()));
    check(&db);
    db.close().expect("close");
    let left = std::fs::read_dir(dir.path())
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".patch"))
        })
        .count();
    assert_eq!(left, 0, "patch files outlived their tables");
}

#[test]
fn a_damaged_patch_file_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = loaded(dir.path());
    ks.delete_where(&100u32.to_be_bytes(), &180u32.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| !(100..180).contains(&dk_of(v)));
    db.wait_for_background().expect("background");
    let patched = db
        .live_files()
        .into_iter()
        .flat_map(|f| f.patched_pages)
        .next()
        .expect("a patched page");
    db.close().expect("close");
    let path = dir.path().join(strata::sstable::patch::patch_file_name(patched.file));
    let mut bytes = std::fs::read(&path).expect("read patch");
    let at = patched.handle.offset + patched.handle.size / 2;
    bytes[at as usize] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write patch");
    let db = Db::open(dir.path(), opts()).expect("reopen");
    let ks = db.keyspace("orders").expect("ks");
    let err = ks
        .scan(..)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect_err("a damaged page");
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, path);
            // The damaged block: its checksum, at its end, is where the mismatch shows.
            let block = patched.handle.offset..=patched.handle.offset + patched.handle.size + 5;
            assert!(block.contains(&offset), "offset {offset} outside {block:?}");
        }
        e => panic!("not a corruption error: {e}"),
    }
    let r = db.check(CheckOptions { compact_first: false }).expect("check runs");
    assert!(!r.ok() && r.to_string().contains(".patch"), "{r}");
    let all = model.len() as u64;
    drop(ks);
    db.close().expect("close");
    // Salvage loses the patched page's tile only, and goes on after it: before, a
    // damaged patch file gave no place to go on, and the rest of the keyspace was lost.
    let out = tempfile::tempdir().expect("tempdir");
    let report = strata::repair::salvage(
        dir.path(),
        &out.path().join("salvaged"),
        strata::RecoveryMode::SkipAnyCorruptedRecords,
    )
    .expect("salvage");
    assert_eq!(report.lost.len(), 1, "{report}");
    assert!(report.lost[0].contains(".patch"), "{report}");
    // A tile is 16 pages of 512 bytes: well under 500 of the rows.
    assert!(
        report.keys + 500 > all && report.keys < all,
        "{} of {all}: {report}",
        report.keys
    );
    let db = Db::open(out.path().join("salvaged"), opts()).expect("salvaged opens");
    let got = scan_all(&db.keyspace("orders").expect("ks"));
    assert_eq!(got.len() as u64, report.keys);
    assert!(
        got.iter().all(|(k, v)| model.get(k) == Some(v)),
        "a salvaged row differs"
    );
}

#[test]
fn an_open_deletes_patch_files_no_table_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = loaded(dir.path());
    ks.delete_where(&100u32.to_be_bytes(), &180u32.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| !(100..180).contains(&dk_of(v)));
    db.wait_for_background().expect("background");
    let named: Vec<u64> = db
        .live_files()
        .iter()
        .flat_map(|f| f.patched_pages.iter().map(|p| p.file))
        .collect();
    assert!(!named.is_empty());
    db.close().expect("close");
    // What a patch job that crashed before its manifest edit leaves behind.
    let orphan = dir.path().join(strata::sstable::patch::patch_file_name(999_999));
    std::fs::write(&orphan, b"half a patch").expect("write orphan");
    let db = Db::open(dir.path(), opts()).expect("reopen");
    assert!(!orphan.exists(), "the orphan patch file was not deleted");
    for &n in &named {
        assert!(dir.path().join(strata::sstable::patch::patch_file_name(n)).exists());
    }
    assert_eq!(scan_all(&db.keyspace("orders").expect("ks")), model);
    check(&db);
    db.close().expect("close");
    // A named patch file that is gone: the open refuses, naming it, and changes nothing.
    let lost = dir.path().join(strata::sstable::patch::patch_file_name(named[0]));
    std::fs::remove_file(&lost).expect("remove");
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, lost),
        Err(e) => panic!("not a corruption error: {e}"),
        Ok(_) => panic!("opened without a patch file it names"),
    }
}

/// A patch that turns a killed `Put` into a `Delete` (an older version of its key is
/// left in the tile) counts that tombstone in the file's metadata: once the satisfied
/// record is forgotten, a scan of one run of tombstone-free files takes each key's
/// first entry as its answer, and would return the `Delete` as an empty value.
#[test]
fn a_patched_tombstone_hides_its_key_from_scans_after_the_record_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ks, mut model) = loaded(dir.path());
    let k = key(17);
    // A snapshot keeps the old version through the compaction: both in one tile.
    let snap = db.snapshot();
    ks.put(&k, &value(990, 1)).expect("put");
    model.insert(k.clone(), value(990, 1));
    db.compact_range().expect("compact");
    drop(snap);
    ks.delete_where(&990u32.to_be_bytes(), &991u32.to_be_bytes())
        .expect("delete_where");
    model.retain(|_, v| dk_of(v) != 990);
    db.flush().expect("flush");
    ks.put(b"zzpoke", &value(999, 1)).expect("put");
    model.insert(b"zzpoke".to_vec(), value(999, 1));
    db.wait_for_background().expect("background");
    assert!(db.stats().delete_pages_patched > 0, "{}", db.stats());
    assert_eq!(
        ks.delete_where_records().expect("records"),
        vec![],
        "the record is satisfied"
    );
    assert_eq!(ks.get(&k).expect("get"), None);
    let got: Vec<_> = ks
        .scan(k.clone()..=k.clone())
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("item");
    assert_eq!(got, vec![], "the killed newest version hides the key");
    assert!(
        db.live_files().iter().any(|f| f.tombstones > 0),
        "the patch's tombstone is counted"
    );
    assert_eq!(scan_all(&ks), model);
    check(&db);
}
