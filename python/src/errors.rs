//! The engine's [`strata::Error`] as Python exceptions.
//!
//! The exception classes live in `strata/_errors.py` (so they can also subclass
//! `ValueError`, `OSError`, ...); this module maps each engine variant to one of them and
//! attaches the file and offset of corruption and I/O errors as attributes.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The Python exception for an engine error.
pub fn to_py(py: Python<'_>, e: strata::Error) -> PyErr {
    let (class, file, offset) = match &e {
        strata::Error::Io { path, .. } => ("IoError", path.clone(), None),
        strata::Error::Corruption { file, offset, .. } => ("CorruptionError", Some(file.clone()), Some(*offset)),
        strata::Error::InvalidArgument(_) => ("InvalidArgument", None, None),
        strata::Error::NotFound(_) => ("NotFoundError", None, None),
        strata::Error::AlreadyExists(_) => ("AlreadyExistsError", None, None),
        strata::Error::NotADatabase { path, .. } => ("NotADatabaseError", Some(path.clone()), None),
        strata::Error::SchemaMismatch(_) => ("SchemaError", None, None),
        strata::Error::Constraint(_) => ("IntegrityError", None, None),
        strata::Error::Background(_) => ("BackgroundError", None, None),
        strata::Error::Closed => ("ClosedError", None, None),
        _ => ("Error", None, None),
    };
    let message = e.to_string();
    let made = make(py, class, message.clone(), file, offset).and_then(|err| {
        // As `OSError`s raised by Python itself: `errno`, `strerror` and `filename`.
        if let strata::Error::Io { path, source } = &e
            && let Some(errno) = source.raw_os_error()
        {
            let value = err.value(py);
            value.setattr("errno", errno)?;
            value.setattr("strerror", std::io::Error::from_raw_os_error(errno).to_string())?;
            if let Some(p) = path {
                value.setattr("filename", p.display().to_string())?;
            }
        }
        Ok(err)
    });
    match made {
        Ok(err) => err,
        // Only when the Python package is broken (strata._errors missing).
        Err(import) => PyRuntimeError::new_err(format!("{message} (and {import})")),
    }
}

/// An exception of class `class` (a name in `strata._errors`) with `message`.
pub fn new(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    make(py, class, message.clone(), None, None)
        .unwrap_or_else(|import| PyRuntimeError::new_err(format!("{message} (and {import})")))
}

fn make(
    py: Python<'_>,
    class: &str,
    message: String,
    file: Option<std::path::PathBuf>,
    offset: Option<u64>,
) -> PyResult<PyErr> {
    let cls = py.import("strata._errors")?.getattr(class)?;
    let value = cls.call1((message,))?;
    value.setattr("file", file.map(|f| f.display().to_string()))?;
    value.setattr("offset", offset)?;
    Ok(PyErr::from_value(value))
}

/// `ClosedError`: the database was closed while this object still referred to it.
pub fn closed(py: Python<'_>) -> PyErr {
    new(py, "ClosedError", "database is closed")
}

/// `InvalidArgument` with `message`.
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    new(py, "InvalidArgument", message)
}

/// `SchemaError` with `message`.
pub fn schema(py: Python<'_>, message: impl Into<String>) -> PyErr {
    new(py, "SchemaError", message)
}
