//! Streaming one key's values holds one block per source, never the values: the
//! process's resident memory (`/proc/self/statm`) grows by at most a few MiB while a
//! key with many values is read to the end, forward and backward.
//!
//! 300,000 values by default (a few seconds in a debug build); the 2,000,000
//! with `STRATA_MULTIMAP_VALUES=2000000` (about 10 s in release).

mod streaming_harness;

use strata::multimap::MultiMap;
use streaming_harness::{env_count, small_buffers_db};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("rss field");
    // SAFETY: sysconf has no preconditions; it reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// Reads every value, checking order, and returns the largest RSS growth over `base`.
fn stream(it: impl Iterator<Item = strata::Result<Vec<u8>>>, n: u64, ascending: bool, base: u64) -> u64 {
    let mut prev: Option<Vec<u8>> = None;
    let mut count = 0u64;
    let mut peak = 0u64;
    for v in it {
        let v = v.expect("value");
        if let Some(p) = &prev {
            assert_eq!(p < &v, ascending, "values out of order");
        }
        prev = Some(v);
        count += 1;
        if count.is_multiple_of(50_000) {
            peak = peak.max(rss_bytes().saturating_sub(base));
        }
    }
    assert_eq!(count, n);
    peak.max(rss_bytes().saturating_sub(base))
}

#[test]
fn streaming_a_huge_key_keeps_memory_flat() {
    let n = env_count("STRATA_MULTIMAP_VALUES", 300_000);
    let (_dir, db) = small_buffers_db();
    let mm = MultiMap::new(db.create_keyspace("by_author").expect("ks"));
    mm.load((0..n).map(|i| (b"[deleted]", format!("{i:010}"))), 2)
        .expect("load");
    mm.put(b"alice", b"x").expect("put");
    db.compact_range().expect("compact");
    db.wait_for_background().expect("idle");
    // Warm up allocator arenas and the iterator's buffers on a small read.
    assert_eq!(mm.get(b"[deleted]").expect("get").take(1000).count(), 1000);
    let base = rss_bytes();
    let fwd = stream(mm.get(b"[deleted]").expect("get"), n, true, base);
    let rev = stream(mm.get(b"[deleted]").expect("get").rev(), n, false, base);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "{n} values: RSS {:.1} MiB at start, grew {:.2} MiB forward, {:.2} MiB backward",
        mib(base),
        mib(fwd),
        mib(rev)
    );
    // The values alone are n * 10 bytes (3 MiB at the default, 19 MiB at 2,000,000).
    assert!(fwd < 4 << 20, "forward stream grew RSS by {:.2} MiB", mib(fwd));
    assert!(rev < 4 << 20, "reverse stream grew RSS by {:.2} MiB", mib(rev));
}
