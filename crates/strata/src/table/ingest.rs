//! `Table::ingest`: installing a [`TableWriter`](super::writer::TableWriter)'s files,
//! the primary and every index, in one manifest edit (`db::ingest` below does the
//! placement, seqno and atomicity).
//!
//! Before anything changes it checks that the files were built for this table's shape
//! (fields, primary key, indexes; the name and maintenance mode may differ, since the
//! entries are the same), that each holds one entry per row and the checksum the
//! descriptor records (the digest), and insert semantics: no ingested primary key may exist in the
//! table already (an eager index would keep the old row's entries), and no unique key
//! may be held by a live row. Those checks read the table key by key only where it has
//! entries in a file's key range.
//!
//! The files are copied (or linked) and checked without the table's DDL lock, so
//! statements go on meanwhile; the lock is taken exclusively once they are in the
//! directory and held through the checks against the table and the install, so no
//! statement runs between the two. A DDL that changed the table while the files were
//! copied makes the ingest refuse them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Table;
use super::layout::{IndexLayout, Layout};
use super::schema::Schema;
use super::value::Value;
use super::writer::TableFiles;
use crate::db::{CheckedFile, IngestOptions, IngestReport, Keyspace};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::sstable::{Fill, SstReader};

impl Table {
    /// Installs the files a [`TableWriter`](super::writer::TableWriter) wrote to `dir`
    /// into this table, atomically (all files in one manifest edit, one seqno), with
    /// insert semantics: a row whose primary key exists already is an
    /// [`Error::Constraint`]; files built for another shape of table are an
    /// [`Error::SchemaMismatch`]. Either way nothing changes. See the module docs of
    /// `table::ingest` and `db::ingest`.
    pub fn ingest(&self, dir: impl AsRef<Path>, opts: IngestOptions) -> Result<IngestReport> {
        let files = TableFiles::open(dir.as_ref())?;
        if let Some(route) = self.route() {
            route.check_files(&files, dir.as_ref())?;
        }
        let ddl = &self.tables()?.ddl;
        let rt = self.runtime()?;
        let layout = &rt.layout;
        same_shape(
            &layout.schema,
            &files.schema,
            &dir.as_ref().join(super::writer::DESCRIPTOR),
        )?;
        if let Some(ix) = layout.indexes.iter().find(|i| i.building) {
            return Err(Error::InvalidArgument(format!(
                "index {:?} of table {:?} is being built: ingest after it is ready",
                ix.name, layout.name
            )));
        }
        let paths = files.files();
        let mut items: Vec<(u32, PathBuf)> = vec![(layout.primary, paths[0].1.clone())];
        for (ix, (_, path, _, _)) in layout.indexes.iter().zip(&paths[1..]) {
            items.push((ix.keyspace, path.clone()));
        }
        let expected: Vec<(String, u64, u64)> = paths.iter().map(|(w, _, n, c)| (w.clone(), *n, *c)).collect();
        let rows = files.rows;
        let files_dir = dir.as_ref();
        let db = self.db.clone();
        let primary = layout.primary;
        let table = layout.name.clone();
        let keyspaces: Vec<u32> = items.iter().map(|(ks, _)| *ks).collect();
        // The DDL lock, taken by `check` once the files are in, held through the install.
        let held = std::cell::RefCell::new(None);
        let check = |infos: &[CheckedFile]| -> Result<()> {
            *held.borrow_mut() = Some(ddl.write());
            let layout = self.runtime()?.layout;
            same_shape(
                &layout.schema,
                &files.schema,
                &files_dir.join(super::writer::DESCRIPTOR),
            )?;
            let now_keyspaces: Vec<u32> = std::iter::once(layout.primary)
                .chain(layout.indexes.iter().map(|i| i.keyspace))
                .collect();
            if now_keyspaces != keyspaces || layout.indexes.iter().any(|i| i.building) {
                return Err(Error::SchemaMismatch(format!(
                    "table {table:?} changed (an index created or dropped) while {} was copied in: ingest again",
                    files_dir.display()
                )));
            }
            for (CheckedFile { info, .. }, (what, entries, crc)) in infos.iter().zip(&expected) {
                if info.entries != *entries || info.entries != rows || info.digest != *crc || info.deletes > 0 {
                    return Err(Error::InvalidArgument(format!(
                        "{}: the {what} file holds {} entries with digest {:016x}; the descriptor says {entries} \
                         ({rows} rows) with {crc:016x}: the files are not one table writer's output",
                        info.path.display(),
                        info.entries,
                        info.digest
                    )));
                }
            }
            let Some(pfile) = infos.first() else {
                return Ok(());
            };
            refuse_existing_rows(&db, primary, pfile, &table)?;
            for f in infos.iter().skip(1) {
                if let Some(ix) = layout.indexes.iter().find(|i| i.unique && i.keyspace == f.keyspace) {
                    refuse_unique_duplicates(&db, &layout, ix, f)?;
                }
            }
            Ok(())
        };
        let report = self.db.ingest(items, &opts, &check);
        drop(held);
        report
    }
}

/// The same fields, primary key, indexes (by name, fields and uniqueness) and delete
/// key (rows carry a copy of it: deferred invariant 10); the error names the files'
/// `descriptor`.
fn same_shape(table: &Schema, files: &Schema, descriptor: &Path) -> Result<()> {
    let shape = |s: &Schema| {
        let fields: Vec<String> = s
            .fields
            .iter()
            .map(|f| format!("{} {}{}", f.name, f.ty, if f.nullable { " null" } else { "" }))
            .collect();
        let indexes: Vec<String> = s
            .indexes
            .iter()
            .map(|i| format!("{} {} ({})", i.name, i.unique, i.fields.join(", ")))
            .collect();
        (fields, s.primary_key.clone(), indexes, s.delete_key.clone())
    };
    if shape(table) != shape(files) {
        return Err(Error::SchemaMismatch(format!(
            "{}: the files were built for `{files}`, the table is `{table}`",
            descriptor.display()
        )));
    }
    Ok(())
}

/// A live key of keyspace `ks` in `range`, at the current moment.
fn has_live_key(
    db: &Arc<crate::db::DbInner>,
    ks: u32,
    range: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
) -> Result<bool> {
    let keyspace = Keyspace::unnamed(db.clone(), ks);
    let mut scan = keyspace.scan(range)?;
    Ok(scan.next().transpose()?.is_some())
}

/// Insert semantics: refuses the ingest if a primary key of the file exists in the table.
/// Reads the table key by key only when it has rows in the file's range.
fn refuse_existing_rows(db: &Arc<crate::db::DbInner>, primary: u32, file: &CheckedFile, table: &str) -> Result<()> {
    let info = &file.info;
    let span = (
        std::ops::Bound::Included(info.smallest.clone()),
        std::ops::Bound::Included(info.largest.clone()),
    );
    if !has_live_key(db, primary, span)? {
        return Ok(());
    }
    let keyspace = Keyspace::unnamed(db.clone(), primary);
    let reader = Arc::new(SstReader::open(db.opts.fs.open(&file.staged)?, 0, None)?);
    let mut it = reader.iter_with(Fill::Bypass);
    it.seek_to_first()?;
    while it.valid() {
        let pk = user_key(it.key());
        if keyspace.get(pk)?.is_some() {
            return Err(Error::Constraint(format!(
                "table {table:?} already has a row with a primary key in {}: ingest inserts, it does not replace",
                info.path.display()
            )));
        }
        it.next()?;
    }
    Ok(())
}

/// Insert semantics for a unique index: refuses the ingest if a live row of the table
/// holds the key of an entry of the file (NULLs aside). Reads key by key only when the
/// index has entries in the file's range; entries are validated against their rows (a
/// deferred index may hold stale ones).
fn refuse_unique_duplicates(
    db: &Arc<crate::db::DbInner>,
    layout: &Layout,
    ix: &IndexLayout,
    file: &CheckedFile,
) -> Result<()> {
    let info = &file.info;
    // Entries are the unique key followed by the primary key: a row holding a file
    // entry's unique key may sort outside the file's entries, so the span checked runs
    // over whole unique keys, from the first entry's to past the last one's.
    let (first, _) = layout.split_secondary(ix, &info.smallest)?;
    let (last, _) = layout.split_secondary(ix, &info.largest)?;
    let span = (
        std::ops::Bound::Included(first.to_vec()),
        super::encoding::prefix_successor(last).map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
    );
    if !has_live_key(db, ix.keyspace, span)? {
        return Ok(());
    }
    let index = Keyspace::unnamed(db.clone(), ix.keyspace);
    let primary = Keyspace::unnamed(db.clone(), layout.primary);
    let reader = Arc::new(SstReader::open(db.opts.fs.open(&file.staged)?, 0, None)?);
    let mut it = reader.iter_with(Fill::Bypass);
    it.seek_to_first()?;
    while it.valid() {
        let (ukey, _) = layout.split_secondary(ix, user_key(it.key()))?;
        let values = ix.shape.decode(ukey)?;
        if !values.iter().any(Value::is_null) {
            let hi = super::encoding::prefix_successor(ukey);
            let scan = match &hi {
                Some(hi) => index.scan(ukey..hi.as_slice())?,
                None => index.scan(ukey..)?,
            };
            for item in scan {
                let (key, _) = item?;
                let (_, other_pk) = layout.split_secondary(ix, &key)?;
                if let Some(bytes) = primary.get(other_pk)? {
                    let mut k = Vec::new();
                    ix.shape.encode_row_key(&layout.decode(&bytes)?, &mut k);
                    if k == ukey {
                        return Err(Error::Constraint(format!(
                            "unique index {:?} of table {:?} already holds the key {} of an ingested row",
                            ix.name,
                            layout.name,
                            super::format_values(&values)
                        )));
                    }
                }
            }
        }
        it.next()?;
    }
    Ok(())
}

/// The position of the first entry of the primary file `path` whose key does not route
/// to partition `index` of `count` by `hash`, reading the whole file.
pub(crate) fn first_key_routed_elsewhere(
    path: &Path,
    hash: crate::partition::HashFn,
    count: usize,
    index: usize,
) -> Result<Option<u64>> {
    use crate::fs::FileSystem;
    let reader = Arc::new(SstReader::open(crate::fs::RealFs.open(path)?, 0, None)?);
    let mut it = reader.iter_with(Fill::Bypass);
    it.seek_to_first()?;
    let mut at = 0u64;
    while it.valid() {
        if hash.partition(user_key(it.key()), count) != index {
            return Ok(Some(at));
        }
        at += 1;
        it.next()?;
    }
    Ok(None)
}
