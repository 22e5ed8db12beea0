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
use crate::key::{ParsedKey, SeqNo, ValueKind, encode_internal_key, internal_key, parse_internal_key};
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

/// When a kept entry is rewritten with seqno 0, as RocksDB does at the bottom: the
/// trailers of a bottom run are then all alike, so they compress away (a multimap value
/// costs close to its own bytes).
///
/// Sound only where an entry's seqno tells nothing any reader or later merge needs:
/// - the merge is bottommost (nothing older exists below or beside it, and everything
///   above is newer: invariant of `compaction::picker::is_bottommost` and ingest
///   placement), so 0 keeps the entry older than every other version of its key;
/// - the entry is a `Put` visible to every live snapshot (seqno <= the oldest), so each
///   snapshot still sees it, and it is the only kept entry of its key in that stripe
///   (rule 1 of `compaction::rules`);
/// - the keyspace takes no deferred deletes (they name a `Put` by seqno), declares no
///   delete key (secondary range deletes compare seqnos with the `Put`s they kill), and
///   the layer above does not read its seqnos (a table's rows and index entries).
struct SeqZeroing {
    on: bool,
    oldest_snapshot: Option<SeqNo>,
}

impl SeqZeroing {
    fn applies(&self, p: &ParsedKey<'_>) -> bool {
        self.on && p.kind == ValueKind::Put && p.seq != 0 && self.oldest_snapshot.is_none_or(|s| p.seq <= s)
    }
}

/// What the layer above asks of one keyspace's merges ([`super::Obligations`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Duties {
    /// The keyspace receives deferred deletes: shadowed tombstones stay until the bottom.
    pub keep_shadowed_tombstones: bool,
    /// The keyspace owes deletes for the versions it drops: outputs carry the age of
    /// their pending purges.
    pub track_obligations: bool,
    /// The layer above compares its entries' seqnos: they are never zeroed.
    pub seqnos_read: bool,
}

/// Runs `task`. `snapshots` are the live snapshot seqnos, ascending.
pub fn run_compaction(
    ctx: &JobContext,
    task: &CompactionTask,
    output_run: u64,
    snapshots: Vec<SeqNo>,
    duties: Duties,
    sink: &mut dyn DropSink,
) -> Result<JobResult> {
    let Duties {
        keep_shadowed_tombstones,
        track_obligations,
        seqnos_read,
    } = duties;
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
        let run = RunIter::with_fill(&input.files, ctx.sst_cache.clone(), Fill::Bypass);
        children.push(match &skip {
            Some(s) if i == oldest => Box::new(run.skipping(s.clone())),
            _ => Box::new(run),
        });
    }
    result.oldest_input_time = oldest_tombstone;
    let oldest_snapshot = snapshots.first().copied();
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
    let zero = SeqZeroing {
        on: task.bottommost && !seqnos_read && !track_obligations && !keep_shadowed_tombstones && deletes.is_none(),
        oldest_snapshot,
    };
    let mut zeroed = Vec::new();
    let mut noted_kill = false;
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
            (Decision::Keep, false) if zero.applies(&p) => {
                zeroed.clear();
                encode_internal_key(&mut zeroed, p.user_key, 0, ValueKind::Put);
                out.add(&zeroed, merge.value())?;
            }
            (Decision::Keep, false) => out.add(ikey, merge.value())?,
            (Decision::Keep, true) => {
                // Killed by a secondary range delete: it goes on as the tombstone it
                // reads as, whose FADE clock starts here if no input's started earlier
                // (the record keeps no time of its own).
                if !noted_kill {
                    out.note_tombstone_time(ctx.clock.now_micros());
                    noted_kill = true;
                }
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
    let (mut files, written) = out.finish()?;
    let applied = super::tiles::DeleteJob::applied(deletes, rules.kept_killed());
    for f in &mut files {
        f.meta.deletes_applied = applied;
    }
    result.pages = PageTally {
        dropped: counts.dropped.load(std::sync::atomic::Ordering::Relaxed),
        partial: counts.partial.load(std::sync::atomic::Ordering::Relaxed),
    };
    result.bytes_written = written;
    result.edit.new_files.extend(files);
    Ok(result)
}
