//! The child role of the crash test: opens the database, resumes every stream after
//! the last commit the database holds, and commits until it is killed. Each commit is
//! appended to the acknowledgement log only after `write`/`commit` returned, so the log
//! never names a commit the engine did not acknowledge. Stdout carries `OPENING`, then
//! `READY <microseconds the open took>` once the database is open, and `BG <flushing> <compactions>` whenever background work starts
//! or stops, so the parent can tell what a kill interrupted.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strata::table::Table;
use strata::{Db, Keyspace, WriteBatch};

use super::workload::{
    KEYSPACES, KvOp, STREAMS, Stream, StreamKind, TableOp, counter_of_row, counter_of_value, kv_commit, kv_counter_key,
    options, table_commit, table_counter_pk, table_name,
};
use crate::BenchResult;

/// Arguments of the hidden `strata-bench crash-child` (started by `strata-bench crash`).
#[derive(clap::Args)]
pub struct CrashChildArgs {
    /// Database directory (created by the parent).
    #[arg(long)]
    db: PathBuf,
    /// Acknowledgement log: one `stream n` line per acknowledged commit.
    #[arg(long)]
    ack_log: PathBuf,
}

/// Runs the child until it is killed (or a commit fails, which is an error).
pub fn run(a: &CrashChildArgs) -> BenchResult<()> {
    let log = Mutex::new(OpenOptions::new().create(true).append(true).open(&a.ack_log)?);
    say("OPENING")?;
    let t = std::time::Instant::now();
    let db = Db::open(&a.db, options())?;
    say(&format!("READY {}", t.elapsed().as_micros()))?;
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| -> BenchResult<()> {
        let workers: Vec<_> = STREAMS
            .iter()
            .map(|stream| {
                let (db, log, failed) = (&db, &log, &failed);
                s.spawn(move || {
                    let r = run_stream(db, *stream, log);
                    failed.store(true, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        let mut last = (false, 0);
        while !failed.load(Ordering::Relaxed) {
            let st = db.stats();
            let now = (st.flush_running, st.compactions_running);
            if now != last {
                say(&format!("BG {} {}", u8::from(now.0), now.1))?;
                last = now;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for w in workers {
            w.join().map_err(|_| "a crash workload thread panicked")??;
        }
        Ok(())
    })
}

fn say(line: &str) -> BenchResult<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

fn acknowledge(log: &Mutex<File>, stream: &str, n: u64) -> BenchResult<()> {
    // One write call per line: a kill never leaves half a line.
    log.lock()
        .map_err(|_| "ack log lock poisoned")?
        .write_all(format!("{stream} {n}\n").as_bytes())?;
    Ok(())
}

/// Commits `stream`'s commits from the one after the last in the database, forever.
fn run_stream(db: &Db, stream: Stream, log: &Mutex<File>) -> BenchResult<()> {
    match stream.kind {
        StreamKind::Kv(t) => {
            let ks: Vec<Keyspace> = KEYSPACES.iter().map(|n| db.keyspace(n)).collect::<Result<_, _>>()?;
            let mut n = match ks[0].get(&kv_counter_key(t))? {
                Some(v) => counter_of_value(&v).ok_or("unreadable kv counter")? + 1,
                None => 0,
            };
            loop {
                let mut b = WriteBatch::new();
                for op in kv_commit(t, n) {
                    match op {
                        KvOp::Put { ks: i, key, value } => b.put(&ks[i], &key, &value),
                        KvOp::Delete { ks: i, key } => b.delete(&ks[i], &key),
                        KvOp::DeleteRange { ks: i, start, end } => b.delete_range(&ks[i], &start, &end),
                        KvOp::DeleteWhere { ks: i, lo, hi } => b.delete_where(&ks[i], &lo, &hi),
                    }
                }
                db.write(b)?;
                acknowledge(log, stream.name, n)?;
                n += 1;
            }
        }
        StreamKind::Table { deferred } => {
            let t: Table = db.table(table_name(deferred))?;
            let mut n = match t.get(&table_counter_pk())? {
                Some(r) => counter_of_row(&r).ok_or("unreadable table counter")? + 1,
                None => 0,
            };
            loop {
                let mut tx = t.transaction();
                for op in table_commit(deferred, n) {
                    match op {
                        TableOp::Replace(r) => tx.replace(r),
                        TableOp::Delete(id) => tx.delete(vec![strata::table::value::Value::U64(id)]),
                        TableOp::DeleteWhere { below } => {
                            t.delete_where("n", ..strata::table::value::Value::U64(below))?;
                            continue;
                        }
                    };
                }
                tx.commit()?;
                acknowledge(log, stream.name, n)?;
                n += 1;
            }
        }
    }
}

/// Creates the keyspaces and tables of the workload in a new database.
pub fn create(dir: &Path) -> BenchResult<()> {
    let db = Db::open(dir, options())?;
    for name in KEYSPACES {
        db.create_keyspace(name)?;
    }
    // Keyspace 1's values start with their stream and commit number: its delete key
    // (`workload::kv_commit`'s secondary range deletes).
    db.keyspace(KEYSPACES[1])?.set_delete_key(
        strata::delete_key::DeleteKey::new(0, 9)?,
        strata::delete_key::TileChoice::Fixed(4),
    )?;
    for deferred in [false, true] {
        db.create_table(super::workload::schema(deferred)?)?;
    }
    db.close()?;
    Ok(())
}
