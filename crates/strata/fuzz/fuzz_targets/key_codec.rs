//! `decode_key` and `split_key` over arbitrary bytes with the key types of the primary
//! and secondary keys of a few schemas (the first byte picks). The key encoding is
//! canonical: a decoded key re-encodes to exactly the bytes it used.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::table::encoding::{decode_key, encode_key, split_key};
use strata_fuzz::{pick_schema, same_values};

fuzz_target!(|data: &[u8]| {
    let Some((schema, pick, bytes)) = pick_schema(data) else {
        return;
    };
    let mut type_lists = vec![schema.pk_types().expect("pk types")];
    for ix in &schema.indexes {
        type_lists.push(schema.index_key_types(ix).expect("index key types"));
        type_lists.push(schema.index_entry_types(ix).expect("index entry types"));
    }
    let types = &type_lists[pick % type_lists.len()];
    if let Ok((vals, used)) = decode_key(bytes, types) {
        assert!(used <= bytes.len());
        let mut out = Vec::new();
        encode_key(&mut out, &vals, types);
        assert_eq!(&out[..], &bytes[..used], "key encoding is canonical");
        let (again, n) = decode_key(&out, types).expect("re-encoded key decodes");
        assert_eq!(n, out.len());
        assert!(same_values(&vals, &again));
    }
    if let Ok((head, tail)) = split_key(bytes, types) {
        assert_eq!(head.len() + tail.len(), bytes.len());
    }
});
