//! `linkbench`: a LinkBench-like social-graph workload (Armstrong et al., SIGMOD 2013)
//! whose reads go through a secondary index: tables `node`, `link` (indexed by
//! `(id1, link_type, visibility, time)`) and `count`; a power-law graph is loaded, then
//! client threads issue LinkBench's default request mix with Zipf id popularity for a
//! fixed time. Strata eager and deferred run one after the other on fresh directories,
//! with SQLite beside them, and the deferred/eager ratios are reported.

mod bench;
mod dist;
pub(crate) mod model;
mod report;
pub(crate) mod runner;
pub(crate) mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use bench::{Counters, LinkBench, OpResult, Request, Settings};
use model::Graph;
use report::EngineRun;
use runner::RunSpec;
use workload::Shared;

use crate::BenchResult;
use crate::engines::TableEngine;
use crate::engines::sqlite::SqliteTables;
use crate::engines::strata::{StrataTables, link_schemas};
use crate::workdir::StorageArgs;

/// The engines `linkbench` can drive, in the order of the default run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// Strata, secondary index maintained eagerly (hidden reads).
    StrataEager,
    /// Strata, secondary-index deletes deferred to flushes and compactions.
    StrataDeferred,
    /// SQLite (bundled), WAL, synchronous=OFF.
    Sqlite,
    /// A second Strata eager engine, identical to the first:
    /// `--engines strata-eager,strata-eager-b` is an A/A control, whose ratio shows how
    /// far two runs of one engine differ on this machine.
    StrataEagerB,
}

impl EngineKind {
    /// The engine's name in flags and tables.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::StrataEager => "strata-eager",
            EngineKind::StrataDeferred => "strata-deferred",
            EngineKind::Sqlite => "sqlite",
            EngineKind::StrataEagerB => "strata-eager-b",
        }
    }
}

/// Arguments of `strata-bench linkbench`.
#[derive(clap::Args)]
pub struct LinkbenchArgs {
    /// Engines to run, one after the other.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "strata-eager,strata-deferred,sqlite"
    )]
    engines: Vec<EngineKind>,
    /// Nodes loaded (links: about 4 per node, power-law) [default: 1000000, --quick 50000].
    #[arg(long)]
    nodes: Option<u64>,
    /// Length of each engine's timed request mix [default: 60, --quick 10].
    #[arg(long)]
    seconds: Option<u64>,
    /// Client threads (also loader threads, except for SQLite).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Zipf exponent of node popularity.
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// Run the engine sequence this many times (A, B, A, B, ...); results are pooled.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Strata memtable budget in bytes (all tables together).
    #[arg(long, default_value_t = 64 << 20)]
    memtable_size: usize,
    #[command(flatten)]
    store: StorageArgs,
    /// JSON file with every summary and sample.
    #[arg(long, default_value = "target/strata-bench/linkbench.json")]
    json: PathBuf,
    /// 50,000 nodes and 10 s per engine: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Seed of the graph and the request streams.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Runs the benchmark.
pub fn run(a: &LinkbenchArgs) -> BenchResult<()> {
    let spec = RunSpec {
        nodes: a.nodes.unwrap_or(if a.quick { 50_000 } else { 1_000_000 }).max(1),
        seconds: a.seconds.unwrap_or(if a.quick { 10 } else { 60 }).max(1),
        threads: a.threads.max(1),
        seed: a.seed,
        zipf: a.zipf,
    };
    let mut engines = a.engines.clone();
    engines.dedup();
    let t = Instant::now();
    let g = Graph::new(spec.nodes, spec.seed);
    let graph: BTreeMap<&'static str, f64> = [
        ("nodes", g.nodes() as f64),
        ("links", g.links() as f64),
        ("mean_degree", g.links() as f64 / g.nodes() as f64),
        ("degree_zipf_exponent", g.degree_exponent()),
        ("max_degree", dist::MAX_DEGREE as f64),
        ("popularity_zipf_exponent", spec.zipf),
    ]
    .into_iter()
    .collect();
    println!(
        "linkbench: {} nodes, {} links (out-degree: Zipf exponent {:.3} over 0..={}, mean {:.2}), \
         popularity Zipf {:.2} (precomputed CDF), {} client threads, {} s per engine, {} round(s), seed {}",
        crate::report::thousands(g.nodes()),
        crate::report::thousands(g.links()),
        g.degree_exponent(),
        dist::MAX_DEGREE,
        g.links() as f64 / g.nodes() as f64,
        spec.zipf,
        spec.threads,
        spec.seconds,
        a.rounds.max(1),
        spec.seed
    );
    println!(
        "page cache: {}; graph built in {:.2} s",
        if a.store.direct_reads {
            "Strata reads with direct I/O (not warmed); SQLite's files are read once before its run"
        } else {
            "every data file is read once after the load, right before the timed run"
        },
        t.elapsed().as_secs_f64()
    );
    drop(g);
    let (base, _tmp) = a.store.root("strata-bench-linkbench-")?;
    let mut runs = Vec::new();
    for round in 0..a.rounds.max(1) {
        // Every other round runs the engines in reverse order (A B, B A, ...), so that
        // whatever the machine carries over from one run into the next (page cache,
        // writeback of the previous load, a rising load average) falls on each in turn.
        let order: Vec<EngineKind> = if round % 2 == 1 {
            engines.iter().rev().copied().collect()
        } else {
            engines.clone()
        };
        for kind in order {
            let dir = base.join(format!("{}-{}", kind.name(), round + 1));
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            std::fs::create_dir_all(&dir)?;
            let r = run_engine(kind, round, &spec, a, &dir);
            eprintln!("{}", report::one_line(&r));
            runs.push(r);
            if a.store.dir.is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    let rep = report::build(&spec, a.quick, a.rounds.max(1), graph, &engines, &runs);
    report::print(&rep);
    crate::report::write_json(&a.json, &rep)?;
    println!("json: {}", a.json.display());
    Ok(())
}

type Opened = (Box<dyn TableEngine<LinkBench>>, Vec<String>);

fn open(kind: EngineKind, dir: &Path, a: &LinkbenchArgs) -> BenchResult<Opened> {
    let cache = a.store.cache_size;
    Ok(match kind {
        EngineKind::StrataEager | EngineKind::StrataDeferred | EngineKind::StrataEagerB => {
            let mode = if kind == EngineKind::StrataDeferred {
                "deferred"
            } else {
                "eager"
            };
            let settings = Settings {
                cache_bytes: cache,
                memtable_bytes: a.memtable_size,
                direct_reads: a.store.direct_reads,
            };
            let mut notes = link_schemas(mode).to_vec();
            notes.push(format!("{settings:?}"));
            (Box::new(StrataTables::open_linkbench(dir, mode, settings)?), notes)
        }
        EngineKind::Sqlite => (
            Box::new(SqliteTables::create_linkbench(dir, cache)?),
            vec![format!(
                "SQLite {} (bundled), WAL, synchronous=OFF, page_size 8192, cache {cache} bytes per connection, \
                 link and count WITHOUT ROWID; writers serialized by SQLite",
                rusqlite::version()
            )],
        ),
    })
}

fn run_engine(kind: EngineKind, round: usize, spec: &RunSpec, a: &LinkbenchArgs, dir: &Path) -> EngineRun {
    let mut run = EngineRun {
        engine: kind,
        round,
        notes: Vec::new(),
        error: None,
        load: Default::default(),
        mix: None,
        counters: Default::default(),
        host_load: (0.0, 0.0),
    };
    let shared = Shared::new(Graph::new(spec.nodes, spec.seed), spec.zipf);
    let result = (|| -> BenchResult<()> {
        let (driver, notes) = open(kind, dir, a)?;
        run.notes = notes;
        let runner = runner::EngineRunner {
            driver: &*driver,
            shared: &shared,
            spec,
            label: kind.name(),
        };
        run.load = runner.load()?;
        let t = Instant::now();
        if !(a.store.direct_reads && kind != EngineKind::Sqlite) {
            run.load.warm_bytes = crate::workdir::warm_page_cache(dir)?;
        }
        run.load.warm_secs = t.elapsed().as_secs_f64();
        let load_before = loadavg();
        run.mix = Some(runner.mix()?);
        run.counters = driver.stats()?;
        run.host_load = (load_before, loadavg());
        Ok(())
    })();
    if let Err(e) = result {
        run.error = Some(e.to_string());
    }
    run
}

/// The host's 1-minute load average (0 where unknown): other work on a shared machine
/// shows here.
fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0)
}
