//! Drives an in-process [`TableEngine`]: untimed preload in big batches, then `threads`
//! client threads committing generated batches for `seconds` while this thread samples
//! the committed-statement counter once a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::watchdog::beat;
use super::workload::{Stmt, Workload};
use super::{Micro, Probe};
use crate::BenchResult;
use crate::engines::TableEngine;
use crate::report::StopOnError;
use crate::report::{count_bar, rate, seconds_bar};

/// Rows per preload transaction.
pub const PRELOAD_BATCH: usize = 10_000;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    /// The generated workload.
    pub workload: Workload,
    /// Client threads.
    pub threads: usize,
    /// Length of the timed run.
    pub seconds: u64,
}

/// One per-second sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t: f64,
    /// Statements committed per second during the interval ending at `t`.
    pub rate: f64,
    /// Statements committed since the run started.
    pub total: u64,
    /// Engine counters at `t`.
    #[serde(flatten)]
    pub probe: Probe,
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunOutput {
    /// Preload time (rows committed), seconds.
    pub preload_secs: f64,
    /// Time to persist the preload (flush, compactions, checkpoint), seconds.
    pub settle_secs: f64,
    /// Per-second samples.
    pub samples: Vec<Sample>,
    /// Statements committed in the timed run.
    pub statements: u64,
    /// Batches committed in the timed run.
    pub batches: u64,
    /// Length of the timed run, including the wait for the last batches, seconds.
    pub elapsed_secs: f64,
}

/// Preloads `engine` and runs the timed workload on it; `label` names the progress bars.
pub fn drive(engine: &dyn TableEngine<Micro>, spec: &RunSpec, label: &str) -> BenchResult<RunOutput> {
    let mut out = RunOutput::default();
    preload(engine, spec, label, &mut out)?;
    timed_run(engine, spec, label, &mut out)?;
    Ok(out)
}

fn preload(engine: &dyn TableEngine<Micro>, spec: &RunSpec, label: &str, out: &mut RunOutput) -> BenchResult<()> {
    let pb = count_bar(spec.workload.rows, label, "rows preloaded");
    let t = Instant::now();
    let mut session = engine.session()?;
    let mut batch = Vec::with_capacity(PRELOAD_BATCH);
    let mut rows = spec.workload.preload().peekable();
    while rows.peek().is_some() {
        batch.clear();
        batch.extend(rows.by_ref().take(PRELOAD_BATCH).map(Stmt::Replace));
        session.run(&batch)?;
        pb.inc(batch.len() as u64);
        beat();
    }
    drop(session);
    out.preload_secs = t.elapsed().as_secs_f64();
    pb.set_message("settling (flush, compaction, checkpoint)");
    let t = Instant::now();
    engine.settle()?;
    beat();
    out.settle_secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(())
}

/// State shared by the clients and the sampler.
struct Shared {
    statements: AtomicU64,
    batches: AtomicU64,
    run: StopOnError,
}

fn timed_run(engine: &dyn TableEngine<Micro>, spec: &RunSpec, label: &str, out: &mut RunOutput) -> BenchResult<()> {
    let shared = Shared {
        statements: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        run: StopOnError::default(),
    };
    let sessions = (0..spec.threads)
        .map(|_| engine.session())
        .collect::<BenchResult<Vec<_>>>()?;
    let pb = seconds_bar(spec.seconds, label);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (i, mut session) in sessions.into_iter().enumerate() {
            let shared = &shared;
            let mut generator = spec.workload.client(i);
            s.spawn(move || {
                let mut batch = Vec::new();
                while !shared.run.stopped() {
                    generator.next_batch(&mut batch);
                    if let Err(e) = session.run(&batch) {
                        shared.run.fail(format!("client {i}: {e}"));
                        return;
                    }
                    shared.statements.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    shared.batches.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        out.samples = sample(engine, spec, &shared, start, &pb);
        shared.run.stop();
    });
    beat();
    out.elapsed_secs = start.elapsed().as_secs_f64();
    out.statements = shared.statements.load(Ordering::SeqCst);
    out.batches = shared.batches.load(Ordering::SeqCst);
    pb.finish_and_clear();
    match shared.run.error() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// One sample per second until `spec.seconds` have passed or a client failed.
fn sample(
    engine: &dyn TableEngine<Micro>,
    spec: &RunSpec,
    shared: &Shared,
    start: Instant,
    pb: &indicatif::ProgressBar,
) -> Vec<Sample> {
    let mut samples = Vec::with_capacity(spec.seconds as usize);
    let (mut prev_total, mut prev_t) = (0u64, 0.0f64);
    for k in 1..=spec.seconds {
        let due = start + Duration::from_secs(k);
        while Instant::now() < due {
            if shared.run.stopped() {
                return samples;
            }
            std::thread::sleep(
                due.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100)),
            );
        }
        let t = start.elapsed().as_secs_f64();
        let total = shared.statements.load(Ordering::Relaxed);
        let r = (total - prev_total) as f64 / (t - prev_t);
        samples.push(Sample {
            t,
            rate: r,
            total,
            probe: engine.probe(),
        });
        (prev_total, prev_t) = (total, t);
        beat();
        pb.set_position(k);
        pb.set_message(format!("{} statements/s", rate(r)));
    }
    samples
}
