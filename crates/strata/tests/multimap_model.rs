//! Model-based test of multimaps: random puts, deletes, delete_alls, atomic batches
//! spanning a multimap and a plain keyspace, snapshots, flushes, compactions and
//! reopens, on one database or on 2..4 hash partitions, checked against a
//! `BTreeMap<key, BTreeSet<value>>` after every read.

mod model_harness;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use strata::multimap::MultiMap;
use strata::partition::{PartitionSnapshot, Partitions};
use strata::sstable::FilterKey;
use strata::{Db, Keyspace, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

/// Keys chosen to stress the escaping: zero bytes, prefixes of each other.
const KEYS: [&[u8]; 7] = [b"a", b"a\x00", b"a\x00\x00", b"a\x01", b"ab", b"b", b"\x00"];

fn key(i: usize) -> Vec<u8> {
    KEYS[i % KEYS.len()].to_vec()
}

/// Values of several lengths, some with zero bytes, so byte order is not length order.
fn value(i: u8) -> Vec<u8> {
    match i % 3 {
        0 => vec![i],
        1 => vec![i / 3, 0, i],
        _ => vec![i / 5, i],
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8),
    Delete(usize, u8),
    DeleteAll(usize),
    /// Writes to the multimap and to a plain keyspace in one batch (a single database
    /// only; on partitions each write goes alone).
    Batch(Vec<(usize, u8, bool)>),
    Get {
        key: usize,
        from: Option<u8>,
        rev: bool,
    },
    Contains(usize, u8),
    Entries,
    Snapshot,
    ReadSnapshot {
        which: usize,
        key: usize,
    },
    DropSnapshot(usize),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        10 => (k.clone(), 0u8..40).prop_map(|(k, v)| Op::Put(k, v)),
        3 => (k.clone(), 0u8..40).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => k.clone().prop_map(Op::DeleteAll),
        2 => proptest::collection::vec((k.clone(), 0u8..40, any::<bool>()), 1..6).prop_map(Op::Batch),
        3 => (k.clone(), proptest::option::of(0u8..40), any::<bool>()).prop_map(|(key, from, rev)| Op::Get { key, from, rev }),
        2 => (k.clone(), 0u8..40).prop_map(|(k, v)| Op::Contains(k, v)),
        1 => Just(Op::Entries),
        1 => Just(Op::Snapshot),
        2 => (0usize..4, k.clone()).prop_map(|(which, key)| Op::ReadSnapshot { which, key }),
        1 => (0usize..4).prop_map(Op::DropSnapshot),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

enum Store {
    Single { db: Db, side: Keyspace },
    Parts(Partitions),
}

enum Snap {
    Single(strata::Snapshot),
    Parts(PartitionSnapshot),
}

struct Harness {
    dir: std::path::PathBuf,
    opts: Options,
    /// The multimap's tables filter by key (`MultiMap::filter_by_key`), set once at
    /// creation and persisted.
    by_key: bool,
    partitions: usize,
    store: Option<Store>,
    mm: MultiMap,
    model: Model,
    /// The plain keyspace written by batches beside the multimap.
    side_model: BTreeMap<Vec<u8>, Vec<u8>>,
    snaps: Vec<(Snap, Model)>,
}

fn open(dir: &Path, partitions: usize, opts: &Options) -> (Store, MultiMap) {
    if partitions == 1 {
        let db = Db::open(dir, opts.clone()).expect("open");
        let mm = MultiMap::new(db.keyspace_or_create("mm").expect("ks"));
        let side = db.keyspace_or_create("side").expect("ks");
        (Store::Single { db, side }, mm)
    } else {
        let p = Partitions::open(dir, partitions, opts.clone()).expect("open partitions");
        let mm = MultiMap::partitioned(p.keyspace("mm").expect("ks"));
        (Store::Parts(p), mm)
    }
}

fn model_values(m: &Model, k: &[u8], from: Option<&[u8]>, rev: bool) -> Vec<Vec<u8>> {
    let Some(set) = m.get(k) else { return Vec::new() };
    let mut v: Vec<Vec<u8>> = match (from, rev) {
        (None, _) => set.iter().cloned().collect(),
        (Some(f), false) => set
            .range::<[u8], _>((Bound::Included(f), Bound::Unbounded))
            .cloned()
            .collect(),
        (Some(f), true) => set
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(f)))
            .cloned()
            .collect(),
    };
    if rev {
        v.reverse();
    }
    v
}

fn collect(it: impl Iterator<Item = strata::Result<Vec<u8>>>) -> Vec<Vec<u8>> {
    it.map(|r| r.expect("value")).collect()
}

impl Harness {
    fn new(dir: &Path, partitions: usize, opts: Options, by_key: bool) -> Harness {
        let (store, mm) = open(dir, partitions, &opts);
        if by_key {
            mm.filter_by_key().expect("filter by key");
        }
        Harness {
            dir: dir.to_path_buf(),
            opts,
            by_key,
            partitions,
            store: Some(store),
            mm,
            model: Model::new(),
            side_model: BTreeMap::new(),
            snaps: Vec::new(),
        }
    }

    fn each_db(&self, f: impl Fn(&Db)) {
        match self.store.as_ref().expect("open") {
            Store::Single { db, .. } => f(db),
            Store::Parts(p) => p.dbs().iter().for_each(f),
        }
    }

    fn reads(&self, k: &[u8], from: Option<u8>, rev: bool) -> Result<(), String> {
        let from = from.map(value);
        let got = match (&from, rev) {
            (None, false) => collect(self.mm.get(k).expect("get")),
            (None, true) => collect(self.mm.get(k).expect("get").rev()),
            (Some(f), false) => collect(self.mm.get_range(k, f.as_slice()..).expect("get")),
            (Some(f), true) => collect(self.mm.get_range(k, ..=f.as_slice()).expect("get").rev()),
        };
        let want = model_values(&self.model, k, from.as_deref(), rev);
        if got != want {
            return Err(format!("get {k:?} from {from:?} rev {rev}: got {got:?}, want {want:?}"));
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Put(k, v) => {
                self.mm.put(&key(*k), &value(*v)).expect("put");
                self.model.entry(key(*k)).or_default().insert(value(*v));
            }
            Op::Delete(k, v) => {
                self.mm.delete(&key(*k), &value(*v)).expect("delete");
                if let Some(s) = self.model.get_mut(&key(*k)) {
                    s.remove(&value(*v));
                }
            }
            Op::DeleteAll(k) => {
                self.mm.delete_all(&key(*k)).expect("delete_all");
                self.model.remove(&key(*k));
            }
            Op::Batch(ws) => {
                match self.store.as_ref().expect("open") {
                    Store::Single { db, side } => {
                        let mut b = WriteBatch::new();
                        for (k, v, put) in ws {
                            if *put {
                                self.mm.put_in(&mut b, &key(*k), &value(*v)).expect("put_in");
                            } else {
                                self.mm.delete_in(&mut b, &key(*k), &value(*v)).expect("delete_in");
                            }
                            b.put(side, &key(*k), &value(*v));
                        }
                        db.write(b).expect("batch");
                    }
                    Store::Parts(_) => {
                        let mut b = WriteBatch::new();
                        let e = self.mm.put_in(&mut b, b"k", b"v").expect_err("refused on partitions");
                        if !matches!(e, strata::Error::InvalidArgument(_)) || !b.is_empty() {
                            return Err(format!("batch on partitions: {e}, batch len {}", b.len()));
                        }
                        for (k, v, put) in ws {
                            if *put {
                                self.mm.put(&key(*k), &value(*v)).expect("put");
                            } else {
                                self.mm.delete(&key(*k), &value(*v)).expect("delete");
                            }
                        }
                    }
                }
                for (k, v, put) in ws {
                    if *put {
                        self.model.entry(key(*k)).or_default().insert(value(*v));
                    } else if let Some(s) = self.model.get_mut(&key(*k)) {
                        s.remove(&value(*v));
                    }
                    if matches!(self.store, Some(Store::Single { .. })) {
                        self.side_model.insert(key(*k), value(*v));
                    }
                }
            }
            Op::Get { key: k, from, rev } => self.reads(&key(*k), *from, *rev)?,
            Op::Contains(k, v) => {
                let got = self.mm.contains(&key(*k), &value(*v)).expect("contains");
                let want = self.model.get(&key(*k)).is_some_and(|s| s.contains(&value(*v)));
                if got != want {
                    return Err(format!("contains {k} {v}: got {got}"));
                }
            }
            Op::Entries => self.check_entries()?,
            Op::Snapshot => {
                let s = match self.store.as_ref().expect("open") {
                    Store::Single { db, .. } => Snap::Single(db.snapshot()),
                    Store::Parts(p) => Snap::Parts(p.snapshot()),
                };
                self.snaps.push((s, self.model.clone()));
            }
            Op::ReadSnapshot { which, key: k } => {
                if self.snaps.is_empty() {
                    return Ok(());
                }
                let (s, m) = &self.snaps[which % self.snaps.len()];
                let k = key(*k);
                let got = match s {
                    Snap::Single(s) => collect(self.mm.get_at(s, &k, ..).expect("get_at")),
                    Snap::Parts(s) => collect(self.mm.get_at_partitioned(s, &k, ..).expect("get_at")),
                };
                let want = model_values(m, &k, None, false);
                if got != want {
                    return Err(format!("snapshot get {k:?}: got {got:?}, want {want:?}"));
                }
                if let (Snap::Single(s), Some(v)) = (s, want.first())
                    && !self.mm.contains_at(s, &k, v).expect("contains_at")
                {
                    return Err(format!("snapshot contains {k:?} {v:?} is false"));
                }
            }
            Op::DropSnapshot(i) => {
                if !self.snaps.is_empty() {
                    let n = self.snaps.len();
                    self.snaps.remove(i % n);
                }
            }
            Op::Flush => self.each_db(|db| db.flush().expect("flush")),
            Op::Compact => self.each_db(|db| db.compact_range().expect("compact")),
            Op::Reopen => self.reopen(),
        }
        Ok(())
    }

    fn reopen(&mut self) {
        self.snaps.clear();
        match self.store.take().expect("open") {
            Store::Single { db, .. } => db.close().expect("close"),
            Store::Parts(p) => p.close().expect("close"),
        }
        let (store, mm) = open(&self.dir, self.partitions, &self.opts);
        self.store = Some(store);
        self.mm = mm;
    }

    /// The filter setting survived every reopen, in every partition.
    fn check_filter_key(&self) -> Result<(), String> {
        let want = if self.by_key {
            FilterKey::KeyPrefix
        } else {
            FilterKey::Whole
        };
        let got: Vec<FilterKey> = match self.store.as_ref().expect("open") {
            Store::Single { db, .. } => vec![db.keyspace("mm").expect("ks").filter_key().expect("filter key")],
            Store::Parts(p) => {
                let ks = p.keyspace("mm").expect("ks");
                (0..p.count())
                    .map(|i| ks.partition(i).expect("partition").filter_key().expect("filter key"))
                    .collect()
            }
        };
        if got.iter().any(|&g| g != want) {
            return Err(format!("filter keys {got:?}, want {want:?}"));
        }
        Ok(())
    }

    fn check_entries(&self) -> Result<(), String> {
        let got: Vec<(Vec<u8>, Vec<u8>)> = self.mm.entries().expect("entries").map(|r| r.expect("entry")).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = self
            .model
            .iter()
            .flat_map(|(k, s)| s.iter().map(move |v| (k.clone(), v.clone())))
            .collect();
        if got != want {
            return Err(format!("entries: got {got:?}\nwant {want:?}"));
        }
        if let Some(Store::Single { side, .. }) = &self.store {
            let got: BTreeMap<_, _> = side.scan(..).expect("scan").map(|r| r.expect("entry")).collect();
            if got != self.side_model {
                return Err("the batch-written keyspace differs from its model".into());
            }
        }
        Ok(())
    }

    fn check_all(&self) -> Result<(), String> {
        self.check_entries()?;
        for k in 0..KEYS.len() {
            self.reads(&key(k), None, true)?;
        }
        Ok(())
    }
}

fn run(partitions: usize, ops: &[Op], seed: u64) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (opts, _clock) = model_harness::options::drawn_options(seed, Arc::new(model_harness::NoSyncFs));
    // Several databases at once: keep threads few.
    let opts = Options {
        background_threads: 1,
        ..opts
    };
    let mut h = Harness::new(dir.path(), partitions, opts, seed.is_multiple_of(2));
    for (i, op) in ops.iter().enumerate() {
        h.apply(op).map_err(|e| format!("op {i} {op:?}: {e}"))?;
    }
    h.check_all()?;
    h.reopen();
    h.check_filter_key()?;
    h.check_all()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_iters: 500, ..ProptestConfig::default() })]

    #[test]
    fn multimap_matches_model(
        partitions in prop_oneof![2 => Just(1usize), 1 => 2usize..=4],
        ops in proptest::collection::vec(op(), 50..250),
        seed in any::<u64>(),
    ) {
        run(partitions, &ops, seed).map_err(TestCaseError::fail)?;
    }
}

/// A longer deterministic history that reaches lower levels, on one database and on
/// three partitions.
#[test]
fn long_history_matches_model() {
    use rand::{Rng, SeedableRng};
    for partitions in [1, 3] {
        let mut r = rand::rngs::StdRng::seed_from_u64(0x6d6d_0001 + partitions as u64);
        let ops: Vec<Op> = (0..3000)
            .map(|_| match r.gen_range(0..100) {
                0..=69 => Op::Put(r.gen_range(0..KEYS.len()), r.gen_range(0..250)),
                70..=84 => Op::Delete(r.gen_range(0..KEYS.len()), r.gen_range(0..250)),
                85..=86 => Op::DeleteAll(r.gen_range(0..KEYS.len())),
                87..=92 => Op::Get {
                    key: r.gen_range(0..KEYS.len()),
                    from: Some(r.gen_range(0..250)),
                    rev: r.gen_bool(0.5),
                },
                93..=95 => Op::Snapshot,
                96..=97 => Op::ReadSnapshot {
                    which: r.gen_range(0..4),
                    key: r.gen_range(0..KEYS.len()),
                },
                98 => Op::DropSnapshot(r.gen_range(0..4)),
                _ => Op::Reopen,
            })
            .collect();
        // One with filters by key, one with whole-entry filters.
        run(partitions, &ops, 7 + u64::from(partitions == 1)).expect("matches the model");
    }
}
