//! Secondary range deletes on tables: a table's delete key and [`Table::delete_where`]
//! (`docs/design/deletes.md`). A table's delete key is its primary keyspace's engine
//! delete key over the row codec's copy of the field; the invariants that make deletes
//! by it safe beside the secondary indexes are 10 to 13 of `table::deferred`.

use std::ops::{Bound, RangeBounds};

use super::Table;
use super::catalog::{TABLE_META_PREFIX, TableDef};
use super::encoding::{ROW_DELETE_KEY, delete_key_bytes, delete_key_range};
use super::layout::Layout;
use super::select::PRIMARY;
use super::value::Value;
use crate::batch::WriteBatch;
use crate::delete_key::{DeleteConfig, TileChoice, config_name, config_of};
use crate::error::{Error, Result};

/// The manifest entry that gives primary keyspace `primary` the rows' delete key.
pub(crate) fn config_entry(primary: u32, h: TileChoice) -> (String, Option<Vec<u8>>) {
    let c = DeleteConfig { key: ROW_DELETE_KEY, h };
    (config_name(primary), Some(c.encode()))
}

/// The catalog entry of `layout`'s table with `schema` instead of its own.
fn def_with(layout: &Layout, schema: super::schema::Schema) -> TableDef {
    TableDef {
        schema,
        primary: layout.primary,
        indexes: layout.index_entries(),
    }
}

/// One end of a delete-key range as the encoded 8 bytes of the first value it admits
/// (`None`: past the largest value).
fn first_admitted(field: &str, ty: super::schema::FieldType, b: Bound<&Value>, upper: bool) -> Result<Option<[u8; 8]>> {
    let enc = |v: &Value| -> Result<[u8; 8]> {
        match delete_key_bytes(v) {
            Some(k) if ty.matches(v) => Ok(k),
            _ => Err(Error::InvalidArgument(format!(
                "delete key '{field}' is {}, the range gives {v} ({})",
                ty.name(),
                v.type_name()
            ))),
        }
    };
    let next = |k: [u8; 8]| u64::from_be_bytes(k).checked_add(1).map(u64::to_be_bytes);
    Ok(match (b, upper) {
        (Bound::Unbounded, false) => Some([0; 8]),
        (Bound::Unbounded, true) => None,
        (Bound::Included(v), false) | (Bound::Excluded(v), true) => Some(enc(v)?),
        (Bound::Excluded(v), false) | (Bound::Included(v), true) => next(enc(v)?),
    })
}

impl Table {
    /// Declares `field` (a non-nullable `u64` or `i64`) the table's delete key, with
    /// delete tiles of `h` pages in its primary index, or changes `h` when `field` is the
    /// delete key already. A new delete key needs an empty table: rows written before
    /// would not carry it (`delete key (field)` in the schema declares it at creation).
    /// Once declared it does not change to another field.
    ///
    /// ```
    /// use strata::delete_key::TileChoice;
    /// use strata::table::{schema::Schema, value::Value};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    /// let orders = db
    ///     .create_table(Schema::parse("table orders (id u64, ts u64) primary key (id)").unwrap())
    ///     .unwrap();
    /// orders.set_delete_key("ts", TileChoice::Fixed(8)).unwrap();
    /// orders.replace(vec![Value::U64(1), Value::U64(10)]).unwrap();
    /// orders.replace(vec![Value::U64(2), Value::U64(99)]).unwrap();
    /// orders.delete_where("ts", ..Value::U64(50)).unwrap();
    /// assert_eq!(orders.get(&[Value::U64(1)]).unwrap(), None);
    /// assert_eq!(orders.count().unwrap(), 1);
    /// assert!(orders.set_delete_key("id", TileChoice::Auto).is_err(), "ts is the key");
    /// ```
    pub fn set_delete_key(&self, field: &str, h: TileChoice) -> Result<()> {
        if let TileChoice::Fixed(h) = h {
            TileChoice::fixed(h)?;
        }
        let _ddl = self.tables()?.ddl.write();
        let rt = self.runtime()?;
        let layout = &rt.layout;
        let config = config_entry(layout.primary, h);
        if layout.schema.delete_key.as_deref() == Some(field) {
            self.db.catalog_edit(&[], &[], vec![config])?;
            return Ok(());
        }
        if let Some(old) = &layout.schema.delete_key {
            // Versions written under the old key (deleted rows, killed ones) stay on disk
            // until compacted away, carrying a copy of the old field that rows of the new
            // schema must not: flushes and compactions could no longer decode them.
            return Err(Error::InvalidArgument(format!(
                "table {:?} has the delete key {old:?}: it cannot change to {field:?}",
                self.name()
            )));
        }
        let mut schema = layout.schema.clone();
        schema.delete_key = Some(field.to_string());
        let schema = schema.validated()?;
        if self.select(PRIMARY).limit(1).count()? > 0 {
            return Err(Error::InvalidArgument(format!(
                "table {:?} has rows: a new delete key needs an empty table (rows written \
                 before would not carry it); declare it at creation with `delete key ({field})`",
                self.name()
            )));
        }
        let entry = (
            format!("{TABLE_META_PREFIX}{}", self.name()),
            Some(def_with(layout, schema).encode()),
        );
        self.db.catalog_edit(&[], &[], vec![entry, config])?;
        Ok(())
    }

    /// The delete key field and its primary index's tile size, if the table has one.
    pub fn delete_key(&self) -> Result<Option<(String, TileChoice)>> {
        let rt = self.runtime()?;
        let Some(field) = rt.layout.schema.delete_key.clone() else {
            return Ok(None);
        };
        let h = config_of(&self.db.current().version.meta, rt.layout.primary)?.map_or(TileChoice::Auto, |c| c.h);
        Ok(Some((field, h)))
    }

    /// Deletes every row whose delete key `field` lies in `range`: one logged, atomic
    /// write that hides the rows from every read at once, through the primary key and
    /// every secondary index (snapshots taken before still see them). Whole delete-tile
    /// pages of a table without secondary indexes are dropped unread at once; the rest
    /// is made physical by compactions, which also delete the rows' index entries
    /// (invariants 10 to 13 of `table::deferred`). See [`Table::set_delete_key`].
    ///
    /// Errors ([`Error::InvalidArgument`], nothing changed): `field` is not the delete
    /// key, a bound of another type than the field's, an empty range.
    pub fn delete_where(&self, field: &str, range: impl RangeBounds<Value>) -> Result<()> {
        let _ddl = self.tables()?.ddl.write();
        let rt = self.runtime()?;
        let schema = &rt.layout.schema;
        let Some(f) = schema.field(field) else {
            return Err(Error::InvalidArgument(format!(
                "table {:?} has no field {field:?}",
                self.name()
            )));
        };
        if schema.delete_key.as_deref() != Some(field) {
            return Err(Error::InvalidArgument(match &schema.delete_key {
                Some(dk) => format!(
                    "field {field:?} is not the delete key of table {:?} ({dk:?} is)",
                    self.name()
                ),
                None => format!(
                    "table {:?} has no delete key: declare one with set_delete_key or `delete key (...)`",
                    self.name()
                ),
            }));
        }
        let lo = first_admitted(field, f.ty, range.start_bound(), false)?;
        let hi = first_admitted(field, f.ty, range.end_bound(), true)?;
        let lo = match (lo, hi) {
            (Some(lo), Some(hi)) if lo < hi => lo,
            (Some(lo), None) => lo,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "the range of delete key {field:?} is empty"
                )));
            }
        };
        let (lo, hi) = delete_key_range(lo, hi);
        let mut batch = WriteBatch::new();
        batch.delete_where(&rt.layout.primary, &lo, &hi);
        self.db.write(batch)?;
        // Whole pages go at once where nothing has to read them (invariant 12).
        self.db.drop_deleted_pages(rt.layout.primary).map(|_| ())
    }
}
