//! The SQLite peer of `partitions`: the same rows, split by the same router over N
//! SQLite database files, each holding the micro table with its four indexes (local
//! indexes), and selected as a sharding router selects: the same statement on every
//! file, the N result streams stepped lazily and merged in index order (ties by primary
//! key) by the same [`MergedScan`] the Strata side uses.
//!
//! Each client thread has its own connection to every file (a connection serves one
//! thread), with a page cache of the total cache over N, as each Strata partition gets
//! its block cache.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::Connection;
use strata::partition::MergedScan;
use strata::table::partitioned::Router;
use strata::table::schema::Schema;

use super::{Query, raw_row};
use crate::BenchResult;
use crate::engines::sqlite::SqliteTables;
use crate::engines::strata::micro_schema;
use crate::ingest::values;

const TABLE: &str = "CREATE TABLE test (f1 INTEGER PRIMARY KEY, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER)";
/// Built after the rows are in (sorted, not row by row).
const INDEXES: &str = "
    CREATE INDEX i2 ON test(f2);
    CREATE INDEX i3 ON test(f3);
    CREATE INDEX i4 ON test(f4);
    CREATE INDEX i5 ON test(f5);
";
const INSERT: &str = "INSERT INTO test (f1, f2, f3, f4, f5) VALUES (?1, ?2, ?3, ?4, ?5)";

/// Each query's statement and the column (0-based) its index orders by. Every index
/// entry ends in the rowid (`f1`), so each statement reads its index in the merge's
/// order with no sort (`select_reads_the_index_in_order` checks the plans). The
/// equalities leave out `ORDER BY f1`: this SQLite build (STAT4) would re-prepare such a
/// statement at every run, measured as a parse per partition per select.
fn statement(q: Query) -> (&'static str, usize) {
    match q {
        Query::Eq => ("SELECT f1, f2, f3, f4, f5 FROM test WHERE f2 = ?1", 1),
        Query::Eq100 => ("SELECT f1, f2, f3, f4, f5 FROM test WHERE f5 = ?1", 4),
        Query::Range => (
            "SELECT f1, f2, f3, f4, f5 FROM test WHERE f3 >= ?1 ORDER BY f3, f1 LIMIT 100",
            2,
        ),
    }
}

/// N SQLite files holding the table's rows, and the client threads' connections.
pub struct SqliteParts {
    files: Vec<PathBuf>,
    /// Per client thread, a connection to every file.
    clients: Vec<Mutex<Vec<Connection>>>,
}

impl SqliteParts {
    /// Writes the `rows` rows into `n` files under `dir`, each row to the partition the
    /// Strata router gives it, and opens `threads` clients; the seconds it took.
    pub fn load(dir: &Path, n: usize, rows: u64, cache_mib: usize, threads: usize) -> BenchResult<(SqliteParts, f64)> {
        let start = std::time::Instant::now();
        let router = Router::new(&Schema::parse(&micro_schema("deferred"))?, n)?;
        std::fs::create_dir_all(dir)?;
        let cache_bytes = (cache_mib << 20) / n;
        let files: Vec<PathBuf> = (0..n).map(|p| dir.join(format!("p{p:03}.db"))).collect();
        let mut tables = Vec::with_capacity(n);
        let mut conns = Vec::with_capacity(n);
        for file in &files {
            let t = SqliteTables::create(file, cache_bytes, TABLE)?;
            let c = t.connect()?;
            c.execute_batch("BEGIN")?;
            conns.push(c);
            tables.push(t);
        }
        for i in 0..rows {
            let r = raw_row(i, rows);
            let c = &conns[router.partition_of_row(&values(r))?];
            let v: Vec<i64> = r.iter().map(super::as_i64).collect::<BenchResult<_>>()?;
            c.prepare_cached(INSERT)?.execute(rusqlite::params_from_iter(v))?;
        }
        for c in conns {
            c.execute_batch("COMMIT")?;
        }
        for t in &tables {
            t.settle_with(INDEXES)?;
        }
        let clients = (0..threads)
            .map(|_| {
                tables
                    .iter()
                    .map(SqliteTables::connect)
                    .collect::<BenchResult<Vec<_>>>()
                    .map(Mutex::new)
            })
            .collect::<BenchResult<Vec<_>>>()?;
        Ok((SqliteParts { files, clients }, start.elapsed().as_secs_f64()))
    }

    /// Runs `q` with value `v` as client `client`: every file's rows, merged; returns
    /// the rows and a fold of their primary keys in order.
    pub fn select(&self, client: usize, q: Query, v: u64) -> BenchResult<(u64, u64)> {
        let conns = self
            .clients
            .get(client)
            .ok_or("no such SQLite client")?
            .lock()
            .map_err(|_| "a SQLite client thread panicked")?;
        let (sql, field) = statement(q);
        let v = super::as_i64(&v)?;
        let mut stmts = conns
            .iter()
            .map(|c| c.prepare_cached(sql))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sources = Vec::with_capacity(stmts.len());
        for (stmt, file) in stmts.iter_mut().zip(&self.files) {
            sources.push(Source {
                rows: stmt.query([v])?,
                field,
                file,
            });
        }
        let mut out = (0, 0);
        for r in MergedScan::ascending(sources).take(q.limit()) {
            let (_, row) = r?;
            super::fold(&mut out, row[0] as u64);
        }
        Ok(out)
    }
}

/// One file's result rows, keyed for the merge by (the index's field, f1), both
/// big-endian (non-negative, so the bytes sort as the numbers).
struct Source<'s> {
    rows: rusqlite::Rows<'s>,
    field: usize,
    file: &'s Path,
}

impl Iterator for Source<'_> {
    type Item = strata::Result<(Vec<u8>, [i64; 5])>;

    fn next(&mut self) -> Option<Self::Item> {
        let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<[i64; 5]> {
            Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
        };
        let row = match self.rows.next() {
            Ok(Some(r)) => read(r),
            Ok(None) => return None,
            Err(e) => Err(e),
        };
        Some(
            row.map(|v| {
                let mut key = Vec::with_capacity(16);
                key.extend_from_slice(&v[self.field].to_be_bytes());
                key.extend_from_slice(&v[0].to_be_bytes());
                (key, v)
            })
            .map_err(|e| strata::Error::Io {
                path: Some(self.file.to_path_buf()),
                source: std::io::Error::other(e),
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_reads_the_index_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (parts, _) = SqliteParts::load(dir.path(), 2, 200, 1, 1).unwrap();
        let conns = parts.clients[0].lock().unwrap();
        for q in [Query::Eq, Query::Eq100, Query::Range] {
            let (sql, _) = statement(q);
            let mut stmt = conns[0].prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> = stmt
                .query_map([1], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("; ");
            assert!(plan.contains("USING INDEX i"), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
        drop(conns);
        // Runs with new values reuse the prepared statement.
        for q in [Query::Eq, Query::Eq100, Query::Range] {
            for v in 1..20 {
                parts.select(0, q, v).unwrap();
            }
            let conns = parts.clients[0].lock().unwrap();
            let stmt = conns[1].prepare_cached(statement(q).0).unwrap();
            assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0, "{q:?}");
            assert_eq!(stmt.get_status(rusqlite::StatementStatus::Run), 19, "{q:?}");
        }
    }
}
