//! Validation of secondary hits (deferred invariant 5): a hit counts only if the row it
//! names still holds its key.

use crate::key::SeqNo;
use crate::table::Row;
use crate::table::layout::IndexLayout;

/// Whether `row`'s key in index `ix` is `ikey`.
pub(crate) fn holds(ix: &IndexLayout, ikey: &[u8], row: &[crate::table::value::Value]) -> bool {
    let mut k = Vec::with_capacity(ikey.len());
    ix.shape.encode_row_key(row, &mut k);
    k == ikey
}

/// The row a secondary hit `(ikey, hit_seq)` returns, given the primary version visible
/// at the same snapshot: `None` for a dirty hit.
pub(crate) fn live_row(ix: &IndexLayout, ikey: &[u8], hit_seq: SeqNo, visible: Option<(SeqNo, Row)>) -> Option<Row> {
    let (row_seq, row) = visible?;
    (row_seq == hit_seq || holds(ix, ikey, &row)).then_some(row)
}
