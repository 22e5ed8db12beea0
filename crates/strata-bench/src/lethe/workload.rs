//! The lethe workload: unique random keys inserted with 1 KiB entries, interleaved with
//! point deletes of random live keys at a given share of the operations, spread evenly
//! over a planned run time.

use rand::{Rng, SeedableRng, rngs::StdRng};

/// Bytes of a key.
pub const KEY_SIZE: usize = 16;

/// Shape of one run's workload.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Shape {
    /// Entries inserted.
    pub inserts: u64,
    /// Key + value bytes of one entry.
    pub entry_size: usize,
    /// Share of operations that are deletes.
    pub delete_share: f64,
    /// Planned length of the ingest, seconds.
    pub seconds: f64,
    /// Seed.
    pub seed: u64,
}

impl Shape {
    /// Operations in all (inserts and deletes).
    pub fn operations(&self) -> u64 {
        (self.inserts as f64 / (1.0 - self.delete_share.clamp(0.0, 0.95))).round() as u64
    }

    /// Value bytes of an entry.
    pub fn value_size(&self) -> usize {
        self.entry_size.saturating_sub(KEY_SIZE).max(1)
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of the `i`-th insert: a random-looking prefix (so inserts land all over the
/// key space) and `i` (so keys are unique).
pub fn key(seed: u64, i: u64) -> [u8; KEY_SIZE] {
    let mut k = [0u8; KEY_SIZE];
    k[..8].copy_from_slice(&mix(seed ^ i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// One operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Insert the entry of this insert number.
    Insert(u64),
    /// Delete the entry of this insert number (live until now).
    Delete(u64),
}

/// The operation stream; tracks which inserted entries are live.
pub struct Ops {
    rng: StdRng,
    shape: Shape,
    inserted: u64,
    live: Vec<u64>,
}

impl Ops {
    /// The stream of `shape`.
    pub fn new(shape: Shape) -> Ops {
        Ops {
            rng: StdRng::seed_from_u64(shape.seed ^ 0x1E7E),
            shape,
            inserted: 0,
            live: Vec::new(),
        }
    }

    /// Entries live now.
    #[cfg(test)]
    pub fn live(&self) -> u64 {
        self.live.len() as u64
    }
}

impl Iterator for Ops {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.inserted >= self.shape.inserts {
            return None;
        }
        if !self.live.is_empty() && self.rng.gen_bool(self.shape.delete_share.clamp(0.0, 0.95)) {
            let i = self.rng.gen_range(0..self.live.len());
            return Some(Op::Delete(self.live.swap_remove(i)));
        }
        let n = self.inserted;
        self.inserted += 1;
        self.live.push(n);
        Some(Op::Insert(n))
    }
}

/// Value bytes of insert `i`: a window of a random buffer, so values differ.
pub struct Values {
    buf: Vec<u8>,
    size: usize,
}

impl Values {
    /// Values of `size` bytes.
    pub fn new(seed: u64, size: usize) -> Values {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xDA7A);
        let buf: Vec<u8> = (0..size + 4096).map(|_| rng.r#gen()).collect();
        Values { buf, size }
    }

    /// The value of insert `i`.
    pub fn get(&self, i: u64) -> &[u8] {
        let off = (mix(i) % 4096) as usize;
        &self.buf[off..off + self.size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_share_and_liveness() {
        let shape = Shape {
            inserts: 20_000,
            entry_size: 1024,
            delete_share: 0.4,
            seconds: 1.0,
            seed: 1,
        };
        let mut ops = Ops::new(shape);
        let (mut ins, mut del) = (0u64, 0u64);
        let mut alive = std::collections::HashSet::new();
        for op in ops.by_ref() {
            match op {
                Op::Insert(i) => {
                    ins += 1;
                    assert!(alive.insert(i));
                }
                Op::Delete(i) => {
                    del += 1;
                    assert!(alive.remove(&i), "deleted {i} twice or before insert");
                }
            }
        }
        assert_eq!(ins, 20_000);
        let share = del as f64 / (ins + del) as f64;
        assert!((share - 0.4).abs() < 0.02, "delete share {share}");
        assert_eq!(ops.live(), alive.len() as u64);
        assert!((shape.operations() as f64 - (ins + del) as f64).abs() / ((ins + del) as f64) < 0.03);
    }

    #[test]
    fn keys_are_unique_and_values_sized() {
        assert_ne!(key(1, 1), key(1, 2));
        let v = Values::new(3, 1008);
        assert_eq!(v.get(7).len(), 1008);
    }
}
