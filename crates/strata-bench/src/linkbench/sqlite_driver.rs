//! SQLite peer (bundled build): the LinkBench tables as in its MySQL schema (`link` and
//! `count` clustered by primary key: `WITHOUT ROWID`), WAL journal,
//! `synchronous=OFF`; one connection per client thread; every request one transaction
//! (reads autocommit, writes `BEGIN IMMEDIATE` so SQLite queues writers, count maintenance in the same
//! transaction as the link write, as an upsert).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::driver::{Counters, Driver, OpResult, Session};
use super::model::{Count, Link, Node, VISIBLE};
use super::workload::Op;
use crate::BenchResult;
use crate::peers::sqlite::SqliteFile;

const SCHEMA: &str = "
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

/// A fresh SQLite database file.
pub struct SqliteDriver {
    db: SqliteFile,
}

impl SqliteDriver {
    /// Creates `dir/linkbench.db` with the schema; `cache_bytes` is each connection's page cache.
    pub fn open(dir: &Path, cache_bytes: usize) -> BenchResult<SqliteDriver> {
        Ok(SqliteDriver {
            db: SqliteFile::create(&dir.join("linkbench.db"), cache_bytes, SCHEMA)?,
        })
    }

    fn connect(&self) -> BenchResult<Connection> {
        self.db.connect()
    }

    fn file_bytes(&self) -> u64 {
        self.db.file_bytes()
    }
}

impl Driver for SqliteDriver {
    fn session(&self) -> BenchResult<Box<dyn Session + '_>> {
        Ok(Box::new(SqliteSession { conn: self.connect()? }))
    }

    fn load_threads(&self, _requested: usize) -> usize {
        1
    }

    fn settle(&self) -> BenchResult<()> {
        let conn = self.connect()?;
        conn.execute_batch("ANALYZE")?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn counters(&self) -> BenchResult<Counters> {
        Ok(Counters {
            bytes_on_disk: Some(self.file_bytes()),
            ..Counters::default()
        })
    }
}

struct SqliteSession {
    conn: Connection,
}

fn i(v: u64) -> i64 {
    v as i64
}

fn exists(conn: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<u64> {
    let mut st = conn.prepare_cached(sql)?;
    let found = st.query_row(p, |r| r.get::<_, i64>(0)).optional()?;
    Ok(found.is_some() as u64)
}

impl Session for SqliteSession {
    fn load(&mut self, nodes: &[Node], links: &[Link], counts: &[Count]) -> BenchResult<()> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached(INSERT_NODE)?;
            for n in nodes {
                st.execute(params![i(n.id), i(n.ty), i(n.version), i(n.time), n.data])?;
            }
            let mut st = tx.prepare_cached(INSERT_LINK)?;
            for l in links {
                st.execute(params![
                    i(l.id1),
                    i(l.link_type),
                    i(l.id2),
                    i(l.visibility),
                    l.data,
                    i(l.time),
                    i(l.version)
                ])?;
            }
            let mut st = tx.prepare_cached(INSERT_COUNT)?;
            for c in counts {
                st.execute(params![i(c.id), i(c.link_type), i(c.count), i(c.time), i(c.version)])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn exec(&mut self, op: &Op) -> BenchResult<OpResult> {
        let c = &mut self.conn;
        let rows = match op {
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
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(sql)?.execute(params![
                    i(l.id1),
                    i(l.link_type),
                    i(l.id2),
                    i(l.visibility),
                    l.data,
                    i(l.time),
                    i(l.version)
                ])?;
                if delta != 0 {
                    tx.prepare_cached(ADD_COUNT)?
                        .execute(params![i(l.id1), i(l.link_type), delta, i(l.time)])?;
                }
                tx.commit()?;
                1
            }
            Op::DeleteLink {
                id1,
                link_type,
                id2,
                count_delta,
                ..
            } => {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(DELETE_LINK)?
                    .execute([i(*id1), i(*link_type), i(*id2)])?;
                if *count_delta != 0 {
                    tx.prepare_cached(ADD_COUNT)?.execute(params![
                        i(*id1),
                        i(*link_type),
                        *count_delta,
                        i(super::model::now_ms())
                    ])?;
                }
                tx.commit()?;
                1
            }
            Op::UpdateNode(n) | Op::AddNode(n) => {
                let sql = if matches!(op, Op::AddNode(_)) {
                    INSERT_NODE
                } else {
                    REPLACE_NODE
                };
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(sql)?
                    .execute(params![i(n.id), i(n.ty), i(n.version), i(n.time), n.data])?;
                tx.commit()?;
                1
            }
            Op::DeleteNode { id } => {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(DELETE_NODE)?.execute([i(*id)])?;
                tx.commit()?;
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

    #[test]
    fn mix_keeps_counts_exact() {
        let dir = tempfile::tempdir().unwrap();
        let d = SqliteDriver::open(dir.path(), 1 << 20).unwrap();
        let spec = RunSpec {
            nodes: 300,
            seconds: 1,
            threads: 1,
            seed: 2,
            zipf: 1.0,
        };
        let shared = Shared::new(Graph::new(spec.nodes, spec.seed), spec.zipf);
        load(&d, &shared, &spec, "test").unwrap();
        let mut s = d.session().unwrap();
        let mut g = Generator::new(2, 0);
        for _ in 0..3000 {
            let k = g.kind();
            let mut op = g.op(k, &shared);
            shared.execute(&mut op, |o| o.map(|o| s.exec(o)).transpose()).unwrap();
        }
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
