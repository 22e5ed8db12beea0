//! Tarantool Vinyl, for `micro`: finding (and, as root, installing) the `tarantool`
//! binary, and running the workload inside the Tarantool process as a generated Lua
//! script (`tarantool.lua`, written as `bench.lua`), so no network is measured; the
//! script's JSON lines become the same [`RunOutput`] the in-process harness produces.
//!
//! Vinyl 2.6 always defers secondary-index deletes (`defer_deletes` arrived in 2.10);
//! an `on_replace` trigger forces the old-tuple read, which is its eager mode. With that
//! trigger concurrent write transactions crash 2.6, so eager mode serializes commits.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::Deserialize;

use crate::BenchResult;
use crate::micro::harness::{PRELOAD_BATCH, RunOutput, RunSpec, Sample};
use crate::micro::{EngineStats, Probe};
use crate::report::{count_bar, rate, seconds_bar};

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

pub(crate) fn is_root() -> bool {
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

// ---------------------------------------------------------------------------------------
// micro

const SCRIPT: &str = include_str!("tarantool.lua");

/// Note printed with eager-mode results.
pub const EAGER_NOTE: &str = "an on_replace trigger forces Vinyl 2.6 to read old tuples; \
     since concurrent write transactions then crash 2.6 (SIGSEGV), its commits are serialized by a latch \
     (4 fibers, one transaction at a time)";

/// A finished (or failed) Tarantool run.
pub struct TarantoolResult {
    /// What was measured (possibly partial).
    pub output: RunOutput,
    /// Counters at the end.
    pub stats: EngineStats,
    /// Version and notes.
    pub notes: Vec<String>,
    /// Why the run failed, if it did.
    pub failure: Option<String>,
}

/// The Lua script with the run's parameters filled in.
pub fn script(spec: &RunSpec, eager: bool, cache_bytes: usize, work_dir: &Path) -> String {
    let w = &spec.workload;
    SCRIPT
        .replace("@ROWS@", &w.rows.to_string())
        .replace("@THREADS@", &spec.threads.to_string())
        .replace("@MAX_BATCH@", &w.max_batch.to_string())
        .replace("@SECONDS@", &spec.seconds.to_string())
        // LuaJIT's math.randomseed takes a double: keep the seed exact.
        .replace("@SEED@", &(w.seed % (1 << 52)).to_string())
        .replace("@EAGER@", if eager { "true" } else { "false" })
        .replace("@PRELOAD_BATCH@", &PRELOAD_BATCH.to_string())
        .replace("@CACHE_BYTES@", &cache_bytes.to_string())
        .replace("@WORK_DIR@", &work_dir.display().to_string().replace('\'', "\\'"))
}

/// One stdout line of the script.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Preload {
        done: u64,
    },
    Preloaded {
        preload_secs: f64,
        settle_secs: f64,
    },
    Sample {
        t: f64,
        rate: f64,
        total: u64,
        #[serde(flatten)]
        counters: Counters,
    },
    Summary {
        elapsed_secs: f64,
        statements: u64,
        batches: u64,
        aborts: u64,
        last_error: Option<String>,
        version: Option<String>,
        #[serde(flatten)]
        counters: Counters,
    },
}

/// Counters the script reports relative to the end of the preload (entries and bytes
/// are totals).
#[derive(Debug, Clone, Copy, Deserialize)]
struct Counters {
    flushes: u64,
    compactions: u64,
    entries: u64,
    bytes: u64,
    lookups: u64,
}

impl Counters {
    fn probe(&self) -> Probe {
        Probe {
            flushes: Some(self.flushes),
            compactions: Some(self.compactions),
            entries: Some(self.entries),
            bytes: Some(self.bytes),
        }
    }
}

/// Runs the workload in Tarantool in `dir` (created fresh). `Err` means Tarantool is not
/// available (the caller reports the engine as skipped).
pub fn run(
    spec: &RunSpec,
    eager: bool,
    cache_bytes: usize,
    dir: &Path,
    label: &str,
) -> Result<TarantoolResult, String> {
    let bin = ensure_installed()?;
    let tarantool_version = version(&bin);
    let mut notes = vec![tarantool_version.clone()];
    if eager {
        notes.push(EAGER_NOTE.to_string());
    }
    match drive(&bin, &tarantool_version, spec, eager, cache_bytes, dir, label) {
        Ok((output, stats, failure, more)) => {
            notes.extend(more);
            Ok(TarantoolResult {
                output,
                stats,
                notes,
                failure,
            })
        }
        Err(e) => Ok(TarantoolResult {
            output: RunOutput::default(),
            stats: EngineStats::default(),
            notes,
            failure: Some(e.to_string()),
        }),
    }
}

type Driven = (RunOutput, EngineStats, Option<String>, Vec<String>);

fn drive(
    bin: &Path,
    tarantool_version: &str,
    spec: &RunSpec,
    eager: bool,
    cache_bytes: usize,
    dir: &Path,
    label: &str,
) -> BenchResult<Driven> {
    std::fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    let script_path = dir.join("bench.lua");
    std::fs::write(&script_path, script(spec, eager, cache_bytes, &dir))?;
    let mut out = RunOutput::default();
    let mut stats = EngineStats::default();
    let mut notes = Vec::new();
    let mut summary_seen = false;
    let preload_bar = count_bar(spec.workload.rows, label, "rows preloaded");
    let mut run_bar = None;
    // Generous: the preload prints every PRELOAD_BATCH rows, samples every second.
    let silence = Duration::from_secs(600);
    let exit = run_script(bin, &script_path, &dir, silence, |text| {
        crate::micro::watchdog::beat();
        let line = match serde_json::from_str::<Line>(text) {
            Ok(l) => l,
            Err(_) => {
                notes.push(format!("tarantool said: {text}"));
                return;
            }
        };
        match line {
            Line::Preload { done } => preload_bar.set_position(done),
            Line::Preloaded {
                preload_secs,
                settle_secs,
            } => {
                out.preload_secs = preload_secs;
                out.settle_secs = settle_secs;
                preload_bar.finish_and_clear();
                run_bar = Some(seconds_bar(spec.seconds, label));
            }
            Line::Sample {
                t,
                rate: r,
                total,
                counters,
            } => {
                out.samples.push(Sample {
                    t,
                    rate: r,
                    total,
                    probe: counters.probe(),
                });
                if let Some(pb) = &run_bar {
                    pb.set_position(out.samples.len() as u64);
                    pb.set_message(format!("{} statements/s", rate(r)));
                }
            }
            Line::Summary {
                elapsed_secs,
                statements,
                batches,
                aborts,
                last_error,
                version,
                counters,
            } => {
                summary_seen = true;
                out.elapsed_secs = elapsed_secs;
                out.statements = statements;
                out.batches = batches;
                stats = EngineStats {
                    probe: counters.probe(),
                    hidden_reads: Some(counters.lookups),
                    ..EngineStats::default()
                };
                if let Some(v) = version.filter(|v| !tarantool_version.contains(v.as_str())) {
                    notes.push(format!("box.info.version {v}"));
                }
                if aborts > 0 {
                    notes.push(format!(
                        "{aborts} transactions aborted (not counted); last error: {}",
                        last_error.unwrap_or_default()
                    ));
                }
            }
        }
    })?;
    preload_bar.finish_and_clear();
    if let Some(pb) = run_bar {
        pb.finish_and_clear();
    }
    let failure = exit
        .failure()
        .or_else(|| (!summary_seen).then(|| "the script ended without a summary".to_string()));
    if failure.is_some() && out.statements == 0 {
        out.statements = out.samples.last().map_or(0, |s| s.total);
        out.elapsed_secs = out.samples.last().map_or(0.0, |s| s.t);
    }
    Ok((out, stats, failure, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::micro::workload::Workload;

    #[test]
    fn script_has_every_parameter_filled_in() {
        let spec = RunSpec {
            workload: Workload {
                rows: 1234,
                max_batch: 500,
                seed: 42,
            },
            threads: 4,
            seconds: 9,
        };
        let s = script(&spec, true, 64 << 20, Path::new("/tmp/x"));
        assert!(!s.contains('@'), "unfilled marker left");
        assert!(s.contains("local ROWS = 1234"));
        assert!(s.contains("local EAGER = true"));
        assert!(s.contains("work_dir = '/tmp/x'"));
        assert!(!s.contains("defer_deletes"), "Vinyl 2.6 has no defer_deletes option");
    }

    #[test]
    fn sample_and_summary_lines_parse() {
        let l: Line = serde_json::from_str(
            r#"{"type":"sample","t":1.0,"rate":5.5,"total":6,"flushes":1,"compactions":0,"entries":10,"bytes":99,"lookups":3}"#,
        )
        .unwrap();
        assert!(matches!(l, Line::Sample { total: 6, .. }));
        let l: Line = serde_json::from_str(
            r#"{"type":"summary","elapsed_secs":2.0,"statements":6,"batches":1,"aborts":0,"flushes":1,"compactions":0,"entries":10,"bytes":99,"lookups":3,"version":"2.6.0"}"#,
        )
        .unwrap();
        assert!(matches!(l, Line::Summary { statements: 6, .. }));
    }
}
