//! Indexes (version 3), fence pointers (version 1 and 2 index entry values) and index
//! blocks over arbitrary bytes.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::iter::InternalIterator;
use strata::sstable::Block;
use strata::sstable::index::{FenceIndex, FenceValue, IndexBuilder};

fuzz_target!(|data: &[u8]| {
    if let Ok(ix) = FenceIndex::decode(data, 1 << 20) {
        let mut b = IndexBuilder::new();
        for (fence, handle) in ix.iter() {
            b.add_fence(fence, handle);
        }
        assert_eq!(
            FenceIndex::decode(&b.finish(), 1 << 20).as_ref(),
            Ok(&ix),
            "index round trip"
        );
    }
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
