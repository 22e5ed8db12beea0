//! Issue 20: the recovery modes, the read-only open, and reserved names.

mod table_harness;

use std::collections::BTreeMap;
use std::path::Path;

use strata::table::schema::{IndexDef, Schema};
use strata::table::value::Value;
use strata::{Db, Error, Options, RecoveryMode, WriteBatch};
use table_harness::tempdir;

fn options() -> Options {
    Options {
        memtable_budget: 16 << 20,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

fn dir_state(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

fn wal_name(dir: &Path) -> String {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wal"))
        .collect();
    v.sort();
    v.pop().expect("a WAL")
}

/// Record offsets of a log (the framing of `strata::wal`).
fn records(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        out.push(at);
        at += 8 + u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
    }
    out
}

/// The name, bytes and record offsets of the newest WAL in `dir`.
fn read_wal(dir: &Path) -> (String, Vec<u8>, Vec<usize>) {
    let wal = wal_name(dir);
    let bytes = std::fs::read(dir.join(&wal)).expect("read");
    let recs = records(&bytes);
    (wal, bytes, recs)
}

/// A closed database whose WAL holds keys 0..100, one record each.
fn db_with_wal() -> tempfile::TempDir {
    let dir = tempdir();
    let db = Db::open(dir.path(), options()).expect("open");
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"value").expect("put");
    }
    db.close().expect("close");
    dir
}

fn keys(db: &Db) -> Vec<String> {
    db.scan(..)
        .expect("scan")
        .map(|r| String::from_utf8(r.expect("item").0).expect("utf-8"))
        .collect()
}

fn open_mode(dir: &Path, mode: RecoveryMode) -> strata::Result<Db> {
    Db::open(
        dir,
        Options {
            recovery_mode: mode,
            ..options()
        },
    )
}

#[test]
fn each_recovery_mode_treats_a_damaged_middle_record_as_documented() {
    let template = db_with_wal();
    let (wal, bytes, recs) = read_wal(template.path());
    assert_eq!(recs.len(), 100);
    let copy = |mode| {
        let d = tempdir();
        for (name, content) in dir_state(template.path()) {
            std::fs::write(d.path().join(name), content).expect("copy");
        }
        let mut b = bytes.clone();
        b[recs[40] + 12] ^= 0x20; // a payload byte of record 40
        std::fs::write(d.path().join(&wal), b).expect("damage");
        let before = dir_state(d.path());
        let r = open_mode(d.path(), mode);
        (d, before, r)
    };
    for mode in [RecoveryMode::TolerateCorruptedTail, RecoveryMode::AbsoluteConsistency] {
        let (d, before, r) = copy(mode);
        match r {
            Err(e) => {
                assert!(e.to_string().contains(&wal), "{mode:?}: {e}");
                assert_eq!(dir_state(d.path()), before, "{mode:?}: files changed");
            }
            Ok(_) => panic!("{mode:?}: opened a log damaged in the middle"),
        }
    }
    let (_d, _, r) = copy(RecoveryMode::PointInTime);
    let db = r.expect("point in time opens");
    let got = keys(&db);
    assert_eq!(got.len(), 40, "point in time keeps what precedes the damage");
    assert_eq!(got.last().map(String::as_str), Some("k039"));
    drop(db);
    let (_d, _, r) = copy(RecoveryMode::SkipAnyCorruptedRecords);
    let db = r.expect("skip opens");
    let got = keys(&db);
    assert_eq!(got.len(), 99, "skip loses only the damaged record");
    assert!(!got.contains(&"k040".to_string()));
}

#[test]
fn a_torn_tail_is_dropped_by_default_and_refused_under_absolute_consistency() {
    // A crash cut the last append short: the crash harness relies on this default.
    let template = db_with_wal();
    let (wal, bytes, recs) = read_wal(template.path());
    let cut = recs[99] + 5;
    let make = || {
        let d = tempdir();
        for (name, content) in dir_state(template.path()) {
            std::fs::write(d.path().join(name), content).expect("copy");
        }
        std::fs::write(d.path().join(&wal), &bytes[..cut]).expect("cut");
        d
    };
    let d = make();
    let before = dir_state(d.path());
    let Err(e) = open_mode(d.path(), RecoveryMode::AbsoluteConsistency) else {
        panic!("absolute consistency refuses a torn tail");
    };
    assert!(e.to_string().contains(&wal), "{e}");
    assert_eq!(dir_state(d.path()), before);
    // The clean close recorded the log's synced length: by default a cut inside the
    // synced part is damage, not a torn tail.
    let Err(e) = open_mode(d.path(), RecoveryMode::TolerateCorruptedTail) else {
        panic!("a cut below the synced point is refused");
    };
    assert!(e.to_string().contains("synced"), "{e}");
    assert_eq!(dir_state(d.path()), before);
    // PointInTime accepts it (salvage) and keeps the 99 whole records.
    let db = open_mode(d.path(), RecoveryMode::PointInTime).expect("point in time");
    assert_eq!(keys(&db).len(), 99);
}

#[test]
fn a_torn_tail_after_a_crash_is_dropped_silently_by_default() {
    // No clean close (the process died): the WAL's last record is cut short.
    let dir = tempdir();
    let db = Db::open(dir.path(), options()).expect("open");
    for i in 0..50u32 {
        db.put(format!("k{i:03}").as_bytes(), b"value").expect("put");
    }
    // Each commit reached the OS (SyncPolicy::None flushes): copy the files as a
    // killed process would leave them, with no clean close and so no synced marker.
    let wal = wal_name(dir.path());
    let copy = tempdir();
    for (name, content) in dir_state(dir.path()) {
        std::fs::write(copy.path().join(name), content).expect("copy");
    }
    drop(db);
    let bytes = std::fs::read(copy.path().join(&wal)).expect("read");
    let recs = records(&bytes);
    assert_eq!(recs.len(), 50);
    std::fs::write(copy.path().join(&wal), &bytes[..recs[49] + 3]).expect("cut");
    let db = Db::open(copy.path(), options()).expect("a torn tail opens");
    assert_eq!(keys(&db).len(), 49);
}

#[test]
fn read_only_open_reads_everything_and_writes_nothing() {
    let dir = db_with_wal();
    std::fs::remove_file(dir.path().join("LOCK")).expect("no LOCK, as on read-only media");
    let before = dir_state(dir.path());
    let opts = Options {
        read_only: true,
        ..options()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("read-only open");
    assert_eq!(keys(&db).len(), 100, "unflushed WAL data is read");
    assert_eq!(db.get(b"k042").expect("get"), Some(b"value".to_vec()));
    for r in [
        db.put(b"x", b"y"),
        db.delete(b"k000"),
        db.flush(),
        db.compact_range(),
        db.create_keyspace("new").map(drop),
    ] {
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "a write was not refused: {r:?}"
        );
    }
    let report = db.check(Default::default()).expect("check runs read-only");
    assert!(report.ok(), "{report}");
    db.close().expect("close");
    assert_eq!(dir_state(dir.path()), before, "a read-only open changed the directory");
    // A missing database is not created.
    let empty = tempdir();
    assert!(Db::open(empty.path().join("none"), opts).is_err());
    assert!(!empty.path().join("none").exists());
}

#[test]
fn read_only_and_writable_opens_exclude_each_other() {
    let dir = db_with_wal();
    let ro = Options {
        read_only: true,
        ..options()
    };
    let writer = Db::open(dir.path(), options()).expect("writer");
    let Err(e) = Db::open(dir.path(), ro.clone()) else {
        panic!("reader beside a writer");
    };
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock),
        "{e}"
    );
    assert!(e.to_string().contains("open for writing"), "{e}");
    drop(writer);
    let reader = Db::open(dir.path(), ro.clone()).expect("reader");
    let reader2 = Db::open(dir.path(), ro).expect("two readers");
    assert!(Db::open(dir.path(), options()).is_err(), "writer beside a reader");
    drop((reader, reader2));
}

#[test]
fn reserved_names_are_refused() {
    let dir = tempdir();
    let db = Db::open(dir.path(), options()).expect("open");
    let Err(e) =
        db.create_table(Schema::parse("table u (id u64, a u64) primary key (id) index primary (a)").expect("schema"))
    else {
        panic!("an index named primary is refused");
    };
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let t = db
        .create_table(Schema::parse("table u (id u64, a u64) primary key (id)").expect("schema"))
        .expect("table");
    let Err(e) = t.create_index(IndexDef {
        name: "primary".into(),
        fields: vec!["a".into()],
        unique: false,
    }) else {
        panic!("create_index refuses primary");
    };
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    t.replace(vec![Value::U64(1), Value::U64(2)]).expect("row");
    // The table's keyspace can be read, not written, through the key-value API.
    let ks = db.keyspace("table:u").expect("internal keyspace");
    assert_eq!(ks.scan(..).expect("scan").count(), 1);
    assert!(matches!(ks.put(b"junk", b"junk"), Err(Error::InvalidArgument(_))));
    assert!(matches!(ks.delete(b"junk"), Err(Error::InvalidArgument(_))));
    let mut b = WriteBatch::new();
    b.put(&ks, b"junk", b"junk");
    assert!(matches!(db.write(b), Err(Error::InvalidArgument(_))));
    let report = db.check(Default::default()).expect("check");
    assert!(report.ok(), "{report}");
}

/// A database for the salvage tests: small blocks, no block cache.
fn salvage_source() -> (tempfile::TempDir, Db) {
    let src = tempdir();
    let opts = Options {
        block_size: 512,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(src.path(), opts).expect("open");
    (src, db)
}

/// The numbers of keyspace `kv`'s live SSTables.
fn kv_files(db: &Db) -> Vec<u64> {
    db.live_files()
        .into_iter()
        .filter(|f| f.keyspace_name == "kv")
        .map(|f| f.number)
        .collect()
}

/// `src` salvaged into a new directory (kept alive by the first value): its path and
/// the report.
fn salvaged(src: &std::path::Path) -> (tempfile::TempDir, std::path::PathBuf, strata::repair::SalvageReport) {
    let dst = tempdir();
    let out = dst.path().join("salvaged");
    let report = strata::repair::salvage(src, &out, RecoveryMode::SkipAnyCorruptedRecords).expect("salvage");
    (dst, out, report)
}

/// `repair::salvage` copies what reads back into a new database: with one data block
/// of one SSTable damaged, every key outside that block's range survives, tables are
/// re-created with consistent indexes, and the loss is listed.
#[test]
fn salvage_keeps_everything_but_the_damaged_block() {
    let (src, db) = salvage_source();
    let kv = db.create_keyspace("kv").expect("keyspace");
    for i in 0..2000u32 {
        kv.put(format!("key{i:05}").as_bytes(), format!("value-{i}").as_bytes())
            .expect("put");
    }
    let t = db
        .create_table(Schema::parse("table u (id u64, a u64) primary key (id) index by_a (a)").expect("schema"))
        .expect("table");
    for i in 0..100u64 {
        t.replace(vec![Value::U64(i), Value::U64(i % 7)]).expect("row");
    }
    db.compact_range().expect("compact");
    let kv_files = kv_files(&db);
    drop((kv, t));
    db.close().expect("close");
    assert_eq!(kv_files.len(), 1, "one compacted table holds kv");
    let sst = src.path().join(format!("{:06}.sst", kv_files[0]));
    let mut bytes = std::fs::read(&sst).expect("read");
    bytes[2000] ^= 0x40; // inside the fourth or so 512-byte block
    std::fs::write(&sst, bytes).expect("damage");

    let (_dst, out, report) = salvaged(src.path());
    assert_eq!(report.lost.len(), 1, "{report}");
    assert!(report.lost[0].contains(&format!("{:06}.sst", kv_files[0])), "{report}");
    assert!(report.keys > 1900 && report.keys < 2000, "{report}");
    assert_eq!(report.rows, 100, "{report}");
    let db = Db::open(&out, Options::default()).expect("salvaged database opens");
    let kv = db.keyspace("kv").expect("kv");
    let got: Vec<(Vec<u8>, Vec<u8>)> = kv.scan(..).expect("scan").map(|r| r.expect("item")).collect();
    assert_eq!(got.len() as u64, report.keys);
    for (k, v) in &got {
        let i: u32 = std::str::from_utf8(&k[3..]).expect("utf-8").parse().expect("number");
        assert_eq!(v, format!("value-{i}").as_bytes(), "a salvaged value is wrong");
    }
    // Only one contiguous range is missing.
    let ids: Vec<u32> = got
        .iter()
        .map(|(k, _)| std::str::from_utf8(&k[3..]).expect("utf-8").parse().expect("number"))
        .collect();
    let gaps = ids.windows(2).filter(|w| w[1] != w[0] + 1).count() + usize::from(ids.first() != Some(&0));
    assert_eq!(gaps, 1, "the loss is one key range");
    let report = db.check(Default::default()).expect("check");
    assert!(report.ok(), "{report}");
    assert_eq!(
        db.table("u").expect("table").select("by_a").count().expect("count"),
        100
    );
    // The source was not changed by the salvage (opened read-only).
    assert!(src.path().join(format!("{:06}.sst", kv_files[0])).exists());
}

/// A damaged page of a delete-tiled table costs its tile only: the pages of a tile
/// overlap in key range, so salvage goes on after the tile's last key. Before, it went
/// on at the next page's first key, inside the same tile, met the damage again and
/// gave up on the rest of the keyspace.
#[test]
fn salvage_of_a_tiled_table_loses_the_damaged_tile_only() {
    use strata::delete_key::{DeleteKey, TileChoice};
    let (src, db) = salvage_source();
    let kv = db.create_keyspace("kv").expect("keyspace");
    kv.set_delete_key(DeleteKey::new(0, 4).expect("dk"), TileChoice::Fixed(4))
        .expect("delete key");
    for i in 0..4000u32 {
        let mut v = (i.wrapping_mul(2_654_435_761) % 1000).to_be_bytes().to_vec();
        v.extend_from_slice(format!("value-{i}").as_bytes());
        kv.put(format!("key{i:05}").as_bytes(), &v).expect("put");
    }
    db.compact_range().expect("compact");
    let files = kv_files(&db);
    drop(kv);
    db.close().expect("close");
    let sst = src.path().join(format!("{:06}.sst", files[0]));
    let mut bytes = std::fs::read(&sst).expect("read");
    bytes[700] ^= 0x40; // the second page of the first tile
    std::fs::write(&sst, bytes).expect("damage");

    let (_dst, out, report) = salvaged(src.path());
    assert_eq!(report.lost.len(), 1, "{report}");
    // One tile of four 512-byte pages holds well under 200 of the 4,000 keys.
    assert!(report.keys > 3800 && report.keys < 4000, "{report}");
    let db = Db::open(&out, Options::default()).expect("salvaged database opens");
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .keyspace("kv")
        .expect("kv")
        .scan(..)
        .expect("scan")
        .map(|r| r.expect("item"))
        .collect();
    assert_eq!(got.len() as u64, report.keys);
    for (k, v) in &got {
        let i: u32 = std::str::from_utf8(&k[3..]).expect("utf-8").parse().expect("number");
        assert_eq!(&v[4..], format!("value-{i}").as_bytes(), "a salvaged value is wrong");
    }
}
