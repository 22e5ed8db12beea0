//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::multimap_args::MultimapCommand;
use crate::table_args::TableCommand;

/// Inspect and edit a Strata database.
///
/// Keys and values are UTF-8 text (or hex with --hex; tables are not affected by it). Printed keys and values are
/// escaped so each stays on one line: `\\` for a backslash, `\t` `\n` `\r` for those
/// characters, `\xNN` for other control characters and for bytes that are not valid UTF-8.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, long_about, propagate_version = true)]
pub struct Cli {
    /// Database directory [required except for dump-sst]
    #[arg(long, value_name = "DIR", env = "STRATA_DB", global = true)]
    pub db: Option<PathBuf>,

    /// Take keys and values as hex digits (optional 0x prefix) and print them as hex
    #[arg(long, global = true)]
    pub hex: bool,

    /// Open the database read-only: no lock file is created, nothing is written, and
    /// commands that write fail (for databases on read-only media; commands that only
    /// read always open it so)
    #[arg(long, global = true)]
    pub read_only: bool,

    /// Open only these partitions of a partitioned directory, e.g. `--serve 1,3`: a
    /// serving node's share. Rows of the other partitions are refused and selects read
    /// these (table commands only)
    #[arg(long, global = true, value_delimiter = ',', value_name = "I,J,...")]
    pub serve: Option<Vec<usize>>,

    /// How opening treats damaged log records (see docs/design/recovery.md)
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "MODE",
        default_value = "tolerate-corrupted-tail"
    )]
    pub recovery_mode: RecoveryModeArg,

    #[command(subcommand)]
    pub command: Command,
}

/// `--recovery-mode` values (`strata::RecoveryMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecoveryModeArg {
    /// Drop a torn last record of the newest log; any other damage is an error
    TolerateCorruptedTail,
    /// Any damage, a torn tail included, is an error
    AbsoluteConsistency,
    /// Replay up to the first damaged record and no further
    PointInTime,
    /// Skip damaged records and replay every valid one after them (salvage)
    SkipAnyCorruptedRecords,
}

impl From<RecoveryModeArg> for strata::RecoveryMode {
    fn from(m: RecoveryModeArg) -> Self {
        match m {
            RecoveryModeArg::TolerateCorruptedTail => strata::RecoveryMode::TolerateCorruptedTail,
            RecoveryModeArg::AbsoluteConsistency => strata::RecoveryMode::AbsoluteConsistency,
            RecoveryModeArg::PointInTime => strata::RecoveryMode::PointInTime,
            RecoveryModeArg::SkipAnyCorruptedRecords => strata::RecoveryMode::SkipAnyCorruptedRecords,
        }
    }
}

/// The keyspace a command works on.
#[derive(Debug, Args)]
pub struct KeyspaceArg {
    /// Keyspace to use
    #[arg(long, short = 'k', value_name = "NAME", default_value = strata::db::DEFAULT_KEYSPACE)]
    pub keyspace: String,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set KEY to VALUE (creates the database if the directory holds none)
    Put {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// Key
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// Value
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Print the value of KEY (exit status 1 if it is absent)
    Get {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// Key
        #[arg(allow_hyphen_values = true)]
        key: String,
    },
    /// Delete KEY
    Del {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// Key
        #[arg(allow_hyphen_values = true)]
        key: String,
    },
    /// Delete every key from START (inclusive) to END (exclusive)
    DelRange {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// First key deleted
        #[arg(allow_hyphen_values = true)]
        start: String,
        /// First key kept (must sort after START)
        #[arg(allow_hyphen_values = true)]
        end: String,
    },
    /// Declare the keyspace's delete key: WIDTH bytes at OFFSET of every value, compared
    /// big-endian; tables written from now on hold delete tiles of H pages
    DeleteKey {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// Offset of the field in the value
        #[arg(long)]
        offset: u32,
        /// Width of the field in bytes (1..=16)
        #[arg(long)]
        width: u8,
        /// Pages per delete tile: 1..=256, or auto (the cost model picks per level)
        #[arg(long, default_value = "auto")]
        h: String,
    },
    /// Delete every entry whose delete key lies from LO (inclusive) to HI (exclusive): a
    /// secondary range delete (bounds of the delete key's width; --hex helps)
    DeleteWhere {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// Smallest delete key deleted
        #[arg(allow_hyphen_values = true)]
        lo: String,
        /// Smallest delete key kept (must sort after LO)
        #[arg(allow_hyphen_values = true)]
        hi: String,
    },
    /// Print keys and values in key order as `key<TAB>value` lines
    Scan(ScanArgs),
    /// Print levels, files, sizes, tombstones and work counters
    ///
    /// The work counters (bytes written, flushes, compactions, write amplification)
    /// cover only what this process did since it opened the database.
    Stats {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Flush, then compact a keyspace (all keyspaces when --keyspace is omitted) into
    /// its last level
    Compact {
        /// Keyspace to compact [default: all]
        #[arg(long, short = 'k', value_name = "NAME")]
        keyspace: Option<String>,
    },
    /// Flush the memtable to level-0 SSTables
    Flush,
    /// List the key-value keyspaces (tables are listed by `tables`)
    Keyspaces {
        /// Also list the keyspaces that hold tables and their indexes (`table:NAME`,
        /// `table:NAME:INDEX`)
        #[arg(long)]
        all: bool,
    },
    /// Create a keyspace (creates the database if the directory holds none)
    CreateKeyspace {
        /// Name of the new keyspace
        name: String,
    },
    /// Drop a keyspace and delete its data
    DropKeyspace {
        /// Name of the keyspace
        name: String,
    },
    /// Salvage what reads back from the database into a new one at --to (the source is
    /// opened read-only and not changed; pass --recovery-mode
    /// skip-any-corrupted-records to keep every readable log record). Lists each loss;
    /// exit status 1 if anything was lost
    Repair {
        /// Directory of the new database (must not hold one)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
    /// Summarize an SSTable file: footer, properties, bloom filter, fence pointers
    /// (does not need --db)
    DumpSst {
        /// The .sst file
        file: PathBuf,
        /// Also print every entry (keys and values as hex with --hex)
        #[arg(long)]
        entries: bool,
    },
    /// Write an external SSTable from key/value pairs sorted by key, for `ingest` (does
    /// not need --db). Input: CSV with a `key,value` header, or JSON Lines objects
    /// `{"key": ..., "value": ...}` (strings; hex with --hex)
    SstWrite(SstWriteArgs),
    /// Ingest external SSTables (from sst-write) into a keyspace: all files or none, newer
    /// than every write before; the files must not overlap each other
    Ingest {
        #[command(flatten)]
        ks: KeyspaceArg,
        /// The .sst files
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Hard-link the files into the database instead of copying them (never change
        /// the sources afterwards)
        #[arg(long)]
        link: bool,
    },
    #[command(flatten)]
    Table(TableCommand),
    /// Multimaps: keys holding many sorted values (put, get with paging, del, load)
    #[command(subcommand, visible_alias = "mm")]
    Multimap(MultimapCommand),
}

/// Arguments of `sst-write`.
#[derive(Debug, Args)]
pub struct SstWriteArgs {
    /// The SSTable to write (must not exist)
    pub out: PathBuf,
    /// The pairs to read (`-` for standard input, which needs --format)
    pub input: PathBuf,
    /// Input format [default: from the input's extension]
    #[arg(long, value_enum)]
    pub format: Option<crate::table_args::LoadFormat>,
    /// Sort the pairs in memory first (otherwise they must come sorted)
    #[arg(long)]
    pub sort: bool,
}

/// Arguments of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub ks: KeyspaceArg,
    /// Start at this key (inclusive)
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Stop before this key (exclusive)
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Print at most N entries
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Descending key order (with --limit: the last N keys of the range)
    #[arg(long)]
    pub reverse: bool,
    /// Print keys only
    #[arg(long)]
    pub keys_only: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn keyspace_defaults_to_default() {
        let cli = Cli::try_parse_from(["strata", "--db", "d", "get", "k"]).unwrap();
        match cli.command {
            Command::Get { ks, key } => {
                assert_eq!(ks.keyspace, "default");
                assert_eq!(key, "k");
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn hyphen_values_and_global_flags() {
        let cli = Cli::try_parse_from(["strata", "put", "-k", "ks", "key", "-1", "--db", "d", "--hex"]).unwrap();
        assert!(cli.hex);
        assert_eq!(cli.db, Some(PathBuf::from("d")));
        match cli.command {
            Command::Put { ks, key, value } => {
                assert_eq!(
                    (ks.keyspace.as_str(), key.as_str(), value.as_str()),
                    ("ks", "key", "-1")
                );
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
