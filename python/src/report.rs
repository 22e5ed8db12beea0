//! Engine reports (`Stats`, `CheckReport`, `TableStats`) as plain Python dicts.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// `Database.stats()`.
pub fn stats<'py>(py: Python<'py>, s: &strata::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let keyspaces = PyList::empty(py);
    for ks in &s.keyspaces {
        let k = PyDict::new(py);
        k.set_item("name", &ks.name)?;
        k.set_item("id", ks.id)?;
        k.set_item("bytes", ks.bytes())?;
        k.set_item("entries", ks.entries())?;
        k.set_item("tombstones", ks.tombstones())?;
        let levels = PyList::empty(py);
        for l in &ks.levels {
            let ld = PyDict::new(py);
            ld.set_item("level", l.level)?;
            ld.set_item("runs", l.runs)?;
            ld.set_item("files", l.files)?;
            ld.set_item("bytes", l.bytes)?;
            ld.set_item("entries", l.entries)?;
            ld.set_item("tombstones", l.tombstones)?;
            levels.append(ld)?;
        }
        k.set_item("levels", levels)?;
        keyspaces.append(k)?;
    }
    d.set_item("keyspaces", keyspaces)?;
    d.set_item("total_bytes", s.total_bytes())?;
    d.set_item("user_bytes_written", s.user_bytes_written)?;
    d.set_item("user_ops_written", s.user_ops_written)?;
    d.set_item("wal_bytes_written", s.wal_bytes_written)?;
    d.set_item("wal_syncs", s.wal_syncs)?;
    d.set_item("flushes", s.flushes)?;
    d.set_item("flush_bytes_written", s.flush_bytes_written)?;
    d.set_item("compactions", s.compactions)?;
    d.set_item("trivial_moves", s.trivial_moves)?;
    d.set_item("compaction_bytes_read", s.compaction_bytes_read)?;
    d.set_item("compaction_bytes_written", s.compaction_bytes_written)?;
    d.set_item("write_amplification", s.write_amplification)?;
    d.set_item("stalls", s.stalls)?;
    d.set_item("stall_micros", s.stall_micros)?;
    d.set_item("memtable_bytes", s.memtable_bytes)?;
    d.set_item("immutable_memtables", s.immutable_memtables)?;
    d.set_item("block_cache_usage", s.block_cache_usage)?;
    d.set_item("block_cache_capacity", s.block_cache_capacity)?;
    d.set_item("block_cache_hits", s.block_cache_hits)?;
    d.set_item("block_cache_misses", s.block_cache_misses)?;
    d.set_item("open_sst_files", s.open_sst_files)?;
    d.set_item("last_seq", s.last_seq)?;
    d.set_item("snapshots", s.snapshots)?;
    d.set_item("background_error", s.background_error.clone())?;
    Ok(d)
}

/// `Database.check()`.
pub fn check<'py>(py: Python<'py>, r: &strata::table::check::CheckReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ok", r.ok())?;
    d.set_item("problems", r.problems.clone())?;
    let files = PyDict::new(py);
    files.set_item("sstables", r.files.sstables)?;
    files.set_item("blocks", r.files.blocks)?;
    files.set_item("entries", r.files.entries)?;
    files.set_item("logs", r.files.logs)?;
    files.set_item("log_records", r.files.log_records)?;
    files.set_item("manifest_edits", r.files.manifest_edits)?;
    d.set_item("files", files)?;
    let tables = PyList::empty(py);
    for t in &r.tables {
        let td = PyDict::new(py);
        td.set_item("name", &t.name)?;
        td.set_item("rows", t.rows)?;
        let ixs = PyList::empty(py);
        for i in &t.indexes {
            let id = PyDict::new(py);
            id.set_item("name", &i.name)?;
            id.set_item("entries", i.entries)?;
            id.set_item("valid", i.valid)?;
            id.set_item("dirty", i.dirty)?;
            id.set_item("missing", i.missing)?;
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
    d.set_item("name", &s.name)?;
    d.set_item("mode", &s.mode)?;
    d.set_item("statements", s.statements)?;
    d.set_item("hidden_reads", s.hidden_reads)?;
    d.set_item("unique_check_reads", s.unique_check_reads)?;
    d.set_item("update_reads", s.update_reads)?;
    d.set_item("blind_writes", s.blind_writes)?;
    d.set_item("deferred_deletes_emitted", s.deferred_deletes_emitted)?;
    d.set_item("dirty_hits_skipped", s.dirty_hits_skipped)?;
    d.set_item("primary_lookups", s.primary_lookups)?;
    d.set_item("primary_entries", s.primary_entries)?;
    d.set_item("pending_purges_estimate", s.pending_purges_estimate)?;
    let ixs = PyList::empty(py);
    for i in &s.indexes {
        let id = PyDict::new(py);
        id.set_item("name", &i.name)?;
        id.set_item("unique", i.unique)?;
        id.set_item("entries", i.entries)?;
        id.set_item("bytes", i.bytes)?;
        id.set_item("reads", i.reads)?;
        id.set_item("hits", i.hits)?;
        id.set_item("dirty_hits_skipped", i.dirty_hits_skipped)?;
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
