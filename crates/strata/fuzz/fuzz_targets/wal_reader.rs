//! The log reader (WAL and manifest framing) over an arbitrary in-memory file. The first
//! byte chooses whether record checksums are fixed up. Records come back in order,
//! inside the file, and the reader stops for good after the end or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::wal::{HEADER_LEN, Reader};
use strata_fuzz::{MemFile, fix_log_checksums, image_from};

fuzz_target!(|data: &[u8]| {
    let Some(image) = image_from(data, fix_log_checksums) else {
        return;
    };
    let size = image.len() as u64;
    let mut r = Reader::new(MemFile::new("fuzz.wal", image));
    let mut next = 0u64;
    loop {
        match r.next_record() {
            Ok(Some((off, payload))) => {
                assert_eq!(off, next, "records are contiguous");
                next = off + (HEADER_LEN + payload.len()) as u64;
                assert!(next <= size, "a record ends past the file");
                assert_eq!(r.valid_len(), next);
            }
            Ok(None) => break,
            Err(e) => {
                assert!(
                    e.is_corruption(),
                    "only corruption can come from an in-memory file: {e}"
                );
                break;
            }
        }
    }
    if let Some(t) = r.torn_tail_at() {
        assert!(t >= r.valid_len() && t <= size);
    }
    assert!(matches!(r.next_record(), Ok(None)), "the reader stops for good");
});
