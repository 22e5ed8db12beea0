//! Line-oriented input (JSON Lines): each non-blank line with its 1-based number.

use std::io::{BufRead, BufReader, Read};

/// Calls `each` with the number and text of every non-blank line of `input`, stopping
/// at the first error. `fail` makes the caller's error from a line number and a
/// message: for a read failure (the number of the line being read) and for a line that
/// is not UTF-8.
pub(crate) fn for_each_line<E>(
    input: impl Read,
    fail: impl Fn(u64, String) -> E,
    mut each: impl FnMut(u64, &str) -> Result<(), E>,
) -> Result<(), E> {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| fail(line + 1, format!("cannot read the input: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        line += 1;
        let text = std::str::from_utf8(&buf).map_err(|_| fail(line, "not valid UTF-8".to_string()))?;
        if !text.trim().is_empty() {
            each(line, text)?;
        }
    }
}
