//! `PartitionedDb` / `PartitionedTable`: a table hash-partitioned by primary key over N
//! databases behaves like one `Table` (model test: the same random statements, selects,
//! flushes and reopens applied to both, N in 1..=5, both maintenance modes); files built
//! per partition by `TableWriter` and ingested select like rows loaded one by one; bad
//! input (counts, reopen with another count, partitions that disagree on a schema, files
//! of another partition) is refused with a clear error and nothing changed.
//!
//! `STRATA_PARTITIONED_CASES` raises the number of proptest cases (default 16).

use std::ops::Bound;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use strata::partition::{MAX_PARTITIONS, Partitions};
use strata::table::schema::Schema;
use strata::table::select::{PRIMARY, Query};
use strata::table::value::Value;
use strata::table::writer::{TableWriter, TableWriterOptions};
use strata::table::{Row, Table};
use strata::{Db, Error, IngestOptions, Options, PartitionedDb, PartitionedTable};
use table_harness::tempdir;

const PKS: u64 = 30;

fn schema(mode: &str) -> Schema {
    Schema::parse(&format!(
        "table t (id u64, a u64, b i64 null, s str) primary key (id) index by_a (a) index by_ba (b, a) {mode}"
    ))
    .expect("schema")
}

mod table_harness;

/// Small memtables and files (flushes and compactions with little data), no fsync.
fn small() -> Options {
    table_harness::small_options()
}

fn row(id: u64, a: u64, b: Option<i64>) -> Row {
    vec![
        Value::U64(id),
        Value::U64(a),
        b.map_or(Value::Null, Value::I64),
        Value::from(format!("row {id} {a}").as_str()),
    ]
}

/// (index: 0 by_a, 1 by_ba (eq on b, range on a), 2 primary; eq; lower bound; upper
/// bound; reverse; limit).
type SelectOp = (u8, Option<i64>, Option<u64>, Option<u64>, bool, Option<u64>);

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u64, Option<i64>),
    Replace(u64, u64, Option<i64>),
    Update(u64, u64),
    Delete(u64),
    Get(u64),
    Select(SelectOp),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..PKS;
    let a = 0u64..6;
    let b = prop::option::weighted(0.8, -2i64..3);
    prop_oneof![
        6 => (id.clone(), a.clone(), b.clone()).prop_map(|(i, a, b)| Op::Insert(i, a, b)),
        6 => (id.clone(), a.clone(), b).prop_map(|(i, a, b)| Op::Replace(i, a, b)),
        3 => (id.clone(), a.clone()).prop_map(|(i, a)| Op::Update(i, a)),
        3 => id.clone().prop_map(Op::Delete),
        2 => id.prop_map(Op::Get),
        6 => (
            0u8..3,
            prop::option::of(-2i64..3),
            prop::option::of(a.clone()),
            prop::option::of(a),
            any::<bool>(),
            prop::option::weighted(0.4, 0u64..5),
        )
            .prop_map(Op::Select),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// The partitioned table and the single table it is checked against.
struct Pair {
    pdir: std::path::PathBuf,
    sdir: std::path::PathBuf,
    pdb: Option<PartitionedDb>,
    pt: PartitionedTable,
    sdb: Option<Db>,
    st: Table,
}

impl Pair {
    fn new(root: &Path, n: usize, mode: &str) -> Pair {
        let pdir = root.join("parts");
        let sdir = root.join("single");
        let pdb = PartitionedDb::open(&pdir, n, small()).expect("open partitioned");
        let pt = pdb.create_table(schema(mode)).expect("create partitioned");
        let sdb = Db::open(&sdir, small()).expect("open single");
        let st = sdb.create_table(schema(mode)).expect("create single");
        Pair {
            pdir,
            sdir,
            pdb: Some(pdb),
            pt,
            sdb: Some(sdb),
            st,
        }
    }

    fn reopen(&mut self) {
        if let Some(db) = self.pdb.take() {
            db.close().expect("close partitioned");
        }
        if let Some(db) = self.sdb.take() {
            db.close().expect("close single");
        }
        let pdb = PartitionedDb::open_existing(&self.pdir, small()).expect("reopen partitioned");
        self.pt = pdb.table("t").expect("partitioned table");
        self.pdb = Some(pdb);
        let sdb = Db::open(&self.sdir, small()).expect("reopen single");
        self.st = sdb.table("t").expect("single table");
        self.sdb = Some(sdb);
    }

    fn flush(&self) {
        self.pdb.as_ref().expect("open").flush().expect("flush");
        self.sdb.as_ref().expect("open").flush().expect("flush");
    }
}

fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    p: strata::Result<T>,
    s: strata::Result<T>,
) -> Result<(), TestCaseError> {
    match (p, s) {
        (Ok(p), Ok(s)) => prop_assert_eq!(p, s, "{}", what),
        (Err(p), Err(s)) => prop_assert_eq!(
            std::mem::discriminant(&p),
            std::mem::discriminant(&s),
            "{}: {} vs {}",
            what,
            p,
            s
        ),
        (p, s) => prop_assert!(false, "{what}: partitioned {p:?}, single {s:?}"),
    }
    Ok(())
}

fn run(n: usize, mode: &str, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempdir();
    let mut pair = Pair::new(dir.path(), n, mode);
    for op in ops {
        match op.clone() {
            Op::Insert(i, a, b) => same("insert", pair.pt.insert(row(i, a, b)), pair.st.insert(row(i, a, b)))?,
            Op::Replace(i, a, b) => same("replace", pair.pt.replace(row(i, a, b)), pair.st.replace(row(i, a, b)))?,
            Op::Update(i, a) => {
                let set = [("a", Value::U64(a)), ("s", Value::from("updated"))];
                same(
                    "update",
                    pair.pt.update(&[Value::U64(i)], &set),
                    pair.st.update(&[Value::U64(i)], &set),
                )?
            }
            Op::Delete(i) => same(
                "delete",
                pair.pt.delete(&[Value::U64(i)]),
                pair.st.delete(&[Value::U64(i)]),
            )?,
            Op::Get(i) => same("get", pair.pt.get(&[Value::U64(i)]), pair.st.get(&[Value::U64(i)]))?,
            Op::Select((index, eq, lo, hi, reverse, limit)) => {
                let name = ["by_a", "by_ba", PRIMARY][usize::from(index)];
                let lower = lo.map_or(Bound::Unbounded, |v| Bound::Included(Value::U64(v)));
                let upper = hi.map_or(Bound::Unbounded, |v| Bound::Excluded(Value::U64(v)));
                let eqv: Vec<Value> = match (index, eq) {
                    (1, Some(b)) => vec![Value::I64(b)],
                    _ => vec![],
                };
                let q = Query {
                    eq: eqv,
                    lower,
                    upper,
                    reverse,
                    limit,
                };
                let ps = pair.pt.select(name).with_query(q.clone());
                let ss = pair.st.select(name).with_query(q);
                // by_ba with a range and no equality ranges over b (i64): a u64 bound
                // is a type error in both.
                let p = ps.rows().and_then(|r| r.collect::<strata::Result<Vec<Row>>>());
                let s = ss.rows().and_then(|r| r.collect::<strata::Result<Vec<Row>>>());
                same(&format!("{op:?}"), p, s)?;
            }
            Op::Flush => pair.flush(),
            Op::Reopen => pair.reopen(),
        }
    }
    // Every row lives in its own partition only (the routing invariant).
    let rows: Vec<Row> = pair
        .pt
        .select(PRIMARY)
        .rows()
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect();
    for r in &rows {
        let home = pair.pt.partition_of_row(r).expect("route");
        for i in 0..n {
            let got = pair.pt.partition(i).expect("partition").get(&r[..1]).expect("get");
            prop_assert_eq!(got.is_some(), i == home);
        }
    }
    let stats = pair.pt.stats().expect("stats");
    prop_assert_eq!(stats.indexes.len(), 2);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("STRATA_PARTITIONED_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

#[test]
fn partitioned_table_matches_a_single_table() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (1usize..=5, prop::bool::ANY, prop::collection::vec(op(), 1..80));
    runner
        .run(&strategy, |(n, deferred, ops)| {
            run(n, if deferred { "deferred" } else { "eager" }, &ops)
        })
        .expect("model");
}

#[test]
fn select_merges_in_index_order_and_limit_stops_early() {
    let dir = tempdir();
    let db = PartitionedDb::open(dir.path(), 4, small()).expect("open");
    let t = db.create_table(schema("deferred")).expect("create");
    for id in 0..200 {
        t.insert(row(id, id % 7, Some((id % 3) as i64))).expect("insert");
    }
    let ids = |rows: Vec<Row>| -> Vec<u64> {
        rows.iter()
            .map(|r| match r[0] {
                Value::U64(v) => v,
                _ => panic!("id"),
            })
            .collect()
    };
    let got: Vec<Row> = t
        .select("by_a")
        .eq(vec![Value::U64(3)])
        .rows()
        .expect("rows")
        .collect::<strata::Result<_>>()
        .expect("ok");
    let want: Vec<u64> = (0..200).filter(|i| i % 7 == 3).collect();
    assert_eq!(ids(got), want);
    let got: Vec<Row> = t
        .select("by_a")
        .range(Bound::Included(Value::U64(5)), Bound::Unbounded)
        .reverse()
        .limit(3)
        .rows()
        .expect("rows")
        .collect::<strata::Result<_>>()
        .expect("ok");
    // a = 6 first, largest ids first.
    assert_eq!(ids(got), [195, 188, 181]);
    // A row is read only when the merge takes it: the partitions' look-ahead entries
    // cost no primary lookup.
    let before = t.stats().expect("stats").primary_lookups;
    let got = t
        .select("by_a")
        .eq(vec![Value::U64(2)])
        .limit(2)
        .rows()
        .expect("rows")
        .count();
    assert_eq!(got, 2);
    assert_eq!(t.stats().expect("stats").primary_lookups - before, 2);
    // Rows come from more than one partition.
    let parts: std::collections::BTreeSet<usize> = want
        .iter()
        .map(|&i| t.partition_of_pk(&[Value::U64(i)]).expect("route"))
        .collect();
    assert!(parts.len() > 1, "{parts:?}");
}

/// A select is planned once for every partition; a partition whose layout has moved
/// on under it (here an index dropped there alone, so the index read sits at another
/// position) is planned on its own and still answers.
#[test]
fn a_partition_whose_layout_differs_is_planned_on_its_own() {
    let dir = tempdir();
    let db = PartitionedDb::open(dir.path(), 3, small()).expect("open");
    let t = db.create_table(schema("eager")).expect("create");
    for id in 0..120 {
        t.insert(row(id, id % 7, Some((id % 3) as i64))).expect("insert");
    }
    db.partition(1)
        .expect("partition")
        .table("t")
        .expect("table")
        .drop_index("by_a")
        .expect("drop");
    let got: Vec<u64> = t
        .select("by_ba")
        .eq(vec![Value::I64(2)])
        .rows()
        .expect("rows")
        .map(|r| match r.expect("row")[0] {
            Value::U64(v) => v,
            _ => panic!("id"),
        })
        .collect();
    // Index order: (b, a), then the primary key.
    let mut want: Vec<(u64, u64)> = (0..120).filter(|i| i % 3 == 2).map(|i| (i % 7, i)).collect();
    want.sort();
    assert_eq!(got, want.into_iter().map(|(_, i)| i).collect::<Vec<_>>());
    // The dropped index is missing in partition 1 only: a clear error, not fewer rows.
    let err = t
        .select("by_a")
        .eq(vec![Value::U64(3)])
        .rows()
        .expect_err("by_a is gone in partition 1");
    assert!(matches!(err, Error::NotFound(_)), "{err}");
}

fn write_partition(schema: &Schema, dir: &Path, ids: &[u64], part: Option<(usize, usize)>) -> strata::Result<()> {
    let mut w = TableWriter::create_with(
        schema,
        dir,
        TableWriterOptions {
            partition: part,
            ..TableWriterOptions::default()
        },
    )?;
    for &id in ids {
        w.add(&row(id, id % 5, Some(id as i64 % 4)))?;
    }
    w.finish().map(|_| ())
}

#[test]
fn per_partition_writers_and_ingest_select_like_a_row_by_row_load() {
    let root = tempdir();
    let n = 3;
    for mode in ["eager", "deferred"] {
        let built = PartitionedDb::open(root.path().join(format!("built-{mode}")), n, small()).expect("open");
        let bt = built.create_table(schema(mode)).expect("create");
        let loaded = PartitionedDb::open(root.path().join(format!("loaded-{mode}")), n, small()).expect("open");
        let lt = loaded.create_table(schema(mode)).expect("create");
        for id in 0..300 {
            lt.insert(row(id, id % 5, Some(id as i64 % 4))).expect("insert");
        }
        for p in 0..n {
            let ids: Vec<u64> = (0..300)
                .filter(|&i| bt.partition_of_pk(&[Value::U64(i)]).expect("route") == p)
                .collect();
            let dir = root.path().join(format!("files-{mode}-{p}"));
            // Alternate: files that record their partition, and files that do not
            // (checked by reading the primary file).
            let part = if p % 2 == 0 { Some((p, n)) } else { None };
            write_partition(&schema(mode), &dir, &ids, part).expect("write");
            bt.ingest(p, &dir, IngestOptions::default()).expect("ingest");
        }
        for (index, eq) in [
            ("by_a", vec![Value::U64(2)]),
            ("by_ba", vec![Value::I64(1)]),
            (PRIMARY, vec![]),
        ] {
            for reverse in [false, true] {
                let q = |t: &PartitionedTable| -> Vec<Row> {
                    let q = Query {
                        eq: eq.clone(),
                        reverse,
                        ..Query::default()
                    };
                    let s = t.select(index).with_query(q);
                    s.rows().expect("rows").map(|r| r.expect("row")).collect()
                };
                let (b, l) = (q(&bt), q(&lt));
                assert!(!b.is_empty());
                assert_eq!(b, l, "{index} reverse={reverse}");
            }
        }
        // Ingested rows behave like any: replace and delete through the router.
        bt.replace(row(7, 4, None)).expect("replace");
        bt.delete(&[Value::U64(8)]).expect("delete");
        built.flush().expect("flush");
        let fours = bt.select("by_a").eq(vec![Value::U64(4)]).count().expect("count");
        assert_eq!(fours, 60 + 1);
        assert_eq!(bt.get(&[Value::U64(8)]).expect("get"), None);
        // Counters summed over the partitions: the two statements, in whichever
        // partitions they ran.
        let stats = bt.stats().expect("stats");
        assert_eq!(stats.statements, 2);
        assert_eq!(bt.select(PRIMARY).count().expect("count"), 299);
        built.close().expect("close");
        loaded.close().expect("close");
    }
}

#[test]
fn bad_counts_and_reopen_with_another_count_are_refused() {
    let root = tempdir();
    let dir = root.path().join("p");
    for n in [0, MAX_PARTITIONS + 1] {
        let e = PartitionedDb::open(&dir, n, small()).expect_err("bad count");
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("partition count"),
            "{e}"
        );
        assert!(!dir.exists());
    }
    let db = PartitionedDb::open(&dir, 3, small()).expect("open");
    let t = db.create_table(schema("eager")).expect("create");
    t.insert(row(1, 1, None)).expect("insert");
    assert!(matches!(db.partition(3), Err(Error::InvalidArgument(_))));
    assert!(matches!(t.partition(3), Err(Error::InvalidArgument(_))));
    let e = db.create_table(schema("eager")).expect_err("exists");
    assert!(matches!(e, Error::AlreadyExists(_)), "{e}");
    let unique = Schema::parse("table u (id u64, e str) primary key (id) index by_e unique (e)").expect("schema");
    let e = db.create_table(unique).expect_err("unique");
    assert!(e.to_string().contains("unique index \"by_e\""), "{e}");
    assert_eq!(db.list_tables(), ["t"]);
    db.close().expect("close");
    let e = PartitionedDb::open(&dir, 4, small()).expect_err("other count");
    assert!(e.to_string().contains("holds 3 partitions, not 4"), "{e}");
    let db = PartitionedDb::open_existing(&dir, small()).expect("reopen");
    assert_eq!(db.count(), 3);
    assert_eq!(
        db.table("t").expect("t").get(&[Value::U64(1)]).expect("get"),
        Some(row(1, 1, None))
    );
    let e = db.table("t").expect("t").get(&[Value::from("x")]).expect_err("bad pk");
    assert!(matches!(e, Error::SchemaMismatch(_) | Error::InvalidArgument(_)), "{e}");
    db.close().expect("close");
}

/// A directory of `n` partitions (no table) at `dir`, where each (partition, mode) of
/// `tables` then gets table `t` behind the router's back.
fn tables_behind_the_router(dir: &std::path::Path, n: usize, tables: &[(usize, &str)]) {
    if !dir.exists() {
        PartitionedDb::open(dir, n, small())
            .expect("open")
            .close()
            .expect("close");
    }
    let parts = Partitions::open_existing(dir, small()).expect("partitions");
    for &(i, mode) in tables {
        parts.db(i).create_table(schema(mode)).expect("create");
    }
    parts.close().expect("close");
}

#[test]
fn partitions_that_disagree_on_a_table_are_refused_at_open() {
    let root = tempdir();
    let dir = root.path().join("p");
    // In partitions 0 and 2 only, with another schema in partition 2.
    tables_behind_the_router(&dir, 3, &[(0, "eager"), (2, "deferred")]);
    let e = PartitionedDb::open_existing(&dir, small()).expect_err("missing in 1");
    assert!(matches!(e, Error::SchemaMismatch(_)), "{e}");
    assert!(e.to_string().contains("not in partition 1"), "{e}");
    tables_behind_the_router(&dir, 3, &[(1, "eager")]);
    let e = PartitionedDb::open_existing(&dir, small()).expect_err("differs in 2");
    assert!(matches!(e, Error::SchemaMismatch(_)), "{e}");
    assert!(e.to_string().contains("in partition 2"), "{e}");
    // Missing from the first partition only: the same disagreement, not "no such table".
    let dir = root.path().join("q");
    tables_behind_the_router(&dir, 3, &[(1, "eager"), (2, "eager")]);
    let e = PartitionedDb::open_existing(&dir, small()).expect_err("missing in 0");
    assert!(matches!(e, Error::SchemaMismatch(_)), "{e}");
    assert!(
        e.to_string().contains("exists in partition 1 but not in partition 0"),
        "{e}"
    );
}

#[test]
fn files_for_another_partition_are_refused_and_change_nothing() {
    let root = tempdir();
    let n = 4;
    let db = PartitionedDb::open(root.path().join("db"), n, small()).expect("open");
    let t = db.create_table(schema("deferred")).expect("create");
    let ids_of = |p: usize| -> Vec<u64> {
        (0..100)
            .filter(|&i| t.partition_of_pk(&[Value::U64(i)]).expect("route") == p)
            .collect()
    };
    // The writer refuses a row of another partition.
    let mut w = TableWriter::create_with(
        &schema("deferred"),
        root.path().join("w"),
        TableWriterOptions {
            partition: Some((0, n)),
            ..TableWriterOptions::default()
        },
    )
    .expect("writer");
    let other = ids_of(1)[0];
    let e = w.add(&row(other, 0, None)).expect_err("other partition");
    assert!(e.to_string().contains("routes to partition 1 of 4"), "{e}");
    assert_eq!(w.rows(), 0);
    let e = TableWriter::create_with(
        &schema("deferred"),
        root.path().join("w2"),
        TableWriterOptions {
            partition: Some((4, 4)),
            ..TableWriterOptions::default()
        },
    )
    .expect_err("partition 4 of 4");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    // Recorded for partition 1, ingested into 2: refused.
    let recorded = root.path().join("rec1");
    write_partition(&schema("deferred"), &recorded, &ids_of(1), Some((1, n))).expect("write");
    let e = t
        .ingest(2, &recorded, IngestOptions::default())
        .expect_err("wrong partition");
    assert!(
        e.to_string().contains("partition 1 of 4") && e.to_string().contains("not partition 2"),
        "{e}"
    );
    // Recorded for partition 1 of 2: refused by count.
    let two = PartitionedDb::open(root.path().join("two"), 2, small()).expect("open");
    let t2 = two.create_table(schema("deferred")).expect("create");
    let of_two: Vec<u64> = (0..100)
        .filter(|&i| t2.partition_of_pk(&[Value::U64(i)]).expect("route") == 1)
        .collect();
    let other_count = root.path().join("rec-of-2");
    write_partition(&schema("deferred"), &other_count, &of_two, Some((1, 2))).expect("write");
    let e = t
        .ingest(1, &other_count, IngestOptions::default())
        .expect_err("wrong count");
    assert!(e.to_string().contains("partition 1 of 2"), "{e}");
    t2.ingest(1, &other_count, IngestOptions::default())
        .expect("right count");
    two.close().expect("close");
    // Unrecorded files mixing partitions: refused after reading the primary file.
    let mixed = root.path().join("mixed");
    write_partition(&schema("deferred"), &mixed, &[0, 1, 2, 3, 4, 5, 6, 7], None).expect("write");
    let e = t.ingest(0, &mixed, IngestOptions::default()).expect_err("mixed");
    assert!(
        e.to_string().contains("primary key of another partition than 0 of 4"),
        "{e}"
    );
    let e = t
        .ingest(9, &recorded, IngestOptions::default())
        .expect_err("no partition 9");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // Nothing changed anywhere.
    assert_eq!(t.select(PRIMARY).count().expect("count"), 0);
    // The right partition takes them.
    t.ingest(1, &recorded, IngestOptions::default()).expect("ingest");
    assert_eq!(t.select(PRIMARY).count().expect("count"), ids_of(1).len() as u64);
    db.close().expect("close");
}

#[test]
fn a_descriptor_partition_line_is_checked() {
    use strata::table::writer::TableFiles;
    let text = |line: &str| {
        format!(
            "strata-table-files 1\nschema {}\nrows 1\n{line}\nfile primary primary.sst 1 00\n\
             file index:by_a index-0.sst 1 00\nfile index:by_ba index-1.sst 1 00\n",
            schema("eager")
        )
    };
    let f = TableFiles::parse(Path::new("d"), &text("partition 2 4 1")).expect("parses");
    let p = f.partition.expect("recorded");
    assert_eq!((p.index, p.count), (2, 4));
    for (line, why) in [
        ("partition 4 4 1", "not below the count"),
        ("partition 0 0 1", "partition count 0"),
        ("partition 1 4 9", "unknown hash function"),
        ("partition 1 4", "3 numbers"),
    ] {
        let e = TableFiles::parse(Path::new("d"), &text(line)).expect_err(line);
        assert!(
            e.to_string().contains(why) && e.to_string().contains("line 4"),
            "{line}: {e}"
        );
    }
}

/// The partitions a listing of `dir` holds (`p000`, ... directories).
fn partition_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('p') && n.len() == 4)
        .collect();
    names.sort();
    names
}

#[test]
fn a_serving_handle_opens_its_partitions_only_and_refuses_the_others_rows() {
    let root = tempdir();
    let dir = root.path().join("db");
    let n = 4;
    // A node serving partitions 1 and 3 of a new directory creates only theirs.
    let node = PartitionedDb::open_serving(&dir, n, &[3, 1, 3], small()).expect("open");
    assert_eq!(node.serves(), vec![1, 3]);
    assert_eq!(node.count(), n);
    assert_eq!(partition_dirs(&dir), vec!["p001", "p003"]);
    let t = node.create_table(schema("deferred")).expect("create");
    assert_eq!(t.serves(), vec![1, 3]);
    let route = |id: u64| t.partition_of_pk(&[Value::U64(id)]).expect("route");
    let mine = |id: u64| [1, 3].contains(&route(id));
    let ids: Vec<u64> = (0..200).collect();
    for &id in &ids {
        let r = t.insert(row(id, id % 5, Some(1)));
        if mine(id) {
            r.expect("insert into a served partition");
        } else {
            let e = r.expect_err("a row of another node");
            assert!(
                matches!(&e, Error::InvalidArgument(m) if m.contains("not served") && m.contains("[1, 3]")),
                "{e}"
            );
        }
    }
    // Every statement kind refuses another node's row; nothing reaches a partition.
    let other = ids
        .iter()
        .copied()
        .find(|&id| !mine(id))
        .expect("a row of another node");
    assert!(t.get(&[Value::U64(other)]).is_err());
    assert!(t.replace(row(other, 0, None)).is_err());
    assert!(t.update(&[Value::U64(other)], &[("a", Value::U64(9))]).is_err());
    assert!(t.delete(&[Value::U64(other)]).is_err());
    assert!(t.partition(0).is_err() && node.partition(2).is_err() && node.partition(9).is_err());
    assert!(t.ingest(0, root.path(), IngestOptions::default()).is_err());
    assert_eq!(partition_dirs(&dir), vec!["p001", "p003"]);
    // Selects read the served partitions: exactly their rows, in index order.
    let got: Vec<Row> = t
        .select("by_a")
        .eq(vec![Value::U64(2)])
        .rows()
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect();
    let want: Vec<Row> = ids
        .iter()
        .copied()
        .filter(|&id| mine(id) && id % 5 == 2)
        .map(|id| row(id, 2, Some(1)))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    let served_rows = ids.iter().filter(|&&id| mine(id)).count() as u64;
    assert_eq!(t.select(PRIMARY).count().expect("count"), served_rows);
    node.close().expect("close");
    // Opened whole, a node's directory is refused, naming what it lacks, and gets no
    // empty partitions of the other node's.
    for whole in [
        PartitionedDb::open_existing(&dir, small()),
        PartitionedDb::open(&dir, n, small()),
    ] {
        let e = whole.expect_err("a node's directory opened whole");
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("lacks partitions [0, 2]")),
            "{e}"
        );
    }
    assert_eq!(partition_dirs(&dir), vec!["p001", "p003"]);

    // The other node serves 0 and 2 of the same directory: the same count and hash.
    let other_node = PartitionedDb::open_serving(&dir, n, &[0, 2], small()).expect("open");
    let t2 = other_node.create_table(schema("deferred")).expect("create");
    for id in ids.iter().copied().filter(|&id| !mine(id)) {
        t2.insert(row(id, id % 5, Some(1))).expect("insert");
    }
    other_node.close().expect("close");
    // Opened whole, the directory holds every row once; a node opens it with the count
    // it records.
    let other_node = PartitionedDb::open_existing_serving(&dir, &[2], small()).expect("open");
    assert_eq!((other_node.count(), other_node.serves()), (n, vec![2]));
    other_node.close().expect("close");
    let whole = PartitionedDb::open_existing(&dir, small()).expect("open");
    assert_eq!(whole.serves(), vec![0, 1, 2, 3]);
    let t = whole.table("t").expect("table");
    assert_eq!(t.select(PRIMARY).count().expect("count"), ids.len() as u64);
    whole.close().expect("close");
}

#[test]
fn bad_serving_lists_are_refused_and_create_nothing() {
    let root = tempdir();
    let dir = root.path().join("db");
    for (serve, want) in [
        (&[][..], "no partition to serve"),
        (&[1, 4][..], "partition 4 does not exist"),
    ] {
        let e = PartitionedDb::open_serving(&dir, 4, serve, small()).expect_err("refused");
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains(want)), "{e}");
        assert!(!dir.exists(), "{serve:?} created {}", dir.display());
    }
    // A serving handle checks the count like any open.
    PartitionedDb::open(&dir, 4, small())
        .expect("create")
        .close()
        .expect("close");
    let e = PartitionedDb::open_serving(&dir, 8, &[1], small()).expect_err("another count");
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("holds 4 partitions")),
        "{e}"
    );
}

#[test]
fn a_create_interrupted_before_its_descriptor_is_created_again() {
    let root = tempdir();
    let dir = root.path().join("db");
    // What a crash leaves while creating: some partitions, no descriptor yet (it is
    // written last).
    std::fs::create_dir_all(&dir).expect("mkdir");
    Db::open(dir.join("p001"), small())
        .expect("partition")
        .close()
        .expect("close");
    let e = PartitionedDb::open_existing(&dir, small()).expect_err("no descriptor");
    assert!(matches!(&e, Error::NotADatabase { .. }), "{e}");
    let e = PartitionedDb::open_existing_serving(&dir, &[1], small()).expect_err("no descriptor");
    assert!(matches!(&e, Error::NotADatabase { .. }), "{e}");
    // Opening with the count creates again: every partition, then the descriptor.
    let db = PartitionedDb::open(&dir, 4, small()).expect("create");
    assert_eq!(db.serves(), vec![0, 1, 2, 3]);
    db.close().expect("close");
    assert_eq!(partition_dirs(&dir), vec!["p000", "p001", "p002", "p003"]);
    assert!(dir.join("PARTITIONS").exists());
    PartitionedDb::open_existing(&dir, small())
        .expect("reopen")
        .close()
        .expect("close");
}

/// A lost descriptor is refused by a serving open too when a partition it leaves to
/// other nodes holds data: before, only the served partitions were looked at, and the
/// open wrote a descriptor with a new count over the others' rows.
#[test]
fn a_serving_open_without_descriptor_is_refused_over_unserved_data() {
    let root = tempdir();
    let dir = root.path().join("db");
    let db = PartitionedDb::open(&dir, 2, small()).expect("create");
    let t = db.create_table(schema("eager")).expect("table");
    for id in 0..40 {
        t.insert(row(id, id % 5, None)).expect("insert");
    }
    drop(t);
    db.close().expect("close");
    std::fs::remove_file(dir.join("PARTITIONS")).expect("lose the descriptor");
    for serve in [&[2usize, 3][..], &[1, 2, 3]] {
        let e = PartitionedDb::open_serving(&dir, 4, serve, small()).expect_err("lost descriptor");
        assert!(e.to_string().contains("descriptor is lost"), "{serve:?}: {e}");
        assert!(!dir.join("PARTITIONS").exists());
    }
}

/// A partition's table handle (`PartitionedTable::partition`) refuses rows that route
/// to another partition, in statements, transactions and ingests, and unique indexes:
/// before, a transaction on partition 0 wrote a row of partition 1, which the
/// partitioned table then could not get and would insert again, and a unique index
/// checked one partition only.
#[test]
fn a_partitions_table_refuses_what_belongs_elsewhere() {
    use strata::table::schema::IndexDef;
    let root = tempdir();
    let db = PartitionedDb::open(root.path().join("db"), 2, small()).expect("open");
    let t = db.create_table(schema("eager")).expect("table");
    let id_in = |p: usize| {
        (0..)
            .find(|&id| t.partition_of_pk(&[Value::U64(id)]).expect("route") == p)
            .expect("an id")
    };
    let (mine, other) = (id_in(0), id_in(1));
    let p0 = t.partition(0).expect("partition 0");
    p0.insert(row(mine, 1, None)).expect("a row of partition 0");
    let elsewhere = |r: strata::Result<()>, what: &str| match r {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("belongs to partition 1 of 2, not to partition 0"),
                "{what}: {m}"
            )
        }
        r => panic!("{what}: {r:?}"),
    };
    elsewhere(p0.insert(row(other, 1, None)), "insert");
    elsewhere(p0.replace(row(other, 1, None)), "replace");
    elsewhere(p0.delete(&[Value::U64(other)]), "delete");
    elsewhere(
        p0.update(&[Value::U64(other)], &[("a", Value::U64(2))]).map(drop),
        "update",
    );
    let mut tx = p0.transaction();
    tx.insert(row(mine + 1_000_000, 1, None)).insert(row(other, 1, None));
    elsewhere(tx.commit().map(drop), "a transaction with one foreign row");
    // Nothing of the refused statements was written.
    assert_eq!(p0.count().expect("count"), 1);
    assert_eq!(t.get(&[Value::U64(other)]).expect("get"), None);
    t.insert(row(other, 1, None))
        .expect("the row goes to its own partition");
    assert_eq!(t.select(PRIMARY).count().expect("count"), 2);
    // Files written for partition 1 are refused by partition 0's handle.
    let files = root.path().join("files");
    let mut w = TableWriter::create_with(
        &schema("eager"),
        &files,
        TableWriterOptions {
            partition: Some((1, 2)),
            ..Default::default()
        },
    )
    .expect("writer");
    w.add(&row(other, 5, None)).expect("add");
    w.finish().expect("finish");
    match p0.ingest(&files, IngestOptions::default()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("written for partition 1 of 2"), "{m}"),
        r => panic!("partition 1's files ingested into partition 0: {r:?}"),
    }
    assert_eq!(p0.count().expect("count"), 1);
    let unique = IndexDef::new("u_a", &["a"], true);
    match p0.create_index(unique) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("cannot check uniqueness"), "{m}"),
        r => panic!("a unique index on one partition: {r:?}"),
    }
    assert!(!table_index_names(p0).contains(&"u_a".to_string()));
    // So does a writer of one partition's files, before it makes its directory.
    let with_unique = Schema::parse("table u (id u64, a u64) primary key (id) index u_a unique (a)").expect("schema");
    let dir = root.path().join("unique");
    let opts = TableWriterOptions {
        partition: Some((0, 2)),
        ..Default::default()
    };
    match TableWriter::create_with(&with_unique, &dir, opts) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("cannot check uniqueness"), "{m}"),
        r => panic!("a partition's writer of a unique index: {:?}", r.map(|_| ())),
    }
    assert!(!dir.exists());
    db.close().expect("close");
}

fn table_index_names(t: &Table) -> Vec<String> {
    t.schema()
        .expect("schema")
        .indexes
        .into_iter()
        .map(|i| i.name)
        .collect()
}
