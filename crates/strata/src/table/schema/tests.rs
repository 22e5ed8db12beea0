//! Tests of schemas: builder, text and binary forms, row checks.

use super::*;
use proptest::prelude::*;

const EXAMPLE: &str = "table users (id u64, name str, email str null, age i64, score f64, active bool, \
                       photo bytes null) primary key (id) index by_email unique (email) \
                       index by_age (age, name) deferred";

pub(crate) fn users() -> Schema {
    Schema::builder("users")
        .field("id", FieldType::U64)
        .field("name", FieldType::Str)
        .nullable_field("email", FieldType::Str)
        .field("age", FieldType::I64)
        .field("score", FieldType::F64)
        .field("active", FieldType::Bool)
        .nullable_field("photo", FieldType::Bytes)
        .primary_key(&["id"])
        .index("by_email", &["email"], true)
        .index("by_age", &["age", "name"], false)
        .maintenance(IndexMaintenance::Deferred)
        .build()
        .unwrap()
}

fn invalid_msg(r: Result<Schema>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn builder_resolves_positions_and_types() {
    let s = users();
    assert_eq!(s.name, "users");
    assert_eq!(s.fields.len(), 7);
    assert_eq!(s.pk_positions().unwrap(), [0]);
    assert_eq!(s.pk_types().unwrap(), [(FieldType::U64, false)]);
    let by_age = s.index("by_age").unwrap();
    assert_eq!(by_age, &IndexDef::new("by_age", &["age", "name"], false));
    assert_eq!(s.index_positions(by_age).unwrap(), [3, 1]);
    assert_eq!(
        s.index_key_types(by_age).unwrap(),
        [(FieldType::I64, false), (FieldType::Str, false)]
    );
    let by_email = s.index("by_email").unwrap();
    assert!(by_email.unique);
    assert_eq!(s.index_key_types(by_email).unwrap(), [(FieldType::Str, true)]);
    assert_eq!(
        s.index_entry_types(by_email).unwrap(),
        [(FieldType::Str, true), (FieldType::U64, false)]
    );
    assert_eq!(s.field_position("photo"), Some(6));
    assert_eq!(s.field("email").map(|f| f.nullable), Some(true));
    assert_eq!(s.maintenance, IndexMaintenance::Deferred);
    // Names from elsewhere are reported, not resolved to garbage.
    let other = IndexDef::new("x", &["nope"], false);
    assert!(matches!(s.index_positions(&other), Err(Error::SchemaMismatch(m)) if m.contains("'nope'")));
}

#[test]
fn builder_rejects_invalid_definitions() {
    let base = || {
        Schema::builder("t")
            .field("a", FieldType::U64)
            .field("b", FieldType::Str)
    };
    let cases: Vec<(SchemaBuilder, &str)> = vec![
        (Schema::builder("t").primary_key(&["a"]), "no fields"),
        (base(), "no primary key"),
        (
            base().field("a", FieldType::I64).primary_key(&["a"]),
            "duplicate field name 'a'",
        ),
        (base().primary_key(&["zz"]), "primary key field 'zz'"),
        (base().primary_key(&["a", "a"]), "listed twice"),
        (
            base().nullable_field("n", FieldType::U64).primary_key(&["n"]),
            "must not be nullable",
        ),
        (
            base().primary_key(&["a"]).index("i", &["nope"], false),
            "unknown field 'nope'",
        ),
        (
            base().primary_key(&["a"]).index("i", &[], false),
            "index 'i' has no fields",
        ),
        (
            base().primary_key(&["a"]).index("i", &["b", "b"], false),
            "lists field 'b' twice",
        ),
        (
            base()
                .primary_key(&["a"])
                .index("i", &["a"], false)
                .index("i", &["b"], true),
            "duplicate index name 'i'",
        ),
        (
            base().primary_key(&["a"]).index("", &["a"], false),
            "index name is empty",
        ),
        (
            Schema::builder("bad-name")
                .field("a", FieldType::U64)
                .primary_key(&["a"]),
            "table name 'bad-name'",
        ),
        (
            Schema::builder("").field("a", FieldType::U64).primary_key(&["a"]),
            "table name is empty",
        ),
        (base().field("é", FieldType::U64).primary_key(&["a"]), "field name 'é'"),
        (
            base().field(&"x".repeat(65), FieldType::U64).primary_key(&["a"]),
            "longer than 64",
        ),
    ];
    for (b, want) in cases {
        let m = invalid_msg(b.build());
        assert!(m.contains(want), "{m:?} should contain {want:?}");
    }
    // Limits: exactly 64 fields/indexes are fine, 65 are not.
    let mut b = Schema::builder("t");
    for i in 0..MAX_FIELDS {
        b = b.field(&format!("f{i}"), FieldType::U64);
    }
    b = b.primary_key(&["f0"]);
    for i in 0..MAX_INDEXES {
        b = b.index(&format!("i{i}"), &["f1"], false);
    }
    assert!(b.clone().build().is_ok());
    assert!(invalid_msg(b.clone().field("extra", FieldType::U64).build()).contains("at most 64"));
    assert!(invalid_msg(b.index("extra", &["f2"], false).build()).contains("at most 64"));
    let long = "x".repeat(64);
    assert!(
        Schema::builder(&long)
            .field(&long, FieldType::U64)
            .primary_key(&[&long])
            .build()
            .is_ok()
    );
}

#[test]
fn parse_documented_example() {
    let s = Schema::parse(EXAMPLE).unwrap();
    assert_eq!(s, users());
}

#[test]
fn parse_defaults_case_and_whitespace() {
    let s = Schema::parse("TABLE t(k u64,v STR NULL)PRIMARY KEY(k)").unwrap();
    assert_eq!(s.maintenance, IndexMaintenance::Deferred);
    assert_eq!(
        s.fields[1],
        Field {
            name: "v".into(),
            ty: FieldType::Str,
            nullable: true
        }
    );
    let s = Schema::parse("table t (\n  k u64,\n  v str\n) primary key (k, v)\nindex unique unique (v) eager").unwrap();
    assert_eq!(s.maintenance, IndexMaintenance::Eager);
    assert_eq!(s.pk_positions().unwrap(), [0, 1]);
    assert_eq!(s.index("unique").map(|i| i.unique), Some(true));
    // Keywords may be used as names where the grammar expects a name.
    let s = Schema::parse("table index (key u64, null bool) primary key (key) index table (null)").unwrap();
    assert_eq!(s.name, "index");
}

#[test]
fn parse_errors_name_token_and_position() {
    let cases = [
        (
            "tabel t (a u64) primary key (a)",
            "expected 'table' at position 1, found 'tabel'",
        ),
        ("table t (a u32) primary key (a)", "at position 12, found 'u32'"),
        (
            "table t (a u64 primary key (a)",
            "expected 'null', ',' or ')' at position 16, found 'primary'",
        ),
        (
            "table t (a u64) primary (a)",
            "expected 'key' at position 25, found '('",
        ),
        ("table t (a u64) primary key (a) lazy", "at position 33, found 'lazy'"),
        (
            "table t (a u64) primary key (a) eager index i (a)",
            "at position 39, found 'index'",
        ),
        (
            "table t (a u64) primary key (a",
            "expected ',' or ')' at position 31, found end of text",
        ),
        (
            "table t (a u64; b u64) primary key (a)",
            "unexpected character ';' at position 15",
        ),
        (
            "table t (a u64, a str) primary key (a)",
            "duplicate field name 'a' in table 't' (at position 17)",
        ),
        (
            "table t (a u64) primary key (b)",
            "primary key field 'b' is not a field of table 't' (at position 30)",
        ),
        (
            "table t (a u64, n i64 null) primary key (n)",
            "'n' must not be nullable (at position 42)",
        ),
        (
            "table t (a u64) primary key (a) index i (a) index i (a)",
            "duplicate index name 'i' in table 't' (at position 51)",
        ),
        (
            "table t (a u64) primary key (a) index i (a, zz)",
            "unknown field 'zz' of table 't' (at position 45)",
        ),
        (
            "table t (a u64) primary key (a) index (a)",
            "expected index name at position 39, found '('",
        ),
        ("", "expected 'table' at position 1, found end of text"),
    ];
    for (text, want) in cases {
        let m = invalid_msg(Schema::parse(text));
        assert!(m.contains(want), "{text:?}: {m:?} should contain {want:?}");
    }
}

#[test]
fn display_is_parseable_text() {
    let s = users();
    let text = s.to_string();
    assert_eq!(
        text,
        "table users (id u64, name str, email str null, age i64, score f64, active bool, photo bytes null) \
         primary key (id) index by_email unique (email) index by_age (age, name) deferred"
    );
    assert_eq!(Schema::parse(&text).unwrap(), s);
}

#[test]
fn a_delete_key_roundtrips_as_version_2() {
    let text = "table t (id u64, ts i64, s str null) primary key (id) delete key (ts) eager";
    let s = Schema::parse(text).unwrap();
    assert_eq!(s.delete_key.as_deref(), Some("ts"));
    assert_eq!(s.to_string(), text);
    let b = s.to_bytes();
    assert_eq!(b[0], SCHEMA_FORMAT_VERSION_DELETE_KEY);
    assert_eq!(b.last(), Some(&1), "the delete key's field position");
    assert_eq!(Schema::from_bytes(&b).unwrap(), s);
    let mut bad = b.clone();
    if let Some(last) = bad.last_mut() {
        *last = 9;
    }
    assert!(Schema::from_bytes(&bad).is_err(), "position out of range");
    let built = Schema::builder("t")
        .field("id", FieldType::U64)
        .field("ts", FieldType::I64)
        .nullable_field("s", FieldType::Str)
        .primary_key(&["id"])
        .delete_key("ts")
        .maintenance(IndexMaintenance::Eager)
        .build()
        .unwrap();
    assert_eq!(built, s);
}

#[test]
fn bytes_roundtrip_and_layout() {
    let s = users();
    let b = s.to_bytes();
    assert_eq!(b[0], SCHEMA_FORMAT_VERSION);
    assert_eq!(&b[1..7], b"\x05users");
    assert_eq!(b[7], 1, "deferred");
    assert_eq!(Schema::from_bytes(&b).unwrap(), s);

    let small = Schema::builder("t").field("k", FieldType::I64).primary_key(&["k"]);
    let small = small.maintenance(IndexMaintenance::Eager).build().unwrap();
    assert_eq!(small.to_bytes(), b"\x01\x01t\x00\x01\x01k\x02\x00\x01\x00\x00");
}

#[test]
fn from_bytes_rejects_bad_input() {
    let msg = |b: &[u8]| match Schema::from_bytes(b) {
        Err(Error::SchemaMismatch(m)) => m,
        other => panic!("expected SchemaMismatch, got {other:?}"),
    };
    let good = users().to_bytes();
    for n in 0..good.len() {
        assert!(Schema::from_bytes(&good[..n]).is_err(), "truncated at {n}");
    }
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(msg(&trailing).contains("trailing bytes after schema"));
    let mut v3 = good.clone();
    v3[0] = 3;
    assert_eq!(
        msg(&v3),
        "stored schema does not decode: unknown schema format version 3 (at byte 0)"
    );
    let mut v2 = good.clone();
    v2[0] = SCHEMA_FORMAT_VERSION_DELETE_KEY;
    assert!(
        msg(&v2).contains("truncated varint"),
        "version 2 ends with the delete key"
    );
    let mut mode = good.clone();
    mode[7] = 9;
    assert!(msg(&mode).contains("bad index maintenance mode 9 (at byte 7)"));
    // t: [ver, 1, 't', mode, n_fields, 1, 'k', type, nullable, n_pk, pos, n_idx]
    let t = Schema::builder("t")
        .field("k", FieldType::U64)
        .primary_key(&["k"])
        .build()
        .unwrap();
    let good = t.to_bytes();
    assert_eq!(good, b"\x01\x01t\x01\x01\x01k\x01\x00\x01\x00\x00");
    let with = |i: usize, v: u8| {
        let mut b = good.clone();
        b[i] = v;
        msg(&b)
    };
    assert!(with(8, 1).contains("primary key field 'k' must not be nullable"));
    assert!(with(8, 2).contains("bad nullable flag 2 (at byte 8)"));
    assert!(with(7, 0).contains("unknown field type code 0 (at byte 7)"));
    assert!(with(10, 5).contains("field position 5 out of range (at byte 10)"));
    assert!(msg(b"\x01\x01t\x01\x00\x00\x00").contains("invalid schema: table 't' has no fields (at byte 0)"));
    assert!(with(4, 65).contains("length out of range"));
    assert!(msg(b"\x01\x01t\x01\x01\x01k\x01\x00\x00\x00").contains("has no primary key"));
    assert!(with(6, b'-').contains("field name '-' may only contain"));
}

#[test]
fn check_row_reports_field_and_types() {
    let s = users();
    let ok = vec![
        Value::U64(1),
        Value::from("ann"),
        Value::Null,
        Value::I64(-3),
        Value::F64(0.5),
        Value::Bool(true),
        Value::Null,
    ];
    s.check_row(&ok).unwrap();
    let mismatch = |row: &[Value]| match s.check_row(row) {
        Err(Error::SchemaMismatch(m)) => m,
        other => panic!("expected SchemaMismatch, got {other:?}"),
    };
    assert!(mismatch(&ok[..6]).contains("has 6 values, the schema has 7 fields"));
    let mut bad = ok.clone();
    bad[3] = Value::U64(3);
    assert!(mismatch(&bad).contains("field 'age' of table 'users' expects i64, got u64"));
    let mut bad = ok.clone();
    bad[0] = Value::Null;
    assert!(mismatch(&bad).contains("field 'id' of table 'users' is not nullable: expected u64, got null"));
}

#[test]
fn row_from_pairs_orders_and_fills_nulls() {
    let s = users();
    let row = s
        .row_from_pairs(&[
            ("active", Value::Bool(false)),
            ("score", Value::F64(1.0)),
            ("id", Value::U64(7)),
            ("age", Value::I64(30)),
            ("name", Value::from("bo")),
        ])
        .unwrap();
    assert_eq!(
        row,
        vec![
            Value::U64(7),
            Value::from("bo"),
            Value::Null,
            Value::I64(30),
            Value::F64(1.0),
            Value::Bool(false),
            Value::Null
        ]
    );
    let err = |pairs: &[(&str, Value)]| match s.row_from_pairs(pairs) {
        Err(Error::SchemaMismatch(m)) => m,
        other => panic!("expected SchemaMismatch, got {other:?}"),
    };
    assert!(err(&[("id", Value::U64(1))]).contains("missing value for non-nullable field 'name'"));
    assert!(err(&[("nope", Value::U64(1))]).contains("unknown field 'nope'"));
    assert!(err(&[("id", Value::U64(1)), ("id", Value::U64(2))]).contains("given twice"));
    let wrong = [
        ("id", Value::from("x")),
        ("name", Value::from("n")),
        ("age", Value::I64(1)),
        ("score", Value::F64(1.0)),
        ("active", Value::Bool(true)),
    ];
    assert!(err(&wrong).contains("field 'id' of table 'users' expects u64, got str"));
}

pub(crate) fn arb_schema() -> impl Strategy<Value = Schema> {
    let ty = prop::sample::select(FieldType::ALL.to_vec());
    (
        prop::collection::vec((ty, any::<bool>()), 1..10),
        prop::collection::vec((prop::collection::vec(0usize..10, 1..4), any::<bool>()), 0..4),
        1usize..3,
        any::<bool>(),
    )
        .prop_map(|(fields, indexes, n_pk, eager)| {
            let mut b = Schema::builder("t");
            for (i, (ty, nullable)) in fields.iter().enumerate() {
                // The first n_pk fields form the key and must not be nullable.
                b = if *nullable && i >= n_pk {
                    b.nullable_field(&format!("f{i}"), *ty)
                } else {
                    b.field(&format!("f{i}"), *ty)
                };
            }
            let n = fields.len();
            let pk: Vec<String> = (0..n_pk.min(n)).map(|i| format!("f{i}")).collect();
            let pk_refs: Vec<&str> = pk.iter().map(String::as_str).collect();
            b = b.primary_key(&pk_refs);
            for (k, (cols, unique)) in indexes.iter().enumerate() {
                let mut names: Vec<String> = Vec::new();
                for c in cols {
                    let name = format!("f{}", c % n);
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                b = b.index(&format!("ix{k}"), &refs, *unique);
            }
            if eager {
                b = b.maintenance(IndexMaintenance::Eager);
            }
            b.build().unwrap()
        })
}

proptest! {
    #[test]
    fn schema_bytes_and_text_roundtrip(s in arb_schema()) {
        prop_assert_eq!(Schema::from_bytes(&s.to_bytes()).unwrap(), s.clone());
        prop_assert_eq!(Schema::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn schema_from_bytes_never_panics(bytes: Vec<u8>) {
        let _ = Schema::from_bytes(&bytes);
    }

    #[test]
    fn schema_from_mutated_bytes_never_panics(s in arb_schema(), at: prop::sample::Index, byte: u8) {
        let mut b = s.to_bytes();
        let i = at.index(b.len());
        b[i] = byte;
        if let Ok(d) = Schema::from_bytes(&b) {
            // Whatever decodes is a valid schema that survives a re-encode.
            prop_assert_eq!(Schema::from_bytes(&d.to_bytes()).unwrap(), d);
        }
    }

    #[test]
    fn parse_never_panics(text in "[ a-z0-9_(),é;\n]{0,60}") {
        let _ = Schema::parse(&text);
    }
}
