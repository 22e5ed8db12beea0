//! SSTables that no version names any more, waiting to be unlinked.
//!
//! A removed file is unlinked when its last holder lets go of it, and that holder is
//! often a reader: the iterator or lookup that still had the old version. Unlinking a
//! large file takes the file system's time (ext4 frees its extents, and with online
//! discard waits for the device), so a reader that did it itself would stall for
//! milliseconds. Holders hand the path to [`ObsoleteFiles`] instead, and the background
//! workers unlink what is queued each time they look for work (RocksDB's
//! `avoid_unnecessary_blocking_io` does the same).
//!
//! Invariant: a queued path belongs to no version, so unlinking it is safe at any time;
//! one left queued by a crash is an unreferenced file, which the next open sweeps.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::fs::FileSystem;

/// The queue of obsolete files of one database.
pub struct ObsoleteFiles {
    fs: Arc<dyn FileSystem>,
    queue: Mutex<Vec<PathBuf>>,
    /// Set when the database closes: nobody will drain the queue after that, so late
    /// holders unlink themselves.
    closed: AtomicBool,
    /// A read-only database: files are forgotten, never unlinked.
    keep: bool,
    /// Every file a durable edit removed and that is not unlinked yet (still held, or
    /// queued): `check` must not report these as unlisted.
    removed: Mutex<HashSet<PathBuf>>,
}

impl std::fmt::Debug for ObsoleteFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObsoleteFiles")
            .field("pending", &self.pending())
            .finish()
    }
}

impl ObsoleteFiles {
    /// An empty queue unlinking through `fs`.
    pub fn new(fs: Arc<dyn FileSystem>) -> Self {
        ObsoleteFiles {
            fs,
            queue: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            keep: false,
            removed: Mutex::new(HashSet::new()),
        }
    }

    /// A queue that never unlinks anything (a read-only database writes nothing).
    pub fn keeping(fs: Arc<dyn FileSystem>) -> Self {
        ObsoleteFiles {
            keep: true,
            ..Self::new(fs)
        }
    }

    /// Takes `path`, which no version names: queued, or unlinked at once once the
    /// database is closed.
    pub fn retire(&self, path: PathBuf) {
        if self.keep {
            self.removed.lock().remove(&path);
            return;
        }
        // Checked under the lock `close` drains with, so no path lands after the drain.
        let mut queue = self.queue.lock();
        if self.closed.load(Ordering::SeqCst) {
            drop(queue);
            // A failed unlink only leaks space; the next open sweeps unreferenced files.
            let _ = self.fs.remove(&path);
            self.removed.lock().remove(&path);
        } else {
            queue.push(path);
        }
    }

    /// Unlinks every queued file; returns how many were queued.
    pub fn purge(&self) -> usize {
        let paths = std::mem::take(&mut *self.queue.lock());
        for p in &paths {
            let _ = self.fs.remove(p);
        }
        let mut removed = self.removed.lock();
        for p in &paths {
            removed.remove(p);
        }
        paths.len()
    }

    /// Unlinks what is queued and makes later retirements unlink at once.
    pub fn close(&self) {
        {
            let _queue = self.queue.lock();
            self.closed.store(true, Ordering::SeqCst);
        }
        self.purge();
    }

    /// Notes that a durable edit removed `path`; it stays noted until unlinked.
    pub fn note_removed(&self, path: &Path) {
        self.removed.lock().insert(path.to_path_buf());
    }

    /// True if a durable edit removed `path` and it is not unlinked yet.
    pub fn is_removed(&self, path: &Path) -> bool {
        self.removed.lock().contains(path)
    }

    /// Files queued and not yet unlinked.
    pub fn pending(&self) -> usize {
        self.queue.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn retired_files_stay_until_purged_and_go_at_once_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        let q = ObsoleteFiles::new(fs);
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let c = dir.path().join("c");
        for p in [&a, &b, &c] {
            std::fs::write(p, b"x").unwrap();
        }
        q.retire(a.clone());
        q.retire(b.clone());
        assert!(a.exists() && b.exists(), "a reader's retirement must not unlink");
        assert_eq!(q.pending(), 2);
        assert_eq!(q.purge(), 2);
        assert!(!a.exists() && !b.exists());
        assert_eq!(q.pending(), 0);
        q.close();
        q.retire(c.clone());
        assert!(!c.exists(), "after close nobody drains the queue");
        assert_eq!(q.pending(), 0);
    }
}
