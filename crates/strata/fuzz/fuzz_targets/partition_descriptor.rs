//! `Descriptor::decode` over arbitrary bytes. The first byte chooses whether the
//! checksum is fixed up (to reach the field checks behind it). A decoded descriptor
//! re-encodes to exactly its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::partition::Descriptor;

fuzz_target!(|data: &[u8]| {
    let Some((&fix, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if fix & 1 == 1 && bytes.len() == 24 {
        let crc = crc32c::crc32c(&bytes[..20]);
        bytes[20..].copy_from_slice(&crc.to_le_bytes());
    }
    let path = std::path::Path::new("PARTITIONS");
    match Descriptor::decode(&bytes, path) {
        Ok(d) => assert_eq!(d.encode(), bytes, "a decoded descriptor re-encodes to its bytes"),
        Err(e) => assert!(e.is_corruption(), "decode errors are corruption: {e}"),
    }
});
