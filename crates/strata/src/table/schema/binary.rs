//! The binary form of a [`Schema`] that the catalog persists in the manifest.

use super::{
    Field, FieldType, IndexDef, IndexMaintenance, MAX_FIELDS, MAX_INDEXES, MAX_NAME_LEN, SCHEMA_FORMAT_VERSION,
    SCHEMA_FORMAT_VERSION_DELETE_KEY, Schema,
};
use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};

impl Schema {
    /// The stable binary encoding persisted by the catalog.
    ///
    /// Layout (varints are LEB128, `bytes` is a varint length then the bytes):
    ///
    /// ```text
    /// u8 version (= 1) | bytes table name | u8 maintenance (0 eager, 1 deferred)
    /// varint n_fields | n_fields × (bytes name | u8 type code | u8 nullable 0/1)
    /// varint n_pk     | n_pk × varint field position
    /// varint n_index  | n_index × (bytes name | u8 unique 0/1 | varint n | n × varint field position)
    /// version 2 only: varint delete key field position
    /// ```
    ///
    /// A schema without a delete key is written as version 1, so older readers read it.
    ///
    /// Type codes are [`FieldType::code`]. The schema should be valid; names that do not
    /// resolve to a field (only possible after unvalidated changes) are written as
    /// position `u64::MAX`, which [`Schema::from_bytes`] rejects.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 16 * self.fields.len());
        out.push(if self.delete_key.is_some() {
            SCHEMA_FORMAT_VERSION_DELETE_KEY
        } else {
            SCHEMA_FORMAT_VERSION
        });
        put_bytes(&mut out, self.name.as_bytes());
        out.push(match self.maintenance {
            IndexMaintenance::Eager => 0,
            IndexMaintenance::Deferred => 1,
        });
        put_varint(&mut out, self.fields.len() as u64);
        for f in &self.fields {
            put_bytes(&mut out, f.name.as_bytes());
            out.push(f.ty.code());
            out.push(u8::from(f.nullable));
        }
        let put_names = |out: &mut Vec<u8>, names: &[String]| {
            put_varint(out, names.len() as u64);
            for n in names {
                put_varint(out, self.field_position(n).map_or(u64::MAX, |p| p as u64));
            }
        };
        put_names(&mut out, &self.primary_key);
        put_varint(&mut out, self.indexes.len() as u64);
        for i in &self.indexes {
            put_bytes(&mut out, i.name.as_bytes());
            out.push(u8::from(i.unique));
            put_names(&mut out, &i.fields);
        }
        if let Some(dk) = &self.delete_key {
            put_varint(&mut out, self.field_position(dk).map_or(u64::MAX, |p| p as u64));
        }
        out
    }

    /// Decodes [`Schema::to_bytes`] output and validates it. Never panics.
    ///
    /// Errors: [`Error::SchemaMismatch`] saying what is wrong and at which byte offset
    /// within `bytes` (semantic problems such as duplicate names are reported at 0).
    pub fn from_bytes(bytes: &[u8]) -> Result<Schema> {
        Schema::decode(bytes).map_err(|(offset, reason)| {
            Error::SchemaMismatch(format!("stored schema does not decode: {reason} (at byte {offset})"))
        })
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Schema, (usize, String)> {
        let derr = |e: DecodeError| (e.offset, e.reason.to_owned());
        let mut d = Decoder::new(bytes);
        let version = d.u8().map_err(derr)?;
        if version != SCHEMA_FORMAT_VERSION && version != SCHEMA_FORMAT_VERSION_DELETE_KEY {
            return Err((0, format!("unknown schema format version {version}")));
        }
        let name = decode_name(&mut d)?;
        let at = d.position();
        let maintenance = match d.u8().map_err(derr)? {
            0 => IndexMaintenance::Eager,
            1 => IndexMaintenance::Deferred,
            m => return Err((at, format!("bad index maintenance mode {m}"))),
        };
        let n_fields = d.varint_len(MAX_FIELDS).map_err(derr)?;
        let mut fields = Vec::with_capacity(n_fields);
        for _ in 0..n_fields {
            let fname = decode_name(&mut d)?;
            let at = d.position();
            let code = d.u8().map_err(derr)?;
            let ty = FieldType::from_code(code).ok_or_else(|| (at, format!("unknown field type code {code}")))?;
            let nullable = decode_flag(&mut d, "nullable flag")?;
            fields.push(Field {
                name: fname,
                ty,
                nullable,
            });
        }
        let primary_key = decode_positions(&mut d, &fields)?;
        let n_indexes = d.varint_len(MAX_INDEXES).map_err(derr)?;
        let mut indexes = Vec::with_capacity(n_indexes);
        for _ in 0..n_indexes {
            let iname = decode_name(&mut d)?;
            let unique = decode_flag(&mut d, "unique flag")?;
            let ifields = decode_positions(&mut d, &fields)?;
            indexes.push(IndexDef {
                name: iname,
                fields: ifields,
                unique,
            });
        }
        let delete_key = if version == SCHEMA_FORMAT_VERSION_DELETE_KEY {
            Some(decode_position(&mut d, &fields)?)
        } else {
            None
        };
        if !d.is_empty() {
            return Err((d.position(), "trailing bytes after schema".to_owned()));
        }
        let schema = Schema {
            name,
            fields,
            primary_key,
            indexes,
            maintenance,
            delete_key,
        };
        schema.check().map_err(|e| (0, format!("invalid schema: {}", e.msg)))?;
        Ok(schema)
    }
}

fn decode_name(d: &mut Decoder<'_>) -> std::result::Result<String, (usize, String)> {
    let at = d.position();
    let raw = d.length_prefixed().map_err(|e| (e.offset, e.reason.to_owned()))?;
    if raw.len() > MAX_NAME_LEN {
        return Err((at, format!("name longer than {MAX_NAME_LEN} bytes")));
    }
    String::from_utf8(raw.to_vec()).map_err(|_| (at, "name is not UTF-8".to_owned()))
}

fn decode_flag(d: &mut Decoder<'_>, what: &str) -> std::result::Result<bool, (usize, String)> {
    let at = d.position();
    match d.u8().map_err(|e| (e.offset, e.reason.to_owned()))? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err((at, format!("bad {what} {b}"))),
    }
}

fn decode_positions(d: &mut Decoder<'_>, fields: &[Field]) -> std::result::Result<Vec<String>, (usize, String)> {
    let derr = |e: DecodeError| (e.offset, e.reason.to_owned());
    let n = d.varint_len(MAX_FIELDS).map_err(derr)?;
    (0..n).map(|_| decode_position(d, fields)).collect()
}

/// One field position, as the field's name.
fn decode_position(d: &mut Decoder<'_>, fields: &[Field]) -> std::result::Result<String, (usize, String)> {
    let at = d.position();
    let p = d.varint().map_err(|e| (e.offset, e.reason.to_owned()))?;
    usize::try_from(p)
        .ok()
        .and_then(|p| fields.get(p))
        .map(|f| f.name.clone())
        .ok_or_else(|| (at, format!("field position {p} out of range")))
}
