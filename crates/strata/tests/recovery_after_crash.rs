//! Crash recovery: a child process (this test binary, re-run in a "child" role) writes
//! batches and reports each acknowledged one on stdout; the parent kills it with
//! SIGKILL at a random moment, reopens the database and checks that every acknowledged
//! batch is there in full and that no batch is half-applied. Each batch also writes a
//! multimap (puts, deletes, and now and then a `delete_all` followed by a put), whose
//! values are checked the same way. Also: a torn last WAL
//! record is dropped on recovery while everything before it survives.

#[path = "fault_harness/child.rs"]
mod child;
#[path = "fault_harness/open.rs"]
mod open;
mod small_db;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use child::ChildRun;
use open::open_when_unlocked;
use rand::Rng;
use strata::multimap::MultiMap;
use strata::{Db, Keyspace, Options, SyncPolicy, WriteBatch};

const CHILD_DIR_ENV: &str = "STRATA_CRASH_CHILD_DIR";
const CHILD_SYNC_ENV: &str = "STRATA_CRASH_CHILD_SYNC";
const CHILD_THREADS_ENV: &str = "STRATA_CRASH_CHILD_THREADS";
/// Keys each batch adds of its own (in two keyspaces).
const OWN_KEYS: usize = 3;
/// Keys every batch of a thread overwrites with its batch number.
const SHARED_KEYS: usize = 6;
/// Batch `n` with `n.is_multiple_of(RANGE_EVERY)` range-deletes the own keys of batch `n - RANGE_EVERY`.
const RANGE_EVERY: u64 = 10;
/// Multimap keys per thread that batches spread their values over (`n % MM_KEYS`).
const MM_KEYS: u64 = 5;
/// Batch `n` with `n % MM_DELETE_EVERY == MM_DELETE_EVERY - 1` deletes the value of batch `n - 3`.
const MM_DELETE_EVERY: u64 = 7;
/// Batch `n` with `n % MM_CLEAR_EVERY == MM_CLEAR_EVERY - 1` clears the "all" key, then adds `n`.
const MM_CLEAR_EVERY: u64 = 50;

fn mm_key(t: usize, j: u64) -> Vec<u8> {
    format!("t{t}/author{j}").into_bytes()
}

fn mm_all(t: usize) -> Vec<u8> {
    format!("t{t}/all").into_bytes()
}

/// The multimap values every batch up to `last` of thread `t` leaves, by key.
fn mm_expected(t: usize, last: Option<u64>) -> BTreeMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut m: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    let Some(last) = last else { return m };
    for j in 0..MM_KEYS {
        m.insert(mm_key(t, j), Vec::new());
    }
    let cleared = (0..=last)
        .rev()
        .find(|d| d % MM_CLEAR_EVERY == MM_CLEAR_EVERY - 1)
        .unwrap_or(0);
    for n in 0..=last {
        let deleted = n % MM_DELETE_EVERY == MM_DELETE_EVERY - 4 && n + 3 <= last;
        if !deleted {
            m.entry(mm_key(t, n % MM_KEYS))
                .or_default()
                .push(n.to_be_bytes().to_vec());
        }
        if n >= cleared {
            m.entry(mm_all(t)).or_default().push(n.to_be_bytes().to_vec());
        }
    }
    m
}

fn options(sync: SyncPolicy) -> Options {
    Options {
        sync,
        ..small_db::options()
    }
}

fn parse_sync(s: &str) -> SyncPolicy {
    match s {
        "none" => SyncPolicy::None,
        "every" => SyncPolicy::EveryBatch,
        "group" => SyncPolicy::GroupCommit,
        other => panic!("unknown sync policy {other}"),
    }
}

fn own_prefix(t: usize, n: u64) -> String {
    format!("t{t}/own/{n:08}/")
}

fn own_key(t: usize, n: u64, j: usize) -> Vec<u8> {
    format!("{}{j}", own_prefix(t, n)).into_bytes()
}

fn shared_key(t: usize, j: usize) -> Vec<u8> {
    format!("t{t}/shared/{j}").into_bytes()
}

fn own_value(t: usize, n: u64, j: usize) -> Vec<u8> {
    let mut v = format!("t{t}n{n}j{j}:").into_bytes();
    v.resize(120, b'x');
    v
}

/// The batch number `n` of thread `t`: own keys in two keyspaces, the shared keys set
/// to `n`, and every `RANGE_EVERY` batches a range delete of an older batch's keys.
fn batch(t: usize, n: u64, default: &Keyspace, other: &Keyspace, mm: &MultiMap) -> WriteBatch {
    let mut b = WriteBatch::new();
    mm.put_in(&mut b, &mm_key(t, n % MM_KEYS), &n.to_be_bytes())
        .expect("put_in");
    if n % MM_DELETE_EVERY == MM_DELETE_EVERY - 1 {
        let m = n - 3;
        mm.delete_in(&mut b, &mm_key(t, m % MM_KEYS), &m.to_be_bytes())
            .expect("delete_in");
    }
    if n % MM_CLEAR_EVERY == MM_CLEAR_EVERY - 1 {
        mm.delete_all_in(&mut b, &mm_all(t)).expect("delete_all_in");
    }
    mm.put_in(&mut b, &mm_all(t), &n.to_be_bytes()).expect("put_in");
    for j in 0..OWN_KEYS {
        b.put(default, &own_key(t, n, j), &own_value(t, n, j));
        b.put(other, &own_key(t, n, j), &own_value(t, n, j));
    }
    for j in 0..SHARED_KEYS {
        b.put(default, &shared_key(t, j), n.to_string().as_bytes());
    }
    if n.is_multiple_of(RANGE_EVERY) && n >= RANGE_EVERY {
        let p = own_prefix(t, n - RANGE_EVERY);
        b.delete_range(default, p.as_bytes(), format!("{p}~").as_bytes());
    }
    b
}

/// The last batch of thread `t` in the database, checking that the shared keys agree.
fn last_batch(db: &Db, t: usize) -> Option<u64> {
    let vals: Vec<Option<u64>> = (0..SHARED_KEYS)
        .map(|j| {
            db.get(&shared_key(t, j))
                .expect("get")
                .map(|v| String::from_utf8(v).expect("utf-8").parse().expect("number"))
        })
        .collect();
    assert!(
        vals.iter().all(|v| *v == vals[0]),
        "thread {t}: shared keys half-applied: {vals:?}"
    );
    vals[0]
}

/// Checks that exactly batches `0..=last` of thread `t` are applied, each in full.
fn check_thread(db: &Db, other: &Keyspace, t: usize, last: Option<u64>, upto: u64) {
    let mm = MultiMap::new(db.keyspace("mm").expect("multimap keyspace"));
    let want = mm_expected(t, last);
    for (k, vals) in &want {
        let got: Vec<Vec<u8>> = mm.get(k).expect("get").map(|r| r.expect("value")).collect();
        assert_eq!(
            &got,
            vals,
            "thread {t} multimap key {} (last applied batch {last:?})",
            String::from_utf8_lossy(k)
        );
    }
    let mine = format!("t{t}/");
    let stray = mm
        .entries()
        .expect("entries")
        .map(|r| r.expect("entry"))
        .find(|(k, _)| k.starts_with(mine.as_bytes()) && !want.contains_key(k));
    assert!(stray.is_none(), "thread {t}: unexpected multimap entry {stray:?}");
    for n in 0..upto {
        let applied = last.is_some_and(|l| n <= l);
        let range_deleted = last.is_some_and(|l| n.is_multiple_of(RANGE_EVERY) && n + RANGE_EVERY <= l);
        for j in 0..OWN_KEYS {
            let k = own_key(t, n, j);
            let want = applied.then(|| own_value(t, n, j));
            let want_default = if range_deleted { None } else { want.clone() };
            assert_eq!(
                db.get(&k).expect("get"),
                want_default,
                "thread {t} batch {n} key {j} in default (last applied batch {last:?})"
            );
            assert_eq!(
                other.get(&k).expect("get"),
                want,
                "thread {t} batch {n} key {j} in other (last applied {last:?})"
            );
        }
    }
    // Nothing of any later batch leaked in.
    let p = format!("t{t}/own/");
    let stray = db
        .scan(p.as_bytes()..format!("t{t}/own~").as_bytes())
        .expect("scan")
        .map(|r| r.expect("scan item").0)
        .find(|k| {
            let n: u64 = std::str::from_utf8(&k[p.len()..p.len() + 8])
                .expect("utf-8")
                .parse()
                .expect("number");
            last.is_none_or(|l| n > l)
        });
    assert!(
        stray.is_none(),
        "thread {t}: key {:?} of an unapplied batch is present",
        stray.map(|k| String::from_utf8_lossy(&k).into_owned())
    );
}

/// The child role: open, resume each thread after its last batch, write until killed.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return; // not running as a child
    };
    let sync = parse_sync(&std::env::var(CHILD_SYNC_ENV).expect("sync policy"));
    let threads: usize = std::env::var(CHILD_THREADS_ENV)
        .expect("threads")
        .parse()
        .expect("number");
    let db = open_when_unlocked(Path::new(&dir), options(sync)).expect("child open");
    let other = db.keyspace_or_create("other").expect("other keyspace");
    let mm = MultiMap::new(db.keyspace_or_create("mm").expect("multimap keyspace"));
    let db = &db;
    let other = &other;
    let mm = &mm;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let default = db.default_keyspace();
                let mut n = last_batch(db, t).map_or(0, |l| l + 1);
                loop {
                    db.write(batch(t, n, &default, other, mm)).expect("child write");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {t} {n}").expect("stdout");
                    out.flush().expect("stdout");
                    n += 1;
                }
            });
        }
    });
}

/// An acknowledgement line of the child: `ACK <thread> <batch>`.
fn parse_ack(line: &str) -> Option<(usize, u64)> {
    let mut it = line.strip_prefix("ACK ")?.split(' ');
    let t: usize = it.next().and_then(|x| x.parse().ok()).expect("thread");
    let n: u64 = it.next().and_then(|x| x.parse().ok()).expect("batch");
    Some((t, n))
}

/// Runs the child until a random number of acknowledgements arrived, kills it, and
/// returns the highest acknowledged batch per thread.
fn run_and_kill_child(dir: &Path, sync: &str, threads: usize, min_acks: usize) -> BTreeMap<usize, u64> {
    let threads = threads.to_string();
    let mut child = ChildRun::spawn(
        "child_writer",
        &[
            (CHILD_DIR_ENV, dir.as_os_str()),
            (CHILD_SYNC_ENV, sync.as_ref()),
            (CHILD_THREADS_ENV, threads.as_ref()),
        ],
    );
    let target = rand::thread_rng().gen_range(min_acks..min_acks * 4);
    let mut acked: BTreeMap<usize, u64> = BTreeMap::new();
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while count < target {
        match child.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                if let Some((t, n)) = parse_ack(&line) {
                    acked.insert(t, n);
                    count += 1;
                }
            }
            Err(_) => {
                child.assert_running();
                assert!(Instant::now() < deadline, "child made no progress ({count} acks)");
            }
        }
    }
    // Acknowledgements printed before the kill are still in the pipe.
    for line in child.kill() {
        if let Some((t, n)) = parse_ack(&line) {
            acked.insert(t, n);
        }
    }
    acked
}

fn crash_rounds(sync: &str, threads: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = parse_sync(sync);
    let mut deep = false;
    let mut prev_last: BTreeMap<usize, Option<u64>> = BTreeMap::new();
    for round in 0..4 {
        let acked = run_and_kill_child(dir.path(), sync, threads, 150);
        assert!(!acked.is_empty(), "round {round}: nothing acknowledged");
        let db = open_when_unlocked(dir.path(), options(policy)).expect("reopen after crash");
        let other = db.keyspace("other").expect("other keyspace survives the crash");
        for t in 0..threads {
            let last = last_batch(&db, t);
            if let Some(&a) = acked.get(&t) {
                assert!(
                    last.is_some_and(|l| l >= a),
                    "round {round} thread {t}: acknowledged batch {a} lost (last applied {last:?})"
                );
            }
            if let Some(p) = prev_last.get(&t) {
                assert!(last >= *p, "round {round} thread {t}: went back from {p:?} to {last:?}");
            }
            let upto = last.map_or(0, |l| l + 50);
            check_thread(&db, &other, t, last, upto);
            prev_last.insert(t, last);
        }
        db.wait_for_background().expect("background work after recovery");
        let stats = db.stats();
        deep |= stats
            .keyspaces
            .iter()
            .any(|k| k.levels.iter().any(|l| l.level > 0 && l.files > 0));
        db.close().expect("close");
    }
    assert!(deep, "the crashed databases never had files below level 0");
}

#[test]
fn crash_with_every_batch_sync_loses_no_acknowledged_batch() {
    crash_rounds("every", 1);
}

#[test]
fn crash_with_group_commit_loses_no_acknowledged_batch() {
    crash_rounds("group", 4);
}

#[test]
fn process_crash_without_sync_loses_no_acknowledged_batch() {
    // SyncPolicy::None promises to survive a process crash (data is in the OS).
    crash_rounds("none", 2);
}

fn wal_files(dir: &Path) -> Vec<(u64, std::path::PathBuf)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| {
            let n = p.file_name()?.to_str()?.strip_suffix(".wal")?.parse::<u64>().ok()?;
            Some((n, p))
        })
        .collect();
    v.sort();
    v
}

/// A database in `dir` that syncs every batch, holding batches 0..100 of thread 0 in
/// its WAL only (the memtable is far from full), and the options it was opened with.
fn synced_db_with_100_batches(dir: &Path) -> (Db, Options) {
    let opts = Options {
        sync: SyncPolicy::EveryBatch,
        memtable_budget: 8 << 20,
        ..Options::default()
    };
    let db = open_when_unlocked(dir, opts.clone()).expect("open");
    let other = db.create_keyspace("other").expect("keyspace");
    let mm = MultiMap::new(db.create_keyspace("mm").expect("keyspace"));
    let default = db.default_keyspace();
    for n in 0..100 {
        db.write(batch(0, n, &default, &other, &mm)).expect("write");
    }
    drop((default, other, mm));
    (db, opts)
}

/// The crash image of a database holding batches 0..100 of thread 0 in its WAL, all
/// synced, with the last record cut short (as a crash mid-append leaves it); the image's
/// directory, options and last WAL.
fn crash_image_with_a_torn_tail() -> (tempfile::TempDir, Options, std::path::PathBuf) {
    let live = tempfile::tempdir().expect("tempdir");
    let (db, opts) = synced_db_with_100_batches(live.path());
    // The crash image: every batch was synced, and a crash leaves no clean close (which
    // would record the log's synced length and make a cut inside it damage).
    let dir = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(live.path()).expect("ls") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), dir.path().join(e.file_name())).expect("copy");
    }
    db.close().expect("close");
    assert!(
        std::fs::read_dir(dir.path()).expect("ls").all(|e| !e
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .ends_with(".sst")),
        "nothing should be flushed yet"
    );

    let wals = wal_files(dir.path());
    let (_, last_wal) = wals
        .iter()
        .rev()
        .find(|(_, p)| std::fs::metadata(p).expect("stat").len() > 0)
        .expect("a non-empty WAL");
    // Records end at the last non-zero byte (payloads end in ASCII); the zeros after
    // them were written ahead by the syncs. Cut the last record short.
    let bytes = std::fs::read(last_wal).expect("read WAL");
    let end = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(last_wal)
        .expect("open WAL");
    f.set_len(end as u64 - 3).expect("truncate");
    drop(f);
    let last_wal = last_wal.clone();
    (dir, opts, last_wal)
}

#[test]
fn torn_final_wal_record_is_dropped_and_the_rest_recovered() {
    let (dir, opts, _) = crash_image_with_a_torn_tail();
    let db = open_when_unlocked(dir.path(), opts.clone()).expect("reopen with a torn WAL tail");
    let other = db.keyspace("other").expect("other");
    assert_eq!(last_batch(&db, 0), Some(98), "exactly the last (torn) batch is lost");
    check_thread(&db, &other, 0, Some(98), 110);

    // The recovered database takes new writes, and they survive another reopen (the
    // torn log must not be appended to).
    let default = db.default_keyspace();
    let mm = MultiMap::new(db.keyspace("mm").expect("multimap keyspace"));
    for n in 99..120 {
        db.write(batch(0, n, &default, &other, &mm))
            .expect("write after recovery");
    }
    drop((default, other, mm));
    db.close().expect("close");
    let db = open_when_unlocked(dir.path(), opts).expect("second reopen");
    let other = db.keyspace("other").expect("other");
    assert_eq!(last_batch(&db, 0), Some(119));
    check_thread(&db, &other, 0, Some(119), 130);
}

/// An open that crashed or failed after making its new WAL, before its manifest retired
/// the old logs, leaves an empty log after the torn one: the torn tail is still where
/// the log ends, and the next open recovers as it would have.
#[test]
fn a_torn_tail_followed_by_empty_logs_is_still_the_end_of_the_log() {
    let (dir, opts, last_wal) = crash_image_with_a_torn_tail();
    let n: u64 = last_wal
        .file_name()
        .and_then(|n| n.to_str()?.strip_suffix(".wal")?.parse().ok())
        .expect("WAL number");
    // One empty, one zeroed ahead (as a synced log's writer leaves it before a record).
    std::fs::write(dir.path().join(format!("{:06}.wal", n + 5)), b"").expect("empty log");
    std::fs::write(dir.path().join(format!("{:06}.wal", n + 9)), vec![0u8; 64 << 10]).expect("zeroed log");
    let db = open_when_unlocked(dir.path(), opts.clone()).expect("reopen");
    let other = db.keyspace("other").expect("other");
    assert_eq!(last_batch(&db, 0), Some(98), "exactly the last (torn) batch is lost");
    check_thread(&db, &other, 0, Some(98), 110);
    // Damage is still damage: a torn log followed by one holding records is refused.
    drop(other);
    db.close().expect("close");
    let (dir, opts, last_wal) = crash_image_with_a_torn_tail();
    let n: u64 = last_wal
        .file_name()
        .and_then(|n| n.to_str()?.strip_suffix(".wal")?.parse().ok())
        .expect("WAL number");
    let later = dir.path().join(format!("{:06}.wal", n + 5));
    let mut w = strata::wal::Writer::new(strata::fs::FileSystem::create(&strata::fs::RealFs, &later).expect("create"));
    w.add_record(b"not a batch").expect("record");
    w.sync().expect("sync");
    drop(w);
    let e = open_when_unlocked(dir.path(), opts).expect_err("torn log before a non-empty one");
    assert!(e.is_corruption(), "{e}");
}

#[test]
fn a_wal_synced_per_commit_is_zeroed_ahead_and_reopens_without_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, opts) = synced_db_with_100_batches(dir.path());
    let wal_bytes = db.stats().wal_bytes_written;
    // Dropped, not closed: nothing but the synced WAL holds the batches.
    drop(db);

    let (_, wal) = wal_files(dir.path()).pop().expect("a WAL");
    let bytes = std::fs::read(&wal).expect("read WAL");
    let end = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
    assert!(
        bytes.len() >= 1 << 20,
        "{} bytes on disk: not zeroed ahead",
        bytes.len()
    );
    assert!(end as u64 <= wal_bytes, "records end at {end}, {wal_bytes} written");

    let db = open_when_unlocked(dir.path(), opts).expect("reopen");
    let other = db.keyspace("other").expect("other");
    assert_eq!(last_batch(&db, 0), Some(99));
    check_thread(&db, &other, 0, Some(99), 110);
    let torn: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".torn"))
        .collect();
    assert!(torn.is_empty(), "zeros ahead were taken for a torn tail: {torn:?}");
}
