//! The micro workload, generated from one seed so every in-process engine sees the same
//! preload and the same statement stream per client thread.
//!
//! * Preload: rows with keys `1..=rows` in ascending order, the four other fields
//!   uniform in `1..=rows`.
//! * Client `i`: batches of uniform size `1..=max_batch`; each statement is, with
//!   probability 1/2, a replace of a uniform random key with uniform random fields,
//!   else a delete of a uniform random key.

use rand::{Rng, SeedableRng, rngs::StdRng};

/// Fields of a row of `test(f1, f2, f3, f4, f5)`; `f1` is the primary key.
pub const FIELDS: usize = 5;

/// A row: `[f1, f2, f3, f4, f5]`.
pub type Row = [u64; FIELDS];

/// One statement of a client batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stmt {
    /// Insert or overwrite the row with this primary key.
    Replace(Row),
    /// Delete the row with this primary key (no error if absent).
    Delete(u64),
}

/// Shape of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Rows preloaded; also the key and field universe `1..=rows`.
    pub rows: u64,
    /// Largest batch (transaction) a client builds.
    pub max_batch: usize,
    /// Seed of every generator.
    pub seed: u64,
}

impl Workload {
    /// The preload rows, keys ascending.
    pub fn preload(&self) -> Preload {
        Preload {
            rng: StdRng::seed_from_u64(self.seed),
            next: 1,
            rows: self.rows,
        }
    }

    /// The statement stream of client `index` (0-based); the same for every engine.
    pub fn client(&self, index: usize) -> ClientGen {
        let stream = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ClientGen {
            rng: StdRng::seed_from_u64(self.seed ^ stream),
            rows: self.rows.max(1),
            max_batch: self.max_batch.max(1),
        }
    }
}

/// Iterator over the preload rows.
pub struct Preload {
    rng: StdRng,
    next: u64,
    rows: u64,
}

impl Iterator for Preload {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        if self.next > self.rows {
            return None;
        }
        let key = self.next;
        self.next += 1;
        Some(random_row(&mut self.rng, key, self.rows))
    }
}

fn random_row(rng: &mut StdRng, key: u64, rows: u64) -> Row {
    [
        key,
        rng.gen_range(1..=rows),
        rng.gen_range(1..=rows),
        rng.gen_range(1..=rows),
        rng.gen_range(1..=rows),
    ]
}

/// The batch generator of one client.
pub struct ClientGen {
    rng: StdRng,
    rows: u64,
    max_batch: usize,
}

impl ClientGen {
    /// Replaces `out` with the next batch.
    pub fn next_batch(&mut self, out: &mut Vec<Stmt>) {
        out.clear();
        let n = self.rng.gen_range(1..=self.max_batch);
        for _ in 0..n {
            let key = self.rng.gen_range(1..=self.rows);
            let stmt = if self.rng.gen_bool(0.5) {
                Stmt::Replace(random_row(&mut self.rng, key, self.rows))
            } else {
                Stmt::Delete(key)
            };
            out.push(stmt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(rows: u64, max_batch: usize) -> Workload {
        Workload {
            rows,
            max_batch,
            seed: 7,
        }
    }

    #[test]
    fn preload_has_every_key_once_in_order_with_fields_in_range() {
        let rows: Vec<Row> = wl(1000, 500).preload().collect();
        assert_eq!(rows.len(), 1000);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r[0], i as u64 + 1);
            assert!(r[1..].iter().all(|f| (1..=1000).contains(f)), "{r:?}");
        }
    }

    #[test]
    fn preload_fields_are_roughly_uniform() {
        let rows = 10_000u64;
        let mut low = 0u64;
        let mut n = 0u64;
        for r in wl(rows, 1).preload() {
            for f in &r[1..] {
                n += 1;
                low += u64::from(*f <= rows / 2);
            }
        }
        let share = low as f64 / n as f64;
        assert!((share - 0.5).abs() < 0.01, "share of lower half {share}");
    }

    #[test]
    fn batch_sizes_cover_one_to_max_uniformly() {
        let max = 10;
        let mut g = wl(1000, max).client(0);
        let mut counts = vec![0u64; max + 1];
        let mut b = Vec::new();
        let n = 100_000;
        for _ in 0..n {
            g.next_batch(&mut b);
            assert!((1..=max).contains(&b.len()), "batch of {}", b.len());
            counts[b.len()] += 1;
        }
        assert_eq!(counts[0], 0);
        let expect = n as f64 / max as f64;
        for (size, c) in counts.iter().enumerate().skip(1) {
            let dev = (*c as f64 - expect).abs() / expect;
            assert!(dev < 0.05, "size {size}: {c} batches, expected about {expect}");
        }
    }

    #[test]
    fn default_batch_mean_is_about_250() {
        let mut g = wl(1_000_000, 500).client(3);
        let mut b = Vec::new();
        let (mut total, batches) = (0usize, 20_000);
        for _ in 0..batches {
            g.next_batch(&mut b);
            assert!((1..=500).contains(&b.len()));
            total += b.len();
        }
        let mean = total as f64 / batches as f64;
        assert!((mean - 250.5).abs() < 5.0, "mean batch {mean}");
    }

    #[test]
    fn half_replaces_half_deletes_keys_in_range() {
        let rows = 1000;
        let mut g = wl(rows, 500).client(1);
        let (mut replaces, mut deletes) = (0u64, 0u64);
        let mut b = Vec::new();
        while replaces + deletes < 400_000 {
            g.next_batch(&mut b);
            for s in &b {
                match s {
                    Stmt::Replace(r) => {
                        replaces += 1;
                        assert!(r.iter().all(|f| (1..=rows).contains(f)), "{r:?}");
                    }
                    Stmt::Delete(k) => {
                        deletes += 1;
                        assert!((1..=rows).contains(k));
                    }
                }
            }
        }
        let share = replaces as f64 / (replaces + deletes) as f64;
        assert!((share - 0.5).abs() < 0.005, "replace share {share}");
    }

    #[test]
    fn streams_are_deterministic_and_distinct_per_client() {
        let w = wl(1_000_000, 500);
        let batches = |i: usize| {
            let mut g = w.client(i);
            let mut out = Vec::new();
            for _ in 0..5 {
                let mut b = Vec::new();
                g.next_batch(&mut b);
                out.push(b);
            }
            out
        };
        assert_eq!(batches(0), batches(0));
        assert_ne!(batches(0), batches(1));
        let a: Vec<Row> = w.preload().take(100).collect();
        let b: Vec<Row> = w.preload().take(100).collect();
        assert_eq!(a, b);
    }
}
