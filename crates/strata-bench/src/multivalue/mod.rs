//! `strata-bench multivalue`: the DBFromZero secondary-index workload. A synthetic
//! Reddit-comment stream is loaded into a multimap (author -> comment id) by 1..N
//! threads into 1..8 hash partitions, then random keys are read back, every value
//! streamed, with latencies binned by the key's value count. DBFromZero's own engine,
//! `dbf0java`, runs on the same records in the same run when it and Java are present.

mod peer;
mod strata_side;
mod stream;

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use strata::multimap::MultiMap;

use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};
use crate::report::{mib, rate, thousands, write_json};
use peer::{Peer, PeerResult};
use strata_side::{BINS, GetResult, LoadResult, bin_label};
use stream::Plan;

/// Arguments of `multivalue`.
#[derive(Debug, Args)]
pub struct MultivalueArgs {
    /// Records (comments) in the stream
    #[arg(long, default_value_t = 5_000_000)]
    pub records: u64,
    /// Distinct authors [default: 240,000 per 5,000,000 records]
    #[arg(long)]
    pub keys: Option<u64>,
    /// Share of the records by the hot author `[deleted]`
    #[arg(long, default_value_t = 0.1)]
    pub hot_fraction: f64,
    /// Seed of the stream
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Loader thread counts to run
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Partition counts to run (each with every thread count)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub partitions: Vec<usize>,
    /// GET thread counts to run
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub get_threads: Vec<usize>,
    /// Seconds of each GET run
    #[arg(long, default_value_t = 10)]
    pub get_seconds: u64,
    /// Times the hot key is streamed after the GET runs
    #[arg(long, default_value_t = 5)]
    pub hot_reps: usize,
    /// Also load the subreddit index (subreddit -> id), Strata only
    #[arg(long)]
    pub subreddit: bool,
    /// Folder holding the peer's source (`dbf0java`, `dbf0java-drivers`)
    #[arg(long, env = "STRATA_PEERS", default_value = "../shared/peers")]
    pub peers: PathBuf,
    /// Skip the peer
    #[arg(long)]
    pub no_peer: bool,
    /// Where the peer is built (kept between runs)
    #[arg(long, default_value = "target/strata-bench/peer-build")]
    pub peer_build: PathBuf,
    /// JSON results
    #[arg(long, default_value = "target/strata-bench/multivalue.json")]
    pub out: PathBuf,
    /// CDF plot (PNG)
    #[arg(long, default_value = "target/strata-bench/multivalue-cdf.png")]
    pub plot: PathBuf,
}

#[derive(Serialize)]
struct Report {
    records: u64,
    keys: u64,
    median_values: u32,
    mean_values: f64,
    max_values: u32,
    loads: Vec<LoadResult>,
    subreddit_load: Option<LoadResult>,
    gets: Vec<GetResult>,
    peer: Option<PeerResult>,
    peer_skipped: Option<String>,
}

/// Runs the benchmark.
pub fn run(a: &MultivalueArgs) -> BenchResult<()> {
    if a.threads.contains(&0) || a.get_threads.contains(&0) {
        return Err("thread counts must be at least 1".into());
    }
    for &p in &a.partitions {
        strata::partition::check_count(p)?;
    }
    let keys = a.keys.unwrap_or((a.records * 240_000).div_ceil(5_000_000)).max(2);
    eprintln!(
        "planning {} records over {} authors",
        thousands(a.records),
        thousands(keys)
    );
    let plan = Plan::new(a.records, keys, a.hot_fraction, a.seed);
    let (median, mean, max) = plan.shape();
    let work = tempfile::tempdir()?;

    // Loads: every (threads, partitions); the first store is kept for the GETs.
    let mut loads = Vec::new();
    let mut kept = None;
    for &p in &a.partitions {
        for &t in &a.threads {
            let dir = work.path().join(format!("strata-{t}t-{p}p"));
            let (r, parts) = strata_side::load(&plan, &dir, t, p)?;
            if r.puts != plan.len() {
                return Err(format!("strata loaded {} of {} records", r.puts, plan.len()).into());
            }
            eprintln!(
                "strata {t}t/{p}p: {} puts/s, {} puts/s with merges, {}",
                rate(r.puts as f64 / r.load_secs),
                rate(r.puts as f64 / r.total_secs),
                mib(r.store_bytes)
            );
            loads.push(r);
            if kept.is_none() {
                kept = Some(parts);
            } else {
                parts.close()?;
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    let parts = kept.ok_or("no load configuration given")?;
    let mm = MultiMap::partitioned(parts.keyspace("by_author")?);
    // Every distinct key holds exactly its planned values.
    for (k, &c) in plan.authors.iter().zip(&plan.counts).step_by(997) {
        let n = mm.get(k.as_bytes())?.count() as u64;
        if n != u64::from(c) {
            return Err(format!("key {k}: {n} values, planned {c}").into());
        }
    }
    let mut gets = Vec::new();
    for &t in &a.get_threads {
        gets.push(strata_side::get(&mm, &plan.authors, t, a.get_seconds, a.hot_reps)?);
    }
    drop(mm);
    parts.close()?;

    let subreddit_load = if a.subreddit {
        Some(load_subreddits(&plan, &work.path().join("strata-subreddit"))?)
    } else {
        None
    };

    let (peer, peer_skipped) = if a.no_peer {
        (None, Some("--no-peer".to_string()))
    } else {
        let peer_work = work.path().join("peer");
        std::fs::create_dir_all(&peer_work)?;
        let threads = a.get_threads.first().copied().unwrap_or(1);
        match Peer::build(&a.peers, &a.peer_build).and_then(|p| p.run(&plan, &peer_work, a.get_seconds, threads)) {
            Ok(r) => {
                if r.records != plan.len() || r.distinct_keys != plan.authors.len() as u64 {
                    return Err(format!(
                        "the peer got {} records / {} keys, Strata {} / {}",
                        r.records,
                        r.distinct_keys,
                        plan.len(),
                        plan.authors.len()
                    )
                    .into());
                }
                (Some(r), None)
            }
            Err(e) => (None, Some(e.to_string())),
        }
    };

    let report = Report {
        records: plan.len(),
        keys: plan.authors.len() as u64,
        median_values: median,
        mean_values: mean,
        max_values: max,
        loads,
        subreddit_load,
        gets,
        peer,
        peer_skipped,
    };
    print_report(&report);
    write_json(&a.out, &report)?;
    plot(&a.plot, &report)?;
    println!("\nJSON: {}   CDF plot: {}", a.out.display(), a.plot.display());
    Ok(())
}

/// The subreddit index (subreddit -> id) beside the author one, 1 thread, 1 partition.
fn load_subreddits(plan: &Plan, dir: &std::path::Path) -> BenchResult<LoadResult> {
    let parts = strata::partition::Partitions::open(dir, 1, strata_side::options())?;
    let mm = MultiMap::partitioned(parts.keyspace("by_subreddit")?);
    mm.filter_by_key()?;
    let start = std::time::Instant::now();
    let n = mm.load(plan.records().map(|r| (r.subreddit, r.id)), 1)?;
    let load_secs = start.elapsed().as_secs_f64();
    parts.flush()?;
    parts.wait_for_background()?;
    let total_secs = start.elapsed().as_secs_f64();
    let store_bytes = parts.total_bytes();
    let store_filter_bytes = strata_side::filter_bytes(&parts)?;
    parts.compact_range()?;
    let merged_secs = start.elapsed().as_secs_f64();
    let compacted_bytes = parts.total_bytes();
    let compacted_filter_bytes = strata_side::filter_bytes(&parts)?;
    drop(mm);
    parts.close()?;
    Ok(LoadResult {
        threads: 1,
        partitions: 1,
        puts: n,
        load_secs,
        total_secs,
        merged_secs,
        store_bytes,
        compacted_bytes,
        store_filter_bytes,
        compacted_filter_bytes,
        bytes_over_time: Vec::new(),
    })
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2}ms", v / 1000.0)
    } else {
        format!("{v:.1}us")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 { format!("{:.2}x", a / b) } else { "-".into() }
}

fn print_report(r: &Report) {
    println!(
        "multivalue: {} records, {} authors (values per author: median {}, mean {:.1}, max {})",
        thousands(r.records),
        thousands(r.keys),
        r.median_values,
        r.mean_values,
        thousands(u64::from(r.max_values))
    );
    println!(
        "\nLOAD author -> id (puts/s; 'w/ merges' counts until every flush and compaction is done, \
         'fully merged' until a full compaction after that, the state of the peer's final merge)"
    );
    println!(
        "{:<10} {:>7} {:>10} {:>12} {:>18} {:>20} {:>10} {:>14}",
        "engine", "threads", "partitions", "puts/s", "puts/s w/ merges", "puts/s fully merged", "store", "fully merged"
    );
    for l in &r.loads {
        println!(
            "{:<10} {:>7} {:>10} {:>12} {:>18} {:>20} {:>10} {:>14}",
            "strata",
            l.threads,
            l.partitions,
            rate(l.puts as f64 / l.load_secs),
            rate(l.puts as f64 / l.total_secs),
            rate(l.puts as f64 / l.merged_secs),
            mib(l.store_bytes),
            mib(l.compacted_bytes)
        );
    }
    if let Some(p) = &r.peer {
        let merged = rate(p.records as f64 / (p.load_secs + p.merge_secs));
        println!(
            "{:<10} {:>7} {:>10} {:>12} {:>18} {:>20} {:>10} {:>14}",
            "dbf0java",
            1,
            1,
            rate(p.records as f64 / p.load_secs),
            merged,
            merged,
            "-",
            mib(p.store_bytes)
        );
    } else {
        println!(
            "{:<10} skipped: {}",
            "dbf0java",
            r.peer_skipped.as_deref().unwrap_or("-")
        );
    }
    if let Some(l) = &r.subreddit_load {
        println!(
            "subreddit -> id (strata, 1t/1p): {} puts/s, {} puts/s w/ merges, {} ({} fully merged)",
            rate(l.puts as f64 / l.load_secs),
            rate(l.puts as f64 / l.total_secs),
            mib(l.store_bytes),
            mib(l.compacted_bytes)
        );
    }
    println!("\nGET random author, every value streamed (p50 / p99 per value-count bin)");
    let mut head = format!("{:<10} {:>7} {:>10} {:>12}", "engine", "threads", "keys/s", "values/s");
    for b in 0..BINS {
        head.push_str(&format!(" {:>19}", bin_label(b)));
    }
    println!("{head}");
    for g in &r.gets {
        let mut line = format!(
            "{:<10} {:>7} {:>10} {:>12}",
            "strata",
            g.threads,
            rate(g.keys as f64 / g.secs),
            rate(g.values as f64 / g.secs)
        );
        for b in &g.bins {
            line.push_str(&format!(
                " {:>19}",
                b.map_or("-".into(), |s| format!("{} / {}", us(s.p50), us(s.p99)))
            ));
        }
        println!("{line}");
    }
    if let Some(p) = &r.peer {
        let mut line = format!(
            "{:<10} {:>7} {:>10} {:>12}",
            "dbf0java",
            1,
            rate(p.keys_per_sec),
            rate(p.values_per_sec)
        );
        for b in &p.bins {
            line.push_str(&format!(
                " {:>19}",
                b.map_or("-".into(), |s| format!("{} / {}", us(s.1), us(s.3)))
            ));
        }
        println!("{line}");
    }
    let hot = r.gets.first().map(|g| {
        let mut s = g.hot_secs.clone();
        s.sort_by(f64::total_cmp);
        (
            s.get(s.len() / 2).copied().unwrap_or(0.0),
            s.first().copied().unwrap_or(0.0),
            g.hot_values,
        )
    });
    if let Some((med, min, n)) = hot {
        println!(
            "hot key [deleted] ({} values): strata median {:.1} ms (min {:.1} ms), {} values/s",
            thousands(n),
            med * 1000.0,
            min * 1000.0,
            rate(n as f64 / med.max(1e-9))
        );
    }
    let Some(p) = &r.peer else { return };
    let peer_hot = p.hot;
    if let Some(h) = peer_hot {
        println!(
            "hot key [deleted]: dbf0java p50 {} (max {}, {} GETs of it alone)",
            us(h.1),
            us(h.4),
            h.0
        );
    }
    // Targets of the issue, as ratios measured in this run.
    println!("\nTARGETS (this run)");
    let first = r.loads.first();
    let best = r.loads.iter().map(|l| l.puts as f64 / l.total_secs).fold(0.0, f64::max);
    let peer_load = p.records as f64 / (p.load_secs + p.merge_secs);
    if let Some(f) = first {
        let best_merged = r
            .loads
            .iter()
            .map(|l| l.puts as f64 / l.merged_secs)
            .fold(0.0, f64::max);
        println!(
            "load puts/s incl. merges, strata/peer: {} at 1t/1p, {} best config; fully merged: {} at 1t/1p, \
             {} best (target >= 3x)",
            ratio(f.puts as f64 / f.total_secs, peer_load),
            ratio(best, peer_load),
            ratio(f.puts as f64 / f.merged_secs, peer_load),
            ratio(best_merged, peer_load)
        );
        println!(
            "store bytes, strata/peer: {} when merges are done, {} fully merged (target <= 1x)",
            ratio(f.store_bytes as f64, p.store_bytes as f64),
            ratio(f.compacted_bytes as f64, p.store_bytes as f64)
        );
        println!(
            "  without Strata's bloom filters ({} / {}; the peer keeps none, and a key's stream does \
             not read them): {} when merges are done, {} fully merged",
            mib(f.store_filter_bytes),
            mib(f.compacted_filter_bytes),
            ratio((f.store_bytes - f.store_filter_bytes) as f64, p.store_bytes as f64),
            ratio(
                (f.compacted_bytes - f.compacted_filter_bytes) as f64,
                p.store_bytes as f64
            )
        );
    }
    if let (Some(Some(s)), Some(Some(q))) = (r.gets.first().map(|g| g.bins[0]), p.bins.first()) {
        println!(
            "GET p50 1-9 values, strata/peer: {} (target <= 0.33x)",
            ratio(s.p50, q.1)
        );
    }
    if let (Some((med, _, n)), Some(h)) = (hot, peer_hot) {
        let peer_vps = n as f64 / (h.1 / 1e6);
        println!(
            "hot key values/s, strata/peer: {} (target >= 5x)",
            ratio(n as f64 / med.max(1e-9), peer_vps)
        );
    }
}

fn plot(path: &std::path::Path, r: &Report) -> BenchResult<()> {
    let mut panels = Vec::new();
    for b in 0..BINS {
        let mut series = Vec::new();
        if let Some(g) = r.gets.first()
            && !g.cdf[b].is_empty()
        {
            series.push(Series {
                name: format!("strata, {} thread(s)", g.threads),
                color: 0,
                points: g.cdf[b].iter().map(|&(x, q)| (x.max(1.0).log10(), q * 100.0)).collect(),
            });
        }
        if let Some(Some(q)) = r.peer.as_ref().map(|p| p.bins[b]) {
            series.push(Series {
                name: "dbf0java (p50, p90, p99, max)".into(),
                color: 1,
                points: [(q.1, 50.0), (q.2, 90.0), (q.3, 99.0), (q.4, 100.0)]
                    .iter()
                    .map(|&(x, y)| (x.max(1.0).log10(), y))
                    .collect(),
            });
        }
        panels.push(Panel {
            title: format!("GET latency CDF, keys with {} values", bin_label(b)),
            y_label: "% of GETs".into(),
            series,
        });
    }
    line_chart(path, "log10(latency in us)", &panels)
}
