//! Work gathered until it is committed or discarded: a `WriteBatch`'s operations or a
//! table `Transaction`'s statements. Once either happened the work is gone (`None`) and
//! every later edit or commit is an `InvalidArgument`.
//!
//! The mutex is never held across a release of the GIL (see `kv`'s locking rule).

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::errors;

pub struct Pending<T> {
    work: Mutex<Option<T>>,
    /// "batch" or "transaction", for the error message.
    what: &'static str,
}

impl<T> Pending<T> {
    pub fn new(work: T, what: &'static str) -> Self {
        Pending {
            work: Mutex::new(Some(work)),
            what,
        }
    }

    fn gone(&self, py: Python<'_>) -> PyErr {
        errors::invalid(py, format!("the {} was already committed or discarded", self.what))
    }

    /// Runs `f` on the open work.
    pub fn edit<R>(&self, py: Python<'_>, f: impl FnOnce(&mut T) -> R) -> PyResult<R> {
        match self.work.lock().as_mut() {
            Some(w) => Ok(f(w)),
            None => Err(self.gone(py)),
        }
    }

    /// The work, to commit; the `Pending` is closed afterwards.
    pub fn take(&self, py: Python<'_>) -> PyResult<T> {
        self.work.lock().take().ok_or_else(|| self.gone(py))
    }

    /// Drops the work without writing (idempotent).
    pub fn discard(&self) {
        self.work.lock().take();
    }

    /// `len` of the open work, 0 once closed.
    pub fn len(&self, len: impl FnOnce(&T) -> usize) -> usize {
        self.work.lock().as_ref().map_or(0, len)
    }

    /// `__exit__` of a `with` block: discards the work if the block raised, else
    /// commits it unless it was already committed or discarded inside the block.
    pub fn exit(&self, exc_type: Option<&Bound<'_, PyAny>>, commit: impl FnOnce() -> PyResult<()>) -> PyResult<()> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.discard();
            return Ok(());
        }
        if self.work.lock().is_some() {
            commit()?;
        }
        Ok(())
    }
}
