//! Checking FADE's promise from the outside: every delete's issue time is recorded, and
//! the live files' oldest tombstone times are checked at short intervals. A file
//! holding a tombstone older than `now - D` at a check is a breach; since a file's time
//! is never later than its tombstones' issue times, every delete issued between that
//! time and `now - D` may be the late one, so all of them are counted as late (an upper
//! bound). With no breach seen, every tombstone whose deadline passed during the run
//! was gone from disk by it (up to the check interval).

use serde::Serialize;
use strata::db::LiveFile;

/// The audit of one threshold.
#[derive(Debug, Clone)]
pub struct Audit {
    /// Threshold, microseconds.
    pub threshold: u64,
    /// Breach intervals `[oldest tombstone time, now - D]`, in check order.
    intervals: Vec<(u64, u64)>,
    /// Most files in breach at one check.
    max_files: usize,
    /// Largest `now - D - oldest` seen, microseconds.
    max_late: u64,
    /// Levels where breaching files were seen (`true` = the last level).
    levels: std::collections::BTreeSet<(usize, bool)>,
    /// Time of the last check.
    last_check: Option<u64>,
    checks: u64,
}

/// What an audit found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AuditResult {
    /// Threshold, seconds.
    pub threshold_secs: f64,
    /// Checks made.
    pub checks: u64,
    /// Deletes whose deadline passed during the observed time.
    pub deletes_due: u64,
    /// Of those, deletes that may have stayed on disk past the deadline (upper bound).
    pub late_upper_bound: u64,
    /// Share persisted within the threshold (a lower bound; 1.0 = no breach seen).
    pub share_within: f64,
    /// Most files in breach at one check.
    pub max_files_in_breach: usize,
    /// Longest a tombstone was seen past its deadline, seconds.
    pub max_late_secs: f64,
    /// Levels of the files seen in breach, `*` marking the last level (e.g. `L3*`).
    pub breach_levels: Vec<String>,
}

impl Audit {
    /// An audit of threshold `threshold_micros`.
    pub fn new(threshold_micros: u64) -> Audit {
        Audit {
            threshold: threshold_micros,
            intervals: Vec::new(),
            max_files: 0,
            max_late: 0,
            levels: std::collections::BTreeSet::new(),
            last_check: None,
            checks: 0,
        }
    }

    /// One check of the live files at clock time `now`.
    pub fn check(&mut self, now: u64, files: &[LiveFile]) {
        self.checks += 1;
        self.last_check = Some(now);
        let Some(cutoff) = now.checked_sub(self.threshold) else {
            return;
        };
        let mut breached = 0;
        for f in files {
            let Some(t) = f.oldest_tombstone_time else { continue };
            if f.tombstones == 0 || t >= cutoff {
                continue;
            }
            breached += 1;
            self.levels.insert((f.level, f.last_level));
            self.max_late = self.max_late.max(cutoff - t);
            self.intervals.push((t, cutoff));
        }
        self.max_files = self.max_files.max(breached);
    }

    /// The result, given every delete's issue time in ascending order.
    pub fn result(&self, delete_times: &[u64]) -> AuditResult {
        let due = match self.last_check.and_then(|c| c.checked_sub(self.threshold)) {
            Some(cutoff) => delete_times.partition_point(|t| *t < cutoff) as u64,
            None => 0,
        };
        let mut iv = self.intervals.clone();
        iv.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (a, b) in iv {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let late: u64 = merged
            .iter()
            .map(|(a, b)| {
                (delete_times.partition_point(|t| *t <= *b) - delete_times.partition_point(|t| *t < *a)) as u64
            })
            .sum();
        AuditResult {
            threshold_secs: self.threshold as f64 / 1e6,
            checks: self.checks,
            deletes_due: due,
            late_upper_bound: late.min(due),
            share_within: if due == 0 {
                1.0
            } else {
                1.0 - late.min(due) as f64 / due as f64
            },
            max_files_in_breach: self.max_files,
            max_late_secs: self.max_late as f64 / 1e6,
            breach_levels: self
                .levels
                .iter()
                .map(|(l, last)| format!("L{l}{}", if *last { "*" } else { "" }))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(t: Option<u64>, tombstones: u64) -> LiveFile {
        LiveFile {
            tombstones,
            oldest_tombstone_time: t,
            ..LiveFile::default()
        }
    }

    #[test]
    fn no_breach_means_everything_within() {
        let mut a = Audit::new(100);
        a.check(1000, &[file(Some(950), 3), file(None, 0)]);
        let r = a.result(&[10, 20, 950, 960]);
        assert_eq!(r.deletes_due, 2);
        assert_eq!(r.late_upper_bound, 0);
        assert_eq!(r.share_within, 1.0);
    }

    #[test]
    fn breaches_count_every_delete_in_their_window() {
        let mut a = Audit::new(100);
        a.check(1000, &[file(Some(850), 3)]);
        a.check(1010, &[file(Some(850), 3), file(Some(880), 1)]);
        // Windows [850, 900] and [850, 910] merge; [880, 910] is inside.
        let r = a.result(&[100, 850, 870, 905, 911, 990]);
        assert_eq!(r.deletes_due, 4, "issued before 1010 - 100");
        assert_eq!(r.late_upper_bound, 3);
        assert!((r.share_within - 0.25).abs() < 1e-9);
        assert_eq!(r.max_files_in_breach, 2);
        assert!((r.max_late_secs - 60e-6).abs() < 1e-12);
    }
}
