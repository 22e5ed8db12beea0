//! Fence pointers (index entry values) and index blocks over arbitrary bytes.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::iter::InternalIterator;
use strata::sstable::Block;
use strata::sstable::index::FenceValue;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = FenceValue::decode(data) {
        assert!(v.min_seq <= v.max_seq);
        assert_eq!(FenceValue::decode(&v.encode()), Ok(v), "fence value round trip");
    }
    let Ok(block) = Block::decode(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter();
    let _ = it.seek_to_first();
    while it.valid() {
        let _ = FenceValue::decode(it.value());
        if it.next().is_err() {
            break;
        }
    }
});
