//! The key-value API: `Database`, `Keyspace`, `WriteBatch`, `Snapshot` and `Scan`.
//!
//! Lifetimes: every Python object of a database holds an `Arc<Shared>`. `close()` sets
//! `Shared::closed` and closes the engine; every later call on any of these objects
//! (iterators and snapshots included) raises `ClosedError` instead of touching it.
//!
//! Locking: the GIL is released (`py.detach`) around every call into the engine. No
//! thread may wait for a lock while holding the GIL if the lock's holder may need the
//! GIL to let go of it: `Shared::db` is only locked with the GIL released; the mutexes of
//! batches, transactions and snapshots are never held across a release; an iterator's
//! mutex is held across the release of its read-ahead, so it is only ever tried
//! ([`busy`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::{PyKeyError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use strata::{Db, Keyspace as EngineKeyspace};

use crate::convert::{bound_arg, bytes_arg};
use crate::errors;
use crate::pending::Pending;

/// What every object of one open database shares: a `Db`, or a `PartitionedDb` for
/// `strata.open_partitioned`.
pub struct Shared<D: Send = Db> {
    /// `None` once closed.
    db: RwLock<Option<D>>,
    closed: AtomicBool,
    pub path: String,
}

impl<D: Send> Drop for Shared<D> {
    /// A database never closed shuts down when its last object goes: it syncs its WAL
    /// and waits for a running compaction, which must not stop every Python thread.
    fn drop(&mut self) {
        let Some(db) = self.db.get_mut().take() else {
            return;
        };
        // Not attached (the interpreter shutting down): the closure, and the database
        // in it, is dropped unrun, here.
        let _ = Python::try_attach(move |py| py.detach(move || drop(db)));
    }
}

/// Objects that raise `ClosedError` once their database is closed.
pub trait Alive {
    /// `ClosedError` once `close()` has begun.
    fn check(&self, py: Python<'_>) -> PyResult<()>;
}

impl<D: Send> Alive for Shared<D> {
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(errors::closed(py));
        }
        Ok(())
    }
}

impl<T: Alive + ?Sized> Alive for Arc<T> {
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        (**self).check(py)
    }
}

impl<D: Send + Sync> Shared<D> {
    /// An open database at `path`.
    pub fn new(db: D, path: String) -> Self {
        Shared {
            db: RwLock::new(Some(db)),
            closed: AtomicBool::new(false),
            path,
        }
    }

    /// True once `close()` has begun.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Runs `f` on the engine with the GIL released.
    pub fn with_db<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&D) -> strata::Result<T> + Send) -> PyResult<T> {
        self.check(py)?;
        py.detach(|| {
            let g = self.db.read();
            match g.as_ref() {
                Some(db) => f(db),
                None => Err(strata::Error::Closed),
            }
        })
        .map_err(|e| errors::to_py(py, e))
    }

    /// Marks the database closed and hands it to `close` with the GIL released (once:
    /// closing twice does nothing).
    pub fn close(&self, py: Python<'_>, close: impl FnOnce(D) -> strata::Result<()> + Send) -> PyResult<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        py.detach(|| match self.db.write().take() {
            Some(db) => close(db),
            None => Ok(()),
        })
        .map_err(|e| errors::to_py(py, e))
    }
}

impl Shared<Db> {
    /// The engine keyspace `name`, created when missing and `create` is true.
    pub fn keyspace(&self, py: Python<'_>, name: &str, create: bool) -> PyResult<EngineKeyspace> {
        self.with_db(py, |db| {
            if create {
                db.keyspace_or_create(name)
            } else {
                db.keyspace(name)
            }
        })
    }
}

/// Runs `f` with the GIL released and maps its error.
pub fn engine<T: Send>(
    py: Python<'_>,
    shared: &(impl Alive + ?Sized),
    f: impl FnOnce() -> strata::Result<T> + Send,
) -> PyResult<T> {
    shared.check(py)?;
    py.detach(f).map_err(|e| errors::to_py(py, e))
}

/// A class's one `#[pymethods]` block (PyO3 allows one per class): its own methods, and
/// the methods several classes share, written once here:
/// * `key_value: field, " of ..."`: the key-value methods of `Database` (on its default
///   keyspace) and `Keyspace`, on the engine keyspace `self.field`; the text ends their
///   docstrings;
/// * `with_block: |this, py, exc_type| exit`: `__enter__` returning the object, and
///   `__exit__` running `exit` (a `PyResult<()>`) and returning False (exceptions of the
///   block propagate).
macro_rules! methods {
    (
        $class:ident,
        $(key_value: $ks:ident, $of:literal,)?
        $(with_block: |$this:ident, $py:ident, $exc_type:ident| $exit:expr,)?
        { $($own:tt)* }
    ) => {
        #[pymethods]
        impl $class {
            $($own)*

            $(
                #[doc = concat!("Sets `key` to `value`", $of, ".")]
                fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
                    put(py, &self.shared, &self.$ks, key, value)
                }

                #[doc = concat!("The value of `key`", $of, ", or `default`.")]
                #[pyo3(signature = (key, default=None))]
                fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
                    get(py, &self.shared, &self.$ks, key, default)
                }

                #[doc = concat!("Deletes `key`", $of, " (no error if absent).")]
                fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
                    delete(py, &self.shared, &self.$ks, key)
                }

                #[doc = concat!("Deletes every key in `[start, end)`", $of, ".")]
                fn delete_range(&self, py: Python<'_>, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
                    delete_range(py, &self.shared, &self.$ks, start, end)
                }

                fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                    getitem(py, &self.shared, &self.$ks, key)
                }

                fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
                    put(py, &self.shared, &self.$ks, key, value)
                }

                fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
                    delete(py, &self.shared, &self.$ks, key)
                }

                fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                    contains(py, &self.shared, &self.$ks, key)
                }

                #[doc = concat!("A lazy iterator of `(key, value)` over `[start, end)`", $of)]
                #[doc = " (`None` = unbounded), ascending, or descending with `reverse=True`."]
                #[pyo3(signature = (start=None, end=None, reverse=false))]
                fn scan(
                    slf: &Bound<'_, Self>,
                    start: Option<&Bound<'_, PyAny>>,
                    end: Option<&Bound<'_, PyAny>>,
                    reverse: bool,
                ) -> PyResult<Scan> {
                    let this = slf.get();
                    scan(slf.py(), &this.shared, &this.$ks, None, start, end, reverse, false)
                }

                #[doc = concat!("Iterates over the keys", $of, " in order.")]
                fn __iter__(&self, py: Python<'_>) -> PyResult<Scan> {
                    scan(py, &self.shared, &self.$ks, None, None, None, false, true)
                }
            )?

            $(
                fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
                    slf
                }

                #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
                fn __exit__(
                    slf: &Bound<'_, Self>,
                    exc_type: Option<&Bound<'_, PyAny>>,
                    _exc: Option<&Bound<'_, PyAny>>,
                    _tb: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<bool> {
                    let ($this, $py, $exc_type) = (slf.get(), slf.py(), exc_type);
                    $exit?;
                    Ok(false)
                }
            )?
        }
    };
}
pub(crate) use methods;

/// An open database: the default keyspace's key-value API, plus keyspaces, batches,
/// snapshots and tables. Use `strata.open(path, **options)`.
#[pyclass(frozen, module = "strata")]
pub struct Database {
    pub shared: Arc<Shared>,
    default: EngineKeyspace,
}

methods!(
    Database,
    key_value: default, " of the default keyspace",
    with_block: |this, py, _exc_type| this.close(py),
{
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(py: Python<'_>, path: std::path::PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let opts = crate::options::parse(py, options)?;
        let p = path.clone();
        let db = py
            .detach(move || Db::open(&p, opts))
            .map_err(|e| errors::to_py(py, e))?;
        let default = db.default_keyspace();
        Ok(Database {
            shared: Arc::new(Shared::new(db, path.display().to_string())),
            default,
        })
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> String {
        self.shared.path.clone()
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Flushes and closes the database; later calls on it, its keyspaces, tables,
    /// iterators and snapshots raise `ClosedError`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py, Db::close)
    }

    fn __repr__(&self) -> String {
        format!(
            "<strata.Database {:?}{}>",
            self.shared.path,
            if self.closed() { " closed" } else { "" }
        )
    }

    /// The keyspace `name`, created when missing and `create` is true.
    #[pyo3(signature = (name, create=true))]
    fn keyspace(&self, py: Python<'_>, name: &str, create: bool) -> PyResult<Keyspace> {
        let ks = self.shared.keyspace(py, name, create)?;
        Ok(Keyspace {
            shared: self.shared.clone(),
            ks,
        })
    }

    /// The multimap stored in keyspace `name` (see docs/python.md), created when missing
    /// and `create` is true.
    #[pyo3(signature = (name, create=true))]
    fn multimap(&self, py: Python<'_>, name: &str, create: bool) -> PyResult<crate::multimap::MultiMap> {
        crate::multimap::open(py, &self.shared, name, create)
    }

    /// Names of the keyspaces (tables' own keyspaces are left out).
    fn keyspaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.shared.with_db(py, |db| {
            Ok(db
                .list_keyspaces()
                .into_iter()
                .filter(|n| !n.starts_with(strata::db::RESERVED_PREFIX))
                .collect())
        })
    }

    /// Drops keyspace `name` and its data.
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.shared.with_db(py, |db| db.drop_keyspace(name))
    }

    /// A new atomic batch; `with db.batch() as b:` commits it when the block ends
    /// without an exception.
    fn batch(&self, py: Python<'_>) -> PyResult<WriteBatch> {
        self.shared.check(py)?;
        Ok(WriteBatch {
            shared: self.shared.clone(),
            default: self.default.clone(),
            batch: Pending::new(strata::WriteBatch::new(), "batch"),
        })
    }

    /// A consistent read view of every keyspace and table as of now.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let snap = self.shared.with_db(py, |db| Ok(db.snapshot()))?;
        Ok(Snapshot {
            shared: self.shared.clone(),
            default: self.default.clone(),
            snap: Mutex::new(Some(snap)),
        })
    }

    /// Writes the memtable to disk.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with_db(py, |db| db.flush())
    }

    /// Compacts every keyspace fully (flushing first).
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with_db(py, |db| db.compact_range())
    }

    /// The engine's statistics as a dict (see docs/python.md).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.shared.with_db(py, |db| Ok(db.stats()))?;
        crate::report::stats(py, &s)
    }

    /// Creates a table. `schema` is the text form, e.g. `"table users (id u64, name
    /// str, age i64) primary key (id) index by_age (age) deferred"`, or a dict (see
    /// docs/python.md).
    fn create_table(&self, py: Python<'_>, schema: &Bound<'_, PyAny>) -> PyResult<Py<crate::table::Table>> {
        crate::table::create(py, &self.shared, schema)
    }

    /// The existing table `name` (`NotFoundError` if there is none).
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Py<crate::table::Table>> {
        crate::table::open(py, &self.shared, name)
    }

    /// Names of all tables.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.shared.with_db(py, |db| Ok(db.list_tables()))
    }

    /// Drops table `name` with its indexes and rows.
    fn drop_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.shared.with_db(py, |db| db.drop_table(name))
    }

    /// Reads every block of every file and verifies that table indexes agree with their
    /// rows; returns a report dict whose `ok` is false when problems were found.
    #[pyo3(signature = (compact_first=false))]
    fn check<'py>(&self, py: Python<'py>, compact_first: bool) -> PyResult<Bound<'py, PyDict>> {
        let r = self
            .shared
            .with_db(py, |db| db.check(strata::table::check::CheckOptions { compact_first }))?;
        crate::report::check(py, &r)
    }
});

/// A named keyspace: an independent sorted key-value tree of the database, with the
/// same methods as the database's default keyspace.
#[pyclass(frozen, module = "strata")]
pub struct Keyspace {
    shared: Arc<Shared>,
    ks: EngineKeyspace,
}

methods!(Keyspace, key_value: ks, "", {
    /// The keyspace name.
    #[getter]
    fn name(&self) -> String {
        self.ks.name().to_string()
    }

    fn __repr__(&self) -> String {
        format!("<strata.Keyspace {:?}>", self.ks.name())
    }
});

fn put(
    py: Python<'_>,
    shared: &Shared,
    ks: &EngineKeyspace,
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let k = bytes_arg(key, "key")?;
    let v = bytes_arg(value, "value")?;
    engine(py, shared, || ks.put(&k, &v))
}

fn get(
    py: Python<'_>,
    shared: &Shared,
    ks: &EngineKeyspace,
    key: &Bound<'_, PyAny>,
    default: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let k = bytes_arg(key, "key")?;
    let v = engine(py, shared, || ks.get(&k))?;
    Ok(value_or(py, v, default))
}

/// A found value as `bytes`, else `default` (`None` when not given).
fn value_or(py: Python<'_>, v: Option<Vec<u8>>, default: Option<Py<PyAny>>) -> Py<PyAny> {
    match v {
        Some(v) => PyBytes::new(py, &v).into_any().unbind(),
        None => default.unwrap_or_else(|| py.None()),
    }
}

fn getitem(py: Python<'_>, shared: &Shared, ks: &EngineKeyspace, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let k = bytes_arg(key, "key")?;
    match engine(py, shared, || ks.get(&k))? {
        Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
        None => Err(PyKeyError::new_err(key.clone().unbind())),
    }
}

fn contains(py: Python<'_>, shared: &Shared, ks: &EngineKeyspace, key: &Bound<'_, PyAny>) -> PyResult<bool> {
    let k = bytes_arg(key, "key")?;
    Ok(engine(py, shared, || ks.get(&k))?.is_some())
}

fn delete(py: Python<'_>, shared: &Shared, ks: &EngineKeyspace, key: &Bound<'_, PyAny>) -> PyResult<()> {
    let k = bytes_arg(key, "key")?;
    engine(py, shared, || ks.delete(&k))
}

fn delete_range(
    py: Python<'_>,
    shared: &Shared,
    ks: &EngineKeyspace,
    start: &Bound<'_, PyAny>,
    end: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let s = bytes_arg(start, "start")?;
    let e = bytes_arg(end, "end")?;
    engine(py, shared, || ks.delete_range(&s[..]..&e[..]))
}

#[allow(clippy::too_many_arguments)]
fn scan(
    py: Python<'_>,
    shared: &Arc<Shared>,
    ks: &EngineKeyspace,
    snap: Option<&strata::Snapshot>,
    start: Option<&Bound<'_, PyAny>>,
    end: Option<&Bound<'_, PyAny>>,
    reverse: bool,
    keys_only: bool,
) -> PyResult<Scan> {
    use std::ops::Bound as B;
    let lo = bound_arg(start, "start")?.map_or(B::Unbounded, B::Included);
    let hi = bound_arg(end, "end")?.map_or(B::Unbounded, B::Excluded);
    let it = engine(py, shared, || match snap {
        Some(s) => s.scan(ks, (lo, hi)),
        None => ks.scan((lo, hi)),
    })?;
    Ok(Scan {
        shared: shared.clone(),
        it: Mutex::new((Prefetch::new(), it)),
        reverse,
        keys_only,
    })
}

/// The engine keyspace a `keyspace=` argument names: `default` when `None`; an
/// `InvalidArgument` when it belongs to another database.
fn target<'a>(
    py: Python<'_>,
    shared: &Arc<Shared>,
    default: &'a EngineKeyspace,
    ks: Option<&'a Bound<'_, Keyspace>>,
) -> PyResult<&'a EngineKeyspace> {
    match ks {
        None => Ok(default),
        Some(k) => {
            let k = k.get();
            if !Arc::ptr_eq(&k.shared, shared) {
                return Err(errors::invalid(py, "the keyspace belongs to another database"));
            }
            Ok(&k.ks)
        }
    }
}

/// A lazy iterator over a key range, yielding `(key, value)` tuples of `bytes` (or keys
/// alone when iterating a keyspace directly). Raises `ClosedError` once the database is
/// closed.
#[pyclass(frozen, module = "strata")]
pub struct Scan {
    shared: Arc<Shared>,
    it: Mutex<(Prefetch<Entries>, strata::Scan)>,
    reverse: bool,
    keys_only: bool,
}

/// A guard of an iterator's lock. Never waited for while holding the GIL: a second
/// thread advancing the same iterator at the same moment gets an error, as a generator
/// does.
pub fn busy<G>(guard: Option<G>) -> PyResult<G> {
    guard.ok_or_else(|| PyRuntimeError::new_err("the iterator is being advanced by another thread"))
}

/// Items read ahead of the caller, so that the GIL is released once per run of items
/// rather than per item: a scan reads at a fixed snapshot, so reading ahead changes no
/// result. Runs start short (a caller may stop early) and double up to 512. `B` holds
/// them: a queue of items, or [`Entries`] for a scan's keys and values.
pub struct Prefetch<B> {
    pub buf: B,
    pub run: usize,
    pub done: bool,
    /// An error met while reading ahead, raised once the items before it are taken.
    pub err: Option<strata::Error>,
}

/// What a [`Prefetch`] reads ahead into.
pub trait Ahead: Default + Send {
    /// Items not taken yet.
    fn remaining(&self) -> usize;
}

impl<T: Send> Ahead for VecDeque<T> {
    fn remaining(&self) -> usize {
        self.len()
    }
}

/// A run of a scan's entries, keys and values one after another in one buffer: read
/// ahead without an allocation per entry (`strata::Scan::next_run`), then copied into
/// the `bytes` objects handed out.
#[derive(Default)]
pub struct Entries {
    bytes: Vec<u8>,
    /// Per entry, where its key ends and where its value ends in `bytes` (its key
    /// starts where the entry before ends).
    ends: Vec<(usize, usize)>,
    /// Entries before this one were taken.
    next: usize,
}

impl Entries {
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.next = 0;
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((key_end, self.bytes.len()));
    }

    /// The next entry's key and value.
    fn pop_front(&mut self) -> Option<(&[u8], &[u8])> {
        let i = self.next;
        let &(key_end, end) = self.ends.get(i)?;
        let start = match i.checked_sub(1) {
            Some(before) => self.ends.get(before).map_or(0, |e| e.1),
            None => 0,
        };
        self.next += 1;
        Some((self.bytes.get(start..key_end)?, self.bytes.get(key_end..end)?))
    }
}

impl Ahead for Entries {
    fn remaining(&self) -> usize {
        self.ends.len().saturating_sub(self.next)
    }
}

impl<B: Ahead> Prefetch<B> {
    pub fn new() -> Self {
        Prefetch {
            buf: B::default(),
            run: 8,
            done: false,
            err: None,
        }
    }

    /// The next item, `take`n from the buffer, after refilling it with `fill(n)` (up to
    /// `n` items; fewer means the end) when none is left.
    pub fn next_with<R>(
        &mut self,
        py: Python<'_>,
        shared: &(impl Alive + ?Sized),
        fill: impl FnOnce(usize, &mut B) -> strata::Result<()> + Send,
        take: impl FnOnce(&mut B) -> Option<R>,
    ) -> PyResult<Option<R>> {
        shared.check(py)?;
        if self.buf.remaining() == 0 && !self.done {
            let n = self.run;
            self.run = (self.run * 2).min(512);
            let buf = &mut self.buf;
            let r = py.detach(|| fill(n, buf));
            if self.buf.remaining() < n {
                self.done = true;
            }
            if let Err(e) = r {
                self.done = true;
                self.err = Some(e);
            }
        }
        match take(&mut self.buf) {
            Some(item) => Ok(Some(item)),
            None => match self.err.take() {
                Some(e) => Err(errors::to_py(py, e)),
                None => Ok(None),
            },
        }
    }
}

impl<T: Send> Prefetch<VecDeque<T>> {
    /// [`next_with`](Self::next_with), refilling from `step` (an iterator's `next` or
    /// `next_back`) until it ends or a run is read.
    pub fn next_of(
        &mut self,
        py: Python<'_>,
        shared: &(impl Alive + ?Sized),
        mut step: impl FnMut() -> Option<strata::Result<T>> + Send,
    ) -> PyResult<Option<T>> {
        let fill = |n, buf: &mut VecDeque<T>| {
            for _ in 0..n {
                match step() {
                    Some(r) => buf.push_back(r?),
                    None => break,
                }
            }
            Ok(())
        };
        self.next_with(py, shared, fill, VecDeque::pop_front)
    }
}

#[pymethods]
impl Scan {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let (reverse, keys_only) = (self.reverse, self.keys_only);
        let mut guard = busy(self.it.try_lock())?;
        let (pf, it) = &mut *guard;
        let fill = |n, buf: &mut Entries| {
            buf.clear();
            let push = |k: &[u8], v: &[u8]| buf.push(k, if keys_only { &[] } else { v });
            if reverse {
                it.next_back_run(n, push)
            } else {
                it.next_run(n, push)
            }
            .map(drop)
        };
        let take = |buf: &mut Entries| {
            buf.pop_front().map(|(k, v)| -> PyResult<Py<PyAny>> {
                let k = PyBytes::new(py, k);
                Ok(if keys_only {
                    k.into_any().unbind()
                } else {
                    PyTuple::new(py, [k, PyBytes::new(py, v)])?.into_any().unbind()
                })
            })
        };
        pf.next_with(py, &self.shared, fill, take)?.transpose()
    }
}

/// An atomic batch of puts and deletes, possibly across keyspaces. Used as a context
/// manager it commits when the block ends without an exception and discards itself
/// otherwise.
#[pyclass(frozen, module = "strata")]
pub struct WriteBatch {
    shared: Arc<Shared>,
    default: EngineKeyspace,
    batch: Pending<strata::WriteBatch>,
}

impl WriteBatch {
    fn target<'a>(&'a self, py: Python<'_>, ks: Option<&'a Bound<'_, Keyspace>>) -> PyResult<&'a EngineKeyspace> {
        // As every object of a closed database, an edit raises `ClosedError`.
        self.shared.check(py)?;
        target(py, &self.shared, &self.default, ks)
    }

    /// Runs `f` on the open batch, which must belong to the database of `shared`.
    pub fn edit_of<R>(
        &self,
        py: Python<'_>,
        shared: &Arc<Shared>,
        f: impl FnOnce(&mut strata::WriteBatch) -> R,
    ) -> PyResult<R> {
        if !Arc::ptr_eq(shared, &self.shared) {
            return Err(errors::invalid(py, "the batch belongs to another database"));
        }
        self.shared.check(py)?;
        self.batch.edit(py, f)
    }
}

methods!(
    WriteBatch,
    with_block: |this, py, exc_type| this.batch.exit(exc_type, || this.commit(py)),
{
    /// Adds a put of `key` (in `keyspace`, default: the default keyspace).
    #[pyo3(signature = (key, value, keyspace=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let ks = self.target(py, keyspace)?;
        let k = bytes_arg(key, "key")?;
        let v = bytes_arg(value, "value")?;
        self.batch.edit(py, |b| b.put(ks, &k, &v))
    }

    /// Adds a delete of `key`.
    #[pyo3(signature = (key, keyspace=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, keyspace: Option<&Bound<'_, Keyspace>>) -> PyResult<()> {
        let ks = self.target(py, keyspace)?;
        let k = bytes_arg(key, "key")?;
        self.batch.edit(py, |b| b.delete(ks, &k))
    }

    /// Adds a delete of every key in `[start, end)`.
    #[pyo3(signature = (start, end, keyspace=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let ks = self.target(py, keyspace)?;
        let s = bytes_arg(start, "start")?;
        let e = bytes_arg(end, "end")?;
        if s >= e {
            return Err(errors::invalid(py, "delete_range needs start < end"));
        }
        self.batch.edit(py, |b| b.delete_range(ks, &s, &e))
    }

    /// Operations added so far.
    fn __len__(&self) -> usize {
        self.batch.len(strata::WriteBatch::len)
    }

    /// Writes every operation atomically; the batch cannot be used afterwards.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let b = self.batch.take(py)?;
        self.shared.with_db(py, move |db| db.write(b))
    }

    /// Drops every operation without writing.
    fn discard(&self) {
        self.batch.discard();
    }

});

/// A consistent read view at one point in time. `release()` (or leaving its `with`
/// block) lets compaction drop the versions it kept; afterwards it raises `ClosedError`.
#[pyclass(frozen, module = "strata")]
pub struct Snapshot {
    pub shared: Arc<Shared>,
    default: EngineKeyspace,
    snap: Mutex<Option<strata::Snapshot>>,
}

impl Snapshot {
    /// The engine snapshot, or `ClosedError` once released or the database closed.
    pub fn engine_snapshot(&self, py: Python<'_>) -> PyResult<strata::Snapshot> {
        self.shared.check(py)?;
        self.snap
            .lock()
            .clone()
            .ok_or_else(|| errors::new(py, "ClosedError", "snapshot was released"))
    }

    fn target<'a>(&'a self, py: Python<'_>, ks: Option<&'a Bound<'_, Keyspace>>) -> PyResult<&'a EngineKeyspace> {
        target(py, &self.shared, &self.default, ks)
    }

    /// The engine snapshot of a `snapshot=` argument, which must belong to the
    /// database of `shared`; `None` reads the latest state.
    pub fn of(
        py: Python<'_>,
        shared: &Arc<Shared>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Option<strata::Snapshot>> {
        let Some(s) = snapshot else { return Ok(None) };
        let s = s.get();
        if !Arc::ptr_eq(&s.shared, shared) {
            return Err(errors::invalid(py, "the snapshot belongs to another database"));
        }
        s.engine_snapshot(py).map(Some)
    }
}

methods!(
    Snapshot,
    with_block: |this, _py, _exc_type| PyResult::Ok(this.release()),
{
    /// The value of `key` (in `keyspace`) as of the snapshot, or `default`.
    #[pyo3(signature = (key, default=None, keyspace=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Py<PyAny>> {
        let ks = self.target(py, keyspace)?;
        let snap = self.engine_snapshot(py)?;
        let k = bytes_arg(key, "key")?;
        let v = engine(py, &self.shared, || snap.get(ks, &k))?;
        Ok(value_or(py, v, default))
    }

    /// A lazy iterator of `(key, value)` over `[start, end)` as of the snapshot.
    #[pyo3(signature = (start=None, end=None, reverse=false, keyspace=None))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Scan> {
        let ks = self.target(py, keyspace)?;
        let snap = self.engine_snapshot(py)?;
        scan(py, &self.shared, ks, Some(&snap), start, end, reverse, false)
    }

    /// The sequence number the snapshot reads at.
    #[getter]
    fn seq(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.engine_snapshot(py)?.seq())
    }

    /// Releases the snapshot (idempotent).
    fn release(&self) {
        self.snap.lock().take();
    }
});
