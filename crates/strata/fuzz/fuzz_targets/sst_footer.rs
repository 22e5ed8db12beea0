//! `Footer::decode` and `unseal_block` over arbitrary bytes. The first byte chooses
//! whether the footer checksum is fixed up (to reach the checks behind it); the next 8
//! bytes are the claimed file size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::sstable::format::{FOOTER_LEN, Footer, unseal_block};

fuzz_target!(|data: &[u8]| {
    let _ = unseal_block(data);
    if data.len() < 9 {
        return;
    }
    let fix = data[0] & 1 == 1;
    let mut size = [0u8; 8];
    size.copy_from_slice(&data[1..9]);
    let file_size = u64::from_le_bytes(size);
    let mut footer = data[9..].to_vec();
    if fix && footer.len() == FOOTER_LEN {
        let crc = crc32c::crc32c(&footer[..76]);
        footer[76..].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(f) = Footer::decode(&footer, file_size) {
        assert_eq!(f.encode(), footer, "a decoded footer re-encodes to its bytes");
    }
});
