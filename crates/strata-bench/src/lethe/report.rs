//! What `lethe` prints, checks, writes as JSON and plots.

use std::path::Path;

use serde::Serialize;

use super::variant::RunResult;
use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};
use crate::report::mib;

/// FADE must make space amplification at least this many times lower than no FADE on
/// the delete-heavy workload.
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
    /// Per FADE threshold of the heavy share: no-FADE mean space amp / FADE mean space amp.
    pub space_gain: Vec<(f64, f64)>,
    /// Per FADE threshold of the heavy share: the same ratio of the excess space
    /// (space amplification - 1), for reference.
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
        space_met: !space_gain.is_empty() && space_gain.iter().all(|(_, g)| *g >= SPACE_GAIN),
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
    let gains: Vec<String> = t
        .space_gain
        .iter()
        .map(|(d, g)| format!("D {d:.1} s: {g:.2}x"))
        .collect();
    println!(
        "target: space amplification (mean over the ingest) with FADE >= {SPACE_GAIN}x lower than without, \
         delete share {:.0} %: {} => {}",
        100.0 * t.heavy_share,
        if gains.is_empty() { "-".into() } else { gains.join(", ") },
        if t.space_met { "MET" } else { "NOT MET" }
    );
    let excess: Vec<String> = t
        .excess_space_gain
        .iter()
        .map(|(d, g)| format!("D {d:.1} s: {g:.2}x"))
        .collect();
    println!(
        "  (for reference, the excess space, space amplification - 1, is lower with FADE by: {})",
        if excess.is_empty() {
            "-".into()
        } else {
            excess.join(", ")
        }
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
