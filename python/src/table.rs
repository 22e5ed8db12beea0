//! Tables from Python: `Table`, `Transaction` and `Rows` (rows as dicts).
//!
//! A `Table` handle caches its field list (names as interned Python strings, types for
//! conversion) when it is opened: fields never change while a table exists; a table
//! dropped and created again needs a new handle.

use std::ops::Bound as B;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use strata::table::schema::Schema;
use strata::table::select::Query;
use strata::table::value::Value;

use crate::convert::{FieldSpec, key_values, row_to_dict, to_row, to_value, type_name};
use crate::errors;
use crate::kv::{Alive, Prefetch, Shared, Snapshot, busy, engine, methods};
use crate::pending::Pending;

/// Runs `ingest` on `dir` (linking when `move_`) and, after a successful move, removes
/// the source directory: the database now owns the linked files.
pub fn ingest_dir(
    dir: &std::path::Path,
    move_: bool,
    ingest: impl FnOnce(&std::path::Path, strata::IngestOptions) -> strata::Result<strata::IngestReport>,
) -> strata::Result<strata::IngestReport> {
    let report = ingest(dir, strata::IngestOptions { link_files: move_ })?;
    if move_ {
        // The rows are in: a directory that cannot be removed (another user's build
        // output) must not make a successful ingest look failed, and retried.
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(report)
}

/// The primary key values of `obj` (a value, or a tuple of the key's fields), given the
/// fields and the primary key's positions among them.
pub fn pk_values(py: Python<'_>, obj: &Bound<'_, PyAny>, fields: &[FieldSpec], pk: &[usize]) -> PyResult<Vec<Value>> {
    let key: Vec<&FieldSpec> = pk.iter().map(|&i| &fields[i]).collect();
    let v = key_values(py, obj, &key, "primary key")?;
    if v.len() != key.len() {
        return Err(errors::invalid(
            py,
            format!("primary key has {} fields, {} given", key.len(), v.len()),
        ));
    }
    Ok(v)
}

/// What a table handle knows: the engine's table (a `Table`, or a `PartitionedTable`),
/// its fields and the positions of its primary key fields.
pub struct Info<T = strata::table::Table> {
    pub table: T,
    pub fields: Arc<Vec<FieldSpec>>,
    pub pk: Vec<usize>,
}

impl<T> Info<T> {
    /// What a handle of `table` with `schema` knows.
    pub fn new(py: Python<'_>, table: T, schema: &Schema) -> PyResult<Arc<Info<T>>> {
        let fields = Arc::new(field_specs(py, schema));
        let pk = schema.pk_positions().map_err(|e| errors::to_py(py, e))?;
        Ok(Arc::new(Info { table, fields, pk }))
    }

    pub fn pk_fields(&self) -> Vec<&FieldSpec> {
        self.pk.iter().map(|&i| &self.fields[i]).collect()
    }

    pub fn pk(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
        pk_values(py, obj, &self.fields, &self.pk)
    }

    pub fn changes(&self, py: Python<'_>, changes: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Value)>> {
        let changes = crate::convert::as_dict(changes)?
            .ok_or_else(|| PyTypeError::new_err("changes must be a mapping of field names to values"))?;
        let mut set = Vec::with_capacity(changes.len());
        for (k, v) in changes.iter() {
            let name: String = k.extract()?;
            let Some(f) = self.fields.iter().find(|f| f.text == name) else {
                return Err(errors::schema(py, format!("unknown field {name:?}")));
            };
            set.push((name, to_value(py, &v, f)?));
        }
        Ok(set)
    }
}

/// The engine table behind a table object: one database's, or a partitioned one's
/// (each statement routed to the row's partition).
pub enum Handle {
    One(strata::table::Table),
    Parts(Box<strata::PartitionedTable>),
}

/// `$call` on the handle's table, whichever kind it is.
macro_rules! dispatch {
    ($handle:expr, $t:ident => $call:expr) => {
        match $handle {
            Handle::One($t) => $call,
            Handle::Parts($t) => $call,
        }
    };
}

impl Handle {
    fn name(&self) -> &str {
        dispatch!(self, t => t.name())
    }

    fn schema(&self) -> strata::Result<Schema> {
        dispatch!(self, t => t.schema())
    }

    fn insert(&self, row: Vec<Value>) -> strata::Result<()> {
        dispatch!(self, t => t.insert(row))
    }

    fn replace(&self, row: Vec<Value>) -> strata::Result<()> {
        dispatch!(self, t => t.replace(row))
    }

    fn delete(&self, pk: &[Value]) -> strata::Result<()> {
        dispatch!(self, t => t.delete(pk))
    }

    fn update(&self, pk: &[Value], set: &[(&str, Value)]) -> strata::Result<bool> {
        dispatch!(self, t => t.update(pk, set))
    }

    fn get(&self, pk: &[Value]) -> strata::Result<Option<Vec<Value>>> {
        dispatch!(self, t => t.get(pk))
    }

    fn count(&self) -> strata::Result<u64> {
        match self {
            Handle::One(t) => t.count(),
            Handle::Parts(t) => t.select(strata::table::select::PRIMARY).count(),
        }
    }
}

/// What `Table` and `PartitionedTable` share (their Python base class): the name,
/// fields and schema, and the statements on one row.
#[pyclass(subclass, frozen, module = "strata", name = "TableBase")]
pub struct TableBase {
    alive: Arc<dyn Alive + Send + Sync>,
    info: Arc<Info<Handle>>,
}

impl TableBase {
    /// The base of a table object whose other part knows `info`.
    pub fn new<T>(alive: Arc<dyn Alive + Send + Sync>, table: Handle, info: &Info<T>) -> TableBase {
        TableBase {
            alive,
            info: Arc::new(Info {
                table,
                fields: info.fields.clone(),
                pk: info.pk.clone(),
            }),
        }
    }
}

#[pymethods]
impl TableBase {
    /// The table name.
    #[getter]
    fn name(&self) -> String {
        self.info.table.name().to_string()
    }

    /// Field names, in row order.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.info.fields.iter().map(|f| f.text.clone()).collect()
    }

    /// The schema in its text form.
    #[getter]
    fn schema(&self, py: Python<'_>) -> PyResult<String> {
        let t = &self.info.table;
        Ok(engine(py, &self.alive, || t.schema())?.to_string())
    }

    fn __repr__(&self) -> String {
        format!(
            "<strata.{} {:?}>",
            match self.info.table {
                Handle::One(_) => "Table",
                Handle::Parts(_) => "PartitionedTable",
            },
            self.info.table.name()
        )
    }

    /// Inserts a row; `IntegrityError` if its primary key (or a unique key) exists.
    fn insert(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = to_row(py, row, &self.info.fields)?;
        engine(py, &self.alive, || self.info.table.insert(r))
    }

    /// Inserts the row, or overwrites the row with the same primary key.
    fn replace(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = to_row(py, row, &self.info.fields)?;
        engine(py, &self.alive, || self.info.table.replace(r))
    }

    /// Deletes the row with primary key `pk` (a value, or a tuple for a composite key);
    /// no error if there is none.
    fn delete(&self, py: Python<'_>, pk: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.info.pk(py, pk)?;
        engine(py, &self.alive, || self.info.table.delete(&k))
    }

    /// Sets the fields in `changes` (a dict) of the row with primary key `pk`; returns
    /// False when there is no such row.
    fn update(&self, py: Python<'_>, pk: &Bound<'_, PyAny>, changes: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = self.info.pk(py, pk)?;
        let set = self.info.changes(py, changes)?;
        engine(py, &self.alive, || {
            let refs: Vec<(&str, Value)> = set.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
            self.info.table.update(&k, &refs)
        })
    }

    /// The row with primary key `pk` as a dict, or `default`.
    #[pyo3(signature = (pk, default=None))]
    fn get(&self, py: Python<'_>, pk: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let k = self.info.pk(py, pk)?;
        match engine(py, &self.alive, || self.info.table.get(&k))? {
            Some(row) => Ok(row_to_dict(py, &row, &self.info.fields)?.into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Rows through `index` ("primary" or a secondary index): equality on the first
    /// fields (`eq`, a value or a tuple), then a range `(low, high)` on the next one
    /// (`None` = unbounded; `bounds` "[)" by default, or "[]", "(]", "()"), ascending
    /// or `reverse`, at most `limit`, at `snapshot` (not on a partitioned table, whose
    /// snapshot would be one per partition, not one cut). A lazy iterator of dicts; on
    /// a partitioned table every partition's rows merged in index order (ties by
    /// primary key).
    #[pyo3(signature = (index="primary", eq=None, range=None, bounds="[)", reverse=false, limit=None, snapshot=None))]
    #[allow(clippy::too_many_arguments)]
    fn select(
        &self,
        py: Python<'_>,
        index: &str,
        eq: Option<&Bound<'_, PyAny>>,
        range: Option<&Bound<'_, PyTuple>>,
        bounds: &str,
        reverse: bool,
        limit: Option<u64>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Rows> {
        let schema = engine(py, &self.alive, || self.info.table.schema())?;
        let q = Query {
            reverse,
            limit,
            ..parse_query(py, &self.info, &schema, index, eq, range, bounds)?
        };
        let rows: RowSource = match &self.info.table {
            Handle::One(t) => {
                let mut sel = t.select(index).with_query(q);
                let snap = match snapshot {
                    Some(s) => {
                        let s = s.get();
                        if !std::ptr::addr_eq(Arc::as_ptr(&s.shared), Arc::as_ptr(&self.alive)) {
                            return Err(errors::invalid(py, "the snapshot belongs to another database"));
                        }
                        Some(s.engine_snapshot(py)?)
                    }
                    None => None,
                };
                if let Some(s) = &snap {
                    sel = sel.at(s);
                }
                Box::new(engine(py, &self.alive, || sel.rows())?)
            }
            Handle::Parts(t) => {
                if snapshot.is_some() {
                    return Err(errors::invalid(py, "a partitioned table's select takes no snapshot"));
                }
                let sel = t.select(index).with_query(q);
                Box::new(engine(py, &self.alive, || sel.rows())?)
            }
        };
        Ok(Rows::new(self.alive.clone(), self.info.fields.clone(), rows))
    }

    /// Number of rows (a scan of the primary index, of every partition).
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        engine(py, &self.alive, || self.info.table.count())
    }
}

/// The conditions of a `select` for `index` ("primary" or a secondary index of
/// `schema`): equality on the index's first fields, then a range on the next one.
#[allow(clippy::too_many_arguments)]
pub fn parse_query<T>(
    py: Python<'_>,
    info: &Info<T>,
    schema: &Schema,
    index: &str,
    eq: Option<&Bound<'_, PyAny>>,
    range: Option<&Bound<'_, PyTuple>>,
    bounds: &str,
) -> PyResult<Query> {
    let key: Vec<&FieldSpec> = if index == strata::table::select::PRIMARY {
        info.pk_fields()
    } else {
        let def = schema
            .index(index)
            .ok_or_else(|| errors::new(py, "NotFoundError", format!("index {index:?}")))?;
        let pos = schema.index_positions(def).map_err(|e| errors::to_py(py, e))?;
        // The handle's fields are the table's when it was opened: a table dropped and
        // made again since may have more.
        pos.iter()
            .map(|&i| info.fields.get(i))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                errors::new(
                    py,
                    "SchemaError",
                    "the table was redefined since this handle was opened",
                )
            })?
    };
    let mut q = Query::default();
    let mut n_eq = 0;
    if let Some(eq) = eq.filter(|e| !e.is_none()) {
        let vals = key_values(py, eq, &key, "eq")?;
        n_eq = vals.len();
        q.eq = vals;
    }
    if let Some(r) = range {
        if r.len() != 2 {
            return Err(errors::invalid(py, "range must be a (low, high) pair"));
        }
        let Some(field) = key.get(n_eq) else {
            return Err(errors::invalid(
                py,
                format!("index {index:?} has no field left for a range after {n_eq} equalities"),
            ));
        };
        let (lo_inc, hi_inc) = match bounds {
            "[)" => (true, false),
            "[]" => (true, true),
            "(]" => (false, true),
            "()" => (false, false),
            _ => {
                return Err(errors::invalid(
                    py,
                    format!("bounds {bounds:?}: use \"[)\", \"[]\", \"(]\" or \"()\""),
                ));
            }
        };
        let end = |obj: Bound<'_, PyAny>, inc: bool| -> PyResult<B<Value>> {
            if obj.is_none() {
                return Ok(B::Unbounded);
            }
            let v = to_value(py, &obj, field)?;
            Ok(if inc { B::Included(v) } else { B::Excluded(v) })
        };
        q.lower = end(r.get_item(0)?, lo_inc)?;
        q.upper = end(r.get_item(1)?, hi_inc)?;
    }
    Ok(q)
}

fn open_info(py: Python<'_>, table: strata::table::Table) -> PyResult<Arc<Info>> {
    let schema = py.detach(|| table.schema()).map_err(|e| errors::to_py(py, e))?;
    Info::new(py, table, &schema)
}

/// A schema argument: the text form (`"table users (id u64, name str) primary key (id)
/// index by_name (name) deferred"`), a dict (see docs/python.md) or, where `tables` is
/// true, a `Table` (its current schema).
pub fn schema_arg(py: Python<'_>, schema: &Bound<'_, PyAny>, tables: bool) -> PyResult<Schema> {
    let text = if let Ok(s) = schema.cast::<PyString>() {
        s.to_str()?.to_owned()
    } else if let (true, Ok(t)) = (tables, schema.cast::<Table>()) {
        return t.get().engine_schema(py);
    } else if let Some(d) = crate::convert::as_dict(schema)? {
        schema_text(py, &d)?
    } else {
        let also = if tables { ", a dict or a Table" } else { " or a dict" };
        return Err(PyTypeError::new_err(format!(
            "schema must be a str{also}, not {}",
            type_name(schema)
        )));
    };
    Schema::parse(&text).map_err(|e| errors::to_py(py, e))
}

/// The conversion specs of `schema`'s fields.
pub fn field_specs(py: Python<'_>, schema: &Schema) -> Vec<FieldSpec> {
    schema
        .fields
        .iter()
        .map(|f| FieldSpec {
            name: PyString::intern(py, &f.name).unbind(),
            text: f.name.clone(),
            ty: f.ty,
            nullable: f.nullable,
        })
        .collect()
}

/// `Database.create_table(schema)`: `schema` as [`schema_arg`] takes it (no `Table`).
pub fn create(py: Python<'_>, shared: &Arc<Shared>, schema: &Bound<'_, PyAny>) -> PyResult<Py<Table>> {
    let schema = schema_arg(py, schema, false)?;
    let t = shared.with_db(py, |db| db.create_table(schema))?;
    new_table(py, shared, t)
}

/// `Database.table(name)`.
pub fn open(py: Python<'_>, shared: &Arc<Shared>, name: &str) -> PyResult<Py<Table>> {
    let t = shared.with_db(py, |db| db.table(name))?;
    new_table(py, shared, t)
}

fn new_table(py: Python<'_>, shared: &Arc<Shared>, t: strata::table::Table) -> PyResult<Py<Table>> {
    let info = open_info(py, t.clone())?;
    let base = TableBase::new(shared.clone(), Handle::One(t), &info);
    let table = Table {
        shared: shared.clone(),
        info,
    };
    Py::new(py, PyClassInitializer::from(base).add_subclass(table))
}

/// The text form of a dict schema: `{"name": ..., "fields": {name: "u64" | "str null",
/// ...} or [(name, type), ...], "primary_key": [...], "indexes": {name: [fields] |
/// {"fields": [...], "unique": bool}}, "maintenance": "eager" | "deferred"}`.
fn schema_text(py: Python<'_>, d: &Bound<'_, PyDict>) -> PyResult<String> {
    // Every piece goes into the text as one or more words: refuse anything else, so that
    // a value cannot smuggle in grammar of its own.
    let word = |s: String, what: &str| -> PyResult<String> {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ') {
            return Err(errors::invalid(
                py,
                format!("schema {what} {s:?}: use letters, digits and _"),
            ));
        }
        Ok(s)
    };
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(key)?
            .ok_or_else(|| errors::invalid(py, format!("schema dict needs {key:?}")))
    };
    let names = |obj: &Bound<'_, PyAny>, what: &str| -> PyResult<String> {
        let list: Vec<String> = if let Ok(s) = obj.extract::<String>() {
            vec![s]
        } else {
            obj.extract()
                .map_err(|_| errors::invalid(py, format!("schema {what}: expected a list of field names")))?
        };
        let list: PyResult<Vec<String>> = list.into_iter().map(|s| word(s, what)).collect();
        Ok(list?.join(", "))
    };
    for k in d.keys() {
        let k: String = k.extract()?;
        if !["name", "fields", "primary_key", "indexes", "maintenance"].contains(&k.as_str()) {
            return Err(errors::invalid(py, format!("schema dict: unknown key {k:?}")));
        }
    }
    let mut text = format!("table {} (", word(item("name")?.extract()?, "name")?);
    let fields = item("fields")?;
    let pairs: Vec<(String, String)> = if let Some(fd) = crate::convert::as_dict(&fields)? {
        fd.iter()
            .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
            .collect::<PyResult<_>>()
            .map_err(|_: PyErr| errors::invalid(py, "schema fields: expected {name: type}"))?
    } else {
        fields
            .extract()
            .map_err(|_| errors::invalid(py, "schema fields: expected {name: type} or [(name, type)]"))?
    };
    let cols: PyResult<Vec<String>> = pairs
        .into_iter()
        .map(|(n, t)| Ok(format!("{} {}", word(n, "field")?, word(t, "type")?)))
        .collect();
    text += &cols?.join(", ");
    text += &format!(") primary key ({})", names(&item("primary_key")?, "primary_key")?);
    if let Some(ixs) = d.get_item("indexes")? {
        let ixs = crate::convert::as_dict(&ixs)?
            .ok_or_else(|| errors::invalid(py, "schema indexes: expected {name: [fields]}"))?;
        for (name, def) in ixs.iter() {
            let name = word(name.extract()?, "index")?;
            let (fields, unique) = match crate::convert::as_dict(&def)? {
                Some(dd) => {
                    let f = dd
                        .get_item("fields")?
                        .ok_or_else(|| errors::invalid(py, format!("index {name}: needs \"fields\"")))?;
                    let u = match dd.get_item("unique")? {
                        Some(u) => u.extract::<bool>()?,
                        None => false,
                    };
                    (names(&f, "index fields")?, u)
                }
                None => (names(&def, "index fields")?, false),
            };
            text += &format!(" index {name}{} ({fields})", if unique { " unique" } else { "" });
        }
    }
    if let Some(m) = d.get_item("maintenance")? {
        text += " ";
        text += &word(m.extract()?, "maintenance")?;
    }
    Ok(text)
}

/// A table: rows with a primary key and secondary indexes. Rows go in as dicts (by
/// field name) or tuples (in field order) and come out as dicts.
#[pyclass(extends = TableBase, frozen, module = "strata")]
pub struct Table {
    shared: Arc<Shared>,
    info: Arc<Info>,
}

impl Table {
    /// The table's current schema, read with the GIL released.
    pub fn engine_schema(&self, py: Python<'_>) -> PyResult<Schema> {
        let t = &self.info.table;
        engine(py, &self.shared, || t.schema())
    }
}

#[pymethods]
impl Table {
    /// Replaces every row of `rows` (an iterable of dicts or tuples, or a
    /// `pyarrow.Table`) in one atomic transaction; returns the number of rows.
    fn replace_many(&self, py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<usize> {
        let all: Vec<Vec<Value>> = if crate::columns::is_arrow_table(rows)? {
            crate::columns::rows_from_arrow(py, rows, &self.info.fields)?
        } else {
            let mut v = Vec::new();
            for r in rows.try_iter()? {
                v.push(to_row(py, &r?, &self.info.fields)?);
            }
            v
        };
        let n = all.len();
        let t = &self.info.table;
        engine(py, &self.shared, || {
            let mut txn = t.transaction();
            for r in all {
                txn.replace(r);
            }
            txn.commit()
        })?;
        Ok(n)
    }

    /// A transaction: `with table.transaction() as t:` commits its statements atomically
    /// when the block ends without an exception.
    fn transaction(&self, py: Python<'_>) -> PyResult<Transaction> {
        self.shared.check(py)?;
        Ok(Transaction {
            shared: self.shared.clone(),
            info: self.info.clone(),
            txn: Pending::new(self.info.table.transaction(), "transaction"),
        })
    }

    /// Adds a secondary index `name` on `fields`, building it from the existing rows.
    #[pyo3(signature = (name, fields, unique=false))]
    fn create_index(&self, py: Python<'_>, name: &str, fields: Vec<String>, unique: bool) -> PyResult<()> {
        let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
        let def = strata::table::schema::IndexDef::new(name, &refs, unique);
        let t = &self.info.table;
        engine(py, &self.shared, || t.create_index(def))
    }

    /// Drops the secondary index `name`.
    fn drop_index(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let t = &self.info.table;
        engine(py, &self.shared, || t.drop_index(name))
    }

    /// Installs the files a `TableWriter` wrote to `directory`, atomically (all in or
    /// none, even after a crash), with insert semantics: a row whose primary key exists
    /// already is an `IntegrityError`, files built for another shape of table a
    /// `SchemaError`, a damaged file a `CorruptionError`; then nothing changes. The
    /// files are copied, or with `move=True` hard-linked and the source directory
    /// removed afterwards (so nothing can change them). Returns a report dict.
    #[pyo3(signature = (directory, r#move=false))]
    fn ingest<'py>(
        &self,
        py: Python<'py>,
        directory: std::path::PathBuf,
        r#move: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.info.table;
        let report = engine(py, &self.shared, || {
            ingest_dir(&directory, r#move, |d, o| t.ingest(d, o))
        })?;
        crate::report::ingest(py, &report)
    }

    /// The table's counters as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.info.table;
        let s = engine(py, &self.shared, || t.stats())?;
        crate::report::table_stats(py, &s)
    }
}

/// Statements on one table, committed atomically by `commit()` or at the end of a
/// `with` block that raised nothing (and dropped if it raised).
#[pyclass(frozen, module = "strata")]
pub struct Transaction {
    shared: Arc<Shared>,
    info: Arc<Info>,
    txn: Pending<strata::table::Transaction>,
}

impl Transaction {
    fn add(&self, py: Python<'_>, f: impl FnOnce(&mut strata::table::Transaction)) -> PyResult<()> {
        // As every object of a closed database, an edit raises `ClosedError`.
        self.shared.check(py)?;
        self.txn.edit(py, f)
    }
}

methods!(
    Transaction,
    with_block: |this, py, exc_type| this.txn.exit(exc_type, || this.commit(py).map(drop)),
{
    /// Adds an insert (the commit fails with `IntegrityError` if the key exists).
    fn insert(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = to_row(py, row, &self.info.fields)?;
        self.add(py, |t| {
            t.insert(r);
        })
    }

    /// Adds a replace.
    fn replace(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = to_row(py, row, &self.info.fields)?;
        self.add(py, |t| {
            t.replace(r);
        })
    }

    /// Adds a delete by primary key.
    fn delete(&self, py: Python<'_>, pk: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.info.pk(py, pk)?;
        self.add(py, |t| {
            t.delete(k);
        })
    }

    /// Adds an update of the fields in `changes` (nothing if the row is absent).
    fn update(&self, py: Python<'_>, pk: &Bound<'_, PyAny>, changes: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.info.pk(py, pk)?;
        let set = self.info.changes(py, changes)?;
        self.add(py, |t| {
            t.update(k, set);
        })
    }

    /// Statements added so far.
    fn __len__(&self) -> usize {
        self.txn.len(strata::table::Transaction::len)
    }

    /// Applies every statement atomically; returns how many were applied.
    fn commit(&self, py: Python<'_>) -> PyResult<u64> {
        let t = self.txn.take(py)?;
        Ok(engine(py, &self.shared, move || t.commit())?.statements)
    }

    /// Drops every statement without writing.
    fn discard(&self) {
        self.txn.discard();
    }

});

/// A select's rows as the engine streams them: one table's, or merged over partitions.
pub type RowSource = Box<dyn Iterator<Item = strata::Result<Vec<Value>>> + Send>;

/// The rows of a select, streamed as dicts. Raises `ClosedError` once the database is
/// closed.
#[pyclass(frozen, module = "strata")]
pub struct Rows {
    alive: Arc<dyn Alive + Send + Sync>,
    fields: Arc<Vec<FieldSpec>>,
    rows: Mutex<(Prefetch<std::collections::VecDeque<Vec<Value>>>, RowSource)>,
}

impl Rows {
    /// Rows of `rows`, whose database `alive` is, converted by `fields`.
    pub fn new(
        alive: Arc<dyn Alive + Send + Sync>,
        fields: Arc<Vec<FieldSpec>>,
        rows: impl Iterator<Item = strata::Result<Vec<Value>>> + Send + 'static,
    ) -> Rows {
        Rows {
            alive,
            fields,
            rows: Mutex::new((Prefetch::new(), Box::new(rows))),
        }
    }

    /// Up to `n` more rows, read with the GIL released.
    pub fn take(&self, py: Python<'_>, n: usize) -> PyResult<Vec<Vec<Value>>> {
        // Rows read ahead are not handed out after a close either.
        self.alive.check(py)?;
        let mut guard = busy(self.rows.try_lock())?;
        let (pf, it) = &mut *guard;
        let mut out: Vec<Vec<Value>> = pf.buf.drain(..).collect();
        if let Some(e) = pf.err.take() {
            return Err(errors::to_py(py, e));
        }
        if pf.done {
            return Ok(out);
        }
        engine(py, &self.alive, || {
            while out.len() < n {
                match it.next() {
                    Some(r) => out.push(r?),
                    None => break,
                }
            }
            Ok(())
        })?;
        Ok(out)
    }
}

#[pymethods]
impl Rows {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut guard = busy(self.rows.try_lock())?;
        let (pf, it) = &mut *guard;
        let row = pf.next_of(py, &self.alive, || it.next())?;
        drop(guard);
        match row {
            Some(r) => Ok(Some(row_to_dict(py, &r, &self.fields)?.into_any().unbind())),
            None => Ok(None),
        }
    }

    /// The remaining rows as a list of dicts.
    fn all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.take(py, usize::MAX)?;
        let list = PyList::empty(py);
        for r in &rows {
            list.append(row_to_dict(py, r, &self.fields)?)?;
        }
        Ok(list)
    }

    /// The remaining rows as a `pyarrow.Table` (needs pyarrow), built column by column
    /// without a Python object per cell.
    fn to_arrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.take(py, usize::MAX)?;
        crate::columns::arrow_from_rows(py, &rows, &self.fields)
    }
}
