//! The library's one error type.
//!
//! Every fallible operation returns [`Result`]. Corruption always names the file and the
//! byte offset where the bad data was found, so an operator can look at it.

use std::path::PathBuf;

/// Errors returned by Strata.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the file it happened on when known.
    #[error("I/O error{}: {source}", path_suffix(.path))]
    Io {
        /// The file or directory involved, if known.
        path: Option<PathBuf>,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data failed a checksum or could not be decoded.
    #[error("corruption in {} at offset {offset}: {reason}", .file.display())]
    Corruption {
        /// The file holding the bad data.
        file: PathBuf,
        /// Byte offset of the bad record, block or field.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The caller passed something Strata cannot accept (too large, empty range, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A named object (keyspace, table, index) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A named object already exists.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The path is not a Strata database (and `create_if_missing` was off or the
    /// directory holds something else).
    #[error("not a Strata database: {}: {reason}", .path.display())]
    NotADatabase {
        /// The directory given to `Db::open`.
        path: PathBuf,
        /// Why it was rejected.
        reason: String,
    },
    /// A row or value does not match the table's schema.
    #[error("schema mismatch: {0}")]
    SchemaMismatch(String),
    /// A unique constraint (primary or unique secondary key) would be violated.
    #[error("constraint violation: {0}")]
    Constraint(String),
    /// A background job failed earlier; the database refuses writes until reopened.
    #[error("database is in a failed state after a background error: {0}")]
    Background(String),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
}

fn path_suffix(p: &Option<PathBuf>) -> String {
    match p {
        Some(p) => format!(" on {}", p.display()),
        None => String::new(),
    }
}

/// Result alias used throughout Strata.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error on a known path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: Some(path.into()),
            source,
        }
    }

    /// A corruption error.
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True when the error reports damaged stored data.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: None, source }
    }
}
