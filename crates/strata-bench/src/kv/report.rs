//! What `kv` prints and saves: one db_bench line per phase, a comparison table over
//! engines (medians over rounds), and the JSON file.

use std::path::Path;

use serde::Serialize;

use super::args::KvConfig;
use super::dd::DdResult;
use super::workload::Workload;
use crate::BenchResult;
use crate::engines::KvStats;
use crate::report::Summary;
pub use crate::report::thousands;

const MB: f64 = (1u64 << 20) as f64;

/// The measurements of one workload on one engine in one round.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub engine: String,
    pub round: usize,
    /// Position of the workload in `--benchmarks` (a name may come more than once, as
    /// `readrandom,readrandom` for a cold then a warm cache).
    pub phase: usize,
    pub workload: String,
    pub threads: usize,
    /// Operations of the timed clients (readwhilewriting: the readers').
    pub ops: u64,
    /// Reads that found a key (seeks that landed on one).
    pub found: u64,
    /// Wall time of the operations.
    pub seconds: f64,
    pub micros_per_op: f64,
    pub ops_per_sec: f64,
    /// Key and value bytes written or read per second, in MiB (db_bench's "MB").
    pub mb_per_sec: f64,
    /// Flush and compaction wait after a writing phase (not in `seconds`).
    pub settle_seconds: f64,
    /// Key and value bytes written by the phase (deletes: key bytes).
    pub user_bytes: u64,
    /// readwhilewriting: writes done by the writer meanwhile.
    pub writer_ops: Option<u64>,
    pub flush_bytes: u64,
    pub compaction_bytes: u64,
    /// (flush + compaction bytes) / user bytes of the phase.
    pub write_amp: Option<f64>,
    /// SSTable bytes on disk after the phase (and its settle).
    pub sst_bytes: u64,
    /// Live key and value bytes after the phase.
    pub live_bytes: Option<u64>,
    /// sst_bytes / live_bytes.
    pub space_amp: Option<f64>,
    /// Data blocks looked up in the block cache per operation (read phases).
    pub data_blocks_per_op: Option<f64>,
    /// Data blocks read from files (block cache misses) per operation (read phases).
    pub block_misses_per_op: Option<f64>,
}

/// The raw numbers of a phase, turned into a [`PhaseResult`] by [`phase_result`].
pub struct PhaseInput<'a> {
    pub engine: &'a str,
    pub round: usize,
    pub phase: usize,
    pub workload: Workload,
    pub threads: usize,
    pub ops: u64,
    pub found: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub settle_seconds: f64,
    pub user_bytes: u64,
    pub writer_ops: Option<u64>,
    pub before: KvStats,
    pub after: KvStats,
    pub live_bytes: Option<u64>,
}

/// Derives rates and amplifications.
pub fn phase_result(p: PhaseInput<'_>) -> PhaseResult {
    let secs = p.seconds.max(1e-9);
    let flush_bytes = p.after.flush_bytes.saturating_sub(p.before.flush_bytes);
    let compaction_bytes = p.after.compaction_bytes.saturating_sub(p.before.compaction_bytes);
    let writes = p.workload.writes();
    let blocks = p.after.data_blocks.saturating_sub(p.before.data_blocks);
    let misses = p.after.data_block_misses.saturating_sub(p.before.data_block_misses);
    let reads = !writes && p.ops > 0;
    PhaseResult {
        engine: p.engine.to_string(),
        round: p.round,
        phase: p.phase,
        workload: p.workload.name(),
        threads: p.threads,
        ops: p.ops,
        found: p.found,
        seconds: p.seconds,
        micros_per_op: if p.ops == 0 {
            0.0
        } else {
            p.seconds * 1e6 / p.ops as f64
        },
        ops_per_sec: p.ops as f64 / secs,
        mb_per_sec: p.bytes as f64 / MB / secs,
        settle_seconds: p.settle_seconds,
        user_bytes: p.user_bytes,
        writer_ops: p.writer_ops,
        flush_bytes,
        compaction_bytes,
        write_amp: (writes && p.user_bytes > 0).then(|| (flush_bytes + compaction_bytes) as f64 / p.user_bytes as f64),
        sst_bytes: p.after.sst_bytes,
        live_bytes: p.live_bytes,
        space_amp: p
            .live_bytes
            .filter(|&l| l > 0)
            .map(|l| p.after.sst_bytes as f64 / l as f64),
        data_blocks_per_op: reads.then(|| blocks as f64 / p.ops as f64),
        block_misses_per_op: reads.then(|| misses as f64 / p.ops as f64),
    }
}

/// `fillrandom   :       2.345 micros/op 426439 ops/sec;   47.2 MB/s` plus what db_bench
/// prints after it (found counts) and our amplification figures.
pub fn db_bench_line(r: &PhaseResult) -> String {
    let mut s = format!(
        "{:<12} : {:>11.3} micros/op {} ops/sec; {:>6.1} MB/s",
        r.workload, r.micros_per_op, r.ops_per_sec as u64, r.mb_per_sec
    );
    if r.workload == "readrandom" || r.workload == "readwhilewriting" || r.workload == "seekrandom" {
        s.push_str(&format!(" ({} of {} found)", r.found, r.ops));
    }
    if let Some(w) = r.writer_ops {
        s.push_str(&format!(" [{} writes meanwhile]", thousands(w)));
    }
    if let Some(wa) = r.write_amp {
        s.push_str(&format!("; write amp {wa:.2}; settle {:.1} s", r.settle_seconds));
    }
    if let Some(sa) = r.space_amp {
        s.push_str(&format!("; space amp {sa:.2}"));
    }
    if let Some(b) = r.data_blocks_per_op {
        s.push_str(&format!(
            "; {b:.2} data blocks/op ({:.2} from file)",
            r.block_misses_per_op.unwrap_or(0.0)
        ));
    }
    s
}

/// `n` bytes as `64 MiB`, `4 KiB` or `100 B`.
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// Medians over the rounds of one engine and workload.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub ops_per_sec: f64,
    pub write_amp: Option<f64>,
    pub space_amp: Option<f64>,
    pub data_blocks_per_op: Option<f64>,
    pub rounds: usize,
}

fn median_of(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = xs.flatten().collect();
    (!v.is_empty()).then(|| Summary::of(&v).median)
}

/// The median over rounds of phase `phase` on `engine`.
fn cell(results: &[PhaseResult], engine: &str, phase: usize) -> Option<Cell> {
    let rs: Vec<&PhaseResult> = results
        .iter()
        .filter(|r| r.engine == engine && r.phase == phase)
        .collect();
    if rs.is_empty() {
        return None;
    }
    Some(Cell {
        ops_per_sec: median_of(rs.iter().map(|r| Some(r.ops_per_sec))).unwrap_or(0.0),
        write_amp: median_of(rs.iter().map(|r| r.write_amp)),
        space_amp: median_of(rs.iter().map(|r| r.space_amp)),
        data_blocks_per_op: median_of(rs.iter().map(|r| r.data_blocks_per_op)),
        rounds: rs.len(),
    })
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// Prints the comparison table: ops/s per engine, the first-to-second ratio when two
/// engines ran, then write amplification, space amplification and data blocks per read.
pub fn print_table(workloads: &[Workload], engines: &[String], results: &[PhaseResult], disk: Option<&DdResult>) {
    let pair = engines.len() == 2;
    let mut header = format!("{:<18}", "workload");
    for e in engines {
        header.push_str(&format!(" {:>14}", format!("{e} ops/s")));
    }
    if pair {
        header.push_str(&format!(" {:>8}", "ratio"));
    }
    for e in engines {
        header.push_str(&format!(" {:>10}", format!("WA {e}")));
    }
    for e in engines {
        header.push_str(&format!(" {:>10}", format!("SA {e}")));
    }
    for e in engines {
        header.push_str(&format!(" {:>11}", format!("blk/op {e}")));
    }
    println!();
    println!("{header}");
    println!("{}", "-".repeat(header.len()));
    for (phase, w) in workloads.iter().enumerate() {
        let name = w.name();
        let cells: Vec<Option<Cell>> = engines.iter().map(|e| cell(results, e, phase)).collect();
        let mut line = format!("{name:<18}");
        for c in &cells {
            line.push_str(&format!(
                " {:>14}",
                c.as_ref()
                    .map_or("-".to_string(), |c| crate::report::rate(c.ops_per_sec))
            ));
        }
        if pair {
            let ratio = match (&cells[0], &cells[1]) {
                (Some(a), Some(b)) if b.ops_per_sec > 0.0 => format!("{:.2}x", a.ops_per_sec / b.ops_per_sec),
                _ => "-".to_string(),
            };
            line.push_str(&format!(" {ratio:>8}"));
        }
        for c in &cells {
            line.push_str(&format!(" {:>10}", fmt_opt(c.as_ref().and_then(|c| c.write_amp), 2)));
        }
        for c in &cells {
            line.push_str(&format!(" {:>10}", fmt_opt(c.as_ref().and_then(|c| c.space_amp), 2)));
        }
        for c in &cells {
            line.push_str(&format!(
                " {:>11}",
                fmt_opt(c.as_ref().and_then(|c| c.data_blocks_per_op), 2)
            ));
        }
        println!("{line}");
    }
    if pair {
        println!(
            "ratio = {} ops/s / {} ops/s (median over rounds)",
            engines[0], engines[1]
        );
    }
    println!(
        "WA: flush + compaction bytes / user bytes of the phase (WAL not counted); SA: SSTable bytes / live \
         bytes; blk/op: data blocks looked up per read (block cache hits + misses)"
    );
    for e in engines {
        let (work, user) = results
            .iter()
            .filter(|r| &r.engine == e && r.write_amp.is_some())
            .fold((0u64, 0u64), |(w, u), r| {
                (w + r.flush_bytes + r.compaction_bytes, u + r.user_bytes)
            });
        if user > 0 {
            println!(
                "{e}: write amplification over all writing phases {:.2} ({} flush + compaction bytes / {} user bytes)",
                work as f64 / user as f64,
                thousands(work),
                thousands(user)
            );
        }
    }
    if let Some(d) = disk {
        for e in engines {
            let rs: Vec<f64> = results
                .iter()
                .filter(|r| &r.engine == e && r.workload == "fillseq")
                .map(|r| r.mb_per_sec)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let m = Summary::of(&rs).median;
            println!(
                "fillseq {e}: user data {m:.1} MiB/s = {:.0}% of this disk's sequential write bandwidth, {:.1} MiB/s (`{}`)",
                100.0 * m / d.mib_per_sec.max(1e-9),
                d.mib_per_sec,
                d.command
            );
        }
    }
}

/// The JSON file of a run.
#[derive(Serialize)]
struct KvJson<'a> {
    benchmark: &'static str,
    config: &'a KvConfig,
    engines: &'a [String],
    disk_sequential_write: Option<&'a DdResult>,
    results: &'a [PhaseResult],
    summary: Vec<SummaryRow>,
}

#[derive(Serialize)]
struct SummaryRow {
    phase: usize,
    workload: String,
    engines: Vec<(String, Option<Cell>)>,
}

/// Writes the run's settings, every phase and the median table as JSON.
pub fn write(
    path: &Path,
    cfg: &KvConfig,
    engines: &[String],
    results: &[PhaseResult],
    disk: Option<&DdResult>,
) -> BenchResult<()> {
    let mut phases: Vec<(usize, String)> = Vec::new();
    for r in results {
        if !phases.iter().any(|(p, _)| *p == r.phase) {
            phases.push((r.phase, r.workload.clone()));
        }
    }
    phases.sort_by_key(|(p, _)| *p);
    let summary = phases
        .into_iter()
        .map(|(phase, w)| SummaryRow {
            engines: engines.iter().map(|e| (e.clone(), cell(results, e, phase))).collect(),
            phase,
            workload: w,
        })
        .collect();
    crate::report::write_json(
        path,
        &KvJson {
            benchmark: "kv",
            config: cfg,
            engines,
            disk_sequential_write: disk,
            results,
            summary,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(engine: &str, round: usize, phase: usize, workload: Workload, ops: u64) -> PhaseResult {
        phase_result(PhaseInput {
            engine,
            round,
            phase,
            workload,
            threads: 1,
            ops,
            found: ops,
            bytes: 0,
            seconds: 1.0,
            settle_seconds: 0.0,
            user_bytes: 0,
            writer_ops: None,
            before: KvStats::default(),
            after: KvStats::default(),
            live_bytes: None,
        })
    }

    /// A name given twice (a cold then a warm read) keeps two rows: each phase's
    /// median over rounds, not one median over both phases.
    #[test]
    fn a_repeated_workload_is_its_own_row() {
        let mut results = Vec::new();
        for round in 0..3 {
            results.push(phase("strata", round, 0, Workload::FillSeq, 500));
            results.push(phase("strata", round, 1, Workload::ReadRandom, 100 + round as u64));
            results.push(phase("strata", round, 2, Workload::ReadRandom, 1000 + round as u64));
        }
        let cold = cell(&results, "strata", 1).expect("cold");
        let warm = cell(&results, "strata", 2).expect("warm");
        assert_eq!((cold.ops_per_sec, cold.rounds), (101.0, 3));
        assert_eq!((warm.ops_per_sec, warm.rounds), (1001.0, 3));
        assert!(cell(&results, "rocksdb", 1).is_none());
    }
}
