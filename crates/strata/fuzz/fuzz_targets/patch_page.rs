//! A patched page read from a patch file (`sstable::patch`): the file image, the block's
//! handle and the base page's fences all come from the input. When the first byte is
//! odd the block's checksum is fixed up first, so the fuzzer reaches the decoding and
//! the fence check behind it. A read either fails or yields a page that iterates the
//! same forward and backward, and every entry is checked against the fences without a
//! panic (an entry outside them is an error naming the file and offset).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::Error;
use strata::iter::InternalIterator;
use strata::key::{ValueKind, internal_key};
use strata::sstable::Fill;
use strata::sstable::format::BlockHandle;
use strata::sstable::patch::{PatchReader, check_within};
use strata_fuzz::{MemFile, fix_trailer};

fuzz_target!(|data: &[u8]| {
    // flag, offset (u16), size (u16), first and last fence user keys (one byte each).
    let Some((head, image)) = data.split_at_checked(7) else {
        return;
    };
    let offset = u64::from(u16::from_le_bytes([head[1], head[2]]));
    let size = u64::from(u16::from_le_bytes([head[3], head[4]]));
    let first = internal_key(&head[5..6], 50, ValueKind::Put);
    let last = internal_key(&head[6..7], 10, ValueKind::Put);
    let mut image = image.to_vec();
    if head[0] & 1 == 1 {
        let end = image.len() as u64;
        fix_trailer(&mut image, offset, size, end);
    }
    let reader = PatchReader::new(MemFile::new("000009.patch", image), 9, None);
    let Ok(mut it) = reader.page(BlockHandle { offset, size }, Fill::Bypass) else {
        return;
    };
    let mut forward = Vec::new();
    it.seek_to_first().expect("seek_to_first on a decoded page");
    while it.valid() {
        match check_within(it.key(), &first, &last, reader.path(), offset) {
            Ok(()) => {}
            Err(Error::Corruption { file, offset: at, .. }) => {
                assert_eq!(file, reader.path());
                assert_eq!(at, offset);
            }
            Err(e) => panic!("a fence check failed with {e}"),
        }
        forward.push(it.key().to_vec());
        it.next().expect("next on a decoded page");
    }
    let mut backward = Vec::new();
    it.seek_to_last().expect("seek_to_last");
    while it.valid() {
        backward.push(it.key().to_vec());
        it.prev().expect("prev");
    }
    backward.reverse();
    assert_eq!(forward, backward);
});
