//! Long multimap streams over many small blocks, checked against a
//! `BTreeMap<key, BTreeSet<value>>` model.
//!
//! A key's values that lie in one run of visible puts are streamed by the one-run path
//! (`db/read.rs`, `DirIter::walk_plain`): a block at a time, judging each entry by what
//! it shares with the entry before it. Everything else goes through the general merge.
//! Random histories of bulk puts, deletes, delete_alls, re-puts under a snapshot (a
//! run then holds two versions of one entry), flushes and compactions, with 256-byte
//! blocks and small files, are read forward, backward, from both ends at once and
//! between value bounds, at the latest state and at snapshots, as multimap values (by
//! `next`/`next_back` and by `for_each_value`) and as keyspace entries.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

use proptest::prelude::*;
use strata::multimap::{MultiMap, encoding};
use strata::{Db, Keyspace, Options, Snapshot};

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

/// Keys with zero bytes, prefixes of each other, and one longer than a short key
/// delta (16 bytes), so a restart entry's key is copied the long way.
const KEYS: [&[u8]; 5] = [b"a", b"a\x00", b"ab", b"\x00", b"a-key-longer-than-sixteen-bytes"];

fn key(i: usize) -> Vec<u8> {
    KEYS[i % KEYS.len()].to_vec()
}

/// Values with shared leading bytes of several lengths, zero bytes, and some longer
/// than 16 bytes, so byte order is not number order and entries share more or less
/// than the key with the entry before them.
fn value(i: u16) -> Vec<u8> {
    match i % 4 {
        0 => format!("{i:06}").into_bytes(),
        1 => format!("v{i}").into_bytes(),
        2 => vec![(i >> 8) as u8, 0, i as u8],
        _ => format!("a-long-shared-value-prefix-{i}").into_bytes(),
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Puts values `start, start + step, ...` (`count` of them) under a key.
    PutMany {
        key: usize,
        start: u16,
        count: u16,
        step: u16,
    },
    Delete(usize, u16),
    DeleteAll(usize),
    Snapshot,
    DropSnapshot(usize),
    Flush,
    Compact,
    /// Streams a key between value bounds, pulling from the front (`true`) or the back
    /// as `pulls` says, then draining from the front; at snapshot `at` if given.
    Read {
        key: usize,
        lo: Option<u16>,
        hi: Option<u16>,
        pulls: Vec<bool>,
        at: Option<usize>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        6 => (k.clone(), 0u16..600, 1u16..300, 1u16..4)
            .prop_map(|(key, start, count, step)| Op::PutMany { key, start, count, step }),
        3 => (k.clone(), 0u16..600).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => k.clone().prop_map(Op::DeleteAll),
        2 => Just(Op::Snapshot),
        1 => (0usize..4).prop_map(Op::DropSnapshot),
        2 => Just(Op::Flush),
        2 => Just(Op::Compact),
        6 => (
            k,
            proptest::option::of(0u16..600),
            proptest::option::of(0u16..600),
            proptest::collection::vec(any::<bool>(), 0..40),
            proptest::option::of(0usize..4),
        )
            .prop_map(|(key, lo, hi, pulls, at)| Op::Read { key, lo, hi, pulls, at }),
    ]
}

struct Harness {
    _dir: tempfile::TempDir,
    db: Db,
    ks: Keyspace,
    mm: MultiMap,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
}

/// Value bounds as `get_range` takes them.
fn bounds(lo: Option<u16>, hi: Option<u16>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = lo.map_or(Bound::Unbounded, |v| Bound::Included(value(v)));
    let hi = hi.map_or(Bound::Unbounded, |v| Bound::Excluded(value(v)));
    (lo, hi)
}

/// The model's values of `k` inside `range`, ascending.
fn expected(model: &Model, k: &[u8], range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> VecDeque<Vec<u8>> {
    let Some(vs) = model.get(k) else {
        return VecDeque::new();
    };
    let inside = |v: &Vec<u8>| {
        (match &range.0 {
            Bound::Included(l) => v >= l,
            _ => true,
        }) && (match &range.1 {
            Bound::Excluded(h) => v < h,
            _ => true,
        })
    };
    vs.iter().filter(|v| inside(v)).cloned().collect()
}

/// Pulls from both ends of `stream` as `pulls` says, then drains it from the front,
/// checking every item against `want` (taken from the matching end).
fn check_pulls<T: PartialEq + std::fmt::Debug>(
    what: &str,
    mut stream: impl DoubleEndedIterator<Item = strata::Result<T>>,
    mut want: VecDeque<T>,
    pulls: &[bool],
) -> Result<(), String> {
    let mut got_one = |front: bool, want: &mut VecDeque<T>| -> Result<bool, String> {
        let got = if front { stream.next() } else { stream.next_back() };
        let got = got.transpose().map_err(|e| format!("{what}: {e}"))?;
        let w = if front { want.pop_front() } else { want.pop_back() };
        if got != w {
            return Err(format!(
                "{what}: from the {}: got {got:?}, want {w:?}",
                if front { "front" } else { "back" }
            ));
        }
        Ok(got.is_some())
    };
    for &front in pulls {
        got_one(front, &mut want)?;
    }
    while got_one(true, &mut want)? {}
    // Both ends stay exhausted.
    got_one(false, &mut want)?;
    Ok(())
}

impl Harness {
    fn new(lz4: bool) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            memtable_budget: 16 << 10,
            target_file_size: 4 << 10,
            block_size: 256,
            compression: if lz4 {
                strata::options::Compression::Lz4
            } else {
                strata::options::Compression::None
            },
            ..Options::default()
        };
        let db = Db::open(dir.path(), opts).expect("open");
        let ks = db.create_keyspace("mm").expect("keyspace");
        let mm = MultiMap::new(ks.clone());
        Harness {
            _dir: dir,
            db,
            ks,
            mm,
            model: Model::new(),
            snapshots: Vec::new(),
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::PutMany {
                key: k,
                start,
                count,
                step,
            } => {
                let k = key(*k);
                for i in 0..*count {
                    let v = value(start.wrapping_add(i.wrapping_mul(*step)) % 600);
                    self.mm.put(&k, &v).expect("put");
                    self.model.entry(k.clone()).or_default().insert(v);
                }
            }
            Op::Delete(k, v) => {
                let (k, v) = (key(*k), value(*v));
                self.mm.delete(&k, &v).expect("delete");
                if let Some(s) = self.model.get_mut(&k) {
                    s.remove(&v);
                }
            }
            Op::DeleteAll(k) => {
                let k = key(*k);
                self.mm.delete_all(&k).expect("delete_all");
                self.model.remove(&k);
            }
            Op::Snapshot => {
                if self.snapshots.len() < 4 {
                    self.snapshots.push((self.db.snapshot(), self.model.clone()));
                }
            }
            Op::DropSnapshot(i) => {
                if *i < self.snapshots.len() {
                    self.snapshots.remove(*i);
                }
            }
            Op::Flush => self.db.flush().expect("flush"),
            Op::Compact => self.db.compact_range().expect("compact"),
            Op::Read {
                key: k,
                lo,
                hi,
                pulls,
                at,
            } => self.read(&key(*k), *lo, *hi, pulls, *at)?,
        }
        Ok(())
    }

    fn read(
        &self,
        k: &[u8],
        lo: Option<u16>,
        hi: Option<u16>,
        pulls: &[bool],
        at: Option<usize>,
    ) -> Result<(), String> {
        let range = bounds(lo, hi);
        let snap = at.and_then(|i| self.snapshots.get(i));
        let model = snap.map_or(&self.model, |(_, m)| m);
        let want = expected(model, k, &range);
        let values = match snap {
            Some((s, _)) => self.mm.get_at(s, k, range.clone()),
            None => self.mm.get_range(k, range.clone()),
        }
        .map_err(|e| e.to_string())?;
        check_pulls("values", values, want.clone(), pulls)?;
        // The same pulls, then the rest through `for_each_value` (straight from the
        // blocks, up to what the back end read ahead, then that).
        let mut values = match snap {
            Some((s, _)) => self.mm.get_at(s, k, range.clone()),
            None => self.mm.get_range(k, range.clone()),
        }
        .map_err(|e| e.to_string())?;
        let mut left = want.clone();
        for &front in pulls {
            let got = if front { values.next() } else { values.next_back() };
            let got = got.transpose().map_err(|e| e.to_string())?;
            let w = if front { left.pop_front() } else { left.pop_back() };
            if got != w {
                return Err(format!("for_each_value's pulls: got {got:?}, want {w:?}"));
            }
        }
        let mut rest = Vec::new();
        values
            .for_each_value(|v| rest.push(v.to_vec()))
            .map_err(|e| e.to_string())?;
        if left != rest {
            return Err(format!("for_each_value after {pulls:?}: got {rest:?}"));
        }
        if values.next().is_some() || values.next_back().is_some() {
            return Err("for_each_value left values behind".into());
        }
        // The same entries through an ordinary keyspace scan, values and all.
        let entry = |v: &Vec<u8>| (encoding::encode(k, v), Vec::new());
        let lo = match &range.0 {
            Bound::Included(v) => Bound::Included(encoding::encode(k, v)),
            _ => Bound::Included(encoding::prefix(k)),
        };
        let hi = match &range.1 {
            Bound::Excluded(v) => Bound::Excluded(encoding::encode(k, v)),
            _ => Bound::Excluded(encoding::prefix_end(k)),
        };
        let scan = match snap {
            Some((s, _)) => s.scan(&self.ks, (lo, hi)),
            None => self.ks.scan((lo, hi)),
        }
        .map_err(|e| e.to_string())?;
        check_pulls("scan", scan, want.iter().map(entry).collect(), pulls)
    }

    /// Every key read whole, both ways, at the latest state and every snapshot.
    fn check_all(&self) -> Result<(), String> {
        for k in 0..KEYS.len() {
            self.read(&key(k), None, None, &[], None)?;
            self.read(&key(k), None, None, &[false; 3], None)?;
            for i in 0..self.snapshots.len() {
                self.read(&key(k), None, None, &[true, false], Some(i))?;
            }
        }
        Ok(())
    }
}

fn run(ops: &[Op], lz4: bool) -> Result<(), String> {
    let mut h = Harness::new(lz4);
    for (i, op) in ops.iter().enumerate() {
        h.apply(op).map_err(|e| format!("op {i} ({op:?}): {e}"))?;
    }
    h.check_all()?;
    // Once everything is in one run with nothing deleting, every read takes the one-run
    // path (snapshots still held keep older versions in the run).
    h.db.compact_range().expect("compact");
    h.check_all()?;
    h.snapshots.clear();
    h.db.compact_range().expect("compact");
    h.check_all()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 300, ..ProptestConfig::default() })]

    #[test]
    fn long_streams_match_the_model(ops in proptest::collection::vec(op(), 10..60), lz4 in any::<bool>()) {
        prop_assert_eq!(run(&ops, lz4), Ok(()));
    }
}

/// A key whose every value is in one run twice (re-put under a snapshot): the run's
/// older versions are skipped, within blocks and across block boundaries.
#[test]
fn repeated_versions_in_one_run_are_streamed_once() {
    let mut h = Harness::new(false);
    let k = key(4);
    let put_all = Op::PutMany {
        key: 4,
        start: 0,
        count: 500,
        step: 1,
    };
    h.apply(&put_all).expect("put");
    h.db.flush().expect("flush");
    let snap = h.db.snapshot();
    h.apply(&put_all).expect("put again");
    h.db.compact_range().expect("compact");
    let files = h.db.live_files();
    assert!(files.len() > 1, "the key spans several files");
    h.read(&k, None, None, &[], None).expect("latest");
    h.read(&k, Some(10), Some(400), &[false, true, false], None)
        .expect("bounded");
    let at_snap: Vec<_> =
        h.mm.get_at(&snap, &k, ..)
            .expect("get_at")
            .map(|v| v.expect("value"))
            .collect();
    assert_eq!(at_snap.len(), 500);
}
