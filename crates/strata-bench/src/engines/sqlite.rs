//! SQLite (bundled build) for the table benchmarks: one database file in WAL mode, 8 KiB
//! pages, one connection per client thread with `synchronous=OFF` and a page cache of
//! its own; write transactions are `BEGIN IMMEDIATE`, so SQLite serializes the writers
//! and `busy_timeout` makes the others wait.
//!
//! * `micro`: the table with `INTEGER PRIMARY KEY` and four indexes; each batch one
//!   transaction.
//! * `linkbench`: the tables as in LinkBench's MySQL schema (`link` and `count`
//!   clustered by primary key: `WITHOUT ROWID`); every request one transaction (reads
//!   autocommit, count maintenance in the same transaction as the link write, as an
//!   upsert).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Statement, TransactionBehavior, params};

use super::{Session, TableEngine};
use crate::BenchResult;
use crate::linkbench::model::{Count, Link, Node, VISIBLE, now_ms};
use crate::linkbench::workload::Op;
use crate::linkbench::{Counters, LinkBench, OpResult, Request};
use crate::micro::workload::Stmt;
use crate::micro::{EngineStats, Micro, Probe};

/// A fresh SQLite database file shared by the benchmark's connections.
pub struct SqliteTables {
    path: PathBuf,
    cache_bytes: usize,
}

impl SqliteTables {
    /// Creates `path` with `schema`; `cache_bytes` is each connection's page cache.
    pub fn create(path: &Path, cache_bytes: usize, schema: &str) -> BenchResult<SqliteTables> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "page_size", 8192)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(schema)?;
        Ok(SqliteTables {
            path: path.to_path_buf(),
            cache_bytes,
        })
    }

    /// A new connection (SQLite serializes writers; waits rather than fails).
    pub fn connect(&self) -> BenchResult<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(std::time::Duration::from_secs(600))?;
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.pragma_update(None, "cache_size", -((self.cache_bytes / 1024).max(1) as i64))?;
        Ok(conn)
    }

    /// Bytes of the database file and its WAL.
    pub fn file_bytes(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", self.path.display())).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Runs `sql` (if any), then checkpoints the WAL into the database file.
    pub(crate) fn settle_with(&self, sql: &str) -> BenchResult<()> {
        let conn = self.connect()?;
        if !sql.is_empty() {
            conn.execute_batch(sql)?;
        }
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction of `conn`.
fn immediate<T>(conn: &mut Connection, f: impl FnOnce(&Connection) -> BenchResult<T>) -> BenchResult<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let r = f(&tx)?;
    tx.commit()?;
    Ok(r)
}

/// A client connection.
struct SqliteSession(Connection);

// ---------------------------------------------------------------------------------------
// micro

const MICRO_SCHEMA: &str = "
    CREATE TABLE test (f1 INTEGER PRIMARY KEY, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER);
    CREATE INDEX i2 ON test(f2);
    CREATE INDEX i3 ON test(f3);
    CREATE INDEX i4 ON test(f4);
    CREATE INDEX i5 ON test(f5);
";

const MICRO_REPLACE: &str = "INSERT OR REPLACE INTO test (f1, f2, f3, f4, f5) VALUES (?1, ?2, ?3, ?4, ?5)";
const MICRO_DELETE: &str = "DELETE FROM test WHERE f1 = ?1";

impl SqliteTables {
    /// Creates `dir/test.db` with the micro table.
    pub fn create_micro(dir: &Path, cache_bytes: usize) -> BenchResult<SqliteTables> {
        SqliteTables::create(&dir.join("test.db"), cache_bytes, MICRO_SCHEMA)
    }
}

impl Session<Micro> for SqliteSession {
    fn run(&mut self, batch: &[Stmt]) -> BenchResult<()> {
        immediate(&mut self.0, |tx| {
            let mut replace = tx.prepare_cached(MICRO_REPLACE)?;
            let mut delete = tx.prepare_cached(MICRO_DELETE)?;
            for s in batch {
                match s {
                    Stmt::Replace(r) => {
                        let v = r.map(|x| x as i64);
                        replace.execute(params![v[0], v[1], v[2], v[3], v[4]])?;
                    }
                    Stmt::Delete(k) => {
                        delete.execute([*k as i64])?;
                    }
                }
            }
            Ok(())
        })
    }
}

impl TableEngine<Micro> for SqliteTables {
    fn session(&self) -> BenchResult<Box<dyn Session<Micro> + '_>> {
        Ok(Box::new(SqliteSession(self.connect()?)))
    }

    fn settle(&self) -> BenchResult<()> {
        self.settle_with("")
    }

    fn probe(&self) -> Probe {
        Probe {
            bytes: Some(self.file_bytes()),
            ..Probe::default()
        }
    }

    /// Entries: live rows times five (the table B-tree and four indexes hold one each).
    fn stats(&self) -> BenchResult<EngineStats> {
        let rows: i64 = self
            .connect()?
            .query_row("SELECT count(*) FROM test", [], |r| r.get(0))?;
        let mut probe = TableEngine::<Micro>::probe(self);
        probe.entries = Some(rows as u64 * 5);
        Ok(EngineStats {
            probe,
            ..EngineStats::default()
        })
    }
}

// ---------------------------------------------------------------------------------------
// linkbench

const LINK_SCHEMA: &str = "
    CREATE TABLE node (id INTEGER PRIMARY KEY, type INTEGER NOT NULL, version INTEGER NOT NULL,
        time INTEGER NOT NULL, data BLOB NOT NULL);
    CREATE TABLE link (id1 INTEGER NOT NULL, link_type INTEGER NOT NULL, id2 INTEGER NOT NULL,
        visibility INTEGER NOT NULL, data BLOB NOT NULL, time INTEGER NOT NULL,
        version INTEGER NOT NULL, PRIMARY KEY (id1, link_type, id2)) WITHOUT ROWID;
    CREATE INDEX link_by_time ON link (id1, link_type, visibility, time);
    CREATE TABLE \"count\" (id INTEGER NOT NULL, link_type INTEGER NOT NULL, count INTEGER NOT NULL,
        time INTEGER NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (id, link_type)) WITHOUT ROWID;
";

const INSERT_NODE: &str = "INSERT INTO node (id, type, version, time, data) VALUES (?1, ?2, ?3, ?4, ?5)";
const REPLACE_NODE: &str = "INSERT OR REPLACE INTO node (id, type, version, time, data) VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_LINK: &str = "INSERT INTO link (id1, link_type, id2, visibility, data, time, version) \
                           VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const REPLACE_LINK: &str = "INSERT OR REPLACE INTO link (id1, link_type, id2, visibility, data, time, version) \
                            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const INSERT_COUNT: &str = "INSERT INTO \"count\" (id, link_type, count, time, version) VALUES (?1, ?2, ?3, ?4, ?5)";
const ADD_COUNT: &str = "INSERT INTO \"count\" (id, link_type, count, time, version) VALUES (?1, ?2, max(?3, 0), ?4, 0) \
                         ON CONFLICT (id, link_type) DO UPDATE SET count = max(count + ?3, 0), time = ?4, \
                         version = version + 1";
const GET_LINK_LIST: &str = "SELECT id1, link_type, id2, visibility, data, time, version FROM link \
                             WHERE id1 = ?1 AND link_type = ?2 AND visibility = ?3 AND time <= ?4 \
                             ORDER BY time DESC LIMIT ?5";
const GET_NODE: &str = "SELECT id, type, version, time, data FROM node WHERE id = ?1";
const GET_COUNT: &str = "SELECT id, link_type, count, time, version FROM \"count\" WHERE id = ?1 AND link_type = ?2";
const GET_LINK: &str = "SELECT id1, link_type, id2, visibility, data, time, version FROM link \
                        WHERE id1 = ?1 AND link_type = ?2 AND id2 = ?3";
const DELETE_LINK: &str = "DELETE FROM link WHERE id1 = ?1 AND link_type = ?2 AND id2 = ?3";
const DELETE_NODE: &str = "DELETE FROM node WHERE id = ?1";

impl SqliteTables {
    /// Creates `dir/linkbench.db` with the LinkBench tables.
    pub fn create_linkbench(dir: &Path, cache_bytes: usize) -> BenchResult<SqliteTables> {
        SqliteTables::create(&dir.join("linkbench.db"), cache_bytes, LINK_SCHEMA)
    }
}

impl TableEngine<LinkBench> for SqliteTables {
    fn session(&self) -> BenchResult<Box<dyn Session<LinkBench> + '_>> {
        Ok(Box::new(SqliteSession(self.connect()?)))
    }

    fn load_threads(&self, _requested: usize) -> usize {
        1
    }

    fn settle(&self) -> BenchResult<()> {
        self.settle_with("ANALYZE")
    }

    fn probe(&self) -> Counters {
        TableEngine::<LinkBench>::stats(self).unwrap_or_default()
    }

    fn stats(&self) -> BenchResult<Counters> {
        Ok(Counters {
            bytes_on_disk: Some(self.file_bytes()),
            ..Counters::default()
        })
    }
}

fn i(v: u64) -> i64 {
    v as i64
}

fn exists(conn: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<u64> {
    let mut st = conn.prepare_cached(sql)?;
    let found = st.query_row(p, |r| r.get::<_, i64>(0)).optional()?;
    Ok(found.is_some() as u64)
}

/// Writes `n` with `st` (`INSERT_NODE` or `REPLACE_NODE`).
fn write_node(st: &mut Statement<'_>, n: &Node) -> rusqlite::Result<usize> {
    st.execute(params![i(n.id), i(n.ty), i(n.version), i(n.time), n.data])
}

/// Writes `l` with `st` (`INSERT_LINK` or `REPLACE_LINK`).
fn write_link(st: &mut Statement<'_>, l: &Link) -> rusqlite::Result<usize> {
    st.execute(params![
        i(l.id1),
        i(l.link_type),
        i(l.id2),
        i(l.visibility),
        l.data,
        i(l.time),
        i(l.version)
    ])
}

/// `count += delta` (floored at 0) for `(id, link_type)`, as an upsert.
fn add_count(conn: &Connection, id: u64, link_type: u64, delta: i64, time: u64) -> rusqlite::Result<usize> {
    conn.prepare_cached(ADD_COUNT)?
        .execute(params![i(id), i(link_type), delta, i(time)])
}

impl SqliteSession {
    fn load(&mut self, nodes: &[Node], links: &[Link], counts: &[Count]) -> BenchResult<()> {
        immediate(&mut self.0, |tx| {
            let mut st = tx.prepare_cached(INSERT_NODE)?;
            for n in nodes {
                write_node(&mut st, n)?;
            }
            let mut st = tx.prepare_cached(INSERT_LINK)?;
            for l in links {
                write_link(&mut st, l)?;
            }
            let mut st = tx.prepare_cached(INSERT_COUNT)?;
            for c in counts {
                st.execute(params![i(c.id), i(c.link_type), i(c.count), i(c.time), i(c.version)])?;
            }
            Ok(())
        })
    }

    fn exec(&mut self, op: &Op) -> BenchResult<u64> {
        let c = &mut self.0;
        Ok(match op {
            Op::GetLinkList {
                id1,
                link_type,
                max_time,
                limit,
            } => {
                let mut st = c.prepare_cached(GET_LINK_LIST)?;
                let mut rows = st.query(params![i(*id1), i(*link_type), i(VISIBLE), i(*max_time), i(*limit)])?;
                let mut n = 0;
                while let Some(r) = rows.next()? {
                    std::hint::black_box((r.get::<_, i64>(2)?, r.get_ref(4)?.as_blob()?.len(), r.get::<_, i64>(5)?));
                    n += 1;
                }
                n
            }
            Op::GetNode { id } => exists(c, GET_NODE, [i(*id)])?,
            Op::CountLink { id, link_type } => exists(c, GET_COUNT, [i(*id), i(*link_type)])?,
            Op::GetLink { id1, link_type, id2 } => exists(c, GET_LINK, [i(*id1), i(*link_type), i(*id2)])?,
            Op::AddLink(l) | Op::UpdateLink { link: l, .. } => {
                let (sql, delta) = match op {
                    Op::UpdateLink { count_delta, .. } => (REPLACE_LINK, *count_delta),
                    _ => (INSERT_LINK, 1),
                };
                immediate(c, |tx| {
                    write_link(&mut *tx.prepare_cached(sql)?, l)?;
                    if delta != 0 {
                        add_count(tx, l.id1, l.link_type, delta, l.time)?;
                    }
                    Ok(1)
                })?
            }
            Op::DeleteLink {
                id1,
                link_type,
                id2,
                count_delta,
                ..
            } => immediate(c, |tx| {
                tx.prepare_cached(DELETE_LINK)?
                    .execute([i(*id1), i(*link_type), i(*id2)])?;
                if *count_delta != 0 {
                    add_count(tx, *id1, *link_type, *count_delta, now_ms())?;
                }
                Ok(1)
            })?,
            Op::UpdateNode(n) | Op::AddNode(n) => {
                let sql = if matches!(op, Op::AddNode(_)) {
                    INSERT_NODE
                } else {
                    REPLACE_NODE
                };
                immediate(c, |tx| Ok(write_node(&mut *tx.prepare_cached(sql)?, n).map(|_| 1)?))?
            }
            Op::DeleteNode { id } => immediate(c, |tx| {
                tx.prepare_cached(DELETE_NODE)?.execute([i(*id)])?;
                Ok(1)
            })?,
        })
    }
}

impl Session<LinkBench> for SqliteSession {
    fn run(&mut self, request: Request<'_>) -> BenchResult<OpResult> {
        request.dispatch(self, Self::load, Self::exec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linkbench::runner::tests::load_and_mix;

    #[test]
    fn mix_keeps_counts_exact() {
        let dir = tempfile::tempdir().unwrap();
        let d = SqliteTables::create_linkbench(dir.path(), 1 << 20).unwrap();
        load_and_mix(&d, 1, 2, 3000);
        let conn = d.connect().unwrap();
        let bad: i64 = conn
            .query_row(
                "SELECT count(*) FROM (SELECT id1, link_type, count(*) AS n FROM link GROUP BY 1, 2) l \
                 FULL JOIN \"count\" c ON c.id = l.id1 AND c.link_type = l.link_type \
                 WHERE coalesce(l.n, 0) != coalesce(c.count, 0)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(bad, 0);
        let links: i64 = conn.query_row("SELECT count(*) FROM link", [], |r| r.get(0)).unwrap();
        assert!(links > 0);
    }
}
