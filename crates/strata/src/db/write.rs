//! The write path: a queue of writers where the one at the front (the leader) commits a
//! whole group with one WAL append and, under group commit, one fsync.
//!
//! Invariants: only the leader touches the WAL and assigns seqnos, so seqnos are
//! assigned in WAL order; `visible_seq` moves only after every batch of a group is in
//! the memtable, so readers never see half a batch.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::stats::Counters;
use super::{BgState, DbInner, SuperVersion, WalState};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::memtable::{MemTable, PointEntry};
use crate::options::SyncPolicy;
use crate::wal;

/// Largest group a leader commits at once.
const MAX_GROUP_BYTES: usize = 4 << 20;
/// Followers' batches up to this many bytes in all are inserted by the leader (a few
/// small writes; a larger batch, such as the purge thread's, is inserted by its owner).
const LEADER_INSERTS_BYTES: usize = 4 << 10;

pub(crate) enum Request {
    /// A batch, and whether it must be synced under every policy: it holds a secondary
    /// range delete, which background jobs apply to files before it is flushed (an
    /// applied delete lost with the unsynced tail would be half undone by a crash).
    Batch(Arc<WriteBatch>, bool),
    /// Freeze the memtable so it gets flushed.
    Freeze,
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    waiting: VecDeque<u64>,
    requests: HashMap<u64, Request>,
    results: HashMap<u64, std::result::Result<SeqNo, String>>,
    /// Followers whose batch is in the WAL and who now insert it into the memtable
    /// themselves: base seqno and the memtable.
    assigned: HashMap<u64, (SeqNo, Arc<MemTable>)>,
    /// Followers of the current group still inserting.
    inserting: usize,
    next_id: u64,
}

impl DbInner {
    /// Commits `batch`; returns the seqno of its last operation.
    pub fn write(&self, batch: WriteBatch) -> Result<SeqNo> {
        self.check_open()?;
        self.check_writable()?;
        batch.validate()?;
        if batch.is_empty() {
            return Ok(self.visible_seq.load(Ordering::Acquire));
        }
        let deletes_where = self.check_batch_keyspaces(&batch)?;
        self.submit(Request::Batch(Arc::new(batch), deletes_where))
    }

    /// Commits a batch from the public key-value API: like [`write`](Self::write), but
    /// a table's internal keyspaces (named `table:...`) are refused, since rows and
    /// index entries written behind the table's back break its invariants.
    pub fn write_user(&self, batch: WriteBatch) -> Result<SeqNo> {
        let v = self.current().version.clone();
        let mut last = u32::MAX;
        for op in batch.ops() {
            let ks = op.map_err(Error::InvalidArgument)?.keyspace();
            if ks != last
                && let Some(tree) = v.keyspace(ks)
                && tree.name.starts_with(super::RESERVED_PREFIX)
            {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {:?} belongs to a table: write through the table API",
                    tree.name
                )));
            }
            last = ks;
        }
        self.write(batch)
    }

    /// Checks that the batch's keyspaces exist, its secondary range deletes fit them,
    /// and no two operations sharing a seqno name one key; returns whether it holds any
    /// secondary range delete.
    fn check_batch_keyspaces(&self, batch: &WriteBatch) -> Result<bool> {
        let v = self.current().version.clone();
        let mut last = u32::MAX;
        // A record is named by its keyspace and seqno (`delete_key::record_name`).
        let mut records: Vec<(u32, SeqNo)> = Vec::new();
        // Keys put or deleted at the seqno being read, when the batch shares any.
        let sharing = batch.seq_count() < batch.len() as u64;
        let mut group: (SeqNo, Vec<(u32, &[u8])>) = (0, Vec::new());
        for op in batch.ops_with_seq(1) {
            let (seq, op) = op.map_err(Error::InvalidArgument)?;
            let ks = op.keyspace();
            if ks != last && v.keyspace(ks).is_none() {
                return Err(Error::NotFound(format!("keyspace id {ks} (dropped or never created)")));
            }
            last = ks;
            // A deferred delete's entry takes the seqno it names, not the batch's.
            if sharing && let BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } = op {
                if seq != group.0 {
                    check_distinct_keys(&mut group.1)?;
                    group.0 = seq;
                }
                group.1.push((ks, key));
            }
            if let BatchOp::DeleteWhere { lo, hi, .. } = op {
                let Some(c) = crate::delete_key::config_of(&v.meta, ks)? else {
                    return Err(Error::InvalidArgument(format!(
                        "keyspace id {ks} declares no delete key: delete_where needs one"
                    )));
                };
                let w = usize::from(c.key.width);
                if lo.len() != w || hi.len() != w {
                    return Err(Error::InvalidArgument(format!(
                        "delete_where bounds must be {w} bytes (the delete key's width), got {} and {}",
                        lo.len(),
                        hi.len()
                    )));
                }
                if records.contains(&(ks, seq)) {
                    return Err(Error::InvalidArgument(format!(
                        "two delete_where operations on keyspace id {ks} share a seqno (share_seq): \
                         each needs its own"
                    )));
                }
                records.push((ks, seq));
                Counters::add(&self.counters.delete_wheres, 1);
            }
        }
        check_distinct_keys(&mut group.1)?;
        Ok(!records.is_empty())
    }

    /// Queues a request; the writer at the front leads a group: it appends every batch
    /// of the group to the WAL (one fsync under group commit), then each writer inserts
    /// its own batch into the memtable in parallel, and the leader publishes the group's
    /// seqnos once all are in.
    fn submit(&self, req: Request) -> Result<SeqNo> {
        let mine = match &req {
            Request::Batch(b, _) => Some(b.clone()),
            Request::Freeze => None,
        };
        let mut q = self.queue.lock();
        let id = q.next_id;
        q.next_id += 1;
        q.waiting.push_back(id);
        q.requests.insert(id, req);
        loop {
            if let Some(r) = q.results.remove(&id) {
                return r.map_err(Error::Background);
            }
            if let Some((base, mem)) = q.assigned.remove(&id) {
                if let Some(b) = &mine {
                    parking_lot::MutexGuard::unlocked(&mut q, || apply_batch(&mem, b, base, &self.counters));
                }
                q.inserting -= 1;
                self.queue_cv.notify_all();
                continue;
            }
            if q.waiting.front() == Some(&id) {
                break;
            }
            self.queue_cv.wait(&mut q);
        }
        // Leader: take a group from the front of the queue.
        let mut group: Vec<(u64, Request)> = Vec::new();
        let mut bytes = 0usize;
        let sync_each = self.opts.sync == SyncPolicy::EveryBatch;
        for &wid in q.waiting.iter() {
            let Some(req) = q.requests.get(&wid) else { break };
            let size = match req {
                Request::Batch(b, _) => b.size_bytes(),
                Request::Freeze => 0,
            };
            let is_freeze = matches!(req, Request::Freeze);
            if !group.is_empty() && (bytes + size > MAX_GROUP_BYTES || is_freeze || sync_each) {
                break;
            }
            bytes += size;
            group.push((wid, Request::Freeze));
            if is_freeze {
                break;
            }
        }
        for (wid, slot) in group.iter_mut() {
            if let Some(r) = q.requests.remove(wid) {
                *slot = r;
            }
        }
        drop(q);

        let outcome = self.commit_group(id, &group);

        let mut q = self.queue.lock();
        for (wid, _) in &group {
            if q.waiting.front() == Some(wid) {
                q.waiting.pop_front();
            }
            if *wid != id {
                let r = match &outcome {
                    Ok(seqs) => Ok(seqs.get(wid).copied().unwrap_or(0)),
                    Err(e) => Err(e.to_string()),
                };
                q.results.insert(*wid, r);
            }
        }
        drop(q);
        self.queue_cv.notify_all();
        outcome.map(|seqs| seqs.get(&id).copied().unwrap_or(0))
    }

    /// Leader only: WAL append (+ sync) for a group, then the memtable inserts (the
    /// followers' in parallel), then the group becomes visible.
    fn commit_group(&self, leader: u64, group: &[(u64, Request)]) -> Result<HashMap<u64, SeqNo>> {
        self.check_open()?;
        self.background_error()?;
        #[cfg(test)]
        tests::COMMIT_GATE.pass(&self.dir);
        let mut out = HashMap::new();
        if let [(wid, Request::Freeze)] = group {
            self.freeze_memtable()?;
            out.insert(*wid, self.visible_seq.load(Ordering::Acquire));
            return Ok(out);
        }
        self.make_room()?;
        let sv = self.current();
        let mut seq = self.last_seq.load(Ordering::Acquire);
        let mut record = Vec::new();
        let mut wal_guard = self.wal.lock();
        let w = wal_guard.as_mut().ok_or(Error::Closed)?;
        let mut ranges = Vec::with_capacity(group.len());
        let mut must_sync = false;
        for (wid, req) in group {
            let Request::Batch(b, sync) = req else { continue };
            must_sync |= *sync;
            let base = seq + 1;
            record.clear();
            b.encode_record(base, &mut record);
            if let Err(e) = w.writer.add_record(&record) {
                return Err(self.fail(e));
            }
            Counters::add(&self.counters.wal_bytes, (record.len() + crate::wal::HEADER_LEN) as u64);
            seq += b.seq_count();
            ranges.push((*wid, base, b));
            out.insert(*wid, seq);
        }
        let res = match self.opts.sync {
            SyncPolicy::None if !must_sync => w.writer.flush(),
            _ => {
                Counters::add(&self.counters.wal_syncs, 1);
                w.writer.sync_commit()
            }
        };
        if let Err(e) = res {
            return Err(self.fail(e));
        }
        drop(wal_guard);
        self.last_seq.store(seq, Ordering::Release);
        // Small groups are inserted by the leader alone: waking each follower to insert
        // its own batch costs a scheduling round trip on the group's critical path,
        // more than inserting a few entries (it pays off for large batches only).
        let followers_bytes: usize = ranges
            .iter()
            .filter(|(wid, ..)| *wid != leader)
            .map(|(_, _, b)| b.size_bytes())
            .sum();
        if followers_bytes <= LEADER_INSERTS_BYTES {
            for (_, base, b) in ranges {
                apply_batch(&sv.mem, b, base, &self.counters);
            }
        } else {
            let mut own = None;
            {
                let mut q = self.queue.lock();
                for (wid, base, b) in ranges {
                    if wid == leader {
                        own = Some((base, b));
                    } else {
                        q.assigned.insert(wid, (base, sv.mem.clone()));
                        q.inserting += 1;
                    }
                }
            }
            self.queue_cv.notify_all();
            if let Some((base, b)) = own {
                apply_batch(&sv.mem, b, base, &self.counters);
            }
            let mut q = self.queue.lock();
            while q.inserting > 0 {
                self.queue_cv.wait(&mut q);
            }
        }
        self.visible_seq.store(seq, Ordering::Release);
        Ok(out)
    }

    /// Records a fatal write error: the WAL may hold a partial record, so the database
    /// refuses writes until reopened (recovery drops the torn tail).
    pub(crate) fn fail(&self, e: Error) -> Error {
        failed(&mut self.bg.lock(), &e);
        e
    }

    /// Leader only: freezes a full memtable, stalling while too many wait for flush or
    /// level 0 is too deep.
    fn make_room(&self) -> Result<()> {
        let mut stalled: Option<Instant> = None;
        let result = loop {
            let sv = self.current();
            // A paused keyspace (an index being built) cannot shrink its level 0 until
            // the build ends, and the build may wait for these very writers: never stall
            // on it. Nor while a manual compaction holds the background's picks: its own
            // flush waits behind this leader, and it merges level 0 down itself.
            let (paused, manual) = {
                let bg = self.bg.lock();
                (bg.paused.clone(), bg.manual > 0)
            };
            let l0_deep = !manual
                && sv.version.keyspaces.values().any(|k| {
                    !paused.contains(&k.id)
                        && k.levels
                            .first()
                            .is_some_and(|l| l.runs.len() >= self.opts.l0_stall_trigger)
                });
            let full = sv.mem.approximate_bytes() >= self.opts.memtable_budget || self.memtable_expired(&sv);
            if !full && !l0_deep {
                break Ok(());
            }
            if full && sv.imm.len() < self.opts.max_immutable_memtables && !l0_deep {
                break self.freeze_memtable();
            }
            // Stall: wait for the background to catch up.
            stalled.get_or_insert_with(Instant::now);
            let mut bg = self.bg.lock();
            if let Err(e) = bg.check() {
                break Err(e);
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut bg, Duration::from_millis(50));
        };
        if let Some(t) = stalled {
            Counters::add(&self.counters.stalls, 1);
            Counters::add(&self.counters.stall_micros, t.elapsed().as_micros() as u64);
        }
        result
    }

    /// Leader only: makes the active memtable immutable and starts a new WAL.
    fn freeze_memtable(&self) -> Result<()> {
        let sv = self.current();
        if sv.mem.is_empty() {
            return Ok(());
        }
        let number = {
            // Held from before the new log is made: a close that took the log after this
            // leader's checks has recorded it as the last one (as a batch finds it gone
            // in `commit_group`) and may have let another handle open the directory, so
            // nothing may be created in it then.
            let mut wal_guard = self.wal.lock();
            let Some(old) = wal_guard.as_mut() else {
                return Err(Error::Closed);
            };
            let number = self.versions.lock().new_file_number();
            let path = self.dir.join(wal::log_file_name(number));
            let file = self.opts.fs.create(&path)?;
            // The new log's name must be durable before writes acknowledged in it.
            self.opts.fs.sync_dir(&self.dir)?;
            // The old log must be complete on disk before its memtable can be flushed
            // and the log forgotten.
            old.writer.sync().map_err(|e| self.fail(e))?;
            *wal_guard = Some(WalState {
                writer: wal::Writer::new(file),
            });
            number
        };
        let mem = Arc::new(MemTable::new(number, self.opts.clock.now_micros()));
        {
            let mut cur = self.sv.write();
            let mut imm = vec![cur.mem.clone()];
            imm.extend(cur.imm.iter().cloned());
            *cur = Arc::new(SuperVersion::new(mem, imm, cur.version.clone()));
        }
        self.bg_cv.notify_all();
        Ok(())
    }

    /// True when FADE wants the active memtable flushed for its tombstones' sake.
    pub fn memtable_expired(&self, sv: &SuperVersion) -> bool {
        if self.opts.delete_persistence_threshold.is_none() || sv.mem.is_empty() {
            return false;
        }
        let levels = sv
            .version
            .keyspaces
            .values()
            .map(crate::compaction::fade::held_levels)
            .max()
            .unwrap_or(1);
        crate::compaction::fade::memtable_expired(
            &self.opts,
            self.opts.clock.now_micros(),
            sv.mem.created_at(),
            sv.mem.tombstones() > 0,
            levels,
        )
    }

    /// Freezes the memtable from a background thread, taking the writers' leadership
    /// only if no writer is queued (a queued leader would do it itself).
    pub fn freeze_if_idle(&self) -> Result<bool> {
        let mut q = self.queue.lock();
        if !q.waiting.is_empty() {
            return Ok(false);
        }
        let id = q.next_id;
        q.next_id += 1;
        q.waiting.push_back(id);
        drop(q);
        let r = self.freeze_memtable();
        self.queue.lock().waiting.retain(|w| *w != id);
        self.queue_cv.notify_all();
        r.map(|_| true)
    }

    /// Runs `f` at the head of the write queue: no batch commits and no seqno is handed
    /// out while it runs, so `f` may take seqnos itself (an ingest does).
    pub(crate) fn with_writes_held<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let mut q = self.queue.lock();
        let id = q.next_id;
        q.next_id += 1;
        q.waiting.push_back(id);
        while q.waiting.front() != Some(&id) {
            self.queue_cv.wait(&mut q);
        }
        drop(q);
        let r = f();
        self.queue.lock().waiting.retain(|w| *w != id);
        self.queue_cv.notify_all();
        r
    }

    /// Only inside [`with_writes_held`](Self::with_writes_held), with the background
    /// state's lock held (`bg`): logs an empty batch at seqno `seq`, which an ingest
    /// takes without writing through the queue, so the WAL's seqnos stay contiguous for
    /// recovery's gap check; the memtable notes it so its flush records the flushed
    /// point past it. A failed write is recorded through `bg` ([`fail`](Self::fail)
    /// would lock it again).
    pub(crate) fn log_seq_held(&self, seq: SeqNo, bg: &mut BgState) -> Result<()> {
        let mut record = Vec::new();
        WriteBatch::new().encode_record(seq, &mut record);
        let mut wal_guard = self.wal.lock();
        let w = wal_guard.as_mut().ok_or(Error::Closed)?;
        if let Err(e) = w.writer.add_record(&record).and_then(|_| w.writer.flush()) {
            failed(bg, &e);
            return Err(e);
        }
        Counters::add(&self.counters.wal_bytes, (record.len() + crate::wal::HEADER_LEN) as u64);
        drop(wal_guard);
        self.current().mem.note_seq(seq);
        Ok(())
    }

    /// Freezes the memtable; only inside [`with_writes_held`](Self::with_writes_held).
    pub(crate) fn freeze_memtable_held(&self) -> Result<()> {
        self.freeze_memtable()
    }

    /// Freezes the memtable (through the write queue, so it is ordered with writes) and
    /// waits until every frozen memtable is flushed.
    pub fn flush_and_wait(&self) -> Result<()> {
        self.check_writable()?;
        self.check_open()?;
        self.submit(Request::Freeze)?;
        let mut bg = self.bg.lock();
        loop {
            bg.check()?;
            if self.current().imm.is_empty() {
                return Ok(());
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut bg, Duration::from_millis(50));
        }
    }
}

/// Inserts a batch whose first operation has seqno `base`.
pub(crate) fn apply_batch(mem: &MemTable, batch: &WriteBatch, base: SeqNo, counters: &super::stats::Counters) {
    let bytes = insert_batch(mem, batch, base, |_| true);
    mem.note_seq(base + batch.seq_count().saturating_sub(1));
    Counters::add(&counters.user_bytes, bytes);
    Counters::add(&counters.user_ops, batch.len() as u64);
}

/// Point entries of a batch handed to the memtable at once.
const POINT_RUN: usize = 64;

/// Inserts the operations of `batch` (seqnos from `base`) on keyspaces `keep` accepts;
/// returns the user bytes they carried. Point entries go in together, in bounded runs,
/// so their skiplist searches interleave. The batch was validated before (at write, or
/// by `WriteBatch::decode_record` in recovery), so undecodable operations cannot occur
/// here.
pub(crate) fn insert_batch(mem: &MemTable, batch: &WriteBatch, base: SeqNo, keep: impl Fn(u32) -> bool) -> u64 {
    let mut bytes = 0u64;
    let mut points: Vec<PointEntry<'_>> = Vec::with_capacity(batch.len().min(POINT_RUN));
    for (seq, op) in batch.ops_with_seq(base).flatten() {
        if !keep(op.keyspace()) {
            continue;
        }
        let (ks, key, seq, kind, value) = match op {
            BatchOp::Put { keyspace, key, value } => (keyspace, key, seq, ValueKind::Put, value),
            BatchOp::Delete { keyspace, key } => (keyspace, key, seq, ValueKind::Delete, &[][..]),
            // A deferred delete is keyed by the version it deletes.
            BatchOp::DeferredDelete {
                keyspace,
                key,
                seq: target,
            } => (keyspace, key, target, ValueKind::DeferredDelete, &[][..]),
            BatchOp::DeleteRange { keyspace, start, end } => {
                mem.add_range_delete(keyspace, start, end, seq);
                bytes += (start.len() + end.len()) as u64;
                continue;
            }
            BatchOp::DeleteWhere { keyspace, lo, hi } => {
                mem.add_delete_where(keyspace, lo, hi, seq);
                bytes += (lo.len() + hi.len()) as u64;
                continue;
            }
        };
        bytes += (key.len() + value.len()) as u64;
        points.push(PointEntry {
            ks,
            key,
            seq,
            kind,
            value,
        });
        if points.len() == POINT_RUN {
            mem.add_many(&points);
            points.clear();
        }
    }
    mem.add_many(&points);
    bytes
}

/// Records a fatal WAL error in the background state (see [`DbInner::fail`]).
fn failed(bg: &mut BgState, e: &Error) {
    if bg.error.is_none() {
        bg.error = Some(format!("WAL write failed: {e}"));
    }
}

/// Refuses two puts or deletes of one key at one seqno (`share_seq`): they make one
/// internal key, and the memtable keeps only the first (a `Put` sorts before a `Delete`
/// whatever the batch's order), so the batch would not read as written. Empties `keys`.
fn check_distinct_keys(keys: &mut Vec<(u32, &[u8])>) -> Result<()> {
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::InvalidArgument(format!(
            "two operations on one key of keyspace id {} share a seqno (share_seq): {} bytes \
             starting {}",
            w[0].0,
            w[0].1.len(),
            crate::sstable::escape(&w[0].1[..w[0].1.len().min(32)])
        )));
    }
    keys.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::test_gate::Gate;
    use crate::{Db, Error, Options};

    /// A leader past its checks of a closed or failed database, before its work.
    pub(super) static COMMIT_GATE: Gate = Gate::new();

    /// A freeze whose leader passed `check_open` just before a close took the log fails
    /// with `Closed` and leaves no new log: before, it made one in the closed directory
    /// and installed it, and a close reading the memtable's log after that recorded the
    /// synced point under the new log's number (the next open then refused the log).
    #[test]
    fn a_freeze_racing_a_close_fails_and_the_next_open_succeeds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(b"a", b"1").expect("put");
        let inner = db.inner().clone();
        let (at_gate, reached) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        COMMIT_GATE.set(dir.path(), move || {
            at_gate.send(()).expect("send");
            let _ = wait.recv();
        });
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(inner.flush_and_wait());
        });
        let listing = || {
            let mut v: Vec<String> = std::fs::read_dir(dir.path())
                .expect("ls")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        reached.recv().expect("the freeze reached the gate");
        db.close().expect("close");
        let closed = listing();
        go.send(()).expect("go");
        let r = result
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the freeze returns");
        assert!(matches!(r, Err(Error::Closed)), "{r:?}");
        assert_eq!(listing(), closed, "the directory changed after the close");
        let db = Db::open(dir.path(), Options::default()).expect("the next open");
        assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"1"[..]));
    }

    /// A writer meeting a deep level 0 while a manual compaction holds the background's
    /// picks (as `check --compact` does) goes on: stalling, it waited for compactions
    /// nobody would pick, and the manual compaction's own flush queued behind it.
    #[test]
    fn level_zero_does_not_stall_writers_under_a_manual_hold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            l0_compaction_trigger: 2,
            l0_stall_trigger: 3,
            memtable_budget: 64 << 10,
            ..Options::default()
        };
        let db = Db::open(dir.path(), opts).expect("open");
        let hold = crate::db::background::ManualHold::new(db.inner());
        for i in 0..3u32 {
            db.put(&i.to_be_bytes(), b"v").expect("put");
            db.flush().expect("flush");
        }
        let ks = db.default_keyspace();
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Past the memtable budget: the leader must make room.
            let r = (0..200u32).try_for_each(|i| ks.put(&(1000 + i).to_be_bytes(), &[b'x'; 1024]));
            let _ = done.send(r);
        });
        let r = result
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the writer stalled under the hold");
        assert!(r.is_ok(), "{r:?}");
        drop(hold);
        db.compact_range().expect("compact");
        assert_eq!(db.scan(..).expect("scan").count(), 203);
    }
}
