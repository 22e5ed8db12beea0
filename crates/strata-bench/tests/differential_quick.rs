//! The short differential run CI does: `strata-bench differential` on a few table
//! histories, Strata (eager and deferred) against SQLite, which fails on the first
//! answer that differs. The long run is the same command with `--minutes`.

mod common;

use common::run_bench;

#[test]
fn table_histories_answer_like_sqlite() {
    let stdout = run_bench(
        "differential",
        [
            "differential",
            "--histories",
            "3",
            "--ops",
            "800",
            "--minutes",
            "10",
            "--seed",
            "7",
        ],
    );
    assert!(stdout.contains("3 histories"), "{stdout}");
    // The run must really have compared answers and hit constraint failures.
    let compared: u64 = stdout
        .split(" answers compared")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(compared > 1800, "{stdout}");
}
