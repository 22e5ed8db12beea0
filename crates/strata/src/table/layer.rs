//! The table layer inside an open database: its catalog of tables, their state, the DDL
//! lock and the deferred machinery's shared parts. It plugs into the key-value engine
//! as its `db::Extension`; [`Db::open`] opens the engine with it.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};

use super::deferred::emit::PurgedVersions;
use super::deferred::purge::{self, PurgeQueue};
use super::deferred::urgency;
use super::state::{Catalog, TableState};
use crate::compaction::Obligations;
use crate::db::{Db, DbInner, Extension};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::version::Version;

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in directory `path`,
    /// recovering from the manifest and replaying the WAL, with its tables.
    ///
    /// One handle writes a directory at a time (its `LOCK`): opening one another handle
    /// holds is an [`Error::Io`] of kind `WouldBlock` naming the `LOCK`.
    ///
    /// ```
    /// use strata::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Db::open_with(path.as_ref(), opts, Arc::new(Tables::new()))
    }
}

/// What the table layer keeps for one open database.
pub(crate) struct Tables {
    /// Tables and the deferred registry, rebuilt from the catalog at every change.
    pub catalog: RwLock<Arc<Catalog>>,
    /// Per-table counters and locks, by table name (they outlive catalog rebuilds).
    pub states: Mutex<HashMap<String, Arc<TableState>>>,
    /// Table statements hold it shared; catalog changes of tables hold it exclusively.
    pub ddl: RwLock<()>,
    /// Deferred deletes emitted per secondary keyspace since open.
    pub emitted: Mutex<BTreeMap<u32, u64>>,
    /// Versions the purge thread cleaned (invariant 6 of `deferred`).
    pub purged: Arc<PurgedVersions>,
    /// Blind writes' old versions for the purge thread.
    pub purge: PurgeQueue,
    /// The index builds running, counted by (table, index) (a dropped index's build may
    /// still be failing while one under the same name runs): an index the catalog says is
    /// building with no build here was left by a build that failed and could not drop
    /// it (`build::abandoned`).
    pub builds: Mutex<HashMap<(String, String), usize>>,
}

impl Tables {
    fn new() -> Self {
        Tables {
            catalog: RwLock::new(Arc::new(Catalog::empty())),
            states: Mutex::new(HashMap::new()),
            ddl: RwLock::new(()),
            emitted: Mutex::new(BTreeMap::new()),
            purged: Arc::default(),
            purge: PurgeQueue::new(),
            builds: Mutex::default(),
        }
    }

    /// The table layer of `db`.
    pub fn of(db: &DbInner) -> Result<&Tables> {
        db.ext
            .as_any()
            .downcast_ref::<Tables>()
            .ok_or_else(|| Error::InvalidArgument("this database was opened without its tables".into()))
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().clone()
    }
}

impl Extension for Tables {
    fn catalog_changed(&self, version: &Version) -> Result<Arc<dyn Obligations>> {
        let c = Catalog::build(version, &self.states, &self.purged)?;
        let registry = c.registry.clone();
        *self.catalog.write() = Arc::new(c);
        Ok(registry)
    }

    fn start(&self, engine: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
        // An index still building was stopped by a crash or a kill (`build`): nothing
        // resumes it, and left building it would keep selects out and hold back every
        // write's unique check. Dropped; `create_index` makes it anew.
        let stale: Vec<(String, String, u32)> = self
            .catalog
            .read()
            .tables
            .iter()
            .flat_map(|(t, rt)| {
                rt.layout
                    .indexes
                    .iter()
                    .filter(|i| i.building)
                    .map(|i| (t.clone(), i.name.clone(), i.keyspace))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (table, index, keyspace) in stale {
            super::Table {
                db: engine.clone(),
                name: table.into(),
                route: None,
            }
            .drop_index_in(&index, Some(keyspace))?;
        }
        let db = engine.clone();
        let h = std::thread::Builder::new()
            .name("strata-purge".into())
            .spawn(move || purge::run(&db))
            .map_err(|e| Error::io(&engine.dir, e))?;
        Ok(vec![h])
    }

    fn stop(&self) {
        self.purge.wake();
    }

    fn urgent_keyspaces(&self) -> HashSet<u32> {
        urgency::urgent_keyspaces(&self.catalog.read())
    }

    fn any_urgent(&self) -> bool {
        urgency::any_urgent(&self.catalog.read())
    }

    fn settle(&self, engine: &DbInner) {
        self.purge.wait_drained(&engine.closed, 2 * purge::RETRY_FOR);
    }

    fn settled(&self) -> bool {
        self.purge.is_drained()
    }

    fn emitted(&self, counts: &BTreeMap<u32, u64>) {
        if counts.is_empty() {
            return;
        }
        let mut m = self.emitted.lock();
        for (k, n) in counts {
            *m.entry(*k).or_default() += n;
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use crate::table::schema::Schema;
    use crate::table::value::Value;
    use crate::test_gate::CATALOG_GATE;
    use crate::{Db, Options};

    /// A keyspace created while a table is: whichever publishes last, the catalog and
    /// the obligations hold the table (a stale publish lost it, and with it the index
    /// deletes of its dropped versions).
    #[test]
    fn concurrent_catalog_changes_publish_the_newest_version() -> crate::Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = std::sync::Arc::new(Db::open(dir.path(), Options::default())?);
        let other = db.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let creator = std::sync::Arc::new(parking_lot::Mutex::new(None));
        let slot = creator.clone();
        CATALOG_GATE.set(dir.path(), move || {
            // The keyspace's change has read its version: the table comes after it.
            *slot.lock() = Some(std::thread::spawn(move || {
                let r = other
                    .create_table(Schema::parse(
                        "table t (id u64, v u64) primary key (id) index by_v (v) deferred",
                    )?)
                    .map(|_| ());
                let _ = tx.send(());
                r
            }));
            // Serialised, the table waits for this change: give it the chance to pass.
            let _ = rx.recv_timeout(std::time::Duration::from_millis(300));
        });
        db.create_keyspace("x")?;
        let handle = creator.lock().take().expect("the gate ran");
        handle.join().expect("thread")?;
        let t = db.table("t")?;
        let primary = t.runtime()?.layout.primary;
        assert!(
            db.inner().obligations().owes(primary),
            "the table's primary owes index deletes"
        );
        t.insert(vec![Value::U64(1), Value::U64(10)])?;
        Ok(())
    }
}
