//! What the bench's CI tests share: running the built `strata-bench` binary.

use std::process::Command;

/// Runs `strata-bench` with `args`; asserts it succeeded (showing both outputs if not)
/// and returns its stdout.
pub fn run_bench<I, S>(what: &str, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run strata-bench {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
