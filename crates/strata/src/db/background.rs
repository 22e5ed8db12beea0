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
use crate::compaction::picker::deletes::KILLED_PUTS;
use crate::compaction::picker::{Manual, manual_task};
use crate::compaction::sorter::SortedStream;
use crate::compaction::tiles::DeleteJob;
use crate::compaction::{
    CompactionTask, Decision, DropRules, DropSink, Duties, JobContext, NoSink, Obligations, OutputWriter,
    run_compaction,
};
use crate::error::{Error, Result};
use crate::iter::merge::MergingIter;
use crate::iter::{Direction, InternalIterator};
use crate::key::{SeqNo, ValueKind, internal_key, parse_internal_key};
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
    let flush = |ks, keep_shadowed, track, sink: &mut dyn DropSink, extra, result: &mut FlushResult| {
        flush_keyspace(ctx, mem, ks, snapshots, run, keep_shadowed, track, sink, extra, result)
    };
    for ks in order {
        let Some(mut sink) = obligations.collector(ks, ctx, sort_memory, false) else {
            rest.push(ks);
            continue;
        };
        flush(ks, false, true, sink.as_mut(), Vec::new(), &mut result)?;
        emitted(sink, version, &mut owed)?;
    }
    for ks in owed.streams.keys() {
        if !rest.contains(ks) {
            rest.push(*ks);
        }
    }
    for ks in rest {
        let extra = owed.streams.remove(&ks).unwrap_or_default();
        flush(ks, obligations.receives(ks), false, &mut NoSink, extra, &mut result)?;
    }
    // Secondary range deletes leave the WAL with the memtable: the manifest keeps them
    // (`crate::delete_key`), in the same edit that retires the log.
    for (ks, r) in mem.all_delete_wheres() {
        if version.keyspace(ks).is_some() {
            result
                .edit
                .meta
                .push((crate::delete_key::record_name(ks, r.seq), Some(r.encode())));
        }
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
    let mut rules =
        DropRules::new(snapshots.to_vec(), false, keep_shadowed_tombstones, rts).with_deletes(ctx.deletes.get(&ks));
    let mut out = OutputWriter::new(ctx.for_output(ks, 0), ks, 0, run, rules.surviving_range_dels());
    // Puts a delete-where kills are written as tombstones too: their FADE clock starts
    // no later than the memtable did.
    let kills = ctx.deletes.get(&ks).is_some_and(|d| !d.records.is_empty());
    if mem.tombstones() > 0 || !extra.is_empty() || track_obligations || kills {
        out.note_tombstone_time(mem.created_at());
    }
    if track_obligations {
        out.track_obligations();
    }
    let mut emit = |ikey: &[u8], value: &[u8], out: &mut OutputWriter| -> Result<()> {
        let p = parse_internal_key(ikey)
            .ok_or_else(|| Error::InvalidArgument("memtable holds an undecodable key".into()))?;
        match rules.decide_value(&p, value) {
            (Decision::Keep, false) => out.add(ikey, value),
            (Decision::Keep, true) => {
                sink.dropped_put(p.user_key, p.seq, value)?;
                out.add(&internal_key(p.user_key, p.seq, ValueKind::Delete), &[])
            }
            (Decision::DropPut, _) | (Decision::DropTombstone, true) => sink.dropped_put(p.user_key, p.seq, value),
            (Decision::DropTombstone, false) => Ok(()),
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
    let (mut files, written) = out.finish()?;
    let applied = DeleteJob::applied(ctx.deletes.get(&ks), rules.kept_killed());
    for f in &mut files {
        f.meta.deletes_applied = applied;
    }
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
    let next = if sv.imm.len() >= 2 {
        &sv.imm[sv.imm.len() - 2]
    } else {
        &sv.mem
    };
    let (next_wal, next_born) = (next.wal_number(), next.created_at());
    let run = inner.versions.lock().new_file_number();
    let ctx = inner.job_ctx_for(&sv)?;
    #[cfg(test)]
    tests::FLUSH_GATE.pass(&inner.dir);
    // Listed after the context (`job_ctx_for`).
    let snapshots = inner.snapshot_list();
    let obligations = inner.obligations();
    let mut res = flush_memtable(
        &ctx,
        &mem,
        &sv.version,
        &snapshots,
        run,
        obligations.as_ref(),
        inner.opts.deferred_sort_memory,
    )?;
    res.edit.log_number = Some(next_wal);
    res.edit.meta.push(super::open::log_born_entry(next_wal, next_born));
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
        inner.sst_cache.get(f.meta.number, f.meta.global_seq)?;
    }
    Ok(())
}

/// Runs a picked task and installs its result (with the deletes it emitted).
fn execute(inner: &DbInner, task: &CompactionTask) -> Result<()> {
    let ctx = inner.job_ctx_for(&inner.current())?;
    // A killed-puts rewrite of one tiled file may patch its pages instead (`db::patch`).
    if inner.patch_pages(task, &ctx)? {
        return Ok(());
    }
    let output_run = match task.output_run {
        Some(r) => r,
        None => inner.versions.lock().new_file_number(),
    };
    let snapshots = inner.snapshot_list();
    let obligations = inner.obligations();
    let duties = |track_obligations| Duties {
        keep_shadowed_tombstones: obligations.receives(task.keyspace),
        track_obligations,
        seqnos_read: obligations.reads_seqnos(task.keyspace),
    };
    let sink = match task.trivial_move {
        true => None,
        false => obligations.collector(task.keyspace, &inner.job_ctx, inner.opts.deferred_sort_memory, true),
    };
    let (mut result, counts) = match sink {
        Some(mut sink) => {
            let mut result = run_compaction(&ctx, task, output_run, snapshots, duties(true), sink.as_mut())?;
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
            let (files, written) = write_runs(&ctx, owed, born, || inner.versions.lock().new_file_number())?;
            result.bytes_written += written;
            result.edit.new_files.extend(files);
            (result, counts)
        }
        None => (
            run_compaction(&ctx, task, output_run, snapshots, duties(false), &mut NoSink)?,
            BTreeMap::new(),
        ),
    };
    Counters::add(&inner.counters.compactions, 1);
    if task.trivial_move {
        Counters::add(&inner.counters.trivial_moves, 1);
    }
    Counters::add(&inner.counters.compaction_read, result.bytes_read);
    Counters::add(&inner.counters.pages_dropped, result.pages.dropped);
    Counters::add(&inner.counters.pages_partial, result.pages.partial);
    Counters::add(&inner.counters.compaction_written, result.bytes_written);
    if task.reason == KILLED_PUTS {
        Counters::add(&inner.counters.kill_rewrite_read, result.bytes_read);
        Counters::add(&inner.counters.kill_rewrite_written, result.bytes_written);
    }
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
        let oldest_snapshot = self.snapshots.lock().seqs().next();
        crate::compaction::picker::DeleteClock {
            now: self.opts.clock.now_micros(),
            oldest_snapshot,
            obligations: self.obligations(),
            urgent: self.ext.urgent_keyspaces(),
            killed: self.killed_puts(oldest_snapshot),
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
        let _job = self.begin_job()?;
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
                    let r = parking_lot::MutexGuard::unlocked(&mut bg, || {
                        #[cfg(test)]
                        crate::test_gate::MANUAL_GATE.pass(&self.dir);
                        execute(self, &task)
                    });
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

/// A keyspace's delete configuration and each level's h with the reason for it.
pub(crate) type TilePlan = (crate::delete_key::DeleteConfig, Vec<(u32, String)>);

impl DbInner {
    /// Keyspace `ks`'s delete configuration and, per level, the h its tables are
    /// written with and why (`compaction::tiles`); `None` without a delete key.
    pub(crate) fn tile_plan(&self, sv: &SuperVersion, ks: u32) -> Result<Option<TilePlan>> {
        use crate::compaction::tiles::{Mix, choose, cost};
        use crate::delete_key::TileChoice;
        let Some(config) = crate::delete_key::config_of(&sv.version.meta, ks)? else {
            return Ok(None);
        };
        let Some(tree) = sv.version.keyspace(ks) else {
            return Ok(None);
        };
        let c = &self.counters;
        let (writes, points, ranges, srds) = (
            Counters::get(&c.user_ops) as f64,
            Counters::get(&c.point_reads) as f64,
            Counters::get(&c.range_reads) as f64,
            Counters::get(&c.delete_wheres) as f64,
        );
        let total = (writes + points + ranges).max(1.0);
        let mix = Mix {
            srd: srds / total,
            point: points / total,
            range: ranges / total,
        };
        let page = self.opts.block_size.max(1) as u64;
        let max_h = u32::try_from(self.opts.target_file_size / page).unwrap_or(u32::MAX);
        // At least the levels that exist, and one more for the next level a compaction
        // creates.
        let n = tree.levels.len() + 1;
        let plan = (0..n)
            .map(|i| {
                let pages = tree.levels.get(i).map_or(0, |l| l.size() / page);
                match config.h {
                    TileChoice::Fixed(h) => (h, "fixed".to_string()),
                    TileChoice::Auto => {
                        let best = choose(mix, pages, self.opts.bloom_fpr, max_h);
                        let one = cost(mix, pages, 1, self.opts.bloom_fpr);
                        let why = format!(
                            "auto: {pages} pages, mix srd {:.2e} point {:.3} range {:.3}; cost/op {:.4} vs {:.4} at h = 1",
                            mix.srd,
                            mix.point,
                            mix.range,
                            best.total(),
                            one.total()
                        );
                        (best.h, why)
                    }
                }
            })
            .collect();
        Ok(Some((config, plan)))
    }

    /// The job context with the delete keys, tile sizes and secondary range deletes of
    /// every keyspace that declares a delete key, and the keyspaces' kinds of filter, as
    /// of `sv`.
    ///
    /// A job lists the live snapshots after it makes its context: a snapshot missing
    /// from the list then reads at or above every delete-where record the context
    /// applies, and sees them. Listed before, a snapshot taken in between, followed by a
    /// record, would have the job apply the record to versions that snapshot reads.
    pub(crate) fn job_ctx_for(&self, sv: &SuperVersion) -> Result<JobContext> {
        let mut jobs = BTreeMap::new();
        // Records are taken from a super version captured after `visible` was read: a
        // record readers see is in one of its memtables or, flushed, in its manifest,
        // so every record at or below `visible` is among them (invariant KR of
        // `compaction::tiles`).
        let visible = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        let fresh = self.current();
        for &ks in sv.version.keyspaces.keys() {
            let Some((config, plan)) = self.tile_plan(sv, ks)? else {
                continue;
            };
            let mut records = super::read::delete_wheres_in(&fresh, ks)?;
            // A record being committed is not applied before readers can see it.
            records.retain(|r| r.seq <= visible);
            records.sort_by_key(|r| r.seq);
            records.dedup();
            jobs.insert(
                ks,
                DeleteJob {
                    config,
                    h_by_level: plan.into_iter().map(|(h, _)| h).collect(),
                    records,
                    applied_through: visible,
                },
            );
        }
        let mut ctx = self.job_ctx.clone();
        ctx.deletes = Arc::new(jobs);
        ctx.filter_keys = Arc::new(super::filter_key::all(&sv.version.meta)?);
        Ok(ctx)
    }
}

impl DbInner {
    /// Drops, by a manifest edit and without reading or rewriting them, the pages of
    /// keyspace `ks`'s tiled files that its secondary range deletes killed whole
    /// (invariant TP of `compaction::tiles`; only the oldest run of the last level
    /// qualifies). Files a background job holds are skipped (a later compaction drops
    /// their pages). Then wakes the background, which rewrites the files still holding
    /// killed entries: pages a delete covers in part (invariant KR).
    pub(crate) fn drop_deleted_pages(&self, ks: u32) -> Result<crate::compaction::job::PageTally> {
        let job = match self.begin_job() {
            Ok(job) => job,
            // Closing: the delete that asked is committed; compactions drop the pages
            // after a reopen (an error would read as a delete that did not happen).
            Err(Error::Closed) => return Ok(crate::compaction::job::PageTally::default()),
            Err(e) => return Err(e),
        };
        let r = self.drop_whole_pages(ks);
        drop(job);
        self.bg_cv.notify_all();
        r
    }

    fn drop_whole_pages(&self, ks: u32) -> Result<crate::compaction::job::PageTally> {
        use crate::compaction::tiles::{PageCounts, page_skipper};
        use std::sync::atomic::Ordering as AtOrd;
        let mut tally = crate::compaction::job::PageTally::default();
        // Taken under the background lock: files not busy now stay in the version until
        // this job lets them go.
        let mut bg = self.bg.lock();
        let sv = self.current();
        let ctx = self.job_ctx_for(&sv)?;
        let Some(job) = ctx.deletes.get(&ks) else {
            return Ok(tally);
        };
        if self.obligations().owes(ks) {
            // Its dropped rows must be read to emit their obligations (invariant TP).
            return Ok(tally);
        }
        let Some(tree) = sv.version.keyspace(ks) else {
            return Ok(tally);
        };
        let Some((level, run)) = tree
            .levels
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, l)| l.runs.last().map(|r| (i, r)))
        else {
            return Ok(tally);
        };
        let files: Vec<_> = run
            .files
            .iter()
            .filter(|f| !bg.busy.contains(&f.number()))
            .cloned()
            .collect();
        for f in &files {
            bg.busy.insert(f.number());
        }
        drop(bg);
        let r = (|| -> Result<()> {
            let counts = std::sync::Arc::new(PageCounts::default());
            let skip = page_skipper(
                job.records.clone(),
                self.snapshot_list().first().copied(),
                counts.clone(),
            );
            let mut edit = VersionEdit::default();
            for f in &files {
                let t = self.sst_cache.get(f.meta.number, f.meta.global_seq)?;
                let Some(tiles) = t.tiles() else {
                    continue;
                };
                let newly: Vec<u64> = tiles
                    .pages
                    .iter()
                    .filter(|p| !f.meta.pages.is_dropped(p.handle.offset) && skip(p))
                    .map(|p| p.handle.offset)
                    .collect();
                if newly.is_empty() {
                    continue;
                }
                // A patched page covered whole is dropped too: its patch holds a subset.
                let pages = f.meta.pages.dropping(newly);
                edit.deleted_files.push((ks, f.number()));
                if pages.dropped.len() == tiles.pages.len() && t.range_tombstones().is_empty() {
                    // Nothing left: the file goes.
                    continue;
                }
                let mut meta = f.meta.clone();
                meta.pages = std::sync::Arc::new(pages);
                edit.new_files.push(crate::version::NewFile {
                    keyspace: ks,
                    level: level as u32,
                    run: run.id,
                    meta,
                });
            }
            tally.dropped = counts.dropped.load(AtOrd::Relaxed);
            tally.partial = counts.partial.load(AtOrd::Relaxed);
            if !edit.deleted_files.is_empty() {
                self.install_edit(edit, None)?;
            }
            Counters::add(&self.counters.pages_dropped, tally.dropped);
            Counters::add(&self.counters.pages_partial, tally.partial);
            Ok(())
        })();
        {
            let mut bg = self.bg.lock();
            for f in &files {
                bg.busy.remove(&f.number());
            }
        }
        r.map(|()| tally)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;
    use std::time::Duration;

    use crate::delete_key::{DeleteKey, TileChoice};
    use crate::test_gate::Gate;
    use crate::{Db, Options};

    /// Between a flush's job context and its snapshot list.
    pub(super) static FLUSH_GATE: Gate = Gate::new();

    /// Keyspace `k` with a 1-byte delete key and the row `row` = `[5, 50]` (delete key 5).
    fn keyed(db: &Db) -> crate::Keyspace {
        let ks = db.create_keyspace("k").expect("ks");
        ks.set_delete_key(DeleteKey::new(0, 1).expect("dk"), TileChoice::Fixed(4))
            .expect("set dk");
        ks.put(b"row", &[5, 50]).expect("put");
        ks
    }

    /// Runs `during` while a flush of `db` waits at [`FLUSH_GATE`], then lets the flush
    /// finish (it must succeed); returns what `during` returned.
    fn during_a_flush<T: Send>(db: &Db, during: impl FnOnce() -> T + Send) -> T {
        let (reached_tx, reached) = channel();
        let (go_tx, go) = channel::<()>();
        FLUSH_GATE.set(&db.inner.dir, move || {
            let _ = reached_tx.send(());
            let _ = go.recv_timeout(Duration::from_secs(30));
        });
        std::thread::scope(|s| {
            let flush = s.spawn(|| db.flush());
            reached
                .recv_timeout(Duration::from_secs(30))
                .expect("the flush reached the gate");
            let out = during();
            go_tx.send(()).expect("go");
            flush.join().expect("flush thread").expect("flush");
            out
        })
    }

    /// A snapshot taken while a flush runs, then a delete-where that covers a row the
    /// flush writes: the snapshot still reads the row after the flush.
    #[test]
    fn a_snapshot_taken_during_a_flush_keeps_rows_a_later_delete_where_covers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default()).expect("open");
        let ks = keyed(&db);
        let snap = during_a_flush(&db, || {
            let snap = db.snapshot();
            ks.delete_where(&[0], &[10]).expect("delete_where");
            snap
        });
        assert_eq!(ks.get(b"row").expect("get"), None);
        assert_eq!(
            snap.get(&ks, b"row").expect("snapshot get").as_deref(),
            Some(&[5, 50][..]),
            "the snapshot predates the delete"
        );
    }

    /// A keyspace dropped while a flush writes its delete-where record: the flush's edit
    /// leaves the record out (the drop removed only those already in the manifest), so
    /// no record of a keyspace that is gone stays in the manifest.
    #[test]
    fn a_flush_leaves_out_records_of_a_keyspace_dropped_meanwhile() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default()).expect("open");
        let ks = keyed(&db);
        ks.delete_where(&[0], &[10]).expect("delete_where");
        let id = ks.id();
        during_a_flush(&db, || db.drop_keyspace("k").expect("drop"));
        let meta = db.inner.current().version.meta.clone();
        let left: Vec<String> = crate::delete_key::meta_names_of(&meta, id).collect();
        assert!(left.is_empty(), "delete-key entries of a dropped keyspace: {left:?}");
        db.close().expect("close");
    }

    /// A close while a manual compaction runs waits for it (invariant of
    /// `DbInner::begin_job`): before, the close returned and released the directory
    /// while the compaction went on to write its files, edit the manifest and delete
    /// its inputs, which a handle opened meanwhile still listed.
    #[test]
    fn a_close_waits_for_a_running_manual_compaction() {
        use crate::test_gate::MANUAL_GATE;
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default()).expect("open");
        let ks = db.default_keyspace();
        for round in 0..3u8 {
            for i in 0..100u32 {
                ks.put(&i.to_be_bytes(), &[round]).expect("put");
            }
            db.flush().expect("flush");
        }
        let (reached_tx, reached) = channel();
        let (go_tx, go) = channel::<()>();
        MANUAL_GATE.set(dir.path(), move || {
            let _ = reached_tx.send(());
            let _ = go.recv_timeout(Duration::from_secs(30));
        });
        let compaction = std::thread::spawn({
            let ks = ks.clone();
            move || ks.compact_range(..)
        });
        reached
            .recv_timeout(Duration::from_secs(30))
            .expect("the compaction reached the gate");
        let (closed_tx, closed) = channel();
        let close = std::thread::spawn(move || {
            let _ = closed_tx.send(db.close());
        });
        assert!(
            closed.recv_timeout(Duration::from_millis(300)).is_err(),
            "the close returned while the compaction ran"
        );
        go_tx.send(()).expect("go");
        compaction.join().expect("compaction thread").expect("compaction");
        closed
            .recv_timeout(Duration::from_secs(30))
            .expect("the close returned")
            .expect("close");
        close.join().expect("close thread");
        // A job asked for after the close is refused.
        assert!(matches!(ks.compact_range(..), Err(crate::Error::Closed)));
        let db = Db::open(dir.path(), Options::default()).expect("reopen");
        let ks = db.default_keyspace();
        assert_eq!(ks.scan(..).expect("scan").count(), 100);
        assert_eq!(ks.get(&7u32.to_be_bytes()).expect("get").as_deref(), Some(&[2][..]));
        assert!(db.check(Default::default()).expect("check").ok());
    }
}
