//! Dropping an index or a table cancels its pending deferred deletes (Tarantool vinyl
//! #6448): with writers rewriting rows and background compactions emitting deferred
//! deletes all the time, indexes and tables are dropped (and recreated) under them. No
//! error may surface, the database must stay usable and consistent, a reopen must work,
//! and no file of a dropped keyspace may stay in the directory.

mod table_harness;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::schema::IndexDef;
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error};
use table_harness::{
    all_rows, check_ok, collect, index_names, live_file_count, rows_eq, small_options, sort_like_index, sst_files, u,
};

fn create(db: &Db, name: &str) -> Table {
    table_harness::create_table(
        db,
        &format!(
            "table {name} (id u64, a u64, b u64, c u64, pad bytes) primary key (id) \
             index by_a (a) index by_b (b, a) index by_c (c) deferred"
        ),
    )
}

fn row(id: u64, g: &mut StdRng) -> Row {
    vec![
        u(id),
        u(g.gen_range(0..50)),
        u(g.gen_range(0..20)),
        u(g.gen_range(0..100)),
        Value::Bytes(vec![b'r'; 100]),
    ]
}

/// Rewrites and deletes rows until `stop`; returns its model of the table, or `None`
/// when the table was dropped under it (every later statement must fail with NotFound).
fn writer(t: &Table, seed: u64, stop: &AtomicBool, ops: &AtomicU64) -> Option<BTreeMap<u64, Row>> {
    let mut g = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let id = g.gen_range(0..600);
        let r = if g.gen_range(0..4) == 0 {
            model.remove(&id);
            t.delete(&[u(id)])
        } else {
            let r = row(id, &mut g);
            model.insert(id, r.clone());
            t.replace(r)
        };
        match r {
            Ok(()) => {}
            Err(Error::NotFound(m)) => {
                assert!(m.contains(t.name()), "NotFound does not name the table: {m}");
                // Dropped: it stays dropped.
                for id in 0..5 {
                    assert!(matches!(t.delete(&[u(id)]), Err(Error::NotFound(_))));
                    assert!(matches!(t.get(&[u(id)]), Err(Error::NotFound(_))));
                }
                return None;
            }
            Err(e) => panic!("writer of {}: {e}", t.name()),
        }
        ops.fetch_add(1, Ordering::Relaxed);
    }
    Some(model)
}

fn verify(t: &Table, model: &BTreeMap<u64, Row>, indexes: &[(&str, &[usize])], ctx: &str) {
    let want: Vec<Row> = model.values().cloned().collect();
    assert!(rows_eq(&all_rows(t), &want), "{ctx}: rows of {}", t.name());
    for (index, fields) in indexes {
        let mut w = want.clone();
        sort_like_index(&mut w, fields, &[0]);
        let got = collect(t.select(index)).expect("select");
        assert!(rows_eq(&got, &w), "{ctx}: index {index} of {}", t.name());
    }
}

/// Files in the directory are exactly the files of the current version. Obsolete
/// files go when their last reader lets go of them (a background worker may hold an
/// old version for a moment), so give them a few seconds.
fn assert_no_stray_files(db: &Db, ctx: &str) {
    db.wait_for_background().expect("background");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let on_disk = sst_files(db.path()).len();
        let live = live_file_count(db);
        if on_disk == live {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{ctx}: {on_disk} .sst files on disk, the database uses {live}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for(ops: &AtomicU64, n: u64) {
    let start = ops.load(Ordering::Relaxed);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ops.load(Ordering::Relaxed) < start + n {
        assert!(std::time::Instant::now() < deadline, "writers made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn dropping_indexes_under_running_compactions() {
    let (dir, db) = table_harness::open_small();
    let t = create(&db, "t");
    let other = create(&db, "other");
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let ks_before = db.list_keyspaces().len();
    let (mt, mo) = std::thread::scope(|sc| {
        let _stop_writers = table_harness::StopOnDrop(&stop);
        let wt = sc.spawn(|| writer(&t, 1, &stop, &ops));
        let wo = sc.spawn(|| writer(&other, 2, &stop, &ops));
        wait_for(&ops, 3000);
        let emitted_before = t.stats().expect("stats").indexes[1].deferred_deletes_emitted;
        assert!(emitted_before > 0, "no deferred delete was pending for by_b yet");
        t.drop_index("by_b").expect("drop by_b while compactions run");
        // Create and drop an index again and again while the primary keeps emitting
        // deferred deletes for it.
        for k in 0..6 {
            wait_for(&ops, 500);
            let name = format!("tmp{k}");
            t.create_index(IndexDef::new(&name, &["b", "c"], false))
                .expect("create index");
            wait_for(&ops, 400);
            t.drop_index(&name).expect("drop index");
        }
        wait_for(&ops, 1000);
        t.drop_index("by_c").expect("drop by_c");
        wait_for(&ops, 1000);
        stop.store(true, Ordering::Relaxed);
        (wt.join().expect("writer t"), wo.join().expect("writer other"))
    });
    let (mt, mo) = (mt.expect("t was not dropped"), mo.expect("other was not dropped"));
    let stats = db.stats();
    assert!(stats.background_error.is_none(), "{:?}", stats.background_error);
    assert!(stats.compactions > 10, "too few compactions: {}", stats.compactions);
    assert_eq!(db.list_keyspaces().len(), ks_before - 2, "{:?}", db.list_keyspaces());
    assert!(matches!(t.select("by_b").rows(), Err(Error::NotFound(_))));
    let ix = index_names(&t);
    assert_eq!(ix, ["by_a"]);
    let t_ix: &[(&str, &[usize])] = &[("by_a", &[1])];
    let o_ix: &[(&str, &[usize])] = &[("by_a", &[1]), ("by_b", &[2, 1]), ("by_c", &[3])];
    verify(&t, &mt, t_ix, "after the drops");
    verify(&other, &mo, o_ix, "after the drops");
    check_ok(&db, false);
    assert_no_stray_files(&db, "after the drops");
    // The database goes on working: more rewrites, a full compaction, a reopen.
    let mut g = StdRng::seed_from_u64(9);
    let mut mt = mt;
    for id in 0..300 {
        let r = row(id, &mut g);
        t.replace(r.clone()).expect("replace");
        mt.insert(id, r);
    }
    check_ok(&db, true);
    assert_no_stray_files(&db, "after a full compaction");
    drop((t, other));
    db.close().expect("close");
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    let (t, other) = (db.table("t").expect("t"), db.table("other").expect("other"));
    verify(&t, &mt, t_ix, "after reopen");
    verify(&other, &mo, o_ix, "after reopen");
    check_ok(&db, true);
    assert_no_stray_files(&db, "after reopen");
}

#[test]
fn dropping_a_table_under_running_compactions() {
    let (dir, db) = table_harness::open_small();
    let doomed = create(&db, "doomed");
    let kept = create(&db, "kept");
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let (md, mk) = std::thread::scope(|sc| {
        let _stop_writers = table_harness::StopOnDrop(&stop);
        let wd = sc.spawn(|| writer(&doomed, 3, &stop, &ops));
        let wk = sc.spawn(|| writer(&kept, 4, &stop, &ops));
        wait_for(&ops, 4000);
        assert!(doomed.stats().expect("stats").deferred_deletes_emitted > 0);
        db.drop_table("doomed").expect("drop table while its compactions run");
        wait_for(&ops, 1000);
        stop.store(true, Ordering::Relaxed);
        (wd.join().expect("writer doomed"), wk.join().expect("writer kept"))
    });
    assert!(md.is_none(), "the writer of the dropped table never noticed the drop");
    let mk = mk.expect("kept was not dropped");
    assert_eq!(db.list_tables(), ["kept"]);
    assert!(
        db.list_keyspaces().iter().all(|k| !k.contains("doomed")),
        "{:?}",
        db.list_keyspaces()
    );
    assert!(matches!(db.table("doomed"), Err(Error::NotFound(_))));
    assert!(matches!(db.drop_table("doomed"), Err(Error::NotFound(_))));
    let k_ix: &[(&str, &[usize])] = &[("by_a", &[1]), ("by_b", &[2, 1]), ("by_c", &[3])];
    verify(&kept, &mk, k_ix, "after the drop");
    check_ok(&db, false);
    assert_no_stray_files(&db, "after the drop");
    // A new table of the same name starts empty: nothing of the old one comes back,
    // not even through deferred deletes still flowing.
    let reborn = create(&db, "doomed");
    assert_eq!(reborn.count().expect("count"), 0);
    let mut g = StdRng::seed_from_u64(5);
    let mut mr = BTreeMap::new();
    for id in 0..200 {
        let r = row(id, &mut g);
        reborn.replace(r.clone()).expect("replace");
        mr.insert(id, r);
    }
    check_ok(&db, true);
    verify(&reborn, &mr, k_ix, "new table of the old name");
    assert_no_stray_files(&db, "after a full compaction");
    drop((kept, reborn, doomed));
    db.close().expect("close");
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    verify(&db.table("kept").expect("kept"), &mk, k_ix, "after reopen");
    verify(&db.table("doomed").expect("doomed"), &mr, k_ix, "after reopen");
    check_ok(&db, true);
    assert_no_stray_files(&db, "after reopen");
}
