//! Strata's side of the multivalue benchmark: a partitioned multimap loaded from the
//! stream by several threads, then GETs that stream every value of a random key.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use strata::Options;
use strata::multimap::MultiMap;
use strata::partition::Partitions;

use super::stream::{HOT_AUTHOR, Plan};
use crate::BenchResult;
use crate::report::{StopOnError, count_bar, seconds_bar};

/// Bins of the GET latencies by the key's value count: 1-9, 10-99, ..., 100,000+.
pub const BINS: usize = 6;

/// The bin of a key with `n` values.
pub fn bin_of(n: u64) -> usize {
    let mut b = 0;
    let mut x = n.max(1);
    while x >= 10 && b + 1 < BINS {
        x /= 10;
        b += 1;
    }
    b
}

/// The label of bin `b`.
pub fn bin_label(b: usize) -> String {
    let lo = 10u64.pow(b as u32);
    if b + 1 == BINS {
        format!("{}+", crate::report::thousands(lo))
    } else {
        format!(
            "{}-{}",
            crate::report::thousands(lo),
            crate::report::thousands(lo * 10 - 1)
        )
    }
}

/// One load run.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    pub threads: usize,
    pub partitions: usize,
    pub puts: u64,
    /// Until the last put returned.
    pub load_secs: f64,
    /// Until the memtables were flushed and no compaction was left.
    pub total_secs: f64,
    /// Live SSTable bytes when every compaction was done.
    pub store_bytes: u64,
    /// Until a full compaction after that was done: one sorted run per partition, the
    /// state the peer's final delta merge leaves (its store figure is of that state).
    pub merged_secs: f64,
    /// Live SSTable bytes after the full compaction.
    pub compacted_bytes: u64,
    /// Bytes of bloom filters in `store_bytes` and in `compacted_bytes`.
    pub store_filter_bytes: u64,
    pub compacted_filter_bytes: u64,
    /// (seconds, live SSTable bytes) sampled during the load.
    pub bytes_over_time: Vec<(f64, u64)>,
}

/// Puts, seconds until the last put, and (seconds, bytes) samples.
type LoadOutcome = (u64, f64, Vec<(f64, u64)>);
/// One GET thread's histograms per bin, keys and values read.
type ThreadGets = (Vec<Histogram<u64>>, u64, u64);

/// Streams every value of `key` through `Values::for_each_value` (each value borrowed,
/// no allocation per value), touching each value's bytes; returns the count.
fn stream(mm: &MultiMap, key: &[u8]) -> BenchResult<u64> {
    let (mut n, mut bytes) = (0u64, 0usize);
    mm.get(key)?.for_each_value(|v| {
        bytes += v.len() + usize::from(v.first().copied().unwrap_or(0));
        n += 1;
    })?;
    std::hint::black_box(bytes);
    Ok(n)
}

/// The engine options of the benchmark.
pub fn options() -> Options {
    Options {
        compression: strata::options::Compression::Lz4,
        ..Options::default()
    }
}

/// Loads the author index (author -> comment id) of `plan` into `dir`.
pub fn load(plan: &Plan, dir: &Path, threads: usize, partitions: usize) -> BenchResult<(LoadResult, Partitions)> {
    let parts = Partitions::open(dir, partitions, options())?;
    let mm = MultiMap::partitioned(parts.keyspace("by_author")?);
    mm.filter_by_key()?;
    let pb = count_bar(plan.len(), &format!("strata {threads}t/{partitions}p"), "puts");
    let start = Instant::now();
    let done = AtomicBool::new(false);
    let (n, load_secs, samples) = std::thread::scope(|s| -> BenchResult<LoadOutcome> {
        let sampler = s.spawn(|| {
            let mut v = Vec::new();
            while !done.load(Ordering::Relaxed) {
                v.push((start.elapsed().as_secs_f64(), parts.total_bytes()));
                std::thread::sleep(Duration::from_millis(250));
            }
            v
        });
        let r = mm.load_with_progress(plan.records().map(|r| (r.author, r.id)), threads, |n| {
            pb.set_position(n)
        });
        let load_secs = start.elapsed().as_secs_f64();
        let r = r.and_then(|n| {
            parts.flush()?;
            parts.wait_for_background()?;
            Ok(n)
        });
        done.store(true, Ordering::Relaxed);
        let samples = sampler.join().map_err(|_| "the size sampler panicked")?;
        Ok((r?, load_secs, samples))
    })?;
    let total_secs = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let store_bytes = parts.total_bytes();
    let store_filter_bytes = filter_bytes(&parts)?;
    let mut bytes_over_time = samples;
    bytes_over_time.push((total_secs, store_bytes));
    parts.compact_range()?;
    let merged_secs = start.elapsed().as_secs_f64();
    let compacted_bytes = parts.total_bytes();
    let compacted_filter_bytes = filter_bytes(&parts)?;
    drop(mm);
    Ok((
        LoadResult {
            threads,
            partitions,
            puts: n,
            load_secs,
            total_secs,
            merged_secs,
            store_bytes,
            store_filter_bytes,
            compacted_bytes,
            compacted_filter_bytes,
            bytes_over_time,
        },
        parts,
    ))
}

/// Bytes of the bloom filters in the live SSTables of `parts` (read from each file's
/// properties). The filters hold every (key, value) entry, for `contains`; a key's
/// stream does not use them, and the peer keeps none, so the report also gives the
/// store without them.
pub fn filter_bytes(parts: &Partitions) -> BenchResult<u64> {
    let fs = strata::fs::RealFs;
    let mut total = 0;
    for db in parts.dbs() {
        for f in db.live_files() {
            let path = db.path().join(strata::sstable::sst_file_name(f.number));
            let file = strata::fs::FileSystem::open(&fs, &path)?;
            total += strata::sstable::SstReader::open(file, f.number, None)?
                .properties()
                .filter_size;
        }
    }
    Ok(total)
}

/// The GET phase's results.
#[derive(Debug, Clone, Serialize)]
pub struct GetResult {
    pub threads: usize,
    pub secs: f64,
    pub keys: u64,
    pub values: u64,
    /// Per bin: (count, p50, p90, p99, max) in microseconds.
    pub bins: Vec<Option<BinStats>>,
    /// (latency us, fraction) points per bin, for the CDF.
    pub cdf: Vec<Vec<(f64, f64)>>,
    /// Times of streaming the hot key, in seconds, and its value count.
    pub hot_secs: Vec<f64>,
    pub hot_values: u64,
}

/// Latency of one bin, microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BinStats {
    pub n: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

fn hist() -> BenchResult<Histogram<u64>> {
    Ok(Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3)?)
}

/// GETs keys drawn uniformly from `keys` for `secs` seconds with `threads` threads,
/// streaming every value; then streams the hot key `hot_reps` times.
pub fn get(mm: &MultiMap, keys: &[String], threads: usize, secs: u64, hot_reps: usize) -> BenchResult<GetResult> {
    let stop = Arc::new(StopOnError::default());
    let pb = seconds_bar(secs, &format!("strata get {threads}t"));
    let start = Instant::now();
    let per_thread = std::thread::scope(|s| -> BenchResult<Vec<ThreadGets>> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = stop.clone();
                s.spawn(move || -> BenchResult<ThreadGets> {
                    let mut r = rand::rngs::StdRng::seed_from_u64(0x9e7 + t as u64);
                    let mut h = (0..BINS).map(|_| hist()).collect::<BenchResult<Vec<_>>>()?;
                    let (mut nk, mut nv) = (0u64, 0u64);
                    while !stop.stopped() {
                        let k = &keys[r.gen_range(0..keys.len())];
                        let t0 = Instant::now();
                        let n = stream(mm, k.as_bytes())?;
                        let ns = t0.elapsed().as_nanos() as u64;
                        h[bin_of(n)].record(ns.max(1))?;
                        nk += 1;
                        nv += n;
                    }
                    Ok((h, nk, nv))
                })
            })
            .collect();
        for i in 0..secs {
            std::thread::sleep(Duration::from_secs(1));
            pb.set_position(i + 1);
        }
        stop.stop();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a GET thread panicked")?)
            .collect()
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let mut h = (0..BINS).map(|_| hist()).collect::<BenchResult<Vec<_>>>()?;
    let (mut keys_done, mut values) = (0, 0);
    for (th, nk, nv) in per_thread {
        for (a, b) in h.iter_mut().zip(&th) {
            a.add(b)?;
        }
        keys_done += nk;
        values += nv;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let bins = h
        .iter()
        .map(|x| {
            (!x.is_empty()).then(|| BinStats {
                n: x.len(),
                p50: us(x.value_at_quantile(0.5)),
                p90: us(x.value_at_quantile(0.9)),
                p99: us(x.value_at_quantile(0.99)),
                max: us(x.max()),
            })
        })
        .collect();
    let cdf = h
        .iter()
        .map(|x| {
            if x.is_empty() {
                return Vec::new();
            }
            (0..=100)
                .map(|i| {
                    let q = f64::from(i) / 100.0;
                    (us(x.value_at_quantile(q)), q)
                })
                .collect()
        })
        .collect();
    let mut hot_secs = Vec::with_capacity(hot_reps);
    let mut hot_values = 0;
    for _ in 0..hot_reps {
        let t0 = Instant::now();
        let n = stream(mm, HOT_AUTHOR.as_bytes())?;
        hot_secs.push(t0.elapsed().as_secs_f64());
        hot_values = n;
    }
    Ok(GetResult {
        threads,
        secs: elapsed,
        keys: keys_done,
        values,
        bins,
        cdf,
        hot_secs,
        hot_values,
    })
}
