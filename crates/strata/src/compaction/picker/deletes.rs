//! Delete-driven triggers: files compacted for their tombstones rather than their size.
//!
//! * [`DeadlineTrigger`]: FADE's delete persistence threshold ([`crate::compaction::fade`]);
//!   an expired file goes before any size-driven work (deadlines are promises).
//! * [`DensityTrigger`]: the file's tombstones are a large share of what its compaction
//!   would rewrite.
//! * [`DirtyReadTrigger`]: selects of a deferred table meet many dirty index entries, so
//!   the keyspace's pending purges are pushed down now, whatever the deadlines say.
//! * [`KilledPutsTrigger`]: the file still holds `Put`s a secondary range delete killed
//!   (invariant KR of `compaction::tiles`), so the delete becomes physical.
//!
//! The first three look at the same per-file facts, gathered once per pick
//! ([`Context::delete_candidates`]); all four compact a file the same way
//! ([`compact_file_for_deletes`]): down a level, or in place at the last level, where
//! the rewrite is bottommost and drops the tombstones.

use std::collections::HashSet;
use std::sync::Arc;

use super::shape::{LevelShape, all_runs, compact_level, merge_in_place, merges_into_one_run, to_next_level};
use super::{Choice, CompactionTask, Context, Cursors, InputRun, Priority, Trigger, is_bottommost, key_range};
use crate::compaction::fade::{self, DeleteUrgency};
use crate::options::Options;
use crate::version::{KeyspaceVersion, TableFile};

/// What the delete-driven triggers know of one file.
#[derive(Debug, Clone)]
pub struct DeleteCandidate {
    /// Keyspace id.
    pub keyspace: u32,
    /// Level of the file.
    pub level: usize,
    /// The file.
    pub file: Arc<TableFile>,
    /// Its deadline or density verdict ([`fade::urgency`]), if any.
    pub urgency: Option<DeleteUrgency>,
    /// Its keyspace is urgent for dirty reads and it holds something to push down.
    pub dirty_reads: bool,
}

/// Files whose tombstones passed their level's FADE deadline.
#[derive(Debug, Default)]
pub struct DeadlineTrigger;

impl Trigger for DeadlineTrigger {
    fn name(&self) -> &'static str {
        "deadline"
    }

    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice> {
        best(cx, Priority::Deadline, |c| match c.urgency {
            Some(DeleteUrgency::Expired(v)) => Some(v),
            _ => None,
        })
    }
}

/// Files dense with tombstones for the rewrite their compaction would do.
#[derive(Debug, Default)]
pub struct DensityTrigger;

impl Trigger for DensityTrigger {
    fn name(&self) -> &'static str {
        "density"
    }

    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice> {
        best(cx, Priority::Deletes, |c| match c.urgency {
            Some(DeleteUrgency::Dense(v)) => Some(v),
            _ => None,
        })
    }
}

/// Files of deferred tables whose selects meet many dirty entries.
#[derive(Debug, Default)]
pub struct DirtyReadTrigger;

impl Trigger for DirtyReadTrigger {
    fn name(&self) -> &'static str {
        "dirty-reads"
    }

    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice> {
        best(cx, Priority::Deletes, |c| {
            (c.urgency.is_none() && c.dirty_reads)
                .then(|| 1.0 + c.file.meta.tombstones as f64 / c.file.meta.entries.max(1) as f64)
        })
    }
}

/// The name of [`KilledPutsTrigger`], and the reason of the compactions it picks
/// (their I/O is counted apart: it is what secondary range deletes cost in the
/// background).
pub const KILLED_PUTS: &str = "killed-puts";

/// Files that still hold `Put`s a secondary range delete every reader sees killed
/// (invariant KR of `compaction::tiles`): rewritten, deepest level first, so the killed
/// entries leave the disk. The whole pages such a delete covers were dropped already
/// (`DbInner::drop_deleted_pages`) or are skipped unread by the rewrite; what remains
/// are the pages it covers in part.
#[derive(Debug, Default)]
pub struct KilledPutsTrigger;

impl Trigger for KilledPutsTrigger {
    fn name(&self) -> &'static str {
        KILLED_PUTS
    }

    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice> {
        let killed = cx.clock.killed.clone()?;
        let mut files = Vec::new();
        for ks in cx.keyspaces().filter(|ks| killed.has_records(ks.id)) {
            for (li, level) in ks.levels.iter().enumerate().rev() {
                files.extend(level.files().map(|f| (ks.id, li, f.clone())));
            }
        }
        for (id, li, f) in files {
            if cx.busy.contains(&f.number()) || !killed.owed(id, &f) {
                continue;
            }
            let ks = cx.version.keyspace(id)?;
            if let Some(mut task) = compact_file_for_deletes(ks, li, &f, cx.opts, cx.busy, cx.cursors) {
                task.reason = KILLED_PUTS;
                return Some(Choice {
                    priority: Priority::Deletes,
                    rank: 0.0,
                    task,
                });
            }
        }
        None
    }
}

/// The highest-ranked candidate `rank` accepts whose compaction can run now.
fn best(cx: &mut Context<'_>, priority: Priority, rank: impl Fn(&DeleteCandidate) -> Option<f64>) -> Option<Choice> {
    let mut found: Vec<(f64, DeleteCandidate)> = cx
        .delete_candidates()
        .iter()
        .filter_map(|c| rank(c).map(|r| (r, c.clone())))
        .collect();
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (rank, c) in found {
        let ks = cx.version.keyspace(c.keyspace)?;
        if let Some(task) = compact_file_for_deletes(ks, c.level, &c.file, cx.opts, cx.busy, cx.cursors) {
            return Some(Choice { priority, rank, task });
        }
    }
    None
}

/// Every file of `cx`'s keyspaces that holds tombstones, or pending purges of a
/// deferred table, with what the triggers need to judge it.
pub(super) fn scan(cx: &Context<'_>) -> Vec<DeleteCandidate> {
    let (opts, clock) = (cx.opts, cx.clock);
    if opts.delete_persistence_threshold.is_none()
        && opts.tombstone_density_trigger.is_none()
        && clock.urgent.is_empty()
    {
        return Vec::new();
    }
    let mut found = Vec::new();
    for ks in cx.keyspaces() {
        let last = ks.last_level();
        // Deadlines are shared among the levels that hold data: an empty level costs
        // nothing to pass through (files move down it without a rewrite), so giving it a
        // share would only shrink every other level's.
        let held = fade::held_levels(ks);
        for (li, level) in ks.levels.iter().enumerate() {
            // Versions of a row meet (and the old ones are purged) once their runs merge:
            // nothing is pending in a last level made of a single run.
            let unsettled = li < last || level.runs.len() > 1;
            let rank = fade::held_rank(ks, li);
            let purges = clock.obligations.owes(ks.id) && unsettled;
            for f in level.files() {
                if (f.meta.tombstones == 0 && !purges) || cx.busy.contains(&f.number()) {
                    continue;
                }
                // At the last level only a rewrite that can drop the tombstones helps; a
                // snapshot older than them would keep them (and us looping).
                if li == last && clock.oldest_snapshot.is_some_and(|s| s < f.meta.max_seq) {
                    continue;
                }
                let entries = f.meta.entries + f.meta.range_tombstones;
                // Overlaps are looked up only for files dense on their own: picks run on
                // every background round, over every file holding tombstones.
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
                let urgency = fade::urgency(opts, clock.now, rank, held, facts);
                let dirty_reads = clock.urgent.contains(&ks.id) && unsettled && (purges || f.meta.tombstones > 0);
                if urgency.is_some() || dirty_reads {
                    found.push(DeleteCandidate {
                        keyspace: ks.id,
                        level: li,
                        file: f.clone(),
                        urgency,
                        dirty_reads,
                    });
                }
            }
        }
    }
    found
}

/// Entries a delete-driven compaction of `f` at level `li` rewrites, as
/// [`compact_file_for_deletes`] would run it: a tiered level (or level 0) merges all its
/// runs, a leveled one the file alone; a merge into a leveled level also rewrites the
/// files it overlaps there, and a tiered last level is merged in place whole.
fn rewrite_entries(ks: &KeyspaceVersion, li: usize, f: &Arc<TableFile>, opts: &Options) -> u64 {
    let entries = |x: &Arc<TableFile>| x.meta.entries + x.meta.range_tombstones;
    let last = ks.last_level();
    let Some(level) = ks.levels.get(li) else {
        return entries(f);
    };
    let leveled = opts.is_leveled(li, last);
    let inputs: Vec<&Arc<TableFile>> = if leveled && level.runs.len() == 1 {
        vec![f]
    } else {
        level.files().collect()
    };
    let own: u64 = inputs.iter().map(|x| entries(x)).sum();
    let out = li + 1;
    let out_leveled = leveled || merges_into_one_run(opts, out, last);
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

/// Moves a file's tombstones one step closer to being dropped: down a level, or in
/// place at the last level (where the rewrite is bottommost and drops them).
pub fn compact_file_for_deletes(
    ks: &KeyspaceVersion,
    li: usize,
    f: &Arc<TableFile>,
    opts: &Options,
    busy: &HashSet<u64>,
    cursors: &mut Cursors,
) -> Option<CompactionTask> {
    let last = ks.last_level();
    let level = ks.levels.get(li)?;
    let with_reason = |mut t: CompactionTask| {
        t.reason = "deletes";
        t
    };
    if LevelShape::of(opts, li, last) == LevelShape::Tiered {
        if li == last && li > 0 {
            // Tiered last level: merge its runs in place.
            return merge_in_place(ks, li, busy, "deletes");
        }
        return compact_level(ks, li, opts, busy, cursors).map(with_reason);
    }
    let run = level.runs.iter().find(|r| r.files.iter().any(|x| Arc::ptr_eq(x, f)))?;
    if level.runs.len() > 1 {
        // A leveled level holding several runs (the options changed from tiering): a
        // file of a newer run moved down alone would pass below the older runs'
        // versions of its keys, and one rewritten in place beside an overlapping run is
        // not bottommost, keeps its tombstones and is picked again. Take the whole level.
        if li == last {
            return merge_in_place(ks, li, busy, "deletes");
        }
        if level.runs.last().is_some_and(|oldest| oldest.id != run.id) {
            return to_next_level(ks, all_runs(ks, li), li + 1, true, busy, "deletes");
        }
    }
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
    // A move would carry the tombstones down unchanged; that still counts as progress
    // towards the last level.
    to_next_level(ks, inputs, li + 1, true, busy, "deletes")
}
