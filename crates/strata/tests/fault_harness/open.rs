//! Opening a database in a test binary that also spawns child processes.

use std::path::Path;
use std::time::{Duration, Instant};

use strata::{Db, Error, Options, Result};

/// `Db::open`, waiting up to 5 s while the directory's LOCK is held.
///
/// The lock is a `flock` on an open file description. When another test thread spawns a
/// child process, the child holds duplicates of every descriptor (close-on-exec ones
/// included) between its fork and its exec, so a database this process has just closed
/// can look open for that moment.
pub fn open_when_unlocked(dir: &Path, opts: Options) -> Result<Db> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Db::open(dir, opts.clone()) {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}
