//! Merging the scans of several partitions into one stream in key order: raw values
//! (keyspace scans) or anything keyed by bytes (a partitioned table's rows, keyed by
//! their index entry).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::error::Result;

/// One buffered head of a source.
struct Head<V> {
    key: Vec<u8>,
    value: V,
    src: usize,
    descending: bool,
}

impl<V> PartialEq for Head<V> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<V> Eq for Head<V> {}
impl<V> PartialOrd for Head<V> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<V> Ord for Head<V> {
    // `BinaryHeap` pops the greatest: ascending merges invert the key order. Equal keys
    // (only possible when the sources are not disjoint) come out in source order.
    fn cmp(&self, o: &Self) -> Ordering {
        let by_key = if self.descending {
            self.key.cmp(&o.key)
        } else {
            o.key.cmp(&self.key)
        };
        by_key.then(o.src.cmp(&self.src))
    }
}

/// A k-way merge of `(key, value)` streams sorted by key: ascending when every source is
/// ascending, descending when built with [`MergedScan::descending`] over descending
/// sources. Holds one entry per source. The first error of any source is yielded and
/// ends the merge.
///
/// ```
/// use strata::partition::MergedScan;
/// // Values of any type: here the number of the source.
/// let a: Vec<strata::Result<(Vec<u8>, u32)>> = vec![Ok((b"a".to_vec(), 0)), Ok((b"c".to_vec(), 0))];
/// let b = vec![Ok((b"b".to_vec(), 1))];
/// let merged: Vec<_> = MergedScan::ascending(vec![a.into_iter(), b.into_iter()])
///     .map(|r| r.unwrap())
///     .collect();
/// assert_eq!(merged, vec![(b"a".to_vec(), 0), (b"b".to_vec(), 1), (b"c".to_vec(), 0)]);
/// ```
pub struct MergedScan<I, V = Vec<u8>> {
    sources: Vec<I>,
    heap: BinaryHeap<Head<V>>,
    descending: bool,
    started: bool,
    done: bool,
    /// A source's error met while refilling, yielded after the entry popped before it.
    pending: Option<crate::error::Error>,
}

impl<I, V> std::fmt::Debug for MergedScan<I, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergedScan")
            .field("sources", &self.sources.len())
            .field("descending", &self.descending)
            .finish()
    }
}

impl<V, I: Iterator<Item = Result<(Vec<u8>, V)>>> MergedScan<I, V> {
    /// Merges ascending sources.
    pub fn ascending(sources: Vec<I>) -> Self {
        Self::new(sources, false)
    }

    /// Merges descending sources (e.g. reversed scans).
    pub fn descending(sources: Vec<I>) -> Self {
        Self::new(sources, true)
    }

    fn new(sources: Vec<I>, descending: bool) -> Self {
        MergedScan {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            descending,
            started: false,
            done: false,
            pending: None,
        }
    }

    /// Pulls the next entry of source `src` into the heap.
    fn refill(&mut self, src: usize) -> Result<()> {
        if let Some(r) = self.sources[src].next() {
            let (key, value) = r?;
            self.heap.push(Head {
                key,
                value,
                src,
                descending: self.descending,
            });
        }
        Ok(())
    }
}

impl<V, I: Iterator<Item = Result<(Vec<u8>, V)>>> MergedScan<I, V> {
    /// The next entry, handed to `f` with the source it came from (which may read what
    /// the entry refers to; the source has already moved past it).
    pub fn next_with<R>(&mut self, f: impl FnOnce(&I, Vec<u8>, V) -> R) -> Option<Result<R>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Some(Err(e));
        }
        if !self.started {
            self.started = true;
            for src in 0..self.sources.len() {
                if let Err(e) = self.refill(src) {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        let Some(head) = self.heap.pop() else {
            self.done = true;
            return None;
        };
        if let Err(e) = self.refill(head.src) {
            self.pending = Some(e);
        }
        Some(Ok(f(&self.sources[head.src], head.key, head.value)))
    }
}

impl<V, I: Iterator<Item = Result<(Vec<u8>, V)>>> Iterator for MergedScan<I, V> {
    type Item = Result<(Vec<u8>, V)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(|_, key, value| (key, value))
    }
}

impl<V, I: Iterator<Item = Result<(Vec<u8>, V)>>> std::iter::FusedIterator for MergedScan<I, V> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn src(keys: &[&str]) -> std::vec::IntoIter<Result<(Vec<u8>, Vec<u8>)>> {
        keys.iter()
            .map(|k| Ok((k.as_bytes().to_vec(), k.to_uppercase().into_bytes())))
            .collect::<Vec<_>>()
            .into_iter()
    }

    fn keys(m: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
        m.map(|r| String::from_utf8(r.expect("ok").0).expect("utf8")).collect()
    }

    #[test]
    fn merges_in_both_directions() {
        let m = MergedScan::ascending(vec![src(&["b", "e"]), src(&[]), src(&["a", "c", "d"])]);
        assert_eq!(keys(m), ["a", "b", "c", "d", "e"]);
        let m = MergedScan::descending(vec![src(&["e", "b"]), src(&["d", "c", "a"])]);
        assert_eq!(keys(m), ["e", "d", "c", "b", "a"]);
    }

    #[test]
    fn an_error_is_yielded_once_and_ends_the_merge() {
        let bad: Vec<Result<(Vec<u8>, Vec<u8>)>> = vec![Ok((b"a".to_vec(), vec![])), Err(Error::Closed)];
        let mut m = MergedScan::ascending(vec![bad.into_iter(), src(&["b", "c"])]);
        assert_eq!(m.next().expect("a").expect("ok").0, b"a");
        assert!(matches!(m.next(), Some(Err(Error::Closed))));
        assert!(m.next().is_none());
    }
}
