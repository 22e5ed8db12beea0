//! What `churn` prints, checks, writes as JSON and plots.

use std::path::Path;

use serde::Serialize;

use super::timed::{Latency, ModeSample, Phase};
use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};

/// Deferred p99 may be at most this multiple of eager p99, in every second.
pub const P99_LIMIT: f64 = 1.5;
/// Secondary bytes / live bytes must be below this once the threshold has passed.
pub const BYTES_LIMIT: f64 = 1.5;
/// "Dirty entries fell below" this share.
pub const DIRTY_LIMIT: f64 = 0.01;

/// One mode's run.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    /// `eager` or `deferred`.
    pub mode: &'static str,
    /// Engine settings beyond the micro ones.
    pub settings: String,
    /// Clean secondary-index bytes per live row (four indexes), after the preload.
    pub clean_bytes_per_row: f64,
    /// First second whose selects met under 1 % dirty entries.
    pub dirty_below_1pct_at: Option<f64>,
    /// Start of the final stretch of seconds that all stayed under 1 % dirty entries.
    pub dirty_below_1pct_for_good_at: Option<f64>,
    /// Equality and range select latency over the whole phase.
    pub overall: [Latency; 2],
    /// Per-second samples.
    pub samples: Vec<ModeSample>,
}

impl ModeResult {
    /// Summarizes a mode's samples.
    pub fn new(mode: &'static str, settings: String, clean_bytes_per_row: f64, phase: Phase) -> Self {
        let Phase { samples, overall } = phase;
        let below = |s: &ModeSample| s.dirty_share.is_some_and(|d| d < DIRTY_LIMIT);
        let first = samples.iter().find(|s| below(s)).map(|s| s.t);
        let for_good = match samples.iter().rposition(|s| !below(s)) {
            None => samples.first().map(|s| s.t),
            Some(i) => samples.get(i + 1).map(|s| s.t),
        };
        ModeResult {
            mode,
            settings,
            clean_bytes_per_row,
            dirty_below_1pct_at: first,
            dirty_below_1pct_for_good_at: for_good,
            overall,
            samples,
        }
    }
}

/// The targets, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Targets {
    /// Seconds where both modes ran selects of the kind, per kind (equality, range).
    pub compared_seconds: [usize; 2],
    /// Largest deferred / eager p99 ratio, per kind.
    pub worst_p99_ratio: [Option<f64>; 2],
    /// Seconds whose ratio exceeded the limit, per kind.
    pub p99_violations: [usize; 2],
    /// Seconds where deferred p99 was above eager's at all, per kind.
    pub deferred_slower_seconds: [usize; 2],
    /// Deferred / eager p99 over the whole phase, per kind.
    pub overall_p99_ratio: [Option<f64>; 2],
    /// Deferred p99 within 1.5x of eager in every second, both kinds.
    pub p99_met: bool,
    /// The deferred side's delete persistence threshold, seconds.
    pub threshold_secs: Option<f64>,
    /// Largest deferred secondary bytes / live bytes at or after the threshold.
    pub worst_bytes_ratio_after_threshold: Option<f64>,
    /// Under 1.5 in every second from the threshold on (`None`: not measurable: no
    /// threshold, or the run ended before it).
    pub bytes_met: Option<bool>,
}

fn p99(l: &Latency) -> Option<f64> {
    (l.count > 0 && l.p99_us > 0.0).then_some(l.p99_us)
}

/// Checks the targets on the eager and deferred series.
pub fn targets(eager: &ModeResult, deferred: &ModeResult, threshold_secs: Option<f64>) -> Targets {
    let mut compared = [0usize; 2];
    let mut worst = [None::<f64>; 2];
    let mut violations = [0usize; 2];
    let mut slower = [0usize; 2];
    for (e, d) in eager.samples.iter().zip(&deferred.samples) {
        for (k, (le, ld)) in [(&e.equality, &d.equality), (&e.range, &d.range)]
            .into_iter()
            .enumerate()
        {
            if let (Some(a), Some(b)) = (p99(le), p99(ld)) {
                let r = b / a;
                compared[k] += 1;
                worst[k] = Some(worst[k].map_or(r, |w: f64| w.max(r)));
                if r > P99_LIMIT {
                    violations[k] += 1;
                }
                if r > 1.0 {
                    slower[k] += 1;
                }
            }
        }
    }
    let after: Vec<f64> = match threshold_secs {
        Some(th) => deferred
            .samples
            .iter()
            .filter(|s| s.t >= th)
            .map(|s| s.secondary_over_live)
            .collect(),
        None => Vec::new(),
    };
    let worst_bytes = after.iter().copied().reduce(f64::max);
    Targets {
        compared_seconds: compared,
        worst_p99_ratio: worst,
        p99_violations: violations,
        deferred_slower_seconds: slower,
        overall_p99_ratio: [0, 1].map(|k| match (p99(&eager.overall[k]), p99(&deferred.overall[k])) {
            (Some(a), Some(b)) => Some(b / a),
            _ => None,
        }),
        p99_met: compared.iter().all(|c| *c > 0) && violations.iter().all(|v| *v == 0),
        threshold_secs,
        worst_bytes_ratio_after_threshold: worst_bytes,
        bytes_met: worst_bytes.map(|w| w < BYTES_LIMIT),
    }
}

fn ratio(a: &Latency, b: &Latency) -> String {
    match (p99(a), p99(b)) {
        (Some(a), Some(b)) => format!("{:.2}", b / a),
        _ => "-".into(),
    }
}

fn us(l: &Latency) -> String {
    if l.count == 0 {
        return "-".into();
    }
    format!("{:.0}/{:.0}/{:.0}", l.p50_us, l.p99_us, l.max_us)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".into(), f)
}

/// The per-second table.
pub fn print_samples(eager: &ModeResult, deferred: &ModeResult) {
    println!(
        "{:>5} | {:>17} {:>17} {:>5} | {:>20} {:>20} {:>5} | {:>6} {:>6} | {:>9} | {:>5} {:>5} | {:>9} | {:>7} | {:>5}",
        "t s",
        "eq eager p50/99/max",
        "eq defer p50/99/max",
        "p99x",
        "range eager p50/99/max",
        "range defer p50/99/max",
        "p99x",
        "dirty/",
        "dirty%",
        "lookups/",
        "sec/live",
        "",
        "file blk/",
        "compact",
        "sel/s"
    );
    println!(
        "{:>5} | {:>17} {:>17} {:>5} | {:>20} {:>20} {:>5} | {:>6} {:>6} | {:>9} | {:>5} {:>5} | {:>9} | {:>7} | {:>5}",
        "", "us", "us", "", "us", "us", "", "select", "defer", "row e/d", "eager", "defer", "select e/d", "MB e/d", ""
    );
    for (e, d) in eager.samples.iter().zip(&deferred.samples) {
        println!(
            "{:>5.0} | {:>17} {:>17} {:>5} | {:>20} {:>20} {:>5} | {:>6.2} {:>6} | {:>9} | {:>5.2} {:>5.2} | {:>9} | {:>7} | {:>5}",
            d.t,
            us(&e.equality),
            us(&d.equality),
            ratio(&e.equality, &d.equality),
            us(&e.range),
            us(&d.range),
            ratio(&e.range, &d.range),
            d.dirty_per_select,
            opt(d.dirty_share, |x| format!("{:.2}", 100.0 * x)),
            format!(
                "{}/{}",
                opt(e.lookups_per_row, |x| format!("{x:.2}")),
                opt(d.lookups_per_row, |x| format!("{x:.2}"))
            ),
            e.secondary_over_live,
            d.secondary_over_live,
            format!(
                "{}/{}",
                opt(e.file_blocks_per_select, |x| format!("{x:.1}")),
                opt(d.file_blocks_per_select, |x| format!("{x:.1}"))
            ),
            format!("{}/{}", e.compaction_bytes >> 20, d.compaction_bytes >> 20),
            d.equality.count + d.range.count,
        );
    }
}

/// The per-mode summary and the targets.
pub fn print_summary(modes: &[&ModeResult], t: &Targets) {
    println!();
    for m in modes {
        let s = &m.samples;
        let max_of = |f: &dyn Fn(&ModeSample) -> f64| s.iter().map(f).fold(0.0, f64::max);
        println!(
            "{:<9} whole phase p50/p99/max: equality {} us ({} selects), range {} us ({} selects)",
            m.mode,
            us(&m.overall[0]),
            m.overall[0].count,
            us(&m.overall[1]),
            m.overall[1].count
        );
        println!(
            "{:<9} worst-second p99: equality {:.0} us, range {:.0} us; max {:.0} / {:.0} us; dirty hits/select max {:.2}; \
             secondary/live max {:.2}, last {:.2}; dirty entries < 1 %: first at {}, for good from {}",
            m.mode,
            max_of(&|x| x.equality.p99_us),
            max_of(&|x| x.range.p99_us),
            max_of(&|x| x.equality.max_us),
            max_of(&|x| x.range.max_us),
            max_of(&|x| x.dirty_per_select),
            max_of(&|x| x.secondary_over_live),
            s.last().map_or(0.0, |x| x.secondary_over_live),
            opt(m.dirty_below_1pct_at, |x| format!("{x:.0} s")),
            opt(m.dirty_below_1pct_for_good_at, |x| format!("{x:.0} s")),
        );
        println!("{:<9} settings: {}", "", m.settings);
    }
    println!();
    for (k, kind) in ["equality", "range"].iter().enumerate() {
        println!(
            "target: deferred p99 <= {P99_LIMIT}x eager in every second ({kind}): worst {} over {} seconds, {} seconds \
             over; deferred slower at all in {} seconds; whole-phase p99 deferred/eager {}",
            opt(t.worst_p99_ratio[k], |x| format!("{x:.2}x")),
            t.compared_seconds[k],
            t.p99_violations[k],
            t.deferred_slower_seconds[k],
            opt(t.overall_p99_ratio[k], |x| format!("{x:.2}x"))
        );
    }
    println!("  => {}", if t.p99_met { "MET" } else { "NOT MET" });
    if !t.p99_met {
        println!(
            "  (a second's p99 is its few slowest selects; `--control eager` runs eager on both sides and shows how \
             often an engine misses this against itself on this machine)"
        );
    }
    match (t.threshold_secs, t.worst_bytes_ratio_after_threshold) {
        (Some(th), Some(w)) => println!(
            "target: deferred secondary bytes / live bytes < {BYTES_LIMIT} from the persistence threshold ({th:.0} s) on: \
             worst {w:.2} => {}",
            if w < BYTES_LIMIT { "MET" } else { "NOT MET" }
        ),
        (Some(th), None) => println!(
            "target: secondary bytes / live bytes: not measured (the run ended before the threshold, {th:.0} s)"
        ),
        (None, _) => println!("target: secondary bytes / live bytes: not measured (no persistence threshold set)"),
    }
}

/// Writes the JSON report.
pub fn write_json<T: Serialize>(path: &Path, report: &T) -> BenchResult<()> {
    crate::report::write_json(path, report)
}

/// p99 over time for both modes (equality and range), dirty share and index bloat.
pub fn plot(path: &Path, modes: &[&ModeResult]) -> BenchResult<()> {
    let series = |f: &dyn Fn(&ModeSample) -> Option<f64>| -> Vec<Series> {
        modes
            .iter()
            .enumerate()
            .map(|(i, m)| Series {
                name: m.mode.to_string(),
                color: i,
                points: m.samples.iter().filter_map(|s| f(s).map(|y| (s.t, y))).collect(),
            })
            .collect()
    };
    let panels = [
        Panel {
            title: "p99 latency of equality selects (f2 = x, limit 10), per second".into(),
            y_label: "microseconds".into(),
            series: series(&|s| p99(&s.equality)),
        },
        Panel {
            title: "p99 latency of range selects (f2 in a window of 1,000 values), per second".into(),
            y_label: "microseconds".into(),
            series: series(&|s| p99(&s.range)),
        },
        Panel {
            title: "dirty entries met by selects (%)".into(),
            y_label: "percent".into(),
            series: series(&|s| s.dirty_share.map(|d| 100.0 * d)),
        },
        Panel {
            title: "secondary index bytes / live bytes".into(),
            y_label: "ratio".into(),
            series: series(&|s| Some(s.secondary_over_live)),
        },
    ];
    line_chart(path, "seconds since the churn ended", &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, eq_p99: f64, dirty: Option<f64>, bytes: f64) -> ModeSample {
        ModeSample {
            t,
            equality: Latency {
                count: 100,
                p50_us: 1.0,
                p99_us: eq_p99,
                max_us: eq_p99,
            },
            range: Latency {
                count: 10,
                p50_us: 1.0,
                p99_us: 10.0,
                max_us: 10.0,
            },
            dirty_share: dirty,
            secondary_over_live: bytes,
            ..ModeSample::default()
        }
    }

    fn mode(name: &'static str, samples: Vec<ModeSample>) -> ModeResult {
        ModeResult::new(
            name,
            String::new(),
            1.0,
            Phase {
                samples,
                overall: [Latency::default(); 2],
            },
        )
    }

    #[test]
    fn p99_target_needs_every_second_and_bytes_count_from_the_threshold() {
        let eager = mode(
            "eager",
            (1..=4).map(|t| sample(t as f64, 100.0, Some(0.0), 2.0)).collect(),
        );
        let deferred = mode(
            "deferred",
            vec![
                sample(1.0, 140.0, Some(0.30), 3.0),
                sample(2.0, 160.0, Some(0.005), 2.0),
                sample(3.0, 100.0, Some(0.02), 1.4),
                sample(4.0, 90.0, Some(0.001), 1.2),
            ],
        );
        let t = targets(&eager, &deferred, Some(3.0));
        assert_eq!(t.compared_seconds, [4, 4]);
        assert_eq!(t.p99_violations, [1, 0]);
        assert_eq!(t.deferred_slower_seconds, [2, 0]);
        assert!(!t.p99_met);
        assert_eq!(t.worst_bytes_ratio_after_threshold, Some(1.4));
        assert_eq!(t.bytes_met, Some(true));
        assert_eq!(deferred.dirty_below_1pct_at, Some(2.0));
        assert_eq!(deferred.dirty_below_1pct_for_good_at, Some(4.0));
        assert_eq!(eager.dirty_below_1pct_for_good_at, Some(1.0));
    }
}
