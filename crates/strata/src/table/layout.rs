//! How a table's rows map to keys: the primary keyspace stores
//! `key(pk fields) -> row`, each secondary keyspace stores
//! `key(index fields) ++ key(pk fields) -> ""`, with the order-preserving key codec so
//! byte order is value order. A row version and all its index entries share one seqno.

use super::catalog::{IndexEntry, TableDef};
use super::deferred::emit::SecondaryKeys;
use super::encoding::{decode_key, decode_row, encode_key, encode_row};
use super::schema::{FieldType, IndexMaintenance, Schema};
use super::value::Value;
use crate::error::{Error, Result};
use crate::sstable::FilterKey;
use std::num::NonZeroU8;

/// The fields of one key, by position in the row.
#[derive(Debug, Clone)]
pub struct KeyShape {
    /// Row positions of the key's fields.
    pub positions: Vec<usize>,
    /// Their types and nullability.
    pub types: Vec<(FieldType, bool)>,
    /// Their names (for error messages).
    pub names: Vec<String>,
}

impl KeyShape {
    fn new(schema: &Schema, names: &[String]) -> Result<KeyShape> {
        let mut positions = Vec::new();
        let mut types = Vec::new();
        for n in names {
            let p = schema
                .fields
                .iter()
                .position(|f| &f.name == n)
                .ok_or_else(|| Error::SchemaMismatch(format!("unknown field {n:?}")))?;
            positions.push(p);
            types.push((schema.fields[p].ty, schema.fields[p].nullable));
        }
        Ok(KeyShape {
            positions,
            types,
            names: names.to_vec(),
        })
    }

    /// Appends the key of `row`.
    pub fn encode_row_key(&self, row: &[Value], out: &mut Vec<u8>) {
        let vals: Vec<Value> = self
            .positions
            .iter()
            .map(|p| row.get(*p).cloned().unwrap_or(Value::Null))
            .collect();
        encode_key(out, &vals, &self.types);
    }

    /// Appends the key made of `values`, a prefix of the shape's fields.
    pub fn encode_prefix(&self, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
        if values.len() > self.types.len() {
            return Err(Error::InvalidArgument(format!(
                "{} values given for a key of {} fields",
                values.len(),
                self.types.len()
            )));
        }
        for ((v, (ty, nullable)), name) in values.iter().zip(&self.types).zip(&self.names) {
            check_value(name, v, *ty, *nullable)?;
        }
        encode_key(out, values, &self.types[..values.len()]);
        Ok(())
    }

    /// Length of this shape's key at the start of `key`.
    pub fn key_len(&self, key: &[u8]) -> Result<usize> {
        Ok(decode_key(key, &self.types)?.1)
    }

    /// Decodes this shape's key at the start of `key`.
    pub fn decode(&self, key: &[u8]) -> Result<Vec<Value>> {
        Ok(decode_key(key, &self.types)?.0)
    }

    /// True if the row's values at this shape's positions contain a null.
    pub fn has_null(&self, row: &[Value]) -> bool {
        self.positions.iter().any(|p| row.get(*p).is_some_and(Value::is_null))
    }
}

/// Checks one key value against its field's type.
pub fn check_value(field: &str, v: &Value, ty: FieldType, nullable: bool) -> Result<()> {
    let ok = if v.is_null() { nullable } else { ty.matches(v) };
    if ok {
        Ok(())
    } else {
        Err(Error::SchemaMismatch(format!(
            "key field '{field}' expects {}{}, got {v} ({})",
            ty.name(),
            if nullable { " or null" } else { "" },
            v.type_name()
        )))
    }
}

/// One secondary index of a table.
#[derive(Debug, Clone)]
pub struct IndexLayout {
    /// Index name.
    pub name: String,
    /// Unique index.
    pub unique: bool,
    /// Its keyspace.
    pub keyspace: u32,
    /// Being built.
    pub building: bool,
    /// The oldest snapshot seqno that can read it (`IndexEntry::readable_from`).
    pub readable_from: u64,
    /// Its key fields.
    pub shape: KeyShape,
    /// What its keyspace's filters hold (the keyspace's setting; whole keys for an
    /// index made before prefix filters, and outside a database).
    pub filter: FilterKey,
}

impl IndexLayout {
    /// What the filters of a new index keyspace hold of each entry: the encoding of
    /// its leading field, so an equality select on it can skip the runs, and the
    /// partitions, holding no entry for its value (`ScanRange::prefix`). A unique
    /// index keeps whole-key filters for its point lookups.
    pub fn chosen_filter_key(&self) -> FilterKey {
        let Some(&(ty, nullable)) = self.shape.types.first() else {
            return FilterKey::Whole;
        };
        if self.unique {
            return FilterKey::Whole;
        }
        // The key codec's widths (`encoding::key`): a nullable field's marker byte first.
        let width = match ty {
            FieldType::Str | FieldType::Bytes => return FilterKey::KeyPrefix,
            FieldType::U64 | FieldType::I64 | FieldType::F64 => 8,
            FieldType::Bool => 1,
        };
        NonZeroU8::new(width + u8::from(nullable)).map_or(FilterKey::Whole, FilterKey::Fixed)
    }
}

/// The resolved layout of one table.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Table name.
    pub name: String,
    /// Schema.
    pub schema: Schema,
    /// Primary keyspace.
    pub primary: u32,
    /// Primary key fields.
    pub pk: KeyShape,
    /// Secondary indexes.
    pub indexes: Vec<IndexLayout>,
}

impl Layout {
    /// The layout of `schema` in no database (keyspace ids are placeholders): for
    /// encoding rows and keys outside a database, as a [`TableWriter`](super::writer::TableWriter)
    /// or a router does.
    pub fn detached(schema: &Schema) -> Result<Layout> {
        Layout::new(&TableDef {
            primary: 0,
            indexes: schema
                .indexes
                .iter()
                .map(|ix| super::catalog::IndexEntry {
                    name: ix.name.clone(),
                    keyspace: 0,
                    building: false,
                    readable_from: 0,
                })
                .collect(),
            schema: schema.clone(),
        })
    }

    /// Resolves a catalog definition.
    pub fn new(def: &TableDef) -> Result<Layout> {
        let schema = def.schema.clone();
        let pk = KeyShape::new(&schema, &schema.primary_key)?;
        let mut indexes = Vec::new();
        for (ix, entry) in schema.indexes.iter().zip(&def.indexes) {
            indexes.push(IndexLayout {
                name: ix.name.clone(),
                unique: ix.unique,
                keyspace: entry.keyspace,
                building: entry.building,
                readable_from: entry.readable_from,
                shape: KeyShape::new(&schema, &ix.fields)?,
                filter: FilterKey::Whole,
            });
        }
        Ok(Layout {
            name: schema.name.clone(),
            primary: def.primary,
            pk,
            indexes,
            schema,
        })
    }

    /// The catalog entries of its secondary indexes, in schema order.
    pub fn index_entries(&self) -> Vec<IndexEntry> {
        self.indexes
            .iter()
            .map(|i| IndexEntry {
                name: i.name.clone(),
                keyspace: i.keyspace,
                building: i.building,
                readable_from: i.readable_from,
            })
            .collect()
    }

    /// True for deferred maintenance.
    pub fn deferred(&self) -> bool {
        self.schema.maintenance == IndexMaintenance::Deferred
    }

    /// The encoded primary key of `row`.
    pub fn pk_of(&self, row: &[Value]) -> Vec<u8> {
        let mut k = Vec::new();
        self.pk.encode_row_key(row, &mut k);
        k
    }

    /// The encoded primary key made of `values` (all primary key fields).
    pub fn pk_from_values(&self, values: &[Value]) -> Result<Vec<u8>> {
        if values.len() != self.pk.types.len() {
            return Err(Error::InvalidArgument(format!(
                "table {:?} has a primary key of {} fields, {} given",
                self.name,
                self.pk.types.len(),
                values.len()
            )));
        }
        let mut k = Vec::new();
        self.pk.encode_prefix(values, &mut k)?;
        Ok(k)
    }

    /// The entry key of `row` in secondary index `ix`: index fields ++ primary key.
    pub fn secondary_key(&self, ix: &IndexLayout, row: &[Value], pk: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(pk.len() + 16);
        ix.shape.encode_row_key(row, &mut k);
        k.extend_from_slice(pk);
        k
    }

    /// Splits a secondary entry key into (index part, primary key part).
    pub fn split_secondary<'a>(&self, ix: &IndexLayout, key: &'a [u8]) -> Result<(&'a [u8], &'a [u8])> {
        let n = ix.shape.key_len(key)?;
        Ok(key.split_at(n))
    }

    /// Encodes a row after checking it against the schema.
    pub fn encode(&self, row: &[Value]) -> Result<Vec<u8>> {
        self.schema.check_row(row)?;
        Ok(encode_row(&self.schema, row))
    }

    /// Decodes a stored row.
    pub fn decode(&self, bytes: &[u8]) -> Result<Vec<Value>> {
        decode_row(&self.schema, bytes)
    }

    /// The index by name.
    pub fn index(&self, name: &str) -> Result<&IndexLayout> {
        self.indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| Error::NotFound(format!("index {name:?} of table {:?}", self.name)))
    }
}

impl SecondaryKeys for Layout {
    fn secondary_keys(&self, pk: &[u8], row: &[u8], out: &mut Vec<(u32, Vec<u8>)>) -> Result<()> {
        let row = self.decode(row)?;
        for ix in &self.indexes {
            out.push((ix.keyspace, self.secondary_key(ix, &row, pk)));
        }
        Ok(())
    }
}
