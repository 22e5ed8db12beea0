//! The compact row codec ([`encode_row`]).
//!
//! ```text
//! u8 version (= ROW_FORMAT_VERSION = 1, or ROW_FORMAT_VERSION_DELETE_KEY = 2 when the
//!              schema has a delete key)
//! version 2 only: the delete key's 8 order-preserving bytes (u64 big-endian; i64 with
//!              its sign bit flipped, big-endian), a copy of the field the body holds too
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
//! Version 2 puts the delete key at a fixed place, where the key-value engine's delete
//! key ([`ROW_DELETE_KEY`]) finds it: bytes 0..9, the version byte included, so a row
//! written as version 1 (before the table had a delete key) never lies in a range of
//! [`delete_key_range`] (invariant 10 of `table::deferred`).
//!
//! The decoder checks the version, unused bitmap bits, bool bytes, UTF-8, lengths and that
//! nothing trails the row; it never panics.

use super::Fail;
use crate::codec::{Decoder, put_bytes, put_varint};
use crate::delete_key::DeleteKey;
use crate::error::{Error, Result};
use crate::table::schema::{FieldType, Schema};
use crate::table::value::Value;

/// Version byte that starts every encoded row of a table without a delete key.
pub const ROW_FORMAT_VERSION: u8 = 1;

/// Version byte of rows of a table with a delete key.
pub const ROW_FORMAT_VERSION_DELETE_KEY: u8 = 2;

/// Where the engine finds a row's delete key: the version byte and the key's 8 bytes.
pub const ROW_DELETE_KEY: DeleteKey = DeleteKey { offset: 0, width: 9 };

/// The order-preserving 8 bytes of a delete key value (`u64` or `i64`; `None` for other
/// values).
pub fn delete_key_bytes(v: &Value) -> Option<[u8; 8]> {
    match v {
        Value::U64(x) => Some(x.to_be_bytes()),
        Value::I64(x) => Some(((*x as u64) ^ (1 << 63)).to_be_bytes()),
        _ => None,
    }
}

/// The engine's `[lo, hi)` ([`ROW_DELETE_KEY`] bytes) of the delete key values `lo..hi`
/// given as encoded 8 bytes, `hi` `None` for no upper end: only version 2 rows fall in it.
pub fn delete_key_range(lo: [u8; 8], hi: Option<[u8; 8]>) -> (Vec<u8>, Vec<u8>) {
    let with = |v: u8, k: [u8; 8]| [&[v][..], &k[..]].concat();
    (
        with(ROW_FORMAT_VERSION_DELETE_KEY, lo),
        match hi {
            Some(hi) => with(ROW_FORMAT_VERSION_DELETE_KEY, hi),
            None => with(ROW_FORMAT_VERSION_DELETE_KEY + 1, [0; 8]),
        },
    )
}

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
    let dk = schema
        .delete_key
        .as_deref()
        .and_then(|n| schema.field_position(n))
        .and_then(|p| row.get(p))
        .and_then(delete_key_bytes);
    let mut out = Vec::with_capacity(9 + bitmap_len + 9 * row.len());
    match dk {
        Some(dk) => {
            out.push(ROW_FORMAT_VERSION_DELETE_KEY);
            out.extend_from_slice(&dk);
        }
        None => out.push(ROW_FORMAT_VERSION),
    }
    let body = out.len();
    out.resize(body + bitmap_len, 0);
    let mut k = 0usize;
    for (f, v) in schema.fields.iter().zip(row) {
        if f.nullable {
            if v.is_null()
                && let Some(b) = out.get_mut(body + k / 8)
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
    let dk = match version {
        ROW_FORMAT_VERSION => None,
        ROW_FORMAT_VERSION_DELETE_KEY => Some(d.bytes(8)?),
        _ => return Err(Fail::new(0, format!("unknown row format version {version}"))),
    };
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
    if strict && let Some(dk) = dk {
        // The copy must agree with the field (a row of another schema, or damage).
        let field = schema.delete_key.as_deref().and_then(|n| schema.field_position(n));
        let value = field
            .and_then(|p| out.get(p))
            .and_then(|v| v.as_ref())
            .and_then(delete_key_bytes);
        if value.as_ref().map(|v| &v[..]) != Some(dk) {
            return Err(Fail::new(1, "the delete key copy does not match its field"));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Key codec.
