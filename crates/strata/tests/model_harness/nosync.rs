//! [`NoSyncFs`], shared by the test harnesses `model_harness` and `table_harness`.

use std::path::Path;
use std::sync::Arc;

use strata::fs::{FileSystem, RandomAccessFile, RealFs, WritableFile};

/// The real file system without fsyncs: data still reaches the operating system (so a
/// closed or even killed process loses nothing), but tests do not wait for the disk.
/// For tests of logical behaviour (process restarts, not power loss), where fsyncs on a
/// busy disk would dominate the run time.
#[derive(Debug)]
pub struct NoSyncFs;

struct NoSyncFile(Box<dyn WritableFile>);

impl WritableFile for NoSyncFile {
    fn append(&mut self, data: &[u8]) -> strata::Result<()> {
        self.0.append(data)
    }
    fn flush(&mut self) -> strata::Result<()> {
        self.0.flush()
    }
    fn sync(&mut self) -> strata::Result<()> {
        self.0.flush()
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl FileSystem for NoSyncFs {
    fn create(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        Ok(Box::new(NoSyncFile(RealFs.create(path)?)))
    }
    fn open_append(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        Ok(Box::new(NoSyncFile(RealFs.open_append(path)?)))
    }
    fn open(&self, path: &Path) -> strata::Result<Arc<dyn RandomAccessFile>> {
        RealFs.open(path)
    }
    fn read_all(&self, path: &Path) -> strata::Result<Vec<u8>> {
        RealFs.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> strata::Result<()> {
        RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> strata::Result<Vec<String>> {
        RealFs.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn sync_dir(&self, _dir: &Path) -> strata::Result<()> {
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }
}
