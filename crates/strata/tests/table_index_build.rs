//! Building a secondary index on a table that already has rows, in both maintenance
//! modes, while writer threads keep replacing, updating and deleting rows (and flushes
//! and compactions run). Once the writers stop, `check` must be clean and every select
//! through the new index must return exactly the rows it should, in index order.

mod table_harness;

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::schema::{IndexDef, Schema};
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error};
use table_harness::{
    all_rows, assert_rows_eq, check_ok, collect, index_names, rows_eq, small_options, sort_like_index, u,
};

fn create(db: &Db, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!("table t (id u64, a u64, b i64, c u64 null, pad bytes) primary key (id) index by_a (a) {mode}"),
    )
}

fn row(id: u64, g: &mut StdRng) -> Row {
    let c = if g.gen_range(0..5) == 0 {
        Value::Null
    } else {
        u(g.gen_range(0..40))
    };
    vec![
        u(id),
        u(g.gen_range(0..30)),
        Value::I64(g.gen_range(0..20) as i64 - 10),
        c,
        Value::Bytes(vec![3; 80]),
    ]
}

/// Replaces rows `0..n` drawn by `row` from `g` in one transaction.
fn load(t: &Table, n: u64, g: &mut StdRng) {
    let mut tx = t.transaction();
    for id in 0..n {
        tx.replace(row(id, g));
    }
    tx.commit().expect("load");
}

fn writer(t: &Table, seed: u64, stop: &AtomicBool, ops: &AtomicU64) {
    let mut g = StdRng::seed_from_u64(seed);
    while !stop.load(Ordering::Relaxed) {
        let id = g.gen_range(0..3000);
        let r = match g.gen_range(0..8) {
            0 | 1 => t.delete(&[u(id)]),
            2 => t
                .update(
                    &[u(id)],
                    &[
                        ("c", u(g.gen_range(0..40))),
                        ("b", Value::I64(g.gen_range(0..20) as i64 - 10)),
                    ],
                )
                .map(|_| ()),
            3 => match t.insert(row(id, &mut g)) {
                Err(Error::Constraint(_)) => Ok(()),
                r => r,
            },
            _ => t.replace(row(id, &mut g)),
        };
        r.expect("writer statement");
        ops.fetch_add(1, Ordering::Relaxed);
    }
}

fn wait_for(ops: &AtomicU64, n: u64) {
    let start = ops.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(20);
    while ops.load(Ordering::Relaxed) < start + n {
        assert!(Instant::now() < deadline, "writers made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Selects through `index` (fields at `positions`) agree with the primary index.
fn verify_index(t: &Table, index: &str, positions: &[usize], ctx: &str) {
    let rows = all_rows(t);
    let mut want = rows.clone();
    sort_like_index(&mut want, positions, &[0]);
    let got = collect(t.select(index)).expect("select");
    assert!(
        rows_eq(&got, &want),
        "{ctx}: index {index} returned {} rows, the table has {}",
        got.len(),
        want.len()
    );
    let mut rev = collect(t.select(index).reverse()).expect("reverse select");
    rev.reverse();
    assert!(rows_eq(&rev, &want), "{ctx}: reverse select through {index}");
    // Equality on the first field, and a range on it.
    let nullable = positions[0] == 3;
    for v in [Value::Null, u(0), u(7), u(39)] {
        if v.is_null() && !nullable {
            continue;
        }
        let w: Vec<Row> = want.iter().filter(|r| r[positions[0]] == v).cloned().collect();
        let got = collect(t.select(index).eq(vec![v.clone()])).expect("eq select");
        assert_rows_eq(&got, &w, &format!("{ctx}: {index} = {v}"));
    }
    let w: Vec<Row> = want
        .iter()
        .filter(|r| matches!(r[positions[0]], Value::U64(x) if (10..20).contains(&x)))
        .cloned()
        .collect();
    let got = collect(t.select(index).range(Bound::Included(u(10)), Bound::Excluded(u(20)))).expect("range");
    assert!(rows_eq(&got, &w), "{ctx}: {index} in [10, 20)");
}

fn build_under_writers(mode: &str) {
    let (dir, db) = table_harness::open_small();
    let t = create(&db, mode);
    let mut g = StdRng::seed_from_u64(11);
    load(&t, 3000, &mut g);
    db.flush().expect("flush");
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let (during_c, during_cb) = std::thread::scope(|sc| {
        let _stop_writers = table_harness::StopOnDrop(&stop);
        sc.spawn(|| writer(&t, 1, &stop, &ops));
        sc.spawn(|| writer(&t, 2, &stop, &ops));
        wait_for(&ops, 500);
        let before = ops.load(Ordering::Relaxed);
        t.create_index(IndexDef::new("by_c", &["c"], false))
            .expect("create index by_c");
        let during_c = ops.load(Ordering::Relaxed) - before;
        wait_for(&ops, 500);
        let before = ops.load(Ordering::Relaxed);
        t.create_index(IndexDef::new("by_cb", &["c", "b"], false))
            .expect("create index by_cb");
        let during_cb = ops.load(Ordering::Relaxed) - before;
        // Selects through the new indexes work while the writers go on.
        for _ in 0..5 {
            wait_for(&ops, 300);
            collect(t.select("by_c").eq(vec![u(3)])).expect("select while writing");
        }
        stop.store(true, Ordering::Relaxed);
        (during_c, during_cb)
    });
    let ctx = format!("{mode} (writer statements during the builds: {during_c}, {during_cb})");
    assert!(during_c + during_cb > 0, "{ctx}: the builds never overlapped a write");
    let stats = db.stats();
    assert!(stats.flushes > 2 && stats.compactions > 0, "{ctx}: {stats:?}");
    let report = check_ok(&db, false);
    assert_eq!(report.tables[0].indexes.len(), 3, "{ctx}: {report}");
    verify_index(&t, "by_c", &[3], &ctx);
    verify_index(&t, "by_cb", &[3, 2], &ctx);
    verify_index(&t, "by_a", &[1], &ctx);
    let report = check_ok(&db, true);
    for ic in &report.tables[0].indexes {
        assert_eq!(ic.file_entries, report.tables[0].rows, "{ctx}: {report}");
    }
    drop(t);
    db.close().expect("close");
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    let t = db.table("t").expect("table");
    verify_index(&t, "by_c", &[3], &format!("{ctx}, after reopen"));
    verify_index(&t, "by_cb", &[3, 2], &format!("{ctx}, after reopen"));
    check_ok(&db, true);
}

#[test]
fn index_built_under_concurrent_writers_deferred() {
    build_under_writers("deferred");
}

#[test]
fn index_built_under_concurrent_writers_eager() {
    build_under_writers("eager");
}

/// A built index is maintained like any other: later blind writes leave dirty entries
/// that reads skip and compactions remove (deferred), or are removed at once (eager).
#[test]
fn new_index_is_maintained_after_the_build() {
    table_harness::in_each_mode(create, |mode, db, t| {
        let mut g = StdRng::seed_from_u64(5);
        for id in 0..500 {
            t.replace(row(id, &mut g)).expect("replace");
        }
        db.compact_range().expect("compact");
        t.create_index(IndexDef::new("by_c", &["c"], false)).expect("create");
        for id in 0..500u64 {
            if id.is_multiple_of(3) {
                t.delete(&[u(id)]).expect("delete");
            } else {
                t.replace(row(id, &mut g)).expect("replace");
            }
        }
        verify_index(&t, "by_c", &[3], mode);
        db.flush().expect("flush");
        verify_index(&t, "by_c", &[3], mode);
        let report = check_ok(db, true);
        assert_eq!(report.tables[0].rows, 500 - 167);
        for ic in &report.tables[0].indexes {
            assert_eq!(ic.file_entries, 500 - 167, "{mode}: {report}");
        }
        // Dropping and re-creating it under the same name starts from the rows again.
        t.drop_index("by_c").expect("drop");
        t.create_index(IndexDef::new("by_c", &["c"], false)).expect("recreate");
        verify_index(&t, "by_c", &[3], mode);
        check_ok(db, true);
    });
}

#[test]
fn bad_index_definitions_are_refused_and_leave_nothing() {
    let (_dir, db) = table_harness::open_small();
    let t = create(&db, "deferred");
    t.replace(vec![u(1), u(1), Value::I64(1), u(1), Value::Bytes(vec![])])
        .expect("replace");
    let keyspaces = db.list_keyspaces();
    match t.create_index(IndexDef::new("by_a", &["b"], false)) {
        Err(Error::AlreadyExists(m)) => assert!(m.contains("by_a"), "{m}"),
        other => panic!("duplicate index name: {other:?}"),
    }
    match t.create_index(IndexDef::new("by_zz", &["zz"], false)) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("zz"), "{m}"),
        other => panic!("unknown field: {other:?}"),
    }
    match t.create_index(IndexDef::new("bad-name", &["b"], false)) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("bad-name"), "{m}"),
        other => panic!("bad name: {other:?}"),
    }
    match t.drop_index("nope") {
        Err(Error::NotFound(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("drop of an unknown index: {other:?}"),
    }
    assert_eq!(db.list_keyspaces(), keyspaces);
    assert_eq!(t.schema().expect("schema").indexes.len(), 1);
    check_ok(&db, true);
}

/// A unique index cannot be built over rows that already break it: the build must
/// fail with a constraint error and leave no index behind. Over distinct values it
/// succeeds and is enforced from then on.
#[test]
fn unique_index_build_checks_existing_rows() {
    table_harness::in_each_mode(create, |mode, db, t| {
        for id in 0..100 {
            // a = id for all rows but two, which share a = 5.
            let a = if id == 50 { 5 } else { id };
            t.replace(vec![u(id), u(a), Value::I64(0), Value::Null, Value::Bytes(vec![])])
                .expect("replace");
        }
        // Distinct values: fine.
        t.create_index(IndexDef::new("u_b_id", &["b", "id"], true))
            .expect("unique index over distinct keys");
        match t.insert(vec![u(100), u(100), Value::I64(0), Value::Null, Value::Bytes(vec![])]) {
            Ok(()) => {}
            other => panic!("{mode}: insert with a new key: {other:?}"),
        }
        let r = t.create_index(IndexDef::new("u_a", &["a"], true));
        let names = index_names(&t);
        let report = db.check(strata::table::check::CheckOptions::default()).expect("check");
        assert!(
            matches!(r, Err(Error::Constraint(_))),
            "{mode}: building a unique index over duplicate keys returned {r:?}; indexes now {names:?}; check:\n{report}"
        );
        assert!(!names.contains(&"u_a".to_string()), "{mode}: {names:?}");
        assert!(report.ok(), "{mode}: {report}");
    });
}

/// While a unique index is being built, a writer inserts a row whose key an existing
/// row already holds. Either the insert or the build must fail; if both succeed, the
/// "unique" index holds a duplicate.
#[test]
fn unique_index_build_races_a_duplicate_insert() {
    table_harness::in_each_mode(create, |mode, db, t| {
        let n = 20_000u64;
        let mut tx = t.transaction();
        for id in 0..n {
            tx.replace(vec![
                u(id),
                u(id),
                Value::I64(0),
                Value::Null,
                Value::Bytes(vec![9; 20]),
            ]);
        }
        tx.commit().expect("load");
        db.flush().expect("flush");
        let mut raced = 0;
        for attempt in 0..5u64 {
            let name = format!("u_a{attempt}");
            let dup_id = 1_000_000 + attempt;
            let (build, insert) = std::thread::scope(|sc| {
                let w = sc.spawn(|| {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    // Wait until the index exists and is still being built.
                    loop {
                        match t.select(&name).rows() {
                            Err(Error::InvalidArgument(m)) if m.contains("being built") => break,
                            Ok(_) => return None, // missed the build
                            _ => {}
                        }
                        if Instant::now() > deadline {
                            return None;
                        }
                        std::hint::spin_loop();
                    }
                    // Row 7 holds a = 7.
                    Some(t.insert(vec![u(dup_id), u(7), Value::I64(0), Value::Null, Value::Bytes(vec![])]))
                });
                std::thread::sleep(Duration::from_millis(5));
                let build = t.create_index(IndexDef::new(&name, &["a"], true));
                (build, w.join().expect("writer"))
            });
            let Some(insert) = insert else { continue };
            raced += 1;
            let report = db.check(strata::table::check::CheckOptions::default()).expect("check");
            assert!(
                build.is_err() || insert.is_err(),
                "{mode}, attempt {attempt}: the build of unique index {name} and an insert of a duplicate key \
                 both succeeded; check:\n{report}"
            );
            assert!(report.ok(), "{mode}: {report}");
            if build.is_ok() {
                t.drop_index(&name).expect("drop");
            }
            if insert.is_ok() {
                t.delete(&[u(dup_id)]).expect("delete");
            }
        }
        assert!(
            raced > 0,
            "{mode}: the writer never caught the index while it was being built"
        );
    });
}

/// Dropping the table while one of its indexes is being built: the build fails or
/// finishes, the database stays consistent, and the files the build wrote do not stay
/// behind in the directory.
#[test]
fn dropping_the_table_during_an_index_build_leaves_no_files() {
    table_harness::in_each_mode(create, |mode, db, t| {
        let keep = db
            .create_table(Schema::parse("table keep (id u64, a u64) primary key (id) index by_a (a)").expect("schema"))
            .expect("table");
        keep.replace(vec![u(1), u(1)]).expect("replace");
        let mut g = StdRng::seed_from_u64(1);
        load(&t, 40_000, &mut g);
        db.compact_range().expect("compact");
        // The drop must land while the build runs; a build that finished first is
        // dropped and tried again, a bounded number of times.
        let mut caught = 0;
        let mut build = None;
        for attempt in 0..5 {
            let b = std::thread::scope(|sc| {
                let b = sc.spawn(|| t.create_index(IndexDef::new("by_c", &["c", "b"], false)));
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    match t.select("by_c").rows() {
                        Err(Error::InvalidArgument(m)) if m.contains("being built") => {
                            caught += 1;
                            db.drop_table("t").expect("drop table during the build");
                            break;
                        }
                        Ok(_) => break, // the build was too quick
                        _ => {}
                    }
                    if Instant::now() > deadline {
                        break;
                    }
                    std::hint::spin_loop();
                }
                b.join().expect("build thread")
            });
            if caught > 0 {
                build = Some(b);
                break;
            }
            // Too quick this time: the build must have succeeded; undo it and retry.
            assert!(b.is_ok(), "{mode}, attempt {attempt}: {b:?}");
            t.drop_index("by_c").expect("drop the finished index");
        }
        assert!(
            caught > 0,
            "{mode}: the table was never dropped while its index was being built"
        );
        let build = build.expect("the caught build's result");
        assert_eq!(db.list_tables(), ["keep"], "{mode}: build returned {build:?}");
        assert!(matches!(t.count(), Err(Error::NotFound(_))), "{mode}");
        check_ok(db, true);
        assert_eq!(keep.count().expect("count"), 1);
        db.wait_for_background().expect("background");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let on_disk = table_harness::sst_files(db.path()).len();
            let live = table_harness::live_file_count(db);
            if on_disk == live {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{mode}: the build (which returned {build:?}) left {} .sst files the database does not use",
                on_disk - live
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}
