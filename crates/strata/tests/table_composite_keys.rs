//! Composite primary keys of variable-length fields, and secondary indexes that reuse
//! primary key fields (in another order) or hold nullable fields: random statements
//! checked against a model in both modes, through flushes, compactions and a reopen.

mod table_harness;

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::table::{Row, Table};
use strata::{Db, Error};
use table_harness::{check_ok, cmp_on, collect, i, rows_eq, s, small_options, sort_like_index};

/// (index, field positions)
const INDEXES: [(&str, &[usize]); 4] = [
    (PRIMARY, &[0, 1]),
    ("by_k2", &[1]),
    ("by_nk", &[2, 0]),
    ("by_tag", &[3]),
];

fn create(db: &Db, mode: &str) -> Table {
    table_harness::create_table(
        db,
        &format!(
            "table t (k1 str, k2 i64, n bytes null, tag str, v u64) primary key (k1, k2) \
             index by_k2 (k2) index by_nk (n, k1) index by_tag unique (tag) {mode}"
        ),
    )
}

const K1: [&str; 6] = ["", "a", "a\0", "a\0b", "ab", "\u{10ffff}"];
const N: [&[u8]; 5] = [b"", b"\0", b"\0\xff", b"\xff", b"\x01\x00"];

fn key(g: &mut StdRng) -> (Value, Value) {
    (
        s(K1[g.gen_range(0..K1.len() as u64) as usize]),
        i(g.gen_range(0..7) as i64 - 3),
    )
}

fn row(g: &mut StdRng, v: u64) -> Row {
    let (k1, k2) = key(g);
    let n = if g.gen_range(0..4) == 0 {
        Value::Null
    } else {
        Value::from(N[g.gen_range(0..N.len() as u64) as usize])
    };
    // Tags are unique per write except now and then, to hit the unique index.
    let tag = if g.gen_range(0..8) == 0 {
        s("dup")
    } else {
        s(&format!("t{v}"))
    };
    vec![k1, k2, n, tag, Value::U64(v)]
}

type Model = BTreeMap<(String, i64), Row>;

fn mkey(r: &[Value]) -> (String, i64) {
    (r[0].as_str().expect("k1").to_string(), r[1].as_i64().expect("k2"))
}

/// Whether a write the model predicts to conflict (`dup`) was applied; a conflict
/// must be a constraint error and nothing else.
fn applied(res: strata::Result<()>, dup: bool, what: &str) -> bool {
    match res {
        Ok(()) => {
            assert!(!dup, "{what} should have failed");
            true
        }
        Err(Error::Constraint(_)) => {
            assert!(dup, "{what} failed");
            false
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

fn verify(t: &Table, m: &Model, ctx: &str) {
    let mut all: Vec<Row> = m.values().cloned().collect();
    sort_like_index(&mut all, &[0, 1], &[]);
    for (index, fields) in INDEXES {
        let mut want = all.clone();
        sort_like_index(&mut want, fields, &[0, 1]);
        let got = collect(t.select(index)).expect("select");
        assert!(rows_eq(&got, &want), "{ctx}: {index}:\n got {got:?}\nwant {want:?}");
        let mut rev = collect(t.select(index).reverse()).expect("select");
        rev.reverse();
        assert!(rows_eq(&rev, &want), "{ctx}: {index} reversed");
    }
    // Equality on the first key field, a range on the second.
    for k1 in K1 {
        for (lo, hi) in [
            (Bound::Included(i(-1)), Bound::Excluded(i(2))),
            (Bound::Excluded(i(-3)), Bound::Unbounded),
            (Bound::Unbounded, Bound::Included(i(0))),
        ] {
            let want: Vec<Row> = all
                .iter()
                .filter(|r| r[0] == s(k1))
                .filter(|r| {
                    let v = &r[1];
                    (match &lo {
                        Bound::Included(b) => v.cmp_total(b).is_ge(),
                        Bound::Excluded(b) => v.cmp_total(b).is_gt(),
                        Bound::Unbounded => true,
                    }) && (match &hi {
                        Bound::Included(b) => v.cmp_total(b).is_le(),
                        Bound::Excluded(b) => v.cmp_total(b).is_lt(),
                        Bound::Unbounded => true,
                    })
                })
                .cloned()
                .collect();
            let got = collect(t.select(PRIMARY).eq(vec![s(k1)]).range(lo.clone(), hi.clone())).expect("range");
            assert!(rows_eq(&got, &want), "{ctx}: k1 = {k1:?}, k2 in {lo:?}..{hi:?}");
        }
    }
    for n in N.iter().map(|b| Value::from(*b)).chain([Value::Null]) {
        let mut want: Vec<Row> = all.iter().filter(|r| r[2].cmp_total(&n).is_eq()).cloned().collect();
        want.sort_by(|a, b| cmp_on(a, b, &[0, 1]));
        let got = collect(t.select("by_nk").eq(vec![n.clone()])).expect("eq");
        assert!(rows_eq(&got, &want), "{ctx}: n = {n}");
    }
}

#[test]
fn composite_keys_match_the_model() {
    for mode in ["deferred", "eager"] {
        let dir = table_harness::tempdir();
        let mut db = Db::open(dir.path(), small_options()).expect("open");
        let mut t = create(&db, mode);
        let mut g = StdRng::seed_from_u64(3);
        let mut m = Model::new();
        let mut conflicts = 0;
        for step in 0..4000u64 {
            match g.gen_range(0..6) {
                0 => {
                    let (k1, k2) = key(&mut g);
                    t.delete(&[k1.clone(), k2.clone()]).expect("delete");
                    m.remove(&(k1.as_str().expect("k1").to_string(), k2.as_i64().expect("k2")));
                }
                1 => {
                    let r = row(&mut g, step);
                    let dup = m.contains_key(&mkey(&r)) || m.values().any(|o| mkey(o) != mkey(&r) && o[3] == r[3]);
                    if applied(t.insert(r.clone()), dup, &format!("{mode}: insert of {r:?}")) {
                        m.insert(mkey(&r), r);
                    } else {
                        conflicts += 1;
                    }
                }
                _ => {
                    let r = row(&mut g, step);
                    let dup = m.values().any(|o| mkey(o) != mkey(&r) && o[3] == r[3]);
                    if applied(t.replace(r.clone()), dup, &format!("{mode}: replace of {r:?}")) {
                        m.insert(mkey(&r), r);
                    } else {
                        conflicts += 1;
                    }
                }
            }
            if step % 500 == 499 {
                verify(&t, &m, &format!("{mode}, step {step}"));
                match step / 500 % 3 {
                    0 => db.flush().expect("flush"),
                    1 => db.compact_range().expect("compact"),
                    _ => {
                        drop(t);
                        db.close().expect("close");
                        db = Db::open(dir.path(), small_options()).expect("reopen");
                        t = db.table("t").expect("table");
                    }
                }
            }
        }
        assert!(conflicts > 10, "{mode}: only {conflicts} unique conflicts");
        verify(&t, &m, &format!("{mode}, end"));
        check_ok(&db, true);
        verify(&t, &m, &format!("{mode}, after full compaction"));
    }
}
