//! Command-line arguments of the table subcommands (flattened into [`crate::args::Command`]).

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};

/// The table subcommands.
///
/// Values given as text (primary keys, `--eq`, `--from`, `--to`, `--set`) are parsed by
/// the type of the field they are for: `u64` / `i64` / `f64` numbers, `bool` as
/// `true`/`false`/`1`/`0`, `str` as is, `bytes` as hex; `null` or `\N` is NULL (nullable
/// fields only). Negative numbers may be given as they are; put other values that start
/// with `-` after `--`.
#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Create a table from a schema (creates the database if the directory holds none)
    ///
    /// Schema text: `table NAME (FIELD TYPE [null], ...) primary key (FIELD, ...)
    /// [index NAME [unique] (FIELD, ...)]... [delete key (FIELD)] [eager|deferred]`, with
    /// TYPE one of u64, i64, f64, str, bytes, bool.
    #[command(group(ArgGroup::new("source").required(true).args(["schema", "file"])))]
    CreateTable {
        /// The schema text
        schema: Option<String>,
        /// Read the schema text from this file
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Make --db a partitioned database of N partitions (each a database of its own;
        /// rows routed by a hash of the primary key, indexes local to each partition).
        /// Row, select and table-ingest commands then work on it as on one database
        #[arg(long, value_name = "N")]
        partitions: Option<usize>,
    },
    /// List the tables
    Tables {
        /// Print each table's schema instead of its name
        #[arg(long)]
        schema: bool,
    },
    /// Drop a table, its indexes and its rows
    DropTable {
        /// Table name
        name: String,
    },
    /// Add a secondary index to a table, building it from the existing rows
    CreateIndex {
        /// Table name
        table: String,
        /// Name of the new index
        name: String,
        /// Indexed fields, comma-separated, in key order
        #[arg(value_name = "FIELD[,FIELD...]")]
        fields: String,
        /// No two rows may share the indexed values (rows with a NULL in them excepted)
        #[arg(long)]
        unique: bool,
    },
    /// Drop a secondary index
    DropIndex {
        /// Table name
        table: String,
        /// Index name
        name: String,
    },
    /// Load rows from a CSV file (header row naming fields) or a JSON Lines file
    Load(LoadArgs),
    /// Build a table's files (primary and one per index) outside any database from rows
    /// sorted by primary key (CSV or JSON Lines, as for load), for table-ingest. Takes
    /// the schema from --schema/--schema-file, or from table --table of the --db database
    TableWrite(TableWriteArgs),
    /// Ingest a table-write directory into a table: every file in one atomic step; rows
    /// whose primary key exists, or files built for another schema, are refused
    TableIngest {
        /// Table name
        table: String,
        /// The directory table-write made
        dir: PathBuf,
        /// Hard-link the files into the database instead of copying them
        #[arg(long)]
        link: bool,
        /// Into this partition of a partitioned database (files written with
        /// `table-write --partition I --of N`, or whose rows all route to it)
        #[arg(long, value_name = "I")]
        partition: Option<usize>,
    },
    /// Print the row with this primary key (exit status 1 if there is none)
    RowGet {
        /// Table name
        table: String,
        /// Primary key values, one per primary key field
        #[arg(required = true, allow_negative_numbers = true, value_name = "PK")]
        pk: Vec<String>,
        /// Output format
        #[arg(long, value_enum, default_value_t = RowFormat::Json)]
        format: RowFormat,
    },
    /// Print the rows an index selects: equality on a prefix of its fields, then a range
    /// on the next field
    Select(SelectArgs),
    /// Delete the row with this primary key (no error if there is none)
    RowDelete {
        /// Table name
        table: String,
        /// Primary key values, one per primary key field
        #[arg(required = true, allow_negative_numbers = true, value_name = "PK")]
        pk: Vec<String>,
    },
    /// Insert a row given as a JSON object (fails if its primary key exists)
    Insert {
        /// Table name
        table: String,
        /// The row, e.g. '{"id": 1, "name": "ann"}' (missing nullable fields are NULL)
        #[arg(value_name = "JSON_OBJECT")]
        row: String,
    },
    /// Insert or overwrite a row given as a JSON object
    Replace {
        /// Table name
        table: String,
        /// The row, e.g. '{"id": 1, "name": "ann"}' (missing nullable fields are NULL)
        #[arg(value_name = "JSON_OBJECT")]
        row: String,
    },
    /// Set fields of the row with this primary key (exit status 1 if there is none)
    Update {
        /// Table name
        table: String,
        /// Primary key values, one per primary key field
        #[arg(required = true, allow_negative_numbers = true, value_name = "PK")]
        pk: Vec<String>,
        /// A field and its new value (repeatable)
        #[arg(
            long = "set",
            value_name = "FIELD=VALUE",
            required = true,
            allow_hyphen_values = true
        )]
        set: Vec<String>,
    },
    /// Declare FIELD (a u64 or i64, not null) the table's delete key, for
    /// table-delete-where: the table must be empty unless FIELD is its delete key already
    /// (then only --h changes); `delete key (FIELD)` in the schema declares it at creation
    TableDeleteKey {
        /// Table name
        table: String,
        /// The delete key field
        field: String,
        /// Pages per delete tile of the primary index: 1..=256, or auto
        #[arg(long, default_value = "auto")]
        h: String,
    },
    /// Delete every row whose delete key FIELD lies in the range (--from inclusive, --to
    /// exclusive; both optional): one atomic write, hiding the rows from every index at
    /// once
    TableDeleteWhere {
        /// Table name
        table: String,
        /// The table's delete key field
        field: String,
        /// The range of FIELD's values deleted
        #[command(flatten)]
        range: RangeArgs,
    },
    /// Print a table's counters and index sizes
    TableStats {
        /// Table name
        table: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Verify every file (SSTable blocks and checksums, the manifest against the
    /// directory, the logs) and that every table's indexes agree with its rows; print
    /// each problem with its file and offset (exit status 1 if any)
    Check {
        /// Flush and compact everything first, and then also require every secondary
        /// index of a deferred table to hold exactly one entry per row
        #[arg(long)]
        compact: bool,
    },
}

/// Input formats of `load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadFormat {
    /// Comma-separated values with a header row
    Csv,
    /// One JSON object per line
    Jsonl,
}

/// How `load` writes rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadMode {
    /// Fail on a primary key (or unique key) that exists
    Insert,
    /// Overwrite rows with the same primary key
    Replace,
}

/// Output formats of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RowFormat {
    /// One JSON object
    Json,
    /// A header line of field names, then tab-separated values (NULL as \N)
    Tsv,
}

/// Output formats of `select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RowsFormat {
    /// One JSON object per line
    Jsonl,
    /// A header line of field names, then tab-separated values (NULL as \N)
    Tsv,
}

/// Arguments of `load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Table name
    pub table: String,
    /// The file to read (`-` for standard input, which needs --format)
    pub file: PathBuf,
    /// Input format [default: from the file's extension: .csv, or .jsonl / .ndjson /
    /// .json]
    #[arg(long, value_enum)]
    pub format: Option<LoadFormat>,
    /// Insert (fail on existing keys) or replace
    #[arg(long, value_enum, default_value_t = LoadMode::Insert)]
    pub mode: LoadMode,
    /// Rows per transaction
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub batch: usize,
    /// Do not show a progress bar (none is shown when standard error is not a terminal)
    #[arg(long)]
    pub no_progress: bool,
}

/// Arguments of `table-write`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("schema_source").required(true).args(["schema", "schema_file", "table"])))]
pub struct TableWriteArgs {
    /// The output directory (must not exist, or be empty)
    pub out: PathBuf,
    /// The rows to read (`-` for standard input, which needs --format)
    pub input: PathBuf,
    /// The schema text
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Option<String>,
    /// Read the schema text from this file
    #[arg(long, value_name = "FILE")]
    pub schema_file: Option<PathBuf>,
    /// Use the schema of this table of the --db database
    #[arg(long, value_name = "NAME")]
    pub table: Option<String>,
    /// Input format [default: from the input's extension]
    #[arg(long, value_enum)]
    pub format: Option<LoadFormat>,
    /// Sort the rows by primary key in memory first (otherwise they must come sorted)
    #[arg(long)]
    pub sort: bool,
    /// Write only the rows of partition I of a table split into --of partitions (the
    /// others are skipped), for `table-ingest --partition I`
    #[arg(long, value_name = "I", requires = "of")]
    pub partition: Option<usize>,
    /// The number of partitions (with --partition)
    #[arg(long, value_name = "N", requires = "partition")]
    pub of: Option<usize>,
    /// Do not show a progress bar
    #[arg(long)]
    pub no_progress: bool,
}

/// A range of one field's values: `--from` (inclusive) and `--to` (exclusive).
#[derive(Debug, Args)]
pub struct RangeArgs {
    /// Lower bound (inclusive)
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Upper bound (exclusive)
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Make --to inclusive
    #[arg(long, requires = "to")]
    pub to_inclusive: bool,
    /// Make --from exclusive
    #[arg(long, requires = "from")]
    pub from_exclusive: bool,
}

/// Arguments of `select`.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// Table name
    pub table: String,
    /// Index to read through (`primary` for the primary key)
    #[arg(long, value_name = "NAME", default_value = "primary")]
    pub index: String,
    /// Equality on the next field of the index (repeat for a longer prefix)
    #[arg(long, value_name = "V", allow_hyphen_values = true)]
    pub eq: Vec<String>,
    /// The range on the field after the equalities
    #[command(flatten)]
    pub range: RangeArgs,
    /// Descending index order (with --limit: the last N rows)
    #[arg(long)]
    pub reverse: bool,
    /// Print at most N rows
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Print the number of matching rows (at most --limit) instead of the rows
    #[arg(long, conflicts_with = "format")]
    pub count: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = RowsFormat::Jsonl)]
    pub format: RowsFormat,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::args::{Cli, Command};

    use super::*;

    fn parse(args: &[&str]) -> TableCommand {
        let mut all = vec!["strata", "--db", "d"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Table(t) => t,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn negative_and_hyphen_keys() {
        match parse(&["row-get", "t", "-5", "--format", "tsv", "--", "-x"]) {
            TableCommand::RowGet { table, pk, format } => {
                assert_eq!(table, "t");
                assert_eq!(pk, ["-5", "-x"]);
                assert_eq!(format, RowFormat::Tsv);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["update", "t", "-5", "7", "--set", "a=-1", "--set", "b=x"]) {
            TableCommand::Update { pk, set, .. } => {
                assert_eq!(pk, ["-5", "7"]);
                assert_eq!(set, ["a=-1", "b=x"]);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["row-delete", "t", "-1.5", "2"]) {
            TableCommand::RowDelete { pk, .. } => assert_eq!(pk, ["-1.5", "2"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn select_flags() {
        match parse(&[
            "select",
            "t",
            "--index",
            "ix",
            "--eq",
            "-1",
            "--eq",
            "b",
            "--from",
            "-3",
            "--to",
            "9",
            "--to-inclusive",
            "--reverse",
            "--limit",
            "4",
        ]) {
            TableCommand::Select(s) => {
                assert_eq!(s.index, "ix");
                assert_eq!(s.eq, ["-1", "b"]);
                assert_eq!(s.range.from.as_deref(), Some("-3"));
                assert_eq!(s.range.to.as_deref(), Some("9"));
                assert!(s.range.to_inclusive && !s.range.from_exclusive && s.reverse && !s.count);
                assert_eq!(s.limit, Some(4));
                assert_eq!(s.format, RowsFormat::Jsonl);
            }
            other => panic!("{other:?}"),
        }
        let mut all = vec!["strata", "select", "t", "--to-inclusive"];
        assert!(Cli::try_parse_from(&all).is_err(), "--to-inclusive needs --to");
        all = vec!["strata", "select", "t", "--count", "--format", "tsv"];
        assert!(Cli::try_parse_from(&all).is_err());
    }

    #[test]
    fn create_table_needs_exactly_one_source() {
        assert!(Cli::try_parse_from(["strata", "create-table"]).is_err());
        assert!(Cli::try_parse_from(["strata", "create-table", "x", "--file", "f"]).is_err());
        match parse(&["create-table", "--file", "f"]) {
            TableCommand::CreateTable { schema, file, .. } => {
                assert_eq!(schema, None);
                assert_eq!(file, Some(PathBuf::from("f")));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn load_defaults() {
        match parse(&["load", "t", "rows.csv"]) {
            TableCommand::Load(l) => {
                assert_eq!(l.format, None);
                assert_eq!(l.mode, LoadMode::Insert);
                assert_eq!(l.batch, 1000);
            }
            other => panic!("{other:?}"),
        }
    }
}
