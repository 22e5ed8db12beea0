//! The table-writer descriptor parser (`TableFiles::parse`) over arbitrary text: never
//! panics, and what it accepts lists one index file per schema index, with plain names,
//! and a partition (if any) below its count.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::table::writer::TableFiles;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = TableFiles::parse(std::path::Path::new("d"), text) {
        assert_eq!(f.indexes.len(), f.schema.indexes.len());
        if let Some(p) = f.partition {
            assert!(p.index < p.count, "{p:?}");
        }
        for (_, path, _, _) in f.files() {
            assert_eq!(path.parent(), Some(std::path::Path::new("d")));
        }
    }
});
