//! `strata-bench crash`: the crash test. A child process (`strata-bench crash-child`)
//! runs the workload of [`workload`] with sync on — two key-value streams and a table
//! stream per index mode, each in its own thread — and logs every acknowledged commit.
//! The parent kills it with SIGKILL at random moments (some aimed at a running flush or
//! compaction, some during the child's own recovery), reopens the database and checks
//! that every acknowledged commit is there, no commit is half-applied, and
//! `Db::check` passes ([`verify`]). Then the next cycle resumes on the same database.
//!
//! `--quick` (a few dozen cycles) runs in CI as a test; `--cycles` or `--minutes` make
//! the long version.

mod child;
mod verify;
mod workload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

pub use child::{CrashChildArgs, run as run_child};
use workload::{STREAMS, StreamModel};

use crate::BenchResult;
use crate::report::{count_bar, thousands, write_json};

/// Arguments of `strata-bench crash`.
#[derive(clap::Args)]
pub struct CrashArgs {
    /// Kill cycles [default: 200, --quick 30].
    #[arg(long)]
    cycles: Option<u64>,
    /// Run cycles for this many minutes instead of a fixed count (the long version).
    #[arg(long)]
    minutes: Option<f64>,
    /// Shortest time the child runs before the kill.
    #[arg(long, default_value_t = 20)]
    min_kill_ms: u64,
    /// Longest time the child runs before the kill.
    #[arg(long, default_value_t = 800)]
    max_kill_ms: u64,
    /// Database directory (default: a temporary one, removed unless a cycle fails).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// JSON file with the figures.
    #[arg(long, default_value = "target/strata-bench/crash.json")]
    json: PathBuf,
    /// 30 cycles: the version CI runs.
    #[arg(long)]
    quick: bool,
    /// Seed of the kill schedule.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// What the child was doing when it was killed (as it last reported, within ~2 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
enum KillPoint {
    /// Before the child had finished opening the database (recovery).
    DuringOpen,
    /// While a memtable flush was running.
    MidFlush,
    /// While a compaction was running (and no flush).
    MidCompaction,
    /// Committing with no background work running.
    Foreground,
}

#[derive(Debug, Default, Serialize)]
struct StreamFigures {
    acknowledged: u64,
    recovered: u64,
    in_flight_recovered: u64,
}

#[derive(Debug, Serialize)]
struct Figures {
    cycles_survived: u64,
    kills: HashMap<KillPoint, u64>,
    streams: HashMap<&'static str, StreamFigures>,
    flushes: u64,
    compactions: u64,
    seconds: f64,
}

/// Runs the crash test; an error names the cycle and what was lost or inconsistent.
pub fn run(a: &CrashArgs) -> BenchResult<()> {
    if a.min_kill_ms > a.max_kill_ms {
        return Err("--min-kill-ms must not exceed --max-kill-ms".into());
    }
    let (root, _tmp) = crate::workdir::root(a.dir.as_deref(), "strata-crash")?;
    let db_dir = root.join("db");
    let ack_log = root.join("acks.log");
    let stderr_log = root.join("child-stderr.log");
    if db_dir.exists() {
        return Err(format!("{} exists: the crash test needs a new database", db_dir.display()).into());
    }
    child::create(&db_dir)?;

    let cycles = match (a.minutes, a.cycles) {
        (Some(_), c) => c.unwrap_or(u64::MAX),
        (None, c) => c.unwrap_or(if a.quick { 30 } else { 200 }),
    };
    let until = a.minutes.map(|m| Instant::now() + Duration::from_secs_f64(m * 60.0));
    let mut rng = StdRng::seed_from_u64(a.seed);
    let mut models: Vec<StreamModel> = STREAMS.iter().map(|s| StreamModel::new(*s)).collect();
    let mut fig = Figures {
        cycles_survived: 0,
        kills: HashMap::new(),
        streams: STREAMS.iter().map(|s| (s.name, StreamFigures::default())).collect(),
        flushes: 0,
        compactions: 0,
        seconds: 0.0,
    };
    let started = Instant::now();
    let bar = count_bar(if cycles == u64::MAX { 0 } else { cycles }, "crash", "kill cycles");
    let mut cycle = 0;
    let mut open_micros = 20_000;
    while cycle < cycles && until.is_none_or(|u| Instant::now() < u) {
        cycle += 1;
        let point = kill_one(&db_dir, &ack_log, &stderr_log, &mut rng, a, cycle, &mut open_micros)?;
        *fig.kills.entry(point).or_default() += 1;
        let acked = read_acks(&ack_log)?;
        let v = verify::verify(&db_dir, &mut models, &acked).map_err(|e| {
            bar.abandon();
            format!(
                "cycle {cycle} (killed {point:?}): {e}\n  database kept in {} (child stderr: {})",
                db_dir.display(),
                stderr_log.display()
            )
        });
        let v = match v {
            Ok(v) => v,
            Err(e) => {
                if a.dir.is_none() {
                    // Keep the evidence: the temporary directory would be removed.
                    let keep = std::env::temp_dir().join(format!("strata-crash-failed-{}", std::process::id()));
                    let _ = std::fs::rename(&root, &keep);
                    return Err(format!("{e}\n  (moved to {})", keep.display()).into());
                }
                return Err(e.into());
            }
        };
        for s in STREAMS {
            let f = fig.streams.entry(s.name).or_default();
            f.acknowledged = acked.get(s.name).map_or(0, |n| n + 1);
            f.recovered = v.recovered.get(s.name).copied().flatten().map_or(0, |n| n + 1);
        }
        for (name, last) in &v.recovered {
            if last.is_some() && *last != acked.get(*name).copied() {
                fig.streams.entry(name).or_default().in_flight_recovered += 1;
            }
        }
        fig.flushes = v.flushes;
        fig.compactions = v.compactions;
        fig.cycles_survived = cycle;
        bar.inc(1);
        bar.set_message(format!("{} flushes, {} compactions", v.flushes, v.compactions));
    }
    bar.finish_and_clear();
    fig.seconds = started.elapsed().as_secs_f64();
    print_figures(&fig);
    write_json(&a.json, &fig)?;
    Ok(())
}

/// Runs the child once and kills it; returns what the kill interrupted.
fn kill_one(
    db: &Path,
    ack_log: &Path,
    stderr_log: &Path,
    rng: &mut StdRng,
    a: &CrashArgs,
    cycle: u64,
    open_micros: &mut u64,
) -> BenchResult<KillPoint> {
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(stderr_log)?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(&exe)
        .arg("crash-child")
        .arg("--db")
        .arg(db)
        .arg("--ack-log")
        .arg(ack_log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting the child {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().ok_or("child stdout")?;
    let (rx, reader) = crate::engines::line_reader(stdout);
    // Every fifth cycle kills the child while it recovers; odd cycles wait for a
    // flush or compaction to be running; the rest kill at a random moment.
    let mut state = Watch::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let point = if cycle.is_multiple_of(5) {
        state.wait_until(
            |s| s.opening,
            &rx,
            &mut child,
            stderr_log,
            deadline,
            || format!("cycle {cycle}: the child did not start within 60 s"),
        )?;
        // Somewhere inside the open, judging by how long the last one took.
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..=*open_micros)));
        state.drain(&rx);
        if state.ready {
            state.point()
        } else {
            KillPoint::DuringOpen
        }
    } else {
        state.wait_until(
            |s| s.ready,
            &rx,
            &mut child,
            stderr_log,
            deadline,
            || format!("cycle {cycle}: the child did not open the database within 60 s"),
        )?;
        let wait = Duration::from_millis(rng.gen_range(a.min_kill_ms..=a.max_kill_ms));
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            state.wait(&rx, left);
        }
        if cycle % 2 == 1 {
            let aim = Instant::now() + Duration::from_secs(2);
            while state.point() == KillPoint::Foreground && Instant::now() < aim {
                state.wait(&rx, Duration::from_millis(5));
            }
        }
        exited_early(&mut child, stderr_log)?;
        state.point()
    };
    kill(&mut child)?;
    let _ = reader.join();
    if let Some(us) = state.open_micros {
        *open_micros = us;
    }
    Ok(point)
}

fn kill(child: &mut Child) -> BenchResult<()> {
    // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no fsync runs.
    child.kill()?;
    child.wait()?;
    Ok(())
}

fn exited_early(child: &mut Child, stderr_log: &Path) -> BenchResult<()> {
    if let Some(status) = child.try_wait()? {
        let err = std::fs::read_to_string(stderr_log).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "the child stopped by itself ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
        .into());
    }
    Ok(())
}

/// The child's last report.
#[derive(Default)]
struct Watch {
    opening: bool,
    ready: bool,
    open_micros: Option<u64>,
    flushing: bool,
    compactions: u64,
}

impl Watch {
    fn take(&mut self, line: &str) {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("OPENING") => self.opening = true,
            Some("READY") => {
                self.ready = true;
                self.open_micros = w.next().and_then(|us| us.parse().ok());
            }
            Some("BG") => {
                self.flushing = w.next() == Some("1");
                self.compactions = w.next().and_then(|c| c.parse().ok()).unwrap_or(0);
            }
            _ => {}
        }
    }

    fn wait(&mut self, rx: &mpsc::Receiver<String>, d: Duration) {
        if let Ok(line) = rx.recv_timeout(d) {
            self.take(&line);
        }
        self.drain(rx);
    }

    /// Reads the child's lines until `done` holds; kills the child at `deadline`.
    fn wait_until(
        &mut self,
        done: impl Fn(&Watch) -> bool,
        rx: &mpsc::Receiver<String>,
        child: &mut Child,
        stderr_log: &Path,
        deadline: Instant,
        late: impl FnOnce() -> String,
    ) -> BenchResult<()> {
        while !done(self) {
            self.wait(rx, Duration::from_millis(50));
            exited_early(child, stderr_log)?;
            if Instant::now() > deadline {
                kill(child)?;
                return Err(late().into());
            }
        }
        Ok(())
    }

    fn drain(&mut self, rx: &mpsc::Receiver<String>) {
        while let Ok(line) = rx.try_recv() {
            self.take(&line);
        }
    }

    fn point(&self) -> KillPoint {
        if self.flushing {
            KillPoint::MidFlush
        } else if self.compactions > 0 {
            KillPoint::MidCompaction
        } else {
            KillPoint::Foreground
        }
    }
}

/// The last acknowledged commit of each stream. A line the kill cut short (there
/// should be none: each is one write) is ignored.
fn read_acks(path: &Path) -> BenchResult<HashMap<String, u64>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e.into()),
    };
    let mut last: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if let (Some(s), Some(Ok(n))) = (w.next(), w.next().map(str::parse::<u64>)) {
            let e = last.entry(s.to_string()).or_insert(n);
            if n < *e {
                return Err(format!("acknowledgement log {}: {s} went back from {e} to {n}", path.display()).into());
            }
            *e = n;
        }
    }
    Ok(last)
}

fn print_figures(f: &Figures) {
    println!(
        "crash: {} kill cycles survived in {:.0} s: after each, every acknowledged commit was there, \
         none half-applied, check passed",
        f.cycles_survived, f.seconds
    );
    let k = |p| f.kills.get(&p).copied().unwrap_or(0);
    println!(
        "kills: {} mid-flush, {} mid-compaction, {} during recovery, {} with no background work",
        k(KillPoint::MidFlush),
        k(KillPoint::MidCompaction),
        k(KillPoint::DuringOpen),
        k(KillPoint::Foreground)
    );
    println!(
        "{:<10} {:>14} {:>14} {:>22}",
        "stream", "acknowledged", "recovered", "unacknowledged found"
    );
    for s in STREAMS {
        if let Some(x) = f.streams.get(s.name) {
            println!(
                "{:<10} {:>14} {:>14} {:>22}",
                s.name,
                thousands(x.acknowledged),
                thousands(x.recovered),
                x.in_flight_recovered
            );
        }
    }
    println!(
        "{} flushes and {} compactions in all",
        thousands(f.flushes),
        thousands(f.compactions)
    );
}
