//! Multimaps: `Database.multimap(name)` and the lazy `Values` of one key, over the
//! engine's `strata::multimap::MultiMap` (see docs/design/multimap.md). Lifetime and
//! locking rules are `kv`'s.

use std::ops::Bound as B;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strata::multimap::{MultiMap as EngineMultiMap, Values as EngineValues};

use crate::convert::{bound_arg, bytes_arg};
use crate::errors;
use crate::kv::{Prefetch, Shared, Snapshot, WriteBatch, busy, engine};

/// The multimap stored in keyspace `name` (created when missing and `create` is true).
pub fn open(py: Python<'_>, shared: &Arc<Shared>, name: &str, create: bool) -> PyResult<MultiMap> {
    // Created here only when the lookup finds none; any other error is the caller's.
    let (ks, created) = shared.with_db(py, |db| match db.keyspace(name) {
        Ok(ks) => Ok((ks, false)),
        Err(strata::Error::NotFound(_)) if create => Ok((db.keyspace_or_create(name)?, true)),
        Err(e) => Err(e),
    })?;
    let map = EngineMultiMap::new(ks);
    if created {
        // A new multimap's tables filter by key (`MultiMap::filter_by_key`): a manifest
        // edit, made with the GIL released as all engine work is.
        engine(py, shared, || map.filter_by_key())?;
    }
    Ok(MultiMap {
        shared: shared.clone(),
        map,
        name: name.to_string(),
    })
}

/// The `batch=` argument of a write: a batch to add it to, or `None` to write now.
type Batch<'a, 'py> = Option<&'a Bound<'py, WriteBatch>>;

/// The `snapshot=` argument of a read: the snapshot to read at, or `None` for now.
type At<'a, 'py> = Option<&'a Bound<'py, Snapshot>>;

/// A key -> set of values map stored in its own keyspace: each key's values are kept
/// sorted and are read back lazily, so a key may hold any number of them. With
/// `batch=`, a write is added to that `WriteBatch` instead of being applied now.
#[pyclass(frozen, module = "strata")]
pub struct MultiMap {
    shared: Arc<Shared>,
    map: EngineMultiMap,
    name: String,
}

impl MultiMap {
    /// Runs `write` now, or adds it to `batch` (a batch of the same database).
    fn write(
        &self,
        py: Python<'_>,
        batch: Batch,
        now: impl FnOnce(&EngineMultiMap) -> strata::Result<()> + Send,
        later: impl FnOnce(&EngineMultiMap, &mut strata::WriteBatch) -> strata::Result<()>,
    ) -> PyResult<()> {
        let map = &self.map;
        match batch {
            None => engine(py, &self.shared, || now(map)),
            Some(b) => b
                .get()
                .edit_of(py, &self.shared, |wb| later(map, wb))?
                .map_err(|e| errors::to_py(py, e)),
        }
    }
}

#[pymethods]
impl MultiMap {
    /// The multimap's (and its keyspace's) name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    fn __repr__(&self) -> String {
        format!("<strata.MultiMap {:?}>", self.name)
    }

    /// Adds `value` to the values of `key` (nothing if it is there already).
    #[pyo3(signature = (key, value, batch=None))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, batch: Batch) -> PyResult<()> {
        let (k, v) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        self.write(py, batch, |m| m.put(&k, &v), |m, b| m.put_in(b, &k, &v))
    }

    /// Removes `value` from the values of `key` (nothing if it is absent).
    #[pyo3(signature = (key, value, batch=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, batch: Batch) -> PyResult<()> {
        let (k, v) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        self.write(py, batch, |m| m.delete(&k, &v), |m, b| m.delete_in(b, &k, &v))
    }

    /// Removes every value of `key` at once (one range tombstone).
    #[pyo3(signature = (key, batch=None))]
    fn delete_all(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        batch: Option<&Bound<'_, WriteBatch>>,
    ) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        self.write(py, batch, |m| m.delete_all(&k), |m, b| m.delete_all_in(b, &k))
    }

    /// True if `key` holds `value` (as of `snapshot` if given).
    #[pyo3(signature = (key, value, snapshot=None))]
    fn contains(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        snapshot: At,
    ) -> PyResult<bool> {
        let (this, py) = (slf.get(), slf.py());
        let (k, v) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        let snap = Snapshot::of(py, &this.shared, snapshot)?;
        let map = &this.map;
        engine(py, &this.shared, || match &snap {
            Some(s) => map.contains_at(s, &k, &v),
            None => map.contains(&k, &v),
        })
    }

    /// A lazy iterator of the values of `key` as `bytes`, ascending, or descending with
    /// `reverse=True`; from `start` on (inclusive, in the direction of iteration) if
    /// given; as of `snapshot` if given. Memory stays bounded however many values the
    /// key holds.
    #[pyo3(signature = (key, start=None, reverse=false, snapshot=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        start: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: At,
    ) -> PyResult<Values> {
        let k = bytes_arg(key, "key")?;
        let from = bound_arg(start, "start")?.map_or(B::Unbounded, B::Included);
        let range = if reverse {
            (B::Unbounded, from)
        } else {
            (from, B::Unbounded)
        };
        let snap = Snapshot::of(py, &self.shared, snapshot)?;
        let map = &self.map;
        let values = engine(py, &self.shared, || match &snap {
            Some(s) => map.get_at(s, &k, range),
            None => map.get_range(&k, range),
        })?;
        Ok(Values {
            shared: self.shared.clone(),
            it: Mutex::new((Prefetch::new(), values)),
            reverse,
        })
    }
}

/// The values of one key, streamed lazily as `bytes`. Raises `ClosedError` once the
/// database is closed.
#[pyclass(frozen, module = "strata")]
pub struct Values {
    shared: Arc<Shared>,
    it: Mutex<(Prefetch<std::collections::VecDeque<Vec<u8>>>, EngineValues)>,
    reverse: bool,
}

#[pymethods]
impl Values {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let reverse = self.reverse;
        let mut guard = busy(self.it.try_lock())?;
        let (pf, it) = &mut *guard;
        let v = pf.next_of(py, &self.shared, || if reverse { it.next_back() } else { it.next() })?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }
}
