//! `Db::ingest` of external SSTables: one seqno above every write, placement above the
//! data a file overlaps, memtables flushed when they overlap, snapshots that do not see
//! it, reopen, bad input refused with nothing changed, and power loss at every step of
//! an ingest leaving all files in or none. (The model tests interleave ingests with
//! everything else: `common::Op::Ingest`.)

#[allow(unused_imports)] // the harness re-exports more than this file needs
mod fault_harness;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fault_harness::{CrashMode, Fault, FaultSpec, FaultyFs, FileKind, Op, Target};
use strata::fs::{FileSystem, RandomAccessFile, WritableFile};
use strata::key::{ValueKind, internal_key};
use strata::sstable::{ExternalSstWriter, SstOptions, SstWriter};
use strata::{Db, Error, IngestOptions, Options, SyncPolicy};

fn small() -> Options {
    Options {
        memtable_budget: 8 << 10,
        target_file_size: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

/// A database with `small()` options at `db` in a fresh directory, which holds the
/// tests' external files too.
fn small_db() -> (tempfile::TempDir, Db) {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), small()).unwrap();
    (tmp, db)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// An external file with keys `keys`, values `"{tag}:{i}"`.
fn external(dir: &Path, name: &str, keys: impl IntoIterator<Item = u32>, tag: &str) -> PathBuf {
    let path = dir.join(name);
    let mut w = ExternalSstWriter::create(&path).unwrap();
    for i in keys {
        w.put(&key(i), format!("{tag}:{i}").as_bytes()).unwrap();
    }
    w.finish().unwrap();
    path
}

/// A file written with the engine's own writer: key `k` at each (seqno, kind, value)
/// of `entries`, which may break the rules an external file keeps.
fn engine_file(path: &Path, entries: &[(u64, ValueKind, &[u8])]) -> PathBuf {
    let fs = strata::fs::RealFs;
    let mut w = SstWriter::new(
        strata::fs::FileSystem::create(&fs, path).unwrap(),
        path.to_path_buf(),
        SstOptions::default(),
    );
    for &(seq, kind, value) in entries {
        w.add(&internal_key(b"k", seq, kind), value).unwrap();
    }
    w.finish().unwrap();
    path.to_path_buf()
}

fn get(db: &Db, i: u32) -> Option<String> {
    db.get(&key(i)).unwrap().map(|v| String::from_utf8(v).unwrap())
}

fn dir_listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Asserts that `check` finds nothing wrong with `db`; `ctx` says which case.
fn check_ok(db: &Db, ctx: &str) {
    let report = db.check(Default::default()).unwrap();
    assert!(report.ok(), "{ctx}: {:?}", report.problems);
}

/// A database (`opts` on a fault-injecting file system whose faults follow `seed`, a
/// sync at every batch) holding keys 0..10, and beside it an external file of keys
/// 100..200 ("a:{i}"). The database is opened by `open`, so that a test can drop it
/// before a crash.
struct Faulty {
    _tmp: tempfile::TempDir,
    fs: std::sync::Arc<FaultyFs>,
    opts: Options,
    dir: PathBuf,
    file: PathBuf,
}

/// `opts` on the fault-injecting `fs`, syncing every batch (so what was acknowledged
/// must survive a crash).
fn synced_on(fs: &Arc<FaultyFs>, opts: Options) -> Options {
    Options {
        fs: fs.clone(),
        sync: SyncPolicy::EveryBatch,
        ..opts
    }
}

impl Faulty {
    fn new(seed: u64, opts: Options) -> Faulty {
        let tmp = tempfile::tempdir().unwrap();
        let fs = FaultyFs::new(seed);
        let opts = synced_on(&fs, opts);
        let dir = tmp.path().join("db");
        let file = external(tmp.path(), "a.sst", 100..200, "a");
        let db = Db::open(&dir, opts.clone()).unwrap();
        for i in 0..10 {
            db.put(&key(i), b"before").unwrap();
        }
        db.close().unwrap();
        Faulty {
            _tmp: tmp,
            fs,
            opts,
            dir,
            file,
        }
    }

    fn open(&self) -> Db {
        Db::open(&self.dir, self.opts.clone()).unwrap()
    }
}

#[test]
fn an_ingest_takes_one_seqno_above_every_write_and_old_snapshots_do_not_see_it() {
    let (tmp, db) = small_db();
    for i in 0..10 {
        db.put(&key(i), b"old").unwrap();
    }
    let before = db.last_seq();
    let snap = db.snapshot();
    let a = external(tmp.path(), "a.sst", 5..15, "a");
    let b = external(tmp.path(), "b.sst", 20..30, "b");
    let r = db
        .ingest(&db.default_keyspace(), &[&b, &a], IngestOptions::default())
        .unwrap();
    assert_eq!(r.global_seq, before + 1);
    assert_eq!(db.last_seq(), before + 1);
    assert_eq!(r.files.len(), 2);
    assert_eq!(r.files[0].source, b);
    assert_eq!(r.files.iter().map(|f| f.entries).sum::<u64>(), 20);
    assert!(r.flushed_memtable, "keys 5..10 are in the memtable");
    assert_eq!(get(&db, 4).as_deref(), Some("old"));
    assert_eq!(get(&db, 5).as_deref(), Some("a:5"));
    assert_eq!(get(&db, 25).as_deref(), Some("b:25"));
    let ks = db.default_keyspace();
    assert_eq!(snap.get(&ks, &key(5)).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(snap.get(&ks, &key(25)).unwrap(), None);
    let seen: Vec<_> = snap.scan(&ks, ..).unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(seen, (0..10).map(key).collect::<Vec<_>>());
    // A write after it is newer.
    db.put(&key(6), b"new").unwrap();
    assert_eq!(db.last_seq(), before + 2);
    assert_eq!(get(&db, 6).as_deref(), Some("new"));
    let all: Vec<_> = db.scan(..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 10 + 10 + 5);
    // Reverse scans read the ingested files' keys at their global seqno too.
    let rev: Vec<_> = db.scan(..).unwrap().rev().map(|r| r.unwrap().0).collect();
    assert_eq!(rev.first(), Some(&key(29)));
    assert_eq!(rev.len(), 25);
}

#[test]
fn an_ingest_beside_the_memtable_leaves_it_and_survives_reopen_and_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let g;
    {
        let db = Db::open(&path, small()).unwrap();
        db.put(b"a-in-memory", b"m").unwrap();
        let f = external(tmp.path(), "f.sst", 0..500, "f");
        let r = db
            .ingest(&db.default_keyspace(), &[&f], IngestOptions::default())
            .unwrap();
        assert!(!r.flushed_memtable);
        assert_eq!(db.stats().immutable_memtables, 0);
        g = r.global_seq;
        db.close().unwrap();
    }
    let db = Db::open(&path, small()).unwrap();
    assert!(db.last_seq() >= g, "seqnos went back below the ingest's after reopen");
    assert_eq!(db.get(b"a-in-memory").unwrap().as_deref(), Some(&b"m"[..]));
    assert_eq!(get(&db, 499).as_deref(), Some("f:499"));
    db.put(&key(1), b"after").unwrap();
    db.delete(&key(2)).unwrap();
    db.compact_range().unwrap();
    assert_eq!(get(&db, 1).as_deref(), Some("after"));
    assert_eq!(get(&db, 2), None);
    assert_eq!(get(&db, 3).as_deref(), Some("f:3"));
    assert_eq!(db.scan(..).unwrap().count(), 500);
    db.close().unwrap();
    let db = Db::open(&path, small()).unwrap();
    assert_eq!(get(&db, 1).as_deref(), Some("after"));
    assert_eq!(get(&db, 2), None);
    assert!(db.check(Default::default()).unwrap().ok());
}

#[test]
fn files_go_to_the_deepest_level_above_the_data_they_overlap() {
    let (tmp, db) = small_db();
    for i in (0..4000).step_by(2) {
        db.put(&key(i), &[b'x'; 40]).unwrap();
    }
    db.compact_range().unwrap();
    let stats = db.stats();
    let last = stats.keyspaces[0].levels.iter().rposition(|l| l.files > 0).unwrap();
    assert!(last >= 1, "the data should sit below level 0");
    let ks = db.default_keyspace();
    // Beyond every key: the last level.
    let beyond = external(tmp.path(), "beyond.sst", 5000..5100, "z");
    let r = db.ingest(&ks, &[&beyond], IngestOptions::default()).unwrap();
    assert_eq!(r.files[0].level as usize, last);
    // Over the data: just above the level holding it.
    let over = external(tmp.path(), "over.sst", 101..110, "o");
    let r = db.ingest(&ks, &[&over], IngestOptions::default()).unwrap();
    assert_eq!(r.files[0].level as usize, last - 1);
    // Over the file just ingested: above it again, or level 0.
    let again = external(tmp.path(), "again.sst", 105..106, "again");
    let r = db.ingest(&ks, &[&again], IngestOptions::default()).unwrap();
    assert_eq!(r.files[0].level as usize, (last - 1).saturating_sub(1));
    assert_eq!(get(&db, 102).as_deref(), Some("o:102"));
    assert_eq!(get(&db, 105).as_deref(), Some("again:105"));
    assert_eq!(get(&db, 106).as_deref(), Some("o:106"));
    assert_eq!(get(&db, 5050).as_deref(), Some("z:5050"));
    assert_eq!(db.get(&key(100)).unwrap().map(|v| v.len()), Some(40));
    db.compact_range().unwrap();
    assert_eq!(get(&db, 105).as_deref(), Some("again:105"));
    assert_eq!(get(&db, 103).as_deref(), Some("o:103"));
}

/// An ingest into an empty keyspace goes to the first level whose capacity holds it, not
/// level 0: there the next level-0 compaction would rewrite all of it, and every one
/// after that the part that reached level 1.
#[test]
fn a_large_ingest_into_an_empty_keyspace_lands_where_it_fits() {
    let (tmp, db) = small_db();
    let opts = small();
    let big = external(tmp.path(), "big.sst", 0..20_000, "big");
    let r = db
        .ingest(&db.default_keyspace(), &[&big], IngestOptions::default())
        .unwrap();
    let (bytes, level) = (r.files[0].bytes, r.files[0].level as usize);
    let capacity = |l: i32| opts.memtable_budget as f64 * opts.size_ratio.powi(l);
    assert!(level >= 2, "{bytes} bytes placed at level {level}");
    assert!(
        capacity(level as i32) >= bytes as f64,
        "level {level} cannot hold {bytes} bytes"
    );
    assert!(
        capacity(level as i32 - 1) < bytes as f64,
        "level {level} is deeper than {bytes} bytes need"
    );
    // Writes across its whole range, too few to fill level 1: the file stays as it is.
    for i in 0..1_000u32 {
        db.put(&key(i * 20 + 7), &[b'w'; 40]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let stats = db.stats();
    assert!(stats.compactions > 0, "no compaction ran: the test shows nothing");
    let name = strata::sstable::sst_file_name(r.files[0].number);
    assert!(
        dir_listing(&tmp.path().join("db")).contains(&name),
        "the ingested file was rewritten: {} compaction bytes written",
        stats.compaction_bytes_written
    );
    assert!(stats.compaction_bytes_written < bytes, "{stats}");
    assert_eq!(db.get(&key(7)).unwrap().map(|v| v.len()), Some(40));
    assert_eq!(get(&db, 8).as_deref(), Some("big:8"));
    assert_eq!(db.scan(..).unwrap().count(), 20_000);
    assert!(db.check(Default::default()).unwrap().ok());
}

/// Only files that overlap nothing size the level below the data: a large file over the
/// data goes above it, and a small one beside it in the same ingest stays at the last
/// level instead of opening the level the large one would need.
#[test]
fn a_file_over_the_data_does_not_size_the_level_of_one_beside_it() {
    let (tmp, db) = small_db();
    for i in 0..200 {
        db.put(&key(i), &[b'x'; 40]).unwrap();
    }
    db.compact_range().unwrap();
    let last = db.stats().keyspaces[0]
        .levels
        .iter()
        .rposition(|l| l.files > 0)
        .unwrap();
    assert_eq!(last, 1, "the data should sit at level 1");
    let over = external(tmp.path(), "over.sst", 0..20_000, "o");
    let beside = external(tmp.path(), "beside.sst", 30_000..30_010, "b");
    let r = db
        .ingest(&db.default_keyspace(), &[&over, &beside], IngestOptions::default())
        .unwrap();
    assert!(r.files[0].bytes > 100 << 10, "the large file should need level 2 alone");
    assert_eq!((r.files[0].level, r.files[1].level), (0, 1));
    assert_eq!(get(&db, 30_005).as_deref(), Some("b:30005"));
    assert_eq!(get(&db, 5).as_deref(), Some("o:5"));
}

#[test]
fn external_deletes_remove_older_data() {
    let (tmp, db) = small_db();
    db.put(&key(1), b"v").unwrap();
    db.put(&key(2), b"v").unwrap();
    db.flush().unwrap();
    let path = tmp.path().join("d.sst");
    let mut w = ExternalSstWriter::create(&path).unwrap();
    w.delete(&key(1)).unwrap();
    w.put(&key(3), b"three").unwrap();
    w.finish().unwrap();
    db.ingest(&db.default_keyspace(), &[&path], IngestOptions::default())
        .unwrap();
    assert_eq!(get(&db, 1), None);
    assert_eq!(get(&db, 2).as_deref(), Some("v"));
    assert_eq!(get(&db, 3).as_deref(), Some("three"));
    db.compact_range().unwrap();
    assert_eq!(get(&db, 1), None);
    assert_eq!(db.scan(..).unwrap().count(), 2);
}

#[test]
fn linked_files_share_the_source_and_copies_do_not() {
    let (tmp, db) = small_db();
    let a = external(tmp.path(), "a.sst", 0..100, "a");
    let b = external(tmp.path(), "b.sst", 100..200, "b");
    let ks = db.default_keyspace();
    let r = db.ingest(&ks, &[&a], IngestOptions { link_files: true }).unwrap();
    assert!(r.files[0].linked);
    let r = db.ingest(&ks, &[&b], IngestOptions { link_files: false }).unwrap();
    assert!(!r.files[0].linked);
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
    assert_eq!(get(&db, 50).as_deref(), Some("a:50"));
    assert_eq!(get(&db, 150).as_deref(), Some("b:150"));
}

/// The real file system, where this process may not write SSTables it did not create
/// (as with read-only build output owned by another user; tests run as root, whom
/// permissions do not stop).
#[derive(Debug)]
struct ReadOnlySources(Arc<dyn FileSystem>);

impl FileSystem for ReadOnlySources {
    fn create(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        self.0.create(path)
    }
    fn open_append(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            return Err(Error::io(path, std::io::ErrorKind::PermissionDenied.into()));
        }
        self.0.open_append(path)
    }
    fn open(&self, path: &Path) -> strata::Result<Arc<dyn RandomAccessFile>> {
        self.0.open(path)
    }
    fn read_all(&self, path: &Path) -> strata::Result<Vec<u8>> {
        self.0.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata::Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> strata::Result<()> {
        self.0.remove(path)
    }
    fn list(&self, dir: &Path) -> strata::Result<Vec<String>> {
        self.0.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata::Result<()> {
        self.0.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> strata::Result<()> {
        self.0.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> strata::Result<()> {
        self.0.hard_link(from, to)
    }
}

/// A linked file that cannot be opened for writing (to sync it) is copied instead.
#[test]
fn a_source_that_cannot_be_written_is_copied_not_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        fs: Arc::new(ReadOnlySources(Arc::new(strata::fs::RealFs))),
        ..small()
    };
    let db = Db::open(tmp.path().join("db"), opts).unwrap();
    let a = external(tmp.path(), "a.sst", 0..100, "a");
    let r = db
        .ingest(&db.default_keyspace(), &[&a], IngestOptions { link_files: true })
        .unwrap();
    assert!(!r.files[0].linked);
    std::fs::remove_file(&a).unwrap();
    assert_eq!(get(&db, 50).as_deref(), Some("a:50"));
    // Only the copy is left in the directory, no link beside it.
    let ssts = dir_listing(&tmp.path().join("db"))
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .count();
    assert_eq!(ssts, 1);
    check_ok(&db, "after the copy");
}

#[test]
fn damage_found_mid_copy_leaves_nothing_installed_and_no_staged_file() {
    let (tmp, db) = small_db();
    db.put(&key(7), b"kept").unwrap();
    let ks = db.default_keyspace();
    let dbdir = tmp.path().join("db");
    // About 5 MiB: the copy checks and writes it in 1 MiB pieces.
    let path = tmp.path().join("big.sst");
    let mut w = ExternalSstWriter::create(&path).unwrap();
    for i in 0..90_000 {
        w.put(&key(i), format!("{i:040}").as_bytes()).unwrap();
    }
    let size = w.finish().unwrap().file_size;
    assert!(size > 4 << 20, "{size}");
    // A data block three quarters in: pieces before it were already copied.
    let at = size * 3 / 4;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at as usize] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let (seq, listing) = (db.last_seq(), dir_listing(&dbdir));
    for link_files in [false, true] {
        match db.ingest(&ks, &[&path], IngestOptions { link_files }) {
            // The block's checksum, after it.
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, path);
                assert!(offset >= at && offset - at < 8300, "damage at {at}, error at {offset}");
            }
            other => panic!("link_files {link_files}: expected corruption, got {other:?}"),
        }
        assert_eq!(
            dir_listing(&dbdir),
            listing,
            "link_files {link_files}: a staged file is left"
        );
        assert_eq!(db.last_seq(), seq);
        assert_eq!(get(&db, 1), None);
        assert_eq!(get(&db, 7).as_deref(), Some("kept"));
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the source changed");
    }
    drop(db);
    let db = Db::open(&dbdir, small()).unwrap();
    assert_eq!(db.scan(..).unwrap().count(), 1);
}

#[test]
fn several_keyspaces_take_one_seqno_in_one_edit() {
    let (tmp, db) = small_db();
    let one = db.create_keyspace("one").unwrap();
    let two = db.create_keyspace("two").unwrap();
    // The same key range in two keyspaces does not overlap.
    let a = external(tmp.path(), "a.sst", 0..50, "a");
    let b = external(tmp.path(), "b.sst", 0..50, "b");
    let before = db.last_seq();
    let r = db
        .ingest_many(&[(&one, &a), (&two, &b)], IngestOptions::default())
        .unwrap();
    assert_eq!(r.global_seq, before + 1);
    assert_eq!(one.get(&key(3)).unwrap().as_deref(), Some(&b"a:3"[..]));
    assert_eq!(two.get(&key(3)).unwrap().as_deref(), Some(&b"b:3"[..]));
}

/// Re-seals a table's footer with another format version (the footer's CRC fixed).
fn set_footer_version(path: &Path, version: u32) {
    let mut bytes = std::fs::read(path).unwrap();
    let f = bytes.len() - 80;
    bytes[f + 72..f + 76].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c_of(&bytes[f..f + 76]);
    bytes[f + 76..f + 80].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// CRC-32C (Castagnoli), bitwise: the test checks the footer independently of the crate.
fn crc32c_of(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dbdir = tmp.path().join("db");
    let db = Db::open(&dbdir, small()).unwrap();
    db.put(&key(7), b"kept").unwrap();
    db.flush().unwrap();
    let ks = db.default_keyspace();
    let seq = db.last_seq();
    let listing = dir_listing(&dbdir);
    let unchanged = |what: &str| {
        assert_eq!(db.last_seq(), seq, "{what}: the seqno moved");
        assert_eq!(dir_listing(&dbdir), listing, "{what}: the directory changed");
        assert_eq!(get(&db, 7).as_deref(), Some("kept"), "{what}");
        assert_eq!(db.scan(..).unwrap().count(), 1, "{what}");
    };
    let good = external(tmp.path(), "good.sst", 0..10, "g");

    // Overlapping files.
    let over = external(tmp.path(), "over.sst", 5..20, "o");
    let e = db.ingest(&ks, &[&good, &over], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("overlap"), "{e}");
    assert!(e.to_string().contains("over.sst"), "{e}");
    unchanged("overlapping files");

    // The same file twice.
    let e = db.ingest(&ks, &[&good, &good], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("overlap"), "{e}");
    unchanged("one file twice");

    // Another format version.
    let old = external(tmp.path(), "v2.sst", 0..10, "v");
    set_footer_version(&old, 2);
    let e = db.ingest(&ks, &[&good, &old], IngestOptions::default()).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        e.to_string().contains("format version 2") && e.to_string().contains("v2.sst"),
        "{e}"
    );
    unchanged("format version");

    // A damaged block.
    let bad = external(tmp.path(), "bad.sst", 100..2000, "b");
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[300] ^= 1;
    std::fs::write(&bad, bytes).unwrap();
    match db.ingest(&ks, &[&bad], IngestOptions::default()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, bad),
        other => panic!("expected corruption naming the file, got {other:?}"),
    }
    unchanged("damaged file");

    // Truncated (an unfinished writer's file has no footer).
    let cut = external(tmp.path(), "cut.sst", 0..10, "c");
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let e = db.ingest(&ks, &[&cut], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("cut.sst"), "{e}");
    unchanged("truncated file");

    // A user key twice (written with the engine's own writer, which allows it at two
    // kinds) and an engine file carrying seqnos.
    let dup = engine_file(
        &tmp.path().join("dup.sst"),
        &[(0, ValueKind::Put, b"1"), (0, ValueKind::Delete, b"")],
    );
    let e = db.ingest(&ks, &[&dup], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("unique and sorted"), "{e}");
    unchanged("duplicate key");
    let seqs = engine_file(&tmp.path().join("seqs.sst"), &[(9, ValueKind::Put, b"1")]);
    let e = db.ingest(&ks, &[&seqs], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("seqno"), "{e}");
    unchanged("engine file");

    // A key past the limit every write keeps: once in, it could not be written or
    // deleted again.
    let key = vec![b'k'; strata::options::MAX_KEY_SIZE + 1];
    let path = tmp.path().join("long-key.sst");
    let mut w = SstWriter::new(
        strata::fs::FileSystem::create(&strata::fs::RealFs, &path).unwrap(),
        path.clone(),
        SstOptions::default(),
    );
    w.add(&internal_key(&key, 0, ValueKind::Put), b"v").unwrap();
    w.finish().unwrap();
    let e = db.ingest(&ks, &[&path], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("keys take at most"), "{e}");
    unchanged("long key");

    // Missing file, no files, a table's keyspace, another database's keyspace.
    let e = db
        .ingest(&ks, &[tmp.path().join("missing.sst")], IngestOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("missing.sst"), "{e}");
    assert!(db.ingest::<&Path>(&ks, &[], IngestOptions::default()).is_err());
    let schema = strata::table::schema::Schema::parse("table t (id u64, a u64) primary key (id)").unwrap();
    db.create_table(schema).unwrap();
    let listing_with_table = dir_listing(&dbdir);
    let table_ks = db.keyspace("table:t").unwrap();
    let e = db.ingest(&table_ks, &[&good], IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("table API"), "{e}");
    let other = Db::open(tmp.path().join("other"), small()).unwrap();
    assert!(
        db.ingest(&other.default_keyspace(), &[&good], IngestOptions::default())
            .is_err()
    );
    assert_eq!(dir_listing(&dbdir), listing_with_table);
    assert_eq!(get(&db, 7).as_deref(), Some("kept"));

    // The good file still goes in afterwards.
    db.ingest(&ks, &[&good], IngestOptions::default()).unwrap();
    assert_eq!(get(&db, 3).as_deref(), Some("g:3"));
}

/// An ingest whose manifest edit fails after its seqno was logged still takes that
/// seqno: the next write logs the one after it, and the WAL replays after a crash.
#[test]
fn a_failed_manifest_edit_still_takes_the_ingests_seqno() {
    let f = Faulty::new(1, small());
    {
        let db = f.open();
        let files = dir_listing(&f.dir);
        let before = db.last_seq();
        f.fs.state()
            .arm(FaultSpec::new(Target::Kind(FileKind::Manifest), Op::Append, Fault::Error).times(1));
        let err = db
            .ingest(&db.default_keyspace(), &[&f.file], IngestOptions::default())
            .unwrap_err();
        assert!(!matches!(err, Error::Background(_)), "{err}");
        f.fs.state().clear();
        assert_eq!(get(&db, 150), None);
        assert_eq!(db.last_seq(), before + 1, "the logged seqno is taken");
        db.put(&key(50), b"after").unwrap();
        assert_eq!(db.last_seq(), before + 2);
        // The staged file is gone; the manifest was rewritten without the edit.
        let sst = |v: &[String]| v.iter().filter(|n| n.ends_with(".sst")).cloned().collect::<Vec<_>>();
        assert_eq!(sst(&dir_listing(&f.dir)), sst(&files));
        f.fs.state().power_off();
        drop(db);
    }
    f.fs.state().crash(CrashMode::LoseUnsyncedData);
    f.fs.state().clear();
    let db = f.open();
    assert_eq!(get(&db, 50).as_deref(), Some("after"));
    assert_eq!(get(&db, 150), None);
    assert_eq!(db.scan(..).unwrap().count(), 11);
    check_ok(&db, "after the crash");
}

/// A WAL write failing under an ingest (the empty record of its seqno) fails the ingest
/// and stops writes until a reopen, as any WAL failure does, and the handle still
/// closes. Before, the failure was recorded under a lock the ingest already held: the
/// thread waited for itself, and every writer and the close behind it.
#[test]
fn a_wal_failure_during_an_ingest_fails_it_and_hangs_nothing() {
    let f = Faulty::new(1, small());
    let (done, outcome) = std::sync::mpsc::channel();
    {
        let db = f.open();
        let fs = f.fs.clone();
        let file = f.file.clone();
        std::thread::spawn(move || {
            fs.state()
                .arm(FaultSpec::new(Target::Kind(FileKind::Wal), Op::Append, Fault::Error).times(1));
            let ingest = db.ingest(&db.default_keyspace(), &[&file], IngestOptions::default());
            fs.state().clear();
            let put = db.put(&key(50), b"after");
            let close = db.close();
            let _ = done.send((ingest.map(|_| ()), put, close));
        });
    }
    let (ingest, put, close) = outcome
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the ingest, a write and the close returned");
    assert_eq!(f.fs.state().injected(Fault::Error, Op::Append), 1);
    assert!(matches!(ingest, Err(Error::Io { .. })), "{ingest:?}");
    assert!(put.is_err(), "writes stop after a WAL failure");
    // The close cannot sync the log whose append failed (its writer refuses all work
    // after a failure) and says so.
    assert!(matches!(close, Err(Error::Io { .. })), "{close:?}");
    // Nothing of the ingest is in; the acknowledged writes are.
    let db = f.open();
    assert_eq!(get(&db, 150), None);
    assert_eq!(db.scan(..).unwrap().count(), 10);
    check_ok(&db, "after the failed ingest");
}

/// When the manifest cannot be rewritten after a failed edit, the edit may be on disk
/// after all: the ingest's files stay, and the next open finds all of them in (here the
/// edit's bytes did reach the manifest) or sweeps them.
#[test]
fn an_ingest_whose_edit_may_be_on_disk_keeps_its_files() {
    let f = Faulty::new(1, small());
    {
        let db = f.open();
        // The edit is written but its sync fails, and so does the fresh manifest.
        f.fs.state()
            .arm(FaultSpec::new(Target::Kind(FileKind::Manifest), Op::Sync, Fault::Error).times(1));
        f.fs.state()
            .arm(FaultSpec::new(Target::Kind(FileKind::Manifest), Op::Create, Fault::Error).times(1));
        let err = db
            .ingest(&db.default_keyspace(), &[&f.file], IngestOptions::default())
            .unwrap_err();
        assert!(matches!(err, Error::Background(_)), "{err}");
        f.fs.state().power_off();
        drop(db);
    }
    // No crash: what was written stays, as when the kernel wrote it back in time.
    let db = Db::open(&f.dir, small()).unwrap();
    assert_eq!(get(&db, 150).as_deref(), Some("a:150"));
    assert_eq!(db.scan(..).unwrap().count(), 110);
    check_ok(&db, "reopened");
}

/// A directory sync that fails during an ingest whose edit starts a fresh manifest
/// (every edit does here): once `CURRENT` was renamed to name the new manifest, the
/// version set must not go on with the old one, or the files it removes on the error
/// would be listed at the next open. Swept over each sync of the ingest.
#[test]
fn a_failed_directory_sync_while_the_manifest_rolls_leaves_the_ingest_all_in_or_out() {
    let (mut outcomes, mut failed) = ([0usize; 2], 0);
    for at in 0..6 {
        for mode in [CrashMode::LoseUnsyncedData, CrashMode::LoseUnsyncedDirEntries] {
            let f = Faulty::new(
                at,
                Options {
                    max_manifest_file_size: 1,
                    ..small()
                },
            );
            {
                let db = f.open();
                f.fs.state().arm(
                    FaultSpec::new(Target::Any, Op::SyncDir, Fault::Error)
                        .after(at)
                        .times(1),
                );
                let r = db.ingest(&db.default_keyspace(), &[&f.file], IngestOptions::default());
                f.fs.state().clear();
                if r.is_err() {
                    failed += 1;
                    db.put(&key(50), b"after").unwrap();
                }
                f.fs.state().power_off();
                drop(db);
            }
            f.fs.state().crash(mode);
            f.fs.state().clear();
            let db = Db::open(&f.dir, f.opts.clone()).unwrap_or_else(|e| panic!("sync_dir #{at}, {mode:?}: {e}"));
            let ingested = get(&db, 150).as_deref() == Some("a:150");
            assert_eq!(
                db.scan(..).unwrap().count(),
                if ingested { 110 } else { 11 },
                "#{at} {mode:?}"
            );
            for i in 0..10 {
                assert!(get(&db, i).is_some(), "#{at} {mode:?}: acknowledged key {i} lost");
            }
            check_ok(&db, &format!("#{at} {mode:?}"));
            outcomes[usize::from(ingested)] += 1;
        }
    }
    // The ingest's own directory sync, then the new manifest's and the one after the
    // rename of CURRENT (the case this test is for), in both crash modes.
    assert!(failed >= 6, "the sweep failed {failed} ingests: {outcomes:?}");
}

/// Power goes at the `at`-th mutating operation of kind `op` during an ingest of three
/// files into two keyspaces; after the crash the database holds all of them or none,
/// and everything acknowledged before.
fn power_loss_during_ingest(op: Op, at: u64, mode: CrashMode) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new(at);
    let opts = synced_on(&fs, small());
    let dbdir = tmp.path().join("db");
    let a = external(tmp.path(), "a.sst", 0..300, "a");
    let b = external(tmp.path(), "b.sst", 300..600, "b");
    let c = external(tmp.path(), "c.sst", 0..300, "c");
    {
        let db = Db::open(&dbdir, opts.clone()).unwrap();
        let other = db.create_keyspace("other").unwrap();
        for i in 0..50 {
            db.put(&key(i), b"before").unwrap();
        }
        fs.state()
            .arm(FaultSpec::new(Target::Any, op, Fault::PowerOff).after(at).times(1));
        let r = db.ingest_many(
            &[(&db.default_keyspace(), &a), (&db.default_keyspace(), &b), (&other, &c)],
            IngestOptions::default(),
        );
        let _ = r;
        fs.state().power_off();
        drop(other);
        let _ = db.close();
    }
    fs.state().crash(mode);
    fs.state().clear();
    let db = Db::open(&dbdir, opts).unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..50 {
        assert!(get(&db, i).is_some(), "acknowledged key {i} lost");
    }
    let in_a = get(&db, 10).as_deref() == Some("a:10");
    let in_b = get(&db, 310).as_deref() == Some("b:310");
    let in_c = other.get(&key(10)).unwrap().as_deref() == Some(&b"c:10"[..]);
    assert!(
        in_a == in_b && in_b == in_c,
        "{op:?} #{at}: half an ingest survived (a {in_a}, b {in_b}, c {in_c})"
    );
    if in_a {
        assert_eq!(db.scan(..).unwrap().count(), 600);
        assert_eq!(other.scan(..).unwrap().count(), 300);
        // Writes after recovery are newer than the ingest, on disk too (in the
        // memtable, any write would read first).
        db.put(&key(10), b"later").unwrap();
        db.flush().unwrap();
        db.compact_range().unwrap();
        assert_eq!(get(&db, 10).as_deref(), Some("later"));
    } else {
        assert_eq!(db.scan(..).unwrap().count(), 50);
        assert_eq!(other.scan(..).unwrap().count(), 0);
    }
    check_ok(&db, &format!("{op:?} #{at}"));
    in_a
}

/// A compaction rewrites an ingest's entries at its seqno `G` into files that no longer
/// list `G` as their global seqno, and the WAL record of `G` is not synced: after power
/// goes, recovery still counts `G` as taken, so the entries stay visible and the next
/// write comes after them.
#[test]
fn an_ingest_rewritten_by_a_compaction_keeps_its_seqno_through_power_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new(1);
    let opts = synced_on(&fs, small());
    let dbdir = tmp.path().join("db");
    // Over the flushed keys, so the compaction merges it with them.
    let a = external(tmp.path(), "a.sst", 25..300, "a");
    let g = {
        let db = Db::open(&dbdir, opts.clone()).unwrap();
        for i in 0..50 {
            db.put(&key(i), b"before").unwrap();
        }
        db.flush().unwrap();
        // Held through the compaction: the rewritten entries keep seqno G.
        let old = db.snapshot();
        let g = db
            .ingest(&db.default_keyspace(), &[&a], IngestOptions::default())
            .unwrap()
            .global_seq;
        db.compact_range().unwrap();
        drop(old);
        fs.state().power_off();
        let _ = db.close();
        g
    };
    fs.state().crash(CrashMode::LoseUnsyncedData);
    fs.state().clear();
    let db = Db::open(&dbdir, opts).unwrap();
    assert!(
        db.last_seq() >= g,
        "recovered seqno {} is below the ingest's {g}",
        db.last_seq()
    );
    assert_eq!(get(&db, 30).as_deref(), Some("a:30"));
    assert_eq!(get(&db, 10).as_deref(), Some("before"));
    assert_eq!(db.scan(..).unwrap().count(), 300);
    db.put(&key(30), b"later").unwrap();
    db.flush().unwrap();
    db.compact_range().unwrap();
    assert_eq!(get(&db, 30).as_deref(), Some("later"));
    check_ok(&db, "after recovery");
}

#[test]
fn power_loss_at_any_step_of_an_ingest_leaves_all_files_or_none() {
    fault_harness::install_panic_hook();
    let mut outcomes = [0usize; 2];
    for (op, n) in [
        (Op::Create, 6),
        (Op::Append, 12),
        (Op::Sync, 8),
        (Op::SyncDir, 5),
        (Op::Rename, 3),
    ] {
        for at in 0..n {
            for mode in [CrashMode::LoseUnsyncedData, CrashMode::LoseUnsyncedDirEntries] {
                outcomes[usize::from(power_loss_during_ingest(op, at, mode))] += 1;
            }
        }
    }
    // Both outcomes happen: the sweep reaches before and after the manifest edit.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "outcomes (none, all): {outcomes:?}");
}

/// A writer refused for having no entry removes its file through the file system it
/// was made with, not around it.
#[test]
fn an_empty_external_file_is_removed_through_its_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new(1);
    let path = tmp.path().join("empty.sst");
    let w = ExternalSstWriter::create_with(fs.clone(), &path, SstOptions::default()).unwrap();
    let e = w.finish().unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("at least one entry")),
        "{e}"
    );
    assert!(!path.exists());
    assert_eq!(fs.state().ops(Target::Any, Op::Remove), 1);
}
