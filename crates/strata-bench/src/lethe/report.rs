//! What `lethe` prints, checks, writes as JSON and plots.

use std::path::Path;

use serde::Serialize;

use super::variant::RunResult;
use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};
use crate::report::mib;

/// FADE must make space amplification at least this many times lower than no FADE on
/// the delete-heavy workload. Space amplification as Lethe (after Dostoevsky) defines
/// it: bytes of superfluous entries (invalidated data and tombstones) over bytes of the
/// live ones, i.e. SSTable bytes / live bytes - 1.
pub const SPACE_GAIN: f64 = 2.0;

/// All runs of one delete share.
#[derive(Debug, Clone, Serialize)]
pub struct ShareResult {
    /// Share of operations that are deletes.
    pub delete_share: f64,
    /// The run without FADE first, then one per threshold.
    pub runs: Vec<RunResult>,
}

/// The targets as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Targets {
    /// Every FADE run persisted 100 % of its due tombstones within its threshold.
    pub all_within: bool,
    /// The delete-heavy share.
    pub heavy_share: f64,
    /// Per FADE threshold of the heavy share: the ratio of the plain bytes-on-disk
    /// ratios (SSTable bytes / live bytes), no FADE over FADE, for reference.
    pub space_gain: Vec<(f64, f64)>,
    /// Per FADE threshold of the heavy share: no-FADE space amplification over FADE's,
    /// in Lethe's definition (SSTable bytes / live bytes - 1), means over the ingest.
    pub excess_space_gain: Vec<(f64, f64)>,
    /// Every FADE run of the heavy share is at least 2x lower.
    pub space_met: bool,
    /// Per share and threshold: FADE write amplification minus the no-FADE one.
    pub extra_write_amp: Vec<(f64, f64, f64)>,
}

/// Checks the targets.
pub fn targets(shares: &[ShareResult]) -> Targets {
    let fade_runs = || {
        shares
            .iter()
            .flat_map(|s| s.runs.iter().filter(|r| r.threshold_secs.is_some()))
    };
    let all_within = fade_runs().all(|r| r.audits.iter().all(|a| a.late_upper_bound == 0));
    let heavy = shares.iter().max_by(|a, b| a.delete_share.total_cmp(&b.delete_share));
    let mut space_gain = Vec::new();
    let mut excess_gain = Vec::new();
    if let Some(h) = heavy
        && let Some(base) = h.runs.iter().find(|r| r.threshold_secs.is_none())
    {
        for r in h.runs.iter().filter(|r| r.threshold_secs.is_some()) {
            let excess = r.space_amp_mean_ingest - 1.0;
            if excess > 0.0 {
                excess_gain.push((
                    r.threshold_secs.unwrap_or(0.0),
                    (base.space_amp_mean_ingest - 1.0) / excess,
                ));
            }
            if r.space_amp_mean_ingest > 0.0 {
                space_gain.push((
                    r.threshold_secs.unwrap_or(0.0),
                    base.space_amp_mean_ingest / r.space_amp_mean_ingest,
                ));
            }
        }
    }
    let mut extra = Vec::new();
    for s in shares {
        if let Some(base) = s.runs.iter().find(|r| r.threshold_secs.is_none()) {
            for r in s.runs.iter().filter(|r| r.threshold_secs.is_some()) {
                extra.push((
                    s.delete_share,
                    r.threshold_secs.unwrap_or(0.0),
                    r.write_amplification - base.write_amplification,
                ));
            }
        }
    }
    Targets {
        all_within,
        heavy_share: heavy.map_or(0.0, |h| h.delete_share),
        space_met: !excess_gain.is_empty() && excess_gain.iter().all(|(_, g)| *g >= SPACE_GAIN),
        space_gain,
        excess_space_gain: excess_gain,
        extra_write_amp: extra,
    }
}

/// One table per delete share.
pub fn print_share(s: &ShareResult) {
    println!("delete share {:.0} %:", 100.0 * s.delete_share);
    println!(
        "  {:<14} {:>7} {:>8} {:>9} {:>10} {:>8} {:>8} | {:>6} {:>6} {:>6} | {:>8} {:>9} {:>9} {:>6} {:>7}",
        "run",
        "D s",
        "ingest s",
        "deletes",
        "within D",
        "late<=",
        "late s",
        "SA avg",
        "SA end",
        "drain",
        "gets/s",
        "compacted",
        "flushed",
        "w-amp",
        "tomb.end"
    );
    for r in &s.runs {
        for (i, a) in r.audits.iter().enumerate() {
            let first = i == 0;
            let name = if first { r.name.as_str() } else { "" };
            let head = format!(
                "  {:<14} {:>7.1} {:>8} {:>9} {:>9.3}% {:>8} {:>8.2}",
                name,
                a.threshold_secs,
                if first {
                    format!("{:.1}", r.ingest_secs)
                } else {
                    String::new()
                },
                if first { r.deletes.to_string() } else { String::new() },
                100.0 * a.share_within,
                a.late_upper_bound,
                a.max_late_secs
            );
            let head = if a.breach_levels.is_empty() {
                head
            } else {
                format!("{head} (in {})", a.breach_levels.join(" "))
            };
            if first {
                println!(
                    "{head} | {:>6.2} {:>6.2} {:>6.2} | {:>8.0} {:>9} {:>9} {:>6.2} {:>7}",
                    r.space_amp_mean_ingest,
                    r.space_amp_end_ingest,
                    r.space_amp_end,
                    r.gets_per_sec_ingest,
                    mib(r.compaction_bytes_written),
                    mib(r.flush_bytes),
                    r.write_amplification,
                    r.tombstones_at_end
                );
            } else {
                println!("{head} |");
            }
        }
    }
}

/// The legend and the targets.
pub fn print_targets(t: &Targets) {
    println!();
    println!(
        "  (D s = threshold audited (the no-FADE run is audited against every threshold); within D = share of the \
         deletes due in the run whose tombstones were seen gone from disk by their deadline (a lower bound); \
         late<= = deletes that may have been late (upper bound); late s = longest a tombstone was seen past its \
         deadline; SA = space amplification (SSTable bytes / live key+value bytes): mean over the ingest, at its \
         end, and after the drain; gets/s = point gets during the ingest; compacted/flushed = bytes written)"
    );
    println!();
    println!(
        "target: 100 % of tombstones persisted within the threshold (every FADE run) => {}",
        if t.all_within { "MET" } else { "NOT MET" }
    );
    let show = |v: &[(f64, f64)]| -> String {
        if v.is_empty() {
            return "-".into();
        }
        v.iter()
            .map(|(d, g)| format!("D {d:.1} s: {g:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "target: space amplification as Lethe defines it (superfluous bytes / live bytes = SA - 1, mean over \
         the ingest) with FADE >= {SPACE_GAIN}x lower than without, delete share {:.0} %: {} => {}",
        100.0 * t.heavy_share,
        show(&t.excess_space_gain),
        if t.space_met { "MET" } else { "NOT MET" }
    );
    println!(
        "  (for reference, the plain ratio SA = SSTable bytes / live bytes is lower with FADE by: {})",
        show(&t.space_gain)
    );
    let extra: Vec<String> = t
        .extra_write_amp
        .iter()
        .map(|(s, d, w)| format!("{:.0} % / D {d:.1} s: {w:+.2}", 100.0 * s))
        .collect();
    println!(
        "write amplification FADE adds (share / threshold): {}",
        extra.join(", ")
    );
}

/// Space amplification over time, one panel per delete share.
pub fn plot(path: &Path, shares: &[ShareResult]) -> BenchResult<()> {
    let panels: Vec<Panel> = shares
        .iter()
        .map(|s| Panel {
            title: format!(
                "space amplification (SSTable bytes / live bytes), delete share {:.0} %",
                100.0 * s.delete_share
            ),
            y_label: "space amplification".into(),
            series: s
                .runs
                .iter()
                .enumerate()
                .map(|(i, r)| Series {
                    name: r.name.clone(),
                    color: i,
                    points: r.samples.iter().map(|x| (x.t, x.space_amp)).collect(),
                })
                .collect(),
        })
        .collect();
    line_chart(path, "seconds", &panels)
}
