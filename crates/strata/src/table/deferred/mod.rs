//! Deferred secondary index maintenance: the algorithm of *Deferred secondary index
//! update with LSM-trees* (Shpilevoy, Osipov, Volkanov; Tarantool Vinyl's
//! `defer_deletes`), with the bounds on dirty entries Strata adds. The design and its
//! measurements: `docs/design/deferred.md`.
//!
//! REPLACE and DELETE are blind: REPLACE puts the new row into the primary and every
//! secondary index, DELETE puts a tombstone into the primary only. The secondary entries
//! of the versions they hide stay behind (*dirty*) until a `DeferredDelete` removes them.
//!
//! # Invariants
//!
//! Stated once here, kept by the code named beside each, cited elsewhere by number
//! ("deferred invariant 3").
//!
//! 1. **What a deferred delete names.** `DeferredDelete(k, s)` names exactly the
//!    secondary entry `Put(k, s)`: `k` is the index key ++ primary key, `s` the seqno of
//!    the row version that wrote it. A row version and all its index entries share one
//!    seqno, and every index gets the new version's entry even when its key did not
//!    change, so deleting the old version's entry never touches the new one
//!    ([`write`]).
//! 2. **When it is emitted.** When a primary flush or compaction drops a row version
//!    (shadowed, or killed by a delete or range delete) that no live snapshot can see,
//!    each secondary index gets the delete of that version's entry, in the same manifest
//!    edit as the primary's output: both happen or neither does, and after a crash the
//!    next compaction finds the same versions again ([`emit`];
//!    `compaction::obligations` places the deletes).
//! 3. **Where it lands.** A delete lands in a run at least as new as the run holding the
//!    put it names: one memtable serves every keyspace, so the put was flushed with its
//!    primary version, and the delete's run is made after that version was on disk
//!    (`compaction::obligations`). Point lookups rely on it; scans and compactions on
//!    secondary keyspaces compare seqnos, never run order, because a delete carries the
//!    old seqno and may land above a newer put.
//! 4. **What annihilates it.** In a secondary compaction `DeferredDelete(k, s)` meets
//!    `Put(k, s)`, which sorts just after it: the put is dropped, and at the bottom the
//!    delete too. A `Put(k, s2)` with `s2 > s` is untouched. Receiving keyspaces keep
//!    shadowed tombstones to the bottom, since what shadows them may be annihilated
//!    later (`compaction::rules`, `Obligations::receives`).
//! 5. **Why a dirty hit is skipped.** A secondary hit `(k, s)` is live iff the primary
//!    version visible at the same snapshot has seqno `s`, or its index key equals `k`
//!    (an eager write left an unchanged entry in place). Otherwise the version it names
//!    is gone and its delete is pending: the hit is skipped and counted ([`validate`]).
//! 6. **How the purge and compaction share the work.** While a table's indexes are
//!    read, a blind write deletes the old version's changed entries at commit when the
//!    old row is in a memtable ([`write`]), or hands it to the purge thread when it is on
//!    disk ([`purge`]), which writes deletes for every entry of the version. A delete
//!    `(k, s)` is written only when no live snapshot lies in `[s, base)` (`base` the
//!    blind write's first seqno), and the old version is read at `base - 1`. A version
//!    whose every entry got its delete is recorded ([`emit::PurgedVersions`]); the
//!    compaction that drops it emits nothing for it, after syncing the WAL that holds
//!    the purge's deletes. Forgetting a record is safe: duplicate deletes annihilate
//!    like any other. The purge is best effort; what it drops, compaction does.
//! 7. **Dirty reads make it urgent.** When many of a deferred index's recent hits were
//!    dirty, the table's pending purges are pushed down now: the memtable is flushed and
//!    its keyspaces get delete-driven compactions ([`urgency`]).
//! 8. **Unique indexes beside deferral.** A write touching a unique index reads it and
//!    is never blind; a dirty unique entry (invariant 5) is no conflict, a live holder
//!    always is (`table::txn`).
//! 9. **Drops cancel.** Deletes for an index or table dropped meanwhile are left out of
//!    the edit (`compaction::obligations::emitted`, `DbInner::install_edit`). An index
//!    being built takes no purges: its entries stay the compaction's.
//!
//! ## Secondary range deletes (`Table::delete_where`)
//!
//! 10. **The delete key lives in the row.** A table with a delete key stores rows as
//!     version 2 of the row codec, whose bytes 0..9 (version byte, then the field's
//!     order-preserving 8 bytes) are the primary keyspace's engine delete key. A
//!     `delete_where(field, range)` is the primary keyspace's secondary range delete
//!     over `[2 ++ lo, 2 ++ hi)`: one WAL record, so its atomicity, recovery, snapshots
//!     and hiding of rows from `get` are the engine's (invariant DW of
//!     `crate::delete_key`). A new delete key needs an empty table, so every row a
//!     delete can name carries it; rows written as version 1 start with byte 1 and are
//!     never killed (`table::delete_where`, `table::encoding::row`).
//! 11. **Index reads validate.** A secondary hit of a killed row finds no primary row at
//!     its snapshot and is skipped as dirty (invariant 5), in both modes; unique checks
//!     read the primary likewise (invariant 8). `check` counts such entries as dirty and
//!     accepts them in eager tables with a delete key (`table::check`).
//! 12. **Index entries of killed rows go by emission.** A table with a delete key and
//!     secondary indexes emits deferred deletes in both modes (`catalog::registry_for`):
//!     the flush or compaction that turns a killed version into a tombstone or drops it
//!     hands it to the collector like any dropped version (invariant 2). Every version
//!     of such a table writes all its index entries at its own seqno, unchanged keys
//!     included, eager too (invariant 1), so each delete names an entry that was
//!     written, and the entries of shadowed versions get theirs too (none resurfaces
//!     when a newer entry of the same key is annihilated). Since the dropped rows must
//!     be read, that primary's pages are never dropped unread (invariant TP of
//!     `compaction::tiles`); a table without secondary indexes drops them. The
//!     background rewrites that make a delete physical (invariant KR there) are such
//!     compactions, so they emit too.
//! 13. **Serialised with statements.** `delete_where` and `set_delete_key` hold the DDL
//!     lock exclusively, so no statement's read-then-write (an eager hidden read, an
//!     UPDATE, a unique check) straddles a delete.

pub(crate) mod emit;
pub(crate) mod purge;
pub(crate) mod urgency;
pub(crate) mod validate;
pub(crate) mod write;

pub(crate) use write::delete_row;
