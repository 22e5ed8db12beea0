//! Selects at a snapshot return exactly the rows as of the snapshot, through every
//! index, after any later replaces, deletes, flushes and compactions. In deferred mode
//! the validation of each secondary hit must itself read the primary index at the
//! snapshot: the latest row may have moved away from the key, come back to it with
//! other contents, or be gone.

mod table_harness;

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::table::{Row, Select, Table};
use strata::{Db, Snapshot};
use table_harness::{check_ok, collect, deepest_level, rows_eq, s, sort_like_index, u};

const INDEXES: [(&str, &[usize]); 3] = [(PRIMARY, &[0]), ("by_a", &[1]), ("by_ba", &[2, 1])];

fn create(db: &Db, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!(
            "table t (id u64, a u64, b str, v u64, pad bytes) primary key (id) \
             index by_a (a) index by_ba (b, a) {mode}"
        ),
    )
}

/// `v` numbers the write, so two versions of a row with the same keys still differ.
fn row(id: u64, a: u64, b: u64, v: u64) -> Row {
    vec![u(id), u(a), s(&format!("b{b}")), u(v), Value::Bytes(vec![b'.'; 150])]
}

type Model = BTreeMap<u64, Row>;

fn at(q: Select, snap: Option<&Snapshot>) -> Select {
    match snap {
        Some(sn) => q.at(sn),
        None => q,
    }
}

fn verify(t: &Table, m: &Model, snap: Option<&Snapshot>, ctx: &str) {
    let all: Vec<Row> = m.values().cloned().collect();
    for (index, fields) in INDEXES {
        let mut want = all.clone();
        sort_like_index(&mut want, fields, &[0]);
        let got = collect(at(t.select(index), snap)).expect("select");
        assert!(
            rows_eq(&got, &want),
            "{ctx}: {index}: {} rows, want {}\n got {:?}\nwant {:?}",
            got.len(),
            want.len(),
            got.iter().map(|r| (&r[0], &r[1], &r[2], &r[3])).collect::<Vec<_>>(),
            want.iter().map(|r| (&r[0], &r[1], &r[2], &r[3])).collect::<Vec<_>>()
        );
        let mut rev = collect(at(t.select(index).reverse(), snap)).expect("reverse");
        rev.reverse();
        assert!(rows_eq(&rev, &want), "{ctx}: {index} reversed");
        let lim = collect(at(t.select(index).limit(7), snap)).expect("limit");
        assert!(rows_eq(&lim, &want[..want.len().min(7)]), "{ctx}: {index} limit 7");
    }
    for a in 0..8 {
        let want: Vec<Row> = all.iter().filter(|r| r[1] == u(a)).cloned().collect();
        let got = collect(at(t.select("by_a").eq(vec![u(a)]), snap)).expect("eq");
        assert!(rows_eq(&got, &want), "{ctx}: by_a = {a}");
    }
    for b in 0..3 {
        let mut want: Vec<Row> = all
            .iter()
            .filter(|r| r[2] == s(&format!("b{b}")) && matches!(r[1], Value::U64(x) if x > 2 && x <= 5))
            .cloned()
            .collect();
        sort_like_index(&mut want, &[2, 1], &[0]);
        let got = collect(at(
            t.select("by_ba")
                .eq(vec![s(&format!("b{b}"))])
                .range(Bound::Excluded(u(2)), Bound::Included(u(5))),
            snap,
        ))
        .expect("range");
        assert!(rows_eq(&got, &want), "{ctx}: by_ba = b{b}, a in (2, 5]");
    }
    for id in [0u64, 1, 17, 99, 150] {
        let got = collect(at(t.select(PRIMARY).eq(vec![u(id)]), snap)).expect("pk");
        let want: Vec<Row> = m.get(&id).cloned().into_iter().collect();
        assert!(rows_eq(&got, &want), "{ctx}: pk {id}");
    }
}

fn churn(t: &Table, g: &mut StdRng, m: &mut Model, n: usize, v: &mut u64) {
    for _ in 0..n {
        let id = g.gen_range(0..160);
        *v += 1;
        match g.gen_range(0..6) {
            0 => {
                t.delete(&[u(id)]).expect("delete");
                m.remove(&id);
            }
            1 => {
                let a = g.gen_range(0..8);
                let found = t.update(&[u(id)], &[("a", u(a)), ("v", u(*v))]).expect("update");
                assert_eq!(found, m.contains_key(&id));
                if let Some(r) = m.get_mut(&id) {
                    r[1] = u(a);
                    r[3] = u(*v);
                }
            }
            _ => {
                let r = row(id, g.gen_range(0..8), g.gen_range(0..3), *v);
                t.replace(r.clone()).expect("replace");
                m.insert(id, r);
            }
        }
    }
}

#[test]
fn selects_at_snapshots_survive_later_writes_and_compactions() {
    table_harness::in_each_mode(create, |mode, db, t| {
        let mut g = StdRng::seed_from_u64(99);
        let mut m = Model::new();
        let mut v = 0;
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        for epoch in 0..10 {
            churn(&t, &mut g, &mut m, 400, &mut v);
            snaps.push((db.snapshot(), m.clone()));
            match epoch % 3 {
                0 => db.flush().expect("flush"),
                1 => db.compact_range().expect("compact"),
                _ => {}
            }
            for (k, (sn, sm)) in snaps.iter().enumerate() {
                verify(&t, sm, Some(sn), &format!("{mode}: epoch {epoch}, snapshot {k}"));
            }
        }
        churn(&t, &mut g, &mut m, 2000, &mut v);
        db.compact_range().expect("compact");
        db.wait_for_background().expect("background");
        assert!(deepest_level(db) >= 2, "{mode}: the data never reached level 2");
        verify(&t, &m, None, &format!("{mode}: latest"));
        // Release in a scrambled order, compacting in between.
        for step in 0..snaps.len() {
            let k = (step * 7) % snaps.len();
            let (sn, sm) = snaps.remove(k);
            verify(&t, &sm, Some(&sn), &format!("{mode}: before releasing"));
            drop(sn);
            churn(&t, &mut g, &mut m, 100, &mut v);
            db.compact_range().expect("compact");
            for (sn, sm) in &snaps {
                verify(&t, sm, Some(sn), &format!("{mode}: after releasing another"));
            }
        }
        verify(&t, &m, None, &format!("{mode}: latest at the end"));
        let ts = t.stats().expect("stats");
        if mode == "deferred" {
            assert_eq!(ts.hidden_reads, 0, "{ts}");
            assert!(ts.dirty_hits_skipped > 0, "{ts}");
        } else {
            assert_eq!(ts.dirty_hits_skipped, 0, "{ts}");
        }
        check_ok(db, true);
    });
}

/// The cases validation must get right, one by one: at the snapshot a row had key K;
/// later it moved to K2, came back to K with other contents, or was deleted and
/// re-inserted.
#[test]
fn validation_reads_the_row_as_of_the_snapshot() {
    for compact in [false, true] {
        table_harness::in_each_mode(create, |mode, db, t| {
            let ctx = format!("{mode}, compacted: {compact}");
            for id in 0..4 {
                t.replace(row(id, 1, 0, 1)).expect("replace");
            }
            let snap = db.snapshot();
            let old: Model = (0..4).map(|id| (id, row(id, 1, 0, 1))).collect();
            t.replace(row(0, 2, 0, 2)).expect("0 moves to a = 2");
            t.replace(row(1, 2, 0, 2)).expect("1 moves away...");
            t.replace(row(1, 1, 0, 3)).expect("...and back with other contents");
            t.delete(&[u(2)]).expect("2 is deleted");
            t.delete(&[u(3)]).expect("3 is deleted...");
            t.insert(row(3, 1, 1, 4)).expect("...and re-inserted with another b");
            t.replace(row(4, 1, 0, 5)).expect("4 is new");
            if compact {
                db.compact_range().expect("compact");
            }
            verify(&t, &old, Some(&snap), &format!("{ctx}, at the snapshot"));
            let got = collect(t.select("by_a").eq(vec![u(1)]).at(&snap)).expect("select");
            assert!(rows_eq(&got, &old.values().cloned().collect::<Vec<_>>()), "{ctx}");
            let now: Model = [row(0, 2, 0, 2), row(1, 1, 0, 3), row(3, 1, 1, 4), row(4, 1, 0, 5)]
                .into_iter()
                .map(|r| (r[0].as_u64().expect("pk"), r))
                .collect();
            verify(&t, &now, None, &format!("{ctx}, latest"));
            drop(snap);
            check_ok(db, true);
            verify(&t, &now, None, &format!("{ctx}, latest after full compaction"));
        });
    }
}

/// Readers running next to writers always see whole transactions: each writer moves
/// its tokens (rows with `a = 1`) between its rows in transactions that clear one row
/// and set another, so every select, with or without an explicit snapshot, must find
/// exactly the same number of tokens, while flushes and compactions turn dirty entries
/// into deferred deletes under the readers.
#[test]
fn concurrent_readers_always_see_whole_transactions() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const WRITERS: u64 = 2;
    const ROWS: u64 = 150; // per writer
    const TOKENS: u64 = 5; // per writer
    table_harness::in_each_mode(create, |mode, db, t| {
        let mut tx = t.transaction();
        for w in 0..WRITERS {
            for k in 0..ROWS {
                tx.replace(row(w * ROWS + k, u64::from(k < TOKENS), w, 0));
            }
        }
        tx.commit().expect("load");
        let stop = AtomicBool::new(false);
        let moves = AtomicU64::new(0);
        let reads = AtomicU64::new(0);
        std::thread::scope(|sc| {
            let _stop_writers = table_harness::StopOnDrop(&stop);
            for w in 0..WRITERS {
                let (t, stop, moves) = (&t, &stop, &moves);
                sc.spawn(move || {
                    let mut g = StdRng::seed_from_u64(w + 1);
                    let mut holders: Vec<u64> = (0..TOKENS).collect();
                    let mut v = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let i = g.gen_range(0..TOKENS) as usize;
                        let to = g.gen_range(0..ROWS);
                        if holders.contains(&to) {
                            continue;
                        }
                        v += 1;
                        let mut tx = t.transaction();
                        tx.replace(row(w * ROWS + holders[i], 0, w, v));
                        tx.replace(row(w * ROWS + to, 1, w, v));
                        tx.commit().expect("move a token");
                        holders[i] = to;
                        moves.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            for r in 0..2u64 {
                let (t, db, stop, reads) = (&t, &db, &stop, &reads);
                sc.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let tokens = collect(t.select("by_a").eq(vec![u(1)])).expect("select");
                        assert_eq!(
                            tokens.len() as u64,
                            WRITERS * TOKENS,
                            "{mode}: reader {r} saw half a move"
                        );
                        assert!(tokens.iter().all(|x| x[1] == u(1)), "{mode}: a dirty row came back");
                        let snap = db.snapshot();
                        let on = collect(t.select("by_a").eq(vec![u(1)]).at(&snap)).expect("select");
                        let off = collect(t.select("by_a").eq(vec![u(0)]).at(&snap).reverse()).expect("select");
                        assert_eq!(on.len() as u64, WRITERS * TOKENS, "{mode}: at a snapshot");
                        assert_eq!(on.len() + off.len(), (WRITERS * ROWS) as usize, "{mode}: at a snapshot");
                        let per_writer = collect(t.select("by_ba").eq(vec![s("b1")]).at(&snap)).expect("select");
                        assert_eq!(per_writer.len() as u64, ROWS, "{mode}: writer 1's rows at a snapshot");
                        assert_eq!(
                            per_writer.iter().filter(|x| x[1] == u(1)).count() as u64,
                            TOKENS,
                            "{mode}: writer 1's tokens at a snapshot"
                        );
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            // Enough interleavings, however long a loaded machine takes for them.
            let start = std::time::Instant::now();
            while (moves.load(Ordering::Relaxed) <= 500 || reads.load(Ordering::Relaxed) <= 20)
                && start.elapsed() < std::time::Duration::from_secs(120)
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
        });
        let (moves, reads) = (moves.into_inner(), reads.into_inner());
        assert!(moves > 500 && reads > 20, "{mode}: {moves} moves, {reads} reads");
        let ts = t.stats().expect("stats");
        if mode == "deferred" {
            assert!(ts.deferred_deletes_emitted > 0, "{mode}: {ts}");
        }
        check_ok(db, true);
    });
}
