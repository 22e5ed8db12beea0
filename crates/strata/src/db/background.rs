//! Background work: flushing frozen memtables and running compactions.
//!
//! Workers share one queue of duties, in priority order: flush the oldest frozen
//! memtable (one flush at a time, so level-0 runs stay in seqno order), then the most
//! urgent compaction whose files are not already taken. A failure puts the database in
//! a failed state: writes are refused until it is reopened, reads go on.

use std::sync::Arc;

use std::time::Duration;

use super::stats::Counters;
use super::DbInner;
use crate::compaction::picker::manual_task;
use crate::compaction::{CompactionTask, DropRules, JobContext, NoSink, OutputWriter, run_compaction, Decision};
use crate::error::{Error, Result};
use crate::key::{SeqNo, parse_internal_key};
use crate::memtable::MemTable;
use crate::version::{Version, VersionEdit};

/// Writes `mem` as one level-0 run (`run` id) per keyspace present in `version`.
pub(crate) fn flush_memtable(
    ctx: &JobContext,
    mem: &MemTable,
    version: &Version,
    snapshots: &[SeqNo],
    run: u64,
) -> Result<(VersionEdit, u64)> {
    let mut edit = VersionEdit::default();
    let mut bytes = 0;
    for ks in mem.keyspaces() {
        if version.keyspace(ks).is_none() {
            continue; // dropped since the write
        }
        let rts = mem.range_tombstones(ks);
        let mut rules = DropRules::new(snapshots.to_vec(), false, false, rts);
        let mut out = OutputWriter::new(ctx.clone(), ks, 0, run, rules.surviving_range_dels());
        if mem.tombstones() > 0 {
            out.note_tombstone_time(mem.created_at());
        }
        mem.for_each(ks, |ikey, value| {
            let p = parse_internal_key(ikey)
                .ok_or_else(|| Error::InvalidArgument("memtable holds an undecodable key".into()))?;
            if rules.decide(&p) == Decision::Keep {
                out.add(ikey, value)?;
            }
            Ok(())
        })?;
        let (files, written) = out.finish()?;
        bytes += written;
        edit.new_files.extend(files);
    }
    edit.last_seq = Some(mem.max_seq());
    Ok((edit, bytes))
}

pub(crate) fn worker(inner: &Arc<DbInner>) {
    loop {
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
            let task = inner.picker.lock().pick(&sv.version, &inner.opts, &bg.busy);
            if let Some(task) = task {
                for f in task.files() {
                    bg.busy.insert(f.number());
                }
                drop(bg);
                let r = execute(inner, &task);
                let mut bg = inner.bg.lock();
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
    let (mut edit, bytes) = flush_memtable(&inner.job_ctx, &mem, &sv.version, &snapshots, run)?;
    edit.log_number = Some(next_wal);
    {
        let mut vs = inner.versions.lock();
        let v = vs.log_and_apply(edit)?;
        inner.install_version(v, Some(&mem));
    }
    Counters::add(&inner.counters.flushes, 1);
    Counters::add(&inner.counters.flush_bytes, bytes);
    // Logs older than the oldest needed one hold only flushed data.
    let fs = &inner.opts.fs;
    if let Ok(names) = fs.list(&inner.dir) {
        for n in names {
            if let Some(num) = n.strip_suffix(".wal").and_then(|s| s.parse::<u64>().ok()) {
                if num < next_wal {
                    let _ = fs.remove(&inner.dir.join(&n));
                }
            }
        }
    }
    Ok(())
}

/// Runs a picked task and installs its result.
fn execute(inner: &DbInner, task: &CompactionTask) -> Result<()> {
    let output_run = match task.output_run {
        Some(r) => r,
        None => inner.versions.lock().new_file_number(),
    };
    let snapshots = inner.snapshot_list();
    let result = run_compaction(&inner.job_ctx, task, output_run, snapshots, false, &mut NoSink)?;
    let created: Vec<u64> = if task.trivial_move {
        Vec::new()
    } else {
        result.edit.new_files.iter().map(|f| f.meta.number).collect()
    };
    let installed = {
        let mut vs = inner.versions.lock();
        vs.log_and_apply(result.edit).map(|v| inner.install_version(v, None))
    };
    if let Err(e) = installed {
        for n in created {
            let _ = inner.opts.fs.remove(&inner.dir.join(crate::sstable::table_file_name(n)));
        }
        return Err(e);
    }
    Counters::add(&inner.counters.compactions, 1);
    if task.trivial_move {
        Counters::add(&inner.counters.trivial_moves, 1);
    }
    Counters::add(&inner.counters.compaction_read, result.bytes_read);
    Counters::add(&inner.counters.compaction_written, result.bytes_written);
    Ok(())
}

impl DbInner {
    /// Compacts everything of keyspace `ks` overlapping `[lo, hi]` into its last level.
    pub fn compact_keyspace(&self, ks: u32, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Result<()> {
        self.check_open()?;
        let mut bg = self.bg.lock();
        bg.manual += 1;
        let r = (|| loop {
            if let Some(e) = &bg.error {
                return Err(Error::Background(e.clone()));
            }
            if bg.shutdown {
                return Err(Error::Closed);
            }
            let sv = self.current();
            let Some(tree) = sv.version.keyspace(ks) else {
                return Err(Error::NotFound(format!("keyspace id {ks}")));
            };
            match manual_task(tree, lo.as_deref(), hi.as_deref(), &bg.busy) {
                Ok(None) => return Ok(()),
                Err(()) => {
                    self.bg_cv.wait_for(&mut bg, Duration::from_millis(50));
                }
                Ok(Some(task)) => {
                    for f in task.files() {
                        bg.busy.insert(f.number());
                    }
                    let r = parking_lot::MutexGuard::unlocked(&mut bg, || execute(self, &task));
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
        r
    }

    /// Waits until nothing is left to flush or compact.
    pub fn wait_idle(&self) -> Result<()> {
        let mut bg = self.bg.lock();
        loop {
            if let Some(e) = &bg.error {
                return Err(Error::Background(e.clone()));
            }
            if bg.shutdown {
                return Err(Error::Closed);
            }
            let sv = self.current();
            let idle = sv.imm.is_empty()
                && !bg.flushing
                && bg.busy.is_empty()
                && self.picker.lock().pick(&sv.version, &self.opts, &bg.busy).is_none();
            if idle {
                return Ok(());
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut bg, Duration::from_millis(20));
        }
    }
}

