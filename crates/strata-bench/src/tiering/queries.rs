//! The query experiments on one loaded tree per configuration: point queries, range
//! scans, deletes and a mixed workload (the seed's Figures 13-16), plus measured read
//! amplification.

use std::path::Path;
use std::time::Instant;

use strata::{Db, WriteBatch};

use super::{Config, Shared};
use crate::BenchResult;
use crate::kv::{Rng, Values, make_key};

/// Sizes of the query experiments.
#[derive(Debug, Clone)]
pub struct QuerySettings {
    /// Distinct keys loaded (key numbers 0, 2, 4, ...: odd numbers are known misses).
    pub keys: u64,
    /// Entries per range scan.
    pub scan_len: u64,
    /// Lookups behind the per-lookup averages.
    pub sample_lookups: u64,
}

/// A timed batch of operations.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Timed {
    /// What ran, e.g. `get x10`.
    pub what: String,
    pub ops: u64,
    pub millis: f64,
}

/// Results for one configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryResult {
    pub config: Config,
    pub keys: u64,
    pub load_seconds: f64,
    pub load_write_amp: f64,
    pub space_amp: f64,
    pub runs: usize,
    pub levels: usize,
    pub timed: Vec<Timed>,
    /// Mean microseconds per point query of an existing key.
    pub micros_per_get: f64,
    /// Data blocks looked up per point query of an existing key.
    pub blocks_per_get_hit: f64,
    /// Data blocks looked up per point query of a missing key (bloom filters at work).
    pub blocks_per_get_miss: f64,
    /// Data blocks looked up per range scan of `scan_len` entries.
    pub blocks_per_scan: f64,
}

fn blocks(db: &Db) -> u64 {
    let s = db.stats();
    s.block_cache_hits + s.block_cache_misses
}

fn warm(dir: &Path) -> BenchResult<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_file() {
            // A file removed by a compaction meanwhile is skipped.
            let _ = std::fs::read(e.path());
        }
    }
    Ok(())
}

/// Loads a tree for `c` and runs the query experiments on it.
pub fn run(base: &Path, c: &Config, s: &Shared, q: &QuerySettings) -> BenchResult<QueryResult> {
    let dir = base.join(format!("queries-{}", c.name));
    let db = super::open(&dir, c, s)?;
    let ks = db.default_keyspace();
    let values = Values::new(s.value_size);
    // Distinct keys in random order: a Fisher-Yates shuffle of 0..keys.
    let mut rng = Rng::for_thread(1, 0, 0);
    let mut order: Vec<u64> = (0..q.keys).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let pb = crate::report::count_bar(q.keys, &format!("load {}", c.name), "keys");
    let mut key = [0u8; 16];
    let start = Instant::now();
    for chunk in order.chunks(s.batch) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            make_key(2 * i, &mut key);
            b.put(&ks, &key, values.get(i));
        }
        db.write(b)?;
        pb.inc(chunk.len() as u64);
    }
    db.flush()?;
    db.wait_for_background()?;
    pb.finish_and_clear();
    let load_seconds = start.elapsed().as_secs_f64();
    let st = db.stats();
    let live = q.keys * (16 + s.value_size as u64);
    let (load_write_amp, space_amp) = (st.write_amplification, st.total_bytes() as f64 / live.max(1) as f64);
    let (runs, levels) = (super::runs(&db), super::levels(&db));
    warm(&dir)?;

    let mut rng = Rng::for_thread(1, 1, 0);
    let mut timed = Vec::new();
    let mut get_n = |n: u64, rng: &mut Rng| -> BenchResult<f64> {
        let t = Instant::now();
        for _ in 0..n {
            make_key(2 * rng.below(q.keys), &mut key);
            if ks.get(&key)?.is_none() {
                return Err("a loaded key was not found".into());
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    for n in [1u64, 10, 50, 100] {
        let millis = get_n(n, &mut rng)?;
        timed.push(Timed {
            what: format!("get x{n}"),
            ops: n,
            millis,
        });
    }
    let b0 = blocks(&db);
    let millis = get_n(q.sample_lookups, &mut rng)?;
    let micros_per_get = millis * 1e3 / q.sample_lookups.max(1) as f64;
    let blocks_per_get_hit = (blocks(&db) - b0) as f64 / q.sample_lookups.max(1) as f64;
    let b0 = blocks(&db);
    for _ in 0..q.sample_lookups {
        make_key(2 * rng.below(q.keys) + 1, &mut key);
        if ks.get(&key)?.is_some() {
            return Err("a key never written was found".into());
        }
    }
    let blocks_per_get_miss = (blocks(&db) - b0) as f64 / q.sample_lookups.max(1) as f64;

    let scan = |rng: &mut Rng| -> BenchResult<u64> {
        let mut lo = [0u8; 16];
        make_key(2 * rng.below(q.keys), &mut lo);
        let mut n = 0;
        for e in ks.scan(&lo[..]..)?.take(q.scan_len as usize) {
            e?;
            n += 1;
        }
        Ok(n)
    };
    let mut scan_blocks = 0u64;
    let mut scans = 0u64;
    for n in [1u64, 10, 50] {
        let b0 = blocks(&db);
        let t = Instant::now();
        for _ in 0..n {
            scan(&mut rng)?;
        }
        timed.push(Timed {
            what: format!("scan x{n} ({} entries)", q.scan_len),
            ops: n,
            millis: t.elapsed().as_secs_f64() * 1e3,
        });
        scan_blocks += blocks(&db) - b0;
        scans += n;
    }

    let t = Instant::now();
    for _ in 0..100 {
        make_key(2 * rng.below(q.keys), &mut key);
        ks.delete(&key)?;
    }
    timed.push(Timed {
        what: "delete x100".into(),
        ops: 100,
        millis: t.elapsed().as_secs_f64() * 1e3,
    });

    // Mixed: 40 % point queries, 30 % puts, 20 % deletes, 10 % range scans.
    let t = Instant::now();
    for i in 0..100u64 {
        let k = 2 * rng.below(q.keys);
        make_key(k, &mut key);
        match rng.below(10) {
            0..=3 => {
                ks.get(&key)?;
            }
            4..=6 => ks.put(&key, values.get(k + i))?,
            7..=8 => ks.delete(&key)?,
            _ => {
                scan(&mut rng)?;
            }
        }
    }
    timed.push(Timed {
        what: "mixed x100".into(),
        ops: 100,
        millis: t.elapsed().as_secs_f64() * 1e3,
    });
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(QueryResult {
        config: c.clone(),
        keys: q.keys,
        load_seconds,
        load_write_amp,
        space_amp,
        runs,
        levels,
        timed,
        micros_per_get,
        blocks_per_get_hit,
        blocks_per_get_miss,
        blocks_per_scan: scan_blocks as f64 / scans.max(1) as f64,
    })
}
