//! The stored schema (`Schema::from_bytes`), the catalog entry (`TableDef::decode`) and
//! the schema text parser over arbitrary input. Whatever decodes round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::table::catalog::TableDef;
use strata::table::schema::Schema;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Schema::from_bytes(data) {
        assert_eq!(
            Schema::from_bytes(&s.to_bytes()).ok().as_ref(),
            Some(&s),
            "binary round trip"
        );
        let text = s.to_string();
        assert_eq!(
            Schema::parse(&text).ok().as_ref(),
            Some(&s),
            "text round trip of {text}"
        );
    }
    if let Ok(d) = TableDef::decode("table/fuzz", data) {
        assert_eq!(
            TableDef::decode("table/fuzz", &d.encode()).ok().as_ref(),
            Some(&d),
            "catalog round trip"
        );
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(s) = Schema::parse(text)
    {
        assert_eq!(
            Schema::from_bytes(&s.to_bytes()).ok().as_ref(),
            Some(&s),
            "parsed schema round trip"
        );
    }
});
