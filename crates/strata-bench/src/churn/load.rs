//! The untimed phases: the micro preload into both tables, then the churn itself
//! (delete 30 % of the rows by primary key, replace another 30 % with new secondary
//! values), the same statements applied to both tables batch by batch.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::live::LiveKeys;
use super::side::Side;
use crate::BenchResult;
use crate::engines::strata::commit;
use crate::micro::harness::PRELOAD_BATCH;
use crate::micro::workload::{Stmt, Workload};
use crate::report::count_bar;

/// Preloads every side with the micro rows (one thread per side), then settles them.
/// Returns the seconds the preload took.
pub fn preload(sides: &mut [Side], workload: &Workload) -> BenchResult<f64> {
    let rows = workload.rows;
    let pb = count_bar(rows * sides.len() as u64, "preload", "rows (all tables)");
    let t = Instant::now();
    let errors: Mutex<Vec<String>> = Mutex::default();
    std::thread::scope(|s| {
        for side in sides.iter() {
            let (pb, errors) = (&pb, &errors);
            s.spawn(move || {
                let mut batch = Vec::with_capacity(PRELOAD_BATCH);
                let mut it = workload.preload().peekable();
                while it.peek().is_some() {
                    batch.clear();
                    batch.extend(it.by_ref().take(PRELOAD_BATCH).map(Stmt::Replace));
                    if let Err(e) = commit(side.table(), &batch) {
                        if let Ok(mut v) = errors.lock() {
                            v.push(format!("{}: preload: {e}", side.mode));
                        }
                        return;
                    }
                    pb.inc(batch.len() as u64);
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    if let Some(e) = errors.lock().map_err(|_| "lock poisoned")?.first() {
        return Err(e.clone().into());
    }
    pb.set_message("settling (flush, compactions)");
    for side in sides.iter_mut() {
        side.settle(rows)?;
    }
    pb.finish_and_clear();
    Ok(secs)
}

/// Shares of the rows the churn deletes and replaces.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ChurnShape {
    /// Share of rows deleted by primary key.
    pub delete_share: f64,
    /// Share of (other) rows replaced with new secondary values.
    pub replace_share: f64,
    /// Statements per transaction.
    pub batch: usize,
    /// Client threads.
    pub threads: usize,
}

/// Deletes and replaces rows on every side, batch by batch (each batch goes to every
/// side, in alternating order), from `shape.threads` threads. Returns the statements
/// applied per side and the seconds it took.
pub fn churn(sides: &[Side], workload: &Workload, shape: ChurnShape, live: &LiveKeys) -> BenchResult<(u64, f64)> {
    let rows = workload.rows;
    let mut rng = StdRng::seed_from_u64(workload.seed ^ 0xC4_u64.rotate_left(40));
    let mut keys: Vec<u64> = (1..=rows).collect();
    keys.shuffle(&mut rng);
    let deletes = ((rows as f64 * shape.delete_share) as usize).min(keys.len());
    let replaces = ((rows as f64 * shape.replace_share) as usize).min(keys.len() - deletes);
    keys.truncate(deletes + replaces);
    // (key, delete?) in random order.
    let mut stmts: Vec<(u64, bool)> = keys.iter().enumerate().map(|(i, k)| (*k, i < deletes)).collect();
    drop(keys);
    stmts.shuffle(&mut rng);
    let batch = shape.batch.max(1);
    let chunks: Vec<&[(u64, bool)]> = stmts.chunks(batch).collect();
    let pb = count_bar(stmts.len() as u64, "churn", "statements (per table)");
    let next = AtomicUsize::new(0);
    let errors: Mutex<Vec<String>> = Mutex::default();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..shape.threads.max(1) {
            let (pb, errors, next, chunks) = (&pb, &errors, &next, &chunks);
            s.spawn(move || {
                let mut out = Vec::with_capacity(batch);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(chunk) = chunks.get(i) else { return };
                    // New secondary values, the same for every side.
                    let mut rng = StdRng::seed_from_u64(workload.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    out.clear();
                    out.extend(chunk.iter().map(|(k, del)| {
                        if *del {
                            Stmt::Delete(*k)
                        } else {
                            let mut f = || rng.gen_range(1..=rows);
                            Stmt::Replace([*k, f(), f(), f(), f()])
                        }
                    }));
                    for j in 0..sides.len() {
                        let side = &sides[(i + j) % sides.len()];
                        if let Err(e) = commit(side.table(), &out) {
                            if let Ok(mut v) = errors.lock() {
                                v.push(format!("{}: churn: {e}", side.mode));
                            }
                            next.store(chunks.len(), Ordering::Relaxed);
                            return;
                        }
                    }
                    live.apply(&out);
                    pb.inc(out.len() as u64);
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    if let Some(e) = errors.lock().map_err(|_| "lock poisoned")?.first() {
        return Err(e.clone().into());
    }
    Ok((stmts.len() as u64, secs))
}
