//! What tests of the engine's files share: a database small enough that a few hundred
//! writes flush memtables, compact level 0 and grow new levels, and a scan read back in
//! both directions.

#![allow(dead_code)]

use strata::{Options, Scan};

/// 16 KiB memtables, 8 KiB files of 512-byte blocks, a compaction at two level-0 runs
/// and levels 3x apart.
pub fn options() -> Options {
    Options {
        memtable_budget: 16 << 10,
        target_file_size: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        size_ratio: 3.0,
        ..Options::default()
    }
}

/// Every entry of `scan` read backwards, put back in ascending order, to compare with a
/// forward scan.
pub fn reversed(scan: Scan) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rev: Vec<_> = scan.rev().collect::<Result<_, _>>().expect("scan item");
    rev.reverse();
    rev
}
