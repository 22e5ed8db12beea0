//! A process killed (SIGKILL) during `Table::ingest` leaves all of the files in or none.
//!
//! Each cycle: the parent builds a table's files (primary and three indexes) with
//! `TableWriter` and a database holding a few rows of its own; a child process (this
//! test binary in the "child" role) opens the database, prints `READY`, ingests and
//! prints `DONE <micros>`. The parent kills it a chosen delay after `READY`: the delays
//! step through 0 to 1.5 times the ingest time measured in a first, unkilled run, so the
//! kills land before, during (staging, checking, installing) and after the ingest.
//! After each kill the parent reopens the database and checks that the table holds
//! either every ingested row, through the primary and every index, or none of them (its
//! own rows untouched either way), that `check` passes, and, when none went in, that
//! the same files ingest cleanly now.
//!
//! Odd cycles hard-link the files instead of copying them (`IngestOptions::link_files`).
//!
//! Cycles: `STRATA_INGEST_CRASH_CYCLES` (default 12).

#[path = "fault_harness/child.rs"]
mod child;
#[path = "fault_harness/open.rs"]
mod open;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use child::ChildRun;
use open::open_when_unlocked;
use strata::table::Table;
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::writer::TableWriter;
use strata::{IngestOptions, Options};

const CHILD_DIR_ENV: &str = "STRATA_INGEST_CRASH_CHILD_DIR";
const CHILD_FILES_ENV: &str = "STRATA_INGEST_CRASH_CHILD_FILES";
/// "link": the child hard-links the files.
const CHILD_MODE_ENV: &str = "STRATA_INGEST_CRASH_CHILD_MODE";
/// Rows ingested per cycle: enough that copying and checking the files takes a while.
const ROWS: u64 = 10_000;
/// Rows the database holds before the ingest (ids above the ingested ones).
const OWN: u64 = 50;

fn schema() -> Schema {
    Schema::parse(
        "table t (id u64, a u64, b str, c i64) primary key (id) \
         index by_a (a) index by_b (b) index by_ca (c, a)",
    )
    .expect("schema")
}

fn row(id: u64) -> Vec<Value> {
    vec![
        Value::U64(id),
        Value::U64(id % 101),
        Value::from(format!("b{:06}", (id * 7) % 9973).as_str()),
        Value::I64((id % 13) as i64 - 6),
    ]
}

fn options() -> Options {
    Options {
        memtable_budget: 64 << 10,
        ..Options::default()
    }
}

/// The child role: open, ingest, report.
#[test]
fn ingest_crash_child() {
    let (Ok(dir), Ok(files)) = (std::env::var(CHILD_DIR_ENV), std::env::var(CHILD_FILES_ENV)) else {
        return; // not running as a child
    };
    let db = open_when_unlocked(Path::new(&dir), options()).expect("child open");
    let t = db.table("t").expect("child table");
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").expect("stdout");
    out.flush().expect("stdout");
    let link_files = std::env::var(CHILD_MODE_ENV).is_ok_and(|m| m == "link");
    let start = Instant::now();
    t.ingest(&files, IngestOptions { link_files }).expect("child ingest");
    writeln!(out, "DONE {}", start.elapsed().as_micros()).expect("stdout");
    out.flush().expect("stdout");
    // Wait to be killed (or exit after a while if the parent is gone).
    std::thread::sleep(Duration::from_secs(30));
}

/// A fresh database with the table and its own rows, and the files to ingest.
fn setup(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = root.join("db");
    let files = root.join("files");
    let mut w = TableWriter::create(&schema(), &files).expect("writer");
    for id in 0..ROWS {
        w.add(&row(id)).expect("add");
    }
    w.finish().expect("finish");
    let db = strata::Db::open(&dir, options()).expect("open");
    let t = db.create_table(schema()).expect("create");
    for id in ROWS..ROWS + OWN {
        t.insert(row(id)).expect("insert");
    }
    db.close().expect("close");
    (dir, files)
}

/// Runs the child; kills it `delay` after READY (or lets it finish when `None`).
/// Returns the ingest time the child reported, if it got that far.
fn run_child(dir: &Path, files: &Path, delay: Option<Duration>, link: bool) -> Option<u64> {
    let mode = std::ffi::OsStr::new(if link { "link" } else { "copy" });
    let mut child = ChildRun::spawn(
        "ingest_crash_child",
        &[
            (CHILD_DIR_ENV, dir.as_os_str()),
            (CHILD_FILES_ENV, files.as_os_str()),
            (CHILD_MODE_ENV, mode),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut done = None;
    let mut ready = false;
    // (The test harness may print "test ingest_crash_child ... " before the first line.)
    let take = |line: &str, ready: &mut bool, done: &mut Option<u64>| {
        if line.contains("READY") {
            *ready = true;
        }
        if let Some(p) = line.find("DONE ") {
            *done = Some(line[p + 5..].trim().parse().expect("micros"));
        }
    };
    while !ready || (delay.is_none() && done.is_none()) {
        match child.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => take(&line, &mut ready, &mut done),
            Err(_) => {
                if done.is_none() {
                    child.assert_running();
                }
                assert!(Instant::now() < deadline, "child made no progress");
            }
        }
    }
    if let Some(d) = delay {
        let until = Instant::now() + d;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if let Ok(line) = child.lines.recv_timeout(left) {
                take(&line, &mut ready, &mut done);
            }
        }
    }
    for line in child.kill() {
        take(&line, &mut ready, &mut done);
    }
    done
}

fn ids(t: &Table, index: &str) -> Vec<u64> {
    let mut v: Vec<u64> = t
        .select(index)
        .rows()
        .expect("select")
        .map(|r| r.expect("row")[0].as_u64().expect("id"))
        .collect();
    v.sort_unstable();
    v
}

/// All or none: returns true when the ingested rows are in.
fn verify(dir: &Path, files: &Path, reported_done: bool, ctx: &str) -> bool {
    let db = open_when_unlocked(dir, options()).expect("reopen");
    let t = db.table("t").expect("table");
    let own: Vec<u64> = (ROWS..ROWS + OWN).collect();
    let all: Vec<u64> = (0..ROWS + OWN).collect();
    let primary = ids(&t, "primary");
    let went_in = if primary == all {
        true
    } else {
        assert_eq!(primary, own, "{ctx}: neither all nor none of the rows");
        false
    };
    assert!(
        went_in || !reported_done,
        "{ctx}: the child reported DONE but the rows are gone"
    );
    for ix in ["by_a", "by_b", "by_ca"] {
        assert_eq!(ids(&t, ix), primary, "{ctx}: index {ix} disagrees with the primary");
    }
    for id in [0, ROWS / 2, ROWS - 1, ROWS] {
        let got = t.get(&[Value::U64(id)]).expect("get");
        assert_eq!(got.is_some(), went_in || id >= ROWS, "{ctx}: get {id}");
    }
    let report = db.check(CheckOptions::default()).expect("check");
    assert!(report.ok(), "{ctx}: check: {:?}", report.problems);
    if !went_in {
        t.ingest(files, IngestOptions::default())
            .expect("ingest after the crash");
        assert_eq!(ids(&t, "by_ca"), all, "{ctx}: ingest after the crash");
    }
    db.close().expect("close");
    went_in
}

#[test]
fn a_killed_ingest_leaves_all_files_or_none() {
    let cycles: u64 = std::env::var("STRATA_INGEST_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    // A first run to completion measures how long the ingest takes.
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, files) = setup(root.path());
    let micros = run_child(&dir, &files, None, false).expect("the unkilled child finishes");
    assert!(verify(&dir, &files, true, "unkilled"));
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, files) = setup(root.path());
    let link_micros = run_child(&dir, &files, None, true).expect("the unkilled child finishes");
    assert!(verify(&dir, &files, true, "unkilled, linking"));
    // Each mode's kills step through its own ingest time.
    let span = |link: bool| (if link { link_micros } else { micros }) * 3 / 2;
    let (mut all, mut none) = (0, 0);
    for c in 0..cycles {
        let root = tempfile::tempdir().expect("tempdir");
        let (dir, files) = setup(root.path());
        let link = c % 2 == 1;
        let delay = Duration::from_micros(span(link) * c / (cycles - 1).max(1));
        let done = run_child(&dir, &files, Some(delay), link);
        let ctx =
            format!("cycle {c} (link {link}), killed {delay:?} after READY (copy {micros} us, link {link_micros} us)");
        if verify(&dir, &files, done.is_some(), &ctx) {
            all += 1;
        } else {
            none += 1;
        }
    }
    eprintln!("ingest kill test: {cycles} kills, {all} with every file in, {none} with none");
}
