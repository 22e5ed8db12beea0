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

use super::Table;
use super::catalog::{IndexEntry, TABLE_META_PREFIX, TableDef, index_keyspace_name};
use super::schema::IndexDef;
use crate::compaction::OutputWriter;
use crate::compaction::sorter::ExternalSorter;
use crate::db::{Keyspace, Snapshot};
use crate::error::{Error, Result};
use crate::key::{ValueKind, internal_key};
use crate::version::VersionEdit;

pub(crate) fn create_index(table: &Table, def: IndexDef) -> Result<()> {
    let db = table.db.clone();
    let name = def.name.clone();
    super::refuse_reserved_index_name(&name)?;
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
        // Leave no half-built index behind.
        let _ = table.drop_index(&name);
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
    let _ddl = table.tables()?.ddl.write();
    let rt = match table.runtime() {
        Ok(rt) => rt,
        Err(e) => {
            // The table went away during the build: its files would only leak.
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
                building: i.building && i.name != name,
            })
            .collect(),
    };
    let edit = VersionEdit {
        new_files: files,
        meta: vec![(meta_key, Some(def.encode()))],
        ..Default::default()
    };
    db.install_edit(edit, None)?;
    db.catalog_changed()
}
