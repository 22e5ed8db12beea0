//! The read path: point lookups and range scans at a snapshot.
//!
//! Sources are consulted newest first: the active memtable, frozen memtables, then each
//! level's runs. A point lookup stops at the first source holding a put or delete for
//! the key: in a keyspace, every entry of a deeper source is older (invariants 2 and 3
//! of [`crate::version`]). A deferred delete
//! is the one exception (it carries the old seqno of the put it removes, and a newer put
//! may sit deeper), so after one the search goes on and keeps the highest seqno.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use super::{DbInner, KeyBatch, SuperVersion};
use crate::delete_key::Deletes;
use crate::error::Result;
use crate::iter::level::RunIter;
use crate::iter::merge::MergingIter;
use crate::iter::{Direction, InternalIterator};
use crate::key::{
    MAX_SEQNO, SeqNo, TRAILER_LEN, ValueKind, last_key_of, pack_trailer, parse_internal_key, put_seek_key, seek_key,
};
use crate::range_tombstone::{RangeDelIndex, RangeTombstone};

/// The newest entry of one key found so far.
struct Found {
    seq: SeqNo,
    kind: ValueKind,
    value: Vec<u8>,
}

/// What a point lookup expects to find, which decides whether the oldest run's filter
/// is worth probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Any key: every filter is probed.
    Any,
    /// A key that almost surely exists, as the row an index entry names. The oldest
    /// run's filter would answer "maybe" to it, at the cost of a cache miss, so that
    /// run's block is read without asking (RocksDB's `optimize_filters_for_hits` makes
    /// the same trade by not building the bottommost filters). Newer runs' filters
    /// still spare their blocks.
    Present,
}

impl DbInner {
    /// The visible value of `key` in keyspace `ks` at `snapshot`, plus the seqno of the
    /// version that produced it.
    pub fn get_versioned(&self, ks: u32, key: &[u8], snapshot: SeqNo) -> Result<Option<(SeqNo, Vec<u8>)>> {
        self.get_expecting(ks, key, snapshot, Expect::Any)
    }

    /// [`get_versioned`](Self::get_versioned) of a key expected as `expect` says.
    pub(crate) fn get_expecting(
        &self,
        ks: u32,
        key: &[u8],
        snapshot: SeqNo,
        expect: Expect,
    ) -> Result<Option<(SeqNo, Vec<u8>)>> {
        super::stats::Counters::add(&self.counters.point_reads, 1);
        let sv = self.current();
        get_in(&sv, &self.sst_cache, ks, key, snapshot, expect)
    }

    /// The latest visible value of `key`. The super version is taken before the seqno,
    /// so no version the read may need has been compacted away from the files it holds.
    /// A memtable frozen between the two loads leaves the writes after the freeze out of
    /// the super version although the seqno covers them: the answer is then the key's
    /// value as of the freeze, an earlier state, never a mix.
    pub fn get_latest(&self, ks: u32, key: &[u8]) -> Result<Option<(SeqNo, Vec<u8>)>> {
        super::stats::Counters::add(&self.counters.point_reads, 1);
        let sv = self.current();
        let snapshot = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        get_in(&sv, &self.sst_cache, ks, key, snapshot, Expect::Any)
    }

    /// The latest version of `key` when the memtables alone decide it, with no I/O:
    /// `Some(Some(value))` live, `Some(None)` deleted, `None` when its newest version
    /// (if any) is on disk.
    pub fn get_in_memtables(&self, ks: u32, key: &[u8]) -> Option<Option<(SeqNo, Vec<u8>)>> {
        let sv = self.current();
        let snapshot = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        let m = MemLookup::new(&sv, ks, key, snapshot);
        // A range tombstone in a memtable is newer than anything in older memtables and
        // on disk: it decides too.
        if !(m.decided || m.rt_seq.is_some()) {
            return None;
        }
        // An undecodable delete configuration sends the caller to the full read, which
        // reports it.
        let deletes = deletes_in(&sv, ks).ok()?;
        Some(not_killed(m.visible(), deletes.as_ref(), snapshot))
    }
}

/// The delete key and secondary range deletes of keyspace `ks` in `sv` (manifest and
/// memtables), or `None` when it declares no delete key or has no record.
pub(crate) fn deletes_in(sv: &SuperVersion, ks: u32) -> Result<Option<Deletes>> {
    if !sv.any_delete_key {
        return Ok(None);
    }
    let Some(config) = crate::delete_key::config_of(&sv.version.meta, ks)? else {
        return Ok(None);
    };
    let records = delete_wheres_in(sv, ks)?;
    Ok((!records.is_empty()).then_some(Deletes {
        key: config.key,
        config,
        records,
    }))
}

/// The secondary range delete records of keyspace `ks` in `sv`: the manifest's, then
/// each memtable's, unsorted.
pub(crate) fn delete_wheres_in(sv: &SuperVersion, ks: u32) -> Result<Vec<crate::delete_key::DeleteWhere>> {
    let mut records = crate::delete_key::records_of(&sv.version.meta, ks)?;
    for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        records.extend(m.delete_wheres(ks));
    }
    Ok(records)
}

/// `visible` unless a secondary range delete kills it (invariant DW of
/// [`crate::delete_key`]: a killed newest version hides the key).
fn not_killed(
    visible: Option<(SeqNo, Vec<u8>)>,
    deletes: Option<&Deletes>,
    snapshot: SeqNo,
) -> Option<(SeqNo, Vec<u8>)> {
    match (visible, deletes) {
        (Some((seq, v)), Some(d)) if d.kills(&v, seq, snapshot) => None,
        (v, _) => v,
    }
}

/// What the memtables (newest first) say about one key at a snapshot.
struct MemLookup {
    /// Newest entry found (a deferred delete does not end the search).
    best: Option<Found>,
    /// A put or delete was found: older memtables and the disk cannot matter.
    decided: bool,
    /// Newest range tombstone covering the key.
    rt_seq: Option<SeqNo>,
}

impl MemLookup {
    fn new(sv: &SuperVersion, ks: u32, key: &[u8], snapshot: SeqNo) -> Self {
        let mut m = MemLookup {
            best: None,
            decided: false,
            rt_seq: None,
        };
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if let Some(s) = mem.covering_range_delete(ks, key, snapshot) {
                m.rt_seq = Some(m.rt_seq.map_or(s, |r| r.max(s)));
            }
            if consider(mem.get(ks, key, snapshot), &mut m.best) {
                m.decided = true;
                break;
            }
        }
        m
    }

    /// The visible value once every source has been searched.
    fn visible(self) -> Option<(SeqNo, Vec<u8>)> {
        match self.best {
            Some(b) if b.kind == ValueKind::Put && self.rt_seq.is_none_or(|r| r <= b.seq) => Some((b.seq, b.value)),
            _ => None,
        }
    }
}

/// Keeps `e` in `best` if it is newer; true if it decides the key (anything but a
/// deferred delete).
fn consider(e: Option<(SeqNo, ValueKind, Vec<u8>)>, best: &mut Option<Found>) -> bool {
    let Some((seq, kind, value)) = e else { return false };
    let newer = best
        .as_ref()
        .is_none_or(|b| pack_trailer(seq, kind) > pack_trailer(b.seq, b.kind));
    if newer {
        *best = Some(Found { seq, kind, value });
    }
    kind != ValueKind::DeferredDelete
}

pub(crate) fn get_in(
    sv: &SuperVersion,
    sst_cache: &crate::sstable::cache::SstCache,
    ks: u32,
    key: &[u8],
    snapshot: SeqNo,
    expect: Expect,
) -> Result<Option<(SeqNo, Vec<u8>)>> {
    let Some(tree) = sv.version.keyspace(ks) else {
        return Err(crate::Error::NotFound(format!("keyspace id {ks} (dropped)")));
    };
    // The oldest run, (level, run), whose filter `Expect::Present` does not probe.
    let unfiltered = match expect {
        Expect::Any => None,
        Expect::Present => tree
            .levels
            .iter()
            .rposition(|l| !l.runs.is_empty())
            .map(|li| (li, tree.levels[li].runs.len() - 1)),
    };
    let mut m = MemLookup::new(sv, ks, key, snapshot);
    let note_rts = |ts: &[RangeTombstone], rt_seq: &mut Option<SeqNo>| {
        for t in ts {
            if t.seq <= snapshot && t.contains(key) {
                *rt_seq = Some(rt_seq.map_or(t.seq, |s| s.max(t.seq)));
            }
        }
    };
    if !m.decided {
        'levels: for (li, level) in tree.levels.iter().enumerate() {
            for (ri, run) in level.runs.iter().enumerate() {
                let filter = unfiltered != Some((li, ri));
                for f in run.files_for(key) {
                    let t = sst_cache.get(f.meta.number, f.meta.global_seq)?;
                    note_rts(t.range_tombstones(), &mut m.rt_seq);
                    if f.meta.min_seq > snapshot {
                        continue;
                    }
                    if consider(t.get_paged(key, snapshot, pages_of(f, sst_cache), filter)?, &mut m.best) {
                        break 'levels;
                    }
                }
            }
        }
    }
    let deletes = deletes_in(sv, ks)?;
    Ok(not_killed(m.visible(), deletes.as_ref(), snapshot))
}

/// How a point lookup reads `f`'s pages: through its page map, if it has one.
fn pages_of<'a>(
    f: &'a crate::version::TableFile,
    sst_cache: &'a crate::sstable::cache::SstCache,
) -> Option<crate::sstable::Pages<'a>> {
    (!f.meta.pages.is_empty()).then(|| crate::sstable::Pages {
        map: &f.meta.pages,
        patches: sst_cache,
    })
}

/// The bounds of a scan, shared by its cursors (and by the scans of a partitioned
/// select, one per partition) rather than copied into each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanRange {
    pub lower: Bound<Vec<u8>>,
    pub upper: Bound<Vec<u8>>,
    /// A prefix every key in the range starts with, when a file's filter can rule it
    /// out ([`BloomFilter::may_contain_prefix`]): such a file holds no key of the
    /// range, and a run of such files is left out of the scan.
    ///
    /// [`BloomFilter::may_contain_prefix`]: crate::sstable::bloom::BloomFilter::may_contain_prefix
    pub prefix: Option<Vec<u8>>,
}

impl ScanRange {
    pub(crate) fn new(range: impl KeyRange) -> Arc<ScanRange> {
        let (lower, upper) = range.into_bounds();
        Arc::new(ScanRange {
            lower,
            upper,
            prefix: None,
        })
    }
}

/// A visible entry: user key, the seqno of the version, value.
pub(crate) type Entry = (Vec<u8>, SeqNo, Vec<u8>);

/// Cursor over the visible entries of one keyspace at a snapshot, in one direction.
struct DirIter {
    merge: MergingIter,
    /// The one-run path (forward only): the range lies in one run of puts visible at
    /// the snapshot, with nothing deleting them, and this is that run's cursor (the
    /// merge is then empty). Steps take the first entry of each user key, unchecked
    /// (`step_plain`).
    run: Option<RunIter>,
    dir: Direction,
    /// `None`: no range tombstone deletes in the range at the snapshot (most scans; no
    /// shared empty index whose count every scan would bump).
    rdi: Option<Arc<RangeDelIndex>>,
    deletes: Option<Arc<Deletes>>,
    snapshot: SeqNo,
    range: Arc<ScanRange>,
    started: bool,
    done: bool,
    /// `key_buf` holds the user key of the entry returned last (where the other end of
    /// a double-ended scan must stop).
    has_key: bool,
    key_buf: Vec<u8>,
    /// A value buffer the steps read values into and get back when the value is not
    /// handed out (`visit_next`, a dead key, no value wanted), so that a run of visits
    /// reads its values into one allocation.
    spare: Vec<u8>,
    /// The one-run path's `PlainKeys::upper_lcp`.
    upper_lcp: usize,
}

fn in_upper(upper: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match upper {
        Bound::Unbounded => true,
        Bound::Included(u) => k <= u.as_slice(),
        Bound::Excluded(u) => k < u.as_slice(),
    }
}

fn in_lower(lower: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match lower {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
    }
}

/// What the one-run path does with an entry.
enum Plain {
    /// An older version of the key returned last, or a key below the lower bound.
    Skip,
    /// Past the upper bound: the scan is over.
    End,
    /// The first version of a new key in range: its answer, with this seqno.
    Take(SeqNo),
}

/// The one-run path's state besides the cursor: the bounds, and the key returned last.
struct PlainKeys<'a> {
    lower: &'a Bound<Vec<u8>>,
    upper: &'a Bound<Vec<u8>>,
    /// A key was taken. Until then, entries are judged by the bounds alone.
    has_key: &'a mut bool,
    /// The user key taken last: kept up to date only where a block walk stops (see
    /// `DirIter::walk_plain`); inside a walk, the entries themselves say whether a
    /// user key repeats.
    key_buf: &'a mut Vec<u8>,
    /// Length of the common prefix of the key taken last and the upper bound.
    upper_lcp: &'a mut usize,
}

/// What `DirIter::walk_plain` hands each live entry to: `take(user_key, seq, value)`,
/// false to stop. A trait rather than a closure so a keys-only walk is inlined into
/// the block walk (a closure there stayed a call per entry).
trait PlainSink {
    fn take(&mut self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> bool;
}

impl<F: FnMut(&[u8], SeqNo, &[u8]) -> bool> PlainSink for F {
    fn take(&mut self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> bool {
        self(user_key, seq, value)
    }
}

/// The one-run path of a keys-only read (`DirIter::fill` and `DirIter::for_each`):
/// each key, its first `cut` bytes cut off, goes to `emit` (false to stop) until the
/// key meets `other`, the other end's last key.
struct KeysSink<'b, E> {
    cut: usize,
    other: Option<&'b [u8]>,
    met: bool,
    emit: E,
}

impl<'b, E: FnMut(&[u8]) -> bool> KeysSink<'b, E> {
    fn new(cut: usize, other: Option<&'b [u8]>, emit: E) -> Self {
        KeysSink {
            cut,
            other,
            met: false,
            emit,
        }
    }
}

impl<E: FnMut(&[u8]) -> bool> PlainSink for KeysSink<'_, E> {
    #[inline(always)]
    fn take(&mut self, k: &[u8], _: SeqNo, _: &[u8]) -> bool {
        self.met = self.other.is_some_and(|o| k >= o);
        !self.met && (self.emit)(k.get(self.cut..).unwrap_or_default())
    }
}

/// Length of the common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PlainKeys<'_> {
    /// Judges internal key `ikey`.
    ///
    /// Every entry after the first taken one is judged in order, so the entry before
    /// it has the user key taken last (it was taken, or skipped as an older version of
    /// the one taken). `same` says whether `ikey`'s user key is that one (`None`:
    /// compare with `key_buf`). `shared` is how many leading bytes `ikey` shares with
    /// that entry (0 when unknown): a key sharing more than `upper_lcp` of them is
    /// below the upper bound as that one was.
    #[inline(always)]
    fn judge(&mut self, ikey: &[u8], same: Option<bool>, shared: usize) -> Plain {
        let uk = crate::key::user_key(ikey);
        if *self.has_key && same.unwrap_or_else(|| uk == self.key_buf.as_slice()) {
            // An older version of the key taken last (inside the range, then).
            return Plain::Skip;
        }
        if !(*self.has_key && shared.min(uk.len()) > *self.upper_lcp) {
            if !in_upper(self.upper, uk) {
                return Plain::End;
            }
            // Keys ascend: past the first taken one, the lower bound holds.
            if !*self.has_key && !in_lower(self.lower, uk) {
                return Plain::Skip;
            }
            // Only a key that differs from the bound within its own length speaks for
            // the keys after it; one that is the bound or a prefix of it does not (its
            // successors may extend it past the bound).
            *self.upper_lcp = match self.upper {
                Bound::Included(u) | Bound::Excluded(u) => Some(common_prefix(uk, u))
                    .filter(|&l| l < uk.len())
                    .unwrap_or(usize::MAX),
                Bound::Unbounded => usize::MAX,
            };
        }
        *self.has_key = true;
        let seq = ikey
            .get(uk.len()..)
            .and_then(|t| <[u8; TRAILER_LEN]>::try_from(t).ok())
            .map_or(0, |t| u64::from_be_bytes(t) >> 8);
        Plain::Take(seq)
    }

    /// Keeps `ikey`'s user key as the one taken last.
    fn remember(&mut self, ikey: &[u8]) {
        self.key_buf.clear();
        self.key_buf.extend_from_slice(crate::key::user_key(ikey));
    }
}

impl DirIter {
    fn killed(&self, value: &[u8], seq: SeqNo) -> bool {
        self.deletes
            .as_ref()
            .is_some_and(|d| d.kills(value, seq, self.snapshot))
    }

    fn in_upper(&self, k: &[u8]) -> bool {
        in_upper(&self.range.upper, k)
    }

    fn in_lower(&self, k: &[u8]) -> bool {
        in_lower(&self.range.lower, k)
    }

    /// The user key of the entry returned last, if any.
    fn last_key(&self) -> Option<&[u8]> {
        self.has_key.then_some(self.key_buf.as_slice())
    }

    /// Positions the merge on first use; false once the cursor is done.
    fn begin(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        if !self.started {
            self.start()?;
        }
        Ok(true)
    }

    fn start(&mut self) -> Result<()> {
        self.started = true;
        let DirIter {
            run,
            merge,
            range,
            key_buf,
            dir,
            ..
        } = self;
        // The target is built in `key_buf`, unused until the first entry, whose key it
        // then holds without growing again.
        let bounded = match (*dir, &range.lower, &range.upper) {
            (Direction::Forward, Bound::Included(l) | Bound::Excluded(l), _) => {
                put_seek_key(key_buf, l, MAX_SEQNO);
                true
            }
            (Direction::Reverse, _, Bound::Included(u) | Bound::Excluded(u)) => {
                *key_buf = last_key_of(u);
                true
            }
            _ => false,
        };
        // The one-run cursor exists only going forward.
        let r = match (run.as_mut(), bounded) {
            (Some(run), true) => run.seek(key_buf),
            (Some(run), false) => run.seek_to_first(),
            (None, true) => merge.seek(key_buf),
            (None, false) => merge.seek_to_start(),
        };
        key_buf.clear();
        r
    }

    /// Moves to the next visible entry, its user key left in `key_buf`; returns its
    /// seqno and value, or `None` at the end or once it reaches `other` (the key the
    /// other end of the scan returned last).
    fn step_to(&mut self, other: Option<&[u8]>) -> Result<Option<(SeqNo, Vec<u8>)>> {
        let step = match self.dir {
            Direction::Forward => self.step_forward(true)?,
            Direction::Reverse => self.step_reverse(true)?,
        };
        let Some((seq, value)) = step else { return Ok(None) };
        let value = value.unwrap_or_default();
        if crossed(self.dir, &self.key_buf, other) {
            self.spare = value;
            return Ok(None);
        }
        Ok(Some((seq, value)))
    }

    /// [`step_to`](Self::step_to), the entry owned.
    fn next_entry(&mut self, other: Option<&[u8]>) -> Result<Option<Entry>> {
        let step = self.step_to(other)?;
        Ok(step.map(|(seq, v)| (self.key_buf.clone(), seq, exact(v))))
    }

    /// [`step_to`](Self::step_to), the entry handed to `f` as key and value borrowed
    /// from this cursor (the value read into its spare buffer: no allocation per
    /// entry); false when there is none.
    fn visit_next(&mut self, other: Option<&[u8]>, f: &mut impl FnMut(&[u8], &[u8])) -> Result<bool> {
        let Some((_, value)) = self.step_to(other)? else {
            return Ok(false);
        };
        f(&self.key_buf, &value);
        self.spare = value;
        Ok(true)
    }

    /// Leaves `key_buf` as the key returned last: `has_key` (for the other end).
    fn taken<T>(&mut self, r: T) -> Result<Option<T>> {
        self.has_key = true;
        Ok(Some(r))
    }

    /// Moves to the next visible entry going forward, leaving its user key in
    /// `key_buf`; returns its seqno and, when `want_value`, its value.
    fn step_forward(&mut self, want_value: bool) -> Result<Option<(SeqNo, Option<Vec<u8>>)>> {
        if self.run.is_some() {
            return self.step_plain(want_value);
        }
        if !self.begin()? {
            return Ok(None);
        }
        while self.merge.valid() {
            let Some(p) = parse_internal_key(self.merge.key()) else {
                self.merge.advance()?;
                continue;
            };
            if !self.in_upper(p.user_key) {
                break;
            }
            if !self.in_lower(p.user_key) || p.seq > self.snapshot {
                self.merge.advance()?;
                continue;
            }
            // First visible entry of this user key: it decides.
            self.key_buf.clear();
            self.key_buf.extend_from_slice(p.user_key);
            let live = p.kind == ValueKind::Put
                && !self.rdi.as_deref().is_some_and(|r| r.deletes(p.user_key, p.seq))
                && !self.killed(self.merge.value(), p.seq);
            let seq = p.seq;
            let value = (live && want_value).then(|| copied(&mut self.spare, self.merge.value()));
            // Skip the rest of this user key.
            loop {
                self.merge.advance()?;
                if !self.merge.valid() {
                    break;
                }
                if crate::key::user_key(self.merge.key()) != self.key_buf.as_slice() {
                    break;
                }
            }
            if live {
                return self.taken((seq, value));
            }
        }
        self.done = true;
        Ok(None)
    }

    /// Adds the next live keys to `out`, each with its first `cut` bytes cut off
    /// (empty if shorter), until `out` is full, stopping before `other` (the key the
    /// other end of the scan read last). True when this cursor is over (nothing left,
    /// or it met the other end). Keys added before an error stay in `out`.
    fn fill(&mut self, cut: usize, out: &mut KeyBatch, other: Option<&[u8]>) -> Result<bool> {
        if self.run.is_some() {
            return self.fill_plain(cut, out, other);
        }
        while !out.is_full() {
            let step = match self.dir {
                Direction::Forward => self.step_forward(false)?,
                Direction::Reverse => self.step_reverse(false)?,
            };
            if step.is_none() || crossed(self.dir, &self.key_buf, other) {
                return Ok(true);
            }
            out.push(self.key_buf.get(cut..).unwrap_or_default());
        }
        Ok(false)
    }

    /// Hands `f` every live key left going forward, its first `cut` bytes cut off,
    /// stopping before `other` (the key the other end of the scan read last).
    fn for_each(&mut self, cut: usize, f: &mut impl FnMut(&[u8]), other: Option<&[u8]>) -> Result<()> {
        if self.run.is_some() {
            // The sink never stops the walk before the keys meet `other`, so one walk
            // reads to the end.
            self.walk_plain(&mut KeysSink::new(cut, other, |k| {
                f(k);
                true
            }))?;
            return Ok(());
        }
        while self.step_forward(false)?.is_some() && !crossed(Direction::Forward, &self.key_buf, other) {
            f(self.key_buf.get(cut..).unwrap_or_default());
        }
        Ok(())
    }

    /// `step_forward` on the one-run path: the next live entry, with its value when
    /// `want_value`.
    fn step_plain(&mut self, want_value: bool) -> Result<Option<(SeqNo, Option<Vec<u8>>)>> {
        let (mut got, mut spare) = (None, std::mem::take(&mut self.spare));
        self.walk_plain(&mut |_: &[u8], seq: SeqNo, v: &[u8]| {
            if want_value {
                spare.clear();
                spare.extend_from_slice(v);
            }
            got = Some(seq);
            false
        })?;
        Ok(match got {
            Some(seq) if want_value => Some((seq, Some(spare))),
            got => {
                self.spare = spare;
                got.map(|seq| (seq, None))
            }
        })
    }

    /// `fill` on the one-run path.
    fn fill_plain(&mut self, cut: usize, out: &mut KeyBatch, other: Option<&[u8]>) -> Result<bool> {
        let mut sink = KeysSink::new(cut, other, |k| {
            out.push(k);
            !out.is_full()
        });
        let over = self.walk_plain(&mut sink)?;
        Ok(over || sink.met)
    }

    /// The one-run path: a user key's entries are its versions newest first, all
    /// visible puts (no tombstone anywhere in range, no delete-where record), so the
    /// first entry of each user key is its answer and the others are skipped. Calls
    /// `take(user_key, seq, value)` on each live entry in turn until it returns false;
    /// true when the cursor is over. A data block's entries are judged in one loop on
    /// the block's own cursor (`BlockIter::walk`), without the run and table layers
    /// between.
    fn walk_plain(&mut self, sink: &mut impl PlainSink) -> Result<bool> {
        if !self.begin()? {
            return Ok(true);
        }
        let DirIter {
            run: Some(run),
            range,
            has_key,
            key_buf,
            upper_lcp,
            done,
            ..
        } = self
        else {
            return Ok(true);
        };
        let mut keys = PlainKeys {
            lower: &range.lower,
            upper: &range.upper,
            has_key,
            key_buf,
            upper_lcp,
        };
        let mut over = false;
        loop {
            if let Some((b, global_seq)) = run.block_mut() {
                // Every entry of the block is judged in turn, so `shared` is relative
                // to the entry judged before (a block starts with a restart point).
                let mut stop = false;
                b.walk(|w| {
                    let go_on = match keys.judge(w.key, w.same_user_key, w.shared) {
                        Plain::Skip => true,
                        Plain::End => {
                            over = true;
                            return false;
                        }
                        Plain::Take(seq) => sink.take(crate::key::user_key(w.key), global_seq.unwrap_or(seq), w.value),
                    };
                    // Where the walk stops, the next judges by `key_buf`.
                    if (w.last || !go_on) && *keys.has_key {
                        keys.remember(w.key);
                    }
                    stop = !go_on;
                    go_on
                })?;
                if over {
                    break;
                }
                if stop {
                    break;
                }
                // Past the block's end: the run moves to its next block, if any.
                run.next()?;
                continue;
            }
            // A tile: entry by entry through the run.
            if !run.valid() {
                over = true;
                break;
            }
            let go_on = match keys.judge(run.key(), None, 0) {
                Plain::Skip => true,
                Plain::End => {
                    over = true;
                    break;
                }
                Plain::Take(seq) => {
                    keys.remember(run.key());
                    sink.take(keys.key_buf.as_slice(), seq, run.value())
                }
            };
            run.next()?;
            if !go_on {
                break;
            }
        }
        *done |= over;
        Ok(over)
    }

    /// Moves to the next visible entry going backward, leaving its user key in
    /// `key_buf`; returns its seqno and, when `want_value`, its value.
    fn step_reverse(&mut self, want_value: bool) -> Result<Option<(SeqNo, Option<Vec<u8>>)>> {
        if !self.begin()? {
            return Ok(None);
        }
        // Going backwards a user key's versions arrive oldest first; the last visible
        // one seen before the key changes is the newest.
        while self.merge.valid() {
            let Some(p) = parse_internal_key(self.merge.key()) else {
                self.merge.advance()?;
                continue;
            };
            if !self.in_lower(p.user_key) {
                break;
            }
            if !self.in_upper(p.user_key) {
                self.merge.advance()?;
                continue;
            }
            self.key_buf.clear();
            self.key_buf.extend_from_slice(p.user_key);
            // A delete-where record judges a version by its value.
            let keep_value = want_value || self.deletes.is_some();
            let mut value = std::mem::take(&mut self.spare);
            value.clear();
            let mut newest: Option<(SeqNo, ValueKind)> = None;
            loop {
                if let Some(p) = parse_internal_key(self.merge.key()) {
                    if p.user_key != self.key_buf.as_slice() {
                        break;
                    }
                    if p.seq <= self.snapshot {
                        if keep_value {
                            value.clear();
                            value.extend_from_slice(self.merge.value());
                        }
                        newest = Some((p.seq, p.kind));
                    }
                }
                self.merge.advance()?;
                if !self.merge.valid() {
                    break;
                }
            }
            if let Some((seq, ValueKind::Put)) = newest
                && !self.rdi.as_deref().is_some_and(|r| r.deletes(&self.key_buf, seq))
                && !self.killed(&value, seq)
            {
                if want_value {
                    return self.taken((seq, Some(value)));
                }
                self.spare = value;
                return self.taken((seq, None));
            }
            self.spare = value;
        }
        self.done = true;
        Ok(None)
    }
}

/// A range scan over one keyspace at a snapshot. Iterates forward; `.rev()` (or
/// `next_back`) iterates backward; both ends may be used and meet in the middle.
/// Items are `(key, value)` pairs; a read error ends the scan after being yielded.
pub struct Scan {
    sv: Arc<SuperVersion>,
    sst_cache: Arc<crate::sstable::cache::SstCache>,
    ks: u32,
    snapshot: SeqNo,
    range: Arc<ScanRange>,
    /// Bit i: the i-th run the keyspace's tree lists (levels in order, each's runs
    /// newest first; the first 64) is left out, its files ruled out by the range's
    /// prefix (`ScanRange::prefix`).
    skip_runs: u64,
    /// Seen to be empty before any block is read (`holds_nothing`).
    empty: bool,
    /// As `DirIter::rdi`.
    rdi: Option<Arc<RangeDelIndex>>,
    deletes: Option<Arc<Deletes>>,
    front: Option<Box<DirIter>>,
    back: Option<Box<DirIter>>,
    /// A short prefix scan's live entries, read when the scan was made
    /// (`Scan::read_whole`): both ends take from here, and no cursor is built.
    whole: Option<VecDeque<Entry>>,
    finished: bool,
    _snapshot_guard: Option<super::Snapshot>,
}

/// The most entries a prefix scan reads whole when it is made (`Scan::read_whole`).
const WHOLE_MAX: usize = 32;

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("keyspace", &self.ks)
            .field("snapshot", &self.snapshot)
            .finish()
    }
}

impl Scan {
    pub(crate) fn new(
        inner: &DbInner,
        ks: u32,
        snapshot: SeqNo,
        range: Arc<ScanRange>,
        guard: Option<super::Snapshot>,
    ) -> Result<Scan> {
        let sv = inner.current();
        if sv.version.keyspace(ks).is_none() {
            return Err(crate::Error::NotFound(format!("keyspace id {ks} (dropped)")));
        }
        let mut rts: Vec<RangeTombstone> = Vec::new();
        for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            rts.extend(m.range_tombstones(ks));
        }
        let (lo, hi) = (bound_ref(&range.lower), bound_ref(&range.upper));
        // Whether a memtable holds an entry in the range: only a prefix scan looks.
        let (mut skip_runs, mut empty, mut in_memtables) = (0, false, true);
        if let Some(tree) = sv.version.keyspace(ks) {
            // Range tombstones come from every file, left-out runs included.
            for f in tree.files() {
                if f.meta.range_tombstones > 0 && f.overlaps(lo, hi) {
                    let t = inner.sst_cache.get(f.meta.number, f.meta.global_seq)?;
                    rts.extend(t.range_tombstones().iter().cloned());
                }
            }
            if let Some(prefix) = &range.prefix {
                let kept_runs;
                (skip_runs, kept_runs) = runs_ruled_out(tree, &inner.sst_cache, lo, hi, prefix)?;
                in_memtables = std::iter::once(&sv.mem)
                    .chain(sv.imm.iter())
                    .any(|m| m.has_entries() && range_holds(&range, &mut m.iter(ks)));
                empty = kept_runs == 0 && !in_memtables;
            }
        }
        // A scan the filters answered read nothing: not a range read for the workload
        // mix the delete tiles are planned by (`DbInner::tile_plan`).
        if !empty {
            super::stats::Counters::add(&inner.counters.range_reads, 1);
        }
        let rdi = if rts.is_empty() {
            None
        } else {
            Some(RangeDelIndex::new(rts, snapshot)).filter(|r| !r.is_empty())
        };
        let mut scan = Scan {
            rdi: rdi.map(Arc::new),
            deletes: deletes_in(&sv, ks)?.map(Arc::new),
            sst_cache: inner.sst_cache.clone(),
            sv,
            ks,
            snapshot,
            range,
            skip_runs,
            empty,
            front: None,
            back: None,
            whole: None,
            finished: false,
            _snapshot_guard: guard,
        };
        if scan.range.prefix.is_some() && !empty && !in_memtables {
            scan.read_whole()?;
        }
        Ok(scan)
    }

    /// Reads the live entries of a prefix scan whose range lies in one run of visible
    /// puts (the one-run path, `DirIter::step_plain`) into `whole`, when there are at
    /// most `WHOLE_MAX`: an equality select's few matches, in most partitions of a
    /// scatter-gather. Read at once, they spare the scan a cursor kept between steps,
    /// which costs more to build, step and drop than the entries themselves. Otherwise
    /// the scan reads through its cursors: off the one-run path, the cursor made here
    /// is kept as the front one; past `WHOLE_MAX` entries a new one reads the first
    /// entries again, which the prefix's other entries outweigh.
    fn read_whole(&mut self) -> Result<()> {
        let mut it = self.make(Direction::Forward);
        if it.run.is_none() {
            self.front = Some(Box::new(it));
            return Ok(());
        }
        // Room for an equality select's usual few, in a request the allocator's
        // per-thread cache serves.
        let mut whole = VecDeque::with_capacity(16);
        let mut full = false;
        it.walk_plain(&mut |k: &[u8], seq: SeqNo, v: &[u8]| {
            full = whole.len() == WHOLE_MAX;
            if !full {
                whole.push_back((k.to_vec(), seq, v.to_vec()));
            }
            !full
        })?;
        if !full {
            self.whole = Some(whole);
        }
        Ok(())
    }

    /// Makes the cursor of `dir` on first use.
    fn make_if_absent(&mut self, dir: Direction) {
        let cursor = match dir {
            Direction::Forward => &self.front,
            Direction::Reverse => &self.back,
        };
        if cursor.is_none() {
            let made = self.make(dir);
            match dir {
                Direction::Forward => self.front = Some(Box::new(made)),
                Direction::Reverse => self.back = Some(Box::new(made)),
            }
        }
    }

    fn make(&self, dir: Direction) -> DirIter {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for m in std::iter::once(&self.sv.mem).chain(self.sv.imm.iter()) {
            if !m.has_entries() {
                continue;
            }
            let mut it = m.iter(self.ks);
            // A memtable with nothing in the range adds nothing to the merge (its range
            // tombstones are in `rdi` already).
            if range_holds(&self.range, &mut it) {
                children.push(Box::new(it));
            }
        }
        // One run (of those the range meets, less those left out) of puts all visible
        // at the snapshot, and nothing that deletes: every user key's first entry is its
        // answer (`DirIter::step_plain`). A second run sends both to the merge.
        let may_be_plain =
            dir == Direction::Forward && children.is_empty() && self.rdi.is_none() && self.deletes.is_none();
        let mut run: Option<RunIter> = None;
        for files in self.runs_in_range() {
            let it = RunIter::new(files, self.sst_cache.clone());
            // A patched page may hold `Delete`s that files patched before their count
            // was kept (`db::patch`) do not count: those files go to the merge.
            let puts_visible = files.iter().all(|f| {
                f.meta.tombstones == 0
                    && f.meta.pages.patched.is_empty()
                    && f.meta.global_seq.unwrap_or(f.meta.max_seq) <= self.snapshot
            });
            if may_be_plain && puts_visible && run.is_none() && children.is_empty() {
                run = Some(it);
            } else {
                if let Some(first) = run.take() {
                    children.push(Box::new(first));
                }
                children.push(Box::new(it));
            }
        }
        DirIter {
            merge: MergingIter::new(children, dir),
            run,
            dir,
            rdi: self.rdi.clone(),
            deletes: self.deletes.clone(),
            snapshot: self.snapshot,
            range: self.range.clone(),
            started: false,
            done: false,
            has_key: false,
            key_buf: Vec::new(),
            spare: Vec::new(),
            upper_lcp: 0,
        }
    }

    /// The files of each run the scan reads, in the tree's order: those in the range, of
    /// the runs not left out.
    fn runs_in_range(&self) -> impl Iterator<Item = &[Arc<crate::version::TableFile>]> {
        let (lo, hi) = (bound_ref(&self.range.lower), bound_ref(&self.range.upper));
        self.sv
            .version
            .keyspace(self.ks)
            .into_iter()
            .flat_map(|tree| tree.levels.iter().flat_map(|l| l.runs.iter()))
            .enumerate()
            .filter(|(i, _)| *i >= 64 || self.skip_runs & (1 << i) == 0)
            .map(move |(_, run)| run.overlapping_slice(lo, hi))
            .filter(|files| !files.is_empty())
    }

    /// Whether the scan is seen to be empty when made: no memtable has an entry in its
    /// range, and every run that has files there is left out (which only a prefix
    /// does, `ScanRange::prefix`), or it was read whole and nothing is live. Lets a
    /// select skip a partition holding no entry with its value.
    pub(crate) fn holds_nothing(&self) -> bool {
        self.empty || self.whole.as_ref().is_some_and(VecDeque::is_empty)
    }

    /// The snapshot seqno this scan reads at.
    pub fn snapshot_seq(&self) -> SeqNo {
        self.snapshot
    }
}

/// Whether memtable cursor `it` has an entry (any version) inside `range`.
fn range_holds(range: &ScanRange, it: &mut dyn InternalIterator) -> bool {
    let sought = match &range.lower {
        Bound::Unbounded => it.seek_to_first(),
        Bound::Included(l) | Bound::Excluded(l) => it.seek(&seek_key(l, MAX_SEQNO)),
    };
    // An error keeps the source, whose merge then reports it.
    sought.is_err() || (it.valid() && in_upper(&range.upper, crate::key::user_key(it.key())))
}

/// [`Scan::skip_runs`] for `prefix`, and how many runs with files in the range
/// `lo..=hi` are kept: bit i set when the i-th run of `tree` (of the first 64) has
/// files there and each one's filter rules out every key starting with `prefix`. A
/// file without a filter, or whose filter cannot answer for a prefix, keeps its run.
/// The current files hold every version a live snapshot sees, so what they rule out
/// holds at any of them.
fn runs_ruled_out(
    tree: &crate::version::KeyspaceVersion,
    sst_cache: &crate::sstable::cache::SstCache,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    prefix: &[u8],
) -> Result<(u64, usize)> {
    let (mut mask, mut kept) = (0, 0);
    for (i, run) in tree.levels.iter().flat_map(|l| &l.runs).enumerate() {
        let files = run.overlapping_slice(lo, hi);
        if files.is_empty() {
            continue;
        }
        let mut out = i < 64;
        let mut files = files.iter();
        while out && let Some(f) = files.next() {
            let t = sst_cache.get(f.meta.number, f.meta.global_seq)?;
            out = t.filter().is_some_and(|filter| !filter.may_contain_prefix(prefix));
        }
        if out {
            mask |= 1 << i;
        } else {
            kept += 1;
        }
    }
    Ok((mask, kept))
}

fn bound_ref(b: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => Some(v.as_slice()),
        Bound::Unbounded => None,
    }
}

impl Scan {
    /// The next entry from the front, with the seqno of its visible version.
    pub(crate) fn next_versioned(&mut self) -> Option<Result<Entry>> {
        self.step(Direction::Forward)
    }

    /// The next entry from the back, with the seqno of its visible version.
    pub(crate) fn next_back_versioned(&mut self) -> Option<Result<Entry>> {
        self.step(Direction::Reverse)
    }

    /// Hands up to `max` entries from the front to `f`, in order, each key and value
    /// borrowed for the call, and returns how many it handed: fewer than `max` only
    /// once the scan is over. These are the entries `next` would return, without an
    /// allocation for each (the values share one buffer), for callers that copy them
    /// elsewhere anyway, such as a language binding. An error ends the scan: it is
    /// returned once the entries before it were handed to `f`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = strata::Db::open(dir.path(), strata::Options::default())?;
    /// for k in ["a", "b", "c"] {
    ///     db.put(k.as_bytes(), k.repeat(2).as_bytes())?;
    /// }
    /// let mut scan = db.scan(..)?;
    /// let mut seen = Vec::new();
    /// let mut take = |k: &[u8], v: &[u8]| seen.push((k.to_vec(), v.to_vec()));
    /// assert_eq!(scan.next_run(2, &mut take)?, 2);
    /// assert_eq!(scan.next_back_run(10, &mut take)?, 1); // the two ends meet
    /// assert_eq!(scan.next_run(10, &mut take)?, 0);
    /// assert_eq!(seen[2], (b"c".to_vec(), b"cc".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_run(&mut self, max: usize, mut f: impl FnMut(&[u8], &[u8])) -> Result<usize> {
        self.visit_run(Direction::Forward, max, &mut f)
    }

    /// [`next_run`](Self::next_run) from the back: entries in descending key order.
    pub fn next_back_run(&mut self, max: usize, mut f: impl FnMut(&[u8], &[u8])) -> Result<usize> {
        self.visit_run(Direction::Reverse, max, &mut f)
    }

    fn visit_run(&mut self, dir: Direction, max: usize, f: &mut impl FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut n = 0;
        while n < max && self.visit(dir, f)? {
            n += 1;
        }
        Ok(n)
    }

    /// The next entry from `dir`'s end handed to `f`, as `step` returns it; false once
    /// the scan is over.
    fn visit(&mut self, dir: Direction, f: &mut impl FnMut(&[u8], &[u8])) -> Result<bool> {
        if self.finished {
            return Ok(false);
        }
        if let Some(whole) = self.whole.as_mut() {
            let e = take_end(whole, dir);
            self.finished = e.is_none();
            return Ok(e.map(|(k, _, v)| f(&k, &v)).is_some());
        }
        let (Some(it), other) = self.cursor(dir) else {
            return Ok(false);
        };
        let r = it.visit_next(other, f);
        if !matches!(r, Ok(true)) {
            self.finished = true;
        }
        r
    }

    /// Adds the next live keys in direction `dir` to `out`, without their values
    /// (multimaps, whose entries are all key) and each with its first `cut` bytes cut
    /// off (empty if shorter), until `out` is full: at least one unless the scan is
    /// over. The two ends stop where they meet, as with `next`/`next_back`: a key is
    /// added by one end only, so once the scan is over, what the other end's batch
    /// still holds is all that is left. An error ends the scan; keys added before it
    /// stay in `out`.
    pub(crate) fn fill_keys(&mut self, dir: Direction, cut: usize, out: &mut KeyBatch) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Some(whole) = self.whole.as_mut() {
            while !out.is_full() {
                let Some((k, ..)) = take_end(whole, dir) else {
                    self.finished = true;
                    break;
                };
                out.push(k.get(cut..).unwrap_or_default());
            }
            return Ok(());
        }
        let (Some(it), other) = self.cursor(dir) else {
            return Ok(());
        };
        let r = it.fill(cut, out, other);
        if !matches!(r, Ok(false)) {
            self.finished = true;
        }
        r.map(drop)
    }

    /// Hands `f` every live key left from the front, without its value and with its
    /// first `cut` bytes cut off, in order, up to where the back end stopped (as
    /// `fill_keys` from the front until the scan is over, without a batch between:
    /// each key is borrowed from the block cursor for the call). The scan is then over.
    /// An error ends the scan, after the keys before it.
    pub(crate) fn for_each_key(&mut self, cut: usize, f: &mut impl FnMut(&[u8])) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Some(whole) = self.whole.take() {
            self.finished = true;
            whole.iter().for_each(|(k, ..)| f(k.get(cut..).unwrap_or_default()));
            return Ok(());
        }
        self.make_if_absent(Direction::Forward);
        let Some(it) = self.front.as_mut() else { return Ok(()) };
        let r = it.for_each(cut, f, self.back.as_deref().and_then(DirIter::last_key));
        self.finished = true;
        r
    }

    /// One step of the cursor of `dir`; the scan ends where the two ends meet.
    fn step(&mut self, dir: Direction) -> Option<Result<Entry>> {
        if self.finished {
            return None;
        }
        if let Some(whole) = self.whole.as_mut() {
            let e = take_end(whole, dir);
            self.finished = e.is_none();
            return e.map(Ok);
        }
        let (it, other) = self.cursor(dir);
        let r = it?.next_entry(other).transpose();
        if !matches!(r, Some(Ok(_))) {
            self.finished = true;
        }
        r
    }

    /// The cursor of `dir`'s end, made on first use, and the key the other end
    /// returned last (where this one must stop).
    fn cursor(&mut self, dir: Direction) -> (Option<&mut DirIter>, Option<&[u8]>) {
        self.make_if_absent(dir);
        let (it, other) = match dir {
            Direction::Forward => (&mut self.front, &self.back),
            Direction::Reverse => (&mut self.back, &self.front),
        };
        (it.as_deref_mut(), other.as_deref().and_then(DirIter::last_key))
    }
}

/// `v` without the spare room a reused buffer may have kept from a longer value (an
/// older version, an earlier key): an entry handed out owns no more than it holds.
fn exact(mut v: Vec<u8>) -> Vec<u8> {
    if v.capacity() > v.len().saturating_mul(2).max(64) {
        v.shrink_to_fit();
    }
    v
}

/// `v` in `spare`'s allocation (taken from it), so that a cursor handed its value
/// buffers back reads values without allocating.
fn copied(spare: &mut Vec<u8>, v: &[u8]) -> Vec<u8> {
    let mut out = std::mem::take(spare);
    out.clear();
    out.extend_from_slice(v);
    out
}

/// The entry at the end of `whole` a cursor of `dir` would read next.
fn take_end(whole: &mut VecDeque<Entry>, dir: Direction) -> Option<Entry> {
    match dir {
        Direction::Forward => whole.pop_front(),
        Direction::Reverse => whole.pop_back(),
    }
}

/// Whether `key`, just stepped to in direction `dir`, reaches `other`, the key the
/// other end returned last (the two ends of a scan stop where they meet).
fn crossed(dir: Direction, key: &[u8], other: Option<&[u8]>) -> bool {
    other.is_some_and(|o| match dir {
        Direction::Forward => key >= o,
        Direction::Reverse => key <= o,
    })
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_versioned().map(|r| r.map(|(k, _, v)| (k, v)))
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_back_versioned().map(|r| r.map(|(k, _, v)| (k, v)))
    }
}

impl std::iter::FusedIterator for Scan {}

/// A range of keys for scans: `..`, `a..b`, `a..=b`, `a..`, `..b`, `..=b`, or a pair of
/// [`Bound`]s, with any byte-like key type (`&[u8]`, `Vec<u8>`, `&str`, `b"..."`).
pub trait KeyRange {
    /// The range as owned bounds.
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>);
}

fn own<K: AsRef<[u8]>>(b: Bound<K>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl KeyRange for std::ops::RangeFull {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::Range<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (own(Bound::Included(self.start)), own(Bound::Excluded(self.end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeInclusive<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let (s, e) = self.into_inner();
        (own(Bound::Included(s)), own(Bound::Included(e)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeFrom<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (own(Bound::Included(self.start)), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeTo<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, own(Bound::Excluded(self.end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeToInclusive<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, own(Bound::Included(self.end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (own(self.0), own(self.1))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU8;

    use super::*;
    use crate::sstable::FilterKey;
    use crate::{Db, Options};

    fn prefixed(p: &[u8]) -> Arc<ScanRange> {
        let mut upper = p.to_vec();
        if let Some(last) = upper.last_mut() {
            *last += 1;
        }
        Arc::new(ScanRange {
            lower: Bound::Included(p.to_vec()),
            upper: Bound::Excluded(upper),
            prefix: Some(p.to_vec()),
        })
    }

    /// A scan's upper bound holds for keys that extend the last key taken: with the
    /// bound that key itself, or a key it is a prefix of, the next key shares more
    /// bytes with it than it does with the bound, yet lies past the bound.
    #[test]
    fn keys_extending_the_bound_stay_outside_it() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let ks = db.create_keyspace("k")?;
        for k in [&b"a"[..], b"a\0", b"a\0\x01", b"a\0\x02", b"a\0b", b"b"] {
            ks.put(k, k)?;
        }
        // One run and an empty memtable: the one-run path.
        db.flush()?;
        let keys = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| -> Result<Vec<Vec<u8>>> {
            let range = (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec));
            let mut each = Vec::new();
            ks.scan(range.clone())?
                .for_each_key(0, &mut |k| each.push(k.to_vec()))?;
            let got: Vec<Vec<u8>> = ks.scan(range)?.map(|e| e.map(|(k, _)| k)).collect::<Result<_>>()?;
            assert_eq!(each, got);
            Ok(got)
        };
        let v = |ks: &[&[u8]]| ks.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
        use Bound::{Excluded, Included, Unbounded};
        assert_eq!(keys(Unbounded, Included(b"a"))?, v(&[b"a"]));
        assert_eq!(keys(Unbounded, Excluded(b"a\0\x01"))?, v(&[b"a", b"a\0"]));
        assert_eq!(keys(Unbounded, Included(b"a\0\x01"))?, v(&[b"a", b"a\0", b"a\0\x01"]));
        assert_eq!(keys(Included(b"a\0"), Excluded(b"a\0\x02"))?, v(&[b"a\0", b"a\0\x01"]));
        assert_eq!(keys(Unbounded, Excluded(b"a\0b"))?.len(), 4);
        Ok(())
    }

    /// A database whose flushes stay separate level-0 runs (no compaction), with
    /// keyspace "k".
    fn open_keeping_runs(dir: &std::path::Path) -> Result<(Db, crate::Keyspace)> {
        let opts = Options {
            l0_compaction_trigger: 100,
            l0_stall_trigger: 200,
            ..Options::default()
        };
        let db = Db::open(dir, opts)?;
        let ks = db.create_keyspace("k")?;
        Ok((db, ks))
    }

    /// Runs are left out by what their filters hold, which is every key a file has,
    /// tombstones included: a newer run holding only a delete of a key with the prefix
    /// is read (the delete hides the older put), a run holding no key with it is not.
    #[test]
    fn a_run_holding_only_a_tombstone_is_not_left_out() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, ks) = open_keeping_runs(dir.path())?;
        ks.set_filter_key(FilterKey::Fixed(NonZeroU8::MIN.saturating_add(1)))?;
        // Run 1: keys "a0" .. "a9", each with 10 suffixes.
        for i in 0..100u8 {
            ks.put(&[b'a', b'0' + i % 10, i], b"v")?;
        }
        db.flush()?;
        // Run 2: only a delete under "a3"; run 3: only a key under "b0".
        ks.delete(&[b'a', b'3', 13])?;
        db.flush()?;
        ks.put(b"b0x", b"v")?;
        db.flush()?;
        let snap = db.snapshot();
        let keys = |p: &[u8]| -> Result<(bool, Vec<Vec<u8>>)> {
            let scan = snap.scan_shared(&ks, prefixed(p))?;
            let empty = scan.holds_nothing();
            let keys = scan.map(|r| r.map(|(k, _)| k)).collect::<Result<_>>()?;
            Ok((empty, keys))
        };
        let want: Vec<Vec<u8>> = (0..100u8)
            .filter(|i| i % 10 == 3 && *i != 13)
            .map(|i| vec![b'a', b'3', i])
            .collect();
        assert_eq!(keys(b"a3")?, (false, want));
        assert_eq!(keys(b"b0")?, (false, vec![b"b0x".to_vec()]));
        // Under "c1" every run is left out; "a9" meets only run 1.
        assert_eq!(keys(b"c1")?, (true, vec![]));
        let scan = snap.scan_shared(&ks, prefixed(b"a9"))?;
        assert_eq!(scan.runs_in_range().count(), 1);
        Ok(())
    }

    /// A lookup expecting its key reads the oldest run's block without asking its
    /// filter, and finds what any lookup finds: keys in newer runs (whose filters are
    /// still asked), deleted ones, and absent ones, which then cost a block read where
    /// the filter would have spared it.
    #[test]
    fn a_lookup_expecting_its_key_skips_only_the_oldest_runs_filter() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, ks) = open_keeping_runs(dir.path())?;
        let key = |i: u32| format!("key{i:05}").into_bytes();
        // The oldest run: even keys; a newer one: a few odd keys and deletes of evens.
        for i in (0..400).step_by(2) {
            ks.put(&key(i), b"old")?;
        }
        db.flush()?;
        for i in (1..100).step_by(20) {
            ks.put(&key(i), b"new")?;
        }
        for i in (0..100).step_by(40) {
            ks.delete(&key(i))?;
        }
        db.flush()?;
        let inner = db.inner();
        let seq = inner.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        for i in 0..400 {
            let any = inner.get_expecting(ks.id(), &key(i), seq, Expect::Any)?;
            let present = inner.get_expecting(ks.id(), &key(i), seq, Expect::Present)?;
            assert_eq!(present, any, "key {i}");
            let want = if i < 100 && i % 40 == 0 {
                None
            } else if i < 100 && i % 20 == 1 {
                Some(b"new".to_vec())
            } else if i % 2 == 0 {
                Some(b"old".to_vec())
            } else {
                None
            };
            assert_eq!(present.map(|(_, v)| v), want, "key {i}");
        }
        // Absent keys past the newer run's range, inside the oldest's: that run's
        // filter turns nearly all of them away, unless it is skipped.
        let block_reads = || {
            let s = db.stats();
            s.block_cache_hits + s.block_cache_misses
        };
        let absent: Vec<Vec<u8>> = (100..198).map(|i| format!("key{:05}x", 2 * i).into_bytes()).collect();
        let before = block_reads();
        for k in &absent {
            assert_eq!(inner.get_expecting(ks.id(), k, seq, Expect::Any)?, None);
        }
        let asked = block_reads() - before;
        let before = block_reads();
        for k in &absent {
            assert_eq!(inner.get_expecting(ks.id(), k, seq, Expect::Present)?, None);
        }
        let unasked = block_reads() - before;
        assert!(
            asked < 10 && unasked == 98,
            "block reads: {asked} with filters, {unasked} without"
        );
        Ok(())
    }

    /// A value read backward into the buffer an older, longer version of its key was
    /// read into owns no more than it holds.
    #[test]
    fn a_value_handed_out_does_not_keep_a_longer_versions_room() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        db.put(b"k", &vec![b'x'; 1 << 20])?;
        db.put(b"k", b"small")?;
        for (_, v) in db.scan(..)?.rev().collect::<Result<Vec<_>>>()? {
            assert_eq!(v, b"small");
            assert!(v.capacity() < 1024, "{} bytes kept", v.capacity());
        }
        Ok(())
    }

    /// A prefix with few live entries in one run of visible puts is read whole when
    /// its scan is made; a longer one, one met in a memtable, or one read at a snapshot
    /// older than the run's puts goes through cursors. Either way both ends, and the
    /// keys-only reads, yield what a scan without the prefix does.
    #[test]
    fn a_short_prefix_is_read_whole() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), Options::default())?;
        let ks = db.create_keyspace("k")?;
        ks.set_filter_key(FilterKey::Fixed(NonZeroU8::MIN.saturating_add(1)))?;
        // "s0": 5 keys, "l0": WHOLE_MAX + 1; each key put twice, a snapshot keeping
        // the first version, so the run holds two entries of each.
        let keys: Vec<Vec<u8>> = (0..5u8)
            .map(|i| vec![b's', b'0', i])
            .chain((0..=WHOLE_MAX as u8).map(|i| vec![b'l', b'0', i]))
            .collect();
        for k in &keys {
            ks.put(k, b"old")?;
        }
        let old = db.snapshot();
        for k in &keys {
            ks.put(k, &[&b"new"[..], k].concat())?;
        }
        db.flush()?;
        let snap = db.snapshot();
        let check = |snap: &crate::Snapshot, p: &[u8], whole: bool| -> Result<()> {
            let plain = ScanRange::new((Bound::Included(p.to_vec()), prefixed(p).upper.clone()));
            let want: Vec<(Vec<u8>, Vec<u8>)> = snap.scan_shared(&ks, plain)?.collect::<Result<_>>()?;
            assert!(!want.is_empty());
            let scan = || snap.scan_shared(&ks, prefixed(p));
            assert_eq!(scan()?.whole.is_some(), whole, "prefix {p:?}");
            assert_eq!(scan()?.collect::<Result<Vec<_>>>()?, want);
            let back: Vec<_> = scan()?.rev().collect::<Result<_>>()?;
            assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
            // Both ends meet in the middle: every entry once.
            let mut s = scan()?;
            let mut met = Vec::new();
            while let Some(front) = s.next() {
                met.push(front?);
                if let Some(back) = s.next_back() {
                    met.push(back?);
                }
            }
            met.sort();
            assert_eq!(met, want);
            // Runs from both ends, each entry borrowed for the call: every entry once.
            let (mut s, mut front, mut back) = (scan()?, Vec::new(), Vec::new());
            while s.next_run(2, |k, v| front.push((k.to_vec(), v.to_vec())))?
                + s.next_back_run(3, |k, v| back.push((k.to_vec(), v.to_vec())))?
                > 0
            {}
            front.extend(back.into_iter().rev());
            assert_eq!(front, want);
            let want_keys: Vec<Vec<u8>> = want.iter().map(|(k, _)| k[1..].to_vec()).collect();
            let mut each = Vec::new();
            scan()?.for_each_key(1, &mut |k| each.push(k.to_vec()))?;
            assert_eq!(each, want_keys);
            let (mut s, mut batch, mut filled) = (scan()?, KeyBatch::default(), Vec::new());
            loop {
                batch.clear();
                s.fill_keys(Direction::Reverse, 1, &mut batch)?;
                if batch.is_empty() {
                    break;
                }
                while let Some(k) = batch.take_near() {
                    filled.push(k.to_vec());
                }
            }
            filled.reverse();
            assert_eq!(filled, want_keys);
            Ok(())
        };
        check(&snap, b"s0", true)?;
        check(&snap, b"l0", false)?;
        check(&old, b"s0", false)?;
        let got: Vec<_> = old.scan_shared(&ks, prefixed(b"s0"))?.collect::<Result<_>>()?;
        assert!(got.iter().all(|(_, v)| v == b"old"));
        // Off the one-run path, the cursor the attempt made is the scan's own.
        assert!(old.scan_shared(&ks, prefixed(b"s0"))?.front.is_some());
        // An entry in the memtable: read through cursors, the new key among the rest.
        ks.put(b"s0\x09", b"mem")?;
        check(&db.snapshot(), b"s0", false)?;
        Ok(())
    }
}
