//! `decode_row` and `decode_fields` over arbitrary bytes for a few schemas (the first
//! byte picks one); a decoded row re-encodes and decodes to the same values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::table::encoding::{decode_fields, decode_row, encode_row};
use strata_fuzz::{pick_schema, same_values};

fuzz_target!(|data: &[u8]| {
    let Some((schema, _, bytes)) = pick_schema(data) else {
        return;
    };
    if let Ok(row) = decode_row(schema, bytes) {
        assert_eq!(row.len(), schema.fields.len());
        let again = decode_row(schema, &encode_row(schema, &row)).expect("re-encoded row decodes");
        assert!(same_values(&row, &again), "row round trip: {row:?} vs {again:?}");
        schema.check_row(&row).expect("a decoded row fits its schema");
    }
    let positions: Vec<usize> = bytes
        .iter()
        .take(4)
        .map(|b| *b as usize % (schema.fields.len() + 1))
        .collect();
    let _ = decode_fields(schema, bytes, &positions);
});
