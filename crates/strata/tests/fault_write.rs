//! Failing writes under a running workload: `EIO` and short writes on appends to every
//! kind of file, and failing create/rename/remove/flush/sync_dir/list. Whatever is hit,
//! Strata returns `Err` (never panics, never hangs), acknowledged writes survive a
//! reopen, batches are never half-applied, and the reopened database is consistent.

mod fault_harness;

use fault_harness::{
    Fault, FaultSpec, FileKind, Harness, Op, ReadPolicy, Target, is_fault_error, no_panic, sweep, sweep_open,
    total_injected,
};

const SEEDS: u64 = 3;

fn kinds() -> [Target; 4] {
    [
        Target::Kind(FileKind::Wal),
        Target::Kind(FileKind::Sst),
        Target::Kind(FileKind::Manifest),
        Target::Any,
    ]
}

/// Sweeps `fault` on appends over every kind of file (`what` and the file kind name each
/// scenario); the fault persists until cleared for the odd kinds if `persist_odd`, for
/// the even ones otherwise (it hits once for the rest).
fn sweep_appends(what: &str, fault: Fault, persist_odd: bool) {
    for (i, t) in kinds().into_iter().enumerate() {
        let persist = (i % 2 == 1) == persist_odd;
        let outs = sweep(&format!("{what} {t:?}"), t, Op::Append, fault, SEEDS, persist);
        assert!(total_injected(&outs) > 0, "no fault was injected for {t:?}");
    }
}

#[test]
fn failing_appends() {
    sweep_appends("EIO on append to", Fault::Error, true);
}

#[test]
fn short_writes() {
    sweep_appends("short write to", Fault::ShortWrite, false);
}

/// Operations that happen while the database runs.
#[test]
fn failing_file_operations() {
    for op in [Op::Create, Op::Flush, Op::Open, Op::Remove, Op::List] {
        let outs = sweep(&format!("EIO on {op:?}"), Target::Any, op, Fault::Error, 2, false);
        eprintln!("{op:?}: {} faults", total_injected(&outs));
    }
}

/// Every operation of an open (recovery, manifest roll, sweeping old files).
#[test]
fn failing_operations_during_open() {
    let ops = [
        Op::Create,
        Op::OpenAppend,
        Op::Open,
        Op::Append,
        Op::Flush,
        Op::Sync,
        Op::ReadAll,
        Op::Rename,
        Op::Remove,
        Op::List,
        Op::SyncDir,
        Op::CreateDir,
    ];
    for op in ops {
        let outs = sweep_open(
            &format!("EIO on {op:?}"),
            Target::Any,
            op,
            Fault::Error,
            3,
            ReadPolicy::AllowErrors,
        );
        eprintln!("{op:?}: {} faults", total_injected(&outs));
    }
}

/// A full disk: every append, sync and create fails with `ENOSPC` from a random point
/// until space is freed. The error says so, nothing is corrupted, reopen recovers.
#[test]
fn disk_full() {
    let mut seen_no_space = 0;
    for op in [Op::Append, Op::Sync, Op::Create] {
        let outs = sweep(
            &format!("ENOSPC on {op:?}"),
            Target::Any,
            op,
            Fault::NoSpace,
            SEEDS,
            true,
        );
        for o in &outs {
            if o.injected == 0 {
                continue;
            }
            let first = o.errors.first().expect("a full disk made no write or flush fail");
            assert!(
                first.contains("os error 28") || first.to_lowercase().contains("no space"),
                "the first error after the disk filled up does not say so: {first}"
            );
            seen_no_space += 1;
        }
    }
    assert!(seen_no_space > 0, "no scenario hit the full disk");
}

/// Several writers share group commits while a WAL append or sync fails: every batch
/// of the failed group gets `Err`, every acknowledged one survives reopen, none is
/// half-applied.
#[test]
fn concurrent_writers_under_wal_faults() {
    use strata::{SyncPolicy, WriteBatch};
    const THREADS: usize = 4;
    const BATCHES: usize = 60;
    let key = |t: usize, i: usize, j: usize| format!("t{t}/b{i:03}/{j}").into_bytes();
    for seed in 0..4u64 {
        let h = Harness::new(seed, SyncPolicy::GroupCommit);
        let hs = h.open_handles().expect("open");
        let op = if seed % 2 == 0 { Op::Append } else { Op::Sync };
        let fault = if seed < 2 { Fault::Error } else { Fault::ShortWrite };
        let fault = if op == Op::Sync { Fault::Error } else { fault };
        h.state().arm(
            FaultSpec::new(Target::Kind(FileKind::Wal), op, fault)
                .after(20 + seed * 30)
                .times(1),
        );
        let results: Vec<Vec<bool>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let hs = &hs;
                    s.spawn(move || {
                        (0..BATCHES)
                            .map(|i| {
                                let mut b = WriteBatch::new();
                                for j in 0..3 {
                                    b.put(&hs.db.default_keyspace(), &key(t, i, j), b"v");
                                    b.put(&hs.other, &key(t, i, j), b"w");
                                }
                                match no_panic("write", || hs.db.write(b)) {
                                    Ok(()) => true,
                                    Err(e) => {
                                        assert!(is_fault_error(&e), "unexpected error {e:?}");
                                        false
                                    }
                                }
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("writer thread")).collect()
        });
        assert!(h.state().injected_total() > 0, "seed {seed}: no fault injected");
        let _ = hs.close();
        h.state().clear();
        let hs = h.open_handles().expect("reopen");
        for (t, res) in results.iter().enumerate() {
            for (i, acked) in res.iter().enumerate() {
                let mut present = Vec::new();
                for j in 0..3 {
                    present.push(hs.db.get(&key(t, i, j)).expect("get").is_some());
                    present.push(hs.other.get(&key(t, i, j)).expect("get").is_some());
                }
                assert!(
                    present.iter().all(|p| *p == present[0]),
                    "seed {seed}: batch {i} of thread {t} is half-applied: {present:?}"
                );
                assert!(
                    !*acked || present[0],
                    "seed {seed}: acknowledged batch {i} of thread {t} lost"
                );
            }
        }
        hs.close().expect("close");
    }
}
