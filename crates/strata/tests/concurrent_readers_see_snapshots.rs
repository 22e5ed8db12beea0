//! Writers commit batches that set every key of a group to one counter value (or delete
//! the whole group) while readers check, through snapshots, that no batch is ever seen
//! half-applied, that a snapshot reads the same thing every time, and that snapshots
//! never go back in time; meanwhile flushes and compactions run on a small memtable.

mod small_db;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Keyspace, Options, Snapshot, WriteBatch};

const WRITERS: usize = 3;
const GROUPS_PER_WRITER: usize = 12;
const KEYS_PER_GROUP: usize = 8;
const RUN_FOR: Duration = Duration::from_secs(4);

fn options() -> Options {
    Options {
        l0_stall_trigger: 12,
        background_threads: 2,
        block_cache_bytes: 256 << 10,
        ..small_db::options()
    }
}

fn group_prefix(w: usize, g: usize) -> String {
    format!("w{w}/g{g:03}/")
}

fn group_key(w: usize, g: usize, k: usize) -> Vec<u8> {
    format!("{}k{k}", group_prefix(w, g)).into_bytes()
}

/// The value of a group at counter `c`: the counter first, then padding.
fn group_value(c: u64) -> Vec<u8> {
    let mut v = format!("{c:010}|").into_bytes();
    v.resize(80, b'.');
    v
}

fn counter_of(v: &[u8]) -> u64 {
    std::str::from_utf8(&v[..10])
        .expect("ascii counter")
        .parse()
        .expect("counter")
}

/// Group (writer, group) -> counter, or `None` for "all keys absent". Panics when a
/// group is half-applied.
type View = BTreeMap<(usize, usize), Option<u64>>;

fn parse_key(k: &[u8]) -> (usize, usize) {
    let s = std::str::from_utf8(k).expect("utf-8 key");
    let mut parts = s.split('/');
    let w = parts
        .next()
        .and_then(|p| p.strip_prefix('w'))
        .and_then(|p| p.parse().ok())
        .expect("writer");
    let g = parts
        .next()
        .and_then(|p| p.strip_prefix('g'))
        .and_then(|p| p.parse().ok())
        .expect("group");
    (w, g)
}

/// Checks a full scan (sorted, no duplicates, every group all-or-nothing with one
/// value) and condenses it to a view.
fn view_of(entries: &[(Vec<u8>, Vec<u8>)], what: &str) -> View {
    for w in entries.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "{what}: keys not strictly increasing: {:?} then {:?}",
            String::from_utf8_lossy(&w[0].0),
            String::from_utf8_lossy(&w[1].0)
        );
    }
    let mut groups: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
    for (k, v) in entries {
        groups.entry(parse_key(k)).or_default().push(counter_of(v));
    }
    let mut view = View::new();
    for w in 0..WRITERS {
        for g in 0..GROUPS_PER_WRITER {
            let c = match groups.get(&(w, g)) {
                None => None,
                Some(cs) => {
                    assert_eq!(
                        cs.len(),
                        KEYS_PER_GROUP,
                        "{what}: group {} half-applied: {cs:?}",
                        group_prefix(w, g)
                    );
                    assert!(
                        cs.iter().all(|c| *c == cs[0]),
                        "{what}: group {} has mixed values {cs:?}",
                        group_prefix(w, g)
                    );
                    Some(cs[0])
                }
            };
            view.insert((w, g), c);
        }
    }
    view
}

fn scan_all(snap: &Snapshot, ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    snap.scan(ks, ..)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan item")
}

/// Writer `w`: its counter increases with every batch, so a group's value only grows.
fn writer(db: &Db, w: usize, stop: &AtomicBool, seed: u64) -> (View, u64) {
    let ks = db.default_keyspace();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut state: View = (0..GROUPS_PER_WRITER).map(|g| ((w, g), None)).collect();
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let g = rng.gen_range(0..GROUPS_PER_WRITER);
        let mut b = WriteBatch::new();
        if rng.gen_bool(0.1) {
            // Delete the whole group, sometimes with a range delete.
            if rng.gen_bool(0.5) {
                let p = group_prefix(w, g);
                b.delete_range(&ks, p.as_bytes(), format!("{p}\u{7f}").as_bytes());
            } else {
                for k in 0..KEYS_PER_GROUP {
                    b.delete(&ks, &group_key(w, g, k));
                }
            }
            state.insert((w, g), None);
        } else {
            // Keys in a random order, so that atomicity does not depend on key order.
            let mut keys: Vec<usize> = (0..KEYS_PER_GROUP).collect();
            for i in (1..keys.len()).rev() {
                keys.swap(i, rng.gen_range(0..=i));
            }
            for k in keys {
                b.put(&ks, &group_key(w, g, k), &group_value(counter));
            }
            state.insert((w, g), Some(counter));
        }
        db.write(b).expect("write");
    }
    (state, counter)
}

/// Reader: snapshots must be all-or-nothing per group, repeatable, and monotonic.
fn reader(db: &Db, stop: &AtomicBool, checks: &AtomicU64, seed: u64) {
    let ks = db.default_keyspace();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut prev: Option<View> = None;
    while !stop.load(Ordering::Relaxed) {
        let snap = db.snapshot();
        let first = scan_all(&snap, &ks);
        let view = view_of(&first, &format!("snapshot at seq {}", snap.seq()));
        if let Some(prev) = &prev {
            for (g, c) in &view {
                if let (Some(old), Some(new)) = (prev[g], c) {
                    assert!(*new >= old, "group {g:?} went back in time: {old} then {new}");
                }
            }
        }
        // Give writers and compactions time to move things, then read the snapshot again.
        thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
        let second = scan_all(&snap, &ks);
        assert!(
            first == second,
            "snapshot at seq {} changed between two scans",
            snap.seq()
        );
        let mut back: Vec<_> = snap
            .scan(&ks, ..)
            .expect("scan")
            .rev()
            .collect::<Result<_, _>>()
            .expect("scan item");
        back.reverse();
        assert!(
            first == back,
            "snapshot at seq {}: reverse scan differs from forward scan",
            snap.seq()
        );
        // Point reads agree with the scan.
        for _ in 0..20 {
            let (w, g, k) = (
                rng.gen_range(0..WRITERS),
                rng.gen_range(0..GROUPS_PER_WRITER),
                rng.gen_range(0..KEYS_PER_GROUP),
            );
            let got = snap.get(&ks, &group_key(w, g, k)).expect("get");
            let want = view[&(w, g)].map(group_value);
            assert_eq!(
                got,
                want,
                "snapshot at seq {}: get of {} disagrees with its scan",
                snap.seq(),
                String::from_utf8_lossy(&group_key(w, g, k))
            );
        }
        // A bounded scan over one group sees it whole.
        let (w, g) = (rng.gen_range(0..WRITERS), rng.gen_range(0..GROUPS_PER_WRITER));
        let p = group_prefix(w, g);
        let part: Vec<_> = snap
            .scan(&ks, p.as_bytes()..format!("{p}\u{7f}").as_bytes())
            .expect("scan")
            .collect::<Result<_, _>>()
            .expect("scan item");
        let pv = view_of(&part, "group scan");
        assert_eq!(
            pv[&(w, g)],
            view[&(w, g)],
            "group scan of {p} disagrees with the full scan"
        );
        prev = Some(view);
        checks.fetch_add(1, Ordering::Relaxed);
    }
}

/// Plain (non-snapshot) scans: each pins its own snapshot, so the same checks hold.
fn plain_scanner(db: &Db, stop: &AtomicBool, checks: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        let entries: Vec<_> = db.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item");
        view_of(&entries, "db.scan");
        let rev = small_db::reversed(db.scan(..).expect("scan"));
        view_of(&rev, "db.scan().rev()");
        checks.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn snapshots_are_atomic_and_repeatable_under_concurrent_writes_and_compactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), options()).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let scans = Arc::new(AtomicU64::new(0));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            thread::spawn(move || writer(&db, w, &stop, 100 + w as u64))
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, stop, checks) = (db.clone(), stop.clone(), checks.clone());
            thread::spawn(move || reader(&db, &stop, &checks, 200 + r))
        })
        .collect();
    let scanner = {
        let (db, stop, scans) = (db.clone(), stop.clone(), scans.clone());
        thread::spawn(move || plain_scanner(&db, &stop, &scans))
    };
    // Explicit flushes and full compactions on top of the background ones.
    let maintenance = {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(150));
                if n % 3 == 2 {
                    db.compact_range().expect("compact_range");
                } else {
                    db.flush().expect("flush");
                }
                n += 1;
            }
        })
    };

    let start = Instant::now();
    let mut saw_deep_levels = false;
    while start.elapsed() < RUN_FOR {
        thread::sleep(Duration::from_millis(50));
        let stats = db.stats();
        saw_deep_levels |= stats
            .keyspaces
            .iter()
            .any(|k| k.levels.iter().any(|l| l.level > 0 && l.files > 0));
    }
    stop.store(true, Ordering::Relaxed);
    let results: Vec<(View, u64)> = writers
        .into_iter()
        .map(|h| h.join().expect("writer panicked"))
        .collect();
    for r in readers {
        r.join().expect("reader panicked");
    }
    scanner.join().expect("scanner panicked");
    maintenance.join().expect("maintenance panicked");

    let stats = db.stats();
    assert!(
        stats.flushes > 0 && stats.compactions > 0,
        "no background work happened:\n{stats}"
    );
    assert!(saw_deep_levels, "no file ever reached a level > 0:\n{stats}");
    assert!(
        checks.load(Ordering::Relaxed) >= 10,
        "readers checked only {} snapshots",
        checks.load(Ordering::Relaxed)
    );
    assert!(scans.load(Ordering::Relaxed) >= 5);
    let batches: u64 = results.iter().map(|r| r.1).sum();
    assert!(batches >= 500, "writers committed only {batches} batches");

    // The final state is exactly what each writer last wrote, now and after a reopen.
    let mut expected = View::new();
    for (v, _) in &results {
        expected.extend(v.iter().map(|(k, c)| (*k, *c)));
    }
    let ks = db.default_keyspace();
    let now = view_of(&scan_all(&db.snapshot(), &ks), "final scan");
    assert_eq!(now, expected, "final state differs from the writers' last writes");
    drop(ks);
    let db = Arc::into_inner(db).expect("all threads are done");
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let ks = db.default_keyspace();
    let reopened = view_of(&scan_all(&db.snapshot(), &ks), "scan after reopen");
    assert_eq!(
        reopened, expected,
        "state after reopen differs from the writers' last writes"
    );
}
