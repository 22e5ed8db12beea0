//! `ingest`: loading the micro table (`f1` primary key, four secondary indexes) of
//! `--rows` rows five ways, one after the other in one run, on the same disk:
//!
//! * **build**: `TableWriter` writes the primary and index files from rows in key order;
//! * **ingest (copy)** / **ingest (link)**: `Table::ingest` of those files into a fresh
//!   database, copying them (read, write, fsync) or hard-linking them; beside it `dd
//!   if=/dev/zero bs=1M count=<files' MiB> conv=fdatasync`, the disk's sequential write
//!   bandwidth, in the same directory;
//! * **row by row, eager / deferred**: `REPLACE` transactions of `--batch` rows, then a
//!   flush and the background work (files on disk, like the ingest's);
//! * **SQLite**: `INSERT` in transactions of `--sqlite-batch` rows (WAL, synchronous
//!   off, as in `micro`).
//!
//! Every engine gets the same rows, in key order: `f1 = 1..=rows`, the other fields
//! drawn from a hash of the row number into `1..=rows`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::params;
use serde::Serialize;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::writer::{TableFiles, TableWriter};
use strata::{Db, IngestOptions};

use crate::BenchResult;
use crate::engines::sqlite::SqliteTables;
use crate::engines::strata::{MicroSettings, micro_schema, paper_options};
use crate::kv::dd::{self, DdResult};
use crate::report::{mib, rate, thousands, write_json};

/// Arguments of `strata-bench ingest`.
#[derive(clap::Args)]
pub struct IngestArgs {
    /// Rows of the table.
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Rows per transaction of the row-by-row Strata loads.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Rows per SQLite transaction.
    #[arg(long, default_value_t = 100_000)]
    sqlite_batch: usize,
    /// Skip the row-by-row loads and SQLite (build, ingest and dd only).
    #[arg(long)]
    ingest_only: bool,
    /// Work directory (default: a temporary directory, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One way of loading the table.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// What ran.
    pub name: String,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Rows per second over `seconds`.
    pub rows_per_sec: f64,
    /// Bytes it wrote or installed, when that is the measure.
    pub bytes: Option<u64>,
    /// Bytes per second over `seconds`.
    pub bytes_per_sec: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct IngestReport {
    /// Rows.
    pub rows: u64,
    /// Secondary indexes.
    pub indexes: usize,
    /// The disk's sequential write bandwidth in the same run.
    pub dd: DdResult,
    /// The phases, in the order run.
    pub phases: Vec<Phase>,
    /// Ingest (copy) bytes/s over dd's.
    pub ingest_copy_vs_dd: f64,
    /// Build + ingest (copy) time over row-by-row eager time (< 1: faster).
    pub build_ingest_vs_eager: Option<f64>,
    /// Build + ingest (copy) time over row-by-row deferred time.
    pub build_ingest_vs_deferred: Option<f64>,
}

fn field(i: u64, j: u64, rows: u64) -> u64 {
    // splitmix64 of (row, field): the same rows for every engine.
    let mut z = i.wrapping_mul(8).wrapping_add(j).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % rows + 1
}

pub(crate) fn row(i: u64, rows: u64) -> [u64; 5] {
    [
        i + 1,
        field(i, 2, rows),
        field(i, 3, rows),
        field(i, 4, rows),
        field(i, 5, rows),
    ]
}

pub(crate) fn values(r: [u64; 5]) -> Vec<Value> {
    r.iter().map(|v| Value::U64(*v)).collect()
}

fn phase(name: &str, rows: u64, seconds: f64, bytes: Option<u64>) -> Phase {
    let s = seconds.max(1e-9);
    eprintln!("  {name}: {seconds:.2} s");
    Phase {
        name: name.to_string(),
        seconds,
        rows_per_sec: rows as f64 / s,
        bytes,
        bytes_per_sec: bytes.map(|b| b as f64 / s),
    }
}

fn options() -> strata::Options {
    paper_options(MicroSettings {
        cache_bytes: 256 << 20,
        direct_reads: false,
    })
}

fn build(dir: &Path, rows: u64) -> BenchResult<(TableFiles, f64)> {
    let schema = Schema::parse(&micro_schema("deferred"))?;
    let start = Instant::now();
    let mut w = TableWriter::create(&schema, dir)?;
    for i in 0..rows {
        w.add(&values(row(i, rows)))?;
    }
    let files = w.finish()?;
    Ok((files, start.elapsed().as_secs_f64()))
}

fn ingest(dir: &Path, files: &TableFiles, link: bool) -> BenchResult<f64> {
    let db = Db::open(dir, options())?;
    let t = db.create_table(Schema::parse(&micro_schema("deferred"))?)?;
    let start = Instant::now();
    t.ingest(&files.dir, IngestOptions { link_files: link })?;
    let secs = start.elapsed().as_secs_f64();
    let n = t.count()?;
    if n != files.rows {
        return Err(format!("ingested table holds {n} rows, expected {}", files.rows).into());
    }
    drop(t);
    db.close()?;
    Ok(secs)
}

fn row_by_row(dir: &Path, mode: &str, rows: u64, batch: usize) -> BenchResult<f64> {
    let db = Db::open(dir, options())?;
    let t = db.create_table(Schema::parse(&micro_schema(mode))?)?;
    let start = Instant::now();
    let mut i = 0;
    while i < rows {
        let mut tx = t.transaction();
        for j in i..(i + batch as u64).min(rows) {
            tx.replace(values(row(j, rows)));
        }
        tx.commit()?;
        i += batch as u64;
    }
    db.flush()?;
    db.wait_for_background()?;
    let secs = start.elapsed().as_secs_f64();
    drop(t);
    db.close()?;
    Ok(secs)
}

fn sqlite(dir: &Path, rows: u64, batch: usize) -> BenchResult<f64> {
    let s = SqliteTables::create_micro(dir, 256 << 20)?;
    let mut conn = s.connect()?;
    let start = Instant::now();
    let mut i = 0;
    while i < rows {
        let tx = conn.transaction()?;
        {
            let mut st = tx.prepare_cached("INSERT INTO test (f1, f2, f3, f4, f5) VALUES (?1, ?2, ?3, ?4, ?5)")?;
            for j in i..(i + batch as u64).min(rows) {
                let r = row(j, rows).map(|v| v as i64);
                st.execute(params![r[0], r[1], r[2], r[3], r[4]])?;
            }
        }
        tx.commit()?;
        i += batch as u64;
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    Ok(start.elapsed().as_secs_f64())
}

/// Runs the benchmark.
pub fn run(a: &IngestArgs) -> BenchResult<()> {
    if a.rows == 0 || a.batch == 0 || a.sqlite_batch == 0 {
        return Err("--rows, --batch and --sqlite-batch must be at least 1".into());
    }
    let (root, _tmp) = crate::workdir::root(a.dir.as_deref(), ".tmp")?;
    let rows = a.rows;
    eprintln!(
        "ingest benchmark: {} rows, 4 secondary indexes, in {}",
        thousands(rows),
        root.display()
    );
    let mut phases = Vec::new();
    let (files, build_secs) = build(&root.join("files"), rows)?;
    let bytes = files.bytes()?;
    phases.push(phase("build (TableWriter)", rows, build_secs, Some(bytes)));
    let dd = dd::measure(&root, bytes.div_ceil(1 << 20).max(64))?;
    eprintln!("  {}: {:.0} MiB/s", dd.command, dd.mib_per_sec);
    let copy_secs = ingest(&root.join("db-ingest-copy"), &files, false)?;
    phases.push(phase("ingest (copy)", rows, copy_secs, Some(bytes)));
    std::fs::remove_dir_all(root.join("db-ingest-copy"))?;
    let link_secs = ingest(&root.join("db-ingest-link"), &files, true)?;
    phases.push(phase("ingest (link)", rows, link_secs, Some(bytes)));
    std::fs::remove_dir_all(root.join("db-ingest-link"))?;
    phases.push(phase(
        "build + ingest (copy)",
        rows,
        build_secs + copy_secs,
        Some(bytes),
    ));
    std::fs::remove_dir_all(&files.dir)?;
    let (mut vs_eager, mut vs_deferred) = (None, None);
    if !a.ingest_only {
        for mode in ["eager", "deferred"] {
            let dir = root.join(format!("db-{mode}"));
            let secs = row_by_row(&dir, mode, rows, a.batch)?;
            phases.push(phase(&format!("row by row, {mode}"), rows, secs, None));
            let ratio = (build_secs + copy_secs) / secs.max(1e-9);
            if mode == "eager" {
                vs_eager = Some(ratio);
            } else {
                vs_deferred = Some(ratio);
            }
            std::fs::remove_dir_all(&dir)?;
        }
        let dir = root.join("sqlite");
        std::fs::create_dir_all(&dir)?;
        let secs = sqlite(&dir, rows, a.sqlite_batch)?;
        phases.push(phase("SQLite bulk insert", rows, secs, None));
        std::fs::remove_dir_all(&dir)?;
    }
    let copy_bps = bytes as f64 / copy_secs.max(1e-9);
    let report = IngestReport {
        rows,
        indexes: 4,
        ingest_copy_vs_dd: copy_bps / (dd.mib_per_sec * (1u64 << 20) as f64),
        dd,
        phases,
        build_ingest_vs_eager: vs_eager,
        build_ingest_vs_deferred: vs_deferred,
    };
    print_table(&report);
    if let Some(p) = &a.json {
        write_json(p, &report)?;
    }
    Ok(())
}

fn print_table(r: &IngestReport) {
    println!(
        "\n{} rows, {} secondary indexes; dd: {:.0} MiB/s ({})\n",
        thousands(r.rows),
        r.indexes,
        r.dd.mib_per_sec,
        r.dd.command
    );
    println!("| phase | seconds | rows/s | bytes | MiB/s |");
    println!("|---|---:|---:|---:|---:|");
    for p in &r.phases {
        println!(
            "| {} | {:.2} | {} | {} | {} |",
            p.name,
            p.seconds,
            rate(p.rows_per_sec),
            p.bytes.map_or_else(|| "-".to_string(), mib),
            p.bytes_per_sec
                .map_or_else(|| "-".to_string(), |b| format!("{:.0}", b / (1u64 << 20) as f64))
        );
    }
    println!("\ningest (copy) / dd bandwidth: {:.2}", r.ingest_copy_vs_dd);
    if let (Some(e), Some(d)) = (r.build_ingest_vs_eager, r.build_ingest_vs_deferred) {
        println!("build + ingest time / row-by-row eager time: {e:.2}");
        println!("build + ingest time / row-by-row deferred time: {d:.2}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_the_same_for_every_engine_and_within_range() {
        assert_eq!(row(7, 100), row(7, 100));
        for i in 0..1000 {
            let r = row(i, 50);
            assert_eq!(r[0], i + 1);
            assert!(r[1..].iter().all(|v| (1..=50).contains(v)), "{r:?}");
        }
        assert_ne!(row(1, 1000)[1..], row(2, 1000)[1..]);
    }

    #[test]
    fn a_small_run_loads_every_phase() {
        let dir = tempfile::tempdir().unwrap();
        let (files, _) = build(&dir.path().join("files"), 3000).unwrap();
        assert_eq!(files.rows, 3000);
        ingest(&dir.path().join("copy"), &files, false).unwrap();
        ingest(&dir.path().join("link"), &files, true).unwrap();
        row_by_row(&dir.path().join("eager"), "eager", 3000, 100).unwrap();
        let db_dir = dir.path().join("sqlite");
        std::fs::create_dir_all(&db_dir).unwrap();
        sqlite(&db_dir, 3000, 1000).unwrap();
        let conn = rusqlite::Connection::open(db_dir.join("test.db")).unwrap();
        let n: i64 = conn.query_row("SELECT count(*) FROM test", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 3000);
    }
}
