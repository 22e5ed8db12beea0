//! Model-based test of the tiered configurations (several runs per level, and lazy
//! leveling): random operations, snapshots, flushes, compactions and reopens, checked
//! against a BTreeMap.

mod model_harness;

use model_harness::{history, model_config, run_deep, run_drawn, small_options};
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

/// Reshapes drawn options into a tiered configuration: at least two runs a level,
/// lazy leveling on or off.
fn tiered(lazy_leveling: bool) -> impl FnOnce(Options) -> Options {
    move |o| Options {
        runs_per_level: o.runs_per_level.max(2),
        lazy_leveling,
        ..o
    }
}

proptest! {
    #![proptest_config(model_config())]

    #[test]
    fn tiering_matches_model(
        (nks, ops) in history(),
        options_seed in any::<u64>(),
    ) {
        run_drawn(nks, &ops, options_seed, tiered(false)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn lazy_leveling_matches_model(
        (nks, ops) in history(),
        options_seed in any::<u64>(),
    ) {
        run_drawn(nks, &ops, options_seed, tiered(true)).map_err(TestCaseError::fail)?;
    }
}

/// A long deterministic run under `opts` from `seed` must reach level 2 and hold
/// several runs in some level > 0 (`levels` names those levels in the message).
fn deep_run_builds_tiers(opts: Options, seed: u64, levels: &str) {
    let h = run_deep(opts, 3, 2500, seed);
    assert!(
        h.max_level_seen >= 2,
        "files never reached level 2 (deepest level {})",
        h.max_level_seen
    );
    assert!(
        h.max_runs_seen >= 2,
        "no {levels} > 0 ever held more than {} run",
        h.max_runs_seen
    );
}

/// A long deterministic run known to build tiered levels (several runs in a level > 0).
#[test]
fn tiering_deep_run_builds_tiers() {
    deep_run_builds_tiers(tiering(), 0x5eed_0002, "level");
}

#[test]
fn lazy_leveling_deep_run_reaches_lower_levels() {
    deep_run_builds_tiers(lazy_leveling(), 0x5eed_0003, "tiered level");
}
