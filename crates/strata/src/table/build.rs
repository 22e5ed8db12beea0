//! Building a secondary index on a table that already has rows.
//!
//! 1. One catalog edit creates the index's keyspace, marked *building*, with its
//!    compactions paused. From then on every write maintains it, and (deferred mode)
//!    primary compactions send it deferred deletes.
//! 2. The rows visible at a snapshot taken after that edit are turned into index
//!    entries carrying each row version's own seqno, sorted within a memory bound, and
//!    written as the index's level-1 run. Level 1 is still empty (compactions are
//!    paused), and every entry written by concurrent statements is newer and sits in
//!    level 0, so the level order stays true.
//! 3. One edit installs those files and marks the index ready; compactions resume.
//!    It records the build snapshot's seqno: an older snapshot would miss the row
//!    versions overwritten before the build saw them, so selects at one are refused
//!    (`IndexEntry::readable_from`).
//!
//! The build knows its index by keyspace, not name: dropped during the build (and
//! perhaps made again under its name), it fails and touches nothing of the new one. A
//! build stopped by a crash leaves its index building; the next open drops it
//! (`layer::Tables::start`).

use super::Table;
use super::catalog::{IndexEntry, TABLE_META_PREFIX, TableDef, index_keyspace_name};
use super::schema::IndexDef;
use crate::compaction::OutputWriter;
use crate::compaction::sorter::ExternalSorter;
use crate::db::{Keyspace, Snapshot};
use crate::error::{Error, Result};
use crate::key::{ValueKind, internal_key};
use crate::version::VersionEdit;

/// Keeps a build listed in `Tables::builds` while it runs.
struct Running<'a> {
    tables: &'a super::layer::Tables,
    id: (String, String),
}

impl<'a> Running<'a> {
    /// Lists a build of index `index` of table `table`.
    fn start(tables: &'a super::layer::Tables, table: &str, index: &str) -> Running<'a> {
        let id = (table.to_string(), index.to_string());
        *tables.builds.lock().entry(id.clone()).or_default() += 1;
        Running { tables, id }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut builds = self.tables.builds.lock();
        if let Some(n) = builds.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                builds.remove(&self.id);
            }
        }
    }
}

/// The name of a unique index of `table` that the catalog says is building but no
/// build of this database runs: a build failed and so did its cleanup (a manifest
/// write). A write checking it would wait for it forever; a reopen drops it.
pub(crate) fn abandoned(table: &Table) -> Result<Option<String>> {
    // The registry first: a build is listed before the catalog says building and
    // unlisted after it says otherwise, so a catalog read under the lock agrees with it.
    let builds = table.tables()?.builds.lock();
    let rt = table.runtime()?;
    Ok(rt
        .layout
        .indexes
        .iter()
        .find(|ix| ix.unique && ix.building && !builds.contains_key(&(rt.layout.name.clone(), ix.name.clone())))
        .map(|ix| ix.name.clone()))
}

pub(crate) fn create_index(table: &Table, def: IndexDef) -> Result<()> {
    let db = table.db.clone();
    let _job = db.begin_job()?;
    let name = def.name.clone();
    super::refuse_reserved_index_name(&name)?;
    // Listed before the catalog says building, unlisted after it says otherwise.
    let _running = Running::start(table.tables()?, table.name(), &name);
    let keyspace = {
        let _ddl = table.tables()?.ddl.write();
        let rt = table.runtime()?;
        let layout = &rt.layout;
        if layout.indexes.iter().any(|i| i.name == name) {
            return Err(Error::AlreadyExists(format!(
                "index {name:?} of table {:?}",
                layout.name
            )));
        }
        let mut schema = layout.schema.clone();
        schema.indexes.push(def);
        let schema = schema.validated()?;
        let filter = super::layout::Layout::detached(&schema)?
            .index(&name)?
            .chosen_filter_key();
        let ks_name = index_keyspace_name(table.name(), &name);
        let meta_key = format!("{TABLE_META_PREFIX}{}", table.name());
        let mut entries: Vec<IndexEntry> = layout.index_entries();
        let primary = layout.primary;
        let ids = db.catalog_edit_with(&[ks_name.as_str()], &[], true, |ids| {
            entries.push(IndexEntry {
                name: name.clone(),
                keyspace: ids[0],
                building: true,
                readable_from: 0,
            });
            let def = TableDef {
                schema,
                primary,
                indexes: entries,
            };
            let mut meta = vec![(meta_key, Some(def.encode()))];
            meta.extend(super::filter_entries([(filter, ids[0])]));
            Ok(meta)
        })?;
        ids[0]
    };
    let r = fill_index(table, &name, keyspace);
    db.bg.lock().paused.remove(&keyspace);
    db.bg_cv.notify_all();
    if let Err(e) = r {
        // Leave no half-built index behind (this build's: the name may be another's now).
        let _ = table.drop_index_in(&name, Some(keyspace));
        return Err(e);
    }
    Ok(())
}

fn fill_index(table: &Table, name: &str, keyspace: u32) -> Result<()> {
    let db = table.db.clone();
    let rt = table.runtime()?;
    let layout = rt.layout.clone();
    let ix = layout.index(name)?.clone();
    let snapshot = Snapshot::new(db.clone());
    let primary = Keyspace::unnamed(db.clone(), layout.primary);
    let mut sorter = ExternalSorter::new(db.job_ctx.clone(), db.opts.deferred_sort_memory);
    let mut scan = snapshot.scan(&primary, ..)?;
    while let Some(entry) = scan.next_versioned() {
        let (pk, seq, bytes) = entry?;
        let row = layout.decode(&bytes)?;
        let key = layout.secondary_key(&ix, &row, &pk);
        if key.len() > crate::options::MAX_KEY_SIZE {
            // Every later write of the row would be refused for it (`WriteBatch`).
            return Err(Error::InvalidArgument(format!(
                "cannot build index {name:?}: the row with primary key {} makes an index key of {} bytes, over the limit of {}",
                super::format_values(&layout.pk.decode(&pk)?),
                key.len(),
                crate::options::MAX_KEY_SIZE
            )));
        }
        sorter.push(&internal_key(&key, seq, ValueKind::Put), &[])?;
    }
    // Level 1 is empty (compactions of the index are paused): the run is the level's
    // oldest whatever the mode, and the one run of a leveled level.
    let run = crate::compaction::picker::LEVELED_RUN;
    // The index keyspace's own kind of files, as its flushes and compactions write them.
    let ctx = db.job_ctx_for(&db.current())?.for_output(keyspace, 1);
    let mut out = OutputWriter::new(ctx, keyspace, 1, run, Vec::new());
    let mut stream = sorter.finish()?;
    let mut prev_ukey: Option<Vec<u8>> = None;
    while let Some((k, v)) = stream.next_entry()? {
        if ix.unique {
            // Entries come sorted by index key: a duplicate is next to its twin.
            let (ukey, _) = layout.split_secondary(&ix, crate::key::user_key(k))?;
            let has_null = ix.shape.decode(ukey)?.iter().any(|v| v.is_null());
            if !has_null && prev_ukey.as_deref() == Some(ukey) {
                return Err(Error::Constraint(format!(
                    "cannot build unique index {name:?}: existing rows share a key"
                )));
            }
            prev_ukey = Some(ukey.to_vec());
        }
        out.add(k, v)?;
    }
    let (files, _) = out.finish()?;
    #[cfg(test)]
    tests::FILL_GATE.pass(&db.dir);
    let _ddl = table.tables()?.ddl.write();
    // The table, and the index this build made (by its keyspace: dropped during the
    // build, its name may already be another build's), must still be there; if not,
    // the files would only leak.
    let rt = table.runtime().and_then(|rt| {
        if rt.layout.indexes.iter().any(|i| i.keyspace == keyspace) {
            Ok(rt)
        } else {
            Err(Error::NotFound(format!(
                "index {name:?} of table {:?} (dropped while it was being built)",
                table.name()
            )))
        }
    });
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            for f in &files {
                let _ = db
                    .opts
                    .fs
                    .remove(&db.dir.join(crate::sstable::sst_file_name(f.meta.number)));
            }
            return Err(e);
        }
    };
    let meta_key = format!("{TABLE_META_PREFIX}{}", table.name());
    let def = TableDef {
        schema: rt.layout.schema.clone(),
        primary: rt.layout.primary,
        indexes: rt
            .layout
            .indexes
            .iter()
            .map(|i| IndexEntry {
                name: i.name.clone(),
                keyspace: i.keyspace,
                building: i.building && i.keyspace != keyspace,
                readable_from: if i.keyspace == keyspace {
                    snapshot.seq()
                } else {
                    i.readable_from
                },
            })
            .collect(),
    };
    let edit = VersionEdit {
        new_files: files,
        meta: vec![(meta_key, Some(def.encode()))],
        ..Default::default()
    };
    // The writes up to the build's seqno must outlive a crash, or recovery could come
    // back below the seqno the catalog records and refuse every select of the index.
    db.sync_wal()?;
    db.install_edit(edit, None)?;
    db.catalog_changed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::schema::Schema;
    use crate::table::value::Value;
    use crate::test_gate::Gate;
    use crate::{Db, Options};

    /// After a build wrote its files, before it installs them.
    pub(super) static FILL_GATE: Gate = Gate::new();

    /// Marks every index of `t` building in the catalog, as a build stopped midway
    /// leaves it, with no build running.
    fn mark_building(db: &Db, t: &Table) -> Result<()> {
        let rt = t.runtime()?;
        let mut indexes = rt.layout.index_entries();
        for e in &mut indexes {
            e.building = true;
        }
        let def = TableDef {
            schema: rt.layout.schema.clone(),
            primary: rt.layout.primary,
            indexes,
        };
        db.set_meta(vec![(format!("{TABLE_META_PREFIX}{}", t.name()), Some(def.encode()))])
    }

    /// An index dropped while it is being built, and made again under its name: the
    /// first build fails and leaves the second index, complete, alone.
    #[test]
    fn a_build_whose_index_is_dropped_and_made_again_leaves_the_new_one_alone() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse("table t (id u64, u u64) primary key (id)")?)?;
        for i in 0..50 {
            t.insert(vec![Value::U64(i), Value::U64(i)])?;
        }
        let other = t.clone();
        FILL_GATE.set(dir.path(), move || {
            other.drop_index("by_u").expect("drop during the build");
            other
                .create_index(IndexDef::new("by_u", &["u"], true))
                .expect("made again");
        });
        let e = t
            .create_index(IndexDef::new("by_u", &["u"], true))
            .expect_err("dropped");
        assert!(
            matches!(&e, Error::NotFound(m) if m.contains("dropped while it was being built")),
            "{e}"
        );
        let ix = t.runtime()?.layout.index("by_u")?.clone();
        assert!(!ix.building);
        assert_eq!(t.select("by_u").count()?, 50);
        assert!(matches!(
            t.insert(vec![Value::U64(99), Value::U64(7)]),
            Err(Error::Constraint(_))
        ));
        Ok(())
    }

    /// A build stopped by a crash leaves its index marked building in the catalog: the
    /// next open drops it, so writes (held back by a building unique index) and selects
    /// go on, and the index can be made again.
    #[test]
    fn an_index_left_building_by_a_crash_is_dropped_at_open() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let schema = Schema::parse("table t (id u64, u u64) primary key (id) index by_u unique (u)")?;
        let row = |i: u64| vec![Value::U64(i), Value::U64(i)];
        {
            let db = Db::open(dir.path(), Options::default())?;
            let t = db.create_table(schema)?;
            for i in 0..10 {
                t.insert(row(i))?;
            }
            // The catalog as a crash in the middle of the index's build leaves it.
            mark_building(&db, &t)?;
            db.close()?;
        }
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.table("t")?;
        assert!(t.runtime()?.layout.indexes.is_empty(), "the stale build is dropped");
        assert!(matches!(t.select("by_u").rows(), Err(Error::NotFound(_))));
        t.insert(row(10))?;
        t.create_index(IndexDef::new("by_u", &["u"], true))?;
        assert_eq!(t.select("by_u").count()?, 11);
        assert!(matches!(
            t.insert(vec![Value::U64(11), Value::U64(3)]),
            Err(Error::Constraint(_))
        ));
        Ok(())
    }

    /// A unique index the catalog says is building while no build runs (a build that
    /// failed, and whose cleanup failed too): a write checking it fails, naming the
    /// index, instead of waiting for a build that will never finish.
    #[test]
    fn a_write_does_not_wait_for_an_abandoned_build() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse(
            "table t (id u64, u u64) primary key (id) index by_u unique (u)",
        )?)?;
        t.insert(vec![Value::U64(1), Value::U64(1)])?;
        mark_building(&db, &t)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = t.clone();
        std::thread::spawn(move || {
            let _ = tx.send(writer.insert(vec![Value::U64(2), Value::U64(2)]));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the write returns");
        assert!(matches!(&r, Err(Error::Background(m)) if m.contains("by_u")), "{r:?}");
        Ok(())
    }

    /// Two builds under one name (an index dropped while built, and made again): the
    /// first one ending does not unlist the second.
    #[test]
    fn builds_under_one_name_are_counted() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse("table t (id u64, u u64) primary key (id)")?)?;
        let tables = t.tables()?;
        let listed = || {
            tables
                .builds
                .lock()
                .contains_key(&("t".to_string(), "by_u".to_string()))
        };
        let first = Running::start(tables, "t", "by_u");
        let second = Running::start(tables, "t", "by_u");
        drop(first);
        assert!(listed(), "the second build still runs");
        drop(second);
        assert!(!listed());
        Ok(())
    }

    /// A snapshot older than an index's build would miss the row versions overwritten
    /// before the build saw them: selects through the index at it are refused, before
    /// and after a reopen, while the primary key still reads it and newer snapshots
    /// read the index.
    #[test]
    fn a_snapshot_older_than_the_build_cannot_read_the_index() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let row = |i: u64, u: u64| vec![Value::U64(i), Value::U64(u)];
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse("table t (id u64, u u64) primary key (id)")?)?;
        for i in 0..10 {
            t.insert(row(i, 100 + i))?;
        }
        let old = db.snapshot();
        t.replace(row(3, 7))?;
        t.create_index(IndexDef::new("by_u", &["u"], false))?;
        let Err(e) = t.select("by_u").eq(vec![Value::U64(103)]).at(&old).rows() else {
            panic!("the old snapshot is refused");
        };
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("built after this snapshot")),
            "{e}"
        );
        assert_eq!(t.select(crate::table::select::PRIMARY).at(&old).count()?, 10);
        let new = db.snapshot();
        let at_new: Vec<_> = t
            .select("by_u")
            .eq(vec![Value::U64(7)])
            .at(&new)
            .rows()?
            .collect::<Result<_>>()?;
        assert_eq!(at_new, vec![row(3, 7)]);
        drop((old, new));
        db.close()?;
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.table("t")?;
        let ix = t.runtime()?.layout.index("by_u")?.clone();
        assert!(ix.readable_from > 0, "kept by the catalog");
        assert_eq!(t.select("by_u").count()?, 10);
        Ok(())
    }

    /// A transaction retried while a unique index is being built counts its blind
    /// writes once, when it commits: before, each retry added them again, and the
    /// pending-purge estimate built from them grew with the wait.
    #[test]
    fn blind_writes_of_a_retried_transaction_count_once() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse(
            "table t (id u64, u u64) primary key (id) index by_id (id) deferred",
        )?)?;
        for i in 0..20 {
            t.insert(vec![Value::U64(i), Value::U64(i)])?;
        }
        let writer = t.clone();
        FILL_GATE.set(dir.path(), move || {
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut txn = writer.transaction();
                txn.delete(vec![Value::U64(1)]);
                txn.replace(vec![Value::U64(2), Value::U64(200)]);
                done_tx.send(txn.commit().map(|o| o.statements)).expect("send");
            });
            // The build holds the commit back (its index is unique and not ready).
            assert!(done_rx.recv_timeout(std::time::Duration::from_millis(50)).is_err());
            std::thread::spawn(move || assert_eq!(done_rx.recv().expect("commit").expect("committed"), 2));
        });
        t.create_index(IndexDef::new("by_u", &["u"], true))?;
        let s = (0..500)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                t.stats()
            })
            .find(|s| s.as_ref().is_ok_and(|s| s.statements == 22))
            .expect("the transaction commits after the build")?;
        assert_eq!(s.blind_writes, 2);
        Ok(())
    }

    /// An index whose key for an existing row would pass the key size limit is not
    /// built: every later write of that row would be refused for its index key.
    #[test]
    fn an_index_key_over_the_limit_fails_the_build_and_leaves_nothing() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let t = db.create_table(Schema::parse("table t (id u64, body str) primary key (id)")?)?;
        t.insert(vec![Value::U64(1), Value::from("short")])?;
        t.insert(vec![Value::U64(2), Value::from("x".repeat(100 << 10).as_str())])?;
        let e = t
            .create_index(IndexDef::new("by_body", &["body"], false))
            .expect_err("too long");
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("primary key (2)") && m.contains("over the limit")),
            "{e}"
        );
        assert!(t.runtime()?.layout.indexes.is_empty());
        t.delete(&[Value::U64(2)])?;
        assert_eq!(t.count()?, 1);
        Ok(())
    }
}
