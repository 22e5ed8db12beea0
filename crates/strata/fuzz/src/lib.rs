//! Helpers shared by Strata's fuzz targets: an in-memory file for the readers, and
//! checksum fix-ups so the fuzzer can get past checksums into the decoders behind them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata::fs::RandomAccessFile;
use strata::table::schema::Schema;

/// An in-memory file implementing Strata's positional-read trait.
pub struct MemFile {
    path: PathBuf,
    data: Vec<u8>,
}

impl MemFile {
    /// A file named `name` holding `data`.
    pub fn new(name: &str, data: Vec<u8>) -> Arc<MemFile> {
        Arc::new(MemFile {
            path: PathBuf::from(name),
            data,
        })
    }
}

impl RandomAccessFile for MemFile {
    fn read_at(&self, offset: u64, len: usize) -> strata::Result<Vec<u8>> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= self.data.len());
        match start.and_then(|s| s.checked_add(len).filter(|&e| e <= self.data.len()).map(|e| (s, e))) {
            Some((s, e)) => Ok(self.data[s..e].to_vec()),
            None => Err(strata::Error::corruption(
                &self.path,
                offset,
                "read past the end of the file",
            )),
        }
    }
    fn size(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Rewrites the checksums of an SSTable image in place so the fuzzer reaches the
/// decoders behind them: the trailer CRC of the four meta blocks the footer names, of
/// every data block the (decodable) index of any format version names, and of the footer.
pub fn fix_sst_checksums(data: &mut [u8]) {
    const FOOTER: usize = 80;
    if data.len() < FOOTER {
        return;
    }
    let f = data.len() - FOOTER;
    let handles: Vec<(u64, u64)> = (0..4)
        .map(|i| (le_u64(&data[f + 16 * i..]), le_u64(&data[f + 16 * i + 8..])))
        .collect();
    for &(off, size) in &handles {
        fix_block(data, off, size);
    }
    // Data blocks named by the index block (the first handle).
    let (off, size) = handles[0];
    if let Some(end) = off
        .checked_add(size)
        .and_then(|e| e.checked_add(5))
        .filter(|&e| e <= data.len() as u64)
    {
        let raw = &data[off as usize..end as usize];
        if let Ok(payload) = strata::sstable::format::unseal_block(raw) {
            for (o, s) in data_handles(&payload) {
                fix_block(data, o, s);
            }
            // A data block may overlap a meta block: fix the meta blocks last.
            for &(o, s) in &handles {
                fix_block(data, o, s);
            }
        }
    }
    let crc = crc32c::crc32c(&data[f..f + 76]);
    data[f + 76..f + 80].copy_from_slice(&crc.to_le_bytes());
}

/// The data blocks an index block names, whichever format version wrote it: a block of
/// fence values (versions 1 and 2), a fence index (3) or a tile index (4).
fn data_handles(payload: &[u8]) -> Vec<(u64, u64)> {
    use strata::iter::InternalIterator;
    const MAX: usize = 10_000;
    if let Ok(ix) = strata::sstable::tile::TileIndex::decode(payload) {
        return ix
            .pages
            .iter()
            .take(MAX)
            .map(|p| (p.handle.offset, p.handle.size))
            .collect();
    }
    if let Ok(ix) = strata::sstable::index::FenceIndex::decode(payload, u64::MAX) {
        return ix.iter().take(MAX).map(|(_, h)| (h.offset, h.size)).collect();
    }
    let mut out = Vec::new();
    if let Ok(block) = strata::sstable::Block::decode(payload.to_vec()) {
        let block = Arc::new(block);
        let mut it = block.iter();
        let _ = it.seek_to_first();
        while it.valid() && out.len() < MAX {
            if let Ok(v) = strata::sstable::index::FenceValue::decode(it.value()) {
                out.push((v.handle.offset, v.handle.size));
            }
            if it.next().is_err() {
                break;
            }
        }
    }
    out
}

/// Rewrites the trailer checksum of the block at `(offset, size)` if it lies inside
/// (before the footer).
pub fn fix_block(data: &mut [u8], offset: u64, size: u64) {
    let end = (data.len() as u64).saturating_sub(80);
    fix_trailer(data, offset, size, end);
}

/// Rewrites the trailer checksum of the block at `(offset, size)` if the block and its
/// trailer end at or before `end` (and inside `data`).
pub fn fix_trailer(data: &mut [u8], offset: u64, size: u64, end: u64) {
    let Some(block_end) = offset.checked_add(size).and_then(|e| e.checked_add(5)) else {
        return;
    };
    if block_end > end.min(data.len() as u64) {
        return;
    }
    let (s, body_end) = (offset as usize, (offset + size) as usize);
    let crc = crc32c::crc32c(&data[s..body_end + 1]);
    data[body_end + 1..body_end + 5].copy_from_slice(&crc.to_le_bytes());
}

/// The masked record checksum of Strata's logs (see `strata::wal`).
pub fn record_crc(len_bytes: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(len_bytes), payload);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Rewrites the checksum of every record of a log image that fits in the data.
pub fn fix_log_checksums(data: &mut [u8]) {
    let mut at = 0usize;
    while at + 8 <= data.len() {
        let len = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        let Some(end) = (at + 8).checked_add(len).filter(|&e| e <= data.len()) else {
            return;
        };
        let crc = record_crc(&data[at..at + 4], &data[at + 8..end]);
        data[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// Splits a fuzz input into a file image and the choice made by its first byte: when that
/// byte is odd, `fix` rewrites the image's checksums first so the fuzzer reaches the
/// decoding behind them. `None` for an empty input.
pub fn image_from(data: &[u8], fix: fn(&mut [u8])) -> Option<Vec<u8>> {
    let (&flag, rest) = data.split_first()?;
    let mut image = rest.to_vec();
    if flag & 1 == 1 {
        fix(&mut image);
    }
    Some(image)
}

/// Splits a fuzz input into one of [`schemas`] (picked by the first byte), what is left of
/// that byte once the schema is picked (for a further choice), and the remaining bytes.
/// `None` for an empty input.
pub fn pick_schema(data: &[u8]) -> Option<(&'static Schema, usize, &[u8])> {
    let (&pick, bytes) = data.split_first()?;
    let all = schemas();
    let pick = pick as usize;
    Some((&all[pick % all.len()], pick / all.len(), bytes))
}

/// A few schemas covering every field type, nullable fields and composite keys (parsed
/// once per process).
pub fn schemas() -> &'static [Schema] {
    static SCHEMAS: std::sync::OnceLock<Vec<Schema>> = std::sync::OnceLock::new();
    SCHEMAS.get_or_init(parse_schemas)
}

fn parse_schemas() -> Vec<Schema> {
    [
        "table t (id u64, a u64) primary key (id) index by_a (a) deferred",
        "table u (id i64, name str, score f64, ok bool, blob bytes) primary key (id, name) index by_score (score, ok)",
        "table n (k str, v str null, w i64 null, x bytes null, y f64 null, z bool null, p u64 null, q u64 null, r u64 null) primary key (k)",
        "table d (id u64, ts i64, s str null) primary key (id) index by_s (s) delete key (ts) eager",
    ]
    .iter()
    .filter_map(|s| Schema::parse(s).ok())
    .collect()
}

/// Field-by-field equality that compares floats by their bits (rows keep NaN payloads).
pub fn same_values(a: &[strata::table::value::Value], b: &[strata::table::value::Value]) -> bool {
    use strata::table::value::Value;
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
            _ => x == y,
        })
}
