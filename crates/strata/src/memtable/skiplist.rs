//! A concurrent skiplist whose nodes live in the memtable's [`Arena`], ordered by
//! keyspace id and then internal key.
//!
//! Writers insert concurrently without locks (each link is one compare-and-swap, as in
//! RocksDB's `InlineSkipList`); readers never block and never see a half-built node.
//! Nodes are never removed: a memtable only grows until it is flushed and dropped whole.
//!
//! Node layout, one 8-aligned arena allocation, shaped like RocksDB's `InlineSkipList`:
//! `[next ptr, levels height-1 .. 1][next ptr, level 0][ks u32][key_len u32][key][value_len u32][value]`.
//! A node's address is that of its level-0 link, so the link a search follows, the
//! header and the first bytes of the key share a cache line. No height is stored: a
//! search reads level `i` of a node only after reaching it at level `i` or above. The
//! first 8 bytes of the user key, read as a big-endian number (zero-padded), settle most
//! comparisons without a byte-wise compare; the value's length follows the key, which so
//! starts 16 bytes in, within the level-0 link's cache line for three nodes in four. 12
//! bytes of header and 8 per level: an entry of a 16-byte key and a 100-byte value takes
//! 136 + 8 x height bytes (147 on average).
//!
//! Invariants:
//! * a node's header, key and value are written before the node is published by the
//!   release CAS that links it at level 0, and never change afterwards;
//! * at every level the list is sorted strictly ascending (an insert of a key already
//!   present is dropped), and a node is linked at level `i` only after level `i - 1`;
//! * every pointer reachable from the head points into this list's arena, so it is
//!   valid for as long as the list is.

use std::cell::Cell;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtOrd};

use super::PointEntry;
use super::arena::Arena;
use crate::key::{compare_internal, pack_trailer, user_key_prefix};

/// Tallest tower. With a branching factor of 4 this serves 4^16 entries before searches
/// degrade, far beyond any memtable.
const MAX_HEIGHT: usize = 16;

/// A node, addressed at its level-0 link; the rest of it is read through [`field`] and
/// [`key_ptr`] at the offsets below.
#[repr(C)]
struct Node {
    next0: AtomicPtr<Node>,
}

/// Offsets from a node's address of its keyspace id, key length and key (the value's
/// length follows the key, the value that length).
const KS: usize = 8;
const KEY_LEN: usize = 12;
const KEY: usize = 16;

/// The `u32` header field at `off` (one of [`KS`], [`KEY_LEN`]) of `n`.
///
/// # Safety
/// `n` is the head or a node whose header is written.
unsafe fn field(n: *const Node, off: usize) -> u32 {
    // SAFETY: the caller's guarantee; nodes are 8-aligned, so the field is 4-aligned.
    unsafe { n.cast::<u8>().add(off).cast::<u32>().read() }
}

/// Entries whose searches [`SkipList::insert_many`] interleaves.
const GROUP: usize = 32;

/// An insert in progress: its node, and its search for the splice.
struct Search<'s> {
    node: *mut Node,
    height: usize,
    probe: Probe<'s>,
    x: *const Node,
    level: usize,
    prev: [*const Node; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
    found: bool,
}

/// Asks the CPU to start loading the node at `p` (a hint; any address is fine).
#[inline]
fn prefetch(p: *const Node) {
    #[cfg(target_arch = "x86_64")]
    if !p.is_null() {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch never faults and has no effect beyond the cache; SSE is
        // part of every x86_64 target.
        unsafe { _mm_prefetch(p.cast::<i8>(), _MM_HINT_T0) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// What a search compares nodes with.
struct Probe<'k> {
    ks: u32,
    prefix: u64,
    ikey: &'k [u8],
}

impl<'k> Probe<'k> {
    fn new(ks: u32, ikey: &'k [u8]) -> Self {
        Probe {
            ks,
            prefix: user_key_prefix(crate::key::user_key(ikey)),
            ikey,
        }
    }
}

/// A published node of the list, borrowed for the list's lifetime.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'a> {
    node: *const Node,
    list: PhantomData<&'a SkipList>,
}

impl<'a> Entry<'a> {
    /// Keyspace id.
    pub(crate) fn ks(&self) -> u32 {
        // SAFETY: a published node of a list that outlives 'a; its header never changes.
        unsafe { field(self.node, KS) }
    }

    /// Internal key.
    pub(crate) fn key(&self) -> &'a [u8] {
        // SAFETY: a published node's key and value follow its header in its allocation,
        // which is immutable and lives as long as the list ('a).
        unsafe { std::slice::from_raw_parts(key_ptr(self.node), field(self.node, KEY_LEN) as usize) }
    }

    /// Value.
    pub(crate) fn value(&self) -> &'a [u8] {
        // SAFETY: as for `key`; the value follows the key.
        unsafe {
            let len_at = key_ptr(self.node).add(field(self.node, KEY_LEN) as usize);
            let value_len = len_at.cast::<[u8; 4]>().read_unaligned();
            std::slice::from_raw_parts(len_at.add(4), u32::from_ne_bytes(value_len) as usize)
        }
    }

    /// The first 8 bytes of the user key as [`user_key_prefix`] gives them.
    fn prefix(&self) -> u64 {
        // SAFETY: as for `key`. An internal key ends in an 8-byte trailer, so 8 bytes
        // from its start are inside the node even for a shorter user key.
        let (raw, user_len) = unsafe {
            let raw = key_ptr(self.node).cast::<[u8; 8]>().read_unaligned();
            (
                u64::from_be_bytes(raw),
                (field(self.node, KEY_LEN) as usize).saturating_sub(8),
            )
        };
        if user_len >= 8 {
            raw
        } else {
            // Keep the user key's bytes, zero the trailer's.
            raw & !(u64::MAX >> (8 * user_len))
        }
    }
}

/// A position in a list that outlives the borrow it came from (for cursors that hold
/// their memtable by `Arc`). Only [`SkipList::at`] of the same list may resolve it.
#[derive(Clone, Copy)]
pub(crate) struct Position(*const Node);

// SAFETY: a position is an address into an arena; it is only dereferenced through
// `SkipList::at`, whose caller guarantees the list (and so the arena) is alive.
unsafe impl Send for Position {}
// SAFETY: as above.
unsafe impl Sync for Position {}

impl Entry<'_> {
    /// This entry's position.
    pub(crate) fn position(&self) -> Position {
        Position(self.node)
    }
}

/// Start of the key of node `n`.
fn key_ptr(n: *const Node) -> *const u8 {
    n.cast::<u8>().wrapping_add(KEY)
}

/// The link of `n` at `level`.
///
/// # Safety
/// `n` is the head or a node whose tower is at least `level + 1` high; the reference
/// must not outlive the list.
unsafe fn link<'a>(n: *const Node, level: usize) -> &'a AtomicPtr<Node> {
    // SAFETY: guaranteed by the caller: the links of levels 1.. sit below the node's
    // address, one pointer each, level 0 at the address itself.
    unsafe { &*n.cast::<AtomicPtr<Node>>().sub(level) }
}

/// A concurrent ordered map from (keyspace, internal key) to value; see the module docs.
pub(crate) struct SkipList {
    arena: Arena,
    head: NonNull<Node>,
    /// Height of the tallest tower linked so far (at least 1).
    height: AtomicUsize,
    len: AtomicUsize,
}

// SAFETY: nodes are immutable once published except for their atomic links, and the
// arena that owns them moves with the list; raw pointers are only read through atomics
// with acquire/release ordering (see the module invariants).
unsafe impl Send for SkipList {}
// SAFETY: as above.
unsafe impl Sync for SkipList {}

thread_local! {
    // Seeded from an address on this thread's stack, so threads draw different heights.
    static RNG: Cell<u64> = Cell::new({
        let on_stack = 0u8;
        (std::ptr::from_ref(&on_stack) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
    });
}

fn random_height() -> usize {
    let r = RNG.with(|c| {
        // xorshift64*: enough for tower heights.
        let mut x = c.get() | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    });
    // Branching factor 4: each extra level with probability 1/4.
    let extra = (r.trailing_zeros() / 2) as usize;
    (1 + extra).min(MAX_HEIGHT)
}

impl SkipList {
    /// An empty list.
    pub(crate) fn new() -> Self {
        let arena = Arena::new();
        let base = arena.alloc((MAX_HEIGHT - 1) * 8 + KEY);
        // SAFETY: the tower of the head's `MAX_HEIGHT` links lies below its address,
        // inside the fresh allocation. Zeroed memory is a null link and an empty header,
        // so the head needs no further initialisation.
        let head = unsafe { NonNull::new_unchecked(base.as_ptr().add((MAX_HEIGHT - 1) * 8)) }.cast::<Node>();
        SkipList {
            arena,
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
        }
    }

    /// Entries inserted.
    pub(crate) fn len(&self) -> usize {
        self.len.load(AtOrd::Relaxed)
    }

    /// Bytes of arena memory in use.
    pub(crate) fn memory(&self) -> usize {
        self.arena.used()
    }

    fn head(&self) -> *const Node {
        self.head.as_ptr()
    }

    fn entry(&self, p: *const Node) -> Option<Entry<'_>> {
        if p.is_null() || p == self.head() {
            return None;
        }
        // Non-null links point at published nodes of this list's arena.
        Some(Entry {
            node: p,
            list: PhantomData,
        })
    }

    fn next(&self, n: *const Node, level: usize) -> *mut Node {
        // SAFETY: `n` is the head or a published node reached at a level >= `level`,
        // so its tower is at least `level + 1` high.
        unsafe { link(n, level).load(AtOrd::Acquire) }
    }

    /// Compares the node at `n` with (ks, ikey).
    fn cmp(n: *const Node, p: &Probe<'_>) -> Ordering {
        // `n` is a published node (never the head: callers pass links).
        let e = Entry {
            node: n,
            list: PhantomData,
        };
        e.ks()
            .cmp(&p.ks)
            .then(e.prefix().cmp(&p.prefix))
            .then_with(|| compare_internal(e.key(), p.ikey))
    }

    /// Inserts `items`, calling `inserted(i)` for each one whose exact internal key was
    /// not already present (a repeated one changes nothing visible).
    ///
    /// The searches of up to [`GROUP`] entries run interleaved, each step prefetching the
    /// node the next one compares: a search is a chain of dependent cache misses, and
    /// interleaving lets several chains wait on memory at once.
    pub(crate) fn insert_many(&self, items: &[PointEntry<'_>], mut inserted: impl FnMut(usize)) {
        for (c, chunk) in items.chunks(GROUP).enumerate() {
            let mut searches: Vec<Search<'_>> = chunk.iter().map(|e| self.new_node(e)).collect();
            let tallest = searches.iter().map(|s| s.height).max().unwrap_or(1);
            let mut top = self.height.load(AtOrd::Relaxed);
            while tallest > top {
                match self
                    .height
                    .compare_exchange_weak(top, tallest, AtOrd::Relaxed, AtOrd::Relaxed)
                {
                    Ok(_) => top = tallest,
                    Err(h) => top = h,
                }
            }
            for s in &mut searches {
                s.level = top - 1;
            }
            // The splices: at each level, prev < key <= next.
            let mut pending = searches.len();
            while pending > 0 {
                for s in searches.iter_mut().filter(|s| !s.found) {
                    let n = self.next(s.x, s.level);
                    if !n.is_null() && Self::cmp(n, &s.probe) == Ordering::Less {
                        s.x = n;
                    } else {
                        s.prev[s.level] = s.x;
                        s.next[s.level] = n;
                        if s.level == 0 {
                            s.found = true;
                            pending -= 1;
                            continue;
                        }
                        s.level -= 1;
                    }
                    prefetch(self.next(s.x, s.level));
                }
            }
            for (i, s) in searches.iter_mut().enumerate() {
                if self.link_node(s) {
                    self.len.fetch_add(1, AtOrd::Relaxed);
                    inserted(c * GROUP + i);
                }
            }
        }
    }

    /// Allocates and fills the node for `e` (unpublished) and starts its search.
    fn new_node<'s>(&'s self, e: &PointEntry<'_>) -> Search<'s> {
        let height = random_height();
        let key_len = e.key.len() + 8;
        let size = (height - 1) * 8 + KEY + key_len + 4 + e.value.len();
        let base = self.arena.alloc(size).as_ptr();
        // SAFETY: `size` fresh zeroed bytes, 8-aligned, owned by us until published: the
        // upper links (zeroed: null), then the node: level-0 link, header, key, value.
        let node = unsafe {
            let node = base.add((height - 1) * 8).cast::<Node>();
            let at = |off: usize| node.cast::<u8>().add(off);
            at(KS).cast::<u32>().write(e.ks);
            at(KEY_LEN).cast::<u32>().write(key_len as u32);
            let k = at(KEY);
            let trailer = pack_trailer(e.seq, e.kind).to_be_bytes();
            ptr::copy_nonoverlapping(e.key.as_ptr(), k, e.key.len());
            ptr::copy_nonoverlapping(trailer.as_ptr(), k.add(e.key.len()), 8);
            let value_len = (e.value.len() as u32).to_ne_bytes();
            ptr::copy_nonoverlapping(value_len.as_ptr(), k.add(key_len), 4);
            ptr::copy_nonoverlapping(e.value.as_ptr(), k.add(key_len + 4), e.value.len());
            node
        };
        // SAFETY: just initialised; the arena keeps it for the list's lifetime 's.
        let ikey: &'s [u8] = unsafe { std::slice::from_raw_parts(key_ptr(node), key_len) };
        Search {
            node,
            height,
            probe: Probe::new(e.ks, ikey),
            x: self.head(),
            level: 0,
            prev: [self.head(); MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
            found: false,
        }
    }

    /// Links a searched node level by level; false if its key was already present.
    fn link_node(&self, s: &mut Search<'_>) -> bool {
        for level in 0..s.height {
            loop {
                if level == 0 && !s.next[0].is_null() && Self::cmp(s.next[0], &s.probe) == Ordering::Equal {
                    // Replayed or repeated entry: identical key, keep the first.
                    return false;
                }
                // SAFETY: the node's tower has `height` links; it is ours or published.
                unsafe { link(s.node, level) }.store(s.next[level], AtOrd::Relaxed);
                // Release: publishes the node's contents (and its lower links).
                // SAFETY: prev[level] is the head or a node at least level+1 high.
                let won = unsafe { link(s.prev[level], level) }
                    .compare_exchange(s.next[level], s.node, AtOrd::Release, AtOrd::Relaxed)
                    .is_ok();
                if won {
                    break;
                }
                // Someone linked a node here first: search again from our predecessor.
                let (p, n) = self.splice_at(s.prev[level], level, &s.probe);
                s.prev[level] = p;
                s.next[level] = n;
            }
        }
        true
    }

    /// From `start` (< key), walks `level` to the pair prev < (ks, ikey) <= next.
    fn splice_at(&self, start: *const Node, level: usize, probe: &Probe<'_>) -> (*const Node, *mut Node) {
        let mut x = start;
        loop {
            let n = self.next(x, level);
            if n.is_null() || Self::cmp(n, probe) != Ordering::Less {
                return (x, n);
            }
            x = n;
        }
    }

    /// The first entry >= (ks, ikey), or > it when `exclusive`.
    pub(crate) fn seek(&self, ks: u32, ikey: &[u8], exclusive: bool) -> Option<Entry<'_>> {
        let probe = Probe::new(ks, ikey);
        self.first_after(|n| {
            let o = Self::cmp(n, &probe);
            o == Ordering::Less || (exclusive && o == Ordering::Equal)
        })
    }

    /// The first entry of keyspace `ks` or of a later one.
    pub(crate) fn seek_keyspace(&self, ks: u32) -> Option<Entry<'_>> {
        self.first_after(|n| Self::ks_of(n) < ks)
    }

    /// Fills `out` with the positions of the entries just before (ks, ikey) (or at it,
    /// when `inclusive`), in ascending order: from the last node before it that stands at level 1 or higher
    /// (or the head, excluded) on. That is about `1/p` entries for one search, so a
    /// backward walk takes several steps per search instead of one.
    pub(crate) fn run_before(&self, ks: u32, ikey: &[u8], inclusive: bool, out: &mut Vec<Position>) {
        let probe = Probe::new(ks, ikey);
        let before = |n: *const Node| {
            let o = Self::cmp(n, &probe);
            o == Ordering::Less || (inclusive && o == Ordering::Equal)
        };
        let mut x = self.head();
        let mut level = self.height.load(AtOrd::Relaxed) - 1;
        while level > 0 {
            let n = self.next(x, level);
            if !n.is_null() && before(n) {
                x = n;
            } else {
                level -= 1;
            }
        }
        out.clear();
        if x != self.head() {
            out.push(Position(x));
        }
        let mut n = self.next(x, 0);
        while !n.is_null() && before(n) {
            out.push(Position(n));
            n = self.next(n, 0);
        }
    }

    /// The last entry of a keyspace before `ks`.
    pub(crate) fn seek_back_keyspace(&self, ks: u32) -> Option<Entry<'_>> {
        self.entry(self.last_before(|n| Self::ks_of(n) < ks))
    }

    fn ks_of(n: *const Node) -> u32 {
        // SAFETY: `n` is a published node.
        unsafe { field(n, KS) }
    }

    /// The first entry for which `before` is false (`before` must hold for a prefix of
    /// the list).
    fn first_after(&self, before: impl Fn(*const Node) -> bool) -> Option<Entry<'_>> {
        self.entry(self.boundary(before).1)
    }

    /// The last node (or the head) for which `before` holds.
    fn last_before(&self, before: impl Fn(*const Node) -> bool) -> *const Node {
        self.boundary(before).0
    }

    /// The last node (or the head) for which `before` holds, and the node its level-0
    /// link pointed at when the search read it. That pair must come from one read: a
    /// second read of the link could return a node inserted since, which may belong
    /// on the other side of the boundary (a newer version of the key sought).
    fn boundary(&self, before: impl Fn(*const Node) -> bool) -> (*const Node, *mut Node) {
        let mut x = self.head();
        let mut level = self.height.load(AtOrd::Relaxed) - 1;
        loop {
            let n = self.next(x, level);
            if !n.is_null() && before(n) {
                x = n;
            } else if level == 0 {
                return (x, n);
            } else {
                level -= 1;
            }
        }
    }

    /// The first entry.
    pub(crate) fn first(&self) -> Option<Entry<'_>> {
        self.entry(self.next(self.head(), 0))
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<Entry<'_>> {
        self.entry(self.last_before(|_| true))
    }

    /// The entry at `p`.
    ///
    /// # Safety
    /// `p` came from an entry of this list.
    pub(crate) unsafe fn at(&self, p: Position) -> Entry<'_> {
        Entry {
            node: p.0,
            list: PhantomData,
        }
    }

    /// The entry after `e`.
    pub(crate) fn next_entry(&self, e: Entry<'_>) -> Option<Entry<'_>> {
        self.entry(self.next(e.node, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, internal_key};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// The last entry < (ks, key), or <= it when `inclusive`: the end of its run.
    fn seek_back<'l>(l: &'l SkipList, ks: u32, key: &[u8], inclusive: bool) -> Option<Entry<'l>> {
        let mut run = Vec::new();
        l.run_before(ks, key, inclusive, &mut run);
        // SAFETY: positions from this list.
        run.last().map(|p| unsafe { l.at(*p) })
    }

    /// Inserts a put of `key` at `seq`; false if it was already there.
    fn put(l: &SkipList, ks: u32, key: &[u8], seq: u64, value: &[u8]) -> bool {
        let mut done = false;
        let e = PointEntry {
            ks,
            key,
            seq,
            kind: ValueKind::Put,
            value,
        };
        l.insert_many(&[e], |_| done = true);
        done
    }

    /// Walks the whole list, checking each key is above the one before; the keys.
    fn walk_ascending(l: &SkipList) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut e = l.first();
        while let Some(x) = e {
            if let Some(p) = keys.last() {
                assert_eq!(compare_internal(p, x.key()), Ordering::Less);
            }
            keys.push(x.key().to_vec());
            e = l.next_entry(x);
        }
        keys
    }

    fn ik(k: &[u8], seq: u64) -> Vec<u8> {
        internal_key(k, seq, ValueKind::Put)
    }

    /// Counts divide by this under miri (`scripts/miri.sh`), which runs about a
    /// thousand times slower: the interleavings and the unsafe paths stay the same.
    const SCALE: u64 = if cfg!(miri) { 100 } else { 1 };

    #[test]
    // Arithmetic of the layout; the other tests take the same unsafe paths under miri.
    #[cfg_attr(miri, ignore)]
    fn an_entry_costs_its_bytes_plus_12_and_8_per_level() {
        // db_bench's entry: 16-byte key, 100-byte value. Memtable bytes per entry decide
        // how many entries a flush writes, so the node layout is part of write
        // amplification: 136 bytes plus 8 per level, 147 on average (RocksDB: about 137).
        let l = SkipList::new();
        let empty = l.memory();
        let n = 20_000u64;
        for i in 0..n {
            let key = format!("{:016}", i.wrapping_mul(0x9e37_79b9) % 1_000_000_007);
            assert!(put(&l, 1, key.as_bytes(), i + 1, &[7u8; 100]));
        }
        let per_entry = (l.memory() - empty) as f64 / n as f64;
        assert!((142.0..=152.0).contains(&per_entry), "{per_entry:.1} bytes per entry");
    }

    #[test]
    fn matches_a_sorted_model_in_both_directions() {
        let l = SkipList::new();
        let mut model: BTreeMap<(u32, Vec<u8>, std::cmp::Reverse<u64>), Vec<u8>> = BTreeMap::new();
        let mut x = 7u64;
        for i in 0..5000 / SCALE {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ks = (x >> 60) as u32 % 3;
            // Short keys, keys ending in zero bytes (equal padded prefixes) and long keys
            // sharing their first 8 bytes: every way the prefix can tie.
            let n = (x >> 20) % 700;
            let key = match n % 3 {
                0 => format!("k{n:03}").into_bytes(),
                1 => [b"k".as_slice(), &vec![0u8; 1 + (n as usize / 3) % 9]].concat(),
                _ => format!("sharedpfx{n:03}").into_bytes(),
            };
            let seq = i + 1;
            let value = vec![(x >> 8) as u8; (x % 40) as usize];
            assert!(put(&l, ks, &key, seq, &value));
            model.insert((ks, key, std::cmp::Reverse(seq)), value);
        }
        // A repeated insert is dropped.
        let ((ks, k, s), _) = model
            .iter()
            .next()
            .map(|(a, b)| (a.clone(), b.clone()))
            .unwrap_or_default();
        assert!(!put(&l, ks, &k, s.0, b"other"));
        assert_eq!(l.len(), model.len());

        let mut forward = Vec::new();
        let mut e = l.first();
        while let Some(x) = e {
            forward.push((x.ks(), x.key().to_vec(), x.value().to_vec()));
            e = l.next_entry(x);
        }
        let want: Vec<_> = model
            .iter()
            .map(|((ks, k, s), v)| (*ks, ik(k, s.0), v.clone()))
            .collect();
        assert_eq!(forward, want);
        let last = l.last().map(|e| (e.ks(), e.key().to_vec()));
        assert_eq!(last, want.last().map(|w| (w.0, w.1.clone())));

        // Seeks in both directions, inclusive and exclusive, land where the model says.
        for (i, probe) in want.iter().enumerate().step_by(37) {
            let (ks, key) = (probe.0, &probe.1);
            let at = |e: Option<Entry<'_>>| e.map(|e| (e.ks(), e.key().to_vec()));
            let w = |j: Option<usize>| j.and_then(|j| want.get(j)).map(|w| (w.0, w.1.clone()));
            assert_eq!(at(l.seek(ks, key, false)), w(Some(i)));
            assert_eq!(at(l.seek(ks, key, true)), w(Some(i + 1)));
            assert_eq!(at(seek_back(&l, ks, key, true)), w(Some(i)));
            assert_eq!(at(seek_back(&l, ks, key, false)), w(i.checked_sub(1)));
        }
        // Walking back by runs visits every entry, in reverse, from any start.
        for start in [want.len() - 1, want.len() / 2, 1, 0] {
            let mut got = Vec::new();
            let mut run = Vec::new();
            let mut key = want[start].1.clone();
            let mut ks = want[start].0;
            loop {
                l.run_before(ks, &key, false, &mut run);
                assert!(run.len() < 200, "a run is a few entries, not {}", run.len());
                let Some(p) = run.last() else { break };
                // SAFETY: positions from this list.
                let e = unsafe { l.at(*p) };
                got.push((e.ks(), e.key().to_vec()));
                (ks, key) = (e.ks(), e.key().to_vec());
            }
            let expect: Vec<_> = want[..start].iter().rev().map(|w| (w.0, w.1.clone())).collect();
            assert_eq!(got, expect, "from {start}");
            l.run_before(want[start].0, &want[start].1, true, &mut run);
            // SAFETY: positions from this list.
            let last = run.last().map(|p| unsafe { l.at(*p) }.key().to_vec());
            assert_eq!(last.as_ref(), Some(&want[start].1), "inclusive run from {start}");
        }
        assert!(l.seek(3, b"", false).is_none());
        assert!(seek_back(&l, 0, b"", false).is_none());
        // Keyspace bounds include entries with an empty user key.
        assert!(put(&l, 1, b"", 9, b"e"));
        assert_eq!(l.seek_keyspace(1).map(|e| e.key().to_vec()), Some(ik(b"", 9)));
        let end_of_0 = want.iter().rev().find(|w| w.0 == 0).map(|w| w.1.clone());
        assert_eq!(l.seek_back_keyspace(1).map(|e| e.key().to_vec()), end_of_0);
    }

    #[test]
    fn concurrent_inserts_all_land_in_order() {
        let l = Arc::new(SkipList::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 / SCALE {
                        let k = (i * 4 + t).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes();
                        assert!(put(&l, 1, &k, i, &k));
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        assert_eq!(l.len() as u64, 80_000 / SCALE);
        assert_eq!(walk_ascending(&l).len() as u64, 80_000 / SCALE);
        let mut e = l.first();
        while let Some(x) = e {
            assert_eq!(&x.key()[..8], x.value());
            e = l.next_entry(x);
        }
    }

    #[test]
    fn readers_find_every_published_insert() {
        use std::sync::atomic::AtomicU64;
        let l = Arc::new(SkipList::new());
        let published: Arc<Vec<AtomicU64>> = Arc::new((0..2).map(|_| AtomicU64::new(0)).collect());
        let key = |t: u64, i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t).to_be_bytes();
        std::thread::scope(|sc| {
            for t in 0..2u64 {
                let (l, published) = (l.clone(), published.clone());
                sc.spawn(move || {
                    for i in 1..=30_000 / SCALE {
                        assert!(put(&l, t as u32, &key(t, i), i, b"v"));
                        published[t as usize].store(i, AtOrd::Release);
                    }
                });
            }
            for r in 0..2u64 {
                let (l, published) = (l.clone(), published.clone());
                sc.spawn(move || {
                    let mut g = r + 1;
                    for _ in 0..30_000 / SCALE {
                        g = g.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let t = (g >> 63) as u32;
                        let upto = published[t as usize].load(AtOrd::Acquire);
                        if upto == 0 {
                            continue;
                        }
                        let i = 1 + (g >> 20) % upto;
                        let ikey = internal_key(&key(u64::from(t), i), i, ValueKind::Put);
                        let found = l.seek(t, &ikey, false).map(|e| e.key().to_vec());
                        assert_eq!(found, Some(ikey), "thread {t} key {i} of {upto}");
                    }
                });
            }
        });
    }

    #[test]
    fn scans_in_both_directions_see_every_earlier_entry_under_inserts() {
        use std::sync::atomic::AtomicBool;
        // Keys 0..2000 of keyspaces 0..3 are inserted first; writers then keep adding
        // newer versions of the same keys while readers walk each keyspace both ways.
        let keys = 2000 / SCALE;
        let l = Arc::new(SkipList::new());
        for ks in 0..3u32 {
            for k in 0..keys {
                assert!(put(&l, ks, &k.to_be_bytes(), 1, b"old"));
            }
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            for t in 0..2u64 {
                let (l, stop) = (l.clone(), &stop);
                sc.spawn(move || {
                    let mut g = t + 7;
                    let mut seq = 2 + t;
                    while !stop.load(AtOrd::Relaxed) && seq < 100_000 / SCALE {
                        g = g.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let ks = (g >> 62) as u32 % 3;
                        let k = (g >> 20) % keys;
                        put(&l, ks, &k.to_be_bytes(), seq, b"new");
                        seq += 2;
                    }
                });
            }
            for _ in 0..2 {
                let (l, stop) = (l.clone(), &stop);
                sc.spawn(move || {
                    struct StopOnDrop<'a>(&'a AtomicBool);
                    impl Drop for StopOnDrop<'_> {
                        fn drop(&mut self) {
                            self.0.store(true, AtOrd::Relaxed);
                        }
                    }
                    let _stop = StopOnDrop(stop);
                    for round in 0..(30 / SCALE.min(10)) as u32 {
                        let ks = round % 3;
                        let mut n = 0;
                        let mut e = l.seek_keyspace(ks);
                        while let Some(x) = e.filter(|x| x.ks() == ks) {
                            n += u64::from(x.value() == b"old");
                            e = l.next_entry(x);
                        }
                        assert_eq!(n, keys, "forward, keyspace {ks}");
                        let mut n = 0;
                        // Runs read while writers insert: a node inserted into a run
                        // after it was read is skipped, an old one never.
                        let mut run = Vec::new();
                        let mut e = l.seek_back_keyspace(ks + 1);
                        while let Some(x) = e.filter(|x| x.ks() == ks) {
                            n += u64::from(x.value() == b"old");
                            if run.is_empty() {
                                l.run_before(ks, x.key(), false, &mut run);
                            }
                            // SAFETY: positions from this list.
                            e = run.pop().map(|p| unsafe { l.at(p) });
                        }
                        assert_eq!(n, keys, "backward, keyspace {ks}");
                    }
                });
            }
        });
    }

    #[test]
    fn grouped_inserts_from_two_threads_report_exactly_the_new_entries() {
        // Thread t's i-th key: 3,000 keys shared by both threads, plus (odd i) keys of
        // thread 1's own; each key repeats within a thread's list too.
        let shared = 3000 / SCALE;
        let key =
            move |t: u64, i: u64| ((i % shared).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t * (i & 1))).to_be_bytes();
        let l = Arc::new(SkipList::new());
        let reported: usize = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..2u64)
                .map(|t| {
                    let l = l.clone();
                    sc.spawn(move || {
                        let mut keys: Vec<[u8; 8]> = (0..6000 / SCALE).map(|i| key(t, i)).collect();
                        if t == 1 {
                            keys.reverse();
                        }
                        let mut reported = 0;
                        // Different orders and groupings in the two threads.
                        for run in keys.chunks(1 + t as usize * 37 + 13) {
                            let items: Vec<PointEntry<'_>> = run
                                .iter()
                                .map(|k| PointEntry {
                                    ks: 1,
                                    key: k,
                                    seq: 5,
                                    kind: ValueKind::Put,
                                    value: k,
                                })
                                .collect();
                            let mut mine = Vec::new();
                            l.insert_many(&items, |i| mine.push(i));
                            assert!(mine.windows(2).all(|w| w[0] < w[1]) && mine.iter().all(|&i| i < run.len()));
                            reported += mine.len();
                        }
                        reported
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_default()).sum()
        });
        let mut all: Vec<[u8; 8]> = (0..2u64)
            .flat_map(|t| (0..6000 / SCALE).map(move |i| key(t, i)))
            .collect();
        all.sort_unstable();
        all.dedup();
        // Every distinct key went in exactly once, and was reported exactly once.
        assert_eq!(l.len(), all.len());
        assert_eq!(reported, all.len());
        assert_eq!(walk_ascending(&l).len(), all.len());
    }
}
