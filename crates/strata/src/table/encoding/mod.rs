//! Binary encodings of the table layer: the compact row codec ([`row`]) and the
//! order-preserving ("memcomparable") key codec ([`key`]), plus the prefix helper that
//! turns an equality on leading key fields into a key range.
//!
//! Errors: the checked encoders report values that do not fit the schema or key types as
//! [`Error::SchemaMismatch`]. Bytes that do not decode are also reported as
//! [`Error::SchemaMismatch`] (`stored row/key ... does not decode: REASON (at byte N)`,
//! N relative to the given slice), since the decoders do not know the file the bytes
//! came from.

pub mod key;
pub mod row;
#[cfg(test)]
mod tests;

pub use key::*;
pub use row::*;

use crate::codec::DecodeError;
use crate::error::Error;

/// Where and why decoding failed (converted to an [`Error`] at the public boundary).
#[derive(Debug)]
struct Fail {
    offset: usize,
    reason: String,
}

impl Fail {
    fn new(offset: usize, reason: impl Into<String>) -> Self {
        Fail {
            offset,
            reason: reason.into(),
        }
    }

    fn into_error(self, what: &str) -> Error {
        Error::SchemaMismatch(format!(
            "{what} does not decode: {} (at byte {})",
            self.reason, self.offset
        ))
    }
}

impl From<DecodeError> for Fail {
    fn from(e: DecodeError) -> Self {
        Fail::new(e.offset, e.reason)
    }
}

// ---------------------------------------------------------------------------------------
// Row codec.
