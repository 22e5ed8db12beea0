//! The write-ahead log: append-only files of checksummed records, one write batch per
//! record, named `<number:06>.wal` (see [`log_file_name`]).
//!
//! The same framing is used by the manifest (`version::manifest`), so this module owns
//! the one record format of Strata's logs:
//!
//! ```text
//! record := [u32 LE payload length N][u32 LE masked crc32c(length bytes ++ payload)][N bytes]
//! log    := record*   (no padding, no blocks, N <= MAX_PAYLOAD_LEN = 1 GiB)
//! ```
//!
//! Why not LevelDB's 32 KiB blocks with fragments: blocks let a reader resynchronise
//! after damage and skip ahead, but Strata never skips damage in the middle of a log (it
//! is reported as corruption), so fragments would only add complexity and split large
//! batches. Plain framing reads with one positional read per chunk.
//!
//! Invariants:
//! - A log is a sequence of complete records, possibly followed by zeros the writer
//!   wrote ahead of its end (a WAL synced on every commit, [`Writer::sync_commit`]),
//!   or by one *torn tail* left by a crash (the last append cut short, or with pages
//!   of it lost).
//!   [`Reader`] takes zeros as the end; at a torn tail it stops and
//!   reports [`Reader::torn_tail_at`]; damage followed by a valid record is
//!   `Corruption` naming the file and the record's offset. See
//!   [`Reader`] for the exact rules and `docs/design/recovery.md` for how recovery
//!   uses them (recovery modes, the synced point a clean close records).
//! - A log with a torn tail is never appended to again (new records would follow
//!   garbage, turning the tail into mid-log corruption); recovery starts a new file.
//! - A [`Writer`] that hit an I/O error refuses further records for the same reason.

mod reader;
mod record;
mod writer;

pub use reader::Reader;
pub use record::{HEADER_LEN, MAX_PAYLOAD_LEN};
pub use writer::Writer;

/// The file name of WAL number `number`, e.g. `000007.wal`.
pub fn log_file_name(number: u64) -> String {
    format!("{number:06}.wal")
}

/// The number of a WAL file name produced by [`log_file_name`], or `None` for any other
/// name.
pub fn parse_log_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.parse::<u64>().ok()?;
    (log_file_name(n) == name).then_some(n)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::error::{Error, Result};
    use crate::fs::{FileSystem, RandomAccessFile, RealFs, WritableFile};

    /// An in-memory file that remembers its largest single read.
    struct MemFile {
        path: PathBuf,
        data: Vec<u8>,
        max_read: std::sync::atomic::AtomicUsize,
    }

    impl MemFile {
        fn new(data: Vec<u8>) -> Arc<MemFile> {
            Arc::new(MemFile {
                path: PathBuf::from("mem.wal"),
                data,
                max_read: Default::default(),
            })
        }
    }

    impl RandomAccessFile for MemFile {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            self.max_read.fetch_max(len, std::sync::atomic::Ordering::Relaxed);
            let start = offset as usize;
            match self.data.get(start..start + len) {
                Some(s) => Ok(s.to_vec()),
                None => Err(Error::corruption(&self.path, offset, "read past end")),
            }
        }
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
        fn path(&self) -> &Path {
            &self.path
        }
    }

    /// Keeps appended bytes in memory, failing the `fail_at`-th append (0-based).
    struct LogFile {
        data: Arc<parking_lot::Mutex<Vec<u8>>>,
        appends: usize,
        fail_at: usize,
    }

    impl LogFile {
        fn failing_at(fail_at: usize) -> Box<LogFile> {
            Box::new(LogFile {
                data: Arc::default(),
                appends: 0,
                fail_at,
            })
        }
    }

    impl WritableFile for LogFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.appends += 1;
            if self.appends - 1 == self.fail_at {
                return Err(Error::io("flaky.wal", std::io::Error::other("injected")));
            }
            self.data.lock().extend_from_slice(data);
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            self.data.lock().len() as u64
        }
    }

    /// Frames `payloads` in memory; returns the bytes and each record's offset.
    fn frame(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
        let file = LogFile::failing_at(usize::MAX);
        let shared = file.data.clone();
        let mut w = Writer::new(file);
        let offsets = payloads
            .iter()
            .map(|p| w.add_record(p).expect("in-memory append"))
            .collect();
        let bytes = shared.lock().clone();
        (bytes, offsets)
    }

    fn random_payloads(seed: u64, n: usize, max: usize) -> Vec<Vec<u8>> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let mut p = vec![0u8; rng.gen_range(0..max)];
                rng.fill(&mut p[..]);
                p
            })
            .collect()
    }

    type Records = Vec<(u64, Vec<u8>)>;

    /// Reads every record until the end or an error.
    fn read_all(r: &mut Reader) -> (Records, Option<Error>) {
        let mut out = Vec::new();
        loop {
            match r.next_record() {
                Ok(Some(rec)) => out.push(rec),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    fn read_mem(bytes: Vec<u8>, chunk: usize) -> (Records, Option<Error>, Option<u64>) {
        let mut r = reader::reader_with_chunk(MemFile::new(bytes), chunk);
        let (recs, err) = read_all(&mut r);
        (recs, err, r.torn_tail_at())
    }

    fn write_file(fs: &RealFs, path: &Path, bytes: &[u8]) {
        let mut f = fs.create(path).expect("create");
        f.append(bytes).expect("append");
        f.sync().expect("sync");
    }

    fn assert_corruption_at(err: Option<Error>, file: &Path, at: u64) {
        match err {
            Some(Error::Corruption { file: f, offset, .. }) => {
                assert_eq!(f, file);
                assert_eq!(offset, at);
            }
            other => panic!("expected corruption at {at}, got {other:?}"),
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(log_file_name(7), "000007.wal");
        assert_eq!(log_file_name(12_345_678), "12345678.wal");
        assert_eq!(parse_log_file_name("000007.wal"), Some(7));
        assert_eq!(parse_log_file_name("12345678.wal"), Some(12_345_678));
        for bad in ["7.wal", "00007.wal", "000007.sst", "+00007.wal", "0000007.wal", ".wal"] {
            assert_eq!(parse_log_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn roundtrip_random_sizes_real_fs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = RealFs;
        let path = dir.path().join(log_file_name(1));
        let payloads = random_payloads(1, 80, 100 * 1024);
        let mut w = Writer::new(fs.create(&path).expect("create"));
        let mut offsets = Vec::new();
        for p in &payloads {
            offsets.push(w.add_record(p).expect("add"));
        }
        w.sync().expect("sync");
        let total = w.len();
        drop(w);
        assert!(total > 2 << 20, "records must span several 1 MiB chunks");

        let mut r = Reader::open(&fs, &path).expect("open");
        let (recs, err) = read_all(&mut r);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(r.torn_tail_at(), None);
        assert_eq!(r.valid_len(), total);
        let want: Records = offsets.into_iter().zip(payloads).collect();
        assert_eq!(recs, want);
        // Fused: nothing more after the end.
        assert!(matches!(r.next_record(), Ok(None)));
    }

    #[test]
    fn roundtrip_with_tiny_chunks() {
        // Records larger and smaller than the chunk, so every boundary case is hit.
        let payloads = random_payloads(2, 200, 300);
        let (bytes, offsets) = frame(&payloads);
        for chunk in [1, 7, 8, 9, 64, 257, 4096] {
            let (recs, err, torn) = read_mem(bytes.clone(), chunk);
            assert!(err.is_none() && torn.is_none(), "chunk {chunk}: {err:?} {torn:?}");
            let want: Records = offsets.iter().copied().zip(payloads.clone()).collect();
            assert_eq!(recs, want, "chunk {chunk}");
        }
    }

    #[test]
    fn reads_in_bounded_chunks() {
        let payloads = random_payloads(3, 5000, 2000);
        let (bytes, _) = frame(&payloads);
        assert!(bytes.len() > 4 << 20);
        let file = MemFile::new(bytes);
        let mut r = Reader::new(file.clone());
        let (recs, err) = read_all(&mut r);
        assert!(err.is_none());
        assert_eq!(recs.len(), payloads.len());
        let max = file.max_read.load(std::sync::atomic::Ordering::Relaxed);
        assert!(max <= 1 << 20, "largest read {max} bytes");
        assert!(r.buffer_capacity() <= 2 << 20, "buffer grew to {}", r.buffer_capacity());
    }

    #[test]
    fn empty_file_has_no_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("000001.wal");
        write_file(&RealFs, &path, b"");
        let mut r = Reader::open(&RealFs, &path).expect("open");
        assert!(matches!(r.next_record(), Ok(None)));
        assert_eq!(r.torn_tail_at(), None);
    }

    #[test]
    fn empty_payloads_roundtrip() {
        let payloads = vec![vec![], b"x".to_vec(), vec![]];
        let (bytes, offsets) = frame(&payloads);
        assert_eq!(offsets, vec![0, 8, 17]);
        let (recs, err, torn) = read_mem(bytes, 4096);
        assert!(err.is_none() && torn.is_none());
        assert_eq!(recs.into_iter().map(|r| r.1).collect::<Vec<_>>(), payloads);
    }

    #[test]
    fn truncation_inside_last_record_is_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = RealFs;
        let mut payloads = random_payloads(4, 20, 50 * 1024);
        payloads.push(vec![0xab; 300]);
        let (bytes, offsets) = frame(&payloads);
        let last = *offsets.last().expect("non-empty");
        let path = dir.path().join("000002.wal");
        for cut in last..bytes.len() as u64 {
            write_file(&fs, &path, &bytes[..cut as usize]);
            let mut r = Reader::open(&fs, &path).expect("open");
            let (recs, err) = read_all(&mut r);
            assert!(err.is_none(), "cut {cut}: {err:?}");
            assert_eq!(recs.len(), payloads.len() - 1, "cut {cut}");
            for (i, (off, p)) in recs.iter().enumerate() {
                assert_eq!((*off, p), (offsets[i], &payloads[i]), "cut {cut}");
            }
            let want_torn = (cut > last).then_some(last);
            assert_eq!(r.torn_tail_at(), want_torn, "cut {cut}");
            assert_eq!(r.valid_len(), last);
        }
    }

    #[test]
    fn flipped_byte_in_middle_record_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = RealFs;
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 1000]).collect();
        let (bytes, offsets) = frame(&payloads);
        let path = dir.path().join("000003.wal");
        let mid = offsets[2];
        // Payload byte, checksum byte, low length byte (claimed end stays inside the
        // file), high length byte (length over the limit).
        for at in [mid + 8 + 500, mid + 5, mid, mid + 3] {
            let mut bad = bytes.clone();
            bad[at as usize] ^= 0x41;
            write_file(&fs, &path, &bad);
            let mut r = Reader::open(&fs, &path).expect("open");
            let (recs, err) = read_all(&mut r);
            assert_eq!(recs.len(), 2, "flip at {at}");
            assert_corruption_at(err, &path, mid);
            assert!(matches!(r.next_record(), Ok(None)), "fused after error");
        }
    }

    #[test]
    fn any_bit_flip_in_a_middle_length_is_corruption() {
        // Issue 20: a flip that makes a middle record claim to run past the end of the
        // file (or into the zeros written ahead of it) read as a torn tail and dropped
        // every later record. Each of the 32 length bits, with and without zeros after
        // the last record.
        let payloads: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 300]).collect();
        let (bytes, offsets) = frame(&payloads);
        for zeros in [0usize, 1 << 16] {
            for rec in [0usize, 10, 48] {
                let at = offsets[rec] as usize;
                for bit in 0..32 {
                    let mut bad = bytes.clone();
                    bad[at + bit / 8] ^= 1 << (bit % 8);
                    bad.resize(bad.len() + zeros, 0);
                    let (recs, err, torn) = read_mem(bad, 4096);
                    assert_eq!(recs.len(), rec, "record {rec} bit {bit} zeros {zeros}");
                    assert_eq!(torn, None, "record {rec} bit {bit} zeros {zeros}");
                    assert_corruption_at(err, Path::new("mem.wal"), offsets[rec]);
                }
            }
        }
    }

    #[test]
    fn resume_after_damage_finds_the_next_record() {
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
        let (mut bytes, offsets) = frame(&payloads);
        bytes[offsets[1] as usize + 2] ^= 0x10;
        let mut r = reader::reader_with_chunk(MemFile::new(bytes), 64);
        let (recs, err) = read_all(&mut r);
        assert_eq!(recs.len(), 1);
        assert_corruption_at(err, Path::new("mem.wal"), offsets[1]);
        assert_eq!(r.resume_after_damage(offsets[1] + 1).expect("scan"), Some(offsets[2]));
        let (rest, err) = read_all(&mut r);
        assert!(err.is_none(), "{err:?}");
        let got: Vec<Vec<u8>> = rest.into_iter().map(|(_, p)| p).collect();
        assert_eq!(got, payloads[2..].to_vec());
    }

    #[test]
    fn flipped_byte_in_last_record_is_torn() {
        // The choice documented on `Reader`: damage in the final record is
        // indistinguishable from a torn write, so the record is dropped, not reported.
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 1000]).collect();
        let (bytes, offsets) = frame(&payloads);
        let last = offsets[4];
        for at in [last + 8, last + 8 + 999, last + 4, last] {
            let mut bad = bytes.clone();
            bad[at as usize] ^= 0x01;
            let (recs, err, torn) = read_mem(bad, 4096);
            assert!(err.is_none(), "flip at {at}: {err:?}");
            assert_eq!(recs.len(), 4);
            assert_eq!(torn, Some(last));
        }
    }

    #[test]
    fn zeros_after_the_last_record_are_its_clean_end_and_a_zeroed_record_is_torn() {
        let payloads: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i + 1; 100]).collect();
        let (bytes, offsets) = frame(&payloads);
        for zeros in [1usize, 7, 8, 9, 4096, 100_000] {
            let mut b = bytes.clone();
            b.resize(b.len() + zeros, 0);
            let (recs, err, torn) = read_mem(b, 1024);
            assert!(err.is_none(), "{zeros} zeros: {err:?}");
            assert_eq!(recs.len(), 3);
            assert_eq!(torn, None, "{zeros} zeros");
        }
        // A last record whose payload was never written (zeros), followed by more
        // preallocated zeros.
        let mut b = bytes.clone();
        let last = offsets[2] as usize;
        b[last + 8 + 50..].fill(0);
        b.resize(b.len() + 4096, 0);
        let (recs, err, torn) = read_mem(b, 1024);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(recs.len(), 2);
        assert_eq!(torn, Some(offsets[2]));
    }

    /// A crash need not persist the pages of its last append in order: over the zeros
    /// written ahead, a lost earlier page reads as zeros while a later one holds data.
    /// With no whole record after it, such a record is a torn tail, whatever follows.
    #[test]
    fn a_last_append_with_a_lost_earlier_page_is_a_torn_tail() {
        const PAGE: usize = 4096;
        // Two records written and synced, then an append of two 5,000-byte records:
        // the first at 6,016 (pages 1 and 2), the second at 11,024 (pages 2 and 3).
        let payloads: Vec<Vec<u8>> = [vec![1u8; 3000], vec![2; 3000], vec![3; 5000], vec![4; 5000]].into();
        let (bytes, offsets) = frame(&payloads);
        assert_eq!(&offsets[2..], &[6016, 11024]);
        let mut zeroed = bytes.clone();
        zeroed.resize(zeroed.len() + 3 * PAGE, 0);
        let lose = |page: usize, from: usize| {
            let mut b = zeroed.clone();
            b[(page * PAGE).max(from)..(page + 1) * PAGE].fill(0);
            b
        };
        // (lost page, whole records left): page 2 holds the first record's end and
        // the second's header, page 3 the second's end.
        for (page, whole) in [(2, 2), (3, 3)] {
            let (recs, err, torn) = read_mem(lose(page, 0), 1024);
            assert!(err.is_none(), "page {page}: {err:?}");
            let got: Vec<Vec<u8>> = recs.into_iter().map(|(_, p)| p).collect();
            assert_eq!(got, payloads[..whole].to_vec(), "page {page}");
            assert_eq!(torn, Some(offsets[whole]), "page {page}");
        }
        // The append's first page lost and its others kept: the first record's header
        // reads as zeros, and the second record's header (page 2) is lost too, so no
        // whole record follows.
        let mut b = lose(1, offsets[2] as usize);
        b[offsets[3] as usize..offsets[3] as usize + 8].fill(0);
        let (recs, err, torn) = read_mem(b, 1024);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(recs.len(), 2);
        assert_eq!(torn, Some(offsets[2]));
        // A damaged last record followed by bytes that make no record.
        let mut b = bytes.clone();
        b[offsets[3] as usize + 20] ^= 0xff;
        b.extend_from_slice(&[0, 0, 0, 1]);
        let (recs, err, torn) = read_mem(b, 4096);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(recs.len(), 3);
        assert_eq!(torn, Some(offsets[3]));
    }

    /// A zeroed header with a whole record after it is damage, not a torn tail: in the
    /// middle of a log it is, and in a torn append of several records the reader
    /// cannot tell it apart (`docs/design/recovery.md`).
    #[test]
    fn a_zeroed_header_before_a_whole_record_is_corruption() {
        let payloads: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; 100]).collect();
        let (mut bytes, offsets) = frame(&payloads);
        bytes[offsets[1] as usize..offsets[1] as usize + 8].fill(0);
        let (recs, err, _) = read_mem(bytes, 4096);
        assert_eq!(recs.len(), 1);
        assert_corruption_at(err, Path::new("mem.wal"), offsets[1]);
    }

    #[test]
    fn oversized_length_is_corruption_even_at_tail() {
        let (mut bytes, offsets) = frame(&[b"a".to_vec(), b"b".to_vec()]);
        let at = offsets[1] as usize;
        bytes[at..at + 4].copy_from_slice(&((MAX_PAYLOAD_LEN as u32) + 1).to_le_bytes());
        let (recs, err, _) = read_mem(bytes, 4096);
        assert_eq!(recs.len(), 1);
        assert_corruption_at(err, Path::new("mem.wal"), offsets[1]);
    }

    #[test]
    fn writer_poisons_after_failed_append() {
        // Fail the payload append of the second record: the header may be on disk.
        let mut w = Writer::new(LogFile::failing_at(3));
        assert_eq!(w.add_record(b"one").expect("first"), 0);
        assert!(w.add_record(b"two").is_err());
        assert!(w.is_failed());
        assert!(w.add_record(b"three").is_err(), "must refuse after a failure");
        assert!(w.sync().is_err());
        assert!(w.flush().is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn reader_on_arbitrary_bytes_terminates(
            bytes in proptest::collection::vec(any::<u8>(), 0..2048),
            chunk in 1usize..64,
        ) {
            let limit = bytes.len() / HEADER_LEN + 2;
            let mut r = reader::reader_with_chunk(MemFile::new(bytes), chunk);
            let mut calls = 0;
            while let Ok(Some(_)) = r.next_record() {
                calls += 1;
                prop_assert!(calls <= limit, "reader did not terminate");
            }
            prop_assert!(matches!(r.next_record(), Ok(None)));
        }

        #[test]
        fn any_prefix_of_a_log_reads_cleanly(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20),
            cut_frac in 0.0f64..=1.0,
            zeros in 0usize..64,
        ) {
            let (bytes, offsets) = frame(&payloads);
            let cut = (bytes.len() as f64 * cut_frac) as usize;
            let mut b = bytes[..cut].to_vec();
            b.resize(cut + zeros, 0);
            let (recs, err, torn) = read_mem(b.clone(), 37);
            prop_assert!(err.is_none(), "{:?}", err);
            // Records wholly before the cut must come back. One more may too, if the
            // zeros happen to restore its cut-off bytes exactly.
            let n = offsets.iter().zip(&payloads)
                .take_while(|(o, p)| **o as usize + HEADER_LEN + p.len() <= cut)
                .count();
            prop_assert!(recs.len() == n || recs.len() == n + 1, "{} records, {} whole", recs.len(), n);
            for (i, (off, p)) in recs.iter().enumerate() {
                prop_assert_eq!(*off, offsets[i]);
                prop_assert_eq!(p, &payloads[i]);
            }
            let clean_end = offsets.get(recs.len()).copied().unwrap_or(bytes.len() as u64);
            // Only zeros after the last record read back are its clean end.
            let expect_torn = b[clean_end as usize..].iter().any(|&x| x != 0);
            prop_assert_eq!(torn, expect_torn.then_some(clean_end));
        }
    }
}
