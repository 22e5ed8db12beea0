//! Blind writes (deferred invariant 1), and the purge at commit of old rows found in a
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

/// Writes `row` under `pk` into every index, blind, unchanged keys included (invariant
/// 1). When the caller happens to know the old row (UPDATE reads it anyway), changed
/// secondary keys also get explicit deletes so no dirty entry is left behind.
pub(crate) fn write_row(
    layout: &Layout,
    batch: &mut WriteBatch,
    pk: &[u8],
    bytes: &[u8],
    row: &[Value],
    old: Option<&[Value]>,
) {
    crate::table::eager::put_row(layout, batch, pk, bytes, row, old, true);
}

/// Deletes the row under `pk`: a tombstone in the primary index; when the caller
/// happens to know the old row, explicit deletes of its secondary entries too.
pub(crate) fn delete_row(layout: &Layout, batch: &mut WriteBatch, pk: &[u8], old: Option<&[Value]>) {
    match old {
        Some(old) => crate::table::eager::delete_row(layout, batch, pk, old),
        None => batch.delete(&layout.primary, pk),
    }
}
