//! Partitioned tables from Python: `PartitionedDatabase` (`strata.open_partitioned`) and
//! `PartitionedTable`, over the engine's `PartitionedDb` (`table/partitioned.rs`: a table
//! split by a hash of its primary key into N databases, each row and its index entries in
//! one partition).
//!
//! Objects follow the lifetime rules of `kv`: a closed database makes its tables and
//! row iterators raise `ClosedError`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use strata::{PartitionedDb, PartitionedTable as EngineTable};

use crate::errors;
use crate::kv::{Shared, engine};
use crate::table::{Handle, Info, TableBase, ingest_dir, schema_arg};
use crate::writer;

type PShared = Shared<PartitionedDb>;

/// A directory of N hash partitions, each a database of its own, holding partitioned
/// tables. Use `strata.open_partitioned(path, partitions=None, **options)`.
#[pyclass(frozen, module = "strata")]
pub struct PartitionedDatabase {
    shared: Arc<PShared>,
    /// The directory.
    #[pyo3(get)]
    path: String,
    /// The number of partitions.
    #[pyo3(get)]
    partitions: usize,
}

#[pymethods]
impl PartitionedDatabase {
    /// Opens `path`, creating it with `partitions` partitions if missing. `partitions`
    /// is required to create and, when given, must match the directory's; `None` opens
    /// an existing directory with the count it records.
    #[new]
    #[pyo3(signature = (path, partitions=None, **options))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        partitions: Option<usize>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = crate::options::parse(py, options)?;
        let p = path.clone();
        let db = py
            .detach(move || match partitions {
                Some(n) => PartitionedDb::open(&p, n, opts),
                None => PartitionedDb::open_existing(&p, opts),
            })
            .map_err(|e| errors::to_py(py, e))?;
        let partitions = db.count();
        let path = path.display().to_string();
        Ok(PartitionedDatabase {
            shared: Arc::new(Shared::new(db, path.clone())),
            path,
            partitions,
        })
    }

    /// Closes every partition; later calls on it, its tables and iterators raise
    /// `ClosedError`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py, PartitionedDb::close)
    }

    fn __repr__(&self) -> String {
        format!(
            "<strata.PartitionedDatabase {:?} {} partitions{}>",
            self.path,
            self.partitions,
            if self.shared.is_closed() { " closed" } else { "" }
        )
    }

    /// Creates a table in every partition (`schema` as for `Database.create_table`;
    /// unique secondary indexes are refused: an index is local to its partition).
    fn create_table(&self, py: Python<'_>, schema: &Bound<'_, PyAny>) -> PyResult<Py<PartitionedTable>> {
        let schema = schema_arg(py, schema, false)?;
        let t = self.shared.with_db(py, |db| db.create_table(schema))?;
        PartitionedTable::open(py, &self.shared, t)
    }

    /// The table `name`.
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Py<PartitionedTable>> {
        let t = self.shared.with_db(py, |db| db.table(name))?;
        PartitionedTable::open(py, &self.shared, t)
    }

    /// Names of the tables.
    fn list_tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.shared.with_db(py, |db| Ok(db.list_tables()))
    }

    /// Flushes every partition's memtable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with_db(py, |db| db.flush())
    }

    /// `Database.check` of every partition: `{"ok", "partitions": [report, ...]}`.
    #[pyo3(signature = (compact_first=false))]
    fn check<'py>(&self, py: Python<'py>, compact_first: bool) -> PyResult<Bound<'py, PyDict>> {
        let reports = self.shared.with_db(py, |db| {
            (0..db.count())
                .map(|i| {
                    db.partition(i)?
                        .check(strata::table::check::CheckOptions { compact_first })
                })
                .collect::<strata::Result<Vec<_>>>()
        })?;
        let d = PyDict::new(py);
        d.set_item("ok", reports.iter().all(|r| r.ok()))?;
        let list = PyList::empty(py);
        for r in &reports {
            list.append(crate::report::check(py, r)?)?;
        }
        d.set_item("partitions", list)?;
        Ok(d)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py).map(|()| false)
    }
}

/// A table split over the partitions: statements go to the row's partition, selects
/// gather every partition's rows merged in index order.
#[pyclass(extends = TableBase, frozen, module = "strata")]
pub struct PartitionedTable {
    shared: Arc<PShared>,
    info: Arc<Info<EngineTable>>,
}

impl PartitionedTable {
    fn open(py: Python<'_>, shared: &Arc<PShared>, table: EngineTable) -> PyResult<Py<PartitionedTable>> {
        let schema = py.detach(|| table.schema()).map_err(|e| errors::to_py(py, e))?;
        let info = Info::new(py, table.clone(), &schema)?;
        let base = TableBase::new(shared.clone(), Handle::Parts(Box::new(table)), &info);
        let me = PartitionedTable {
            shared: shared.clone(),
            info,
        };
        Py::new(py, PyClassInitializer::from(base).add_subclass(me))
    }
}

#[pymethods]
impl PartitionedTable {
    /// The number of partitions.
    #[getter]
    fn partitions(&self) -> usize {
        self.info.table.count()
    }

    /// The partition (`0..partitions`) of a row (a dict, or a tuple/list of every field
    /// when the table has fields outside its primary key) or of a primary key.
    fn partition_of(&self, py: Python<'_>, row_or_pk: &Bound<'_, PyAny>) -> PyResult<usize> {
        let pk = writer::row_or_pk(py, row_or_pk, &self.info.fields, &self.info.pk)?;
        self.info.table.partition_of_pk(&pk).map_err(|e| errors::to_py(py, e))
    }

    /// Installs the files a `TableWriter` wrote for partition `partition` (see
    /// `Table.ingest`): files recorded for another partition, or holding a row of
    /// another partition, are refused with `InvalidArgument` and nothing changes.
    #[pyo3(signature = (partition, directory, r#move=false))]
    fn ingest<'py>(
        &self,
        py: Python<'py>,
        partition: usize,
        directory: PathBuf,
        r#move: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.info.table;
        let report = engine(py, &self.shared, || {
            ingest_dir(&directory, r#move, |d, o| t.ingest(partition, d, o))
        })?;
        crate::report::ingest(py, &report)
    }
}
