//! The delete key of a keyspace and the secondary range deletes that name it.
//!
//! A keyspace sorted by its key may declare a *delete key*: a big-endian field of the
//! value at a fixed offset and width (a timestamp, a tenant id). Delete tiles
//! ([`crate::sstable::tile`]) partition pages by it, and [`DeleteWhere`] records delete
//! by it ("every row whose delete key lies in `[lo, hi)`").
//!
//! Invariant (DW): a [`DeleteWhere`] at seqno `s` kills exactly the `Put` versions with
//! seqno `< s` whose delete key lies in `[lo, hi)`, for readers whose snapshot is `>= s`.
//! A killed version reads as a point tombstone at its own seqno: it hides the row, and
//! older versions of the key stay hidden behind it, whatever their delete key. Entries
//! without a delete key (tombstones, values too short) are never killed.

use std::collections::BTreeMap;

use crate::codec::{Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::sstable::tile::MAX_TILE_PAGES;

/// Widest delete key accepted, in bytes.
pub const MAX_DELETE_KEY_WIDTH: u8 = 16;

/// A delete key: `value[offset .. offset + width]`, compared as bytes (big-endian).
///
/// ```
/// use strata::delete_key::DeleteKey;
/// let dk = DeleteKey::new(2, 4).unwrap();
/// assert_eq!(dk.of(b"ab\x00\x00\x01\x00rest"), Some(&b"\x00\x00\x01\x00"[..]));
/// assert_eq!(dk.of(b"short"), None);
/// assert!(DeleteKey::new(0, 0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeleteKey {
    /// Offset of the field's first byte in the value.
    pub offset: u32,
    /// Width of the field in bytes, 1..=[`MAX_DELETE_KEY_WIDTH`].
    pub width: u8,
}

impl DeleteKey {
    /// A delete key of `width` bytes at `offset`; `width` must be 1..=16.
    pub fn new(offset: u32, width: u8) -> Result<DeleteKey> {
        if width == 0 || width > MAX_DELETE_KEY_WIDTH {
            return Err(Error::InvalidArgument(format!(
                "delete key width {width} is not in 1..={MAX_DELETE_KEY_WIDTH}"
            )));
        }
        Ok(DeleteKey { offset, width })
    }

    /// The delete key of `value`, or `None` when the value is too short to hold it.
    pub fn of<'a>(&self, value: &'a [u8]) -> Option<&'a [u8]> {
        let start = self.offset as usize;
        value.get(start..start.checked_add(self.width as usize)?)
    }
}

/// A secondary range delete: kills the versions older than `seq` whose delete key lies
/// in `[lo, hi)` (invariant DW in the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeleteWhere {
    /// The record's seqno.
    pub seq: SeqNo,
    /// Inclusive lower bound of the delete key.
    pub lo: Vec<u8>,
    /// Exclusive upper bound of the delete key.
    pub hi: Vec<u8>,
}

impl DeleteWhere {
    /// True if the record lies in `[lo, hi)`.
    pub fn covers(&self, dk: &[u8]) -> bool {
        self.lo.as_slice() <= dk && dk < self.hi.as_slice()
    }

    /// True if the closed delete-key range `[min, max]` lies inside `[lo, hi)`.
    pub fn covers_all(&self, min: &[u8], max: &[u8]) -> bool {
        self.lo.as_slice() <= min && max < self.hi.as_slice()
    }

    /// True if the closed range `[min, max]` meets `[lo, hi)`.
    pub fn meets(&self, min: &[u8], max: &[u8]) -> bool {
        self.lo.as_slice() <= max && min < self.hi.as_slice()
    }
}

/// True if a `Put` at `seq` with value `value` is killed by one of `records` for a reader
/// at `snapshot` (invariant DW).
pub fn killed(dk: &DeleteKey, records: &[DeleteWhere], value: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
    let Some(k) = dk.of(value) else {
        return false;
    };
    records.iter().any(|r| r.seq <= snapshot && seq < r.seq && r.covers(k))
}

/// How many pages a delete tile holds in a keyspace's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileChoice {
    /// The same h at every level, 1..=256.
    Fixed(u32),
    /// Each level's h is chosen by the cost model (`compaction::tiles`) from the
    /// observed mix of operations.
    Auto,
}

impl std::fmt::Display for TileChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TileChoice::Fixed(h) => write!(f, "{h}"),
            TileChoice::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for TileChoice {
    type Err = Error;

    /// `auto` or a number 1..=256.
    fn from_str(s: &str) -> Result<TileChoice> {
        if s == "auto" {
            return Ok(TileChoice::Auto);
        }
        let h: u32 = s
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("tile size {s:?} is neither a number nor \"auto\"")))?;
        TileChoice::fixed(h)
    }
}

impl TileChoice {
    /// A fixed h, checked to lie in 1..=256.
    pub fn fixed(h: u32) -> Result<TileChoice> {
        if !(1..=MAX_TILE_PAGES).contains(&h) {
            return Err(Error::InvalidArgument(format!(
                "tile size h = {h} is not in 1..={MAX_TILE_PAGES}"
            )));
        }
        Ok(TileChoice::Fixed(h))
    }
}

/// A keyspace's delete key and tile size, persisted in the manifest's meta entries
/// under `strata.delete_key.<keyspace id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteConfig {
    /// The delete key.
    pub key: DeleteKey,
    /// Pages per delete tile.
    pub h: TileChoice,
}

/// Meta-entry name prefix of delete configurations.
const CONFIG_PREFIX: &str = "strata.delete_key.";
/// Meta-entry name prefix of secondary range deletes moved out of a flushed memtable.
const RECORD_PREFIX: &str = "strata.delete_where.";

/// The meta-entry name of keyspace `ks`'s delete configuration.
pub fn config_name(ks: u32) -> String {
    format!("{CONFIG_PREFIX}{ks}")
}

/// The meta-entry name of keyspace `ks`'s record at `seq` (names sort by seqno).
pub fn record_name(ks: u32, seq: SeqNo) -> String {
    format!("{RECORD_PREFIX}{ks}.{seq:020}")
}

fn bad(what: &str) -> Error {
    // Meta entries sit in checksummed manifest records: this is a writer bug or a
    // crafted manifest.
    Error::InvalidArgument(format!("malformed {what} in the manifest"))
}

impl DeleteConfig {
    /// `varint offset ++ u8 width ++ varint h (0 = auto)`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, u64::from(self.key.offset));
        out.push(self.key.width);
        put_varint(
            &mut out,
            match self.h {
                TileChoice::Fixed(h) => u64::from(h),
                TileChoice::Auto => 0,
            },
        );
        out
    }

    /// Decodes [`DeleteConfig::encode`]'s output.
    pub fn decode(b: &[u8]) -> Result<DeleteConfig> {
        let mut d = Decoder::new(b);
        let parsed = (|| Some((d.varint().ok()?, d.u8().ok()?, d.varint().ok()?)))();
        let Some((offset, width, h)) = parsed.filter(|_| d.is_empty()) else {
            return Err(bad("delete key"));
        };
        let key = DeleteKey::new(u32::try_from(offset).map_err(|_| bad("delete key"))?, width)?;
        let h = match h {
            0 => TileChoice::Auto,
            h => TileChoice::fixed(u32::try_from(h).map_err(|_| bad("tile size"))?)?,
        };
        Ok(DeleteConfig { key, h })
    }
}

impl DeleteWhere {
    /// `varint seq ++ bytes lo ++ bytes hi`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.seq);
        put_bytes(&mut out, &self.lo);
        put_bytes(&mut out, &self.hi);
        out
    }

    /// Decodes [`DeleteWhere::encode`]'s output.
    pub fn decode(b: &[u8]) -> Result<DeleteWhere> {
        let mut d = Decoder::new(b);
        let parsed = (|| {
            Some(DeleteWhere {
                seq: d.varint().ok()?,
                lo: d.length_prefixed().ok()?.to_vec(),
                hi: d.length_prefixed().ok()?.to_vec(),
            })
        })();
        parsed
            .filter(|_| d.is_empty())
            .ok_or_else(|| bad("delete-where record"))
    }
}

/// Keyspace `ks`'s delete configuration in the meta entries `meta`.
pub fn config_of(meta: &BTreeMap<String, Vec<u8>>, ks: u32) -> Result<Option<DeleteConfig>> {
    // Answer "none at all" without building a name.
    if !any_config(meta) {
        return Ok(None);
    }
    meta.get(&config_name(ks)).map(|b| DeleteConfig::decode(b)).transpose()
}

/// Whether any keyspace in the meta entries `meta` declares a delete key.
pub fn any_config(meta: &BTreeMap<String, Vec<u8>>) -> bool {
    meta.range::<str, _>((std::ops::Bound::Included(CONFIG_PREFIX), std::ops::Bound::Unbounded))
        .next()
        .is_some_and(|(k, _)| k.starts_with(CONFIG_PREFIX))
}

/// Keyspace `ks`'s flushed secondary range deletes in the meta entries `meta`, by seqno.
pub fn records_of(meta: &BTreeMap<String, Vec<u8>>, ks: u32) -> Result<Vec<DeleteWhere>> {
    let prefix = format!("{RECORD_PREFIX}{ks}.");
    meta.range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(_, v)| DeleteWhere::decode(v))
        .collect()
}

/// The keyspace and seqno of a record's meta-entry name, `None` for other names.
pub fn parse_record_name(name: &str) -> Option<(u32, SeqNo)> {
    let (ks, seq) = name.strip_prefix(RECORD_PREFIX)?.split_once('.')?;
    Some((ks.parse().ok()?, seq.parse().ok()?))
}

/// The names of keyspace `ks`'s delete configuration and records in `meta`.
pub fn meta_names_of(meta: &BTreeMap<String, Vec<u8>>, ks: u32) -> impl Iterator<Item = String> + '_ {
    let config = config_name(ks);
    let prefix = format!("{RECORD_PREFIX}{ks}.");
    meta.keys()
        .filter(move |k| **k == config || k.starts_with(&prefix))
        .cloned()
}

/// What reads and compactions of one keyspace apply: its delete key and every secondary
/// range delete recorded for it.
#[derive(Debug, Clone)]
pub struct Deletes {
    /// The delete key.
    pub key: DeleteKey,
    /// The keyspace's configuration.
    pub config: DeleteConfig,
    /// The records, any order.
    pub records: Vec<DeleteWhere>,
}

impl Deletes {
    /// True if the `Put` version `(seq, value)` is killed for a reader at `snapshot`.
    pub fn kills(&self, value: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
        killed(&self.key, &self.records, value, seq, snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn killed_follows_seqnos_snapshots_and_range() {
        let dk = DeleteKey { offset: 0, width: 2 };
        let rs = [DeleteWhere {
            seq: 10,
            lo: vec![0, 5],
            hi: vec![0, 9],
        }];
        assert!(killed(&dk, &rs, &[0, 5, 1], 9, 10));
        assert!(!killed(&dk, &rs, &[0, 5, 1], 10, 20), "same seqno or newer survives");
        assert!(!killed(&dk, &rs, &[0, 5, 1], 9, 9), "older snapshot still sees it");
        assert!(!killed(&dk, &rs, &[0, 9], 1, 20), "hi is exclusive");
        assert!(!killed(&dk, &rs, &[0], 1, 20), "no delete key, never killed");
        assert!(rs[0].covers_all(&[0, 5], &[0, 8]) && !rs[0].covers_all(&[0, 4], &[0, 8]));
        assert!(rs[0].meets(&[0, 0], &[0, 5]) && !rs[0].meets(&[0, 9], &[1, 0]));
    }

    #[test]
    fn configs_and_records_roundtrip_and_reject_garbage() {
        for h in [TileChoice::Auto, TileChoice::Fixed(1), TileChoice::Fixed(256)] {
            let c = DeleteConfig {
                key: DeleteKey { offset: 300, width: 8 },
                h,
            };
            assert_eq!(DeleteConfig::decode(&c.encode()).ok(), Some(c));
        }
        assert!(DeleteConfig::decode(&[0, 0, 1]).is_err(), "width 0");
        assert!(DeleteConfig::decode(&[0, 1, 0x81, 0x02]).is_err(), "h = 257");
        assert!(DeleteConfig::decode(&[0, 1, 1, 9]).is_err(), "trailing byte");
        let r = DeleteWhere {
            seq: 77,
            lo: vec![1],
            hi: vec![2, 3],
        };
        assert_eq!(DeleteWhere::decode(&r.encode()).ok(), Some(r.clone()));
        assert!(DeleteWhere::decode(&r.encode()[..3]).is_err());
        let mut meta = BTreeMap::new();
        meta.insert(record_name(1, 77), r.encode());
        meta.insert(record_name(11, 5), r.encode());
        assert_eq!(records_of(&meta, 1).ok(), Some(vec![r]));
        assert_eq!(parse_record_name(&record_name(11, 5)), Some((11, 5)));
        assert_eq!(parse_record_name(&config_name(11)), None);
        assert!("0".parse::<TileChoice>().is_err() && "257".parse::<TileChoice>().is_err());
        assert_eq!("auto".parse::<TileChoice>().ok(), Some(TileChoice::Auto));
    }
}
