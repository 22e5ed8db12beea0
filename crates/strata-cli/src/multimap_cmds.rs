//! What the multimap subcommands do.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::ops::Bound;
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata::multimap::{MultiMap, encoding};
use strata::partition::{DESCRIPTOR_FILE, Partitions};
use strata::{Db, Error};

use crate::bytes::Encoding;
use crate::commands::{CliError, Result, open, open_options};
use crate::multimap_args::{MultimapCommand, MultimapGetArgs, MultimapLoadArgs};
use crate::table_args::LoadFormat;
use crate::table_cmds::infer_format;

/// A plain or a partitioned database directory.
enum Store {
    One(Db),
    Parts(Partitions),
}

impl Store {
    /// Opens `dir`: partitioned if it holds a partition descriptor, else one database.
    /// `partitions` asks for a partitioned directory (created when missing).
    fn open(dir: Option<&Path>, create: bool, partitions: Option<usize>) -> Result<Store> {
        let d = crate::commands::given(dir)?;
        if d.join(DESCRIPTOR_FILE).exists() {
            let opts = open_options(false);
            return Ok(Store::Parts(match partitions {
                Some(n) => Partitions::open(d, n, opts)?,
                None => Partitions::open_existing(d, opts)?,
            }));
        }
        match partitions {
            Some(n) => {
                if d.join("CURRENT").exists() {
                    return Err(CliError::Usage(format!(
                        "{} holds an unpartitioned database: --partitions applies to a new directory",
                        d.display()
                    )));
                }
                Ok(Store::Parts(Partitions::open(d, n, open_options(create))?))
            }
            None => Ok(Store::One(open(dir, create)?)),
        }
    }

    /// [`open`](Self::open) for a command that only reads: read-only, so the open's
    /// recovery changes nothing (`commands::open_to_read`).
    fn open_to_read(dir: Option<&Path>) -> Result<Store> {
        let d = crate::commands::given(dir)?;
        if d.join(DESCRIPTOR_FILE).exists() {
            return Ok(Store::Parts(Partitions::open_existing(
                d,
                crate::commands::read_options(),
            )?));
        }
        Ok(Store::One(crate::commands::open_to_read(dir)?))
    }

    /// The multimap `name`; created only when `create`.
    fn multimap(&self, name: &str, create: bool) -> Result<MultiMap> {
        // True when the multimap is new (and may be created).
        let missing = |db: &Db| -> Result<bool> {
            match db.keyspace(name) {
                Ok(_) => Ok(false),
                Err(Error::NotFound(_)) if !create => Err(CliError::Runtime(format!(
                    "multimap {name:?} not found (existing keyspaces: {})",
                    db.list_keyspaces().join(", ")
                ))),
                Err(Error::NotFound(_)) => Ok(true),
                Err(e) => Err(e.into()),
            }
        };
        let (mm, new) = match self {
            Store::One(db) => {
                let new = missing(db)?;
                (MultiMap::new(db.keyspace_or_create(name)?), new)
            }
            Store::Parts(p) => {
                let new = missing(p.db(0))?;
                (MultiMap::partitioned(p.keyspace(name)?), new)
            }
        };
        if new {
            // A new multimap's tables filter by key (`MultiMap::filter_by_key`).
            mm.filter_by_key()?;
        }
        Ok(mm)
    }

    fn close(self) -> Result<()> {
        match self {
            Store::One(db) => db.close()?,
            Store::Parts(p) => p.close()?,
        }
        Ok(())
    }
}

fn check(key: &[u8], value: &[u8]) -> Result<()> {
    encoding::check(key, value).map_err(CliError::Usage)
}

/// Runs one multimap subcommand.
pub fn run(db_dir: Option<&Path>, enc: Encoding, cmd: MultimapCommand, out: &mut impl Write) -> Result<()> {
    match cmd {
        MultimapCommand::Put { name, key, values } => {
            let key = enc.decode("KEY", &key).map_err(CliError::Usage)?;
            let values = values
                .iter()
                .map(|v| enc.decode("VALUE", v).map_err(CliError::Usage))
                .collect::<Result<Vec<_>>>()?;
            values.iter().try_for_each(|v| check(&key, v))?;
            let store = Store::open(db_dir, true, None)?;
            let mm = store.multimap(&name, true)?;
            for v in &values {
                mm.put(&key, v)?;
            }
            drop(mm);
            store.close()
        }
        MultimapCommand::Get(args) => get(db_dir, enc, args, out),
        MultimapCommand::Del { name, key, values, all } => {
            let key = enc.decode("KEY", &key).map_err(CliError::Usage)?;
            if values.is_empty() && !all {
                return Err(CliError::Usage("give the VALUE(s) to remove, or --all".into()));
            }
            let values = values
                .iter()
                .map(|v| enc.decode("VALUE", v).map_err(CliError::Usage))
                .collect::<Result<Vec<_>>>()?;
            values.iter().try_for_each(|v| check(&key, v))?;
            check(&key, b"")?;
            let store = Store::open(db_dir, false, None)?;
            let mm = store.multimap(&name, false)?;
            if all {
                mm.delete_all(&key)?;
            }
            for v in &values {
                mm.delete(&key, v)?;
            }
            drop(mm);
            store.close()
        }
        MultimapCommand::Load(args) => load(db_dir, enc, args, out),
    }
}

fn get(db_dir: Option<&Path>, enc: Encoding, args: MultimapGetArgs, out: &mut impl Write) -> Result<()> {
    let key = enc.decode("KEY", &args.key).map_err(CliError::Usage)?;
    check(&key, b"")?;
    let from = args
        .from
        .as_deref()
        .map(|v| enc.decode("--from", v).map_err(CliError::Usage))
        .transpose()?;
    let after = args
        .after
        .as_deref()
        .map(|v| enc.decode("--after", v).map_err(CliError::Usage))
        .transpose()?;
    let store = Store::open_to_read(db_dir)?;
    let mm = store.multimap(&args.name, false)?;
    let start = match (from, after) {
        (Some(v), _) => Bound::Included(v),
        (None, Some(v)) => Bound::Excluded(v),
        (None, None) => Bound::Unbounded,
    };
    // Paging backwards starts at the bound from above.
    let range = if args.reverse {
        (Bound::Unbounded, start)
    } else {
        (start, Bound::Unbounded)
    };
    let values = mm.get_range(&key, range)?;
    let limit = args.limit.unwrap_or(usize::MAX);
    let mut n = 0u64;
    let mut emit = |v: strata::Result<Vec<u8>>| -> Result<()> {
        let v = v?;
        n += 1;
        if !args.count {
            writeln!(out, "{}", enc.encode(&v))?;
        }
        Ok(())
    };
    if args.reverse {
        values.rev().take(limit).try_for_each(&mut emit)?;
    } else {
        values.take(limit).try_for_each(&mut emit)?;
    }
    if args.count {
        writeln!(out, "{n}")?;
    }
    drop(mm);
    store.close()
}

/// A parsed input line: its number, key and value.
type Pair = (u64, Vec<u8>, Vec<u8>);

/// Reads (line, key, value) from a CSV (header row) or JSON Lines file.
struct PairReader {
    inner: PairSource,
    enc: Encoding,
}

enum PairSource {
    Csv {
        rdr: csv::Reader<File>,
        key_col: usize,
        value_col: usize,
        rec: csv::StringRecord,
    },
    Jsonl {
        lines: std::io::Lines<BufReader<File>>,
        line: u64,
        key_field: String,
        value_field: String,
    },
}

impl PairReader {
    fn open(path: &Path, format: LoadFormat, key_field: &str, value_field: &str, enc: Encoding) -> Result<PairReader> {
        let f = File::open(path).map_err(|e| CliError::Runtime(format!("cannot open {}: {e}", path.display())))?;
        let inner = match format {
            LoadFormat::Csv => {
                let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(f);
                let header = rdr
                    .headers()
                    .map_err(|e| CliError::Runtime(format!("line 1: cannot read the header: {e}")))?
                    .clone();
                let col = |name: &str| {
                    header.iter().position(|h| h.trim() == name).ok_or_else(|| {
                        CliError::Runtime(format!(
                            "line 1: the header has no column {name:?} (columns: {})",
                            header.iter().collect::<Vec<_>>().join(", ")
                        ))
                    })
                };
                PairSource::Csv {
                    key_col: col(key_field)?,
                    value_col: col(value_field)?,
                    rdr,
                    rec: csv::StringRecord::new(),
                }
            }
            LoadFormat::Jsonl => PairSource::Jsonl {
                lines: BufReader::new(f).lines(),
                line: 0,
                key_field: key_field.to_string(),
                value_field: value_field.to_string(),
            },
        };
        Ok(PairReader { inner, enc })
    }

    fn bytes(&self, line: u64, what: &str, text: &str) -> Result<Vec<u8>> {
        self.enc
            .decode(what, text)
            .map_err(|e| CliError::Runtime(format!("line {line}: {e}")))
    }

    /// The next pair, checked against the multimap's limits.
    fn next_pair(&mut self) -> Option<Result<Pair>> {
        let (line, k, v) = match &mut self.inner {
            PairSource::Csv {
                rdr,
                key_col,
                value_col,
                rec,
            } => {
                match rdr.read_record(rec) {
                    Ok(false) => return None,
                    Ok(true) => {}
                    Err(e) => {
                        let line = e.position().map_or(0, |p| p.line());
                        return Some(Err(CliError::Runtime(format!("line {line}: {e}"))));
                    }
                }
                let line = rec.position().map_or(0, |p| p.line());
                let (Some(k), Some(v)) = (rec.get(*key_col), rec.get(*value_col)) else {
                    return Some(Err(CliError::Runtime(format!("line {line}: missing cells"))));
                };
                (line, k.to_string(), v.to_string())
            }
            PairSource::Jsonl {
                lines,
                line,
                key_field,
                value_field,
            } => loop {
                let text = match lines.next()? {
                    Ok(t) => t,
                    Err(e) => return Some(Err(CliError::Runtime(format!("line {}: cannot read: {e}", *line + 1)))),
                };
                *line += 1;
                if text.trim().is_empty() {
                    continue;
                }
                let obj: serde_json::Value = match serde_json::from_str(&text) {
                    Ok(o) => o,
                    Err(e) => return Some(Err(CliError::Runtime(format!("line {line}: not JSON: {e}")))),
                };
                let field = |name: &str| -> Result<String> {
                    match obj.get(name) {
                        Some(serde_json::Value::String(s)) => Ok(s.clone()),
                        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string()),
                        Some(_) => Err(CliError::Runtime(format!(
                            "line {line}: field {name:?} is not a string, number or boolean"
                        ))),
                        None => Err(CliError::Runtime(format!("line {line}: no field {name:?}"))),
                    }
                };
                match (field(key_field), field(value_field)) {
                    (Ok(k), Ok(v)) => break (*line, k, v),
                    (Err(e), _) | (_, Err(e)) => return Some(Err(e)),
                }
            },
        };
        let r = (|| {
            let k = self.bytes(line, "the key", &k)?;
            let v = self.bytes(line, "the value", &v)?;
            encoding::check(&k, &v).map_err(|e| CliError::Runtime(format!("line {line}: {e}")))?;
            Ok((line, k, v))
        })();
        Some(r)
    }
}

fn load(db_dir: Option<&Path>, enc: Encoding, args: MultimapLoadArgs, out: &mut impl Write) -> Result<()> {
    if args.threads == 0 {
        return Err(CliError::Usage("--threads must be at least 1".into()));
    }
    if let Some(n) = args.partitions {
        strata::partition::check_count(n).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    let format = match args.format {
        Some(f) => f,
        None => infer_format(&args.file)?,
    };
    let open_reader = || PairReader::open(&args.file, format, &args.key_field, &args.value_field, enc);
    // First pass: every line parses and fits, so a bad file writes nothing.
    let mut total = 0u64;
    let mut rdr = open_reader()?;
    while let Some(p) = rdr.next_pair() {
        p?;
        total += 1;
    }
    let store = Store::open(db_dir, true, args.partitions)?;
    let mm = store.multimap(&args.name, true)?;
    let pb = progress_bar(total, args.no_progress);
    let mut rdr = open_reader()?;
    let mut failed: Option<CliError> = None;
    let pairs = std::iter::from_fn(|| match rdr.next_pair()? {
        Ok((_, k, v)) => Some((k, v)),
        Err(e) => {
            // The file changed since the first pass.
            failed = Some(e);
            None
        }
    });
    let loaded = mm.load_with_progress(pairs, args.threads, |n| pb.set_position(n));
    pb.finish_and_clear();
    let loaded = loaded?;
    if let Some(e) = failed {
        return Err(e);
    }
    let parts = mm.partition_count();
    drop(mm);
    store.close()?;
    writeln!(
        out,
        "loaded {loaded} pair{} into multimap {} ({parts} partition{})",
        if loaded == 1 { "" } else { "s" },
        args.name,
        if parts == 1 { "" } else { "s" }
    )?;
    Ok(())
}

fn progress_bar(len: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} pairs {per_sec} eta {eta}") {
        pb.set_style(style);
    }
    pb
}
