//! The short differential run CI does: `strata-bench differential` on a few table
//! histories, Strata (eager and deferred) against SQLite, which fails on the first
//! answer that differs. The long run is the same command with `--minutes`.

use std::process::Command;

#[test]
fn table_histories_answer_like_sqlite() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args([
            "differential",
            "--histories",
            "3",
            "--ops",
            "800",
            "--minutes",
            "10",
            "--seed",
            "7",
        ])
        .output()
        .expect("run strata-bench differential");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "differential test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
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
