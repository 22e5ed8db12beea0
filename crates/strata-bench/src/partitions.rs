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
//! Every configuration is loaded first and kept open, with N = 1 loaded twice (the
//! second copy is the A/A control). The cells are then measured in `--rounds` rounds,
//! each visiting every configuration in turn, so a change in the shared machine's load
//! reaches all of them alike. Reported: the median selects/s of the rounds and its ratio
//! to N = 1's (the target: N partitions within 1.3x of one, a ratio of at least
//! 1/1.3 = 0.77); the A/A row's ratio shows the noise left.

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
    #[arg(long, value_delimiter = ',', default_values_t = QUERIES.map(String::from).to_vec())]
    queries: Vec<String>,
    /// Block cache of the whole table, split evenly over its partitions (MiB).
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
    /// `selects_per_sec` over N = 1's (first measurement) for the same query and threads.
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
    /// Load (build + ingest) seconds per partition count.
    pub load_seconds: Vec<(usize, f64)>,
    /// Rounds per cell.
    pub rounds: usize,
    /// Measurements (the last N = 1 block is the A/A control).
    pub cells: Vec<Cell>,
}

/// The queries, in the order measured by default.
const QUERIES: [&str; 3] = ["eq", "eq100", "range"];

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
fn table_row(i: u64, rows: u64) -> Vec<Value> {
    let mut r = row(i, spread(rows));
    r[4] = (r[4] - 1) % spread_wide(rows) + 1;
    values(r)
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

/// One select of `query` on a table of `rows` rows, with a random value; returns the
/// rows it gave.
fn one_select(t: &PartitionedTable, query: &str, rng: &mut StdRng, rows: u64) -> BenchResult<u64> {
    let sel = match query {
        "eq" => t.select("i2").eq(vec![Value::U64(rng.gen_range(1..=spread(rows)))]),
        "eq100" => t
            .select("i5")
            .eq(vec![Value::U64(rng.gen_range(1..=spread_wide(rows)))]),
        _ => {
            let v = Value::U64(rng.gen_range(1..=spread(rows)));
            t.select("i3").range(Bound::Included(v), Bound::Unbounded).limit(100)
        }
    };
    let mut n = 0;
    for r in sel.rows()? {
        r?;
        n += 1;
    }
    Ok(n)
}

/// `threads` clients running `query` for `seconds`: (selects/s, rows per select).
fn measure(
    t: &PartitionedTable,
    query: &str,
    threads: usize,
    seconds: f64,
    table_rows: u64,
) -> BenchResult<(f64, f64)> {
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
                        let n = one_select(t, query, &mut rng, table_rows).map_err(|e| e.to_string())?;
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
    if let Some(q) = a.queries.iter().find(|q| !QUERIES.contains(&q.as_str())) {
        return Err(format!("unknown query {q:?}: use {}", QUERIES.join(", ")).into());
    }
    let (root, _tmp) = crate::workdir::root(a.dir.as_deref(), "strata-partitions")?;
    eprintln!(
        "partitions benchmark: {} rows, 4 secondary indexes, {} rounds, in {}",
        thousands(a.rows),
        a.rounds,
        root.display()
    );
    // N = 1 first (the baseline) and last (the A/A control).
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
    let mut loaded = Vec::with_capacity(counts.len());
    for (k, &n) in counts.iter().enumerate() {
        let (db, t, secs) = load(&root.join(format!("config{k}-n{n}")), n, a.rows, a.cache_mib)?;
        eprintln!("  {n} partition(s): loaded in {secs:.1} s");
        report.load_seconds.push((n, secs));
        for query in a.queries.iter().map(String::as_str) {
            // Warm the cache the same way for every N.
            measure(&t, query, 1, (a.seconds / 3.0).min(1.0), a.rows)?;
        }
        loaded.push((db, t));
    }
    for query in a.queries.iter().map(String::as_str) {
        for threads in [1, 2] {
            let mut per_config = vec![Vec::with_capacity(a.rounds); counts.len()];
            let mut rows_per = vec![0.0; counts.len()];
            for round in 0..a.rounds {
                for (k, (_, t)) in loaded.iter().enumerate() {
                    let (sps, per) = measure(t, query, threads, a.seconds, a.rows)?;
                    per_config[k].push(sps);
                    rows_per[k] = per;
                }
                eprintln!("    {query} x{threads}: round {} of {} done", round + 1, a.rounds);
            }
            let base = Summary::of(&per_config[0]).median;
            for (k, &n) in counts.iter().enumerate() {
                let sps = Summary::of(&per_config[k]).median;
                report.cells.push(Cell {
                    partitions: n,
                    query: query.to_string(),
                    threads,
                    selects_per_sec: sps,
                    rounds: per_config[k].clone(),
                    rows_per_select: rows_per[k],
                    vs_one_partition: sps / base.max(1e-9),
                    control: k + 1 == counts.len(),
                });
            }
        }
    }
    for (db, t) in loaded {
        drop(t);
        db.close()?;
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
    println!("| partitions | query | threads | selects/s (median) | rounds | rows/select | vs 1 partition |");
    println!("|---:|---|---:|---:|---|---:|---:|");
    for c in &r.cells {
        let label = if c.control {
            "1 (A/A)".to_string()
        } else {
            c.partitions.to_string()
        };
        let rounds: Vec<String> = c.rounds.iter().map(|&x| rate(x)).collect();
        println!(
            "| {label} | {} | {} | {} | {} | {:.1} | {:.2} |",
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
    fn every_partition_count_selects_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 2000;
        let mut answers = Vec::new();
        for n in [1, 3] {
            let (db, t, _) = load(&dir.path().join(format!("n{n}")), n, rows, 8).unwrap();
            let mut rng = StdRng::seed_from_u64(1);
            let got: Vec<u64> = (0..30)
                .map(|k| one_select(&t, QUERIES[k % 3], &mut rng, rows).unwrap())
                .collect();
            let mean = |q: usize| got.iter().skip(q).step_by(3).sum::<u64>() / 10;
            // About 10 rows per f2 value and 100 per f5 value; the range fills its limit.
            assert!((5..=15).contains(&mean(0)), "eq: {got:?}");
            assert!((70..=130).contains(&mean(1)), "eq100: {got:?}");
            assert!(got.iter().skip(2).step_by(3).all(|&n| n == 100), "range: {got:?}");
            answers.push(got);
            db.close().unwrap();
        }
        assert_eq!(answers[0], answers[1]);
    }
}
