//! What both CLI test files share: running the built `strata` binary and
//! checking how a run ended.

// Each test file uses a subset of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// What one run of the binary did.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary with exactly `args`; `STRATA_DB` is set only to `env_db`.
pub fn run_raw(args: &[&str], env_db: Option<&Path>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.args(args).env_remove("STRATA_DB");
    if let Some(db) = env_db {
        cmd.env("STRATA_DB", db);
    }
    let out = cmd.output().expect("the strata binary runs");
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "strata {args:?} panicked:\n{}",
        run.stderr
    );
    run
}

/// Runs the binary on the database at `db`.
pub fn run(db: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--db", path_str(db)];
    all.extend_from_slice(args);
    run_raw(&all, None)
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(db: &Path, args: &[&str]) -> String {
    let r = run(db, args);
    assert_eq!(r.code, Some(0), "strata {args:?} failed:\n{}", r.stderr);
    assert!(r.stderr.is_empty(), "strata {args:?} wrote to stderr:\n{}", r.stderr);
    r.stdout
}

/// Asserts a run failed with `code` and an `error: ` message containing every needle.
pub fn assert_fails(r: &Run, code: i32, needles: &[&str]) {
    assert_eq!(
        r.code,
        Some(code),
        "expected exit {code}; stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stderr.starts_with("error: "), "stderr lacks 'error: ':\n{}", r.stderr);
    for n in needles {
        assert!(r.stderr.contains(n), "stderr lacks {n:?}:\n{}", r.stderr);
    }
}

/// Runs each `(args, code, needles)` against `db`; each must fail as `assert_fails` checks.
pub fn assert_all_fail(db: &Path, cases: &[(&[&str], i32, &[&str])]) {
    for (args, code, needles) in cases {
        assert_fails(&run(db, args), *code, needles);
    }
}

/// A temporary directory and a database path inside it that does not exist yet.
pub fn new_db() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    (dir, db)
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}
