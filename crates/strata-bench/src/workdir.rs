//! Where a benchmark's databases live, and the page cache over them: the directory a
//! run writes in (`--dir` when given, else a temporary one removed at the end), the
//! storage arguments the table benchmarks share, and reading a tree's files once so
//! that a timed phase starts with them cached.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::BenchResult;
use crate::engines::strata::MicroSettings;

/// The storage arguments of `micro`, `churn` and `linkbench`.
#[derive(clap::Args)]
pub struct StorageArgs {
    /// Block cache bytes of each Strata database (SQLite: page cache per connection;
    /// Tarantool: vinyl_cache).
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_size: usize,
    /// Strata reads SSTables with direct I/O, bypassing the page cache (which linkbench
    /// then does not warm).
    #[arg(long)]
    pub direct_reads: bool,
    /// Parent directory of the engines' data directories (default: a temporary one,
    /// removed afterwards; with --dir they are kept).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl StorageArgs {
    /// The Strata settings these arguments choose.
    pub fn settings(&self) -> MicroSettings {
        MicroSettings {
            cache_bytes: self.cache_size,
            direct_reads: self.direct_reads,
        }
    }

    /// The run's directory ([`root`]).
    pub fn root(&self, prefix: &str) -> BenchResult<(PathBuf, Option<tempfile::TempDir>)> {
        root(self.dir.as_deref(), prefix)
    }
}

/// The run's directory: `dir` (created if missing, kept), or a new temporary directory
/// named `prefix...`, removed when the returned guard drops.
pub fn root(dir: Option<&Path>, prefix: &str) -> BenchResult<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            Ok((d.to_path_buf(), None))
        }
        None => {
            let tmp = tempfile::Builder::new().prefix(prefix).tempdir()?;
            Ok((tmp.path().to_path_buf(), Some(tmp)))
        }
    }
}

/// Reads every file under `dir` once, so the phase after it finds them in the page
/// cache (the VM evicts pages idle for ~30 s); returns the bytes read.
pub fn warm_page_cache(dir: &Path) -> BenchResult<u64> {
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                // Files may vanish under a running compaction: skip those.
                let Ok(mut f) = std::fs::File::open(entry.path()) else {
                    continue;
                };
                loop {
                    let n = f.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_reads_every_file_below() {
        let (dir, _guard) = root(None, "strata-bench-workdir-").unwrap();
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("x"), [0u8; 10]).unwrap();
        std::fs::write(dir.join("a/b/y"), [0u8; 5]).unwrap();
        assert_eq!(warm_page_cache(&dir).unwrap(), 15);
    }

    #[test]
    fn root_keeps_a_given_dir_and_removes_a_temporary_one() {
        let (tmp, guard) = root(None, "strata-bench-workdir-").unwrap();
        assert!(tmp.is_dir());
        drop(guard);
        assert!(!tmp.exists());
        let outer = tempfile::tempdir().unwrap();
        let given = outer.path().join("new");
        let (kept, guard) = root(Some(&given), "unused").unwrap();
        assert_eq!(kept, given);
        assert!(guard.is_none() && given.is_dir());
    }
}
