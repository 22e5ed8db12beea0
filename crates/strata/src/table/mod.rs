//! Tables: rows with a primary key and secondary indexes, each index an LSM keyspace,
//! maintained eagerly (the classic hidden read) or deferred (blind writes; deletes sent
//! to the secondary indexes by primary flushes and compactions; reads validated).
//!
//! Which operations read, per mode:
//!
//! | statement | eager | deferred |
//! |---|---|---|
//! | INSERT | reads the primary key (uniqueness) | same |
//! | REPLACE | hidden read of the old row | blind |
//! | DELETE by primary key | hidden read of the old row | blind |
//! | UPDATE | reads the old row | same (and deletes changed entries) |
//! | any write to a unique index | reads the unique index (validated) | same |
//!
//! ```
//! use strata::table::{schema::Schema, value::Value};
//! use std::ops::Bound;
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
//! let schema = Schema::parse(
//!     "table users (id u64, name str, age i64) primary key (id) index by_age (age) deferred",
//! ).unwrap();
//! let users = db.create_table(schema).unwrap();
//! users.replace(vec![Value::U64(1), Value::from("ann"), Value::I64(31)]).unwrap();
//! users.replace(vec![Value::U64(2), Value::from("bob"), Value::I64(25)]).unwrap();
//! users.replace(vec![Value::U64(1), Value::from("ann"), Value::I64(32)]).unwrap(); // blind
//! let over_30: Vec<_> = users
//!     .select("by_age")
//!     .range(Bound::Excluded(Value::I64(30)), Bound::Unbounded)
//!     .rows().unwrap()
//!     .collect::<Result<_, _>>().unwrap();
//! assert_eq!(over_30, vec![vec![Value::U64(1), Value::from("ann"), Value::I64(32)]]);
//! ```

pub mod build;
pub mod catalog;
pub mod check;
mod deferred;
mod delete_where;
mod eager;
pub mod encoding;
mod ingest;
pub(crate) mod layer;
pub mod layout;
mod locks;
pub mod partitioned;
pub mod schema;
pub mod select;
pub(crate) mod state;
pub mod txn;
pub mod value;
pub mod writer;

use std::sync::Arc;

use crate::db::{Db, DbInner};
use crate::error::{Error, Result};
use catalog::{IndexEntry, TABLE_META_PREFIX, TableDef, index_keyspace_name, primary_keyspace_name};
use layer::Tables;
use schema::{IndexDef, IndexMaintenance, Schema};
pub use select::{Rows, Select};
use state::{TableRuntime, get};
pub use txn::{Outcome, Transaction};
use value::Value;

/// A row: one value per schema field, in schema order.
pub type Row = Vec<Value>;

pub(crate) fn format_values(vals: &[Value]) -> String {
    let parts: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
    format!("({})", parts.join(", "))
}

/// A handle on a table. Cheap to clone; always works against the current catalog.
#[derive(Clone)]
pub struct Table {
    pub(crate) db: Arc<DbInner>,
    // Shared: every select of a partitioned table clones its partitions' handles.
    name: Arc<str>,
    /// Set on a partition's table handed out by a partitioned table: its writes and
    /// ingests are checked to route to that partition.
    route: Option<Arc<partitioned::Route>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("name", &self.name).finish()
    }
}

/// Counters of one secondary index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexStats {
    /// Index name.
    pub name: String,
    /// Unique index.
    pub unique: bool,
    /// Entries in its SSTables (puts and tombstones); its memtable share is not counted.
    pub entries: u64,
    /// Bytes in its SSTables.
    pub bytes: u64,
    /// Deferred deletes sent to it since open.
    pub deferred_deletes_emitted: u64,
    /// Selects through it since open.
    pub reads: u64,
    /// Rows it returned since open.
    pub hits: u64,
    /// Dirty entries skipped since open.
    pub dirty_hits_skipped: u64,
}

/// Counters of one table since the database was opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableStats {
    /// Table name.
    pub name: String,
    /// Maintenance mode.
    pub mode: String,
    /// Old-row reads done only for index maintenance (eager REPLACE/DELETE).
    pub hidden_reads: u64,
    /// Uniqueness-check reads (INSERT, unique indexes).
    pub unique_check_reads: u64,
    /// Old-row reads by UPDATE.
    pub update_reads: u64,
    /// Statements committed.
    pub statements: u64,
    /// Deferred deletes emitted into all its indexes.
    pub deferred_deletes_emitted: u64,
    /// Dirty hits skipped over all its indexes.
    pub dirty_hits_skipped: u64,
    /// Primary lookups made by secondary selects.
    pub primary_lookups: u64,
    /// Primary lookups per row returned by secondary selects.
    pub primary_lookups_per_secondary_hit: f64,
    /// Entries of the primary index's SSTables.
    pub primary_entries: u64,
    /// Blind REPLACE/DELETE statements since open (deferred mode).
    pub blind_writes: u64,
    /// Blind writes whose old row was still in a memtable: its changed secondary
    /// entries were deleted at commit, leaving nothing dirty.
    pub commit_purges: u64,
    /// Blind writes whose old row was on disk, purged from the secondary indexes by the
    /// purge thread shortly after commit (while the indexes were being read).
    pub background_purges: u64,
    /// Blind writes the purge thread had to give up (queue full, an old snapshot held
    /// past its patience): compaction purges them.
    pub purges_dropped: u64,
    /// Row versions awaiting cleanup from the secondary indexes: blind writes not yet
    /// matched by deferred deletes (an upper bound: a blind write of an absent row
    /// leaves nothing to clean).
    pub pending_purges_estimate: u64,
    /// Age of the oldest pending purge (an unsettled primary file's or a secondary
    /// file's oldest deferred-delete time), in microseconds of the database clock.
    pub oldest_pending_purge_age_micros: Option<u64>,
    /// Per secondary index.
    pub indexes: Vec<IndexStats>,
}

impl std::fmt::Display for TableStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "table {} ({} maintenance)", self.name, self.mode)?;
        writeln!(f, "  statements            {}", self.statements)?;
        writeln!(f, "  hidden reads          {}", self.hidden_reads)?;
        writeln!(f, "  unique-check reads    {}", self.unique_check_reads)?;
        writeln!(f, "  update reads          {}", self.update_reads)?;
        writeln!(f, "  deferred deletes      {}", self.deferred_deletes_emitted)?;
        writeln!(f, "  dirty hits skipped    {}", self.dirty_hits_skipped)?;
        writeln!(f, "  blind writes          {}", self.blind_writes)?;
        writeln!(f, "  purged at commit      {}", self.commit_purges)?;
        writeln!(f, "  purged in background  {}", self.background_purges)?;
        writeln!(f, "  purges dropped        {}", self.purges_dropped)?;
        writeln!(f, "  pending purges (est.) {}", self.pending_purges_estimate)?;
        if let Some(a) = self.oldest_pending_purge_age_micros {
            writeln!(f, "  oldest pending purge  {:.3} s", a as f64 / 1e6)?;
        }
        writeln!(
            f,
            "  primary lookups       {} ({:.3} per secondary hit)",
            self.primary_lookups, self.primary_lookups_per_secondary_hit
        )?;
        write!(f, "  primary entries       {}", self.primary_entries)?;
        for i in &self.indexes {
            write!(
                f,
                "\n  index {}{}: {} entries, {} bytes, {} deferred deletes, {} reads, {} hits, {} dirty skipped",
                i.name,
                if i.unique { " (unique)" } else { "" },
                i.entries,
                i.bytes,
                i.deferred_deletes_emitted,
                i.reads,
                i.hits,
                i.dirty_hits_skipped
            )?;
        }
        Ok(())
    }
}

/// The manifest entries setting index keyspaces' filters (`IndexLayout::chosen_filter_key`),
/// written in the edit that creates them.
pub(crate) fn filter_entries(
    filters: impl IntoIterator<Item = (crate::sstable::FilterKey, u32)>,
) -> impl Iterator<Item = (String, Option<Vec<u8>>)> {
    filters
        .into_iter()
        .filter_map(|(key, ks)| crate::db::filter_key::encode(key).map(|v| (crate::db::filter_key::name(ks), Some(v))))
}

impl Db {
    /// Creates a table (its keyspaces and catalog entry in one durable edit).
    pub fn create_table(&self, schema: Schema) -> Result<Table> {
        // A schema built or changed in code, not parsed: checked before it is durable,
        // since the catalog refuses to load a bad one (and the open with it).
        let schema = schema.validated()?;
        for ix in &schema.indexes {
            refuse_reserved_index_name(&ix.name)?;
        }
        let inner = self.inner();
        let _ddl = Tables::of(inner)?.ddl.write();
        let name = schema.name.clone();
        let key = format!("{TABLE_META_PREFIX}{name}");
        if inner.current().version.meta.contains_key(&key) {
            return Err(Error::AlreadyExists(format!("table {name:?}")));
        }
        let mut ks_names = vec![primary_keyspace_name(&name)];
        ks_names.extend(schema.indexes.iter().map(|i| index_keyspace_name(&name, &i.name)));
        let refs: Vec<&str> = ks_names.iter().map(String::as_str).collect();
        let filters: Vec<_> = layout::Layout::detached(&schema)?
            .indexes
            .iter()
            .map(layout::IndexLayout::chosen_filter_key)
            .collect();
        inner.catalog_edit_with(&refs, &[], false, |ids| {
            let def = TableDef {
                primary: ids[0],
                indexes: schema
                    .indexes
                    .iter()
                    .zip(&ids[1..])
                    .map(|(ix, ks)| IndexEntry {
                        name: ix.name.clone(),
                        keyspace: *ks,
                        building: false,
                        readable_from: 0,
                    })
                    .collect(),
                schema,
            };
            let mut entries = vec![(key, Some(def.encode()))];
            entries.extend(filter_entries(filters.iter().copied().zip(ids[1..].iter().copied())));
            if def.schema.delete_key.is_some() {
                entries.push(delete_where::config_entry(ids[0], crate::delete_key::TileChoice::Auto));
            }
            Ok(entries)
        })?;
        Ok(Table {
            db: inner.clone(),
            name: name.into(),
            route: None,
        })
    }

    /// Opens a table by name.
    pub fn table(&self, name: &str) -> Result<Table> {
        let inner = self.inner();
        if !Tables::of(inner)?.catalog.read().tables.contains_key(name) {
            return Err(Error::NotFound(format!("table {name:?}")));
        }
        Ok(Table {
            db: inner.clone(),
            name: name.into(),
            route: None,
        })
    }

    /// Names of all tables.
    pub fn list_tables(&self) -> Vec<String> {
        Tables::of(self.inner()).map_or_else(|_| Vec::new(), |t| t.catalog().tables.keys().cloned().collect())
    }

    /// Drops a table and its indexes; their files are deleted once unused, and pending
    /// deferred deletes for them are cancelled.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let inner = self.inner();
        let _ddl = Tables::of(inner)?.ddl.write();
        let rt = runtime_of(inner, name)?;
        let mut drop = vec![rt.layout.primary];
        drop.extend(rt.layout.indexes.iter().map(|i| i.keyspace));
        inner.catalog_edit(&[], &drop, vec![(format!("{TABLE_META_PREFIX}{name}"), None)])?;
        Ok(())
    }

    /// Verifies every table (see [`check::check`]).
    pub fn check(&self, opts: check::CheckOptions) -> Result<check::CheckReport> {
        check::check(self, opts)
    }
}

/// `select("primary")` reads the primary key, so an index of that name could never be
/// read. Checked when an index is created (not when a catalog is loaded, so that a
/// database made before the check still opens).
pub(crate) fn refuse_reserved_index_name(name: &str) -> Result<()> {
    if name.eq_ignore_ascii_case(select::PRIMARY) {
        return Err(Error::InvalidArgument(format!(
            "index name {name:?} is reserved: select(\"{}\") reads the primary key",
            select::PRIMARY
        )));
    }
    Ok(())
}

fn runtime_of(inner: &DbInner, name: &str) -> Result<TableRuntime> {
    Tables::of(inner)?
        .catalog
        .read()
        .tables
        .get(name)
        .cloned()
        .ok_or_else(|| Error::NotFound(format!("table {name:?}")))
}

impl Table {
    /// The table layer of the table's database.
    pub(crate) fn tables(&self) -> Result<&Tables> {
        Tables::of(&self.db)
    }

    pub(crate) fn runtime(&self) -> Result<TableRuntime> {
        self.db.check_open()?;
        runtime_of(&self.db, &self.name)
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's current schema.
    pub fn schema(&self) -> Result<Schema> {
        Ok(self.runtime()?.layout.schema.clone())
    }

    /// A new transaction on this table.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// This handle, as partition `index` of `router`'s table.
    pub(crate) fn routed(&self, router: partitioned::Router, index: usize) -> Table {
        Table {
            route: Some(Arc::new(partitioned::Route::new(router, index))),
            ..self.clone()
        }
    }

    /// Where this handle's rows must route, for a partition's table.
    pub(crate) fn route(&self) -> Option<&partitioned::Route> {
        self.route.as_deref()
    }

    /// Inserts a row; `Error::Constraint` if the primary key (or a unique key) exists.
    pub fn insert(&self, row: Row) -> Result<()> {
        let mut t = self.transaction();
        t.insert(row);
        t.commit().map(|_| ())
    }

    /// Inserts or overwrites the row with the same primary key.
    pub fn replace(&self, row: Row) -> Result<()> {
        let mut t = self.transaction();
        t.replace(row);
        t.commit().map(|_| ())
    }

    /// Deletes the row with primary key `pk` (no error if absent).
    pub fn delete(&self, pk: &[Value]) -> Result<()> {
        let mut t = self.transaction();
        t.delete(pk.to_vec());
        t.commit().map(|_| ())
    }

    /// Sets fields of the row with primary key `pk`; returns false if there is none.
    pub fn update(&self, pk: &[Value], set: &[(&str, Value)]) -> Result<bool> {
        let mut t = self.transaction();
        t.update(
            pk.to_vec(),
            set.iter().map(|(n, v)| (n.to_string(), v.clone())).collect(),
        );
        Ok(t.commit()?.updates_missed == 0)
    }

    /// The row with primary key `pk`.
    pub fn get(&self, pk: &[Value]) -> Result<Option<Row>> {
        let rt = self.runtime()?;
        let key = rt.layout.pk_from_values(pk)?;
        match self.db.get_latest(rt.layout.primary, &key)? {
            Some((_, bytes)) => Ok(Some(rt.layout.decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// A query through `index` (a secondary index name, or [`select::PRIMARY`]).
    pub fn select(&self, index: &str) -> Select {
        Select::new(self.clone(), index)
    }

    /// Number of rows (a scan of the primary index).
    pub fn count(&self) -> Result<u64> {
        self.select(select::PRIMARY).count()
    }

    /// Adds a secondary index, building it from the existing rows.
    ///
    /// The index cannot be read at snapshots taken before its build: such selects
    /// return [`Error::InvalidArgument`] (the primary key still reads them).
    pub fn create_index(&self, def: IndexDef) -> Result<()> {
        if self.route.is_some() {
            partitioned::local_index(&def, self.name())?;
        }
        build::create_index(self, def)
    }

    /// Drops a secondary index and its pending deferred deletes.
    pub fn drop_index(&self, name: &str) -> Result<()> {
        self.drop_index_in(name, None)
    }

    /// [`drop_index`](Self::drop_index) of the index `name` only while its keyspace is
    /// `keyspace` (when given; else nothing is dropped): a failed or stale build drops
    /// its own index, not another made under the same name since.
    pub(crate) fn drop_index_in(&self, name: &str, keyspace: Option<u32>) -> Result<()> {
        let _ddl = self.tables()?.ddl.write();
        let rt = self.runtime()?;
        let ix = rt.layout.index(name)?.clone();
        if keyspace.is_some_and(|k| k != ix.keyspace) {
            return Ok(());
        }
        let mut schema = rt.layout.schema.clone();
        let pos = schema
            .indexes
            .iter()
            .position(|i| i.name == name)
            .ok_or_else(|| Error::NotFound(name.to_string()))?;
        schema.indexes.remove(pos);
        let def = TableDef {
            schema,
            primary: rt.layout.primary,
            indexes: rt
                .layout
                .index_entries()
                .into_iter()
                .filter(|i| i.name != name)
                .collect(),
        };
        self.db.catalog_edit(
            &[],
            &[ix.keyspace],
            vec![(format!("{TABLE_META_PREFIX}{}", self.name), Some(def.encode()))],
        )?;
        Ok(())
    }

    /// Counters and index sizes.
    pub fn stats(&self) -> Result<TableStats> {
        let rt = self.runtime()?;
        let c = &rt.state.counters;
        let tables = self.tables()?;
        let emitted = tables.emitted.lock().clone();
        let sv = self.db.current();
        let entries_of = |ks: u32| -> (u64, u64) {
            sv.version.keyspace(ks).map_or((0, 0), |k| {
                (
                    k.files().map(|f| f.meta.entries).sum(),
                    k.files().map(|f| f.meta.size).sum(),
                )
            })
        };
        let mut s = TableStats {
            name: self.name.to_string(),
            mode: match rt.layout.schema.maintenance {
                IndexMaintenance::Eager => "eager".into(),
                IndexMaintenance::Deferred => "deferred".into(),
            },
            hidden_reads: get(&c.hidden_reads),
            unique_check_reads: get(&c.unique_check_reads),
            update_reads: get(&c.update_reads),
            statements: get(&c.statements),
            blind_writes: get(&c.blind_writes),
            commit_purges: get(&c.commit_purges),
            background_purges: get(&c.background_purges),
            purges_dropped: get(&c.purges_dropped),
            primary_lookups: get(&c.primary_lookups),
            primary_entries: entries_of(rt.layout.primary).0,
            ..Default::default()
        };
        let mut hits = 0;
        for (ix, ic) in rt.layout.indexes.iter().zip(rt.index_counters.iter()) {
            let (entries, bytes) = entries_of(ix.keyspace);
            let is = IndexStats {
                name: ix.name.clone(),
                unique: ix.unique,
                entries,
                bytes,
                deferred_deletes_emitted: emitted.get(&ix.keyspace).copied().unwrap_or(0),
                reads: get(&ic.reads),
                hits: get(&ic.hits),
                dirty_hits_skipped: get(&ic.dirty),
            };
            hits += is.hits;
            s.deferred_deletes_emitted += is.deferred_deletes_emitted;
            s.dirty_hits_skipped += is.dirty_hits_skipped;
            s.indexes.push(is);
        }
        if rt.layout.deferred() && !rt.layout.indexes.is_empty() {
            let per_version = s.deferred_deletes_emitted / rt.layout.indexes.len() as u64;
            let spared = tables.purged.spared(rt.layout.primary);
            s.pending_purges_estimate = s.blind_writes.saturating_sub(per_version + spared);
            let now = self.db.opts.clock.now_micros();
            let mut oldest: Option<u64> = None;
            let mut note = |t: Option<u64>| {
                if let Some(t) = t {
                    oldest = Some(oldest.map_or(t, |o| o.min(t)));
                }
            };
            if let Some(tree) = sv.version.keyspace(rt.layout.primary) {
                let last = tree.last_level();
                for (li, level) in tree.levels.iter().enumerate() {
                    if li < last || level.runs.len() > 1 {
                        level.files().for_each(|f| note(f.meta.oldest_tombstone_time));
                    }
                }
            }
            for ix in &rt.layout.indexes {
                if let Some(tree) = sv.version.keyspace(ix.keyspace) {
                    tree.files().for_each(|f| note(f.meta.oldest_tombstone_time));
                }
            }
            s.oldest_pending_purge_age_micros = oldest.map(|t| now.saturating_sub(t));
        }
        s.primary_lookups_per_secondary_hit = if hits == 0 {
            0.0
        } else {
            s.primary_lookups as f64 / hits as f64
        };
        Ok(s)
    }
}
