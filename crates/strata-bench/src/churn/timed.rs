//! The timed phase: select threads run the same query on every side back to back
//! (alternating which side goes first), a writer keeps a light REPLACE/DELETE load on
//! every side, and this thread takes one sample per side per second.

use std::ops::Bound;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use strata::table::Table;
use strata::table::value::Value;

use super::live::LiveKeys;
use super::side::{Counters, SELECT_INDEX, Side};
use crate::BenchResult;
use crate::engines::strata::commit;
use crate::micro::workload::Stmt;
use crate::report::StopOnError;
use crate::report::seconds_bar;

/// What the timed phase runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimedSpec {
    /// Length, seconds.
    pub seconds: u64,
    /// Select threads.
    pub select_threads: usize,
    /// Every n-th query of a thread is a range select, the others equality selects.
    pub range_every: u64,
    /// Values of `f2` a range select covers.
    pub range_width: u64,
    /// Limit of an equality select.
    pub eq_limit: u64,
    /// REPLACE/DELETE statements per second per table during the phase.
    pub write_rate: u64,
    /// Key and field universe `1..=rows`.
    pub rows: u64,
    /// Seed of the query and write generators.
    pub seed: u64,
}

/// Latency of the selects of one kind in one second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Selects completed.
    pub count: u64,
    /// Median, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Slowest, microseconds.
    pub max_us: f64,
}

/// One side's sample at the end of one second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ModeSample {
    /// Seconds since the timed phase started (the churn had just ended).
    pub t: f64,
    /// Equality selects (`f2 = x`, limit).
    pub equality: Latency,
    /// Range selects (`f2` in a window).
    pub range: Latency,
    /// Dirty entries skipped per select (both kinds) in this second.
    pub dirty_per_select: f64,
    /// Dirty entries / all entries the selects met in this second: the share of dirty
    /// entries in the index, sampled where the queries looked.
    pub dirty_share: Option<f64>,
    /// Primary lookups per returned row in this second.
    pub lookups_per_row: Option<f64>,
    /// Bytes of the four secondary indexes' SSTables.
    pub secondary_bytes: u64,
    /// Live rows x the clean index size per row measured after the preload.
    pub live_secondary_bytes: f64,
    /// `secondary_bytes / live_secondary_bytes`.
    pub secondary_over_live: f64,
    /// Bytes of all SSTables.
    pub disk_bytes: u64,
    /// Live rows.
    pub live_rows: u64,
    /// Blind writes since the timed phase started not yet matched by deferred deletes
    /// (deferred mode; an upper bound).
    pub pending_purges: u64,
    /// Age of the oldest pending purge, seconds (deferred mode).
    pub oldest_pending_purge_secs: Option<f64>,
    /// Compactions since the timed phase started.
    pub compactions: u64,
    /// Bytes compactions wrote in this second.
    pub compaction_bytes: u64,
    /// Data blocks read from files (block cache misses) per select in this second, by
    /// all the database's readers (selects, the light write load, the purge thread).
    pub file_blocks_per_select: Option<f64>,
}

fn histogram() -> BenchResult<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 1_000_000_000_000, 3)?)
}

fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let us = |ns: u64| ns as f64 / 1e3;
    Latency {
        count: h.len(),
        p50_us: us(h.value_at_quantile(0.5)),
        p99_us: us(h.value_at_quantile(0.99)),
        max_us: us(h.max()),
    }
}

/// Runs an equality select and returns the rows it gave.
fn equality(table: &Table, f2: u64, limit: u64) -> BenchResult<u64> {
    let mut n = 0;
    for r in table
        .select(SELECT_INDEX)
        .eq(vec![Value::U64(f2)])
        .limit(limit)
        .rows()?
    {
        r?;
        n += 1;
    }
    Ok(n)
}

/// Runs a range select over `[lo, lo + width)` and returns the rows it gave.
fn range(table: &Table, lo: u64, width: u64) -> BenchResult<u64> {
    let mut n = 0;
    let rows = table
        .select(SELECT_INDEX)
        .range(Bound::Included(Value::U64(lo)), Bound::Excluded(Value::U64(lo + width)))
        .rows()?;
    for r in rows {
        r?;
        n += 1;
    }
    Ok(n)
}

/// State shared by the phase's threads.
struct Shared {
    /// Per side: equality and range histograms (nanoseconds) of the current second.
    hists: Vec<[Mutex<Histogram<u64>>; 2]>,
    /// Per side: equality and range histograms of the whole phase (sampler only).
    totals: Mutex<Vec<[Histogram<u64>; 2]>>,
    run: StopOnError,
}

impl Shared {
    fn take(&self, side: usize, kind: usize) -> BenchResult<Latency> {
        let mut h = self.hists[side][kind].lock().map_err(|_| "histogram lock poisoned")?;
        let l = latency(&h);
        if let Some(t) = self.totals.lock().map_err(|_| "histogram lock poisoned")?.get_mut(side) {
            t[kind].add(&*h)?;
        }
        h.reset();
        Ok(l)
    }
}

fn select_loop(sides: &[Side], spec: &TimedSpec, shared: &Shared, thread: usize) -> BenchResult<()> {
    let mut rng = StdRng::seed_from_u64(spec.seed ^ 0x005E_1EC7 ^ (thread as u64).rotate_left(32));
    let width = spec.range_width.clamp(1, spec.rows.max(1));
    let mut i = 0u64;
    while !shared.run.stopped() {
        i += 1;
        let is_range = spec.range_every > 0 && i.is_multiple_of(spec.range_every);
        let arg = if is_range {
            rng.gen_range(1..=spec.rows.max(1) - width + 1)
        } else {
            rng.gen_range(1..=spec.rows.max(1))
        };
        for j in 0..sides.len() {
            let s = (i as usize + thread + j) % sides.len();
            let t = Instant::now();
            if is_range {
                range(sides[s].table(), arg, width)?;
            } else {
                equality(sides[s].table(), arg, spec.eq_limit)?;
            }
            let ns = t.elapsed().as_nanos().max(1) as u64;
            let mut h = shared.hists[s][usize::from(is_range)]
                .lock()
                .map_err(|_| "histogram lock poisoned")?;
            h.saturating_record(ns);
        }
    }
    Ok(())
}

fn write_loop(sides: &[Side], spec: &TimedSpec, shared: &Shared, live: &LiveKeys) -> BenchResult<()> {
    if spec.write_rate == 0 {
        return Ok(());
    }
    let tick = Duration::from_millis(100);
    let per_tick = spec.write_rate.div_ceil(10) as usize;
    let mut rng = StdRng::seed_from_u64(spec.seed ^ 0x3817E);
    let rows = spec.rows.max(1);
    let start = Instant::now();
    let mut batch = Vec::with_capacity(per_tick);
    for k in 0u32.. {
        let due = start + tick * k;
        while Instant::now() < due {
            if shared.run.stopped() {
                return Ok(());
            }
            std::thread::sleep(due.saturating_duration_since(Instant::now()).min(tick));
        }
        if shared.run.stopped() {
            return Ok(());
        }
        batch.clear();
        for _ in 0..per_tick {
            let key = rng.gen_range(1..=rows);
            batch.push(if rng.gen_bool(0.5) {
                let mut f = || rng.gen_range(1..=rows);
                Stmt::Replace([key, f(), f(), f(), f()])
            } else {
                Stmt::Delete(key)
            });
        }
        for j in 0..sides.len() {
            commit(sides[(k as usize + j) % sides.len()].table(), &batch)?;
        }
        live.apply(&batch);
    }
    Ok(())
}

fn per_row(n: u64, d: u64) -> Option<f64> {
    (d > 0).then(|| n as f64 / d as f64)
}

fn sample(
    side: &Side,
    prev: &Counters,
    t: f64,
    eq: Latency,
    rg: Latency,
    live: u64,
) -> BenchResult<(ModeSample, Counters)> {
    let (c, shape) = side.read()?;
    let b = &side.base;
    let (reads, hits, dirty) = (c.reads - prev.reads, c.hits - prev.hits, c.dirty - prev.dirty);
    let lookups = c.primary_lookups - prev.primary_lookups;
    let live_bytes = live as f64 * side.clean_bytes_per_row;
    let indexes = 4;
    let s = ModeSample {
        t,
        equality: eq,
        range: rg,
        dirty_per_select: per_row(dirty, reads).unwrap_or(0.0),
        dirty_share: per_row(dirty, hits + dirty),
        lookups_per_row: per_row(lookups, hits),
        secondary_bytes: shape.secondary_bytes,
        live_secondary_bytes: live_bytes,
        secondary_over_live: if live_bytes > 0.0 {
            shape.secondary_bytes as f64 / live_bytes
        } else {
            0.0
        },
        disk_bytes: shape.disk_bytes,
        live_rows: live,
        pending_purges: (c.blind_writes - b.blind_writes)
            .saturating_sub((c.deferred_deletes - b.deferred_deletes) / indexes),
        oldest_pending_purge_secs: shape.oldest_pending_purge_secs,
        compactions: c.compactions - b.compactions,
        compaction_bytes: c.compaction_bytes - prev.compaction_bytes,
        file_blocks_per_select: per_row(c.block_misses - prev.block_misses, reads),
    };
    Ok((s, c))
}

/// What the phase measured for one side.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    /// One sample per second.
    pub samples: Vec<ModeSample>,
    /// Equality and range latency over the whole phase.
    pub overall: [Latency; 2],
}

/// Runs the phase; one result per side. Sets each side's base counters.
pub fn run(sides: &mut [Side], spec: &TimedSpec, live: &LiveKeys) -> BenchResult<Vec<Phase>> {
    for side in sides.iter_mut() {
        side.base = side.read()?.0;
    }
    let sides: &[Side] = sides;
    let shared = Shared {
        hists: (0..sides.len())
            .map(|_| Ok([Mutex::new(histogram()?), Mutex::new(histogram()?)]))
            .collect::<BenchResult<_>>()?,
        totals: Mutex::new(
            (0..sides.len())
                .map(|_| Ok([histogram()?, histogram()?]))
                .collect::<BenchResult<_>>()?,
        ),
        run: StopOnError::default(),
    };
    let mut series: Vec<Vec<ModeSample>> = vec![Vec::new(); sides.len()];
    let mut prev: Vec<Counters> = sides.iter().map(|s| s.base).collect();
    let pb = seconds_bar(spec.seconds, "selects");
    let start = Instant::now();
    std::thread::scope(|s| {
        for th in 0..spec.select_threads.max(1) {
            let shared = &shared;
            s.spawn(move || {
                if let Err(e) = select_loop(sides, spec, shared, th) {
                    shared.run.fail(format!("select thread {th}: {e}"));
                }
            });
        }
        {
            let shared = &shared;
            s.spawn(move || {
                if let Err(e) = write_loop(sides, spec, shared, live) {
                    shared.run.fail(format!("writer: {e}"));
                }
            });
        }
        let r = (|| -> BenchResult<()> {
            for k in 1..=spec.seconds {
                let due = start + Duration::from_secs(k);
                while Instant::now() < due {
                    if shared.run.stopped() {
                        return Ok(());
                    }
                    std::thread::sleep(
                        due.saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(50)),
                    );
                }
                let t = start.elapsed().as_secs_f64();
                let live_now = live.count();
                let mut msg = Vec::new();
                for (i, side) in sides.iter().enumerate() {
                    let (eq, rg) = (shared.take(i, 0)?, shared.take(i, 1)?);
                    let (smp, c) = sample(side, &prev[i], t, eq, rg, live_now)?;
                    prev[i] = c;
                    msg.push(format!("{} p99 {:.0}/{:.0} us", side.mode, eq.p99_us, rg.p99_us));
                    series[i].push(smp);
                }
                pb.set_position(k);
                pb.set_message(msg.join(", "));
            }
            Ok(())
        })();
        if let Err(e) = r {
            shared.run.fail(format!("sampler: {e}"));
        }
        shared.run.stop();
    });
    pb.finish_and_clear();
    if let Some(e) = shared.run.error() {
        return Err(e.into());
    }
    let totals = shared.totals.into_inner().map_err(|_| "histogram lock poisoned")?;
    Ok(series
        .into_iter()
        .zip(totals)
        .map(|(samples, [eq, rg])| Phase {
            samples,
            overall: [latency(&eq), latency(&rg)],
        })
        .collect())
}
