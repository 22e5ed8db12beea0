//! The memtable's memory: a bump allocator handing out 8-byte-aligned pieces of large
//! chunks, all freed at once when the arena drops.
//!
//! Owning the memory this way is what makes the memtable cheap: an insert is one bump of
//! a pointer instead of two `malloc`s, entries of one memtable sit together in a few
//! hundred chunks instead of millions of heap blocks, and dropping a flushed memtable
//! frees its chunks instead of walking every entry.
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

struct Chunks {
    /// Every chunk with its layout, for freeing.
    all: Vec<(NonNull<u8>, Layout)>,
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
            _ => {
                c.left = CHUNK;
                self.new_chunk(&mut c, CHUNK)
            }
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
}
