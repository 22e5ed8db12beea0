//! Shared harness of the `fault_*` tests: the fault-injecting file system
//! ([`faulty_fs`]), a seeded workload over two keyspaces and a deferred table, a model of
//! what each write may have left behind, and the scenario runner (workload, fault armed,
//! fault cleared, close, reopen, verify).
//!
//! Model: every step (a write batch, a single put/delete, a table statement or
//! transaction) is recorded with its effects and whether it was acknowledged (`Ok`) or
//! failed (`Err`). After recovery every key must hold the value of its last acknowledged
//! write or of a failed write after it (a failed write may or may not be there), and
//! batches are all-or-nothing: each keyspace batch writes "own" keys in both keyspaces
//! and "shared" keys that every batch overwrites, which must all agree.

#![allow(dead_code)]

pub mod faulty_fs;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::fs::FileSystem;
use strata::table::Table;
use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, Error, Keyspace, Options, SyncPolicy, WriteBatch};

pub use faulty_fs::{CrashMode, Fault, FaultSpec, FaultState, FaultyFs, FileKind, Op, Target};

/// The table every scenario writes to.
pub const TABLE_SCHEMA: &str = "table t (id u64, a u64) primary key (id) index by_a (a) deferred";
const OWN_KEYS: usize = 3;
const SHARED_KEYS: usize = 3;
const RANDOM_KEYS: u64 = 40;
const TABLE_IDS: u64 = 30;
/// A keyspace batch deletes the own keys of the batch this many keyspace batches back.
const DELETE_BACK: usize = 5;
/// Every this many keyspace batches, a range delete removes the own keys of the batch
/// `RANGE_BACK` keyspace batches back.
const RANGE_EVERY: usize = 4;
const RANGE_BACK: usize = 3;

// -------------------------------------------------------------------------------------
// Panics and hangs
// -------------------------------------------------------------------------------------

static HOOK: Once = Once::new();
static BG_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records panics of Strata's own threads (`strata-*`), which no `catch_unwind` of the
/// test can see, so tests can assert there were none.
pub fn install_panic_hook() {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if name.starts_with("strata")
                && let Ok(mut v) = BG_PANICS.lock()
            {
                v.push(format!("thread {name}: {info}"));
            }
            prev(info);
        }));
    });
}

/// Panics seen so far on Strata's background threads.
pub fn background_panics() -> Vec<String> {
    BG_PANICS.lock().map(|v| v.clone()).unwrap_or_default()
}

/// Runs a library call, turning a panic into a test failure that says which call.
pub fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("strata panicked in {what}: {msg}")
        }
    }
}

/// Runs `f` on its own thread and fails if it takes longer than `limit` (a hang).
pub fn with_timeout<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::Builder::new()
        .name(format!("scenario {what}"))
        .spawn(move || {
            let r = std::panic::catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn scenario thread");
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => {
            let _ = h.join();
            v
        }
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("scenario {what} did not finish within {limit:?}: Strata hangs"),
    }
}

// -------------------------------------------------------------------------------------
// Database handles
// -------------------------------------------------------------------------------------

/// Small memtables, files and blocks so flushes and compactions happen constantly; no
/// block cache so reads reach the file system.
pub fn options(fs: &Arc<FaultyFs>, sync: SyncPolicy) -> Options {
    Options {
        sync,
        memtable_budget: 8 << 10,
        target_file_size: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 6,
        size_ratio: 3.0,
        block_cache_bytes: 0,
        max_open_files: 4,
        background_threads: 2,
        fs: fs.clone() as Arc<dyn FileSystem>,
        ..Options::default()
    }
}

/// An open database with the keyspace and table of the workload.
pub struct Handles {
    pub db: Db,
    pub other: Keyspace,
    pub table: Table,
}

impl Handles {
    /// Creates the keyspace and table in a fresh database.
    pub fn create(db: Db) -> strata::Result<Handles> {
        let other = db.create_keyspace("other")?;
        let table = db.create_table(Schema::parse(TABLE_SCHEMA)?)?;
        Ok(Handles { db, other, table })
    }

    /// Finds the keyspace and table in a reopened database.
    pub fn find(db: Db) -> strata::Result<Handles> {
        let other = db.keyspace("other")?;
        let table = db.table("t")?;
        Ok(Handles { db, other, table })
    }

    /// Closes the database and drops every handle; returns what `close` said.
    pub fn close(self) -> strata::Result<()> {
        let Handles { db, other, table } = self;
        drop(other);
        drop(table);
        no_panic("close", || db.close())
    }

    fn ks(&self, i: usize) -> Keyspace {
        if i == 0 {
            self.db.default_keyspace()
        } else {
            self.other.clone()
        }
    }
}

/// A temporary directory with a faulty file system over it.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub fs: Arc<FaultyFs>,
    pub sync: SyncPolicy,
}

impl Harness {
    pub fn new(seed: u64, sync: SyncPolicy) -> Harness {
        install_panic_hook();
        Harness {
            dir: tempfile::tempdir().expect("tempdir"),
            fs: FaultyFs::new(seed),
            sync,
        }
    }

    pub fn state(&self) -> &Arc<FaultState> {
        self.fs.state()
    }

    pub fn options(&self) -> Options {
        options(&self.fs, self.sync)
    }

    pub fn open(&self) -> strata::Result<Db> {
        let opts = self.options();
        no_panic("open", || Db::open(self.dir.path(), opts))
    }

    /// Opens and finds (or, on a fresh directory, creates) the keyspace and table.
    pub fn open_handles(&self) -> strata::Result<Handles> {
        let db = self.open()?;
        if db.list_tables().is_empty() {
            no_panic("create schema", || Handles::create(db))
        } else {
            no_panic("find schema", || Handles::find(db))
        }
    }
}

// -------------------------------------------------------------------------------------
// Errors
// -------------------------------------------------------------------------------------

/// True for the errors a file-system fault may legitimately cause.
pub fn is_fault_error(e: &Error) -> bool {
    matches!(e, Error::Io { .. } | Error::Background(_) | Error::Corruption { .. })
}

/// True when the error says the disk is full (directly or inside a background error).
pub fn says_no_space(e: &Error) -> bool {
    let storage_full = match e {
        Error::Io { source, .. } => {
            source.kind() == std::io::ErrorKind::StorageFull || source.raw_os_error() == Some(28)
        }
        _ => false,
    };
    let text = e.to_string().to_lowercase();
    storage_full || text.contains("no space left") || text.contains("os error 28")
}

/// A corruption error naming a file of the database directory.
pub fn is_corruption_naming_file(e: &Error, dir: &std::path::Path) -> bool {
    match e {
        Error::Corruption { file, .. } => file.starts_with(dir) && file.file_name().is_some(),
        _ => false,
    }
}

// -------------------------------------------------------------------------------------
// Workload and model
// -------------------------------------------------------------------------------------

/// Per (keyspace, key): every value written, with whether the write was acknowledged.
type KvHistory = BTreeMap<(usize, Vec<u8>), Vec<(Option<Vec<u8>>, Status)>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Acked,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Effect {
    Kv {
        ks: usize,
        key: Vec<u8>,
        val: Option<Vec<u8>>,
    },
    Row {
        id: u64,
        a: Option<u64>,
    },
}

#[derive(Debug, Clone)]
struct Step {
    n: u64,
    status: Status,
    what: String,
    effects: Vec<Effect>,
}

/// A seeded workload and the model of what it wrote.
pub struct Workload {
    rng: StdRng,
    next: u64,
    steps: Vec<Step>,
    /// Step numbers of keyspace batches, in order.
    ks_batches: Vec<u64>,
    /// Errors returned, with the step that returned them.
    pub errors: Vec<(u64, String)>,
    /// Errors returned by reads.
    pub read_errors: Vec<String>,
    /// Reads that returned a value (checked against the model).
    pub reads_ok: u64,
}

fn own_key(n: u64, j: usize) -> Vec<u8> {
    format!("own/{n:06}/{j}").into_bytes()
}

fn own_prefix(n: u64) -> String {
    format!("own/{n:06}/")
}

fn own_value(n: u64, ks: usize, j: usize) -> Vec<u8> {
    let mut v = format!("v{n}/{ks}/{j}:").into_bytes();
    v.resize(120, b'a' + (n % 26) as u8);
    v
}

fn shared_key(j: usize) -> Vec<u8> {
    format!("shared/{j}").into_bytes()
}

fn random_key(i: u64) -> Vec<u8> {
    format!("r/{i:03}").into_bytes()
}

fn row(id: u64, a: u64) -> Vec<Value> {
    vec![Value::U64(id), Value::U64(a)]
}

/// Values a key may hold given its history: the last acknowledged write's (or
/// `initial` without one) and those of every failed write after it.
fn candidates<T: Clone>(hist: &[(T, Status)], initial: T) -> Vec<T> {
    let last_ack = hist.iter().rposition(|(_, s)| *s == Status::Acked);
    let mut c = vec![last_ack.map_or(initial, |i| hist[i].0.clone())];
    let from = last_ack.map_or(0, |i| i + 1);
    c.extend(hist[from..].iter().map(|(v, _)| v.clone()));
    c
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "<absent>".into(),
        Some(b) => String::from_utf8_lossy(&b[..b.len().min(24)]).into_owned(),
    }
}

/// How strictly reads are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPolicy {
    /// Every read must succeed.
    Strict,
    /// Reads may fail with an I/O or corruption error (never return wrong data).
    AllowErrors,
    /// Reads may fail only with a corruption error naming a file (bit flips).
    AllowCorruption,
}

impl Workload {
    pub fn new(seed: u64) -> Workload {
        Workload {
            rng: StdRng::seed_from_u64(seed ^ 0x5eed_f417),
            next: 1,
            steps: Vec::new(),
            ks_batches: Vec::new(),
            errors: Vec::new(),
            read_errors: Vec::new(),
            reads_ok: 0,
        }
    }

    pub fn acked(&self) -> usize {
        self.steps.iter().filter(|s| s.status == Status::Acked).count()
    }

    pub fn failed(&self) -> usize {
        self.steps.iter().filter(|s| s.status == Status::Failed).count()
    }

    pub fn steps(&self) -> usize {
        self.steps.len()
    }

    fn record(&mut self, n: u64, what: String, effects: Vec<Effect>, r: strata::Result<()>) -> strata::Result<()> {
        let status = match &r {
            Ok(()) => Status::Acked,
            Err(e) => {
                self.errors.push((n, e.to_string()));
                Status::Failed
            }
        };
        self.steps.push(Step {
            n,
            status,
            what,
            effects,
        });
        r
    }

    /// Runs one random step; returns its result.
    pub fn step(&mut self, h: &Handles) -> strata::Result<()> {
        let n = self.next;
        self.next += 1;
        let dice = self.rng.gen_range(0..100);
        if dice < 50 {
            self.ks_batch(h, n)
        } else if dice < 65 {
            let i = self.rng.gen_range(0..RANDOM_KEYS);
            let key = random_key(i);
            if self.rng.gen_bool(0.75) {
                let mut v = format!("s{n}:").into_bytes();
                v.resize(40, b's');
                let r = no_panic("put", || h.db.put(&key, &v));
                let eff = vec![Effect::Kv {
                    ks: 0,
                    key,
                    val: Some(v),
                }];
                self.record(n, format!("put r/{i}"), eff, r)
            } else {
                let r = no_panic("delete", || h.db.delete(&key));
                let eff = vec![Effect::Kv { ks: 0, key, val: None }];
                self.record(n, format!("delete r/{i}"), eff, r)
            }
        } else {
            self.table_step(h, n)
        }
    }

    /// Runs one keyspace batch (puts and deletes in both keyspaces).
    pub fn batch_step(&mut self, h: &Handles) -> strata::Result<()> {
        let n = self.next;
        self.next += 1;
        self.ks_batch(h, n)
    }

    fn ks_batch(&mut self, h: &Handles, n: u64) -> strata::Result<()> {
        let kss = [h.ks(0), h.ks(1)];
        let mut b = WriteBatch::new();
        let mut eff = Vec::new();
        for (ks, handle) in kss.iter().enumerate() {
            for j in 0..OWN_KEYS {
                let v = own_value(n, ks, j);
                b.put(handle, &own_key(n, j), &v);
                eff.push(Effect::Kv {
                    ks,
                    key: own_key(n, j),
                    val: Some(v),
                });
            }
            for j in 0..SHARED_KEYS {
                let v = n.to_string().into_bytes();
                b.put(handle, &shared_key(j), &v);
                eff.push(Effect::Kv {
                    ks,
                    key: shared_key(j),
                    val: Some(v),
                });
            }
        }
        let count = self.ks_batches.len();
        if count >= DELETE_BACK {
            let m = self.ks_batches[count - DELETE_BACK];
            for (ks, handle) in kss.iter().enumerate() {
                for j in 0..OWN_KEYS {
                    b.delete(handle, &own_key(m, j));
                    eff.push(Effect::Kv {
                        ks,
                        key: own_key(m, j),
                        val: None,
                    });
                }
            }
        }
        if count >= RANGE_BACK && count.is_multiple_of(RANGE_EVERY) {
            let m = self.ks_batches[count - RANGE_BACK];
            let p = own_prefix(m);
            let end = format!("{p}~");
            for (ks, handle) in kss.iter().enumerate() {
                b.delete_range(handle, p.as_bytes(), end.as_bytes());
                for j in 0..OWN_KEYS {
                    eff.push(Effect::Kv {
                        ks,
                        key: own_key(m, j),
                        val: None,
                    });
                }
            }
        }
        self.ks_batches.push(n);
        let r = no_panic("write batch", || h.db.write(b));
        self.record(n, "batch".into(), eff, r)
    }

    fn table_step(&mut self, h: &Handles, n: u64) -> strata::Result<()> {
        let id = self.rng.gen_range(0..TABLE_IDS);
        let t = &h.table;
        match self.rng.gen_range(0..4) {
            0 | 1 => {
                let r = no_panic("table replace", || t.replace(row(id, n)));
                self.record(n, format!("replace {id}"), vec![Effect::Row { id, a: Some(n) }], r)
            }
            2 => {
                let r = no_panic("table delete", || t.delete(&[Value::U64(id)]));
                self.record(n, format!("delete {id}"), vec![Effect::Row { id, a: None }], r)
            }
            _ => {
                let id2 = (id + 1 + self.rng.gen_range(0..TABLE_IDS - 1)) % TABLE_IDS;
                let r = no_panic("table transaction", || {
                    let mut tx = t.transaction();
                    tx.replace(row(id, n));
                    tx.delete(vec![Value::U64(id2)]);
                    tx.commit().map(|_| ())
                });
                let eff = vec![Effect::Row { id, a: Some(n) }, Effect::Row { id: id2, a: None }];
                self.record(n, format!("txn replace {id} delete {id2}"), eff, r)
            }
        }
    }

    fn kv_history(&self) -> KvHistory {
        let mut m: KvHistory = BTreeMap::new();
        for s in &self.steps {
            for e in &s.effects {
                if let Effect::Kv { ks, key, val } = e {
                    m.entry((*ks, key.clone())).or_default().push((val.clone(), s.status));
                }
            }
        }
        m
    }

    fn row_history(&self) -> BTreeMap<u64, Vec<(Option<u64>, Status)>> {
        let mut m: BTreeMap<u64, Vec<(Option<u64>, Status)>> = BTreeMap::new();
        for s in &self.steps {
            for e in &s.effects {
                if let Effect::Row { id, a } = e {
                    m.entry(*id).or_default().push((*a, s.status));
                }
            }
        }
        m
    }

    fn judge_read_error(&mut self, policy: ReadPolicy, h: &Handles, what: &str, e: Error) -> Result<(), String> {
        let ok = match policy {
            ReadPolicy::Strict => false,
            ReadPolicy::AllowErrors => is_fault_error(&e),
            ReadPolicy::AllowCorruption => is_corruption_naming_file(&e, h.db.path()),
        };
        if ok {
            self.read_errors.push(e.to_string());
            Ok(())
        } else {
            Err(format!("{what}: unexpected error under {policy:?}: {e} ({e:?})"))
        }
    }

    /// Reads a few random keys and rows and checks them against the model.
    pub fn spot_check(&mut self, h: &Handles, policy: ReadPolicy) -> Result<(), String> {
        let hist = self.kv_history();
        let keys: Vec<_> = hist.keys().cloned().collect();
        for _ in 0..4 {
            if keys.is_empty() {
                break;
            }
            let (ks, key) = keys[self.rng.gen_range(0..keys.len())].clone();
            let handle = h.ks(ks);
            match no_panic("get", || handle.get(&key)) {
                Ok(v) => {
                    self.reads_ok += 1;
                    let c = candidates(&hist[&(ks, key.clone())], None);
                    if !c.contains(&v) {
                        return Err(format!(
                            "get {} in keyspace {ks} returned {} which no write left there (allowed: {:?})",
                            String::from_utf8_lossy(&key),
                            show(&v),
                            c.iter().map(show).collect::<Vec<_>>()
                        ));
                    }
                }
                Err(e) => self.judge_read_error(policy, h, "get", e)?,
            }
        }
        let rows = self.row_history();
        let id = self.rng.gen_range(0..TABLE_IDS);
        match no_panic("table get", || h.table.get(&[Value::U64(id)])) {
            Ok(r) => {
                self.reads_ok += 1;
                let got = row_a(id, r)?;
                let c = rows.get(&id).map_or(vec![None], |hist| candidates(hist, None));
                if !c.contains(&got) {
                    return Err(format!("row {id} read as {got:?}; allowed {c:?}"));
                }
            }
            Err(e) => self.judge_read_error(policy, h, "table get", e)?,
        }
        Ok(())
    }

    /// Full check of a recovered database: every key and row against the model, batch
    /// atomicity, no stray keys, and `Db::check`.
    pub fn verify(&self, h: &Handles) -> Result<(), String> {
        let hist = self.kv_history();
        let mut problems = Vec::new();
        // Scan both keyspaces fully.
        for ks in 0..2 {
            let handle = h.ks(ks);
            let scanned: Vec<(Vec<u8>, Vec<u8>)> = no_panic("scan", || {
                handle.scan(..).and_then(|s| s.collect::<strata::Result<Vec<_>>>())
            })
            .map_err(|e| format!("scan of keyspace {ks}: {e}"))?;
            let scanned: BTreeMap<Vec<u8>, Vec<u8>> = scanned.into_iter().collect();
            for k in scanned.keys() {
                if !hist.contains_key(&(ks, k.clone())) {
                    problems.push(format!(
                        "keyspace {ks}: key {} was never written",
                        String::from_utf8_lossy(k)
                    ));
                }
            }
            for ((hks, key), kh) in hist.iter().filter(|((hks, _), _)| *hks == ks) {
                let v = scanned.get(key).cloned();
                let got = no_panic("get", || handle.get(key)).map_err(|e| format!("get: {e}"))?;
                if got != v {
                    problems.push(format!(
                        "keyspace {hks}: get {} = {} but scan says {}",
                        String::from_utf8_lossy(key),
                        show(&got),
                        show(&v)
                    ));
                }
                let c = candidates(kh, None);
                if !c.contains(&v) {
                    problems.push(format!(
                        "keyspace {hks}: {} holds {} but the model allows only {:?} (history {:?})",
                        String::from_utf8_lossy(key),
                        show(&v),
                        c.iter().map(show).collect::<Vec<_>>(),
                        kh.iter().map(|(v, s)| (show(v), *s)).collect::<Vec<_>>()
                    ));
                }
            }
        }
        // Atomicity: the own keys of each batch are all there or all gone, and the
        // shared keys agree.
        for &n in &self.ks_batches {
            let mut present = Vec::new();
            for ks in 0..2 {
                for j in 0..OWN_KEYS {
                    let v = no_panic("get", || h.ks(ks).get(&own_key(n, j))).map_err(|e| format!("get: {e}"))?;
                    present.push(v.is_some());
                }
            }
            if present.iter().any(|p| *p != present[0]) {
                problems.push(format!("batch {n} is half-applied: own keys present {present:?}"));
            }
        }
        let mut shared = Vec::new();
        for ks in 0..2 {
            for j in 0..SHARED_KEYS {
                shared.push(no_panic("get", || h.ks(ks).get(&shared_key(j))).map_err(|e| format!("get: {e}"))?);
            }
        }
        if shared.iter().any(|v| *v != shared[0]) {
            problems.push(format!(
                "shared keys disagree (a batch is half-applied): {:?}",
                shared.iter().map(show).collect::<Vec<_>>()
            ));
        }
        // Rows.
        let rows = self.row_history();
        for id in 0..TABLE_IDS {
            let r = no_panic("table get", || h.table.get(&[Value::U64(id)])).map_err(|e| format!("row {id}: {e}"))?;
            let got = row_a(id, r)?;
            let c = rows.get(&id).map_or(vec![None], |hist| candidates(hist, None));
            if !c.contains(&got) {
                problems.push(format!("row {id} holds {got:?}; the model allows {c:?}"));
            }
        }
        let report = no_panic("check", || h.db.check(CheckOptions::default())).map_err(|e| format!("check: {e}"))?;
        if !report.ok() {
            problems.push(format!("Db::check: {report}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            problems.truncate(10);
            Err(problems.join("\n"))
        }
    }

    /// Checks that the database holds exactly the state after some prefix of the
    /// (all acknowledged) steps, at least `min_steps` long. Returns the prefix length.
    pub fn verify_prefix(&self, h: &Handles, min_steps: usize) -> Result<usize, String> {
        let mut observed_kv: BTreeMap<(usize, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for ks in 0..2 {
            let handle = h.ks(ks);
            let s = no_panic("scan", || {
                handle.scan(..).and_then(|s| s.collect::<strata::Result<Vec<_>>>())
            })
            .map_err(|e| format!("scan: {e}"))?;
            for (k, v) in s {
                observed_kv.insert((ks, k), v);
            }
        }
        let mut observed_rows = BTreeMap::new();
        for id in 0..TABLE_IDS {
            let r = no_panic("table get", || h.table.get(&[Value::U64(id)])).map_err(|e| format!("row {id}: {e}"))?;
            if let Some(a) = row_a(id, r)? {
                observed_rows.insert(id, a);
            }
        }
        let mut kv: BTreeMap<(usize, Vec<u8>), Vec<u8>> = BTreeMap::new();
        let mut rows: BTreeMap<u64, u64> = BTreeMap::new();
        let mut matches = Vec::new();
        for cut in 0..=self.steps.len() {
            if cut >= min_steps && kv == observed_kv && rows == observed_rows {
                matches.push(cut);
            }
            let Some(s) = self.steps.get(cut) else { break };
            if s.status != Status::Acked {
                continue;
            }
            for e in &s.effects {
                match e {
                    Effect::Kv { ks, key, val } => match val {
                        Some(v) => {
                            kv.insert((*ks, key.clone()), v.clone());
                        }
                        None => {
                            kv.remove(&(*ks, key.clone()));
                        }
                    },
                    Effect::Row { id, a } => match a {
                        Some(a) => {
                            rows.insert(*id, *a);
                        }
                        None => {
                            rows.remove(id);
                        }
                    },
                }
            }
        }
        let report = no_panic("check", || h.db.check(CheckOptions::default())).map_err(|e| format!("check: {e}"))?;
        if !report.ok() {
            return Err(format!("Db::check: {report}"));
        }
        matches.last().copied().ok_or_else(|| {
            format!(
                "the recovered state is no prefix of at least {min_steps} of the {} steps \
                 ({} keys, {} rows recovered)",
                self.steps.len(),
                observed_kv.len(),
                observed_rows.len()
            )
        })
    }
}

fn row_a(id: u64, r: Option<Vec<Value>>) -> Result<Option<u64>, String> {
    match r {
        None => Ok(None),
        Some(r) if r.len() == 2 && r[0] == Value::U64(id) => match r[1] {
            Value::U64(a) => Ok(Some(a)),
            ref v => Err(format!("row {id} has a = {v:?}")),
        },
        Some(r) => Err(format!("row {id} read as {r:?}")),
    }
}

// -------------------------------------------------------------------------------------
// Scenarios
// -------------------------------------------------------------------------------------

/// One run: workload, faults armed, faults cleared, close, reopen, verify.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub sync: SyncPolicy,
    /// Fault-free steps first.
    pub warmup: usize,
    /// Steps with the faults armed.
    pub faulty: usize,
    /// Steps after the faults are cleared, before closing.
    pub after: usize,
    pub faults: Vec<FaultSpec>,
    /// How reads during the faulty phase are judged.
    pub reads: ReadPolicy,
    /// Also ask for a flush every this many faulty steps (0: never).
    pub flush_every: usize,
    /// Instead of a clean close: power off, drop the handles, lose what was not synced.
    pub crash: Option<CrashMode>,
}

impl Scenario {
    pub fn new(name: impl Into<String>, seed: u64, faults: Vec<FaultSpec>) -> Scenario {
        Scenario {
            name: name.into(),
            seed,
            sync: SyncPolicy::EveryBatch,
            warmup: 40,
            faulty: 120,
            after: 30,
            faults,
            reads: ReadPolicy::AllowErrors,
            flush_every: 25,
            crash: None,
        }
    }
}

/// What a scenario saw.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub injected: u64,
    pub acked: usize,
    pub failed: usize,
    /// Errors returned by writes while the fault was armed or after.
    pub errors: Vec<String>,
    /// Errors returned by writes after the faults were cleared.
    pub errors_after_clear: Vec<String>,
    /// Writes acknowledged after the faults were cleared (the database kept working).
    pub acked_after_clear: usize,
    pub close_error: Option<String>,
    pub read_errors: usize,
    pub fault_log: Vec<String>,
}

/// Counts the matching operations a fault-free run of `s` makes while its faults
/// would be armed (to pick fault points inside that window).
pub fn measure(s: &Scenario, target: Target, op: Op) -> u64 {
    let h = Harness::new(s.seed, s.sync);
    let hs = h.open_handles().expect("open");
    let mut w = Workload::new(s.seed);
    for _ in 0..s.warmup {
        w.step(&hs).expect("fault-free step");
    }
    let before = h.state().ops(target, op);
    for i in 0..s.faulty {
        w.step(&hs).expect("fault-free step");
        if s.flush_every > 0 && (i + 1).is_multiple_of(s.flush_every) {
            hs.db.flush().expect("flush");
        }
    }
    let _ = hs.db.wait_for_background();
    let n = h.state().ops(target, op) - before;
    hs.close().expect("close");
    n
}

/// Runs a scenario (with a hang watchdog); panics with a description on any violation.
pub fn run(s: Scenario) -> Outcome {
    let name = s.name.clone();
    with_timeout(Duration::from_secs(60), &name, move || run_inner(&s))
}

fn run_inner(s: &Scenario) -> Outcome {
    let ctx = format!("[{} seed {}]", s.name, s.seed);
    let h = Harness::new(s.seed, s.sync);
    let hs = h
        .open_handles()
        .unwrap_or_else(|e| panic!("{ctx} fault-free open: {e}"));
    let mut w = Workload::new(s.seed);
    for _ in 0..s.warmup {
        w.step(&hs)
            .unwrap_or_else(|e| panic!("{ctx} fault-free step failed: {e}"));
    }
    for f in &s.faults {
        h.state().arm(*f);
    }
    let mut out = Outcome::default();
    for i in 0..s.faulty {
        if let Err(e) = w.step(&hs) {
            assert!(
                is_fault_error(&e),
                "{ctx} write failed with an unexpected kind of error: {e:?}"
            );
            out.errors.push(e.to_string());
        }
        if let Err(p) = w.spot_check(&hs, s.reads) {
            panic!("{ctx} read during faults: {p}\nfaults: {:?}", h.state().log());
        }
        if s.flush_every > 0
            && (i + 1).is_multiple_of(s.flush_every)
            && let Err(e) = no_panic("flush", || hs.db.flush())
        {
            assert!(is_fault_error(&e), "{ctx} flush failed with an unexpected error: {e:?}");
            out.errors.push(e.to_string());
        }
    }
    h.state().clear();
    for _ in 0..s.after {
        match w.step(&hs) {
            Ok(()) => out.acked_after_clear += 1,
            Err(e) => {
                assert!(
                    matches!(e, Error::Background(_) | Error::Io { .. }),
                    "{ctx} after the fault cleared, a write failed without a clear Background/Io error: {e:?}"
                );
                out.errors_after_clear.push(e.to_string());
            }
        }
        if let Err(p) = w.spot_check(&hs, ReadPolicy::Strict) {
            panic!("{ctx} read after faults cleared: {p}\nfaults: {:?}", h.state().log());
        }
    }
    if let Some(mode) = s.crash {
        h.state().power_off();
        out.close_error = hs.close().err().map(|e| e.to_string());
        h.state().crash(mode);
    } else {
        out.close_error = hs.close().err().map(|e| e.to_string());
    }
    assert_eq!(h.state().open_writers(), 0, "{ctx} files still open after close");
    let errors = format!("{:?}", w.errors);
    recover_and_verify(&ctx, &h, &mut w, out, &errors)
}

/// The common end of a fault run: records the faults, reopens with them
/// cleared, verifies every acknowledged write, then writes, compacts and
/// verifies again; `errors` are shown if the first verification fails.
fn recover_and_verify(ctx: &str, h: &Harness, w: &mut Workload, mut out: Outcome, errors: &str) -> Outcome {
    out.injected = h.state().injected_total();
    out.fault_log = h.state().log();
    out.read_errors = w.read_errors.len();
    let hs = h.open_handles().unwrap_or_else(|e| {
        panic!(
            "{ctx} reopen after the fault cleared failed: {e}\nfaults: {:?}",
            out.fault_log
        )
    });
    if let Err(p) = w.verify(&hs) {
        panic!(
            "{ctx} after reopen: {p}\nfaults injected: {:?}\nerrors: {errors}",
            out.fault_log
        );
    }
    // The recovered database works: more writes, a full compaction, verify again.
    for _ in 0..20 {
        w.step(&hs)
            .unwrap_or_else(|e| panic!("{ctx} write after recovery failed: {e}"));
    }
    no_panic("compact", || hs.db.compact_range()).unwrap_or_else(|e| panic!("{ctx} compaction after recovery: {e}"));
    if let Err(p) = w.verify(&hs) {
        panic!(
            "{ctx} after recovery and compaction: {p}\nfaults injected: {:?}",
            out.fault_log
        );
    }
    hs.close().unwrap_or_else(|e| panic!("{ctx} close after recovery: {e}"));
    let panics = background_panics();
    assert!(panics.is_empty(), "{ctx} background threads panicked: {panics:?}");
    out.acked = w.acked();
    out.failed = w.failed();
    out
}

/// Picks where (after how many matching operations) to arm a fault, for several seeds.
pub fn fault_points(seed: u64, window: u64, count: usize) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count).map(|_| rng.gen_range(0..window.max(1))).collect()
}

/// Runs `seeds` scenarios with `fault` on `op` of `target` armed at random points of the
/// workload (inside the window where such operations happen), hitting once (`persist`
/// false) or until cleared. Returns the outcomes; panics on any violation.
pub fn sweep(name: &str, target: Target, op: Op, fault: Fault, seeds: u64, persist: bool) -> Vec<Outcome> {
    let probe = Scenario::new(format!("{name} (measure)"), 1000, Vec::new());
    let window = measure(&probe, target, op);
    let points = fault_points(window ^ seeds, window, seeds as usize);
    let mut outs = Vec::new();
    for (seed, after) in points.into_iter().enumerate() {
        let mut spec = FaultSpec::new(target, op, fault).after(after);
        if !persist {
            spec = spec.times(1);
        }
        let mut s = Scenario::new(format!("{name} after {after}/{window}"), seed as u64, vec![spec]);
        // No power is lost here, so even writes acknowledged under `None` (in the OS)
        // must survive.
        s.sync = [SyncPolicy::EveryBatch, SyncPolicy::GroupCommit, SyncPolicy::None][seed % 3];
        let o = run(s);
        report(&format!("{name} after {after}/{window}"), &o);
        outs.push(o);
    }
    outs
}

/// Prints a one-line summary of an outcome (visible with `--nocapture`).
pub fn report(name: &str, o: &Outcome) {
    eprintln!(
        "{name}: injected {}, acked {}, failed {}, acked after clear {}, errors after clear {}, read errors {}, close {:?}; first error: {:?}",
        o.injected,
        o.acked,
        o.failed,
        o.acked_after_clear,
        o.errors_after_clear.len(),
        o.read_errors,
        o.close_error.as_deref().map(|e| &e[..e.len().min(60)]),
        o.errors.first().map(|e| &e[..e.len().min(140)])
    );
}

/// Faults injected over all outcomes.
pub fn total_injected(outs: &[Outcome]) -> u64 {
    outs.iter().map(|o| o.injected).sum()
}

/// Writes a fault-free history, closes, and reopens with `faults` armed: the open (and
/// a few reads and writes if it succeeds) must fail cleanly or work correctly; then the
/// faults are cleared and a second reopen must recover everything acknowledged.
pub fn run_open_fault(name: &str, seed: u64, faults: Vec<FaultSpec>, reads: ReadPolicy) -> Outcome {
    let name = name.to_string();
    with_timeout(Duration::from_secs(60), &name.clone(), move || {
        open_fault_inner(&name, seed, &faults, reads)
    })
}

/// The history written before a faulty reopen (no fault armed).
fn open_fault_history(h: &Harness, seed: u64, unflushed_tail: bool) -> Workload {
    let hs = h.open_handles().expect("fault-free open");
    let mut w = Workload::new(seed);
    for _ in 0..120 {
        w.step(&hs).expect("fault-free step");
    }
    if !unflushed_tail {
        hs.db.flush().expect("flush");
    }
    // Leave some writes only in the WAL so the reopen replays them.
    for _ in 0..10 {
        w.step(&hs).expect("fault-free step");
    }
    hs.close().expect("close");
    w
}

fn open_fault_inner(name: &str, seed: u64, faults: &[FaultSpec], reads: ReadPolicy) -> Outcome {
    let ctx = format!("[{name} seed {seed}]");
    let h = Harness::new(seed, SyncPolicy::EveryBatch);
    let mut w = open_fault_history(&h, seed, seed.is_multiple_of(2));
    let mut out = Outcome::default();
    for f in faults {
        h.state().arm(*f);
    }
    match h.open_handles() {
        Ok(hs) => {
            for _ in 0..10 {
                if let Err(p) = w.spot_check(&hs, reads) {
                    panic!(
                        "{ctx} read after an open under faults: {p}\nfaults: {:?}",
                        h.state().log()
                    );
                }
            }
            for _ in 0..10 {
                if let Err(e) = w.step(&hs) {
                    assert!(is_fault_error(&e), "{ctx} write failed with an unexpected error: {e:?}");
                    out.errors.push(e.to_string());
                }
            }
            out.close_error = hs.close().err().map(|e| e.to_string());
        }
        Err(e) => {
            assert!(
                is_fault_error(&e),
                "{ctx} open under faults failed with an unexpected kind of error: {e:?}"
            );
            out.errors.push(format!("open: {e}"));
        }
    }
    assert_eq!(h.state().open_writers(), 0, "{ctx} files still open after close");
    h.state().clear();
    let errors = format!("{:?}", out.errors);
    recover_and_verify(&ctx, &h, &mut w, out, &errors)
}

/// Counts matching operations of a fault-free open of the history.
pub fn measure_open(target: Target, op: Op) -> u64 {
    let h = Harness::new(1000, SyncPolicy::EveryBatch);
    open_fault_history(&h, 1000, false);
    let before = h.state().ops(target, op);
    let hs = h.open_handles().expect("open");
    let n = h.state().ops(target, op) - before;
    hs.close().expect("close");
    n
}

/// Like [`sweep`], with the fault armed during a reopen.
pub fn sweep_open(name: &str, target: Target, op: Op, fault: Fault, seeds: u64, reads: ReadPolicy) -> Vec<Outcome> {
    let window = measure_open(target, op);
    let points = fault_points(window ^ seeds ^ 77, window, seeds as usize);
    let mut outs = Vec::new();
    for (seed, after) in points.into_iter().enumerate() {
        let spec = FaultSpec::new(target, op, fault).after(after).times(1);
        let label = format!("{name} at open, after {after}/{window}");
        let o = run_open_fault(&label, seed as u64, vec![spec], reads);
        report(&label, &o);
        outs.push(o);
    }
    outs
}
