//! Strata: [`StrataTables`] (a database and a benchmark's tables, in eager or deferred
//! mode) serves `micro` and `linkbench` through [`TableEngine`] and is `churn`'s side;
//! [`StrataKv`] (the default keyspace) serves `kv` through [`KvEngine`].

use std::ops::Bound;
use std::path::Path;
use std::sync::Mutex;

use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::table::{Row, Table, TableStats};
use strata::{Db, Keyspace, Options, Stats, SyncPolicy, WriteBatch};

use super::{KvEngine, KvStats, Session, TableEngine, WriteOp};
use crate::BenchResult;
use crate::kv::KvConfig;
use crate::linkbench::model::{Count, Link, Node, VISIBLE, now_ms};
use crate::linkbench::workload::Op;
use crate::linkbench::{Counters, LinkBench, OpResult, Request, Settings};
use crate::micro::workload::Stmt;
use crate::micro::{EngineStats, Micro, Probe};

/// A database with one benchmark's tables.
pub struct StrataTables {
    db: Db,
    tables: Vec<Table>,
    /// Statistics when the load was settled: reported counters cover the run only.
    base: Mutex<Base>,
}

/// Statistics of the database and of each table at one moment.
#[derive(Debug, Clone, Default)]
struct Base {
    db: Stats,
    tables: Vec<TableStats>,
}

impl Base {
    fn table(&self, i: usize) -> TableStats {
        self.tables.get(i).cloned().unwrap_or_default()
    }
}

impl StrataTables {
    /// Creates a fresh database in `dir` with a table for each schema text.
    pub fn open(dir: &Path, opts: Options, schemas: &[String]) -> BenchResult<StrataTables> {
        let db = Db::open(dir, opts)?;
        let tables = schemas
            .iter()
            .map(|s| Ok(db.create_table(Schema::parse(s)?)?))
            .collect::<BenchResult<Vec<_>>>()?;
        Ok(StrataTables {
            db,
            tables,
            base: Mutex::new(Base::default()),
        })
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The `i`-th table, in the order of the schemas given to [`StrataTables::open`].
    pub fn table(&self, i: usize) -> &Table {
        &self.tables[i]
    }

    /// Flushes the memtables, waits for flushes and compactions, and takes the
    /// counters' baseline.
    pub fn settle(&self) -> BenchResult<()> {
        self.db.flush()?;
        self.db.wait_for_background()?;
        let now = self.now()?;
        *self.base.lock().unwrap_or_else(|e| e.into_inner()) = now;
        Ok(())
    }

    /// `Err` if a background flush or compaction failed.
    pub fn check_background(&self) -> BenchResult<()> {
        match self.db.stats().background_error {
            Some(e) => Err(format!("background error: {e}").into()),
            None => Ok(()),
        }
    }

    fn now(&self) -> BenchResult<Base> {
        Ok(Base {
            db: self.db.stats(),
            tables: self.tables.iter().map(Table::stats).collect::<Result<_, _>>()?,
        })
    }

    fn base(&self) -> Base {
        self.base.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

// ---------------------------------------------------------------------------------------
// micro (and churn): table `test` with four secondary indexes.

/// Cache and I/O settings of the micro table the user may change.
#[derive(Debug, Clone, Copy)]
pub struct MicroSettings {
    /// `Options.block_cache_bytes`.
    pub cache_bytes: usize,
    /// `Options.direct_reads`.
    pub direct_reads: bool,
}

/// The deferred-update paper's settings: memtable 128 MiB, size ratio 3.5, 2 runs per
/// level, bloom 5 %, 8 KiB pages, 2 background threads, WAL written but not fsynced.
pub fn paper_options(s: MicroSettings) -> Options {
    Options {
        memtable_budget: 128 << 20,
        size_ratio: 3.5,
        runs_per_level: 2,
        bloom_fpr: 0.05,
        block_size: 8 << 10,
        background_threads: 2,
        block_cache_bytes: s.cache_bytes,
        direct_reads: s.direct_reads,
        sync: SyncPolicy::None,
        ..Options::default()
    }
}

/// The micro table's schema text in `mode` (`eager` or `deferred`).
pub fn micro_schema(mode: &str) -> String {
    format!(
        "table test (f1 u64, f2 u64, f3 u64, f4 u64, f5 u64) primary key (f1) \
         index i2 (f2) index i3 (f3) index i4 (f4) index i5 (f5) {mode}"
    )
}

impl StrataTables {
    /// A fresh database in `dir` with the micro table `test` in `mode`.
    pub fn open_micro(dir: &Path, mode: &str, opts: Options) -> BenchResult<StrataTables> {
        StrataTables::open(dir, opts, &[micro_schema(mode)])
    }
}

/// Applies a micro batch to `table` as one transaction (REPLACE and DELETE by primary
/// key).
pub fn commit(table: &Table, batch: &[Stmt]) -> BenchResult<()> {
    let mut tx = table.transaction();
    for s in batch {
        match s {
            Stmt::Replace(r) => tx.replace(r.iter().map(|v| Value::U64(*v)).collect()),
            Stmt::Delete(k) => tx.delete(vec![Value::U64(*k)]),
        };
    }
    tx.commit()?;
    Ok(())
}

/// A client of one table.
struct TableSession(Table);

impl Session<Micro> for TableSession {
    fn run(&mut self, batch: &[Stmt]) -> BenchResult<()> {
        commit(&self.0, batch)
    }
}

impl TableEngine<Micro> for StrataTables {
    fn session(&self) -> BenchResult<Box<dyn Session<Micro> + '_>> {
        Ok(Box::new(TableSession(self.tables[0].clone())))
    }

    fn settle(&self) -> BenchResult<()> {
        StrataTables::settle(self)
    }

    fn probe(&self) -> Probe {
        let s = self.db.stats();
        let b = self.base.lock().unwrap_or_else(|e| e.into_inner());
        Probe {
            flushes: Some(s.flushes - b.db.flushes),
            compactions: Some(s.compactions - b.db.compactions),
            entries: Some(s.keyspaces.iter().map(|k| k.entries()).sum()),
            bytes: Some(s.total_bytes()),
        }
    }

    fn stats(&self) -> BenchResult<EngineStats> {
        self.check_background()?;
        let (b, now) = (self.base(), self.now()?);
        let (bt, t) = (b.table(0), now.table(0));
        let written = |s: &Stats| s.flush_bytes_written + s.compaction_bytes_written;
        let user = now.db.user_bytes_written - b.db.user_bytes_written;
        Ok(EngineStats {
            probe: TableEngine::<Micro>::probe(self),
            hidden_reads: Some(t.hidden_reads - bt.hidden_reads),
            deferred_deletes: Some(t.deferred_deletes_emitted - bt.deferred_deletes_emitted),
            write_amplification: (user > 0).then(|| (written(&now.db) - written(&b.db)) as f64 / user as f64),
            stalls: Some(now.db.stalls - b.db.stalls),
            stall_secs: Some((now.db.stall_micros - b.db.stall_micros) as f64 / 1e6),
        })
    }
}

// ---------------------------------------------------------------------------------------
// linkbench: tables `node`, `link` (with a secondary index) and `count`.
//
// Transactions are per table in Strata, so `addlink` / `deletelink` / a re-creating
// `updatelink` are two transactions (the link, then the count's read-modify-write); the
// generator's stripe lock keeps the count exact between clients.

/// Name of the link table's secondary index.
pub const LINK_INDEX: &str = "by_time";

/// The schema texts of the three LinkBench tables (`node`, `link`, `count`) in `mode`.
pub fn link_schemas(mode: &str) -> [String; 3] {
    [
        format!("table node (id u64, type u64, version u64, time u64, data bytes) primary key (id) {mode}"),
        format!(
            "table link (id1 u64, link_type u64, id2 u64, visibility u64, data bytes, time u64, version u64) \
             primary key (id1, link_type, id2) index {LINK_INDEX} (id1, link_type, visibility, time) {mode}"
        ),
        format!(
            "table count (id u64, link_type u64, count u64, time u64, version u64) primary key (id, link_type) {mode}"
        ),
    ]
}

/// LinkBench's options: defaults (size ratio 10, leveling, bloom 1 %, 8 KiB blocks, 2
/// background threads), WAL not fsynced, the given block cache, memtable and read mode.
pub fn link_options(s: Settings) -> Options {
    Options {
        block_cache_bytes: s.cache_bytes,
        memtable_budget: s.memtable_bytes,
        direct_reads: s.direct_reads,
        sync: SyncPolicy::None,
        ..Options::default()
    }
}

impl StrataTables {
    /// A fresh database in `dir` with the LinkBench tables in `mode`.
    pub fn open_linkbench(dir: &Path, mode: &str, settings: Settings) -> BenchResult<StrataTables> {
        StrataTables::open(dir, link_options(settings), &link_schemas(mode))
    }
}

/// LinkBench's counters in `b` (cumulative since open).
fn link_counters(b: &Base) -> Counters {
    let (n, l, c) = (b.table(0), b.table(1), b.table(2));
    let sum = |f: fn(&TableStats) -> u64| Some(f(&n) + f(&l) + f(&c));
    let ix = l.indexes.iter().find(|i| i.name == LINK_INDEX);
    let s = &b.db;
    Counters {
        hidden_reads: sum(|t| t.hidden_reads),
        unique_check_reads: sum(|t| t.unique_check_reads),
        update_reads: sum(|t| t.update_reads),
        primary_lookups: Some(l.primary_lookups),
        secondary_hits: ix.map(|i| i.hits),
        dirty_hits_skipped: Some(l.dirty_hits_skipped),
        deferred_deletes: Some(l.deferred_deletes_emitted),
        flushes: Some(s.flushes),
        compactions: Some(s.compactions),
        stalls: Some(s.stalls),
        stall_micros: Some(s.stall_micros),
        bytes_on_disk: Some(s.total_bytes()),
        link_index_entries: ix.map(|i| i.entries),
    }
}

impl TableEngine<LinkBench> for StrataTables {
    fn session(&self) -> BenchResult<Box<dyn Session<LinkBench> + '_>> {
        Ok(Box::new(LinkSession {
            node: self.tables[0].clone(),
            link: self.tables[1].clone(),
            count: self.tables[2].clone(),
        }))
    }

    fn settle(&self) -> BenchResult<()> {
        StrataTables::settle(self)
    }

    fn probe(&self) -> Counters {
        TableEngine::<LinkBench>::stats(self).unwrap_or_default()
    }

    fn stats(&self) -> BenchResult<Counters> {
        self.check_background()?;
        let (b, now) = (link_counters(&self.base()), link_counters(&self.now()?));
        let d = |x: Option<u64>, y: Option<u64>| Some(x.unwrap_or(0).saturating_sub(y.unwrap_or(0)));
        Ok(Counters {
            hidden_reads: d(now.hidden_reads, b.hidden_reads),
            unique_check_reads: d(now.unique_check_reads, b.unique_check_reads),
            update_reads: d(now.update_reads, b.update_reads),
            primary_lookups: d(now.primary_lookups, b.primary_lookups),
            secondary_hits: d(now.secondary_hits, b.secondary_hits),
            dirty_hits_skipped: d(now.dirty_hits_skipped, b.dirty_hits_skipped),
            deferred_deletes: d(now.deferred_deletes, b.deferred_deletes),
            flushes: d(now.flushes, b.flushes),
            compactions: d(now.compactions, b.compactions),
            stalls: d(now.stalls, b.stalls),
            stall_micros: d(now.stall_micros, b.stall_micros),
            bytes_on_disk: now.bytes_on_disk,
            link_index_entries: now.link_index_entries,
        })
    }
}

fn u(v: u64) -> Value {
    Value::U64(v)
}

fn node_row(n: &Node) -> Row {
    vec![u(n.id), u(n.ty), u(n.version), u(n.time), Value::Bytes(n.data.clone())]
}

fn link_row(l: &Link) -> Row {
    vec![
        u(l.id1),
        u(l.link_type),
        u(l.id2),
        u(l.visibility),
        Value::Bytes(l.data.clone()),
        u(l.time),
        u(l.version),
    ]
}

fn count_row(c: &Count) -> Row {
    vec![u(c.id), u(c.link_type), u(c.count), u(c.time), u(c.version)]
}

struct LinkSession {
    node: Table,
    link: Table,
    count: Table,
}

impl LinkSession {
    /// `count += delta` (floored at 0): a read, then a blind (deferred) or
    /// hidden-read (eager) replace.
    fn add_count(&self, id: u64, link_type: u64, delta: i64, time: u64) -> BenchResult<()> {
        let old = self.count.get(&[u(id), u(link_type)])?;
        let (count, version) = old.map_or((0, 0), |r| {
            (
                r.get(2).and_then(Value::as_u64).unwrap_or(0),
                r.get(4).and_then(Value::as_u64).unwrap_or(0),
            )
        });
        self.count.replace(count_row(&Count {
            id,
            link_type,
            count: count.saturating_add_signed(delta),
            time,
            version: version + 1,
        }))?;
        Ok(())
    }

    fn load(&mut self, nodes: &[Node], links: &[Link], counts: &[Count]) -> BenchResult<()> {
        let mut tx = self.node.transaction();
        for n in nodes {
            tx.insert(node_row(n));
        }
        tx.commit()?;
        let mut tx = self.link.transaction();
        for l in links {
            tx.insert(link_row(l));
        }
        tx.commit()?;
        let mut tx = self.count.transaction();
        for c in counts {
            tx.insert(count_row(c));
        }
        tx.commit()?;
        Ok(())
    }

    fn exec(&mut self, op: &Op) -> BenchResult<u64> {
        Ok(match op {
            Op::GetLinkList {
                id1,
                link_type,
                max_time,
                limit,
            } => {
                let rows = self
                    .link
                    .select(LINK_INDEX)
                    .eq(vec![u(*id1), u(*link_type), u(VISIBLE)])
                    .range(Bound::Unbounded, Bound::Included(u(*max_time)))
                    .reverse()
                    .limit(*limit)
                    .rows()?;
                let mut n = 0;
                for r in rows {
                    std::hint::black_box(r?);
                    n += 1;
                }
                n
            }
            Op::GetNode { id } => self.node.get(&[u(*id)])?.is_some() as u64,
            Op::CountLink { id, link_type } => self.count.get(&[u(*id), u(*link_type)])?.is_some() as u64,
            Op::GetLink { id1, link_type, id2 } => self.link.get(&[u(*id1), u(*link_type), u(*id2)])?.is_some() as u64,
            Op::AddLink(l) => {
                self.link.insert(link_row(l))?;
                self.add_count(l.id1, l.link_type, 1, l.time)?;
                1
            }
            Op::UpdateLink { link, count_delta, .. } => {
                self.link.replace(link_row(link))?;
                if *count_delta != 0 {
                    self.add_count(link.id1, link.link_type, *count_delta, link.time)?;
                }
                1
            }
            Op::DeleteLink {
                id1,
                link_type,
                id2,
                count_delta,
                ..
            } => {
                self.link.delete(&[u(*id1), u(*link_type), u(*id2)])?;
                if *count_delta != 0 {
                    self.add_count(*id1, *link_type, *count_delta, now_ms())?;
                }
                1
            }
            Op::UpdateNode(n) => {
                self.node.replace(node_row(n))?;
                1
            }
            Op::AddNode(n) => {
                self.node.insert(node_row(n))?;
                1
            }
            Op::DeleteNode { id } => {
                self.node.delete(&[u(*id)])?;
                1
            }
        })
    }
}

impl Session<LinkBench> for LinkSession {
    fn run(&mut self, request: Request<'_>) -> BenchResult<OpResult> {
        request.dispatch(self, Self::load, Self::exec)
    }
}

// ---------------------------------------------------------------------------------------
// kv: the default keyspace.

/// A Strata database and its default keyspace, for `kv`.
pub struct StrataKv {
    db: Db,
    ks: Keyspace,
}

/// Strata's options for `kv`: the settings RocksDB is given too (see
/// `engines::rocksdb::options`).
pub fn kv_options(cfg: &KvConfig, sync: bool) -> Options {
    Options {
        memtable_budget: cfg.write_buffer_size,
        // One active memtable plus two frozen ones (RocksDB: max_write_buffer_number 3).
        max_immutable_memtables: 2,
        size_ratio: cfg.size_ratio,
        runs_per_level: 1,
        block_size: cfg.block_size,
        bloom_fpr: bloom_fpr(cfg.bloom_bits),
        compression: strata::options::Compression::None,
        block_cache_bytes: cfg.cache_size,
        background_threads: cfg.background_threads.max(1),
        target_file_size: 64 << 20,
        l0_compaction_trigger: 4,
        l0_stall_trigger: 20,
        // Concurrent writers share one fsync, as RocksDB's WAL group commit does.
        sync: if sync {
            SyncPolicy::GroupCommit
        } else {
            SyncPolicy::None
        },
        ..Options::default()
    }
}

/// Strata sizes filters by false-positive rate: the rate its own model gives a filter of
/// `bits` bits per key, so that it builds a filter of that size (0: no filter).
pub fn bloom_fpr(bits: f64) -> f64 {
    strata::sstable::bloom::BloomPolicy::from_bits_per_key(bits).map_or(0.0, |p| p.estimated_fpr())
}

impl StrataKv {
    /// Opens (or creates) a database in `dir`.
    pub fn open(dir: &Path, cfg: &KvConfig, sync: bool) -> BenchResult<StrataKv> {
        let db = Db::open(dir, kv_options(cfg, sync))?;
        let ks = db.default_keyspace();
        Ok(StrataKv { db, ks })
    }
}

impl KvEngine for StrataKv {
    fn write(&self, ops: &[WriteOp<'_>]) -> BenchResult<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match *op {
                WriteOp::Put(k, v) => b.put(&self.ks, k, v),
                WriteOp::Delete(k) => b.delete(&self.ks, k),
            }
        }
        self.db.write(b)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.ks.get(key)?.is_some())
    }

    fn seek(&self, key: &[u8], nexts: usize) -> BenchResult<(usize, u64)> {
        let mut n = 0usize;
        let mut bytes = 0u64;
        for e in self.ks.scan(key..)?.take(nexts + 1) {
            let (k, v) = e?;
            n += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> BenchResult<()> {
        self.db.flush()?;
        self.db.wait_for_background()?;
        Ok(())
    }

    fn stats(&self) -> BenchResult<KvStats> {
        let s = self.db.stats();
        if let Some(e) = &s.background_error {
            return Err(format!("strata background error: {e}").into());
        }
        Ok(KvStats {
            flush_bytes: s.flush_bytes_written,
            compaction_bytes: s.compaction_bytes_written,
            sst_bytes: s.total_bytes(),
            data_blocks: s.block_cache_hits + s.block_cache_misses,
            data_block_misses: s.block_cache_misses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linkbench::runner::tests::load_and_mix;
    use strata::table::select::PRIMARY;

    fn rows(s: strata::table::Select) -> Vec<Row> {
        s.rows().unwrap().map(|r| r.unwrap()).collect()
    }

    fn num(r: &Row, i: usize) -> u64 {
        r[i].as_u64().unwrap()
    }

    /// Counts stay exact and the index returns what a primary scan does, in both modes.
    fn mix_keeps_tables_consistent(mode: &str) {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            cache_bytes: 1 << 20,
            memtable_bytes: 1 << 20,
            direct_reads: false,
        };
        let d = StrataTables::open_linkbench(dir.path(), mode, settings).unwrap();
        load_and_mix(&d, 2, 1, 5000);
        let (link, count) = (d.table(1), d.table(2));
        let mut links = std::collections::BTreeMap::<(u64, u64), Vec<Row>>::new();
        for r in rows(link.select(PRIMARY)) {
            links.entry((num(&r, 0), num(&r, 1))).or_default().push(r);
        }
        let counts = rows(count.select(PRIMARY));
        for c in &counts {
            let n = links.get(&(num(c, 0), num(c, 1))).map_or(0, Vec::len) as u64;
            assert_eq!(num(c, 2), n, "count of {:?}", (num(c, 0), num(c, 1)));
        }
        for ((id1, t), list) in &links {
            assert!(counts.iter().any(|c| (num(c, 0), num(c, 1)) == (*id1, *t)));
            let mut want = list.clone();
            want.sort_by_key(|r| std::cmp::Reverse((num(r, 5), num(r, 2))));
            let got = rows(link.select(LINK_INDEX).eq(vec![u(*id1), u(*t), u(VISIBLE)]).reverse());
            assert_eq!(got, want, "list of {:?}", (id1, t));
        }
    }

    #[test]
    fn eager_mix_keeps_tables_consistent() {
        mix_keeps_tables_consistent("eager");
    }

    #[test]
    fn deferred_mix_keeps_tables_consistent() {
        mix_keeps_tables_consistent("deferred");
    }
}
