//! Bulk loads through files: `sst-write` and `ingest` for keyspaces, `table-write` and
//! `table-ingest` for tables.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use strata::IngestOptions;
use strata::sstable::ExternalSstWriter;
use strata::table::Row;
use strata::table::partitioned::Router;
use strata::table::schema::Schema;
use strata::table::writer::{TableWriter, TableWriterOptions};

use crate::args::SstWriteArgs;
use crate::bytes::Encoding;
use crate::commands::{CliError, Result, keyspace, open};
use crate::store::{AnyTable, Store};
use crate::table_args::{LoadFormat, TableWriteArgs};
use crate::table_cmds::{LoadError, infer_format, progress_bar, read_csv, read_jsonl, read_schema};

fn input(path: &Path) -> Result<Box<dyn Read>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(io::stdin()));
    }
    let f = File::open(path).map_err(|e| CliError::Runtime(format!("cannot open {}: {e}", path.display())))?;
    Ok(Box::new(f))
}

fn format_of(path: &Path, given: Option<LoadFormat>) -> Result<LoadFormat> {
    match given {
        Some(f) => Ok(f),
        None => infer_format(path),
    }
}

fn at_line(line: u64, e: impl std::fmt::Display) -> CliError {
    CliError::Runtime(format!("line {line}: {e}"))
}

/// Reads `key,value` CSV or `{"key":..,"value":..}` JSON Lines pairs.
fn read_pairs(
    input: impl Read,
    format: LoadFormat,
    enc: Encoding,
    push: &mut dyn FnMut(u64, Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<()> {
    match format {
        LoadFormat::Csv => {
            let mut rdr = csv::ReaderBuilder::new().has_headers(true).from_reader(input);
            let header = rdr.headers().map_err(|e| CliError::Runtime(format!("line 1: {e}")))?;
            if header.iter().map(str::trim).collect::<Vec<_>>() != ["key", "value"] {
                return Err(at_line(1, "the header must be `key,value`"));
            }
            let mut rec = csv::StringRecord::new();
            loop {
                match rdr.read_record(&mut rec) {
                    Ok(false) => return Ok(()),
                    Ok(true) => {}
                    Err(e) => {
                        let line = e.position().map_or(0, |p| p.line());
                        return Err(at_line(line, e));
                    }
                }
                let line = rec.position().map_or(0, |p| p.line());
                let (Some(k), Some(v)) = (rec.get(0), rec.get(1)) else {
                    return Err(at_line(line, "a record needs a key and a value"));
                };
                let k = enc.decode("key", k).map_err(|e| at_line(line, e))?;
                let v = enc.decode("value", v).map_err(|e| at_line(line, e))?;
                push(line, k, v)?;
            }
        }
        LoadFormat::Jsonl => crate::lines::for_each_line(input, at_line, |line, text| {
            let j: serde_json::Value =
                serde_json::from_str(text).map_err(|e| at_line(line, format!("invalid JSON: {e}")))?;
            let field = |name: &str| match j.get(name) {
                Some(serde_json::Value::String(s)) => enc.decode(name, s).map_err(|e| at_line(line, e)),
                _ => Err(at_line(line, format!("expected an object with a string {name:?}"))),
            };
            let (k, v) = (field("key")?, field("value")?);
            push(line, k, v)
        }),
    }
}

/// `sst-write`: an external SSTable from sorted (or, with --sort, any-order) pairs.
pub fn sst_write(args: SstWriteArgs, enc: Encoding, out: &mut impl Write) -> Result<()> {
    let format = format_of(&args.input, args.format)?;
    let src = input(&args.input)?;
    let mut w = ExternalSstWriter::create(&args.out)?;
    let r = if args.sort {
        let mut pairs: Vec<(Vec<u8>, Vec<u8>, u64)> = Vec::new();
        read_pairs(src, format, enc, &mut |line, k, v| {
            pairs.push((k, v, line));
            Ok(())
        })
        .and_then(|()| {
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            for p in pairs.windows(2) {
                if p[0].0 == p[1].0 {
                    return Err(CliError::Runtime(format!(
                        "key {} appears twice (lines {} and {})",
                        enc.quote(&p[0].0),
                        p[0].2.min(p[1].2),
                        p[0].2.max(p[1].2)
                    )));
                }
            }
            for (k, v, line) in &pairs {
                w.put(k, v).map_err(|e| at_line(*line, e))?;
            }
            Ok(())
        })
    } else {
        read_pairs(src, format, enc, &mut |line, k, v| {
            w.put(&k, &v).map_err(|e| at_line(line, e))
        })
    };
    if let Err(e) = r {
        drop(w);
        let _ = std::fs::remove_file(&args.out);
        return Err(e);
    }
    let info = w.finish()?;
    writeln!(
        out,
        "wrote {} entries ({} bytes) to {}",
        info.entries,
        info.file_size,
        args.out.display()
    )?;
    Ok(())
}

/// `ingest`: external SSTables into a keyspace.
pub fn ingest(db_dir: Option<&Path>, ks: &str, files: &[PathBuf], link: bool, out: &mut impl Write) -> Result<()> {
    let db = open(db_dir, false)?;
    let ks = keyspace(&db, ks)?;
    let r = db.ingest(&ks, files, IngestOptions { link_files: link })?;
    let entries: u64 = r.files.iter().map(|f| f.entries).sum();
    let bytes: u64 = r.files.iter().map(|f| f.bytes).sum();
    drop(ks);
    db.close()?;
    writeln!(
        out,
        "ingested {} file{} ({entries} entries, {bytes} bytes) at seqno {}",
        r.files.len(),
        if r.files.len() == 1 { "" } else { "s" },
        r.global_seq
    )?;
    Ok(())
}

fn write_schema(db_dir: Option<&Path>, args: &TableWriteArgs) -> Result<Schema> {
    match &args.table {
        Some(name) => {
            let db = Store::open(db_dir, false, None)?;
            let s = db.table(name)?.schema()?;
            db.close()?;
            Ok(s)
        }
        None => read_schema(args.schema.clone(), args.schema_file.clone()),
    }
}

/// `table-write`: a table's files from rows sorted by primary key.
pub fn table_write(db_dir: Option<&Path>, args: TableWriteArgs, out: &mut impl Write) -> Result<()> {
    let schema = write_schema(db_dir, &args)?;
    let format = format_of(&args.input, args.format)?;
    let len = std::fs::metadata(&args.input).ok().map(|m| m.len());
    let pb = progress_bar(len, args.no_progress);
    let src = pb.wrap_read(input(&args.input)?);
    let part = match (args.partition, args.of) {
        (Some(i), Some(n)) => Some((i, n)),
        _ => None,
    };
    // Rows of other partitions are skipped here; the writer refuses any that got through.
    let router = part.map(|(_, n)| Router::new(&schema, n)).transpose()?;
    let mut w = TableWriter::create_with(
        &schema,
        &args.out,
        TableWriterOptions {
            partition: part,
            ..TableWriterOptions::default()
        },
    )?;
    let mut skipped = 0u64;
    let failure = |e: LoadError| match e.line {
        Some(l) => CliError::Runtime(format!("line {l}: {}", e.msg)),
        None => CliError::Runtime(e.msg),
    };
    let mut pending: Vec<(u64, Row)> = Vec::new();
    let mut push = |line: u64, row: Row| -> Result<(), LoadError> {
        if let (Some(r), Some((i, _))) = (&router, part)
            && r.partition_of_row(&row)
                .map_err(|e| LoadError::at(line, e.to_string()))?
                != i
        {
            skipped += 1;
            return Ok(());
        }
        if args.sort {
            pending.push((line, row));
            Ok(())
        } else {
            w.add(&row).map_err(|e| LoadError::at(line, e.to_string()))
        }
    };
    let r = match format {
        LoadFormat::Csv => read_csv(src, &schema, &mut push),
        LoadFormat::Jsonl => read_jsonl(src, &schema, &mut push),
    };
    pb.finish_and_clear();
    r.map_err(failure)?;
    if args.sort {
        let pk = schema.pk_positions()?;
        pending.sort_by(|a, b| {
            pk.iter()
                .map(|&p| a.1[p].cmp_total(&b.1[p]))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (line, row) in &pending {
            w.add(row).map_err(|e| at_line(*line, e))?;
        }
    }
    let files = w.finish()?;
    writeln!(
        out,
        "wrote {} rows of table {} to {} ({} files, {} bytes)",
        files.rows,
        schema.name,
        files.dir.display(),
        files.files().len(),
        files.bytes()?
    )?;
    if let Some((i, n)) = part {
        writeln!(out, "partition {i} of {n}: skipped {skipped} rows of other partitions")?;
    }
    Ok(())
}

/// `table-ingest`: a table-write directory into a table.
pub fn table_ingest(
    db_dir: Option<&Path>,
    tname: &str,
    dir: &Path,
    link: bool,
    partition: Option<usize>,
    out: &mut impl Write,
) -> Result<()> {
    let db = Store::open(db_dir, false, None)?;
    let opts = IngestOptions { link_files: link };
    let r = match (db.table(tname)?, partition) {
        (AnyTable::One(t), None) => t.ingest(dir, opts)?,
        (AnyTable::Parts(t), Some(i)) => t.ingest(i, dir, opts)?,
        (AnyTable::One(_), Some(_)) => {
            return Err(CliError::Usage(
                "--partition is for a partitioned database; this one has no partitions".into(),
            ));
        }
        (AnyTable::Parts(t), None) => {
            return Err(CliError::Usage(format!(
                "table {tname:?} is split into {} partitions: give the one the files are for with --partition",
                t.count()
            )));
        }
    };
    let rows = r.files.first().map_or(0, |f| f.entries);
    let bytes: u64 = r.files.iter().map(|f| f.bytes).sum();
    db.close()?;
    writeln!(
        out,
        "ingested {rows} rows into table {tname} ({} files, {bytes} bytes) at seqno {}",
        r.files.len(),
        r.global_seq
    )?;
    Ok(())
}
