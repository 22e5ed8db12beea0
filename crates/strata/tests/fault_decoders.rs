//! Stable-toolchain companion of the cargo-fuzz targets (crates/strata/fuzz): every seed
//! of the fuzz corpus, truncated at every length and with every single bit flipped, goes
//! through the same public decoders as the fuzz targets. Nothing may panic; what decodes
//! must round-trip. Inputs that crashed a fuzz target are kept here as regressions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata::fs::RandomAccessFile;
use strata::iter::InternalIterator;
use strata::key::MAX_SEQNO;
use strata::sstable::bloom::BloomFilter;
use strata::sstable::format::{Footer, unseal_block};
use strata::sstable::index::{FenceIndex, FenceValue, IndexBuilder};
use strata::sstable::range_del::decode_range_dels;
use strata::sstable::{Block, Properties, SstReader};
use strata::table::catalog::TableDef;
use strata::table::encoding::{decode_key, decode_row, split_key};
use strata::table::schema::Schema;
use strata::version::VersionEdit;
use strata::wal::Reader;

struct MemFile {
    path: PathBuf,
    data: Vec<u8>,
}

impl RandomAccessFile for MemFile {
    fn read_at(&self, offset: u64, len: usize) -> strata::Result<Vec<u8>> {
        let s = usize::try_from(offset).unwrap_or(usize::MAX);
        match s.checked_add(len).filter(|&e| e <= self.data.len()) {
            Some(e) => Ok(self.data[s..e].to_vec()),
            None => Err(strata::Error::corruption(&self.path, offset, "read past the end")),
        }
    }
    fn size(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

fn mem(name: &str, data: &[u8]) -> Arc<MemFile> {
    Arc::new(MemFile {
        path: PathBuf::from(name),
        data: data.to_vec(),
    })
}

fn schemas() -> Vec<Schema> {
    [
        "table t (id u64, a u64) primary key (id) index by_a (a) deferred",
        "table u (id i64, name str, score f64, ok bool, blob bytes) primary key (id, name) index by_score (score, ok)",
        "table n (k str, v str null, w i64 null, x bytes null, y f64 null, z bool null, p u64 null, q u64 null, r u64 null) primary key (k)",
        "table d (id u64, ts i64, s str null) primary key (id) index by_s (s) delete key (ts) eager",
    ]
    .iter()
    .map(|s| Schema::parse(s).expect("schema"))
    .collect()
}

/// Runs the decoder(s) of fuzz target `target` on `data`.
fn decode(target: &str, data: &[u8], schemas: &[Schema]) {
    match target {
        "sst_block" | "sst_index" => {
            let _ = FenceValue::decode(data);
            if let Ok(ix) = FenceIndex::decode(data, 1 << 20) {
                let mut b = IndexBuilder::new();
                for (fence, handle) in ix.iter() {
                    b.add_fence(fence, handle);
                }
                assert_eq!(
                    FenceIndex::decode(&b.finish(), 1 << 20).as_ref(),
                    Ok(&ix),
                    "index round trip"
                );
            }
            if let Ok(b) = Block::decode(data.to_vec()) {
                let b = Arc::new(b);
                let mut it = b.iter();
                let mut n = 0;
                it.seek_to_first().expect("iterating a validated block");
                while it.valid() {
                    n += 1;
                    it.next().expect("iterating a validated block");
                }
                assert_eq!(n, b.num_entries());
            }
        }
        "sst_footer" => {
            let _ = unseal_block(data);
            if data.len() > 9 {
                let size = u64::from_le_bytes(data[1..9].try_into().expect("8 bytes"));
                if let Ok(f) = Footer::decode(&data[9..], size) {
                    assert_eq!(f.encode(), &data[9..]);
                }
            }
        }
        "sst_bloom" => {
            if let Ok(f) = BloomFilter::decode(data) {
                assert_eq!(f.encode(), data);
                let _ = f.may_contain(b"k1");
            }
        }
        "sst_properties" => {
            if let Ok(p) = Properties::decode(data) {
                // Counts a reader sums must not overflow (a fuzz find: release builds wrap).
                assert!(
                    p.entries.checked_add(p.range_deletes).is_some(),
                    "overflowing counts accepted"
                );
                let _ = (p.tombstones(), p.is_empty());
                assert_eq!(Properties::decode(&p.encode()), Ok(p));
            }
            let _ = decode_range_dels(data);
        }
        "sst_table" => {
            if let Some((_, rest)) = data.split_first()
                && let Ok(t) = SstReader::open(mem("x.sst", rest), 1, None)
            {
                let t = Arc::new(t);
                let mut it = t.iter();
                if it.seek_to_first().is_ok() {
                    while it.valid() && it.next().is_ok() {}
                }
                let _ = t.get(b"key001", MAX_SEQNO);
            }
        }
        "external_sst" => {
            if let Some((_, rest)) = data.split_first()
                && let Ok(info) = strata::sstable::external::inspect_file(mem("x.sst", rest), Path::new("x.sst"))
                && let Ok(t) = SstReader::open(mem("x.sst", rest), 1, None)
            {
                // Read as an ingest installs it: every entry at the global seqno.
                let t = Arc::new(t.with_global_seq(Some(42)));
                let mut it = t.iter();
                let mut n = 0;
                if it.seek_to_first().is_ok() {
                    while it.valid() {
                        assert_eq!(strata::key::parse_internal_key(it.key()).map(|p| p.seq), Some(42));
                        n += 1;
                        if it.next().is_err() {
                            break;
                        }
                    }
                }
                assert_eq!(n, info.entries);
            }
        }
        "table_files" => {
            if let Ok(t) = std::str::from_utf8(data)
                && let Ok(f) = strata::table::writer::TableFiles::parse(Path::new("d"), t)
            {
                assert_eq!(f.indexes.len(), f.schema.indexes.len());
            }
        }
        "wal_reader" => {
            if let Some((_, rest)) = data.split_first() {
                let mut r = Reader::new(mem("x.wal", rest));
                while let Ok(Some(_)) = r.next_record() {}
            }
        }
        "manifest_edit" => {
            if let Ok(e) = VersionEdit::decode(data) {
                assert_eq!(VersionEdit::decode(&e.encode()), Ok(e));
            }
        }
        "row_codec" | "key_codec" => {
            if let Some((&pick, rest)) = data.split_first() {
                let s = &schemas[pick as usize % schemas.len()];
                let _ = decode_row(s, rest);
                let types = s.pk_types().expect("pk types");
                let _ = decode_key(rest, &types);
                let _ = split_key(rest, &types);
            }
        }
        "schema" => {
            if let Ok(s) = Schema::from_bytes(data) {
                assert_eq!(Schema::from_bytes(&s.to_bytes()).ok(), Some(s));
            }
            let _ = TableDef::decode("table/x", data);
            if let Ok(t) = std::str::from_utf8(data) {
                let _ = Schema::parse(t);
            }
        }
        "multimap_entry" => {
            if let Ok((key, value)) = strata::multimap::encoding::decode(data) {
                assert_eq!(strata::multimap::encoding::encode(&key, value), data);
            }
        }
        "partition_descriptor" => {
            if let Some((_, rest)) = data.split_first() {
                let _ = strata::partition::Descriptor::decode(rest, Path::new("PARTITIONS"));
            }
        }
        other => panic!("unknown fuzz target {other}"),
    }
}

fn corpus() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut out = Vec::new();
    for t in std::fs::read_dir(&root).expect("fuzz corpus") {
        let t = t.expect("entry").path();
        let target = t.file_name().expect("name").to_string_lossy().into_owned();
        for f in std::fs::read_dir(&t).expect("target corpus") {
            let f = f.expect("entry").path();
            // Seeds, and inputs that once crashed a fuzz target (kept as regressions).
            if f.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("seed-") || n.starts_with("regression-")
            }) {
                out.push((target.clone(), f));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn corpus_seeds_truncated_and_bit_flipped_never_panic() {
    let schemas = schemas();
    let seeds = corpus();
    assert!(seeds.len() >= 11, "the fuzz corpus is missing ({} seeds)", seeds.len());
    for (target, path) in seeds {
        let data = std::fs::read(&path).expect("seed");
        for len in 0..=data.len() {
            let r = std::panic::catch_unwind(|| decode(&target, &data[..len], &schemas));
            assert!(
                r.is_ok(),
                "{target}: {} truncated to {len} bytes panicked",
                path.display()
            );
        }
        for bit in 0..data.len() * 8 {
            let mut d = data.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            let r = std::panic::catch_unwind(|| decode(&target, &d, &schemas));
            assert!(
                r.is_ok(),
                "{target}: {} with bit {bit} flipped panicked",
                path.display()
            );
        }
    }
}
