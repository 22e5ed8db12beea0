//! Unique secondary indexes under deferred maintenance: a blind overwrite leaves the
//! old unique entry behind as a dirty entry, which must not count as a conflict, while
//! a live holder of the key always does; concurrent writers of one unique key: exactly
//! one wins.

mod table_harness;

use std::sync::Barrier;

use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error};
use table_harness::{check_ok, collect, s, u};

const MODES: [&str; 2] = ["deferred", "eager"];

fn create(db: &Db, name: &str, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!(
            "table {name} (id u64, u str null, v u64) primary key (id) index by_u unique (u) index by_v (v) {mode}"
        ),
    )
}

fn row(id: u64, key: &str) -> Row {
    vec![u(id), s(key), u(id % 3)]
}

fn expect_conflict(r: strata::Result<()>, what: &str) {
    match r {
        Err(Error::Constraint(m)) => assert!(m.contains("by_u"), "{what}: message does not name the index: {m}"),
        other => panic!("{what}: expected a unique-key conflict, got {other:?}"),
    }
}

fn keys_in_index(t: &Table) -> Vec<(String, u64)> {
    collect(t.select("by_u"))
        .expect("select")
        .into_iter()
        .map(|r| (r[1].as_str().unwrap_or("NULL").to_string(), r[0].as_u64().expect("pk")))
        .collect()
}

/// What to do between the steps of a scenario: nothing, flush, or compact everything,
/// so the dirty entry and the rows live in the memtable, in level 0 or at the bottom.
#[derive(Debug, Clone, Copy)]
enum Between {
    Nothing,
    Flush,
    Compact,
}

fn between(db: &Db, b: Between) {
    match b {
        Between::Nothing => {}
        Between::Flush => db.flush().expect("flush"),
        Between::Compact => db.compact_range().expect("compact"),
    }
}

#[test]
fn blind_overwrite_frees_the_old_unique_key() {
    for mode in MODES {
        for b in [Between::Nothing, Between::Flush, Between::Compact] {
            let (_dir, db) = table_harness::open_small();
            let t = create(&db, "t", mode);
            let ctx = format!("{mode}, {b:?} between steps");
            t.replace(row(1, "x")).expect("replace 1 -> x");
            between(&db, b);
            // Blind in deferred mode: (x, 1) stays in the index as a dirty entry.
            t.replace(row(1, "y")).expect("replace 1 -> y");
            between(&db, b);
            t.insert(row(2, "x"))
                .unwrap_or_else(|e| panic!("{ctx}: x was freed by row 1, insert of row 2 failed: {e}"));
            between(&db, b);
            expect_conflict(t.insert(row(3, "y")), &format!("{ctx}: insert row 3 with y"));
            expect_conflict(t.replace(row(3, "x")), &format!("{ctx}: replace row 3 with x"));
            expect_conflict(t.replace(row(3, "y")), &format!("{ctx}: replace row 3 with y"));
            assert_eq!(
                t.get(&[u(3)]).expect("get"),
                None,
                "{ctx}: a failed statement wrote row 3"
            );
            // A row may always keep (rewrite) its own key.
            t.replace(row(1, "y"))
                .unwrap_or_else(|e| panic!("{ctx}: rewrite own key: {e}"));
            between(&db, b);
            t.delete(&[u(2)]).expect("delete 2");
            between(&db, b);
            t.insert(row(3, "x"))
                .unwrap_or_else(|e| panic!("{ctx}: x was freed by deleting row 2: {e}"));
            between(&db, b);
            assert_eq!(
                keys_in_index(&t),
                vec![("x".to_string(), 3), ("y".to_string(), 1)],
                "{ctx}"
            );
            assert_eq!(
                collect(t.select("by_u").eq(vec![s("x")])).expect("select"),
                vec![row(3, "x")]
            );
            // An update that moves a row onto a held key conflicts; onto a freed one not.
            match t.update(&[u(1)], &[("u", s("x"))]) {
                Err(Error::Constraint(_)) => {}
                other => panic!("{ctx}: update onto a held key: {other:?}"),
            }
            assert!(t.update(&[u(3)], &[("u", s("z"))]).expect("update 3 -> z"));
            assert!(
                t.update(&[u(1)], &[("u", s("x"))])
                    .expect("update 1 -> x, freed by row 3")
            );
            check_ok(&db, false);
            check_ok(&db, true);
            assert_eq!(
                keys_in_index(&t),
                vec![("x".to_string(), 1), ("z".to_string(), 3)],
                "{ctx}"
            );
            if mode == "deferred" {
                assert_eq!(t.stats().expect("stats").hidden_reads, 0, "{ctx}");
            }
        }
    }
}

#[test]
fn transactions_see_their_own_unique_keys() {
    for mode in MODES {
        let (_dir, db) = table_harness::open_small();
        let t = create(&db, "t", mode);
        let mut tx = t.transaction();
        tx.replace(row(1, "x")).replace(row(1, "y")).insert(row(2, "x"));
        tx.commit()
            .unwrap_or_else(|e| panic!("{mode}: x freed inside the transaction: {e}"));
        db.flush().expect("flush");
        // Two rows of one transaction with one key: the transaction fails as a whole.
        let mut tx = t.transaction();
        tx.replace(row(4, "z")).replace(row(5, "z"));
        expect_conflict(tx.commit().map(|_| ()), &format!("{mode}: two rows with z"));
        assert_eq!(
            t.get(&[u(4)]).expect("get"),
            None,
            "{mode}: half a failed transaction applied"
        );
        // Row 1 leaves y, then row 2 takes it, in one transaction (the index still holds
        // (y, 1) until the commit).
        let mut tx = t.transaction();
        tx.replace(row(1, "w")).replace(row(2, "y"));
        tx.commit()
            .unwrap_or_else(|e| panic!("{mode}: y freed earlier in the transaction: {e}"));
        // A deleted row's key is free for the rest of its transaction.
        let mut tx = t.transaction();
        tx.delete(vec![u(1)]).insert(row(6, "w"));
        tx.commit()
            .unwrap_or_else(|e| panic!("{mode}: w freed by a delete in the transaction: {e}"));
        // ...but not the other way round.
        let mut tx = t.transaction();
        tx.insert(row(7, "y")).delete(vec![u(2)]);
        expect_conflict(tx.commit().map(|_| ()), &format!("{mode}: insert before the delete"));
        assert_eq!(
            keys_in_index(&t),
            vec![("w".to_string(), 6), ("y".to_string(), 2)],
            "{mode}"
        );
        check_ok(&db, false);
        check_ok(&db, true);
    }
}

#[test]
fn null_unique_keys_never_conflict() {
    for mode in MODES {
        let (_dir, db) = table_harness::open_small();
        let t = create(&db, "t", mode);
        for id in 0..20 {
            t.insert(vec![u(id), Value::Null, u(id)])
                .unwrap_or_else(|e| panic!("{mode}: null key {id}: {e}"));
        }
        db.flush().expect("flush");
        for id in 0..20 {
            t.replace(vec![u(id), Value::Null, u(id + 1)]).expect("replace null");
        }
        assert_eq!(
            collect(t.select("by_u").eq(vec![Value::Null])).expect("select").len(),
            20
        );
        check_ok(&db, true);
    }
}

/// Writers of one unique key race: exactly one wins each round, whether the key was
/// never used, or was used by a row that moved away (a dirty entry in deferred mode).
#[test]
fn concurrent_writers_of_one_unique_key_exactly_one_wins() {
    const THREADS: u64 = 6;
    const ROUNDS: u64 = 40;
    for mode in MODES {
        for use_insert in [true, false] {
            let (_dir, db) = table_harness::open_small();
            let t = create(&db, "t", mode);
            let barrier = Barrier::new(THREADS as usize);
            let ctx = format!("{mode}, {}", if use_insert { "insert" } else { "replace" });
            for round in 0..ROUNDS {
                let key = format!("k{round}");
                if round % 2 == 1 {
                    // A row held the key and moved away: a dirty (key, 9999) entry.
                    t.replace(row(9_999, &key)).expect("holder");
                    t.replace(row(9_999, "parked")).expect("holder moves");
                }
                if round % 8 == 3 {
                    db.flush().expect("flush");
                }
                let wins: Vec<bool> = std::thread::scope(|sc| {
                    let hs: Vec<_> = (0..THREADS)
                        .map(|th| {
                            let (t, barrier, key) = (&t, &barrier, &key);
                            sc.spawn(move || {
                                let r = row(round * 100 + th, key);
                                barrier.wait();
                                let res = if use_insert { t.insert(r) } else { t.replace(r) };
                                match res {
                                    Ok(()) => true,
                                    Err(Error::Constraint(_)) => false,
                                    Err(e) => panic!("unexpected error {e}"),
                                }
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().expect("thread")).collect()
                });
                let n = wins.iter().filter(|w| **w).count();
                assert_eq!(n, 1, "{ctx}: round {round}: {n} writers of {key} won");
                let holders = collect(t.select("by_u").eq(vec![s(&key)])).expect("select");
                assert_eq!(holders.len(), 1, "{ctx}: round {round}: {holders:?}");
            }
            check_ok(&db, false);
            check_ok(&db, true);
            assert_eq!(t.count().expect("count"), ROUNDS + 1);
        }
    }
}
