//! The short crash test CI runs: `strata-bench crash --quick` (30 SIGKILL cycles of a
//! child writing key-value batches and eager and deferred table transactions with sync
//! on), which fails unless every cycle recovers every acknowledged commit, no commit is
//! half-applied and `Db::check` passes. Also checks that kills really landed in
//! flushes, compactions and recovery.

mod common;

use common::run_bench;

#[test]
fn thirty_kill_cycles_lose_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let json = tmp.path().join("crash.json");
    let run = tmp.path().join("run");
    let args = [
        "crash".as_ref(),
        "--quick".as_ref(),
        "--dir".as_ref(),
        run.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
    ];
    let stdout = run_bench("crash", args);
    let fig: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse json");
    assert_eq!(fig["cycles_survived"], 30, "{stdout}");
    let kills = |p: &str| fig["kills"][p].as_u64().unwrap_or(0);
    assert!(kills("mid-flush") + kills("mid-compaction") >= 5, "{stdout}");
    assert!(kills("during-open") >= 1, "{stdout}");
    for s in ["kv0", "kv1", "eager", "deferred"] {
        let acked = fig["streams"][s]["acknowledged"].as_u64().unwrap_or(0);
        assert!(acked > 100, "stream {s} acknowledged only {acked} commits:\n{stdout}");
    }
}
