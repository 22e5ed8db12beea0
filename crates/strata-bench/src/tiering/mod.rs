//! `tiering`: the CS561 seed's experiments (leveling vs tiering), on Strata.
//!
//! * Bulk insert sweep (the seed's Figures 11-12): N random inserts, N in 10^2..10^6,
//!   over key universes of 10^2..10^5 keys, into a fresh tree per cell; the time runs
//!   until the tree has settled (memtable flushed, compactions done), because the
//!   seed's merges are synchronous. Each cell also gives write amplification.
//! * Queries on one loaded tree per configuration (Figures 13-16): 1/10/50/100 point
//!   queries, 1/10/50 range scans, 100 deletes, 100 mixed operations.
//! * Read amplification, measured, not modelled: data blocks looked up per point query
//!   (existing and missing keys) and per range scan, from the block cache's hit and miss
//!   counters (every data block read goes through it); plus the sorted runs in the tree,
//!   which is how many runs a lookup may probe before bloom filters rule runs out.
//!
//! Read phases run after every file of the tree was read once (page cache warm).

mod bulk;
mod queries;
mod report;

use std::path::Path;

use strata::{Db, Options};

use crate::BenchResult;

/// Arguments of `strata-bench tiering`.
#[derive(clap::Args, Debug, Clone)]
pub struct TieringArgs {
    /// Configurations, comma-separated: leveling (runs per level 1), tiering (runs per
    /// level --runs-per-level), lazy (tiering above, leveling at the last level).
    #[arg(long, value_delimiter = ',', default_value = "leveling,tiering")]
    pub configs: Vec<String>,
    /// Size ratio T between adjacent levels.
    #[arg(long = "size-ratio", default_value_t = 4.0)]
    pub size_ratio: f64,
    /// Runs per level K of the tiering configurations.
    #[arg(long = "runs-per-level", default_value_t = 3)]
    pub runs_per_level: usize,
    /// Memtable size in bytes.
    #[arg(long = "memtable-bytes", default_value_t = 1 << 20)]
    pub memtable_bytes: usize,
    /// Value size in bytes (keys are 16 bytes).
    #[arg(long = "value-size", default_value_t = 64)]
    pub value_size: usize,
    /// Inserts per write batch in the bulk inserts.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Insert counts of the bulk insert sweep.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000,100000,1000000")]
    pub inserts: Vec<u64>,
    /// Key universes ("dimensions") of the bulk insert sweep.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000,100000")]
    pub universes: Vec<u64>,
    /// Distinct keys loaded for the query experiments.
    #[arg(long = "query-keys", default_value_t = 1_000_000)]
    pub query_keys: u64,
    /// Entries per range scan.
    #[arg(long = "scan-len", default_value_t = 1000)]
    pub scan_len: u64,
    /// Point lookups behind the per-lookup averages (time, blocks).
    #[arg(long = "sample-lookups", default_value_t = 10_000)]
    pub sample_lookups: u64,
    /// Bloom filter bits per key (0: none).
    #[arg(long = "bloom-bits", default_value_t = 10.0)]
    pub bloom_bits: f64,
    /// Block cache bytes.
    #[arg(long = "cache-size", default_value_t = 8 << 20)]
    pub cache_size: usize,
    /// Skip the bulk insert sweep.
    #[arg(long = "no-bulk")]
    pub no_bulk: bool,
    /// Skip the query experiments.
    #[arg(long = "no-queries")]
    pub no_queries: bool,
    /// Directory for the databases (default: a temporary directory).
    #[arg(long)]
    pub db: Option<std::path::PathBuf>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// A run of seconds: inserts up to 10^4, universes up to 10^3, 20,000 query keys,
    /// memtable at most 64 KiB.
    #[arg(long)]
    pub quick: bool,
}

/// One tree configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Config {
    /// `leveling`, `tiering` or `lazy`.
    pub name: String,
    pub size_ratio: f64,
    pub runs_per_level: usize,
    pub lazy_leveling: bool,
}

impl Config {
    fn parse(name: &str, a: &TieringArgs) -> BenchResult<Config> {
        let (k, lazy) = match name {
            "leveling" => (1, false),
            "tiering" => (a.runs_per_level, false),
            "lazy" => (a.runs_per_level, true),
            other => return Err(format!("unknown config {other:?} (known: leveling, tiering, lazy)").into()),
        };
        Ok(Config {
            name: name.to_string(),
            size_ratio: a.size_ratio,
            runs_per_level: k,
            lazy_leveling: lazy,
        })
    }

    /// `tiering (T=4, K=3)`.
    pub fn label(&self) -> String {
        format!("{} (T={}, K={})", self.name, self.size_ratio, self.runs_per_level)
    }
}

/// Settings shared by every tree of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Shared {
    pub memtable_bytes: usize,
    pub value_size: usize,
    pub batch: usize,
    pub bloom_bits: f64,
    pub cache_size: usize,
}

/// Opens a fresh tree of configuration `c` in `dir`.
pub fn open(dir: &Path, c: &Config, s: &Shared) -> BenchResult<Db> {
    let o = Options {
        memtable_budget: s.memtable_bytes,
        size_ratio: c.size_ratio,
        runs_per_level: c.runs_per_level,
        lazy_leveling: c.lazy_leveling,
        bloom_fpr: crate::engines::strata::bloom_fpr(s.bloom_bits),
        block_cache_bytes: s.cache_size,
        target_file_size: (s.memtable_bytes as u64 * 4).max(4096),
        ..Options::default()
    };
    Ok(Db::open(dir, o)?)
}

/// Sorted runs in the default keyspace (level 0 counts each of its runs).
pub fn runs(db: &Db) -> usize {
    let s = db.stats();
    s.keyspaces.iter().flat_map(|k| k.levels.iter()).map(|l| l.runs).sum()
}

/// Non-empty levels.
pub fn levels(db: &Db) -> usize {
    let s = db.stats();
    s.keyspaces
        .iter()
        .map(|k| k.levels.iter().filter(|l| l.files > 0).count())
        .max()
        .unwrap_or(0)
}

/// Runs `strata-bench tiering`.
pub fn run(a: &TieringArgs) -> BenchResult<()> {
    let configs = a
        .configs
        .iter()
        .map(|n| Config::parse(n.trim(), a))
        .collect::<BenchResult<Vec<_>>>()?;
    if configs.is_empty() {
        return Err("--configs names no configuration".into());
    }
    let shared = Shared {
        // Quick runs insert little: a small memtable still builds several levels.
        memtable_bytes: if a.quick {
            a.memtable_bytes.min(64 << 10)
        } else {
            a.memtable_bytes
        },
        value_size: a.value_size,
        batch: a.batch.max(1),
        bloom_bits: a.bloom_bits,
        cache_size: a.cache_size,
    };
    let (inserts, universes, query_keys) = if a.quick {
        (
            a.inserts.iter().copied().filter(|&n| n <= 10_000).collect(),
            a.universes.iter().copied().filter(|&d| d <= 1000).collect(),
            20_000,
        )
    } else {
        (a.inserts.clone(), a.universes.clone(), a.query_keys)
    };
    let tmp = match &a.db {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            tempfile::Builder::new().prefix("tiering-").tempdir_in(d)?
        }
        None => tempfile::Builder::new().prefix("strata-tiering-").tempdir()?,
    };
    println!(
        "tiering: memtable {} bytes, 16-byte keys, {}-byte values, bloom {} bits/key, block cache {} bytes; {}",
        shared.memtable_bytes,
        shared.value_size,
        shared.bloom_bits,
        shared.cache_size,
        configs.iter().map(Config::label).collect::<Vec<_>>().join(" vs ")
    );
    let mut bulk_results = Vec::new();
    if !a.no_bulk {
        for c in &configs {
            bulk_results.push(bulk::sweep(tmp.path(), c, &shared, &inserts, &universes)?);
        }
        for b in &bulk_results {
            report::print_bulk(b, &inserts, &universes);
        }
    }
    let mut query_results = Vec::new();
    if !a.no_queries {
        let q = queries::QuerySettings {
            keys: query_keys,
            scan_len: a.scan_len,
            sample_lookups: a.sample_lookups,
        };
        for c in &configs {
            query_results.push(queries::run(tmp.path(), c, &shared, &q)?);
        }
        report::print_queries(&query_results);
    }
    if let Some(path) = &a.json {
        report::write(path, &shared, &configs, &bulk_results, &query_results)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
