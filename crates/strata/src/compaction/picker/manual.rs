//! Manual compaction: everything overlapping a key range, closed under overlap, into
//! the keyspace's deepest level.

use std::collections::HashSet;

use super::{CompactionTask, InputRun, LEVELED_RUN, is_bottommost};
use crate::options::Options;
use crate::version::KeyspaceVersion;

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
