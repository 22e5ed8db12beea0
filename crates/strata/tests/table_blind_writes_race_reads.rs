//! Blind statements (deferred REPLACE and DELETE) take no lock, while INSERT and
//! UPDATE read the row under a lock and write what they decided. Each statement is
//! atomic; running them concurrently must give the result of some serial order:
//!
//! * UPDATE racing a DELETE of the same row: in either order the row ends up deleted
//!   (the UPDATE either is deleted afterwards or finds nothing). The row must never come
//!   back.
//! * INSERT racing a REPLACE of a new key: if both succeed, the INSERT came first, so the
//!   REPLACE's row is the one left.
//!
//! Eager tables (which lock for every statement) are the control.

mod table_harness;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Barrier;

use strata::Db;
use strata::table::value::Value;
use strata::table::{Row, Table};
use table_harness::{s, u};

fn create(db: &Db, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!("table t (id u64, a u64, who str) primary key (id) index by_a (a) {mode}"),
    )
}

fn row(id: u64, a: u64, who: &str) -> Row {
    vec![u(id), u(a), s(who)]
}

const KEYS: u64 = 200;
const ROUNDS: u64 = 30;

/// Runs `round` (given the mode) on keys `base..base + KEYS` for each round, in an eager
/// and a deferred table; asserts no round returned an anomalous row (`what` describes one).
fn race(what: &str, round: impl Fn(&str, &Table, u64) -> Vec<Row>) {
    let mut failures = Vec::new();
    table_harness::in_each_mode(create, |mode, _db, t| {
        let mut anomalies = Vec::new();
        for r in 0..ROUNDS {
            anomalies.extend(round(mode, &t, r * KEYS));
        }
        if !anomalies.is_empty() {
            failures.push(format!(
                "{mode}: {} of {} {what}, e.g. {:?}",
                anomalies.len(),
                ROUNDS * KEYS,
                &anomalies[..anomalies.len().min(3)]
            ));
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn update_racing_delete_never_resurrects_the_row() {
    race("deleted rows came back after a concurrent UPDATE", |_, t, base| {
        let mut tx = t.transaction();
        for id in base..base + KEYS {
            tx.insert(row(id, 0, "insert"));
        }
        tx.commit().expect("load");
        let barrier = Barrier::new(2);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                barrier.wait();
                for id in base..base + KEYS {
                    t.delete(&[u(id)]).expect("delete");
                }
            });
            sc.spawn(|| {
                barrier.wait();
                for pass in 1..=3 {
                    for id in base..base + KEYS {
                        t.update(&[u(id)], &[("a", u(pass)), ("who", s("update"))])
                            .expect("update");
                    }
                }
            });
        });
        (base..base + KEYS)
            .filter_map(|id| t.get(&[u(id)]).expect("get"))
            .collect()
    });
}

#[test]
fn insert_racing_replace_is_serializable() {
    // Per mode: keys where the INSERT succeeded (so both statements did, the REPLACE
    // cannot fail) and where it failed (the REPLACE came first). Only the first are
    // checked for the anomaly, so they must occur.
    let outcomes = RefCell::new(BTreeMap::<String, [u64; 2]>::new());
    race(
        "INSERTs succeeded and overwrote a row a concurrent REPLACE (also successful) wrote before them",
        |mode, t, base| {
            let barrier = Barrier::new(2);
            let insert = || {
                barrier.wait();
                (base..base + KEYS)
                    .map(|id| match t.insert(row(id, 1, "insert")) {
                        Ok(()) => true,
                        Err(strata::Error::Constraint(_)) => false,
                        Err(e) => panic!("insert: {e}"),
                    })
                    .collect::<Vec<bool>>()
            };
            let replace = || {
                barrier.wait();
                for id in base..base + KEYS {
                    t.replace(row(id, 2, "replace")).expect("replace");
                }
            };
            // The thread started last tends to pass the barrier first (the other has to
            // be woken) and, on a busy machine, to run through all its keys first: the
            // order alternates so that each statement comes first in some rounds.
            let inserted = std::thread::scope(|sc| {
                let (i, r) = if (base / KEYS).is_multiple_of(2) {
                    let i = sc.spawn(insert);
                    (i, sc.spawn(replace))
                } else {
                    let r = sc.spawn(replace);
                    (sc.spawn(insert), r)
                };
                r.join().expect("replace thread");
                i.join().expect("insert thread")
            });
            let mut anomalies = Vec::new();
            let mut outcomes = outcomes.borrow_mut();
            let counts = outcomes.entry(mode.to_string()).or_default();
            for (k, id) in (base..base + KEYS).enumerate() {
                let now = t.get(&[u(id)]).expect("get").expect("row");
                counts[usize::from(!inserted[k])] += 1;
                // Both succeeded: the insert came first, so the replace's row must be left.
                if inserted[k] && now[2] != Value::from("replace") {
                    anomalies.push(now);
                }
            }
            anomalies
        },
    );
    let outcomes = outcomes.into_inner();
    eprintln!("[INSERT succeeded, INSERT came second] per mode: {outcomes:?}");
    for mode in table_harness::MODES {
        let [both, replace_first] = outcomes.get(mode).copied().unwrap_or_default();
        assert!(
            both > 0,
            "{mode}: no INSERT succeeded next to its REPLACE (each of {replace_first} came second), so no \
             round checked the case"
        );
    }
}
