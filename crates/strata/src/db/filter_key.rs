//! What the filters of each keyspace's new tables hold of each key
//! ([`super::Keyspace::set_filter_key`]), kept as a manifest meta entry
//! `strata.filter_key.<keyspace id>`: `2` for key prefixes, `3 n` for the first `n`
//! bytes; absent for whole keys. A table's filter records what it holds
//! (`sstable::bloom`), so a change reaches only the tables written after it and never
//! changes a read's answer.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::sstable::bloom::FilterKey;

const PREFIX: &str = "strata.filter_key.";
const KEY_PREFIX: u8 = 2;
const FIXED: u8 = 3;

/// The meta-entry name of keyspace `ks`'s setting.
pub(crate) fn name(ks: u32) -> String {
    format!("{PREFIX}{ks}")
}

/// The meta entry for `key` (`None`: whole keys, the default, stored as no entry).
pub(crate) fn encode(key: FilterKey) -> Option<Vec<u8>> {
    match key {
        FilterKey::Whole => None,
        FilterKey::KeyPrefix => Some(vec![KEY_PREFIX]),
        FilterKey::Fixed(n) => Some(vec![FIXED, n.get()]),
    }
}

fn decode(name: &str, b: &[u8]) -> Result<FilterKey> {
    match b {
        [KEY_PREFIX] => Ok(FilterKey::KeyPrefix),
        [FIXED, n] if let Some(n) = std::num::NonZeroU8::new(*n) => Ok(FilterKey::Fixed(n)),
        // Meta entries sit in checksummed manifest records: a writer bug or a crafted
        // manifest.
        _ => Err(Error::InvalidArgument(format!(
            "malformed {name} in the manifest: {b:02x?}"
        ))),
    }
}

/// Keyspace `ks`'s setting in the meta entries `meta`.
pub(crate) fn of(meta: &BTreeMap<String, Vec<u8>>, ks: u32) -> Result<FilterKey> {
    let n = name(ks);
    meta.get(&n).map_or(Ok(FilterKey::Whole), |b| decode(&n, b))
}

/// Every keyspace's setting other than whole keys, by keyspace id.
pub(crate) fn all(meta: &BTreeMap<String, Vec<u8>>) -> Result<BTreeMap<u32, FilterKey>> {
    meta.range::<str, _>((std::ops::Bound::Included(PREFIX), std::ops::Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| {
            let id = k[PREFIX.len()..]
                .parse()
                .map_err(|_| Error::InvalidArgument(format!("malformed meta entry name {k:?} in the manifest")))?;
            Ok((id, decode(k, v)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_meta_entries() {
        let mut meta = BTreeMap::new();
        assert_eq!(of(&meta, 3).expect("absent"), FilterKey::Whole);
        assert_eq!(encode(FilterKey::Whole), None);
        meta.insert(name(3), encode(FilterKey::KeyPrefix).expect("entry"));
        meta.insert(name(12), encode(FilterKey::KeyPrefix).expect("entry"));
        let nine = FilterKey::Fixed(std::num::NonZeroU8::new(9).expect("9"));
        meta.insert(name(14), encode(nine).expect("entry"));
        meta.insert("strata.other".into(), vec![9]);
        assert_eq!(of(&meta, 3).expect("set"), FilterKey::KeyPrefix);
        assert_eq!(of(&meta, 4).expect("unset"), FilterKey::Whole);
        let all = all(&meta).expect("all");
        assert_eq!(
            all.into_iter().collect::<Vec<_>>(),
            vec![(3, FilterKey::KeyPrefix), (12, FilterKey::KeyPrefix), (14, nine)]
        );
        meta.insert(name(5), vec![7]);
        assert!(of(&meta, 5).is_err());
        meta.insert(name(5), vec![FIXED, 0]);
        assert!(of(&meta, 5).is_err());
        assert!(super::all(&meta).is_err());
    }
}
