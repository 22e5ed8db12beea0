//! A flipped byte in an SSTable data block, in an SSTable's index/footer, in a WAL
//! record followed by more records, or in a manifest record followed by more records,
//! is reported as an error naming the damaged file: never a panic, never silently
//! wrong data.

use std::path::{Path, PathBuf};

use strata::{Db, Error, Options, WriteBatch};

const KEYS: usize = 400;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(60, b'v');
    v
}

fn options() -> Options {
    Options {
        block_size: 512,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

fn files_with(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&pred))
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read file");
    let at = usize::try_from(offset).expect("offset");
    assert!(
        at < bytes.len(),
        "offset {offset} past the end of {} ({} bytes)",
        path.display(),
        bytes.len()
    );
    bytes[at] ^= 0x5a;
    std::fs::write(path, bytes).expect("write file");
}

fn file_name(p: &Path) -> String {
    p.file_name().expect("name").to_string_lossy().into_owned()
}

/// The error must name the damaged file (in its message, and as `file` for corruption).
/// The first error of `scan` (there must be one): a corruption naming `damaged`.
fn assert_scan_fails(mut scan: impl Iterator<Item = strata::Result<(Vec<u8>, Vec<u8>)>>, damaged: &Path, what: &str) {
    let e = scan
        .find_map(|r| r.err())
        .unwrap_or_else(|| panic!("a {what} over the damaged block must yield an error"));
    assert!(e.is_corruption(), "{what}: expected corruption, got {e:?}");
    assert_names_file(&e, damaged, what);
}

fn assert_names_file(e: &Error, damaged: &Path, what: &str) {
    let msg = e.to_string();
    assert!(
        msg.contains(&file_name(damaged)),
        "{what}: error does not name {}: {msg}",
        file_name(damaged)
    );
    if let Error::Corruption { file, .. } = e {
        assert_eq!(
            file.file_name(),
            damaged.file_name(),
            "{what}: corruption names the wrong file"
        );
    }
}

/// A database with one fully compacted SSTable holding `KEYS` keys, closed.
fn one_table_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let ks = db.default_keyspace();
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(50) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(&ks, &key(i), &value(i));
        }
        db.write(b).expect("write");
    }
    db.compact_range().expect("compact");
    drop(ks);
    db.close().expect("close");
    let ssts = files_with(dir.path(), |n| n.ends_with(".sst"));
    assert_eq!(ssts.len(), 1, "expected one table, found {ssts:?}");
    let sst = ssts[0].clone();
    (dir, sst)
}

/// Opens the database and reads everything; returns the first error (open, get or scan).
/// Values read successfully must be the right ones.
fn read_everything(dir: &Path) -> Result<(), Error> {
    let db = Db::open(dir, options())?;
    let mut first_err = None;
    for item in db.scan(..)? {
        match item {
            Ok((k, v)) => {
                let i: usize = std::str::from_utf8(&k[3..]).expect("utf-8").parse().expect("index");
                assert_eq!(
                    v,
                    value(i),
                    "scan returned a wrong value for {}",
                    String::from_utf8_lossy(&k)
                );
            }
            Err(e) => {
                first_err = Some(e);
                break;
            }
        }
    }
    for i in 0..KEYS {
        match db.get(&key(i)) {
            Ok(v) => assert!(
                v.is_none() || v == Some(value(i)),
                "get returned a wrong value for key {i}"
            ),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[test]
fn flipped_byte_in_sstable_data_block_is_reported() {
    let (dir, sst) = one_table_db();
    // Offset 20 lies in the first data block (blocks are written first, 512 bytes each).
    flip(&sst, 20);
    // Opening may notice the damage already; if it does not, reads must.
    match Db::open(dir.path(), options()) {
        Err(e) => assert_names_file(&e, &sst, "open"),
        Ok(db) => {
            let e = db
                .get(&key(0))
                .expect_err("get of a key in the damaged block must fail");
            assert!(e.is_corruption(), "get: expected corruption, got {e:?}");
            assert_names_file(&e, &sst, "get");
            assert_scan_fails(db.scan(..).expect("scan"), &sst, "scan");
            // A reverse scan meets the damage too (last).
            assert_scan_fails(db.scan(..).expect("scan").rev(), &sst, "reverse scan");
            // Keys in undamaged blocks are still readable.
            assert_eq!(
                db.get(&key(KEYS - 1)).expect("get from an intact block"),
                Some(value(KEYS - 1))
            );
        }
    }
}

#[test]
fn flipped_byte_in_sstable_footer_is_reported() {
    let (dir, sst) = one_table_db();
    let len = std::fs::metadata(&sst).expect("stat").len();
    flip(&sst, len - 6); // inside the footer's checksum-covered region
    let e = read_everything(dir.path()).expect_err("a damaged footer must be reported");
    assert_names_file(&e, &sst, "damaged footer");
}

#[test]
fn flipped_byte_in_sstable_index_block_is_reported() {
    let (dir, sst) = one_table_db();
    let len = std::fs::metadata(&sst).expect("stat").len();
    // The index block is written last before the 88-byte footer; this byte is in its
    // payload or trailer.
    flip(&sst, len - 88 - 12);
    let e = read_everything(dir.path()).expect_err("a damaged index block must be reported");
    assert_names_file(&e, &sst, "damaged index block");
}

#[test]
fn every_flipped_byte_of_an_sstable_is_reported() {
    // Sweep bytes across the whole table: every flip makes opening or reading fail with
    // an error naming the file (values read before the error are checked). No panic.
    let (dir, sst) = one_table_db();
    let original = std::fs::read(&sst).expect("read");
    let len = original.len();
    let mut unreported = Vec::new();
    let step = (len / 60).max(1);
    let offsets: Vec<usize> = (0..len).step_by(step).chain(len - 100..len).collect();
    for &at in &offsets {
        std::fs::write(&sst, &original).expect("restore");
        flip(&sst, at as u64);
        match read_everything(dir.path()) {
            Err(e) => assert_names_file(&e, &sst, &format!("flip at {at}")),
            Ok(()) => unreported.push(at),
        }
    }
    // Every byte of a table is covered by a block or footer checksum.
    assert!(
        unreported.is_empty(),
        "flips at {unreported:?} (of {len} bytes) went unnoticed"
    );
}

/// Offsets of the records of a log file (WAL and manifest framing: u32 length, u32 crc,
/// payload).
fn record_offsets(path: &Path) -> Vec<(u64, u64)> {
    let bytes = std::fs::read(path).expect("read log");
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        if at + 8 + len > bytes.len() {
            break;
        }
        out.push((at as u64, len as u64));
        at += 8 + len;
    }
    assert_eq!(at, bytes.len(), "{} does not parse as whole records", path.display());
    out
}

/// A closed database holding keys `0..n`, one put (one WAL record) each, and its one
/// non-empty WAL.
fn closed_db_with_wal(n: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    for i in 0..n {
        db.put(&key(i), &value(i)).expect("put");
    }
    db.close().expect("close");
    let mut wals: Vec<PathBuf> = files_with(dir.path(), |n| n.ends_with(".wal"))
        .into_iter()
        .filter(|p| std::fs::metadata(p).expect("stat").len() > 0)
        .collect();
    assert_eq!(wals.len(), 1, "expected one non-empty WAL: {wals:?}");
    (dir, wals.remove(0))
}

#[test]
fn flipped_byte_in_middle_wal_record_is_reported() {
    let (dir, wal) = closed_db_with_wal(200);
    let wal = &wal;
    let recs = record_offsets(wal);
    assert_eq!(recs.len(), 200, "one record per batch");
    let (off, len) = recs[100];
    flip(wal, off + 8 + len / 2); // in the payload
    for attempt in 0..2 {
        let e =
            Db::open(dir.path(), options()).expect_err("a damaged WAL record followed by more records is corruption");
        assert!(e.is_corruption(), "attempt {attempt}: expected corruption, got {e:?}");
        assert_names_file(&e, wal, "damaged WAL");
        if let Error::Corruption { offset, .. } = &e {
            assert!(
                *offset <= off + 8 + len,
                "attempt {attempt}: offset {offset} is past the damaged record at {off}"
            );
        }
    }
    // The failed opens did not throw the log away.
    assert!(wal.exists(), "the damaged WAL was deleted by a failed open");
}

#[test]
fn flipped_byte_in_wal_record_header_is_reported() {
    let (dir, wal) = closed_db_with_wal(50);
    let recs = record_offsets(&wal);
    flip(&wal, recs[20].0 + 5); // in the checksum field
    let e = Db::open(dir.path(), options()).expect_err("a damaged WAL header is corruption");
    assert_names_file(&e, &wal, "damaged WAL header");
}

#[test]
fn flipped_byte_in_middle_manifest_record_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    // Each keyspace creation and each flush logs one manifest record.
    for name in ["a", "b", "c", "d"] {
        let ks = db.create_keyspace(name).expect("create keyspace");
        ks.put(b"k", name.as_bytes()).expect("put");
        db.flush().expect("flush");
    }
    db.close().expect("close");
    let current = std::fs::read_to_string(dir.path().join("CURRENT")).expect("CURRENT");
    let manifest = dir.path().join(current.trim());
    let recs = record_offsets(&manifest);
    assert!(recs.len() >= 5, "manifest has only {} records", recs.len());
    let (off, len) = recs[recs.len() / 2];
    flip(&manifest, off + 8 + len / 2);
    let e =
        Db::open(dir.path(), options()).expect_err("a damaged manifest record followed by more records is corruption");
    assert!(e.is_corruption(), "expected corruption, got {e:?}");
    assert_names_file(&e, &manifest, "damaged manifest");
    assert!(manifest.exists(), "the damaged manifest was deleted by a failed open");
}

#[test]
fn missing_sstable_is_reported_with_its_name() {
    let (dir, sst) = one_table_db();
    std::fs::remove_file(&sst).expect("remove");
    let e = read_everything(dir.path()).expect_err("a missing table must be reported");
    assert_names_file(&e, &sst, "missing table");
}

/// A WAL record whose checksum is right but whose batch does not decode (an unknown
/// operation) fails recovery naming the log and offset (`WriteBatch::decode_record`
/// checks every operation), instead of its operations being skipped.
#[test]
fn wal_record_with_an_undecodable_batch_is_reported() {
    use strata::fs::{FileSystem, RealFs};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    db.put(b"a", b"1").expect("put");
    db.close().expect("close");
    let newest = files_with(dir.path(), |n| n.ends_with(".wal"))
        .iter()
        .filter_map(|p| file_name(p).trim_end_matches(".wal").parse::<u64>().ok())
        .max()
        .expect("a WAL");
    let bad = dir.path().join(strata::wal::log_file_name(newest + 1));
    let mut payload = Vec::new();
    strata::codec::put_u64(&mut payload, 1_000); // base seqno, past everything written
    strata::codec::put_u32(&mut payload, 1); // one operation
    payload.extend_from_slice(&[0x7f, 0x00, 0x01, b'k']); // tag 0x7f does not exist
    let mut w = strata::wal::Writer::new(RealFs.create(&bad).expect("create"));
    w.add_record(&payload).expect("append");
    w.sync().expect("sync");
    drop(w);
    let e = Db::open(dir.path(), options()).expect_err("an undecodable batch is corruption");
    assert!(e.is_corruption(), "expected corruption, got {e:?}");
    assert_names_file(&e, &bad, "undecodable batch");
    assert!(e.to_string().contains("unknown batch operation tag"), "{e}");
}
