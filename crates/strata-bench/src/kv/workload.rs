//! The workload generator shared by every engine: key numbers, key bytes, value bytes
//! and per-thread random streams, all deterministic, so two engines given the same
//! workload see the same keys in the same order with the same values.

use std::sync::atomic::{AtomicU64, Ordering};

/// A db_bench workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Keys 0..num in ascending order, into an empty database.
    FillSeq,
    /// `num` writes of uniform random keys, into an empty database.
    FillRandom,
    /// `num` writes of uniform random keys into the existing database.
    Overwrite,
    /// `reads` point lookups of uniform random keys.
    ReadRandom,
    /// `reads` seeks to uniform random keys, each followed by `seek_nexts` nexts.
    SeekRandom,
    /// `num` deletes of uniform random keys.
    DeleteRandom,
    /// `reads` point lookups per reader while one more thread overwrites at full speed.
    ReadWhileWriting,
    /// `sync_ops` random writes into an empty database, each fsynced before it is
    /// acknowledged, from this many threads.
    FillSync(usize),
}

impl Workload {
    /// Parses `--benchmarks`; `fillsync` expands to one workload per `--sync_threads`.
    pub fn parse_list(names: &[String], sync_threads: &[usize]) -> crate::BenchResult<Vec<Workload>> {
        let mut out = Vec::new();
        for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            match n {
                "fillseq" => out.push(Workload::FillSeq),
                "fillrandom" => out.push(Workload::FillRandom),
                "overwrite" => out.push(Workload::Overwrite),
                "readrandom" => out.push(Workload::ReadRandom),
                "seekrandom" => out.push(Workload::SeekRandom),
                "deleterandom" => out.push(Workload::DeleteRandom),
                "readwhilewriting" => out.push(Workload::ReadWhileWriting),
                "fillsync" => out.extend(sync_threads.iter().map(|&t| Workload::FillSync(t))),
                other => {
                    return Err(format!(
                        "unknown benchmark {other:?} (known: fillseq, fillrandom, overwrite, readrandom, \
                         seekrandom, deleterandom, readwhilewriting, fillsync)"
                    )
                    .into());
                }
            }
        }
        if out.is_empty() {
            return Err("--benchmarks names no workload".into());
        }
        Ok(out)
    }

    /// The name in db_bench's output (`fillsync/4` for four sync writers).
    pub fn name(&self) -> String {
        match self {
            Workload::FillSeq => "fillseq".into(),
            Workload::FillRandom => "fillrandom".into(),
            Workload::Overwrite => "overwrite".into(),
            Workload::ReadRandom => "readrandom".into(),
            Workload::SeekRandom => "seekrandom".into(),
            Workload::DeleteRandom => "deleterandom".into(),
            Workload::ReadWhileWriting => "readwhilewriting".into(),
            Workload::FillSync(t) => format!("fillsync/{t}"),
        }
    }

    /// Whether the workload starts from an empty database.
    pub fn fresh_db(&self) -> bool {
        matches!(self, Workload::FillSeq | Workload::FillRandom | Workload::FillSync(_))
    }

    /// Whether the workload writes (and so has a write amplification).
    pub fn writes(&self) -> bool {
        !matches!(self, Workload::ReadRandom | Workload::SeekRandom)
    }
}

/// SplitMix64: a small, fast, seedable generator; one stream per thread and workload.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream of `thread` in the workload numbered `phase` of round `round`.
    pub fn for_thread(round: usize, phase: usize, thread: usize) -> Rng {
        Rng(0x5EED_0000_0000_0000 ^ ((round as u64) << 40) ^ ((phase as u64) << 20) ^ thread as u64)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Key bytes: the key number big-endian in the first 8 bytes, zero padding after (as
/// db_bench does), so key order is number order.
pub fn make_key(i: u64, out: &mut [u8]) {
    out.fill(0);
    out[..8].copy_from_slice(&i.to_be_bytes());
}

/// Value bytes: windows into one fixed buffer of pseudo-random bytes (incompressible,
/// like db_bench with compression off), chosen by the operation's sequence number.
#[derive(Debug)]
pub struct Values {
    data: Vec<u8>,
    size: usize,
}

impl Values {
    /// A generator of `size`-byte values.
    pub fn new(size: usize) -> Values {
        let len = (1 << 20) + size;
        let mut rng = Rng(0xDA7A);
        let data = (0..len).map(|_| rng.next_u64() as u8).collect();
        Values { data, size }
    }

    /// The value written by operation `n`.
    pub fn get(&self, n: u64) -> &[u8] {
        let off = (n.wrapping_mul(0x9E37_79B9) % (1 << 20)) as usize;
        &self.data[off..off + self.size]
    }
}

/// Which key numbers hold a live value, for space amplification: bytes on disk over
/// `live keys * (key size + value size)`.
#[derive(Debug)]
pub struct LiveKeys {
    words: Vec<AtomicU64>,
}

impl LiveKeys {
    /// No key live, over `0..num`.
    pub fn new(num: u64) -> LiveKeys {
        LiveKeys {
            words: (0..num.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Forgets every key (a fresh database).
    pub fn clear(&self) {
        for w in &self.words {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Marks key `i` live or deleted.
    pub fn set(&self, i: u64, live: bool) {
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if let Some(w) = self.words.get(w) {
            if live {
                w.fetch_or(bit, Ordering::Relaxed);
            } else {
                w.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }

    /// Live keys.
    pub fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_number() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        make_key(255, &mut a);
        make_key(256, &mut b);
        assert!(a < b);
    }

    #[test]
    fn streams_are_deterministic_and_in_range() {
        let mut r1 = Rng::for_thread(0, 1, 2);
        let mut r2 = Rng::for_thread(0, 1, 2);
        for _ in 0..1000 {
            let x = r1.below(77);
            assert_eq!(x, r2.below(77));
            assert!(x < 77);
        }
    }

    #[test]
    fn live_keys_count() {
        let l = LiveKeys::new(130);
        l.set(3, true);
        l.set(129, true);
        l.set(3, true);
        assert_eq!(l.count(), 2);
        l.set(3, false);
        assert_eq!(l.count(), 1);
        l.clear();
        assert_eq!(l.count(), 0);
    }

    #[test]
    fn workload_list_expands_fillsync() {
        let names = vec!["fillrandom".to_string(), "fillsync".to_string()];
        let w = Workload::parse_list(&names, &[1, 4]).unwrap();
        assert_eq!(
            w,
            vec![Workload::FillRandom, Workload::FillSync(1), Workload::FillSync(4)]
        );
        assert!(Workload::parse_list(&["nope".to_string()], &[1]).is_err());
    }
}
