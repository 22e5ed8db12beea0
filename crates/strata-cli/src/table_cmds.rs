//! What each table subcommand does.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata::Db;
use strata::table::check::CheckOptions;
use strata::table::schema::{Field, IndexDef, Schema};
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::table::{Row, Table, TableStats};

use crate::commands::{CliError, Result, open};
use crate::rows::{self, TextSource};
use crate::store::{Store, table_not_found};
use crate::table_args::{LoadArgs, LoadFormat, LoadMode, RangeArgs, RowFormat, RowsFormat, SelectArgs, TableCommand};
use serde::Serialize;
use strata::table::select::Query;

/// Runs one table subcommand.
pub fn run(db_dir: Option<&Path>, cmd: TableCommand, out: &mut impl Write) -> Result<()> {
    match cmd {
        TableCommand::CreateTable {
            schema,
            file,
            partitions,
        } => {
            let schema = read_schema(schema, file)?;
            let db = Store::open(db_dir, true, partitions)?;
            db.create_table(schema)?;
            db.close()?;
        }
        TableCommand::Tables { schema } => {
            let db = Store::open_to_read(db_dir)?;
            for name in db.list_tables() {
                if schema {
                    writeln!(out, "{}", db.table(&name)?.schema()?)?;
                } else {
                    writeln!(out, "{name}")?;
                }
            }
            db.close()?;
        }
        TableCommand::DropTable { name } => {
            let db = open(db_dir, false)?;
            table(&db, &name)?;
            db.drop_table(&name)?;
            db.close()?;
        }
        TableCommand::CreateIndex {
            table: tname,
            name,
            fields,
            unique,
        } => {
            let fields: Vec<&str> = fields.split(',').map(str::trim).collect();
            if fields.iter().any(|f| f.is_empty()) {
                return Err(CliError::Usage("FIELD[,FIELD...] has an empty field name".to_string()));
            }
            let db = open(db_dir, false)?;
            let t = table(&db, &tname)?;
            let schema = t.schema()?;
            if let Some(f) = fields.iter().find(|f| schema.field(f).is_none()) {
                return Err(CliError::Runtime(format!(
                    "table {tname:?} has no field {f:?} (fields: {})",
                    rows::field_names(&schema)
                )));
            }
            t.create_index(IndexDef::new(&name, &fields, unique))?;
            drop(t);
            db.close()?;
        }
        TableCommand::DropIndex { table: tname, name } => {
            let db = open(db_dir, false)?;
            let t = table(&db, &tname)?;
            check_index(&t.schema()?, &name, false)?;
            t.drop_index(&name)?;
            drop(t);
            db.close()?;
        }
        TableCommand::Load(args) => load(db_dir, args, out)?,
        TableCommand::TableWrite(args) => crate::ingest_cmds::table_write(db_dir, args, out)?,
        TableCommand::TableIngest {
            table: tname,
            dir,
            link,
            partition,
        } => crate::ingest_cmds::table_ingest(db_dir, &tname, &dir, link, partition, out)?,
        TableCommand::RowGet {
            table: tname,
            pk,
            format,
        } => {
            let db = Store::open_to_read(db_dir)?;
            let t = db.table(&tname)?;
            let schema = t.schema()?;
            let pk = pk_values(&schema, &pk)?;
            let Some(row) = t.get(&pk)? else {
                return Err(CliError::Runtime(format!(
                    "row {} not found in table {tname:?}",
                    key_text(&pk)
                )));
            };
            match format {
                RowFormat::Json => writeln!(out, "{}", rows::row_json(&schema, &row))?,
                RowFormat::Tsv => {
                    writeln!(out, "{}", rows::header_tsv(&schema))?;
                    writeln!(out, "{}", rows::row_tsv(&row))?;
                }
            }
            drop(t);
            db.close()?;
        }
        TableCommand::Select(args) => select(db_dir, args, out)?,
        TableCommand::RowDelete { table: tname, pk } => {
            let db = Store::open(db_dir, false, None)?;
            let t = db.table(&tname)?;
            let pk = pk_values(&t.schema()?, &pk)?;
            t.delete(&pk)?;
            drop(t);
            db.close()?;
        }
        TableCommand::Insert { table: tname, row } => write_json_row(db_dir, &tname, &row, LoadMode::Insert)?,
        TableCommand::Replace { table: tname, row } => write_json_row(db_dir, &tname, &row, LoadMode::Replace)?,
        TableCommand::Update { table: tname, pk, set } => {
            let db = Store::open(db_dir, false, None)?;
            let t = db.table(&tname)?;
            let schema = t.schema()?;
            let pk = pk_values(&schema, &pk)?;
            let set = set_values(&schema, &set)?;
            let set_refs: Vec<(&str, Value)> = set.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
            if !t.update(&pk, &set_refs)? {
                return Err(CliError::Runtime(format!(
                    "row {} not found in table {tname:?}",
                    key_text(&pk)
                )));
            }
            drop(t);
            db.close()?;
        }
        TableCommand::TableDeleteKey { table: tname, field, h } => {
            let h: strata::delete_key::TileChoice =
                h.parse().map_err(|e: strata::Error| CliError::Usage(e.to_string()))?;
            let db = open(db_dir, false)?;
            table(&db, &tname)?.set_delete_key(&field, h)?;
            db.close()?;
        }
        TableCommand::TableDeleteWhere {
            table: tname,
            field,
            range,
        } => {
            let db = open(db_dir, false)?;
            let t = table(&db, &tname)?;
            let schema = t.schema()?;
            let f = schema.field(&field).ok_or_else(|| {
                CliError::Usage(format!(
                    "table {tname:?} has no field {field:?} (fields: {})",
                    rows::field_names(&schema)
                ))
            })?;
            t.delete_where(&field, bounds(f, &range)?)?;
            drop(t);
            db.close()?;
        }
        TableCommand::TableStats { table: tname, json } => {
            let db = Store::open_to_read(db_dir)?;
            let t = db.table(&tname)?;
            let stats = t.stats()?;
            if json {
                writeln!(out, "{}", table_stats_json(&stats))?;
            } else {
                writeln!(out, "{stats}")?;
            }
            drop(t);
            db.close()?;
        }
        TableCommand::Check { compact } => {
            // Only `--compact` writes; a plain check must see the directory as it is.
            let db = if compact {
                open(db_dir, false)?
            } else {
                crate::commands::open_to_read(db_dir)?
            };
            let report = db.check(CheckOptions { compact_first: compact })?;
            writeln!(out, "{report}")?;
            db.close()?;
            if !report.ok() {
                out.flush()?;
                return Err(CliError::Runtime(format!(
                    "check found {} problem(s)",
                    report.problems.len()
                )));
            }
        }
    }
    Ok(())
}

/// The bounds `range` gives on `field`'s values.
fn bounds(field: &Field, range: &RangeArgs) -> Result<(Bound<Value>, Bound<Value>)> {
    let parse = |flag: &str, a: &Option<String>| -> Result<Option<Value>> {
        a.as_deref()
            .map(|a| rows::parse_text(field, a, TextSource::Arg).map_err(|e| CliError::Usage(format!("{flag}: {e}"))))
            .transpose()
    };
    let from = parse("--from", &range.from)?;
    let to = parse("--to", &range.to)?;
    if let (Some(f), Some(t)) = (&from, &to)
        && f.cmp_total(t).is_gt()
    {
        return Err(CliError::Usage(format!("--from {f} sorts after --to {t}")));
    }
    let lo = match from {
        None => Bound::Unbounded,
        Some(v) if range.from_exclusive => Bound::Excluded(v),
        Some(v) => Bound::Included(v),
    };
    let hi = match to {
        None => Bound::Unbounded,
        Some(v) if range.to_inclusive => Bound::Included(v),
        Some(v) => Bound::Excluded(v),
    };
    Ok((lo, hi))
}

/// The schema from the text argument or the file.
pub(crate) fn read_schema(text: Option<String>, file: Option<PathBuf>) -> Result<Schema> {
    let (text, from) = match (text, file) {
        (Some(t), _) => (t, String::new()),
        (None, Some(f)) => {
            let t = std::fs::read_to_string(&f)
                .map_err(|e| CliError::Runtime(format!("cannot read {}: {e}", f.display())))?;
            (t, format!(" in {}", f.display()))
        }
        (None, None) => return Err(CliError::Usage("give the schema text or --file".to_string())),
    };
    Schema::parse(&text).map_err(|e| {
        let msg = match e {
            strata::Error::InvalidArgument(m) => m.strip_prefix("schema text: ").unwrap_or(&m).to_string(),
            other => other.to_string(),
        };
        CliError::Usage(format!("invalid schema{from}: {msg}"))
    })
}

/// The table `name`, with the existing names in the error if there is none.
pub(crate) fn table(db: &Db, name: &str) -> Result<Table> {
    match db.table(name) {
        Ok(t) => Ok(t),
        Err(strata::Error::NotFound(_)) => Err(table_not_found(name, &db.list_tables())),
        Err(e) => Err(e.into()),
    }
}

/// The key fields of index `name` (`primary` allowed when `primary_ok`), or an error
/// listing the indexes there are.
fn check_index<'s>(schema: &'s Schema, name: &str, primary_ok: bool) -> Result<Vec<&'s Field>> {
    let names: &[String] = if primary_ok && name == PRIMARY {
        &schema.primary_key
    } else if let Some(ix) = schema.index(name) {
        &ix.fields
    } else {
        let mut existing: Vec<&str> = schema.indexes.iter().map(|i| i.name.as_str()).collect();
        if primary_ok {
            existing.insert(0, PRIMARY);
        }
        return Err(CliError::Runtime(format!(
            "index {name:?} not found in table {:?} (indexes: {})",
            schema.name,
            if existing.is_empty() {
                "none".to_string()
            } else {
                existing.join(", ")
            }
        )));
    };
    Ok(names.iter().filter_map(|n| schema.field(n)).collect())
}

/// The primary key made of the `args`, parsed by the primary key fields' types.
fn pk_values(schema: &Schema, args: &[String]) -> Result<Vec<Value>> {
    let fields: Vec<&Field> = schema.primary_key.iter().filter_map(|n| schema.field(n)).collect();
    if args.len() != fields.len() {
        return Err(CliError::Usage(format!(
            "table {:?} has a primary key of {} field{} ({}), {} value{} given",
            schema.name,
            fields.len(),
            if fields.len() == 1 { "" } else { "s" },
            schema.primary_key.join(", "),
            args.len(),
            if args.len() == 1 { "" } else { "s" }
        )));
    }
    fields
        .iter()
        .zip(args)
        .map(|(f, a)| rows::parse_text(f, a, TextSource::Arg).map_err(CliError::Usage))
        .collect()
}

/// Key values as the library prints them: `(1, "a")`.
fn key_text(vals: &[Value]) -> String {
    let parts: Vec<String> = vals.iter().map(Value::to_string).collect();
    format!("({})", parts.join(", "))
}

/// `--set FIELD=VALUE` arguments, parsed by the fields' types.
fn set_values(schema: &Schema, set: &[String]) -> Result<Vec<(String, Value)>> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for s in set {
        let Some((name, text)) = s.split_once('=') else {
            return Err(CliError::Usage(format!("--set {s:?} is not FIELD=VALUE")));
        };
        let Some(field) = schema.field(name) else {
            return Err(CliError::Usage(format!(
                "--set: table {:?} has no field {name:?} (fields: {})",
                schema.name,
                rows::field_names(schema)
            )));
        };
        if schema.primary_key.iter().any(|k| k == name) {
            return Err(CliError::Usage(format!(
                "--set: {name:?} is a primary key field and cannot be updated (delete the row and insert it again)"
            )));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(CliError::Usage(format!("--set: field {name:?} is set twice")));
        }
        let v = rows::parse_text(field, text, TextSource::Arg).map_err(|e| CliError::Usage(format!("--set: {e}")))?;
        out.push((name.to_string(), v));
    }
    Ok(out)
}

/// `insert` / `replace` of one row given as a JSON object.
fn write_json_row(db_dir: Option<&Path>, tname: &str, text: &str, mode: LoadMode) -> Result<()> {
    let db = Store::open(db_dir, false, None)?;
    let t = db.table(tname)?;
    let schema = t.schema()?;
    let row = rows::row_from_json_text(&schema, text).map_err(|e| CliError::Usage(format!("invalid row: {e}")))?;
    match mode {
        LoadMode::Insert => t.insert(row)?,
        LoadMode::Replace => t.replace(row)?,
    }
    drop(t);
    db.close()?;
    Ok(())
}

fn select(db_dir: Option<&Path>, args: SelectArgs, out: &mut impl Write) -> Result<()> {
    let db = Store::open_to_read(db_dir)?;
    let t = db.table(&args.table)?;
    let schema = t.schema()?;
    let fields = check_index(&schema, &args.index, true)?;
    let ranged = args.range.from.is_some() || args.range.to.is_some();
    let field_list = || {
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.join(", ")
    };
    if args.eq.len() > fields.len() || (ranged && args.eq.len() == fields.len()) {
        return Err(CliError::Usage(format!(
            "index {:?} has {} field{} ({}): {} --eq value{}{} given",
            args.index,
            fields.len(),
            if fields.len() == 1 { "" } else { "s" },
            field_list(),
            args.eq.len(),
            if args.eq.len() == 1 { "" } else { "s" },
            if ranged { " and a range" } else { "" }
        )));
    }
    let eq: Vec<Value> = fields
        .iter()
        .zip(&args.eq)
        .map(|(f, a)| rows::parse_text(f, a, TextSource::Arg).map_err(|e| CliError::Usage(format!("--eq: {e}"))))
        .collect::<Result<_>>()?;
    let (lower, upper) = if ranged {
        bounds(fields[args.eq.len()], &args.range)?
    } else {
        (Bound::Unbounded, Bound::Unbounded)
    };
    let selected = t.rows(
        &args.index,
        Query {
            eq,
            lower,
            upper,
            reverse: args.reverse,
            limit: args.limit,
        },
    )?;
    if args.count {
        let mut n = 0u64;
        for row in selected {
            row?;
            n += 1;
        }
        writeln!(out, "{n}")?;
    } else {
        if args.format == RowsFormat::Tsv {
            writeln!(out, "{}", rows::header_tsv(&schema))?;
        }
        for row in selected {
            let row = row?;
            match args.format {
                RowsFormat::Jsonl => writeln!(out, "{}", rows::row_json(&schema, &row))?,
                RowsFormat::Tsv => writeln!(out, "{}", rows::row_tsv(&row))?,
            }
        }
    }
    drop(t);
    db.close()?;
    Ok(())
}

/// The table stats as one JSON object.
fn table_stats_json(s: &TableStats) -> String {
    #[derive(Serialize)]
    struct Index<'a> {
        name: &'a str,
        unique: bool,
        entries: u64,
        bytes: u64,
        deferred_deletes_emitted: u64,
        reads: u64,
        hits: u64,
        dirty_hits_skipped: u64,
    }
    #[derive(Serialize)]
    struct Report<'a> {
        name: &'a str,
        mode: &'a str,
        statements: u64,
        hidden_reads: u64,
        unique_check_reads: u64,
        update_reads: u64,
        deferred_deletes_emitted: u64,
        dirty_hits_skipped: u64,
        primary_lookups: u64,
        /// Non-finite is `null`.
        primary_lookups_per_secondary_hit: f64,
        primary_entries: u64,
        indexes: Vec<Index<'a>>,
    }
    let report = Report {
        name: &s.name,
        mode: &s.mode,
        statements: s.statements,
        hidden_reads: s.hidden_reads,
        unique_check_reads: s.unique_check_reads,
        update_reads: s.update_reads,
        deferred_deletes_emitted: s.deferred_deletes_emitted,
        dirty_hits_skipped: s.dirty_hits_skipped,
        primary_lookups: s.primary_lookups,
        primary_lookups_per_secondary_hit: s.primary_lookups_per_secondary_hit,
        primary_entries: s.primary_entries,
        indexes: s
            .indexes
            .iter()
            .map(|i| Index {
                name: &i.name,
                unique: i.unique,
                entries: i.entries,
                bytes: i.bytes,
                deferred_deletes_emitted: i.deferred_deletes_emitted,
                reads: i.reads,
                hits: i.hits,
                dirty_hits_skipped: i.dirty_hits_skipped,
            })
            .collect(),
    };
    // Plain structs of numbers and strings always serialize.
    serde_json::to_string(&report).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// load

/// Why loading stopped: the line (when one is to blame), what was wrong, and whether
/// committing the pending batch failed (then the batch as a whole is to blame).
pub(crate) struct LoadError {
    pub line: Option<u64>,
    pub msg: String,
    commit: bool,
}

impl LoadError {
    pub(crate) fn at(line: u64, msg: impl Into<String>) -> Self {
        LoadError::input(Some(line), msg)
    }

    fn input(line: Option<u64>, msg: impl Into<String>) -> Self {
        LoadError {
            line,
            msg: msg.into(),
            commit: false,
        }
    }
}

/// Collects parsed rows and commits them in transactions of `batch` rows.
struct Loader<'a> {
    table: &'a Table,
    schema: Schema,
    mode: LoadMode,
    batch: usize,
    rows: Vec<Row>,
    /// Line of each pending row.
    lines: Vec<u64>,
    /// Pending rows by primary key text (insert mode), to name the line of a duplicate.
    keys: HashMap<String, u64>,
    /// Rows committed so far.
    loaded: u64,
    pb: ProgressBar,
}

impl Loader<'_> {
    fn push(&mut self, line: u64, row: Row) -> Result<(), LoadError> {
        if self.mode == LoadMode::Insert {
            let pk = self.pk_text(&row);
            if let Some(first) = self.keys.insert(pk.clone(), line) {
                return Err(LoadError::at(
                    line,
                    format!("duplicate primary key {pk} (also on line {first})"),
                ));
            }
        }
        self.rows.push(row);
        self.lines.push(line);
        if self.rows.len() >= self.batch {
            self.commit()?;
        }
        Ok(())
    }

    fn pk_text(&self, row: &[Value]) -> String {
        let vals: Vec<Value> = self
            .schema
            .primary_key
            .iter()
            .filter_map(|n| self.schema.field_position(n))
            .map(|p| row[p].clone())
            .collect();
        key_text(&vals)
    }

    /// Commits the pending rows in one transaction.
    fn commit(&mut self) -> Result<(), LoadError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.table.transaction();
        for row in self.rows.drain(..) {
            match self.mode {
                LoadMode::Insert => tx.insert(row),
                LoadMode::Replace => tx.replace(row),
            };
        }
        if let Err(e) = tx.commit() {
            // Name the line when the message names a key of this batch.
            let line = self
                .keys
                .iter()
                .find(|(k, _)| matches!(&e, strata::Error::Constraint(m) if m.contains(&format!("primary key {k} "))))
                .map(|(_, l)| *l);
            return Err(LoadError {
                line,
                msg: e.to_string(),
                commit: true,
            });
        }
        self.loaded += self.lines.len() as u64;
        self.lines.clear();
        self.keys.clear();
        self.pb.set_message(format!("{} rows", self.loaded));
        Ok(())
    }

    /// The error message for a failure: where, what, and how much was loaded.
    fn failure(&self, e: LoadError) -> CliError {
        let first = self.lines.first().copied();
        let last = self.lines.last().copied();
        let at = match (e.line, first, last) {
            (Some(l), _, _) => format!("line {l}: "),
            (None, Some(f), Some(l)) if e.commit && f == l => format!("line {f}: "),
            (None, Some(f), Some(l)) if e.commit => format!("lines {f}-{l}: "),
            _ => String::new(),
        };
        let end = match (e.line, last) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let batch = match (first, end) {
            (Some(f), Some(l)) if f < l => format!(" (the batch of lines {f}-{l} was not loaded)"),
            _ => String::new(),
        };
        CliError::Runtime(format!(
            "{at}{}; {} row{} loaded before it{batch}",
            e.msg,
            self.loaded,
            if self.loaded == 1 { " was" } else { "s were" },
        ))
    }
}

fn load(db_dir: Option<&Path>, args: LoadArgs, out: &mut impl Write) -> Result<()> {
    if args.batch == 0 {
        return Err(CliError::Usage("--batch must be at least 1".to_string()));
    }
    let stdin = args.file.as_os_str() == "-";
    let format = match args.format {
        Some(f) => f,
        None => infer_format(&args.file)?,
    };
    let db = open(db_dir, false)?;
    let t = table(&db, &args.table)?;
    let schema = t.schema()?;
    let (input, len): (Box<dyn Read>, Option<u64>) = if stdin {
        (Box::new(io::stdin()), None)
    } else {
        let f = File::open(&args.file)
            .map_err(|e| CliError::Runtime(format!("cannot open {}: {e}", args.file.display())))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let pb = progress_bar(len, args.no_progress);
    let input = pb.wrap_read(input);
    let mut loader = Loader {
        table: &t,
        schema: schema.clone(),
        mode: args.mode,
        batch: args.batch,
        rows: Vec::new(),
        lines: Vec::new(),
        keys: HashMap::new(),
        loaded: 0,
        pb: pb.clone(),
    };
    let r = match format {
        LoadFormat::Csv => read_csv(input, &schema, &mut |line, row| loader.push(line, row)),
        LoadFormat::Jsonl => read_jsonl(input, &schema, &mut |line, row| loader.push(line, row)),
    }
    .and_then(|()| loader.commit());
    pb.finish_and_clear();
    if let Err(e) = r {
        return Err(loader.failure(e));
    }
    let loaded = loader.loaded;
    drop(loader);
    drop(t);
    db.close()?;
    writeln!(
        out,
        "loaded {loaded} row{} into table {}",
        if loaded == 1 { "" } else { "s" },
        args.table
    )?;
    Ok(())
}

pub(crate) fn infer_format(file: &Path) -> Result<LoadFormat> {
    let ext = file.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("csv") => Ok(LoadFormat::Csv),
        Some("jsonl" | "ndjson" | "json") => Ok(LoadFormat::Jsonl),
        _ => Err(CliError::Usage(format!(
            "cannot tell the format of {} from its extension: pass --format csv or --format jsonl",
            file.display()
        ))),
    }
}

pub(crate) fn progress_bar(len: Option<u64>, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let target = ProgressDrawTarget::stderr();
    match len {
        Some(len) => {
            let pb = ProgressBar::with_draw_target(Some(len), target);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}")
            {
                pb.set_style(style);
            }
            pb
        }
        None => {
            let pb = ProgressBar::with_draw_target(None, target);
            if let Ok(style) = ProgressStyle::with_template("{spinner} {bytes} {binary_bytes_per_sec} {msg}") {
                pb.set_style(style);
            }
            pb
        }
    }
}

/// Reads CSV rows of `schema` (a header row naming fields), handing each to `push`
/// with its line.
pub(crate) fn read_csv(
    input: impl Read,
    schema: &Schema,
    push: &mut dyn FnMut(u64, Row) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(input);
    let header = rdr.headers().map_err(csv_error)?.clone();
    if header.is_empty() {
        return Err(LoadError::at(1, "no header row naming the fields"));
    }
    // Field position of each column.
    let mut cols: Vec<usize> = Vec::with_capacity(header.len());
    for name in header.iter() {
        let name = name.trim();
        let Some(p) = schema.field_position(name) else {
            return Err(LoadError::at(
                1,
                format!(
                    "header names unknown field '{name}' (fields of table {}: {})",
                    schema.name,
                    rows::field_names(schema)
                ),
            ));
        };
        if cols.contains(&p) {
            return Err(LoadError::at(1, format!("header names field '{name}' twice")));
        }
        cols.push(p);
    }
    for (p, f) in schema.fields.iter().enumerate() {
        if !f.nullable && !cols.contains(&p) {
            return Err(LoadError::at(
                1,
                format!("header lacks field '{}' ({}), which is not nullable", f.name, f.ty),
            ));
        }
    }
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(csv_error(e)),
        }
        let line = rec.position().map_or(0, |p| p.line());
        let mut row = vec![Value::Null; schema.fields.len()];
        for (cell, &p) in rec.iter().zip(&cols) {
            row[p] = rows::parse_text(&schema.fields[p], cell, TextSource::Csv).map_err(|e| LoadError::at(line, e))?;
        }
        push(line, row)?;
    }
}

fn csv_error(e: csv::Error) -> LoadError {
    let line = e.position().map(|p| p.line());
    let msg = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("the record has {len} cells, the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { err, .. } => format!("cell {} is not valid UTF-8", err.field() + 1),
        csv::ErrorKind::Io(e) => format!("cannot read the input: {e}"),
        _ => e.to_string(),
    };
    LoadError::input(line, msg)
}

/// Reads JSON Lines rows of `schema` (one object per line), handing each to `push` with
/// its line.
pub(crate) fn read_jsonl(
    input: impl Read,
    schema: &Schema,
    push: &mut dyn FnMut(u64, Row) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    crate::lines::for_each_line(input, LoadError::at, |line, text| {
        let row = rows::row_from_json_text(schema, text).map_err(|e| LoadError::at(line, e))?;
        push(line, row)
    })
}
