//! The database a row or select command works on: one database, or a partitioned
//! directory (one holding a `PARTITIONS` file) whose tables are split over its
//! partitions by primary key hash. Commands that work on one database only refuse a
//! partitioned directory in [`crate::commands::open`].

use std::path::Path;

use strata::partition::DESCRIPTOR_FILE;
use strata::table::schema::Schema;
use strata::table::select::Query;
use strata::table::value::Value;
use strata::table::{Row, Table, TableStats};
use strata::{Db, PartitionedDb, PartitionedTable};

use crate::commands::{CliError, Result, open_options, serve_flag};

/// One database or a partitioned directory.
pub(crate) enum Store {
    One(Db),
    Parts(PartitionedDb),
}

/// A table of a [`Store`].
pub(crate) enum AnyTable {
    One(Table),
    Parts(Box<PartitionedTable>),
}

/// True when `dir` is a partitioned directory.
pub(crate) fn is_partitioned(dir: &Path) -> bool {
    dir.join(DESCRIPTOR_FILE).exists()
}

impl Store {
    /// Opens `dir`: partitioned when it has a descriptor or `partitions` is given
    /// (creating it then, with that many partitions), else one database (created only
    /// when `create`). With `--serve`, only those partitions of a partitioned one (a
    /// serving node's, created when `create`).
    pub(crate) fn open(dir: Option<&Path>, create: bool, partitions: Option<usize>) -> Result<Store> {
        Self::open_as(dir, create, partitions, false)
    }

    /// [`open`](Self::open) for a command that only reads: read-only, so the open's
    /// recovery changes nothing (`commands::open_to_read`).
    pub(crate) fn open_to_read(dir: Option<&Path>) -> Result<Store> {
        Self::open_as(dir, false, None, true)
    }

    fn open_as(dir: Option<&Path>, create: bool, partitions: Option<usize>, read: bool) -> Result<Store> {
        let open_options = |create: bool| match read {
            true => crate::commands::read_options(),
            false => open_options(create),
        };
        let dir = crate::commands::given(dir)?;
        let serve = serve_flag();
        if let Some(n) = partitions {
            if !is_partitioned(dir) && dir.join("CURRENT").exists() {
                return Err(CliError::Runtime(format!(
                    "{} is a database of one partition: --partitions needs a new directory",
                    dir.display()
                )));
            }
            let opts = open_options(create);
            return Ok(Store::Parts(match serve {
                Some(s) => PartitionedDb::open_serving(dir, n, s, opts)?,
                None => PartitionedDb::open(dir, n, opts)?,
            }));
        }
        if is_partitioned(dir) {
            return Ok(Store::Parts(match serve {
                // A node creates its own partitions with its first table.
                Some(s) => PartitionedDb::open_existing_serving(dir, s, open_options(create))?,
                None => PartitionedDb::open_existing(dir, open_options(false))?,
            }));
        }
        if serve.is_some() {
            return Err(CliError::Runtime(format!(
                "{} is not a partitioned database: --serve needs one (create-table --partitions N)",
                dir.display()
            )));
        }
        Ok(Store::One(Db::open(dir, open_options(create))?))
    }

    pub(crate) fn list_tables(&self) -> Vec<String> {
        match self {
            Store::One(db) => db.list_tables(),
            Store::Parts(db) => db.list_tables(),
        }
    }

    pub(crate) fn create_table(&self, schema: Schema) -> Result<()> {
        match self {
            Store::One(db) => db.create_table(schema).map(drop)?,
            Store::Parts(db) => db.create_table(schema).map(drop)?,
        }
        Ok(())
    }

    /// The table `name`, with the existing names in the error if there is none.
    pub(crate) fn table(&self, name: &str) -> Result<AnyTable> {
        let r = match self {
            Store::One(db) => db.table(name).map(AnyTable::One),
            Store::Parts(db) => db.table(name).map(|t| AnyTable::Parts(Box::new(t))),
        };
        match r {
            Ok(t) => Ok(t),
            Err(strata::Error::NotFound(_)) => Err(table_not_found(name, &self.list_tables())),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) fn close(self) -> Result<()> {
        match self {
            Store::One(db) => db.close()?,
            Store::Parts(db) => db.close()?,
        }
        Ok(())
    }
}

/// The error for a missing table, naming the tables there are.
pub(crate) fn table_not_found(name: &str, names: &[String]) -> CliError {
    CliError::Runtime(format!(
        "table {name:?} not found (existing tables: {})",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

impl AnyTable {
    pub(crate) fn schema(&self) -> Result<Schema> {
        Ok(match self {
            AnyTable::One(t) => t.schema()?,
            AnyTable::Parts(t) => t.schema()?,
        })
    }

    pub(crate) fn get(&self, pk: &[Value]) -> Result<Option<Row>> {
        Ok(match self {
            AnyTable::One(t) => t.get(pk)?,
            AnyTable::Parts(t) => t.get(pk)?,
        })
    }

    pub(crate) fn insert(&self, row: Row) -> Result<()> {
        match self {
            AnyTable::One(t) => t.insert(row)?,
            AnyTable::Parts(t) => t.insert(row)?,
        }
        Ok(())
    }

    pub(crate) fn replace(&self, row: Row) -> Result<()> {
        match self {
            AnyTable::One(t) => t.replace(row)?,
            AnyTable::Parts(t) => t.replace(row)?,
        }
        Ok(())
    }

    pub(crate) fn delete(&self, pk: &[Value]) -> Result<()> {
        match self {
            AnyTable::One(t) => t.delete(pk)?,
            AnyTable::Parts(t) => t.delete(pk)?,
        }
        Ok(())
    }

    pub(crate) fn update(&self, pk: &[Value], set: &[(&str, Value)]) -> Result<bool> {
        Ok(match self {
            AnyTable::One(t) => t.update(pk, set)?,
            AnyTable::Parts(t) => t.update(pk, set)?,
        })
    }

    pub(crate) fn stats(&self) -> Result<TableStats> {
        Ok(match self {
            AnyTable::One(t) => t.stats()?,
            AnyTable::Parts(t) => t.stats()?,
        })
    }

    /// The rows `q` selects through `index`, streamed (merged over partitions for a
    /// partitioned table).
    pub(crate) fn rows(&self, index: &str, q: Query) -> Result<Box<dyn Iterator<Item = strata::Result<Row>>>> {
        Ok(match self {
            AnyTable::One(t) => Box::new(t.select(index).with_query(q).rows()?),
            AnyTable::Parts(t) => Box::new(t.select(index).with_query(q).rows()?),
        })
    }
}
