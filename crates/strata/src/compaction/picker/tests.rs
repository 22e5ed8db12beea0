//! Unit tests of the picker: each trigger and shape on small hand-made trees.
use super::*;
use crate::version::{FileContext, FileMeta, NewFile, VersionEdit};

/// (level, run, number, smallest, largest, bytes, tombstones)
type Spec = (u32, u64, u64, &'static str, &'static str, u64, u64);

fn version(files: &[Spec]) -> (tempfile::TempDir, Version) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = FileContext::for_tests(dir.path());
    let edit = VersionEdit {
        new_keyspaces: vec![(0, "default".into())],
        new_files: files
            .iter()
            .map(|&(level, run, number, lo, hi, size, tombstones)| NewFile {
                keyspace: 0,
                level,
                run,
                meta: FileMeta {
                    number,
                    size,
                    smallest: lo.as_bytes().to_vec(),
                    largest: hi.as_bytes().to_vec(),
                    min_seq: number,
                    max_seq: number,
                    entries: 100,
                    tombstones,
                    range_tombstones: 0,
                    oldest_tombstone_time: (tombstones > 0).then_some(0),
                    raw_bytes: size,
                    global_seq: None,
                    pages: Default::default(),
                    deletes_applied: 0,
                },
            })
            .collect(),
        ..Default::default()
    };
    let (v, _) = Version::default().apply(&edit, &ctx).unwrap();
    (dir, v)
}

fn tiered() -> Options {
    Options {
        memtable_budget: 1 << 20,
        runs_per_level: 2,
        size_ratio: 4.0,
        ..Options::default()
    }
}

fn pick(v: &Version, opts: &Options) -> Option<CompactionTask> {
    CompactionPicker::default().pick(v, opts, &HashSet::new(), &HashSet::new(), DeleteClock::default())
}

#[test]
fn a_tiered_last_level_within_capacity_merges_in_place_under_its_newest_run() {
    // Level 1 (capacity 4 MiB) holds three small runs: full by count, not by size.
    let (_d, v) = version(&[
        (1, 30, 30, "a", "m", 1000, 0),
        (1, 20, 20, "a", "z", 1000, 0),
        (1, 10, 10, "c", "k", 1000, 0),
    ]);
    let t = pick(&v, &tiered()).expect("three runs of two allowed");
    assert_eq!(t.output_level, 1, "a new level for 3 KB of data");
    assert_eq!(t.output_run, Some(30), "the output must take its newest input's place");
    assert_eq!(t.inputs.len(), 3);
    assert!(t.bottommost);
}

#[test]
fn a_tiered_last_level_over_capacity_is_pushed_down() {
    let mb = 2 << 20;
    let (_d, v) = version(&[
        (1, 30, 30, "a", "m", mb, 0),
        (1, 20, 20, "a", "z", mb, 0),
        (1, 10, 10, "c", "k", mb, 0),
    ]);
    let t = pick(&v, &tiered()).expect("three runs of two allowed");
    assert_eq!(t.output_level, 2);
    assert_eq!(t.output_run, None, "a new run of the new level");
}

#[test]
fn a_delete_driven_merge_of_the_last_level_keeps_its_newest_run_id() {
    // Level 2 is last and tiered; its older run is dense with tombstones. Level 1
    // holds newer data in a run of larger id: the merge of level 2 in place must not
    // come out above anything pushed there meanwhile, so it keeps id 8, not a fresh one.
    let (_d, v) = version(&[
        (1, 40, 40, "a", "z", 1000, 0),
        (2, 8, 8, "a", "z", 1000, 0),
        (2, 5, 5, "a", "z", 1000, 100),
    ]);
    let opts = Options {
        tombstone_density_trigger: Some(0.5),
        ..tiered()
    };
    let t = pick(&v, &opts).expect("a dense last-level file");
    assert_eq!(t.reason, "deletes");
    assert_eq!(t.output_level, 2);
    assert_eq!(t.output_run, Some(8));
    assert!(t.inputs.iter().all(|r| r.level == 2));
}

#[test]
fn level_zero_always_merges_into_level_one() {
    let (_d, v) = version(&[
        (0, 3, 3, "a", "z", 100, 0),
        (0, 2, 2, "a", "z", 100, 0),
        (0, 1, 1, "a", "z", 100, 0),
        (0, 0, 4, "a", "z", 100, 0),
    ]);
    let t = pick(&v, &tiered()).expect("level 0 over its trigger");
    assert_eq!((t.output_level, t.output_run), (1, None));
}

fn clock_at(now: u64) -> DeleteClock {
    DeleteClock {
        now,
        ..DeleteClock::default()
    }
}

fn choose(t: &dyn Trigger, v: &Version, opts: &Options, clock: &DeleteClock) -> Option<Choice> {
    choose_busy(t, v, opts, clock, &HashSet::new())
}

/// `choose` while another job holds the files `busy`.
fn choose_busy(
    t: &dyn Trigger,
    v: &Version,
    opts: &Options,
    clock: &DeleteClock,
    busy: &HashSet<u64>,
) -> Option<Choice> {
    let mut cursors = Cursors::new();
    let paused = HashSet::new();
    let mut cx = Context {
        version: v,
        opts,
        busy,
        paused: &paused,
        clock,
        cursors: &mut cursors,
        deletes: None,
    };
    t.choose(&mut cx)
}

#[test]
fn the_deadline_trigger_fires_only_past_the_deadline_and_outranks_size() {
    // Tombstones written at time 0 (the helper's files), threshold 10 s: the last of two
    // held levels has the whole threshold.
    let (_d, v) = version(&[(1, 0, 1, "a", "m", 1000, 0), (2, 0, 2, "a", "z", 1000, 5)]);
    let opts = Options {
        delete_persistence_threshold: Some(std::time::Duration::from_secs(10)),
        ..Options::default()
    };
    assert!(choose(&deletes::DeadlineTrigger, &v, &opts, &clock_at(9_000_000)).is_none());
    let c = choose(&deletes::DeadlineTrigger, &v, &opts, &clock_at(11_000_000)).expect("expired");
    assert_eq!(c.priority, Priority::Deadline);
    assert_eq!(
        (c.task.output_level, c.task.reason),
        (2, "deletes"),
        "in place at the last level"
    );
    assert!(c.task.bottommost);
    assert!(Priority::Deadline > Priority::Size && Priority::Size > Priority::Deletes);
}

#[test]
fn the_density_trigger_weighs_tombstones_against_the_rewrite() {
    // A leveled level-1 file half tombstones over a level 2 ten times its entries: not
    // dense for what merging it would rewrite.
    let mut files = vec![(1, 0, 1, "a", "z", 1000, 50)];
    for (n, k) in ["a", "c", "e", "g", "i", "k", "m", "o", "q", "s"]
        .into_iter()
        .enumerate()
    {
        files.push((2, 0, 10 + n as u64, k, k, 1000, 0));
    }
    let opts = Options {
        tombstone_density_trigger: Some(0.4),
        ..Options::default()
    };
    let (_d, v) = version(&files[..1]);
    let c = choose(&deletes::DensityTrigger, &v, &opts, &clock_at(0)).expect("dense on its own, alone");
    assert_eq!(c.priority, Priority::Deletes);
    let (_d2, v2) = version(&files);
    assert!(choose(&deletes::DensityTrigger, &v2, &opts, &clock_at(0)).is_none());
}

#[test]
fn the_dirty_read_trigger_pushes_an_urgent_keyspace_down() {
    let (_d, v) = version(&[(1, 0, 1, "a", "m", 1000, 2), (2, 0, 2, "a", "z", 1000, 0)]);
    let opts = Options::default();
    assert!(choose(&deletes::DirtyReadTrigger, &v, &opts, &clock_at(0)).is_none());
    let clock = DeleteClock {
        urgent: [0u32].into_iter().collect(),
        ..DeleteClock::default()
    };
    let c = choose(&deletes::DirtyReadTrigger, &v, &opts, &clock).expect("urgent keyspace");
    assert_eq!(c.task.output_level, 2);
    assert_eq!(c.task.inputs[0].files[0].number(), 1);
}

#[test]
fn a_leveled_level_takes_its_files_round_robin() {
    let opts = Options {
        memtable_budget: 4096,
        size_ratio: 2.0,
        ..Options::default()
    };
    // Level 1 (capacity 8 KiB) holds 3 x 4 KB: over capacity.
    let (_d, v) = version(&[
        (1, 0, 1, "a", "c", 4000, 0),
        (1, 0, 2, "d", "f", 4000, 0),
        (1, 0, 3, "g", "i", 4000, 0),
        (2, 0, 4, "a", "z", 10_000, 0),
    ]);
    let mut picker = CompactionPicker::default();
    let mut taken = Vec::new();
    for _ in 0..4 {
        let t = picker
            .pick(&v, &opts, &HashSet::new(), &HashSet::new(), DeleteClock::default())
            .expect("level 1 over capacity");
        assert_eq!(t.reason, "leveled");
        taken.push(t.inputs[0].files[0].number());
    }
    assert_eq!(taken, vec![1, 2, 3, 1]);
}

#[test]
fn lazy_leveling_pushes_a_full_last_level_down_whole() {
    let opts = Options {
        memtable_budget: 4096,
        size_ratio: 2.0,
        runs_per_level: 3,
        lazy_leveling: true,
        ..Options::default()
    };
    assert_eq!(shape::LevelShape::of(&opts, 0, 2), shape::LevelShape::Tiered);
    assert_eq!(shape::LevelShape::of(&opts, 1, 2), shape::LevelShape::Tiered);
    assert_eq!(shape::LevelShape::of(&opts, 2, 2), shape::LevelShape::LazyLast);
    let (_d, v) = version(&[(1, 0, 1, "a", "c", 40_000, 0)]);
    let t = pick(&v, &opts).expect("over capacity");
    assert_eq!(
        (t.reason, t.output_level, t.output_run, t.trivial_move),
        ("lazy-leveling-push", 2, Some(LEVELED_RUN), true)
    );
}

#[test]
fn busy_files_are_never_picked_twice() {
    let (_d, v) = version(&[
        (1, 30, 30, "a", "m", 1000, 0),
        (1, 20, 20, "a", "z", 1000, 0),
        (1, 10, 10, "c", "k", 1000, 0),
    ]);
    let busy: HashSet<u64> = [20].into_iter().collect();
    let t = CompactionPicker::default().pick(&v, &tiered(), &busy, &HashSet::new(), DeleteClock::default());
    assert!(t.is_none(), "{t:?}");
}

/// A leveled level holding two runs (the options changed from tiering), the newer one
/// with expired tombstones: its file must not move down alone past the older run's
/// versions of its keys, and at the last level it must not be rewritten in place beside
/// them (not bottommost, it would keep its tombstones and be picked forever).
#[test]
fn deletes_in_a_leveled_level_of_several_runs_take_the_whole_level() {
    let opts = Options {
        delete_persistence_threshold: Some(std::time::Duration::from_secs(10)),
        ..Options::default()
    };
    let files = |c: &Choice| {
        let mut n: Vec<(usize, u64)> = c
            .task
            .inputs
            .iter()
            .flat_map(|r| r.files.iter().map(move |f| (r.level, f.number())))
            .collect();
        n.sort();
        n
    };
    // Level 1 above level 2: both runs of level 1 go down, with what they overlap.
    let (_d, v) = version(&[
        (1, 40, 41, "a", "m", 1000, 5),
        (1, 30, 31, "a", "m", 1000, 0),
        (2, 0, 2, "a", "z", 1000, 0),
    ]);
    let c = choose(&deletes::DeadlineTrigger, &v, &opts, &clock_at(11_000_000)).expect("expired");
    assert_eq!(files(&c), [(1, 31), (1, 41), (2, 2)]);
    assert_eq!(c.task.output_level, 2);
    // Not while another job holds a file of the level: it would lose its hold.
    let held = choose_busy(
        &deletes::DeadlineTrigger,
        &v,
        &opts,
        &clock_at(11_000_000),
        &HashSet::from([31]),
    );
    assert!(held.is_none_or(|c| files(&c).iter().all(|&(_, n)| n != 31)));
    // Level 1 the last: merged in place whole, bottommost.
    let (_d, v) = version(&[(1, 40, 41, "a", "m", 1000, 5), (1, 30, 31, "a", "m", 1000, 0)]);
    let c = choose(&deletes::DeadlineTrigger, &v, &opts, &clock_at(11_000_000)).expect("expired");
    assert_eq!(files(&c), [(1, 31), (1, 41)]);
    assert_eq!(c.task.output_level, 1);
    assert!(c.task.bottommost);
    // A file of the oldest run still moves down alone.
    let (_d, v) = version(&[
        (1, 40, 41, "a", "m", 1000, 0),
        (1, 30, 31, "n", "z", 1000, 5),
        (2, 0, 2, "x", "z", 1000, 0),
    ]);
    let c = choose(&deletes::DeadlineTrigger, &v, &opts, &clock_at(11_000_000)).expect("expired");
    assert_eq!(files(&c), [(1, 31), (2, 2)]);
}
