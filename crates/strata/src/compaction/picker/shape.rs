//! How one level compacts, by its shape: leveled (one run, a file at a time into the
//! next level), tiered (all its runs merged into a new run of the next level, or in
//! place at the last level while it is within capacity), and the lazy-leveling push
//! (a leveled last level that outgrew its capacity moves down whole). Every trigger
//! ([`super::size`], [`super::deletes`]) compacts a level through [`compact_level`].
//!
//! Where each output goes keeps the version invariants 3 (run order) and 4 (depth) of
//! [`crate::version`].

use std::collections::HashSet;
use std::sync::Arc;

use super::{CompactionTask, Cursors, InputRun, LEVELED_RUN, is_bottommost, key_range};
use crate::options::Options;
use crate::version::{KeyspaceVersion, TableFile};

/// The shape of level `li` of a tree whose last level is `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelShape {
    /// Level 0, or a level of up to K runs.
    Tiered,
    /// One run, compacted a file at a time.
    Leveled,
    /// The leveled last level under lazy leveling (tiered levels above it).
    LazyLast,
}

impl LevelShape {
    /// The shape `opts` give level `li`.
    pub fn of(opts: &Options, li: usize, last: usize) -> LevelShape {
        if !opts.is_leveled(li, last) {
            LevelShape::Tiered
        } else if opts.lazy_leveling && opts.runs_per_level > 1 && li == last {
            LevelShape::LazyLast
        } else {
            LevelShape::Leveled
        }
    }
}

/// The compaction of level `li` its shape calls for, avoiding `busy` files.
pub fn compact_level(
    ks: &KeyspaceVersion,
    li: usize,
    opts: &Options,
    busy: &HashSet<u64>,
    cursors: &mut Cursors,
) -> Option<CompactionTask> {
    match LevelShape::of(opts, li, ks.last_level()) {
        LevelShape::LazyLast => lazy_push(ks, li, busy),
        LevelShape::Leveled => leveled_file(ks, li, busy, cursors),
        LevelShape::Tiered => tiered(ks, li, opts, busy),
    }
}

/// A leveled last level that outgrew its capacity moves down whole, so the level above
/// it becomes tiered.
fn lazy_push(ks: &KeyspaceVersion, li: usize, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let level = ks.levels.get(li)?;
    if level.files().any(|f| busy.contains(&f.number())) {
        return None;
    }
    Some(CompactionTask {
        keyspace: ks.id,
        inputs: all_runs(ks, li),
        output_level: li + 1,
        output_run: Some(LEVELED_RUN),
        bottommost: true,
        trivial_move: level.runs.len() == 1,
        reason: "lazy-leveling-push",
    })
}

/// One file of a leveled level (round-robin over the key space) into the next level.
fn leveled_file(ks: &KeyspaceVersion, li: usize, busy: &HashSet<u64>, cursors: &mut Cursors) -> Option<CompactionTask> {
    let level = ks.levels.get(li)?;
    // The oldest run: moving the oldest data down never puts older data above newer.
    let run = level.runs.last()?;
    let cursor = cursors.get(&(ks.id, li)).cloned().unwrap_or_default();
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
        if let Some(t) = to_next_level(ks, inputs, li + 1, true, busy, "leveled") {
            cursors.insert((ks.id, li), f.meta.largest.clone());
            return Some(t);
        }
    }
    None
}

/// Level 0 or a tiered level: all its runs merge into the next level, or in place when
/// it is the last level and still within its capacity.
fn tiered(ks: &KeyspaceVersion, li: usize, opts: &Options, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let level = ks.levels.get(li)?;
    if level.files().any(|f| busy.contains(&f.number())) || level.runs.is_empty() {
        return None;
    }
    let last = ks.last_level();
    if li > 0 && li == last && level.size() <= opts.level_capacity(li) {
        // The data still fits the last level: a new level below it would deepen the
        // tree by compaction count instead of by size (invariant 4 of `version`).
        return merge_in_place(ks, li, busy, "tiered-last");
    }
    let out = li + 1;
    let out_leveled = merges_into_one_run(opts, out, last);
    to_next_level(
        ks,
        all_runs(ks, li),
        out,
        out_leveled,
        busy,
        if li == 0 { "l0" } else { "tiered" },
    )
}

/// Whether a tiered level's merge into level `out` (of a tree whose last level is
/// `last`) goes into that level's one run: under leveling, or into the leveled last
/// level of lazy leveling.
pub fn merges_into_one_run(opts: &Options, out: usize, last: usize) -> bool {
    opts.runs_per_level == 1 || (opts.lazy_leveling && out == last)
}

pub(super) fn all_runs(ks: &KeyspaceVersion, li: usize) -> Vec<InputRun> {
    ks.levels
        .get(li)
        .map(|level| {
            level
                .runs
                .iter()
                .map(|r| InputRun {
                    level: li,
                    run: r.id,
                    files: r.files.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Merges every run of level `li` into one run of the same level. The output takes
/// the place of its newest input (invariant 3 of `version`): a run pushed into the level
/// meanwhile holds newer data and must stay above it, whenever its id was handed out.
pub fn merge_in_place(
    ks: &KeyspaceVersion,
    li: usize,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<CompactionTask> {
    let level = ks.levels.get(li)?;
    if level.runs.is_empty() || level.files().any(|f| busy.contains(&f.number())) {
        return None;
    }
    let inputs = all_runs(ks, li);
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

/// `inputs` into level `out`: into its one run (with the files there they overlap)
/// when it is leveled, else as a new run.
pub fn to_next_level(
    ks: &KeyspaceVersion,
    mut inputs: Vec<InputRun>,
    out: usize,
    out_leveled: bool,
    busy: &HashSet<u64>,
    reason: &'static str,
) -> Option<CompactionTask> {
    // A file another job holds is never taken again (its hold would go with the first
    // job to finish).
    if inputs
        .iter()
        .flat_map(|r| r.files.iter())
        .any(|f| busy.contains(&f.number()))
    {
        return None;
    }
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

fn pairwise_disjoint(inputs: &[InputRun]) -> bool {
    let mut files: Vec<&Arc<TableFile>> = inputs.iter().flat_map(|r| r.files.iter()).collect();
    files.sort_by(|a, b| a.meta.smallest.cmp(&b.meta.smallest));
    files.windows(2).all(|w| w[0].meta.largest < w[1].meta.smallest)
}
