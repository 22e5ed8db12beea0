//! Blind deletes (a blind write is `eager::put_row` rewriting every entry: deferred
//! invariant 1, `txn::write_row`), and the purge at commit of old rows found in a
//! memtable (invariant 6).
//!
//! When the caller happens to know the old row (UPDATE reads it anyway, and a blind
//! write whose old row is still in a memtable while the table's indexes are being read
//! finds it without I/O), changed secondary entries are deleted at once. A delete at the
//! new version's seqno is right whatever the probe saw: at that seqno the row's only live
//! entries are the new ones, and older snapshots do not see it.

use crate::batch::WriteBatch;
use crate::table::layout::Layout;
use crate::table::value::Value;

/// Deletes the row under `pk`: a tombstone in the primary index; when the caller
/// happens to know the old row, explicit deletes of its secondary entries too.
pub(crate) fn delete_row(layout: &Layout, batch: &mut WriteBatch, pk: &[u8], old: Option<&[Value]>) {
    match old {
        Some(old) => crate::table::eager::delete_row(layout, batch, pk, old),
        None => batch.delete(&layout.primary, pk),
    }
}
