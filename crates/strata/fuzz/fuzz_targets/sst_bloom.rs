//! `BloomFilter::decode` over arbitrary bytes; a decoded filter answers queries and
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::sstable::bloom::BloomFilter;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = BloomFilter::decode(data) else {
        return;
    };
    assert_eq!(f.encode(), data, "bloom filter round trip");
    for k in [&b""[..], b"a", &data[..data.len().min(16)]] {
        let _ = f.may_contain(k);
    }
    let _ = (f.num_lines(), f.num_bits(), f.probes());
});
