//! Eager index maintenance, the classic LSM table: every REPLACE and DELETE reads the
//! old row first (the *hidden read*) and writes explicit deletes for the secondary
//! entries whose key changes. Secondary indexes never hold stale entries, except those
//! of rows a `delete_where` killed, until compactions delete them (deferred invariant 12).

use super::layout::Layout;
use super::value::Value;
use crate::batch::WriteBatch;

/// Puts `row` into the primary and every secondary index at one seqno, deleting the
/// entries of `old` whose key changes. An entry whose key did not change is written
/// again only with `rewrite_unchanged` (deferred maintenance and tables with a delete
/// key need it: deferred invariants 1 and 12).
pub(crate) fn put_row(
    layout: &Layout,
    batch: &mut WriteBatch,
    pk: &[u8],
    bytes: &[u8],
    row: &[Value],
    old: Option<&[Value]>,
    rewrite_unchanged: bool,
) {
    batch.put(&layout.primary, pk, bytes);
    for ix in &layout.indexes {
        let new_key = layout.secondary_key(ix, row, pk);
        if let Some(old) = old {
            let old_key = layout.secondary_key(ix, old, pk);
            if old_key == new_key {
                if !rewrite_unchanged {
                    continue;
                }
            } else {
                batch.share_seq();
                batch.delete(&ix.keyspace, &old_key);
            }
        }
        batch.share_seq();
        batch.put(&ix.keyspace, &new_key, &[]);
    }
}

/// Deletes the row under `pk`, whose current contents are `old`.
pub(crate) fn delete_row(layout: &Layout, batch: &mut WriteBatch, pk: &[u8], old: &[Value]) {
    batch.delete(&layout.primary, pk);
    for ix in &layout.indexes {
        batch.share_seq();
        batch.delete(&ix.keyspace, &layout.secondary_key(ix, old, pk));
    }
}
