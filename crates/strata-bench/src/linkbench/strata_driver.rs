//! Strata: the three LinkBench tables, every one in the same maintenance mode.
//!
//! Transactions are per table in Strata, so `addlink` / `deletelink` / a re-creating
//! `updatelink` are two transactions (the link, then the count's read-modify-write);
//! the generator's stripe lock keeps the count exact between clients.

use std::ops::Bound;
use std::path::Path;
use std::sync::Mutex;

use strata::table::value::Value;
use strata::table::{Row, Table, schema::Schema};
use strata::{Db, Options, SyncPolicy};

use super::driver::{Counters, Driver, OpResult, Session};
use super::model::{Count, Link, Node, VISIBLE};
use super::workload::Op;
use crate::BenchResult;

/// Name of the link table's secondary index.
const LINK_INDEX: &str = "by_time";

/// The schema texts of the three tables in `mode` (`eager` or `deferred`).
pub fn schema_texts(mode: &str) -> [String; 3] {
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

/// Engine settings the user may change.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// `Options.block_cache_bytes`.
    pub cache_bytes: usize,
    /// `Options.memtable_budget`.
    pub memtable_bytes: usize,
    /// `Options.direct_reads`.
    pub direct_reads: bool,
}

/// Options: defaults (size ratio 10, leveling, bloom 1 %, 8 KiB blocks, 2 background
/// threads), WAL not fsynced, the given block cache, memtable and read mode.
pub fn options(s: Settings) -> Options {
    Options {
        block_cache_bytes: s.cache_bytes,
        memtable_budget: s.memtable_bytes,
        direct_reads: s.direct_reads,
        sync: SyncPolicy::None,
        ..Options::default()
    }
}

/// An open database with the three tables.
pub struct StrataDriver {
    db: Db,
    node: Table,
    link: Table,
    count: Table,
    baseline: Mutex<Counters>,
}

impl StrataDriver {
    /// Creates a fresh database in `dir` with the tables in `mode`.
    pub fn open(dir: &Path, mode: &str, settings: Settings) -> BenchResult<StrataDriver> {
        let db = Db::open(dir, options(settings))?;
        let [n, l, c] = schema_texts(mode);
        let node = db.create_table(Schema::parse(&n)?)?;
        let link = db.create_table(Schema::parse(&l)?)?;
        let count = db.create_table(Schema::parse(&c)?)?;
        Ok(StrataDriver {
            db,
            node,
            link,
            count,
            baseline: Mutex::new(Counters::default()),
        })
    }

    /// Counters since open.
    fn raw(&self) -> BenchResult<Counters> {
        let s = self.db.stats();
        if let Some(e) = &s.background_error {
            return Err(format!("background error: {e}").into());
        }
        let (n, l, c) = (self.node.stats()?, self.link.stats()?, self.count.stats()?);
        let sum = |f: fn(&strata::table::TableStats) -> u64| Some(f(&n) + f(&l) + f(&c));
        let ix = l.indexes.iter().find(|i| i.name == LINK_INDEX);
        Ok(Counters {
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
        })
    }
}

impl Driver for StrataDriver {
    fn session(&self) -> BenchResult<Box<dyn Session + '_>> {
        Ok(Box::new(StrataSession {
            node: self.node.clone(),
            link: self.link.clone(),
            count: self.count.clone(),
        }))
    }

    fn settle(&self) -> BenchResult<()> {
        self.db.flush()?;
        self.db.wait_for_background()?;
        let now = self.raw()?;
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = now;
        Ok(())
    }

    fn counters(&self) -> BenchResult<Counters> {
        let b = *self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.raw()?;
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

struct StrataSession {
    node: Table,
    link: Table,
    count: Table,
}

impl StrataSession {
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
}

impl Session for StrataSession {
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

    fn exec(&mut self, op: &Op) -> BenchResult<OpResult> {
        let rows = match op {
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
                    self.add_count(*id1, *link_type, *count_delta, super::model::now_ms())?;
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
        };
        Ok(OpResult { rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linkbench::model::Graph;
    use crate::linkbench::runner::{RunSpec, load};
    use crate::linkbench::workload::{Generator, Shared};
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
        let d = StrataDriver::open(dir.path(), mode, settings).unwrap();
        let spec = RunSpec {
            nodes: 300,
            seconds: 1,
            threads: 2,
            seed: 1,
            zipf: 1.0,
        };
        let shared = Shared::new(Graph::new(spec.nodes, spec.seed), spec.zipf);
        load(&d, &shared, &spec, "test").unwrap();
        let mut s = d.session().unwrap();
        let mut g = Generator::new(1, 0);
        for _ in 0..5000 {
            let k = g.kind();
            let mut op = g.op(k, &shared);
            shared.execute(&mut op, |o| o.map(|o| s.exec(o)).transpose()).unwrap();
        }
        let mut links = std::collections::BTreeMap::<(u64, u64), Vec<Row>>::new();
        for r in rows(d.link.select(PRIMARY)) {
            links.entry((num(&r, 0), num(&r, 1))).or_default().push(r);
        }
        let counts = rows(d.count.select(PRIMARY));
        for c in &counts {
            let n = links.get(&(num(c, 0), num(c, 1))).map_or(0, Vec::len) as u64;
            assert_eq!(num(c, 2), n, "count of {:?}", (num(c, 0), num(c, 1)));
        }
        for ((id1, t), list) in &links {
            assert!(counts.iter().any(|c| (num(c, 0), num(c, 1)) == (*id1, *t)));
            let mut want = list.clone();
            want.sort_by_key(|r| std::cmp::Reverse((num(r, 5), num(r, 2))));
            let got = rows(d.link.select(LINK_INDEX).eq(vec![u(*id1), u(*t), u(VISIBLE)]).reverse());
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
