//! Physical framing of an SSTable: block handles, the per-block trailer (compression
//! type + checksum) and the fixed-size footer.
//!
//! Invariants: every block on disk is `payload ++ type:u8 ++ crc32c(payload ++ type):u32 LE`,
//! and a [`BlockHandle`] names the payload only (the 5-byte trailer follows it). The
//! footer is the last [`FOOTER_LEN`] bytes of the file; its handles must lie inside the
//! file before the footer. Decoders here never panic on arbitrary input.

use crate::codec::{DecodeError, Decoder, put_u32, put_u64, put_varint};

/// Bytes after every block payload: compression type (1) + crc32c (4).
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Size of the footer: 4 handles (16 bytes each), magic, version, crc.
pub const FOOTER_LEN: usize = 4 * 16 + 8 + 4 + 4;

/// The format version written. 2: a fence key may lie past its block's last key, which
/// a version-1 reader would take for corruption. 3: the index is a prefix-compressed
/// list of user-key fences with block sizes only (see `sstable::index`).
pub const FORMAT_VERSION: u32 = 3;

/// The format version of tables written with delete tiles (`sstable::tile`): the index
/// block is a tile index, each page carries its own bloom filter and the filter block
/// is empty. Version 3 stays the default, so h = 1 without a delete key writes what
/// older releases wrote and read.
pub const TILED_FORMAT_VERSION: u32 = 4;

/// The oldest format version read. Version 1's fence keys are the blocks' last keys, a
/// case of version 2's.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Last-but-8 bytes of every table: "STRATAST".
pub const TABLE_MAGIC: u64 = 0x5354_5241_5441_5354;

/// How a block payload is compressed on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None = 0,
    /// LZ4 block format with the uncompressed size prepended (u32 LE).
    Lz4 = 1,
}

impl Compression {
    /// Decodes a compression type byte.
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            _ => None,
        }
    }
}

/// Where a block's payload lives in the file (the trailer follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the payload's first byte.
    pub offset: u64,
    /// Payload length in bytes, trailer excluded.
    pub size: u64,
}

impl BlockHandle {
    /// File offset one past the block's trailer; `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Appends the handle as two varints (used in index entries).
    pub fn encode_varint(&self, out: &mut Vec<u8>) {
        put_varint(out, self.offset);
        put_varint(out, self.size);
    }

    /// Reads a handle written by [`BlockHandle::encode_varint`].
    pub fn decode_varint(d: &mut Decoder<'_>) -> Result<BlockHandle, DecodeError> {
        Ok(BlockHandle {
            offset: d.varint()?,
            size: d.varint()?,
        })
    }
}

/// The table's last bytes: where the index and meta blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// The index block (fence pointers).
    pub index: BlockHandle,
    /// The bloom filter block (empty payload: no filter).
    pub filter: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The range-tombstone block.
    pub range_del: BlockHandle,
    /// The format version: the one the file was written in when decoded, the one
    /// [`Footer::encode`] writes (table builders write [`FORMAT_VERSION`]).
    pub version: u32,
}

impl Footer {
    /// Encodes to exactly [`FOOTER_LEN`] bytes:
    /// `4 × (offset u64 LE, size u64 LE) ++ magic u64 LE ++ version u32 LE ++ crc32c u32 LE`,
    /// the crc covering everything before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        for h in [self.index, self.filter, self.properties, self.range_del] {
            put_u64(&mut out, h.offset);
            put_u64(&mut out, h.size);
        }
        put_u64(&mut out, TABLE_MAGIC);
        put_u32(&mut out, self.version);
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    /// Decodes and validates a footer read from the end of a file of `file_size` bytes:
    /// length, magic, checksum, version, and that every block lies before the footer.
    /// Error offsets are relative to the footer's first byte.
    pub fn decode(bytes: &[u8], file_size: u64) -> Result<Footer, DecodeError> {
        let err = |offset, reason| Err(DecodeError { offset, reason });
        if bytes.len() != FOOTER_LEN {
            return err(0, "footer has the wrong length");
        }
        let mut d = Decoder::new(bytes);
        let mut handles = [BlockHandle::default(); 4];
        for h in &mut handles {
            h.offset = d.u64()?;
            h.size = d.u64()?;
        }
        let magic_at = d.position();
        if d.u64()? != TABLE_MAGIC {
            return err(magic_at, "bad table magic (not a Strata SSTable)");
        }
        let version_at = d.position();
        let version = d.u32()?;
        let crc_at = d.position();
        let stored_crc = d.u32()?;
        if crc32c::crc32c(&bytes[..crc_at]) != stored_crc {
            return err(crc_at, "footer checksum mismatch");
        }
        if !(OLDEST_FORMAT_VERSION..=TILED_FORMAT_VERSION).contains(&version) {
            return err(version_at, "unsupported table format version");
        }
        let limit = file_size.saturating_sub(FOOTER_LEN as u64);
        for (i, h) in handles.iter().enumerate() {
            if h.end_with_trailer().is_none_or(|end| end > limit) {
                return err(i * 16, "block handle points past the end of the file");
            }
        }
        let [index, filter, properties, range_del] = handles;
        Ok(Footer {
            index,
            filter,
            properties,
            range_del,
            version,
        })
    }
}

/// Frames a block payload for disk: compresses it if asked and if that saves at least
/// 1/8 of the bytes, then appends the trailer. Returns the bytes to write and the
/// handle size (the stored payload length).
pub fn seal_block(payload: &[u8], compression: Compression) -> (Vec<u8>, u64) {
    let compressed = match compression {
        Compression::Lz4 => {
            let c = lz4_flex::block::compress_prepend_size(payload);
            (c.len() < payload.len() - payload.len() / 8).then_some(c)
        }
        Compression::None => None,
    };
    let (mut out, kind) = match compressed {
        Some(c) => (c, Compression::Lz4),
        None => (payload.to_vec(), Compression::None),
    };
    let size = out.len() as u64;
    out.reserve(BLOCK_TRAILER_LEN);
    out.push(kind as u8);
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    (out, size)
}

/// Verifies and unwraps a block read from disk (`payload ++ trailer`), returning the
/// uncompressed payload. Error offsets are relative to the block's first byte.
pub fn unseal_block(raw: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let (body_len, kind) = check_sealed(raw)?;
    match kind {
        Compression::None => Ok(raw[..body_len].to_vec()),
        Compression::Lz4 => decompress_lz4(&raw[..body_len]),
    }
}

/// [`unseal_block`] taking the bytes read: an uncompressed payload is returned in place,
/// without a copy (every data block read from a file comes through here).
pub fn unseal_block_owned(mut raw: Vec<u8>) -> Result<Vec<u8>, DecodeError> {
    let (body_len, kind) = check_sealed(&raw)?;
    match kind {
        Compression::None => {
            raw.truncate(body_len);
            Ok(raw)
        }
        Compression::Lz4 => decompress_lz4(&raw[..body_len]),
    }
}

/// [`unseal_block`] without a copy: an uncompressed payload is returned as a slice of
/// `raw`, a compressed one is decompressed into `buf` (reused across blocks), for a bulk
/// check of many blocks.
pub fn unseal_block_in<'a>(raw: &'a [u8], buf: &'a mut Vec<u8>) -> Result<&'a [u8], DecodeError> {
    let (body_len, kind) = check_sealed(raw)?;
    match kind {
        Compression::None => Ok(&raw[..body_len]),
        Compression::Lz4 => {
            decompress_lz4_into(&raw[..body_len], buf)?;
            Ok(buf)
        }
    }
}

/// Checks a sealed block's trailer and checksum; returns the payload's length and how it
/// is compressed.
fn check_sealed(raw: &[u8]) -> Result<(usize, Compression), DecodeError> {
    let err = |offset, reason| Err(DecodeError { offset, reason });
    let Some(body_len) = raw.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return err(0, "block shorter than its trailer");
    };
    let (covered, crc_bytes) = raw.split_at(body_len + 1);
    let stored = Decoder::new(crc_bytes).u32()?;
    if crc32c::crc32c(covered) != stored {
        return err(body_len, "block checksum mismatch");
    }
    match Compression::from_u8(covered[body_len]) {
        Some(kind) => Ok((body_len, kind)),
        None => err(body_len, "unknown block compression type"),
    }
}

fn decompress_lz4(payload: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    decompress_lz4_into(payload, &mut out)?;
    Ok(out)
}

/// Decompresses an LZ4 payload (its size prepended) into `out`, replacing its contents.
fn decompress_lz4_into(payload: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let err = |offset, reason| Err(DecodeError { offset, reason });
    let mut d = Decoder::new(payload);
    let size = d.u32()? as usize;
    let input = &payload[4..];
    // LZ4 cannot expand more than ~255x; a larger claim is corruption, and checking it
    // first keeps a bad size from triggering a huge allocation.
    if size > input.len().saturating_mul(255).saturating_add(16) {
        return err(0, "implausible LZ4 uncompressed size");
    }
    out.clear();
    out.resize(size, 0);
    match lz4_flex::block::decompress_into(input, out) {
        Ok(n) if n == size => Ok(()),
        Ok(_) => err(0, "LZ4 block shorter than its recorded size"),
        Err(_) => err(4, "malformed LZ4 data"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_footer() -> Footer {
        let h = |offset, size| BlockHandle { offset, size };
        Footer {
            index: h(400, 50),
            filter: h(100, 60),
            properties: h(300, 40),
            range_del: h(200, 10),
            version: FORMAT_VERSION,
        }
    }

    #[test]
    fn footer_roundtrip_and_validation() {
        let f = sample_footer();
        let bytes = f.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&bytes, 1000), Ok(f));
        // The index block (400 + 50 + trailer) must end before the footer.
        assert!(Footer::decode(&bytes, 455 + FOOTER_LEN as u64 - 1).is_err());
        for i in 0..FOOTER_LEN {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(Footer::decode(&b, 1000).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn versions_one_to_four_are_read_and_others_refused() {
        let with_version = |v: u32| {
            let mut b = sample_footer().encode();
            b[72..76].copy_from_slice(&v.to_le_bytes());
            let crc = crc32c::crc32c(&b[..76]);
            b[76..80].copy_from_slice(&crc.to_le_bytes());
            b
        };
        for v in [1, 2, 3, 4] {
            assert_eq!(Footer::decode(&with_version(v), 1000).map(|f| f.version), Ok(v));
        }
        for v in [0, 5, u32::MAX] {
            let e = Footer::decode(&with_version(v), 1000).expect_err("refused");
            assert_eq!((e.offset, e.reason), (72, "unsupported table format version"));
        }
    }

    #[test]
    fn block_seal_roundtrip_both_compressions() {
        let payload: Vec<u8> = (0..4000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        for c in [Compression::None, Compression::Lz4] {
            let (sealed, size) = seal_block(&payload, c);
            assert_eq!(sealed.len() as u64, size + BLOCK_TRAILER_LEN as u64);
            assert_eq!(sealed[size as usize], c as u8, "compressible data uses {c:?}");
            assert_eq!(unseal_block(&sealed).ok(), Some(payload.clone()));
            assert_eq!(unseal_block_owned(sealed.clone()).ok(), Some(payload.clone()));
            let mut bad = sealed.clone();
            bad[3] ^= 1;
            assert!(unseal_block(&bad).is_err());
            assert_eq!(unseal_block_owned(bad.clone()), unseal_block(&bad));
        }
        // Incompressible data falls back to no compression.
        let noise: Vec<u8> = (0..256u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let (sealed, size) = seal_block(&noise, Compression::Lz4);
        assert_eq!(sealed[size as usize], Compression::None as u8);
    }

    proptest! {
        #[test]
        fn footer_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100), size: u64) {
            let _ = Footer::decode(&bytes, size);
        }

        #[test]
        fn unseal_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), lz4: bool) {
            // Give the fuzzer a valid checksum so decompression is exercised too.
            if bytes.len() >= BLOCK_TRAILER_LEN {
                let n = bytes.len() - 4;
                if lz4 { bytes[n - 1] = 1; }
                let crc = crc32c::crc32c(&bytes[..n]);
                bytes[n..].copy_from_slice(&crc.to_le_bytes());
            }
            let _ = unseal_block(&bytes);
        }
    }
}
