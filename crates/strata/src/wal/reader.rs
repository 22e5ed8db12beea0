//! Streams framed records back from a log file.
//!
//! The reader uses positional reads in chunks (1 MiB by default), holding at most one
//! chunk plus the record being decoded in memory. It never reads past the size the file
//! had when it was opened.
//!
//! Classification of a record that is not valid, at offset `o` (file size `S`):
//! - fewer than [`HEADER_LEN`](super::HEADER_LEN) bytes left: **torn tail** at `o` (a
//!   crash cut the last append short), unless they are all zero (the clean end);
//! - a length over [`MAX_PAYLOAD_LEN`]: **corruption** at `o` (the writer never writes
//!   such a header, so no crash can leave one behind);
//! - every byte from `o` to `S` zero: the **clean end**. This is space the writer zeroed
//!   ahead ([`Writer::sync_commit`](super::Writer::sync_commit)); a crash that left
//!   zeros there lost nothing either, since nothing at `o` was ever a whole record;
//! - a payload that ends past `S`, or a checksum mismatch (a zero header included): a
//!   **torn tail** at `o`, *provided no valid record starts anywhere after `o`*. A
//!   crash damages only what was appended since the last sync, and need not persist
//!   it in order: the device may write a later page of the last append and lose an
//!   earlier one (over the zeros written ahead, the lost page reads as zeros), so
//!   data after the bad record is no proof of damage. A whole, checksummed record
//!   after it is: a flipped length field that makes a middle record claim to run
//!   past the end of the file (or into the zeros ahead of it) would otherwise
//!   silently drop every record after it. That case is **corruption** at `o`, naming
//!   the offset of the valid record found.
//!
//! The search for a valid record after a would-be torn tail tries every offset from
//! `o + 1` on; a candidate must have a length that fits in the file and a matching
//! checksum, which random bytes pass with probability about 2^-32 per offset whose
//! four length bytes happen to fit. Only a log whose last (torn) record carries
//! framed log records inside its payload could be misread as damaged that way; the
//! [`RecoveryMode`](crate::RecoveryMode) options decide what happens then.
//!
//! A consequence of the last-record rule: a bit flip inside the final record cannot be
//! told apart from a torn write, so that record is dropped as torn rather than reported.
//! See `docs/design/recovery.md`.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile};

use super::record::{HEADER_LEN, MAX_PAYLOAD_LEN, decode_header, record_crc};

const DEFAULT_CHUNK: usize = 1 << 20;

/// Reads the records of a WAL or manifest file in order.
pub struct Reader {
    file: Arc<dyn RandomAccessFile>,
    size: u64,
    /// Bytes of the file starting at `buf_start`.
    buf: Vec<u8>,
    buf_start: u64,
    /// Offset of the next record (end of the last good one).
    pos: u64,
    chunk: usize,
    torn_tail_at: Option<u64>,
    done: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.file.path())
            .field("size", &self.size)
            .field("pos", &self.pos)
            .field("torn_tail_at", &self.torn_tail_at)
            .finish()
    }
}

impl Reader {
    /// Reads records from `file`, starting at offset 0.
    pub fn new(file: Arc<dyn RandomAccessFile>) -> Self {
        Self::with_chunk_size(file, DEFAULT_CHUNK)
    }

    /// Opens `path` on `fs` and reads its records.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<Self> {
        Ok(Self::new(fs.open(path)?))
    }

    fn with_chunk_size(file: Arc<dyn RandomAccessFile>, chunk: usize) -> Self {
        Reader {
            size: file.size(),
            file,
            buf: Vec::new(),
            buf_start: 0,
            pos: 0,
            chunk: chunk.max(HEADER_LEN),
            torn_tail_at: None,
            done: false,
        }
    }

    /// The next record as `(offset, payload)`, or `None` at the end of the log (clean or
    /// torn; see [`torn_tail_at`](Self::torn_tail_at)).
    ///
    /// After an error or the end, every further call returns `Ok(None)`.
    pub fn next_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_one();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    /// Offset of the torn record that ended the log, if the end was not clean.
    ///
    /// Meaningful once [`next_record`](Self::next_record) returned `Ok(None)`. Bytes from
    /// here on are garbage: do not append to this file, start a new one.
    pub fn torn_tail_at(&self) -> Option<u64> {
        self.torn_tail_at
    }

    /// Offset just past the last record returned.
    pub fn valid_len(&self) -> u64 {
        self.pos
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    fn read_one(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let off = self.pos;
        if off >= self.size {
            return Ok(None);
        }
        if !self.ensure(HEADER_LEN)? {
            if self.rest_is_zero(off)? {
                return Ok(None);
            }
            return self.torn(off);
        }
        let start = self.buf_index(off);
        let header = &self.buf[start..start + HEADER_LEN];
        // A zero header never checksums (see `record::tests`): zeros from here on are
        // space zeroed ahead of the writer, the log's clean end.
        if header.iter().all(|&b| b == 0) && self.rest_is_zero(off)? {
            return Ok(None);
        }
        let Some(h) = decode_header(header) else {
            return self.torn(off);
        };
        let len = h.len as usize;
        if len > MAX_PAYLOAD_LEN {
            return Err(Error::corruption(
                self.file.path(),
                off,
                format!("record length {len} exceeds the limit of {MAX_PAYLOAD_LEN} bytes"),
            ));
        }
        let total = HEADER_LEN + len;
        if !self.ensure(total)? {
            return self.torn_unless_followed(off, "its length runs past the end of the file");
        }
        let start = self.buf_index(off);
        let rec = &self.buf[start..start + total];
        let (len_bytes, rest) = rec.split_at(4);
        let payload = &rest[4..];
        if record_crc(len_bytes, payload) != h.crc {
            let end = off + total as u64;
            // Read the record once more straight from the file: a flip in transit (a bad
            // read, not bad data) must not turn an acknowledged batch into a torn tail.
            let again = self.file.read_at(off, total)?;
            if again.len() == total {
                let (l2, r2) = again.split_at(4);
                if let Some(h2) = decode_header(&again[..HEADER_LEN])
                    && h2.len as usize == len
                    && record_crc(l2, &r2[4..]) == h2.crc
                {
                    self.pos = end;
                    return Ok(Some((off, r2[4..].to_vec())));
                }
            }
            return self.torn_unless_followed(off, "its checksum does not match");
        }
        let payload = payload.to_vec();
        self.pos = off + total as u64;
        Ok(Some((off, payload)))
    }

    /// A torn tail at `off`, unless a valid record starts after it (then the record at
    /// `off` is damage in the middle of the log).
    fn torn_unless_followed(&mut self, off: u64, what: &str) -> Result<Option<(u64, Vec<u8>)>> {
        if let Some(next) = self.find_valid_record(off + 1)? {
            return Err(Error::corruption(
                self.file.path(),
                off,
                format!("damaged record ({what}) followed by a valid record at offset {next}"),
            ));
        }
        self.torn(off)
    }

    /// The first offset at or after `from` where a whole record with a matching
    /// checksum starts, if any.
    pub(crate) fn find_valid_record(&self, from: u64) -> Result<Option<u64>> {
        if from >= self.size {
            return Ok(None);
        }
        // The rest of the file is at most one torn record in the common case (a crash
        // cut the last append), so reading it whole is cheap; damage may make it larger.
        let rest = self.file.read_at(from, (self.size - from) as usize)?;
        let mut i = 0usize;
        while i + HEADER_LEN <= rest.len() {
            if let Some(h) = decode_header(&rest[i..i + HEADER_LEN]) {
                let len = h.len as usize;
                if len <= MAX_PAYLOAD_LEN && (h.len != 0 || h.crc != 0) && i + HEADER_LEN + len <= rest.len() {
                    let payload = &rest[i + HEADER_LEN..i + HEADER_LEN + len];
                    if record_crc(&rest[i..i + 4], payload) == h.crc {
                        return Ok(Some(from + i as u64));
                    }
                }
            }
            i += 1;
        }
        Ok(None)
    }

    /// Moves past damage: the next call returns the first valid record at or after
    /// `from` (for recovery that skips corrupted records). Returns its offset, or
    /// `None` if no valid record follows (the log ends there).
    pub fn resume_after_damage(&mut self, from: u64) -> Result<Option<u64>> {
        let next = self.find_valid_record(from)?;
        if let Some(at) = next {
            self.pos = at;
            self.buf.clear();
            self.buf_start = at;
            self.done = false;
            self.torn_tail_at = None;
        }
        Ok(next)
    }

    fn torn(&mut self, off: u64) -> Result<Option<(u64, Vec<u8>)>> {
        self.torn_tail_at = Some(off);
        Ok(None)
    }

    /// Index into `buf` of file offset `off` (which `ensure` made resident).
    fn buf_index(&self, off: u64) -> usize {
        (off - self.buf_start) as usize
    }

    /// Makes bytes `[pos, pos + n)` resident; `false` if the file ends before them.
    fn ensure(&mut self, n: usize) -> Result<bool> {
        let want_end = self.pos.saturating_add(n as u64);
        if want_end > self.size {
            return Ok(false);
        }
        if want_end <= self.buf_start + self.buf.len() as u64 {
            return Ok(true);
        }
        // Drop what was consumed so memory stays bounded by one chunk plus one record.
        let consumed = self.buf_index(self.pos).min(self.buf.len());
        self.buf.drain(..consumed);
        self.buf_start = self.pos;
        if self.buf.capacity() > 4 * self.chunk && self.buf.len() < self.chunk {
            self.buf.shrink_to(self.chunk);
        }
        let buf_end = self.buf_start + self.buf.len() as u64;
        let need = (want_end - buf_end) as usize;
        let len = need.max(self.chunk).min((self.size - buf_end) as usize);
        let data = self.file.read_at(buf_end, len)?;
        if data.len() != len {
            return Err(Error::corruption(
                self.file.path(),
                buf_end,
                format!("short read: {} of {len} bytes", data.len()),
            ));
        }
        self.buf.extend_from_slice(&data);
        Ok(true)
    }

    /// True if every byte in `[from, size)` is zero.
    fn rest_is_zero(&self, from: u64) -> Result<bool> {
        let mut at = from;
        while at < self.size {
            let len = ((self.size - at) as usize).min(self.chunk);
            if self.file.read_at(at, len)?.iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at += len as u64;
        }
        Ok(true)
    }
}

impl Iterator for Reader {
    type Item = Result<(u64, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

#[cfg(test)]
impl Reader {
    pub(super) fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
pub(super) fn reader_with_chunk(file: Arc<dyn RandomAccessFile>, chunk: usize) -> Reader {
    Reader::with_chunk_size(file, chunk)
}
