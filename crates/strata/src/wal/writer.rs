//! Appends framed records to a log file.
//!
//! Invariant: the file holds a sequence of complete records, except possibly a partial
//! last one if an append, flush or sync failed. After any such failure the writer is
//! *poisoned* and refuses further work, because appending behind a partial record would
//! turn a tolerable torn tail into corruption in the middle of the log.

use crate::error::{Error, Result};
use crate::fs::WritableFile;

use super::record::{MAX_PAYLOAD_LEN, encode_header};

/// Appends records to a WAL or manifest file.
pub struct Writer {
    file: Box<dyn WritableFile>,
    failed: bool,
    /// End of the zeros [`sync_commit`](Self::sync_commit) wrote ahead.
    zeroed_to: u64,
}

/// Zeros [`Writer::sync_commit`] writes ahead at a time: one metadata sync per 1 MiB of
/// records instead of one per commit.
const ZERO_AHEAD: u64 = 1 << 20;
/// Room left before the zeros end that makes `sync_commit` zero the next stretch, so
/// a commit's records rarely run past them.
const ZERO_MARGIN: u64 = 64 << 10;

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("len", &self.file.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl Writer {
    /// Wraps a file opened for appending; records start at the file's current length.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        Writer {
            file,
            failed: false,
            zeroed_to: 0,
        }
    }

    /// Appends one record and returns the file offset where it starts.
    ///
    /// The record reaches the OS only on [`flush`](Self::flush) and the disk only on
    /// [`sync`](Self::sync). A payload over [`MAX_PAYLOAD_LEN`](super::MAX_PAYLOAD_LEN)
    /// is rejected with `InvalidArgument` and nothing is written.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<u64> {
        self.check()?;
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(Error::InvalidArgument(format!(
                "log record of {} bytes exceeds the limit of {MAX_PAYLOAD_LEN} bytes",
                payload.len()
            )));
        }
        let offset = self.file.len();
        let header = encode_header(payload);
        // Two appends avoid copying large payloads; the file buffers them anyway.
        let r = self.file.append(&header).and_then(|()| self.file.append(payload));
        self.poison_on_err(r)?;
        Ok(offset)
    }

    /// Pushes appended records to the operating system (survives a process crash, not
    /// a power loss).
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        let r = self.file.flush();
        self.poison_on_err(r)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check()?;
        // After a failed fsync the page cache state is unknown; never retry it.
        let r = self.file.sync();
        self.poison_on_err(r)
    }

    /// Makes every appended record durable, for a log synced on every commit: first it
    /// keeps zeros written ahead of the end ([`WritableFile::zero_ahead`]), so that the
    /// sync itself writes the records and not the file's new size. The zeros read back
    /// as the log's clean end.
    ///
    /// A log synced only when it is retired should use [`sync`](Self::sync): zeroing
    /// ahead would only add writes to it.
    pub fn sync_commit(&mut self) -> Result<()> {
        self.check()?;
        let len = self.file.len();
        if len + ZERO_MARGIN > self.zeroed_to {
            let r = self.file.zero_ahead(len + ZERO_AHEAD);
            self.poison_on_err(r)?;
            self.zeroed_to = len + ZERO_AHEAD;
        }
        self.sync()
    }

    /// Bytes in the file, including records not yet flushed.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True when the file holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True after an I/O failure; every further call returns an error.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    fn check(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Io {
                path: None,
                source: std::io::Error::other(
                    "log writer failed earlier; the log's tail is unknown and it takes no more records",
                ),
            });
        }
        Ok(())
    }

    fn poison_on_err(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}
