//! Choosing the next compaction: which runs and files to merge, and where the output
//! goes.
//!
//! The picker asks a list of [`Trigger`]s, each a small unit with its own reason to
//! compact, and takes the most urgent proposal: by [`Priority`] class first, then by
//! the trigger's own rank within the class.
//!
//! | trigger | priority | fires when |
//! |---|---|---|
//! | [`deletes::DeadlineTrigger`] | deadline | a file's tombstones passed their FADE deadline |
//! | [`size::SizeTrigger`] | size | a level is over its run count or byte capacity |
//! | [`deletes::DensityTrigger`] | deletes | a file is dense with tombstones for its rewrite |
//! | [`deletes::DirtyReadTrigger`] | deletes | a deferred table's selects meet many dirty entries |
//! | [`deletes::KilledPutsTrigger`] | deletes | a file still holds `Put`s a secondary range delete killed |
//!
//! Whatever fires, a level compacts as its [`shape`] says (leveled, tiered, lazy
//! leveling), which keeps the version invariants 3 (run order) and 4 (depth) of
//! [`crate::version`]. Files already being compacted are never picked twice. Manual
//! compactions are planned apart ([`manual`]).

pub mod deletes;
pub mod manual;
pub mod shape;
pub mod size;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use manual::{Manual, manual_task};

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
#[derive(Clone)]
pub struct DeleteClock {
    /// Now, in the clock's microseconds.
    pub now: u64,
    /// The oldest live snapshot, if any.
    pub oldest_snapshot: Option<crate::key::SeqNo>,
    /// Keyspaces whose dropped versions owe deletes: their files carry pending-purge
    /// times.
    pub obligations: Arc<dyn super::Obligations>,
    /// Keyspaces of deferred tables whose selects meet many dirty entries: their pending
    /// purges are pushed down now, whatever the deadlines say.
    pub urgent: HashSet<u32>,
    /// Which files still hold `Put`s a secondary range delete killed (invariant KR of
    /// `compaction::tiles`); `None` when no keyspace has a record to apply.
    pub killed: Option<Arc<dyn super::tiles::KilledPuts>>,
}

impl Default for DeleteClock {
    fn default() -> Self {
        DeleteClock {
            now: 0,
            oldest_snapshot: None,
            obligations: Arc::new(super::NoObligations),
            urgent: HashSet::new(),
            killed: None,
        }
    }
}

/// Run id of the one run of a leveled level. Fixed, so that concurrent compactions
/// into an empty leveled level can never create two runs there.
pub const LEVELED_RUN: u64 = 0;

/// The round-robin cursor of each leveled level: (keyspace, level) -> last key taken.
pub type Cursors = HashMap<(u32, usize), Vec<u8>>;

/// Classes of urgency, most urgent last (so `Ord` picks the winner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    /// Delete-driven work that waits for nothing else: density, dirty reads.
    Deletes,
    /// A level over its size or run-count limit.
    Size,
    /// Persistence deadlines are promises: expired tombstones go first.
    Deadline,
}

/// A trigger's proposal.
#[derive(Debug, Clone)]
pub struct Choice {
    /// Its class.
    pub priority: Priority,
    /// Its urgency within the class (larger = more urgent).
    pub rank: f64,
    /// What to run.
    pub task: CompactionTask,
}

/// What a trigger sees: the tree, the options, the files taken, the clock.
pub struct Context<'a> {
    /// The current version.
    pub version: &'a Version,
    /// The database's options.
    pub opts: &'a Options,
    /// Files being compacted.
    pub busy: &'a HashSet<u64>,
    /// Keyspaces not to compact now.
    pub paused: &'a HashSet<u32>,
    /// Time, snapshots and deferred obligations.
    pub clock: &'a DeleteClock,
    /// Round-robin cursors of the leveled levels.
    pub cursors: &'a mut Cursors,
    deletes: Option<Vec<deletes::DeleteCandidate>>,
}

impl Context<'_> {
    /// The keyspaces that may be compacted now.
    pub fn keyspaces(&self) -> impl Iterator<Item = &KeyspaceVersion> {
        self.version
            .keyspaces
            .values()
            .filter(|ks| !self.paused.contains(&ks.id))
    }

    /// The files holding tombstones (or pending purges), judged once per pick and
    /// shared by the delete-driven triggers.
    pub fn delete_candidates(&mut self) -> &[deletes::DeleteCandidate] {
        if self.deletes.is_none() {
            self.deletes = Some(deletes::scan(self));
        }
        self.deletes.as_deref().unwrap_or_default()
    }
}

/// One reason to compact.
pub trait Trigger: Send + Sync + std::fmt::Debug {
    /// Its name, for logs and tests.
    fn name(&self) -> &'static str;
    /// The most urgent compaction this trigger wants and can run now, if any.
    fn choose(&self, cx: &mut Context<'_>) -> Option<Choice>;
}

/// Picks compactions by asking every trigger; keeps the leveled levels' cursors.
#[derive(Debug)]
pub struct CompactionPicker {
    triggers: Vec<Box<dyn Trigger>>,
    cursors: Cursors,
}

impl Default for CompactionPicker {
    fn default() -> Self {
        CompactionPicker {
            triggers: vec![
                Box::new(deletes::DeadlineTrigger),
                Box::new(size::SizeTrigger),
                Box::new(deletes::DensityTrigger),
                Box::new(deletes::DirtyReadTrigger),
                Box::new(deletes::KilledPutsTrigger),
            ],
            cursors: Cursors::new(),
        }
    }
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
        let mut cx = Context {
            version,
            opts,
            busy,
            paused,
            clock: &clock,
            cursors: &mut self.cursors,
            deletes: None,
        };
        let mut best: Option<Choice> = None;
        for t in &self.triggers {
            // A class below the best found so far cannot win: skip the work.
            if best.as_ref().is_some_and(|b| b.priority > Priority::Deletes) {
                break;
            }
            if let Some(c) = t.choose(&mut cx) {
                let better = best.as_ref().is_none_or(|b| {
                    (c.priority, c.rank).partial_cmp(&(b.priority, b.rank)) == Some(std::cmp::Ordering::Greater)
                });
                if better {
                    best = Some(c);
                }
            }
        }
        best.map(|c| c.task)
    }
}
