//! The order-preserving key codec ([`encode_key`]).
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

use super::Fail;
use crate::error::{Error, Result};
use crate::table::schema::{FieldType, IndexDef, KeyType, Schema};
use crate::table::value::{CANONICAL_NAN_BITS, Value, f64_from_order_bits, f64_order_bits};

/// Null marker of a nullable key field (sorts before [`KEY_PRESENT`]).
pub const KEY_NULL: u8 = 0x00;

/// Marker of a present value in a nullable key field.
pub const KEY_PRESENT: u8 = 0x01;

const SIGN_BIT: u64 = 1 << 63;

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
