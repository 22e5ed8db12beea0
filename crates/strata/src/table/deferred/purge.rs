//! Background purge of dirty secondary entries while a deferred table is being read
//! (deferred invariant 6).
//!
//! A blind REPLACE or DELETE whose old row is on disk leaves that row's secondary entries
//! dirty until a primary compaction drops the old version, which can be minutes away;
//! every select meeting one pays a wasted primary lookup meanwhile. While the table's
//! indexes are being read (the same gate as the purge at commit), such a write hands its
//! primary key to the purge thread instead. The thread reads the old version off the
//! write path and writes `DeferredDelete(old secondary key, old seqno)` for every
//! secondary entry of it, changed or not (an unchanged one would otherwise wait for the
//! compaction), so reads meet a dirty entry only for the milliseconds a job waits here.
//! The writer stays blind; the read is the one eager maintenance would have made, done
//! later and without holding anyone up. Once the deletes are committed it records the
//! version in
//! [`PurgedVersions`](super::emit::PurgedVersions), so the compaction that later drops
//! it emits nothing for it. A version dropped before it is recorded gets the
//! compaction's duplicates, which annihilate with the rest.
//!
//! Invariants:
//! * A `DeferredDelete(k, s)` hides `Put(k, s)` from every snapshot at or after `s`, so
//!   it is written only when no live snapshot lies in `[s, base)`, `base` being the
//!   first seqno of the blind write's batch (snapshots in that range still see the old
//!   row). New snapshots are never older than `base`, so the check cannot go stale; a
//!   job held back by a snapshot is retried until the snapshot goes, for a while.
//! * The old version is read at `base - 1`. If a compaction dropped it meanwhile, the
//!   read finds nothing (or an older version that a live snapshot kept, which the
//!   snapshot check then refuses), and the compaction's own deferred deletes cover it.
//! * The deletes go into the memtable, newer than any run holding the puts they name
//!   (deferred invariant 3).
//! * The queue is bounded, in jobs and in rows, and best effort: a job that does not
//!   fit, or whose snapshots outlive [`RETRY_FOR`], is dropped and counted; compaction
//!   purges it as before.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};

use crate::batch::WriteBatch;
use crate::db::DbInner;
use crate::key::SeqNo;
use crate::table::layer::Tables;
use crate::table::state::{TableRuntime, TableState, add};

/// Jobs (one per committed transaction) the queue holds before dropping new ones.
const QUEUE_JOBS: usize = 4096;
/// Rows the queue holds before dropping new jobs (a job may carry a whole transaction).
const QUEUE_ROWS: usize = 64 << 10;
/// Jobs taken per round (one write batch).
const ROUND_JOBS: usize = 256;
/// How long a job may wait for older snapshots to be released.
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(1);
/// How long a round waits for more jobs after its first.
const GATHER: Duration = Duration::from_millis(5);
/// Idle wake-up period (the thread also checks for shutdown then).
const IDLE: Duration = Duration::from_millis(100);

/// A blind write to purge: its primary key.
pub(crate) type PurgeRow = Vec<u8>;

/// The old versions one blind transaction left dirty.
pub(crate) struct PurgeJob {
    /// Table name, and its primary keyspace (to tell a re-created table apart).
    pub table: String,
    pub primary: u32,
    pub state: Arc<TableState>,
    /// First seqno of the blind write's batch: the old versions are visible at `base - 1`.
    pub base: SeqNo,
    pub rows: Vec<PurgeRow>,
}

enum Msg {
    Job(PurgeJob),
    /// Shutdown or a test wants the thread to look now.
    Wake,
}

/// The queue between committing writers and the purge thread.
pub(crate) struct PurgeQueue {
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    /// Rows of the jobs in the channel.
    rows: AtomicUsize,
    /// Jobs taken and not yet purged or given up (in the channel, held back by a
    /// snapshot, or in the round being written).
    unfinished: AtomicUsize,
}

impl PurgeQueue {
    pub fn new() -> Self {
        let (tx, rx) = bounded(QUEUE_JOBS);
        PurgeQueue {
            tx,
            rx,
            rows: AtomicUsize::new(0),
            unfinished: AtomicUsize::new(0),
        }
    }

    /// True when every job handed over has been purged or given up.
    pub fn is_drained(&self) -> bool {
        self.unfinished.load(Ordering::SeqCst) == 0
    }

    /// Waits until [`is_drained`](Self::is_drained), `closed` is set, or `timeout` ends
    /// (a job held back by a snapshot is given up after [`RETRY_FOR`]).
    pub fn wait_drained(&self, closed: &AtomicBool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.is_drained() && !closed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn finished(&self, jobs: usize) {
        self.unfinished.fetch_sub(jobs, Ordering::SeqCst);
    }

    /// Hands a job over without blocking; a full queue drops it (and counts it).
    pub fn submit(&self, job: PurgeJob) {
        let n = job.rows.len();
        if self.rows.fetch_add(n, Ordering::Relaxed) + n > QUEUE_ROWS {
            self.rows.fetch_sub(n, Ordering::Relaxed);
            add(&job.state.counters.purges_dropped, n as u64);
            return;
        }
        self.unfinished.fetch_add(1, Ordering::SeqCst);
        if let Err(TrySendError::Full(Msg::Job(j)) | TrySendError::Disconnected(Msg::Job(j))) =
            self.tx.try_send(Msg::Job(job))
        {
            self.rows.fetch_sub(n, Ordering::Relaxed);
            self.finished(1);
            add(&j.state.counters.purges_dropped, n as u64);
        }
    }

    /// The next message, waiting until `deadline`; a job leaves the row count.
    fn recv_deadline(&self, deadline: Instant) -> std::result::Result<Msg, RecvTimeoutError> {
        let m = self.rx.recv_deadline(deadline)?;
        if let Msg::Job(j) = &m {
            self.rows.fetch_sub(j.rows.len(), Ordering::Relaxed);
        }
        Ok(m)
    }

    /// Makes the thread look at the shutdown flag now.
    pub fn wake(&self) {
        let _ = self.tx.try_send(Msg::Wake);
    }
}

/// The purge thread's loop; returns when the database closes.
pub(crate) fn run(db: &Arc<DbInner>) {
    let Ok(tables) = Tables::of(db) else {
        return;
    };
    let mut waiting: VecDeque<Tried> = VecDeque::new();
    loop {
        if db.closed.load(Ordering::Acquire) {
            return;
        }
        // Jobs held back by a snapshot are retried soon; otherwise sleep until work.
        let timeout = if waiting.is_empty() {
            IDLE
        } else {
            Duration::from_millis(2)
        };
        let mut fresh = Vec::new();
        match tables.purge.recv_deadline(Instant::now() + timeout) {
            Ok(Msg::Job(j)) => fresh.push(j),
            Ok(Msg::Wake) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Gather for a moment: one write per round, and rounds of many jobs, keep the
        // purge from crowding the foreground writers' queue.
        let gather_until = Instant::now() + GATHER;
        while fresh.len() < ROUND_JOBS && !fresh.is_empty() {
            match tables.purge.recv_deadline(gather_until) {
                Ok(Msg::Job(j)) => fresh.push(j),
                Ok(Msg::Wake) => break,
                Err(_) => break,
            }
        }
        if db.closed.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        // A held-back job is read again only once one of its rows may be free: no
        // snapshot left between that row's old version and the write (a cheap check,
        // where reading its rows again is not). Snapshots older than every old version
        // do not hold it back.
        let (mut retry, mut round): (Vec<_>, Vec<_>) = {
            let snaps = db.snapshots.lock();
            waiting.drain(..).partition(|h| snaps.any_in(h.from..h.job.base))
        };
        round.extend(fresh.into_iter().map(|job| Tried {
            job,
            since: now,
            from: 0,
        }));
        if !round.is_empty() {
            let n = round.len();
            let later = purge_round(db, tables, round);
            tables.purge.finished(n - later.len());
            retry.extend(later);
        }
        for h in retry {
            if h.since.elapsed() < RETRY_FOR {
                waiting.push_back(h);
            } else {
                add(&h.job.state.counters.purges_dropped, h.job.rows.len() as u64);
                tables.purge.finished(1);
            }
        }
    }
}

/// A job as the purge thread tries it; once held back by a snapshot, with only the rows
/// that must wait.
struct Tried {
    job: PurgeJob,
    /// When it was first tried.
    since: Instant,
    /// Held back: the newest old version among its rows, which is free once no
    /// snapshot is left in `[from, base)`.
    from: SeqNo,
}

/// Purges what it can of `round` in one write; returns the jobs that must wait for a
/// snapshot.
fn purge_round(db: &Arc<DbInner>, tables: &Tables, round: Vec<Tried>) -> Vec<Tried> {
    // Shared like a table statement: index drops wait until the deletes are written.
    let _ddl = tables.ddl.read();
    let catalog = tables.catalog();
    let mut batch = WriteBatch::new();
    let mut done: Vec<(Arc<TableState>, u64)> = Vec::new();
    let mut cleaned: Vec<Cleaned> = Vec::new();
    let mut later = Vec::new();
    for Tried { mut job, since, .. } in round {
        let rt = match catalog.tables.get(&job.table) {
            Some(rt) if rt.layout.primary == job.primary => rt,
            // Dropped (or dropped and created again): nothing of it to purge.
            _ => continue,
        };
        let (purged, retry, from) = purge_job(db, rt, &job, &mut batch, &mut cleaned);
        done.push((job.state.clone(), purged));
        if !retry.is_empty() {
            job.rows = retry;
            later.push(Tried { job, since, from });
        }
    }
    if batch.is_empty() {
        return later;
    }
    match db.write(batch) {
        Ok(_) => {
            // Recorded before counted: whoever waits for the count finds them recorded.
            for (ks, pk, seq) in cleaned {
                tables.purged.record(ks, &pk, seq);
            }
            for (state, n) in done {
                add(&state.counters.background_purges, n);
            }
        }
        // Closing, or the database failed: the purge is best effort, compaction remains.
        Err(_) => {
            for (state, n) in done {
                add(&state.counters.purges_dropped, n);
            }
        }
    }
    later
}

/// A version whose every secondary entry has a deferred delete in the round's batch:
/// primary keyspace, primary key, seqno.
type Cleaned = (u32, Vec<u8>, SeqNo);

/// Adds the deferred deletes of one job's old versions to `batch`, and to `cleaned` the
/// versions whose every secondary entry got one; returns how many versions it purged,
/// the rows that must wait for a snapshot, and the newest old version among those. A
/// row whose old version cannot be read or decoded is dropped (and counted); the
/// foreground read of that key reports the error, and compaction purges what it can.
fn purge_job(
    db: &DbInner,
    rt: &TableRuntime,
    job: &PurgeJob,
    batch: &mut WriteBatch,
    cleaned: &mut Vec<Cleaned>,
) -> (u64, Vec<PurgeRow>, SeqNo) {
    let layout = &rt.layout;
    // An index being built takes no purges, so its entries stay the compaction's.
    let whole = layout.indexes.iter().all(|i| !i.building);
    let (mut purged, mut dropped) = (0, 0);
    let mut retry = Vec::new();
    let mut from = 0;
    for pk in &job.rows {
        let (old_seq, bytes) = match db.get_versioned(layout.primary, pk, job.base.saturating_sub(1)) {
            Ok(Some(old)) => old,
            Ok(None) => continue, // absent before the write: nothing was left dirty
            Err(_) => {
                dropped += 1;
                continue;
            }
        };
        if db.snapshots.lock().any_in(old_seq..job.base) {
            retry.push(pk.clone());
            from = from.max(old_seq);
            continue;
        }
        let Ok(old) = layout.decode(&bytes) else {
            dropped += 1;
            continue;
        };
        for ix in layout.indexes.iter().filter(|i| !i.building) {
            let old_key = layout.secondary_key(ix, &old, pk);
            batch.deferred_delete(&ix.keyspace, &old_key, old_seq);
        }
        if whole {
            cleaned.push((layout.primary, pk.clone(), old_seq));
        }
        purged += 1;
    }
    add(&job.state.counters.purges_dropped, dropped);
    (purged, retry, from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::state::get;

    fn job(state: &Arc<TableState>, rows: usize) -> PurgeJob {
        PurgeJob {
            table: "t".into(),
            primary: 1,
            state: state.clone(),
            base: 10,
            rows: vec![Vec::new(); rows],
        }
    }

    #[test]
    fn the_queue_bounds_rows_and_frees_them_as_jobs_leave() {
        let q = PurgeQueue::new();
        let state = Arc::new(TableState::new());
        q.submit(job(&state, QUEUE_ROWS));
        q.submit(job(&state, 1));
        assert_eq!(
            get(&state.counters.purges_dropped),
            1,
            "a job past the row bound is dropped"
        );
        let far = Instant::now() + Duration::from_secs(5);
        assert!(matches!(q.recv_deadline(far), Ok(Msg::Job(j)) if j.rows.len() == QUEUE_ROWS));
        q.submit(job(&state, 1));
        assert_eq!(
            get(&state.counters.purges_dropped),
            1,
            "room again once the big job left"
        );
        assert!(matches!(q.recv_deadline(far), Ok(Msg::Job(j)) if j.rows.len() == 1));
        assert!(q.recv_deadline(Instant::now()).is_err());
    }
}
