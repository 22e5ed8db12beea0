//! A deleted key never comes back through a point lookup, whatever shape the tree's
//! compactions take (issue: several runs per level with delete-driven compactions let a
//! compaction's output sit above a newer run of the same level).

mod model_harness;

use std::collections::HashMap;
use std::time::Duration;

use model_harness::NoSyncFs;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use strata::{Db, Options};

fn check(opts: Options, seed: u64, ops: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    let ks = db.default_keyspace();
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..ops {
        let k = format!("k{:05}", rng.gen_range(0..2000u32)).into_bytes();
        if rng.gen_bool(0.4) {
            ks.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{i}-{}", "x".repeat(rng.gen_range(1..200))).into_bytes();
            ks.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        if i % 5000 == 4999 {
            db.flush().unwrap();
        }
        if i % 40_000 == 39_999 {
            db.compact_range().unwrap();
        }
        let probe = format!("k{:05}", rng.gen_range(0..2000u32)).into_bytes();
        let got = ks.get(&probe).unwrap();
        let want = model.get(&probe).cloned();
        if got != want {
            let scanned: Vec<_> = ks
                .scan(&probe[..]..=&probe[..])
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            panic!(
                "seed {seed} op {i}: get({}) = {:?}, model {:?}, scan {:?}; {:?}",
                String::from_utf8_lossy(&probe),
                got.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                want.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                scanned.len(),
                db.stats().keyspaces[0]
                    .levels
                    .iter()
                    .map(|l| (l.level, l.runs, l.files))
                    .collect::<Vec<_>>()
            );
        }
    }
    let stats = db.stats();
    let levels = stats.keyspaces[0].levels.len();
    assert!(levels <= 6, "{levels} levels for {} live keys", model.len());
}

/// The options: 64 KiB memtables, two runs per level, level-0 trigger 4.
fn two_runs_per_level() -> Options {
    Options {
        fs: Arc::new(NoSyncFs),
        memtable_budget: 64 << 10,
        runs_per_level: 2,
        l0_compaction_trigger: 4,
        ..Options::default()
    }
}

#[test]
fn two_runs_per_level_with_a_delete_persistence_threshold() {
    for seed in 0..3 {
        check(
            Options {
                delete_persistence_threshold: Some(Duration::from_millis(50)),
                ..two_runs_per_level()
            },
            seed,
            100_000,
        );
    }
}

#[test]
fn two_runs_per_level_with_a_tombstone_density_trigger() {
    for seed in 10..12 {
        check(
            Options {
                tombstone_density_trigger: Some(0.3),
                ..two_runs_per_level()
            },
            seed,
            100_000,
        );
    }
}

#[test]
fn lazy_leveling_with_a_delete_persistence_threshold() {
    check(
        Options {
            fs: Arc::new(NoSyncFs),
            memtable_budget: 64 << 10,
            runs_per_level: 3,
            lazy_leveling: true,
            l0_compaction_trigger: 2,
            delete_persistence_threshold: Some(Duration::from_millis(20)),
            ..Options::default()
        },
        20,
        100_000,
    );
}
