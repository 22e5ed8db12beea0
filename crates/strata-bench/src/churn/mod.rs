//! `churn`: the worst case of deferred maintenance (Tarantool #4501). The micro table is
//! preloaded, then 30 % of its rows are deleted by primary key (blind in deferred mode)
//! and another 30 % replaced with new secondary values; then, with no pause for
//! compaction, two threads run equality and range selects through the `f2` index for a
//! fixed time while a light write load continues.
//!
//! Eager and deferred run in one process on two databases, side by side: every preload
//! and churn batch goes to both, and every select runs on both back to back (alternating
//! which goes first), so each one-second sample of the two modes sees the same machine
//! load. The deferred database runs with FADE and a tombstone density trigger, as a
//! user would.

mod live;
mod load;
mod report;
mod side;
mod timed;

use std::path::PathBuf;

use serde::Serialize;

use crate::BenchResult;
use crate::micro::workload::Workload;
use crate::report::thousands;
use crate::workdir::StorageArgs;
use live::LiveKeys;
use load::ChurnShape;
use report::{ModeResult, Targets};
use side::{DeleteSettings, Side};
use timed::TimedSpec;

/// Arguments of `strata-bench churn`.
#[derive(clap::Args)]
pub struct ChurnArgs {
    /// Rows preloaded (keys and field values in 1..=rows) [default: 10000000, --quick 200000].
    #[arg(long)]
    rows: Option<u64>,
    /// Length of the select phase [default: 60, --quick 10].
    #[arg(long)]
    seconds: Option<u64>,
    /// Share of rows deleted by primary key.
    #[arg(long, default_value_t = 0.30)]
    delete_share: f64,
    /// Share of other rows replaced with new secondary values.
    #[arg(long, default_value_t = 0.30)]
    replace_share: f64,
    /// Statements per churn transaction.
    #[arg(long, default_value_t = 500)]
    churn_batch: usize,
    /// Threads applying the churn.
    #[arg(long, default_value_t = 4)]
    churn_threads: usize,
    /// Select threads.
    #[arg(long, default_value_t = 2)]
    select_threads: usize,
    /// Every n-th select of a thread is a range select, the others equality selects.
    #[arg(long, default_value_t = 5)]
    range_every: u64,
    /// Values of f2 one range select covers.
    #[arg(long, default_value_t = 1000)]
    range_width: u64,
    /// Limit of an equality select.
    #[arg(long, default_value_t = 10)]
    limit: u64,
    /// Light write load during the select phase: REPLACE/DELETE statements per second
    /// per table (half each, random keys).
    #[arg(long, default_value_t = 1000)]
    write_rate: u64,
    /// Deferred side: FADE delete persistence threshold in seconds (0 = none)
    /// [default: 30, --quick 5].
    #[arg(long)]
    persistence_threshold: Option<f64>,
    /// Deferred side: compact files whose tombstones reach this share of entries (0 = off).
    #[arg(long, default_value_t = 0.25)]
    density_trigger: f64,
    /// Give the eager side the deferred side's delete-aware compaction settings too, so
    /// that the comparison isolates index maintenance from FADE's own cost (by default
    /// eager runs without them, the classic engine).
    #[arg(long)]
    eager_same_deletes: bool,
    /// A/A control: both sides run this mode with the same settings (the deferred side's
    /// delete settings if `deferred`), so the per-second ratio of side 2 to side 1
    /// measures how often an engine misses the 1.5x target against itself on this
    /// machine: the noise floor of the comparison.
    #[arg(long, value_parser = ["eager", "deferred"])]
    control: Option<String>,
    #[command(flatten)]
    store: StorageArgs,
    /// JSON file with every sample.
    #[arg(long, default_value = "target/strata-bench/churn.json")]
    json: PathBuf,
    /// PNG plot of p99 latency (and dirty share, index bloat) over time.
    #[arg(long, default_value = "target/strata-bench/churn.png")]
    plot: PathBuf,
    /// 200,000 rows, 10 s of selects, 5 s threshold: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Seed of every generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    benchmark: &'static str,
    rows: u64,
    quick: bool,
    seed: u64,
    churn: ChurnShape,
    churn_statements_per_table: u64,
    preload_secs: f64,
    churn_secs: f64,
    timed: TimedSpec,
    deferred_deletes: DeleteSettings,
    cache_bytes: usize,
    direct_reads: bool,
    targets: &'a Targets,
    modes: [&'a ModeResult; 2],
}

/// Runs the benchmark.
pub fn run(a: &ChurnArgs) -> BenchResult<()> {
    let rows = a.rows.unwrap_or(if a.quick { 200_000 } else { 10_000_000 }).max(1);
    let seconds = a.seconds.unwrap_or(if a.quick { 10 } else { 60 }).max(1);
    let threshold = a.persistence_threshold.unwrap_or(if a.quick { 5.0 } else { 30.0 });
    let deletes = DeleteSettings {
        persistence_secs: (threshold > 0.0).then_some(threshold),
        density_trigger: (a.density_trigger > 0.0).then_some(a.density_trigger),
    };
    let settings = a.store.settings();
    let workload = Workload {
        rows,
        max_batch: 1,
        seed: a.seed,
    };
    let shape = ChurnShape {
        delete_share: a.delete_share.clamp(0.0, 1.0),
        replace_share: a.replace_share.clamp(0.0, 1.0),
        batch: a.churn_batch.max(1),
        threads: a.churn_threads.max(1),
    };
    let spec = TimedSpec {
        seconds,
        select_threads: a.select_threads.max(1),
        range_every: a.range_every,
        range_width: a.range_width.max(1),
        eq_limit: a.limit.max(1),
        write_rate: a.write_rate,
        rows,
        seed: a.seed,
    };
    let fmt_opt = |v: Option<f64>, unit: &str| v.map_or("off".to_string(), |x| format!("{x}{unit}"));
    let deferred_settings = format!(
        "delete_persistence_threshold {}, tombstone_density_trigger {}",
        fmt_opt(deletes.persistence_secs, " s"),
        fmt_opt(deletes.density_trigger, "")
    );
    println!("strata-bench churn: the worst case of deferred maintenance (Tarantool #4501)");
    println!(
        "  micro table (f1 pk, f2..f5, 4 non-unique indexes), {} rows; churn: delete {:.0} % by pk, replace {:.0} % \
         with new secondary values ({} statements/transaction, {} threads), the same batches to both tables",
        thousands(rows),
        100.0 * shape.delete_share,
        100.0 * shape.replace_share,
        shape.batch,
        shape.threads
    );
    println!(
        "  then at once, {} s: {} select threads, each query run on eager and deferred back to back \
         (equality on f2 limit {}, every {}th a range of {} values), {} writes/s per table",
        seconds, spec.select_threads, spec.eq_limit, spec.range_every, spec.range_width, spec.write_rate
    );
    println!(
        "  engine: micro paper settings (memtable 128 MiB, T 3.5, K 2, bloom 5 %, 8 KiB pages, 2 background \
         threads per database), cache {} bytes each, {}; deferred{}: {deferred_settings}",
        thousands(a.store.cache_size as u64),
        if a.store.direct_reads {
            "direct reads"
        } else {
            "page-cache reads"
        },
        if a.eager_same_deletes { " and eager" } else { "" }
    );
    if a.quick {
        println!("  NOTE: --quick is a smoke run, not the benchmark's setting");
    }
    if let Some(m) = &a.control {
        println!(
            "  NOTE: A/A control: both sides run {m} with the same settings; below, \"eager\" means side 1 and \
             \"deferred\" side 2 ({m}-2)"
        );
    }
    println!();

    let (base, _tmp) = a.store.root("strata-bench-churn-")?;
    let open = |label: &'static str, mode: &str, d: Option<DeleteSettings>| -> BenchResult<Side> {
        let dir = base.join(label);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Side::open(&dir, label, mode, side::options(settings, d))
    };
    let eager_deletes = a.eager_same_deletes.then_some(deletes);
    let mut sides = match a.control.as_deref() {
        Some("deferred") => vec![
            open("deferred", "deferred", Some(deletes))?,
            open("deferred-2", "deferred", Some(deletes))?,
        ],
        Some(_) => vec![
            open("eager", "eager", eager_deletes)?,
            open("eager-2", "eager", eager_deletes)?,
        ],
        None => vec![
            open("eager", "eager", eager_deletes)?,
            open("deferred", "deferred", Some(deletes))?,
        ],
    };
    let preload_secs = load::preload(&mut sides, &workload)?;
    eprintln!(
        "preload: {} rows into each table in {preload_secs:.1} s (both tables at once)",
        thousands(rows)
    );
    let live = LiveKeys::all(rows);
    let (stmts, churn_secs) = load::churn(&sides, &workload, shape, &live)?;
    eprintln!(
        "churn: {} statements per table in {churn_secs:.1} s (both tables, interleaved); {} live rows",
        thousands(stmts),
        thousands(live.count())
    );
    let mut series = timed::run(&mut sides, &spec, &live)?.into_iter();
    let (es, ds) = (series.next().unwrap_or_default(), series.next().unwrap_or_default());
    for side in &sides {
        if let Some(e) = side.tables.db().stats().background_error {
            return Err(format!("{}: background error: {e}", side.mode).into());
        }
    }
    let eager_settings = if a.eager_same_deletes {
        format!("micro paper settings, {deferred_settings}")
    } else {
        "micro paper settings".to_string()
    };
    let (first_settings, second_settings) = match a.control.as_deref() {
        Some("deferred") => (deferred_settings.clone(), deferred_settings),
        Some(_) => (eager_settings.clone(), eager_settings),
        None => (eager_settings, deferred_settings),
    };
    let eager = ModeResult::new(sides[0].mode, first_settings, sides[0].clean_bytes_per_row, es);
    let deferred = ModeResult::new(sides[1].mode, second_settings, sides[1].clean_bytes_per_row, ds);
    let second_threshold = match a.control.as_deref() {
        Some("eager") => eager_deletes.and_then(|d| d.persistence_secs),
        _ => deletes.persistence_secs,
    };
    let targets = report::targets(&eager, &deferred, second_threshold);
    report::print_samples(&eager, &deferred);
    println!(
        "  (latencies p50/p99/max in microseconds; p99x = deferred p99 / eager p99; dirty/select and dirty% = \
              dirty entries skipped per select and share of entries met that were dirty, deferred; lookups/row = \
              primary lookups per returned row; sec/live = secondary SSTable bytes / (live rows x clean bytes per row); \
              file blk/select = data blocks read from files (block cache misses) per select; compact MB = bytes \
              compactions wrote in the second)"
    );
    report::print_summary(&[&eager, &deferred], &targets);
    let rep = JsonReport {
        benchmark: "churn",
        rows,
        quick: a.quick,
        seed: a.seed,
        churn: shape,
        churn_statements_per_table: stmts,
        preload_secs,
        churn_secs,
        timed: spec,
        deferred_deletes: deletes,
        cache_bytes: a.store.cache_size,
        direct_reads: a.store.direct_reads,
        targets: &targets,
        modes: [&eager, &deferred],
    };
    report::write_json(&a.json, &rep)?;
    println!("json: {}", a.json.display());
    match report::plot(&a.plot, &[&eager, &deferred]) {
        Ok(()) => println!("plot: {}", a.plot.display()),
        Err(e) => println!("plot: not written ({e})"),
    }
    drop(sides);
    Ok(())
}
