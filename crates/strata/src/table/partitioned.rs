//! Partitioned tables: a table split by a hash of its encoded primary key into N
//! partitions, each a whole [`Db`] of its own (the directory layout, descriptor and
//! [`HashFn`] of [`crate::partition`]), so each partition could live on its own disk or
//! machine.
//!
//! Invariant: a row and all its secondary index entries live in partition
//! `hash(encoded primary key) mod N` (local secondary indexes, as Cassandra and TiDB keep
//! them). So index maintenance, eager or deferred, never crosses partitions; a point
//! statement touches one partition; a select through an index is scatter-gathered, one
//! select per partition merged in index order (ties by primary key). Atomicity and
//! snapshots are per partition.
//!
//! Every partition holds every table with the same schema: [`PartitionedDb::create_table`]
//! applies the DDL to each, and opening refuses a directory where they differ. Unique
//! secondary indexes are refused: a local index cannot see the other partitions' keys.
//!
//! A handle may serve some of the partitions only ([`PartitionedDb::open_serving`], a
//! node of a multi-machine deployment): rows route over all N as ever, statements reach
//! the served partitions only (another node's row is refused, not written here), and
//! selects merge the served partitions' rows.
//!
//! ```
//! use strata::table::{schema::Schema, value::Value};
//! use strata::PartitionedDb;
//! let dir = tempfile::tempdir().unwrap();
//! let db = PartitionedDb::open(dir.path(), 4, strata::Options::default()).unwrap();
//! let users = db
//!     .create_table(Schema::parse("table users (id u64, age i64) primary key (id) index by_age (age)").unwrap())
//!     .unwrap();
//! for id in 0..20u64 {
//!     users.insert(vec![Value::U64(id), Value::I64(id as i64 % 5)]).unwrap();
//! }
//! // Rows with age 3 come from several partitions, merged in index order.
//! let ids: Vec<_> = users
//!     .select("by_age")
//!     .eq(vec![Value::I64(3)])
//!     .rows()
//!     .unwrap()
//!     .map(|r| r.unwrap()[0].clone())
//!     .collect();
//! assert_eq!(ids, [3u64, 8, 13, 18].map(Value::U64));
//! let p = users.partition_of_pk(&[Value::U64(7)]).unwrap();
//! assert!(db.partition(p).unwrap().table("users").unwrap().get(&[Value::U64(7)]).unwrap().is_some());
//! db.close().unwrap();
//! ```

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::layout::Layout;
use super::schema::Schema;
use super::select::{Plan, Query, Rows, count_row, query_builder};
use super::value::Value;
use super::writer::TableFiles;
use super::{Row, Table, TableStats};
use crate::db::{Db, IngestOptions, IngestReport};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::Options;
use crate::partition::{self, HashFn, MergedScan, check_count};

/// N databases in one directory holding partitioned tables, or some of them (a serving
/// node's, [`open_serving`](Self::open_serving)). See the [module docs](self).
#[derive(Debug)]
pub struct PartitionedDb {
    dir: PathBuf,
    hash: HashFn,
    /// Partition `i`'s database at index `i`; `None` for a partition this handle does
    /// not serve. At least one is open.
    dbs: Vec<Option<Db>>,
}

impl PartitionedDb {
    /// Opens (creating, when `opts.create_if_missing`) the partitioned directory `dir`
    /// with `count` partitions. A count of 0 or over
    /// [`MAX_PARTITIONS`](crate::partition::MAX_PARTITIONS), or one that differs from the
    /// directory's, is `InvalidArgument` and creates nothing.
    pub fn open(dir: impl AsRef<Path>, count: usize, opts: Options) -> Result<PartitionedDb> {
        check_count(count)?;
        Self::open_with(dir.as_ref(), Some(count), None, opts)
    }

    /// Opens an existing partitioned directory with the count it records.
    pub fn open_existing(dir: impl AsRef<Path>, opts: Options) -> Result<PartitionedDb> {
        Self::open_with(dir.as_ref(), None, None, opts)
    }

    /// Opens only partitions `serve` of the directory `dir` of `count` partitions
    /// (created as [`open`](Self::open) creates, with only those partitions' databases):
    /// what a serving node of a multi-machine deployment holds. Rows still route over
    /// all `count` partitions; a statement whose row routes to a partition not served
    /// here, or an ingest into one, is `InvalidArgument`, and a select reads the served
    /// partitions (a router in front merges the nodes' streams). An empty `serve`, or a
    /// partition `>= count`, is `InvalidArgument` and creates nothing. A node's directory
    /// holds its partitions only, so opening it whole ([`open`](Self::open),
    /// [`open_existing`](Self::open_existing)) is refused, naming the partitions it
    /// lacks.
    ///
    /// ```
    /// use strata::table::{schema::Schema, value::Value};
    /// use strata::PartitionedDb;
    /// let dir = tempfile::tempdir().unwrap();
    /// let schema = Schema::parse("table t (id u64, v u64) primary key (id) index by_v (v)").unwrap();
    /// let node = PartitionedDb::open_serving(dir.path(), 4, &[1, 3], strata::Options::default()).unwrap();
    /// let t = node.create_table(schema).unwrap();
    /// for id in 0..20u64 {
    ///     let p = t.partition_of_pk(&[Value::U64(id)]).unwrap();
    ///     let r = t.insert(vec![Value::U64(id), Value::U64(0)]);
    ///     // Rows of partitions 0 and 2 belong to another node.
    ///     assert_eq!(r.is_ok(), p == 1 || p == 3);
    /// }
    /// assert_eq!(node.serves(), vec![1, 3]);
    /// node.close().unwrap();
    /// assert!(PartitionedDb::open_existing(dir.path(), strata::Options::default()).is_err());
    /// ```
    pub fn open_serving(dir: impl AsRef<Path>, count: usize, serve: &[usize], opts: Options) -> Result<PartitionedDb> {
        check_count(count)?;
        Self::open_with(dir.as_ref(), Some(count), Some(serve), opts)
    }

    /// [`open_serving`](Self::open_serving) of an existing directory, with the count it
    /// records.
    pub fn open_existing_serving(dir: impl AsRef<Path>, serve: &[usize], opts: Options) -> Result<PartitionedDb> {
        Self::open_with(dir.as_ref(), None, Some(serve), opts)
    }

    fn open_with(dir: &Path, count: Option<usize>, serve: Option<&[usize]>, opts: Options) -> Result<PartitionedDb> {
        let (hash, dbs) = partition::open_layout(dir, count, serve, &opts)?;
        Self::checked(PartitionedDb {
            dir: dir.to_path_buf(),
            hash,
            dbs,
        })
    }

    /// Refuses a directory whose partitions disagree on a table.
    fn checked(db: PartitionedDb) -> Result<PartitionedDb> {
        let mut names: Vec<String> = db.served().flat_map(|(_, d)| d.list_tables()).collect();
        names.sort();
        names.dedup();
        for name in names {
            if let Err(e) = db.tables_named(&name) {
                // Close what was opened; the disagreement is the error to report.
                let _ = db.close();
                return Err(e);
            }
        }
        Ok(db)
    }

    /// The open partitions with their numbers, in order.
    fn served(&self) -> impl Iterator<Item = (usize, &Db)> {
        self.dbs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i, d)))
    }

    /// Number of partitions (served here or not: rows route over all of them).
    pub fn count(&self) -> usize {
        self.dbs.len()
    }

    /// The partitions this handle serves: all of them unless opened with
    /// [`open_serving`](Self::open_serving).
    pub fn serves(&self) -> Vec<usize> {
        served_indexes(&self.dbs)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The database of partition `i` (`InvalidArgument` when `i >= count()` or the
    /// partition is not served here). Its tables are the partition's alone, unchecked:
    /// write rows through [`PartitionedTable`] (or its
    /// [`partition`](PartitionedTable::partition) handle), which route them.
    pub fn partition(&self, i: usize) -> Result<&Db> {
        served_at(&self.dbs, i)
    }

    /// Creates `schema`'s table in every partition served. A unique secondary index is
    /// refused (see the module docs); so is a name taken in any partition. A create that
    /// fails in one partition drops the table again from the partitions before it. One
    /// interrupted part-way (a crash) leaves the table in some partitions only, which
    /// [`open`](Self::open) then refuses; drop it from those through
    /// [`Partitions`](crate::partition::Partitions) and create it again.
    pub fn create_table(&self, schema: Schema) -> Result<PartitionedTable> {
        let schema = schema.validated()?;
        check_local_indexes(&schema)?;
        if let Some((i, _)) = self.served().find(|(_, db)| db.table(&schema.name).is_ok()) {
            return Err(Error::AlreadyExists(format!(
                "table {:?} (in partition {i})",
                schema.name
            )));
        }
        let router = Router::with_hash(&schema, self.count(), self.hash)?;
        let mut tables = Vec::with_capacity(self.count());
        for db in &self.dbs {
            match db.as_ref().map(|db| db.create_table(schema.clone())).transpose() {
                Ok(t) => tables.push(t),
                Err(e) => {
                    // Best effort: a partition that cannot drop it either is left as a
                    // crash would leave it (see above); the first error is the one to report.
                    for db in self.dbs.iter().take(tables.len()).flatten() {
                        let _ = db.drop_table(&schema.name);
                    }
                    return Err(e);
                }
            }
        }
        PartitionedTable::new(router, tables)
    }

    /// The table `name`, which every partition holds with the same schema.
    pub fn table(&self, name: &str) -> Result<PartitionedTable> {
        let (tables, schema) = self.tables_named(name)?;
        let router = Router::with_hash(&schema, self.count(), self.hash)?;
        PartitionedTable::new(router, tables)
    }

    /// Table `name` of each served partition (`None` where not served), checked to
    /// agree, and its schema.
    fn tables_named(&self, name: &str) -> Result<(Vec<Option<Table>>, Schema)> {
        let mut tables = Vec::with_capacity(self.count());
        let mut first: Option<(usize, Schema)> = None;
        for (i, db) in self.dbs.iter().enumerate() {
            let Some(db) = db else {
                tables.push(None);
                continue;
            };
            let t = db.table(name).map_err(|e| {
                // Held by a partition before this one, or else by one after it.
                let holder = first.as_ref().map(|(f, _)| *f).or_else(|| {
                    self.served()
                        .skip_while(|(j, _)| *j <= i)
                        .find(|(_, d)| d.table(name).is_ok())
                        .map(|(j, _)| j)
                });
                match (e, holder) {
                    (Error::NotFound(_), Some(f)) => Error::SchemaMismatch(format!(
                        "table {name:?} exists in partition {f} but not in partition {i} of {}: every \
                         partition must hold it (an interrupted create_table?)",
                        self.path().display()
                    )),
                    (e, _) => e,
                }
            })?;
            let s = t.schema()?;
            match &first {
                None => first = Some((i, s)),
                Some((f, fs)) if *fs != s => {
                    return Err(Error::SchemaMismatch(format!(
                        "table {name:?} is `{fs}` in partition {f} but `{s}` in partition {i} of {}",
                        self.path().display()
                    )));
                }
                Some(_) => {}
            }
            tables.push(Some(t));
        }
        // A handle serves at least one partition (`open_layout`).
        let (_, schema) = first.ok_or_else(|| Error::NotFound(name.to_string()))?;
        Ok((tables, schema))
    }

    /// Names of the tables.
    pub fn list_tables(&self) -> Vec<String> {
        self.served().next().map(|(_, db)| db.list_tables()).unwrap_or_default()
    }

    /// Flushes every served partition's memtable, the partitions in parallel.
    pub fn flush(&self) -> Result<()> {
        let dbs: Vec<&Db> = self.served().map(|(_, db)| db).collect();
        partition::each_in_parallel(&dbs, Db::flush)
    }

    /// Closes every served partition; the first error is returned after all were
    /// closed.
    pub fn close(self) -> Result<()> {
        partition::close_all(self.dbs.into_iter().flatten())
    }
}

/// Entry `i` of a per-partition list (`None` where the partition is not served).
fn served_at<T>(parts: &[Option<T>], i: usize) -> Result<&T> {
    match parts.get(i) {
        Some(Some(t)) => Ok(t),
        Some(None) => Err(Error::InvalidArgument(format!(
            "partition {i} of {} is not served by this handle (it serves {:?}): its rows \
             belong to another node",
            parts.len(),
            served_indexes(parts)
        ))),
        None => Err(partition::out_of_range(i, parts.len())),
    }
}

/// The partitions a per-partition list serves.
fn served_indexes<T>(parts: &[Option<T>]) -> Vec<usize> {
    parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.as_ref().map(|_| i))
        .collect()
}

/// Routes a table's rows to partitions without a database: what [`PartitionedTable`]
/// does for each statement, for clients that split rows themselves (one
/// [`TableWriter`](super::writer::TableWriter) per partition).
///
/// ```
/// use strata::table::{partitioned::Router, schema::Schema, value::Value};
/// let schema = Schema::parse("table t (id u64, v str) primary key (id)").unwrap();
/// let router = Router::new(&schema, 4).unwrap();
/// let p = router.partition_of_pk(&[Value::U64(42)]).unwrap();
/// assert!(p < 4);
/// assert_eq!(router.partition_of_row(&[Value::U64(42), Value::from("x")]).unwrap(), p);
/// assert!(router.partition_of_pk(&[Value::from("not a u64")]).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Router {
    /// Shared: a router, and the table holding it, is cloned for every select.
    layout: Arc<Layout>,
    hash: HashFn,
    count: usize,
}

impl Router {
    /// A router of `schema`'s rows over `count` partitions by the default hash.
    pub fn new(schema: &Schema, count: usize) -> Result<Router> {
        Self::with_hash(schema, count, HashFn::Fnv1aFmix64)
    }

    fn with_hash(schema: &Schema, count: usize, hash: HashFn) -> Result<Router> {
        check_count(count)?;
        Ok(Router {
            layout: Arc::new(Layout::detached(&schema.clone().validated()?)?),
            hash,
            count,
        })
    }

    /// Number of partitions.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The partition of the row with primary key `pk` (one value per key field).
    pub fn partition_of_pk(&self, pk: &[Value]) -> Result<usize> {
        let key = self.layout.pk_from_values(pk)?;
        Ok(self.hash.partition(&key, self.count))
    }

    /// The partition of `row` (checked against the schema).
    pub fn partition_of_row(&self, row: &[Value]) -> Result<usize> {
        self.layout.schema.check_row(row)?;
        Ok(self.hash.partition(&self.layout.pk_of(row), self.count))
    }
}

/// Refuses `schema` for a partitioned table if it has a unique index: a partitioned
/// table's indexes are local to each partition, so a unique one could not check its key
/// across partitions.
pub fn check_local_indexes(schema: &Schema) -> Result<()> {
    schema.indexes.iter().try_for_each(|ix| local_index(ix, &schema.name))
}

/// [`check_local_indexes`] for one index of table `table`.
pub(crate) fn local_index(def: &super::schema::IndexDef, table: &str) -> Result<()> {
    if def.unique {
        return Err(Error::InvalidArgument(format!(
            "unique index {:?} of table {table:?}: a partitioned table's indexes are local to each \
             partition and cannot check uniqueness across partitions",
            def.name
        )));
    }
    Ok(())
}

/// What a partition's table handle ([`PartitionedTable::partition`]) knows of its
/// place: partition `index` of its router's. A statement or an ingest through it whose
/// rows route elsewhere is refused: the partitioned table would look for them in their
/// own partition and find them missing, or twice.
#[derive(Debug)]
pub(crate) struct Route {
    router: Router,
    index: usize,
}

impl Route {
    pub(crate) fn new(router: Router, index: usize) -> Route {
        Route { router, index }
    }

    fn here(&self, p: usize, what: impl FnOnce() -> String) -> Result<()> {
        if p == self.index {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{} belongs to partition {p} of {}, not to partition {} whose table this is: write it \
             through the partitioned table",
            what(),
            self.router.count,
            self.index
        )))
    }

    /// The row routes to this partition.
    pub(crate) fn check_row(&self, row: &[Value]) -> Result<()> {
        self.here(self.router.partition_of_row(row)?, || {
            let pk: Vec<Value> = (self.router.layout.pk.positions.iter())
                .filter_map(|&i| row.get(i).cloned())
                .collect();
            format!("the row with primary key {}", super::format_values(&pk))
        })
    }

    /// The primary key routes to this partition.
    pub(crate) fn check_pk(&self, pk: &[Value]) -> Result<()> {
        self.here(self.router.partition_of_pk(pk)?, || {
            format!("primary key {}", super::format_values(pk))
        })
    }

    /// Files a [`TableWriter`](super::writer::TableWriter) wrote are for this
    /// partition: by their descriptor, or else by reading every primary key.
    pub(crate) fn check_files(&self, files: &TableFiles, dir: &Path) -> Result<()> {
        let (partition, n, hash) = (self.index, self.router.count, self.router.hash);
        match files.partition {
            Some(p) if (p.index, p.count, p.hash) != (partition, n, hash) => Err(Error::InvalidArgument(format!(
                "{}: the files were written for partition {} of {} ({:?}), not partition {partition} of {n} \
                 ({hash:?})",
                dir.display(),
                p.index,
                p.count,
                p.hash,
            ))),
            Some(_) => Ok(()),
            None => {
                let path = dir.join(&files.primary.0);
                match super::ingest::first_key_routed_elsewhere(&path, hash, n, partition)? {
                    Some(at) => Err(Error::InvalidArgument(format!(
                        "{}: entry {at} has the primary key of another partition than {partition} of {n}",
                        path.display()
                    ))),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One table over every partition: statements go to the row's partition, selects
/// merge every partition's. Over a handle that serves some partitions
/// ([`PartitionedDb::open_serving`]), statements reach the served ones only and selects
/// merge theirs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PartitionedTable {
    router: Router,
    /// Partition `i`'s table at index `i`; `None` where not served. At least one is
    /// served. The statements here route their rows themselves.
    tables: Arc<[Option<Table>]>,
    /// The same tables, each checking that what it is given routes to it
    /// ([`partition`](Self::partition)).
    handles: Arc<[Option<Table>]>,
}

impl PartitionedTable {
    fn new(router: Router, tables: Vec<Option<Table>>) -> Result<PartitionedTable> {
        if tables.iter().all(Option::is_none) {
            return Err(Error::InvalidArgument("no partition is served".into()));
        }
        let handles = (tables.iter().enumerate())
            .map(|(i, t)| t.as_ref().map(|t| t.routed(router.clone(), i)))
            .collect();
        Ok(PartitionedTable {
            router,
            tables: tables.into(),
            handles,
        })
    }

    /// A served partition's table, for what every partition shares (name, schema).
    fn any(&self) -> Result<&Table> {
        self.served()
            .next()
            .ok_or_else(|| Error::InvalidArgument("no partition is served".into()))
    }

    /// The served partitions' tables, in partition order.
    fn served(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().flatten()
    }

    /// Number of partitions (served here or not: rows route over all of them).
    pub fn count(&self) -> usize {
        self.tables.len()
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        self.any().map_or("", Table::name)
    }

    /// The table's schema.
    pub fn schema(&self) -> Result<Schema> {
        self.any()?.schema()
    }

    /// The table in partition `i` (`InvalidArgument` when `i >= count()` or the
    /// partition is not served here), for a transaction on one partition. It refuses
    /// rows whose primary key routes to another partition, files written for another,
    /// and unique indexes.
    pub fn partition(&self, i: usize) -> Result<&Table> {
        served_at(&self.handles, i)
    }

    /// The partitions served (see [`PartitionedDb::serves`]).
    pub fn serves(&self) -> Vec<usize> {
        served_indexes(&self.tables)
    }

    /// The router of the table's rows.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The partition of the row with primary key `pk` (one value per key field).
    pub fn partition_of_pk(&self, pk: &[Value]) -> Result<usize> {
        self.router.partition_of_pk(pk)
    }

    /// The partition of `row` (checked against the schema).
    pub fn partition_of_row(&self, row: &[Value]) -> Result<usize> {
        self.router.partition_of_row(row)
    }

    // Routed here: the partitions' own tables, which do not route again.
    fn by_row(&self, row: &[Value]) -> Result<&Table> {
        served_at(&self.tables, self.partition_of_row(row)?)
    }

    fn by_pk(&self, pk: &[Value]) -> Result<&Table> {
        served_at(&self.tables, self.partition_of_pk(pk)?)
    }

    /// Inserts a row; `Error::Constraint` if its primary key exists.
    pub fn insert(&self, row: Row) -> Result<()> {
        self.by_row(&row)?.insert(row)
    }

    /// Inserts or overwrites the row with the same primary key.
    pub fn replace(&self, row: Row) -> Result<()> {
        self.by_row(&row)?.replace(row)
    }

    /// Sets fields of the row with primary key `pk`; false if there is none.
    pub fn update(&self, pk: &[Value], set: &[(&str, Value)]) -> Result<bool> {
        self.by_pk(pk)?.update(pk, set)
    }

    /// Deletes the row with primary key `pk` (no error if absent).
    pub fn delete(&self, pk: &[Value]) -> Result<()> {
        self.by_pk(pk)?.delete(pk)
    }

    /// The row with primary key `pk`.
    pub fn get(&self, pk: &[Value]) -> Result<Option<Row>> {
        self.by_pk(pk)?.get(pk)
    }

    /// A query through `index` (a secondary index, or
    /// [`select::PRIMARY`](super::select::PRIMARY)) over every partition.
    pub fn select(&self, index: &str) -> PartitionedSelect {
        PartitionedSelect {
            table: self.clone(),
            index: index.to_string(),
            q: Query::default(),
        }
    }

    /// Installs files a [`TableWriter`](super::writer::TableWriter) wrote for partition
    /// `partition` (see [`Table::ingest`]). Files whose descriptor records another
    /// partition or count are refused; files written without one are read through to
    /// check that every primary key routes to `partition`. Nothing changes on refusal.
    pub fn ingest(&self, partition: usize, dir: impl AsRef<Path>, opts: IngestOptions) -> Result<IngestReport> {
        // The partition's handle checks the files (`Route::check_files`).
        self.partition(partition)?.ingest(dir, opts)
    }

    /// Counters and index sizes summed over the partitions (ratios recomputed, the
    /// oldest pending purge the oldest of any partition).
    pub fn stats(&self) -> Result<TableStats> {
        let mut sum = TableStats::default();
        for t in self.served() {
            add_stats(&mut sum, t.stats()?);
        }
        let hits: u64 = sum.indexes.iter().map(|i| i.hits).sum();
        sum.primary_lookups_per_secondary_hit = if hits == 0 {
            0.0
        } else {
            sum.primary_lookups as f64 / hits as f64
        };
        Ok(sum)
    }
}

fn add_stats(sum: &mut TableStats, s: TableStats) {
    sum.name = s.name;
    sum.mode = s.mode;
    sum.hidden_reads += s.hidden_reads;
    sum.unique_check_reads += s.unique_check_reads;
    sum.update_reads += s.update_reads;
    sum.statements += s.statements;
    sum.deferred_deletes_emitted += s.deferred_deletes_emitted;
    sum.dirty_hits_skipped += s.dirty_hits_skipped;
    sum.primary_lookups += s.primary_lookups;
    sum.primary_entries += s.primary_entries;
    sum.blind_writes += s.blind_writes;
    sum.commit_purges += s.commit_purges;
    sum.background_purges += s.background_purges;
    sum.purges_dropped += s.purges_dropped;
    sum.pending_purges_estimate += s.pending_purges_estimate;
    sum.oldest_pending_purge_age_micros = sum
        .oldest_pending_purge_age_micros
        .max(s.oldest_pending_purge_age_micros);
    for ix in s.indexes {
        match sum.indexes.iter_mut().find(|i| i.name == ix.name) {
            Some(i) => {
                i.entries += ix.entries;
                i.bytes += ix.bytes;
                i.deferred_deletes_emitted += ix.deferred_deletes_emitted;
                i.reads += ix.reads;
                i.hits += ix.hits;
                i.dirty_hits_skipped += ix.dirty_hits_skipped;
            }
            None => sum.indexes.push(ix),
        }
    }
}

/// A query over every partition under construction, as [`super::Select`]:
/// `table.select("by_age").eq(..).range(..).reverse().limit(..).rows()`.
#[derive(Debug)]
pub struct PartitionedSelect {
    table: PartitionedTable,
    index: String,
    q: Query,
}

impl PartitionedSelect {
    query_builder!();

    /// The matching rows of every partition served, merged lazily in index order (ties by
    /// primary key): each partition's scan is read one entry ahead, and a row is read
    /// (a secondary index's entry checked against it) only when the merge takes its
    /// entry. A limit stops every partition early, no partition's look-ahead costs a
    /// primary lookup, and memory stays one entry per partition.
    pub fn rows(self) -> Result<PartitionedRows> {
        // One plan for all: the partitions' layouts agree (checked at open; a partition
        // a concurrent schema change has reached already gets its own).
        let mut plan: Option<Plan> = None;
        let mut sources = Vec::with_capacity(self.table.tables.len());
        for t in self.table.served() {
            let rt = t.runtime()?;
            let own;
            let p = match &plan {
                Some(p) if p.fits(&rt.layout) => p,
                Some(_) => {
                    own = Plan::new(&rt.layout, &self.index, &self.q)?;
                    &own
                }
                None => plan.insert(Plan::new(&rt.layout, &self.index, &self.q)?),
            };
            sources.push(Entries(Box::new(Rows::open(t.clone(), rt, p, None)?)));
        }
        let merge = if self.q.reverse {
            MergedScan::descending(sources)
        } else {
            MergedScan::ascending(sources)
        };
        Ok(PartitionedRows {
            merge,
            left: self.q.limit,
        })
    }
}

/// A partition's scan entries keyed for the merge (index fields ++ primary key, the
/// index order), each with the seqno of its version and its value, not yet checked
/// against its row. Boxed: the merge's vector of sources then stays small (a request
/// of 1 KiB or more makes glibc's malloc consolidate its fast bins, measured at 4
/// partitions as a few hundred instructions a select).
struct Entries(Box<Rows>);

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, (SeqNo, Vec<u8>))>;

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.0.next_entry().transpose()?;
        Some(entry.map(|(key, seq, value)| (key, (seq, value))))
    }
}

/// Streamed rows of a [`PartitionedSelect`].
pub struct PartitionedRows {
    merge: MergedScan<Entries, (SeqNo, Vec<u8>)>,
    /// Rows left to yield; `Some(0)` after the last or an error.
    left: Option<u64>,
}

impl std::fmt::Debug for PartitionedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedRows").field("left", &self.left).finish()
    }
}

impl PartitionedRows {
    /// The next live row the merge yields: each entry is resolved against its
    /// partition's row as the merge takes it, and a dirty one passed over.
    fn step(&mut self) -> Result<Option<Row>> {
        while let Some(r) = self
            .merge
            .next_with(|src, key, (seq, value)| src.0.resolve(&key, seq, &value))
        {
            if let Some(row) = r.and_then(std::convert::identity)? {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}

impl Iterator for PartitionedRows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == Some(0) {
            return None;
        }
        let r = self.step();
        count_row(&mut self.left, r)
    }
}
