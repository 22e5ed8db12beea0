//! The memtable's memory: a bump allocator handing out 8-byte-aligned pieces of large
//! chunks, all freed at once when the arena drops.
//!
//! Owning the memory this way is what makes the memtable cheap: an insert is one bump of
//! a pointer instead of two `malloc`s, entries of one memtable sit together in a few
//! hundred chunks instead of millions of heap blocks, and dropping a flushed memtable
//! frees its chunks instead of walking every entry.
//!
//! Once an arena holds [`HUGE`] bytes it is a big memtable, and its further chunks are
//! 2 MiB regions aligned to 2 MiB and marked for transparent huge pages (Linux; as
//! RocksDB's `memtable_huge_page_size`). A skiplist insert follows a dozen or more
//! pointers to random places in the arena; with 4 KiB pages each is also a TLB miss. On
//! this project's machine, 500,000 random single puts in one 64 MiB memtable ran
//! 1.1-1.6x faster with them (`strata-bench kv --benchmarks fillrandom`,
//! `docs/benchmarks/kv.md`). Where the kernel gives no huge page, the region is ordinary
//! memory; where the mapping fails, the arena falls back to an ordinary chunk.
//!
//! Invariants: a chunk never moves, shrinks or is reused while the arena lives, so every
//! pointer [`Arena::alloc`] returns stays valid (and its memory is never handed out
//! twice) until the arena drops.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Size of an ordinary chunk.
const CHUNK: usize = 256 << 10;
/// Allocations above this get a chunk of their own, so a large value never wastes the
/// tail of a shared one.
const LARGE: usize = CHUNK / 4;
/// Alignment of every allocation (node towers hold pointers).
const ALIGN: usize = 8;
/// Size and alignment of a huge-page chunk, and the bytes an arena holds before it
/// takes them (so a small memtable never reserves 2 MiB).
const HUGE: usize = 2 << 20;

struct Chunks {
    /// Every heap chunk with its layout, for freeing.
    all: Vec<(NonNull<u8>, Layout)>,
    /// Every huge-page chunk ([`HUGE`] bytes each), for unmapping.
    huge: Vec<NonNull<u8>>,
    /// Where the current shared chunk's free space starts, and its bytes left.
    cur: Option<NonNull<u8>>,
    left: usize,
}

/// A bump allocator; see the module docs.
pub(crate) struct Arena {
    chunks: Mutex<Chunks>,
    /// Bytes handed out (what the memtable's size accounting counts).
    used: AtomicUsize,
    /// Bytes of all chunks (what the process actually holds).
    reserved: AtomicUsize,
}

// SAFETY: the raw chunk pointers are only dereferenced by the owners of allocations
// (which never overlap); the bookkeeping itself is behind the mutex.
unsafe impl Send for Arena {}
// SAFETY: as above; `alloc` takes `&self` and synchronises through the mutex.
unsafe impl Sync for Arena {}

impl Arena {
    /// An empty arena; the first chunk is allocated on first use.
    pub(crate) fn new() -> Self {
        Arena {
            chunks: Mutex::new(Chunks {
                all: Vec::new(),
                huge: Vec::new(),
                cur: None,
                left: 0,
            }),
            used: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
        }
    }

    /// `size` zeroed bytes aligned to 8, valid until the arena drops.
    pub(crate) fn alloc(&self, size: usize) -> NonNull<u8> {
        let size = size.max(1).next_multiple_of(ALIGN);
        self.used.fetch_add(size, Ordering::Relaxed);
        let mut c = self.chunks.lock();
        if size > LARGE {
            return self.new_chunk(&mut c, size);
        }
        let p = match c.cur {
            Some(p) if size <= c.left => p,
            _ => match self.new_huge_chunk(&mut c) {
                Some(p) => {
                    c.left = HUGE;
                    p
                }
                None => {
                    c.left = CHUNK;
                    self.new_chunk(&mut c, CHUNK)
                }
            },
        };
        // SAFETY: `size <= left`, so the result and `p + size` stay inside the chunk
        // (or one past its end).
        let next = unsafe { NonNull::new_unchecked(p.as_ptr().add(size)) };
        c.cur = Some(next);
        c.left -= size;
        p
    }

    fn new_chunk(&self, c: &mut Chunks, size: usize) -> NonNull<u8> {
        let layout = match Layout::from_size_align(size, ALIGN) {
            Ok(l) => l,
            // Only a size near isize::MAX gets here; no memtable entry is that large.
            Err(_) => handle_alloc_error(Layout::new::<u64>()),
        };
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(p) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        c.all.push((p, layout));
        self.reserved.fetch_add(size, Ordering::Relaxed);
        p
    }

    /// A fresh [`HUGE`]-byte chunk backed by huge pages where the kernel has them, or
    /// `None` while the arena is still small or where the mapping fails.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn new_huge_chunk(&self, c: &mut Chunks) -> Option<NonNull<u8>> {
        if self.reserved.load(Ordering::Relaxed) < HUGE {
            return None;
        }
        // Twice the size, so that an aligned region lies inside; the rest is unmapped.
        let span = 2 * HUGE;
        // SAFETY: an anonymous private mapping of fresh, zeroed memory; no existing
        // memory is touched. The result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let base = raw as usize;
        let start = base.next_multiple_of(HUGE);
        let end = start + HUGE;
        // SAFETY: both ranges lie inside the mapping just made, outside [start, end),
        // and nothing refers to them; `madvise` only advises on our own region.
        unsafe {
            if start > base {
                libc::munmap(raw, start - base);
            }
            if base + span > end {
                libc::munmap(end as *mut libc::c_void, base + span - end);
            }
            // Advice only: without it the region is ordinary memory, still correct.
            libc::madvise(start as *mut libc::c_void, HUGE, libc::MADV_HUGEPAGE);
        }
        let p = NonNull::new(start as *mut u8)?;
        c.huge.push(p);
        self.reserved.fetch_add(HUGE, Ordering::Relaxed);
        Some(p)
    }

    /// Huge pages are a Linux facility (and miri runs no foreign calls).
    #[cfg(not(all(target_os = "linux", not(miri))))]
    fn new_huge_chunk(&self, _c: &mut Chunks) -> Option<NonNull<u8>> {
        None
    }

    /// Bytes handed out so far.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes of all chunks, including unused tails.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (p, layout) in self.chunks.get_mut().all.drain(..) {
            // SAFETY: allocated by `alloc_zeroed` with this layout, freed once.
            unsafe { dealloc(p.as_ptr(), layout) };
        }
        #[cfg(all(target_os = "linux", not(miri)))]
        for p in self.chunks.get_mut().huge.drain(..) {
            // SAFETY: mapped by `new_huge_chunk` with exactly `HUGE` bytes, unmapped once.
            unsafe { libc::munmap(p.as_ptr().cast(), HUGE) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_zeroed() {
        let a = Arena::new();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for size in [1usize, 7, 8, 9, 100, 4000, LARGE + 1, 3, CHUNK - 5, 16] {
            let p = a.alloc(size);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            // SAFETY: `size` bytes were just allocated for us.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), size) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xab);
            spans.push((p.as_ptr() as usize, size));
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        assert!(a.used() >= spans.iter().map(|s| s.1).sum::<usize>());
        assert!(a.reserved() >= a.used());
    }

    #[test]
    fn a_big_arena_takes_huge_chunks_and_keeps_every_allocation() {
        let a = Arena::new();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        // Sizes like skiplist nodes, for three huge chunks' worth.
        let mut size = 100;
        while a.used() < 3 * HUGE + CHUNK {
            let p = a.alloc(size);
            // SAFETY: `size` bytes were just allocated for us.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), size) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xcd);
            spans.push((p.as_ptr() as usize, size));
            size = 100 + (size * 7 + 13) % 300;
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        let c = a.chunks.lock();
        if cfg!(all(target_os = "linux", not(miri))) {
            assert!(c.huge.len() >= 2, "huge chunks: {}", c.huge.len());
            assert!(c.huge.iter().all(|p| (p.as_ptr() as usize).is_multiple_of(HUGE)));
            // The small chunks stop once the arena is big.
            assert!(c.all.len() <= HUGE / CHUNK + 1, "small chunks: {}", c.all.len());
        }
        assert_eq!(
            a.reserved(),
            c.all.iter().map(|(_, l)| l.size()).sum::<usize>() + c.huge.len() * HUGE
        );
    }
}
