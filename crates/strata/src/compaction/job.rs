//! Running a compaction task: merge the input runs through the [`DropRules`] and write
//! the survivors as new files of the output level.

use super::output::{JobContext, OutputWriter};
use super::picker::CompactionTask;
use super::rules::{Decision, DropRules};
use super::warm::HotRanges;
use crate::error::{Error, Result};
use crate::iter::level::RunIter;
use crate::iter::merge::MergingIter;
use crate::iter::{Direction, InternalIterator};
use std::sync::Arc;

use super::tiles::{PageCounts, page_skipper};
use crate::key::{SeqNo, ValueKind, internal_key, parse_internal_key};
use crate::sstable::Fill;
use crate::version::{NewFile, VersionEdit};

/// What a finished compaction produced.
#[derive(Debug, Default)]
pub struct JobResult {
    /// The edit that installs it.
    pub edit: VersionEdit,
    /// Bytes read from input files.
    pub bytes_read: u64,
    /// Bytes written to output files.
    pub bytes_written: u64,
    /// Entries dropped.
    pub dropped: u64,
    /// Oldest tombstone or pending-purge time of the inputs.
    pub oldest_input_time: Option<u64>,
    /// Delete-tile pages dropped unread, and read while a delete covered them in part.
    pub pages: PageTally,
    /// Seqnos of the secondary range deletes that a `Put` the outputs kept is older
    /// than and covered by (kept for a snapshot): the outputs still need those records
    /// (invariant RG of `compaction::tiles`). `None` for a trivial move.
    pub records_needed: Option<std::collections::BTreeSet<SeqNo>>,
}

/// Pages of delete tiles a merge dropped whole or read in part.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PageTally {
    /// Dropped without being read.
    pub dropped: u64,
    /// Read (and their survivors rewritten) although a delete covered them in part.
    pub partial: u64,
}

/// Receives every `Put` version a flush or compaction drops (deferred index
/// maintenance turns them into secondary deletes).
pub trait DropSink {
    /// A version of `user_key` written at `seq` with `value` is gone.
    fn dropped_put(&mut self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> Result<()>;
}

/// A sink that ignores drops (plain key-value keyspaces).
pub struct NoSink;

impl DropSink for NoSink {
    fn dropped_put(&mut self, _: &[u8], _: SeqNo, _: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// Runs `task`. `snapshots` are the live snapshot seqnos, ascending.
pub fn run_compaction(
    ctx: &JobContext,
    task: &CompactionTask,
    output_run: u64,
    snapshots: Vec<SeqNo>,
    keep_shadowed_tombstones: bool,
    track_obligations: bool,
    sink: &mut dyn DropSink,
) -> Result<JobResult> {
    let mut result = JobResult::default();
    let level = task.output_level as u32;
    if task.trivial_move {
        for input in &task.inputs {
            for f in &input.files {
                result.edit.deleted_files.push((task.keyspace, f.number()));
                result.edit.new_files.push(NewFile {
                    keyspace: task.keyspace,
                    level,
                    run: output_run,
                    meta: f.meta.clone(),
                });
            }
        }
        return Ok(result);
    }
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let deletes = ctx.deletes.get(&task.keyspace);
    let counts = Arc::new(PageCounts::default());
    // Invariant TP of `compaction::tiles`: only the oldest input of a bottommost merge
    // of a keyspace without deferred index maintenance drops pages unread.
    let skip = deletes
        .filter(|_| task.bottommost && !track_obligations && !keep_shadowed_tombstones)
        .map(|d| page_skipper(d.records.clone(), snapshots.first().copied(), counts.clone()));
    let oldest = task.inputs.len().saturating_sub(1);
    let mut range_dels = Vec::new();
    let mut oldest_tombstone: Option<u64> = None;
    let mut tables = Vec::new();
    for (i, input) in task.inputs.iter().enumerate() {
        for f in &input.files {
            let t = ctx.sst_cache.get(f.meta.number, f.meta.global_seq)?;
            range_dels.extend(t.range_tombstones().iter().cloned());
            result.bytes_read += f.meta.size;
            if let Some(tt) = f.meta.oldest_tombstone_time {
                oldest_tombstone = Some(oldest_tombstone.map_or(tt, |o| o.min(tt)));
            }
            result.edit.deleted_files.push((task.keyspace, f.number()));
            tables.push(t);
        }
        // Inputs are about to be deleted: caching their blocks would evict hot ones.
        let run = RunIter::with_fill(input.files.clone(), ctx.sst_cache.clone(), Fill::Bypass);
        children.push(match &skip {
            Some(s) if i == oldest => Box::new(run.skipping(s.clone())),
            _ => Box::new(run),
        });
    }
    result.oldest_input_time = oldest_tombstone;
    let mut rules =
        DropRules::new(snapshots, task.bottommost, keep_shadowed_tombstones, range_dels).with_deletes(deletes);
    let mut out = OutputWriter::new(
        ctx.for_output(task.keyspace, task.output_level),
        task.keyspace,
        level,
        output_run,
        rules.surviving_range_dels(),
    );
    if let Some(cache) = ctx.sst_cache.block_cache() {
        out.warm_cache(HotRanges::of_inputs(tables.iter().map(|t| &**t), cache)?);
    }
    drop(tables);
    if let Some(t) = oldest_tombstone {
        out.note_tombstone_time(t);
    }
    if track_obligations && !task.bottommost {
        out.track_obligations();
    }
    let mut needed = std::collections::BTreeSet::new();
    let mut merge = MergingIter::new(children, Direction::Forward);
    merge.seek_to_start()?;
    while merge.valid() {
        let ikey = merge.key();
        let p = parse_internal_key(ikey).ok_or_else(|| {
            let f = task.files().next().map(|f| f.number()).unwrap_or(0);
            Error::corruption(
                ctx.dir.join(crate::sstable::sst_file_name(f)),
                0,
                "undecodable internal key during compaction",
            )
        })?;
        match rules.decide_value(&p, merge.value()) {
            (Decision::Keep, false) => {
                if p.kind == ValueKind::Put
                    && let Some(d) = deletes
                    && let Some(k) = d.config.key.of(merge.value())
                {
                    needed.extend(d.records.iter().filter(|r| p.seq < r.seq && r.covers(k)).map(|r| r.seq));
                }
                out.add(ikey, merge.value())?
            }
            (Decision::Keep, true) => {
                // Killed by a secondary range delete: it goes on as the tombstone it
                // reads as.
                sink.dropped_put(p.user_key, p.seq, merge.value())?;
                out.add(&internal_key(p.user_key, p.seq, ValueKind::Delete), &[])?;
            }
            (Decision::DropPut, _) | (Decision::DropTombstone, true) => {
                result.dropped += 1;
                sink.dropped_put(p.user_key, p.seq, merge.value())?;
            }
            (Decision::DropTombstone, false) => result.dropped += 1,
        }
        merge.advance()?;
    }
    let (files, written) = out.finish()?;
    result.pages = PageTally {
        dropped: counts.dropped.load(std::sync::atomic::Ordering::Relaxed),
        partial: counts.partial.load(std::sync::atomic::Ordering::Relaxed),
    };
    result.bytes_written = written;
    result.edit.new_files.extend(files);
    result.records_needed = Some(needed);
    Ok(result)
}
