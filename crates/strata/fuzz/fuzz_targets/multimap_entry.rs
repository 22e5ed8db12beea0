//! `multimap::encoding::decode` over arbitrary bytes: a decoded entry re-encodes to
//! exactly its bytes (the encoding is unambiguous), and its key's prefix range holds
//! it while the next key's entries sort after that range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::multimap::encoding::{decode, encode, prefix, prefix_end, prefix_len};

fuzz_target!(|data: &[u8]| {
    let Ok((key, value)) = decode(data) else {
        return;
    };
    assert_eq!(encode(&key, value), data, "a decoded entry re-encodes to its bytes");
    assert_eq!(prefix_len(data).ok(), Some(prefix(&key).len()));
    assert!(data >= &prefix(&key)[..] && data < &prefix_end(&key)[..]);
    let mut next = key.clone();
    next.push(0);
    assert!(
        encode(&next, b"") >= prefix_end(&key),
        "a longer key sorts after the range"
    );
});
