//! Runs one engine: the load (timed on its own), settling, warming the page cache, then
//! `threads` clients issuing the request mix for `seconds`, each request timed into a
//! per-kind latency histogram (nanoseconds).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{SeedableRng, rngs::StdRng};
use serde::Serialize;

use super::dist::mix;
use super::model::now_ms;
use super::workload::{Generator, MIX, OpKind, Shared};
use super::{LinkBench, OpResult, Request};
use crate::BenchResult;
use crate::engines::TableEngine;
use crate::report::{count_bar, rate, seconds_bar};

/// Nodes per load transaction (with their links and counts).
const LOAD_CHUNK: u64 = 500;

/// What to run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunSpec {
    /// Loaded nodes.
    pub nodes: u64,
    /// Length of the timed mix.
    pub seconds: u64,
    /// Client threads.
    pub threads: usize,
    /// Seed of the graph and of every client stream.
    pub seed: u64,
    /// Zipf exponent of id popularity.
    pub zipf: f64,
}

/// The load phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LoadOutput {
    /// Nodes, links and count rows loaded.
    pub nodes: u64,
    pub links: u64,
    pub counts: u64,
    /// Loader threads.
    pub threads: usize,
    /// Time to commit every row.
    pub load_secs: f64,
    /// Time to persist it (flush, compactions / checkpoint).
    pub settle_secs: f64,
    /// Bytes read to warm the page cache, and the time it took.
    pub warm_bytes: u64,
    pub warm_secs: f64,
}

/// The timed mix.
pub struct MixOutput {
    /// Length of the run, from start to the last client's stop.
    pub elapsed_secs: f64,
    /// CPU time of the whole process (clients and the engine's background threads)
    /// during the run: a cost per request that other load on the host barely moves.
    pub cpu_secs: f64,
    /// Requests per kind (index of [`MIX`]).
    pub ops: [u64; 10],
    /// Rows read or written per kind.
    pub rows: [u64; 10],
    /// Nanoseconds spent in requests per kind.
    pub busy_ns: [u64; 10],
    /// `updatenode` requests skipped because the node was deleted.
    pub skipped: u64,
    /// Latency per kind, nanoseconds.
    pub hists: Vec<Histogram<u64>>,
    /// One sample a second.
    pub samples: Vec<Sample>,
}

/// One per-second sample of the timed mix.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sample {
    /// Seconds since the mix started.
    pub t: f64,
    /// Requests and getlinklists per second in the interval ending at `t`.
    pub ops_per_sec: f64,
    pub getlinklist_per_sec: f64,
    /// Dirty index entries skipped per getlinklist, and primary lookups per returned
    /// row, in the interval (Strata).
    pub dirty_per_getlinklist: Option<f64>,
    pub primary_lookups_per_row: Option<f64>,
    /// Flushes and compactions since the mix started (Strata).
    pub flushes: Option<u64>,
    pub compactions: Option<u64>,
}

fn histogram() -> Histogram<u64> {
    // 1 ns .. 100 s at 3 significant digits; `new_with_bounds` only fails on bad bounds.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap_or_else(|_| Histogram::new(3).expect("histogram"))
}

impl MixOutput {
    /// No requests yet.
    pub fn empty() -> MixOutput {
        MixOutput {
            elapsed_secs: 0.0,
            cpu_secs: 0.0,
            ops: [0; 10],
            rows: [0; 10],
            busy_ns: [0; 10],
            skipped: 0,
            hists: (0..MIX.len()).map(|_| histogram()).collect(),
            samples: Vec::new(),
        }
    }

    /// Adds `o`'s counts and histograms (elapsed times add up: runs are sequential).
    pub fn merge(&mut self, o: &MixOutput) {
        self.elapsed_secs += o.elapsed_secs;
        self.cpu_secs += o.cpu_secs;
        self.skipped += o.skipped;
        for k in 0..MIX.len() {
            self.ops[k] += o.ops[k];
            self.rows[k] += o.rows[k];
            self.busy_ns[k] += o.busy_ns[k];
            let _ = self.hists[k].add(&o.hists[k]);
        }
        self.samples.extend_from_slice(&o.samples);
    }

    /// A copy (histograms included).
    pub fn duplicate(&self) -> MixOutput {
        let mut m = MixOutput::empty();
        m.merge(self);
        m
    }
}

/// One engine's run: the driver, the graph and request streams, the spec and the
/// progress label that loading and the request mix share.
pub struct EngineRunner<'a> {
    pub driver: &'a dyn TableEngine<LinkBench>,
    pub shared: &'a Shared,
    pub spec: &'a RunSpec,
    pub label: &'a str,
}

impl EngineRunner<'_> {
    /// Loads the graph through the driver and settles it.
    pub fn load(&self) -> BenchResult<LoadOutput> {
        let (driver, shared, spec, label) = (self.driver, self.shared, self.spec, self.label);
        let g = &shared.graph;
        let threads = driver.load_threads(spec.threads).max(1);
        let chunks = g.nodes().div_ceil(LOAD_CHUNK);
        let next = AtomicU64::new(0);
        let (links, counts) = (AtomicU64::new(0), AtomicU64::new(0));
        let error: Mutex<Option<String>> = Mutex::new(None);
        let pb = count_bar(g.nodes(), &format!("{label} load"), "nodes");
        let load_time = now_ms();
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let fail = |e: String| *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    let mut session = match driver.session() {
                        Ok(s) => s,
                        Err(e) => return fail(e.to_string()),
                    };
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= chunks || error.lock().map(|e| e.is_some()).unwrap_or(true) {
                            return;
                        }
                        let mut rng = StdRng::seed_from_u64(mix(spec.seed ^ mix(c)));
                        let (mut ns, mut ls, mut cs) = (Vec::new(), Vec::new(), Vec::new());
                        for id in c * LOAD_CHUNK + 1..=((c + 1) * LOAD_CHUNK).min(g.nodes()) {
                            let (n, l, k) = g.load_rows(id, load_time, &mut rng);
                            ns.push(n);
                            ls.extend(l);
                            cs.extend(k);
                        }
                        let load = Request::Load {
                            nodes: &ns,
                            links: &ls,
                            counts: &cs,
                        };
                        if let Err(e) = session.run(load) {
                            return fail(format!("load: {e}"));
                        }
                        links.fetch_add(ls.len() as u64, Ordering::Relaxed);
                        counts.fetch_add(cs.len() as u64, Ordering::Relaxed);
                        pb.inc(ns.len() as u64);
                    }
                });
            }
        });
        pb.finish_and_clear();
        if let Some(e) = error.into_inner().ok().flatten() {
            return Err(e.into());
        }
        let load_secs = start.elapsed().as_secs_f64();
        let t = Instant::now();
        driver.settle()?;
        Ok(LoadOutput {
            nodes: g.nodes(),
            links: links.into_inner(),
            counts: counts.into_inner(),
            threads,
            load_secs,
            settle_secs: t.elapsed().as_secs_f64(),
            ..LoadOutput::default()
        })
    }

    /// Runs the request mix for `spec.seconds` with `spec.threads` clients.
    pub fn mix(&self) -> BenchResult<MixOutput> {
        let (driver, shared, spec, label) = (self.driver, self.shared, self.spec, self.label);
        let stop = AtomicBool::new(false);
        let total = AtomicU64::new(0);
        let lists = AtomicU64::new(0);
        let error: Mutex<Option<String>> = Mutex::new(None);
        let outputs: Mutex<Vec<MixOutput>> = Mutex::new(Vec::new());
        let mut sessions = Vec::new();
        for _ in 0..spec.threads {
            sessions.push(driver.session()?);
        }
        let pb = seconds_bar(spec.seconds, &format!("{label} mix"));
        let cpu_start = process_cpu_secs();
        let start = Instant::now();
        let mut samples = Vec::new();
        std::thread::scope(|s| {
            for (i, mut session) in sessions.into_iter().enumerate() {
                let (stop, total, lists, error, outputs) = (&stop, &total, &lists, &error, &outputs);
                s.spawn(move || {
                    let mut out = MixOutput::empty();
                    let mut generator = Generator::new(spec.seed, i);
                    while !stop.load(Ordering::Relaxed) {
                        let kind = generator.kind();
                        let mut op = generator.op(kind, shared);
                        let t0 = Instant::now();
                        let r = shared.execute(&mut op, |o| match o {
                            Some(o) => session.run(Request::Op(o)).map(Some),
                            None => Ok(None),
                        });
                        let ns = t0.elapsed().as_nanos() as u64;
                        let k = op.kind().index();
                        match r {
                            Ok(Some(OpResult { rows })) => out.rows[k] += rows,
                            Ok(None) => out.skipped += 1,
                            Err(e) => {
                                *error.lock().unwrap_or_else(|p| p.into_inner()) =
                                    Some(format!("client {i}: {}: {e}", kind.name()));
                                stop.store(true, Ordering::SeqCst);
                                break;
                            }
                        }
                        out.ops[k] += 1;
                        out.busy_ns[k] += ns;
                        out.hists[k].saturating_record(ns.max(1));
                        total.fetch_add(1, Ordering::Relaxed);
                        if k == OpKind::GetLinkList.index() {
                            lists.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    outputs.lock().unwrap_or_else(|p| p.into_inner()).push(out);
                });
            }
            let mut prev = (0u64, 0u64, 0.0f64, driver.probe());
            for k in 1..=spec.seconds {
                let due = start + Duration::from_secs(k);
                while Instant::now() < due && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(
                        due.saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(100)),
                    );
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (n, l, t) = (
                    total.load(Ordering::Relaxed),
                    lists.load(Ordering::Relaxed),
                    start.elapsed().as_secs_f64(),
                );
                let c = driver.probe();
                let delta = |a: Option<u64>, b: Option<u64>| Some(a? as f64 - b? as f64);
                let per = |x: Option<f64>, y: Option<f64>| match (x, y) {
                    (Some(x), Some(y)) if y > 0.0 => Some(x / y),
                    _ => None,
                };
                let sample = Sample {
                    t,
                    ops_per_sec: (n - prev.0) as f64 / (t - prev.2),
                    getlinklist_per_sec: (l - prev.1) as f64 / (t - prev.2),
                    dirty_per_getlinklist: per(
                        delta(c.dirty_hits_skipped, prev.3.dirty_hits_skipped),
                        Some((l - prev.1) as f64),
                    ),
                    primary_lookups_per_row: per(
                        delta(c.primary_lookups, prev.3.primary_lookups),
                        delta(c.secondary_hits, prev.3.secondary_hits),
                    ),
                    flushes: c.flushes,
                    compactions: c.compactions,
                };
                samples.push(sample);
                prev = (n, l, t, c);
                pb.set_position(k);
                pb.set_message(format!("{} ops/s", rate(sample.ops_per_sec)));
            }
            stop.store(true, Ordering::SeqCst);
        });
        pb.finish_and_clear();
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = process_cpu_secs() - cpu_start;
        if let Some(e) = error.into_inner().ok().flatten() {
            return Err(e.into());
        }
        let mut all = MixOutput::empty();
        for o in outputs.into_inner().unwrap_or_else(|p| p.into_inner()) {
            all.merge(&o);
        }
        all.elapsed_secs = elapsed;
        all.cpu_secs = cpu;
        all.samples = samples;
        Ok(all)
    }
}

/// User + system CPU seconds of this process so far (Linux `/proc/self/stat`, in
/// USER_HZ = 100 ticks per second; 0 where unavailable).
pub fn process_cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14, 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::linkbench::model::Graph;
    use crate::linkbench::workload::{Generator, Shared};

    /// Loads a graph of 300 nodes into `engine` with `threads` loaders, then runs `ops`
    /// requests of the mix from one client (streams seeded with `seed`).
    pub fn load_and_mix(engine: &dyn TableEngine<LinkBench>, threads: usize, seed: u64, ops: usize) {
        let spec = RunSpec {
            nodes: 300,
            seconds: 1,
            threads,
            seed,
            zipf: 1.0,
        };
        let shared = Shared::new(Graph::new(spec.nodes, spec.seed), spec.zipf);
        let runner = EngineRunner {
            driver: engine,
            shared: &shared,
            spec: &spec,
            label: "test",
        };
        runner.load().unwrap();
        let mut s = engine.session().unwrap();
        let mut g = Generator::new(seed, 0);
        for _ in 0..ops {
            let k = g.kind();
            let mut op = g.op(k, &shared);
            shared
                .execute(&mut op, |o| o.map(|o| s.run(Request::Op(o))).transpose())
                .unwrap();
        }
    }
}
