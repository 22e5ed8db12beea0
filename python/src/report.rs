//! Engine reports (`Stats`, `CheckReport`, `TableStats`) as plain Python dicts.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// `d[name] = s.name` for each field `name`: the dict keys are the engine's field names.
macro_rules! set_fields {
    ($d:ident, $s:expr; $($field:ident),+ $(,)?) => {
        $($d.set_item(stringify!($field), &$s.$field)?;)+
    };
}

/// `Database.stats()`.
pub fn stats<'py>(py: Python<'py>, s: &strata::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let keyspaces = PyList::empty(py);
    for ks in &s.keyspaces {
        let k = PyDict::new(py);
        set_fields!(k, ks; name, id);
        k.set_item("bytes", ks.bytes())?;
        k.set_item("entries", ks.entries())?;
        k.set_item("tombstones", ks.tombstones())?;
        let levels = PyList::empty(py);
        for l in &ks.levels {
            let ld = PyDict::new(py);
            set_fields!(ld, l; level, runs, files, bytes, entries, tombstones);
            levels.append(ld)?;
        }
        k.set_item("levels", levels)?;
        keyspaces.append(k)?;
    }
    d.set_item("keyspaces", keyspaces)?;
    d.set_item("total_bytes", s.total_bytes())?;
    set_fields!(d, s;
        user_bytes_written, user_ops_written, wal_bytes_written, wal_syncs, flushes, flush_bytes_written,
        compactions, trivial_moves, compaction_bytes_read, compaction_bytes_written, write_amplification,
        stalls, stall_micros, memtable_bytes, immutable_memtables, block_cache_usage, block_cache_capacity,
        block_cache_hits, block_cache_misses, open_sst_files, last_seq, snapshots, background_error);
    Ok(d)
}

/// `Database.check()`.
pub fn check<'py>(py: Python<'py>, r: &strata::table::check::CheckReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ok", r.ok())?;
    set_fields!(d, r; problems);
    let files = PyDict::new(py);
    set_fields!(files, r.files; sstables, blocks, entries, logs, log_records, manifest_edits);
    d.set_item("files", files)?;
    let tables = PyList::empty(py);
    for t in &r.tables {
        let td = PyDict::new(py);
        set_fields!(td, t; name, rows);
        let ixs = PyList::empty(py);
        for i in &t.indexes {
            let id = PyDict::new(py);
            set_fields!(id, i; name, entries, valid, dirty, missing);
            ixs.append(id)?;
        }
        td.set_item("indexes", ixs)?;
        tables.append(td)?;
    }
    d.set_item("tables", tables)?;
    d.set_item("report", r.to_string())?;
    Ok(d)
}

/// `Table.stats()`.
pub fn table_stats<'py>(py: Python<'py>, s: &strata::table::TableStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    set_fields!(d, s;
        name, mode, statements, hidden_reads, unique_check_reads, update_reads, blind_writes,
        deferred_deletes_emitted, dirty_hits_skipped, primary_lookups, primary_entries, pending_purges_estimate);
    let ixs = PyList::empty(py);
    for i in &s.indexes {
        let id = PyDict::new(py);
        set_fields!(id, i; name, unique, entries, bytes, reads, hits, dirty_hits_skipped);
        ixs.append(id)?;
    }
    d.set_item("indexes", ixs)?;
    Ok(d)
}

/// `Table.ingest()` and `PartitionedTable.ingest()`.
pub fn ingest<'py>(py: Python<'py>, r: &strata::IngestReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let files = PyList::empty(py);
    let mut bytes = 0;
    for f in &r.files {
        let fd = PyDict::new(py);
        fd.set_item("source", f.source.display().to_string())?;
        fd.set_item("keyspace", &f.keyspace)?;
        for (k, v) in [
            ("number", f.number),
            ("level", u64::from(f.level)),
            ("entries", f.entries),
            ("bytes", f.bytes),
        ] {
            fd.set_item(k, v)?;
        }
        fd.set_item("linked", f.linked)?;
        bytes += f.bytes;
        files.append(fd)?;
    }
    d.set_item("files", files)?;
    d.set_item("bytes", bytes)?;
    d.set_item("global_seq", r.global_seq)?;
    d.set_item("flushed_memtable", r.flushed_memtable)?;
    Ok(d)
}
