//! `strata-bench`: Strata's benchmarks. Each subcommand runs on a fresh database in a
//! temporary directory (or `--db DIR`) and prints a table.

mod load;

use clap::{Parser, Subcommand};

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
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Load(a) => load::run(&a),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
