//! The rules by which a flush or compaction decides, entry by entry, what to keep.
//!
//! Entries arrive in internal-key order: per user key, newest seqno first, and at an
//! equal seqno a `DeferredDelete` before the `Put` it names. Live snapshots cut the
//! seqno axis into *stripes*; a reader in one stripe cannot tell two entries of the same
//! stripe apart, so only the newest entry of each stripe is needed:
//!
//! ```text
//!   snapshots:        s1=15            s2=40
//!   seqno axis:  ------|----------------|--------->
//!   stripe:        0   |       1        |    2
//!   key k:  Put@52 keep (newest in 2) | Put@45 drop (shadowed in 2)
//!           Del@30 keep (newest in 1) | Put@10 keep (newest in 0)
//! ```
//!
//! 0. **Copies**: an entry identical to the previous one (same key, seqno and kind, from
//!    another input) is dropped silently; deferred deletes can arrive twice.
//! 1. **Shadowed**: an entry older than a kept entry of the same stripe is dropped.
//!    A dropped `Put` is reported to the caller (deferred index maintenance turns it into
//!    secondary deletes). Shadowed *tombstones* are kept until the bottommost level in
//!    keyspaces that receive deferred deletes (`keep_shadowed_tombstones`): the newer
//!    entry that shadows them may itself be annihilated later by a deferred delete.
//! 2. **Range-deleted**: an entry covered by an input range tombstone with a higher
//!    seqno in the same stripe is dropped (and reported like a shadowed `Put`).
//! 3. **Bottommost tombstones**: a point tombstone (delete or deferred delete) that is
//!    the newest entry of stripe 0 is dropped when nothing older can exist below the
//!    compaction (`bottommost`); the entries it hid are shadowed and go too. This is how
//!    a `DeferredDelete(k, s)` and the `Put(k, s)` it names annihilate. Range tombstones
//!    in stripe 0 are dropped at the bottommost level likewise.
//!
//! 4. **Killed by a secondary range delete** ([`DropRules::decide_value`]): a `Put`
//!    that a delete-where record of the same stripe kills is decided as a point delete
//!    at its seqno: kept as a `Delete` until the bottommost level, then dropped with the
//!    versions it hides. Its `Put` is reported like a shadowed one.
//!
//! No rule trusts "newer run means newer entry": deferred deletes arrive late with old
//! seqnos, so every decision compares seqnos.

use crate::key::{ParsedKey, SeqNo, ValueKind};
use crate::range_tombstone::{RangeDelIndex, RangeTombstone};

/// What to do with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Write it to the output.
    Keep,
    /// Drop it; it was a `Put` whose version is now gone (report it).
    DropPut,
    /// Drop it silently (a tombstone that is no longer needed).
    DropTombstone,
}

/// Per-job state of the keep/drop rules.
#[derive(Debug)]
pub struct DropRules {
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    keep_shadowed_tombstones: bool,
    range_dels: Vec<RangeTombstone>,
    /// `range_dels` of each stripe, fragmented: rule 2 is a binary search per entry,
    /// where testing every tombstone made a merge entries x tombstones.
    range_dels_by_stripe: Vec<RangeDelIndex>,
    cur_key: Vec<u8>,
    has_key: bool,
    last_stripe: Option<usize>,
    /// Seqno and kind of the previous entry of `cur_key`.
    last_entry: Option<(SeqNo, ValueKind)>,
    /// The delete key and secondary range deletes to apply.
    deletes: Option<(crate::delete_key::DeleteKey, Vec<crate::delete_key::DeleteWhere>)>,
    /// The oldest record that kills a `Put` kept for a snapshot older than the record.
    kept_killed: Option<SeqNo>,
}

impl DropRules {
    /// `snapshots` must be sorted ascending; `range_dels` are all range tombstones of
    /// the inputs.
    pub fn new(
        snapshots: Vec<SeqNo>,
        bottommost: bool,
        keep_shadowed_tombstones: bool,
        range_dels: Vec<RangeTombstone>,
    ) -> Self {
        let mut by_stripe = vec![Vec::new(); if range_dels.is_empty() { 0 } else { snapshots.len() + 1 }];
        for t in &range_dels {
            by_stripe[snapshots.partition_point(|s| *s < t.seq)].push(t.clone());
        }
        let range_dels_by_stripe = by_stripe
            .into_iter()
            .map(|ts| RangeDelIndex::new(ts, SeqNo::MAX))
            .collect();
        DropRules {
            snapshots,
            bottommost,
            keep_shadowed_tombstones,
            range_dels,
            range_dels_by_stripe,
            cur_key: Vec::new(),
            has_key: false,
            last_stripe: None,
            last_entry: None,
            deletes: None,
            kept_killed: None,
        }
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|s| *s < seq)
    }

    /// A tombstone of the entry's stripe covers it with a higher seqno (rule 2).
    fn range_deleted(&self, key: &[u8], seq: SeqNo, stripe: usize) -> bool {
        self.range_dels_by_stripe
            .get(stripe)
            .is_some_and(|ix| ix.deletes(key, seq))
    }

    /// Decides the fate of the next entry (entries must come in internal-key order).
    pub fn decide(&mut self, p: &ParsedKey<'_>) -> Decision {
        if !self.has_key || self.cur_key.as_slice() != p.user_key {
            self.cur_key.clear();
            self.cur_key.extend_from_slice(p.user_key);
            self.has_key = true;
            self.last_stripe = None;
            self.last_entry = None;
        }
        // The same entry from two inputs (a deferred delete written by the purge thread
        // and again by a primary compaction): one copy is the entry, the other nothing.
        if self.last_entry.replace((p.seq, p.kind)) == Some((p.seq, p.kind)) {
            return Decision::DropTombstone;
        }
        let stripe = self.stripe(p.seq);
        let is_put = p.kind == ValueKind::Put;
        if !self.range_dels.is_empty() && self.range_deleted(p.user_key, p.seq, stripe) {
            return if is_put {
                Decision::DropPut
            } else {
                Decision::DropTombstone
            };
        }
        if self.last_stripe == Some(stripe) {
            return if is_put {
                Decision::DropPut
            } else if self.keep_shadowed_tombstones && !self.bottommost {
                Decision::Keep
            } else {
                Decision::DropTombstone
            };
        }
        self.last_stripe = Some(stripe);
        if !is_put && self.bottommost && stripe == 0 {
            return Decision::DropTombstone;
        }
        Decision::Keep
    }

    /// Secondary range deletes the merge applies, with the keyspace's delete key.
    pub fn with_deletes(mut self, deletes: Option<&super::tiles::DeleteJob>) -> Self {
        self.deletes = deletes.map(|d| (d.config.key, d.records.clone()));
        self
    }

    /// [`DropRules::decide`] for an entry with its value. A `Put` killed by a secondary
    /// range delete in its own stripe (every reader that sees the `Put` sees the delete)
    /// is decided as the point tombstone it reads as (invariant DW of
    /// [`crate::delete_key`]); the flag says so, and a `Keep` then means "write a
    /// `Delete` at its seqno".
    pub fn decide_value(&mut self, p: &ParsedKey<'_>, value: &[u8]) -> (Decision, bool) {
        let mut killed_elsewhere = None;
        if p.kind == ValueKind::Put
            && let Some((dk, records)) = &self.deletes
            && let Some(k) = dk.of(value)
        {
            let stripe = self.stripe(p.seq);
            let killers = records.iter().filter(|r| p.seq < r.seq && r.covers(k));
            if killers.clone().any(|r| self.stripe(r.seq) == stripe) {
                let as_delete = ParsedKey {
                    kind: ValueKind::Delete,
                    ..*p
                };
                return (self.decide(&as_delete), true);
            }
            killed_elsewhere = killers.map(|r| r.seq).min();
        }
        let d = self.decide(p);
        if let Some(k) = killed_elsewhere
            && d == Decision::Keep
        {
            self.kept_killed = Some(self.kept_killed.map_or(k, |o| o.min(k)));
        }
        (d, false)
    }

    /// The oldest record that kills a kept `Put` (one some snapshot still sees): the
    /// output cannot claim it applied (invariant KR of `compaction::tiles`).
    pub fn kept_killed(&self) -> Option<SeqNo> {
        self.kept_killed
    }

    /// Range tombstones the output must keep.
    pub fn surviving_range_dels(&self) -> Vec<RangeTombstone> {
        self.range_dels
            .iter()
            .filter(|t| !(self.bottommost && self.stripe(t.seq) == 0))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `testdata/compaction_rules/*`: a key's versions, snapshots, deferred deletes and
    /// range tombstones going into a merge, and what the merge keeps of them.
    ///
    /// ```text
    /// merge snapshots=(15,40) bottommost keep-shadowed-tombstones
    /// k@52 put
    /// k@7 ddel
    /// rangedel a-c@20
    /// ----
    /// (each entry in merge order, with its fate; the range tombstones kept)
    /// ```
    #[test]
    fn data_driven_merges() {
        datadriven::walk("testdata/compaction_rules", |f| f.run(merge_case));
    }

    fn merge_case(tc: &mut datadriven::TestCase) -> Result<String, String> {
        let e = |e: datadriven::DataDrivenError| e.to_string();
        if tc.directive != "merge" {
            return Err(format!("unknown directive {:?}", tc.directive));
        }
        let mut snapshots: Vec<SeqNo> = tc.try_take_args("snapshots").map_err(e)?.unwrap_or_default();
        snapshots.sort_unstable();
        let bottommost = tc.take_flag("bottommost").map_err(e)?;
        let keep_shadowed = tc.take_flag("keep-shadowed-tombstones").map_err(e)?;
        tc.expect_empty().map_err(e)?;
        let mut entries: Vec<(Vec<u8>, SeqNo, ValueKind)> = Vec::new();
        let mut range_dels = Vec::new();
        for line in tc.input.lines().map(str::trim).filter(|l| !l.is_empty()) {
            // `k@7 put`, or `rangedel a-c@20`.
            let (what, kind) = match line.strip_prefix("rangedel ") {
                Some(range) => (range, "rangedel"),
                None => line.split_once(' ').ok_or_else(|| format!("bad line {line:?}"))?,
            };
            let (key, seq) = what.rsplit_once('@').ok_or_else(|| format!("no @seq in {line:?}"))?;
            let seq: SeqNo = seq.parse().map_err(|_| format!("bad seqno in {line:?}"))?;
            match kind.trim() {
                "put" => entries.push((key.as_bytes().to_vec(), seq, ValueKind::Put)),
                "del" => entries.push((key.as_bytes().to_vec(), seq, ValueKind::Delete)),
                "ddel" => entries.push((key.as_bytes().to_vec(), seq, ValueKind::DeferredDelete)),
                "rangedel" => {
                    let (start, end) = key
                        .split_once('-')
                        .ok_or_else(|| format!("range needs a-b: {line:?}"))?;
                    range_dels.push(RangeTombstone {
                        start: start.as_bytes().to_vec(),
                        end: end.as_bytes().to_vec(),
                        seq,
                    });
                }
                k => return Err(format!("unknown kind {k:?}")),
            }
        }
        // Internal-key order: user key, then newest first, a deferred delete before the
        // put it names.
        entries.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.cmp(&a.1))
                .then((b.2 == ValueKind::DeferredDelete).cmp(&(a.2 == ValueKind::DeferredDelete)))
        });
        let mut rules = DropRules::new(snapshots, bottommost, keep_shadowed, range_dels);
        let mut out = String::new();
        for (key, seq, kind) in &entries {
            let d = rules.decide(&ParsedKey {
                user_key: key,
                seq: *seq,
                kind: *kind,
            });
            let kind = match kind {
                ValueKind::Put => "put",
                ValueKind::Delete => "del",
                ValueKind::DeferredDelete => "ddel",
            };
            let fate = match d {
                Decision::Keep => "keep",
                Decision::DropPut => "drop, version reported",
                Decision::DropTombstone => "drop",
            };
            out.push_str(&format!("{}@{seq} {kind}: {fate}\n", String::from_utf8_lossy(key)));
        }
        for t in rules.surviving_range_dels() {
            out.push_str(&format!(
                "rangedel {}-{}@{}: keep\n",
                String::from_utf8_lossy(&t.start),
                String::from_utf8_lossy(&t.end),
                t.seq
            ));
        }
        Ok(out)
    }

    fn p(k: &'static [u8], seq: SeqNo, kind: ValueKind) -> ParsedKey<'static> {
        ParsedKey { user_key: k, seq, kind }
    }

    #[test]
    fn newest_per_stripe_survives() {
        let mut r = DropRules::new(vec![15, 40], false, false, vec![]);
        assert_eq!(r.decide(&p(b"k", 52, ValueKind::Put)), Decision::Keep);
        assert_eq!(r.decide(&p(b"k", 45, ValueKind::Put)), Decision::DropPut);
        assert_eq!(r.decide(&p(b"k", 30, ValueKind::Delete)), Decision::Keep);
        assert_eq!(r.decide(&p(b"k", 10, ValueKind::Put)), Decision::Keep);
        assert_eq!(r.decide(&p(b"l", 9, ValueKind::Put)), Decision::Keep);
    }

    #[test]
    fn deferred_delete_annihilates_its_put_at_bottom() {
        let mut r = DropRules::new(vec![], true, true, vec![]);
        assert_eq!(
            r.decide(&p(b"k", 7, ValueKind::DeferredDelete)),
            Decision::DropTombstone
        );
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::Put)), Decision::DropPut);
        // Above the bottom the deferred delete stays, its put goes.
        let mut r = DropRules::new(vec![], false, true, vec![]);
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::DeferredDelete)), Decision::Keep);
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::Put)), Decision::DropPut);
    }

    #[test]
    fn an_entry_met_twice_is_written_once() {
        // Above the bottom, shadowed tombstones are kept; an identical copy is not one.
        let mut r = DropRules::new(vec![], false, true, vec![]);
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::DeferredDelete)), Decision::Keep);
        assert_eq!(
            r.decide(&p(b"k", 7, ValueKind::DeferredDelete)),
            Decision::DropTombstone
        );
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::Put)), Decision::DropPut);
        assert_eq!(r.decide(&p(b"k", 5, ValueKind::DeferredDelete)), Decision::Keep);
        // A copied put is no dropped version to report.
        let mut r = DropRules::new(vec![], false, false, vec![]);
        assert_eq!(r.decide(&p(b"l", 3, ValueKind::Put)), Decision::Keep);
        assert_eq!(r.decide(&p(b"l", 3, ValueKind::Put)), Decision::DropTombstone);
        assert_eq!(r.decide(&p(b"m", 3, ValueKind::Put)), Decision::Keep);
    }

    #[test]
    fn newer_put_is_untouched_by_older_deferred_delete() {
        let mut r = DropRules::new(vec![], false, true, vec![]);
        assert_eq!(r.decide(&p(b"k", 9, ValueKind::Put)), Decision::Keep);
        // Shadowed but kept: a later DeferredDelete(k, 9) must not expose an older put.
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::DeferredDelete)), Decision::Keep);
        assert_eq!(r.decide(&p(b"k", 7, ValueKind::Put)), Decision::DropPut);
    }

    #[test]
    fn range_tombstone_drops_covered_entries_in_its_stripe() {
        let rt = RangeTombstone {
            start: b"a".to_vec(),
            end: b"m".to_vec(),
            seq: 20,
        };
        let mut r = DropRules::new(vec![10], false, false, vec![rt]);
        assert_eq!(r.decide(&p(b"c", 15, ValueKind::Put)), Decision::DropPut);
        // Seq 5 is visible to snapshot 10, which the tombstone (20) is not.
        assert_eq!(r.decide(&p(b"c", 5, ValueKind::Put)), Decision::Keep);
        assert_eq!(r.decide(&p(b"z", 15, ValueKind::Put)), Decision::Keep);
        assert_eq!(r.surviving_range_dels().len(), 1);
        let r = DropRules::new(
            vec![],
            true,
            false,
            vec![RangeTombstone {
                start: b"a".to_vec(),
                end: b"b".to_vec(),
                seq: 3,
            }],
        );
        assert!(r.surviving_range_dels().is_empty());
    }

    proptest::proptest! {
        /// Rule 2 through the fragments answers as the definition does: some tombstone
        /// of the entry's stripe covers its key with a higher seqno.
        #[test]
        fn range_deleted_matches_the_definition(
            ts in proptest::collection::vec((0u8..10, 0u8..10, 1u64..40), 0..16),
            mut snapshots in proptest::collection::vec(1u64..40, 0..4),
            probes in proptest::collection::vec((0u8..11, 0u64..41), 1..32),
        ) {
            snapshots.sort_unstable();
            let ts: Vec<RangeTombstone> =
                ts.into_iter().map(|(a, b, seq)| RangeTombstone { start: vec![a], end: vec![b], seq }).collect();
            // A stripe: how many snapshots lie below the seqno (module docs).
            let stripe_of = |seq: u64| snapshots.iter().filter(|s| **s < seq).count();
            let r = DropRules::new(snapshots.clone(), false, false, ts.clone());
            for (key, seq) in probes {
                let stripe = stripe_of(seq);
                proptest::prop_assert_eq!(r.stripe(seq), stripe);
                let want = ts.iter().any(|t| t.seq > seq && t.contains(&[key]) && stripe_of(t.seq) == stripe);
                proptest::prop_assert_eq!(r.range_deleted(&[key], seq, stripe), want, "key {} seq {}", key, seq);
            }
        }
    }
}
