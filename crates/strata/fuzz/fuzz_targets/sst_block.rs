//! `Block::decode` over arbitrary bytes; a block that decodes must iterate forward,
//! backward and by seek without an error, agreeing with itself.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::iter::InternalIterator;
use strata::sstable::Block;

fuzz_target!(|data: &[u8]| {
    let Ok(block) = Block::decode(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter();
    let mut keys = Vec::new();
    it.seek_to_first().expect("seek_to_first on a validated block");
    while it.valid() {
        keys.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next on a validated block");
    }
    assert_eq!(keys.len(), block.num_entries());
    let mut back = Vec::new();
    it.seek_to_last().expect("seek_to_last");
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().expect("prev");
    }
    back.reverse();
    assert_eq!(keys, back, "backward iteration disagrees with forward");
    for (k, v) in keys.iter().take(64) {
        it.seek(k).expect("seek");
        assert!(
            it.valid() && it.key() == &k[..] && it.value() == &v[..],
            "seek to a present key"
        );
        it.seek_for_prev(k).expect("seek_for_prev");
        assert!(it.valid() && it.key() == &k[..], "seek_for_prev to a present key");
    }
    // Seeks to arbitrary targets must not fail either.
    for t in [&data[..data.len().min(9)], &data[data.len() / 2..]] {
        it.seek(t).expect("seek to any target");
        it.seek_for_prev(t).expect("seek_for_prev to any target");
    }
});
