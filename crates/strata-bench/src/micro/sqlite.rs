//! SQLite peer (bundled build): WAL journal, `synchronous=OFF`, 8 KiB pages, the same
//! table with `INTEGER PRIMARY KEY` and four indexes; one connection per client thread,
//! each batch one `BEGIN IMMEDIATE` transaction; SQLite serializes the writers and
//! `busy_timeout` makes the others wait.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior, params};

use super::engine::{Engine, EngineStats, Probe, Session};
use super::workload::Stmt;
use crate::BenchResult;
use crate::peers::sqlite::SqliteFile;

const SCHEMA: &str = "
    CREATE TABLE test (f1 INTEGER PRIMARY KEY, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER);
    CREATE INDEX i2 ON test(f2);
    CREATE INDEX i3 ON test(f3);
    CREATE INDEX i4 ON test(f4);
    CREATE INDEX i5 ON test(f5);
";

const REPLACE: &str = "INSERT OR REPLACE INTO test (f1, f2, f3, f4, f5) VALUES (?1, ?2, ?3, ?4, ?5)";
const DELETE: &str = "DELETE FROM test WHERE f1 = ?1";

/// A fresh SQLite database file.
pub struct SqliteEngine {
    db: SqliteFile,
}

impl SqliteEngine {
    /// Creates `dir/test.db` with the schema; `cache_bytes` is each connection's page cache.
    pub fn open(dir: &Path, cache_bytes: usize) -> BenchResult<SqliteEngine> {
        Ok(SqliteEngine {
            db: SqliteFile::create(&dir.join("test.db"), cache_bytes, SCHEMA)?,
        })
    }

    fn connect(&self) -> BenchResult<Connection> {
        self.db.connect()
    }

    fn file_bytes(&self) -> u64 {
        self.db.file_bytes()
    }
}

struct SqliteSession {
    conn: Connection,
}

impl Session for SqliteSession {
    fn commit(&mut self, batch: &[Stmt]) -> BenchResult<()> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut replace = tx.prepare_cached(REPLACE)?;
            let mut delete = tx.prepare_cached(DELETE)?;
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
        }
        tx.commit()?;
        Ok(())
    }
}

impl Engine for SqliteEngine {
    fn session(&self) -> BenchResult<Box<dyn Session + '_>> {
        Ok(Box::new(SqliteSession { conn: self.connect()? }))
    }

    fn settle(&self) -> BenchResult<()> {
        let conn = self.connect()?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn probe(&self) -> Probe {
        Probe {
            bytes: Some(self.file_bytes()),
            ..Probe::default()
        }
    }

    /// Entries: live rows times five (the table B-tree and four indexes hold one each).
    fn finish(&self) -> BenchResult<EngineStats> {
        let rows: i64 = self
            .connect()?
            .query_row("SELECT count(*) FROM test", [], |r| r.get(0))?;
        let mut probe = self.probe();
        probe.entries = Some(rows as u64 * 5);
        Ok(EngineStats {
            probe,
            ..EngineStats::default()
        })
    }
}
