//! What `micro` prints, writes as JSON and plots.

use std::path::Path;

use serde::Serialize;

use super::EngineStats;
use super::harness::{RunOutput, RunSpec};
use super::{EngineKind, MicroArgs};
use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};
use crate::report::{Summary, mib, opt, rate, thousands};

/// The paper's Table 1 (Tarantool with deferred updates vs stock "simple" updates).
pub const PAPER_DEFERRED: Summary = Summary {
    samples: 0,
    average: 112_343.0,
    maximum: 132_316.0,
    median: 114_772.0,
};
/// The paper's Table 1, simple (eager) column.
pub const PAPER_SIMPLE: Summary = Summary {
    samples: 0,
    average: 21_681.0,
    maximum: 89_292.0,
    median: 20_097.0,
};

/// How an engine's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Ran to the end.
    Ran,
    /// Not run (its program is unavailable).
    Skipped,
    /// Started but failed; samples may be partial.
    Failed,
}

/// One engine's result.
#[derive(Debug, Clone, Serialize)]
pub struct EngineResult {
    /// Engine name.
    pub engine: &'static str,
    #[serde(skip)]
    kind: EngineKind,
    /// How it ended.
    pub status: Status,
    /// Why it was skipped or failed.
    pub reason: Option<String>,
    /// Settings and caveats.
    pub notes: Vec<String>,
    /// Average / maximum / median of the per-second statements/s samples.
    pub summary: Summary,
    /// Preload times, samples and totals.
    #[serde(flatten)]
    pub output: RunOutput,
    /// Counters at the end (work counters cover the timed run only).
    pub stats: EngineStats,
}

impl EngineResult {
    /// A result, summarizing the samples.
    pub fn new(
        kind: EngineKind,
        status: Status,
        reason: Option<String>,
        notes: Vec<String>,
        output: RunOutput,
        stats: EngineStats,
    ) -> Self {
        let rates: Vec<f64> = output.samples.iter().map(|s| s.rate).collect();
        EngineResult {
            engine: kind.name(),
            kind,
            status,
            reason,
            notes,
            summary: Summary::of(&rates),
            output,
            stats,
        }
    }

    /// An engine that did not run.
    pub fn skipped(kind: EngineKind, reason: String) -> Self {
        Self::new(
            kind,
            Status::Skipped,
            Some(reason),
            Vec::new(),
            RunOutput::default(),
            EngineStats::default(),
        )
    }

    fn has_samples(&self) -> bool {
        !self.output.samples.is_empty()
    }
}

fn find(results: &[EngineResult], kind: EngineKind) -> Option<&EngineResult> {
    results.iter().find(|r| r.kind == kind && r.status == Status::Ran)
}

fn ratio(a: Option<&EngineResult>, b: Option<&EngineResult>) -> Option<f64> {
    let (a, b) = (a?.summary.average, b?.summary.average);
    (b > 0.0).then(|| a / b)
}

/// The settings block printed before the runs.
pub fn print_header(spec: &RunSpec, a: &MicroArgs, engines: &[EngineKind]) {
    let w = &spec.workload;
    println!("strata-bench micro: the deferred-update paper's microbenchmark (section 5.1, Table 1, Figures 7-9)");
    println!(
        "  table test(f1 u64 pk, f2..f5 u64), 4 non-unique secondary indexes; preload {} rows (keys 1..={}, fields uniform)",
        thousands(w.rows),
        thousands(w.rows)
    );
    println!(
        "  {} clients x batches of uniform 1..={} statements (1/2 replace of a random key, 1/2 delete), \
         one transaction per batch; {} s per engine; seed {}",
        spec.threads, w.max_batch, spec.seconds, w.seed
    );
    println!(
        "  engine settings: memtable/vinyl_memory 128 MiB, size ratio 3.5, 2 runs per level, bloom 5%, 8 KiB pages, \
         2 background threads, WAL written not fsynced; cache {} bytes",
        thousands(a.store.cache_size as u64)
    );
    println!(
        "  reads: {}",
        if a.store.direct_reads {
            "Strata with direct I/O (page cache bypassed); peers through the page cache"
        } else {
            "through the OS page cache (no direct I/O)"
        }
    );
    let names: Vec<&str> = engines.iter().map(|e| e.name()).collect();
    println!(
        "  engines, one after the other on fresh directories: {}",
        names.join(", ")
    );
    if a.quick {
        println!("  NOTE: --quick (100,000 rows, 10 s per engine): a smoke run, not the paper's setting");
    }
    println!();
}

/// One line per finished engine (to stderr, between progress bars).
pub fn one_line(r: &EngineResult) -> String {
    match r.status {
        Status::Skipped => format!("{:>20}: skipped ({})", r.engine, r.reason.as_deref().unwrap_or("")),
        _ => format!(
            "{:>20}: {} statements/s average over {} samples{}",
            r.engine,
            rate(r.summary.average),
            r.summary.samples,
            r.reason
                .as_deref()
                .map(|e| format!(" (FAILED: {e})"))
                .unwrap_or_default()
        ),
    }
}

/// The results table, preload times, paper reference and notes.
pub fn print_results(spec: &RunSpec, quick: bool, results: &[EngineResult]) {
    let eager = find(results, EngineKind::StrataEager);
    let tnt = find(results, EngineKind::TarantoolDeferred);
    println!(
        "{:<19} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7} {:>11} {:>8} {:>10} {:>10} {:>6}",
        "engine",
        "avg st/s",
        "max st/s",
        "median",
        "vs s-eager",
        "vs t-defer",
        "flushes",
        "compact",
        "entries",
        "disk",
        "hidden rd",
        "def.dels",
        "w-amp"
    );
    for r in results {
        if r.status == Status::Skipped {
            println!("{:<19} skipped: {}", r.engine, r.reason.as_deref().unwrap_or(""));
            continue;
        }
        let x = |base: Option<&EngineResult>| {
            let b = base.map_or(0.0, |b| b.summary.average);
            if b > 0.0 {
                format!("{:.2}x", r.summary.average / b)
            } else {
                "-".into()
            }
        };
        let s = &r.stats;
        let n = |v: Option<u64>| opt(v, thousands);
        println!(
            "{:<19} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7} {:>11} {:>8} {:>10} {:>10} {:>6}",
            r.engine,
            rate(r.summary.average),
            rate(r.summary.maximum),
            rate(r.summary.median),
            x(eager),
            x(tnt),
            n(s.probe.flushes),
            n(s.probe.compactions),
            n(s.probe.entries),
            opt(s.probe.bytes, mib),
            n(s.hidden_reads),
            n(s.deferred_deletes),
            opt(s.write_amplification, |w| format!("{w:.2}"))
        );
        if let Some(e) = &r.reason {
            println!("{:<19} FAILED: {e}", "");
        }
    }
    println!(
        "{:<19} {:>9} {:>9} {:>9}   (paper, Table 1: Tarantool with deferred updates)",
        "paper deferred",
        rate(PAPER_DEFERRED.average),
        rate(PAPER_DEFERRED.maximum),
        rate(PAPER_DEFERRED.median)
    );
    println!(
        "{:<19} {:>9} {:>9} {:>9}   (paper, Table 1: stock Tarantool, \"simple update\")",
        "paper simple",
        rate(PAPER_SIMPLE.average),
        rate(PAPER_SIMPLE.maximum),
        rate(PAPER_SIMPLE.median)
    );
    println!();
    let fmt_ratio = |r: Option<f64>| opt(r, |x| format!("{x:.1}x"));
    println!(
        "deferred / eager (average statements/s): paper {:.1}x | strata {} | tarantool {}",
        PAPER_DEFERRED.average / PAPER_SIMPLE.average,
        fmt_ratio(ratio(find(results, EngineKind::StrataDeferred), eager)),
        fmt_ratio(ratio(tnt, find(results, EngineKind::TarantoolEager)))
    );
    println!();
    println!("preload (not part of the timed run):");
    for r in results.iter().filter(|r| r.status != Status::Skipped) {
        let o = &r.output;
        let per_sec = if o.preload_secs > 0.0 {
            spec.workload.rows as f64 / o.preload_secs
        } else {
            0.0
        };
        println!(
            "  {:<19} {} rows in {:.1} s ({} rows/s), then {:.1} s to persist; timed run {} statements in {} batches over {:.1} s",
            r.engine,
            thousands(spec.workload.rows),
            o.preload_secs,
            rate(per_sec),
            o.settle_secs,
            thousands(o.statements),
            thousands(o.batches),
            o.elapsed_secs
        );
    }
    println!();
    println!("notes:");
    println!("  statements/s: replace + delete statements committed per second, sampled every second");
    println!("  vs s-eager / vs t-defer: average statements/s relative to strata-eager / tarantool-deferred");
    println!(
        "  flushes, compactions, hidden reads, deferred deletes and w-amp count the timed run only; \
         entries and disk are totals at its end (all keyspaces / indexes)"
    );
    let ran = |k: &[EngineKind]| {
        results
            .iter()
            .any(|r| k.contains(&r.kind) && r.status != Status::Skipped)
    };
    if ran(&[EngineKind::TarantoolEager, EngineKind::TarantoolDeferred]) {
        println!("  tarantool: flushes = vinyl dumps, hidden rd = primary-index lookups (index:stat().lookup)");
    }
    if ran(&[EngineKind::Sqlite]) {
        println!("  sqlite: entries = live rows x 5 (table B-tree + 4 indexes), disk = database + WAL file");
    }
    for r in results {
        for note in &r.notes {
            println!("  {}: {note}", r.engine);
        }
        if let (Some(n), Some(secs)) = (r.stats.stalls, r.stats.stall_secs) {
            println!(
                "  {}: writers stalled {n} times, {secs:.1} s in all (summed over threads)",
                r.engine
            );
        }
    }
    if quick {
        println!("  --quick numbers are a smoke run (100,000 rows, 10 s), not the paper's setting");
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    benchmark: &'static str,
    rows: u64,
    seconds: u64,
    threads: usize,
    max_batch: usize,
    seed: u64,
    cache_bytes: usize,
    direct_reads: bool,
    quick: bool,
    paper_table1: PaperTable,
    strata_deferred_over_eager: Option<f64>,
    tarantool_deferred_over_eager: Option<f64>,
    engines: &'a [EngineResult],
}

#[derive(Serialize)]
struct PaperTable {
    deferred: Summary,
    simple: Summary,
    ratio: f64,
}

/// Writes every sample and summary to `path`.
pub fn write_json(path: &Path, spec: &RunSpec, a: &MicroArgs, results: &[EngineResult]) -> BenchResult<()> {
    let report = JsonReport {
        benchmark: "micro",
        rows: spec.workload.rows,
        seconds: spec.seconds,
        threads: spec.threads,
        max_batch: spec.workload.max_batch,
        seed: spec.workload.seed,
        cache_bytes: a.store.cache_size,
        direct_reads: a.store.direct_reads,
        quick: a.quick,
        paper_table1: PaperTable {
            deferred: PAPER_DEFERRED,
            simple: PAPER_SIMPLE,
            ratio: PAPER_DEFERRED.average / PAPER_SIMPLE.average,
        },
        strata_deferred_over_eager: ratio(
            find(results, EngineKind::StrataDeferred),
            find(results, EngineKind::StrataEager),
        ),
        tarantool_deferred_over_eager: ratio(
            find(results, EngineKind::TarantoolDeferred),
            find(results, EngineKind::TarantoolEager),
        ),
        engines: results,
    };
    crate::report::write_json(path, &report)
}

/// Statements/s (Figure 7), entries on disk (Figure 8) and flushes (Figure 9) over time.
pub fn plot(path: &Path, results: &[EngineResult]) -> BenchResult<()> {
    let series = |f: &dyn Fn(&super::harness::Sample) -> Option<f64>| -> Vec<Series> {
        results
            .iter()
            .filter(|r| r.has_samples())
            .filter(|r| r.output.samples.iter().any(|s| f(s).is_some()))
            .map(|r| Series {
                name: r.engine.to_string(),
                color: r.kind as usize,
                points: r.output.samples.iter().filter_map(|s| f(s).map(|y| (s.t, y))).collect(),
            })
            .collect()
    };
    let panels = [
        Panel {
            title: "statements/s (cf. paper Figure 7)".into(),
            y_label: "statements/s".into(),
            series: series(&|s| Some(s.rate)),
        },
        Panel {
            title: "entries on disk, all indexes (cf. Figure 8)".into(),
            y_label: "entries".into(),
            series: series(&|s| s.probe.entries.map(|v| v as f64)),
        },
        Panel {
            title: "flushes (vinyl dumps) since the run started (cf. Figure 9)".into(),
            y_label: "flushes".into(),
            series: series(&|s| s.probe.flushes.map(|v| v as f64)),
        },
    ];
    line_chart(path, "seconds", &panels)
}
