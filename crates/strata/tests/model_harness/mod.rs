//! Model-based testing harness shared by `model_leveling.rs` and `model_tiering.rs`.
//!
//! A random sequence of [`Op`]s is applied both to a real database and to a model (one
//! `BTreeMap` per keyspace, plus a frozen copy of the whole model per live snapshot);
//! every read is checked against the model.

#![allow(dead_code)]

mod nosync;
pub mod options;

pub use nosync::NoSyncFs;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use strata::{Db, Keyspace, Options, Snapshot, WriteBatch};

/// Key indexes are `0..UNIVERSE`; bounds may go one past the end.
pub const UNIVERSE: u16 = 200;
/// Keyspaces the harness may use, the first being the default one.
pub const KS_NAMES: [&str; 3] = ["default", "ks1", "ks2"];

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Key `i`, ascending with `i`: in threes, a base `k0000`, `k0001`, ..., then the base
/// followed by a zero byte, then by zero and one. Keys that extend others (and bounds
/// that are prefixes of keys) reach the cases fixed-width keys never do.
pub fn key(i: u16) -> Vec<u8> {
    let mut k = format!("k{:04}", i / 3).into_bytes();
    k.extend_from_slice([&[][..], &[0], &[0, 1]][usize::from(i % 3)]);
    k
}

/// A value unique to the operation that wrote it (`tag`) and its key; `len == 0` gives
/// the empty value (which must not be confused with a deletion).
pub fn value(tag: usize, k: u16, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    let mut v = format!("v{tag}/{k}/").into_bytes();
    let mut i = 0u8;
    while v.len() < len {
        v.push(b'a' + i % 26);
        i = i.wrapping_add(7);
    }
    v
}

/// One write inside a batch.
#[derive(Debug, Clone)]
pub enum WOp {
    Put { ks: usize, key: u16, vlen: usize },
    Delete { ks: usize, key: u16 },
    DeleteRange { ks: usize, start: u16, end: u16 },
}

/// How a scan is consumed.
#[derive(Debug, Clone, Copy)]
pub enum ScanMode {
    Forward,
    Reverse,
    /// Alternates `next` and `next_back` until they meet.
    Alternate,
    /// Only the first `n` items, forward.
    Take(usize),
    /// `next_run` of up to `.0` entries, then `next_back_run` of up to `.1` (none when
    /// 0), in turn until both hand none.
    Runs(usize, usize),
}

#[derive(Debug, Clone)]
pub enum Op {
    Put {
        ks: usize,
        key: u16,
        vlen: usize,
    },
    Delete {
        ks: usize,
        key: u16,
    },
    DeleteRange {
        ks: usize,
        start: u16,
        end: u16,
    },
    Batch(Vec<WOp>),
    /// `count` consecutive keys from `start` in one batch (volume, to force flushes).
    Fill {
        ks: usize,
        start: u16,
        count: u16,
        vlen: usize,
    },
    Get {
        ks: usize,
        key: u16,
    },
    Scan {
        ks: usize,
        lo: Bound<u16>,
        hi: Bound<u16>,
        mode: ScanMode,
    },
    TakeSnapshot,
    SnapGet {
        snap: Index,
        ks: usize,
        key: u16,
    },
    SnapScan {
        snap: Index,
        ks: usize,
        lo: Bound<u16>,
        hi: Bound<u16>,
        mode: ScanMode,
    },
    DropSnapshot {
        snap: Index,
    },
    Flush,
    CompactAll,
    CompactKeyspace {
        ks: usize,
        lo: Bound<u16>,
        hi: Bound<u16>,
    },
    WaitForBackground,
    Reopen,
    /// External SSTables built from `entries` (key, `Some(vlen)` put or `None` delete;
    /// a key's last entry wins), split into `files` disjoint files, ingested in one call.
    Ingest {
        ks: usize,
        entries: Vec<(u16, Option<usize>)>,
        files: usize,
        link: bool,
    },
    /// A secondary range delete on keyspace 2 (whose delete key is the value's second
    /// byte, the first digit of the writing operation's tag): kills values whose byte is
    /// in `lo..hi`. A no-op with fewer than 3 keyspaces.
    DeleteWhere {
        lo: u8,
        hi: u8,
    },
}

/// Keyspace 2's delete key and tile size (see [`Op::DeleteWhere`]).
pub fn delete_key_of_ks2() -> (strata::delete_key::DeleteKey, strata::delete_key::TileChoice) {
    (
        strata::delete_key::DeleteKey { offset: 1, width: 1 },
        strata::delete_key::TileChoice::Fixed(4),
    )
}

fn key_idx() -> impl Strategy<Value = u16> {
    0..UNIVERSE
}

fn vlen() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 6 => 1usize..120, 2 => 120usize..400]
}

fn bound() -> impl Strategy<Value = Bound<u16>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        3 => (0..=UNIVERSE).prop_map(Bound::Included),
        3 => (0..=UNIVERSE).prop_map(Bound::Excluded),
    ]
}

fn range_del(nks: usize) -> impl Strategy<Value = (usize, u16, u16)> {
    (0..nks, key_idx(), 1u16..40).prop_map(|(ks, s, len)| (ks, s, (s + len).min(UNIVERSE + 1)))
}

fn scan_mode() -> impl Strategy<Value = ScanMode> {
    prop_oneof![
        3 => Just(ScanMode::Forward),
        3 => Just(ScanMode::Reverse),
        2 => Just(ScanMode::Alternate),
        1 => (0usize..10).prop_map(ScanMode::Take),
        2 => (1usize..8, 0usize..8).prop_map(|(f, b)| ScanMode::Runs(f, b)),
    ]
}

fn wop(nks: usize) -> impl Strategy<Value = WOp> {
    prop_oneof![
        6 => (0..nks, key_idx(), vlen()).prop_map(|(ks, key, vlen)| WOp::Put { ks, key, vlen }),
        3 => (0..nks, key_idx()).prop_map(|(ks, key)| WOp::Delete { ks, key }),
        1 => range_del(nks).prop_map(|(ks, start, end)| WOp::DeleteRange { ks, start, end }),
    ]
}

/// One random operation over `nks` keyspaces.
pub fn op(nks: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0..nks, key_idx(), vlen()).prop_map(|(ks, key, vlen)| Op::Put { ks, key, vlen }),
        8 => (0..nks, key_idx()).prop_map(|(ks, key)| Op::Delete { ks, key }),
        3 => range_del(nks).prop_map(|(ks, start, end)| Op::DeleteRange { ks, start, end }),
        5 => proptest::collection::vec(wop(nks), 1..8).prop_map(Op::Batch),
        6 => (0..nks, key_idx(), 1u16..60, vlen()).prop_map(|(ks, start, count, vlen)| Op::Fill { ks, start, count, vlen }),
        10 => (0..nks, key_idx()).prop_map(|(ks, key)| Op::Get { ks, key }),
        6 => (0..nks, bound(), bound(), scan_mode()).prop_map(|(ks, lo, hi, mode)| Op::Scan { ks, lo, hi, mode }),
        4 => Just(Op::TakeSnapshot),
        5 => (any::<Index>(), 0..nks, key_idx()).prop_map(|(snap, ks, key)| Op::SnapGet { snap, ks, key }),
        4 => (any::<Index>(), 0..nks, bound(), bound(), scan_mode())
            .prop_map(|(snap, ks, lo, hi, mode)| Op::SnapScan { snap, ks, lo, hi, mode }),
        2 => any::<Index>().prop_map(|snap| Op::DropSnapshot { snap }),
        3 => Just(Op::Flush),
        1 => Just(Op::CompactAll),
        1 => (0..nks, bound(), bound()).prop_map(|(ks, lo, hi)| Op::CompactKeyspace { ks, lo, hi }),
        1 => Just(Op::WaitForBackground),
        1 => Just(Op::Reopen),
        3 => (
            0..nks,
            proptest::collection::vec((key_idx(), prop_oneof![1 => Just(None), 5 => vlen().prop_map(Some)]), 1..40),
            1usize..4,
            any::<bool>()
        )
            .prop_map(|(ks, entries, files, link)| Op::Ingest { ks, entries, files, link }),
        2 => (0u8..9, 1u8..4).prop_map(|(lo, w)| Op::DeleteWhere { lo: b'0' + lo, hi: b'0' + (lo + w).min(10) }),
    ]
}

/// A drawn history: 1 to 3 keyspaces and 100 to 300 operations over them.
pub fn history() -> impl Strategy<Value = (usize, Vec<Op>)> {
    (1usize..=3).prop_flat_map(|nks| (Just(nks), proptest::collection::vec(op(nks), 100..300)))
}

/// The proptest settings of the model tests: 60 drawn histories, patient shrinking.
pub fn model_config() -> ProptestConfig {
    ProptestConfig {
        cases: 60,
        max_shrink_iters: 1000,
        ..ProptestConfig::default()
    }
}

/// Options small enough that a few hundred operations flush and compact.
pub fn small_options() -> Options {
    Options {
        fs: Arc::new(NoSyncFs),
        memtable_budget: 4096,
        target_file_size: 4096,
        block_size: 256,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 8,
        background_threads: 2,
        block_cache_bytes: 64 << 10,
        ..Options::default()
    }
}

fn bytes_bound(b: &Bound<u16>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(i) => Bound::Included(key(*i)),
        Bound::Excluded(i) => Bound::Excluded(key(*i)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn in_bounds(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let lo_ok = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let hi_ok = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    lo_ok && hi_ok
}

/// Bytes of keys and values an operation writes (a range delete counts both its keys).
fn written_bytes(op: &Op) -> u64 {
    let w = |o: &WOp| match *o {
        WOp::Put { vlen, .. } => 5 + vlen as u64,
        WOp::Delete { .. } => 5,
        WOp::DeleteRange { .. } => 10,
    };
    match op {
        Op::Put { vlen, .. } => 5 + *vlen as u64,
        Op::Delete { .. } => 5,
        Op::DeleteRange { .. } => 10,
        Op::Batch(ops) => ops.iter().map(w).sum(),
        Op::Fill { count, vlen, .. } => *count as u64 * (5 + *vlen as u64),
        Op::Ingest { entries, .. } => entries.iter().map(|(_, v)| 5 + v.unwrap_or(0) as u64).sum(),
        _ => 0,
    }
}

/// A stable digest of a read's answer.
fn digest<T: std::hash::Hash>(answer: &T) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    answer.hash(&mut h);
    h.finish()
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

fn show_entry(e: Option<&(Vec<u8>, Vec<u8>)>) -> String {
    match e {
        None => "<end>".into(),
        Some((k, v)) => format!("{}={}", show(k), show(&v[..v.len().min(24)])),
    }
}

/// Compares a scan's output with the expected entries, describing the first difference.
fn compare(what: &str, got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    Err(format!(
        "{what}: got {} entries, want {}; first difference at #{i}: got {}, want {}",
        got.len(),
        want.len(),
        show_entry(got.get(i)),
        show_entry(want.get(i))
    ))
}

/// Consumes a scan in `mode`, returning items in the order they are expected from the
/// model for that mode (forward order, or reverse order for `Reverse`).
fn consume(scan: strata::Scan, mode: ScanMode) -> Result<Entries, String> {
    let err = |e: strata::Error| format!("scan error: {e}");
    let mut scan = scan;
    match mode {
        ScanMode::Forward => scan.collect::<Result<Vec<_>, _>>().map_err(err),
        ScanMode::Reverse => scan.rev().collect::<Result<Vec<_>, _>>().map_err(err),
        ScanMode::Take(n) => scan.take(n).collect::<Result<Vec<_>, _>>().map_err(err),
        ScanMode::Alternate => {
            let mut front = Vec::new();
            let mut back = Vec::new();
            loop {
                let f = if (front.len() + back.len()) % 2 == 0 {
                    scan.next()
                } else {
                    scan.next_back()
                };
                match f {
                    None => break,
                    Some(Err(e)) => return Err(err(e)),
                    Some(Ok(item)) => {
                        if (front.len() + back.len()) % 2 == 0 {
                            front.push(item)
                        } else {
                            back.push(item)
                        }
                    }
                }
            }
            // Once one end is exhausted both are (the iterator is fused).
            if scan.next().is_some() || scan.next_back().is_some() {
                return Err("scan yielded items after returning None".into());
            }
            back.reverse();
            front.extend(back);
            Ok(front)
        }
        ScanMode::Runs(front_n, back_n) => {
            let (mut front, mut back) = (Vec::new(), Vec::new());
            loop {
                let a = scan
                    .next_run(front_n, |k, v| front.push((k.to_vec(), v.to_vec())))
                    .map_err(err)?;
                let b = match back_n {
                    0 => 0,
                    n => scan
                        .next_back_run(n, |k, v| back.push((k.to_vec(), v.to_vec())))
                        .map_err(err)?,
                };
                if a < front_n && b > 0 {
                    return Err(format!(
                        "a run of {a} < {front_n} did not end the scan: {b} more from the back"
                    ));
                }
                if a == 0 && b == 0 {
                    break;
                }
            }
            if scan.next().is_some() || scan.next_back().is_some() {
                return Err("scan yielded items after its runs ended".into());
            }
            back.reverse();
            front.extend(back);
            Ok(front)
        }
    }
}

fn expected(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, mode: ScanMode) -> Vec<(Vec<u8>, Vec<u8>)> {
    let all = m
        .iter()
        .filter(|(k, _)| in_bounds(k, lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()));
    match mode {
        ScanMode::Forward | ScanMode::Alternate | ScanMode::Runs(..) => all.collect(),
        ScanMode::Reverse => all.rev().collect(),
        ScanMode::Take(n) => all.take(n).collect(),
    }
}

/// The database under test, its model, and what the test saw of the tree's shape.
pub struct Harness {
    dir: tempfile::TempDir,
    opts: Options,
    nks: usize,
    db: Option<Db>,
    ks: Vec<Keyspace>,
    model: Vec<Model>,
    snaps: Vec<(Snapshot, Vec<Model>)>,
    tag: usize,
    /// Deepest level that held a file at some point.
    pub max_level_seen: usize,
    /// Most runs seen in one level > 0.
    pub max_runs_seen: usize,
    /// Number of reopens done.
    pub reopens: usize,
    /// Moved a millisecond forward per operation, when the options run on it.
    pub clock: Option<Arc<strata::ManualClock>>,
    /// User bytes written (keys and values; a key for each delete): the tree can never
    /// need levels for more than this.
    pub written: u64,
    /// Largest total of a keyspace's level bytes seen.
    pub max_bytes_seen: u64,
    /// Every read's answer, in order, as a digest: the same operations must give the
    /// same answers under any options (the metamorphic test compares them).
    pub answers: Vec<u64>,
}

impl Harness {
    pub fn new(opts: Options, nks: usize) -> Result<Harness, String> {
        assert!((1..=KS_NAMES.len()).contains(&nks));
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut h = Harness {
            dir,
            opts,
            nks,
            db: None,
            ks: Vec::new(),
            model: vec![Model::new(); nks],
            snaps: Vec::new(),
            tag: 0,
            max_level_seen: 0,
            max_runs_seen: 0,
            reopens: 0,
            clock: None,
            written: 0,
            max_bytes_seen: 0,
            answers: Vec::new(),
        };
        h.open(true)?;
        Ok(h)
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("database is open")
    }

    fn open(&mut self, create: bool) -> Result<(), String> {
        let db = Db::open(self.dir.path(), self.opts.clone()).map_err(|e| format!("open: {e}"))?;
        self.ks.clear();
        for (i, name) in KS_NAMES.iter().enumerate().take(self.nks) {
            let ks = if i == 0 {
                db.default_keyspace()
            } else if create {
                let ks = db.create_keyspace(name).map_err(|e| format!("create_keyspace: {e}"))?;
                if i == 2 {
                    let (key, h) = delete_key_of_ks2();
                    ks.set_delete_key(key, h).map_err(|e| format!("set_delete_key: {e}"))?;
                }
                ks
            } else {
                db.keyspace(name)
                    .map_err(|e| format!("keyspace {name} after reopen: {e}"))?
            };
            self.ks.push(ks);
        }
        self.db = Some(db);
        Ok(())
    }

    fn observe_shape(&mut self) {
        let stats = self.db().stats();
        for ks in &stats.keyspaces {
            let bytes: u64 = ks.levels.iter().map(|l| l.bytes).sum();
            self.max_bytes_seen = self.max_bytes_seen.max(bytes);
            for l in &ks.levels {
                if l.files > 0 {
                    self.max_level_seen = self.max_level_seen.max(l.level);
                    if l.level > 0 {
                        self.max_runs_seen = self.max_runs_seen.max(l.runs);
                    }
                }
            }
        }
    }

    fn write(&mut self, ops: &[WOp]) -> Result<(), String> {
        let tag = self.tag;
        let mut b = WriteBatch::new();
        for o in ops {
            match *o {
                WOp::Put { ks, key: k, vlen } => b.put(&self.ks[ks], &key(k), &value(tag, k, vlen)),
                WOp::Delete { ks, key: k } => b.delete(&self.ks[ks], &key(k)),
                WOp::DeleteRange { ks, start, end } => b.delete_range(&self.ks[ks], &key(start), &key(end)),
            }
        }
        self.db().write(b).map_err(|e| format!("write: {e}"))?;
        for o in ops {
            match *o {
                WOp::Put { ks, key: k, vlen } => {
                    self.model[ks].insert(key(k), value(tag, k, vlen));
                }
                WOp::Delete { ks, key: k } => {
                    self.model[ks].remove(&key(k));
                }
                WOp::DeleteRange { ks, start, end } => {
                    let (s, e) = (key(start), key(end));
                    self.model[ks].retain(|k, _| !(s <= *k && *k < e));
                }
            }
        }
        Ok(())
    }

    fn snapshot_index(&self, idx: &Index) -> Option<usize> {
        (!self.snaps.is_empty()).then(|| idx.index(self.snaps.len()))
    }

    /// Applies one operation, checking every read against the model.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        self.tag += 1;
        if let Some(c) = &self.clock {
            c.advance(1000);
        }
        self.written += written_bytes(op);
        match op {
            Op::Put { ks, key: k, vlen } => {
                let v = value(self.tag, *k, *vlen);
                self.ks[*ks].put(&key(*k), &v).map_err(|e| format!("put: {e}"))?;
                self.model[*ks].insert(key(*k), v);
            }
            Op::Delete { ks, key: k } => {
                self.ks[*ks].delete(&key(*k)).map_err(|e| format!("delete: {e}"))?;
                self.model[*ks].remove(&key(*k));
            }
            Op::DeleteRange { ks, start, end } => {
                let (s, e) = (key(*start), key(*end));
                self.ks[*ks]
                    .delete_range(&s[..]..&e[..])
                    .map_err(|e| format!("delete_range: {e}"))?;
                self.model[*ks].retain(|k, _| !(s <= *k && *k < e));
            }
            Op::Batch(ops) => self.write(ops)?,
            Op::Fill { ks, start, count, vlen } => {
                let ops: Vec<WOp> = (*start..(*start + *count).min(UNIVERSE))
                    .map(|key| WOp::Put {
                        ks: *ks,
                        key,
                        vlen: *vlen,
                    })
                    .collect();
                self.write(&ops)?;
            }
            Op::Get { ks, key: k } => {
                let got = self.ks[*ks].get(&key(*k)).map_err(|e| format!("get: {e}"))?;
                self.answers.push(digest(&got));
                let want = self.model[*ks].get(&key(*k)).cloned();
                if got != want {
                    return Err(format!(
                        "get({}) in {}: got {:?}, want {:?}",
                        show(&key(*k)),
                        KS_NAMES[*ks],
                        got.map(|v| show(&v[..v.len().min(24)])),
                        want.map(|v| show(&v[..v.len().min(24)]))
                    ));
                }
            }
            Op::Scan { ks, lo, hi, mode } => {
                let (lo, hi) = (bytes_bound(lo), bytes_bound(hi));
                let scan = self.ks[*ks]
                    .scan((lo.clone(), hi.clone()))
                    .map_err(|e| format!("scan: {e}"))?;
                let got = consume(scan, *mode)?;
                self.answers.push(digest(&got));
                let want = expected(&self.model[*ks], &lo, &hi, *mode);
                compare(
                    &format!(
                        "scan {:?}..{:?} {mode:?} in {}",
                        lo.as_ref().map(|k| show(k)),
                        hi.as_ref().map(|k| show(k)),
                        KS_NAMES[*ks]
                    ),
                    &got,
                    &want,
                )?;
            }
            Op::TakeSnapshot => {
                let s = self.db().snapshot();
                self.snaps.push((s, self.model.clone()));
            }
            Op::SnapGet { snap, ks, key: k } => {
                let Some(i) = self.snapshot_index(snap) else {
                    return Ok(());
                };
                let (s, m) = &self.snaps[i];
                let got = s
                    .get(&self.ks[*ks], &key(*k))
                    .map_err(|e| format!("snapshot get: {e}"))?;
                let answer = digest(&got);
                let want = m[*ks].get(&key(*k)).cloned();
                if got != want {
                    return Err(format!(
                        "snapshot #{i} (seq {}) get({}) in {}: got {:?}, want {:?}",
                        s.seq(),
                        show(&key(*k)),
                        KS_NAMES[*ks],
                        got.map(|v| show(&v[..v.len().min(24)])),
                        want.map(|v| show(&v[..v.len().min(24)]))
                    ));
                }
                self.answers.push(answer);
            }
            Op::SnapScan { snap, ks, lo, hi, mode } => {
                let Some(i) = self.snapshot_index(snap) else {
                    return Ok(());
                };
                let (s, m) = &self.snaps[i];
                let (lo, hi) = (bytes_bound(lo), bytes_bound(hi));
                let scan = s
                    .scan(&self.ks[*ks], (lo.clone(), hi.clone()))
                    .map_err(|e| format!("snapshot scan: {e}"))?;
                let got = consume(scan, *mode)?;
                let answer = digest(&got);
                let want = expected(&m[*ks], &lo, &hi, *mode);
                compare(
                    &format!("snapshot #{i} (seq {}) scan {mode:?} in {}", s.seq(), KS_NAMES[*ks]),
                    &got,
                    &want,
                )?;
                self.answers.push(answer);
            }
            Op::DropSnapshot { snap } => {
                if let Some(i) = self.snapshot_index(snap) {
                    self.snaps.remove(i);
                }
            }
            Op::Flush => {
                self.db().flush().map_err(|e| format!("flush: {e}"))?;
                self.observe_shape();
            }
            Op::CompactAll => {
                self.db().compact_range().map_err(|e| format!("compact_range: {e}"))?;
                self.observe_shape();
            }
            Op::CompactKeyspace { ks, lo, hi } => {
                let (lo, hi) = (bytes_bound(lo), bytes_bound(hi));
                self.ks[*ks]
                    .compact_range((lo, hi))
                    .map_err(|e| format!("keyspace compact_range: {e}"))?;
                self.observe_shape();
            }
            Op::WaitForBackground => {
                self.db()
                    .wait_for_background()
                    .map_err(|e| format!("wait_for_background: {e}"))?;
                self.observe_shape();
            }
            Op::Reopen => self.reopen()?,
            Op::Ingest {
                ks,
                entries,
                files,
                link,
            } => self.ingest(*ks, entries, *files, *link)?,
            Op::DeleteWhere { lo, hi } => {
                if self.nks == 3 {
                    self.ks[2]
                        .delete_where(&[*lo], &[*hi])
                        .map_err(|e| format!("delete_where: {e}"))?;
                    self.model[2].retain(|_, v| v.get(1).is_none_or(|d| !(*lo..*hi).contains(d)));
                }
            }
        }
        Ok(())
    }

    /// Writes `entries` into `files` external SSTables with disjoint key ranges and
    /// ingests them into keyspace `ks` in one call.
    fn ingest(&mut self, ks: usize, entries: &[(u16, Option<usize>)], files: usize, link: bool) -> Result<(), String> {
        let tag = self.tag;
        let last: BTreeMap<u16, Option<usize>> = entries.iter().copied().collect();
        let last: Vec<(u16, Option<usize>)> = last.into_iter().collect();
        let ext = self.dir.path().join("external");
        std::fs::create_dir_all(&ext).map_err(|e| e.to_string())?;
        let per = last.len().div_ceil(files.max(1));
        let mut paths = Vec::new();
        for (i, chunk) in last.chunks(per.max(1)).enumerate() {
            let path = ext.join(format!("{tag}-{i}.sst"));
            let mut w = strata::sstable::ExternalSstWriter::create(&path).map_err(|e| format!("writer: {e}"))?;
            for (k, v) in chunk {
                match v {
                    Some(vlen) => w.put(&key(*k), &value(tag, *k, *vlen)),
                    None => w.delete(&key(*k)),
                }
                .map_err(|e| format!("writer add: {e}"))?;
            }
            w.finish().map_err(|e| format!("writer finish: {e}"))?;
            paths.push(path);
        }
        let opts = strata::IngestOptions { link_files: link };
        self.db()
            .ingest(&self.ks[ks], &paths, opts)
            .map_err(|e| format!("ingest: {e}"))?;
        for (k, v) in &last {
            match v {
                Some(vlen) => {
                    self.model[ks].insert(key(*k), value(tag, *k, *vlen));
                }
                None => {
                    self.model[ks].remove(&key(*k));
                }
            }
        }
        for p in paths {
            // Linked files share the inode: removing the source name keeps the data.
            std::fs::remove_file(p).map_err(|e| e.to_string())?;
        }
        self.observe_shape();
        Ok(())
    }

    /// Closes and reopens the database (snapshots do not survive), then checks it all.
    pub fn reopen(&mut self) -> Result<(), String> {
        self.observe_shape();
        self.snaps.clear();
        self.ks.clear();
        if let Some(db) = self.db.take() {
            db.close().map_err(|e| format!("close: {e}"))?;
        }
        self.reopens += 1;
        self.open(false)?;
        self.observe_shape();
        self.check_all()
    }

    /// Full scans and point reads of every keyspace, and every live snapshot.
    pub fn check_all(&mut self) -> Result<(), String> {
        for ks in 0..self.nks {
            let got = consume(
                self.ks[ks].scan(..).map_err(|e| format!("scan: {e}"))?,
                ScanMode::Forward,
            )?;
            let want: Vec<_> = self.model[ks].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            compare(&format!("full scan of {}", KS_NAMES[ks]), &got, &want)?;
            let got = consume(
                self.ks[ks].scan(..).map_err(|e| format!("scan: {e}"))?,
                ScanMode::Reverse,
            )?;
            let want: Vec<_> = self.model[ks]
                .iter()
                .rev()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            compare(&format!("full reverse scan of {}", KS_NAMES[ks]), &got, &want)?;
            for k in 0..UNIVERSE {
                self.apply(&Op::Get { ks, key: k })?;
            }
            for (i, (s, m)) in self.snaps.iter().enumerate() {
                let got = consume(
                    s.scan(&self.ks[ks], ..).map_err(|e| format!("snapshot scan: {e}"))?,
                    ScanMode::Forward,
                )?;
                let want: Vec<_> = m[ks].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                compare(&format!("full scan of snapshot #{i} in {}", KS_NAMES[ks]), &got, &want)?;
            }
        }
        Ok(())
    }

    /// Runs `ops`, then a full check, then one last reopen and check.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        for (i, op) in ops.iter().enumerate() {
            self.apply(op).map_err(|e| format!("op #{i} {op:?}: {e}"))?;
        }
        self.observe_shape();
        self.check_all().map_err(|e| format!("final check: {e}"))?;
        self.db()
            .wait_for_background()
            .map_err(|e| format!("wait_for_background: {e}"))?;
        self.check_all()
            .map_err(|e| format!("check after background work: {e}"))?;
        self.reopen().map_err(|e| format!("final reopen: {e}"))?;
        self.check_depth()
    }

    /// The tree grows a level only when the level above outgrew its capacity, or by an
    /// ingest no deeper than its bytes need (`version` invariant 4), so the deepest level
    /// seen is bounded by the bytes written.
    pub fn check_depth(&self) -> Result<(), String> {
        let d = self.max_level_seen;
        if d < 2 {
            return Ok(());
        }
        let capacity = self.opts.memtable_budget as f64 * self.opts.size_ratio.powi(d as i32 - 1);
        let bound = 4 * self.written.max(self.max_bytes_seen) + (64 << 10);
        if capacity > bound as f64 {
            return Err(format!(
                "level {d} reached, but level {} (capacity {capacity} bytes) can never have \
                 been full: {} bytes written, at most {} bytes seen in a tree",
                d - 1,
                self.written,
                self.max_bytes_seen
            ));
        }
        Ok(())
    }

    pub fn stats(&self) -> strata::Stats {
        self.db().stats()
    }
}

/// `n` random operations over `nks` keyspaces, drawn from `seed`.
pub fn ops_from_seed(nks: usize, n: usize, seed: u64) -> Vec<Op> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    proptest::collection::vec(op(nks), n)
        .new_tree(&mut runner)
        .expect("generate operations")
        .current()
}

/// Runs a deterministic long sequence of `n` operations with `reopen_every` spacing of
/// forced reopens, returning the harness for shape assertions. Panics on a mismatch.
pub fn run_deep(opts: Options, nks: usize, n: usize, seed: u64) -> Harness {
    let ops = ops_from_seed(nks, n, seed);
    let mut h = Harness::new(opts, nks).expect("open");
    if let Err(e) = h.run(&ops) {
        panic!("deep run (seed {seed}) failed: {e}");
    }
    h
}

/// Runs `ops` under options drawn from `options_seed` and then reshaped by `shape`
/// (the configuration a test file is about), on the drawn options' manual clock.
pub fn run_drawn(
    nks: usize,
    ops: &[Op],
    options_seed: u64,
    shape: impl FnOnce(Options) -> Options,
) -> Result<(), String> {
    let (drawn, clock) = options::drawn_options(options_seed, Arc::new(NoSyncFs));
    let opts = shape(drawn);
    let described = opts.to_string();
    let mut h = Harness::new(opts, nks)?;
    h.clock = Some(clock);
    h.run(ops).map_err(|e| format!("{e} (options: {described})"))
}
