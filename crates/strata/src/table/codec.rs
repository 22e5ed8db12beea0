//! Binary codecs of the table layer: the compact row codec and the order-preserving
//! ("memcomparable") key codec, plus the prefix helper that turns an equality on leading
//! key fields into a key range.
//!
//! # Row encoding ([`encode_row`])
//!
//! ```text
//! u8 version (= ROW_FORMAT_VERSION = 1)
//! null bitmap: ceil(n_nullable / 8) bytes; bit k (byte k / 8, bit k % 8, LSB first) is
//!              set when the k-th *nullable* field (in field order) is null; unused bits 0;
//!              no bytes at all when the table has no nullable fields
//! then, for every field in order that is not null:
//!   u64   LEB128 varint
//!   i64   zigzag, then LEB128 varint
//!   f64   8 bytes little-endian IEEE bits (exact bits kept, NaN payloads included)
//!   str   varint length + UTF-8 bytes
//!   bytes varint length + bytes
//!   bool  1 byte, 0 or 1
//! ```
//!
//! The decoder checks the version, unused bitmap bits, bool bytes, UTF-8, lengths and that
//! nothing trails the row; it never panics.
//!
//! # Key encoding ([`encode_key`])
//!
//! A key is the concatenation of its fields' encodings. Every field encoding is
//! order-preserving and prefix-free (self-delimiting), so comparing two keys of the same
//! key types byte-wise (`memcmp`, shorter-is-smaller) gives the same answer as comparing
//! the value tuples field by field with [`Value::cmp_total`]:
//!
//! ```text
//! nullable field  0x00 for null (nothing follows), else 0x01 then the value
//! u64   8 bytes big-endian
//! i64   8 bytes big-endian of (v as u64) ^ 0x8000_0000_0000_0000 (sign bit flipped)
//! f64   8 bytes big-endian of the bits after: every NaN replaced by the canonical
//!       quiet NaN 0x7ff8_0000_0000_0000; then flip all bits if the sign bit is set,
//!       else flip only the sign bit (-0.0 < +0.0, NaN after +inf)
//! bool  1 byte, 0x00 false / 0x01 true
//! str, bytes   each 0x00 byte written as 0x00 0xFF, other bytes as-is,
//!              then the terminator 0x00 0x01
//! ```
//!
//! Why strings keep order: up to the first difference the escaped forms agree; a raw
//! `0x00` (escaped `0x00 0xFF`) against a non-zero byte `c` compares `0x00 < c`; when one
//! string is a proper prefix of the other, its terminator `0x00 0x01` meets either a
//! non-zero byte (`0x00` is smaller) or an escaped zero `0x00 0xFF` (`0x01 < 0xFF`). After
//! a `0x00` only `0xFF` or `0x01` is valid, so the terminator is unambiguous.
//!
//! Consequences the table layer relies on:
//! - All keys whose first `k` fields equal some values are exactly the keys starting with
//!   the encoding of those `k` values ([`encode_key_prefix`]); with [`prefix_successor`]
//!   that is the range `[prefix, successor)`.
//! - A secondary-index entry key is `index fields ++ primary key fields`
//!   ([`encode_index_key`]); [`split_key`] with the index's key types returns as its tail
//!   bytes identical to [`encode_primary_key`] of the row.
//! - Keys do not keep NaN payloads or signs: every NaN decodes as the canonical NaN
//!   (rows keep exact bits).
//!
//! Errors: the checked encoders report values that do not fit the schema or key types as
//! [`Error::SchemaMismatch`]. Bytes that do not decode are also reported as
//! [`Error::SchemaMismatch`] (`stored row/key ... does not decode: REASON (at byte N)`,
//! N relative to the given slice), since the decoders do not know the file the bytes
//! came from.

use super::schema::{FieldType, IndexDef, KeyType, Schema};
use super::value::{CANONICAL_NAN_BITS, Value, f64_from_order_bits, f64_order_bits};
use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};

/// Version byte that starts every encoded row.
pub const ROW_FORMAT_VERSION: u8 = 1;

/// Null marker of a nullable key field (sorts before [`KEY_PRESENT`]).
pub const KEY_NULL: u8 = 0x00;

/// Marker of a present value in a nullable key field.
pub const KEY_PRESENT: u8 = 0x01;

const SIGN_BIT: u64 = 1 << 63;

/// Where and why decoding failed (converted to an [`Error`] at the public boundary).
#[derive(Debug)]
struct Fail {
    offset: usize,
    reason: String,
}

impl Fail {
    fn new(offset: usize, reason: impl Into<String>) -> Self {
        Fail {
            offset,
            reason: reason.into(),
        }
    }

    fn into_error(self, what: &str) -> Error {
        Error::SchemaMismatch(format!(
            "{what} does not decode: {} (at byte {})",
            self.reason, self.offset
        ))
    }
}

impl From<DecodeError> for Fail {
    fn from(e: DecodeError) -> Self {
        Fail::new(e.offset, e.reason)
    }
}

// ---------------------------------------------------------------------------------------
// Row codec.

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn nullable_count(schema: &Schema) -> usize {
    schema.fields.iter().filter(|f| f.nullable).count()
}

/// Encodes a row (values in field order) in the compact row format (see the module docs).
///
/// The row must pass [`Schema::check_row`] (check it first to get a useful error). A row
/// that does not is encoded as an empty vector, which [`decode_row`] rejects, so a
/// mismatching row can never be stored and later read back as different values.
pub fn encode_row(schema: &Schema, row: &[Value]) -> Vec<u8> {
    if schema.check_row(row).is_err() {
        return Vec::new();
    }
    let bitmap_len = nullable_count(schema).div_ceil(8);
    let mut out = Vec::with_capacity(1 + bitmap_len + 9 * row.len());
    out.push(ROW_FORMAT_VERSION);
    out.resize(1 + bitmap_len, 0);
    let mut k = 0usize;
    for (f, v) in schema.fields.iter().zip(row) {
        if f.nullable {
            if v.is_null()
                && let Some(b) = out.get_mut(1 + k / 8)
            {
                *b |= 1 << (k % 8);
            }
            k += 1;
        }
        match v {
            Value::Null => {}
            Value::U64(x) => put_varint(&mut out, *x),
            Value::I64(x) => put_varint(&mut out, zigzag(*x)),
            Value::F64(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
            Value::Str(s) => put_bytes(&mut out, s.as_bytes()),
            Value::Bytes(b) => put_bytes(&mut out, b),
            Value::Bool(b) => out.push(u8::from(*b)),
        }
    }
    out
}

/// Decodes a row encoded by [`encode_row`] with the same schema.
///
/// Errors: [`Error::SchemaMismatch`] for a wrong version (including the empty encoding of
/// a mismatching row), truncated or trailing bytes, set unused bitmap bits, a bool byte
/// other than 0/1, or invalid UTF-8. Never panics.
pub fn decode_row(schema: &Schema, bytes: &[u8]) -> Result<Vec<Value>> {
    let n = schema.fields.len();
    let vals = walk_row(schema, bytes, &vec![true; n], true).map_err(|e| e.into_error(&row_what(schema)))?;
    Ok(vals.into_iter().map(|v| v.unwrap_or(Value::Null)).collect())
}

/// Decodes only the fields at `positions` (in that order; repeats allowed) of a row
/// encoded by [`encode_row`]. Fields after the last wanted one are not read, and skipped
/// fields are only framed (a skipped string's UTF-8 is not checked).
///
/// Errors: as [`decode_row`] for the part that is read; [`Error::InvalidArgument`] for a
/// position that is not a field of the schema. Never panics.
pub fn decode_fields(schema: &Schema, bytes: &[u8], positions: &[usize]) -> Result<Vec<Value>> {
    let n = schema.fields.len();
    let mut want = vec![false; n];
    for &p in positions {
        match want.get_mut(p) {
            Some(w) => *w = true,
            None => {
                return Err(Error::InvalidArgument(format!(
                    "field position {p} out of range for table '{}' with {n} fields",
                    schema.name
                )));
            }
        }
    }
    let upto = positions.iter().map(|&p| p + 1).max().unwrap_or(0);
    want.truncate(upto);
    let vals = walk_row(schema, bytes, &want, false).map_err(|e| e.into_error(&row_what(schema)))?;
    Ok(positions
        .iter()
        .map(|&p| vals.get(p).cloned().flatten().unwrap_or(Value::Null))
        .collect())
}

fn row_what(schema: &Schema) -> String {
    format!("stored row of table '{}'", schema.name)
}

/// Walks the first `want.len()` fields of a row, materialising those with `want[i]`.
/// With `strict`, nothing may trail the row.
fn walk_row(
    schema: &Schema,
    bytes: &[u8],
    want: &[bool],
    strict: bool,
) -> std::result::Result<Vec<Option<Value>>, Fail> {
    let mut d = Decoder::new(bytes);
    let version = d.u8()?;
    if version != ROW_FORMAT_VERSION {
        return Err(Fail::new(0, format!("unknown row format version {version}")));
    }
    let n_nullable = nullable_count(schema);
    let bitmap_at = d.position();
    let bitmap = d.bytes(n_nullable.div_ceil(8))?;
    if !n_nullable.is_multiple_of(8)
        && let Some(&last) = bitmap.last()
        && last >> (n_nullable % 8) != 0
    {
        return Err(Fail::new(
            bitmap_at + bitmap.len() - 1,
            "unused null bitmap bits are set",
        ));
    }
    let mut out = Vec::with_capacity(want.len());
    let mut k = 0usize;
    for (f, &keep) in schema.fields.iter().zip(want) {
        let is_null = if f.nullable {
            let bit = bitmap.get(k / 8).is_some_and(|b| (b >> (k % 8)) & 1 == 1);
            k += 1;
            bit
        } else {
            false
        };
        if is_null {
            out.push(keep.then_some(Value::Null));
            continue;
        }
        let at = d.position();
        let v = match f.ty {
            FieldType::U64 => {
                let x = d.varint()?;
                keep.then_some(Value::U64(x))
            }
            FieldType::I64 => {
                let x = d.varint()?;
                keep.then_some(Value::I64(unzigzag(x)))
            }
            FieldType::F64 => {
                let x = d.u64()?;
                keep.then_some(Value::F64(f64::from_bits(x)))
            }
            FieldType::Str => {
                let raw = d.length_prefixed()?;
                if keep {
                    let s = std::str::from_utf8(raw)
                        .map_err(|_| Fail::new(at, format!("field '{}' is not valid UTF-8", f.name)))?;
                    Some(Value::Str(s.to_owned()))
                } else {
                    None
                }
            }
            FieldType::Bytes => {
                let raw = d.length_prefixed()?;
                keep.then(|| Value::Bytes(raw.to_vec()))
            }
            FieldType::Bool => match d.u8()? {
                0 => keep.then_some(Value::Bool(false)),
                1 => keep.then_some(Value::Bool(true)),
                b => {
                    return Err(Fail::new(
                        at,
                        format!("field '{}' has bool byte {b}, expected 0 or 1", f.name),
                    ));
                }
            },
        };
        out.push(v);
    }
    if strict && !d.is_empty() {
        return Err(Fail::new(d.position(), "trailing bytes after row"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Key codec.

fn escape_into(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() + 2);
    for &c in b {
        if c == 0 {
            out.extend_from_slice(&[0x00, 0xff]);
        } else {
            out.push(c);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Appends one key field; the value is encoded by its own variant.
fn put_key_field(out: &mut Vec<u8>, v: &Value, nullable: bool) {
    if nullable {
        out.push(if v.is_null() { KEY_NULL } else { KEY_PRESENT });
    }
    match v {
        Value::Null => {}
        Value::U64(x) => out.extend_from_slice(&x.to_be_bytes()),
        Value::I64(x) => out.extend_from_slice(&((*x as u64) ^ SIGN_BIT).to_be_bytes()),
        Value::F64(x) => out.extend_from_slice(&f64_order_bits(*x).to_be_bytes()),
        Value::Str(s) => escape_into(out, s.as_bytes()),
        Value::Bytes(b) => escape_into(out, b),
        Value::Bool(b) => out.push(u8::from(*b)),
    }
}

fn check_key_field(i: usize, v: &Value, (ty, nullable): KeyType) -> Result<()> {
    if v.is_null() {
        if nullable {
            return Ok(());
        }
        return Err(Error::SchemaMismatch(format!(
            "key field {i} is not nullable: expected {ty}, got null"
        )));
    }
    if !ty.matches(v) {
        return Err(Error::SchemaMismatch(format!(
            "key field {i} expects {ty}, got {}",
            v.type_name()
        )));
    }
    Ok(())
}

/// Appends the order-preserving encoding of `values`, one per entry of `types` (each a
/// `(type, nullable)` pair), to `out`. See the module docs for the byte layout.
///
/// The values must fit the types (same count, matching types, `Null` only where
/// nullable); [`try_encode_key`] checks that. Unchecked misfits never panic, but the
/// bytes written for them are unspecified and will not decode as those types.
pub fn encode_key(out: &mut Vec<u8>, values: &[Value], types: &[KeyType]) {
    for (v, &(_, nullable)) in values.iter().zip(types) {
        put_key_field(out, v, nullable);
    }
}

/// [`encode_key`] after checking that the values fit the types.
///
/// Errors: [`Error::SchemaMismatch`] when the counts differ, a value has the wrong type,
/// or a non-nullable field is null; `out` is then left unchanged.
pub fn try_encode_key(out: &mut Vec<u8>, values: &[Value], types: &[KeyType]) -> Result<()> {
    if values.len() != types.len() {
        return Err(Error::SchemaMismatch(format!(
            "key has {} values but {} key fields",
            values.len(),
            types.len()
        )));
    }
    encode_key_prefix(out, values, types)
}

/// Like [`try_encode_key`], but `values` may cover only the leading `values.len()` of
/// `types`: the result is the common prefix of every key whose leading fields equal
/// `values` (use with [`prefix_successor`] for an equality range scan).
///
/// Errors: as [`try_encode_key`], and when there are more values than types; `out` is
/// then left unchanged.
pub fn encode_key_prefix(out: &mut Vec<u8>, values: &[Value], types: &[KeyType]) -> Result<()> {
    if values.len() > types.len() {
        return Err(Error::SchemaMismatch(format!(
            "key prefix has {} values but only {} key fields",
            values.len(),
            types.len()
        )));
    }
    for (i, (v, &kt)) in values.iter().zip(types).enumerate() {
        check_key_field(i, v, kt)?;
    }
    encode_key(out, values, types);
    Ok(())
}

/// Appends the key made of the values at `positions` of a full row, checking them.
fn encode_row_fields(out: &mut Vec<u8>, schema: &Schema, row: &[Value], positions: &[usize]) -> Result<()> {
    let mut vals = Vec::with_capacity(positions.len());
    let mut types = Vec::with_capacity(positions.len());
    for &p in positions {
        let (Some(v), Some(f)) = (row.get(p), schema.fields.get(p)) else {
            return Err(Error::SchemaMismatch(format!(
                "row has {} values, table '{}' has {} fields",
                row.len(),
                schema.name,
                schema.fields.len()
            )));
        };
        vals.push(v.clone());
        types.push(f.key_type());
    }
    try_encode_key(out, &vals, &types)
}

/// The primary key of a full row (values in field order): its primary key fields encoded
/// with [`encode_key`] in key order.
///
/// Errors: [`Error::SchemaMismatch`] when the row is too short or a key value does not
/// fit.
pub fn encode_primary_key(schema: &Schema, row: &[Value]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_row_fields(&mut out, schema, row, &schema.pk_positions()?)?;
    Ok(out)
}

/// The entry key of `index` (an index of `schema`) for a full row: the index fields then
/// the primary key fields, i.e. `encode_key(index values) ++ encode_primary_key(row)`,
/// with key types [`Schema::index_entry_types`]. Entries of a unique index carry the
/// primary key suffix too; uniqueness is a matter of the index-field prefix.
///
/// Errors: [`Error::SchemaMismatch`] when the row is too short or a value does not fit.
pub fn encode_index_key(schema: &Schema, index: &IndexDef, row: &[Value]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_row_fields(&mut out, schema, row, &schema.index_positions(index)?)?;
    encode_row_fields(&mut out, schema, row, &schema.pk_positions()?)?;
    Ok(out)
}

/// Cursor over an encoded key.
struct KeyReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> KeyReader<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], Fail> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|e| self.buf.get(self.pos..e))
            .ok_or_else(|| Fail::new(self.pos, format!("truncated key: {what} needs {n} bytes")))?;
        self.pos += n;
        Ok(s)
    }

    fn fixed8(&mut self, what: &str) -> std::result::Result<u64, Fail> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }

    /// Reads an escaped string; returns the unescaped bytes when `keep`.
    fn escaped(&mut self, keep: bool) -> std::result::Result<Vec<u8>, Fail> {
        let mut out = Vec::new();
        loop {
            let rest = self.buf.get(self.pos..).unwrap_or_default();
            let Some(z) = rest.iter().position(|&b| b == 0) else {
                return Err(Fail::new(self.buf.len(), "unterminated string in key"));
            };
            if keep {
                out.extend_from_slice(rest.get(..z).unwrap_or_default());
            }
            let esc_at = self.pos + z + 1;
            match rest.get(z + 1) {
                Some(0xff) => {
                    if keep {
                        out.push(0);
                    }
                    self.pos = esc_at + 1;
                }
                Some(0x01) => {
                    self.pos = esc_at + 1;
                    return Ok(out);
                }
                Some(b) => return Err(Fail::new(esc_at, format!("bad escape byte {b:#04x} after 0x00"))),
                None => return Err(Fail::new(esc_at, "truncated escape")),
            }
        }
    }

    fn field(&mut self, i: usize, (ty, nullable): KeyType, keep: bool) -> std::result::Result<Option<Value>, Fail> {
        if nullable {
            let at = self.pos;
            match self.take(1, "null marker")?.first() {
                Some(&KEY_NULL) => return Ok(keep.then_some(Value::Null)),
                Some(&KEY_PRESENT) => {}
                b => return Err(Fail::new(at, format!("bad null marker {b:?} of key field {i}"))),
            }
        }
        let at = self.pos;
        let v = match ty {
            FieldType::U64 => Value::U64(self.fixed8("u64")?),
            FieldType::I64 => Value::I64((self.fixed8("i64")? ^ SIGN_BIT) as i64),
            FieldType::F64 => {
                let f = f64_from_order_bits(self.fixed8("f64")?);
                if f.is_nan() && f.to_bits() != CANONICAL_NAN_BITS {
                    return Err(Fail::new(at, format!("non-canonical NaN in key field {i}")));
                }
                Value::F64(f)
            }
            FieldType::Bool => match self.take(1, "bool")?.first() {
                Some(0) => Value::Bool(false),
                Some(1) => Value::Bool(true),
                b => return Err(Fail::new(at, format!("bad bool byte {b:?} of key field {i}"))),
            },
            FieldType::Str => {
                let raw = self.escaped(keep)?;
                if !keep {
                    return Ok(None);
                }
                match String::from_utf8(raw) {
                    Ok(s) => Value::Str(s),
                    Err(_) => return Err(Fail::new(at, format!("key field {i} is not valid UTF-8"))),
                }
            }
            FieldType::Bytes => Value::Bytes(self.escaped(keep)?),
        };
        Ok(keep.then_some(v))
    }
}

const KEY_WHAT: &str = "stored key";

/// Decodes `types.len()` key fields from the start of `bytes`, returning the values and
/// the number of bytes they used (bytes after that are not looked at).
///
/// Errors: [`Error::SchemaMismatch`] for truncated fields, bad markers, escapes or bool
/// bytes, invalid UTF-8, or a NaN other than the canonical one. Never panics.
pub fn decode_key(bytes: &[u8], types: &[KeyType]) -> Result<(Vec<Value>, usize)> {
    let mut r = KeyReader { buf: bytes, pos: 0 };
    let mut out = Vec::with_capacity(types.len());
    for (i, &kt) in types.iter().enumerate() {
        let v = r.field(i, kt, true).map_err(|e| e.into_error(KEY_WHAT))?;
        out.push(v.unwrap_or(Value::Null));
    }
    Ok((out, r.pos))
}

/// Splits `bytes` after its first `head_types.len()` key fields, without materialising
/// them: for an index entry key and the index's key types
/// ([`Schema::index_key_types`]), the tail is the encoded primary key.
///
/// Errors: [`Error::SchemaMismatch`] when the head fields do not decode (string contents
/// are not UTF-8-checked here). Never panics.
pub fn split_key<'a>(bytes: &'a [u8], head_types: &[KeyType]) -> Result<(&'a [u8], &'a [u8])> {
    let mut r = KeyReader { buf: bytes, pos: 0 };
    for (i, &kt) in head_types.iter().enumerate() {
        r.field(i, kt, false).map_err(|e| e.into_error(KEY_WHAT))?;
    }
    bytes
        .split_at_checked(r.pos)
        .ok_or_else(|| Fail::new(r.pos, "split beyond the end").into_error(KEY_WHAT))
}

/// The smallest byte string greater than every string that starts with `prefix`, or
/// `None` when there is none (`prefix` is empty or all `0xFF`): trailing `0xFF` bytes are
/// dropped and the last remaining byte is incremented.
///
/// `[prefix, prefix_successor(prefix))` (unbounded above for `None`) is exactly the set
/// of keys starting with `prefix`.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut out = prefix.get(..=keep)?.to_vec();
    if let Some(last) = out.last_mut() {
        *last += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::schema::{IndexMaintenance, KeyType};
    use super::*;
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

    fn users() -> Schema {
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
            FieldType::Bytes => {
                prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()], 0..6)
                    .prop_map(Value::Bytes)
                    .boxed()
            }
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
}
