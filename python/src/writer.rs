//! Building table files outside any database from Python: `TableWriter` (rows sorted by
//! primary key in, the primary and index files out, for `Table.ingest`) and
//! `Partitioner` (which hash partition a row belongs to, and its encoded primary key,
//! computed where no database is open: in a Spark executor).
//!
//! Both follow the engine's definitions: the files are `strata::table::writer`'s, and a
//! row's partition is `HashFn::Fnv1aFmix64` over its encoded primary key
//! (`partition/mod.rs`), the routing partitioned tables use.

use std::path::PathBuf;

use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use strata::partition::{HashFn, check_count};
use strata::table::encoding::try_encode_key;
use strata::table::schema::{KeyType, Schema};
use strata::table::value::Value;
use strata::table::writer::{TableFiles, TableWriterOptions};

use crate::convert::{FieldSpec, to_row};
use crate::errors;
use crate::table::{field_specs, schema_arg};

/// Rows converted per release of the GIL in `add_many`.
const CHUNK: usize = 4096;

enum State {
    Open(Box<strata::table::writer::TableWriter>),
    Finished,
    Discarded,
}

/// Writes a table's files (`primary.sst`, one `index-<n>.sst` per secondary index and
/// the `TABLE` descriptor) into a new or empty directory, from rows given in increasing
/// primary-key order. `Table.ingest(directory)` installs them.
#[pyclass(frozen, module = "strata")]
pub struct TableWriter {
    fields: Vec<FieldSpec>,
    dir: PathBuf,
    table: String,
    state: Mutex<(State, u64)>,
}

impl TableWriter {
    fn with_open<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut strata::table::writer::TableWriter, &mut u64) -> PyResult<T>,
    ) -> PyResult<T> {
        let mut guard = in_use(self.state.try_lock())?;
        let (state, rows) = &mut *guard;
        match state {
            State::Open(w) => f(w, rows),
            State::Finished => Err(errors::invalid(py, "the table writer is finished")),
            State::Discarded => Err(errors::invalid(py, "the table writer was discarded")),
        }
    }

    /// Adds converted rows with the GIL released; stops at the first refused row.
    fn add_rows(&self, py: Python<'_>, rows: Vec<Vec<Value>>) -> PyResult<()> {
        self.with_open(py, |w, n| {
            let r = py.detach(|| {
                for row in &rows {
                    w.add(row)?;
                    *n += 1;
                }
                Ok(())
            });
            r.map_err(|e| errors::to_py(py, e))
        })
    }
}

#[pymethods]
impl TableWriter {
    /// `TableWriter(schema, directory, sort_memory=256 MiB, partition=None)`: `schema`
    /// is a schema text, a schema dict or a `Table`; `directory` must not exist or be
    /// empty. `partition=(i, n)` writes partition `i` of a table of `n` partitions: rows
    /// of other partitions are refused, and the descriptor records it for the ingest.
    #[new]
    #[pyo3(signature = (schema, directory, **options))]
    fn new(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        directory: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<TableWriter> {
        let schema = schema_arg(py, schema, true)?;
        let mut opts = TableWriterOptions::default();
        if let Some(o) = options {
            for (k, v) in o.iter() {
                let k: String = k.extract()?;
                match k.as_str() {
                    "sort_memory" => opts.sort_memory = v.extract()?,
                    "partition" => opts.partition = v.extract::<Option<(usize, usize)>>()?,
                    _ => {
                        return Err(errors::invalid(
                            py,
                            format!("unknown TableWriter option {k:?} (known: sort_memory, partition)"),
                        ));
                    }
                }
            }
        }
        let fields = field_specs(py, &schema);
        let table = schema.name.clone();
        let dir = directory.clone();
        let w = py
            .detach(|| strata::table::writer::TableWriter::create_with(&schema, &dir, opts))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(TableWriter {
            fields,
            dir: directory,
            table,
            state: Mutex::new((State::Open(Box::new(w)), 0)),
        })
    }

    /// The output directory.
    #[getter]
    fn directory(&self) -> String {
        self.dir.display().to_string()
    }

    /// Rows added so far.
    #[getter]
    fn rows(&self) -> PyResult<u64> {
        Ok(in_use(self.state.try_lock())?.1)
    }

    fn __repr__(&self) -> String {
        format!("<strata.TableWriter {:?} -> {}>", self.table, self.dir.display())
    }

    /// Adds a row (a dict, or a tuple in field order) whose primary key sorts after the
    /// previous row's; otherwise `InvalidArgument`, and nothing is added.
    fn add(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = to_row(py, row, &self.fields)?;
        self.add_rows(py, vec![r])
    }

    /// Adds every row of `rows` (an iterable of dicts or tuples, or a `pyarrow.Table`),
    /// in order; returns how many. Rows before a refused one stay added.
    fn add_many(&self, py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<u64> {
        if crate::columns::is_arrow_table(rows)? {
            let all = crate::columns::rows_from_arrow(py, rows, &self.fields)?;
            let n = all.len() as u64;
            self.add_rows(py, all)?;
            return Ok(n);
        }
        let mut n = 0;
        let mut chunk = Vec::with_capacity(CHUNK);
        for r in rows.try_iter()? {
            // A row that does not convert (or an iterator that raises) ends the call
            // after the rows before it are added, as a refused row does.
            let row = match r.and_then(|r| to_row(py, &r, &self.fields)) {
                Ok(row) => row,
                Err(e) => {
                    self.add_rows(py, chunk)?;
                    return Err(e);
                }
            };
            chunk.push(row);
            if chunk.len() == CHUNK {
                n += chunk.len() as u64;
                self.add_rows(py, std::mem::take(&mut chunk))?;
            }
        }
        n += chunk.len() as u64;
        self.add_rows(py, chunk)?;
        Ok(n)
    }

    /// Writes the index files and the descriptor; returns `{"directory", "rows",
    /// "bytes", "files": [{"keyspace", "path", "entries", "digest"}]}`. A unique index
    /// whose rows share a key is an `IntegrityError`; a writer without rows is refused.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut guard = in_use(self.state.try_lock())?;
        let w = match std::mem::replace(&mut guard.0, State::Finished) {
            State::Open(w) => w,
            other => {
                let done = matches!(other, State::Finished);
                guard.0 = other;
                return Err(errors::invalid(
                    py,
                    if done {
                        "the table writer is finished"
                    } else {
                        "the table writer was discarded"
                    },
                ));
            }
        };
        let files = py
            .detach(|| -> strata::Result<(TableFiles, u64)> {
                let f = w.finish()?;
                let bytes = f.bytes()?;
                Ok((f, bytes))
            })
            .map_err(|e| errors::to_py(py, e));
        let (files, bytes) = match files {
            Ok(x) => x,
            Err(e) => {
                guard.0 = State::Discarded;
                return Err(e);
            }
        };
        drop(guard);
        let d = PyDict::new(py);
        d.set_item("directory", files.dir.display().to_string())?;
        d.set_item("rows", files.rows)?;
        d.set_item("bytes", bytes)?;
        let list = PyList::empty(py);
        for (what, path, entries, digest) in files.files() {
            let f = PyDict::new(py);
            f.set_item("keyspace", what)?;
            f.set_item("path", path.display().to_string())?;
            f.set_item("entries", entries)?;
            f.set_item("digest", format!("{digest:016x}"))?;
            list.append(f)?;
        }
        d.set_item("files", list)?;
        Ok(d)
    }

    /// Abandons the writer and removes what it wrote (the directory was new or empty).
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        let mut guard = in_use(self.state.try_lock())?;
        if let State::Open(w) = std::mem::replace(&mut guard.0, State::Discarded) {
            drop(w);
            let dir = self.dir.clone();
            py.detach(|| std::fs::remove_dir_all(&dir))
                .map_err(|e| errors::to_py(py, strata::Error::io(&self.dir, e)))?;
        }
        Ok(())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Finishes the writer when the block raised nothing (and it is still open), else
    /// discards it.
    #[pyo3(signature = (exc_type=None, *_rest))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _rest: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        match exc_type {
            Some(t) if !t.is_none() => self.discard(py)?,
            _ if matches!(in_use(self.state.try_lock())?.0, State::Open(_)) => drop(self.finish(py)?),
            _ => {}
        }
        Ok(false)
    }
}

/// The primary key values of a row (a mapping, or a tuple/list of all the fields when
/// the table has fields outside its primary key) or of a key (a value, or a tuple of
/// the key's fields in key order, as `get` takes it), given the fields and the primary
/// key's positions among them. When every field is in the key, a tuple is a key.
pub fn row_or_pk(py: Python<'_>, obj: &Bound<'_, PyAny>, fields: &[FieldSpec], pk: &[usize]) -> PyResult<Vec<Value>> {
    let is_row = crate::convert::as_dict(obj)?.is_some()
        || (fields.len() > pk.len()
            && (obj.cast::<PyTuple>().is_ok() || obj.cast::<PyList>().is_ok())
            && obj.len()? == fields.len());
    if is_row {
        let row = to_row(py, obj, fields)?;
        return Ok(pk.iter().map(|&i| row[i].clone()).collect());
    }
    crate::table::pk_values(py, obj, fields, pk)
}

/// Which of `partitions` hash partitions a row of a table belongs to, computed from the
/// schema alone (no database), and the row's encoded primary key, whose byte order is
/// the primary key's order. A schema with a unique index is refused: a partitioned
/// table's indexes are local to each partition.
#[pyclass(frozen, module = "strata")]
pub struct Partitioner {
    /// The schema in its text form.
    #[pyo3(get)]
    schema: String,
    /// The table name.
    #[pyo3(get)]
    table: String,
    fields: Vec<FieldSpec>,
    pk: Vec<usize>,
    /// The primary key's fields, in key order (for Arrow columns).
    pk_fields: Vec<FieldSpec>,
    types: Vec<KeyType>,
    /// The number of partitions.
    #[pyo3(get)]
    partitions: usize,
}

impl Partitioner {
    pub fn from_schema(py: Python<'_>, schema: &Schema, count: usize) -> PyResult<Partitioner> {
        check_count(count).map_err(|e| errors::to_py(py, e))?;
        // Before any Spark job runs: the partitioned table would refuse it after.
        strata::table::partitioned::check_local_indexes(schema).map_err(|e| errors::to_py(py, e))?;
        let pk = schema.pk_positions().map_err(|e| errors::to_py(py, e))?;
        let types = pk
            .iter()
            .map(|&i| (schema.fields[i].ty, schema.fields[i].nullable))
            .collect();
        let fields = field_specs(py, schema);
        let pk_fields = pk
            .iter()
            .map(|&i| FieldSpec {
                name: fields[i].name.clone_ref(py),
                text: fields[i].text.clone(),
                ty: fields[i].ty,
                nullable: fields[i].nullable,
            })
            .collect();
        Ok(Partitioner {
            schema: schema.to_string(),
            table: schema.name.clone(),
            fields,
            pk,
            pk_fields,
            types,
            partitions: count,
        })
    }

    fn pk_values(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
        row_or_pk(py, obj, &self.fields, &self.pk)
    }

    /// The key of `values`, refused (as a `SchemaError`) where a key cannot be made,
    /// a null among them above all.
    fn encode(&self, py: Python<'_>, values: &[Value]) -> PyResult<Vec<u8>> {
        let mut k = Vec::new();
        try_encode_key(&mut k, values, &self.types).map_err(|e| errors::to_py(py, e))?;
        Ok(k)
    }
}

#[pymethods]
impl Partitioner {
    /// `Partitioner(schema, partitions)`: `schema` a schema text, dict or `Table`.
    #[new]
    fn new(py: Python<'_>, schema: &Bound<'_, PyAny>, partitions: usize) -> PyResult<Partitioner> {
        let schema = schema_arg(py, schema, true)?;
        Partitioner::from_schema(py, &schema, partitions)
    }

    /// Field names, in row order.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.fields.iter().map(|f| f.text.clone()).collect()
    }

    /// `(name, type, nullable)` of each field, in row order; `type` is one of `u64`,
    /// `i64`, `f64`, `str`, `bytes`, `bool`.
    #[getter]
    fn field_types(&self) -> Vec<(String, &'static str, bool)> {
        self.fields
            .iter()
            .map(|f| (f.text.clone(), f.ty.name(), f.nullable))
            .collect()
    }

    /// The primary key's field names, in key order.
    #[getter]
    fn primary_key(&self) -> Vec<String> {
        self.pk_fields.iter().map(|f| f.text.clone()).collect()
    }

    /// The partition of every row of a `pyarrow.Table` or `RecordBatch` (columns matched
    /// to fields by name and cast to their types; the primary key's columns must be
    /// there, other columns are ignored), as a `pyarrow.Int32Array`: no Python object
    /// per row, and the keys are encoded and hashed with the GIL released.
    fn partition_ids<'py>(&self, py: Python<'py>, batch: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if !crate::columns::is_arrow_table(batch)? {
            return Err(PyTypeError::new_err(format!(
                "partition_ids takes a pyarrow.Table or RecordBatch, not {}",
                crate::convert::type_name(batch)
            )));
        }
        let (n, cols) = crate::columns::arrow_columns(py, batch, &self.pk_fields, true)?;
        if let Some(f) = self
            .pk_fields
            .iter()
            .zip(&cols)
            .find_map(|(f, c)| c.is_none().then_some(f))
        {
            return Err(errors::schema(
                py,
                format!("no column for primary key field {}", f.text),
            ));
        }
        let ids = py
            .detach(|| -> Result<Vec<u8>, String> {
                let rows = crate::columns::decode_rows(n, &cols, &self.pk_fields)?;
                let mut out = Vec::with_capacity(n * 4);
                let mut key = Vec::new();
                for (i, row) in rows.iter().enumerate() {
                    key.clear();
                    try_encode_key(&mut key, row, &self.types).map_err(|e| format!("row {i}: {e}"))?;
                    let p = HashFn::Fnv1aFmix64.partition(&key, self.partitions);
                    // check_count keeps the count (and so every partition) within i32.
                    out.extend_from_slice(&(p as i32).to_le_bytes());
                }
                Ok(out)
            })
            .map_err(|m| errors::schema(py, m))?;
        py.import("strata._arrow")?
            .call_method1("int32_array", (PyBytes::new(py, &ids),))
    }

    /// The encoded primary key of a row or key (see `partition_of`): bytes that sort
    /// as the primary keys do.
    fn key<'py>(&self, py: Python<'py>, row_or_pk: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.pk_values(py, row_or_pk)?;
        Ok(PyBytes::new(py, &self.encode(py, &v)?))
    }

    /// The partition (`0..partitions`) of a row (a dict, or a tuple/list of every field
    /// when the table has fields outside its primary key) or of a primary key (a value,
    /// or a tuple of the key's fields).
    fn partition_of(&self, py: Python<'_>, row_or_pk: &Bound<'_, PyAny>) -> PyResult<usize> {
        let v = self.pk_values(py, row_or_pk)?;
        Ok(HashFn::Fnv1aFmix64.partition(&self.encode(py, &v)?, self.partitions))
    }

    /// The partition of an encoded primary key (as `key` returns it).
    fn partition_of_key(&self, key: &[u8]) -> usize {
        HashFn::Fnv1aFmix64.partition(key, self.partitions)
    }

    /// `(key, row)` for each row of `rows` (tuples in field order or dicts), the row as
    /// a tuple in field order: the pairs a Spark job partitions and sorts by key.
    fn keyed<'py>(&self, py: Python<'py>, rows: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for r in rows.try_iter()? {
            let r = r?;
            let row = to_row(py, &r, &self.fields)?;
            let pk: Vec<Value> = self.pk.iter().map(|&i| row[i].clone()).collect();
            let tuple = if r.cast::<PyTuple>().is_ok() {
                r
            } else {
                let cells: Vec<Bound<'py, PyAny>> = row.iter().map(|v| crate::convert::from_value(py, v)).collect();
                PyTuple::new(py, cells)?.into_any()
            };
            out.append((PyBytes::new(py, &self.encode(py, &pk)?), tuple))?;
        }
        Ok(out)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String, usize))> {
        let me = slf.get();
        Ok((slf.get_type().into_any(), (me.schema.clone(), me.partitions)))
    }

    fn __repr__(&self) -> String {
        format!("<strata.Partitioner {} partitions: {}>", self.partitions, self.schema)
    }
}

/// A guard of the writer's lock, taken without waiting (as `kv::busy` for iterators): a
/// second thread using the writer at the same moment gets an error.
fn in_use<G>(guard: Option<G>) -> PyResult<G> {
    guard.ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("the table writer is in use by another thread"))
}
