//! Background work: flushing frozen memtables and running compactions.
//!
//! Workers share one queue of duties, in priority order: flush the oldest frozen
//! memtable (one flush at a time, so level-0 runs stay in seqno order), then the most
//! urgent compaction whose files are not already taken. A failure puts the database in
//! a failed state: writes are refused until it is reopened, reads go on.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::time::Duration;

use super::stats::Counters;
use super::{DbInner, SuperVersion};
use crate::compaction::obligations::{Emitted, emitted, write_runs};
use crate::compaction::picker::{Manual, manual_task};
use crate::compaction::sorter::SortedStream;
use crate::compaction::{
    CompactionTask, Decision, DropRules, DropSink, JobContext, NoSink, Obligations, OutputWriter, run_compaction,
};
use crate::error::{Error, Result};
use crate::iter::merge::MergingIter;
use crate::iter::{Direction, InternalIterator};
use crate::key::{SeqNo, parse_internal_key};
use crate::memtable::MemTable;
use crate::version::{Version, VersionEdit};

/// What a flush produced.
pub(crate) struct FlushResult {
    pub edit: VersionEdit,
    pub bytes: u64,
    /// Deletes emitted for the versions it dropped, per receiving keyspace.
    pub emitted: BTreeMap<u32, u64>,
}

/// Writes `mem` as one level-0 run (`run` id) per keyspace present in `version`.
///
/// Keyspaces that owe deletes go first: the versions they drop become deletes, which
/// are merged into the same flush of the keyspaces receiving them (where they
/// annihilate puts that died in this very memtable; `compaction::obligations`).
pub(crate) fn flush_memtable(
    ctx: &JobContext,
    mem: &Arc<MemTable>,
    version: &Version,
    snapshots: &[SeqNo],
    run: u64,
    obligations: &dyn Obligations,
    sort_memory: usize,
) -> Result<FlushResult> {
    let mut result = FlushResult {
        edit: VersionEdit::default(),
        bytes: 0,
        emitted: BTreeMap::new(),
    };
    let mut order = mem.keyspaces();
    order.retain(|k| version.keyspace(*k).is_some());
    order.sort_by_key(|k| !obligations.owes(*k));
    let mut owed = Emitted::default();
    let mut rest = Vec::new();
    for ks in order {
        let Some(mut sink) = obligations.collector(ks, ctx, sort_memory, false) else {
            rest.push(ks);
            continue;
        };
        flush_keyspace(
            ctx,
            mem,
            ks,
            snapshots,
            run,
            false,
            true,
            sink.as_mut(),
            Vec::new(),
            &mut result,
        )?;
        emitted(sink, version, &mut owed)?;
    }
    for ks in owed.streams.keys() {
        if !rest.contains(ks) {
            rest.push(*ks);
        }
    }
    for ks in rest {
        let extra = owed.streams.remove(&ks).unwrap_or_default();
        flush_keyspace(
            ctx,
            mem,
            ks,
            snapshots,
            run,
            obligations.receives(ks),
            false,
            &mut NoSink,
            extra,
            &mut result,
        )?;
    }
    result.emitted = owed.counts;
    result.edit.last_seq = Some(mem.max_seq());
    Ok(result)
}

#[allow(clippy::too_many_arguments)]
fn flush_keyspace(
    ctx: &JobContext,
    mem: &Arc<MemTable>,
    ks: u32,
    snapshots: &[SeqNo],
    run: u64,
    keep_shadowed_tombstones: bool,
    track_obligations: bool,
    sink: &mut dyn DropSink,
    extra: Vec<SortedStream>,
    result: &mut FlushResult,
) -> Result<()> {
    let rts = mem.range_tombstones(ks);
    let mut rules = DropRules::new(snapshots.to_vec(), false, keep_shadowed_tombstones, rts);
    let mut out = OutputWriter::new(ctx.clone(), ks, 0, run, rules.surviving_range_dels());
    if mem.tombstones() > 0 || !extra.is_empty() || track_obligations {
        out.note_tombstone_time(mem.created_at());
    }
    if track_obligations {
        out.track_obligations();
    }
    let mut emit = |ikey: &[u8], value: &[u8], out: &mut OutputWriter| -> Result<()> {
        let p = parse_internal_key(ikey)
            .ok_or_else(|| Error::InvalidArgument("memtable holds an undecodable key".into()))?;
        match rules.decide(&p) {
            Decision::Keep => out.add(ikey, value),
            Decision::DropPut => sink.dropped_put(p.user_key, p.seq, value),
            Decision::DropTombstone => Ok(()),
        }
    };
    if extra.is_empty() {
        mem.for_each(ks, |ikey, value| emit(ikey, value, &mut out))?;
    } else {
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(mem.iter(ks))];
        for s in extra {
            children.push(Box::new(s.into_cursor()));
        }
        let mut merge = MergingIter::new(children, Direction::Forward);
        merge.seek_to_start()?;
        while merge.valid() {
            emit(merge.key(), merge.value(), &mut out)?;
            merge.advance()?;
        }
    }
    let (files, written) = out.finish()?;
    result.bytes += written;
    result.edit.new_files.extend(files);
    Ok(())
}

pub(crate) fn worker(inner: &Arc<DbInner>) {
    loop {
        inner.retired.purge();
        {
            let sv = inner.current();
            if sv.imm.is_empty()
                && (inner.memtable_expired(&sv) || inner.memtable_feeds_dirty_reads(&sv))
                && let Err(e) = inner.freeze_if_idle()
            {
                inner
                    .bg
                    .lock()
                    .error
                    .get_or_insert_with(|| format!("freeze failed: {e}"));
            }
        }
        let mut bg = inner.bg.lock();
        if bg.shutdown {
            return;
        }
        if bg.error.is_some() {
            inner.bg_cv.wait(&mut bg);
            continue;
        }
        let sv = inner.current();
        if !bg.flushing && !sv.imm.is_empty() {
            bg.flushing = true;
            drop(bg);
            let r = flush_oldest(inner);
            let mut bg = inner.bg.lock();
            bg.flushing = false;
            if let Err(e) = r {
                bg.error.get_or_insert_with(|| format!("flush failed: {e}"));
            }
            drop(bg);
            inner.bg_cv.notify_all();
            continue;
        }
        if bg.manual == 0 {
            let task = inner
                .picker
                .lock()
                .pick(&sv.version, &inner.opts, &bg.busy, &bg.paused, inner.delete_clock());
            if let Some(task) = task {
                for f in task.files() {
                    bg.busy.insert(f.number());
                }
                bg.compacting += 1;
                drop(bg);
                let r = execute(inner, &task);
                let mut bg = inner.bg.lock();
                bg.compacting -= 1;
                for f in task.files() {
                    bg.busy.remove(&f.number());
                }
                if let Err(e) = r {
                    bg.error.get_or_insert_with(|| format!("compaction failed: {e}"));
                }
                drop(bg);
                inner.bg_cv.notify_all();
                continue;
            }
        }
        inner.bg_cv.wait_for(&mut bg, Duration::from_millis(500));
    }
}

fn flush_oldest(inner: &DbInner) -> Result<()> {
    let sv = inner.current();
    let Some(mem) = sv.imm.last().cloned() else {
        return Ok(());
    };
    // The next newer memtable's WAL is the oldest one still needed after this flush.
    let next_wal = if sv.imm.len() >= 2 {
        sv.imm[sv.imm.len() - 2].wal_number()
    } else {
        sv.mem.wal_number()
    };
    let run = inner.versions.lock().new_file_number();
    let snapshots = inner.snapshot_list();
    let obligations = inner.obligations();
    let mut res = flush_memtable(
        &inner.job_ctx,
        &mem,
        &sv.version,
        &snapshots,
        run,
        obligations.as_ref(),
        inner.opts.deferred_sort_memory,
    )?;
    res.edit.log_number = Some(next_wal);
    Counters::add(&inner.counters.flushes, 1);
    Counters::add(&inner.counters.flush_bytes, res.bytes);
    res.edit
        .meta
        .push((super::stats::STATS_META.to_string(), Some(inner.counters.encode())));
    open_outputs(inner, &res.edit)?;
    inner.install_edit(res.edit, Some(&mem))?;
    inner.ext.emitted(&res.emitted);
    // Logs older than the oldest needed one hold only flushed data.
    let fs = &inner.opts.fs;
    if let Ok(names) = fs.list(&inner.dir) {
        for n in names {
            if let Some(num) = n.strip_suffix(".wal").and_then(|s| s.parse::<u64>().ok())
                && num < next_wal
            {
                let _ = fs.remove(&inner.dir.join(&n));
            }
        }
    }
    Ok(())
}

/// Opens a job's new files into the table cache before they are installed: the first
/// reader of a new file would otherwise read and check its index and filter blocks
/// itself (about a millisecond for a large file), and after a burst of compactions
/// that lands on many selects at once. It also checks each output once more before the
/// manifest names it.
fn open_outputs(inner: &DbInner, edit: &crate::version::VersionEdit) -> Result<()> {
    for f in &edit.new_files {
        inner.sst_cache.get(f.meta.number)?;
    }
    Ok(())
}

/// Runs a picked task and installs its result (with the deletes it emitted).
fn execute(inner: &DbInner, task: &CompactionTask) -> Result<()> {
    let output_run = match task.output_run {
        Some(r) => r,
        None => inner.versions.lock().new_file_number(),
    };
    let snapshots = inner.snapshot_list();
    let obligations = inner.obligations();
    let keep = obligations.receives(task.keyspace);
    let sink = match task.trivial_move {
        true => None,
        false => obligations.collector(task.keyspace, &inner.job_ctx, inner.opts.deferred_sort_memory, true),
    };
    let (mut result, counts) = match sink {
        Some(mut sink) => {
            let mut result = run_compaction(&inner.job_ctx, task, output_run, snapshots, keep, true, sink.as_mut())?;
            if sink.spared() > 0 {
                // The deletes that stand in for the ones not emitted must be durable
                // before the versions they name disappear from the manifest.
                inner.sync_wal()?;
            }
            let mut owed = Emitted::default();
            emitted(sink, &inner.current().version, &mut owed)?;
            let counts = std::mem::take(&mut owed.counts);
            let born = result
                .oldest_input_time
                .unwrap_or_else(|| inner.opts.clock.now_micros());
            let (files, written) = write_runs(&inner.job_ctx, owed, born, || inner.versions.lock().new_file_number())?;
            result.bytes_written += written;
            result.edit.new_files.extend(files);
            (result, counts)
        }
        None => (
            run_compaction(&inner.job_ctx, task, output_run, snapshots, keep, false, &mut NoSink)?,
            BTreeMap::new(),
        ),
    };
    Counters::add(&inner.counters.compactions, 1);
    if task.trivial_move {
        Counters::add(&inner.counters.trivial_moves, 1);
    }
    Counters::add(&inner.counters.compaction_read, result.bytes_read);
    Counters::add(&inner.counters.compaction_written, result.bytes_written);
    result
        .edit
        .meta
        .push((super::stats::STATS_META.to_string(), Some(inner.counters.encode())));
    if !task.trivial_move {
        open_outputs(inner, &result.edit)?;
    }
    // On failure the outputs stay: a failed manifest append may still have reached
    // the disk, and unreferenced files are swept at the next open.
    inner.install_edit(std::mem::take(&mut result.edit), None)?;
    inner.ext.emitted(&counts);
    Ok(())
}

impl DbInner {
    /// Time and the oldest snapshot, for delete-driven compaction.
    pub fn delete_clock(&self) -> crate::compaction::picker::DeleteClock {
        crate::compaction::picker::DeleteClock {
            now: self.opts.clock.now_micros(),
            oldest_snapshot: self.snapshots.lock().keys().next().copied(),
            obligations: self.obligations(),
            urgent: self.ext.urgent_keyspaces(),
        }
    }

    /// Whether the memtable should be flushed for a keyspace the layer above judges
    /// urgent (a deferred table whose selects meet many dirty entries): blind writes that made them dirty are likely still in it, and
    /// no compaction can emit their deferred deletes before they are flushed. A memtable
    /// under a sixteenth of its budget is left alone, so a light write load under
    /// dirty reads does not turn into a stream of tiny flushes.
    ///
    /// Not during a manual compaction: it flushed first and is merging everything down,
    /// and a flush landing behind it would leave new level-0 files it promised are gone.
    pub fn memtable_feeds_dirty_reads(&self, sv: &SuperVersion) -> bool {
        sv.mem.approximate_bytes() >= self.opts.memtable_budget / 16
            && self.bg.lock().manual == 0
            && self.ext.any_urgent()
    }

    /// Compacts everything of keyspace `ks` overlapping `[lo, hi]` into its last level.
    pub fn compact_keyspace(&self, ks: u32, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Result<()> {
        self.check_open()?;
        let mut bg = self.bg.lock();
        bg.manual += 1;
        let r = (|| loop {
            bg.check()?;
            let sv = self.current();
            let Some(tree) = sv.version.keyspace(ks) else {
                return Err(Error::NotFound(format!("keyspace id {ks}")));
            };
            match manual_task(tree, lo.as_deref(), hi.as_deref(), &bg.busy, &self.opts) {
                Manual::Nothing => return Ok(()),
                Manual::Busy => {
                    self.bg_cv.wait_for(&mut bg, Duration::from_millis(50));
                }
                Manual::Task(task) => {
                    for f in task.files() {
                        bg.busy.insert(f.number());
                    }
                    bg.compacting += 1;
                    let r = parking_lot::MutexGuard::unlocked(&mut bg, || execute(self, &task));
                    bg.compacting -= 1;
                    for f in task.files() {
                        bg.busy.remove(&f.number());
                    }
                    self.bg_cv.notify_all();
                    return r;
                }
            }
        })();
        bg.manual -= 1;
        drop(bg);
        self.bg_cv.notify_all();
        // A manual compaction is maintenance the caller waits for: its inputs go now.
        self.retired.purge();
        r
    }

    /// Waits until nothing is left to flush or compact.
    pub fn wait_idle(&self) -> Result<()> {
        let mut bg = self.bg.lock();
        loop {
            bg.check()?;
            let sv = self.current();
            let idle = sv.imm.is_empty()
                && self.ext.settled()
                && !self.memtable_expired(&sv)
                && !bg.flushing
                && bg.busy.is_empty()
                && self
                    .picker
                    .lock()
                    .pick(&sv.version, &self.opts, &bg.busy, &bg.paused, self.delete_clock())
                    .is_none();
            if idle {
                drop(bg);
                self.retired.purge();
                return Ok(());
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut bg, Duration::from_millis(20));
        }
    }
}

/// Holds the background's compaction picks and urgency flushes, as a running manual
/// compaction does, until dropped (for callers that compact by hand and then inspect
/// the result).
pub(crate) struct ManualHold(Arc<DbInner>);

impl ManualHold {
    pub(crate) fn new(inner: &Arc<DbInner>) -> Self {
        inner.bg.lock().manual += 1;
        ManualHold(inner.clone())
    }
}

impl Drop for ManualHold {
    fn drop(&mut self) {
        self.0.bg.lock().manual -= 1;
        self.0.bg_cv.notify_all();
    }
}
