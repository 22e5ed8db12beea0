//! Sorted string tables: immutable files of internal entries in internal-key order.
//!
//! This module owns the on-disk table format, the writer ([`SstWriter`]), the reader
//! ([`SstReader`], [`SstIter`]), the `dump-sst` text summary ([`dump`]), and external
//! files written outside a database for ingest ([`external`]).
//!
//! # File layout
//!
//! ```text
//! offset 0: data block 0 ++ trailer        (data blocks are contiguous)
//!           ...
//!           data block N-1 ++ trailer
//!           filter block ++ trailer        (bloom filter; empty payload = no filter)
//!           range-del block ++ trailer     (range tombstones)
//!           properties block ++ trailer    (counts, bounds, sizes)
//!           index block ++ trailer         (one fence per data block)
//! size-80:  footer (80 bytes)
//! ```
//!
//! * **Block trailer** (5 bytes, [`format`](mod@format)): compression type `u8` (0 none, 1 LZ4 with
//!   the uncompressed size prepended as u32 LE) ++ `crc32c(payload ++ type)` u32 LE. A
//!   block handle `(offset, size)` names the stored payload without its trailer.
//! * **Data blocks** ([`block`]): prefix-compressed entries
//!   `varint shared ++ varint unshared ++ varint value_len ++ key delta ++ value`, then
//!   restart offsets (u32 LE each) and their count (u32 LE). Keys are internal keys
//!   (`user_key ++ be64(seq << 8 | kind)`) in strictly increasing
//!   [`crate::key::compare_internal`] order. Only data blocks are ever compressed.
//! * **Index** ([`index`]): `varint count ++ varint first block offset`, then per data
//!   block its fence (a user key between the block's last key and the next block's
//!   first, prefix-compressed) and `varint size << 1 | explicit trailer`. Versions 1
//!   and 2 used an ordinary block of internal keys and offset/size/seqno varints.
//! * **Filter** ([`bloom`]): blocked bloom filter over user keys, 64-byte lines.
//! * **Range-del block** ([`range_del`]): `varint count ++ (start, end, varint seq)*`.
//! * **Properties** ([`properties`]): see [`Properties`].
//! * **Footer** ([`format::Footer`]): `(offset u64 LE, size u64 LE)` for index, filter,
//!   properties, range-del; then magic `0x5354524154415354` ("STRATAST") u64 LE, format
//!   version u32 LE (3 written, 4 with delete tiles; 1 and 2 read), and `crc32c` of the preceding 76 bytes u32 LE.
//!
//! * **Page patches** ([`patch`]): `<number>.patch` files of sealed data blocks that
//!   serve some pages of a tiled table in place of its own (a version's page map says
//!   which), so a secondary range delete rewrites a page without its table.
//! * **Delete tiles** ([`tile`], version 4): the data blocks come in tiles of up to h
//!   pages partitioned by a delete key, the filter block is empty, and the index handle
//!   names a tile index with each page's fences, delete-key range and bloom filter.
//!
//! Invariants: every block's checksum is verified on every read from disk; nothing in a
//! table file can make the reader panic or loop — bad data is an
//! [`Error::Corruption`](crate::Error::Corruption) naming the file and offset.

pub mod block;
pub mod bloom;
mod builder;
pub mod cache;
mod dump;
pub mod external;
pub mod format;
pub mod index;
pub mod patch;
pub mod properties;
pub mod range_del;
mod reader;
#[cfg(test)]
mod tests;
pub mod tile;

pub use block::{Block, BlockIter, Walked};
pub use bloom::FilterKey;
pub use builder::{DataBlockObserver, SstOptions, SstWriter, TileOptions};
pub use cache::{BlockCache, SstCache};
pub(crate) use dump::escape;
pub use dump::{DumpOptions, dump};
pub use external::{ExternalFileInfo, ExternalSstWriter, FileDigest};
pub use format::Compression;
pub use index::FencePointer;
pub use properties::Properties;
pub use reader::{Fill, LOOKUP_COUNTERS, LookupCounters, Pages, SstIter, SstReader};

/// The file name of table `number`: at least six digits, e.g. `000123.sst`.
pub fn sst_file_name(number: u64) -> String {
    format!("{number:06}.sst")
}
