//! Transactions: statements applied together in one atomic write batch.
//!
//! Statements that must read (INSERT checks the primary key, UPDATE reads the old row,
//! eager REPLACE/DELETE read the old row, unique indexes are checked) lock the stripes
//! of the primary keys involved first, in ascending order, so two transactions never
//! decide on the same key at once; unique-key stripes are taken without waiting, and a
//! conflict restarts the transaction. Blind statements (deferred REPLACE and DELETE on
//! a table without unique indexes) take their stripes shared: they never wait for one
//! another, only for a statement deciding on the same key.
//!
//! Within a transaction, later statements see earlier ones (an overlay of written rows),
//! and several writes to one key leave exactly one obligation each for the deferred
//! machinery: every write is its own row version with its own seqno.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::deferred::purge::{PurgeJob, PurgeRow};
use super::deferred::validate::holds;
use super::layout::{IndexLayout, Layout};
use super::locks::LockStripes;
use super::state::{TableRuntime, add};
use super::value::Value;
use super::{Row, Table, deferred, eager};
use crate::batch::WriteBatch;
use crate::db::DbInner;
use crate::error::{Error, Result};

/// One statement of a transaction.
#[derive(Debug, Clone)]
enum Stmt {
    Insert(Row),
    Replace(Row),
    Delete(Vec<Value>),
    Update(Vec<Value>, Vec<(String, Value)>),
}

/// A group of statements on one table, applied atomically by [`Transaction::commit`].
///
/// ```
/// # use strata::table::{schema::{Schema, FieldType}, value::Value};
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
/// let schema = Schema::parse("table t (id u64, v str) primary key (id) index by_v (v) deferred").unwrap();
/// let t = db.create_table(schema).unwrap();
/// let mut tx = t.transaction();
/// tx.insert(vec![Value::U64(1), Value::from("a")]);
/// tx.replace(vec![Value::U64(2), Value::from("b")]);
/// tx.delete(vec![Value::U64(1)]);
/// tx.commit().unwrap();
/// assert!(t.get(&[Value::U64(1)]).unwrap().is_none());
/// assert_eq!(t.get(&[Value::U64(2)]).unwrap(), Some(vec![Value::U64(2), Value::from("b")]));
/// ```
#[derive(Debug)]
pub struct Transaction {
    table: Table,
    stmts: Vec<Stmt>,
}

/// What a committed transaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Statements applied.
    pub statements: u64,
    /// UPDATEs that found no row (and so changed nothing).
    pub updates_missed: u64,
    /// Seqno of the batch's last write (0 if nothing was written).
    pub seq: u64,
}

impl Transaction {
    pub(crate) fn new(table: Table) -> Self {
        Transaction {
            table,
            stmts: Vec::new(),
        }
    }

    /// Number of statements so far.
    pub fn len(&self) -> usize {
        self.stmts.len()
    }

    /// True when it holds no statement.
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty()
    }

    /// Inserts a row; the commit fails if its primary key exists.
    pub fn insert(&mut self, row: Row) -> &mut Self {
        self.stmts.push(Stmt::Insert(row));
        self
    }

    /// Inserts or overwrites the row with the same primary key.
    pub fn replace(&mut self, row: Row) -> &mut Self {
        self.stmts.push(Stmt::Replace(row));
        self
    }

    /// Deletes the row with this primary key (no error if absent).
    pub fn delete(&mut self, pk: Vec<Value>) -> &mut Self {
        self.stmts.push(Stmt::Delete(pk));
        self
    }

    /// Sets some fields of the row with this primary key (nothing if absent).
    pub fn update(&mut self, pk: Vec<Value>, set: Vec<(String, Value)>) -> &mut Self {
        self.stmts.push(Stmt::Update(pk, set));
        self
    }

    /// Applies every statement atomically, or none if one fails.
    ///
    /// ```
    /// use strata::table::schema::Schema;
    /// use strata::table::value::Value;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let t = db.create_table(Schema::parse("table t (id u64, v u64) primary key (id)").unwrap()).unwrap();
    /// let mut tx = t.transaction();
    /// tx.insert(vec![Value::U64(1), Value::U64(10)]);
    /// tx.update(vec![Value::U64(2)], vec![("v".into(), Value::U64(20))]);
    /// let o = tx.commit().unwrap();
    /// assert_eq!((o.statements, o.updates_missed), (1, 1));
    /// assert!(o.seq > 0);
    /// // Nothing to write: no seqno either.
    /// let mut tx = t.transaction();
    /// tx.update(vec![Value::U64(2)], vec![("v".into(), Value::U64(20))]);
    /// assert_eq!(tx.commit().unwrap().seq, 0);
    /// ```
    pub fn commit(self) -> Result<Outcome> {
        if let Some(route) = self.table.route() {
            for s in &self.stmts {
                match s {
                    Stmt::Insert(row) | Stmt::Replace(row) => route.check_row(row)?,
                    Stmt::Delete(pk) | Stmt::Update(pk, _) => route.check_pk(pk)?,
                }
            }
        }
        let db = self.table.db.clone();
        loop {
            // Catalog and layout are taken afresh for every attempt: a retry may wait
            // for an index build, which needs the catalog lock to finish.
            let ddl = self.table.tables()?.ddl.read();
            let rt = self.table.runtime()?;
            if let Some(o) = try_commit(&db, &rt, &self.stmts)? {
                return Ok(o);
            }
            drop(ddl);
            // A unique-key lock was busy, or a unique index is being built: retry,
            // unless the build is gone and left its index building.
            if let Some(ix) = super::build::abandoned(&self.table)? {
                return Err(Error::Background(format!(
                    "unique index {ix:?} of table {:?} was left half-built by a failed build; \
                     drop it, or reopen the database (which drops it)",
                    self.table.name()
                )));
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

fn pk_values(layout: &Layout, row: &[Value]) -> Vec<Value> {
    layout
        .pk
        .positions
        .iter()
        .map(|p| row.get(*p).cloned().unwrap_or(Value::Null))
        .collect()
}

/// What a blind write knows of the row it replaces.
enum Old {
    /// Found without I/O (`None`: absent or deleted).
    Known(Option<Row>),
    /// Found in a memtable while the indexes are read: its entries are purged at commit.
    Purged(Row),
    /// Its newest version is on disk: the purge thread will read it.
    OnDisk,
    /// Nobody reads the indexes: do not look.
    Unwanted,
}

struct Ctx<'a> {
    db: &'a Arc<DbInner>,
    rt: &'a TableRuntime,
    overlay: HashMap<Vec<u8>, Option<Row>>,
    /// Blind writes whose old row is on disk, for the purge thread.
    purge_later: Vec<PurgeRow>,
    unique_guards: Vec<MutexGuard<'a, ()>>,
    held_unique: Vec<usize>,
    /// Blind writes, and those purged at commit, counted once the attempt commits: an
    /// attempt retried or refused wrote nothing (reads are counted as they happen).
    blind_writes: u64,
    commit_purges: u64,
}

impl Ctx<'_> {
    fn layout(&self) -> &Layout {
        &self.rt.layout
    }

    /// The old row under `pk` for a blind write to purge the secondary entries of:
    /// known without I/O when this transaction or the memtables hold it; left to the
    /// purge thread when it is on disk. Purging is worth it only while the table's
    /// indexes are being read, so otherwise the write stays fully blind.
    fn old_for_purge(&self, pk: &[u8]) -> Result<Old> {
        if let Some(r) = self.overlay.get(pk) {
            return Ok(Old::Known(r.clone()));
        }
        if !self.rt.state.purge_at_commit() {
            return Ok(Old::Unwanted);
        }
        Ok(match self.db.get_in_memtables(self.layout().primary, pk) {
            Some(Some((_, bytes))) => Old::Purged(self.layout().decode(&bytes)?),
            Some(None) => Old::Known(None),
            None => Old::OnDisk,
        })
    }

    /// The old row if known now; otherwise notes `pk` for the purge thread when purging
    /// is wanted.
    fn old_or_later(&mut self, pk: &[u8]) -> Result<Option<Row>> {
        self.blind_writes += 1;
        Ok(match self.old_for_purge(pk)? {
            Old::Known(r) => r,
            Old::Purged(r) => {
                self.commit_purges += 1;
                Some(r)
            }
            Old::OnDisk => {
                self.purge_later.push(pk.to_vec());
                None
            }
            Old::Unwanted => None,
        })
    }

    /// The current row under `pk`, seen through this transaction's own writes.
    fn read(&self, pk: &[u8]) -> Result<Option<Row>> {
        if let Some(r) = self.overlay.get(pk) {
            return Ok(r.clone());
        }
        match self.db.get_latest(self.layout().primary, pk)? {
            Some((_, bytes)) => Ok(Some(self.layout().decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Checks every unique index for another live row with `row`'s key. `Ok(false)`
    /// means a unique-key lock was busy: restart.
    fn check_unique(&mut self, row: &[Value], pk: &[u8]) -> Result<bool> {
        let layout = self.rt.layout.clone();
        for ix in layout.indexes.iter().filter(|i| i.unique) {
            if ix.shape.has_null(row) {
                continue; // NULLs never conflict
            }
            if ix.building {
                // Its entries are not all there yet: a check now could miss a duplicate.
                return Ok(false);
            }
            let mut ukey = Vec::new();
            ix.shape.encode_row_key(row, &mut ukey);
            let stripe = LockStripes::stripe(ix.keyspace, &ukey);
            if !self.held_unique.contains(&stripe) {
                match self.rt.state.unique_locks.try_lock(stripe) {
                    Some(g) => {
                        self.unique_guards.push(g);
                        self.held_unique.push(stripe);
                    }
                    None => return Ok(false),
                }
            }
            if self.unique_conflict(&layout, ix, &ukey, pk)? {
                return Err(Error::Constraint(format!(
                    "duplicate key in unique index {:?} of table {:?}",
                    ix.name, layout.name
                )));
            }
        }
        Ok(true)
    }

    fn unique_conflict(&self, layout: &Layout, ix: &IndexLayout, ukey: &[u8], pk: &[u8]) -> Result<bool> {
        // Rows written earlier in this transaction.
        for (opk, orow) in &self.overlay {
            if opk.as_slice() == pk {
                continue;
            }
            if orow.as_ref().is_some_and(|r| holds(ix, ukey, r)) {
                return Ok(true);
            }
        }
        let hi = super::encoding::prefix_successor(ukey);
        let ks = self.db_keyspace(ix.keyspace);
        let scan = match &hi {
            Some(hi) => ks.scan(ukey..hi.as_slice())?,
            None => ks.scan(ukey..)?,
        };
        add(&self.rt.state.counters.unique_check_reads, 1);
        for item in scan {
            let (key, _) = item?;
            let (_, other_pk) = layout.split_secondary(ix, &key)?;
            if other_pk == pk {
                continue;
            }
            // A dirty entry is no conflict (deferred invariant 8).
            if self.read(other_pk)?.is_some_and(|other| holds(ix, ukey, &other)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn db_keyspace(&self, id: u32) -> crate::db::Keyspace {
        crate::db::Keyspace::unnamed(self.db.clone(), id)
    }
}

/// Executes the statements; `Ok(None)` asks for a retry after a lock conflict.
fn try_commit(db: &Arc<DbInner>, rt: &TableRuntime, stmts: &[Stmt]) -> Result<Option<Outcome>> {
    let layout = rt.layout.clone();
    let has_unique = layout.indexes.iter().any(|i| i.unique);
    // Without secondary indexes there is nothing to maintain: every mode is blind.
    let blind = layout.deferred() || layout.indexes.is_empty();
    let blind_ok = blind && !has_unique;
    // Resolve primary keys up front (also validates rows and key values).
    let mut pks = Vec::with_capacity(stmts.len());
    let mut needs_lock = false;
    for s in stmts {
        let pk = match s {
            Stmt::Insert(r) | Stmt::Replace(r) => {
                layout.schema.check_row(r)?;
                layout.pk_of(r)
            }
            Stmt::Delete(pk) => layout.pk_from_values(pk)?,
            Stmt::Update(pk, set) => {
                for (name, v) in set {
                    let f = &layout.schema.fields[set_position(&layout, name)?];
                    if !(if v.is_null() { f.nullable } else { f.ty.matches(v) }) {
                        return Err(Error::SchemaMismatch(format!(
                            "field '{name}' expects {}{}, got {v} ({})",
                            f.ty.name(),
                            if f.nullable { " or null" } else { "" },
                            v.type_name()
                        )));
                    }
                }
                layout.pk_from_values(pk)?
            }
        };
        needs_lock |= match s {
            Stmt::Insert(_) | Stmt::Update(..) => true,
            Stmt::Replace(_) | Stmt::Delete(_) => !blind_ok,
        };
        pks.push(pk);
    }
    let _pk_guards = rt.state.pk_locks.lock_all(
        pks.iter().map(|pk| LockStripes::stripe(layout.primary, pk)).collect(),
        needs_lock,
    );
    let mut cx = Ctx {
        db,
        rt,
        overlay: HashMap::new(),
        purge_later: Vec::new(),
        unique_guards: Vec::new(),
        held_unique: Vec::new(),
        blind_writes: 0,
        commit_purges: 0,
    };
    let mut batch = WriteBatch::new();
    let mut out = Outcome::default();
    let counters = &rt.state.counters;
    for (s, pk) in stmts.iter().zip(pks) {
        match s {
            Stmt::Insert(row) => {
                add(&counters.unique_check_reads, 1);
                if cx.read(&pk)?.is_some() {
                    let key = pk_values(&layout, row);
                    return Err(Error::Constraint(format!(
                        "duplicate primary key {} in table {:?}",
                        super::format_values(&key),
                        layout.name
                    )));
                }
                if !cx.check_unique(row, &pk)? {
                    return Ok(None);
                }
                let bytes = layout.encode(row)?;
                write_row(&layout, &mut batch, &pk, &bytes, row, None);
                cx.overlay.insert(pk, Some(row.clone()));
            }
            Stmt::Replace(row) => {
                if !cx.check_unique(row, &pk)? {
                    return Ok(None);
                }
                let bytes = layout.encode(row)?;
                if blind {
                    let old = cx.old_or_later(&pk)?;
                    write_row(&layout, &mut batch, &pk, &bytes, row, old.as_ref());
                } else {
                    add(&counters.hidden_reads, 1);
                    let old = cx.read(&pk)?;
                    write_row(&layout, &mut batch, &pk, &bytes, row, old.as_ref());
                }
                cx.overlay.insert(pk, Some(row.clone()));
            }
            Stmt::Delete(_) => {
                if blind {
                    let old = cx.old_or_later(&pk)?;
                    deferred::delete_row(&layout, &mut batch, &pk, old.as_deref());
                } else {
                    add(&counters.hidden_reads, 1);
                    if let Some(old) = cx.read(&pk)? {
                        eager::delete_row(&layout, &mut batch, &pk, &old);
                    }
                }
                cx.overlay.insert(pk, None);
            }
            Stmt::Update(_, set) => {
                add(&counters.update_reads, 1);
                let Some(old) = cx.read(&pk)? else {
                    out.updates_missed += 1;
                    continue;
                };
                let mut row = old.clone();
                for (name, v) in set {
                    let p = layout
                        .schema
                        .fields
                        .iter()
                        .position(|f| &f.name == name)
                        .ok_or_else(|| {
                            Error::SchemaMismatch(format!("table {:?} has no field {name:?}", layout.name))
                        })?;
                    if layout.pk.positions.contains(&p) {
                        return Err(Error::InvalidArgument(format!(
                            "UPDATE cannot change primary key field {name:?}; use DELETE and INSERT"
                        )));
                    }
                    row[p] = v.clone();
                }
                layout.schema.check_row(&row)?;
                if !cx.check_unique(&row, &pk)? {
                    return Ok(None);
                }
                let bytes = layout.encode(&row)?;
                write_row(&layout, &mut batch, &pk, &bytes, &row, Some(&old));
                cx.overlay.insert(pk, Some(row));
            }
        }
        out.statements += 1;
    }
    let seqs = batch.seq_count();
    let last = db.write(batch)?;
    // An empty batch writes nothing: `write` returns the visible seqno, not a write's.
    out.seq = if seqs == 0 { 0 } else { last };
    add(&counters.statements, out.statements);
    add(&counters.blind_writes, cx.blind_writes);
    add(&counters.commit_purges, cx.commit_purges);
    // The write is committed: the purge is best effort (deferred invariant 6), so nothing
    // after this point may turn the commit into an error.
    if !cx.purge_later.is_empty()
        && let Ok(tables) = super::layer::Tables::of(db)
    {
        tables.purge.submit(PurgeJob {
            table: layout.name.clone(),
            primary: layout.primary,
            state: rt.state.clone(),
            base: last + 1 - seqs,
            rows: std::mem::take(&mut cx.purge_later),
        });
    }
    Ok(Some(out))
}

/// The row position an UPDATE may set, or why it may not.
fn set_position(layout: &Layout, name: &str) -> Result<usize> {
    let p = layout
        .schema
        .fields
        .iter()
        .position(|f| f.name == name)
        .ok_or_else(|| Error::SchemaMismatch(format!("table {:?} has no field {name:?}", layout.name)))?;
    if layout.pk.positions.contains(&p) {
        return Err(Error::InvalidArgument(format!(
            "UPDATE cannot change primary key field {name:?}; use DELETE and INSERT"
        )));
    }
    Ok(p)
}

/// Writes a row whose old version (if any) is known, in the table's mode. Deferred
/// tables write every entry again, blind (deferred invariant 1), and so does every
/// version of a row with a delete key (invariant 12).
fn write_row(layout: &Layout, batch: &mut WriteBatch, pk: &[u8], bytes: &[u8], row: &[Value], old: Option<&Row>) {
    let rewrite_unchanged = layout.deferred() || layout.schema.delete_key.is_some();
    eager::put_row(
        layout,
        batch,
        pk,
        bytes,
        row,
        old.map(|r| r.as_slice()),
        rewrite_unchanged,
    );
}
