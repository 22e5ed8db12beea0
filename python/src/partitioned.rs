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
/// tables, or some of them (`serve`). Use
/// `strata.open_partitioned(path, partitions=None, serve=None, **options)`.
#[pyclass(frozen, module = "strata")]
pub struct PartitionedDatabase {
    shared: Arc<PShared>,
    /// The directory.
    #[pyo3(get)]
    path: String,
    /// The number of partitions.
    #[pyo3(get)]
    partitions: usize,
    /// The partitions this handle serves (all unless opened with `serve`).
    #[pyo3(get)]
    serves: Vec<usize>,
}

#[pymethods]
impl PartitionedDatabase {
    /// Opens `path`, creating it with `partitions` partitions if missing. `partitions`
    /// is required to create and, when given, must match the directory's; `None` opens
    /// an existing directory with the count it records. `serve`, a list of partition
    /// numbers, opens only those: a serving node's share, whose tables refuse rows of
    /// the other partitions (`partitions` is required when the directory is new).
    #[new]
    #[pyo3(signature = (path, partitions=None, serve=None, **options))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        partitions: Option<usize>,
        serve: Option<Vec<usize>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = crate::options::parse(py, options)?;
        let p = path.clone();
        let db = py
            .detach(move || match (partitions, serve) {
                (Some(n), Some(s)) => PartitionedDb::open_serving(&p, n, &s, opts),
                (None, Some(s)) => PartitionedDb::open_existing_serving(&p, &s, opts),
                (Some(n), None) => PartitionedDb::open(&p, n, opts),
                (None, None) => PartitionedDb::open_existing(&p, opts),
            })
            .map_err(|e| errors::to_py(py, e))?;
        let partitions = db.count();
        let serves = db.serves();
        let path = path.display().to_string();
        Ok(PartitionedDatabase {
            shared: Arc::new(Shared::new(db, path.clone())),
            path,
            partitions,
            serves,
        })
    }

    /// Closes every partition; later calls on it, its tables and iterators raise
    /// `ClosedError`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py, PartitionedDb::close)
    }

    fn __repr__(&self) -> String {
        let serving = if self.serves.len() == self.partitions {
            String::new()
        } else {
            format!(", serving {:?}", self.serves)
        };
        format!(
            "<strata.PartitionedDatabase {:?} {} partitions{serving}{}>",
            self.path,
            self.partitions,
            if self.shared.is_closed() { " closed" } else { "" }
        )
    }

    /// Creates a table in every partition served (`schema` as for `Database.create_table`;
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

    /// `Database.check` of every partition served: `{"ok", "partitions": [report, ...]}`,
    /// the reports in the order of `serves`.
    #[pyo3(signature = (compact_first=false))]
    fn check<'py>(&self, py: Python<'py>, compact_first: bool) -> PyResult<Bound<'py, PyDict>> {
        let reports = self.shared.with_db(py, |db| {
            db.serves()
                .into_iter()
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

    /// The partitions served (all unless the database was opened with `serve`).
    #[getter]
    fn serves(&self) -> Vec<usize> {
        self.info.table.serves()
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
