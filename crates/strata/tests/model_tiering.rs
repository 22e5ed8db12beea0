//! Model-based test of the tiered configurations (several runs per level, and lazy
//! leveling): random operations, snapshots, flushes, compactions and reopens, checked
//! against a BTreeMap.

mod model_harness;

use model_harness::{op, run_deep, run_drawn, small_options};
use proptest::prelude::*;
use strata::Options;

fn tiering() -> Options {
    Options {
        runs_per_level: 3,
        size_ratio: 4.0,
        ..small_options()
    }
}

fn lazy_leveling() -> Options {
    Options {
        lazy_leveling: true,
        ..tiering()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, max_shrink_iters: 1000, ..ProptestConfig::default() })]

    #[test]
    fn tiering_matches_model(
        (nks, ops) in (1usize..=3).prop_flat_map(|nks| (Just(nks), proptest::collection::vec(op(nks), 100..300))),
        options_seed in any::<u64>(),
    ) {
        run_drawn(nks, &ops, options_seed, |o| Options { runs_per_level: o.runs_per_level.max(2), lazy_leveling: false, ..o })
            .map_err(TestCaseError::fail)?;
    }

    #[test]
    fn lazy_leveling_matches_model(
        (nks, ops) in (1usize..=3).prop_flat_map(|nks| (Just(nks), proptest::collection::vec(op(nks), 100..300))),
        options_seed in any::<u64>(),
    ) {
        run_drawn(nks, &ops, options_seed, |o| Options { runs_per_level: o.runs_per_level.max(2), lazy_leveling: true, ..o })
            .map_err(TestCaseError::fail)?;
    }
}

/// A long deterministic run known to build tiered levels (several runs in a level > 0).
#[test]
fn tiering_deep_run_builds_tiers() {
    let h = run_deep(tiering(), 3, 2500, 0x5eed_0002);
    assert!(
        h.max_level_seen >= 2,
        "files never reached level 2 (deepest level {})",
        h.max_level_seen
    );
    assert!(
        h.max_runs_seen >= 2,
        "no level > 0 ever held more than {} run",
        h.max_runs_seen
    );
}

#[test]
fn lazy_leveling_deep_run_reaches_lower_levels() {
    let h = run_deep(lazy_leveling(), 3, 2500, 0x5eed_0003);
    assert!(
        h.max_level_seen >= 2,
        "files never reached level 2 (deepest level {})",
        h.max_level_seen
    );
    assert!(
        h.max_runs_seen >= 2,
        "no tiered level > 0 ever held more than {} run",
        h.max_runs_seen
    );
}
