//! The delete-tile index of format version 4 (`sstable::tile`): arbitrary bytes decode
//! to an error or to an index that re-encodes to the same bytes' meaning, and every
//! lookup on it stays in bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::key::{ValueKind, internal_key};
use strata::sstable::bloom::KeyHash;
use strata::sstable::tile::TileIndex;

fuzz_target!(|data: &[u8]| {
    let Ok(ix) = TileIndex::decode(data) else {
        return;
    };
    let again = TileIndex::decode(&ix.encode()).expect("a decoded index re-encodes");
    assert_eq!(again, ix);
    for probe in [&b""[..], b"k", b"\xff\xff"] {
        let target = internal_key(probe, 7, ValueKind::Put);
        let t = ix.seek(&target);
        assert!(t <= ix.tiles.len());
        let mut key = KeyHash::new(probe);
        for p in ix.tile_pages(t) {
            let _ = p.may_hold(&mut key, &target);
        }
    }
});
