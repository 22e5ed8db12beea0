//! Which primary keys are live: one bit per key of `1..=rows`, shared by the threads that
//! write (the same statements go to both modes, so one set serves both).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::micro::workload::Stmt;

/// A concurrent bit set over keys `1..=rows` with a count of set bits.
pub struct LiveKeys {
    words: Vec<AtomicU64>,
    count: AtomicU64,
}

impl LiveKeys {
    /// Every key of `1..=rows` live (the preloaded table).
    pub fn all(rows: u64) -> LiveKeys {
        let n = rows.div_ceil(64) as usize + 1;
        let words: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let live = LiveKeys {
            words,
            count: AtomicU64::new(0),
        };
        for k in 1..=rows {
            live.set(k, true);
        }
        live
    }

    /// Marks `key` live or dead.
    pub fn set(&self, key: u64, alive: bool) {
        let (w, bit) = ((key / 64) as usize, 1u64 << (key % 64));
        let Some(word) = self.words.get(w) else { return };
        let before = if alive {
            word.fetch_or(bit, Ordering::Relaxed)
        } else {
            word.fetch_and(!bit, Ordering::Relaxed)
        };
        match (before & bit != 0, alive) {
            (false, true) => {
                self.count.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.count.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Applies the effect of committed statements.
    pub fn apply(&self, batch: &[Stmt]) {
        for s in batch {
            match s {
                Stmt::Replace(r) => self.set(r[0], true),
                Stmt::Delete(k) => self.set(*k, false),
            }
        }
    }

    /// Live keys.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_replaces_and_deletes() {
        let live = LiveKeys::all(100);
        assert_eq!(live.count(), 100);
        live.apply(&[Stmt::Delete(5), Stmt::Delete(5), Stmt::Delete(200)]);
        assert_eq!(live.count(), 99);
        live.apply(&[Stmt::Replace([5, 1, 1, 1, 1]), Stmt::Replace([6, 1, 1, 1, 1])]);
        assert_eq!(live.count(), 100);
    }
}
