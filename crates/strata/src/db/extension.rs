//! The key-value engine's one extension point: what a layer above it plugs in.
//!
//! The engine stores keyspaces and catalog entries and knows nothing of what they
//! mean. A layer that builds on them (the table layer: rows, secondary indexes and
//! their deferred maintenance) implements [`Extension`] and is handed to the engine when
//! it opens. The layer holds the engine, never the other way round: the engine calls
//! it only through this trait, and the engine's own tests run it with no layer at all.

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::DbInner;
use crate::compaction::Obligations;
use crate::error::Result;
use crate::version::Version;

/// A layer above the key-value engine.
pub(crate) trait Extension: Any + Send + Sync {
    /// Reads the catalog of `version`, at open (before the WAL replays, whose flushes
    /// need the answer) and after every catalog change, and says which keyspaces owe
    /// deletes for the versions they drop.
    fn catalog_changed(&self, version: &Version) -> Result<Arc<dyn Obligations>>;

    /// Starts the layer's own threads once the database is open and writable. They get
    /// the engine to work with and end once [`stop`](Extension::stop) was called.
    fn start(&self, _engine: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
        Ok(Vec::new())
    }

    /// Asks the layer's threads to end (the database is closing).
    fn stop(&self) {}

    /// Keyspaces whose compaction is urgent now; judged again at each pick.
    fn urgent_keyspaces(&self) -> HashSet<u32> {
        HashSet::new()
    }

    /// Whether some keyspace was judged urgent and still is.
    fn any_urgent(&self) -> bool {
        false
    }

    /// Waits (boundedly) until work the layer queued for the engine has been written,
    /// so that a full compaction that follows includes it.
    fn settle(&self, _engine: &DbInner) {}

    /// Whether no work the layer queued for the engine is pending.
    fn settled(&self) -> bool {
        true
    }

    /// Deletes a flush or compaction emitted, per receiving keyspace.
    fn emitted(&self, _counts: &BTreeMap<u32, u64>) {}

    /// The layer itself, for the layer to find its state again from the engine.
    fn as_any(&self) -> &dyn Any;
}

/// No layer: a plain key-value store (the engine's own tests open it so).
#[cfg(test)]
pub(crate) struct KeyValueOnly;

#[cfg(test)]
impl Extension for KeyValueOnly {
    fn catalog_changed(&self, _: &Version) -> Result<Arc<dyn Obligations>> {
        Ok(Arc::new(crate::compaction::NoObligations))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::options::Options;

    /// The engine runs whole without a layer above it: writes, flushes, compactions,
    /// snapshots and reopen, through the same code as with the table layer.
    #[test]
    fn the_engine_runs_without_a_layer_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Db::open_with(dir.path(), Options::default(), Arc::new(KeyValueOnly)).unwrap();
        let db = open();
        let ks = db.create_keyspace("k").unwrap();
        for i in 0..1000u32 {
            ks.put(&i.to_be_bytes(), b"v1").unwrap();
        }
        db.flush().unwrap();
        let snap = db.snapshot();
        for i in (0..1000u32).step_by(2) {
            ks.delete(&i.to_be_bytes()).unwrap();
        }
        db.compact_range().unwrap();
        assert_eq!(
            snap.scan(&ks, ..).unwrap().count(),
            1000,
            "the snapshot keeps what it saw"
        );
        drop(snap);
        db.close().unwrap();
        let db = open();
        let ks = db.keyspace("k").unwrap();
        assert_eq!(ks.scan(..).unwrap().count(), 500);
        assert_eq!(ks.get(&1u32.to_be_bytes()).unwrap().as_deref(), Some(&b"v1"[..]));
        assert_eq!(ks.get(&2u32.to_be_bytes()).unwrap(), None);
        assert!(db.list_tables().is_empty(), "no table layer, no tables");
    }
}
