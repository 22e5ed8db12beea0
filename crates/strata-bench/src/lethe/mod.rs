//! `lethe`: delete persistence (the FADE half of the Lethe paper's evaluation). Unique
//! 1 KiB entries are inserted (1 GiB by default) on a fixed schedule, interleaved with
//! point deletes of random live entries at a given share of the operations, while a
//! reader does point gets. Each delete share runs once without FADE and once per delete
//! persistence threshold (16.7 %, 25 %, 50 % of the planned run time), each on a fresh
//! database, one after the other; on the same schedule, so their samples line up.
//!
//! Tombstones are audited from the outside (see [`audit`]): every delete's issue time is
//! recorded, and the live files' oldest tombstone times are checked every few hundred
//! milliseconds, through the ingest and a drain period long enough for every delete's
//! deadline to pass.

mod audit;
mod kiwi;
mod report;
mod variant;
mod workload;

use std::path::PathBuf;

use serde::Serialize;

use crate::BenchResult;
use crate::report::{mib, thousands};
use report::{ShareResult, Targets};
use variant::{Engine, Plan};
use workload::Shape;

/// Arguments of `strata-bench lethe`.
#[derive(clap::Args)]
pub struct LetheArgs {
    /// Bytes inserted (key + value) [default: 1 GiB, --quick 64 MiB].
    #[arg(long)]
    bytes: Option<u64>,
    /// Bytes of one entry (16-byte key + value).
    #[arg(long, default_value_t = 1024)]
    entry_size: usize,
    /// Planned length of the ingest, seconds (operations are spread evenly over it)
    /// [default: 120, --quick 20].
    #[arg(long)]
    seconds: Option<f64>,
    /// Delete shares of the operations; the largest is the delete-heavy run.
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.4")]
    delete_shares: Vec<f64>,
    /// FADE delete persistence thresholds, as fractions of the planned run time.
    #[arg(long, value_delimiter = ',', default_value = "0.167,0.25,0.5")]
    thresholds: Vec<f64>,
    /// Memtable bytes.
    #[arg(long, default_value_t = 1 << 20)]
    memtable: usize,
    /// Size ratio T.
    #[arg(long, default_value_t = 10.0)]
    size_ratio: f64,
    /// Target SSTable size.
    #[arg(long, default_value_t = 1 << 20)]
    file_size: u64,
    /// Page size.
    #[arg(long, default_value_t = 4096)]
    block_size: usize,
    /// Also compact files whose tombstones reach this share of entries (0 = off: FADE
    /// alone).
    #[arg(long, default_value_t = 0.0)]
    density_trigger: f64,
    /// Milliseconds between tombstone audits.
    #[arg(long, default_value_t = 200)]
    check_ms: u64,
    /// Parent directory of the databases (default: a temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// JSON file with every sample.
    #[arg(long, default_value = "target/strata-bench/lethe.json")]
    json: PathBuf,
    /// PNG plot of space amplification over time.
    #[arg(long, default_value = "target/strata-bench/lethe.png")]
    plot: PathBuf,
    /// 64 MiB in 20 s per run: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Run the KiWi half instead: secondary range deletes with delete tiles, h = 1..64
    /// and auto, against a full-tree compaction, row-by-row deletes and (with the
    /// `rocksdb` feature) RocksDB with a compaction filter.
    #[arg(long)]
    kiwi: bool,
    /// --kiwi: entries loaded before the measured phase, the preloaded tree's size
    /// [default: 200,000 (51 MB), --quick 20,000]. The full-tree compaction (a) rewrites
    /// this tree at every delete, so it dominates the workload's I/O only when the tree
    /// is large against what is inserted between deletes (the article's FADE runs use
    /// 1 GB; 4,000,000 entries here).
    #[arg(long)]
    kiwi_entries: Option<u64>,
    /// --kiwi: operations of the measured phase [default: 1,000,000, --quick 100,000].
    #[arg(long)]
    kiwi_ops: Option<u64>,
    /// --kiwi: bytes of an entry (16-byte key + value starting with its creation time).
    #[arg(long, default_value_t = 256)]
    kiwi_entry_size: usize,
    /// --kiwi: run only these variants (comma-separated: 1,2,4,8,16,32,64 for fixed h, aa
    /// for a second h = 1 run (A/A control), auto, a, b, table-eager, table-deferred, c for
    /// RocksDB with a compaction filter (`rocksdb` feature)) [default: all].
    #[arg(long, value_delimiter = ',')]
    kiwi_only: Vec<String>,
    /// --kiwi: JSON file with every variant's figures.
    #[arg(long, default_value = "target/strata-bench/lethe-kiwi.json")]
    kiwi_json: PathBuf,
    /// --kiwi: PNG of the article's figures D, E and F.
    #[arg(long, default_value = "target/strata-bench/lethe-kiwi.png")]
    kiwi_plot: PathBuf,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    benchmark: &'static str,
    bytes: u64,
    entry_size: usize,
    seconds: f64,
    quick: bool,
    seed: u64,
    engine: Engine,
    threshold_fractions: &'a [f64],
    targets: &'a Targets,
    shares: &'a [ShareResult],
}

/// Runs the benchmark.
pub fn run(a: &LetheArgs) -> BenchResult<()> {
    if a.kiwi {
        let shape = kiwi::KiwiShape {
            entries: a.kiwi_entries.unwrap_or(if a.quick { 20_000 } else { 200_000 }),
            ops: a.kiwi_ops.unwrap_or(if a.quick { 100_000 } else { 1_000_000 }),
            entry_size: a.kiwi_entry_size,
            seed: a.seed,
        };
        let tmp = tempfile::Builder::new().prefix("strata-bench-kiwi-").tempdir()?;
        let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
        return kiwi::run(shape, &base, &a.kiwi_json, &a.kiwi_plot, a.quick, &a.kiwi_only);
    }
    let bytes = a.bytes.unwrap_or(if a.quick { 64 << 20 } else { 1 << 30 });
    let seconds = a.seconds.unwrap_or(if a.quick { 20.0 } else { 120.0 }).max(1.0);
    let entry_size = a.entry_size.max(workload::KEY_SIZE + 1);
    let engine = Engine {
        memtable: a.memtable,
        size_ratio: a.size_ratio,
        file_size: a.file_size,
        block_size: a.block_size,
        density_trigger: (a.density_trigger > 0.0).then_some(a.density_trigger),
    };
    let fractions: Vec<f64> = a.thresholds.iter().copied().filter(|f| *f > 0.0).collect();
    let thresholds: Vec<f64> = fractions.iter().map(|f| f * seconds).collect();
    let inserts = bytes / entry_size as u64;
    println!("strata-bench lethe: delete persistence (FADE), with and without");
    println!(
        "  {} inserted as {} entries of {} bytes (unique random keys), spread evenly over {seconds:.0} s; \
         delete shares {:?} of the operations (random live keys); 1 reader thread doing point gets",
        mib(bytes),
        thousands(inserts),
        entry_size,
        a.delete_shares
    );
    println!(
        "  engine: memtable {}, size ratio {}, leveling, files {}, pages {} bytes, bloom 1 %; FADE thresholds {} s \
         ({:?} of the run); density trigger {}",
        mib(a.memtable as u64),
        a.size_ratio,
        mib(a.file_size),
        a.block_size,
        thresholds
            .iter()
            .map(|t| format!("{t:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        fractions,
        engine.density_trigger.map_or("off".to_string(), |d| d.to_string())
    );
    println!(
        "  tombstone audit every {} ms through the ingest and a drain (the run's threshold; the no-FADE run: the \
         largest), reads through the page cache",
        a.check_ms
    );
    if a.quick {
        println!("  NOTE: --quick is a smoke run, not the benchmark's setting");
    }
    println!();
    let tmp = tempfile::Builder::new().prefix("strata-bench-lethe-").tempdir()?;
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let mut shares = Vec::new();
    let max_d = thresholds.iter().copied().fold(0.0, f64::max);
    for &share in &a.delete_shares {
        let share = share.clamp(0.0, 0.9);
        let shape = Shape {
            inserts,
            entry_size,
            delete_share: share,
            seconds,
            seed: a.seed,
        };
        let mut plans = vec![Plan {
            name: "no FADE".into(),
            threshold_secs: None,
            audit_secs: thresholds.clone(),
            drain_secs: max_d + 0.5,
            check_ms: a.check_ms,
        }];
        for (f, d) in fractions.iter().zip(&thresholds) {
            plans.push(Plan {
                name: format!("FADE {:.1}%", 100.0 * f),
                threshold_secs: Some(*d),
                audit_secs: vec![*d],
                drain_secs: d + 0.5,
                check_ms: a.check_ms,
            });
        }
        let mut runs = Vec::new();
        for plan in &plans {
            let dir = base.join(format!("share{:.0}-{}", 100.0 * share, runs.len()));
            let r = variant::run(&dir, &engine, &shape, plan)?;
            eprintln!(
                "  share {:.0} % {}: ingest {:.1} s, space amp mean {:.2}, tombstones within D {}",
                100.0 * share,
                r.name,
                r.ingest_secs,
                r.space_amp_mean_ingest,
                r.audits
                    .iter()
                    .map(|x| format!("{:.3}%", 100.0 * x.share_within))
                    .collect::<Vec<_>>()
                    .join("/")
            );
            runs.push(r);
        }
        shares.push(ShareResult {
            delete_share: share,
            runs,
        });
    }
    for s in &shares {
        report::print_share(s);
    }
    let targets = report::targets(&shares);
    report::print_targets(&targets);
    let rep = JsonReport {
        benchmark: "lethe",
        bytes,
        entry_size,
        seconds,
        quick: a.quick,
        seed: a.seed,
        engine,
        threshold_fractions: &fractions,
        targets: &targets,
        shares: &shares,
    };
    crate::report::write_json(&a.json, &rep)?;
    println!("json: {}", a.json.display());
    match report::plot(&a.plot, &shares) {
        Ok(()) => println!("plot: {}", a.plot.display()),
        Err(e) => println!("plot: not written ({e})"),
    }
    Ok(())
}
