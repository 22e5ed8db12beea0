//! What each subcommand does.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::ops::Bound;
use std::path::Path;

use strata::db::DEFAULT_KEYSPACE;
use strata::{Db, Keyspace, Options, Stats};

use crate::args::{Cli, Command, ScanArgs};
use serde::Serialize;

use crate::bytes::{Encoding, escape};

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// Bad input that clap could not catch (exit status 2, like clap's own errors).
    Usage(String),
    /// The database refused or failed.
    Db(strata::Error),
    /// Any other failure at run time.
    Runtime(String),
    /// Writing the output failed (a closed pipe is not reported).
    Output(io::Error),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Runtime(m) => f.write_str(m),
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Output(e) => write!(f, "cannot write output: {e}"),
        }
    }
}

impl From<strata::Error> for CliError {
    fn from(e: strata::Error) -> Self {
        CliError::Db(e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Output(e)
    }
}

pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let enc = Encoding::new(cli.hex);
    // Set once, before any command opens the database.
    let _ = OPEN_FLAGS.set(OpenFlags {
        read_only: cli.read_only,
        recovery_mode: cli.recovery_mode.into(),
        serve: cli.serve,
    });
    if !matches!(cli.command, Command::Table(_)) {
        no_serve("the key-value, multimap and file commands")?;
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let db_dir = cli.db.as_deref();
    match cli.command {
        Command::Put { ks, key, value } => {
            let key = decode(enc, "KEY", &key)?;
            let value = decode(enc, "VALUE", &value)?;
            on_keyspace(db_dir, true, &ks.keyspace, |k| Ok(k.put(&key, &value)?))?;
        }
        Command::Get { ks, key } => {
            let key = decode(enc, "KEY", &key)?;
            on_keyspace_to_read(db_dir, &ks.keyspace, |k| {
                let Some(value) = k.get(&key)? else {
                    return Err(CliError::Runtime(format!(
                        "key {} not found in keyspace {:?}",
                        enc.quote(&key),
                        ks.keyspace
                    )));
                };
                writeln!(out, "{}", enc.encode(&value))?;
                Ok(())
            })?;
        }
        Command::Del { ks, key } => {
            let key = decode(enc, "KEY", &key)?;
            on_keyspace(db_dir, false, &ks.keyspace, |k| Ok(k.delete(&key)?))?;
        }
        Command::DelRange { ks, start, end } => {
            let start = decode(enc, "START", &start)?;
            let end = decode(enc, "END", &end)?;
            if start >= end {
                return Err(CliError::Usage(format!(
                    "empty range: START {} must sort before END {} (END is exclusive)",
                    enc.quote(&start),
                    enc.quote(&end)
                )));
            }
            on_keyspace(db_dir, false, &ks.keyspace, |k| {
                Ok(k.delete_range(&start[..]..&end[..])?)
            })?;
        }
        Command::DeleteKey { ks, offset, width, h } => {
            let usage = |e: strata::Error| CliError::Usage(e.to_string());
            let h: strata::delete_key::TileChoice = h.parse().map_err(usage)?;
            let key = strata::delete_key::DeleteKey::new(offset, width).map_err(usage)?;
            on_keyspace(db_dir, false, &ks.keyspace, |k| Ok(k.set_delete_key(key, h)?))?;
        }
        Command::DeleteWhere { ks, lo, hi } => {
            let lo = decode(enc, "LO", &lo)?;
            let hi = decode(enc, "HI", &hi)?;
            on_keyspace(db_dir, false, &ks.keyspace, |k| Ok(k.delete_where(&lo, &hi)?))?;
        }
        Command::Scan(args) => scan(db_dir, enc, args, &mut out)?,
        Command::Stats { json } => {
            let db = open_to_read(db_dir)?;
            let stats = db.stats();
            if json {
                writeln!(out, "{}", stats_json(&stats))?;
            } else {
                writeln!(out, "{stats}")?;
            }
            db.close()?;
        }
        Command::Compact { keyspace: name } => {
            let db = open(db_dir, false)?;
            match name {
                Some(name) => keyspace(&db, &name)?.compact_range(..)?,
                None => db.compact_range()?,
            }
            db.close()?;
        }
        Command::Flush => {
            let db = open(db_dir, false)?;
            db.flush()?;
            db.close()?;
        }
        Command::Keyspaces { all } => {
            let db = open_to_read(db_dir)?;
            let names = db.list_keyspaces().into_iter();
            for name in names.filter(|n| all || !n.starts_with(strata::db::RESERVED_PREFIX)) {
                writeln!(out, "{}", escape(name.as_bytes()))?;
            }
            db.close()?;
        }
        Command::CreateKeyspace { name } => {
            let db = open(db_dir, true)?;
            db.create_keyspace(&name)?;
            db.close()?;
        }
        Command::DropKeyspace { name } => {
            let db = open(db_dir, false)?;
            db.drop_keyspace(&name)?;
            db.close()?;
        }
        Command::DumpSst { file, entries } => {
            let show = strata::sstable::DumpOptions {
                entries,
                hex: enc == Encoding::Hex,
            };
            let text = strata::sstable::dump(&strata::fs::RealFs, &file, show)?;
            write!(out, "{text}")?;
        }
        Command::Table(cmd) => crate::table_cmds::run(db_dir, cmd, &mut out)?,
        Command::SstWrite(args) => crate::ingest_cmds::sst_write(args, enc, &mut out)?,
        Command::Ingest { ks, files, link } => {
            crate::ingest_cmds::ingest(db_dir, &ks.keyspace, &files, link, &mut out)?
        }
        Command::Multimap(cmd) => crate::multimap_cmds::run(db_dir, enc, cmd, &mut out)?,
        Command::Repair { to } => {
            let src = given(db_dir)?;
            let mode = OPEN_FLAGS.get().map(|f| f.recovery_mode).unwrap_or_default();
            let report = strata::repair::salvage(src, &to, mode)?;
            writeln!(out, "{report}")?;
            if !report.lost.is_empty() {
                out.flush()?;
                return Err(CliError::Runtime(format!(
                    "salvage lost data in {} place(s); see LOST lines",
                    report.lost.len()
                )));
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn decode(enc: Encoding, what: &str, arg: &str) -> Result<Vec<u8>> {
    enc.decode(what, arg).map_err(CliError::Usage)
}

/// The global flags that shape every open.
#[derive(Debug, Clone)]
struct OpenFlags {
    read_only: bool,
    recovery_mode: strata::RecoveryMode,
    /// `--serve`: the partitions a table command opens.
    serve: Option<Vec<usize>>,
}

static OPEN_FLAGS: std::sync::OnceLock<OpenFlags> = std::sync::OnceLock::new();

/// Opens the database in `dir`; only commands that write may create one.
pub(crate) fn open(dir: Option<&Path>, create: bool) -> Result<Db> {
    open_with(dir, open_options(create))
}

/// [`open`] for a command that only reads: read-only, so the open's recovery changes
/// nothing (it would sweep files a check must see, such as unlisted SSTables).
pub(crate) fn open_to_read(dir: Option<&Path>) -> Result<Db> {
    open_with(dir, read_options())
}

/// The options of an open for a command that only reads ([`open_to_read`]).
pub(crate) fn read_options() -> Options {
    Options {
        read_only: true,
        create_if_missing: false,
        ..open_options(false)
    }
}

/// The database directory, which every command but `dump-sst` and `sst-write` needs.
pub(crate) fn given(dir: Option<&Path>) -> Result<&Path> {
    dir.ok_or_else(|| CliError::Usage("no database given: pass --db DIR or set STRATA_DB".into()))
}

fn open_with(dir: Option<&Path>, opts: Options) -> Result<Db> {
    let dir = given(dir)?;
    no_serve("a command that works on one database")?;
    if crate::store::is_partitioned(dir) {
        return Err(CliError::Runtime(format!(
            "{} is a partitioned database: this command works on one database (the row, select, \
             tables, table-stats and table-ingest --partition commands take a partitioned one; \
             pass --db {}/p000 for one partition)",
            dir.display(),
            dir.display()
        )));
    }
    Ok(Db::open(dir, opts)?)
}

/// `--serve`, when given.
pub(crate) fn serve_flag() -> Option<&'static [usize]> {
    OPEN_FLAGS.get().and_then(|f| f.serve.as_deref())
}

/// Refuses `--serve` for `what`, which opens no partitioned table.
pub(crate) fn no_serve(what: &str) -> Result<()> {
    match serve_flag() {
        Some(_) => Err(CliError::Usage(format!(
            "--serve is for the table commands on a partitioned database, not {what}"
        ))),
        None => Ok(()),
    }
}

/// The options every open uses: the global flags, and creating only when `create`.
pub(crate) fn open_options(create: bool) -> Options {
    let (read_only, recovery_mode) = OPEN_FLAGS.get().map_or((false, strata::RecoveryMode::default()), |f| {
        (f.read_only, f.recovery_mode)
    });
    Options {
        create_if_missing: create && !read_only,
        read_only,
        recovery_mode,
        ..Options::default()
    }
}

/// The keyspace `name`, with the existing names in the error if there is none.
/// Opens the database, runs `f` on keyspace `name`, then closes the database.
fn on_keyspace<T>(dir: Option<&Path>, create: bool, name: &str, f: impl FnOnce(&Keyspace) -> Result<T>) -> Result<T> {
    in_keyspace(open(dir, create)?, name, f)
}

/// [`on_keyspace`] for a command that only reads ([`open_to_read`]).
fn on_keyspace_to_read<T>(dir: Option<&Path>, name: &str, f: impl FnOnce(&Keyspace) -> Result<T>) -> Result<T> {
    in_keyspace(open_to_read(dir)?, name, f)
}

/// Runs `f` on keyspace `name` of `db`, then closes it.
fn in_keyspace<T>(db: Db, name: &str, f: impl FnOnce(&Keyspace) -> Result<T>) -> Result<T> {
    let out = f(&keyspace(&db, name)?)?;
    db.close()?;
    Ok(out)
}

pub(crate) fn keyspace(db: &Db, name: &str) -> Result<Keyspace> {
    if name == DEFAULT_KEYSPACE {
        return Ok(db.default_keyspace());
    }
    match db.keyspace(name) {
        Ok(ks) => Ok(ks),
        Err(strata::Error::NotFound(_)) => Err(CliError::Runtime(format!(
            "keyspace {name:?} not found (existing keyspaces: {})",
            db.list_keyspaces().join(", ")
        ))),
        Err(e) => Err(e.into()),
    }
}

fn scan(db_dir: Option<&Path>, enc: Encoding, args: ScanArgs, out: &mut impl Write) -> Result<()> {
    let from = args.from.as_deref().map(|k| decode(enc, "--from", k)).transpose()?;
    let to = args.to.as_deref().map(|k| decode(enc, "--to", k)).transpose()?;
    if let (Some(f), Some(t)) = (&from, &to)
        && f > t
    {
        return Err(CliError::Usage(format!(
            "--from {} sorts after --to {}",
            enc.quote(f),
            enc.quote(t)
        )));
    }
    let db = open_to_read(db_dir)?;
    let ks = keyspace(&db, &args.ks.keyspace)?;
    {
        let lo = from.map_or(Bound::Unbounded, Bound::Included);
        let hi = to.map_or(Bound::Unbounded, Bound::Excluded);
        let scan = ks.scan((lo, hi))?;
        let limit = args.limit.unwrap_or(usize::MAX);
        if args.reverse {
            print_entries(scan.rev().take(limit), enc, args.keys_only, out)?;
        } else {
            print_entries(scan.take(limit), enc, args.keys_only, out)?;
        }
    }
    drop(ks);
    db.close()?;
    Ok(())
}

/// Prints `key<TAB>value` (or just `key`) lines.
fn print_entries(
    entries: impl Iterator<Item = strata::Result<(Vec<u8>, Vec<u8>)>>,
    enc: Encoding,
    keys_only: bool,
    out: &mut impl Write,
) -> Result<()> {
    for entry in entries {
        let (k, v) = entry?;
        if keys_only {
            writeln!(out, "{}", enc.encode(&k))?;
        } else {
            writeln!(out, "{}\t{}", enc.encode(&k), enc.encode(&v))?;
        }
    }
    Ok(())
}

/// The stats as one JSON object.
fn stats_json(s: &Stats) -> String {
    #[derive(Serialize)]
    struct Level {
        level: usize,
        runs: usize,
        files: usize,
        bytes: u64,
        entries: u64,
        tombstones: u64,
    }
    #[derive(Serialize)]
    struct Keyspace<'a> {
        name: &'a str,
        id: u32,
        bytes: u64,
        entries: u64,
        tombstones: u64,
        levels: Vec<Level>,
    }
    #[derive(Serialize)]
    struct Report<'a> {
        keyspaces: Vec<Keyspace<'a>>,
        /// Non-finite (nothing written yet) is `null`.
        write_amplification: f64,
        total_bytes: u64,
        user_bytes_written: u64,
        user_ops_written: u64,
        wal_bytes_written: u64,
        wal_syncs: u64,
        flushes: u64,
        flush_bytes_written: u64,
        compactions: u64,
        trivial_moves: u64,
        compaction_bytes_read: u64,
        compaction_bytes_written: u64,
        stalls: u64,
        stall_micros: u64,
        memtable_bytes: u64,
        immutable_memtables: usize,
        block_cache_usage: u64,
        block_cache_capacity: u64,
        last_seq: u64,
        snapshots: usize,
        background_error: Option<&'a str>,
    }
    let report = Report {
        keyspaces: s
            .keyspaces
            .iter()
            .map(|ks| Keyspace {
                name: &ks.name,
                id: ks.id,
                bytes: ks.bytes(),
                entries: ks.entries(),
                tombstones: ks.tombstones(),
                levels: ks
                    .levels
                    .iter()
                    .map(|l| Level {
                        level: l.level,
                        runs: l.runs,
                        files: l.files,
                        bytes: l.bytes,
                        entries: l.entries,
                        tombstones: l.tombstones,
                    })
                    .collect(),
            })
            .collect(),
        write_amplification: s.write_amplification,
        total_bytes: s.total_bytes(),
        user_bytes_written: s.user_bytes_written,
        user_ops_written: s.user_ops_written,
        wal_bytes_written: s.wal_bytes_written,
        wal_syncs: s.wal_syncs,
        flushes: s.flushes,
        flush_bytes_written: s.flush_bytes_written,
        compactions: s.compactions,
        trivial_moves: s.trivial_moves,
        compaction_bytes_read: s.compaction_bytes_read,
        compaction_bytes_written: s.compaction_bytes_written,
        stalls: s.stalls,
        stall_micros: s.stall_micros,
        memtable_bytes: s.memtable_bytes,
        immutable_memtables: s.immutable_memtables,
        block_cache_usage: s.block_cache_usage,
        block_cache_capacity: s.block_cache_capacity,
        last_seq: s.last_seq,
        snapshots: s.snapshots,
        background_error: s.background_error.as_deref(),
    };
    // Plain structs of numbers and strings always serialize.
    serde_json::to_string(&report).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use strata::{KeyspaceStats, LevelStats};

    use super::*;

    #[test]
    fn stats_json_has_levels_and_counters() {
        let s = Stats {
            keyspaces: vec![KeyspaceStats {
                name: "a\"b".into(),
                id: 3,
                levels: vec![LevelStats {
                    level: 0,
                    runs: 2,
                    files: 2,
                    bytes: 100,
                    entries: 7,
                    tombstones: 1,
                    ..LevelStats::default()
                }],
            }],
            flushes: 4,
            write_amplification: 1.5,
            background_error: Some("boom".into()),
            ..Stats::default()
        };
        let j = stats_json(&s);
        assert!(j.starts_with('{') && j.ends_with('}'), "{j}");
        assert!(
            j.contains(r#""name":"a\"b","id":3,"bytes":100,"entries":7,"tombstones":1"#),
            "{j}"
        );
        assert!(
            j.contains(r#""levels":[{"level":0,"runs":2,"files":2,"bytes":100,"entries":7,"tombstones":1}]"#),
            "{j}"
        );
        assert!(j.contains(r#""write_amplification":1.5"#), "{j}");
        assert!(j.contains(r#""flushes":4"#), "{j}");
        assert!(j.contains(r#""background_error":"boom""#), "{j}");
    }

    #[test]
    fn stats_json_maps_non_finite_amplification_to_null() {
        let s = Stats {
            write_amplification: f64::NAN,
            ..Stats::default()
        };
        let j = stats_json(&s);
        assert!(j.contains(r#""write_amplification":null"#), "{j}");
        assert!(j.contains(r#""keyspaces":[]"#), "{j}");
        assert!(j.contains(r#""background_error":null"#), "{j}");
    }
}
