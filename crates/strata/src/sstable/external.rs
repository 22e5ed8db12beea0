//! External SSTables: files written outside any database from sorted key/value pairs,
//! for [`Db::ingest`](crate::Db::ingest) to install (bulk loads built elsewhere, such as
//! on a cluster).
//!
//! An external file is an ordinary table of the current format version with three
//! restrictions, which [`inspect`] checks before an ingest accepts a file:
//! every entry has seqno 0 (the database reads the whole file with one global seqno it
//! assigns at ingest), each user key appears once (strictly increasing keys), and only
//! puts and point deletes appear (no range or deferred deletes).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builder::{SstOptions, SstWriter};
use super::format::{FOOTER_LEN, FORMAT_VERSION, TABLE_MAGIC};
use super::reader::SstReader;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RealFs, WritableFile};
use crate::iter::InternalIterator;
use crate::key::{ValueKind, encode_internal_key, parse_internal_key};
use crate::options::{MAX_KEY_SIZE, MAX_VALUE_SIZE};

/// What an external file holds, as recorded by [`ExternalSstWriter::finish`] and
/// re-derived from the file by [`inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalFileInfo {
    /// Where the file is.
    pub path: PathBuf,
    /// Table format version (see `docs/design/file-formats.md`).
    pub format_version: u32,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
    /// Entries (puts and deletes).
    pub entries: u64,
    /// Point deletes among them.
    pub deletes: u64,
    /// Sum of the user keys' and values' lengths.
    pub raw_bytes: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// [`FileDigest`] of the whole file (each block also carries its own checksum).
    pub digest: u64,
}

/// A 64-bit digest of a file's bytes (a multiply-rotate hash over 8-byte words), to
/// tell one build's files from another's. Not a CRC: every block and the footer of a
/// table end in their own CRC-32C, and a CRC over data followed by its CRC is a
/// constant, so a CRC over a whole table depends only on its block lengths.
#[derive(Debug, Clone, Default)]
pub struct FileDigest {
    h: u64,
    pending: [u8; 8],
    pending_len: usize,
    total: u64,
}

impl FileDigest {
    const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

    #[inline]
    fn word(&mut self, w: u64) {
        self.h = (self.h ^ w).wrapping_mul(Self::MUL).rotate_left(29);
    }

    /// Adds bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.pending_len > 0 {
            let n = (8 - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + n].copy_from_slice(&data[..n]);
            self.pending_len += n;
            data = &data[n..];
            if self.pending_len < 8 {
                return;
            }
            self.word(u64::from_le_bytes(self.pending));
            self.pending_len = 0;
        }
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.word(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// The digest of everything added.
    pub fn finish(mut self) -> u64 {
        if self.pending_len > 0 {
            let mut b = [0u8; 8];
            b[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
            self.word(u64::from_le_bytes(b));
        }
        let total = self.total;
        self.word(total);
        self.h
    }
}

/// Counts a file's bytes and checksum as they are appended.
struct Summing {
    inner: Box<dyn WritableFile>,
    digest: FileDigest,
}

impl WritableFile for Summing {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)?;
        self.digest.update(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

/// Shares the running checksum with the writer after the table builder owns the file.
struct SharedSumming(Arc<parking_lot::Mutex<Summing>>);

impl WritableFile for SharedSumming {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.0.lock().append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.0.lock().flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.0.lock().sync()
    }
    fn len(&self) -> u64 {
        self.0.lock().len()
    }
}

/// Writes one external SSTable from key/value pairs in strictly increasing key order.
///
/// Keys out of order or repeated are refused with [`Error::InvalidArgument`] and the
/// file is left as it was; so are empty, oversized keys and oversized values.
/// The file is complete (and synced) only once [`finish`](Self::finish) returns; an
/// unfinished file has no footer and no ingest accepts it.
///
/// ```
/// use strata::sstable::ExternalSstWriter;
/// use strata::{Db, IngestOptions, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("load.sst");
/// let mut w = ExternalSstWriter::create(&path).unwrap();
/// w.put(b"apple", b"1").unwrap();
/// w.put(b"pear", b"2").unwrap();
/// assert!(w.put(b"banana", b"3").is_err()); // out of order: refused
/// let info = w.finish().unwrap();
/// assert_eq!(info.entries, 2);
///
/// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
/// db.ingest(&db.default_keyspace(), &[&path], IngestOptions::default()).unwrap();
/// assert_eq!(db.get(b"pear").unwrap().as_deref(), Some(&b"2"[..]));
/// ```
pub struct ExternalSstWriter {
    builder: SstWriter,
    sums: Arc<parking_lot::Mutex<Summing>>,
    path: PathBuf,
    last: Vec<u8>,
    smallest: Vec<u8>,
    entries: u64,
    deletes: u64,
    raw_bytes: u64,
    ikey: Vec<u8>,
}

impl std::fmt::Debug for ExternalSstWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalSstWriter")
            .field("path", &self.path)
            .field("entries", &self.entries)
            .finish()
    }
}

impl ExternalSstWriter {
    /// Creates the file at `path` (which must not exist yet) on the real file system,
    /// with default table options.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_with(&RealFs, path, SstOptions::default())
    }

    /// Creates the file at `path` (which must not exist yet) through `fs`, with `opts`.
    pub fn create_with(fs: &dyn FileSystem, path: impl AsRef<Path>, opts: SstOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if fs.exists(&path) {
            return Err(Error::AlreadyExists(format!("{}", path.display())));
        }
        let sums = Arc::new(parking_lot::Mutex::new(Summing {
            inner: fs.create(&path)?,
            digest: FileDigest::default(),
        }));
        let builder = SstWriter::new(Box::new(SharedSumming(sums.clone())), path.clone(), opts);
        Ok(ExternalSstWriter {
            builder,
            sums,
            path,
            last: Vec::new(),
            smallest: Vec::new(),
            entries: 0,
            deletes: 0,
            raw_bytes: 0,
            ikey: Vec::new(),
        })
    }

    /// Adds `key` = `value`; `key` must be greater than every key added before.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if value.len() > MAX_VALUE_SIZE {
            return Err(Error::InvalidArgument(format!(
                "{}: value of {} bytes for key {} exceeds the limit of {MAX_VALUE_SIZE}",
                self.path.display(),
                value.len(),
                super::dump::escape(&key[..key.len().min(32)])
            )));
        }
        self.add(key, ValueKind::Put, value)
    }

    /// Adds a point delete of `key` (removing older data of the key once ingested); `key`
    /// must be greater than every key added before.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.add(key, ValueKind::Delete, b"")
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        if key.is_empty() || key.len() > MAX_KEY_SIZE {
            return Err(Error::InvalidArgument(format!(
                "{}: keys must be 1 to {MAX_KEY_SIZE} bytes (got {})",
                self.path.display(),
                key.len()
            )));
        }
        if self.entries > 0 && key <= self.last.as_slice() {
            let what = if key == self.last.as_slice() {
                "repeats the previous key"
            } else {
                "sorts before the previous key"
            };
            return Err(Error::InvalidArgument(format!(
                "{}: entry {} (key {}) {what} {}: external SST input must be sorted by key, without duplicates",
                self.path.display(),
                self.entries,
                super::dump::escape(key),
                super::dump::escape(&self.last)
            )));
        }
        self.ikey.clear();
        encode_internal_key(&mut self.ikey, key, 0, kind);
        self.builder.add(&self.ikey, value)?;
        if self.entries == 0 {
            self.smallest = key.to_vec();
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        self.entries += 1;
        self.deletes += u64::from(kind == ValueKind::Delete);
        self.raw_bytes += (key.len() + value.len()) as u64;
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes the file will take, roughly (what is written plus the block being filled).
    pub fn estimated_size(&self) -> u64 {
        self.builder.estimated_size()
    }

    /// Writes the index, filter, properties and footer, syncs, and describes the file.
    /// A file without entries is refused (and removed).
    pub fn finish(self) -> Result<ExternalFileInfo> {
        if self.entries == 0 {
            drop(self.builder);
            let _ = std::fs::remove_file(&self.path);
            return Err(Error::InvalidArgument(format!(
                "{}: an external SST needs at least one entry",
                self.path.display()
            )));
        }
        let (size, _props) = self.builder.finish()?;
        let digest = self.sums.lock().digest.clone().finish();
        Ok(ExternalFileInfo {
            path: self.path,
            format_version: FORMAT_VERSION,
            smallest: self.smallest,
            largest: self.last,
            entries: self.entries,
            deletes: self.deletes,
            raw_bytes: self.raw_bytes,
            file_size: size,
            digest,
        })
    }
}

/// Reads an external file whole and checks that an ingest may take it: the current
/// format version, every block's checksum, seqno 0 throughout, strictly increasing user
/// keys, only puts and deletes, no range tombstones, and counts that agree with the
/// properties block. Returns what it holds, with the file's [`FileDigest`]. A bad file is an error naming the file (and, for damage, the
/// offset); the file is never changed.
pub fn inspect(fs: &dyn FileSystem, path: &Path) -> Result<ExternalFileInfo> {
    inspect_file(fs.open(path)?, path, None)
}

/// [`inspect`] of an open file, naming it `path` in errors and in the result (an ingest
/// checks its copy under the source's name), with its digest if already known (the
/// copy computed it).
pub fn inspect_file(
    file: Arc<dyn crate::fs::RandomAccessFile>,
    path: &Path,
    digest: Option<u64>,
) -> Result<ExternalFileInfo> {
    let renamed = |e: Error| match e {
        Error::Corruption { offset, reason, .. } => Error::Corruption {
            file: path.to_path_buf(),
            offset,
            reason,
        },
        e => e,
    };
    inspect_named(file, path, digest).map_err(renamed)
}

fn inspect_named(
    file: Arc<dyn crate::fs::RandomAccessFile>,
    path: &Path,
    digest: Option<u64>,
) -> Result<ExternalFileInfo> {
    let file_size = file.size();
    let bad = |reason: String| Error::InvalidArgument(format!("{}: {reason}", path.display()));
    // The version first, from the raw footer (magic at 64, version at 72): a table of
    // another version is refused as such, whether or not this build could read it.
    if let Some(at) = file_size.checked_sub(FOOTER_LEN as u64) {
        let footer = file.read_at(at, FOOTER_LEN)?;
        if let (Some(magic), Some(version)) = (footer.get(64..72), footer.get(72..76))
            && magic == TABLE_MAGIC.to_le_bytes()
        {
            let version = u32::from_le_bytes(version.try_into().unwrap_or([0; 4]));
            if version != FORMAT_VERSION {
                return Err(bad(format!(
                    "table format version {version}; ingest takes version {FORMAT_VERSION} only"
                )));
            }
        }
    }
    let reader = Arc::new(SstReader::open(file.clone(), 0, None)?);
    let version = reader.footer().version;
    let props = reader.properties();
    if !reader.range_tombstones().is_empty() || props.range_deletes > 0 || props.deferred_deletes > 0 {
        return Err(bad(
            "holds range or deferred deletes, which external files cannot".into()
        ));
    }
    if props.max_seq != 0 {
        return Err(bad(format!(
            "entries carry seqnos up to {} (an engine's file, not an external one: those have seqno 0)",
            props.max_seq
        )));
    }
    let (mut entries, mut deletes, mut raw_bytes) = (0u64, 0u64, 0u64);
    let mut smallest = Vec::new();
    let mut last: Vec<u8> = Vec::new();
    // Block by block (the table iterator's positioning logic is not needed here).
    let handles: Vec<_> = reader.fences().map(|(_, h)| h).collect();
    for handle in handles {
        let mut it = reader.block_iter(handle)?;
        it.seek_to_first()?;
        while it.valid() {
            let Some(p) = parse_internal_key(it.key()) else {
                return Err(bad(format!("entry {entries} has a malformed key")));
            };
            if p.seq != 0 {
                return Err(bad(format!(
                    "entry {entries} has seqno {} (external files use 0)",
                    p.seq
                )));
            }
            match p.kind {
                ValueKind::Put => {}
                ValueKind::Delete => deletes += 1,
                ValueKind::DeferredDelete => return Err(bad(format!("entry {entries} is a deferred delete"))),
            }
            if entries == 0 {
                smallest = p.user_key.to_vec();
            } else if p.user_key <= last.as_slice() {
                return Err(bad(format!(
                    "entry {entries} (key {}) does not sort after the previous key: keys must be unique and sorted",
                    super::dump::escape(p.user_key)
                )));
            }
            last.clear();
            last.extend_from_slice(p.user_key);
            raw_bytes += (p.user_key.len() + it.value().len()) as u64;
            entries += 1;
            it.next()?;
        }
    }
    if entries == 0 {
        return Err(bad("holds no entries".into()));
    }
    if entries != props.entries || smallest != props.smallest_user_key || last != props.largest_user_key {
        return Err(bad("entries disagree with the properties block".into()));
    }
    let digest = match digest {
        Some(d) => d,
        None => file_digest(file.as_ref())?,
    };
    Ok(ExternalFileInfo {
        path: path.to_path_buf(),
        format_version: version,
        smallest,
        largest: last,
        entries,
        deletes,
        raw_bytes,
        file_size,
        digest,
    })
}

/// The [`FileDigest`] of a whole file, read in 1 MiB pieces.
fn file_digest(file: &dyn crate::fs::RandomAccessFile) -> Result<u64> {
    const PIECE: u64 = 1 << 20;
    let size = file.size();
    let mut d = FileDigest::default();
    let mut at = 0u64;
    while at < size {
        let n = PIECE.min(size - at);
        d.update(&file.read_at(at, n as usize)?);
        at += n;
    }
    Ok(d.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_refuses_unsorted_and_duplicate_keys_and_keeps_going() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sst");
        let mut w = ExternalSstWriter::create(&path).unwrap();
        w.put(b"b", b"1").unwrap();
        let e = w.put(b"a", b"2").unwrap_err().to_string();
        assert!(e.contains("sorts before the previous key"), "{e}");
        let e = w.put(b"b", b"3").unwrap_err().to_string();
        assert!(e.contains("repeats the previous key"), "{e}");
        assert!(w.put(b"", b"3").is_err());
        w.delete(b"c").unwrap();
        w.put(b"d", b"4").unwrap();
        let info = w.finish().unwrap();
        assert_eq!((info.entries, info.deletes), (3, 1));
        assert_eq!(
            (info.smallest.as_slice(), info.largest.as_slice()),
            (&b"b"[..], &b"d"[..])
        );
        let again = inspect(&RealFs, &path).unwrap();
        assert_eq!(again, info);
        let mut d = FileDigest::default();
        d.update(&std::fs::read(&path).unwrap());
        assert_eq!(info.digest, d.finish());
    }

    #[test]
    fn digests_tell_tables_of_equal_shape_apart() {
        let dir = tempfile::tempdir().unwrap();
        let mut digests = Vec::new();
        for f in 0..2u8 {
            let path = dir.path().join(format!("{f}.sst"));
            let mut w = ExternalSstWriter::create(&path).unwrap();
            for i in 0..3000u32 {
                w.put(format!("key{i:06}").as_bytes(), &[f; 30]).unwrap();
            }
            let info = w.finish().unwrap();
            assert_eq!(info.digest, inspect(&RealFs, &path).unwrap().digest);
            digests.push((info.file_size, info.digest));
        }
        assert_eq!(digests[0].0, digests[1].0, "same sizes");
        assert_ne!(digests[0].1, digests[1].1, "a whole-file CRC-32C would be equal here");
        // Split updates agree with one.
        let bytes = std::fs::read(dir.path().join("0.sst")).unwrap();
        let mut a = FileDigest::default();
        a.update(&bytes);
        let mut b = FileDigest::default();
        for c in bytes.chunks(7777) {
            b.update(c);
        }
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    fn a_global_seqno_reads_every_entry_at_that_seqno() {
        use crate::key::{MAX_SEQNO, internal_key, seek_key};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.sst");
        let mut w = ExternalSstWriter::create(&path).unwrap();
        for k in [b"b", b"d", b"f"] {
            w.put(k, k).unwrap();
        }
        w.delete(b"h").unwrap();
        w.finish().unwrap();
        let reader = SstReader::open(RealFs.open(&path).unwrap(), 1, None).unwrap();
        let t = Arc::new(reader.with_global_seq(Some(10)));
        assert_eq!(t.get(b"d", 9).unwrap(), None, "invisible below its seqno");
        assert_eq!(t.get(b"d", 10).unwrap(), Some((10, ValueKind::Put, b"d".to_vec())));
        assert_eq!(t.get(b"h", MAX_SEQNO).unwrap().map(|e| e.1), Some(ValueKind::Delete));
        let mut it = t.iter();
        it.seek_to_first().unwrap();
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next().unwrap();
        }
        let want: Vec<Vec<u8>> = vec![
            internal_key(b"b", 10, ValueKind::Put),
            internal_key(b"d", 10, ValueKind::Put),
            internal_key(b"f", 10, ValueKind::Put),
            internal_key(b"h", 10, ValueKind::Delete),
        ];
        assert_eq!(keys, want);
        // Seeks order the global key against the target: (d, 10) sorts after (d, 11)
        // and before (d, 9).
        it.seek(&seek_key(b"d", 11)).unwrap();
        assert_eq!(it.key(), want[1].as_slice());
        it.seek(&seek_key(b"d", 9)).unwrap();
        assert_eq!(it.key(), want[2].as_slice());
        it.seek(&seek_key(b"c", 0)).unwrap();
        assert_eq!(it.key(), want[1].as_slice());
        it.seek_for_prev(&seek_key(b"d", 9)).unwrap();
        assert_eq!(it.key(), want[1].as_slice());
        it.seek_for_prev(&seek_key(b"d", 11)).unwrap();
        assert_eq!(it.key(), want[0].as_slice());
        it.seek_for_prev(&seek_key(b"a", 11)).unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert_eq!(it.key(), want[3].as_slice());
        it.prev().unwrap();
        assert_eq!(it.key(), want[2].as_slice());
    }

    #[test]
    fn an_existing_path_and_an_empty_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sst");
        std::fs::write(&path, b"keep").unwrap();
        assert!(matches!(ExternalSstWriter::create(&path), Err(Error::AlreadyExists(_))));
        assert_eq!(std::fs::read(&path).unwrap(), b"keep");
        let empty = dir.path().join("e.sst");
        let w = ExternalSstWriter::create(&empty).unwrap();
        assert!(w.finish().is_err());
        assert!(!empty.exists());
    }

    #[test]
    fn inspect_refuses_engine_files_with_seqnos() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.sst");
        let fs = RealFs;
        let mut b = SstWriter::new(fs.create(&path).unwrap(), path.clone(), SstOptions::default());
        b.add(&crate::key::internal_key(b"k", 7, ValueKind::Put), b"v").unwrap();
        b.finish().unwrap();
        let e = inspect(&fs, &path).unwrap_err().to_string();
        assert!(e.contains("seqnos up to 7"), "{e}");
    }

    #[test]
    fn inspect_names_the_file_and_offset_of_a_damaged_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sst");
        let mut w = ExternalSstWriter::create(&path).unwrap();
        for i in 0..2000u32 {
            w.put(format!("key{i:06}").as_bytes(), &[7u8; 40]).unwrap();
        }
        w.finish().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        match inspect(&RealFs, &path) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, path);
                // The first block (8 KiB) fails its checksum; the error points into it or its trailer.
                assert!(offset < 8300, "the damaged block starts at 0, the error says {offset}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}
