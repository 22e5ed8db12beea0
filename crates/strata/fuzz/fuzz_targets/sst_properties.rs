//! The properties block and the range-tombstone block over arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::sstable::Properties;
use strata::sstable::range_del::{decode_range_dels, encode_range_dels};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Properties::decode(data) {
        assert_eq!(Properties::decode(&p.encode()), Ok(p.clone()), "properties round trip");
        let _ = (p.tombstones(), p.is_empty());
    }
    if let Ok(ts) = decode_range_dels(data) {
        assert_eq!(
            decode_range_dels(&encode_range_dels(&ts)),
            Ok(ts),
            "range tombstones round trip"
        );
    }
});
