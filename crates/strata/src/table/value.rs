//! Typed cell values of table rows and their total order.
//!
//! This module owns [`Value`], the one dynamically typed cell used by every row, key and
//! index of the table layer, and the order [`Value::cmp_total`] that the key codec in
//! `table::encoding` reproduces byte for byte.
//!
//! Invariants:
//! - [`Value::cmp_total`] is a total order (reflexive, antisymmetric, transitive) over all
//!   values, including floats.
//! - For two values of the same column type, `cmp_total(a, b)` equals the byte order of
//!   their encoded keys. `Null` sorts before every non-null value.
//! - Floats follow the IEEE 754 total order on their bits (`-inf < ... < -0.0 < +0.0 <
//!   ... < +inf`), except that **every NaN, whatever its sign and payload, is one value
//!   that sorts after `+inf`**. The key codec stores all NaNs as the canonical quiet NaN
//!   ([`CANONICAL_NAN_BITS`]) so that this holds on disk too; the row codec keeps exact
//!   bits.

use std::cmp::Ordering;
use std::fmt;

/// Bit pattern every NaN is normalised to in keys and in [`Value::cmp_total`]
/// (positive quiet NaN, the same as `f64::NAN`).
pub const CANONICAL_NAN_BITS: u64 = 0x7ff8_0000_0000_0000;

/// Maps a float to a `u64` whose unsigned order is the float order used by
/// [`Value::cmp_total`]: all NaNs become [`CANONICAL_NAN_BITS`], then negative numbers
/// get every bit flipped and non-negative numbers get the sign bit flipped.
#[inline]
pub(crate) fn f64_order_bits(f: f64) -> u64 {
    let bits = if f.is_nan() { CANONICAL_NAN_BITS } else { f.to_bits() };
    if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) }
}

/// Inverse of [`f64_order_bits`] (for canonical inputs).
#[inline]
pub(crate) fn f64_from_order_bits(u: u64) -> f64 {
    let bits = if u >> 63 == 1 { u ^ (1 << 63) } else { !u };
    f64::from_bits(bits)
}

/// One cell of a row.
///
/// `PartialEq` is the derived, structural one: `F64` compares with `==`, so
/// `F64(NaN) != F64(NaN)` and `F64(-0.0) == F64(0.0)`. Use [`Value::cmp_total`] for the
/// order (and equality) that keys and indexes use.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// No value (only allowed in nullable fields).
    Null,
    /// An unsigned 64-bit integer.
    U64(u64),
    /// A signed 64-bit integer.
    I64(i64),
    /// A 64-bit float (any bit pattern, including NaNs and signed zeros).
    F64(f64),
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A boolean (`false < true`).
    Bool(bool),
}

impl Value {
    /// Short lowercase name of the value's type: `null`, `u64`, `i64`, `f64`, `str`,
    /// `bytes` or `bool` (the same spelling as the schema text format).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F64(_) => "f64",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Bool(_) => "bool",
        }
    }

    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer of a `U64` value.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            _ => None,
        }
    }

    /// The integer of an `I64` value.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }

    /// The float of an `F64` value.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(v) => Some(*v),
            _ => None,
        }
    }

    /// The string of a `Str` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(v) => Some(v),
            _ => None,
        }
    }

    /// The bytes of a `Bytes` value.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(v) => Some(v),
            _ => None,
        }
    }

    /// The boolean of a `Bool` value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    /// Rank of the variant, used only to order values of different types.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::U64(_) => 1,
            Value::I64(_) => 2,
            Value::F64(_) => 3,
            Value::Str(_) => 4,
            Value::Bytes(_) => 5,
            Value::Bool(_) => 6,
        }
    }

    /// The total order that encoded keys follow.
    ///
    /// - `Null` sorts before everything else.
    /// - Integers, strings (by UTF-8 bytes, i.e. by code point), bytes and booleans
    ///   (`false < true`) use their natural order.
    /// - Floats use the IEEE 754 total order, so `-0.0 < +0.0`, but all NaNs are equal to
    ///   each other and sort after `+inf` (see the module docs).
    /// - Values of different non-null types (which never meet in one key column) are
    ///   ordered by variant: `U64 < I64 < F64 < Str < Bytes < Bool`; this keeps the order
    ///   total but has no meaning for keys.
    pub fn cmp_total(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::U64(a), Value::U64(b)) => a.cmp(b),
            (Value::I64(a), Value::I64(b)) => a.cmp(b),
            (Value::F64(a), Value::F64(b)) => f64_order_bits(*a).cmp(&f64_order_bits(*b)),
            (Value::Str(a), Value::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// A readable, unambiguous literal form: `null`, `42`, `-7`, `1.5` / `-0.0` / `NaN` /
/// `inf` (floats always show a decimal point or exponent), strings double-quoted with
/// Rust escapes (`"a\"b"`), bytes as `0x` followed by lowercase hex, `true` / `false`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v:?}"),
            Value::Str(v) => write!(f, "{v:?}"),
            Value::Bytes(v) => {
                f.write_str("0x")?;
                for b in v {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            Value::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// `None` becomes [`Value::Null`], `Some(v)` becomes `v.into()`.
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        match v {
            Some(v) => v.into(),
            None => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_sorts_first() {
        for v in [
            Value::U64(0),
            Value::I64(i64::MIN),
            Value::F64(f64::NEG_INFINITY),
            Value::Str(String::new()),
            Value::Bytes(Vec::new()),
            Value::Bool(false),
        ] {
            assert_eq!(Value::Null.cmp_total(&v), Ordering::Less, "{v}");
            assert_eq!(v.cmp_total(&Value::Null), Ordering::Greater, "{v}");
        }
        assert_eq!(Value::Null.cmp_total(&Value::Null), Ordering::Equal);
    }

    #[test]
    fn f64_order_signed_zero_and_nan_last() {
        let ordered = [
            f64::NEG_INFINITY,
            f64::MIN,
            -1.0,
            -f64::MIN_POSITIVE,
            -5e-324,
            -0.0,
            0.0,
            5e-324,
            f64::MIN_POSITIVE,
            1.0,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in ordered.windows(2) {
            assert_eq!(
                Value::F64(w[0]).cmp_total(&Value::F64(w[1])),
                Ordering::Less,
                "{} < {}",
                w[0],
                w[1]
            );
        }
        // Every NaN is the same value and sorts last, whatever its sign or payload.
        let neg_nan = f64::from_bits(0xfff8_0000_0000_0000);
        let payload_nan = f64::from_bits(0x7ff0_0000_0000_0001);
        assert!(neg_nan.is_nan() && payload_nan.is_nan());
        for n in [neg_nan, payload_nan, -f64::NAN] {
            assert_eq!(Value::F64(n).cmp_total(&Value::F64(f64::NAN)), Ordering::Equal);
            assert_eq!(Value::F64(n).cmp_total(&Value::F64(f64::INFINITY)), Ordering::Greater);
        }
    }

    #[test]
    fn order_bits_roundtrip_non_nan() {
        for f in [
            0.0,
            -0.0,
            1.5,
            -1.5,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            5e-324,
        ] {
            assert_eq!(f64_from_order_bits(f64_order_bits(f)).to_bits(), f.to_bits());
        }
        assert_eq!(
            f64_from_order_bits(f64_order_bits(-f64::NAN)).to_bits(),
            CANONICAL_NAN_BITS
        );
    }

    #[test]
    fn natural_orders() {
        assert_eq!(Value::I64(-2).cmp_total(&Value::I64(1)), Ordering::Less);
        assert_eq!(Value::U64(u64::MAX).cmp_total(&Value::U64(1)), Ordering::Greater);
        assert_eq!(Value::from("a").cmp_total(&Value::from("a\0")), Ordering::Less);
        assert_eq!(Value::from("é").cmp_total(&Value::from("z")), Ordering::Greater);
        assert_eq!(
            Value::from(vec![0u8]).cmp_total(&Value::from(vec![])),
            Ordering::Greater
        );
        assert_eq!(Value::Bool(false).cmp_total(&Value::Bool(true)), Ordering::Less);
    }

    #[test]
    fn cross_type_order_is_total_and_stable() {
        let vals = [
            Value::Null,
            Value::U64(9),
            Value::I64(-9),
            Value::F64(0.0),
            Value::from("x"),
            Value::from(vec![1u8]),
            Value::Bool(false),
        ];
        for (i, a) in vals.iter().enumerate() {
            for (j, b) in vals.iter().enumerate() {
                assert_eq!(a.cmp_total(b), i.cmp(&j), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn display_forms() {
        assert_eq!(Value::Null.to_string(), "null");
        assert_eq!(Value::U64(42).to_string(), "42");
        assert_eq!(Value::I64(-7).to_string(), "-7");
        assert_eq!(Value::F64(1.0).to_string(), "1.0");
        assert_eq!(Value::F64(-0.0).to_string(), "-0.0");
        assert_eq!(Value::F64(f64::NAN).to_string(), "NaN");
        assert_eq!(Value::from("a\"b").to_string(), "\"a\\\"b\"");
        assert_eq!(Value::from(vec![0u8, 0xab]).to_string(), "0x00ab");
        assert_eq!(Value::Bool(true).to_string(), "true");
    }

    #[test]
    fn conversions_and_type_names() {
        assert_eq!(Value::from(1u64), Value::U64(1));
        assert_eq!(Value::from(-1i64), Value::I64(-1));
        assert_eq!(Value::from(2.5f64), Value::F64(2.5));
        assert_eq!(Value::from("s"), Value::Str("s".into()));
        assert_eq!(Value::from(String::from("s")), Value::Str("s".into()));
        assert_eq!(Value::from(vec![1u8]), Value::Bytes(vec![1]));
        assert_eq!(Value::from(&[1u8][..]), Value::Bytes(vec![1]));
        assert_eq!(Value::from(true), Value::Bool(true));
        assert_eq!(Value::from(None::<u64>), Value::Null);
        assert_eq!(Value::from(Some(3u64)), Value::U64(3));
        let names: Vec<_> = [
            Value::Null,
            Value::U64(0),
            Value::I64(0),
            Value::F64(0.0),
            Value::from(""),
            Value::from(vec![]),
            Value::Bool(false),
        ]
        .iter()
        .map(Value::type_name)
        .collect();
        assert_eq!(names, ["null", "u64", "i64", "f64", "str", "bytes", "bool"]);
        assert_eq!(Value::U64(3).as_u64(), Some(3));
        assert_eq!(Value::U64(3).as_i64(), None);
        assert_eq!(Value::from("x").as_str(), Some("x"));
        assert!(Value::Null.is_null());
    }
}
