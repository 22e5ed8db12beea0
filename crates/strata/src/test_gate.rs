//! Test hooks at a chosen step of background work: a [`Gate`] runs a closure once, on
//! whatever thread reaches the step, for the database at the path it was set for (tests
//! run in parallel, each with its own directory).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

type Hook = (PathBuf, Box<dyn FnOnce() + Send>);

/// One pending hook, or none.
pub(crate) struct Gate(Mutex<Option<Hook>>);

impl Gate {
    pub(crate) const fn new() -> Gate {
        Gate(Mutex::new(None))
    }

    /// Runs `hook` when the step is next reached for the database in `dir`.
    pub(crate) fn set(&self, dir: &Path, hook: impl FnOnce() + Send + 'static) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((dir.to_path_buf(), Box::new(hook)));
    }

    /// The step, reached for the database in `dir`: runs the hook set for it, if any.
    pub(crate) fn pass(&self, dir: &Path) {
        let hook = {
            let mut gate = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            match gate.take() {
                Some((d, hook)) if d == dir => Some(hook),
                other => {
                    *gate = other;
                    None
                }
            }
        };
        if let Some(hook) = hook {
            hook();
        }
    }
}

/// In `DbInner::catalog_changed`, between reading the version and publishing what the
/// layer above built from it.
pub(crate) static CATALOG_GATE: Gate = Gate::new();

/// In `DbInner::compact_keyspace`, with the job picked and its files held, before it
/// runs.
pub(crate) static MANUAL_GATE: Gate = Gate::new();
