//! A process crash in the middle of flushes and primary compactions that emit deferred
//! deletes loses nothing and leaves the indexes consistent.
//!
//! A child process (this test binary, re-run in the "child" role) replaces and deletes
//! rows of a deferred table in transactions, with `SyncPolicy::EveryBatch` and a small
//! memtable so flushes and compactions run all the time, and prints the id of every
//! committed transaction. The parent kills it with SIGKILL after a random 100-800 ms,
//! reopens the database and checks: every acknowledged transaction is there (the
//! database holds exactly the rows after the last acknowledged one, or after the one
//! the child committed but could not report), `check` finds no missing row, and no
//! select returns a dirty row. Several crash cycles run on the same database.

mod table_harness;

#[path = "fault_harness/child.rs"]
mod child;
#[path = "fault_harness/open.rs"]
mod open;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use child::ChildRun;
use open::open_when_unlocked;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Options, SyncPolicy};
use table_harness::{assert_rows_eq, collect, deepest_level, row_eq, rows_eq, sort_like_index, u};

const CHILD_DIR_ENV: &str = "STRATA_TABLE_CRASH_CHILD_DIR";
/// The row that records the last transaction id (in the same transaction).
const COUNTER: u64 = 1_000_000;
const INDEXES: [(&str, &[usize]); 3] = [("by_a", &[1]), ("by_b", &[2]), ("by_ab", &[1, 2])];

/// The table tests' small shape, but syncing every batch to the real disk: the
/// crash is real.
fn options() -> Options {
    Options {
        sync: SyncPolicy::EveryBatch,
        fs: Options::default().fs,
        ..table_harness::small_options()
    }
}

fn schema() -> Schema {
    Schema::parse(
        "table t (id u64, a u64, b u64, pad bytes) primary key (id) \
         index by_a (a) index by_b (b) index by_ab (a, b) deferred",
    )
    .expect("schema")
}

#[derive(Debug, Clone)]
enum Stmt {
    Replace(Row),
    Delete(u64),
}

/// The statements of transaction `n` (a pure function of `n`).
fn txn(n: u64) -> Vec<Stmt> {
    let mut g = StdRng::seed_from_u64(n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let mut out = Vec::new();
    for _ in 0..3 + g.gen_range(0..4) {
        let id = g.gen_range(0..300);
        if g.gen_range(0..4) == 0 {
            out.push(Stmt::Delete(id));
        } else {
            let pad = vec![(n % 251) as u8; 100 + g.gen_range(0..200) as usize];
            out.push(Stmt::Replace(vec![
                u(id),
                u(g.gen_range(0..10)),
                u(g.gen_range(0..25)),
                Value::Bytes(pad),
            ]));
        }
    }
    // The counter row carries the transaction id (as text in its pad).
    out.push(Stmt::Replace(vec![
        u(COUNTER),
        u(n % 10),
        u(n % 25),
        Value::Bytes(n.to_string().into_bytes()),
    ]));
    out
}

fn apply(model: &mut BTreeMap<u64, Row>, n: u64) {
    for s in txn(n) {
        match s {
            Stmt::Replace(r) => {
                model.insert(r[0].as_u64().expect("pk"), r);
            }
            Stmt::Delete(id) => {
                model.remove(&id);
            }
        }
    }
}

/// The child role: open, resume after the last transaction, commit until killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return; // not running as a child
    };
    let db = open_when_unlocked(Path::new(&dir), options()).expect("child open");
    let t = db.table("t").expect("child table");
    let mut n = resume_point(&t);
    let mut out = std::io::stdout().lock();
    loop {
        let mut tx = t.transaction();
        for s in txn(n) {
            match s {
                Stmt::Replace(r) => tx.replace(r),
                Stmt::Delete(id) => tx.delete(vec![u(id)]),
            };
        }
        tx.commit().expect("child commit");
        writeln!(out, "ACK {n}").expect("stdout");
        if n.is_multiple_of(50) {
            let ts = t.stats().expect("stats");
            writeln!(out, "STAT {}", ts.deferred_deletes_emitted).expect("stdout");
        }
        out.flush().expect("stdout");
        n += 1;
    }
}

/// The next transaction id: one past the last committed one.
fn resume_point(t: &Table) -> u64 {
    counter(t).map_or(0, |n| n + 1)
}

/// The id of the last committed transaction, from the counter row.
fn counter(t: &Table) -> Option<u64> {
    t.get(&[u(COUNTER)]).expect("get counter").map(|r| {
        let Value::Bytes(b) = &r[3] else { panic!("counter pad") };
        std::str::from_utf8(b).expect("utf-8").parse().expect("number")
    })
}

/// Runs the child until killed; returns the acknowledged transaction ids and the
/// deferred deletes it reported.
fn run_child(dir: &Path) -> (Vec<u64>, u64) {
    let mut child = ChildRun::spawn("crash_child", &[(CHILD_DIR_ENV, dir.as_os_str())]);
    let mut acks = Vec::new();
    let mut deferred = 0;
    // (The test harness may print "test crash_child ... " in front of the first line.)
    let mut take = |line: String, acks: &mut Vec<u64>| {
        if let Some(p) = line.find("ACK ") {
            acks.push(line[p + 4..].trim().parse().expect("ack"));
        } else if let Some(p) = line.find("STAT ") {
            deferred = deferred.max(line[p + 5..].trim().parse().expect("stat"));
        }
    };
    // Wait for the child to make progress, then kill it at a random moment.
    let deadline = Instant::now() + Duration::from_secs(30);
    while acks.is_empty() {
        match child.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => take(line, &mut acks),
            Err(_) => {
                child.assert_running();
                assert!(Instant::now() < deadline, "child made no progress");
            }
        }
    }
    let wait = Duration::from_millis(rand::thread_rng().gen_range(100..=800));
    let until = Instant::now() + wait;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        if let Ok(line) = child.lines.recv_timeout(left) {
            take(line, &mut acks);
        }
    }
    for line in child.kill() {
        take(line, &mut acks);
    }
    (acks, deferred)
}

fn model_after(last: Option<u64>) -> BTreeMap<u64, Row> {
    let mut m = BTreeMap::new();
    if let Some(l) = last {
        for n in 0..=l {
            apply(&mut m, n);
        }
    }
    m
}

fn verify(db: &Db, t: &Table, model: &BTreeMap<u64, Row>, ctx: &str) {
    let want: Vec<Row> = model.values().cloned().collect();
    let got = collect(t.select(PRIMARY)).expect("primary scan");
    assert_rows_eq(&got, &want, &format!("{ctx}: primary"));
    for (id, r) in model {
        let g = t.get(&[u(*id)]).expect("get");
        assert!(g.as_ref().is_some_and(|g| row_eq(g, r)), "{ctx}: get {id}: {g:?}");
    }
    for (index, fields) in INDEXES {
        let rows = collect(t.select(index)).expect("select");
        for r in &rows {
            let g = t.get(std::slice::from_ref(&r[0])).expect("get");
            assert!(
                g.as_ref().is_some_and(|g| row_eq(g, r)),
                "{ctx}: {index} returned a dirty row {r:?}"
            );
        }
        let mut w = want.clone();
        sort_like_index(&mut w, fields, &[0]);
        assert_rows_eq(&rows, &w, &format!("{ctx}: {index}"));
    }
    let report = db.check(CheckOptions::default()).expect("check");
    assert!(report.ok(), "{ctx}:\n{report}");
    for ic in &report.tables[0].indexes {
        assert_eq!(ic.missing, 0, "{ctx}: {report}");
    }
}

#[test]
fn deferred_deletes_survive_crashes() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open_when_unlocked(dir.path(), options()).expect("create");
        db.create_table(schema()).expect("table");
        db.close().expect("close");
    }
    let mut last: Option<u64> = None;
    let mut total_acks = 0;
    let mut deferred = 0;
    for cycle in 0..5 {
        let (acks, d) = run_child(dir.path());
        deferred += d;
        total_acks += acks.len();
        // Acknowledged ids continue where the last run left off, without gaps.
        let first = last.map_or(0, |l| l + 1);
        let expected: Vec<u64> = (first..first + acks.len() as u64).collect();
        assert_eq!(
            acks, expected,
            "cycle {cycle}: the child skipped or repeated a transaction"
        );
        let acked = acks.last().copied().or(last);
        let db = open_when_unlocked(dir.path(), options()).expect("reopen after the crash");
        let t = db.table("t").expect("table survives");
        let found = counter(&t);
        let ctx = format!("cycle {cycle}: acknowledged up to {acked:?}, found {found:?}");
        // The child may have committed one transaction it could not report.
        let next = acked.map_or(0, |a| a + 1);
        assert!(
            found == acked || found == Some(next),
            "{ctx}: an acknowledged transaction is lost"
        );
        let rows = collect(t.select(PRIMARY)).expect("scan");
        let matches = |m: &BTreeMap<u64, Row>| rows_eq(&rows, &m.values().cloned().collect::<Vec<_>>());
        assert!(
            matches(&model_after(acked)) || matches(&model_after(Some(next))),
            "{ctx}: the rows are neither the state after the last acknowledged transaction nor after the next"
        );
        verify(&db, &t, &model_after(found), &ctx);
        last = found;
        drop(t);
        db.close().expect("close");
    }
    eprintln!("acks {total_acks}, deferred deletes reported {deferred}");
    assert!(total_acks > 100, "only {total_acks} transactions in all cycles");
    assert!(deferred > 0, "the children never emitted a deferred delete");
    let db = open_when_unlocked(dir.path(), options()).expect("final open");
    let t = db.table("t").expect("table");
    db.wait_for_background().expect("background");
    assert!(deepest_level(&db) >= 1, "no file ever left level 0");
    let report = db.check(CheckOptions { compact_first: true }).expect("check");
    assert!(report.ok(), "{report}");
    verify(&db, &t, &model_after(last), "final");
}
