//! `kv`: db_bench-compatible key-value workloads (fillseq, fillrandom, overwrite,
//! readrandom, seekrandom, deleterandom, readwhilewriting, fillsync) on Strata and, with
//! the `rocksdb` feature, on RocksDB through the same generator in the same run.
//!
//! Layout: [`args`] (flags), [`workload`] (keys, values, random streams), [`report`]
//! (db_bench lines, the comparison table, JSON); the engines, their trait and opening by
//! name are in [`crate::engines`]. This file runs the phases.
//!
//! Per phase: wall time of the operations alone (db_bench's micros/op, ops/sec, MB/s);
//! then, for writing phases, the memtable is flushed and background compaction waited
//! for (timed separately as "settle"), so that write amplification — bytes written by
//! flushes and compactions over key and value bytes written by the phase — counts all
//! the work the phase caused. Space amplification is SSTable bytes over live key and
//! value bytes (the generator tracks which keys are live). Read phases first read every
//! file of the database once (the VM evicts page-cache pages idle for ~30 s), so they
//! measure a warm page cache with the configured block cache in front of it.

mod args;
pub(crate) mod dd;
mod report;
mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub use args::{KvArgs, KvConfig};
use indicatif::ProgressBar;
use report::PhaseResult;
use workload::{LiveKeys, Workload};
pub use workload::{Rng, Values, make_key};

use crate::BenchResult;
use crate::engines::{self, KvEngine, WriteOp};

/// Runs `strata-bench kv`.
pub fn run(a: &KvArgs) -> BenchResult<()> {
    let cfg = a.config()?;
    engines::check_kv_engines(&a.engine)?;
    let workloads = Workload::parse_list(&a.benchmarks, &cfg.sync_threads)?;
    let tmp = match &a.db {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            tempfile::Builder::new().prefix("kv-").tempdir_in(d)?
        }
        None => tempfile::Builder::new().prefix("strata-kv-").tempdir()?,
    };
    let base: PathBuf = match (&a.db, a.use_existing_db) {
        (Some(d), true) => d.clone(),
        _ => tmp.path().to_path_buf(),
    };
    println!(
        "kv: {} keys of {} bytes, values of {} bytes, {} reads, {} threads, batch {}, memtable {}, bloom {} bits/key, \
         block {}, block cache {}, size ratio {}, WAL on{}, no compression; engines {}; {} round(s)",
        report::thousands(cfg.num),
        cfg.key_size,
        cfg.value_size,
        report::thousands(cfg.reads),
        cfg.threads,
        cfg.batch_size,
        report::bytes(cfg.write_buffer_size as u64),
        cfg.bloom_bits,
        report::bytes(cfg.block_size as u64),
        report::bytes(cfg.cache_size as u64),
        cfg.size_ratio,
        if cfg.sync { ", fsync per write" } else { "" },
        a.engine.join(","),
        cfg.rounds
    );
    let disk = if workloads.contains(&Workload::FillSeq) && !a.no_dd {
        let d = dd::measure(tmp.path(), cfg.dd_mib)?;
        println!(
            "disk: `{}`: {:.1} MiB/s ({})",
            d.command,
            d.mib_per_sec,
            d.dd_says.as_deref().unwrap_or("dd printed no summary")
        );
        Some(d)
    } else {
        None
    };
    let values = Values::new(cfg.value_size);
    let live = LiveKeys::new(cfg.num);
    let mut results: Vec<PhaseResult> = Vec::new();
    for round in 0..cfg.rounds {
        // Reversed on odd rounds: the second engine of a round has run a few percent
        // slower on this machine, whichever it was (linkbench.md).
        let order: Vec<&String> = if round % 2 == 0 {
            a.engine.iter().collect()
        } else {
            a.engine.iter().rev().collect()
        };
        for name in order {
            let dir = base.join(format!("{name}-{round}"));
            println!("== {name}, round {} of {}, in {}", round + 1, cfg.rounds, dir.display());
            let ctx = Ctx {
                cfg: &cfg,
                values: &values,
                live: &live,
                round,
                engine: name,
                dir: &dir,
                keep_existing: a.use_existing_db,
            };
            results.extend(run_engine(&ctx, &workloads)?);
            if !a.use_existing_db {
                remove_dir(&dir)?;
            }
        }
    }
    report::print_table(&workloads, &a.engine, &results, disk.as_ref());
    if let Some(path) = &a.json {
        report::write(path, &cfg, &a.engine, &results, disk.as_ref())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// What the phases of one engine in one round share.
struct Ctx<'a> {
    cfg: &'a KvConfig,
    values: &'a Values,
    live: &'a LiveKeys,
    round: usize,
    engine: &'a str,
    dir: &'a Path,
    keep_existing: bool,
}

fn remove_dir(dir: &Path) -> BenchResult<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", dir.display()).into()),
    }
}

/// Runs `workloads` in order on one engine, reopening it on a fresh directory for the
/// fill workloads and with fsync per write for fillsync.
fn run_engine(ctx: &Ctx<'_>, workloads: &[Workload]) -> BenchResult<Vec<PhaseResult>> {
    let mut out = Vec::new();
    let mut engine: Option<(Box<dyn KvEngine>, bool)> = None;
    // Space amplification needs the live keys, unknown in a database found on disk.
    let mut live_known = !ctx.keep_existing;
    for (phase, &w) in workloads.iter().enumerate() {
        let sync = ctx.cfg.sync || matches!(w, Workload::FillSync(_));
        let fresh = w.fresh_db() && !(ctx.keep_existing && phase == 0);
        if fresh || engine.as_ref().is_none_or(|(_, s)| *s != sync) {
            drop(engine.take());
            if fresh {
                remove_dir(ctx.dir)?;
                ctx.live.clear();
                live_known = true;
            }
            engine = Some((engines::open_kv(ctx.engine, ctx.dir, ctx.cfg, sync)?, sync));
        }
        let Some((e, _)) = engine.as_ref() else {
            return Err("engine not open".into());
        };
        let r = run_phase(ctx, e.as_ref(), w, phase, live_known)?;
        println!("{}", report::db_bench_line(&r));
        out.push(r);
    }
    Ok(out)
}

/// Totals of one client thread.
#[derive(Default)]
struct ThreadOut {
    ops: u64,
    found: u64,
    bytes: u64,
    user_bytes: u64,
}

impl ThreadOut {
    fn add(&mut self, o: &ThreadOut) {
        self.ops += o.ops;
        self.found += o.found;
        self.bytes += o.bytes;
        self.user_bytes += o.user_bytes;
    }
}

/// `total` operations split over `threads`: thread `t`'s share and first index.
fn share(total: u64, threads: usize, t: usize) -> (u64, u64) {
    let n = threads as u64;
    let (base, extra) = (total / n, total % n);
    let t = t as u64;
    let mine = base + u64::from(t < extra);
    let start = t * base + t.min(extra);
    (start, mine)
}

fn run_phase(ctx: &Ctx<'_>, e: &dyn KvEngine, w: Workload, phase: usize, live_known: bool) -> BenchResult<PhaseResult> {
    let cfg = ctx.cfg;
    if !w.writes() || w == Workload::ReadWhileWriting {
        crate::workdir::warm_page_cache(ctx.dir)?;
    }
    let (total, threads) = match w {
        Workload::FillSync(t) => (cfg.sync_ops, t),
        Workload::ReadRandom | Workload::SeekRandom | Workload::ReadWhileWriting => (cfg.reads, cfg.threads),
        _ => (cfg.num, cfg.threads),
    };
    let before = e.stats()?;
    let pb = crate::report::count_bar(total, &format!("{} {}", ctx.engine, w.name()), "ops");
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (clients, writer) = std::thread::scope(|s| -> BenchResult<(ThreadOut, Option<ThreadOut>)> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let pb = &pb;
                s.spawn(move || client(ctx, e, w, phase, t, threads, total, pb))
            })
            .collect();
        let writer = (w == Workload::ReadWhileWriting).then(|| {
            let stop = &stop;
            s.spawn(move || background_writer(ctx, e, phase, threads, stop))
        });
        let mut sum = ThreadOut::default();
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(o)) => sum.add(&o),
                Ok(Err(err)) => first_err = first_err.or(Some(err)),
                Err(_) => first_err = first_err.or(Some("a client thread panicked".into())),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let writer = match writer.map(|h| h.join()) {
            None => None,
            Some(Ok(Ok(o))) => Some(o),
            Some(Ok(Err(err))) => return Err(first_err.unwrap_or(err)),
            Some(Err(_)) => return Err(first_err.unwrap_or_else(|| "the writer thread panicked".into())),
        };
        match first_err {
            Some(err) => Err(err),
            None => Ok((sum, writer)),
        }
    })?;
    let seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let settle_start = Instant::now();
    if w.writes() {
        e.flush()?;
    }
    let settle_seconds = settle_start.elapsed().as_secs_f64();
    let after = e.stats()?;
    let user_bytes = clients.user_bytes + writer.as_ref().map_or(0, |o| o.user_bytes);
    let live_bytes = ctx.live.count() * (cfg.key_size + cfg.value_size) as u64;
    Ok(report::phase_result(report::PhaseInput {
        engine: ctx.engine,
        round: ctx.round,
        phase,
        workload: w,
        threads,
        ops: clients.ops,
        found: clients.found,
        bytes: clients.bytes,
        seconds,
        settle_seconds,
        user_bytes,
        writer_ops: writer.map(|o| o.ops),
        before,
        after,
        live_bytes: live_known.then_some(live_bytes),
    }))
}

/// One client thread of workload `w`.
#[allow(clippy::too_many_arguments)]
fn client(
    ctx: &Ctx<'_>,
    e: &dyn KvEngine,
    w: Workload,
    phase: usize,
    t: usize,
    threads: usize,
    total: u64,
    pb: &ProgressBar,
) -> BenchResult<ThreadOut> {
    let cfg = ctx.cfg;
    let (first, mine) = share(total, threads, t);
    let mut rng = Rng::for_thread(ctx.round, phase, t);
    let mut out = ThreadOut::default();
    let ks = cfg.key_size;
    let mut pending = 0u64;
    match w {
        Workload::ReadRandom | Workload::SeekRandom | Workload::ReadWhileWriting => {
            let mut key = vec![0u8; ks];
            for _ in 0..mine {
                make_key(rng.below(cfg.num), &mut key);
                if w == Workload::SeekRandom {
                    let (n, bytes) = e.seek(&key, cfg.seek_nexts)?;
                    out.found += u64::from(n > 0);
                    out.bytes += bytes;
                } else if e.get(&key)? {
                    out.found += 1;
                    out.bytes += (ks + cfg.value_size) as u64;
                }
                out.ops += 1;
                pending += 1;
                if pending == 1024 {
                    pb.inc(pending);
                    pending = 0;
                }
            }
        }
        _ => {
            let delete = w == Workload::DeleteRandom;
            let batch = if matches!(w, Workload::FillSync(_)) {
                1
            } else {
                cfg.batch_size
            };
            let mut keys = vec![0u8; ks * batch];
            let mut numbers = Vec::with_capacity(batch);
            let mut done = 0u64;
            while done < mine {
                let n = (mine - done).min(batch as u64) as usize;
                numbers.clear();
                for j in 0..n {
                    let k = if w == Workload::FillSeq {
                        first + done + j as u64
                    } else {
                        rng.below(cfg.num)
                    };
                    make_key(k, &mut keys[j * ks..(j + 1) * ks]);
                    numbers.push(k);
                }
                if n == 1 {
                    let key = &keys[..ks];
                    if delete {
                        e.delete(key)?;
                    } else {
                        e.put(key, ctx.values.get(first + done))?;
                    }
                } else {
                    let ops: Vec<WriteOp<'_>> = (0..n)
                        .map(|j| {
                            let key = &keys[j * ks..(j + 1) * ks];
                            if delete {
                                WriteOp::Delete(key)
                            } else {
                                WriteOp::Put(key, ctx.values.get(first + done + j as u64))
                            }
                        })
                        .collect();
                    e.write(&ops)?;
                }
                for &k in &numbers {
                    ctx.live.set(k, !delete);
                }
                let per_op = if delete { ks } else { ks + cfg.value_size } as u64;
                out.ops += n as u64;
                out.user_bytes += per_op * n as u64;
                out.bytes += per_op * n as u64;
                done += n as u64;
                pending += n as u64;
                if pending >= 1024 || matches!(w, Workload::FillSync(_)) {
                    pb.inc(pending);
                    pending = 0;
                }
            }
        }
    }
    pb.inc(pending);
    Ok(out)
}

/// readwhilewriting's writer: random overwrites at full speed until the readers finish.
fn background_writer(
    ctx: &Ctx<'_>,
    e: &dyn KvEngine,
    phase: usize,
    readers: usize,
    stop: &AtomicBool,
) -> BenchResult<ThreadOut> {
    let cfg = ctx.cfg;
    let ks = cfg.key_size;
    let mut rng = Rng::for_thread(ctx.round, phase, readers + 1000);
    let mut keys = vec![0u8; ks * cfg.batch_size];
    let mut numbers = Vec::with_capacity(cfg.batch_size);
    let mut out = ThreadOut::default();
    while !stop.load(Ordering::Relaxed) {
        numbers.clear();
        for j in 0..cfg.batch_size {
            let k = rng.below(cfg.num);
            make_key(k, &mut keys[j * ks..(j + 1) * ks]);
            numbers.push(k);
        }
        let ops: Vec<WriteOp<'_>> = (0..cfg.batch_size)
            .map(|j| WriteOp::Put(&keys[j * ks..(j + 1) * ks], ctx.values.get(out.ops + j as u64)))
            .collect();
        e.write(&ops)?;
        for &k in &numbers {
            ctx.live.set(k, true);
        }
        out.ops += cfg.batch_size as u64;
        out.user_bytes += ((ks + cfg.value_size) * cfg.batch_size) as u64;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_cover_the_total_once() {
        for (total, threads) in [(10u64, 3usize), (2, 4), (1000, 1), (7, 7)] {
            let mut next = 0;
            for t in 0..threads {
                let (start, n) = share(total, threads, t);
                assert_eq!(start, next);
                next += n;
            }
            assert_eq!(next, total);
        }
    }
}
