//! Bad input to the table API gets a clear error of the right kind, naming the field,
//! index or table at fault, and writes nothing (the database's last seqno does not
//! move, no row or index entry appears, and other statements of the same transaction
//! are not applied).

mod table_harness;

use std::ops::Bound;

use strata::table::schema::Schema;
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::table::{Row, Table, Transaction};
use strata::{Db, Error};
use table_harness::{all_rows, check_ok, collect, s, small_options, u};

fn setup(mode: &str) -> (tempfile::TempDir, Db, Table) {
    let (dir, db) = table_harness::open_small();
    let t = db
        .create_table(
            Schema::parse(&format!(
                "table t (id u64, a u64, name str, note str null, score f64) primary key (id) \
                 index by_a (a) index by_name unique (name) index by_an (a, note) {mode}"
            ))
            .expect("schema"),
        )
        .expect("create table");
    t.insert(good(1)).expect("insert");
    t.insert(good(2)).expect("insert");
    (dir, db, t)
}

fn good(id: u64) -> Row {
    vec![u(id), u(id * 10), s(&format!("n{id}")), Value::Null, Value::F64(0.5)]
}

/// Runs `f`, expects an error matched by `kind` whose message contains every word of
/// `names`, and checks that nothing was written.
fn refused(db: &Db, t: &Table, what: &str, kind: ErrorKind, names: &[&str], f: impl FnOnce() -> strata::Result<()>) {
    let seq = db.last_seq();
    let rows = all_rows(t);
    match f() {
        Ok(()) => panic!("{what}: accepted"),
        Err(e) => assert_error(what, &e, kind, names),
    }
    assert_eq!(db.last_seq(), seq, "{what}: something was written");
    assert_eq!(all_rows(t), rows, "{what}: the rows changed");
}

/// Checks that `e` is of the `kind` expected and its message contains every word of `names`.
fn assert_error(what: &str, e: &Error, kind: ErrorKind, names: &[&str]) {
    assert!(kind(e), "{what}: wrong kind of error: {e:?}");
    let msg = e.to_string();
    for n in names {
        assert!(msg.contains(n), "{what}: the message does not name {n:?}: {msg}");
    }
}

/// `Table::insert` or `Table::replace`, for tables of cases.
type Write = fn(&Table, Row) -> strata::Result<()>;
/// An update's `(field, value)` sets.
type Sets<'a> = Vec<(&'a str, Value)>;
/// What a select or get returned.
type Selected = strata::Result<Vec<Row>>;
/// Whether an error is of the kind a case expects.
type ErrorKind = fn(&Error) -> bool;

/// `refused` for a transaction of the statements `statements` adds.
fn refused_tx(
    db: &Db,
    t: &Table,
    what: &str,
    kind: ErrorKind,
    names: &[&str],
    statements: impl FnOnce(&mut Transaction),
) {
    refused(db, t, what, kind, names, || {
        let mut tx = t.transaction();
        statements(&mut tx);
        tx.commit().map(|_| ())
    });
}

fn schema_mismatch(e: &Error) -> bool {
    matches!(e, Error::SchemaMismatch(_))
}

fn invalid_argument(e: &Error) -> bool {
    matches!(e, Error::InvalidArgument(_))
}

fn not_found(e: &Error) -> bool {
    matches!(e, Error::NotFound(_))
}

fn constraint(e: &Error) -> bool {
    matches!(e, Error::Constraint(_))
}

#[test]
fn bad_rows_are_refused() {
    for mode in ["deferred", "eager"] {
        let (_dir, db, t) = setup(mode);
        let with = |pos: usize, v: Value| {
            let mut r = good(3);
            r[pos] = v;
            r
        };
        let wrong_type = with(1, s("ten"));
        let dup_name = with(2, s("n1"));
        let mut long = good(3);
        long.push(Value::Null);
        let (insert, replace): (Write, Write) = (Table::insert, Table::replace);
        let cases: Vec<(&str, Write, Row, ErrorKind, &[&str])> = vec![
            (
                "insert: str in a u64 field",
                insert,
                wrong_type.clone(),
                schema_mismatch,
                &["'a'", "u64", "str"],
            ),
            (
                "replace: str in a u64 field",
                replace,
                wrong_type.clone(),
                schema_mismatch,
                &["'a'"],
            ),
            (
                "replace: i64 in an f64 field",
                replace,
                with(4, Value::I64(1)),
                schema_mismatch,
                &["'score'", "f64", "i64"],
            ),
            (
                "replace: i64 primary key",
                replace,
                with(0, Value::I64(3)),
                schema_mismatch,
                &["'id'"],
            ),
            (
                "insert: too few values",
                insert,
                good(3)[..4].to_vec(),
                schema_mismatch,
                &["4 values", "5 fields"],
            ),
            (
                "replace: too many values",
                replace,
                long,
                schema_mismatch,
                &["6 values", "5 fields"],
            ),
            (
                "insert: null in a non-nullable field",
                insert,
                with(2, Value::Null),
                schema_mismatch,
                &["'name'", "null"],
            ),
            (
                "replace: null primary key",
                replace,
                with(0, Value::Null),
                schema_mismatch,
                &["'id'", "null"],
            ),
            // Constraint errors also leave nothing.
            (
                "insert: duplicate primary key",
                insert,
                good(1),
                constraint,
                &["(1)", "\"t\""],
            ),
            (
                "insert: duplicate unique key",
                insert,
                dup_name.clone(),
                constraint,
                &["by_name"],
            ),
            (
                "replace: duplicate unique key",
                replace,
                dup_name.clone(),
                constraint,
                &["by_name"],
            ),
        ];
        for (what, write, row, kind, names) in cases {
            refused(&db, &t, what, kind, names, || write(&t, row));
        }
        // A transaction with one bad statement applies none of its statements.
        refused_tx(
            &db,
            &t,
            "transaction with one bad row",
            schema_mismatch,
            &["'a'"],
            |tx| {
                tx.replace(good(5))
                    .delete(vec![u(1)])
                    .insert(wrong_type.clone())
                    .replace(good(6));
            },
        );
        refused_tx(
            &db,
            &t,
            "transaction ending in a duplicate",
            constraint,
            &["by_name"],
            |tx| {
                tx.replace(good(5))
                    .delete(vec![u(2)])
                    .update(vec![u(1)], vec![("a".into(), u(99))]);
                tx.insert(dup_name.clone());
            },
        );
        assert_eq!(
            collect(t.select("by_a").eq(vec![u(99)])).expect("select"),
            Vec::<Row>::new()
        );
        check_ok(&db, true);
    }
}

#[test]
fn rows_from_pairs_are_checked() {
    let (_dir, db, t) = setup("deferred");
    let schema = t.schema().expect("schema");
    let ok = schema
        .row_from_pairs(&[("score", Value::F64(1.0)), ("name", s("x")), ("a", u(1)), ("id", u(9))])
        .expect("row from pairs");
    assert_eq!(ok, vec![u(9), u(1), s("x"), Value::Null, Value::F64(1.0)]);
    let err = |pairs: &[(&str, Value)], names: &[&str]| match schema.row_from_pairs(pairs) {
        Err(Error::SchemaMismatch(m)) => {
            for n in names {
                assert!(m.contains(n), "{pairs:?}: {m:?} does not name {n}");
            }
        }
        other => panic!("{pairs:?}: {other:?}"),
    };
    err(&[("id", u(9)), ("a", u(1)), ("score", Value::F64(1.0))], &["'name'"]);
    err(&[("id", u(9)), ("a", u(1)), ("name", s("x"))], &["'score'"]);
    err(
        &[
            ("id", u(9)),
            ("a", u(1)),
            ("name", s("x")),
            ("score", Value::F64(1.0)),
            ("zz", u(1)),
        ],
        &["'zz'"],
    );
    err(
        &[
            ("id", u(9)),
            ("a", s("1")),
            ("name", s("x")),
            ("score", Value::F64(1.0)),
        ],
        &["'a'"],
    );
    err(
        &[
            ("id", u(9)),
            ("a", u(1)),
            ("name", Value::Null),
            ("score", Value::F64(1.0)),
        ],
        &["'name'"],
    );
    assert_eq!(t.count().expect("count"), 2);
    drop(db);
}

#[test]
fn bad_updates_are_refused() {
    for mode in ["deferred", "eager"] {
        let (_dir, db, t) = setup(mode);
        let cases: Vec<(&str, Sets, ErrorKind, &[&str])> = vec![
            (
                "update of an unknown field",
                vec![("zz", u(1))],
                schema_mismatch,
                &["\"zz\""],
            ),
            (
                "update of the primary key",
                vec![("id", u(7))],
                invalid_argument,
                &["\"id\""],
            ),
            (
                "update with a wrong type",
                vec![("a", s("x"))],
                schema_mismatch,
                &["'a'"],
            ),
            (
                "update to null",
                vec![("name", Value::Null)],
                schema_mismatch,
                &["'name'"],
            ),
            (
                "update onto a held unique key",
                vec![("name", s("n2"))],
                constraint,
                &["by_name"],
            ),
            // Several good sets and one bad: nothing.
            (
                "update with one bad set",
                vec![("a", u(5)), ("score", u(1))],
                schema_mismatch,
                &["'score'"],
            ),
        ];
        for (what, set, kind, names) in cases {
            refused(&db, &t, what, kind, names, || t.update(&[u(1)], &set).map(|_| ()));
        }
        refused_tx(
            &db,
            &t,
            "update in a transaction",
            invalid_argument,
            &["\"id\""],
            |tx| {
                tx.replace(good(7))
                    .update(vec![u(2)], vec![("a".into(), u(3)), ("id".into(), u(3))]);
            },
        );
        assert_eq!(t.get(&[u(7)]).expect("get"), None);
        check_ok(&db, false);
    }
}

/// A statement that cannot be valid for any row (unknown field, primary key field) is
/// refused even when the row it names does not exist.
#[test]
fn bad_updates_of_missing_rows_are_refused() {
    for mode in ["deferred", "eager"] {
        let (_dir, db, t) = setup(mode);
        match t.update(&[u(404)], &[("zz", u(1))]) {
            Err(Error::SchemaMismatch(m)) => assert!(m.contains("zz"), "{m}"),
            other => panic!("{mode}: update of unknown field zz of a missing row: {other:?}"),
        }
        match t.update(&[u(404)], &[("id", u(1))]) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("id"), "{m}"),
            other => panic!("{mode}: update of the primary key of a missing row: {other:?}"),
        }
        match t.update(&[u(404)], &[("a", s("x"))]) {
            Err(Error::SchemaMismatch(m)) => assert!(m.contains("'a'"), "{m}"),
            other => panic!("{mode}: update with a wrong type of a missing row: {other:?}"),
        }
        drop(db);
    }
}

#[test]
fn bad_keys_and_selects_are_refused() {
    let (_dir, db, t) = setup("deferred");
    let seq = db.last_seq();
    // One equality, then a range from `from` on the next field.
    let eq_and_from = |index: &str, eq: Value, from: Value| {
        collect(
            t.select(index)
                .eq(vec![eq])
                .range(Bound::Included(from), Bound::Unbounded),
        )
    };
    let cases: Vec<(&str, Selected, ErrorKind, &[&str])> = vec![
        ("unknown index", collect(t.select("by_zz")), not_found, &["by_zz"]),
        (
            "too many equalities",
            collect(t.select("by_a").eq(vec![u(1), u(2)])),
            invalid_argument,
            &["by_a"],
        ),
        (
            "equalities on every field and a range",
            eq_and_from("by_a", u(1), u(0)),
            invalid_argument,
            &["by_a"],
        ),
        (
            "too many equalities on the primary",
            collect(t.select(PRIMARY).eq(vec![u(1), u(1)])),
            invalid_argument,
            &[PRIMARY],
        ),
        (
            "null equality on a non-nullable field",
            collect(t.select("by_a").eq(vec![Value::Null])),
            schema_mismatch,
            &[],
        ),
        (
            "range bound of the wrong type",
            eq_and_from("by_an", u(10), u(1)),
            schema_mismatch,
            &[],
        ),
        (
            "get with too many key values",
            t.get(&[u(1), u(2)]).map(|r| r.into_iter().collect()),
            invalid_argument,
            &["\"t\""],
        ),
        (
            "get with no key value",
            t.get(&[]).map(|r| r.into_iter().collect()),
            invalid_argument,
            &["\"t\""],
        ),
        (
            "get with a wrong key type",
            t.get(&[s("1")]).map(|r| r.into_iter().collect()),
            schema_mismatch,
            &[],
        ),
        (
            "delete with a wrong key type",
            t.delete(&[Value::I64(1)]).map(|_| vec![]),
            schema_mismatch,
            &[],
        ),
        (
            "delete with too many key values",
            t.delete(&[u(1), u(1)]).map(|_| vec![]),
            invalid_argument,
            &["\"t\""],
        ),
    ];
    for (what, r, kind, names) in cases {
        match r {
            Ok(rows) => panic!("{what}: accepted, returned {} rows", rows.len()),
            Err(e) => assert_error(what, &e, kind, names),
        }
    }
    assert_eq!(db.last_seq(), seq, "a refused call wrote something");
    assert_eq!(t.count().expect("count"), 2);
    // Catalog calls.
    match db.create_table(t.schema().expect("schema")) {
        Err(Error::AlreadyExists(m)) => assert!(m.contains("\"t\""), "{m}"),
        other => panic!("create of an existing table: {other:?}"),
    }
    match db.table("nope") {
        Err(Error::NotFound(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("open of an unknown table: {other:?}"),
    }
    match db.drop_table("nope") {
        Err(Error::NotFound(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("drop of an unknown table: {other:?}"),
    }
    check_ok(&db, true);
}

/// Type errors in keys name the field (or at least the index) at fault, like type
/// errors in rows do.
#[test]
fn key_type_errors_name_the_field() {
    let (_dir, _db, t) = setup("deferred");
    let msg = |r: strata::Result<()>| match r {
        Err(e) => e.to_string(),
        Ok(()) => panic!("accepted"),
    };
    let m = msg(collect(t.select("by_a").eq(vec![s("x")])).map(|_| ()));
    assert!(m.contains("'a'") || m.contains("by_a"), "select by_a = \"x\": {m}");
    let m = msg(t.get(&[s("1")]).map(|_| ()));
    assert!(m.contains("'id'") || m.contains("\"id\""), "get with a str key: {m}");
    let m = msg(t.delete(&[Value::I64(1)]));
    assert!(
        m.contains("'id'") || m.contains("\"id\""),
        "delete with an i64 key: {m}"
    );
}

#[test]
fn oversized_keys_closed_databases_and_foreign_snapshots_are_refused() {
    for mode in ["deferred", "eager"] {
        let (_dir, db, t) = setup(mode);
        // An indexed value too large for a key: refused as a whole.
        let mut huge = good(3);
        huge[2] = s(&"x".repeat(strata::options::MAX_KEY_SIZE + 1));
        refused(
            &db,
            &t,
            "row with an oversized index key",
            invalid_argument,
            &[],
            || t.replace(huge.clone()),
        );
        refused_tx(
            &db,
            &t,
            "transaction with an oversized index key",
            invalid_argument,
            &[],
            |tx| {
                tx.replace(good(4)).insert(huge.clone());
            },
        );
        assert_eq!(t.get(&[u(4)]).expect("get"), None);
        // A snapshot of another database.
        let other_dir = table_harness::tempdir();
        let other = Db::open(other_dir.path(), small_options()).expect("open other");
        let foreign = other.snapshot();
        match collect(t.select("by_a").at(&foreign)) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("{mode}: select at another database's snapshot: {other:?}"),
        }
        drop(foreign);
        // After close, every call fails with Closed.
        let t2 = t.clone();
        db.close().expect("close");
        assert!(matches!(t2.insert(good(9)), Err(Error::Closed)), "{mode}");
        assert!(matches!(t2.get(&[u(1)]), Err(Error::Closed)), "{mode}");
        assert!(
            matches!(t2.select("by_a").rows().map(|_| ()), Err(Error::Closed)),
            "{mode}"
        );
        assert!(matches!(t2.count(), Err(Error::Closed)), "{mode}");
    }
}
