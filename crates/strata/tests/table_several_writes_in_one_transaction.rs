//! Several writes to one primary key inside one transaction (Tarantool vinyl #4248):
//! each write is its own row version, and each must leave exactly one obligation for
//! the deferred machinery. After a full compaction every secondary index holds exactly
//! one entry per live row, whatever the transactions did.

mod table_harness;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error};
use table_harness::{all_rows, assert_rows_eq, check_ok, collect, i, rows_eq, s, small_options, sort_like_index, u};

fn create(db: &Db, mode: &str, unique: bool) -> Table {
    let uq = if unique { "unique" } else { "" };
    table_harness::create_table(
        db,
        &format!(
            "table t (id u64, a u64, b str, c i64, pad bytes) primary key (id) \
             index by_a (a) index by_b {uq} (b, id) index by_ca (c, a) {mode}"
        ),
    )
}

fn row(id: u64, a: u64, c: i64) -> Row {
    // b is unique per (id, a): (b, id) is unique anyway, which the unique variant needs.
    vec![u(id), u(a), s(&format!("b{a}")), i(c), Value::Bytes(vec![7; 40])]
}

/// One transaction of many writes per key; returns the keys' final rows.
fn churn(t: &Table, g: &mut StdRng, pks: std::ops::Range<u64>, model: &mut BTreeMap<u64, Row>) {
    let mut tx = t.transaction();
    let mut next = model.clone();
    for id in pks {
        let steps = 2 + g.gen_range(0..5u64);
        for step in 0..steps {
            let a = g.gen_range(0..6);
            let c = g.gen_range(0..4) as i64 - 2;
            match g.gen_range(0..7) {
                0 => {
                    tx.delete(vec![u(id)]);
                    next.remove(&id);
                }
                1 if !next.contains_key(&id) => {
                    tx.insert(row(id, a, c));
                    next.insert(id, row(id, a, c));
                }
                2 if next.contains_key(&id) => {
                    tx.update(vec![u(id)], vec![("a".into(), u(a)), ("b".into(), s(&format!("b{a}")))]);
                    let r = next.get_mut(&id).expect("row");
                    r[1] = u(a);
                    r[2] = s(&format!("b{a}"));
                }
                _ => {
                    // The same row several times in a row, sometimes with an unchanged
                    // index key.
                    let a = if step.is_multiple_of(2) { a } else { 1 };
                    tx.replace(row(id, a, c));
                    next.insert(id, row(id, a, c));
                }
            }
        }
    }
    tx.commit().expect("commit");
    *model = next;
}

fn verify(t: &Table, model: &BTreeMap<u64, Row>, ctx: &str) {
    let want: Vec<Row> = model.values().cloned().collect();
    assert!(rows_eq(&all_rows(t), &want), "{ctx}: primary differs from the model");
    for (index, fields) in [("by_a", &[1usize][..]), ("by_b", &[2, 0]), ("by_ca", &[3, 1])] {
        let mut w = want.clone();
        sort_like_index(&mut w, fields, &[0]);
        let got = collect(t.select(index)).expect("select");
        assert_rows_eq(&got, &w, &format!("{ctx}: index {index}"));
    }
}

fn run(mode: &str, unique: bool) {
    let ctx = format!("{mode}{}", if unique { " with a unique index" } else { "" });
    let (dir, db) = table_harness::open_small();
    let t = create(&db, mode, unique);
    let mut model = BTreeMap::new();
    let mut g = StdRng::seed_from_u64(0x4248 + u64::from(unique));
    for round in 0..40u64 {
        let start = (round * 37) % 300;
        churn(&t, &mut g, start..start + 60, &mut model);
        if round % 10 == 9 {
            verify(&t, &model, &format!("{ctx}, round {round}"));
        }
    }
    // The classic #4248 shape, on keys of their own: replace, replace, delete; and
    // delete, insert, replace with the key the first version had.
    let mut tx = t.transaction();
    tx.replace(row(1000, 1, 0))
        .replace(row(1000, 2, 0))
        .delete(vec![u(1000)]);
    tx.delete(vec![u(1001)])
        .insert(row(1001, 3, 1))
        .replace(row(1001, 3, 1));
    tx.replace(row(1002, 4, 0))
        .delete(vec![u(1002)])
        .insert(row(1002, 4, 0));
    tx.commit().expect("commit");
    model.insert(1001, row(1001, 3, 1));
    model.insert(1002, row(1002, 4, 0));
    // A failing transaction after many writes to one key leaves nothing behind.
    let mut tx = t.transaction();
    tx.replace(row(1003, 1, 0))
        .replace(row(1003, 2, 0))
        .insert(row(1001, 0, 0));
    assert!(matches!(tx.commit(), Err(Error::Constraint(_))), "{ctx}");
    verify(&t, &model, &format!("{ctx}, before compaction"));

    let stats = db.stats();
    assert!(stats.flushes > 3 && stats.compactions > 0, "{ctx}: {stats:?}");
    let report = check_ok(&db, true);
    let tc = &report.tables[0];
    assert_eq!(tc.rows, model.len() as u64, "{ctx}");
    for ic in &tc.indexes {
        assert_eq!(
            (ic.valid, ic.dirty, ic.missing, ic.file_entries),
            (tc.rows, 0, 0, tc.rows),
            "{ctx}: index {} after full compaction:\n{report}",
            ic.name
        );
    }
    for ks in db.stats().keyspaces.iter().filter(|k| k.name.starts_with("table:t")) {
        assert_eq!(ks.tombstones(), 0, "{ctx}: keyspace {} keeps tombstones", ks.name);
    }
    verify(&t, &model, &format!("{ctx}, after compaction"));
    let ts = t.stats().expect("stats");
    if mode == "deferred" {
        assert!(ts.deferred_deletes_emitted > 1000, "{ctx}: {ts}");
    }
    // And the same after a reopen.
    drop(t);
    db.close().expect("close");
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    let t = db.table("t").expect("table");
    verify(&t, &model, &format!("{ctx}, after reopen"));
    check_ok(&db, true);
}

#[test]
fn several_writes_per_key_in_one_transaction_deferred() {
    run("deferred", false);
}

#[test]
fn several_writes_per_key_in_one_transaction_deferred_unique() {
    run("deferred", true);
}

#[test]
fn several_writes_per_key_in_one_transaction_eager() {
    run("eager", false);
}
