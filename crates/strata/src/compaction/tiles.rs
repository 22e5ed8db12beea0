//! Delete tiles in flushes and compactions: which h each level's tables are written
//! with (the KiWi cost model), and which pages a merge may drop without reading them.
//!
//! # The cost model (`docs/design/deletes.md`)
//!
//! Costs are in page I/Os per operation of the observed mix, for one level of `P`
//! pages, with tiles of `h` pages:
//!
//! * a secondary range delete reads and rewrites the pages of each tile that qualify
//!   only in part (at most two per tile: the range's two ends; every page when h = 1,
//!   since the delete key is independent of the sort key) and drops the rest unread:
//!   `2 * P * min(h, 2) / h`;
//! * a point lookup probes h page filters (hashing, [`PROBE_COST`] each) and reads a
//!   page per false positive: `h * (fpr + PROBE_COST)`, plus the page holding the key,
//!   the same for every h;
//! * a range query reads every page of each tile it meets: `h`.
//!
//! `total(h) = srd * cost_srd + point * cost_point + range * cost_range`, with the
//! operations' shares of the mix; the h of [`CANDIDATES`] with the least total wins.
//!
//! # Dropping pages unread
//!
//! Invariant (TP): a merge skips a page only if the page is *whole* (every entry a `Put`
//! with a delete key, the only version of its user key in its file), a secondary range
//! delete at seqno `s` covers the page's whole delete-key range, the page's largest
//! seqno is below `s`, no live snapshot is below `s` (every reader sees the delete),
//! the page's file is in the merge's oldest input and the merge is bottommost (nothing
//! older than the page's entries exists below, so no older version of their keys can
//! resurface), and the keyspace owes no obligations for what it drops (a table's
//! primary with secondary indexes, deferred or with a delete key: its dropped rows must
//! be read to delete their index entries; `compaction::obligations`). The same holds
//! for the pages `DbInner::drop_deleted_pages` drops at delete time.
//!
//! # Rewriting what a delete covers in part
//!
//! Invariant (KR): a file of a keyspace with a delete key whose
//! `FileMeta::deletes_applied` is `a` holds no `Put` killed by a record at seqno `<= a`,
//! and a page its page map patched with `applied` `p` holds none killed by a record at
//! seqno `<= p` (`sstable::patch`).
//! The flush or compaction that wrote it applied every record at or below its job's
//! `applied_through` (the seqno visible when the job's context was taken: every record
//! at or below it is in the manifest or a memtable of that context), and it claims less
//! than the oldest record that kills a `Put` it kept for a snapshot older than that
//! record. Page drops and moves keep the file's entries or fewer, so they keep the
//! claim. A record the picker acts on is older than every snapshot, so a kept `Put`'s
//! record is newer than it and the rewrite's outputs claim it: no file is rewritten
//! twice for one record.
//!
//! A file *still owes* a record `r` (rule [`owes`]) when `r.seq > deletes_applied`, the
//! file has entries older than `r` (smallest seqno, or an ingested file's global seqno,
//! below `r.seq`), and it is not tiled or one of its pages still read and not patched
//! through `r` meets `r`'s range.
//! The picker compacts such files (`picker::deletes::KilledPutsTrigger`) once every
//! reader sees `r` (no snapshot below `r.seq`): in place at the last level, where the
//! merge is bottommost and drops the killed `Put`s (and skips whole covered pages unread,
//! invariant TP), or down a level above it, where they become tombstones. Its outputs
//! claim `r` applied, so each file is rewritten once per record. It is an ordinary
//! compaction: decided and installed against the same version under the background
//! lock's busy set, installed by one manifest edit, and for tables with indexes it reads
//! the rows it drops and emits their index deletes (deferred invariant 12). Where the
//! task rewrites one tiled last-level file of a keyspace without obligations and the
//! pages still owing are at most half its live pages, a page patch rewrites those
//! pages alone instead (invariant PP of `compaction::patch`, `db::patch`): a page
//! patched by a job that applied `r` (`PagePatch::applied >= r.seq`) owes `r` no more,
//! like a dropped page, so the rule below looks at the other pages only.
//!
//! # Forgetting satisfied records
//!
//! Invariant RG: a secondary range delete recorded in the manifest at seqno `s` is
//! removed once no file of its keyspace can hold a `Put` it kills: every live file
//! owes it nothing by rule [`owes`] (it claims `s` applied, or all its entries are at
//! least as new as `s`, or it is tiled and none of its pages still read, and not
//! patched through `s`, meets the record's range). A merge that keeps a killed `Put`
//! for a snapshot below `s` claims less than `s`, so its outputs keep the record.
//! Memtables need no look: the flush that moved the record into the manifest wrote
//! its memtable and every older one, so entries older than `s` are all in files, and
//! every later write or ingest is newer than `s`.
//!
//! The judgement is made in `DbInner::install_edit` under the version set's lock,
//! against the version the edit applies to plus the edit's own files, and the removals
//! go into that same edit (`db::killed`): a judgement made earlier, outside the lock,
//! raced with a concurrent flush or compaction installing a file that still owed the
//! record, and deleted keys came back (`model_tiering`'s regression seed). The records
//! a flush moves out of its memtable are judged in its edit too (one found satisfied
//! is not added). Only the keyspaces whose files or records the edit changes are
//! judged; the others' records wait for their next edit. Removal is what keeps reads
//! cheap: every read of a keyspace with a delete key checks the records (invariant
//! DW), and a TTL-style workload adds one per `delete_where`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::delete_key::{DeleteConfig, DeleteWhere, TileChoice};
use crate::key::SeqNo;
use crate::sstable::TileOptions;
use crate::sstable::tile::{PageMeta, PageSkip};

/// The tile sizes `h = auto` chooses among.
pub const CANDIDATES: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// A bloom probe's cost relative to a page read (hashing one key, one cache line,
/// against a 4 KiB read from an SSD).
pub const PROBE_COST: f64 = 0.001;

/// The observed shares of secondary range deletes, point lookups and range queries in
/// all operations (writes are the rest; they cost the same at every h).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Mix {
    /// Secondary range deletes per operation.
    pub srd: f64,
    /// Point lookups per operation.
    pub point: f64,
    /// Range queries per operation.
    pub range: f64,
}

/// What one h costs a level, per operation of the mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TileCost {
    /// Pages per tile.
    pub h: u32,
    /// Secondary range deletes' share.
    pub srd: f64,
    /// Point lookups' share.
    pub point: f64,
    /// Range queries' share.
    pub range: f64,
}

impl TileCost {
    /// The sum.
    pub fn total(&self) -> f64 {
        self.srd + self.point + self.range
    }
}

/// The cost of tiles of `h` pages in a level of `pages` pages (model in the module docs).
pub fn cost(mix: Mix, pages: u64, h: u32, fpr: f64) -> TileCost {
    let h_f = f64::from(h.max(1));
    let p = pages as f64;
    TileCost {
        h,
        srd: mix.srd * 2.0 * p * h_f.min(2.0) / h_f,
        point: mix.point * h_f * (fpr + PROBE_COST),
        range: mix.range * h_f,
    }
}

/// The h of [`CANDIDATES`] (at most `max_h`) with the least cost, and that cost.
pub fn choose(mix: Mix, pages: u64, fpr: f64, max_h: u32) -> TileCost {
    let mut best = cost(mix, pages, 1, fpr);
    for h in CANDIDATES.into_iter().filter(|&h| h <= max_h.max(1)) {
        let c = cost(mix, pages, h, fpr);
        if c.total() < best.total() {
            best = c;
        }
    }
    best
}

/// What a flush or compaction of one keyspace needs about its delete key.
#[derive(Debug, Clone)]
pub struct DeleteJob {
    /// The keyspace's configuration.
    pub config: DeleteConfig,
    /// The h of each level (the last entry serves deeper levels).
    pub h_by_level: Vec<u32>,
    /// Its secondary range deletes.
    pub records: Vec<DeleteWhere>,
    /// Every record at or below this seqno is in `records` (the seqno readers saw when
    /// the job's context was taken): what the job's outputs may claim applied
    /// ([`crate::version::FileMeta::deletes_applied`], invariant KR).
    pub applied_through: SeqNo,
}

impl DeleteJob {
    /// What an output of a merge that applied this job's records may claim in
    /// `deletes_applied`: `applied_through`, or less than the oldest record that kills
    /// a `Put` the merge kept (for a snapshot older than the record).
    pub fn applied(job: Option<&DeleteJob>, kept_killed: Option<SeqNo>) -> SeqNo {
        let Some(j) = job else {
            return 0;
        };
        kept_killed.map_or(j.applied_through, |k| j.applied_through.min(k.saturating_sub(1)))
    }

    /// The table options of output level `level`.
    pub fn tile_options(&self, level: usize) -> TileOptions {
        let h = match self.config.h {
            TileChoice::Fixed(h) => h,
            TileChoice::Auto => self
                .h_by_level
                .get(level)
                .or(self.h_by_level.last())
                .copied()
                .unwrap_or(1),
        };
        TileOptions {
            h,
            delete_key: Some(self.config.key),
        }
    }
}

/// Delete configurations of the keyspaces a job may write, by keyspace id.
pub type DeleteJobs = Arc<BTreeMap<u32, DeleteJob>>;

/// Pages a merge dropped unread and pages it read that a delete covered in part.
#[derive(Debug, Default)]
pub struct PageCounts {
    /// Pages skipped whole (invariant TP).
    pub dropped: AtomicU64,
    /// Pages not dropped whose delete-key range meets the newest secondary range delete.
    pub partial: AtomicU64,
}

/// The predicate a merge's oldest input applies to pages (invariant TP): true to skip.
/// `oldest_snapshot` is the smallest live snapshot, if any.
pub fn page_skipper(records: Vec<DeleteWhere>, oldest_snapshot: Option<SeqNo>, counts: Arc<PageCounts>) -> PageSkip {
    // Only records every reader sees can drop anything.
    let records: Vec<DeleteWhere> = records
        .into_iter()
        .filter(|r| oldest_snapshot.is_none_or(|s| s >= r.seq))
        .collect();
    let newest = records.iter().max_by_key(|r| r.seq).cloned();
    Arc::new(move |page: &PageMeta| {
        let Some((lo, hi)) = &page.dk else {
            return false;
        };
        let drop = page.whole && records.iter().any(|r| page.max_seq < r.seq && r.covers_all(lo, hi));
        if drop {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        } else if newest.as_ref().is_some_and(|r| r.meets(lo, hi)) {
            counts.partial.fetch_add(1, Ordering::Relaxed);
        }
        drop
    })
}

/// True if a file whose entries are at least as new as `min_seq` and whose pages
/// still read are `pages` (`None`: not tiled) may hold a `Put` that `r` kills
/// (invariant RG).
pub fn file_may_need<'a>(r: &DeleteWhere, min_seq: SeqNo, pages: Option<impl Iterator<Item = &'a PageMeta>>) -> bool {
    if min_seq >= r.seq {
        return false;
    }
    match pages {
        None => true,
        Some(mut pages) => pages.any(|p| p.dk.as_ref().is_some_and(|(lo, hi)| r.meets(lo, hi))),
    }
}

/// True if a file that claims `deletes_applied`, whose entries are at least as new as
/// `min_seq` and whose pages still read are `pages` (`None`: not tiled), may still hold
/// a `Put` that `r` kills (invariant KR).
pub fn owes<'a>(
    r: &DeleteWhere,
    deletes_applied: SeqNo,
    min_seq: SeqNo,
    pages: Option<impl Iterator<Item = &'a PageMeta>>,
) -> bool {
    r.seq > deletes_applied && file_may_need(r, min_seq, pages)
}

/// Finds the files that still owe a secondary range delete (invariant KR), for the
/// picker; the database implements it over its records and table cache.
pub trait KilledPuts: Send + Sync {
    /// True if keyspace `ks` has a record to apply.
    fn has_records(&self, ks: u32) -> bool;
    /// True if `file` of keyspace `ks` may still hold a `Put` that a record every
    /// reader sees kills.
    fn owed(&self, ks: u32, file: &crate::version::TableFile) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delete_key::DeleteKey;
    use crate::sstable::format::BlockHandle;

    #[test]
    fn the_model_trades_deletes_against_lookups() {
        // No secondary range deletes: h = 1 is cheapest.
        let reads = Mix {
            srd: 0.0,
            point: 0.5,
            range: 0.01,
        };
        assert_eq!(choose(reads, 1 << 14, 0.01, 256).h, 1);
        // Deletes only: the largest h allowed.
        let deletes = Mix {
            srd: 1e-5,
            point: 0.0,
            range: 0.0,
        };
        assert_eq!(choose(deletes, 1 << 14, 0.01, 64).h, 64);
        // The benchmark's mix picks something between, and more pages favour larger h.
        let mix = Mix {
            srd: 1e-5,
            point: 0.5,
            range: 0.01,
        };
        let small = choose(mix, 1 << 10, 0.01, 256).h;
        let large = choose(mix, 1 << 16, 0.01, 256).h;
        assert!(small < large && small >= 1 && large < 256, "{small} {large}");
        // h = 2 saves nothing on deletes over h = 1 (both ends of a range per tile).
        assert_eq!(cost(mix, 100, 1, 0.01).srd, cost(mix, 100, 2, 0.01).srd);
    }

    #[test]
    fn only_whole_covered_older_pages_are_skipped() {
        let page = |whole, dk: (u8, u8), max_seq| PageMeta {
            handle: BlockHandle::default(),
            first: crate::key::internal_key(b"a", 1, crate::key::ValueKind::Put),
            last: crate::key::internal_key(b"b", 1, crate::key::ValueKind::Put),
            max_seq,
            dk: Some((vec![dk.0], vec![dk.1])),
            whole,
            bloom: None,
        };
        let r = DeleteWhere {
            seq: 10,
            lo: vec![5],
            hi: vec![9],
        };
        let counts = Arc::new(PageCounts::default());
        let skip = page_skipper(vec![r.clone()], None, counts.clone());
        assert!(skip(&page(true, (5, 8), 9)));
        assert!(!skip(&page(false, (5, 8), 9)), "not whole");
        assert!(!skip(&page(true, (5, 9), 9)), "9 is outside [5, 9)");
        assert!(!skip(&page(true, (5, 8), 10)), "an entry as new as the delete");
        assert_eq!(counts.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(counts.partial.load(Ordering::Relaxed), 3, "met by the newest delete");
        let held = page_skipper(vec![r], Some(9), Arc::new(PageCounts::default()));
        assert!(!held(&page(true, (5, 8), 9)), "a snapshot before the delete");
        let job = DeleteJob {
            config: DeleteConfig {
                key: DeleteKey { offset: 0, width: 1 },
                h: TileChoice::Auto,
            },
            h_by_level: vec![1, 4],
            records: Vec::new(),
            applied_through: 0,
        };
        assert_eq!(job.tile_options(0).h, 1);
        assert_eq!(job.tile_options(5).h, 4);
    }

    #[test]
    fn outputs_claim_what_their_merge_applied() {
        use crate::compaction::rules::{Decision, DropRules};
        use crate::key::{ParsedKey, ValueKind};
        let job = DeleteJob {
            config: DeleteConfig {
                key: DeleteKey { offset: 0, width: 1 },
                h: TileChoice::Fixed(4),
            },
            h_by_level: Vec::new(),
            records: vec![DeleteWhere {
                seq: 10,
                lo: vec![5],
                hi: vec![9],
            }],
            applied_through: 12,
        };
        let put = |key: &'static [u8], seq| ParsedKey {
            user_key: key,
            seq,
            kind: ValueKind::Put,
        };
        // No snapshot between the put and the record: the put dies, the claim stands.
        let mut rules = DropRules::new(Vec::new(), true, false, Vec::new()).with_deletes(Some(&job));
        assert_eq!(rules.decide_value(&put(b"a", 3), &[6]), (Decision::DropTombstone, true));
        assert_eq!(
            rules.decide_value(&put(b"b", 4), &[9]),
            (Decision::Keep, false),
            "9 is outside"
        );
        assert_eq!(DeleteJob::applied(Some(&job), rules.kept_killed()), 12);
        // A snapshot at 5 still reads a put of 3: kept, and the record is not claimed.
        let mut rules = DropRules::new(vec![5], true, false, Vec::new()).with_deletes(Some(&job));
        assert_eq!(rules.decide_value(&put(b"a", 3), &[6]), (Decision::Keep, false));
        assert_eq!(rules.kept_killed(), Some(10));
        assert_eq!(DeleteJob::applied(Some(&job), rules.kept_killed()), 9);
        assert_eq!(DeleteJob::applied(None, None), 0, "no delete key: nothing claimed");
        // A file claiming 9 still owes the record at 10; one claiming 10 does not.
        let r = &job.records[0];
        let none: Option<std::slice::Iter<'_, PageMeta>> = None;
        assert!(owes(r, 9, 1, none.clone()));
        assert!(!owes(r, 10, 1, none));
    }

    #[test]
    fn a_record_is_needed_while_an_older_page_meets_its_range() {
        let r = DeleteWhere {
            seq: 10,
            lo: vec![5],
            hi: vec![9],
        };
        let page = |dk: Option<(u8, u8)>| PageMeta {
            handle: BlockHandle::default(),
            first: Vec::new(),
            last: Vec::new(),
            max_seq: 9,
            dk: dk.map(|(a, b)| (vec![a], vec![b])),
            whole: false,
            bloom: None,
        };
        let none: Option<std::slice::Iter<'_, PageMeta>> = None;
        assert!(!file_may_need(&r, 10, none.clone()), "every entry as new as the record");
        assert!(file_may_need(&r, 9, none), "an older untiled file");
        let pages = [page(None), page(Some((0, 4))), page(Some((9, 12)))];
        assert!(!file_may_need(&r, 1, Some(pages.iter())), "no page meets [5, 9)");
        let pages = [page(Some((0, 4))), page(Some((3, 5)))];
        assert!(file_may_need(&r, 1, Some(pages.iter())), "5 is in [5, 9)");
    }
}
