//! Table schemas: fields, primary key, secondary indexes and the index maintenance mode.
//!
//! This module owns [`Schema`] and everything it is made of, the builder that validates
//! it, and row validation ([`Schema::check_row`], [`Schema::row_from_pairs`]); its text
//! form used by the CLI ([`Schema::parse`] and `Display`) lives in `text`, the binary form
//! the catalog persists in the manifest ([`Schema::to_bytes`] / [`Schema::from_bytes`])
//! in `binary`.
//!
//! Invariants of a valid [`Schema`] (checked by [`Schema::validate`], which
//! [`SchemaBuilder::build`], [`Schema::parse`] and [`Schema::from_bytes`] all run; a
//! schema whose public fields were changed must be re-checked with [`Schema::validated`]):
//! - the table name and every field and index name match `[A-Za-z0-9_]{1,64}`
//!   ([`MAX_NAME_LEN`]);
//! - there are 1 to [`MAX_FIELDS`] (64) fields with pairwise distinct names;
//! - the primary key names 1 or more distinct existing fields, none of them nullable;
//! - there are at most [`MAX_INDEXES`] (64) indexes, with distinct names, each naming
//!   1 or more distinct existing fields (nullable fields are allowed in indexes);
//! - the delete key, if any, names an existing non-nullable `u64` or `i64` field (rows
//!   then store it at a fixed place: `encoding::row`, and `delete_where` deletes by it);
//! - positions and key types ([`Schema::pk_positions`], [`Schema::index_positions`],
//!   [`Schema::pk_types`], ...) are resolved from the names on demand, so they always
//!   agree with the field list.
//!
//! Field, primary-key and index order is significant: rows are stored in field order and
//! keys are encoded in the order the key fields were listed.

mod binary;
mod text;

use std::fmt;
#[cfg(test)]
pub(super) mod tests;

use super::value::Value;
use crate::error::{Error, Result};

/// Most fields a table may have.
pub const MAX_FIELDS: usize = 64;

/// Most secondary indexes a table may have.
pub const MAX_INDEXES: usize = 64;

/// Longest table, field or index name, in bytes. Names use only `[A-Za-z0-9_]`.
pub const MAX_NAME_LEN: usize = 64;

/// Version byte that starts [`Schema::to_bytes`] output.
pub const SCHEMA_FORMAT_VERSION: u8 = 1;

/// Version byte of [`Schema::to_bytes`] output that ends with a delete key.
pub const SCHEMA_FORMAT_VERSION_DELETE_KEY: u8 = 2;

/// The type and nullability of one key field, as the key codec needs it.
pub type KeyType = (FieldType, bool);

/// The type of a field. Its text spelling is [`FieldType::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// Unsigned 64-bit integer (`u64`).
    U64,
    /// Signed 64-bit integer (`i64`).
    I64,
    /// 64-bit float (`f64`).
    F64,
    /// UTF-8 string (`str`).
    Str,
    /// Raw bytes (`bytes`).
    Bytes,
    /// Boolean (`bool`).
    Bool,
}

impl FieldType {
    /// Every type, in declaration order.
    pub const ALL: [FieldType; 6] = [
        FieldType::U64,
        FieldType::I64,
        FieldType::F64,
        FieldType::Str,
        FieldType::Bytes,
        FieldType::Bool,
    ];

    /// The text spelling: `u64`, `i64`, `f64`, `str`, `bytes` or `bool` (the same as
    /// [`Value::type_name`]).
    pub fn name(self) -> &'static str {
        match self {
            FieldType::U64 => "u64",
            FieldType::I64 => "i64",
            FieldType::F64 => "f64",
            FieldType::Str => "str",
            FieldType::Bytes => "bytes",
            FieldType::Bool => "bool",
        }
    }

    /// Parses a text spelling, ignoring ASCII case.
    pub fn from_name(s: &str) -> Option<FieldType> {
        FieldType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(s))
    }

    /// The stable one-byte code used in [`Schema::to_bytes`]: `u64`=1, `i64`=2, `f64`=3,
    /// `str`=4, `bytes`=5, `bool`=6 (0 is never used).
    pub fn code(self) -> u8 {
        match self {
            FieldType::U64 => 1,
            FieldType::I64 => 2,
            FieldType::F64 => 3,
            FieldType::Str => 4,
            FieldType::Bytes => 5,
            FieldType::Bool => 6,
        }
    }

    /// Inverse of [`FieldType::code`].
    pub fn from_code(code: u8) -> Option<FieldType> {
        FieldType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// True when `v` is a non-null value of this type.
    pub fn matches(self, v: &Value) -> bool {
        matches!(
            (self, v),
            (FieldType::U64, Value::U64(_))
                | (FieldType::I64, Value::I64(_))
                | (FieldType::F64, Value::F64(_))
                | (FieldType::Str, Value::Str(_))
                | (FieldType::Bytes, Value::Bytes(_))
                | (FieldType::Bool, Value::Bool(_))
        )
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field name (`[A-Za-z0-9_]{1,64}`).
    pub name: String,
    /// The value type.
    pub ty: FieldType,
    /// Whether the field may hold [`Value::Null`].
    pub nullable: bool,
}

impl Field {
    /// The field's type and nullability as a key field.
    pub fn key_type(&self) -> KeyType {
        (self.ty, self.nullable)
    }
}

/// A secondary index: an ordered list of fields, optionally unique.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexDef {
    /// The index name (`[A-Za-z0-9_]{1,64}`, unique within the table).
    pub name: String,
    /// The indexed field names, in key order.
    pub fields: Vec<String>,
    /// Whether two rows may not share the same values of the indexed fields.
    pub unique: bool,
}

impl IndexDef {
    /// An index definition (validated when it becomes part of a [`Schema`]).
    pub fn new(name: &str, fields: &[&str], unique: bool) -> IndexDef {
        IndexDef {
            name: name.to_owned(),
            fields: fields.iter().map(|s| (*s).to_owned()).collect(),
            unique,
        }
    }
}

/// How a table keeps its secondary indexes up to date.
///
/// The schema only records the choice; the table layer implements it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IndexMaintenance {
    /// Index entries are written in the same atomic batch as the row change, after
    /// reading the old row where needed.
    Eager,
    /// Index writes are blind; stale entries of replaced or deleted rows are removed
    /// later and filtered out on read. The default.
    #[default]
    Deferred,
}

impl IndexMaintenance {
    /// The text spelling: `eager` or `deferred`.
    pub fn name(self) -> &'static str {
        match self {
            IndexMaintenance::Eager => "eager",
            IndexMaintenance::Deferred => "deferred",
        }
    }
}

impl fmt::Display for IndexMaintenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A table schema. See the module docs for its invariants.
///
/// The fields are public for reading and for building a changed copy (for example with
/// one more index); a schema changed that way must go through [`Schema::validated`]
/// before use. Name resolution ([`Schema::pk_positions`] and friends) is done on demand,
/// so it can never disagree with the fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The table name.
    pub name: String,
    /// The fields, in row order.
    pub fields: Vec<Field>,
    /// The primary key field names, in key order.
    pub primary_key: Vec<String>,
    /// The secondary indexes, in definition order.
    pub indexes: Vec<IndexDef>,
    /// The index maintenance mode.
    pub maintenance: IndexMaintenance,
    /// The field `Table::delete_where` deletes by, if any (`docs/design/deletes.md`).
    pub delete_key: Option<String>,
}

/// Collects a schema definition; [`SchemaBuilder::build`] validates it.
///
/// ```
/// use strata::table::schema::{FieldType, IndexMaintenance, Schema};
/// let schema = Schema::builder("users")
///     .field("id", FieldType::U64)
///     .nullable_field("email", FieldType::Str)
///     .primary_key(&["id"])
///     .index("by_email", &["email"], true)
///     .maintenance(IndexMaintenance::Deferred)
///     .build()?;
/// assert_eq!(schema.pk_positions()?, [0]);
/// assert_eq!(
///     schema.to_string(),
///     "table users (id u64, email str null) primary key (id) index by_email unique (email) deferred"
/// );
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct SchemaBuilder {
    schema: Schema,
}

impl SchemaBuilder {
    /// Adds a non-nullable field.
    pub fn field(mut self, name: &str, ty: FieldType) -> Self {
        self.schema.fields.push(Field {
            name: name.to_owned(),
            ty,
            nullable: false,
        });
        self
    }

    /// Adds a nullable field.
    pub fn nullable_field(mut self, name: &str, ty: FieldType) -> Self {
        self.schema.fields.push(Field {
            name: name.to_owned(),
            ty,
            nullable: true,
        });
        self
    }

    /// Sets the primary key (replacing an earlier call).
    pub fn primary_key(mut self, fields: &[&str]) -> Self {
        self.schema.primary_key = fields.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Adds a secondary index over `fields` (in key order).
    pub fn index(mut self, name: &str, fields: &[&str], unique: bool) -> Self {
        self.schema.indexes.push(IndexDef::new(name, fields, unique));
        self
    }

    /// Sets the index maintenance mode (default [`IndexMaintenance::Deferred`]).
    pub fn maintenance(mut self, mode: IndexMaintenance) -> Self {
        self.schema.maintenance = mode;
        self
    }

    /// Declares `field` the table's delete key (a non-nullable `u64` or `i64`).
    pub fn delete_key(mut self, field: &str) -> Self {
        self.schema.delete_key = Some(field.to_owned());
        self
    }

    /// Validates the definition (see the module docs for the rules).
    ///
    /// Errors: [`Error::InvalidArgument`] naming the offending table, field or index.
    pub fn build(self) -> Result<Schema> {
        self.schema.validated()
    }
}

/// Which part of a definition a validation error is about (lets the text parser point
/// at the token).
#[derive(Debug, Clone, Copy)]
pub(super) enum Culprit {
    Table,
    Field(usize),
    PkField(usize),
    Index(usize),
    IndexField(usize, usize),
    DeleteKey,
}

#[derive(Debug)]
pub(super) struct Invalid {
    pub(super) msg: String,
    pub(super) at: Culprit,
}

impl Invalid {
    fn new(msg: String, at: Culprit) -> Self {
        Invalid { msg, at }
    }
}

pub(super) fn check_name(what: &str, name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("{what} name '{name}' is longer than {MAX_NAME_LEN} bytes"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("{what} name '{name}' may only contain A-Z, a-z, 0-9 and '_'"));
    }
    Ok(())
}

/// The rule a delete key field follows (module docs).
pub(super) fn check_delete_key(schema: &Schema, name: &str) -> std::result::Result<(), String> {
    let Some(f) = schema.field(name) else {
        return Err(format!("delete key '{name}' is not a field of table '{}'", schema.name));
    };
    if f.nullable || !matches!(f.ty, FieldType::U64 | FieldType::I64) {
        return Err(format!(
            "delete key '{name}' must be a non-nullable u64 or i64 field, not {}{}",
            f.ty.name(),
            if f.nullable { " null" } else { "" }
        ));
    }
    Ok(())
}

impl Schema {
    /// Starts a definition of table `name`.
    pub fn builder(name: &str) -> SchemaBuilder {
        SchemaBuilder {
            schema: Schema {
                name: name.to_owned(),
                fields: Vec::new(),
                primary_key: Vec::new(),
                indexes: Vec::new(),
                maintenance: IndexMaintenance::default(),
                delete_key: None,
            },
        }
    }

    /// Checks every rule of the module docs.
    ///
    /// Errors: [`Error::InvalidArgument`] naming the offending table, field or index.
    pub fn validate(&self) -> Result<()> {
        self.check().map_err(|e| Error::InvalidArgument(e.msg))
    }

    /// [`Schema::validate`], returning the schema when it is valid.
    pub fn validated(self) -> Result<Schema> {
        self.validate()?;
        Ok(self)
    }

    pub(super) fn check(&self) -> std::result::Result<(), Invalid> {
        let name = &self.name;
        let fields = &self.fields;
        check_name("table", name).map_err(|m| Invalid::new(m, Culprit::Table))?;
        if fields.is_empty() {
            return Err(Invalid::new(format!("table '{name}' has no fields"), Culprit::Table));
        }
        if fields.len() > MAX_FIELDS {
            return Err(Invalid::new(
                format!(
                    "table '{name}' has {} fields, at most {MAX_FIELDS} allowed",
                    fields.len()
                ),
                Culprit::Field(MAX_FIELDS),
            ));
        }
        for (i, f) in fields.iter().enumerate() {
            check_name("field", &f.name).map_err(|m| Invalid::new(m, Culprit::Field(i)))?;
            if fields.iter().take(i).any(|g| g.name == f.name) {
                return Err(Invalid::new(
                    format!("duplicate field name '{}' in table '{name}'", f.name),
                    Culprit::Field(i),
                ));
            }
        }

        if self.primary_key.is_empty() {
            return Err(Invalid::new(
                format!("table '{name}' has no primary key"),
                Culprit::Table,
            ));
        }
        for (i, k) in self.primary_key.iter().enumerate() {
            let Some(f) = self.field(k) else {
                return Err(Invalid::new(
                    format!("primary key field '{k}' is not a field of table '{name}'"),
                    Culprit::PkField(i),
                ));
            };
            if self.primary_key.iter().take(i).any(|g| g == k) {
                return Err(Invalid::new(
                    format!("primary key field '{k}' is listed twice"),
                    Culprit::PkField(i),
                ));
            }
            if f.nullable {
                return Err(Invalid::new(
                    format!("primary key field '{k}' must not be nullable"),
                    Culprit::PkField(i),
                ));
            }
        }

        if self.indexes.len() > MAX_INDEXES {
            return Err(Invalid::new(
                format!(
                    "table '{name}' has {} indexes, at most {MAX_INDEXES} allowed",
                    self.indexes.len()
                ),
                Culprit::Index(MAX_INDEXES),
            ));
        }
        for (i, ix) in self.indexes.iter().enumerate() {
            let iname = &ix.name;
            check_name("index", iname).map_err(|m| Invalid::new(m, Culprit::Index(i)))?;
            if self.indexes.iter().take(i).any(|d| &d.name == iname) {
                return Err(Invalid::new(
                    format!("duplicate index name '{iname}' in table '{name}'"),
                    Culprit::Index(i),
                ));
            }
            if ix.fields.is_empty() {
                return Err(Invalid::new(
                    format!("index '{iname}' has no fields"),
                    Culprit::Index(i),
                ));
            }
            if ix.fields.len() > MAX_FIELDS {
                return Err(Invalid::new(
                    format!("index '{iname}' has more than {MAX_FIELDS} fields"),
                    Culprit::Index(i),
                ));
            }
            for (j, f) in ix.fields.iter().enumerate() {
                if self.field(f).is_none() {
                    return Err(Invalid::new(
                        format!("index '{iname}' names unknown field '{f}' of table '{name}'"),
                        Culprit::IndexField(i, j),
                    ));
                }
                if ix.fields.iter().take(j).any(|g| g == f) {
                    return Err(Invalid::new(
                        format!("index '{iname}' lists field '{f}' twice"),
                        Culprit::IndexField(i, j),
                    ));
                }
            }
        }
        if let Some(dk) = &self.delete_key {
            check_delete_key(self, dk).map_err(|m| Invalid::new(m, Culprit::DeleteKey))?;
        }
        Ok(())
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Row position of the field called `name`.
    pub fn field_position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The index called `name`.
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// Row positions of the named fields, in the given order.
    ///
    /// Errors: [`Error::SchemaMismatch`] for a name that is not a field (possible only
    /// for names from elsewhere or after unvalidated changes).
    pub fn positions_of<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<usize>> {
        names
            .iter()
            .map(|n| {
                let n = n.as_ref();
                self.field_position(n)
                    .ok_or_else(|| Error::SchemaMismatch(format!("table '{}' has no field '{n}'", self.name)))
            })
            .collect()
    }

    /// Key types (type, nullable) of the named fields, in the given order.
    ///
    /// Errors: as [`Schema::positions_of`].
    pub fn key_types_of<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<KeyType>> {
        Ok(self
            .positions_of(names)?
            .into_iter()
            .filter_map(|p| self.fields.get(p).map(Field::key_type))
            .collect())
    }

    /// Row positions of the primary key fields, in key order.
    ///
    /// Errors: as [`Schema::positions_of`] (never for a validated schema).
    pub fn pk_positions(&self) -> Result<Vec<usize>> {
        self.positions_of(&self.primary_key)
    }

    /// Key types of the primary key fields, in key order.
    ///
    /// Errors: as [`Schema::positions_of`] (never for a validated schema).
    pub fn pk_types(&self) -> Result<Vec<KeyType>> {
        self.key_types_of(&self.primary_key)
    }

    /// Row positions of an index's fields, in key order.
    ///
    /// Errors: as [`Schema::positions_of`] (never for an index of a validated schema).
    pub fn index_positions(&self, index: &IndexDef) -> Result<Vec<usize>> {
        self.positions_of(&index.fields)
    }

    /// Key types of an index's fields, in key order (without the primary key suffix).
    ///
    /// Errors: as [`Schema::positions_of`] (never for an index of a validated schema).
    pub fn index_key_types(&self, index: &IndexDef) -> Result<Vec<KeyType>> {
        self.key_types_of(&index.fields)
    }

    /// Key types of a full secondary-index entry key: the index fields followed by the
    /// primary key fields (the layout of `table::encoding::encode_index_key`).
    ///
    /// Errors: as [`Schema::positions_of`] (never for an index of a validated schema).
    pub fn index_entry_types(&self, index: &IndexDef) -> Result<Vec<KeyType>> {
        let mut t = self.index_key_types(index)?;
        t.extend(self.pk_types()?);
        Ok(t)
    }

    /// Checks that `row` has one value per field, each of the field's type, and `Null`
    /// only in nullable fields.
    ///
    /// Errors: [`Error::SchemaMismatch`] naming the field and the expected and actual
    /// types.
    pub fn check_row(&self, row: &[Value]) -> Result<()> {
        if row.len() != self.fields.len() {
            return Err(Error::SchemaMismatch(format!(
                "row for table '{}' has {} values, the schema has {} fields",
                self.name,
                row.len(),
                self.fields.len()
            )));
        }
        for (f, v) in self.fields.iter().zip(row) {
            check_value(&self.name, f, v)?;
        }
        Ok(())
    }

    /// Builds a row (in field order) from `(field name, value)` pairs given in any order.
    /// Missing nullable fields become `Null`; the row is then checked with
    /// [`Schema::check_row`].
    ///
    /// Errors: [`Error::SchemaMismatch`] for an unknown or repeated field name, a missing
    /// non-nullable field, or a value of the wrong type.
    pub fn row_from_pairs(&self, pairs: &[(&str, Value)]) -> Result<Vec<Value>> {
        let mut slots: Vec<Option<Value>> = vec![None; self.fields.len()];
        for (name, v) in pairs {
            let slot = self
                .field_position(name)
                .and_then(|p| slots.get_mut(p))
                .ok_or_else(|| Error::SchemaMismatch(format!("unknown field '{name}' in table '{}'", self.name)))?;
            if slot.is_some() {
                return Err(Error::SchemaMismatch(format!("field '{name}' given twice")));
            }
            *slot = Some(v.clone());
        }
        let mut row = Vec::with_capacity(slots.len());
        for (f, slot) in self.fields.iter().zip(slots) {
            match slot {
                Some(v) => row.push(v),
                None if f.nullable => row.push(Value::Null),
                None => {
                    return Err(Error::SchemaMismatch(format!(
                        "missing value for non-nullable field '{}' ({}) of table '{}'",
                        f.name, f.ty, self.name
                    )));
                }
            }
        }
        self.check_row(&row)?;
        Ok(row)
    }
}

fn check_value(table: &str, f: &Field, v: &Value) -> Result<()> {
    if v.is_null() {
        if f.nullable {
            return Ok(());
        }
        return Err(Error::SchemaMismatch(format!(
            "field '{}' of table '{table}' is not nullable: expected {}, got null",
            f.name, f.ty
        )));
    }
    if !f.ty.matches(v) {
        return Err(Error::SchemaMismatch(format!(
            "field '{}' of table '{table}' expects {}, got {}",
            f.name,
            f.ty,
            v.type_name()
        )));
    }
    Ok(())
}
