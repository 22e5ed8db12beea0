//! Command-line arguments of the multimap subcommands (`strata multimap ...`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::table_args::LoadFormat;

/// Multimaps: keys holding many values, each key's values kept sorted.
///
/// A multimap NAME is stored in the keyspace NAME. A database directory created by
/// `multimap load --partitions N` is split into N hash partitions; every multimap
/// command finds that out from the directory.
#[derive(Debug, Subcommand)]
pub enum MultimapCommand {
    /// Add VALUE(s) to KEY (creates the database and the multimap if missing)
    Put {
        /// Multimap name
        name: String,
        /// Key
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// Values to add
        #[arg(required = true, allow_hyphen_values = true)]
        values: Vec<String>,
    },
    /// Print the values of KEY, one per line, in order; page with --after and --limit
    Get(MultimapGetArgs),
    /// Remove VALUE(s) from KEY, or every value of KEY with --all
    Del {
        /// Multimap name
        name: String,
        /// Key
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// Values to remove
        #[arg(allow_hyphen_values = true, conflicts_with = "all")]
        values: Vec<String>,
        /// Remove every value of KEY (one range tombstone)
        #[arg(long)]
        all: bool,
    },
    /// Load key/value pairs from a CSV file (header row) or a JSON Lines file
    ///
    /// The whole file is checked first: a bad line is reported and nothing is written.
    Load(MultimapLoadArgs),
}

/// Arguments of `multimap get`.
#[derive(Debug, Args)]
pub struct MultimapGetArgs {
    /// Multimap name
    pub name: String,
    /// Key
    #[arg(allow_hyphen_values = true)]
    pub key: String,
    /// Start at this value (inclusive; with --reverse, the first value printed is at most it)
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true, conflicts_with = "after")]
    pub from: Option<String>,
    /// Start after this value (exclusive): pass the last value of a page for the next
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    pub after: Option<String>,
    /// Print at most N values
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Descending order
    #[arg(long)]
    pub reverse: bool,
    /// Print the number of values instead of the values
    #[arg(long)]
    pub count: bool,
}

/// Arguments of `multimap load`.
#[derive(Debug, Args)]
pub struct MultimapLoadArgs {
    /// Multimap name
    pub name: String,
    /// The file to read
    pub file: PathBuf,
    /// Input format [default: from the file's extension: .csv, or .jsonl / .ndjson /
    /// .json]
    #[arg(long, value_enum)]
    pub format: Option<LoadFormat>,
    /// The CSV column or JSON field holding the key
    #[arg(long, value_name = "FIELD", default_value = "key")]
    pub key_field: String,
    /// The CSV column or JSON field holding the value
    #[arg(long, value_name = "FIELD", default_value = "value")]
    pub value_field: String,
    /// Writer threads
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// Create the database split into N hash partitions (a new directory only; an
    /// existing one keeps its own count, and a different N is an error)
    #[arg(long, value_name = "N")]
    pub partitions: Option<usize>,
    /// Do not show a progress bar (none is shown when standard error is not a terminal)
    #[arg(long)]
    pub no_progress: bool,
}
