//! Model-based test of the leveled configuration (one run per level): random
//! operations, snapshots, flushes, compactions and reopens, checked against a BTreeMap.

mod model_harness;

use model_harness::{history, model_config, run_deep, run_drawn, small_options};
use proptest::prelude::*;
use strata::Options;

fn leveling() -> Options {
    Options {
        runs_per_level: 1,
        size_ratio: 2.0,
        ..small_options()
    }
}

proptest! {
    #![proptest_config(model_config())]

    #[test]
    fn leveling_matches_model(
        (nks, ops) in history(),
        options_seed in any::<u64>(),
    ) {
        // Everything else drawn: sizes, triggers, delete-driven compaction, sync policy.
        run_drawn(nks, &ops, options_seed, |o| Options { runs_per_level: 1, ..o }).map_err(TestCaseError::fail)?;
    }
}

/// A long deterministic run that is known to reach deep levels.
#[test]
fn leveling_deep_run_reaches_lower_levels() {
    let h = run_deep(leveling(), 3, 2500, 0x5eed_0001);
    assert!(
        h.max_level_seen >= 2,
        "files never reached level 2 (deepest level {})",
        h.max_level_seen
    );
    assert_eq!(h.max_runs_seen, 1, "a leveled level > 0 held {} runs", h.max_runs_seen);
    assert!(h.reopens >= 2);
}
