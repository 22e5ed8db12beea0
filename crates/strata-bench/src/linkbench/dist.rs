//! Distributions of the linkbench workload: a Zipf sampler over popularity ranks (a
//! precomputed CDF searched by bisection, exact for any exponent), the power-law
//! out-degree distribution (a Zipf CDF over `1..=MAX_DEGREE + 1`, minus one, with the
//! exponent solved for the wanted mean), and the stateless hashing that makes the
//! loaded graph a pure function of the seed.

/// Largest out-degree of a loaded node.
pub const MAX_DEGREE: u64 = 1000;

/// SplitMix64: a stateless 64-bit mixer (bijective), for per-node and per-link draws.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform float in `[0, 1)` from a hash.
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Zipf over ranks `1..=n`: `P(k) ∝ k^-s`, sampled by inverting a precomputed CDF
/// (`n` floats; a draw is one bisection, about 20 steps for a million ranks).
#[derive(Debug, Clone)]
pub struct Zipf {
    /// `cdf[k-1]` = P(rank ≤ k), the last entry exactly 1.
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `1..=n` (n ≥ 1) with exponent `s` (≥ 0).
    pub fn new(n: u64, s: f64) -> Zipf {
        let n = n.max(1);
        let mut cdf = Vec::with_capacity(n as usize);
        let mut acc = 0.0;
        for k in 1..=n {
            acc += (k as f64).powf(-s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Zipf { cdf }
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.cdf.len() as u64
    }

    /// The rank (1-based) at quantile `u` in `[0, 1)`.
    pub fn rank_at(&self, u: f64) -> u64 {
        let i = self.cdf.partition_point(|&c| c <= u);
        (i.min(self.cdf.len() - 1) + 1) as u64
    }

    /// P(rank = k).
    pub fn probability(&self, k: u64) -> f64 {
        let i = (k.clamp(1, self.n()) - 1) as usize;
        self.cdf[i] - if i == 0 { 0.0 } else { self.cdf[i - 1] }
    }

    /// Mean of `rank - 1` (used to tune the degree distribution).
    fn mean_minus_one(&self) -> f64 {
        (1..=self.n()).map(|k| self.probability(k) * (k - 1) as f64).sum()
    }
}

/// Out-degree of a loaded node: `rank - 1` for a Zipf rank over `1..=MAX_DEGREE + 1`,
/// so 0 is the most likely degree and the tail is a power law.
#[derive(Debug, Clone)]
pub struct Degree {
    zipf: Zipf,
    exponent: f64,
}

impl Degree {
    /// The distribution whose mean is `mean` (solved for the exponent by bisection).
    pub fn with_mean(mean: f64) -> Degree {
        let (mut lo, mut hi) = (0.5f64, 4.0f64);
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            // The mean falls as the exponent grows.
            if Zipf::new(MAX_DEGREE + 1, mid).mean_minus_one() > mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let exponent = (lo + hi) / 2.0;
        Degree {
            zipf: Zipf::new(MAX_DEGREE + 1, exponent),
            exponent,
        }
    }

    /// The Zipf exponent found.
    pub fn exponent(&self) -> f64 {
        self.exponent
    }

    /// The degree at quantile `u` in `[0, 1)`.
    pub fn at(&self, u: f64) -> u64 {
        self.zipf.rank_at(u) - 1
    }

    /// The distribution's mean.
    #[cfg(test)]
    pub fn mean(&self) -> f64 {
        self.zipf.mean_minus_one()
    }
}

/// Greatest common divisor.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The smallest number ≥ `start` (and ≥ 1) coprime with `n`: a multiplier `m` for
/// which `k -> k * m mod n` permutes `0..n`.
pub fn coprime_at_least(start: u64, n: u64) -> u64 {
    let mut m = start.max(1);
    while gcd(m, n) != 1 {
        m += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    #[test]
    fn zipf_popularity_is_monotone() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = vec![0u64; 1001];
        for _ in 0..100_000 {
            counts[z.rank_at(rng.r#gen::<f64>()) as usize] += 1;
        }
        // Rank 1 gets 1/H(1000) ≈ 13.4 % of the draws.
        let top = counts[1] as f64 / 100_000.0;
        assert!((top - 0.1336).abs() < 0.005, "rank 1 share {top}");
        // Mean draws per rank over doubling buckets [2^b, 2^(b+1)) strictly fall.
        let mut prev = f64::INFINITY;
        for b in 0..10 {
            let (lo, hi) = (1usize << b, (2usize << b).min(1001));
            let avg = counts[lo..hi].iter().sum::<u64>() as f64 / (hi - lo) as f64;
            assert!(avg < prev, "bucket {b}: {avg} after {prev}");
            prev = avg;
        }
        assert!(counts[1] > counts[2] && counts[2] > counts[3] && counts[3] > counts[5]);
    }

    #[test]
    fn zipf_probabilities_follow_the_power_law() {
        let z = Zipf::new(100, 1.0);
        let total: f64 = (1..=100).map(|k| z.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!((z.probability(1) / z.probability(10) - 10.0).abs() < 1e-6);
        assert_eq!(z.rank_at(0.0), 1);
        assert_eq!(z.rank_at(0.999_999_999), 100);
    }

    #[test]
    fn degree_mean_is_tuned_and_tail_is_heavy() {
        let d = Degree::with_mean(4.0);
        assert!((d.mean() - 4.0).abs() < 0.01, "mean {}", d.mean());
        assert!(d.exponent() > 1.0 && d.exponent() < 3.0);
        let mut rng = StdRng::seed_from_u64(3);
        let draws: Vec<u64> = (0..100_000).map(|_| d.at(rng.r#gen())).collect();
        let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
        assert!((mean - 4.0).abs() < 0.5, "sample mean {mean}");
        assert!(draws.iter().filter(|&&x| x == 0).count() > 40_000);
        assert!(draws.iter().any(|&x| x >= 200));
        assert!(draws.iter().all(|&x| x <= MAX_DEGREE));
    }

    #[test]
    fn coprime_multiplier_permutes() {
        for n in [1u64, 2, 10, 97, 1000] {
            let m = coprime_at_least(0x9E37_79B9 % n.max(2), n);
            let mut seen = vec![false; n as usize];
            for k in 0..n {
                seen[((k * m) % n) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "n {n} m {m}");
        }
    }
}
