//! `strata.open(path, **options)`: keyword options to [`strata::Options`].

use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata::options::Compression;
use strata::{Options, RecoveryMode, SyncPolicy};

use crate::errors;

/// The option names `open` accepts (also listed in the stubs and docs/python.md).
pub const NAMES: &[&str] = &[
    "create_if_missing",
    "error_if_exists",
    "sync",
    "memtable_budget",
    "max_immutable_memtables",
    "size_ratio",
    "runs_per_level",
    "lazy_leveling",
    "l0_compaction_trigger",
    "l0_stall_trigger",
    "target_file_size",
    "block_size",
    "bloom_fpr",
    "compression",
    "block_cache_bytes",
    "max_open_files",
    "background_threads",
    "deferred_sort_memory",
    "delete_persistence_threshold",
    "tombstone_density_trigger",
    "direct_reads",
    "recovery_mode",
    "max_manifest_file_size",
    "read_only",
];

/// Options from `open`'s keyword arguments; unknown names are a `TypeError` like any
/// unexpected keyword, bad values `InvalidArgument`.
pub fn parse(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kwargs) = kwargs else { return Ok(o) };
    for (k, v) in kwargs.iter() {
        let name: String = k.extract()?;
        let bad = |what: &str| errors::invalid(py, format!("option {name}: expected {what}, got {v}"));
        let int = || v.extract::<usize>().map_err(|_| bad("a non-negative int"));
        let flag = || v.extract::<bool>().map_err(|_| bad("a bool"));
        let float = || v.extract::<f64>().map_err(|_| bad("a float"));
        let text = || v.extract::<String>().map_err(|_| bad("a str"));
        match name.as_str() {
            "create_if_missing" => o.create_if_missing = flag()?,
            "error_if_exists" => o.error_if_exists = flag()?,
            "sync" => o.sync = choice(&text()?, SYNC_POLICIES).map_err(|e| bad(&e))?,
            "memtable_budget" => o.memtable_budget = int()?,
            "max_immutable_memtables" => o.max_immutable_memtables = int()?,
            "size_ratio" => o.size_ratio = float()?,
            "runs_per_level" => o.runs_per_level = int()?,
            "lazy_leveling" => o.lazy_leveling = flag()?,
            "l0_compaction_trigger" => o.l0_compaction_trigger = int()?,
            "l0_stall_trigger" => o.l0_stall_trigger = int()?,
            "target_file_size" => o.target_file_size = int()? as u64,
            "block_size" => o.block_size = int()?,
            "bloom_fpr" => o.bloom_fpr = float()?,
            "compression" => o.compression = choice(&text()?, COMPRESSIONS).map_err(|e| bad(&e))?,
            "block_cache_bytes" => o.block_cache_bytes = int()?,
            "max_open_files" => o.max_open_files = int()?,
            "background_threads" => o.background_threads = int()?,
            "deferred_sort_memory" => o.deferred_sort_memory = int()?,
            "delete_persistence_threshold" => {
                o.delete_persistence_threshold = if v.is_none() {
                    None
                } else {
                    let s = float()?;
                    match Duration::try_from_secs_f64(s) {
                        Ok(d) if s > 0.0 => Some(d),
                        _ => return Err(bad("a positive number of seconds (at most about 1.8e19)")),
                    }
                }
            }
            "tombstone_density_trigger" => {
                o.tombstone_density_trigger = if v.is_none() { None } else { Some(float()?) }
            }
            "direct_reads" => o.direct_reads = flag()?,
            "recovery_mode" => o.recovery_mode = choice(&text()?, RECOVERY_MODES).map_err(|e| bad(&e))?,
            "max_manifest_file_size" => o.max_manifest_file_size = int()? as u64,
            "read_only" => o.read_only = flag()?,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "open() got an unexpected option {name:?}; options are: {}",
                    NAMES.join(", ")
                )));
            }
        }
    }
    o.validate().map_err(|e| errors::to_py(py, e))?;
    Ok(o)
}

/// The values of the options that name one, by their spelling in Python.
const SYNC_POLICIES: &[(&str, SyncPolicy)] = &[
    ("none", SyncPolicy::None),
    ("every_batch", SyncPolicy::EveryBatch),
    ("group_commit", SyncPolicy::GroupCommit),
];
const COMPRESSIONS: &[(&str, Compression)] = &[("none", Compression::None), ("lz4", Compression::Lz4)];
const RECOVERY_MODES: &[(&str, RecoveryMode)] = &[
    ("tolerate_corrupted_tail", RecoveryMode::TolerateCorruptedTail),
    ("absolute_consistency", RecoveryMode::AbsoluteConsistency),
    ("point_in_time", RecoveryMode::PointInTime),
    ("skip_any_corrupted_records", RecoveryMode::SkipAnyCorruptedRecords),
];

/// The value spelled `text` among `choices`; otherwise the choices as an error's
/// "expected" text, e.g. `'none' or 'lz4'`.
fn choice<T: Clone>(text: &str, choices: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, v)) = choices.iter().find(|(name, _)| *name == text) {
        return Ok(v.clone());
    }
    let names: Vec<String> = choices.iter().map(|(name, _)| format!("'{name}'")).collect();
    Err(match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    })
}
