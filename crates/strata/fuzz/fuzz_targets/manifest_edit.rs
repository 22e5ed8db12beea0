//! `VersionEdit::decode` (one manifest record) over arbitrary bytes; a decoded edit
//! re-encodes to something that decodes to the same edit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::version::VersionEdit;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = VersionEdit::decode(data) {
        assert_eq!(VersionEdit::decode(&e.encode()), Ok(e), "version edit round trip");
    }
});
