//! `partitions`: scatter-gather selects through a secondary index of a hash-partitioned
//! table (`PartitionedTable`), against the same rows in one partition, in one run.
//!
//! The micro table (`f1` primary key, four secondary indexes) of `--rows` rows, the
//! indexed fields `f2..f4` drawn from `1..=rows/10` (about ten rows per value) and `f5`
//! from `1..=rows/100` (about a hundred), is built with one
//! `TableWriter` per partition and ingested into N = each of `--partitions` (default
//! 1, 2, 4, 8) partitions; every configuration gets the same total block cache (split
//! evenly over its partitions). Then, for 1 and 2 client threads, `--seconds` each:
//!
//! * **eq**: `select i2 where f2 = v` (about 10 rows), v uniform;
//! * **eq100**: `select i5 where f5 = v` (about 100 rows), v uniform;
//! * **range**: `select i3 where f3 >= v limit 100`.
//!
//! The two equality selects differ only in how many rows share a value: every
//! partition pays one index probe per select whatever it returns, so the fewer rows a
//! select returns, the more the probes weigh (`docs/design/partitions.md`, Limits).
//!
//! The peer (`--engines`, both by default) is SQLite: the same rows in N SQLite files,
//! the same select sent to each and the streams merged ([`sqlite`]), as a sharding
//! router in front of N SQLite databases would; its ratios show what local indexes cost
//! a mature engine.
//!
//! Every configuration of each engine is loaded first and kept open, with N = 1 loaded
//! twice (the second copy is the A/A control). The cells are then measured in
//! `--rounds` rounds, each visiting every configuration in turn, so a change in the
//! shared machine's load reaches all of them alike. Reported: the median selects/s of
//! the rounds and its ratio to the same engine's N = 1 (the target: N partitions within
//! 1.3x of one, a ratio of at least 1/1.3 = 0.77); the A/A row's ratio shows the noise
//! left.

mod sqlite;

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use strata::table::partitioned::Router;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::writer::{TableWriter, TableWriterOptions};
use strata::{IngestOptions, PartitionedDb, PartitionedTable};

use sqlite::SqliteParts;

use crate::BenchResult;
use crate::engines::strata::{MicroSettings, micro_schema, paper_options};
use crate::ingest::{row, values};
use crate::report::{Summary, rate, thousands, write_json};

/// Arguments of `strata-bench partitions`.
#[derive(clap::Args)]
pub struct PartitionsArgs {
    /// Rows of the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Partition counts to measure (comma-separated); 1 is always measured first.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 2, 4, 8])]
    partitions: Vec<usize>,
    /// Seconds per measurement (query kind x threads x partition count x round).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rounds over every configuration; each cell reports the median of its rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Queries to measure (comma-separated): `eq`, `eq100`, `range`.
    #[arg(long, value_delimiter = ',', default_values_t = QUERIES.map(|q| q.name().to_string()).to_vec())]
    queries: Vec<String>,
    /// Engines to measure (comma-separated): `strata`, and `sqlite` (the same rows in N
    /// SQLite files, the same select on each, merged).
    #[arg(long, value_delimiter = ',', default_values_t = ENGINES.map(String::from).to_vec())]
    engines: Vec<String>,
    /// Block cache of the whole table, split evenly over its partitions (MiB); each
    /// SQLite client's page caches share the same total.
    #[arg(long, default_value_t = 256)]
    cache_mib: usize,
    /// Work directory (default: a temporary directory, removed at the end).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// `strata` or `sqlite`.
    pub engine: String,
    /// Partitions.
    pub partitions: usize,
    /// `eq`, `eq100` or `range`.
    pub query: String,
    /// Client threads.
    pub threads: usize,
    /// Selects per second, all threads together: the median of the rounds.
    pub selects_per_sec: f64,
    /// Selects per second of each round, in order.
    pub rounds: Vec<f64>,
    /// Rows returned per select (mean).
    pub rows_per_select: f64,
    /// `selects_per_sec` over N = 1's (first measurement) for the same engine, query and
    /// threads.
    pub vs_one_partition: f64,
    /// The A/A control: a second copy of N = 1, measured in the same rounds.
    pub control: bool,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionsReport {
    /// Rows.
    pub rows: u64,
    /// Secondary indexes.
    pub indexes: usize,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Total block cache (MiB).
    pub cache_mib: usize,
    /// Load seconds (Strata: build + ingest; SQLite: inserts + index builds) per engine
    /// and partition count.
    pub load_seconds: Vec<(String, usize, f64)>,
    /// Rounds per cell.
    pub rounds: usize,
    /// Measurements (the last N = 1 block is the A/A control).
    pub cells: Vec<Cell>,
}

/// The queries, in the order measured by default.
const QUERIES: [Query; 3] = [Query::Eq, Query::Eq100, Query::Range];

/// The engines, in the order measured by default.
const ENGINES: [&str; 2] = ["strata", "sqlite"];

/// Client threads of each measurement.
const THREADS: [usize; 2] = [1, 2];

/// Value range of `f2..f4`: about ten rows per value.
fn spread(rows: u64) -> u64 {
    (rows / 10).max(1)
}

/// Value range of `f5`: about a hundred rows per value.
fn spread_wide(rows: u64) -> u64 {
    (rows / 100).max(1)
}

/// Row `i` of the table: the ingest benchmark's row, with `f5` folded onto the wider
/// spread (uniformly when it divides `spread`, as for any multiple of 100 rows).
fn raw_row(i: u64, rows: u64) -> [u64; 5] {
    let mut r = row(i, spread(rows));
    r[4] = (r[4] - 1) % spread_wide(rows) + 1;
    r
}

/// [`raw_row`] as the table's values.
fn table_row(i: u64, rows: u64) -> Vec<Value> {
    values(raw_row(i, rows))
}

/// Builds one file set per partition and ingests each into its partition.
fn load(dir: &Path, n: usize, rows: u64, cache_mib: usize) -> BenchResult<(PartitionedDb, PartitionedTable, f64)> {
    let start = Instant::now();
    let schema = Schema::parse(&micro_schema("deferred"))?;
    let router = Router::new(&schema, n)?;
    let mut writers = Vec::with_capacity(n);
    for p in 0..n {
        writers.push(TableWriter::create_with(
            &schema,
            dir.join(format!("files-{p}")),
            TableWriterOptions {
                sort_memory: (512 << 20) / n,
                partition: Some((p, n)),
                ..TableWriterOptions::default()
            },
        )?);
    }
    for i in 0..rows {
        let r = table_row(i, rows);
        writers[router.partition_of_row(&r)?].add(&r)?;
    }
    let opts = paper_options(MicroSettings {
        cache_bytes: (cache_mib << 20) / n,
        direct_reads: false,
    });
    let db = PartitionedDb::open(dir.join("db"), n, opts)?;
    let t = db.create_table(schema)?;
    for (p, w) in writers.into_iter().enumerate() {
        let files = w.finish()?;
        t.ingest(p, &files.dir, IngestOptions { link_files: true })?;
    }
    let secs = start.elapsed().as_secs_f64();
    let count = t.select("primary").count()?;
    if count != rows {
        return Err(format!("{n} partitions hold {count} rows, expected {rows}").into());
    }
    Ok((db, t, secs))
}

/// A query of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// `select i2 where f2 = v`: about 10 rows.
    Eq,
    /// `select i5 where f5 = v`: about 100 rows.
    Eq100,
    /// `select i3 where f3 >= v limit 100`.
    Range,
}

impl Query {
    fn parse(name: &str) -> BenchResult<Query> {
        QUERIES.into_iter().find(|q| q.name() == name).ok_or_else(|| {
            let names: Vec<&str> = QUERIES.iter().map(|q| q.name()).collect();
            format!("unknown query {name:?}: use {}", names.join(", ")).into()
        })
    }

    fn name(self) -> &'static str {
        match self {
            Query::Eq => "eq",
            Query::Eq100 => "eq100",
            Query::Range => "range",
        }
    }

    /// Most rows a select returns.
    fn limit(self) -> usize {
        match self {
            Query::Range => 100,
            _ => usize::MAX,
        }
    }

    /// A uniform value to select, for a table of `rows` rows.
    fn draw(self, rng: &mut StdRng, rows: u64) -> u64 {
        match self {
            Query::Eq100 => rng.gen_range(1..=spread_wide(rows)),
            _ => rng.gen_range(1..=spread(rows)),
        }
    }
}

/// A field value as SQLite's integer.
fn as_i64(v: &u64) -> BenchResult<i64> {
    i64::try_from(*v).map_err(|_| format!("value {v} is beyond SQLite's integers").into())
}

/// Counts a selected row and folds its primary key into an order-sensitive sum, so the
/// engines and partition counts can be checked to give the same rows in the same order.
fn fold(acc: &mut (u64, u64), pk: u64) {
    acc.0 += 1;
    acc.1 = acc.1.wrapping_mul(0x100_0000_01b3).wrapping_add(pk);
}

/// One configuration under measurement: a table in N partitions of one engine.
enum Config {
    Strata(PartitionedDb, PartitionedTable),
    Sqlite(SqliteParts),
}

impl Config {
    fn engine(&self) -> &'static str {
        match self {
            Config::Strata(..) => "strata",
            Config::Sqlite(_) => "sqlite",
        }
    }

    /// Runs `q` with value `v` as client thread `client`: (rows, fold of their keys).
    fn select(&self, client: usize, q: Query, v: u64) -> BenchResult<(u64, u64)> {
        match self {
            Config::Strata(_, t) => strata_select(t, q, v),
            Config::Sqlite(s) => s.select(client, q, v),
        }
    }

    fn close(self) -> BenchResult<()> {
        if let Config::Strata(db, t) = self {
            drop(t);
            db.close()?;
        }
        Ok(())
    }
}

/// `q` with value `v` through the partitioned table: (rows, fold of their keys).
fn strata_select(t: &PartitionedTable, q: Query, v: u64) -> BenchResult<(u64, u64)> {
    let sel = match q {
        Query::Eq => t.select("i2").eq(vec![Value::U64(v)]),
        Query::Eq100 => t.select("i5").eq(vec![Value::U64(v)]),
        Query::Range => t
            .select("i3")
            .range(Bound::Included(Value::U64(v)), Bound::Unbounded)
            .limit(100),
    };
    let mut out = (0, 0);
    for r in sel.rows()? {
        match r?.first() {
            Some(Value::U64(pk)) => fold(&mut out, *pk),
            other => return Err(format!("a row's primary key is {other:?}").into()),
        }
    }
    Ok(out)
}

/// `threads` clients running `q` on `config` for `seconds`: (selects/s, rows per select).
fn measure(config: &Config, q: Query, threads: usize, seconds: f64, table_rows: u64) -> BenchResult<(f64, f64)> {
    let stop = AtomicBool::new(false);
    let selects = AtomicU64::new(0);
    let rows = AtomicU64::new(0);
    let start = Instant::now();
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let (stop, selects, rows) = (&stop, &selects, &rows);
                s.spawn(move || -> Result<(), String> {
                    let mut rng = StdRng::seed_from_u64(0x5eed + k as u64);
                    while !stop.load(Ordering::Relaxed) {
                        let v = q.draw(&mut rng, table_rows);
                        let (n, _) = config.select(k, q, v).map_err(|e| e.to_string())?;
                        selects.fetch_add(1, Ordering::Relaxed);
                        rows.fetch_add(n, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a client thread panicked".to_string()),
            })
            .collect()
    });
    if let Some(e) = errors.into_iter().next() {
        return Err(e.into());
    }
    let secs = start.elapsed().as_secs_f64();
    let n = selects.load(Ordering::Relaxed);
    Ok((n as f64 / secs, rows.load(Ordering::Relaxed) as f64 / n.max(1) as f64))
}

/// Runs the benchmark.
pub fn run(a: &PartitionsArgs) -> BenchResult<()> {
    if a.rows == 0 || a.seconds <= 0.0 || a.rounds == 0 {
        return Err("--rows, --seconds and --rounds must be positive".into());
    }
    for &n in &a.partitions {
        strata::partition::check_count(n)?;
    }
    let queries = a
        .queries
        .iter()
        .map(|q| Query::parse(q))
        .collect::<BenchResult<Vec<_>>>()?;
    if let Some(e) = a.engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
        return Err(format!("unknown engine {e:?}: use {}", ENGINES.join(", ")).into());
    }
    let (root, _tmp) = crate::workdir::root(a.dir.as_deref(), "strata-partitions")?;
    eprintln!(
        "partitions benchmark: {} rows, 4 secondary indexes, {} rounds, in {}",
        thousands(a.rows),
        a.rounds,
        root.display()
    );
    // Per engine, N = 1 first (the baseline) and last (the A/A control).
    let mut counts = vec![1];
    counts.extend(a.partitions.iter().copied().filter(|&n| n != 1));
    counts.push(1);
    let mut report = PartitionsReport {
        rows: a.rows,
        indexes: 4,
        seconds: a.seconds,
        cache_mib: a.cache_mib,
        load_seconds: Vec::new(),
        rounds: a.rounds,
        cells: Vec::new(),
    };
    let threads = THREADS.iter().copied().max().unwrap_or(1);
    let mut loaded: Vec<(usize, bool, Config)> = Vec::new();
    for engine in ENGINES.iter().filter(|e| a.engines.iter().any(|x| x == *e)) {
        for (k, &n) in counts.iter().enumerate() {
            let dir = root.join(format!("{engine}{k}-n{n}"));
            let (config, secs) = if *engine == "strata" {
                let (db, t, secs) = load(&dir, n, a.rows, a.cache_mib)?;
                (Config::Strata(db, t), secs)
            } else {
                let (parts, secs) = SqliteParts::load(&dir, n, a.rows, a.cache_mib, threads)?;
                (Config::Sqlite(parts), secs)
            };
            eprintln!("  {engine}, {n} partition(s): loaded in {secs:.1} s");
            report.load_seconds.push((engine.to_string(), n, secs));
            for &q in &queries {
                // Warm the caches the same way for every configuration.
                measure(&config, q, 1, (a.seconds / 3.0).min(1.0), a.rows)?;
            }
            loaded.push((n, k + 1 == counts.len(), config));
        }
    }
    for &q in &queries {
        for threads in THREADS {
            let mut per_config = vec![Vec::with_capacity(a.rounds); loaded.len()];
            let mut rows_per = vec![0.0; loaded.len()];
            for round in 0..a.rounds {
                for (k, (_, _, config)) in loaded.iter().enumerate() {
                    let (sps, per) = measure(config, q, threads, a.seconds, a.rows)?;
                    per_config[k].push(sps);
                    rows_per[k] = per;
                }
                eprintln!("    {} x{threads}: round {} of {} done", q.name(), round + 1, a.rounds);
            }
            let mut base = 1e-9;
            for (k, (n, control, config)) in loaded.iter().enumerate() {
                let sps = Summary::of(&per_config[k]).median;
                // Each engine's configurations start with its N = 1.
                if k == 0 || loaded[k - 1].2.engine() != config.engine() {
                    base = sps.max(1e-9);
                }
                report.cells.push(Cell {
                    engine: config.engine().to_string(),
                    partitions: *n,
                    query: q.name().to_string(),
                    threads,
                    selects_per_sec: sps,
                    rounds: per_config[k].clone(),
                    rows_per_select: rows_per[k],
                    vs_one_partition: sps / base,
                    control: *control,
                });
            }
        }
    }
    for (_, _, config) in loaded {
        config.close()?;
    }
    if let Some(p) = &a.json {
        write_json(p, &report)?;
    }
    print_table(&report);
    Ok(())
}

fn print_table(r: &PartitionsReport) {
    println!(
        "\n{} rows, {} secondary indexes, {} s per cell and round, median of {} rounds, {} MiB cache in all\n",
        thousands(r.rows),
        r.indexes,
        r.seconds,
        r.rounds,
        r.cache_mib
    );
    println!("| engine | partitions | query | threads | selects/s (median) | rounds | rows/select | vs 1 partition |");
    println!("|---|---:|---|---:|---:|---|---:|---:|");
    for c in &r.cells {
        let label = if c.control {
            "1 (A/A)".to_string()
        } else {
            c.partitions.to_string()
        };
        let rounds: Vec<String> = c.rounds.iter().map(|&x| rate(x)).collect();
        println!(
            "| {} | {label} | {} | {} | {} | {} | {:.1} | {:.2} |",
            c.engine,
            c.query,
            c.threads,
            rate(c.selects_per_sec),
            rounds.join(", "),
            c.rows_per_select,
            c.vs_one_partition
        );
    }
    println!(
        "\ntarget: every ratio >= {:.2} (N partitions within 1.3x of one)",
        1.0 / 1.3
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_and_partition_count_selects_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 2000;
        let mut answers = Vec::new();
        for n in [1, 3] {
            let (db, t, _) = load(&dir.path().join(format!("n{n}")), n, rows, 8).unwrap();
            let (parts, _) = SqliteParts::load(&dir.path().join(format!("sqlite-n{n}")), n, rows, 8, 1).unwrap();
            for config in [Config::Strata(db, t), Config::Sqlite(parts)] {
                let mut rng = StdRng::seed_from_u64(1);
                let got: Vec<(u64, u64)> = (0..30)
                    .map(|k| {
                        let q = QUERIES[k % 3];
                        let v = q.draw(&mut rng, rows);
                        config.select(0, q, v).unwrap()
                    })
                    .collect();
                let mean = |q: usize| got.iter().skip(q).step_by(3).map(|g| g.0).sum::<u64>() / 10;
                // About 10 rows per f2 value and 100 per f5 value; the range fills its limit.
                assert!((5..=15).contains(&mean(0)), "eq: {got:?}");
                assert!((70..=130).contains(&mean(1)), "eq100: {got:?}");
                assert!(got.iter().skip(2).step_by(3).all(|g| g.0 == 100), "range: {got:?}");
                answers.push(got);
                config.close().unwrap();
            }
        }
        // The same rows, in the same order, from both engines at every N.
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    }
}
