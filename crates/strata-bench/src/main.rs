//! `strata-bench`: Strata's benchmarks. Each subcommand runs on a fresh database in a
//! temporary directory (or `--db DIR`) and prints a table.

mod churn;
mod crash;
mod differential;
mod engines;
mod ingest;
mod kv;
mod lethe;
mod linkbench;
mod load;
mod micro;
mod multivalue;
mod partitions;
mod plot;
mod report;
mod tiering;
mod workdir;

use clap::{Parser, Subcommand};

/// jemalloc for every allocation of the process (see Cargo.toml for why and the
/// measurement): its per-thread caches take frees of blocks that other threads
/// allocated without locking the allocating thread's arena.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Errors of the benchmark driver: any error, with a message for the user.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;
/// Result of the benchmark driver.
pub type BenchResult<T> = Result<T, BenchError>;

#[derive(Parser)]
#[command(name = "strata-bench", about = "Benchmarks for the Strata storage engine")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Load N random keys, then read them back at random: a first baseline.
    Load(load::LoadArgs),
    /// The deferred-update paper's microbenchmark (Table 1, Figures 7-9): batched
    /// REPLACE/DELETE on a table with 4 secondary indexes, Strata eager vs deferred,
    /// with SQLite and Tarantool Vinyl beside them.
    Micro(micro::MicroArgs),
    /// LinkBench-like mixed workload through a secondary index: Strata eager vs deferred, SQLite beside.
    Linkbench(linkbench::LinkbenchArgs),
    /// Crash test: a child runs a random workload with sync on and is killed with
    /// SIGKILL at random moments; each reopen must hold every acknowledged commit.
    Crash(crash::CrashArgs),
    /// Churn (Tarantool #4501): delete 30 % and replace 30 % of the micro table's rows,
    /// then time secondary selects at once, eager vs deferred side by side.
    Churn(churn::ChurnArgs),
    /// Delete persistence (Lethe's FADE): tombstones persisted within the threshold, space
    /// amplification over time, reads and write amplification, with and without FADE.
    Lethe(lethe::LetheArgs),
    /// db_bench-compatible key-value workloads (fillseq, fillrandom, overwrite, readrandom,
    /// seekrandom, deleterandom, readwhilewriting, fillsync), Strata and RocksDB side by side.
    Kv(kv::KvArgs),
    /// The CS561 experiments: leveling vs tiering, bulk inserts, queries, deletes, mixed,
    /// with write and read amplification.
    Tiering(tiering::TieringArgs),
    /// Differential test: random table histories on Strata (eager and deferred) and
    /// SQLite under randomly drawn options, every answer compared.
    Differential(differential::DifferentialArgs),
    /// Bulk load of the micro table (4 secondary indexes): TableWriter-built files and
    /// Table::ingest (copy and link) beside dd's sequential write bandwidth, row by row
    /// eager and deferred, and SQLite's bulk insert.
    Ingest(ingest::IngestArgs),
    /// The DBFromZero secondary-index workload: a multimap (author -> comment ids) loaded
    /// by 1..N threads into 1..8 partitions, then GETs streaming every value of a key,
    /// beside dbf0java on the same records.
    Multivalue(multivalue::MultivalueArgs),
    /// Scatter-gather selects through a secondary index of a table hash-partitioned over
    /// N = 1, 2, 4, 8 partitions (files built per partition and ingested), eq and range
    /// selects with 1 and 2 client threads, ratios to one partition; beside the same rows
    /// in N SQLite files, the same select sent to each and merged.
    Partitions(partitions::PartitionsArgs),
    /// The crash test's child role (started by `crash`).
    #[command(hide = true)]
    CrashChild(crash::CrashChildArgs),
}

fn main() {
    let cli = Cli::parse();
    let r: BenchResult<()> = match cli.cmd {
        Cmd::Load(a) => load::run(&a).map_err(Into::into),
        Cmd::Micro(a) => micro::run(&a),
        Cmd::Linkbench(a) => linkbench::run(&a),
        Cmd::Crash(a) => crash::run(&a),
        Cmd::CrashChild(a) => crash::run_child(&a),
        Cmd::Churn(a) => churn::run(&a),
        Cmd::Lethe(a) => lethe::run(&a),
        Cmd::Kv(a) => kv::run(&a),
        Cmd::Tiering(a) => tiering::run(&a),
        Cmd::Differential(a) => differential::run(&a),
        Cmd::Ingest(a) => ingest::run(&a),
        Cmd::Multivalue(a) => multivalue::run(&a),
        Cmd::Partitions(a) => partitions::run(&a),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
