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
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealWritable {
    path: PathBuf,
    file: std::io::BufWriter<File>,
    len: u64,
}

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
    fn len(&self) -> u64 {
        self.len
    }
}

struct RealRandomAccess {
    path: PathBuf,
    file: File,
    size: u64,
}

impl RandomAccessFile for RealRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        if offset.checked_add(len as u64).is_none_or(|end| end > self.size) {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("read of {len} bytes past end of file (size {})", self.size),
            ));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
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
        }))
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Arc::new(RealRandomAccess {
            path: path.to_path_buf(),
            file,
            size,
        }))
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
}
