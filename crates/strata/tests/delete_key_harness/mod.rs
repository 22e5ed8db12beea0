//! Keys and values shared by the tests of keyspaces with a delete key: the delete key
//! is a value's first 4 bytes, big-endian.

#![allow(dead_code)]

use std::collections::BTreeMap;

use strata::{Keyspace, Options};

/// What a keyspace should read: key -> value.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small files and pages, leveled: several tiles per file, several files per level.
pub fn opts() -> Options {
    Options {
        memtable_budget: 64 << 10,
        target_file_size: 64 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        size_ratio: 4.0,
        runs_per_level: 1,
        ..Options::default()
    }
}

/// Every entry, by a forward scan.
pub fn scan_all(ks: &Keyspace) -> Model {
    ks.scan(..).expect("scan").collect::<Result<_, _>>().expect("scan item")
}

/// Every entry, by a reverse scan (last first).
pub fn scan_back(ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.scan(..)
        .expect("scan")
        .rev()
        .collect::<Result<_, _>>()
        .expect("rev item")
}

/// Scans both ways and some point gets read `model`.
pub fn check_reads(ks: &Keyspace, model: &Model, when: &str) {
    assert_eq!(scan_all(ks), *model, "forward scan {when}");
    assert_eq!(
        scan_back(ks),
        model.clone().into_iter().rev().collect::<Vec<_>>(),
        "reverse scan {when}"
    );
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(ks.get(k).expect("get").as_ref(), Some(v), "get {when}");
    }
}

/// The `i`-th sort key.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value whose delete key (its first 4 bytes, big-endian) is `dk`.
pub fn value(dk: u32, tag: u32) -> Vec<u8> {
    let mut v = dk.to_be_bytes().to_vec();
    v.extend_from_slice(format!(":{tag}:").as_bytes());
    v.resize(40, b'.');
    v
}

/// The delete key of a value written by [`value`].
pub fn dk_of(v: &[u8]) -> u32 {
    u32::from_be_bytes([v[0], v[1], v[2], v[3]])
}
