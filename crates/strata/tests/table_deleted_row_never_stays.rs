//! A deleted row never stays in a secondary index forever (Tarantool vinyl #10820):
//! while a snapshot can see a row version, compactions keep it and emit no deferred
//! delete for it; once the snapshot is released, the next compactions must remove it
//! from every index. Meanwhile reads at the snapshot still see the old rows.

mod table_harness;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Snapshot};
use table_harness::{assert_rows_eq, check_ok, collect, deepest_level, rows_eq, sort_like_index, u};

const INDEXES: [(&str, &[usize]); 2] = [("by_a", &[1]), ("by_ba", &[2, 1])];

fn create(db: &Db, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!("table t (id u64, a u64, b u64, pad bytes) primary key (id) index by_a (a) index by_ba (b, a) {mode}"),
    )
}

fn row(id: u64, a: u64, b: u64) -> Row {
    vec![u(id), u(a), u(b), Value::Bytes(vec![b'x'; 400])]
}

fn index_file_entries(db: &Db, index: &str) -> u64 {
    db.stats()
        .keyspaces
        .iter()
        .filter(|k| k.name.ends_with(&format!(":{index}")))
        .map(|k| k.entries())
        .sum()
}

/// Every index (and the primary) at `snap` (or the latest state) returns `model`.
fn verify(t: &Table, model: &BTreeMap<u64, Row>, snap: Option<&Snapshot>, ctx: &str) {
    let want: Vec<Row> = model.values().cloned().collect();
    let mut q = t.select(strata::table::select::PRIMARY);
    if let Some(s) = snap {
        q = q.at(s);
    }
    assert!(rows_eq(&collect(q).expect("scan"), &want), "{ctx}: primary");
    for (index, fields) in INDEXES {
        let mut w = want.clone();
        sort_like_index(&mut w, fields, &[0]);
        let mut q = t.select(index);
        if let Some(s) = snap {
            q = q.at(s);
        }
        let got = collect(q).expect("select");
        assert_rows_eq(&got, &w, &format!("{ctx}: index {index}"));
    }
}

fn final_check(db: &Db, live: u64, ctx: &str) {
    let report = check_ok(db, true);
    let tc = &report.tables[0];
    assert_eq!(tc.rows, live, "{ctx}");
    for ic in &tc.indexes {
        assert_eq!(
            (ic.file_entries, ic.dirty, ic.missing),
            (live, 0, 0),
            "{ctx}: index {} still holds deleted rows:\n{report}",
            ic.name
        );
    }
}

/// The shape of #10820: insert, snapshot, delete, compact everything to the bottom
/// while the snapshot pins the rows, release, compact again.
#[test]
fn rows_deleted_under_a_snapshot_leave_after_its_release() {
    for delete_in_memtable in [false, true] {
        table_harness::in_each_mode(create, |mode, db, t| {
            let ctx = format!("{mode}, delete while the row is in the memtable: {delete_in_memtable}");
            let n = 500u64;
            let mut model = BTreeMap::new();
            for id in 0..n {
                t.insert(row(id, id % 7, id % 3)).expect("insert");
                model.insert(id, row(id, id % 7, id % 3));
            }
            if !delete_in_memtable {
                db.flush().expect("flush");
            }
            let snap = db.snapshot();
            let at_snap = model.clone();
            for id in (0..n).filter(|id| !id.is_multiple_of(5)) {
                t.delete(&[u(id)]).expect("delete");
                model.remove(&id);
            }
            // Compact to the bottom while the snapshot is held: the versions it sees stay.
            db.compact_range().expect("compact");
            db.wait_for_background().expect("background");
            verify(
                &t,
                &at_snap,
                Some(&snap),
                &format!("{ctx}, at the snapshot after compaction"),
            );
            verify(&t, &model, None, &format!("{ctx}, latest after compaction"));
            for (index, _) in INDEXES {
                assert!(
                    index_file_entries(db, index) >= n,
                    "{ctx}: index {index} lost entries the snapshot still needs"
                );
            }
            drop(snap);
            final_check(db, model.len() as u64, &ctx);
            verify(&t, &model, None, &format!("{ctx}, after release and compaction"));
            for (index, _) in INDEXES {
                assert_eq!(index_file_entries(db, index), model.len() as u64, "{ctx}: {index}");
            }
            if mode == "deferred" {
                let ts = t.stats().expect("stats");
                assert!(ts.deferred_deletes_emitted >= 2 * (n - n / 5), "{ctx}: {ts}");
            }
        });
    }
}

/// Random inserts, replaces and deletes with several snapshots taken and released in
/// any order, and flushes, background compactions and full compactions in between.
#[test]
fn random_history_with_snapshots_leaves_no_deleted_row() {
    for seed in [1u64, 2, 3] {
        table_harness::in_each_mode(create, |mode, db, t| {
            let ctx = format!("{mode}, seed {seed}");
            let mut g = StdRng::seed_from_u64(seed);
            let mut model: BTreeMap<u64, Row> = BTreeMap::new();
            let mut snaps: Vec<(Snapshot, BTreeMap<u64, Row>)> = Vec::new();
            for step in 0..3000u64 {
                let id = g.gen_range(0..400);
                match g.gen_range(0..10) {
                    0..=3 => {
                        let r = row(id, g.gen_range(0..8), g.gen_range(0..4));
                        t.replace(r.clone()).expect("replace");
                        model.insert(id, r);
                    }
                    4..=6 => {
                        t.delete(&[u(id)]).expect("delete");
                        model.remove(&id);
                    }
                    7 => {
                        let r = row(id, g.gen_range(0..8), g.gen_range(0..4));
                        let res = t.insert(r.clone());
                        assert_eq!(res.is_ok(), !model.contains_key(&id), "{ctx}: insert {id}");
                        model.entry(id).or_insert(r);
                    }
                    _ => {
                        let a = g.gen_range(0..8);
                        let found = t.update(&[u(id)], &[("a", u(a))]).expect("update");
                        assert_eq!(found, model.contains_key(&id), "{ctx}: update {id}");
                        if let Some(r) = model.get_mut(&id) {
                            r[1] = u(a);
                        }
                    }
                }
                if step.is_multiple_of(150) && snaps.len() < 3 {
                    snaps.push((db.snapshot(), model.clone()));
                }
                if step % 400 == 399 && !snaps.is_empty() {
                    let (s, m) = snaps.remove(g.gen_range(0..snaps.len() as u64) as usize);
                    verify(&t, &m, Some(&s), &format!("{ctx}, step {step}, before release"));
                    drop(s);
                    if g.gen_range(0..2) == 0 {
                        db.compact_range().expect("compact");
                    }
                    for (s, m) in &snaps {
                        verify(&t, m, Some(s), &format!("{ctx}, step {step}, other snapshot"));
                    }
                    verify(&t, &model, None, &format!("{ctx}, step {step}, latest"));
                }
            }
            assert!(deepest_level(db) >= 2, "{ctx}: never reached level 2");
            snaps.clear();
            final_check(db, model.len() as u64, &ctx);
            verify(&t, &model, None, &format!("{ctx}, end"));
        });
    }
}
