//! Table schemas: fields, primary key, secondary indexes and the index maintenance mode.
//!
//! This module owns [`Schema`] and everything it is made of, the builder that validates
//! it, the text form used by the CLI ([`Schema::parse`] and `Display`), the binary form
//! the catalog persists in the manifest ([`Schema::to_bytes`] / [`Schema::from_bytes`]),
//! and row validation ([`Schema::check_row`], [`Schema::row_from_pairs`]).
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
//! - positions and key types ([`Schema::pk_positions`], [`Schema::index_positions`],
//!   [`Schema::pk_types`], ...) are resolved from the names on demand, so they always
//!   agree with the field list.
//!
//! Field, primary-key and index order is significant: rows are stored in field order and
//! keys are encoded in the order the key fields were listed.

use std::fmt;

use super::value::Value;
use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};

/// Most fields a table may have.
pub const MAX_FIELDS: usize = 64;

/// Most secondary indexes a table may have.
pub const MAX_INDEXES: usize = 64;

/// Longest table, field or index name, in bytes. Names use only `[A-Za-z0-9_]`.
pub const MAX_NAME_LEN: usize = 64;

/// Version byte that starts [`Schema::to_bytes`] output.
pub const SCHEMA_FORMAT_VERSION: u8 = 1;

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
enum Culprit {
    Table,
    Field(usize),
    PkField(usize),
    Index(usize),
    IndexField(usize, usize),
}

#[derive(Debug)]
struct Invalid {
    msg: String,
    at: Culprit,
}

impl Invalid {
    fn new(msg: String, at: Culprit) -> Self {
        Invalid { msg, at }
    }
}

fn check_name(what: &str, name: &str) -> std::result::Result<(), String> {
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

    fn check(&self) -> std::result::Result<(), Invalid> {
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
    /// primary key fields (the layout of `table::codec::encode_index_key`).
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

    /// Parses the text form used by the CLI.
    ///
    /// Grammar (keywords and type names are case-insensitive, names are case-sensitive,
    /// tokens are separated by whitespace, `(`, `)` and `,`):
    ///
    /// ```text
    /// table NAME ( FIELD TYPE [null] {, FIELD TYPE [null]} )
    ///   primary key ( FIELD {, FIELD} )
    ///   { index NAME [unique] ( FIELD {, FIELD} ) }
    ///   [eager | deferred]
    /// ```
    ///
    /// `TYPE` is one of `u64`, `i64`, `f64`, `str`, `bytes`, `bool`; `null` makes the
    /// field nullable. The maintenance mode defaults to `deferred`. Example:
    ///
    /// ```text
    /// table users (id u64, name str, email str null, age i64, score f64, active bool,
    ///   photo bytes null) primary key (id) index by_email unique (email)
    ///   index by_age (age, name) deferred
    /// ```
    ///
    /// `Display` of a [`Schema`] prints this form on one line, and parsing it gives the
    /// schema back.
    ///
    /// ```
    /// use strata::table::schema::{IndexMaintenance, Schema};
    /// let s = Schema::parse(
    ///     "table users (id u64, name str, email str null, age i64, score f64, active bool, \
    ///      photo bytes null) primary key (id) index by_email unique (email) \
    ///      index by_age (age, name) deferred",
    /// )?;
    /// assert_eq!(s.fields.len(), 7);
    /// assert_eq!(s.index("by_age").map(|i| i.fields.clone()), Some(vec!["age".into(), "name".into()]));
    /// assert_eq!(s.maintenance, IndexMaintenance::Deferred);
    /// let err = Schema::parse("table t (a u32) primary key (a)").unwrap_err().to_string();
    /// assert!(err.contains("at position 12, found 'u32'"), "{err}");
    /// # Ok::<(), strata::Error>(())
    /// ```
    ///
    /// Errors: [`Error::InvalidArgument`] naming the offending token and its position
    /// (1-based character index into `text`), including every rule of
    /// [`Schema::validate`].
    pub fn parse(text: &str) -> Result<Schema> {
        Parser::new(text)?.schema()
    }

    /// The stable binary encoding persisted by the catalog.
    ///
    /// Layout (varints are LEB128, `bytes` is a varint length then the bytes):
    ///
    /// ```text
    /// u8 version (= 1) | bytes table name | u8 maintenance (0 eager, 1 deferred)
    /// varint n_fields | n_fields × (bytes name | u8 type code | u8 nullable 0/1)
    /// varint n_pk     | n_pk × varint field position
    /// varint n_index  | n_index × (bytes name | u8 unique 0/1 | varint n | n × varint field position)
    /// ```
    ///
    /// Type codes are [`FieldType::code`]. The schema should be valid; names that do not
    /// resolve to a field (only possible after unvalidated changes) are written as
    /// position `u64::MAX`, which [`Schema::from_bytes`] rejects.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 16 * self.fields.len());
        out.push(SCHEMA_FORMAT_VERSION);
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
        if version != SCHEMA_FORMAT_VERSION {
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
        if !d.is_empty() {
            return Err((d.position(), "trailing bytes after schema".to_owned()));
        }
        let schema = Schema {
            name,
            fields,
            primary_key,
            indexes,
            maintenance,
        };
        schema.check().map_err(|e| (0, format!("invalid schema: {}", e.msg)))?;
        Ok(schema)
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
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let at = d.position();
        let p = d.varint().map_err(derr)?;
        let f = usize::try_from(p)
            .ok()
            .and_then(|p| fields.get(p))
            .ok_or_else(|| (at, format!("field position {p} out of range")))?;
        out.push(f.name.clone());
    }
    Ok(out)
}

/// Prints the one-line text form accepted by [`Schema::parse`].
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table {} (", self.name)?;
        for (i, fd) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", fd.name, fd.ty)?;
            if fd.nullable {
                f.write_str(" null")?;
            }
        }
        write!(f, ") primary key ({})", self.primary_key.join(", "))?;
        for i in &self.indexes {
            write!(f, " index {}", i.name)?;
            if i.unique {
                f.write_str(" unique")?;
            }
            write!(f, " ({})", i.fields.join(", "))?;
        }
        write!(f, " {}", self.maintenance)
    }
}

// ---------------------------------------------------------------------------------------
// Text parser.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Open,
    Close,
    Comma,
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Open => f.write_str("'('"),
            Tok::Close => f.write_str("')'"),
            Tok::Comma => f.write_str("','"),
            Tok::End => f.write_str("end of text"),
        }
    }
}

/// Token positions of each part of the definition, to report validation errors.
#[derive(Default)]
struct Positions {
    table: usize,
    fields: Vec<usize>,
    pk: Vec<usize>,
    indexes: Vec<usize>,
    index_fields: Vec<Vec<usize>>,
}

struct Parser {
    /// Tokens with their 1-based character position.
    toks: Vec<(Tok, usize)>,
    next: usize,
}

fn parse_err(msg: String) -> Error {
    Error::InvalidArgument(format!("schema text: {msg}"))
}

impl Parser {
    fn new(text: &str) -> Result<Parser> {
        let mut toks = Vec::new();
        let mut chars = text.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            let pos = i + 1;
            match c {
                '(' => toks.push((Tok::Open, pos)),
                ')' => toks.push((Tok::Close, pos)),
                ',' => toks.push((Tok::Comma, pos)),
                c if c.is_whitespace() => {}
                c if c.is_ascii_alphanumeric() || c == '_' => {
                    let mut w = String::from(c);
                    while let Some(&(_, c)) = chars.peek() {
                        if c.is_ascii_alphanumeric() || c == '_' {
                            w.push(c);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    toks.push((Tok::Word(w), pos));
                }
                c => return Err(parse_err(format!("unexpected character {c:?} at position {pos}"))),
            }
        }
        let end = text.chars().count() + 1;
        toks.push((Tok::End, end));
        Ok(Parser { toks, next: 0 })
    }

    fn peek(&self) -> (&Tok, usize) {
        match self.toks.get(self.next) {
            Some((t, p)) => (t, *p),
            None => (&Tok::End, self.toks.last().map_or(1, |t| t.1)),
        }
    }

    fn bump(&mut self) -> (Tok, usize) {
        let (t, p) = self.peek();
        let t = t.clone();
        if self.next < self.toks.len() {
            self.next += 1;
        }
        (t, p)
    }

    fn unexpected<T>(&self, expected: &str) -> Result<T> {
        let (t, p) = self.peek();
        Err(parse_err(format!("expected {expected} at position {p}, found {t}")))
    }

    fn peek_keyword(&self, kw: &str) -> bool {
        matches!(self.peek().0, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn keyword(&mut self, kw: &str) -> Result<()> {
        if self.peek_keyword(kw) {
            self.bump();
            Ok(())
        } else {
            self.unexpected(&format!("'{kw}'"))
        }
    }

    fn punct(&mut self, want: Tok) -> Result<()> {
        if *self.peek().0 == want {
            self.bump();
            Ok(())
        } else {
            self.unexpected(&want.to_string())
        }
    }

    fn name(&mut self, what: &str) -> Result<(String, usize)> {
        match self.peek() {
            (Tok::Word(w), p) => {
                let w = w.clone();
                check_name(what, &w).map_err(|m| parse_err(format!("{m} at position {p}")))?;
                self.bump();
                Ok((w, p))
            }
            _ => self.unexpected(&format!("{what} name")),
        }
    }

    /// `( NAME {, NAME} )`
    fn name_list(&mut self) -> Result<(Vec<String>, Vec<usize>)> {
        self.punct(Tok::Open)?;
        let mut names = Vec::new();
        let mut positions = Vec::new();
        loop {
            let (n, p) = self.name("field")?;
            names.push(n);
            positions.push(p);
            match self.peek().0 {
                Tok::Comma => {
                    self.bump();
                }
                Tok::Close => {
                    self.bump();
                    return Ok((names, positions));
                }
                _ => return self.unexpected("',' or ')'"),
            }
        }
    }

    fn schema(mut self) -> Result<Schema> {
        let mut pos = Positions::default();
        self.keyword("table")?;
        let (table, p) = self.name("table")?;
        pos.table = p;
        let mut b = Schema::builder(&table);
        self.punct(Tok::Open)?;
        loop {
            let (fname, p) = self.name("field")?;
            pos.fields.push(p);
            let ty = match self.peek() {
                (Tok::Word(w), _) if FieldType::from_name(w).is_some() => {
                    let ty = FieldType::from_name(w);
                    self.bump();
                    ty
                }
                _ => None,
            };
            let Some(ty) = ty else {
                return self.unexpected("a type (u64, i64, f64, str, bytes, bool)");
            };
            b = if self.peek_keyword("null") {
                self.bump();
                b.nullable_field(&fname, ty)
            } else {
                b.field(&fname, ty)
            };
            match self.peek().0 {
                Tok::Comma => {
                    self.bump();
                }
                Tok::Close => {
                    self.bump();
                    break;
                }
                _ => return self.unexpected("'null', ',' or ')'"),
            }
        }
        self.keyword("primary")?;
        self.keyword("key")?;
        let (pk, pk_pos) = self.name_list()?;
        b.schema.primary_key = pk;
        pos.pk = pk_pos;
        while self.peek_keyword("index") {
            self.bump();
            let (iname, p) = self.name("index")?;
            let unique = self.peek_keyword("unique");
            if unique {
                self.bump();
            }
            let (fields, fpos) = self.name_list()?;
            b.schema.indexes.push(IndexDef {
                name: iname,
                fields,
                unique,
            });
            pos.indexes.push(p);
            pos.index_fields.push(fpos);
        }
        if self.peek_keyword("eager") {
            self.bump();
            b.schema.maintenance = IndexMaintenance::Eager;
        } else if self.peek_keyword("deferred") {
            self.bump();
            b.schema.maintenance = IndexMaintenance::Deferred;
        }
        if *self.peek().0 != Tok::End {
            return self.unexpected("'index', 'eager', 'deferred' or end of text");
        }
        let schema = b.schema;
        schema.check().map_err(|e| {
            let p = match e.at {
                Culprit::Table => Some(pos.table),
                Culprit::Field(i) => pos.fields.get(i).copied(),
                Culprit::PkField(i) => pos.pk.get(i).copied(),
                Culprit::Index(i) => pos.indexes.get(i).copied(),
                Culprit::IndexField(i, j) => pos.index_fields.get(i).and_then(|v| v.get(j)).copied(),
            };
            match p {
                Some(p) => parse_err(format!("{} (at position {p})", e.msg)),
                None => parse_err(e.msg),
            }
        })?;
        Ok(schema)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXAMPLE: &str = "table users (id u64, name str, email str null, age i64, score f64, active bool, \
                           photo bytes null) primary key (id) index by_email unique (email) \
                           index by_age (age, name) deferred";

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
        let s =
            Schema::parse("table t (\n  k u64,\n  v str\n) primary key (k, v)\nindex unique unique (v) eager").unwrap();
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
        let mut v2 = good.clone();
        v2[0] = 2;
        assert_eq!(
            msg(&v2),
            "stored schema does not decode: unknown schema format version 2 (at byte 0)"
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
}
