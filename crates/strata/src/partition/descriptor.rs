//! The partition descriptor file (`PARTITIONS`): what a partitioned directory is split
//! into, written once at creation and checked at every open.
//!
//! Format (24 bytes, integers little-endian):
//!
//! ```text
//! magic  8 bytes  "STRATAPT"
//! format u32      1
//! count  u32      number of partitions, 1..=MAX_PARTITIONS
//! hash   u32      hash function id (HashFn)
//! crc    u32      crc32c of the 20 bytes before it
//! ```

use std::path::Path;

use super::{HashFn, MAX_PARTITIONS};
use crate::codec::{Decoder, put_u32};
use crate::error::{Error, Result};

/// File name of the descriptor inside a partitioned directory.
pub const DESCRIPTOR_FILE: &str = "PARTITIONS";
const TMP_FILE: &str = "PARTITIONS.tmp";
const MAGIC: &[u8; 8] = b"STRATAPT";
const FORMAT: u32 = 1;
/// Encoded size of a descriptor.
pub const DESCRIPTOR_LEN: usize = 24;

/// The decoded descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// Number of partitions.
    pub count: usize,
    /// How keys are routed.
    pub hash: HashFn,
}

impl Descriptor {
    /// The 24-byte encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DESCRIPTOR_LEN);
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, FORMAT);
        put_u32(&mut out, self.count as u32);
        put_u32(&mut out, self.hash.id());
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    /// Decodes a descriptor read from `file`; damage is `Corruption` naming the file and
    /// the offset of the bad field.
    pub fn decode(bytes: &[u8], file: &Path) -> Result<Descriptor> {
        let bad = |offset: usize, reason: &str| Error::corruption(file, offset as u64, reason);
        if bytes.len() != DESCRIPTOR_LEN {
            return Err(bad(
                bytes.len().min(DESCRIPTOR_LEN),
                &format!(
                    "partition descriptor is {} bytes, expected {DESCRIPTOR_LEN}",
                    bytes.len()
                ),
            ));
        }
        let mut d = Decoder::new(bytes);
        let short = |e: crate::codec::DecodeError| bad(e.offset, e.reason);
        if d.bytes(8).map_err(short)? != MAGIC {
            return Err(bad(0, "not a partition descriptor (bad magic)"));
        }
        let stored_crc = u32::from_le_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
        if crc32c::crc32c(&bytes[..20]) != stored_crc {
            return Err(bad(20, "partition descriptor checksum mismatch"));
        }
        let format = d.u32().map_err(short)?;
        if format != FORMAT {
            return Err(bad(8, &format!("unknown partition descriptor format {format}")));
        }
        let count = d.u32().map_err(short)? as usize;
        if count == 0 || count > MAX_PARTITIONS {
            return Err(bad(
                12,
                &format!("partition count {count} outside 1..={MAX_PARTITIONS}"),
            ));
        }
        let id = d.u32().map_err(short)?;
        let hash = HashFn::from_id(id).ok_or_else(|| bad(16, &format!("unknown hash function id {id}")))?;
        Ok(Descriptor { count, hash })
    }

    /// Reads the descriptor of `dir`, `None` when the directory has none.
    pub(crate) fn read(fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<Option<Descriptor>> {
        let path = dir.join(DESCRIPTOR_FILE);
        if !fs.exists(&path) {
            return Ok(None);
        }
        let bytes = fs.read_all(&path)?;
        Descriptor::decode(&bytes, &path).map(Some)
    }

    /// Writes the descriptor into `dir` atomically (temporary file, sync, rename, sync
    /// of the directory), so a crash leaves either no descriptor or a whole one.
    pub(crate) fn write(&self, fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
        let tmp = dir.join(TMP_FILE);
        let mut f = fs.create(&tmp)?;
        f.append(&self.encode())?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, &dir.join(DESCRIPTOR_FILE))?;
        fs.sync_dir(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_flipped_byte_is_caught() {
        let d = Descriptor {
            count: 8,
            hash: HashFn::Fnv1aFmix64,
        };
        let bytes = d.encode();
        let p = Path::new("x/PARTITIONS");
        assert_eq!(Descriptor::decode(&bytes, p).expect("decodes"), d);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            let e = Descriptor::decode(&b, p).expect_err("damage detected");
            assert!(e.is_corruption(), "{e}");
            assert!(e.to_string().contains("PARTITIONS"), "{e}");
        }
        assert!(Descriptor::decode(&bytes[..23], p).is_err());
    }

    #[test]
    fn out_of_range_count_with_valid_crc_is_rejected() {
        for count in [0usize, MAX_PARTITIONS + 1] {
            let mut b = Descriptor {
                count: 1,
                hash: HashFn::Fnv1aFmix64,
            }
            .encode();
            b[12..16].copy_from_slice(&(count as u32).to_le_bytes());
            let crc = crc32c::crc32c(&b[..20]);
            b[20..24].copy_from_slice(&crc.to_le_bytes());
            let e = Descriptor::decode(&b, Path::new("P")).expect_err("bad count");
            assert!(e.to_string().contains("offset 12"), "{e}");
        }
    }
}
