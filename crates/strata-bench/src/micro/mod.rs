//! `micro`: the deferred-update paper's microbenchmark (section 5.1, Table 1, Figures
//! 7-9). A table `test(f1 pk, f2..f5)` with four non-unique secondary indexes is
//! preloaded, then client threads commit batches of 1..=500 random REPLACE/DELETE
//! statements for a fixed time while statements/s are sampled every second. Strata
//! eager and deferred run one after the other on fresh directories, with SQLite and
//! Tarantool Vinyl (eager via a trigger, deferred) beside them.

pub(crate) mod harness;
mod report;
mod stats;
pub(crate) mod watchdog;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::{RunOutput, RunSpec};
use report::{EngineResult, Status};
pub use stats::{EngineStats, Micro, Probe};
use workload::Workload;

use crate::BenchResult;
use crate::engines::TableEngine;
use crate::engines::sqlite::SqliteTables;
use crate::engines::strata::{MicroSettings, StrataTables, micro_schema, paper_options};
use crate::engines::tarantool;
use crate::workdir::StorageArgs;

/// The engines `micro` can drive, in the order of the default run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// Strata, secondary indexes maintained eagerly (hidden reads).
    StrataEager,
    /// Strata, secondary-index deletes deferred to flushes and compactions.
    StrataDeferred,
    /// SQLite (bundled), WAL, synchronous=OFF.
    Sqlite,
    /// Tarantool 2.6 Vinyl with an on_replace trigger (reads old tuples).
    TarantoolEager,
    /// Tarantool 2.6 Vinyl as shipped (deferred secondary deletes).
    TarantoolDeferred,
}

impl EngineKind {
    /// The engine's name in flags and tables.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::StrataEager => "strata-eager",
            EngineKind::StrataDeferred => "strata-deferred",
            EngineKind::Sqlite => "sqlite",
            EngineKind::TarantoolEager => "tarantool-eager",
            EngineKind::TarantoolDeferred => "tarantool-deferred",
        }
    }
}

/// Arguments of `strata-bench micro`.
#[derive(clap::Args)]
pub struct MicroArgs {
    /// Engines to run, one after the other.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "strata-eager,strata-deferred,sqlite,tarantool-eager,tarantool-deferred"
    )]
    engines: Vec<EngineKind>,
    /// Rows preloaded; keys and field values are drawn from 1..=rows [default: 1000000,
    /// --quick 100000].
    #[arg(long)]
    rows: Option<u64>,
    /// Length of each engine's timed run [default: 120, --quick 10].
    #[arg(long)]
    seconds: Option<u64>,
    /// Client threads (Tarantool: fibers).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Largest batch; batch sizes are uniform in 1..=max-batch.
    #[arg(long, default_value_t = 500)]
    max_batch: usize,
    #[command(flatten)]
    store: StorageArgs,
    /// JSON file with every sample and summary.
    #[arg(long, default_value = "target/strata-bench/micro.json")]
    json: PathBuf,
    /// PNG plot of statements/s (and entries on disk, flushes) over time.
    #[arg(long, default_value = "target/strata-bench/micro.png")]
    plot: PathBuf,
    /// 100,000 rows and 10 s per engine: a smoke run of about a minute.
    #[arg(long)]
    quick: bool,
    /// Seed of the workload generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Runs the benchmark.
pub fn run(a: &MicroArgs) -> BenchResult<()> {
    let spec = RunSpec {
        workload: Workload {
            rows: a.rows.unwrap_or(if a.quick { 100_000 } else { 1_000_000 }),
            max_batch: a.max_batch.max(1),
            seed: a.seed,
        },
        threads: a.threads.max(1),
        seconds: a.seconds.unwrap_or(if a.quick { 10 } else { 120 }).max(1),
    };
    let settings = a.store.settings();
    let mut engines: Vec<EngineKind> = Vec::new();
    for e in &a.engines {
        if !engines.contains(e) {
            engines.push(*e);
        }
    }
    report::print_header(&spec, a, &engines);
    let (base, _tmp) = a.store.root("strata-bench-micro-")?;
    // (engine running now, results so far), shared with the hang watchdog.
    let progress: Arc<Mutex<(Option<EngineKind>, Vec<EngineResult>)>> = Arc::default();
    let (watched, quick) = (progress.clone(), a.quick);
    watchdog::spawn(HANG_LIMIT, move |idle| {
        let (now, done) = match watched.lock() {
            Ok(g) => (g.0, g.1.clone()),
            Err(_) => (None, Vec::new()),
        };
        let name = now.map_or("?", EngineKind::name);
        report::print_results(&spec, quick, &done);
        println!(
            "ABORTED: {name} made no progress for {} s (deadlock or endless stall?); \
             engines after it were not run, no JSON or plot written",
            idle.as_secs()
        );
        std::process::exit(3);
    });
    for kind in engines {
        let dir = base.join(kind.name());
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let load = load_average();
        if let Ok(mut p) = progress.lock() {
            p.0 = Some(kind);
        }
        watchdog::arm(true);
        let mut r = run_engine(kind, &spec, settings, a.store.cache_size, &dir);
        watchdog::arm(false);
        if let Some(l) = load {
            r.notes
                .push(format!("load average before the run {l} (a shared machine is noisy)"));
        }
        eprintln!("{}", report::one_line(&r));
        if let Ok(mut p) = progress.lock() {
            p.1.push(r);
        }
        if a.store.dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let results = std::mem::take(&mut progress.lock().map_err(|_| "results lock poisoned")?.1);
    report::print_results(&spec, a.quick, &results);
    report::write_json(&a.json, &spec, a, &results)?;
    println!("json: {}", a.json.display());
    match report::plot(&a.plot, &results) {
        Ok(()) => println!("plot: {}", a.plot.display()),
        Err(e) => println!("plot: not written ({e})"),
    }
    Ok(())
}

/// How long an engine may go without progress (a preload batch, a sample, a line from
/// Tarantool) before the benchmark is aborted as hung.
const HANG_LIMIT: Duration = Duration::from_secs(900);

/// The 1, 5 and 15 minute load averages, from /proc/loadavg.
fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn run_engine(kind: EngineKind, spec: &RunSpec, settings: MicroSettings, cache: usize, dir: &Path) -> EngineResult {
    let label = kind.name();
    match kind {
        EngineKind::StrataEager | EngineKind::StrataDeferred => {
            let mode = if kind == EngineKind::StrataEager {
                "eager"
            } else {
                "deferred"
            };
            let notes = vec![format!(
                "schema: {}; block cache {} bytes, direct reads {}",
                micro_schema(mode),
                settings.cache_bytes,
                settings.direct_reads
            )];
            in_process(kind, spec, notes, || {
                Ok(Box::new(StrataTables::open_micro(dir, mode, paper_options(settings))?))
            })
        }
        EngineKind::Sqlite => {
            let notes = vec![format!(
                "SQLite {} (bundled), WAL, synchronous=OFF, page_size 8192, cache {cache} bytes per connection; \
                 one connection per thread, writers serialized by SQLite (BEGIN IMMEDIATE, busy_timeout)",
                rusqlite::version()
            )];
            in_process(kind, spec, notes, || {
                Ok(Box::new(SqliteTables::create_micro(dir, cache)?))
            })
        }
        EngineKind::TarantoolEager | EngineKind::TarantoolDeferred => {
            let eager = kind == EngineKind::TarantoolEager;
            match tarantool::run(spec, eager, cache, dir, label) {
                Err(why) => EngineResult::skipped(kind, format!("tarantool unavailable: {why}")),
                Ok(t) => EngineResult::new(
                    kind,
                    if t.failure.is_some() {
                        Status::Failed
                    } else {
                        Status::Ran
                    },
                    t.failure,
                    t.notes,
                    t.output,
                    t.stats,
                ),
            }
        }
    }
}

fn in_process<'a>(
    kind: EngineKind,
    spec: &RunSpec,
    notes: Vec<String>,
    open: impl FnOnce() -> BenchResult<Box<dyn TableEngine<Micro> + 'a>>,
) -> EngineResult {
    let engine = match open() {
        Ok(e) => e,
        Err(e) => {
            return EngineResult::new(
                kind,
                Status::Failed,
                Some(format!("open: {e}")),
                notes,
                RunOutput::default(),
                EngineStats::default(),
            );
        }
    };
    let run = harness::drive(&*engine, spec, kind.name());
    let r = match run {
        Err(e) => EngineResult::new(
            kind,
            Status::Failed,
            Some(e.to_string()),
            notes,
            RunOutput::default(),
            EngineStats::default(),
        ),
        Ok(out) => match engine.stats() {
            Ok(stats) => EngineResult::new(kind, Status::Ran, None, notes, out, stats),
            Err(e) => EngineResult::new(
                kind,
                Status::Failed,
                Some(e.to_string()),
                notes,
                out,
                EngineStats::default(),
            ),
        },
    };
    drop(engine);
    r
}
