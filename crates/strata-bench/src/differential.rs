//! `strata-bench differential`: random table histories run on Strata, with eager and
//! with deferred index maintenance, and on SQLite; every answer is compared.
//!
//! A history is a random sequence of multi-statement transactions (insert, replace,
//! delete, update), selects through every index (equality prefixes, inclusive,
//! exclusive and open ranges, reverse, limit, at a snapshot), point gets, counts,
//! snapshots, flushes, compactions and reopens, under [`Options`] drawn at random (runs
//! per level, size ratio, level-0 trigger, FADE deadline, density trigger, block and file
//! sizes, bloom filter, compression, sync policy, background threads). SQLite holds the
//! same rows in a table with the same unique index; a snapshot there is a second
//! connection holding a read transaction open (WAL mode).
//!
//! Where Strata's documented semantics differ from SQLite's, the comparison follows
//! Strata's (`docs/testing.md`, "Differential test against SQLite"):
//! * a REPLACE that conflicts on a unique secondary index is an error in Strata; SQLite
//!   would delete the other row, so the driver checks first and expects the error;
//! * an equality on NULL matches NULL (SQL `IS`), and NULL sorts below every value, so
//!   a range with only an upper bound includes NULLs (`x IS NULL OR x < ?`).

use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, params_from_iter, types::Value as SqlValue};
use strata::options::Compression;
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::select::{PRIMARY, Query};
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error, Options, Snapshot, SyncPolicy};

use crate::BenchResult;

/// Arguments of `strata-bench differential`.
#[derive(Args, Debug)]
pub struct DifferentialArgs {
    /// Run new histories for this many minutes.
    #[arg(long, default_value_t = 1.0)]
    pub minutes: f64,
    /// First history's seed (each next history takes the next seed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Operations per history.
    #[arg(long, default_value_t = 1500)]
    pub ops: usize,
    /// Stop after this many histories (0 = only the time limit).
    #[arg(long, default_value_t = 0)]
    pub histories: u64,
}

const PKS: u64 = 60;
const NAMES: [&str; 2] = ["te", "td"];
const COLUMNS: &str = "id, a, b, c, d, p";
/// Index name and the field positions it orders by (the primary key breaks ties).
const INDEXES: [(&str, &[usize]); 5] = [
    (PRIMARY, &[0]),
    ("by_a", &[1]),
    ("by_bc", &[2, 3]),
    ("by_d", &[4]),
    ("by_ca", &[3, 1]),
];
const FIELD_NAMES: [&str; 6] = ["id", "a", "b", "c", "d", "p"];
const STRS: [&str; 5] = ["", "a", "ab", "b", "\u{e9}"];
const BYTES: [&[u8]; 5] = [b"", b"\0", b"\0\0", b"\x01", b"\xff"];

fn schema(name: &str) -> BenchResult<Schema> {
    let mode = if name == "te" { "eager" } else { "deferred" };
    Ok(Schema::parse(&format!(
        "table {name} (id u64, a u64, b str null, c i64, d bytes null, p str) primary key (id) \
         index by_a (a) index by_bc unique (b, c) index by_d (d) index by_ca (c, a) {mode}"
    ))?)
}

/// Options drawn from `seed` (small sizes, so a history flushes and compacts often).
pub fn drawn_options(seed: u64) -> Options {
    let mut r = StdRng::seed_from_u64(seed);
    let pick = |r: &mut StdRng, xs: &[u64]| xs.choose(r).copied().unwrap_or(xs[0]);
    let l0 = r.gen_range(1..=4);
    Options {
        memtable_budget: pick(&mut r, &[4096, 8192, 32 << 10]) as usize,
        max_immutable_memtables: r.gen_range(1..=3),
        target_file_size: pick(&mut r, &[4096, 16 << 10]),
        block_size: pick(&mut r, &[256, 1024, 4096]) as usize,
        size_ratio: pick(&mut r, &[2, 3, 4, 10]) as f64,
        runs_per_level: r.gen_range(1..=4),
        lazy_leveling: r.gen_bool(0.3),
        l0_compaction_trigger: l0,
        l0_stall_trigger: l0 + r.gen_range(2..=8),
        bloom_fpr: [0.0, 0.001, 0.01, 0.2][r.gen_range(0..4)],
        compression: if r.gen_bool(0.5) {
            Compression::Lz4
        } else {
            Compression::None
        },
        sync: [SyncPolicy::None, SyncPolicy::GroupCommit][r.gen_range(0..2)],
        background_threads: r.gen_range(1..=3),
        block_cache_bytes: pick(&mut r, &[0, 16 << 10, 1 << 20]) as usize,
        delete_persistence_threshold: r.gen_bool(0.5).then(|| Duration::from_millis(r.gen_range(2..=100))),
        tombstone_density_trigger: r.gen_bool(0.4).then(|| r.gen_range(0.05..=0.6)),
        ..Options::default()
    }
}

fn field_value(r: &mut StdRng, field: usize, non_null: bool) -> Value {
    match field {
        0 => Value::U64(r.gen_range(0..PKS)),
        1 => Value::U64(r.gen_range(0..6)),
        2 if !non_null && r.gen_bool(0.25) => Value::Null,
        2 => Value::from(*STRS.choose(r).unwrap_or(&"")),
        3 => Value::I64(r.gen_range(-3..3)),
        4 if !non_null && r.gen_bool(0.25) => Value::Null,
        4 => Value::from(*BYTES.choose(r).unwrap_or(&&b""[..])),
        _ => Value::from(format!("p{}", r.gen_range(0..1000))),
    }
}

fn random_row(r: &mut StdRng) -> Row {
    (0..6).map(|f| field_value(r, f, false)).collect()
}

#[derive(Debug, Clone)]
enum Stmt {
    Insert(Row),
    Replace(Row),
    Delete(u64),
    Update(u64, Vec<(usize, Value)>),
}

#[derive(Debug, Clone)]
struct Sel {
    index: usize,
    q: Query,
    snapshot: Option<usize>,
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<Stmt>),
    Select(Sel),
    Get(u64),
    Count,
    TakeSnapshot,
    DropSnapshot(usize),
    Flush,
    Compact,
    WaitForBackground,
    Reopen,
}

fn random_bound(r: &mut StdRng, field: usize) -> Bound<Value> {
    match r.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(field_value(r, field, true)),
        _ => Bound::Excluded(field_value(r, field, true)),
    }
}

fn random_op(r: &mut StdRng) -> Op {
    match r.gen_range(0..100) {
        0..=46 => Op::Write(
            (0..r.gen_range(1..=4))
                .map(|_| match r.gen_range(0..16) {
                    0..=3 => Stmt::Insert(random_row(r)),
                    4..=9 => Stmt::Replace(random_row(r)),
                    10..=12 => Stmt::Delete(r.gen_range(0..PKS)),
                    _ => {
                        let fields: Vec<usize> = (1..6).filter(|_| r.gen_bool(0.4)).collect();
                        let sets = fields.into_iter().map(|f| (f, field_value(r, f, false))).collect();
                        Stmt::Update(r.gen_range(0..PKS), sets)
                    }
                })
                .collect(),
        ),
        47..=80 => {
            let index = r.gen_range(0..INDEXES.len());
            let fields = INDEXES[index].1;
            let k = r.gen_range(0..=fields.len());
            let eq = fields[..k].iter().map(|&f| field_value(r, f, false)).collect();
            let (lower, upper) = if k < fields.len() {
                (random_bound(r, fields[k]), random_bound(r, fields[k]))
            } else {
                (Bound::Unbounded, Bound::Unbounded)
            };
            Op::Select(Sel {
                index,
                q: Query {
                    eq,
                    lower,
                    upper,
                    reverse: r.gen_bool(0.4),
                    limit: r.gen_bool(0.3).then(|| r.gen_range(0..8)),
                },
                snapshot: r.gen_bool(0.3).then(|| r.gen_range(0..3)),
            })
        }
        81..=88 => Op::Get(r.gen_range(0..PKS)),
        89 => Op::Count,
        90..=91 => Op::TakeSnapshot,
        92 => Op::DropSnapshot(r.gen_range(0..3)),
        93..=96 => Op::Flush,
        97 => Op::Compact,
        98 => Op::WaitForBackground,
        _ => Op::Reopen,
    }
}

fn sql_value(v: &Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::U64(x) => SqlValue::Integer(*x as i64),
        Value::I64(x) => SqlValue::Integer(*x),
        Value::F64(x) => SqlValue::Real(*x),
        Value::Str(s) => SqlValue::Text(s.clone()),
        Value::Bytes(b) => SqlValue::Blob(b.clone()),
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
    }
}

fn from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let id: i64 = row.get(0)?;
    let a: i64 = row.get(1)?;
    let b: Option<String> = row.get(2)?;
    let c: i64 = row.get(3)?;
    let d: Option<Vec<u8>> = row.get(4)?;
    let p: String = row.get(5)?;
    Ok(vec![
        Value::U64(id as u64),
        Value::U64(a as u64),
        b.map_or(Value::Null, Value::Str),
        Value::I64(c),
        d.map_or(Value::Null, Value::Bytes),
        Value::Str(p),
    ])
}

/// What a transaction came to: updates that found no row, or a constraint failure.
type WriteOutcome = Result<u64, &'static str>;

/// SQLite's side, with Strata's semantics where they differ.
struct Sqlite {
    conn: Connection,
    snapshots: Vec<Connection>,
    path: std::path::PathBuf,
}

impl Sqlite {
    fn open(dir: &Path) -> BenchResult<Sqlite> {
        let path = dir.join("sqlite.db");
        let conn = Connection::open(&path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;
             CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b TEXT, c INTEGER NOT NULL,
                             d BLOB, p TEXT NOT NULL);
             CREATE UNIQUE INDEX t_bc ON t (b, c);",
        )?;
        Ok(Sqlite {
            conn,
            snapshots: Vec::new(),
            path,
        })
    }

    fn write(&self, stmts: &[Stmt]) -> BenchResult<WriteOutcome> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let r = self.apply(stmts);
        match r {
            Ok(Ok(missed)) => {
                self.conn.execute_batch("COMMIT")?;
                Ok(Ok(missed))
            }
            other => {
                self.conn.execute_batch("ROLLBACK")?;
                other
            }
        }
    }

    fn unique_taken(&self, b: &Value, c: &Value, pk: u64) -> BenchResult<bool> {
        if b.is_null() {
            return Ok(false);
        }
        let n: i64 = self.conn.query_row(
            "SELECT count(*) FROM t WHERE b = ?1 AND c = ?2 AND id != ?3",
            params_from_iter([sql_value(b), sql_value(c), SqlValue::Integer(pk as i64)]),
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    fn apply(&self, stmts: &[Stmt]) -> BenchResult<WriteOutcome> {
        let constraint = |e: &rusqlite::Error| matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation);
        let mut missed = 0;
        for s in stmts {
            match s {
                Stmt::Insert(row) | Stmt::Replace(row) => {
                    let pk = row[0].as_u64().unwrap_or(0);
                    if matches!(s, Stmt::Replace(_)) && self.unique_taken(&row[2], &row[3], pk)? {
                        return Ok(Err("constraint"));
                    }
                    let verb = if matches!(s, Stmt::Insert(_)) {
                        "INSERT"
                    } else {
                        "INSERT OR REPLACE"
                    };
                    let r = self.conn.execute(
                        &format!("{verb} INTO t ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                        params_from_iter(row.iter().map(sql_value)),
                    );
                    match r {
                        Ok(_) => {}
                        Err(e) if constraint(&e) => return Ok(Err("constraint")),
                        Err(e) => return Err(e.into()),
                    }
                }
                Stmt::Delete(pk) => {
                    self.conn.execute("DELETE FROM t WHERE id = ?1", [*pk as i64])?;
                }
                Stmt::Update(pk, sets) => {
                    if sets.is_empty() {
                        let n: i64 =
                            self.conn
                                .query_row("SELECT count(*) FROM t WHERE id = ?1", [*pk as i64], |r| r.get(0))?;
                        missed += u64::from(n == 0);
                        continue;
                    }
                    let assign: Vec<String> = sets
                        .iter()
                        .enumerate()
                        .map(|(i, (f, _))| format!("{} = ?{}", FIELD_NAMES[*f], i + 2))
                        .collect();
                    let mut params = vec![SqlValue::Integer(*pk as i64)];
                    params.extend(sets.iter().map(|(_, v)| sql_value(v)));
                    let r = self.conn.execute(
                        &format!("UPDATE t SET {} WHERE id = ?1", assign.join(", ")),
                        params_from_iter(params),
                    );
                    match r {
                        Ok(n) => missed += u64::from(n == 0),
                        Err(e) if constraint(&e) => return Ok(Err("constraint")),
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(Ok(missed))
    }

    fn select(&self, sel: &Sel) -> BenchResult<Vec<Row>> {
        let fields = INDEXES[sel.index].1;
        let mut conds = Vec::new();
        let mut params = Vec::new();
        for (f, v) in fields.iter().zip(&sel.q.eq) {
            params.push(sql_value(v));
            conds.push(format!("{} IS ?{}", FIELD_NAMES[*f], params.len()));
        }
        if let Some(&f) = fields.get(sel.q.eq.len()) {
            let name = FIELD_NAMES[f];
            let mut bound = |b: &Bound<Value>, incl: &str, excl: &str| -> Option<String> {
                let (op, v) = match b {
                    Bound::Unbounded => return None,
                    Bound::Included(v) => (incl, v),
                    Bound::Excluded(v) => (excl, v),
                };
                params.push(sql_value(v));
                Some(format!("{name} {op} ?{}", params.len()))
            };
            let lower = bound(&sel.q.lower, ">=", ">");
            let upper = bound(&sel.q.upper, "<=", "<");
            match (lower, upper) {
                (Some(l), Some(u)) => conds.extend([l, u]),
                (Some(l), None) => conds.push(l),
                // NULL sorts below every value in Strata: an upper bound alone keeps it.
                (None, Some(u)) => conds.push(format!("({name} IS NULL OR {u})")),
                (None, None) => {}
            }
        }
        let dir = if sel.q.reverse { " DESC" } else { "" };
        let mut order: Vec<String> = fields.iter().map(|f| format!("{}{dir}", FIELD_NAMES[*f])).collect();
        if fields != [0] {
            order.push(format!("id{dir}"));
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM t{}{} ORDER BY {}{}",
            if conds.is_empty() { "" } else { " WHERE " },
            conds.join(" AND "),
            order.join(", "),
            sel.q.limit.map(|l| format!(" LIMIT {l}")).unwrap_or_default()
        );
        let conn = match sel.snapshot {
            Some(i) => &self.snapshots[i],
            None => &self.conn,
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(params), from_sql)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn take_snapshot(&mut self) -> BenchResult<()> {
        let c = Connection::open(&self.path)?;
        // The read transaction's snapshot is fixed by its first read.
        c.execute_batch("BEGIN; SELECT count(*) FROM t;")?;
        self.snapshots.push(c);
        Ok(())
    }
}

/// One history's two Strata tables and SQLite, and what the history saw.
struct Run {
    dir: tempfile::TempDir,
    opts: Options,
    db: Option<Db>,
    tables: Vec<Table>,
    snapshots: Vec<Snapshot>,
    sqlite: Sqlite,
    rng: StdRng,
    /// Counts of answers compared and writes that failed on a constraint.
    compared: u64,
    constraint_failures: u64,
}

fn show(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows.iter().take(6) {
        s.push_str(&format!("\n    {r:?}"));
    }
    if rows.len() > 6 {
        s.push_str(&format!("\n    ... {} rows in all", rows.len()));
    }
    s
}

impl Run {
    fn new(seed: u64) -> BenchResult<Run> {
        let dir = tempfile::tempdir()?;
        let opts = drawn_options(seed ^ 0x9e37_79b9_7f4a_7c15);
        let db = Db::open(dir.path().join("strata"), opts.clone())?;
        let tables = NAMES
            .iter()
            .map(|n| db.create_table(schema(n)?).map_err(Into::into))
            .collect::<BenchResult<Vec<_>>>()?;
        let sqlite = Sqlite::open(dir.path())?;
        Ok(Run {
            dir,
            opts,
            db: Some(db),
            tables,
            snapshots: Vec::new(),
            sqlite,
            rng: StdRng::seed_from_u64(seed),
            compared: 0,
            constraint_failures: 0,
        })
    }

    fn db(&self) -> BenchResult<&Db> {
        self.db.as_ref().ok_or_else(|| "database closed".into())
    }

    fn strata_write(t: &Table, stmts: &[Stmt]) -> BenchResult<WriteOutcome> {
        let mut tx = t.transaction();
        for s in stmts {
            match s {
                Stmt::Insert(r) => tx.insert(r.clone()),
                Stmt::Replace(r) => tx.replace(r.clone()),
                Stmt::Delete(pk) => tx.delete(vec![Value::U64(*pk)]),
                Stmt::Update(pk, sets) => tx.update(
                    vec![Value::U64(*pk)],
                    sets.iter()
                        .map(|(f, v)| (FIELD_NAMES[*f].to_string(), v.clone()))
                        .collect(),
                ),
            };
        }
        match tx.commit() {
            Ok(o) => Ok(Ok(o.updates_missed)),
            Err(Error::Constraint(_)) => Ok(Err("constraint")),
            Err(e) => Err(e.into()),
        }
    }

    fn strata_select(&self, t: &Table, sel: &Sel) -> BenchResult<Vec<Row>> {
        let mut q = t.select(INDEXES[sel.index].0).with_query(sel.q.clone());
        if let Some(i) = sel.snapshot {
            q = q.at(&self.snapshots[i]);
        }
        Ok(q.rows()?.collect::<strata::Result<Vec<_>>>()?)
    }

    fn close_snapshots(&mut self) {
        self.snapshots.clear();
        self.sqlite.snapshots.clear();
    }

    fn step(&mut self, op: &Op) -> BenchResult<()> {
        match op {
            Op::Write(stmts) => {
                let want = self.sqlite.write(stmts)?;
                for t in &self.tables {
                    let got = Self::strata_write(t, stmts)?;
                    if got != want {
                        return Err(format!("{}: transaction gave {got:?}, SQLite {want:?}", t.name()).into());
                    }
                }
                self.constraint_failures += u64::from(want.is_err());
                self.compared += 1;
            }
            Op::Select(sel) => {
                let mut sel = sel.clone();
                sel.snapshot = match sel.snapshot {
                    Some(i) if !self.snapshots.is_empty() => Some(i % self.snapshots.len()),
                    _ => None,
                };
                let want = self.sqlite.select(&sel)?;
                for t in &self.tables {
                    let got = self.strata_select(t, &sel)?;
                    if got != want {
                        return Err(format!(
                            "{}: select {sel:?} gave {} rows:{}\n  SQLite {} rows:{}",
                            t.name(),
                            got.len(),
                            show(&got),
                            want.len(),
                            show(&want)
                        )
                        .into());
                    }
                }
                self.compared += 1;
            }
            Op::Get(pk) => {
                let want = self.sqlite.select(&Sel {
                    index: 0,
                    q: Query {
                        eq: vec![Value::U64(*pk)],
                        ..Query::default()
                    },
                    snapshot: None,
                })?;
                for t in &self.tables {
                    let got: Vec<Row> = t.get(&[Value::U64(*pk)])?.into_iter().collect();
                    if got != want {
                        return Err(format!("{}: get({pk}) gave {got:?}, SQLite {want:?}", t.name()).into());
                    }
                }
                self.compared += 1;
            }
            Op::Count => {
                let want: i64 = self.sqlite.conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
                for t in &self.tables {
                    let got = t.count()?;
                    if got != want as u64 {
                        return Err(format!("{}: count {got}, SQLite {want}", t.name()).into());
                    }
                }
                self.compared += 1;
            }
            Op::TakeSnapshot => {
                if self.snapshots.len() < 3 {
                    self.snapshots.push(self.db()?.snapshot());
                    self.sqlite.take_snapshot()?;
                }
            }
            Op::DropSnapshot(i) => {
                if !self.snapshots.is_empty() {
                    let i = i % self.snapshots.len();
                    self.snapshots.remove(i);
                    self.sqlite.snapshots.remove(i);
                }
            }
            Op::Flush => self.db()?.flush()?,
            Op::Compact => self.db()?.compact_range()?,
            Op::WaitForBackground => self.db()?.wait_for_background()?,
            Op::Reopen => self.reopen()?,
        }
        Ok(())
    }

    fn reopen(&mut self) -> BenchResult<()> {
        self.close_snapshots();
        self.tables.clear();
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        let db = Db::open(self.dir.path().join("strata"), self.opts.clone())?;
        self.tables = NAMES
            .iter()
            .map(|n| db.table(n).map_err(Into::into))
            .collect::<BenchResult<Vec<_>>>()?;
        self.db = Some(db);
        Ok(())
    }

    /// Every row through every index, then `check`, after waiting for the background.
    fn finish(&mut self) -> BenchResult<()> {
        self.close_snapshots();
        self.db()?.wait_for_background()?;
        for index in 0..INDEXES.len() {
            for reverse in [false, true] {
                self.step(&Op::Select(Sel {
                    index,
                    q: Query {
                        reverse,
                        ..Query::default()
                    },
                    snapshot: None,
                }))?;
            }
        }
        let report = self.db()?.check(CheckOptions { compact_first: true })?;
        if !report.ok() {
            return Err(format!("check: {:?}", report.problems).into());
        }
        Ok(())
    }
}

/// What one history did.
#[derive(Debug, Default, Clone, Copy)]
pub struct HistoryCounts {
    /// Operations run.
    pub ops: u64,
    /// Answers compared (transactions' outcomes, selects, gets, counts).
    pub compared: u64,
    /// Transactions that failed on a constraint, on every side alike.
    pub constraint_failures: u64,
}

/// Runs history `seed` of `ops` operations; an error describes the first mismatch.
pub fn history(seed: u64, ops: usize) -> BenchResult<HistoryCounts> {
    let mut run = Run::new(seed)?;
    let shape = run.opts.to_string();
    for n in 0..ops {
        let op = random_op(&mut run.rng);
        run.step(&op)
            .map_err(|e| format!("history {seed}, op #{n} {op:?} (options {shape}): {e}"))?;
    }
    run.finish()
        .map_err(|e| format!("history {seed}, final check (options {shape}): {e}"))?;
    Ok(HistoryCounts {
        ops: ops as u64,
        compared: run.compared,
        constraint_failures: run.constraint_failures,
    })
}

pub fn run(args: &DifferentialArgs) -> BenchResult<()> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.minutes * 60.0);
    let mut total = HistoryCounts::default();
    let mut histories = 0u64;
    let mut seed = args.seed;
    let pb = indicatif::ProgressBar::new_spinner();
    while Instant::now() < deadline && (args.histories == 0 || histories < args.histories) {
        let c = history(seed, args.ops)?;
        total.ops += c.ops;
        total.compared += c.compared;
        total.constraint_failures += c.constraint_failures;
        histories += 1;
        seed += 1;
        pb.set_message(format!("{histories} histories, {} operations, no mismatch", total.ops));
        pb.tick();
    }
    pb.finish_and_clear();
    println!(
        "differential: {histories} histories (seeds {}..{}), {} operations, {} answers compared \
         ({} constraint failures alike), 0 mismatches, {:.0} s",
        args.seed,
        seed,
        total.ops,
        total.compared,
        total.constraint_failures,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
