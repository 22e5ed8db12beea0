//! Finding (and, as root, installing) the `tarantool` binary, and running a Lua script in
//! it while reading the JSON lines it prints.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `tarantool` binary on `PATH`, installing Debian's package first if it is missing
/// and we are root. `Err` says why there is none (the peer is then skipped).
pub fn ensure_installed() -> Result<PathBuf, String> {
    if let Some(p) = on_path("tarantool") {
        return Ok(p);
    }
    if !is_root() {
        return Err("not on PATH, and not root to `apt-get install tarantool`".into());
    }
    eprintln!("tarantool not found: installing Debian's package (apt-get install -y tarantool)");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "tarantool"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
    };
    let ok = |s: std::io::Result<ExitStatus>| s.map(|s| s.success()).unwrap_or(false);
    if !ok(install()) {
        // The package lists may be missing or stale: refresh once and retry.
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .status();
        if !ok(install()) {
            return Err("`apt-get install -y tarantool` failed".into());
        }
    }
    on_path("tarantool").ok_or_else(|| "installed, but still not on PATH".into())
}

/// `tarantool --version`'s first line.
pub fn version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_else(|| "tarantool (unknown version)".into())
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

fn is_root() -> bool {
    // The real uid, from /proc (no libc binding needed).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// How a script run ended.
#[derive(Debug)]
pub struct ScriptExit {
    /// Exit status, `None` if it was killed for silence.
    pub status: Option<ExitStatus>,
    /// First lines of its stderr.
    pub stderr_head: String,
    /// Last lines of its stderr.
    pub stderr_tail: String,
}

impl ScriptExit {
    /// A human description of a failed exit (`None` if it succeeded).
    pub fn failure(&self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        let why = match self.status {
            None => "killed after printing nothing for too long".to_string(),
            Some(s) if s.success() => return None,
            // Tarantool's fatal-signal handler prints "Segmentation fault" and a
            // backtrace, then aborts (SIGABRT).
            Some(_) if self.stderr_head.contains("Segmentation fault") => "crashed with SIGSEGV".to_string(),
            Some(s) => match s.signal() {
                Some(11) => "crashed with SIGSEGV".to_string(),
                Some(sig) => format!("killed by signal {sig}"),
                None => format!("exited with {s}"),
            },
        };
        let stderr = if self.stderr_head.contains("Segmentation fault") {
            &self.stderr_head
        } else {
            &self.stderr_tail
        };
        Some(if stderr.trim().is_empty() {
            why
        } else {
            format!("{why}; stderr: {}", stderr.trim())
        })
    }
}

/// Runs `tarantool script` in `dir`, calling `on_line` for every stdout line as it
/// arrives; kills the process if it prints nothing for `silence`.
pub fn run_script(
    bin: &Path,
    script: &Path,
    dir: &Path,
    silence: Duration,
    mut on_line: impl FnMut(&str),
) -> std::io::Result<ScriptExit> {
    let stderr_path = dir.join("stderr.log");
    let mut child = Command::new(bin)
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
    let (rx, reader) = super::line_reader(stdout);
    let mut killed = false;
    loop {
        match rx.recv_timeout(silence) {
            Ok(line) => on_line(&line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                child.kill()?;
                killed = true;
                break;
            }
        }
    }
    let status = child.wait()?;
    let _ = reader.join();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Ok(ScriptExit {
        status: (!killed).then_some(status),
        stderr_head: stderr.lines().take(5).collect::<Vec<_>>().join(" | "),
        stderr_tail: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
    })
}
