//! A whole SSTable image opened with `SstReader::open` over an in-memory file, then iterated
//! and queried. The first byte chooses whether block and footer checksums are fixed up
//! first, so the fuzzer reaches the cross-checks behind them (index vs properties, fence
//! pointers vs data blocks).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::iter::InternalIterator;
use strata::key::{MAX_SEQNO, parse_internal_key};
use strata::sstable::SstReader;
use strata_fuzz::{MemFile, fix_sst_checksums, image_from};

fuzz_target!(|data: &[u8]| {
    let Some(image) = image_from(data, fix_sst_checksums) else {
        return;
    };
    let Ok(table) = SstReader::open(MemFile::new("fuzz.sst", image), 1, None) else {
        return;
    };
    let table = Arc::new(table);
    let _ = table.fence_pointers();
    let _ = table.may_contain(b"k");
    let mut it = table.iter();
    let mut user_keys = Vec::new();
    if it.seek_to_first().is_ok() {
        while it.valid() && user_keys.len() < 10_000 {
            if let Some(p) = parse_internal_key(it.key()) {
                user_keys.push(p.user_key.to_vec());
            }
            if it.next().is_err() {
                break;
            }
        }
    }
    if it.seek_to_last().is_ok() {
        let mut n = 0;
        while it.valid() && n < 10_000 {
            n += 1;
            if it.prev().is_err() {
                break;
            }
        }
    }
    for k in user_keys.iter().take(32) {
        let _ = table.get(k, MAX_SEQNO);
        let _ = it.seek(k);
    }
});
