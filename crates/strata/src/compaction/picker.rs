//! Choosing the next compaction: which runs and files to merge, and where the output
//! goes.
//!
//! Every level has a score; the highest score of at least 1 wins:
//! * level 0: runs / `l0_compaction_trigger`;
//! * a leveled level (one run): bytes / capacity, capacity = memtable budget x T^i;
//!   it compacts one file at a time (round-robin over the key space) into the
//!   overlapping files of the next level, or moves the file down when nothing overlaps;
//! * a tiered level (up to K runs): runs / (K + 1); all its runs merge into one new run
//!   of the next level (or into the leveled last level under lazy leveling); the last
//!   level merges in place instead while it is within its capacity.
//!
//! Where each output goes keeps the version invariants 3 (run order) and 4 (depth) of
//! [`crate::version`].
//!
//! Files already being compacted are never picked twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::fade::{self, DeleteUrgency};
use crate::options::Options;
use crate::version::{KeyspaceVersion, TableFile, Version};

/// The runs of one level taking part in a compaction.
#[derive(Debug, Clone)]
pub struct InputRun {
    /// Level of the run.
    pub level: usize,
    /// Run id.
    pub run: u64,
    /// Its files taking part, in key order.
    pub files: Vec<Arc<TableFile>>,
}

/// A compaction to run.
#[derive(Debug, Clone)]
pub struct CompactionTask {
    /// Keyspace id.
    pub keyspace: u32,
    /// Input runs, newest first.
    pub inputs: Vec<InputRun>,
    /// Level receiving the output.
    pub output_level: usize,
    /// Run receiving the output (`None` = a new run, newest of its level).
    pub output_run: Option<u64>,
    /// Nothing older than the inputs exists in their key range.
    pub bottommost: bool,
    /// Move the files without rewriting them.
    pub trivial_move: bool,
    /// Why it was picked (for stats and logs).
    pub reason: &'static str,
}

impl CompactionTask {
    /// Every input file.
    pub fn files(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.inputs.iter().flat_map(|r| r.files.iter())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.files().map(|f| f.meta.size).sum()
    }
}

fn key_range<'a>(files: impl Iterator<Item = &'a Arc<TableFile>>) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut r: Option<(Vec<u8>, Vec<u8>)> = None;
    for f in files {
        r = Some(match r {
            None => (f.meta.smallest.clone(), f.meta.largest.clone()),
            Some((lo, hi)) => (lo.min(f.meta.smallest.clone()), hi.max(f.meta.largest.clone())),
        });
    }
    r
}

/// Entries a delete-driven compaction of `f` at level `li` rewrites, as
/// `compact_file_for_deletes` would run it: a tiered level (or level 0) merges all its
/// runs, a leveled one the file alone; a merge into a leveled level also rewrites the
/// files it overlaps there, and a tiered last level is merged in place whole.
fn rewrite_entries(ks: &KeyspaceVersion, li: usize, f: &Arc<TableFile>, opts: &Options) -> u64 {
    let entries = |x: &Arc<TableFile>| x.meta.entries + x.meta.range_tombstones;
    let last = ks.last_level();
    let Some(level) = ks.levels.get(li) else {
        return entries(f);
    };
    let leveled = opts.is_leveled(li, last);
    let inputs: Vec<&Arc<TableFile>> = if leveled { vec![f] } else { level.files().collect() };
    let own: u64 = inputs.iter().map(|x| entries(x)).sum();
    let out = li + 1;
    let out_leveled = if leveled {
        true
    } else {
        opts.runs_per_level == 1 || (opts.lazy_leveling && out == last)
    };
    if li >= last || !out_leveled {
        return own;
    }
    let Some((lo, hi)) = key_range(inputs.into_iter()) else {
        return own;
    };
    let below: u64 = ks
        .levels
        .get(out)
        .map(|l| {
            l.files()
                .filter(|x| x.overlaps(Some(&lo), Some(&hi)))
                .map(entries)
                .sum()
        })
        .unwrap_or(0);
    own + below
}

/// True if nothing outside the task can hold data older than its inputs in their key
/// range: no deeper level overlaps, and no other run of the output level does.
pub fn is_bottommost(ks: &KeyspaceVersion, inputs: &[InputRun], output_level: usize, output_run: Option<u64>) -> bool {
    let Some((lo, hi)) = key_range(inputs.iter().flat_map(|r| r.files.iter())) else {
        return true;
    };
    let input_files: HashSet<u64> = inputs.iter().flat_map(|r| r.files.iter().map(|f| f.number())).collect();
    for (li, level) in ks.levels.iter().enumerate() {
        if li < output_level {
            continue;
        }
        for run in &level.runs {
            let same_run = li == output_level && Some(run.id) == output_run;
            for f in &run.files {
                if input_files.contains(&f.number()) {
                    continue;
                }
                if f.overlaps(Some(&lo), Some(&hi)) && !(same_run && li == output_level) {
                    return false;
                }
                // Files of the output run outside the inputs do not overlap them.
            }
        }
    }
    true
}

/// What the delete-driven picker needs to know about time and snapshots.
#[derive(Debug, Clone, Default)]
pub struct DeleteClock {
    /// Now, in the clock's microseconds.
    pub now: u64,
    /// The oldest live snapshot, if any.
    pub oldest_snapshot: Option<crate::key::SeqNo>,
    /// Deferred tables: their primary files carry pending-purge times.
    pub obligations: Arc<super::DeferredRegistry>,
    /// Keyspaces of deferred tables whose selects meet many dirty entries: their pending
    /// purges are pushed down now, whatever the deadlines say.
    pub urgent: HashSet<u32>,
}

/// Run id of the one run of a leveled level. Fixed, so that concurrent compactions
/// into an empty leveled level can never create two runs there.
pub const LEVELED_RUN: u64 = 0;

/// Picks compactions; keeps the round-robin cursor of each leveled level.
#[derive(Debug, Default)]
pub struct CompactionPicker {
    cursors: HashMap<(u32, usize), Vec<u8>>,
}

impl CompactionPicker {
    /// The most urgent compaction over all keyspaces not `paused`, avoiding `busy` files.
    pub fn pick(
        &mut self,
        version: &Version,
        opts: &Options,
        busy: &HashSet<u64>,
        paused: &HashSet<u32>,
        clock: DeleteClock,
    ) -> Option<CompactionTask> {
        // Persistence deadlines are promises: expired tombstones go first.
        let deletes = self.pick_for_deletes(version, opts, busy, paused, &clock);
        if let Some((true, t)) = deletes {
            return Some(t);
        }
        if let Some(t) = self.pick_for_size(version, opts, busy, paused) {
            return Some(t);
        }
        deletes.map(|(_, t)| t)
    }

    fn pick_for_size(
        &mut self,
        version: &Version,
        opts: &Options,
        busy: &HashSet<u64>,
        paused: &HashSet<u32>,
    ) -> Option<CompactionTask> {
        let mut candidates: Vec<(f64, u32, usize)> = Vec::new();
        for ks in version.keyspaces.values() {
            if paused.contains(&ks.id) {
                continue;
            }
            let last = ks.last_level();
            for (li, level) in ks.levels.iter().enumerate() {
                let score = if li == 0 {
                    level.runs.len() as f64 / opts.l0_compaction_trigger as f64
                } else if opts.is_leveled(li, last) {
                    level.size() as f64 / opts.level_capacity(li) as f64
                } else {
                    level.runs.len() as f64 / (opts.runs_per_level + 1) as f64
                };
                if score >= 1.0 {
                    candidates.push((score, ks.id, li));
                }
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, ks_id, li) in candidates {
            let ks = version.keyspace(ks_id)?;
            if let Some(t) = self.pick_level(ks, li, opts, busy) {
                return Some(t);
            }
        }
        None
    }

    /// The most urgent delete-driven compaction (FADE deadline or tombstone density),
    /// with whether it is a deadline.
    fn pick_for_deletes(
        &mut self,
        version: &Version,
        opts: &Options,
        busy: &HashSet<u64>,
        paused: &HashSet<u32>,
        clock: &DeleteClock,
    ) -> Option<(bool, CompactionTask)> {
        if opts.delete_persistence_threshold.is_none()
            && opts.tombstone_density_trigger.is_none()
            && clock.urgent.is_empty()
        {
            return None;
        }
        let mut found: Vec<(DeleteUrgency, u32, usize, Arc<TableFile>)> = Vec::new();
        for ks in version.keyspaces.values() {
            if paused.contains(&ks.id) {
                continue;
            }
            let last = ks.last_level();
            // Deadlines are shared among the levels that hold data: an empty level
            // costs nothing to pass through (files move down it without a rewrite), so
            // giving it a share would only shrink every other level's.
            let held = fade::held_levels(ks);
            for (li, level) in ks.levels.iter().enumerate() {
                // Versions of a row meet (and the old ones are purged) once their runs
                // merge: nothing is pending in a last level made of a single run.
                let unsettled = li < last || level.runs.len() > 1;
                let rank = fade::held_rank(ks, li);
                let purges = clock.obligations.primaries.contains_key(&ks.id) && unsettled;
                for f in level.files() {
                    if (f.meta.tombstones == 0 && !purges) || busy.contains(&f.number()) {
                        continue;
                    }
                    // At the last level only a rewrite that can drop the tombstones
                    // helps; a snapshot older than them would keep them (and us looping).
                    if li == last && clock.oldest_snapshot.is_some_and(|s| s < f.meta.max_seq) {
                        continue;
                    }
                    let entries = f.meta.entries + f.meta.range_tombstones;
                    // Overlaps are looked up only for files dense on their own: picks run
                    // on every background round, over every file holding tombstones.
                    let rewrite = if fade::dense_on_its_own(opts, f.meta.tombstones, entries) {
                        rewrite_entries(ks, li, f, opts)
                    } else {
                        entries
                    };
                    let facts = fade::FileDeletes {
                        oldest_tombstone: f.meta.oldest_tombstone_time,
                        tombstones: f.meta.tombstones,
                        entries,
                        rewrite,
                    };
                    let u = fade::urgency(opts, clock.now, rank, held, facts);
                    let urgent = clock.urgent.contains(&ks.id) && unsettled && (purges || f.meta.tombstones > 0);
                    let u = match u {
                        None if urgent => Some(DeleteUrgency::Dense(
                            1.0 + f.meta.tombstones as f64 / f.meta.entries.max(1) as f64,
                        )),
                        u => u,
                    };
                    if let Some(u) = u {
                        found.push((u, ks.id, li, f.clone()));
                    }
                }
            }
        }
        found.sort_by(|a, b| b.0.rank().partial_cmp(&a.0.rank()).unwrap_or(std::cmp::Ordering::Equal));
        for (u, ks_id, li, f) in found {
            let ks = version.keyspace(ks_id)?;
            let expired = matches!(u, DeleteUrgency::Expired(_));
            if let Some(t) = self.compact_file_for_deletes(ks, li, &f, opts, busy) {
                return Some((expired, t));
            }
        }
        None
    }

    /// Moves a file's tombstones one step closer to being dropped: down a level, or in
    /// place at the last level (where the rewrite is bottommost and drops them).
    fn compact_file_for_deletes(
        &mut self,
        ks: &KeyspaceVersion,
        li: usize,
        f: &Arc<TableFile>,
        opts: &Options,
        busy: &HashSet<u64>,
    ) -> Option<CompactionTask> {
        let last = ks.last_level();
        let level = ks.levels.get(li)?;
        if li == 0 || !opts.is_leveled(li, last) {
            if li == last && li > 0 {
                // Tiered last level: merge its runs in place.
                return merge_in_place(ks, li, busy, "deletes");
            }
            return self.pick_level(ks, li, opts, busy).map(|mut t| {
                t.reason = "deletes";
                t
            });
        }
        let run = level.runs.iter().find(|r| r.files.iter().any(|x| Arc::ptr_eq(x, f)))?;
        let inputs = vec![InputRun {
            level: li,
            run: run.id,
            files: vec![f.clone()],
        }];
        if li == last {
            let bottommost = is_bottommost(ks, &inputs, li, Some(run.id));
            return Some(CompactionTask {
                keyspace: ks.id,
                inputs,
                output_level: li,
                output_run: Some(run.id),
                bottommost,
                trivial_move: false,
                reason: "deletes",
            });
        }
        let mut t = self.to_next_level(ks, inputs, li + 1, true, opts, busy, "deletes")?;
        // A move would carry the tombstones down unchanged; that still counts as
        // progress towards the last level.
        t.reason = "deletes";
        Some(t)
    }

    fn pick_level(
        &mut self,
        ks: &KeyspaceVersion,
        li: usize,
        opts: &Options,
        busy: &HashSet<u64>,
    ) -> Option<CompactionTask> {
        let last = ks.last_level();
        let level = ks.levels.get(li)?;
        let is_busy = |f: &Arc<TableFile>| busy.contains(&f.number());
        if opts.is_leveled(li, last) {
            if opts.lazy_leveling && opts.runs_per_level > 1 && li == last {
                // The leveled last level outgrew its capacity: push it down whole so the
                // level above it becomes tiered.
                if level.files().any(is_busy) {
                    return None;
                }
                return Some(CompactionTask {
                    keyspace: ks.id,
                    inputs: level
                        .runs
                        .iter()
                        .map(|r| InputRun {
                            level: li,
                            run: r.id,
                            files: r.files.clone(),
                        })
                        .collect(),
                    output_level: li + 1,
                    output_run: Some(LEVELED_RUN),
                    bottommost: true,
                    trivial_move: level.runs.len() == 1,
                    reason: "lazy-leveling-push",
                });
            }
            return self.pick_leveled_file(ks, li, opts, busy);
        }
        // Level 0 or a tiered level: merge all its runs.
        if level.files().any(is_busy) || level.runs.is_empty() {
            return None;
        }
        if li > 0 && li == last && level.size() <= opts.level_capacity(li) {
            // The data still fits the last level: a new level below it would deepen the
            // tree by compaction count instead of by size (invariant 4 of `version`).
            return merge_in_place(ks, li, busy, "tiered-last");
        }
        let inputs: Vec<InputRun> = level
            .runs
            .iter()
            .map(|r| InputRun {
                level: li,
                run: r.id,
                files: r.files.clone(),
            })
            .collect();
        let out = li + 1;
        let out_is_last = out >= last;
        let out_leveled = opts.runs_per_level == 1 || (opts.lazy_leveling && out_is_last && out == last);
        self.to_next_level(
            ks,
            inputs,
            out,
            out_leveled,
            opts,
            busy,
            if li == 0 { "l0" } else { "tiered" },
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn to_next_level(
        &self,
        ks: &KeyspaceVersion,
        mut inputs: Vec<InputRun>,
        out: usize,
        out_leveled: bool,
        _opts: &Options,
        busy: &HashSet<u64>,
        reason: &'static str,
    ) -> Option<CompactionTask> {
        let mut output_run = None;
        let mut trivial = false;
        if out_leveled {
            let (lo, hi) = key_range(inputs.iter().flat_map(|r| r.files.iter()))?;
            output_run = Some(LEVELED_RUN);
            let mut overlapped = false;
            if let Some(next) = ks.levels.get(out) {
                // All runs: a leveled level normally has one, but may hold more after
                // the options changed from tiering.
                for run in &next.runs {
                    let over = run.overlapping(Some(&lo), Some(&hi));
                    if over.iter().any(|f| busy.contains(&f.number())) {
                        return None;
                    }
                    if !over.is_empty() {
                        overlapped = true;
                        inputs.push(InputRun {
                            level: out,
                            run: run.id,
                            files: over,
                        });
                    }
                }
            }
            trivial = !overlapped && (inputs.len() == 1 || pairwise_disjoint(&inputs));
        }
        let bottommost = is_bottommost(ks, &inputs, out, output_run);
        Some(CompactionTask {
            keyspace: ks.id,
            inputs,
            output_level: out,
            output_run,
            bottommost,
            trivial_move: trivial,
            reason,
        })
    }

    fn pick_leveled_file(
        &mut self,
        ks: &KeyspaceVersion,
        li: usize,
        opts: &Options,
        busy: &HashSet<u64>,
    ) -> Option<CompactionTask> {
        let level = ks.levels.get(li)?;
        // The oldest run: moving the oldest data down never puts older data above newer.
        let run = level.runs.last()?;
        let cursor = self.cursors.get(&(ks.id, li)).cloned().unwrap_or_default();
        let n = run.files.len();
        let start = run.files.partition_point(|f| f.meta.smallest <= cursor);
        for k in 0..n {
            let f = &run.files[(start + k) % n];
            if busy.contains(&f.number()) {
                continue;
            }
            let inputs = vec![InputRun {
                level: li,
                run: run.id,
                files: vec![f.clone()],
            }];
            if let Some(t) = self.to_next_level(ks, inputs, li + 1, true, opts, busy, "leveled") {
                self.cursors.insert((ks.id, li), f.meta.largest.clone());
                return Some(t);
            }
        }
        None
    }
}

/// Merges every run of level `li` into one run of the same level. The output takes
/// the place of its newest input (invariant 3 of `version`): a run pushed into the level
/// meanwhile holds newer data and must stay above it, whenever its id was handed out.
fn merge_in_place(
    ks: &KeyspaceVersion,
    li: usize,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<CompactionTask> {
    let level = ks.levels.get(li)?;
    if level.runs.is_empty() || level.files().any(|f| busy.contains(&f.number())) {
        return None;
    }
    let inputs: Vec<InputRun> = level
        .runs
        .iter()
        .map(|r| InputRun {
            level: li,
            run: r.id,
            files: r.files.clone(),
        })
        .collect();
    let newest = inputs.iter().map(|r| r.run).max()?;
    let bottommost = is_bottommost(ks, &inputs, li, Some(newest));
    Some(CompactionTask {
        keyspace: ks.id,
        inputs,
        output_level: li,
        output_run: Some(newest),
        bottommost,
        trivial_move: false,
        reason,
    })
}

fn pairwise_disjoint(inputs: &[InputRun]) -> bool {
    let mut files: Vec<&Arc<TableFile>> = inputs.iter().flat_map(|r| r.files.iter()).collect();
    files.sort_by(|a, b| a.meta.smallest.cmp(&b.meta.smallest));
    files.windows(2).all(|w| w[0].meta.largest < w[1].meta.smallest)
}

/// What [`manual_task`] found.
#[derive(Debug)]
pub enum Manual {
    /// Nothing to compact in the range.
    Nothing,
    /// A needed file is being compacted; try again later.
    Busy,
    /// The task to run.
    Task(CompactionTask),
}

/// A manual compaction of everything overlapping `[lo, hi]` (closed under overlap) in
/// one keyspace, into its deepest level.
pub fn manual_task(
    ks: &KeyspaceVersion,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    busy: &HashSet<u64>,
    opts: &Options,
) -> Manual {
    let (mut lo, mut hi) = (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec));
    let mut chosen: HashSet<u64> = HashSet::new();
    loop {
        let before = chosen.len();
        for f in ks.files() {
            if f.overlaps(lo.as_deref(), hi.as_deref()) && chosen.insert(f.number()) {
                if lo.as_ref().is_some_and(|l| &f.meta.smallest < l) {
                    lo = Some(f.meta.smallest.clone());
                }
                if hi.as_ref().is_some_and(|h| &f.meta.largest > h) {
                    hi = Some(f.meta.largest.clone());
                }
            }
        }
        if chosen.len() == before {
            break;
        }
    }
    if chosen.is_empty() {
        return Manual::Nothing;
    }
    if chosen.iter().any(|n| busy.contains(n)) {
        return Manual::Busy;
    }
    let mut inputs = Vec::new();
    for (li, level) in ks.levels.iter().enumerate() {
        for run in &level.runs {
            let files: Vec<_> = run
                .files
                .iter()
                .filter(|f| chosen.contains(&f.number()))
                .cloned()
                .collect();
            if !files.is_empty() {
                inputs.push(InputRun {
                    level: li,
                    run: run.id,
                    files,
                });
            }
        }
    }
    let out = ks.last_level().max(1);
    let output_run = if opts.is_leveled(out, out) {
        Some(LEVELED_RUN)
    } else {
        ks.levels.get(out).and_then(|l| l.runs.last()).map(|r| r.id)
    };
    // Only the oldest run of the output level may receive the result in place; any
    // other run there is fully inside the inputs (closure) or disjoint from them.
    let bottommost = is_bottommost(ks, &inputs, out, output_run);
    Manual::Task(CompactionTask {
        keyspace: ks.id,
        inputs,
        output_level: out,
        output_run,
        bottommost,
        trivial_move: false,
        reason: "manual",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::TableCache;
    use crate::fs::{FileSystem, RealFs};
    use crate::version::{FileContext, FileMeta, NewFile, ObsoleteFiles, VersionEdit};

    /// (level, run, number, smallest, largest, bytes, tombstones)
    type Spec = (u32, u64, u64, &'static str, &'static str, u64, u64);

    fn version(files: &[Spec]) -> (tempfile::TempDir, Version) {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
        let ctx = FileContext {
            dir: dir.path().to_path_buf(),
            fs: fs.clone(),
            retired: Arc::new(ObsoleteFiles::new(fs.clone())),
            table_cache: Arc::new(TableCache::new(fs, dir.path().to_path_buf(), 4, None)),
        };
        let edit = VersionEdit {
            new_keyspaces: vec![(0, "default".into())],
            new_files: files
                .iter()
                .map(|&(level, run, number, lo, hi, size, tombstones)| NewFile {
                    keyspace: 0,
                    level,
                    run,
                    meta: FileMeta {
                        number,
                        size,
                        smallest: lo.as_bytes().to_vec(),
                        largest: hi.as_bytes().to_vec(),
                        min_seq: number,
                        max_seq: number,
                        entries: 100,
                        tombstones,
                        range_tombstones: 0,
                        oldest_tombstone_time: (tombstones > 0).then_some(0),
                        raw_bytes: size,
                    },
                })
                .collect(),
            ..Default::default()
        };
        let (v, _) = Version::default().apply(&edit, &ctx).unwrap();
        (dir, v)
    }

    fn tiered() -> Options {
        Options {
            memtable_budget: 1 << 20,
            runs_per_level: 2,
            size_ratio: 4.0,
            ..Options::default()
        }
    }

    fn pick(v: &Version, opts: &Options) -> Option<CompactionTask> {
        CompactionPicker::default().pick(v, opts, &HashSet::new(), &HashSet::new(), DeleteClock::default())
    }

    #[test]
    fn a_tiered_last_level_within_capacity_merges_in_place_under_its_newest_run() {
        // Level 1 (capacity 4 MiB) holds three small runs: full by count, not by size.
        let (_d, v) = version(&[
            (1, 30, 30, "a", "m", 1000, 0),
            (1, 20, 20, "a", "z", 1000, 0),
            (1, 10, 10, "c", "k", 1000, 0),
        ]);
        let t = pick(&v, &tiered()).expect("three runs of two allowed");
        assert_eq!(t.output_level, 1, "a new level for 3 KB of data");
        assert_eq!(t.output_run, Some(30), "the output must take its newest input's place");
        assert_eq!(t.inputs.len(), 3);
        assert!(t.bottommost);
    }

    #[test]
    fn a_tiered_last_level_over_capacity_is_pushed_down() {
        let mb = 2 << 20;
        let (_d, v) = version(&[
            (1, 30, 30, "a", "m", mb, 0),
            (1, 20, 20, "a", "z", mb, 0),
            (1, 10, 10, "c", "k", mb, 0),
        ]);
        let t = pick(&v, &tiered()).expect("three runs of two allowed");
        assert_eq!(t.output_level, 2);
        assert_eq!(t.output_run, None, "a new run of the new level");
    }

    #[test]
    fn a_delete_driven_merge_of_the_last_level_keeps_its_newest_run_id() {
        // Level 2 is last and tiered; its older run is dense with tombstones. Level 1
        // holds newer data in a run of larger id: the merge of level 2 in place must not
        // come out above anything pushed there meanwhile, so it keeps id 8, not a fresh one.
        let (_d, v) = version(&[
            (1, 40, 40, "a", "z", 1000, 0),
            (2, 8, 8, "a", "z", 1000, 0),
            (2, 5, 5, "a", "z", 1000, 100),
        ]);
        let opts = Options {
            tombstone_density_trigger: Some(0.5),
            ..tiered()
        };
        let t = pick(&v, &opts).expect("a dense last-level file");
        assert_eq!(t.reason, "deletes");
        assert_eq!(t.output_level, 2);
        assert_eq!(t.output_run, Some(8));
        assert!(t.inputs.iter().all(|r| r.level == 2));
    }

    #[test]
    fn level_zero_always_merges_into_level_one() {
        let (_d, v) = version(&[
            (0, 3, 3, "a", "z", 100, 0),
            (0, 2, 2, "a", "z", 100, 0),
            (0, 1, 1, "a", "z", 100, 0),
            (0, 0, 4, "a", "z", 100, 0),
        ]);
        let t = pick(&v, &tiered()).expect("level 0 over its trigger");
        assert_eq!((t.output_level, t.output_run), (1, None));
    }
}
