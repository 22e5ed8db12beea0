//! Failing writes under a running workload: `EIO` and short writes on appends to every
//! kind of file, and failing create/rename/remove/flush/sync_dir/list. Whatever is hit,
//! Strata returns `Err` (never panics, never hangs), acknowledged writes survive a
//! reopen, batches are never half-applied, and the reopened database is consistent.

mod fault_harness;

use fault_harness::{
    Fault, FaultSpec, FileKind, Harness, Op, ReadPolicy, Scenario, Target, Workload, fault_points, is_fault_error,
    measure, no_panic, report, run, sweep, sweep_open, total_injected,
};
use strata::SyncPolicy;

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

/// Operations that happen while the database runs. (`Flush` happens only where a write
/// is not synced, so it has its own test below.)
#[test]
fn failing_file_operations() {
    for op in [Op::Create, Op::Open, Op::Remove, Op::List] {
        let outs = sweep(&format!("EIO on {op:?}"), Target::Any, op, Fault::Error, SEEDS, false);
        assert!(total_injected(&outs) > 0, "no fault was injected on {op:?}");
    }
}

/// `WritableFile::flush` is called only for writes that are not synced: the WAL's, by
/// every write under `SyncPolicy::None` (a synced write syncs instead), and by the
/// close before its final sync. Neither happens in an open, nor in the sweeps above,
/// which sync most writes and clear the faults before closing.
#[test]
fn failing_flush() {
    // Under `None`: the writes flush.
    let mut probe = Scenario::new("EIO on Flush (measure)", 1000, Vec::new());
    probe.sync = SyncPolicy::None;
    let window = measure(&probe, Target::Any, Op::Flush);
    assert!(window > 0, "writes under SyncPolicy::None made no flush");
    for (seed, after) in fault_points(window, window, SEEDS as usize).into_iter().enumerate() {
        let spec = FaultSpec::new(Target::Any, Op::Flush, Fault::Error)
            .after(after)
            .times(1);
        let name = format!("EIO on Flush under None after {after}/{window}");
        let mut s = Scenario::new(name.clone(), seed as u64, vec![spec]);
        s.sync = SyncPolicy::None;
        let o = run(s);
        report(&name, &o);
        assert_eq!(o.injected, 1, "{name}: no fault was injected");
    }
    // At close: the close fails, and a reopen recovers every acknowledged write.
    let h = Harness::new(7, SyncPolicy::EveryBatch);
    let hs = h.open_handles().expect("open");
    let mut w = Workload::new(7);
    for _ in 0..40 {
        w.step(&hs).expect("fault-free step");
    }
    h.state()
        .arm(FaultSpec::new(Target::Kind(FileKind::Wal), Op::Flush, Fault::Error).times(1));
    let closed = hs.close();
    h.state().clear();
    assert_eq!(
        h.state().injected(Fault::Error, Op::Flush),
        1,
        "the close made no flush"
    );
    assert!(
        matches!(closed, Err(ref e) if is_fault_error(e)),
        "a close whose WAL flush failed returned {closed:?}"
    );
    let hs = h.open_handles().expect("reopen");
    w.verify(&hs).unwrap_or_else(|p| panic!("after a failed close: {p}"));
    hs.close().expect("close");
}

/// Every operation of an open (recovery, manifest roll, sweeping old files). Not here:
/// `OpenAppend`, which Strata calls only to sync a hard-linked ingest file (and the
/// fault-injecting file system links nothing), `Flush` (see `failing_flush`), and
/// `CreateDir`, which a reopen does not call (see `failing_directory_creation`).
#[test]
fn failing_operations_during_open() {
    let ops = [
        Op::Create,
        Op::Open,
        Op::Append,
        Op::Sync,
        Op::ReadAll,
        Op::Rename,
        Op::Remove,
        Op::List,
        Op::SyncDir,
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
        assert!(total_injected(&outs) > 0, "no fault was injected on {op:?}");
    }
}

/// An open makes the database's directory only when there is none yet: that failing,
/// the open fails, creates nothing, and a retry creates the database.
#[test]
fn failing_directory_creation() {
    use strata::{Db, Error};
    let h = Harness::new(5, SyncPolicy::EveryBatch);
    let dir = h.dir.path().join("db");
    h.state()
        .arm(FaultSpec::new(Target::Any, Op::CreateDir, Fault::Error).times(1));
    let r = no_panic("open", || Db::open(&dir, h.options()));
    assert_eq!(
        h.state().injected(Fault::Error, Op::CreateDir),
        1,
        "the open made no directory"
    );
    assert!(matches!(r, Err(Error::Io { .. })), "{:?}", r.as_ref().err());
    assert!(!dir.exists(), "a failed open left {dir:?}");
    let db = Db::open(&dir, h.options()).expect("open after the fault");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    let db = Db::open(&dir, h.options()).expect("reopen");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    db.close().expect("close");
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
    use strata::WriteBatch;
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
