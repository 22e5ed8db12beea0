//! Linkbench results: per-engine summaries (throughput, latency per request kind,
//! engine counters), the eager-vs-deferred ratios and targets, the printed tables and
//! the JSON document.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Counters;
use super::EngineKind;
use super::runner::{LoadOutput, MixOutput, RunSpec, Sample};
use super::workload::{MIX, OpKind};
use crate::report::{Summary, mib, opt, rate, thousands};

/// Target of the issue: deferred reads at most this many times slower than eager.
pub const READ_TARGET: f64 = 1.3;

/// One engine's run (one round).
pub struct EngineRun {
    pub engine: EngineKind,
    pub round: usize,
    pub notes: Vec<String>,
    /// The failure, if the engine did not finish.
    pub error: Option<String>,
    pub load: LoadOutput,
    pub mix: Option<MixOutput>,
    pub counters: Counters,
    /// Host 1-minute load average at the start and the end of the mix.
    pub host_load: (f64, f64),
}

/// Latency of one request kind, microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct OpSummary {
    pub op: OpKind,
    pub count: u64,
    /// Share of all requests, percent.
    pub share: f64,
    /// Rows returned (reads) or written (writes) per request.
    pub rows_per_op: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// One engine over all its rounds.
#[derive(Debug, Clone, Serialize)]
pub struct EngineSummary {
    pub engine: &'static str,
    pub ok: bool,
    pub errors: Vec<String>,
    pub notes: Vec<String>,
    /// Every round's load phase.
    pub loads: Vec<LoadOutput>,
    /// Every round's requests/s.
    pub round_ops_per_sec: Vec<f64>,
    /// Every round's host 1-minute load average at the start and end of the mix.
    pub host_load: Vec<(f64, f64)>,
    pub elapsed_secs: f64,
    /// Process CPU seconds during the mix, and CPU microseconds per request.
    pub cpu_secs: f64,
    pub cpu_us_per_op: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub reads_per_sec: f64,
    pub writes_per_sec: f64,
    /// Mean latency of read / write requests, microseconds.
    pub read_mean_us: f64,
    pub write_mean_us: f64,
    /// Summary of the per-second requests/s samples.
    pub per_second: Summary,
    pub per_op: Vec<OpSummary>,
    /// `updatenode` requests skipped (node deleted).
    pub skipped_updates: u64,
    pub counters: Counters,
    pub dirty_per_getlinklist: Option<f64>,
    pub primary_lookups_per_row: Option<f64>,
    pub hidden_reads_per_write: Option<f64>,
    pub samples: Vec<Sample>,
}

/// A deferred/eager comparison with both absolute values.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub what: &'static str,
    pub eager: f64,
    pub deferred: f64,
    /// deferred / eager.
    pub ratio: f64,
}

/// A target of the issue and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub target: String,
    pub measured: String,
    pub met: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub benchmark: &'static str,
    pub spec: RunSpec,
    pub quick: bool,
    pub rounds: usize,
    pub graph: BTreeMap<&'static str, f64>,
    pub mix_percent: BTreeMap<&'static str, f64>,
    pub engines: Vec<EngineSummary>,
    /// The engine compared with `strata-eager`: `strata-deferred`, or in an A/A
    /// control `strata-eager-b`.
    pub compared: &'static str,
    pub deferred_vs_eager: Vec<Ratio>,
    pub targets: Vec<Target>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn summarize(kind: EngineKind, runs: &[&EngineRun]) -> EngineSummary {
    let mut errors = Vec::new();
    let mut mix: Option<MixOutput> = None;
    let mut counters = Counters::default();
    let mut round_ops = Vec::new();
    for r in runs {
        if let Some(e) = &r.error {
            errors.push(format!("round {}: {e}", r.round + 1));
        }
        if let Some(m) = &r.mix {
            round_ops.push(m.ops.iter().sum::<u64>() as f64 / m.elapsed_secs.max(1e-9));
            counters = counters.merge(&r.counters);
            match &mut mix {
                None => mix = Some(m.duplicate()),
                Some(all) => all.merge(m),
            }
        }
    }
    let ok = errors.is_empty() && mix.is_some();
    let m = mix.unwrap_or_else(MixOutput::empty);
    let secs = m.elapsed_secs.max(1e-9);
    let total: u64 = m.ops.iter().sum();
    let sum_where = |read: bool, xs: &[u64; 10]| -> u64 {
        MIX.iter()
            .filter(|(k, _)| k.is_read() == read)
            .map(|(k, _)| xs[k.index()])
            .sum()
    };
    let (reads, writes) = (sum_where(true, &m.ops), sum_where(false, &m.ops));
    let mean = |busy: u64, n: u64| if n == 0 { 0.0 } else { us(busy) / n as f64 };
    let per_op = MIX
        .iter()
        .map(|(k, _)| {
            let i = k.index();
            let h = &m.hists[i];
            let n = m.ops[i];
            OpSummary {
                op: *k,
                count: n,
                share: if total == 0 {
                    0.0
                } else {
                    100.0 * n as f64 / total as f64
                },
                rows_per_op: if n == 0 { 0.0 } else { m.rows[i] as f64 / n as f64 },
                mean_us: mean(m.busy_ns[i], n),
                p50_us: us(h.value_at_quantile(0.50)),
                p90_us: us(h.value_at_quantile(0.90)),
                p99_us: us(h.value_at_quantile(0.99)),
                p999_us: us(h.value_at_quantile(0.999)),
                max_us: us(h.max()),
            }
        })
        .collect();
    let gll = m.ops[OpKind::GetLinkList.index()];
    EngineSummary {
        engine: kind.name(),
        ok,
        errors,
        notes: runs.first().map(|r| r.notes.clone()).unwrap_or_default(),
        loads: runs.iter().map(|r| r.load).collect(),
        round_ops_per_sec: round_ops,
        host_load: runs.iter().map(|r| r.host_load).collect(),
        elapsed_secs: m.elapsed_secs,
        cpu_secs: m.cpu_secs,
        cpu_us_per_op: if total == 0 {
            0.0
        } else {
            m.cpu_secs * 1e6 / total as f64
        },
        ops: total,
        ops_per_sec: total as f64 / secs,
        reads_per_sec: reads as f64 / secs,
        writes_per_sec: writes as f64 / secs,
        read_mean_us: mean(sum_where(true, &m.busy_ns), reads),
        write_mean_us: mean(sum_where(false, &m.busy_ns), writes),
        per_second: Summary::of(&m.samples.iter().map(|s| s.ops_per_sec).collect::<Vec<_>>()),
        per_op,
        skipped_updates: m.skipped,
        counters,
        dirty_per_getlinklist: counters
            .dirty_hits_skipped
            .filter(|_| gll > 0)
            .map(|d| d as f64 / gll as f64),
        primary_lookups_per_row: counters.lookups_per_row(),
        hidden_reads_per_write: counters
            .hidden_reads
            .filter(|_| writes > 0)
            .map(|h| h as f64 / writes as f64),
        samples: m.samples.clone(),
    }
}

fn ratios(e: &EngineSummary, d: &EngineSummary) -> (Vec<Ratio>, Vec<Target>) {
    let r = |what, eager: f64, deferred: f64| Ratio {
        what,
        eager,
        deferred,
        ratio: if eager == 0.0 { 0.0 } else { deferred / eager },
    };
    let op = |s: &EngineSummary, k: OpKind| s.per_op[k.index()].clone();
    let (eg, dg) = (op(e, OpKind::GetLinkList), op(d, OpKind::GetLinkList));
    let ratios = vec![
        r("ops/s", e.ops_per_sec, d.ops_per_sec),
        r("CPU us per op", e.cpu_us_per_op, d.cpu_us_per_op),
        r("reads/s", e.reads_per_sec, d.reads_per_sec),
        r("writes/s", e.writes_per_sec, d.writes_per_sec),
        r("read mean latency us", e.read_mean_us, d.read_mean_us),
        r("write mean latency us", e.write_mean_us, d.write_mean_us),
        r("getlinklist mean us", eg.mean_us, dg.mean_us),
        r("getlinklist p50 us", eg.p50_us, dg.p50_us),
        r("getlinklist p99 us", eg.p99_us, dg.p99_us),
        r(
            "updatelink mean us",
            op(e, OpKind::UpdateLink).mean_us,
            op(d, OpKind::UpdateLink).mean_us,
        ),
        r(
            "deletelink mean us",
            op(e, OpKind::DeleteLink).mean_us,
            op(d, OpKind::DeleteLink).mean_us,
        ),
    ];
    let slow = e.reads_per_sec / d.reads_per_sec.max(1e-9);
    let cost = d.read_mean_us / e.read_mean_us.max(1e-9);
    let targets = vec![
        Target {
            target: format!(
                "deferred read throughput within {READ_TARGET}x of eager (eager reads/s / deferred reads/s)"
            ),
            measured: format!(
                "{:.3} (eager {} reads/s, deferred {} reads/s)",
                slow,
                rate(e.reads_per_sec),
                rate(d.reads_per_sec)
            ),
            met: slow <= READ_TARGET,
        },
        Target {
            target: format!("deferred read cost within {READ_TARGET}x of eager (mean read latency, deferred / eager)"),
            measured: format!(
                "{:.3} (eager {:.1} us, deferred {:.1} us)",
                cost, e.read_mean_us, d.read_mean_us
            ),
            met: cost <= READ_TARGET,
        },
        Target {
            target: "overall cost of deferred below eager (process CPU per request, deferred / eager)".into(),
            measured: format!(
                "{:.3} (eager {:.1} us, deferred {:.1} us)",
                d.cpu_us_per_op / e.cpu_us_per_op.max(1e-9),
                e.cpu_us_per_op,
                d.cpu_us_per_op
            ),
            met: d.cpu_us_per_op < e.cpu_us_per_op,
        },
        Target {
            target: "overall throughput of deferred ahead of eager".into(),
            measured: format!(
                "{:.3}x (eager {} ops/s, deferred {} ops/s)",
                d.ops_per_sec / e.ops_per_sec.max(1e-9),
                rate(e.ops_per_sec),
                rate(d.ops_per_sec)
            ),
            met: d.ops_per_sec > e.ops_per_sec,
        },
    ];
    (ratios, targets)
}

/// Builds the report from every run.
pub fn build(
    spec: &RunSpec,
    quick: bool,
    rounds: usize,
    graph: BTreeMap<&'static str, f64>,
    engines: &[EngineKind],
    runs: &[EngineRun],
) -> Report {
    let summaries: Vec<EngineSummary> = engines
        .iter()
        .map(|k| summarize(*k, &runs.iter().filter(|r| r.engine == *k).collect::<Vec<_>>()))
        .collect();
    let find = |n: &str| summaries.iter().find(|s| s.engine == n && s.ok);
    // Without a deferred engine, a second eager one is compared in its place (A/A).
    let (second, compared) = match find(EngineKind::StrataDeferred.name()) {
        Some(d) => (Some(d), EngineKind::StrataDeferred.name()),
        None => (find(EngineKind::StrataEagerB.name()), EngineKind::StrataEagerB.name()),
    };
    let (deferred_vs_eager, targets) = match (find(EngineKind::StrataEager.name()), second) {
        (Some(e), Some(d)) => ratios(e, d),
        _ => (Vec::new(), Vec::new()),
    };
    Report {
        benchmark: "linkbench",
        spec: *spec,
        quick,
        rounds,
        graph,
        mix_percent: MIX.iter().map(|(k, _)| (k.name(), k.percent())).collect(),
        engines: summaries,
        compared,
        deferred_vs_eager,
        targets,
    }
}

/// A one-line summary of one run, for progress output.
pub fn one_line(r: &EngineRun) -> String {
    let head = format!("{} (round {})", r.engine.name(), r.round + 1);
    match (&r.error, &r.mix) {
        (Some(e), _) => format!("{head}: FAILED: {e}"),
        (None, Some(m)) => format!(
            "{head}: load {:.1} s + settle {:.1} s, {} ops/s over {:.1} s, {:.1} CPU us/op, host load {:.1} -> {:.1}",
            r.load.load_secs,
            r.load.settle_secs,
            rate(m.ops.iter().sum::<u64>() as f64 / m.elapsed_secs.max(1e-9)),
            m.elapsed_secs,
            m.cpu_secs * 1e6 / m.ops.iter().sum::<u64>().max(1) as f64,
            r.host_load.0,
            r.host_load.1
        ),
        (None, None) => format!("{head}: no run"),
    }
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// Prints the tables.
pub fn print(r: &Report) {
    println!();
    println!(
        "{:<16} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>10} {:>11} {:>9}",
        "engine",
        "load s",
        "settle s",
        "ops/s",
        "cpu us/op",
        "reads/s",
        "writes/s",
        "read us",
        "write us",
        "rows/gll",
        "dirty/gll",
        "hidden rds",
        "lkup/row"
    );
    for e in &r.engines {
        if !e.ok {
            println!("{:<16} FAILED: {}", e.engine, e.errors.join("; "));
            continue;
        }
        let load: f64 = e.loads.iter().map(|l| l.load_secs).sum::<f64>() / e.loads.len().max(1) as f64;
        let settle: f64 = e.loads.iter().map(|l| l.settle_secs).sum::<f64>() / e.loads.len().max(1) as f64;
        println!(
            "{:<16} {:>8.1} {:>8.1} {:>9} {:>9.1} {:>9} {:>9} {:>8.1} {:>8.1} {:>9.2} {:>10} {:>11} {:>9}",
            e.engine,
            load,
            settle,
            rate(e.ops_per_sec),
            e.cpu_us_per_op,
            rate(e.reads_per_sec),
            rate(e.writes_per_sec),
            e.read_mean_us,
            e.write_mean_us,
            e.per_op[OpKind::GetLinkList.index()].rows_per_op,
            opt(e.dirty_per_getlinklist, |x| format!("{x:.3}")),
            opt(e.counters.hidden_reads, thousands),
            opt(e.primary_lookups_per_row, |x| format!("{x:.3}")),
        );
    }
    let ok: Vec<&EngineSummary> = r.engines.iter().filter(|e| e.ok).collect();
    println!();
    print!("{:<12} {:>6}", "latency us", "share");
    for e in &ok {
        print!(" {:>24}", format!("{} p50/p99", e.engine));
    }
    println!();
    for (k, _) in MIX {
        print!("{:<12} {:>5.1}%", k.name(), k.percent());
        for e in &ok {
            let o = &e.per_op[k.index()];
            print!(" {:>24}", format!("{} / {}", f1(o.p50_us), f1(o.p99_us)));
        }
        println!();
    }
    println!();
    for e in &ok {
        let c = &e.counters;
        println!(
            "{:<16} per-second ops/s avg {} median {} max {}; dirty skipped {}, hidden reads {} ({} per write), \
             primary lookups {}, deferred deletes {}, flushes {}, compactions {}, stalls {}, on disk {}, \
             link index entries {}, updatenode skipped {}",
            e.engine,
            rate(e.per_second.average),
            rate(e.per_second.median),
            rate(e.per_second.maximum),
            opt(c.dirty_hits_skipped, thousands),
            opt(c.hidden_reads, thousands),
            opt(e.hidden_reads_per_write, |x| format!("{x:.2}")),
            opt(c.primary_lookups, thousands),
            opt(c.deferred_deletes, thousands),
            opt(c.flushes, thousands),
            opt(c.compactions, thousands),
            opt(c.stalls, thousands),
            opt(c.bytes_on_disk, mib),
            opt(c.link_index_entries, thousands),
            e.skipped_updates
        );
    }
    println!();
    for e in &ok {
        print_over_time(e);
    }
    for e in &ok {
        for n in &e.notes {
            println!("{:<16} {n}", e.engine);
        }
        let loads: Vec<String> = e.host_load.iter().map(|(a, b)| format!("{a:.1} -> {b:.1}")).collect();
        println!(
            "{:<16} host load average (1 min) over the mix, per round: {}; ops/s per round: {}",
            e.engine,
            loads.join(", "),
            e.round_ops_per_sec
                .iter()
                .map(|x| rate(*x))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.deferred_vs_eager.is_empty() {
        println!();
        if r.compared != EngineKind::StrataDeferred.name() {
            println!(
                "A/A control: \"deferred\" below is {}, a second eager engine; the ratios show how far two runs \
                 of one engine differ here",
                r.compared
            );
        }
        println!(
            "{:<24} {:>12} {:>12} {:>16}",
            "deferred vs eager", "eager", "deferred", "deferred/eager"
        );
        for x in &r.deferred_vs_eager {
            println!(
                "{:<24} {:>12.1} {:>12.1} {:>16.3}",
                x.what, x.eager, x.deferred, x.ratio
            );
        }
        println!();
        for t in &r.targets {
            println!(
                "[{}] {}: {}",
                if t.met { "met" } else { "MISSED" },
                t.target,
                t.measured
            );
        }
        println!(
            "note: with a fixed mix and closed-loop clients, reads/s = {:.1} % of ops/s in every engine, so the \
             reads/s ratio equals the ops/s ratio; the read-cost (latency) ratio isolates what deferral costs reads.",
            MIX.iter()
                .filter(|(k, _)| k.is_read())
                .map(|(k, _)| k.percent())
                .sum::<f64>()
        );
    }
}

/// Averages of the per-second samples over (up to) six equal windows of the run.
fn print_over_time(e: &EngineSummary) {
    let n = e.samples.len();
    if n == 0 {
        return;
    }
    let w = n.div_ceil(6);
    let cells: Vec<String> = e
        .samples
        .chunks(w)
        .enumerate()
        .map(|(i, c)| {
            let avg = |f: fn(&Sample) -> Option<f64>| {
                let xs: Vec<f64> = c.iter().filter_map(f).collect();
                (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
            };
            let span = format!("{}-{}s", i * w, i * w + c.len());
            let ops = avg(|s| Some(s.ops_per_sec)).unwrap_or(0.0);
            match (avg(|s| s.dirty_per_getlinklist), avg(|s| s.primary_lookups_per_row)) {
                (Some(d), Some(l)) => format!("{span} {} ops/s {d:.1} dirty {l:.2} lkup", rate(ops)),
                _ => format!("{span} {} ops/s", rate(ops)),
            }
        })
        .collect();
    println!(
        "{:<16} over time{}: {}",
        e.engine,
        if e.loads.len() > 1 {
            " (rounds one after the other)"
        } else {
            ""
        },
        cells.join(" | ")
    );
}
