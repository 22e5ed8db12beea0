//! Model-based test of the table layer: random statements, transactions, selects on
//! every index (equality prefixes, ranges with every kind of bound, both directions,
//! limits), snapshots, flushes, compactions and reopens, applied to four tables at once
//! (eager and deferred, each with and without a unique index) and checked at every
//! step against a `BTreeMap` of rows. The tables with a unique index also have a delete
//! key (`c`) and take secondary range deletes (`Table::delete_where`), good and bad.
//!
//! The key universe is small (primary keys 0..40, about six values per indexed field),
//! so overwrites, deletes, duplicate keys and dirty index entries collide all the time.

#[path = "model_harness/options.rs"]
mod options;
mod table_harness;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::select::{PRIMARY, Query};
use strata::table::value::Value;
use strata::table::{Row, Select, Table};
use strata::{Db, Error, Snapshot};
use table_harness::{collect, row_eq, small_options, sort_like_index};

const PKS: u64 = 40;
const FIELDS: [&str; 7] = ["id", "a", "b", "c", "d", "e", "f"];
/// Secondary indexes: name and field positions (index 0 of `INDEXES` is the primary).
const INDEXES: [(&str, &[usize]); 5] = [
    (PRIMARY, &[0]),
    ("by_a", &[1]),
    ("by_bc", &[2, 3]),
    ("by_d", &[4]),
    ("by_efa", &[5, 6, 1]),
];
/// (name, has a unique index)
const TABLES: [(&str, bool); 4] = [("ue", true), ("ud", true), ("ne", false), ("nd", false)];

fn schema(name: &str, unique: bool) -> Schema {
    let mode = if name.ends_with('e') { "eager" } else { "deferred" };
    let u = if unique { "unique" } else { "" };
    let dk = if unique { "delete key (c)" } else { "" };
    Schema::parse(&format!(
        "table {name} (id u64, a u64, b str null, c i64, d f64, e bool, f bytes null, p bytes) primary key (id) \
         index by_a (a) index by_bc {u} (b, c) index by_d (d) index by_efa (e, f, a) {dk} {mode}"
    ))
    .expect("schema")
}

const STRS: [&str; 5] = ["", "a", "ab", "b", "\u{e9}"];
const FLOATS: [f64; 8] = [
    f64::NEG_INFINITY,
    -1.5,
    -0.0,
    0.0,
    2.5,
    f64::INFINITY,
    f64::NAN,
    -f64::NAN,
];
const BYTES: [&[u8]; 5] = [b"", b"\0", b"\0\0", b"\x01", b"\xff"];

fn field_value(field: usize) -> BoxedStrategy<Value> {
    match field {
        0 => (0..PKS + 2).prop_map(Value::U64).boxed(),
        1 => (0u64..6).prop_map(Value::U64).boxed(),
        2 => prop_oneof![
            2 => Just(Value::Null),
            5 => prop::sample::select(STRS.to_vec()).prop_map(Value::from),
        ]
        .boxed(),
        3 => (-3i64..3).prop_map(Value::I64).boxed(),
        4 => prop::sample::select(FLOATS.to_vec()).prop_map(Value::F64).boxed(),
        5 => any::<bool>().prop_map(Value::Bool).boxed(),
        _ => prop_oneof![
            1 => Just(Value::Null),
            4 => prop::sample::select(BYTES.to_vec()).prop_map(Value::from),
        ]
        .boxed(),
    }
}

fn row_with_pk(pk: u64) -> impl Strategy<Value = Row> {
    (1..7usize)
        .map(field_value)
        .collect::<Vec<_>>()
        .prop_map(move |rest| std::iter::once(Value::U64(pk)).chain(rest).collect())
}

fn row() -> impl Strategy<Value = Row> {
    (0..PKS).prop_flat_map(row_with_pk)
}

#[derive(Debug, Clone)]
enum Stmt {
    Insert(Row),
    Replace(Row),
    Delete(u64),
    Update(u64, Vec<(usize, Value)>),
    /// A row that does not fit the schema (wrong type or arity): the whole transaction
    /// must fail with `SchemaMismatch`.
    Bad(Row),
}

fn stmt() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        4 => row().prop_map(Stmt::Insert),
        6 => row().prop_map(Stmt::Replace),
        3 => (0..PKS).prop_map(Stmt::Delete),
        3 => (row(), prop::collection::vec(any::<bool>(), 6)).prop_map(|(r, mask)| {
            let sets = (1..7).filter(|p| mask[p - 1]).map(|p| (p, r[p].clone())).collect();
            Stmt::Update(r[0].as_u64().expect("pk"), sets)
        }),
        1 => (row(), any::<bool>()).prop_map(|(mut r, arity)| {
            if arity {
                r.push(Value::Null);
            } else {
                r[1] = Value::from("not a u64");
            }
            Stmt::Bad(r)
        }),
    ]
}

#[derive(Debug, Clone)]
struct SelSpec {
    index: usize,
    q: Query,
}

fn bound(field: usize) -> impl Strategy<Value = Bound<Value>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        1 => field_value(field).prop_map(Bound::Included),
        1 => field_value(field).prop_map(Bound::Excluded),
    ]
}

fn sel_spec() -> impl Strategy<Value = SelSpec> {
    (0..INDEXES.len())
        .prop_flat_map(|index| {
            let fields = INDEXES[index].1;
            (Just(index), 0..=fields.len())
        })
        .prop_flat_map(|(index, k)| {
            let fields = INDEXES[index].1;
            let eq: Vec<_> = fields[..k].iter().map(|f| field_value(*f)).collect();
            let (lower, upper) = if k < fields.len() {
                (bound(fields[k]).boxed(), bound(fields[k]).boxed())
            } else {
                (Just(Bound::Unbounded).boxed(), Just(Bound::Unbounded).boxed())
            };
            (
                Just(index),
                eq,
                lower,
                upper,
                any::<bool>(),
                prop::option::weighted(0.3, 0u64..6),
            )
        })
        .prop_map(|(index, eq, lower, upper, reverse, limit)| SelSpec {
            index,
            q: Query {
                eq,
                lower,
                upper,
                reverse,
                limit,
            },
        })
}

#[derive(Debug, Clone)]
enum Op {
    One(Stmt),
    Txn(Vec<Stmt>),
    /// Replaces `n` rows from `start` in one transaction (volume for flushes); the rows
    /// come from `seed` and have a null `b`, so unique tables accept them too.
    Bulk {
        start: u64,
        n: u64,
        seed: u64,
    },
    Get(u64),
    Select(SelSpec),
    Count,
    Snapshot,
    SelectAt(usize, SelSpec),
    Release(usize),
    Flush,
    Compact,
    Reopen,
    Check,
    /// `delete_where` on the tables with a delete key: by `c` in the range, or by the
    /// field `a` (not the delete key), which must fail and change nothing.
    DeleteWhere {
        by_c: bool,
        lower: Bound<i64>,
        upper: Bound<i64>,
    },
}

fn i64_bound() -> impl Strategy<Value = Bound<i64>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => (-4i64..4).prop_map(Bound::Included),
        2 => (-4i64..4).prop_map(Bound::Excluded),
    ]
}

/// The model's answer to a delete by `c`: `None` for an empty range (an error).
fn dw_range(lower: &Bound<i64>, upper: &Bound<i64>) -> Option<(i64, i64)> {
    let lo = match lower {
        Bound::Unbounded => i64::MIN,
        Bound::Included(v) => *v,
        Bound::Excluded(v) => v + 1,
    };
    let hi = match upper {
        Bound::Unbounded => i64::MAX,
        Bound::Included(v) => *v,
        Bound::Excluded(v) => v - 1,
    };
    (lo <= hi).then_some((lo, hi))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => stmt().prop_map(Op::One),
        8 => prop::collection::vec(stmt(), 2..6).prop_map(Op::Txn),
        2 => (0..PKS, 10..PKS, any::<u64>()).prop_map(|(start, n, seed)| Op::Bulk { start, n, seed }),
        4 => (0..PKS + 2).prop_map(Op::Get),
        16 => sel_spec().prop_map(Op::Select),
        1 => Just(Op::Count),
        3 => Just(Op::Snapshot),
        6 => (any::<usize>(), sel_spec()).prop_map(|(i, s)| Op::SelectAt(i, s)),
        2 => any::<usize>().prop_map(Op::Release),
        3 => Just(Op::Flush),
        2 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Check),
        2 => (prop::bool::weighted(0.85), i64_bound(), i64_bound())
            .prop_map(|(by_c, lower, upper)| Op::DeleteWhere { by_c, lower, upper }),
    ]
}

/// A row of the generated fields plus the unindexed payload `p` (derived from the other
/// fields so it changes with most writes and makes the primary index big enough to
/// reach level 2).
fn full(mut r: Row) -> Row {
    let h = r.iter().map(|v| v.to_string().len() as u64).sum::<u64>()
        + r[0].as_u64().unwrap_or(0) * 7
        + r[1].as_u64().unwrap_or(0) * 131;
    r.push(Value::Bytes(vec![b'p'; (h * 37 % 1000) as usize]));
    r
}

fn full_stmt(s: &Stmt) -> Stmt {
    match s {
        Stmt::Insert(r) => Stmt::Insert(full(r.clone())),
        Stmt::Replace(r) => Stmt::Replace(full(r.clone())),
        Stmt::Bad(r) => Stmt::Bad(full(r.clone())),
        other => other.clone(),
    }
}

fn bulk_rows(start: u64, n: u64, seed: u64) -> Vec<Row> {
    let mut g = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|j| {
            vec![
                Value::U64((start + j) % PKS),
                Value::U64(g.gen_range(0..6)),
                Value::Null,
                Value::I64(g.gen_range(0..6) as i64 - 3),
                Value::F64(FLOATS[g.gen_range(0..FLOATS.len() as u64) as usize]),
                Value::Bool(g.gen_range(0..2) == 1),
                if g.gen_range(0..4) == 0 {
                    Value::Null
                } else {
                    Value::from(BYTES[g.gen_range(0..BYTES.len() as u64) as usize])
                },
            ]
        })
        .map(full)
        .collect()
}

/// Smaller than the shared options: with forty rows, the primary index of each table
/// must still grow past level 1.
fn model_options() -> strata::Options {
    strata::Options {
        memtable_budget: 16 << 10,
        target_file_size: 8 << 10,
        size_ratio: 2.0,
        ..small_options()
    }
}

type Model = BTreeMap<u64, Row>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    Constraint,
    Schema,
}

fn pk_of(r: &Row) -> u64 {
    r[0].as_u64().expect("pk")
}

/// Another row holds `row`'s (b, c) and b is not null.
fn unique_conflict(m: &Model, row: &Row) -> bool {
    !row[2].is_null()
        && m.iter()
            .any(|(pk, o)| *pk != pk_of(row) && o[2].cmp_total(&row[2]).is_eq() && o[3].cmp_total(&row[3]).is_eq())
}

/// Applies a transaction to the model: `(statements applied, updates missed)`.
fn model_apply(m: &mut Model, stmts: &[Stmt], unique: bool) -> Result<(u64, u64), Fail> {
    if stmts.iter().any(|s| matches!(s, Stmt::Bad(_))) {
        return Err(Fail::Schema);
    }
    let mut next = m.clone();
    let (mut applied, mut missed) = (0, 0);
    for s in stmts {
        match s {
            Stmt::Insert(r) => {
                if next.contains_key(&pk_of(r)) || (unique && unique_conflict(&next, r)) {
                    return Err(Fail::Constraint);
                }
                next.insert(pk_of(r), r.clone());
            }
            Stmt::Replace(r) => {
                if unique && unique_conflict(&next, r) {
                    return Err(Fail::Constraint);
                }
                next.insert(pk_of(r), r.clone());
            }
            Stmt::Delete(pk) => {
                next.remove(pk);
            }
            Stmt::Update(pk, sets) => {
                let Some(old) = next.get(pk) else {
                    missed += 1;
                    continue;
                };
                let mut r = old.clone();
                for (p, v) in sets {
                    r[*p] = v.clone();
                }
                if unique && unique_conflict(&next, &r) {
                    return Err(Fail::Constraint);
                }
                next.insert(*pk, r);
            }
            Stmt::Bad(_) => unreachable!(),
        }
        applied += 1;
    }
    *m = next;
    Ok((applied, missed))
}

fn classify(e: &Error) -> Option<Fail> {
    match e {
        Error::Constraint(_) => Some(Fail::Constraint),
        Error::SchemaMismatch(_) => Some(Fail::Schema),
        _ => None,
    }
}

fn in_bounds(v: &Value, lower: &Bound<Value>, upper: &Bound<Value>) -> bool {
    let lo = match lower {
        Bound::Unbounded => true,
        Bound::Included(b) => v.cmp_total(b).is_ge(),
        Bound::Excluded(b) => v.cmp_total(b).is_gt(),
    };
    let hi = match upper {
        Bound::Unbounded => true,
        Bound::Included(b) => v.cmp_total(b).is_le(),
        Bound::Excluded(b) => v.cmp_total(b).is_lt(),
    };
    lo && hi
}

fn model_select(m: &Model, spec: &SelSpec) -> Vec<Row> {
    let fields = INDEXES[spec.index].1;
    let k = spec.q.eq.len();
    let mut rows: Vec<Row> = m
        .values()
        .filter(|r| {
            fields[..k]
                .iter()
                .zip(&spec.q.eq)
                .all(|(p, v)| r[*p].cmp_total(v).is_eq())
                && (k == fields.len() || in_bounds(&r[fields[k]], &spec.q.lower, &spec.q.upper))
        })
        .cloned()
        .collect();
    sort_like_index(&mut rows, fields, &[0]);
    if spec.q.reverse {
        rows.reverse();
    }
    if let Some(l) = spec.q.limit {
        rows.truncate(l as usize);
    }
    rows
}

fn build_select(t: &Table, spec: &SelSpec, at: Option<&Snapshot>) -> Select {
    let q = t.select(INDEXES[spec.index].0).with_query(spec.q.clone());
    match at {
        Some(s) => q.at(s),
        None => q,
    }
}

fn fmt_rows(rows: &[Row]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}{:?}+{}",
                r[0],
                &r[1..7],
                r.get(7).and_then(|p| p.as_bytes()).map_or(0, |p| p.len())
            )
        })
        .collect();
    format!("[{}]", v.join(", "))
}

/// Totals over all cases, so the test can insist that the machinery really ran.
#[derive(Default)]
struct Totals {
    flushes: AtomicU64,
    compactions: AtomicU64,
    deferred_deletes: AtomicU64,
    dirty_skipped: AtomicU64,
    constraint_failures: AtomicU64,
    deepest: AtomicU64,
    delete_wheres: AtomicU64,
}

static TOTALS: Totals = Totals {
    flushes: AtomicU64::new(0),
    compactions: AtomicU64::new(0),
    deferred_deletes: AtomicU64::new(0),
    dirty_skipped: AtomicU64::new(0),
    constraint_failures: AtomicU64::new(0),
    deepest: AtomicU64::new(0),
    delete_wheres: AtomicU64::new(0),
};

/// Fields drop in order: the database (and its background threads) before the
/// directory it writes to.
struct Harness {
    db: Option<Db>,
    tables: Vec<Table>,
    /// Per table kind: index 0 = with unique index, 1 = without.
    models: [Model; 2],
    snapshots: Vec<(Snapshot, [Model; 2])>,
    dir: tempfile::TempDir,
    opts: strata::Options,
    /// Moved a millisecond forward per step, when the options run on it.
    clock: Option<std::sync::Arc<strata::ManualClock>>,
}

fn model_of(t: usize) -> usize {
    usize::from(!TABLES[t].1)
}

impl Harness {
    fn new() -> Harness {
        Harness::with_options(model_options(), None)
    }

    fn with_options(opts: strata::Options, clock: Option<std::sync::Arc<strata::ManualClock>>) -> Harness {
        let dir = table_harness::tempdir();
        let db = Db::open(dir.path(), opts.clone()).expect("open");
        let tables = TABLES
            .iter()
            .map(|(n, u)| db.create_table(schema(n, *u)).expect("create table"))
            .collect();
        Harness {
            dir,
            db: Some(db),
            tables,
            models: [Model::new(), Model::new()],
            snapshots: Vec::new(),
            opts,
            clock,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open db")
    }

    fn account(&self) -> Result<(), String> {
        let db = self.db();
        let st = db.stats();
        TOTALS.flushes.fetch_add(st.flushes, Ordering::Relaxed);
        TOTALS.compactions.fetch_add(st.compactions, Ordering::Relaxed);
        TOTALS
            .deepest
            .fetch_max(table_harness::deepest_level(db) as u64, Ordering::Relaxed);
        for (t, (name, _)) in self.tables.iter().zip(TABLES) {
            let ts = t.stats().map_err(|e| e.to_string())?;
            TOTALS
                .deferred_deletes
                .fetch_add(ts.deferred_deletes_emitted, Ordering::Relaxed);
            TOTALS.dirty_skipped.fetch_add(ts.dirty_hits_skipped, Ordering::Relaxed);
            if name.ends_with('d') && ts.hidden_reads != 0 {
                return Err(format!("deferred table {name} made {} hidden reads", ts.hidden_reads));
            }
            // Eager tables emit only with a delete key (deferred invariant 12).
            if name == "ne" && ts.deferred_deletes_emitted != 0 {
                return Err(format!("eager table {name} emitted deferred deletes"));
            }
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), String> {
        self.snapshots.clear();
        self.account()?;
        self.tables.clear();
        let db = self.db.take().expect("db");
        db.close().map_err(|e| format!("close: {e}"))?;
        let db = Db::open(self.dir.path(), self.opts.clone()).map_err(|e| format!("reopen: {e}"))?;
        let mut names = db.list_tables();
        names.sort();
        let mut want: Vec<String> = TABLES.iter().map(|t| t.0.to_string()).collect();
        want.sort();
        if names != want {
            return Err(format!("tables after reopen: {names:?}"));
        }
        self.tables = TABLES
            .iter()
            .map(|(n, _)| db.table(n).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        self.db = Some(db);
        Ok(())
    }

    fn stmts(&self, t: &Table, stmts: &[Stmt]) -> strata::Result<strata::table::Outcome> {
        let mut tx = t.transaction();
        for s in stmts {
            match s {
                Stmt::Insert(r) => tx.insert(r.clone()),
                Stmt::Replace(r) | Stmt::Bad(r) => tx.replace(r.clone()),
                Stmt::Delete(pk) => tx.delete(vec![Value::U64(*pk)]),
                Stmt::Update(pk, sets) => tx.update(
                    vec![Value::U64(*pk)],
                    sets.iter().map(|(p, v)| (FIELDS[*p].to_string(), v.clone())).collect(),
                ),
            };
        }
        tx.commit()
    }

    fn compare_select(&self, spec: &SelSpec, snap: Option<usize>) -> Result<(), String> {
        for (ti, t) in self.tables.iter().enumerate() {
            let m = match snap {
                Some(si) => &self.snapshots[si].1[model_of(ti)],
                None => &self.models[model_of(ti)],
            };
            let want = model_select(m, spec);
            let at = snap.map(|si| &self.snapshots[si].0);
            let got = collect(build_select(t, spec, at)).map_err(|e| format!("table {}: select: {e}", t.name()))?;
            if !table_harness::rows_eq(&got, &want) {
                return Err(format!(
                    "table {}: {spec:?} (snapshot {snap:?})\n got  {}\n want {}",
                    t.name(),
                    fmt_rows(&got),
                    fmt_rows(&want)
                ));
            }
            let n = build_select(t, spec, at).count().map_err(|e| e.to_string())?;
            if n != want.len() as u64 {
                return Err(format!(
                    "table {}: count of {spec:?} is {n}, want {}",
                    t.name(),
                    want.len()
                ));
            }
        }
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        if let Some(c) = &self.clock {
            c.advance(1000);
        }
        match op {
            Op::One(s) => {
                let s = &full_stmt(s);
                for (ti, (t, (_, unique))) in self.tables.iter().zip(TABLES).enumerate() {
                    let want = model_apply(&mut self.models[model_of(ti)].clone(), std::slice::from_ref(s), unique);
                    let got = match s {
                        Stmt::Insert(r) => t.insert(r.clone()).map(|_| true),
                        Stmt::Replace(r) | Stmt::Bad(r) => t.replace(r.clone()).map(|_| true),
                        Stmt::Delete(pk) => t.delete(&[Value::U64(*pk)]).map(|_| true),
                        Stmt::Update(pk, sets) => {
                            let sets: Vec<(&str, Value)> = sets.iter().map(|(p, v)| (FIELDS[*p], v.clone())).collect();
                            t.update(&[Value::U64(*pk)], &sets)
                        }
                    };
                    match (got, want) {
                        (Ok(found), Ok((_, missed))) => {
                            if found != (missed == 0) {
                                return Err(format!("table {}: {s:?} returned {found}", t.name()));
                            }
                        }
                        (Err(e), Err(f)) if classify(&e) == Some(f) => {
                            if f == Fail::Constraint {
                                TOTALS.constraint_failures.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        (got, want) => {
                            return Err(format!("table {}: {s:?}: got {got:?}, model says {want:?}", t.name()));
                        }
                    }
                }
                for (mi, unique) in [(0, true), (1, false)] {
                    let _ = model_apply(&mut self.models[mi], std::slice::from_ref(s), unique);
                }
            }
            Op::Txn(stmts) => {
                let stmts: &Vec<Stmt> = &stmts.iter().map(full_stmt).collect();
                for (ti, (t, (_, unique))) in self.tables.iter().zip(TABLES).enumerate() {
                    let want = model_apply(&mut self.models[model_of(ti)].clone(), stmts, unique);
                    match (self.stmts(t, stmts), want) {
                        (Ok(o), Ok((applied, missed))) => {
                            if o.statements != applied || o.updates_missed != missed {
                                return Err(format!(
                                    "table {}: outcome {o:?}, model applied {applied}, missed {missed}",
                                    t.name()
                                ));
                            }
                        }
                        (Err(e), Err(f)) if classify(&e) == Some(f) => {}
                        (got, want) => {
                            return Err(format!("table {}: txn: got {got:?}, model says {want:?}", t.name()));
                        }
                    }
                }
                for (mi, unique) in [(0, true), (1, false)] {
                    let _ = model_apply(&mut self.models[mi], stmts, unique);
                }
            }
            Op::Bulk { start, n, seed } => {
                let stmts: Vec<Stmt> = bulk_rows(*start, *n, *seed).into_iter().map(Stmt::Replace).collect();
                for t in &self.tables {
                    self.stmts(t, &stmts)
                        .map_err(|e| format!("bulk on {}: {e}", t.name()))?;
                }
                for (mi, unique) in [(0, true), (1, false)] {
                    model_apply(&mut self.models[mi], &stmts, unique).map_err(|f| format!("bulk model {f:?}"))?;
                }
            }
            Op::Get(pk) => {
                for (ti, t) in self.tables.iter().enumerate() {
                    let got = t.get(&[Value::U64(*pk)]).map_err(|e| e.to_string())?;
                    let want = self.models[model_of(ti)].get(pk);
                    let same = match (&got, want) {
                        (None, None) => true,
                        (Some(g), Some(w)) => row_eq(g, w),
                        _ => false,
                    };
                    if !same {
                        return Err(format!("table {}: get {pk}: got {got:?}, want {want:?}", t.name()));
                    }
                }
            }
            Op::Select(spec) => self.compare_select(spec, None)?,
            Op::Count => {
                for (ti, t) in self.tables.iter().enumerate() {
                    let n = t.count().map_err(|e| e.to_string())?;
                    if n != self.models[model_of(ti)].len() as u64 {
                        return Err(format!("table {}: count {n}", t.name()));
                    }
                }
            }
            Op::Snapshot => {
                if self.snapshots.len() < 4 {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.models.clone()));
                }
            }
            Op::SelectAt(i, spec) => {
                if !self.snapshots.is_empty() {
                    self.compare_select(spec, Some(i % self.snapshots.len()))?;
                }
            }
            Op::Release(i) => {
                if !self.snapshots.is_empty() {
                    self.snapshots.remove(i % self.snapshots.len());
                }
            }
            Op::Flush => self.db().flush().map_err(|e| format!("flush: {e}"))?,
            Op::Compact => self.db().compact_range().map_err(|e| format!("compact_range: {e}"))?,
            Op::Reopen => self.reopen()?,
            Op::DeleteWhere { by_c, lower, upper } => {
                let field = if *by_c { "c" } else { "a" };
                let want = dw_range(lower, upper).filter(|_| *by_c);
                let value_bound = |b: &Bound<i64>| b.map(Value::I64);
                for (ti, t) in self.tables.iter().enumerate() {
                    if model_of(ti) != 0 {
                        continue;
                    }
                    let got = t.delete_where(field, (value_bound(lower), value_bound(upper)));
                    match (&got, want) {
                        (Ok(()), Some(_)) => {}
                        (Err(Error::InvalidArgument(_)), None) => {}
                        _ => {
                            return Err(format!(
                                "table {}: delete_where: got {got:?}, model says {want:?}",
                                t.name()
                            ));
                        }
                    }
                }
                if let Some((lo, hi)) = want {
                    self.models[0].retain(|_, r| !matches!(r[3], Value::I64(c) if lo <= c && c <= hi));
                    TOTALS.delete_wheres.fetch_add(1, Ordering::Relaxed);
                }
            }
            Op::Check => {
                let r = self
                    .db()
                    .check(CheckOptions::default())
                    .map_err(|e| format!("check: {e}"))?;
                if !r.ok() {
                    return Err(format!("check:\n{r}"));
                }
                for (tc, (name, _)) in r.tables.iter().zip({
                    let mut t = TABLES.to_vec();
                    t.sort();
                    t
                }) {
                    let ti = TABLES.iter().position(|t| t.0 == name).expect("table");
                    if tc.name != name || tc.rows != self.models[model_of(ti)].len() as u64 {
                        return Err(format!("check sees {} rows in {}", tc.rows, tc.name));
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), String> {
        self.snapshots.clear();
        // Wait for background compactions too: they must not break anything either.
        self.db().wait_for_background().map_err(|e| e.to_string())?;
        let r = self
            .db()
            .check(CheckOptions { compact_first: true })
            .map_err(|e| format!("check: {e}"))?;
        if !r.ok() {
            return Err(format!("final check:\n{r}"));
        }
        for tc in &r.tables {
            for ic in &tc.indexes {
                if ic.dirty != 0 || ic.missing != 0 || ic.file_entries != tc.rows {
                    return Err(format!("after full compaction, table {} index {ic:?}\n{r}", tc.name));
                }
            }
        }
        for spec_index in 0..INDEXES.len() {
            let spec = SelSpec {
                index: spec_index,
                q: Query::default(),
            };
            self.compare_select(&spec, None)?;
        }
        self.account()
    }
}

/// Runs `ops` under options drawn from `options_seed` (sizes, runs per level, triggers,
/// FADE, density, sync policy; `tests/model_harness/options.rs`).
fn run_case(ops: &[Op], options_seed: u64) -> Result<(), TestCaseError> {
    let (drawn, clock) = options::drawn_options(options_seed, std::sync::Arc::new(table_harness::NoSyncFs));
    let shape = drawn.to_string();
    let mut h = Harness::with_options(drawn, Some(clock));
    for (n, op) in ops.iter().enumerate() {
        h.step(op)
            .map_err(|e| TestCaseError::fail(format!("op #{n} {op:?} (options: {shape}): {e}")))?;
    }
    h.finish()
        .map_err(|e| TestCaseError::fail(format!("{e} (options: {shape})")))
}

#[test]
fn tables_match_the_model() {
    let mut runner = TestRunner::new(Config {
        cases: 40,
        max_shrink_iters: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(
        &(prop::collection::vec(op(), 100..180), any::<u64>()),
        |(ops, options_seed)| run_case(&ops, options_seed),
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, (ops, options_seed))) => {
            panic!(
                "minimal failing case ({} ops, options seed {options_seed}): {why}\n{ops:#?}",
                ops.len()
            )
        }
        Err(e) => panic!("{e}"),
    }
    let t = &TOTALS;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "totals: flushes {} compactions {} dd {} dirty {} constraint {} deepest {}",
        get(&t.flushes),
        get(&t.compactions),
        get(&t.deferred_deletes),
        get(&t.dirty_skipped),
        get(&t.constraint_failures),
        get(&t.deepest)
    );
    assert!(get(&t.flushes) > 40, "flushes: {}", get(&t.flushes));
    assert!(get(&t.compactions) > 40, "compactions: {}", get(&t.compactions));
    assert!(
        get(&t.deferred_deletes) > 100,
        "deferred deletes: {}",
        get(&t.deferred_deletes)
    );
    assert!(
        get(&t.dirty_skipped) > 10,
        "dirty hits skipped: {}",
        get(&t.dirty_skipped)
    );
    assert!(
        get(&t.constraint_failures) > 10,
        "constraint failures: {}",
        get(&t.constraint_failures)
    );
    assert!(get(&t.deepest) >= 1, "deepest level {}", get(&t.deepest));
    assert!(get(&t.delete_wheres) > 20, "delete_wheres: {}", get(&t.delete_wheres));
}

/// A hand-written sequence that exercises the collisions the random test relies on:
/// blind replaces of rows already flushed leave dirty entries that a select must skip,
/// before and after a flush.
#[test]
fn dirty_entries_are_skipped_in_both_directions() {
    let mut h = Harness::new();
    let r = |pk: u64, a: u64| {
        vec![
            Value::U64(pk),
            Value::U64(a),
            Value::Null,
            Value::I64(0),
            Value::F64(0.0),
            Value::Bool(false),
            Value::Null,
        ]
    };
    let by_a = |eq: Vec<Value>, reverse: bool| SelSpec {
        index: 1,
        q: Query {
            eq,
            reverse,
            ..Query::default()
        },
    };
    let ops = vec![
        Op::One(Stmt::Replace(r(1, 1))),
        Op::One(Stmt::Replace(r(2, 1))),
        Op::Snapshot,
        // On disk, the old rows are out of reach of the commit's memtable probe.
        Op::Flush,
        Op::One(Stmt::Replace(r(1, 2))),
        Op::One(Stmt::Delete(2)),
        Op::Select(by_a(vec![Value::U64(1)], false)),
        Op::Select(by_a(vec![], true)),
        Op::SelectAt(0, by_a(vec![], false)),
        Op::Flush,
        Op::Select(by_a(vec![Value::U64(1)], true)),
        Op::SelectAt(0, by_a(vec![Value::U64(1)], true)),
        Op::Compact,
        Op::SelectAt(0, by_a(vec![], true)),
    ];
    for op in &ops {
        h.step(op).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
    // The blind writes of the deferred table left dirty entries that selects skipped.
    let nd = h.tables[3].stats().expect("stats");
    assert_eq!(nd.hidden_reads, 0, "{nd}");
    assert!(nd.dirty_hits_skipped > 0, "{nd}");
    let ne = h.tables[2].stats().expect("stats");
    assert_eq!(ne.dirty_hits_skipped, 0, "{ne}");
    for op in [Op::Release(0), Op::Compact, Op::Reopen, Op::Select(by_a(vec![], false))] {
        h.step(&op).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
    h.finish().expect("finish");
}
