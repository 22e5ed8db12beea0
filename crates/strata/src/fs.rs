//! The file-system layer: every byte Strata reads or writes goes through [`FileSystem`].
//!
//! The real implementation is [`RealFs`]; tests substitute a fault-injecting one. Keeping
//! the surface small (append-only writers, positional readers, a few directory calls)
//! keeps fault injection honest.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A file opened for appending.
pub trait WritableFile: Send + Sync {
    /// Appends all of `data`.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Pushes buffered data to the operating system (not necessarily to disk).
    fn flush(&mut self) -> Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> Result<()>;
    /// Writes zeros from the end of the appended data up to offset `end` and makes them,
    /// and the file's size, durable. Appends then overwrite the zeros, so a [`sync`]
    /// of data within them changes no metadata: on ext4 an fdatasync that need not
    /// commit the journal for a new file size, about 1.4x the syncs per second. Only an
    /// optimisation: the default does nothing, and readers of such a file must take
    /// zeros after the last record as its end.
    ///
    /// [`sync`]: WritableFile::sync
    fn zero_ahead(&mut self, end: u64) -> Result<()> {
        let _ = end;
        Ok(())
    }
    /// Starts writing to the device what was appended since the last call, without
    /// waiting for it, so that a later [`sync`] has less to wait for: a bulk copy calls it
    /// after each piece and the device writes while the next piece is read and checked.
    /// Only an optimisation: the default does nothing, and durability still comes from
    /// `sync` alone; an error it reports (the device refusing the writes) fails the
    /// caller early, as the `sync` after it would.
    ///
    /// [`sync`]: WritableFile::sync
    fn write_behind(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True when nothing was appended yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file opened for positional reads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; a short file is an error.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// [`read_at`](Self::read_at) into `buf`, replacing its contents and reusing its
    /// memory: a reader of many pieces in a row allocates (and zeroes) once.
    fn read_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        *buf = self.read_at(offset, len)?;
        Ok(())
    }
    /// The file's size in bytes.
    fn size(&self) -> u64;
    /// The file's path (for error messages).
    fn path(&self) -> &Path;
}

/// The operations Strata needs from a file system.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates (truncating) a file for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens a file for positional reads.
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically renames `from` to `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Lists the file names in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes a directory's entries (creations, renames) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Makes `to` a second name of the file `from` (a hard link). The default refuses:
    /// callers copy instead (as they do when the two paths are on different devices).
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let _ = to;
        Err(Error::io(
            from,
            std::io::Error::new(std::io::ErrorKind::Unsupported, "hard links not supported"),
        ))
    }
    /// The same file system reading SSTables with direct I/O (bypassing the page cache),
    /// if it can. Benchmarks use it to make data larger than memory.
    fn with_direct_reads(&self) -> Option<Arc<dyn FileSystem>> {
        None
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// The operating system's file system, reading SSTables through `O_DIRECT` so reads go
/// to the device instead of the page cache (everything else as [`RealFs`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectReadFs;

/// Alignment of direct I/O.
const DIRECT_ALIGN: u64 = 4096;

struct RealWritable {
    path: PathBuf,
    file: std::io::BufWriter<File>,
    len: u64,
    /// End of the zeros written ahead of `len` (see [`WritableFile::zero_ahead`]).
    zeroed: u64,
    /// Opened with `O_APPEND`, where every write lands at the end of the file, zeros
    /// included: zeroing ahead would put the next records after the zeros.
    append_mode: bool,
    /// Where the bytes not yet handed to [`WritableFile::write_behind`] start.
    behind: u64,
}

/// Zeros written per call by [`RealWritable::zero_ahead`].
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl WritableFile for RealWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.write_all(data).map_err(|e| Error::io(&self.path, e))?;
        self.len += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }
    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.get_ref().sync_data().map_err(|e| Error::io(&self.path, e))
    }
    fn write_behind(&mut self) -> Result<()> {
        use std::os::fd::AsRawFd;
        let (from, to) = (self.behind, self.len);
        if to <= from {
            return Ok(());
        }
        self.flush()?;
        let (Ok(offset), Ok(nbytes)) = (libc::off64_t::try_from(from), libc::off64_t::try_from(to - from)) else {
            return Ok(());
        };
        // SAFETY: the descriptor is the open file's own, valid while `self.file` lives,
        // and the call takes plain integers (no memory is passed). Why at all: without
        // it an ingest's copy leaves its writing to the final sync; measured on 1,084 MiB
        // (docs/benchmarks/ingest.md), 10.55 s without against 7.80 s with, link mode
        // (which writes nothing) 6.6-6.8 s in both runs.
        let r = unsafe {
            libc::sync_file_range(
                self.file.get_ref().as_raw_fd(),
                offset,
                nbytes,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if r != 0 {
            return Err(Error::io(&self.path, std::io::Error::last_os_error()));
        }
        self.behind = to;
        Ok(())
    }
    fn zero_ahead(&mut self, end: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let mut at = self.len.max(self.zeroed);
        if end <= at || self.append_mode {
            return Ok(());
        }
        // Buffered appends first: the zeros go after them, at positions the buffer's
        // cursor has not reached (positional writes leave the cursor where it is).
        self.flush()?;
        let file = self.file.get_ref();
        while at < end {
            let n = ZEROS.len().min((end - at) as usize);
            file.write_all_at(&ZEROS[..n], at)
                .map_err(|e| Error::io(&self.path, e))?;
            at += n as u64;
        }
        file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        self.zeroed = end;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
}

struct RealRandomAccess {
    path: PathBuf,
    file: File,
    size: u64,
    direct: bool,
}

impl RealRandomAccess {
    /// Reads `[offset, offset + len)` through an aligned window, as `O_DIRECT` demands.
    fn read_direct(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let start = offset - offset % DIRECT_ALIGN;
        let end = (offset + len as u64).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let window = (end - start) as usize;
        let mut raw = vec![0u8; window + DIRECT_ALIGN as usize];
        let shift = raw.as_ptr().align_offset(DIRECT_ALIGN as usize);
        let buf = raw
            .get_mut(shift..shift + window)
            .ok_or_else(|| Error::io(&self.path, std::io::Error::other("cannot align a direct-I/O buffer")))?;
        let mut done = 0usize;
        let need = (offset - start) as usize + len;
        while done < need {
            let n = self
                .file
                .read_at(&mut buf[done..], start + done as u64)
                .map_err(|e| Error::io(&self.path, e))?;
            if n == 0 {
                return Err(Error::corruption(&self.path, offset, "file ended during a direct read"));
            }
            done += n;
        }
        let from = (offset - start) as usize;
        Ok(buf[from..from + len].to_vec())
    }
}

impl RandomAccessFile for RealRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_into(offset, len, &mut buf)?;
        Ok(buf)
    }
    fn read_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if offset.checked_add(len as u64).is_none_or(|end| end > self.size) {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("read of {len} bytes past end of file (size {})", self.size),
            ));
        }
        if self.direct {
            *buf = self.read_direct(offset, len)?;
            return Ok(());
        }
        // Only bytes beyond what `buf` held are zeroed.
        buf.resize(len, 0);
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(&self.path, e))
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl FileSystem for RealFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(Box::new(RealWritable {
            path: path.to_path_buf(),
            file: std::io::BufWriter::with_capacity(64 * 1024, file),
            len: 0,
            zeroed: 0,
            append_mode: false,
            behind: 0,
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Box::new(RealWritable {
            path: path.to_path_buf(),
            file: std::io::BufWriter::with_capacity(64 * 1024, file),
            len,
            zeroed: 0,
            append_mode: true,
            behind: len,
        }))
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        open_for_reads(path, false)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io(path, e))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let f = File::open(dir).map_err(|e| Error::io(dir, e))?;
        f.sync_all().map_err(|e| Error::io(dir, e))
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io(from, e))
    }
    fn with_direct_reads(&self) -> Option<Arc<dyn FileSystem>> {
        Some(Arc::new(DirectReadFs))
    }
}

fn open_for_reads(path: &Path, direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut oo = OpenOptions::new();
    oo.read(true);
    if direct {
        oo.custom_flags(libc::O_DIRECT);
    }
    let file = oo.open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    Ok(Arc::new(RealRandomAccess {
        path: path.to_path_buf(),
        file,
        size,
        direct,
    }))
}

impl FileSystem for DirectReadFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        RealFs.create(path)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        RealFs.open_append(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        // Only SSTables are read in the hot path; logs and manifests stay buffered.
        open_for_reads(path, path.extension().is_some_and(|e| e == "sst"))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        RealFs.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        RealFs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        RealFs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }
    fn with_direct_reads(&self) -> Option<Arc<dyn FileSystem>> {
        Some(Arc::new(DirectReadFs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_overwrite_the_zeros_written_ahead_and_append_mode_writes_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.wal");
        let mut f = RealFs.create(&path).unwrap();
        f.append(b"abc").unwrap();
        f.zero_ahead(200_000).unwrap();
        f.append(b"defg").unwrap();
        f.zero_ahead(100).unwrap(); // behind the zeros: nothing to do
        f.sync().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 200_000);
        assert_eq!(&bytes[..7], b"abcdefg");
        assert!(bytes[7..].iter().all(|&b| b == 0));
        assert_eq!(f.len(), 7);
        drop(f);

        // O_APPEND would put the next append after the zeros, so none are written.
        let mut f = RealFs.open_append(&path).unwrap();
        f.zero_ahead(300_000).unwrap();
        f.append(b"h").unwrap();
        f.sync().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 200_001);
    }

    #[test]
    fn direct_reads_return_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        for fs in [&RealFs as &dyn FileSystem, &DirectReadFs] {
            let f = fs.open(&path).unwrap();
            for (off, len) in [(0u64, 10usize), (4095, 3), (5000, 9000), (19_990, 10)] {
                assert_eq!(f.read_at(off, len).unwrap(), &data[off as usize..off as usize + len]);
            }
            assert!(f.read_at(19_995, 10).is_err());
        }
    }
}
