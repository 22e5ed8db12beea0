//! `strata`: a command-line tool for Strata databases.

mod args;
mod bytes;
mod commands;
mod ingest_cmds;
mod lines;
mod multimap_args;
mod multimap_cmds;
mod rows;
mod store;
mod table_args;
mod table_cmds;

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::args::Cli;
use crate::commands::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`strata scan | head`): not an error.
        Err(CliError::Output(e)) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(CliError::Usage(msg)) => Cli::command().error(clap::error::ErrorKind::InvalidValue, msg).exit(),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::FAILURE
        }
    }
}
