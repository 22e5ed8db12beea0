//! Deferred index maintenance (the paper's algorithm): REPLACE puts the new row into
//! every index and DELETE puts a tombstone into the primary index only, with no reads.
//! Stale secondary entries are removed later, when primary flushes and compactions drop
//! the row versions they point to and send `DeferredDelete(key, seqno)` to the indexes
//! (see `compaction::deferred`). Until then, secondary reads validate every hit against
//! the primary index and skip the dirty ones.
//!
//! Every index gets the new version's entry even when its key did not change: the
//! deferred delete of the old version removes exactly the old entry (same key, old
//! seqno), and the new entry must be there to stay.
//!
//! When the old row is still in a memtable and the table's indexes are being read, the
//! commit finds it there without I/O and deletes its changed secondary entries at once
//! (docs/design/deferred.md, "Rules that keep it correct"), so hot rows rewritten many
//! times within one memtable's life leave no dirty entries for reads to skip; with no
//! readers the writes stay blind (the purge would cost the writer and save nobody a
//! read). A delete at the new version's seqno
//! is right whatever the probe saw: at that seqno the row's only live entries are the
//! new ones, and older snapshots do not see it. When the old row is on disk, the
//! commit hands it to the purge thread instead (`table::purge`), which reads it after
//! the commit and writes deferred deletes for all its entries, changed or not (so that
//! compactions may skip the version: `compaction::PurgedVersions`).

use super::layout::Layout;
use super::value::Value;
use crate::batch::WriteBatch;

/// Writes `row` under `pk` into every index, blind. When the caller happens to know the
/// old row (UPDATE reads it anyway), changed secondary keys also get explicit deletes so
/// no dirty entry is left behind.
pub(crate) fn write_row(
    layout: &Layout,
    batch: &mut WriteBatch,
    pk: &[u8],
    bytes: &[u8],
    row: &[Value],
    old: Option<&[Value]>,
) {
    batch.put(&layout.primary, pk, bytes);
    for ix in &layout.indexes {
        let new_key = layout.secondary_key(ix, row, pk);
        if let Some(old) = old {
            let old_key = layout.secondary_key(ix, old, pk);
            if old_key != new_key {
                batch.share_seq();
                batch.delete(&ix.keyspace, &old_key);
            }
        }
        batch.share_seq();
        batch.put(&ix.keyspace, &new_key, &[]);
    }
}

/// Deletes the row under `pk`: a tombstone in the primary index; when the caller
/// happens to know the old row, explicit deletes of its secondary entries too.
pub(crate) fn delete_row(layout: &Layout, batch: &mut WriteBatch, pk: &[u8], old: Option<&[Value]>) {
    match old {
        Some(old) => super::eager::delete_row(layout, batch, pk, old),
        None => batch.delete(&layout.primary, pk),
    }
}
