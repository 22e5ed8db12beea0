//! Delete-driven compaction: FADE's delete persistence threshold (Lethe) and tombstone
//! density triggers.
//!
//! With a threshold `D`, the memtable and the levels that hold data get time shares
//! `d_0 .. d_{n-1}` that grow geometrically with the size ratio `T` (a deeper level
//! holds `T` times more data, so it may take `T` times longer) and sum to `D`:
//!
//! ```text
//!   d_j = d_0 * T^j,   d_0 = D * (T - 1) / (T^n - 1),
//!   slot 0 = memtable, slot r+1 = the r-th non-empty level (0 = the topmost one)
//! ```
//!
//! Empty levels get no share: files pass through them by moves, without a rewrite, and
//! counting them would shrink every other share by a factor `T` per empty level (a deep
//! tree with sparse levels would then flush and push tombstones down several times a
//! second, rewriting its big last level each time).
//!
//! A file whose oldest tombstone is older than the cumulative share of its slot is
//! *expired*: it is compacted (down a level, or in place at the last level where its
//! tombstones are dropped), whatever the size triggers say. The last level's deadline is
//! always `D` and every other one is shorter, so a tombstone written at time `t` is in
//! the last level by `t + D` and dropped there, with the data it deletes. Files are also
//! compacted early when their share of tombstones passes the density trigger.

use std::time::Duration;

use crate::options::Options;
use crate::version::KeyspaceVersion;

/// Levels of `ks` holding at least one run (at least 1, for an empty tree).
pub fn held_levels(ks: &KeyspaceVersion) -> usize {
    held_slot(&held(ks), 0).1
}

/// Rank of level `level` among the levels of `ks` holding runs: how many non-empty
/// levels lie above it.
pub fn held_rank(ks: &KeyspaceVersion, level: usize) -> usize {
    held_slot(&held(ks), level).0
}

fn held(ks: &KeyspaceVersion) -> Vec<bool> {
    ks.levels.iter().map(|l| !l.runs.is_empty()).collect()
}

/// Given which levels hold runs: the rank of `level` among them (non-empty levels
/// above it) and how many there are (at least 1).
pub fn held_slot(held: &[bool], level: usize) -> (usize, usize) {
    let rank = held.iter().take(level).filter(|h| **h).count();
    (rank, held.iter().filter(|h| **h).count().max(1))
}

/// Cumulative deadline (microseconds) of slot `slot` out of `slots` (memtable = 0).
pub fn deadline_micros(threshold: Duration, size_ratio: f64, slot: usize, slots: usize) -> u64 {
    let d = threshold.as_micros() as f64;
    let t = size_ratio.max(1.0 + 1e-9);
    let n = slots.max(1) as i32;
    let d0 = d * (t - 1.0) / (t.powi(n) - 1.0);
    let cumulative = d0 * (t.powi(slot as i32 + 1) - 1.0) / (t - 1.0);
    (cumulative.min(d)) as u64
}

/// Why a file is compacted for its deletes, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub enum DeleteUrgency {
    /// Its oldest tombstone passed its level's deadline; the value is how far past it
    /// (microseconds), plus the tombstone density as a tie-breaker.
    Expired(f64),
    /// Its tombstone density passed the trigger; the value is the density.
    Dense(f64),
}

impl DeleteUrgency {
    /// Sort key: expired files first, then by the inner value.
    pub fn rank(self) -> (u8, f64) {
        match self {
            DeleteUrgency::Expired(v) => (1, v),
            DeleteUrgency::Dense(v) => (0, v),
        }
    }
}

/// What [`urgency`] needs to know about one file.
#[derive(Debug, Clone, Copy)]
pub struct FileDeletes {
    /// Time of its oldest tombstone (caller's clock), if it holds any.
    pub oldest_tombstone: Option<u64>,
    /// Tombstones it holds.
    pub tombstones: u64,
    /// Entries it holds.
    pub entries: u64,
    /// Entries a compaction of it would rewrite (its own and those it merges with).
    pub rewrite: u64,
}

/// True when the density trigger could fire for a file: its own tombstone share passes
/// it (the entries its compaction rewrites only lower that share), so only then is the
/// rewrite worth working out.
pub fn dense_on_its_own(opts: &Options, tombstones: u64, entries: u64) -> bool {
    opts.tombstone_density_trigger
        .is_some_and(|t| tombstones > 0 && tombstones as f64 / entries.max(1) as f64 >= t)
}

/// How urgently a file at disk level `level` (of `levels` levels; both counted among
/// the levels holding data, see [`held_rank`]) needs compaction for its deletes.
///
/// The density trigger weighs the tombstones against the entries the compaction would
/// rewrite, not against the file alone: a small flushed file that is half tombstones,
/// merged into a level a thousand times its size, would rewrite the level to drop a few
/// entries (and again after the next flush). Such a file waits for its deadline or the
/// size triggers instead.
pub fn urgency(opts: &Options, now: u64, level: usize, levels: usize, f: FileDeletes) -> Option<DeleteUrgency> {
    let FileDeletes {
        oldest_tombstone,
        tombstones,
        entries,
        rewrite,
    } = f;
    let density = tombstones as f64 / entries.max(1) as f64;
    let merge_density = tombstones as f64 / rewrite.max(entries).max(1) as f64;
    if let (Some(d), Some(t)) = (opts.delete_persistence_threshold, oldest_tombstone) {
        let deadline = deadline_micros(d, opts.size_ratio, level + 1, levels + 1);
        let age = now.saturating_sub(t);
        if age >= deadline {
            return Some(DeleteUrgency::Expired((age - deadline) as f64 + density));
        }
    }
    match opts.tombstone_density_trigger {
        Some(trigger) if tombstones > 0 && merge_density >= trigger => Some(DeleteUrgency::Dense(merge_density)),
        _ => None,
    }
}

/// True when the memtable's tombstones have waited their share and it must be flushed.
pub fn memtable_expired(opts: &Options, now: u64, created_at: u64, has_tombstones: bool, levels: usize) -> bool {
    match opts.delete_persistence_threshold {
        Some(d) if has_tombstones => {
            now.saturating_sub(created_at) >= deadline_micros(d, opts.size_ratio, 0, levels + 1)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_grow_with_the_size_ratio_and_sum_to_the_threshold() {
        let d = Duration::from_secs(1000);
        let slots = 4;
        let c: Vec<u64> = (0..slots).map(|s| deadline_micros(d, 10.0, s, slots)).collect();
        // d0 = 1000 * 9 / 9999 s
        assert!((c[0] as f64 - 900_090.0).abs() < 10.0, "{c:?}");
        assert!(c.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(c[slots - 1], 1_000_000_000);
        // Each share is T times the one before.
        let s1 = (c[1] - c[0]) as f64;
        let s2 = (c[2] - c[1]) as f64;
        assert!((s2 / s1 - 10.0).abs() < 0.01);
    }

    #[test]
    fn empty_levels_take_no_share() {
        // L0 and L3 hold data, L1 and L2 are empty: two slots after the memtable.
        let held = [true, false, false, true];
        assert_eq!(held_slot(&held, 0), (0, 2));
        assert_eq!(held_slot(&held, 3), (1, 2));
        assert_eq!(held_slot(&[], 0), (0, 1));
        let d = Duration::from_secs(100);
        let (rank, levels) = held_slot(&held, 0);
        let l0 = deadline_micros(d, 10.0, rank + 1, levels + 1);
        let (rank, levels) = held_slot(&held, 3);
        let last = deadline_micros(d, 10.0, rank + 1, levels + 1);
        assert_eq!(last, 100_000_000, "the last level's deadline is the threshold");
        // Counted over four levels, L0 would get (1 + 10) / 11111 of D; over two, 11 / 111.
        assert!((l0 as f64 - 100e6 * 11.0 / 111.0).abs() < 10.0, "{l0}");
    }

    fn file(oldest_tombstone: Option<u64>, tombstones: u64, entries: u64, rewrite: u64) -> FileDeletes {
        FileDeletes {
            oldest_tombstone,
            tombstones,
            entries,
            rewrite,
        }
    }

    #[test]
    fn urgency_orders_expired_before_dense() {
        let opts = Options {
            delete_persistence_threshold: Some(Duration::from_secs(100)),
            tombstone_density_trigger: Some(0.5),
            size_ratio: 4.0,
            ..Options::default()
        };
        let now = 1_000_000_000;
        // Last of two levels: deadline is the whole threshold.
        let fresh = urgency(&opts, now, 1, 2, file(Some(now - 10_000_000), 1, 100, 100));
        assert_eq!(fresh, None);
        let old = urgency(&opts, now, 1, 2, file(Some(now - 100_000_000), 1, 100, 100));
        assert!(matches!(old, Some(DeleteUrgency::Expired(_))));
        let dense = urgency(&opts, now, 1, 2, file(Some(now), 60, 100, 100));
        assert!(matches!(dense, Some(DeleteUrgency::Dense(_))));
        // Only a file dense on its own can be dense for its rewrite.
        assert!(dense_on_its_own(&opts, 60, 100));
        assert!(!dense_on_its_own(&opts, 40, 100));
        assert_eq!(urgency(&opts, now, 1, 2, file(Some(now), 40, 100, 100)), None);
        // The same file merged into a level 100 times its size: not worth it early.
        assert_eq!(urgency(&opts, now, 0, 2, file(Some(now), 60, 100, 10_100)), None);
        // Its deadline still holds.
        let due = urgency(&opts, now, 0, 2, file(Some(now - 100_000_000), 60, 100, 10_100));
        assert!(matches!(due, Some(DeleteUrgency::Expired(_))));
        assert!(old.map(DeleteUrgency::rank) > dense.map(DeleteUrgency::rank));
        assert!(memtable_expired(&opts, now, now - 100_000_000, true, 2));
        assert!(!memtable_expired(&opts, now, now - 100_000_000, false, 2));
    }
}
