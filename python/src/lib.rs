//! `strata._strata`: the Python extension module of Strata (PyO3, abi3).
//!
//! The Python package `strata` (in `python/strata/`) re-exports these classes and adds
//! `strata.open` and the exception classes. What each Rust module owns:
//! `kv` the database, keyspaces, batches, snapshots and scans (and the lifetime and
//! locking rules every object follows); `table` tables, transactions and selects;
//! `partitioned` partitioned databases and tables; `writer` table files built outside a
//! database and hash partitioning;
//! `multimap` multimaps and their lazy values; `convert` Python values to engine values
//! and back; `columns` Arrow column buffers; `options` the keyword options of `open`;
//! `pending` a batch's or transaction's work until commit; `report` engine reports as
//! dicts; `errors` engine errors as Python exceptions.

#![deny(clippy::unwrap_used)]

mod columns;
mod convert;
mod errors;
mod kv;
mod multimap;
mod options;
mod partitioned;
mod pending;
mod report;
mod table;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _strata(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<kv::Database>()?;
    m.add_class::<kv::Keyspace>()?;
    m.add_class::<kv::WriteBatch>()?;
    m.add_class::<kv::Snapshot>()?;
    m.add_class::<kv::Scan>()?;
    m.add_class::<table::TableBase>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<partitioned::PartitionedDatabase>()?;
    m.add_class::<partitioned::PartitionedTable>()?;
    m.add_class::<table::Transaction>()?;
    m.add_class::<table::Rows>()?;
    m.add_class::<writer::TableWriter>()?;
    m.add_class::<writer::Partitioner>()?;
    m.add_class::<multimap::MultiMap>()?;
    m.add_class::<multimap::Values>()?;
    m.add("OPTIONS", options::NAMES.to_vec())?;
    Ok(())
}
