//! An arbitrary image checked as an external SSTable (`sstable::external::inspect_file`)
//! over an in-memory file; when it passes, it is read with a global seqno, as an ingest
//! installs it: every key carries that seqno, and seeks land at or after their target.
//! The first byte chooses whether block and footer checksums are fixed up first.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::iter::InternalIterator;
use strata::key::{compare_internal, parse_internal_key, seek_key};
use strata::sstable::SstReader;
use strata::sstable::external::inspect_file;
use strata_fuzz::{MemFile, fix_sst_checksums};

fuzz_target!(|data: &[u8]| {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let mut image = rest.to_vec();
    if flag & 1 == 1 {
        fix_sst_checksums(&mut image);
    }
    let Ok(info) = inspect_file(
        MemFile::new("fuzz.sst", image.clone()),
        std::path::Path::new("fuzz.sst"),
    ) else {
        return;
    };
    let table = SstReader::open(MemFile::new("fuzz.sst", image), 1, None).expect("inspected file opens");
    let table = Arc::new(table.with_global_seq(Some(42)));
    let mut it = table.iter();
    it.seek_to_first().expect("inspected file iterates");
    let mut n = 0;
    let mut keys = Vec::new();
    while it.valid() {
        let p = parse_internal_key(it.key()).expect("well-formed key");
        assert_eq!(p.seq, 42);
        keys.push(p.user_key.to_vec());
        n += 1;
        it.next().expect("inspected file iterates");
    }
    assert_eq!(n, info.entries);
    for k in keys.iter().take(16) {
        for seq in [41, 42, 43] {
            let target = seek_key(k, seq);
            it.seek(&target).expect("seek");
            if it.valid() {
                assert!(compare_internal(it.key(), &target).is_ge());
            }
            it.seek_for_prev(&target).expect("seek_for_prev");
            if it.valid() {
                assert!(compare_internal(it.key(), &target).is_le());
            }
        }
    }
});
