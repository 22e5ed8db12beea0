//! The synthetic Reddit-comment stream: `{id, subreddit, author}` records, generated
//! deterministically from a seed so both engines get the same records.
//!
//! Shape (after the peer's `GenSynthetic.java`, re-implemented): one hot author
//! `[deleted]` with `hot_fraction` of the records; the other authors' counts lognormal
//! with median 4 and the mean that makes the total come out (20.8 at 5,000,000 records
//! and 240,000 authors), capped at a fifth of the hot key; records in random order; ids
//! unique 7-character base-36 strings; subreddits from 10,000 names, exponentially
//! skewed toward the first ones.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Subreddit names.
pub const SUBREDDITS: usize = 10_000;
/// The hot author.
pub const HOT_AUTHOR: &str = "[deleted]";
/// First id: the smallest 7-character base-36 number.
const ID_BASE: u64 = 2_176_782_336;

/// One comment.
pub struct Record<'a> {
    /// 7-character base-36 id, unique.
    pub id: String,
    /// Subreddit name.
    pub subreddit: &'a str,
    /// Author name.
    pub author: &'a str,
}

/// The stream's plan: the author of each record and the names.
pub struct Plan {
    /// Author index of each record, in stream order.
    order: Vec<u32>,
    /// Author names; 0 is the hot one.
    pub authors: Vec<String>,
    subreddits: Vec<String>,
    /// Values per author.
    pub counts: Vec<u32>,
    seed: u64,
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// A standard normal draw (Box-Muller).
fn gaussian(r: &mut StdRng) -> f64 {
    let u1: f64 = r.r#gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = r.r#gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl Plan {
    /// Plans `records` records over `distinct` authors (at least 2).
    pub fn new(records: u64, distinct: u64, hot_fraction: f64, seed: u64) -> Plan {
        let mut r = StdRng::seed_from_u64(seed);
        let distinct = distinct.clamp(2, records.max(2)) as usize;
        let hot = ((records as f64) * hot_fraction).round() as u64;
        let rest = records - hot;
        let others = distinct - 1;
        let mean = rest as f64 / others as f64;
        let mu = 4f64.ln();
        let sigma = (2.0 * (mean / 4.0).max(1.0).ln()).sqrt();
        let cap = (hot as f64 * 0.2).max(1.0);
        let raw: Vec<f64> = (0..others)
            .map(|_| (mu + sigma * gaussian(&mut r)).exp().min(cap))
            .collect();
        let scale = rest as f64 / raw.iter().sum::<f64>();
        let mut counts: Vec<u32> = std::iter::once(hot as u32)
            .chain(raw.iter().map(|x| ((x * scale).round() as u32).max(1)))
            .collect();
        let mut total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        while total != records {
            let k = r.gen_range(1..distinct);
            if total > records && counts[k] > 1 {
                counts[k] -= 1;
                total -= 1;
            } else if total < records {
                counts[k] += 1;
                total += 1;
            }
        }
        let mut order: Vec<u32> = Vec::with_capacity(records as usize);
        for (k, &c) in counts.iter().enumerate() {
            order.extend(std::iter::repeat_n(k as u32, c as usize));
        }
        order.shuffle(&mut r);
        let authors = std::iter::once(HOT_AUTHOR.to_string())
            .chain((1..distinct).map(|k| format!("user_{}_{k}", base36(r.gen_range(0..ID_BASE)))))
            .collect();
        let subreddits = (0..SUBREDDITS)
            .map(|s| format!("sub{}x{}", base36(s as u64), base36(r.gen_range(0..1 << 20))))
            .collect();
        Plan {
            order,
            authors,
            subreddits,
            counts,
            seed,
        }
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.order.len() as u64
    }

    /// The records, in stream order (the same sequence every call).
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        let mut r = StdRng::seed_from_u64(self.seed ^ 0x5eed_0f5e_b5e1_d000);
        self.order.iter().enumerate().map(move |(i, &k)| {
            let e: f64 = -(1.0 - r.r#gen::<f64>()).ln() * 800.0;
            let sub = (e.floor() as usize).min(SUBREDDITS - 1);
            Record {
                id: base36(ID_BASE + i as u64 * 7),
                subreddit: &self.subreddits[sub],
                author: &self.authors[k as usize],
            }
        })
    }

    /// Median, mean and max values per author.
    pub fn shape(&self) -> (u32, f64, u32) {
        let mut c = self.counts.clone();
        c.sort_unstable();
        let mean = self.len() as f64 / c.len() as f64;
        (c[c.len() / 2], mean, c.last().copied().unwrap_or(0))
    }
}

/// Appends `r` in the peer's serialization (`DElementSerializer`): a map of three
/// string entries `id`, `subreddit`, `author`, in that order.
pub fn write_peer_record(out: &mut Vec<u8>, r: &Record) {
    // Type code in the low 4 bits; a length under 15 in the high 4 bits, else 0xF
    // there and the length as a LEB128 varint after.
    fn head(out: &mut Vec<u8>, code: u8, len: u64) {
        if len < 15 {
            out.push(code | ((len as u8) << 4));
        } else {
            out.push(code | 0xf0);
            let mut l = len;
            loop {
                let b = (l & 0x7f) as u8;
                l >>= 7;
                if l == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
        }
    }
    fn string(out: &mut Vec<u8>, s: &str) {
        head(out, 7, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
    head(out, 9, 3);
    for (k, v) in [("id", r.id.as_str()), ("subreddit", r.subreddit), ("author", r.author)] {
        string(out, k);
        string(out, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_matches_the_article() {
        let p = Plan::new(500_000, 24_000, 0.1, 1);
        assert_eq!(p.len(), 500_000);
        assert_eq!(p.counts.iter().map(|&c| u64::from(c)).sum::<u64>(), 500_000);
        assert_eq!(p.counts[0], 50_000);
        let (median, mean, max) = p.shape();
        assert!((3..=6).contains(&median), "median {median}");
        assert!((mean - 20.83).abs() < 0.1, "mean {mean}");
        assert_eq!(max, 50_000);
        let a: Vec<String> = p.records().take(1000).map(|r| r.id + r.author + r.subreddit).collect();
        let b: Vec<String> = p.records().take(1000).map(|r| r.id + r.author + r.subreddit).collect();
        assert_eq!(a, b, "the stream is deterministic");
        assert!(p.records().take(1000).all(|r| r.id.len() == 7));
    }

    #[test]
    fn peer_serialization_bytes() {
        let r = Record {
            id: "zzzzzzz".into(),
            subreddit: "s",
            author: "a_name_longer_than_15",
        };
        let mut out = Vec::new();
        write_peer_record(&mut out, &r);
        assert_eq!(out[0], 0x39, "map of 3");
        assert_eq!(&out[1..4], &[0x27, b'i', b'd'], "string of 2");
        assert_eq!(out[4], 0x77);
        let tail = &out[out.len() - 23..];
        assert_eq!(&tail[..2], &[0xf7, 21], "a long string: escape then varint length");
    }
}
