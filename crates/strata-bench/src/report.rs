//! Shared reporting helpers: summary statistics of samples, number formatting for
//! tables, progress bars, JSON files.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::BenchResult;

/// Average, maximum and median of a series of samples (the paper's Table 1 rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: usize,
    /// Arithmetic mean.
    pub average: f64,
    /// Largest sample.
    pub maximum: f64,
    /// Middle sample (mean of the two middle ones for an even count).
    pub median: f64,
}

impl Summary {
    /// Summarizes `xs`; all zero for an empty series.
    pub fn of(xs: &[f64]) -> Summary {
        if xs.is_empty() {
            return Summary::default();
        }
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if !n.is_multiple_of(2) {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Summary {
            samples: n,
            average: sorted.iter().sum::<f64>() / n as f64,
            maximum: sorted[n - 1],
            median,
        }
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate rounded to a whole number, with thousands separators.
pub fn rate(x: f64) -> String {
    thousands(x.max(0.0).round() as u64)
}

/// Bytes in MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1}M", bytes as f64 / (1u64 << 20) as f64)
}

/// `Some(v)` formatted by `f`, `None` as `-`.
pub fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// A progress bar counting `len` items of `what`, labelled `prefix`.
pub fn count_bar(len: u64, prefix: &str, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let template = format!("{{prefix:>20}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{per_sec}}, eta {{eta}}) {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(prefix.to_string());
    pb.enable_steady_tick(Duration::from_millis(250));
    pb
}

/// A progress bar over `seconds` seconds of a timed run, labelled `prefix`.
pub fn seconds_bar(seconds: u64, prefix: &str) -> ProgressBar {
    let pb = ProgressBar::new(seconds);
    if let Ok(style) = ProgressStyle::with_template("{prefix:>20} [{bar:30}] {pos}/{len} s {msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(prefix.to_string());
    pb
}

/// The stop flag of a timed run's threads, carrying the first error any of them hit.
#[derive(Debug, Default)]
pub struct StopOnError {
    stop: AtomicBool,
    error: Mutex<Option<String>>,
}

impl StopOnError {
    /// Records `e` (unless an earlier error is recorded) and stops the run.
    pub fn fail(&self, e: String) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        self.stop();
    }

    /// Stops the run.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether the run was stopped.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The first error, if any thread failed.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }
}

/// Writes `value` as pretty JSON to `path`, creating parent directories.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> BenchResult<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_odd_series() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0, 4.0]);
        assert_eq!(s.samples, 5);
        assert_eq!(s.average, 4.0);
        assert_eq!(s.maximum, 10.0);
        assert_eq!(s.median, 3.0);
    }

    #[test]
    fn summary_of_even_series_takes_mean_of_middle_pair() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.average, 2.5);
        assert_eq!(s.maximum, 4.0);
        assert_eq!(s.median, 2.5);
    }

    #[test]
    fn summary_of_one_and_of_none() {
        let s = Summary::of(&[7.5]);
        assert_eq!((s.average, s.maximum, s.median), (7.5, 7.5, 7.5));
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn summary_median_resists_an_outlier() {
        let mut xs = vec![100.0; 9];
        xs.push(1_000_000.0);
        let s = Summary::of(&xs);
        assert_eq!(s.median, 100.0);
        assert_eq!(s.maximum, 1_000_000.0);
        assert!((s.average - 100_090.0).abs() < 1e-9);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(112_343), "112,343");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(rate(21_680.6), "21,681");
    }
}
