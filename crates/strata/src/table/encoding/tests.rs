//! Tests of the row and key codecs.

use super::*;
use crate::error::{Error, Result};
use crate::table::schema::tests::users;
use crate::table::schema::{FieldType, KeyType, Schema};
use crate::table::value::{CANONICAL_NAN_BITS, Value};
use proptest::prelude::*;
use std::cmp::Ordering;

const U64: KeyType = (FieldType::U64, false);
const I64: KeyType = (FieldType::I64, false);
const F64: KeyType = (FieldType::F64, false);
const STR: KeyType = (FieldType::Str, false);
const BYTES: KeyType = (FieldType::Bytes, false);

fn key(values: &[Value], types: &[KeyType]) -> Vec<u8> {
    let mut out = Vec::new();
    try_encode_key(&mut out, values, types).unwrap();
    out
}

fn key1(v: Value, t: KeyType) -> Vec<u8> {
    key(&[v], &[t])
}

/// Asserts that `vals` are strictly increasing under both `cmp_total` and key bytes,
/// and that every key decodes back.
fn assert_strictly_increasing(vals: &[Value], t: KeyType) {
    for w in vals.windows(2) {
        assert_eq!(w[0].cmp_total(&w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
        assert!(
            key1(w[0].clone(), t) < key1(w[1].clone(), t),
            "key({}) < key({})",
            w[0],
            w[1]
        );
    }
    for v in vals {
        let k = key1(v.clone(), t);
        let (back, used) = decode_key(&k, &[t]).unwrap();
        assert_eq!(used, k.len());
        assert!(same(&back[0], &canon(v)), "{v} -> {}", back[0]);
    }
}

/// Equality with floats compared by bits.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// What a key decodes to: NaNs become the canonical NaN.
fn canon(v: &Value) -> Value {
    match v {
        Value::F64(f) if f.is_nan() => Value::F64(f64::from_bits(CANONICAL_NAN_BITS)),
        v => v.clone(),
    }
}

fn user(id: u64, name: &str, email: Option<&str>, age: i64) -> Vec<Value> {
    vec![
        Value::U64(id),
        Value::from(name),
        Value::from(email),
        Value::I64(age),
        Value::F64(-1.25),
        Value::Bool(id.is_multiple_of(2)),
        Value::from(email.map(|e| e.as_bytes().to_vec())),
    ]
}

fn mismatch<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Err(Error::SchemaMismatch(m)) => m,
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
}

// --- named key-codec unit tests ---------------------------------------------------

#[test]
fn key_strings_with_embedded_zero_bytes_keep_order() {
    let s = |x: &str| Value::from(x);
    assert_strictly_increasing(
        &[
            s(""),
            s("\0"),
            s("\0\0"),
            s("\0\u{1}"),
            s("\u{1}"),
            s("a"),
            s("a\0"),
            s("a\0\0"),
            s("a\0b"),
            s("a\u{1}"),
            s("ab"),
            s("b"),
        ],
        STR,
    );
    assert_eq!(key1(s("a\0b"), STR), b"a\x00\xffb\x00\x01");
    assert_eq!(key1(s(""), STR), b"\x00\x01");
    let b = |x: &[u8]| Value::from(x);
    assert_strictly_increasing(
        &[
            b(b""),
            b(b"\0"),
            b(b"\0\0"),
            b(b"\0\x01"),
            b(b"\0\xff"),
            b(b"\x01"),
            b(b"\xff"),
            b(b"\xff\0"),
            b(b"\xff\xff"),
        ],
        BYTES,
    );
    assert_eq!(key1(b(b"\0\xff"), BYTES), b"\x00\xff\xff\x00\x01");
    // Self-delimiting: a following field does not disturb the order of the first.
    let types = [BYTES, U64];
    assert!(
        key(&[b(b"a"), Value::U64(u64::MAX)], &types) < key(&[b(b"a\0"), Value::U64(0)], &types),
        "('a', MAX) < ('a\\0', 0)"
    );
}

#[test]
fn key_negative_i64_orders_before_positive() {
    let i = Value::I64;
    assert_strictly_increasing(
        &[
            i(i64::MIN),
            i(i64::MIN + 1),
            i(-256),
            i(-1),
            i(0),
            i(1),
            i(255),
            i(i64::MAX),
        ],
        I64,
    );
    assert_eq!(key1(i(-1), I64), [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(key1(i(0), I64), [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(key1(i(i64::MIN), I64), [0; 8]);
}

#[test]
fn key_negative_f64_and_special_values_order() {
    let f = Value::F64;
    assert_strictly_increasing(
        &[
            f(f64::NEG_INFINITY),
            f(f64::MIN),
            f(-1.5),
            f(-1.0),
            f(-f64::MIN_POSITIVE),
            f(-5e-324),
            f(-0.0),
            f(0.0),
            f(5e-324),
            f(1.0),
            f(f64::MAX),
            f(f64::INFINITY),
            f(f64::NAN),
        ],
        F64,
    );
    assert_eq!(key1(f(0.0), F64), [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(key1(f(-0.0), F64), [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(key1(f(1.0), F64), [0xbf, 0xf0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(key1(f(-1.0), F64), [0x40, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn key_nan_is_canonical() {
    let nan_key = key1(Value::F64(f64::NAN), F64);
    assert_eq!(nan_key, [0xff, 0xf8, 0, 0, 0, 0, 0, 0]);
    for bits in [0xfff8_0000_0000_0000u64, 0x7ff0_0000_0000_0001, 0xffff_ffff_ffff_ffff] {
        assert_eq!(key1(Value::F64(f64::from_bits(bits)), F64), nan_key, "{bits:#x}");
    }
    let (v, _) = decode_key(&nan_key, &[F64]).unwrap();
    assert_eq!(v[0].as_f64().map(f64::to_bits), Some(CANONICAL_NAN_BITS));
    // Other NaN bit patterns are never written, so they are rejected.
    let m = mismatch(decode_key(&[0xff, 0xf8, 0, 0, 0, 0, 0, 1], &[F64]));
    assert!(m.contains("non-canonical NaN"), "{m}");
}

#[test]
fn key_u64_and_bool_layout() {
    assert_eq!(key1(Value::U64(0x0102), U64), [0, 0, 0, 0, 0, 0, 1, 2]);
    assert_strictly_increasing(
        &[Value::U64(0), Value::U64(1), Value::U64(256), Value::U64(u64::MAX)],
        U64,
    );
    let b = (FieldType::Bool, false);
    assert_eq!(key1(Value::Bool(false), b), [0]);
    assert_eq!(key1(Value::Bool(true), b), [1]);
}

#[test]
fn key_nullable_marker_sorts_null_first() {
    let t = (FieldType::I64, true);
    assert_eq!(key1(Value::Null, t), [KEY_NULL]);
    assert_eq!(key1(Value::I64(i64::MIN), t), [KEY_PRESENT, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_strictly_increasing(&[Value::Null, Value::I64(i64::MIN), Value::I64(0)], t);
    let s = (FieldType::Str, true);
    assert_strictly_increasing(&[Value::Null, Value::from(""), Value::from("\0")], s);
}

#[test]
fn key_composite_orders_field_by_field() {
    let types = [(FieldType::Str, true), I64, (FieldType::Bool, false)];
    let k = |a: Option<&str>, b: i64, c: bool| key(&[Value::from(a), Value::I64(b), Value::Bool(c)], &types);
    let ordered = [
        k(None, i64::MAX, true),
        k(Some(""), i64::MIN, false),
        k(Some(""), -1, true),
        k(Some(""), 0, false),
        k(Some("a"), -5, false),
        k(Some("a"), -5, true),
        k(Some("a\0"), i64::MIN, false),
        k(Some("b"), i64::MIN, false),
    ];
    for w in ordered.windows(2) {
        assert!(w[0] < w[1], "{:?} < {:?}", w[0], w[1]);
    }
}

#[test]
fn encode_key_rejects_mismatches_and_leaves_out_unchanged() {
    let mut out = b"keep".to_vec();
    let cases: [(&[Value], &[KeyType], &str); 4] = [
        (&[Value::U64(1)], &[U64, U64], "key has 1 values but 2 key fields"),
        (
            &[Value::U64(1), Value::from("x")],
            &[U64, U64],
            "key field 1 expects u64, got str",
        ),
        (
            &[Value::U64(1), Value::Null],
            &[U64, I64],
            "key field 1 is not nullable",
        ),
        (&[Value::I64(1)], &[U64], "expects u64, got i64"),
    ];
    for (vals, types, want) in cases {
        match try_encode_key(&mut out, vals, types) {
            Err(Error::SchemaMismatch(m)) => assert!(m.contains(want), "{m:?} vs {want:?}"),
            other => panic!("expected SchemaMismatch, got {other:?}"),
        }
        assert_eq!(out, b"keep");
    }
    assert!(encode_key_prefix(&mut out, &[Value::U64(1), Value::U64(2)], &[U64]).is_err());
    assert!(encode_key_prefix(&mut out, &[Value::from("x")], &[U64, U64]).is_err());
    assert_eq!(out, b"keep");
}

#[test]
fn decode_key_rejects_malformed_bytes() {
    let cases: [(&[u8], &[KeyType], &str); 9] = [
        (&[1, 2, 3], &[U64], "truncated key"),
        (b"abc", &[STR], "unterminated string"),
        (b"ab\x00", &[STR], "truncated escape"),
        (b"ab\x00\x02", &[STR], "bad escape byte 0x02"),
        (b"\xff\x00\x01", &[STR], "not valid UTF-8"),
        (&[2], &[(FieldType::Bool, false)], "bad bool byte"),
        (&[7], &[(FieldType::U64, true)], "bad null marker"),
        (&[], &[(FieldType::U64, true)], "truncated key"),
        (&[KEY_PRESENT, 0, 0], &[(FieldType::U64, true)], "truncated key"),
    ];
    for (bytes, types, want) in cases {
        let m = mismatch(decode_key(bytes, types));
        assert!(m.contains(want), "{bytes:?}: {m} should contain {want:?}");
    }
    assert_eq!(
        mismatch(decode_key(b"ab\x00\x02", &[STR])),
        "stored key does not decode: bad escape byte 0x02 after 0x00 (at byte 3)"
    );
}

#[test]
fn decode_key_reports_consumed_and_split_key_finds_primary_key() {
    let s = users();
    let row = user(42, "ann", Some("a\0@x"), -7);
    let by_age = s.index("by_age").unwrap();
    let by_age_types = s.index_key_types(by_age).unwrap();
    let entry = encode_index_key(&s, by_age, &row).unwrap();
    let pk = encode_primary_key(&s, &row).unwrap();
    assert_eq!(pk, 42u64.to_be_bytes());
    let (head, tail) = split_key(&entry, &by_age_types).unwrap();
    assert_eq!(tail, &pk[..]);
    assert_eq!(head, &key(&[Value::I64(-7), Value::from("ann")], &by_age_types)[..]);
    let (vals, used) = decode_key(&entry, &by_age_types).unwrap();
    assert_eq!(vals, vec![Value::I64(-7), Value::from("ann")]);
    assert_eq!(used, head.len());
    let (all, used) = decode_key(&entry, &s.index_entry_types(by_age).unwrap()).unwrap();
    assert_eq!(all, vec![Value::I64(-7), Value::from("ann"), Value::U64(42)]);
    assert_eq!(used, entry.len());
    // A nullable index field that is null.
    let by_email = s.index("by_email").unwrap();
    let entry = encode_index_key(&s, by_email, &user(9, "bo", None, 1)).unwrap();
    assert_eq!(entry, [&[KEY_NULL][..], &9u64.to_be_bytes()].concat());
    assert!(split_key(&[KEY_PRESENT, b'x'], &s.index_key_types(by_email).unwrap()).is_err());
    // Rows of the wrong length are refused, not indexed out of bounds.
    assert!(matches!(encode_primary_key(&s, &[]), Err(Error::SchemaMismatch(_))));
    assert!(matches!(
        encode_index_key(&s, by_age, &row[..2]),
        Err(Error::SchemaMismatch(_))
    ));
}

#[test]
fn prefix_successor_cases() {
    assert_eq!(prefix_successor(b""), None);
    assert_eq!(prefix_successor(&[0xff, 0xff]), None);
    assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
    assert_eq!(prefix_successor(&[1, 0xff]), Some(vec![2]));
    assert_eq!(prefix_successor(&[0, 0xfe, 0xff, 0xff]), Some(vec![0, 0xff]));
}

#[test]
fn index_equality_prefix_becomes_key_range() {
    let s = users();
    let by_age = s.index("by_age").unwrap();
    let types = s.index_key_types(by_age).unwrap();
    let rows = [
        user(1, "a", None, 30),
        user(2, "b", None, 31),
        user(3, "a", None, 31),
        user(4, "a\0", None, 31),
        user(5, "", None, 32),
        user(6, "z", None, -31),
    ];
    let mut entries: Vec<(Vec<u8>, u64)> = rows
        .iter()
        .map(|r| (encode_index_key(&s, by_age, r).unwrap(), r[0].as_u64().unwrap()))
        .collect();
    entries.sort();
    let scan = |vals: &[Value]| -> Vec<u64> {
        let mut lo = Vec::new();
        encode_key_prefix(&mut lo, vals, &types).unwrap();
        let hi = prefix_successor(&lo);
        entries
            .iter()
            .filter(|(k, _)| *k >= lo && hi.as_ref().is_none_or(|h| k < h))
            .map(|(_, id)| *id)
            .collect()
    };
    assert_eq!(scan(&[Value::I64(31)]), vec![3, 4, 2]);
    assert_eq!(scan(&[Value::I64(31), Value::from("a")]), vec![3]);
    assert_eq!(scan(&[Value::I64(-31)]), vec![6]);
    assert_eq!(scan(&[Value::I64(33)]), Vec::<u64>::new());
    assert_eq!(scan(&[]), vec![6, 1, 3, 4, 2, 5]);
}

// --- named row-codec unit tests ---------------------------------------------------

#[test]
fn row_roundtrip_and_layout() {
    let s = users();
    let row = user(300, "ann", None, -2);
    let b = encode_row(&s, &row);
    let mut want = vec![ROW_FORMAT_VERSION, 0b11, 0xac, 0x02, 3, b'a', b'n', b'n', 3];
    want.extend_from_slice(&(-1.25f64).to_bits().to_le_bytes());
    want.push(1);
    assert_eq!(b, want);
    assert_eq!(decode_row(&s, &b).unwrap(), row);
    let row = user(7, "", Some("e@x"), i64::MIN);
    let b = encode_row(&s, &row);
    assert_eq!(b[1], 0, "no nulls");
    assert_eq!(decode_row(&s, &b).unwrap(), row);
    assert_eq!(
        decode_fields(&s, &b, &[3, 0, 3]).unwrap(),
        vec![Value::I64(i64::MIN), Value::U64(7), Value::I64(i64::MIN)]
    );
    assert_eq!(decode_fields(&s, &b, &[]).unwrap(), Vec::<Value>::new());
    assert!(matches!(decode_fields(&s, &b, &[7]), Err(Error::InvalidArgument(m)) if m.contains("out of range")));
    // A table without nullable fields has no bitmap.
    let t = Schema::builder("t")
        .field("k", FieldType::I64)
        .primary_key(&["k"])
        .build()
        .unwrap();
    assert_eq!(encode_row(&t, &[Value::I64(-1)]), [ROW_FORMAT_VERSION, 1]);
}

#[test]
fn encode_row_rejects_mismatched_rows() {
    let s = users();
    let mut row = user(1, "a", None, 1);
    row[1] = Value::U64(5);
    // Mismatching rows encode to nothing that decodes.
    assert_eq!(encode_row(&s, &row), Vec::<u8>::new());
    assert_eq!(encode_row(&s, &row[..3]), Vec::<u8>::new());
    assert!(mismatch(decode_row(&s, &[])).contains("truncated"));
}

#[test]
fn decode_row_rejects_malformed_bytes() {
    let s = users();
    let good = encode_row(&s, &user(1, "ann", Some("e"), 5));
    for n in 0..good.len() {
        assert!(decode_row(&s, &good[..n]).is_err(), "truncated at {n}");
    }
    let with = |i: usize, b: u8| {
        let mut v = good.clone();
        v[i] = b;
        mismatch(decode_row(&s, &v))
    };
    assert_eq!(
        with(0, 9),
        "stored row of table 'users' does not decode: unknown row format version 9 (at byte 0)"
    );
    assert!(with(1, 0b100).contains("unused null bitmap bits are set (at byte 1)"));
    assert!(with(4, 0xff).contains("field 'name' is not valid UTF-8 (at byte 3)"));
    let active_at = good.len() - 3;
    assert!(with(active_at, 2).contains("bool byte 2"));
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(mismatch(decode_row(&s, &trailing)).contains("trailing"));
    // decode_fields stops after the last wanted field, so it ignores later damage.
    assert_eq!(decode_fields(&s, &trailing, &[0]).unwrap(), vec![Value::U64(1)]);
}

// --- property tests ----------------------------------------------------------------

fn arb_f64() -> BoxedStrategy<f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        any::<f64>(),
        prop::sample::select(vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
        ]),
    ]
    .boxed()
}

/// A non-null value of type `ty`, biased towards zero bytes, 0xFF, extremes and
/// shared prefixes.
fn arb_value(ty: FieldType) -> BoxedStrategy<Value> {
    match ty {
        FieldType::U64 => prop_oneof![any::<u64>(), 0..4u64, (u64::MAX - 3)..=u64::MAX]
            .prop_map(Value::U64)
            .boxed(),
        FieldType::I64 => prop_oneof![any::<i64>(), -3..3i64, Just(i64::MIN), Just(i64::MAX)]
            .prop_map(Value::I64)
            .boxed(),
        FieldType::F64 => arb_f64().prop_map(Value::F64).boxed(),
        FieldType::Str => prop::collection::vec(
            prop_oneof![
                Just('\0'),
                Just('\u{1}'),
                Just('a'),
                Just('\u{ff}'),
                Just('\u{10ffff}'),
                any::<char>()
            ],
            0..6,
        )
        .prop_map(|c| Value::Str(c.into_iter().collect()))
        .boxed(),
        FieldType::Bytes => prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()], 0..6)
            .prop_map(Value::Bytes)
            .boxed(),
        FieldType::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
    }
}

fn arb_cell((ty, nullable): KeyType) -> BoxedStrategy<Value> {
    if nullable {
        prop_oneof![1 => Just(Value::Null), 3 => arb_value(ty)].boxed()
    } else {
        arb_value(ty)
    }
}

fn arb_key_type() -> impl Strategy<Value = KeyType> {
    (prop::sample::select(FieldType::ALL.to_vec()), any::<bool>())
}

fn arb_tuple(types: &[KeyType]) -> Vec<BoxedStrategy<Value>> {
    types.iter().map(|&t| arb_cell(t)).collect()
}

/// Key types with two tuples of values for them.
fn arb_key_pair(max_fields: usize) -> impl Strategy<Value = (Vec<KeyType>, Vec<Value>, Vec<Value>)> {
    prop::collection::vec(arb_key_type(), 1..=max_fields)
        .prop_flat_map(|types| (arb_tuple(&types), arb_tuple(&types), Just(types)))
        .prop_map(|(a, b, types)| (types, a, b))
}

fn cmp_tuples(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.cmp_total(y))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

fn arb_schema_and_row() -> impl Strategy<Value = (Schema, Vec<Value>)> {
    super::super::schema::tests::arb_schema().prop_flat_map(|s| {
        let row = arb_tuple(&s.fields.iter().map(|f| f.key_type()).collect::<Vec<_>>());
        (Just(s), row)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn key_order_matches_cmp_total_single_field(
        (ty, a, b) in prop::sample::select(FieldType::ALL.to_vec())
            .prop_flat_map(|t| (Just(t), arb_value(t), arb_value(t)))
    ) {
        let t = (ty, false);
        prop_assert_eq!(key1(a.clone(), t).cmp(&key1(b.clone(), t)), a.cmp_total(&b), "{} vs {}", a, b);
    }

    #[test]
    fn key_order_matches_cmp_total_composite((types, a, b) in arb_key_pair(3)) {
        prop_assert_eq!(key(&a, &types).cmp(&key(&b, &types)), cmp_tuples(&a, &b));
    }

    #[test]
    fn key_roundtrip((types, a, _b) in arb_key_pair(3), junk in prop::collection::vec(any::<u8>(), 0..4)) {
        let mut k = key(&a, &types);
        let len = k.len();
        k.extend_from_slice(&junk);
        let (back, used) = decode_key(&k, &types).unwrap();
        prop_assert_eq!(used, len);
        prop_assert_eq!(back.len(), a.len());
        for (x, y) in back.iter().zip(&a) {
            prop_assert!(same(x, &canon(y)), "{} vs {}", x, y);
        }
        for n in 0..=types.len() {
            let (head, tail) = split_key(&k, &types[..n]).unwrap();
            let mut want = Vec::new();
            encode_key_prefix(&mut want, &a[..n], &types).unwrap();
            prop_assert_eq!(head, &want[..]);
            prop_assert_eq!(head.len() + tail.len(), k.len());
        }
    }

    #[test]
    fn key_prefix_range_is_exactly_equal_leading_fields(
        (types, a, b) in arb_key_pair(3),
        n in 0usize..=3,
    ) {
        let n = n.min(types.len());
        let mut prefix = Vec::new();
        encode_key_prefix(&mut prefix, &a[..n], &types).unwrap();
        let kb = key(&b, &types);
        let equal = cmp_tuples(&a[..n], &b[..n]) == Ordering::Equal;
        let in_range = kb >= prefix && prefix_successor(&prefix).is_none_or(|hi| kb < hi);
        prop_assert_eq!(kb.starts_with(&prefix), equal);
        prop_assert_eq!(in_range, equal);
    }

    #[test]
    fn prefix_successor_bounds_all_extensions(
        prefix in prop::collection::vec(prop_oneof![Just(0xffu8), any::<u8>()], 0..6),
        suffix in prop::collection::vec(prop_oneof![Just(0xffu8), any::<u8>()], 0..6),
        other in prop::collection::vec(prop_oneof![Just(0xffu8), any::<u8>()], 0..8),
    ) {
        let ext = [prefix.clone(), suffix].concat();
        match prefix_successor(&prefix) {
            None => prop_assert!(prefix.iter().all(|&b| b == 0xff)),
            Some(succ) => {
                prop_assert!(ext < succ);
                prop_assert!(!succ.starts_with(&prefix));
                // Smallest: anything below succ that is >= prefix starts with prefix.
                if other >= prefix && other < succ {
                    prop_assert!(other.starts_with(&prefix));
                }
            }
        }
    }

    #[test]
    fn decode_key_never_panics(
        types in prop::collection::vec(arb_key_type(), 0..4),
        bytes in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()], 0..40),
    ) {
        if let Ok((vals, used)) = decode_key(&bytes, &types) {
            // Whatever decodes re-encodes to exactly the bytes it used.
            prop_assert_eq!(key(&vals, &types), bytes[..used].to_vec());
        }
        let _ = split_key(&bytes, &types);
    }

    #[test]
    fn row_roundtrip((s, row) in arb_schema_and_row()) {
        let b = encode_row(&s, &row);
        let back = decode_row(&s, &b).unwrap();
        prop_assert_eq!(back.len(), row.len());
        for (x, y) in back.iter().zip(&row) {
            prop_assert!(same(x, y), "{} vs {}", x, y);
        }
        let positions: Vec<usize> = (0..row.len()).rev().step_by(2).collect();
        let picked = decode_fields(&s, &b, &positions).unwrap();
        for (p, v) in positions.iter().zip(&picked) {
            prop_assert!(same(v, &row[*p]));
        }
        // Keys of the same row agree with the key codec.
        let pk = encode_primary_key(&s, &row).unwrap();
        let (pk_vals, used) = decode_key(&pk, &s.pk_types().unwrap()).unwrap();
        prop_assert_eq!(used, pk.len());
        for (v, p) in pk_vals.iter().zip(s.pk_positions().unwrap()) {
            prop_assert!(same(v, &canon(&row[p])));
        }
        for ix in &s.indexes {
            let entry = encode_index_key(&s, ix, &row).unwrap();
            let (_, tail) = split_key(&entry, &s.index_key_types(ix).unwrap()).unwrap();
            prop_assert_eq!(tail, &pk[..]);
        }
    }

    #[test]
    fn decode_row_never_panics(
        (s, row) in arb_schema_and_row(),
        bytes in prop::collection::vec(any::<u8>(), 0..48),
        at: prop::sample::Index,
        byte: u8,
    ) {
        let _ = decode_row(&s, &bytes);
        let _ = decode_fields(&s, &bytes, &[0, s.fields.len() - 1]);
        let mut mutated = encode_row(&s, &row);
        let i = at.index(mutated.len());
        mutated[i] = byte;
        if let Ok(back) = decode_row(&s, &mutated) {
            prop_assert!(s.check_row(&back).is_ok());
        }
        mutated.truncate(i);
        prop_assert!(decode_row(&s, &mutated).is_err());
    }
}

#[test]
fn rows_of_a_table_with_a_delete_key_carry_it_in_order_at_a_fixed_place() {
    let s = Schema::parse("table t (id u64, ts i64, s str null) primary key (id) delete key (ts)").unwrap();
    let enc = |ts: i64| encode_row(&s, &[Value::U64(7), Value::I64(ts), Value::Null]);
    let rows: Vec<Vec<u8>> = [-5i64, -1, 0, 3, i64::MAX].into_iter().map(enc).collect();
    for r in &rows {
        assert_eq!(r[0], ROW_FORMAT_VERSION_DELETE_KEY);
        assert_eq!(decode_row(&s, r).unwrap()[1], Value::I64(decode_i64(r)));
    }
    let dks: Vec<&[u8]> = rows.iter().filter_map(|r| ROW_DELETE_KEY.of(r)).collect();
    assert!(dks.windows(2).all(|w| w[0] < w[1]), "delete keys sort like the values");
    // Every version 2 row lies in the unbounded range; a version 1 row in none.
    let (lo, hi) = delete_key_range([0; 8], None);
    assert!(dks.iter().all(|k| lo.as_slice() <= *k && *k < hi.as_slice()));
    let mut plain = s.clone();
    plain.delete_key = None;
    let v1 = encode_row(&plain, &[Value::U64(7), Value::I64(1), Value::from("0123456789")]);
    assert_eq!(v1[0], ROW_FORMAT_VERSION);
    assert!(
        ROW_DELETE_KEY
            .of(&v1)
            .is_some_and(|k| !(lo.as_slice() <= k && k < hi.as_slice()))
    );
    assert_eq!(
        decode_row(&s, &v1).unwrap()[1],
        Value::I64(1),
        "version 1 rows still decode"
    );
    // A copy that disagrees with the field is damage.
    let mut bad = rows[0].clone();
    bad[8] ^= 1;
    assert!(mismatch(decode_row(&s, &bad)).contains("delete key copy"));
}

fn decode_i64(row: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&row[1..9]);
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}
