//! One run: a fresh database, a writer following the planned schedule, a reader doing
//! point gets, and this thread auditing tombstones and sampling space amplification,
//! through the ingest and then for a drain period in which only the reader runs.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use strata::{Db, Options, WriteBatch};

use super::audit::{Audit, AuditResult};
use super::workload::{Op, Ops, Shape, Values, key};
use crate::BenchResult;
use crate::report::StopOnError;
use crate::report::seconds_bar;

/// Engine settings of a run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Engine {
    /// Memtable bytes.
    pub memtable: usize,
    /// Size ratio T.
    pub size_ratio: f64,
    /// Target SSTable size.
    pub file_size: u64,
    /// Page size.
    pub block_size: usize,
    /// Tombstone density trigger (besides FADE).
    pub density_trigger: Option<f64>,
}

/// What one run is.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Name in tables and plots.
    pub name: String,
    /// FADE threshold, seconds (`None` = no FADE).
    pub threshold_secs: Option<f64>,
    /// Thresholds the audit evaluates (the run's own, or all of them without FADE).
    pub audit_secs: Vec<f64>,
    /// Seconds to keep observing after the ingest.
    pub drain_secs: f64,
    /// Milliseconds between tombstone checks.
    pub check_ms: u64,
}

/// One sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t: f64,
    /// Bytes of all SSTables.
    pub disk_bytes: u64,
    /// Live entries x entry size.
    pub live_bytes: u64,
    /// `disk_bytes / live_bytes`.
    pub space_amp: f64,
    /// Tombstones in SSTables.
    pub tombstones_on_disk: u64,
    /// Point gets per second in the interval.
    pub gets_per_sec: f64,
    /// Bytes written by compactions so far.
    pub compaction_bytes: u64,
    /// True while the writer still runs.
    pub ingesting: bool,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Name.
    pub name: String,
    /// FADE threshold, seconds.
    pub threshold_secs: Option<f64>,
    /// Seconds the ingest took (planned: the shape's).
    pub ingest_secs: f64,
    /// Deletes issued.
    pub deletes: u64,
    /// Inserts issued.
    pub inserts: u64,
    /// Tombstone audits, one per evaluated threshold.
    pub audits: Vec<AuditResult>,
    /// Mean space amplification over the ingest's samples.
    pub space_amp_mean_ingest: f64,
    /// Space amplification at the end of the ingest.
    pub space_amp_end_ingest: f64,
    /// Space amplification at the end of the drain.
    pub space_amp_end: f64,
    /// Mean point gets per second during the ingest.
    pub gets_per_sec_ingest: f64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Key and value bytes written by the workload.
    pub user_bytes: u64,
    /// (flush + compaction bytes written) / user bytes.
    pub write_amplification: f64,
    /// Compactions (trivial moves included).
    pub compactions: u64,
    /// Tombstones on disk at the end.
    pub tombstones_at_end: u64,
    /// Per-second samples.
    pub samples: Vec<Sample>,
}

struct Shared {
    inserted: AtomicU64,
    live: AtomicU64,
    gets: AtomicU64,
    writing: AtomicBool,
    run: StopOnError,
    delete_times: Mutex<Vec<u64>>,
}

/// Engine options of a run.
pub fn options(e: &Engine, threshold_secs: Option<f64>) -> Options {
    Options {
        memtable_budget: e.memtable,
        size_ratio: e.size_ratio,
        target_file_size: e.file_size,
        block_size: e.block_size,
        delete_persistence_threshold: threshold_secs.map(Duration::from_secs_f64),
        tombstone_density_trigger: e.density_trigger,
        ..Options::default()
    }
}

/// Most operations per write batch (when the writer is behind its schedule).
const MAX_BATCH: usize = 256;

fn writer(db: &Db, shape: &Shape, shared: &Shared) -> BenchResult<()> {
    let values = Values::new(shape.seed, shape.value_size());
    let clock = db.options().clock.clone();
    let ks = db.default_keyspace();
    let mut ops = Ops::new(*shape).peekable();
    let total = shape.operations().max(1);
    let per_op = shape.seconds / total as f64;
    let start = Instant::now();
    let tick = Duration::from_millis(5);
    let mut done = 0u64;
    let mut times = Vec::new();
    while ops.peek().is_some() {
        if shared.run.stopped() {
            return Ok(());
        }
        let due = ((start.elapsed().as_secs_f64() / per_op) as u64 + 1).max(done + 1);
        let mut batch = WriteBatch::new();
        let mut deletes = 0usize;
        let (mut ins, mut live_delta) = (0u64, 0i64);
        while done < due && batch.len() < MAX_BATCH {
            let Some(op) = ops.next() else { break };
            done += 1;
            match op {
                Op::Insert(i) => {
                    batch.put(&ks, &key(shape.seed, i), values.get(i));
                    ins += 1;
                    live_delta += 1;
                }
                Op::Delete(i) => {
                    batch.delete(&ks, &key(shape.seed, i));
                    deletes += 1;
                    live_delta -= 1;
                }
            }
        }
        if !batch.is_empty() {
            db.write(batch)?;
            // The tombstones exist from the commit on; recorded after it, so never
            // earlier than the engine's own time for them.
            let now = clock.now_micros();
            times.extend(std::iter::repeat_n(now, deletes));
            shared.inserted.fetch_add(ins, Ordering::Relaxed);
            if live_delta >= 0 {
                shared.live.fetch_add(live_delta as u64, Ordering::Relaxed);
            } else {
                shared.live.fetch_sub(live_delta.unsigned_abs(), Ordering::Relaxed);
            }
        }
        // Wait for the next operation's time.
        let next_at = Duration::from_secs_f64(done as f64 * per_op);
        let now = start.elapsed();
        if next_at > now {
            std::thread::sleep((next_at - now).max(tick).min(Duration::from_millis(50)));
        }
    }
    if let Ok(mut t) = shared.delete_times.lock() {
        *t = times;
    }
    Ok(())
}

fn reader(db: &Db, seed: u64, shared: &Shared) -> BenchResult<()> {
    let ks = db.default_keyspace();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x2EAD);
    while !shared.run.stopped() {
        let n = shared.inserted.load(Ordering::Relaxed);
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for _ in 0..64 {
            ks.get(&key(seed, rng.gen_range(0..n)))?;
        }
        shared.gets.fetch_add(64, Ordering::Relaxed);
    }
    Ok(())
}

/// Runs `plan` on a fresh database in `dir`.
pub fn run(dir: &Path, engine: &Engine, shape: &Shape, plan: &Plan) -> BenchResult<RunResult> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let db = Db::open(dir, options(engine, plan.threshold_secs))?;
    let clock = db.options().clock.clone();
    let mut audits: Vec<Audit> = plan.audit_secs.iter().map(|s| Audit::new((s * 1e6) as u64)).collect();
    let shared = Shared {
        inserted: AtomicU64::new(0),
        live: AtomicU64::new(0),
        gets: AtomicU64::new(0),
        writing: AtomicBool::new(true),
        run: StopOnError::default(),
        delete_times: Mutex::new(Vec::new()),
    };
    let planned = (shape.seconds + plan.drain_secs).ceil() as u64;
    let pb = seconds_bar(planned, &plan.name);
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut ingest_secs = 0.0;
    std::thread::scope(|s| {
        let (db, shared) = (&db, &shared);
        let w = s.spawn(move || {
            let r = writer(db, shape, shared);
            shared.writing.store(false, Ordering::SeqCst);
            if let Err(e) = r {
                shared.run.fail(format!("writer: {e}"));
            }
        });
        s.spawn(move || {
            if let Err(e) = reader(db, shape.seed, shared) {
                shared.run.fail(format!("reader: {e}"));
            }
        });
        let check = Duration::from_millis(plan.check_ms.max(10));
        let (mut next_sample, mut prev_gets, mut prev_t) = (Duration::from_secs(1), 0u64, 0.0);
        let mut drain_until: Option<Instant> = None;
        loop {
            std::thread::sleep(check);
            let files = db.live_files();
            let now = clock.now_micros();
            for a in &mut audits {
                a.check(now, &files);
            }
            let writing = shared.writing.load(Ordering::SeqCst);
            if !writing && drain_until.is_none() {
                ingest_secs = start.elapsed().as_secs_f64();
                drain_until = Some(Instant::now() + Duration::from_secs_f64(plan.drain_secs));
            }
            let el = start.elapsed();
            if el >= next_sample {
                next_sample += Duration::from_secs(1);
                let st = db.stats();
                let t = el.as_secs_f64();
                let gets = shared.gets.load(Ordering::Relaxed);
                let live_bytes = shared.live.load(Ordering::Relaxed) * shape.entry_size as u64;
                let disk = st.total_bytes();
                samples.push(Sample {
                    t,
                    disk_bytes: disk,
                    live_bytes,
                    space_amp: if live_bytes > 0 {
                        disk as f64 / live_bytes as f64
                    } else {
                        0.0
                    },
                    tombstones_on_disk: files.iter().map(|f| f.tombstones).sum(),
                    gets_per_sec: (gets - prev_gets) as f64 / (t - prev_t),
                    compaction_bytes: st.compaction_bytes_written,
                    ingesting: writing,
                });
                (prev_gets, prev_t) = (gets, t);
                pb.set_position(el.as_secs().min(planned));
                pb.set_message(format!(
                    "space amp {:.2}, {} tombstones on disk",
                    samples.last().map_or(0.0, |s| s.space_amp),
                    samples.last().map_or(0, |s| s.tombstones_on_disk)
                ));
            }
            if shared.run.stopped() || drain_until.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        shared.run.stop();
        let _ = w.join();
    });
    pb.finish_and_clear();
    if let Some(e) = shared.run.error() {
        return Err(e.into());
    }
    if let Some(e) = db.stats().background_error {
        return Err(format!("{}: background error: {e}", plan.name).into());
    }
    let times = std::mem::take(&mut *shared.delete_times.lock().map_err(|_| "lock poisoned")?);
    let st = db.stats();
    let ingest: Vec<&Sample> = samples.iter().filter(|s| s.ingesting).collect();
    let mean = |f: &dyn Fn(&Sample) -> f64| {
        if ingest.is_empty() {
            0.0
        } else {
            ingest.iter().map(|s| f(s)).sum::<f64>() / ingest.len() as f64
        }
    };
    let result = RunResult {
        name: plan.name.clone(),
        threshold_secs: plan.threshold_secs,
        ingest_secs,
        deletes: times.len() as u64,
        inserts: shared.inserted.load(Ordering::Relaxed),
        audits: audits.iter().map(|a| a.result(&times)).collect(),
        space_amp_mean_ingest: mean(&|s| s.space_amp),
        space_amp_end_ingest: ingest.last().map_or(0.0, |s| s.space_amp),
        space_amp_end: samples.last().map_or(0.0, |s| s.space_amp),
        gets_per_sec_ingest: mean(&|s| s.gets_per_sec),
        compaction_bytes_read: st.compaction_bytes_read,
        compaction_bytes_written: st.compaction_bytes_written,
        flush_bytes: st.flush_bytes_written,
        user_bytes: st.user_bytes_written,
        write_amplification: st.write_amplification,
        compactions: st.compactions,
        tombstones_at_end: db.live_files().iter().map(|f| f.tombstones).sum(),
        samples,
    };
    drop(db);
    let _ = std::fs::remove_dir_all(dir);
    Ok(result)
}
