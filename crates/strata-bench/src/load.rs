//! `load`: fill a keyspace with random keys (batched), then read a sample back.

use std::path::PathBuf;
use std::time::Instant;

use rand::{Rng, SeedableRng, rngs::StdRng, seq::SliceRandom};
use strata::{Db, Options, WriteBatch};

/// Arguments of `strata-bench load`.
#[derive(clap::Args)]
pub struct LoadArgs {
    /// Keys to load.
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Keys per write batch.
    #[arg(long, default_value_t = 100)]
    batch: u64,
    /// Random reads after the load.
    #[arg(long, default_value_t = 200_000)]
    reads: u64,
    /// Database directory (default: a fresh temporary directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// A run of a few seconds.
    #[arg(long)]
    quick: bool,
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

pub fn run(a: &LoadArgs) -> strata::Result<()> {
    let (num, reads) = if a.quick { (100_000, 20_000) } else { (a.num, a.reads) };
    let tmp = tempfile::tempdir().map_err(strata::Error::from)?;
    let dir = a.db.clone().unwrap_or_else(|| tmp.path().join("db"));
    let db = Db::open(&dir, Options::default())?;
    let mut rng = StdRng::seed_from_u64(42);
    let mut order: Vec<u64> = (0..num).collect();
    order.shuffle(&mut rng);
    let mut value = vec![0u8; a.value_size];
    let t = Instant::now();
    for chunk in order.chunks(a.batch.max(1) as usize) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            rng.fill(&mut value[..]);
            b.put(&db.default_keyspace(), &key(i), &value);
        }
        db.write(b)?;
    }
    let load = t.elapsed();
    let t = Instant::now();
    db.flush()?;
    db.wait_for_background()?;
    let settle = t.elapsed();
    let t = Instant::now();
    let mut found = 0u64;
    for _ in 0..reads {
        let i = rng.gen_range(0..num);
        if db.get(&key(i))?.is_some() {
            found += 1;
        }
    }
    let read = t.elapsed();
    if found != reads {
        return Err(strata::Error::InvalidArgument(format!(
            "only {found} of {reads} keys found"
        )));
    }
    let s = db.stats();
    let mb = (num as f64 * (16 + a.value_size) as f64) / (1 << 20) as f64;
    println!("{:<22} {:>12} {:>14} {:>10}", "phase", "ops", "ops/s", "MB/s");
    println!(
        "{:<22} {:>12} {:>14.0} {:>10.1}",
        "fillrandom (batched)",
        num,
        num as f64 / load.as_secs_f64(),
        mb / load.as_secs_f64()
    );
    println!(
        "{:<22} {:>12} {:>14} {:>10}",
        "flush + compaction",
        "",
        format!("{:.2}s", settle.as_secs_f64()),
        ""
    );
    println!(
        "{:<22} {:>12} {:>14.0} {:>10}",
        "readrandom",
        reads,
        reads as f64 / read.as_secs_f64(),
        ""
    );
    println!(
        "write amplification {:.2}; {} flushes, {} compactions; {} bytes on disk",
        s.write_amplification,
        s.flushes,
        s.compactions,
        s.total_bytes()
    );
    Ok(())
}
