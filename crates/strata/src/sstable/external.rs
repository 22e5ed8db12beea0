//! External SSTables: files written outside any database from sorted key/value pairs,
//! for [`Db::ingest`](crate::Db::ingest) to install (bulk loads built elsewhere, such as
//! on a cluster).
//!
//! An external file is an ordinary table of the current format version with three
//! restrictions, which [`inspect`] checks before an ingest accepts a file:
//! every entry has seqno 0 (the database reads the whole file with one global seqno it
//! assigns at ingest), each user key appears once (strictly increasing keys), and only
//! puts and point deletes appear (no range or deferred deletes).
//!
//! The check ([`check_copy`]) reads a file once: its tail (footer, meta blocks), then its
//! data blocks a piece of whole blocks at a time, each block's checksum once and each
//! entry in place in one loop (`block::walk_block`, no allocation per entry); an ingest's
//! copy writes each piece once it is checked, so the copy is the bytes checked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::block::walk_block;
use super::bloom::BloomFilter;
use super::builder::{SstOptions, SstWriter};
use super::format::{BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, FORMAT_VERSION, Footer, TABLE_MAGIC, unseal_block_in};
use super::reader::SstReader;
use crate::codec::DecodeError;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RealFs, WritableFile};
use crate::key::{ValueKind, compare_internal, encode_internal_key, user_key};
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
    /// Where the file lives (its removal on a refused `finish` goes through it too).
    fs: Arc<dyn FileSystem>,
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
        Self::create_with(Arc::new(RealFs), path, SstOptions::default())
    }

    /// Creates the file at `path` (which must not exist yet) through `fs`, with `opts`
    /// ([`ExternalSstWriter::check_options`]).
    pub fn create_with(fs: Arc<dyn FileSystem>, path: impl AsRef<Path>, opts: SstOptions) -> Result<Self> {
        Self::check_options(&opts)?;
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
            fs,
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

    /// Refuses options whose file ingest would refuse: it takes format version
    /// `FORMAT_VERSION` only, which has no delete tiles, so `opts.tiles` must be unset.
    pub fn check_options(opts: &SstOptions) -> Result<()> {
        if opts.tiles.is_some() {
            return Err(Error::InvalidArgument(format!(
                "external SSTables are for ingest, which takes format version {FORMAT_VERSION} \
                 only: delete tiles (`SstOptions::tiles`) must be unset"
            )));
        }
        Ok(())
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
            let _ = self.fs.remove(&self.path);
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
/// properties block. Returns what it holds, with the file's [`FileDigest`]. A bad file
/// is an error naming the file (and, for damage, the offset); the file is never changed.
pub fn inspect(fs: &dyn FileSystem, path: &Path) -> Result<ExternalFileInfo> {
    inspect_file(fs.open(path)?, path)
}

/// [`inspect`] of an open file, naming it `path` in errors and in the result.
pub fn inspect_file(file: Arc<dyn crate::fs::RandomAccessFile>, path: &Path) -> Result<ExternalFileInfo> {
    check_copy(file.as_ref(), path, None)
}

/// Most bytes read at a time by [`check_copy`] (more when one block is larger).
const PIECE: u64 = 1 << 20;

/// Checks `file` as [`inspect`] does, reading it once: first its tail (footer and meta
/// blocks), then its data blocks in pieces of whole blocks, each piece checked and then
/// appended to `out` (a copy's destination) when there is one, the tail last. So the
/// bytes written are the bytes checked, and a file that fails is never written whole
/// (the caller removes the partial copy). Errors name `path` (and, for damage, the
/// offset); the result names it too.
pub fn check_copy(
    file: &dyn crate::fs::RandomAccessFile,
    path: &Path,
    mut out: Option<&mut dyn WritableFile>,
) -> Result<ExternalFileInfo> {
    let named = |e: Error| match e {
        Error::Corruption { offset, reason, .. } => Error::Corruption {
            file: path.to_path_buf(),
            offset,
            reason,
        },
        Error::Io { path: None, source } => Error::io(path, source),
        e => e,
    };
    let bad = |reason: String| Error::InvalidArgument(format!("{}: {reason}", path.display()));
    let (tail, reader) = read_tail(file, path).map_err(named)?;
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
    // A data block's keys lie above the previous block's index key and at or below its
    // own: seeks and point reads go to the block by them.
    let fences: Vec<(&[u8], BlockHandle)> = reader.fences().collect();
    let handles: Vec<BlockHandle> = fences.iter().map(|&(_, h)| h).collect();
    let mut entries = Entries {
        filter: reader.filter(),
        ..Entries::default()
    };
    let mut digest = FileDigest::default();
    let mut at = 0u64;
    let mut i = 0;
    let mut bytes = Vec::new();
    while let Some(first) = handles.get(i) {
        // Bytes before the piece's first block (none in files this crate writes).
        if first.offset > at && first.offset <= tail.start {
            copy_gap(file, at, first.offset, &mut bytes, &mut digest, &mut out).map_err(named)?;
            at = first.offset;
        }
        // The next blocks, up to a piece's worth (at least one).
        let mut j = i;
        let mut end = at;
        while let Some(h) = handles.get(j) {
            let block_end = h.end_with_trailer().filter(|&e| e <= tail.start && h.offset >= end);
            let Some(block_end) = block_end else {
                return Err(named(Error::corruption(
                    path,
                    h.offset,
                    "data block overlaps another block or the meta blocks",
                )));
            };
            if j > i && block_end - at > PIECE {
                break;
            }
            end = block_end;
            j += 1;
        }
        file.read_into(at, (end - at) as usize, &mut bytes).map_err(named)?;
        for (k, h) in handles.iter().enumerate().take(j).skip(i) {
            let from = (h.offset - at) as usize;
            let raw = bytes
                .get(from..from + h.size as usize + BLOCK_TRAILER_LEN)
                .unwrap_or_default();
            let walked = entries.check_block(raw, h.offset).map_err(|e| match e {
                Bad::Block(e) => {
                    Error::corruption(path, h.offset + e.offset as u64, format!("data block: {}", e.reason))
                }
                Bad::Entry(reason) => bad(reason),
            })?;
            let below = k.checked_sub(1).and_then(|p| fences.get(p)).map(|f| f.0);
            let covered = walked.is_none_or(|(first, last)| {
                below.is_none_or(|b| compare_internal(b, first).is_lt())
                    && fences.get(k).is_some_and(|f| compare_internal(last, f.0).is_le())
            });
            if !covered {
                return Err(bad(format!(
                    "the index does not cover data block {k} (offset {}): reads would miss its keys",
                    h.offset
                )));
            }
        }
        pass_on(&bytes, &mut digest, &mut out)?;
        at = end;
        i = j;
    }
    // Bytes between the last data block and the meta blocks (none in files this crate
    // writes) are copied as they are: no reader ever reads them.
    copy_gap(file, at, tail.start, &mut bytes, &mut digest, &mut out).map_err(named)?;
    pass_on(&tail.bytes, &mut digest, &mut out)?;
    if entries.count == 0 {
        return Err(bad("holds no entries".into()));
    }
    if entries.count != props.entries
        || entries.smallest != props.smallest_user_key
        || entries.last != props.largest_user_key
    {
        return Err(bad("entries disagree with the properties block".into()));
    }
    Ok(ExternalFileInfo {
        path: path.to_path_buf(),
        format_version: reader.footer().version,
        smallest: entries.smallest,
        largest: entries.last,
        entries: entries.count,
        deletes: entries.deletes,
        raw_bytes: entries.raw_bytes,
        file_size: file.size(),
        digest: digest.finish(),
    })
}

/// Passes on the bytes of `file` from `from` to `to` that no block covers, a piece at a
/// time, so a file with a large unused region is never read into memory at once.
fn copy_gap(
    file: &dyn crate::fs::RandomAccessFile,
    mut from: u64,
    to: u64,
    buf: &mut Vec<u8>,
    digest: &mut FileDigest,
    out: &mut Option<&mut dyn WritableFile>,
) -> Result<()> {
    while from < to {
        let n = (to - from).min(PIECE);
        file.read_into(from, n as usize, buf)?;
        pass_on(buf, digest, out)?;
        from += n;
    }
    Ok(())
}

/// Adds checked bytes to the digest and to the copy, if any, whose device is asked to
/// start writing them.
fn pass_on(bytes: &[u8], digest: &mut FileDigest, out: &mut Option<&mut dyn WritableFile>) -> Result<()> {
    digest.update(bytes);
    if let Some(out) = out {
        out.append(bytes)?;
        out.write_behind()?;
    }
    Ok(())
}

/// Reads a table's tail (the footer and the meta blocks after the data blocks) once and
/// opens a reader over it: the format version first, from the raw footer (magic at 64,
/// version at 72), so a table of another version is refused as such, whether or not
/// this build could read it; then everything [`SstReader::open`] checks.
fn read_tail(file: &dyn crate::fs::RandomAccessFile, path: &Path) -> Result<(Arc<Tail>, SstReader)> {
    let size = file.size();
    let Some(footer_at) = size.checked_sub(FOOTER_LEN as u64) else {
        return Err(Error::corruption(
            path,
            0,
            format!("file of {size} bytes is too small for an SSTable"),
        ));
    };
    let footer = file.read_at(footer_at, FOOTER_LEN)?;
    if let (Some(magic), Some(version)) = (footer.get(64..72), footer.get(72..76))
        && magic == TABLE_MAGIC.to_le_bytes()
    {
        let version = u32::from_le_bytes(version.try_into().unwrap_or([0; 4]));
        if version != FORMAT_VERSION {
            return Err(Error::InvalidArgument(format!(
                "{}: table format version {version}; ingest takes version {FORMAT_VERSION} only",
                path.display()
            )));
        }
    }
    let decoded = Footer::decode(&footer, size)
        .map_err(|e| Error::corruption(path, footer_at + e.offset as u64, format!("footer: {}", e.reason)))?;
    let start = (decoded.index.offset)
        .min(decoded.filter.offset)
        .min(decoded.properties.offset)
        .min(decoded.range_del.offset);
    let tail = Arc::new(Tail {
        path: path.to_path_buf(),
        start,
        size,
        bytes: file.read_at(start, (size - start) as usize)?,
    });
    let reader = SstReader::open(tail.clone(), 0, None)?;
    Ok((tail, reader))
}

/// A table's tail held in memory, read as the file: reads outside it are an error (the
/// reader opened over it reads only the footer and the meta blocks).
struct Tail {
    path: PathBuf,
    start: u64,
    size: u64,
    bytes: Vec<u8>,
}

impl crate::fs::RandomAccessFile for Tail {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        offset
            .checked_sub(self.start)
            .and_then(|from| usize::try_from(from).ok())
            .and_then(|from| self.bytes.get(from..from.checked_add(len)?))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::corruption(&self.path, offset, "a meta block lies among the data blocks"))
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a data block was refused: damage found decoding it, or an entry an external
/// file may not hold.
enum Bad {
    Block(DecodeError),
    Entry(String),
}

impl From<DecodeError> for Bad {
    fn from(e: DecodeError) -> Self {
        Bad::Block(e)
    }
}

/// The entries checked so far, across blocks.
/// A data block's first and last internal keys.
type KeySpan<'a> = (&'a [u8], &'a [u8]);

#[derive(Default)]
struct Entries<'f> {
    /// The file's filter, which must hold every key (checked for each block's first).
    filter: Option<&'f BloomFilter>,
    /// The block being walked's first internal key.
    first: Vec<u8>,
    count: u64,
    deletes: u64,
    raw_bytes: u64,
    smallest: Vec<u8>,
    /// The last user key.
    last: Vec<u8>,
    /// The block being walked's keys (its last key once walked).
    key: Vec<u8>,
    /// A compressed block's payload.
    buf: Vec<u8>,
}

impl Entries<'_> {
    /// Checks one sealed data block (`raw`, at file offset `base`): its checksum, its
    /// format, and every entry: seqno 0, a put or a delete, its user key after the one
    /// before (in this block or the last).
    /// Walks a data block's entries; returns its first and last internal keys, `None`
    /// for an empty block.
    fn check_block(&mut self, raw: &[u8], base: u64) -> std::result::Result<Option<KeySpan<'_>>, Bad> {
        let Entries {
            filter,
            first: first_key,
            count,
            deletes,
            raw_bytes,
            smallest,
            last,
            key,
            buf,
        } = self;
        let payload = unseal_block_in(raw, buf)?;
        let first = *count;
        walk_block(payload, key, |e| {
            let n = *count;
            let at = || base + e.offset as u64;
            if e.key.seq != 0 {
                return Err(Bad::Entry(format!(
                    "entry {n} (offset {}) has seqno {} (external files use 0)",
                    at(),
                    e.key.seq
                )));
            }
            // The limits every write keeps (`WriteBatch`): a key past them could not be
            // written or deleted again once ingested.
            let (klen, vlen) = (e.key.user_key.len(), e.value.len());
            if klen > MAX_KEY_SIZE || vlen > MAX_VALUE_SIZE {
                return Err(Bad::Entry(format!(
                    "entry {n} (offset {}) has a key of {klen} bytes and a value of {vlen}: keys \
                     take at most {MAX_KEY_SIZE} bytes, values {MAX_VALUE_SIZE}",
                    at()
                )));
            }
            match e.key.kind {
                ValueKind::Put => {}
                ValueKind::Delete => *deletes += 1,
                ValueKind::DeferredDelete => {
                    return Err(Bad::Entry(format!("entry {n} (offset {}) is a deferred delete", at())));
                }
            }
            // Within the block, the walk proved the order of internal keys, and of user
            // keys too unless it shows the previous key; across blocks, compare here.
            let before = if n == first {
                (n > 0).then_some(last.as_slice())
            } else {
                e.prev.map(user_key)
            };
            if before.is_some_and(|b| e.key.user_key <= b) {
                return Err(Bad::Entry(format!(
                    "entry {n} (offset {}, key {}) does not sort after the previous key: keys must be unique and sorted",
                    at(),
                    super::dump::escape(e.key.user_key)
                )));
            }
            if n == first {
                // One key per block: a filter built wrong (another hash, another file's)
                // misses most keys, and probing every key would cost more than the copy
                // (a cache miss each: 2.4 times the ingest's time, measured).
                if filter.is_some_and(|f| !f.may_contain(e.key.user_key)) {
                    return Err(Bad::Entry(format!(
                        "entry {n} (offset {}, key {}) is missing from the file's filter: reads would miss it",
                        at(),
                        super::dump::escape(e.key.user_key)
                    )));
                }
                first_key.clear();
                encode_internal_key(first_key, e.key.user_key, e.key.seq, e.key.kind);
            }
            if n == 0 {
                smallest.extend_from_slice(e.key.user_key);
            }
            *raw_bytes += (e.key.user_key.len() + e.value.len()) as u64;
            *count += 1;
            Ok(())
        })?;
        // An empty block leaves the last key as it was.
        if *count == first {
            return Ok(None);
        }
        last.clear();
        last.extend_from_slice(user_key(key));
        Ok(Some((first_key.as_slice(), key.as_slice())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::sstable::format::Compression;

    /// A file held in memory (a tail that starts at 0 is the whole file).
    fn in_memory(path: &Path, bytes: Vec<u8>) -> Tail {
        Tail {
            path: path.to_path_buf(),
            start: 0,
            size: bytes.len() as u64,
            bytes,
        }
    }

    /// An external file of `n` keys (values of 24 bytes, compressible) written with `opts`.
    fn written(dir: &Path, name: &str, n: u32, opts: SstOptions) -> (PathBuf, ExternalFileInfo) {
        let path = dir.join(name);
        let mut w = ExternalSstWriter::create_with(Arc::new(RealFs), &path, opts).unwrap();
        for i in 0..n {
            let key = format!("key{:07}", i * 7);
            if i % 10 == 3 {
                w.delete(key.as_bytes()).unwrap();
            } else {
                w.put(key.as_bytes(), format!("value-{i:018}").as_bytes()).unwrap();
            }
        }
        let info = w.finish().unwrap();
        (path, info)
    }

    /// Delete tiles make a format version ingest refuses: the writer refuses them first,
    /// before it creates the file (its info would otherwise claim `FORMAT_VERSION`).
    #[test]
    fn options_ingest_would_refuse_are_refused_before_the_file_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiled.sst");
        let opts = SstOptions {
            tiles: Some(crate::sstable::TileOptions { h: 2, delete_key: None }),
            ..SstOptions::default()
        };
        let e = ExternalSstWriter::create_with(Arc::new(RealFs), &path, opts).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("SstOptions::tiles"), "{e}");
        assert!(!path.exists(), "a refused writer creates no file");
    }

    #[test]
    fn a_checked_copy_writes_exactly_the_bytes_it_read_across_many_pieces() {
        let dir = tempfile::tempdir().unwrap();
        // About 3.5 MiB: four pieces.
        let (path, info) = written(dir.path(), "big.sst", 100_000, SstOptions::default());
        assert!(info.file_size > 3 * PIECE, "{}", info.file_size);
        let bytes = std::fs::read(&path).unwrap();
        let copy = dir.path().join("copy.sst");
        let mut out = RealFs.create(&copy).unwrap();
        let got = check_copy(&in_memory(&path, bytes.clone()), &path, Some(out.as_mut())).unwrap();
        out.sync().unwrap();
        assert_eq!(got, info);
        assert!(
            std::fs::read(&copy).unwrap() == bytes,
            "the copy differs from the source"
        );
        assert_eq!((got.entries, got.deletes), (100_000, 10_000));
        // Damage in the last piece: the pieces before it were written, the rest not.
        let mut bad = bytes.clone();
        let at = info.file_size as usize - (PIECE as usize) / 2;
        bad[at] ^= 4;
        let mut out = RealFs.create(&copy).unwrap();
        assert!(check_copy(&in_memory(&path, bad), &path, Some(out.as_mut())).is_err());
        out.sync().unwrap();
        let written = std::fs::read(&copy).unwrap();
        assert!(written.len() as u64 > PIECE && written.len() < at, "{}", written.len());
        assert!(bytes.starts_with(&written));
    }

    #[test]
    fn every_damaged_byte_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for compression in [Compression::None, Compression::Lz4] {
            let opts = SstOptions {
                block_size: 256,
                compression,
                ..SstOptions::default()
            };
            let (path, info) = written(dir.path(), &format!("{compression:?}.sst"), 200, opts);
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(check_copy(&in_memory(&path, bytes.clone()), &path, None).unwrap(), info);
            // Every byte lies in a block or the footer, each under its own checksum.
            for at in 0..bytes.len() {
                for bit in [0x01u8, 0x80] {
                    let mut bad = bytes.clone();
                    bad[at] ^= bit;
                    match check_copy(&in_memory(&path, bad), &path, None) {
                        Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
                        Err(Error::InvalidArgument(m)) => assert!(m.contains(&*path.to_string_lossy()), "{m}"),
                        other => panic!("{compression:?}: byte {at} ^ {bit:#x}: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn a_user_key_repeated_across_a_block_boundary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dup.sst");
        // One entry per block: the check compares the keys across the boundary.
        let opts = SstOptions {
            block_size: 1,
            ..SstOptions::default()
        };
        let mut b = SstWriter::new(RealFs.create(&path).unwrap(), path.clone(), opts);
        b.add(&crate::key::internal_key(b"a", 0, ValueKind::Put), b"1").unwrap();
        b.add(&crate::key::internal_key(b"b", 0, ValueKind::Put), b"2").unwrap();
        b.add(&crate::key::internal_key(b"b", 0, ValueKind::Delete), b"")
            .unwrap();
        let (_, props) = b.finish().unwrap();
        assert_eq!(props.data_blocks, 3);
        let e = inspect(&RealFs, &path).unwrap_err().to_string();
        assert!(e.contains("entry 2") && e.contains("unique and sorted"), "{e}");
        assert!(e.contains("dup.sst"), "{e}");
    }

    /// An index or a filter that disagrees with the data blocks (a foreign writer's
    /// bug) is refused: reads would miss keys the file holds. Made by putting a file's
    /// data blocks under another file's index, filter and properties, the two laid out
    /// alike (keys of one length sharing prefixes of the same lengths).
    #[test]
    fn an_index_or_filter_that_misses_keys_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SstOptions {
            block_size: 256,
            ..SstOptions::default()
        };
        let file = |name: &str, keys: &mut dyn Iterator<Item = String>, bloom_fpr: f64| -> PathBuf {
            let path = dir.path().join(name);
            let opts = SstOptions {
                bloom_fpr,
                ..opts.clone()
            };
            let mut w = ExternalSstWriter::create_with(Arc::new(RealFs), &path, opts).unwrap();
            for k in keys {
                w.put(k.as_bytes(), b"v").unwrap();
            }
            w.finish().unwrap();
            path
        };
        let splice = |data: &Path, meta: &Path, name: &str| -> PathBuf {
            let start = |p: &Path| read_tail(RealFs.open(p).unwrap().as_ref(), p).unwrap().0.start as usize;
            let (d, m) = (std::fs::read(data).unwrap(), std::fs::read(meta).unwrap());
            assert_eq!(start(data), start(meta), "the two files must lay out alike");
            let path = dir.path().join(name);
            std::fs::write(&path, [&d[..start(data)], &m[start(meta)..]].concat()).unwrap();
            path
        };
        let keys =
            |letter: char, odd: u32| (0..400u32).map(move |i| format!("{letter}{:06}", 2 * i + u32::from(i == odd)));
        // Every key above the index's (no filters, which would see it first).
        let unfiltered = file("unfiltered.sst", &mut keys('k', u32::MAX), 0.0);
        assert!(inspect(&RealFs, &unfiltered).is_ok());
        let later = file("later.sst", &mut keys('m', u32::MAX), 0.0);
        let e = inspect(&RealFs, &splice(&later, &unfiltered, "fences.sst"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("fences.sst") && e.contains("does not cover data block 0"),
            "{e}"
        );
        // The first key of the second block moved up by one: the index still covers it,
        // the filter lacks it.
        let base = file("base.sst", &mut keys('k', u32::MAX), 0.01);
        assert!(inspect(&RealFs, &base).is_ok());
        let reader = read_tail(RealFs.open(&base).unwrap().as_ref(), &base).unwrap().1;
        let fence = reader.fences().next().map(|(f, _)| user_key(f).to_vec()).unwrap();
        let second = keys('k', u32::MAX)
            .position(|k| k.as_bytes() > fence.as_slice())
            .unwrap();
        let moved = file("moved.sst", &mut keys('k', second as u32), 0.01);
        let e = inspect(&RealFs, &splice(&moved, &base, "filter.sst"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("entry {second} ")) && e.contains("missing from the file's filter"),
            "{e}"
        );
    }

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
