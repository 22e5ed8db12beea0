//! Helpers shared by the `table_*` tests: small options that make flushes and
//! multi-level compactions happen with little data, row comparison that respects float
//! bits, and checks of the on-disk state.

#![allow(dead_code)]

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use strata::table::check::{CheckOptions, CheckReport};
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::{Row, Select, Table};
use strata::{Db, Options};

#[path = "../model_harness/nosync.rs"]
mod nosync;
pub use nosync::NoSyncFs;

/// Small memtables and files so a few thousand rows reach level 2.
pub fn small_options() -> Options {
    Options {
        memtable_budget: 32 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 12,
        size_ratio: 3.0,
        fs: Arc::new(NoSyncFs),
        ..Options::default()
    }
}

/// A temporary directory, in memory (`/dev/shm`) when the system has one: these tests
/// create and delete thousands of small files, and nothing in them depends on a real
/// disk (the crash test, which does, uses its own directory).
pub fn tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::Builder::new().prefix("strata-table-").tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().expect("tempdir")
}

/// A database with `small_options` in a fresh `tempdir`; keep the directory alive as
/// long as the database.
pub fn open_small() -> (tempfile::TempDir, Db) {
    let dir = tempdir();
    let db = Db::open(dir.path(), small_options()).expect("open");
    (dir, db)
}

/// The two index maintenance modes.
pub const MODES: [&str; 2] = ["deferred", "eager"];

/// Runs `test` once per maintenance mode, each time on a fresh `open_small` database
/// holding the table `create` makes for that mode.
pub fn in_each_mode(create: impl Fn(&Db, &str) -> Table, mut test: impl FnMut(&str, &Db, Table)) {
    for mode in MODES {
        let (_dir, db) = open_small();
        let t = create(&db, mode);
        test(mode, &db, t);
    }
}

/// Creates the table that `schema` describes.
pub fn create_table(db: &Db, schema: &str) -> Table {
    db.create_table(Schema::parse(schema).expect("schema"))
        .expect("create table")
}

/// The names of a table's indexes, in schema order.
pub fn index_names(t: &Table) -> Vec<String> {
    t.schema()
        .expect("schema")
        .indexes
        .iter()
        .map(|i| i.name.clone())
        .collect()
}

pub fn u(x: u64) -> Value {
    Value::U64(x)
}

pub fn i(x: i64) -> Value {
    Value::I64(x)
}

pub fn s(x: &str) -> Value {
    Value::from(x)
}

/// Exact equality: floats by bits (NaN payloads and signed zeros included).
pub fn value_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

pub fn row_eq(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| value_eq(x, y))
}

/// Asserts `got` equals `want` by [`rows_eq`]; `what` names the read in the message.
pub fn assert_rows_eq(got: &[Row], want: &[Row], what: &str) {
    assert!(rows_eq(got, want), "{what}: {} rows, want {}", got.len(), want.len());
}

pub fn rows_eq(a: &[Row], b: &[Row]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| row_eq(x, y))
}

/// Compares rows on the given positions with the key order, then on the pk positions.
pub fn cmp_on(a: &[Value], b: &[Value], positions: &[usize]) -> Ordering {
    for p in positions {
        match a[*p].cmp_total(&b[*p]) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

/// Sorts rows into the order of an index over `fields` with primary key `pk`.
pub fn sort_like_index(rows: &mut [Row], fields: &[usize], pk: &[usize]) {
    rows.sort_by(|a, b| cmp_on(a, b, fields).then_with(|| cmp_on(a, b, pk)));
}

/// Runs a select to the end.
pub fn collect(sel: Select) -> strata::Result<Vec<Row>> {
    sel.rows()?.collect()
}

/// Every row of a table in primary key order.
pub fn all_rows(t: &Table) -> Vec<Row> {
    collect(t.select(strata::table::select::PRIMARY)).expect("primary scan")
}

/// Runs `db.check` and panics with the report if it found a problem.
pub fn check_ok(db: &Db, compact_first: bool) -> CheckReport {
    let r = db.check(CheckOptions { compact_first }).expect("check runs");
    assert!(r.ok(), "check(compact_first: {compact_first}) failed:\n{r}");
    r
}

/// Deepest level holding a file, over all keyspaces.
pub fn deepest_level(db: &Db) -> usize {
    db.stats()
        .keyspaces
        .iter()
        .flat_map(|k| k.levels.iter())
        .filter(|l| l.files > 0)
        .map(|l| l.level)
        .max()
        .unwrap_or(0)
}

/// SSTable files the database lists in its current version.
pub fn live_file_count(db: &Db) -> usize {
    db.stats()
        .keyspaces
        .iter()
        .flat_map(|k| k.levels.iter())
        .map(|l| l.files)
        .sum()
}

/// Names of the `.sst` files in a directory.
pub fn sst_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| {
            let n = e.expect("dir entry").file_name().to_string_lossy().into_owned();
            n.ends_with(".sst").then_some(n)
        })
        .collect()
}

/// Every row a select through a secondary index returns must be the row `get` returns
/// for its primary key (no dirty entry leaks out).
pub fn assert_no_dirty_rows(t: &Table, index: &str, pk_pos: usize) {
    for r in collect(t.select(index)).expect("select") {
        let got = t.get(std::slice::from_ref(&r[pk_pos])).expect("get");
        assert!(
            got.as_ref().is_some_and(|g| row_eq(g, &r)),
            "index {index} returned {r:?}, but get by pk gives {got:?}"
        );
    }
}

/// Sets the flag when dropped, also while unwinding: a failed assertion in the body of
/// a thread scope then stops the looping threads instead of hanging the scope.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
