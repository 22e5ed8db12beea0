//! The disk's sequential write bandwidth, measured in the same run as fillseq with
//! `dd if=/dev/zero of=<tmpfile> bs=1M count=N conv=fdatasync` in the database's file
//! system, so fillseq's user-data MB/s can be set against it.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::BenchResult;

/// One `dd` measurement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DdResult {
    /// The command run.
    pub command: String,
    /// MiB written.
    pub mib: u64,
    /// Wall time of the command (including the final fdatasync).
    pub seconds: f64,
    /// MiB per second from `mib` and `seconds`.
    pub mib_per_sec: f64,
    /// dd's own summary line.
    pub dd_says: Option<String>,
}

/// Writes `mib` MiB of zeros to a temporary file in `dir` with `dd` and removes it.
pub fn measure(dir: &Path, mib: u64) -> BenchResult<DdResult> {
    let file = dir.join("dd-seq-write.tmp");
    let of = format!("of={}", file.display());
    let count = format!("count={mib}");
    let args = ["if=/dev/zero", of.as_str(), "bs=1M", count.as_str(), "conv=fdatasync"];
    let command = format!("dd {}", args.join(" "));
    let start = Instant::now();
    let out = Command::new("dd")
        .args(args)
        .output()
        .map_err(|e| format!("running `{command}`: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        return Err(format!(
            "`{command}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dd_says = stderr.lines().last().map(|l| l.trim().to_string());
    Ok(DdResult {
        command,
        mib,
        seconds,
        mib_per_sec: mib as f64 / seconds.max(1e-9),
        dd_says,
    })
}
