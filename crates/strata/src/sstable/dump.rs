//! Human-readable summary of one table file, for the CLI's `dump-sst`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::format::TABLE_MAGIC;
use super::reader::SstReader;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::parse_internal_key;

/// Longest value prefix shown per entry.
const MAX_VALUE_SHOWN: usize = 64;

/// Bytes as a quoted string: printable ASCII as is, `"` and `\` escaped, others `\xNN`.
pub(crate) fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                s.push('\\');
                s.push(b as char);
            }
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}

/// What [`dump`] shows besides the table's layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Also list every entry.
    pub entries: bool,
    /// Show keys and values as `0x`-prefixed hex instead of escaped text.
    pub hex: bool,
}

impl DumpOptions {
    fn bytes(&self, b: &[u8]) -> String {
        if self.hex {
            format!("0x{}", hex::encode(b))
        } else {
            escape(b)
        }
    }

    /// An internal key as `"user_key"@seq:Kind` (raw bytes if it does not parse).
    fn key(&self, ikey: &[u8]) -> String {
        match parse_internal_key(ikey) {
            Some(p) => format!("{}@{}:{:?}", self.bytes(p.user_key), p.seq, p.kind),
            None => format!("<malformed {}>", self.bytes(ikey)),
        }
    }

    fn value(&self, v: &[u8]) -> String {
        match v.get(..MAX_VALUE_SHOWN) {
            Some(head) if head.len() < v.len() => format!("{}... ({} bytes)", self.bytes(head), v.len()),
            _ => self.bytes(v),
        }
    }
}

/// Summarizes the table at `path`: footer, properties, bloom filter, range tombstones,
/// each data block's fence pointer with its first and last key, and, with
/// [`DumpOptions::entries`], every entry. Damaged data blocks are reported inline; a
/// table that fails to open is an error.
pub fn dump(fs: &dyn FileSystem, path: &Path, show: DumpOptions) -> Result<String> {
    let number = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let table = Arc::new(SstReader::open(fs.open(path)?, number, None)?);
    let mut out = String::new();
    // Writing to a String cannot fail; the results are ignored deliberately.
    let w = &mut out;
    let _ = writeln!(w, "table {} ({} bytes)", path.display(), table.file_size());
    let f = table.footer();
    let _ = writeln!(w, "footer: format version {}, magic {TABLE_MAGIC:#018x}", f.version);
    for (name, h) in [
        ("index", f.index),
        ("filter", f.filter),
        ("properties", f.properties),
        ("range-del", f.range_del),
    ] {
        let _ = writeln!(w, "  {name:<10} offset {:>10}  size {:>8}", h.offset, h.size);
    }
    let p = table.properties();
    let _ = writeln!(w, "properties:");
    let _ = writeln!(
        w,
        "  entries {} (puts {}, deletes {}, deferred deletes {}), range deletes {}",
        p.entries, p.puts, p.deletes, p.deferred_deletes, p.range_deletes
    );
    let _ = writeln!(
        w,
        "  user keys {} ..= {}",
        show.bytes(&p.smallest_user_key),
        show.bytes(&p.largest_user_key)
    );
    let _ = writeln!(w, "  seqnos {} ..= {}", p.min_seq, p.max_seq);
    let oldest = p.oldest_tombstone_time.map_or("none".to_string(), |t| t.to_string());
    let _ = writeln!(w, "  oldest tombstone time {oldest}, created at {}", p.created_at);
    let _ = writeln!(
        w,
        "  raw key bytes {}, raw value bytes {}",
        p.raw_key_bytes, p.raw_value_bytes
    );
    let _ = writeln!(
        w,
        "  data blocks {}, index size {}, filter size {}",
        p.data_blocks, p.index_size, p.filter_size
    );
    match table.filter() {
        Some(b) => {
            let per_entry = b.num_bits() as f64 / p.entries.max(1) as f64;
            let _ = writeln!(
                w,
                "bloom: {} bits in {} lines, {} probes, {} bytes, {per_entry:.2} bits/entry",
                b.num_bits(),
                b.num_lines(),
                b.probes(),
                b.num_lines() * 64
            );
        }
        None => {
            let _ = writeln!(w, "bloom: none");
        }
    }
    let _ = writeln!(w, "range tombstones ({}):", table.range_tombstones().len());
    for t in table.range_tombstones() {
        let _ = writeln!(w, "  [{}, {}) @{}", show.bytes(&t.start), show.bytes(&t.end), t.seq);
    }
    let fences = table.fence_pointers();
    let _ = writeln!(
        w,
        "data blocks ({}; index {} bytes on disk, {} in memory):",
        fences.len(),
        f.index.size,
        table.index_memory()
    );
    for (i, fp) in fences.iter().enumerate() {
        let h = fp.handle;
        let _ = write!(
            w,
            "  #{i} offset {} size {} fence {}",
            h.offset,
            h.size,
            show.key(&fp.key)
        );
        let first = table.block_iter(h).and_then(|mut it| {
            it.seek_to_first()?;
            Ok(it.valid().then(|| show.key(it.key())))
        });
        let _ = match first {
            Ok(Some(k)) => writeln!(w, " first {k}"),
            Ok(None) => writeln!(w, " (empty block)"),
            Err(e) => writeln!(w, " ERROR: {e}"),
        };
    }
    if show.entries {
        let _ = writeln!(w, "entries:");
        let mut it = table.iter();
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() {
            let _ = writeln!(w, "  {} => {}", show.key(it.key()), show.value(it.value()));
            r = it.next();
        }
        if let Err(e) = r {
            let _ = writeln!(w, "  ERROR: {e}");
        }
    }
    Ok(out)
}
