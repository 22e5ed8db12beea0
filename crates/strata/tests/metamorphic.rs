//! Metamorphic test, in the spirit of Pebble's: one random history of operations
//! (puts, deletes, range deletes, batches, snapshots, reads, flushes, compactions,
//! reopens) is run under many randomly drawn [`Options`]; every read is checked against
//! a model as it happens, and the answers of all configurations are compared with each
//! other afterwards. Options change how the tree is shaped (memtable and file sizes,
//! runs per level, size ratio, level-0 trigger, FADE deadlines, tombstone density,
//! block size, bloom filter, compression, sync policy, background threads), never what
//! a read may return.
//!
//! `cargo test` runs a few histories; `STRATA_METAMORPHIC_MINUTES=N cargo test --release
//! --test metamorphic -- --ignored` runs new histories for N minutes.

mod model_harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use model_harness::options::drawn_options;
use model_harness::{Harness, NoSyncFs, ops_from_seed};

/// Runs history `seed` under `configs` drawn option sets; returns operations run.
fn history(seed: u64, ops: usize, configs: u64) -> usize {
    let nks = 1 + (seed % 3) as usize;
    let ops = ops_from_seed(nks, ops, seed);
    let mut first: Option<(String, Vec<u64>)> = None;
    for c in 0..configs {
        let (opts, clock) = drawn_options(seed.wrapping_mul(1_000_003).wrapping_add(c), Arc::new(NoSyncFs));
        let shape = opts.to_string();
        let mut h = Harness::new(opts, nks).unwrap_or_else(|e| panic!("open under {shape}: {e}"));
        h.clock = Some(clock);
        if let Err(e) = h.run(&ops) {
            panic!("history {seed}, options #{c} ({shape}): {e}");
        }
        match &first {
            None => first = Some((shape, h.answers)),
            Some((first_shape, answers)) => {
                assert_eq!(answers.len(), h.answers.len(), "history {seed}: read counts differ");
                if let Some(i) = answers.iter().zip(&h.answers).position(|(a, b)| a != b) {
                    panic!("history {seed}: read #{i} differs between ({first_shape}) and ({shape})");
                }
            }
        }
    }
    ops.len() * configs as usize
}

#[test]
fn one_history_reads_the_same_under_any_options() {
    for seed in 0..4 {
        history(0x4d45_5441 + seed, 400, 6);
    }
}

/// The long run: new histories until the time is up.
#[test]
#[ignore = "long run: STRATA_METAMORPHIC_MINUTES=N"]
fn long_run() {
    let minutes: u64 = std::env::var("STRATA_METAMORPHIC_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(10);
    let start_seed: u64 = std::env::var("STRATA_METAMORPHIC_SEED")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(1);
    let deadline = Instant::now() + Duration::from_secs(minutes * 60);
    let (mut histories, mut ops) = (0u64, 0usize);
    let mut seed = start_seed;
    while Instant::now() < deadline {
        ops += history(seed, 1500, 8);
        histories += 1;
        seed += 1;
    }
    eprintln!(
        "metamorphic: {histories} histories (seeds {start_seed}..{seed}), 8 option sets each, {ops} operations, no mismatch"
    );
}
