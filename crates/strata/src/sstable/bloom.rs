//! A blocked ("cache-local") bloom filter over user keys.
//!
//! Each key's 64-bit hash picks one 512-bit line (one 64-byte cache line) from its high
//! 32 bits, and all `k` probes fall in that line: probe `i` sets bit
//! `(h1 + i·h2) mod 512`, with `h1` = hash bits 0..9 and `h2` = bits 9..18 forced odd
//! (double hashing; an odd step makes the `k` bits distinct). A lookup therefore touches
//! one cache line.
//!
//! The hash is MurmurHash64A (Austin Appleby, public domain) with a fixed seed; it is
//! part of the format (version byte 1), so it must never change for version 1.
//!
//! Sizing: a blocked filter needs more bits than a classic one for the same false-positive
//! rate, because keys per line vary (Poisson). [`BloomPolicy::from_fpr`] models that
//! exactly and picks the smallest bits-per-key (and best `k`) reaching the target.
//!
//! Encoding: `lines × 64 bytes (8 × u64 LE each) ++ num_lines: u32 LE ++ k: u8 ++ version: u8`.
//! The version also says what the filter holds of each user key ([`FilterKey`]):
//! 1 the whole key, 2 its key prefix, 3 its first `n` bytes, with `n: u8` written just
//! before `num_lines`.

use std::num::NonZeroU8;
use std::sync::Mutex;

use crate::codec::{DecodeError, Decoder, put_u32, put_u64};

const LINE_BITS: u32 = 512;
const MAX_PROBES: u32 = 24;
const MAX_BITS_PER_KEY: f64 = 100.0;
/// The version byte of a filter over whole user keys (the hash is part of the format).
const HASH_VERSION: u8 = 1;
/// The version byte of a filter over key prefixes ([`FilterKey::KeyPrefix`]).
const PREFIX_VERSION: u8 = 2;
/// The version byte of a filter over fixed-length prefixes ([`FilterKey::Fixed`]).
const FIXED_VERSION: u8 = 3;

/// What a filter holds of each user key. A file's filter says which in its version
/// byte, so a reader never needs to be told, and files of any kind may sit side by
/// side in one keyspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FilterKey {
    /// The whole user key: a point lookup of an absent key is filtered.
    #[default]
    Whole,
    /// The prefix of the user key through its first `00 01` byte pair (the whole key
    /// if it has none): the key part of a multimap entry (`multimap::encoding`). One
    /// filter entry stands for all of a key's values, so the filter is as small as the
    /// number of keys; a lookup of one (key, value) is filtered by its key.
    KeyPrefix,
    /// The first `n` bytes of the user key (the whole key if shorter): a secondary
    /// index's leading fixed-width field, so the filter says whether a file holds any
    /// entry for one index value.
    Fixed(NonZeroU8),
}

impl FilterKey {
    /// The bytes of `user_key` this kind of filter holds.
    #[inline]
    pub fn of(self, user_key: &[u8]) -> &[u8] {
        match self {
            FilterKey::Whole => user_key,
            FilterKey::KeyPrefix => {
                let end = user_key
                    .windows(2)
                    .position(|w| w == [0, 1])
                    .map_or(user_key.len(), |i| i + 2);
                user_key.get(..end).unwrap_or(user_key)
            }
            FilterKey::Fixed(n) => user_key.get(..usize::from(n.get())).unwrap_or(user_key),
        }
    }

    /// What to probe a filter of this kind with to learn whether it may hold a key
    /// starting with `prefix`; `None` when it cannot tell (every such key must then be
    /// assumed present). Some only where every key starting with `prefix` has the same
    /// filter key: a whole [`FilterKey::KeyPrefix`] inside `prefix`, or at least `n`
    /// bytes for [`FilterKey::Fixed`].
    pub fn of_prefix(self, prefix: &[u8]) -> Option<&[u8]> {
        match self {
            FilterKey::Whole => None,
            FilterKey::KeyPrefix => {
                let end = prefix.windows(2).position(|w| w == [0, 1])? + 2;
                prefix.get(..end)
            }
            FilterKey::Fixed(n) => prefix.get(..usize::from(n.get())),
        }
    }

    fn version(self) -> u8 {
        match self {
            FilterKey::Whole => HASH_VERSION,
            FilterKey::KeyPrefix => PREFIX_VERSION,
            FilterKey::Fixed(_) => FIXED_VERSION,
        }
    }
}

/// A user key's filter hash, computed once for the many filters one lookup may probe
/// (a tile's pages have a filter each, all of one kind).
#[derive(Debug)]
pub struct KeyHash<'a> {
    user_key: &'a [u8],
    last: Option<(FilterKey, u64)>,
}

impl<'a> KeyHash<'a> {
    /// `user_key`, not hashed yet.
    pub fn new(user_key: &'a [u8]) -> Self {
        KeyHash { user_key, last: None }
    }

    /// The hash a filter of kind `kind` holds for the key.
    fn of(&mut self, kind: FilterKey) -> u64 {
        match self.last {
            Some((k, h)) if k == kind => h,
            _ => {
                let h = hash64(kind.of(self.user_key));
                self.last = Some((kind, h));
                h
            }
        }
    }
}

const SEED: u64 = 0x5354_5241_5441_424c;

/// MurmurHash64A of `data` with Strata's fixed seed.
pub fn hash64(data: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = SEED ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = (h ^ k).wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let t = tail
            .iter()
            .enumerate()
            .fold(0u64, |t, (i, &b)| t | u64::from(b) << (8 * i));
        h = (h ^ t).wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

/// Expected false-positive rate of a blocked filter with `bpk` bits per key and `k`
/// probes: keys per line are Poisson(512 / bpk); a line holding `n` keys has a fraction
/// `1 - (1 - k/512)^n` of its bits set, and a miss must find all `k` probes set.
fn model_fpr(bpk: f64, k: u32) -> f64 {
    let lambda = f64::from(LINE_BITS) / bpk;
    let miss_one = 1.0 - f64::from(k) / f64::from(LINE_BITS);
    let last = (lambda + 12.0 * lambda.sqrt() + 20.0) as u32;
    let mut pmf = (-lambda).exp();
    let mut total = 0.0;
    for n in 0..=last {
        if n > 0 {
            pmf *= lambda / f64::from(n);
        }
        total += pmf * (1.0 - miss_one.powi(n as i32)).powi(k as i32);
    }
    total
}

/// The best probe count for `bpk` bits per key, and its modelled FPR. The optimum lies
/// near the classic `bpk · ln 2`, so only its neighbourhood is searched.
fn best_probes(bpk: f64) -> (u32, f64) {
    let guess = ((bpk * std::f64::consts::LN_2).round() as u32).clamp(1, MAX_PROBES);
    (guess.saturating_sub(3).max(1)..=(guess + 3).min(MAX_PROBES))
        .map(|k| (k, model_fpr(bpk, k)))
        .fold((1, f64::INFINITY), |best, c| if c.1 < best.1 { c } else { best })
}

/// The last policy computed by [`BloomPolicy::from_fpr`], keyed by the rate's bits: a
/// database uses one rate, and the search costs milliseconds.
static LAST_POLICY: Mutex<Option<(u64, BloomPolicy)>> = Mutex::new(None);

/// Filter shape: bits per key and probes per key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BloomPolicy {
    bits_per_key: f64,
    probes: u32,
}

impl BloomPolicy {
    /// The smallest filter whose modelled false-positive rate is at most `fpr`;
    /// `None` (no filter) when `fpr` is not in `(0, 1)`.
    pub fn from_fpr(fpr: f64) -> Option<BloomPolicy> {
        if !(fpr > 0.0 && fpr < 1.0) {
            return None;
        }
        let memo = LAST_POLICY.lock().ok().and_then(|g| *g);
        if let Some((bits, p)) = memo
            && bits == fpr.to_bits()
        {
            return Some(p);
        }
        // FPR falls monotonically with bits per key: bisect.
        let (mut lo, mut hi) = (0.5f64, MAX_BITS_PER_KEY);
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            if best_probes(mid).1 <= fpr { hi = mid } else { lo = mid }
        }
        let policy = BloomPolicy::from_bits_per_key(hi)?;
        if let Ok(mut g) = LAST_POLICY.lock() {
            *g = Some((fpr.to_bits(), policy));
        }
        Some(policy)
    }

    /// A filter with `bits_per_key` bits per key (clamped to 100) and the best probe
    /// count for it; `None` when `bits_per_key` is not positive.
    pub fn from_bits_per_key(bits_per_key: f64) -> Option<BloomPolicy> {
        // Also rejects NaN.
        if bits_per_key.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let bits_per_key = bits_per_key.min(MAX_BITS_PER_KEY);
        Some(BloomPolicy {
            bits_per_key,
            probes: best_probes(bits_per_key).0,
        })
    }

    /// Bits per key.
    pub fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    /// Probes per key.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The modelled false-positive rate.
    pub fn estimated_fpr(&self) -> f64 {
        model_fpr(self.bits_per_key, self.probes)
    }

    fn lines_for(&self, keys: usize) -> u32 {
        let bits = (keys as f64 * self.bits_per_key).ceil();
        ((bits / f64::from(LINE_BITS)).ceil() as u32).max(1)
    }
}

/// Collects key hashes, then builds the filter.
#[derive(Debug)]
pub struct BloomBuilder {
    policy: BloomPolicy,
    key: FilterKey,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// An empty builder.
    pub fn new(policy: BloomPolicy) -> Self {
        Self::with_key(policy, FilterKey::Whole)
    }

    /// An empty builder of a filter holding `key` of each user key.
    pub fn with_key(policy: BloomPolicy, key: FilterKey) -> Self {
        BloomBuilder {
            policy,
            key,
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. Adding the same key (or, for a prefix filter, a key with the
    /// same prefix) twice in a row counts it once, so sorted input costs one entry per
    /// distinct filter key.
    pub fn add_key(&mut self, user_key: &[u8]) {
        let h = hash64(self.key.of(user_key));
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Keys added.
    pub fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// Encoded size if finished now.
    pub fn estimated_size(&self) -> usize {
        self.policy.lines_for(self.hashes.len()) as usize * 64 + trailer_len(self.key)
    }

    /// Builds the filter (one empty line when no key was added, so it rejects all).
    pub fn finish(self) -> BloomFilter {
        let mut f = BloomFilter {
            lines: vec![Line([0; 8]); self.policy.lines_for(self.hashes.len()) as usize],
            probes: self.policy.probes,
            key: self.key,
        };
        for h in self.hashes {
            f.set(h);
        }
        f
    }
}

/// Bytes after the filter's lines.
fn trailer_len(key: FilterKey) -> usize {
    if matches!(key, FilterKey::Fixed(_)) { 7 } else { 6 }
}

/// One cache line of filter bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([u64; 8]);

/// A built or decoded filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomFilter {
    lines: Vec<Line>,
    probes: u32,
    key: FilterKey,
}

impl BloomFilter {
    /// The line and the bit positions probed for hash `h`.
    fn probes_of(&self, h: u64) -> (usize, impl Iterator<Item = u32> + use<>) {
        let line = (((h >> 32) * self.lines.len() as u64) >> 32) as usize;
        let h1 = h as u32;
        let h2 = ((h >> 9) as u32) | 1;
        let bits = (0..self.probes).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % LINE_BITS);
        (line, bits)
    }

    fn set(&mut self, h: u64) {
        let (line, bits) = self.probes_of(h);
        if let Some(l) = self.lines.get_mut(line) {
            for b in bits {
                l.0[(b / 64) as usize] |= 1 << (b % 64);
            }
        }
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(hash64(self.key.of(user_key)))
    }

    /// [`may_contain`](Self::may_contain) of `key`'s user key, hashed once for all the
    /// filters it is probed against.
    pub fn may_contain_key(&self, key: &mut KeyHash<'_>) -> bool {
        self.may_contain_hash(key.of(self.key))
    }

    fn may_contain_hash(&self, h: u64) -> bool {
        let (line, mut bits) = self.probes_of(h);
        self.lines
            .get(line)
            .is_none_or(|l| bits.all(|b| l.0[(b / 64) as usize] & (1 << (b % 64)) != 0))
    }

    /// What the filter holds of each user key.
    pub fn key(&self) -> FilterKey {
        self.key
    }

    /// Number of 64-byte lines.
    pub fn num_lines(&self) -> usize {
        self.lines.len()
    }

    /// Total filter bits.
    pub fn num_bits(&self) -> u64 {
        self.lines.len() as u64 * u64::from(LINE_BITS)
    }

    /// Probes per key.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// Whether the filter may hold a key starting with `prefix` (true when its kind
    /// cannot tell, [`FilterKey::of_prefix`]).
    pub fn may_contain_prefix(&self, prefix: &[u8]) -> bool {
        self.key
            .of_prefix(prefix)
            .is_none_or(|p| self.may_contain_hash(hash64(p)))
    }

    /// Encodes as described in the module docs.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.lines.len() * 64 + trailer_len(self.key));
        for w in self.lines.iter().flat_map(|l| l.0) {
            put_u64(&mut out, w);
        }
        if let FilterKey::Fixed(n) = self.key {
            out.push(n.get());
        }
        put_u32(&mut out, self.lines.len() as u32);
        out.push(self.probes as u8);
        out.push(self.key.version());
        out
    }

    /// Decodes and validates an encoded filter. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<BloomFilter, DecodeError> {
        let err = |offset, reason| Err(DecodeError { offset, reason });
        let Some(meta_at) = bytes.len().checked_sub(6) else {
            return err(0, "bloom filter too short");
        };
        let mut meta = Decoder::new(&bytes[meta_at..]);
        let lines = meta.u32()? as usize;
        let probes = u32::from(meta.u8()?);
        // `lines_end`: where the lines stop (before a version-3 filter's length byte).
        let (key, lines_end) = match meta.u8()? {
            HASH_VERSION => (FilterKey::Whole, meta_at),
            PREFIX_VERSION => (FilterKey::KeyPrefix, meta_at),
            FIXED_VERSION => match meta_at.checked_sub(1).map(|at| (at, bytes.get(at).copied())) {
                Some((at, Some(n))) => match NonZeroU8::new(n) {
                    Some(n) => (FilterKey::Fixed(n), at),
                    None => return err(at, "fixed-prefix bloom filter of length 0"),
                },
                _ => return err(0, "bloom filter too short"),
            },
            _ => return err(meta_at + 5, "unknown bloom filter version"),
        };
        if probes == 0 || probes > MAX_PROBES {
            return err(meta_at + 4, "bloom probe count out of range");
        }
        if lines == 0 || lines.checked_mul(64) != Some(lines_end) {
            return err(meta_at, "bloom line count does not match the filter size");
        }
        let mut d = Decoder::new(&bytes[..lines_end]);
        let mut out = Vec::with_capacity(lines);
        for _ in 0..lines {
            let mut l = Line([0; 8]);
            for w in &mut l.0 {
                *w = d.u64()?;
            }
            out.push(l);
        }
        Ok(BloomFilter {
            lines: out,
            probes,
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn measured_fpr(target: f64) -> (f64, f64) {
        let policy = BloomPolicy::from_fpr(target).expect("policy");
        let mut b = BloomBuilder::new(policy);
        let n = 10_000;
        for i in 0..n {
            b.add_key(format!("user{i:08}").as_bytes());
        }
        let f = BloomFilter::decode(&b.finish().encode()).expect("decode");
        for i in 0..n {
            assert!(f.may_contain(format!("user{i:08}").as_bytes()), "false negative {i}");
        }
        let probes = 200_000;
        let fp = (0..probes)
            .filter(|i| f.may_contain(format!("other{i:08}").as_bytes()))
            .count();
        (fp as f64 / f64::from(probes), f.num_bits() as f64 / n as f64)
    }

    /// `key ++ 00 01 ++ value`, as a multimap writes its entries.
    fn entry(key: u32, value: u32) -> Vec<u8> {
        [format!("k{key}").as_bytes(), &[0, 1], &value.to_be_bytes()].concat()
    }

    #[test]
    fn a_prefix_filter_holds_one_entry_per_key_and_answers_for_its_values() {
        let policy = BloomPolicy::from_fpr(0.01).expect("policy");
        let mut b = BloomBuilder::with_key(policy, FilterKey::KeyPrefix);
        for k in 0..1000 {
            for v in 0..20 {
                b.add_key(&entry(k, v));
            }
        }
        assert_eq!(b.num_keys(), 1000, "one filter entry per key, not per value");
        let f = BloomFilter::decode(&b.finish().encode()).expect("decode");
        assert_eq!(f.key(), FilterKey::KeyPrefix);
        for k in 0..1000 {
            // Any value of a present key passes, stored or not.
            assert!(f.may_contain(&entry(k, 0)));
            assert!(f.may_contain(&entry(k, 999)));
        }
        let fp = (1000..21_000).filter(|&k| f.may_contain(&entry(k, 0))).count();
        assert!(fp < 400, "{fp} false positives in 20,000 absent keys");
        // A whole-key filter of the same entries rules out an absent value.
        let mut b = BloomBuilder::new(policy);
        b.add_key(&entry(1, 1));
        let f = BloomFilter::decode(&b.finish().encode()).expect("decode");
        assert_eq!(f.key(), FilterKey::Whole);
        assert!(f.may_contain(&entry(1, 1)));
        assert!(!f.may_contain(&entry(1, 2)));
    }

    #[test]
    fn a_fixed_prefix_filter_answers_for_every_key_with_the_prefix() {
        let policy = BloomPolicy::from_fpr(0.01).expect("policy");
        let mut b = BloomBuilder::with_key(policy, FilterKey::Fixed(NonZeroU8::new(8).expect("8")));
        // An index entry: an 8-byte value, then the primary key.
        let entry = |v: u64, pk: u64| [v.to_be_bytes(), pk.to_be_bytes()].concat();
        for v in 0..1000u64 {
            for pk in 0..5 {
                b.add_key(&entry(v * 2, v * 10 + pk));
            }
        }
        b.add_key(b"short");
        assert_eq!(b.num_keys(), 1001, "one filter entry per value");
        let f = BloomFilter::decode(&b.finish().encode()).expect("decode");
        assert_eq!(f.key(), FilterKey::Fixed(NonZeroU8::new(8).expect("8")));
        for v in 0..1000u64 {
            assert!(f.may_contain_prefix(&(v * 2).to_be_bytes()));
            // A longer prefix is probed by its first 8 bytes.
            assert!(f.may_contain_prefix(&entry(v * 2, 12345)));
            assert!(f.may_contain(&entry(v * 2, 999)));
        }
        let fp = (0..20_000u64)
            .filter(|v| f.may_contain_prefix(&(v * 2 + 1).to_be_bytes()))
            .count();
        assert!(fp < 400, "{fp} false positives in 20,000 absent values");
        // Too short a prefix cannot be told: assumed present.
        assert!(f.may_contain_prefix(b"abc"));
        assert!(f.may_contain(b"short"));
        // The length survives the round trip; a length of 0 is refused.
        let mut bytes = f.encode();
        let at = bytes.len() - 7;
        assert_eq!(bytes[at], 8);
        bytes[at] = 0;
        assert!(BloomFilter::decode(&bytes).is_err());
        assert!(BloomFilter::decode(&[FIXED_VERSION]).is_err());
    }

    #[test]
    fn a_prefix_is_probed_only_where_its_keys_share_the_filter_key() {
        assert_eq!(FilterKey::Whole.of_prefix(b"ab"), None);
        assert_eq!(
            FilterKey::KeyPrefix.of_prefix(b"ab\x00\x01cd"),
            Some(&b"ab\x00\x01"[..])
        );
        // No whole terminator in the prefix: its keys' filter keys differ.
        assert_eq!(FilterKey::KeyPrefix.of_prefix(b"ab\x00"), None);
        assert_eq!(
            FilterKey::Fixed(NonZeroU8::new(3).expect("3")).of_prefix(b"abcd"),
            Some(&b"abc"[..])
        );
        assert_eq!(FilterKey::Fixed(NonZeroU8::new(3).expect("3")).of_prefix(b"ab"), None);
    }

    #[test]
    fn key_prefix_ends_at_the_first_terminator() {
        assert_eq!(FilterKey::KeyPrefix.of(b"ab\x00\x01cd\x00\x01"), b"ab\x00\x01");
        assert_eq!(FilterKey::KeyPrefix.of(b"a\x00\xffb"), b"a\x00\xffb");
        assert_eq!(FilterKey::KeyPrefix.of(b""), b"");
        assert_eq!(FilterKey::Whole.of(b"ab\x00\x01cd"), b"ab\x00\x01cd");
    }

    #[test]
    fn fpr_within_target_and_size_sane() {
        for target in [0.01, 0.05] {
            let (fpr, bpk) = measured_fpr(target);
            assert!(fpr <= target * 1.5, "target {target}: measured {fpr}");
            assert!(fpr >= target / 3.0, "target {target}: filter oversized ({fpr})");
            // A classic filter needs -ln(p)/ln²2 bits per key; blocking costs a bit more.
            let classic = -target.ln() / std::f64::consts::LN_2.powi(2);
            assert!(bpk < classic * 1.4, "target {target}: {bpk} bits per key");
        }
    }

    #[test]
    fn policy_shrinks_as_the_target_rate_grows() {
        let mut prev = f64::INFINITY;
        for target in [1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.3] {
            let p = BloomPolicy::from_fpr(target).expect("policy");
            assert!(p.estimated_fpr() <= target * 1.0001, "{target}: {p:?}");
            assert!(p.bits_per_key() < prev && p.bits_per_key() < 60.0, "{target}: {p:?}");
            assert!(p.probes() >= 1 && p.probes() <= MAX_PROBES);
            prev = p.bits_per_key();
        }
    }

    #[test]
    fn no_filter_for_degenerate_rates() {
        for r in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
            assert!(BloomPolicy::from_fpr(r).is_none(), "{r}");
        }
        let empty = BloomBuilder::new(BloomPolicy::from_fpr(0.01).expect("policy")).finish();
        assert!(!empty.may_contain(b"x"));
    }

    #[test]
    fn murmur64a_is_stable() {
        // Pinned: the hash is part of the on-disk format.
        assert_eq!(hash64(b""), 0xf771_b6ca_edd0_5257);
        assert_eq!(hash64(b"strata"), 0x44ec_065b_7e68_cdd6);
        assert_eq!(hash64(b"0123456789abcdef!"), 0xc7dc_fe89_ab42_d311);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(f) = BloomFilter::decode(&bytes) {
                let _ = f.may_contain(&bytes);
                prop_assert_eq!(f.encode(), bytes);
            }
        }

        #[test]
        fn no_false_negatives(keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..200)) {
            let mut b = BloomBuilder::new(BloomPolicy::from_bits_per_key(6.0).expect("policy"));
            for k in &keys {
                b.add_key(k);
            }
            let f = b.finish();
            for k in &keys {
                prop_assert!(f.may_contain(k));
            }
        }
    }
}
