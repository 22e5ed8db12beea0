//! The table catalog, persisted in the manifest: for each table its schema and the
//! keyspaces of its primary and secondary indexes. Catalog changes (create or drop a
//! table or index) go into one manifest edit together with the keyspaces they create
//! or drop, so a crash never leaves a table half-defined.
//!
//! From the catalog the table layer builds, at open and after every change, the
//! deferred `Registry` (`deferred::emit`) that flushes and compactions consult: which primary keyspaces
//! emit deferred deletes (deferred tables, and tables with a delete key: deferred invariant 12) and how to extract their rows' secondary keys.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::deferred::emit::{PurgedVersions, Registry};
use super::layout::Layout;
use super::schema::{IndexMaintenance, Schema};
use crate::codec::{Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};
use crate::version::Version;

/// Catalog entries of tables are named with this prefix.
pub const TABLE_META_PREFIX: &str = "table/";

/// Format 2 added each index's `readable_from`; format 1 (read as 0) is still read.
const FORMAT: u8 = 2;

/// One secondary index's place in the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// Index name (as in the schema).
    pub name: String,
    /// Its keyspace id.
    pub keyspace: u32,
    /// Still being built: maintained by writes, not yet readable.
    pub building: bool,
    /// The oldest snapshot seqno that can read it (0: any). A build writes entries
    /// for the row versions its own snapshot sees, so an older snapshot would miss
    /// the versions overwritten in between (`build`).
    pub readable_from: u64,
}

/// A table as the catalog records it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    /// Schema (fields, keys, indexes, maintenance mode).
    pub schema: Schema,
    /// Keyspace of the primary index.
    pub primary: u32,
    /// Keyspaces of the secondary indexes, in schema order.
    pub indexes: Vec<IndexEntry>,
}

/// Keyspace name of a table's primary index.
pub fn primary_keyspace_name(table: &str) -> String {
    format!("{}{table}", crate::db::RESERVED_PREFIX)
}

/// Keyspace name of a table's secondary index.
pub fn index_keyspace_name(table: &str, index: &str) -> String {
    format!("{}{table}:{index}", crate::db::RESERVED_PREFIX)
}

impl TableDef {
    /// Encodes the definition for the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT];
        put_bytes(&mut out, &self.schema.to_bytes());
        put_varint(&mut out, u64::from(self.primary));
        put_varint(&mut out, self.indexes.len() as u64);
        for ix in &self.indexes {
            put_bytes(&mut out, ix.name.as_bytes());
            put_varint(&mut out, u64::from(ix.keyspace));
            out.push(u8::from(ix.building));
            put_varint(&mut out, ix.readable_from);
        }
        out
    }

    /// Decodes a definition; `entry` names the catalog entry for errors.
    pub fn decode(entry: &str, bytes: &[u8]) -> Result<TableDef> {
        let bad = |offset: usize, reason: &str| {
            Error::SchemaMismatch(format!("catalog entry {entry:?} at byte {offset}: {reason}"))
        };
        let mut d = Decoder::new(bytes);
        let fmt = d.u8().map_err(|e| bad(e.offset, e.reason))?;
        if fmt != 1 && fmt != FORMAT {
            return Err(bad(0, "unknown catalog format"));
        }
        let schema_bytes = d.length_prefixed().map_err(|e| bad(e.offset, e.reason))?;
        let schema = Schema::from_bytes(schema_bytes)?;
        let id = |d: &mut Decoder<'_>| -> Result<u32> {
            let at = d.position();
            let v = d.varint().map_err(|e| bad(e.offset, e.reason))?;
            u32::try_from(v).map_err(|_| bad(at, "keyspace id out of range"))
        };
        let primary = id(&mut d)?;
        let n = d.varint_len(1024).map_err(|e| bad(e.offset, e.reason))?;
        let mut indexes = Vec::with_capacity(n);
        for _ in 0..n {
            let name = d.length_prefixed().map_err(|e| bad(e.offset, e.reason))?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| bad(d.position(), "index name is not UTF-8"))?;
            let keyspace = id(&mut d)?;
            let building = d.u8().map_err(|e| bad(e.offset, e.reason))? != 0;
            let readable_from = if fmt == 1 {
                0
            } else {
                d.varint().map_err(|e| bad(e.offset, e.reason))?
            };
            indexes.push(IndexEntry {
                name,
                keyspace,
                building,
                readable_from,
            });
        }
        if !d.is_empty() {
            return Err(bad(d.position(), "trailing bytes"));
        }
        if indexes.len() != schema.indexes.len() || indexes.iter().zip(&schema.indexes).any(|(e, i)| e.name != i.name) {
            return Err(bad(0, "index list does not match the schema"));
        }
        Ok(TableDef {
            schema,
            primary,
            indexes,
        })
    }

    /// True for deferred maintenance.
    pub fn is_deferred(&self) -> bool {
        self.schema.maintenance == IndexMaintenance::Deferred
    }

    /// True if flushes and compactions of the primary send deferred deletes to the
    /// secondary indexes: deferred tables, and tables with a delete key (deferred
    /// invariant 12), when they have indexes.
    pub fn emits_deferred_deletes(&self) -> bool {
        (self.is_deferred() || self.schema.delete_key.is_some()) && !self.indexes.is_empty()
    }
}

/// Every table of the catalog in `version`, by name.
pub fn load_tables(version: &Version) -> Result<BTreeMap<String, TableDef>> {
    let mut out = BTreeMap::new();
    for (k, v) in version.meta.range(TABLE_META_PREFIX.to_string()..) {
        let Some(name) = k.strip_prefix(TABLE_META_PREFIX) else {
            break;
        };
        let def = TableDef::decode(k, v)?;
        for ks in std::iter::once(def.primary).chain(def.indexes.iter().map(|i| i.keyspace)) {
            if version.keyspace(ks).is_none() {
                return Err(Error::SchemaMismatch(format!(
                    "table {name:?} names keyspace {ks}, which does not exist"
                )));
            }
        }
        out.insert(name.to_string(), def);
    }
    Ok(out)
}

/// The deferred registry of decoded tables, sharing `purged`.
pub(crate) fn registry_for(tables: &BTreeMap<String, TableDef>, purged: Arc<PurgedVersions>) -> Result<Registry> {
    let mut r = Registry {
        primaries: Default::default(),
        secondaries: HashSet::new(),
        seqno_readers: HashSet::new(),
        purged,
    };
    for def in tables.values() {
        r.seqno_readers.insert(def.primary);
        r.seqno_readers.extend(def.indexes.iter().map(|i| i.keyspace));
        if !def.emits_deferred_deletes() {
            continue;
        }
        let layout = Arc::new(Layout::new(def)?);
        r.primaries.insert(def.primary, layout);
        r.secondaries.extend(def.indexes.iter().map(|i| i.keyspace));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(readable_from: u64) -> Result<TableDef> {
        Ok(TableDef {
            schema: Schema::parse("table t (id u64, u u64) primary key (id) index by_u (u)")?,
            primary: 3,
            indexes: vec![IndexEntry {
                name: "by_u".into(),
                keyspace: 4,
                building: false,
                readable_from,
            }],
        })
    }

    #[test]
    fn definitions_round_trip_and_format_1_reads_as_readable_from_any_snapshot() -> Result<()> {
        let d = def(1234)?;
        assert_eq!(TableDef::decode("table/t", &d.encode())?, d);
        // Format 1 is format 2 without the trailing `readable_from` varint of each index.
        let mut v1 = def(0)?.encode();
        assert_eq!(v1.pop(), Some(0));
        v1[0] = 1;
        assert_eq!(TableDef::decode("table/t", &v1)?, def(0)?);
        // Format 2 without that varint is cut short, and an unknown format is refused.
        let mut cut = v1.clone();
        cut[0] = 2;
        assert!(matches!(
            TableDef::decode("table/t", &cut),
            Err(Error::SchemaMismatch(_))
        ));
        let mut v3 = d.encode();
        v3[0] = 3;
        assert!(
            matches!(TableDef::decode("table/t", &v3), Err(Error::SchemaMismatch(m)) if m.contains("unknown catalog format"))
        );
        Ok(())
    }
}
