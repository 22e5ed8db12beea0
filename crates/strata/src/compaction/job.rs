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
use crate::key::{SeqNo, parse_internal_key};
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
    let mut range_dels = Vec::new();
    let mut oldest_tombstone: Option<u64> = None;
    let mut tables = Vec::new();
    for input in &task.inputs {
        for f in &input.files {
            let t = ctx.sst_cache.get(f.number())?;
            range_dels.extend(t.range_tombstones().iter().cloned());
            result.bytes_read += f.meta.size;
            if let Some(tt) = f.meta.oldest_tombstone_time {
                oldest_tombstone = Some(oldest_tombstone.map_or(tt, |o| o.min(tt)));
            }
            result.edit.deleted_files.push((task.keyspace, f.number()));
            tables.push(t);
        }
        // Inputs are about to be deleted: caching their blocks would evict hot ones.
        children.push(Box::new(RunIter::with_fill(
            input.files.clone(),
            ctx.sst_cache.clone(),
            Fill::Bypass,
        )));
    }
    result.oldest_input_time = oldest_tombstone;
    let mut rules = DropRules::new(snapshots, task.bottommost, keep_shadowed_tombstones, range_dels);
    let mut out = OutputWriter::new(
        ctx.clone(),
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
        match rules.decide(&p) {
            Decision::Keep => out.add(ikey, merge.value())?,
            Decision::DropPut => {
                result.dropped += 1;
                sink.dropped_put(p.user_key, p.seq, merge.value())?;
            }
            Decision::DropTombstone => result.dropped += 1,
        }
        merge.advance()?;
    }
    let (files, written) = out.finish()?;
    result.bytes_written = written;
    result.edit.new_files.extend(files);
    Ok(result)
}
