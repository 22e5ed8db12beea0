//! Version edits: the delta records of the manifest.
//!
//! One edit is applied atomically. It may add and remove files in several keyspaces at
//! once (a primary compaction installs its deferred deletes into the secondary
//! keyspaces in the same edit), create or drop keyspaces, and change catalog entries.
//!
//! Encoding of one edit: a sequence of fields, each `tag varint` + value, in any order.
//! Integers are varints, byte strings and names are `varint length ++ bytes` (names
//! UTF-8). An unknown tag, a repeated scalar field or a value out of range is a decode
//! error, so an old binary never silently drops state written by a newer one; new
//! fields get new tags and decode as absent in old manifests.
//!
//! | tag | field               | value                                              |
//! |-----|---------------------|----------------------------------------------------|
//! | 1   | new keyspace        | id varint (u32), name bytes                        |
//! | 2   | dropped keyspace    | id varint (u32)                                    |
//! | 3   | new file            | bytes: a nested tagged record (table below)        |
//! | 4   | deleted file        | keyspace varint (u32), file number varint          |
//! | 5   | next file number    | varint (at most once)                              |
//! | 6   | last seq            | varint (at most once)                              |
//! | 7   | log number          | varint (at most once)                              |
//! | 8   | next keyspace id    | varint u32 (at most once)                          |
//! | 9   | meta set            | name bytes, value bytes                            |
//! | 10  | meta remove         | name bytes                                         |
//!
//! A new file is nested (length-prefixed) so that [`FileMeta`] can grow fields too. Its
//! tags, each at most once; all required except 13, 15, 16, 17 and 18:
//! 1 keyspace (u32), 2 level (u32), 3 run, 4 number, 5 size, 6 smallest (bytes),
//! 7 largest (bytes), 8 min_seq, 9 max_seq, 10 entries, 11 tombstones,
//! 12 range_tombstones, 13 oldest_tombstone_time (absent = `None`), 14 raw_bytes,
//! 15 global_seq (absent = `None`; an ingested file, read with this seqno),
//! 16 dropped pages (optional: `varint count ++ varint offset delta*`, ascending),
//! 17 deletes_applied (absent = 0),
//! 18 patched pages (optional: `varint count ++ (varint page offset, patch file,
//! block offset, block size, applied seqno)*`, ascending by page, none of them
//! dropped; `sstable::patch`).
//!
//! The codec checks syntax only; whether an edit makes sense (seqno ranges, known
//! keyspaces) is checked when it is applied to a version.

use std::sync::Arc;

use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::key::SeqNo;
use crate::sstable::format::BlockHandle;
use crate::sstable::patch::{PageMap, PagePatch};

/// What the manifest remembers about one SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number; the file is `<number>.sst` in the database directory.
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest user key (point keys and range-tombstone starts).
    pub smallest: Vec<u8>,
    /// Largest user key, inclusive (point keys and range-tombstone ends, conservatively).
    pub largest: Vec<u8>,
    /// Smallest seqno in the file.
    pub min_seq: SeqNo,
    /// Largest seqno in the file.
    pub max_seq: SeqNo,
    /// Number of point entries (all kinds).
    pub entries: u64,
    /// Point deletes + deferred deletes + range tombstones.
    pub tombstones: u64,
    /// Range tombstones alone.
    pub range_tombstones: u64,
    /// Clock time (microseconds) of the oldest tombstone, if any.
    pub oldest_tombstone_time: Option<u64>,
    /// Sum of raw key and value bytes of the entries.
    pub raw_bytes: u64,
    /// For an ingested external file: the seqno all its entries are read with (they are
    /// stored with seqno 0; `db::ingest`). `None` for files the engine wrote.
    pub global_seq: Option<SeqNo>,
    /// The pages of a tiled file that secondary range deletes dropped (readers skip
    /// them) or patched (readers take them from a patch file) without rewriting it
    /// (`sstable::patch`, `compaction::tiles`).
    pub pages: Arc<PageMap>,
    /// Every secondary range delete of the file's keyspace at a seqno up to this one
    /// was applied by the flush or compaction that wrote the file, and it kept no `Put`
    /// one kills (invariant KR of `compaction::tiles`); 0 = none known applied.
    pub deletes_applied: SeqNo,
}

/// A file added to a keyspace's level, as a piece of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Keyspace id.
    pub keyspace: u32,
    /// Level, 0 = newest.
    pub level: u32,
    /// Run id: files of one sorted run share it; larger is newer.
    pub run: u64,
    /// The file.
    pub meta: FileMeta,
}

/// A change to the current version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Keyspaces created: (id, name).
    pub new_keyspaces: Vec<(u32, String)>,
    /// Keyspaces dropped (their files are removed as well).
    pub dropped_keyspaces: Vec<u32>,
    /// Files added.
    pub new_files: Vec<NewFile>,
    /// Files removed: (keyspace, file number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Highest seqno durable in SSTables (recovery replays WAL records above it).
    pub last_seq: Option<SeqNo>,
    /// WAL files numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next unused keyspace id.
    pub next_keyspace_id: Option<u32>,
    /// Catalog entries set (`Some`) or removed (`None`), by name.
    pub meta: Vec<(String, Option<Vec<u8>>)>,
}

const TAG_NEW_KEYSPACE: u64 = 1;
const TAG_DROPPED_KEYSPACE: u64 = 2;
const TAG_NEW_FILE: u64 = 3;
const TAG_DELETED_FILE: u64 = 4;
const TAG_NEXT_FILE_NUMBER: u64 = 5;
const TAG_LAST_SEQ: u64 = 6;
const TAG_LOG_NUMBER: u64 = 7;
const TAG_NEXT_KEYSPACE_ID: u64 = 8;
const TAG_META_SET: u64 = 9;
const TAG_META_REMOVE: u64 = 10;

const NF_KEYSPACE: u64 = 1;
const NF_LEVEL: u64 = 2;
const NF_RUN: u64 = 3;
const NF_NUMBER: u64 = 4;
const NF_SIZE: u64 = 5;
const NF_SMALLEST: u64 = 6;
const NF_LARGEST: u64 = 7;
const NF_MIN_SEQ: u64 = 8;
const NF_MAX_SEQ: u64 = 9;
const NF_ENTRIES: u64 = 10;
const NF_TOMBSTONES: u64 = 11;
const NF_RANGE_TOMBSTONES: u64 = 12;
const NF_OLDEST_TOMBSTONE_TIME: u64 = 13;
const NF_RAW_BYTES: u64 = 14;
const NF_GLOBAL_SEQ: u64 = 15;
const NF_DROPPED_PAGES: u64 = 16;
const NF_DELETES_APPLIED: u64 = 17;
const NF_PATCHED_PAGES: u64 = 18;

impl VersionEdit {
    /// Encodes the edit in the manifest's tagged format (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoded edit to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        for (id, name) in &self.new_keyspaces {
            put_varint(out, TAG_NEW_KEYSPACE);
            put_varint(out, u64::from(*id));
            put_bytes(out, name.as_bytes());
        }
        for id in &self.dropped_keyspaces {
            put_varint(out, TAG_DROPPED_KEYSPACE);
            put_varint(out, u64::from(*id));
        }
        let mut nested = Vec::new();
        for nf in &self.new_files {
            nested.clear();
            encode_new_file(nf, &mut nested);
            put_varint(out, TAG_NEW_FILE);
            put_bytes(out, &nested);
        }
        for (ks, number) in &self.deleted_files {
            put_varint(out, TAG_DELETED_FILE);
            put_varint(out, u64::from(*ks));
            put_varint(out, *number);
        }
        let scalars = [
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_KEYSPACE_ID, self.next_keyspace_id.map(u64::from)),
        ];
        for (tag, v) in scalars {
            if let Some(v) = v {
                put_varint(out, tag);
                put_varint(out, v);
            }
        }
        for (name, value) in &self.meta {
            match value {
                Some(v) => {
                    put_varint(out, TAG_META_SET);
                    put_bytes(out, name.as_bytes());
                    put_bytes(out, v);
                }
                None => {
                    put_varint(out, TAG_META_REMOVE);
                    put_bytes(out, name.as_bytes());
                }
            }
        }
    }

    /// Decodes an edit written by [`encode`](Self::encode). Never panics; on failure the
    /// error's offset is relative to `buf`.
    pub fn decode(buf: &[u8]) -> std::result::Result<VersionEdit, DecodeError> {
        let mut d = Decoder::new(buf);
        let mut e = VersionEdit::default();
        while !d.is_empty() {
            let at = d.position();
            match d.varint()? {
                TAG_NEW_KEYSPACE => {
                    let id = read_u32(&mut d)?;
                    let name = read_string(&mut d)?;
                    e.new_keyspaces.push((id, name));
                }
                TAG_DROPPED_KEYSPACE => e.dropped_keyspaces.push(read_u32(&mut d)?),
                TAG_NEW_FILE => {
                    let body = d.length_prefixed()?;
                    let body_at = d.position() - body.len();
                    e.new_files.push(decode_new_file(body).map_err(|err| DecodeError {
                        offset: body_at + err.offset,
                        reason: err.reason,
                    })?);
                }
                TAG_DELETED_FILE => {
                    let ks = read_u32(&mut d)?;
                    let number = d.varint()?;
                    e.deleted_files.push((ks, number));
                }
                TAG_NEXT_FILE_NUMBER => set_once(&mut e.next_file_number, d.varint()?, at)?,
                TAG_LAST_SEQ => set_once(&mut e.last_seq, d.varint()?, at)?,
                TAG_LOG_NUMBER => set_once(&mut e.log_number, d.varint()?, at)?,
                TAG_NEXT_KEYSPACE_ID => set_once(&mut e.next_keyspace_id, read_u32(&mut d)?, at)?,
                TAG_META_SET => {
                    let name = read_string(&mut d)?;
                    let value = d.length_prefixed()?.to_vec();
                    e.meta.push((name, Some(value)));
                }
                TAG_META_REMOVE => {
                    let name = read_string(&mut d)?;
                    e.meta.push((name, None));
                }
                _ => {
                    return Err(DecodeError {
                        offset: at,
                        reason: "unknown version edit field tag",
                    });
                }
            }
        }
        Ok(e)
    }
}

fn encode_new_file(nf: &NewFile, out: &mut Vec<u8>) {
    let m = &nf.meta;
    let ints = [
        (NF_KEYSPACE, u64::from(nf.keyspace)),
        (NF_LEVEL, u64::from(nf.level)),
        (NF_RUN, nf.run),
        (NF_NUMBER, m.number),
        (NF_SIZE, m.size),
        (NF_MIN_SEQ, m.min_seq),
        (NF_MAX_SEQ, m.max_seq),
        (NF_ENTRIES, m.entries),
        (NF_TOMBSTONES, m.tombstones),
        (NF_RANGE_TOMBSTONES, m.range_tombstones),
        (NF_RAW_BYTES, m.raw_bytes),
    ];
    for (tag, v) in ints {
        put_varint(out, tag);
        put_varint(out, v);
    }
    put_varint(out, NF_SMALLEST);
    put_bytes(out, &m.smallest);
    put_varint(out, NF_LARGEST);
    put_bytes(out, &m.largest);
    if let Some(t) = m.oldest_tombstone_time {
        put_varint(out, NF_OLDEST_TOMBSTONE_TIME);
        put_varint(out, t);
    }
    if let Some(g) = m.global_seq {
        put_varint(out, NF_GLOBAL_SEQ);
        put_varint(out, g);
    }
    if m.deletes_applied > 0 {
        put_varint(out, NF_DELETES_APPLIED);
        put_varint(out, m.deletes_applied);
    }
    if !m.pages.dropped.is_empty() {
        put_varint(out, NF_DROPPED_PAGES);
        let mut b = Vec::new();
        put_varint(&mut b, m.pages.dropped.len() as u64);
        let mut prev = 0;
        for &o in &m.pages.dropped {
            put_varint(&mut b, o - prev);
            prev = o;
        }
        put_bytes(out, &b);
    }
    if !m.pages.patched.is_empty() {
        put_varint(out, NF_PATCHED_PAGES);
        let mut b = Vec::new();
        put_varint(&mut b, m.pages.patched.len() as u64);
        for p in &m.pages.patched {
            for v in [p.page, p.file, p.handle.offset, p.handle.size, p.applied] {
                put_varint(&mut b, v);
            }
        }
        put_bytes(out, &b);
    }
}

/// Decodes tag 18 of a new file: `varint count ++ (varint page, file, offset, size,
/// applied)*`, ascending by page (checked with the dropped pages by
/// [`PageMap::check`]).
fn decode_patched_pages(b: &[u8]) -> std::result::Result<Vec<PagePatch>, DecodeError> {
    let mut d = Decoder::new(b);
    let n = d.varint()?;
    // Each patch takes at least five bytes: never trust `n` for the allocation.
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(d.remaining() / 5));
    for _ in 0..n {
        let (page, file, offset, size, applied) = (d.varint()?, d.varint()?, d.varint()?, d.varint()?, d.varint()?);
        out.push(PagePatch {
            page,
            file,
            handle: BlockHandle { offset, size },
            applied,
        });
    }
    d.finish("trailing bytes after the patched pages")?;
    Ok(out)
}

/// Decodes tag 16 of a new file: ascending page offsets.
fn decode_dropped_pages(b: &[u8]) -> std::result::Result<Vec<u64>, DecodeError> {
    let mut d = Decoder::new(b);
    let n = d.varint()?;
    // Each offset takes at least a byte: never trust `n` for the allocation.
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(d.remaining()));
    let mut prev = 0u64;
    for i in 0..n {
        let at = d.position();
        let delta = d.varint()?;
        if i > 0 && delta == 0 {
            return Err(DecodeError {
                offset: at,
                reason: "dropped pages not ascending",
            });
        }
        prev = prev.checked_add(delta).ok_or(DecodeError {
            offset: at,
            reason: "dropped page offset overflows",
        })?;
        out.push(prev);
    }
    d.finish("trailing bytes after the dropped pages")?;
    Ok(out)
}

fn decode_new_file(buf: &[u8]) -> std::result::Result<NewFile, DecodeError> {
    let mut d = Decoder::new(buf);
    let (mut keyspace, mut level, mut run) = (None, None, None);
    let (mut number, mut size, mut smallest, mut largest) = (None, None, None, None);
    let (mut min_seq, mut max_seq, mut entries) = (None, None, None);
    let (mut tombstones, mut range_tombstones, mut oldest, mut raw_bytes) = (None, None, None, None);
    let mut global_seq = None;
    let mut dropped = None;
    let mut patched = None;
    let mut applied = None;
    while !d.is_empty() {
        let at = d.position();
        match d.varint()? {
            NF_KEYSPACE => set_once(&mut keyspace, read_u32(&mut d)?, at)?,
            NF_LEVEL => set_once(&mut level, read_u32(&mut d)?, at)?,
            NF_RUN => set_once(&mut run, d.varint()?, at)?,
            NF_NUMBER => set_once(&mut number, d.varint()?, at)?,
            NF_SIZE => set_once(&mut size, d.varint()?, at)?,
            NF_SMALLEST => set_once(&mut smallest, d.length_prefixed()?.to_vec(), at)?,
            NF_LARGEST => set_once(&mut largest, d.length_prefixed()?.to_vec(), at)?,
            NF_MIN_SEQ => set_once(&mut min_seq, d.varint()?, at)?,
            NF_MAX_SEQ => set_once(&mut max_seq, d.varint()?, at)?,
            NF_ENTRIES => set_once(&mut entries, d.varint()?, at)?,
            NF_TOMBSTONES => set_once(&mut tombstones, d.varint()?, at)?,
            NF_RANGE_TOMBSTONES => set_once(&mut range_tombstones, d.varint()?, at)?,
            NF_OLDEST_TOMBSTONE_TIME => set_once(&mut oldest, d.varint()?, at)?,
            NF_RAW_BYTES => set_once(&mut raw_bytes, d.varint()?, at)?,
            NF_GLOBAL_SEQ => set_once(&mut global_seq, d.varint()?, at)?,
            NF_DELETES_APPLIED => set_once(&mut applied, d.varint()?, at)?,
            NF_DROPPED_PAGES => {
                let b = d.length_prefixed()?;
                // Offsets inside the list count from its first byte, past the length.
                let b_at = d.position() - b.len();
                let pages = decode_dropped_pages(b).map_err(|e| DecodeError {
                    offset: b_at + e.offset,
                    reason: e.reason,
                })?;
                set_once(&mut dropped, pages, at)?
            }
            NF_PATCHED_PAGES => {
                let b = d.length_prefixed()?;
                // Offsets inside the list count from its first byte, past the length.
                let b_at = d.position() - b.len();
                let pages = decode_patched_pages(b).map_err(|e| DecodeError {
                    offset: b_at + e.offset,
                    reason: e.reason,
                })?;
                set_once(&mut patched, pages, at)?
            }
            _ => {
                return Err(DecodeError {
                    offset: at,
                    reason: "unknown new-file field tag",
                });
            }
        }
    }
    let end = d.position();
    let missing = |reason: &'static str| DecodeError { offset: end, reason };
    let pages = PageMap {
        dropped: dropped.unwrap_or_default(),
        patched: patched.unwrap_or_default(),
    };
    pages.check().map_err(|reason| DecodeError { offset: end, reason })?;
    Ok(NewFile {
        keyspace: keyspace.ok_or_else(|| missing("new file lacks its keyspace"))?,
        level: level.ok_or_else(|| missing("new file lacks its level"))?,
        run: run.ok_or_else(|| missing("new file lacks its run"))?,
        meta: FileMeta {
            number: number.ok_or_else(|| missing("new file lacks its number"))?,
            size: size.ok_or_else(|| missing("new file lacks its size"))?,
            smallest: smallest.ok_or_else(|| missing("new file lacks its smallest key"))?,
            largest: largest.ok_or_else(|| missing("new file lacks its largest key"))?,
            min_seq: min_seq.ok_or_else(|| missing("new file lacks its min seq"))?,
            max_seq: max_seq.ok_or_else(|| missing("new file lacks its max seq"))?,
            entries: entries.ok_or_else(|| missing("new file lacks its entry count"))?,
            tombstones: tombstones.ok_or_else(|| missing("new file lacks its tombstone count"))?,
            range_tombstones: range_tombstones.ok_or_else(|| missing("new file lacks its range tombstone count"))?,
            oldest_tombstone_time: oldest,
            raw_bytes: raw_bytes.ok_or_else(|| missing("new file lacks its raw byte count"))?,
            global_seq,
            pages: Arc::new(pages),
            deletes_applied: applied.unwrap_or(0),
        },
    })
}

fn set_once<T>(slot: &mut Option<T>, v: T, at: usize) -> std::result::Result<(), DecodeError> {
    if slot.is_some() {
        return Err(DecodeError {
            offset: at,
            reason: "field appears twice",
        });
    }
    *slot = Some(v);
    Ok(())
}

fn read_u32(d: &mut Decoder<'_>) -> std::result::Result<u32, DecodeError> {
    let at = d.position();
    u32::try_from(d.varint()?).map_err(|_| DecodeError {
        offset: at,
        reason: "value does not fit in 32 bits",
    })
}

fn read_string(d: &mut Decoder<'_>) -> std::result::Result<String, DecodeError> {
    let at = d.position();
    let b = d.length_prefixed()?;
    String::from_utf8(b.to_vec()).map_err(|_| DecodeError {
        offset: at,
        reason: "name is not UTF-8",
    })
}

// ---------------------------------------------------------------------------------
// Manifest files
// ---------------------------------------------------------------------------------

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;

    pub(crate) fn file(number: u64, keyspace: u32, oldest: Option<u64>) -> NewFile {
        NewFile {
            keyspace,
            level: 1,
            run: 9,
            meta: FileMeta {
                number,
                size: 4096,
                smallest: b"a".to_vec(),
                largest: b"z\xff".to_vec(),
                min_seq: 1,
                max_seq: 100,
                entries: 50,
                tombstones: 5,
                range_tombstones: 1,
                oldest_tombstone_time: oldest,
                raw_bytes: 3000,
                global_seq: None,
                pages: Default::default(),
                deletes_applied: 0,
            },
        }
    }

    pub(crate) fn snapshot() -> VersionEdit {
        VersionEdit {
            new_keyspaces: vec![(0, "default".into()), (1, "idx_email".into())],
            new_files: vec![file(3, 0, Some(1_700_000_000_000_000)), file(4, 1, None)],
            next_file_number: Some(10),
            last_seq: Some(500),
            log_number: Some(8),
            next_keyspace_id: Some(2),
            meta: vec![("schema".into(), Some(b"{}".to_vec()))],
            ..Default::default()
        }
    }

    #[test]
    fn decode_rejects_bad_fields() {
        let good = snapshot().encode();
        assert_eq!(VersionEdit::decode(&good), Ok(snapshot()));
        assert_eq!(VersionEdit::decode(&[]), Ok(VersionEdit::default()));

        let unknown = [99u8, 1];
        assert_eq!(VersionEdit::decode(&unknown).map_err(|e| e.offset), Err(0));

        // A scalar field twice.
        let mut twice = Vec::new();
        for _ in 0..2 {
            put_varint(&mut twice, TAG_LAST_SEQ);
            put_varint(&mut twice, 5);
        }
        assert_eq!(VersionEdit::decode(&twice).map_err(|e| e.offset), Err(2));

        // A keyspace id over u32.
        let mut big = Vec::new();
        put_varint(&mut big, TAG_DROPPED_KEYSPACE);
        put_varint(&mut big, u64::from(u32::MAX) + 1);
        assert!(VersionEdit::decode(&big).is_err());

        // A keyspace name that is not UTF-8.
        let mut name = Vec::new();
        put_varint(&mut name, TAG_NEW_KEYSPACE);
        put_varint(&mut name, 1);
        put_bytes(&mut name, b"\xff\xfe");
        assert!(VersionEdit::decode(&name).is_err());

        // A new file missing a required field, and one with an unknown field; the error
        // offset points into the nested record.
        let mut body = Vec::new();
        encode_new_file(&file(1, 0, None), &mut body);
        // The largest key ("z\xff") is the last field: tag, length, 2 bytes.
        let mut missing = Vec::new();
        put_varint(&mut missing, TAG_NEW_FILE);
        put_bytes(&mut missing, &body[..body.len() - 4]);
        let err = VersionEdit::decode(&missing).expect_err("missing field");
        assert_eq!(err.reason, "new file lacks its largest key");
        let mut extra = body.clone();
        put_varint(&mut extra, 77);
        put_varint(&mut extra, 0);
        let mut unknown_nf = Vec::new();
        put_varint(&mut unknown_nf, TAG_NEW_FILE);
        put_bytes(&mut unknown_nf, &extra);
        let err = VersionEdit::decode(&unknown_nf).expect_err("unknown nested tag");
        assert_eq!(err.offset, 2 + body.len(), "{err:?}");

        // A page both dropped and patched.
        let mut both = file(1, 0, None);
        both.meta.pages = Arc::new(PageMap {
            dropped: vec![8],
            patched: vec![PagePatch {
                page: 8,
                file: 2,
                handle: BlockHandle { offset: 0, size: 9 },
                applied: 4,
            }],
        });
        let e = VersionEdit {
            new_files: vec![both.clone()],
            ..Default::default()
        };
        let err = VersionEdit::decode(&e.encode()).expect_err("overlapping page map");
        assert_eq!(err.reason, "a page both dropped and patched");
        Arc::make_mut(&mut both.meta.pages).dropped = vec![16];
        let e = VersionEdit {
            new_files: vec![both],
            ..Default::default()
        };
        assert_eq!(VersionEdit::decode(&e.encode()), Ok(e));

        // Dropped pages not ascending: the error names the byte that breaks the order.
        let mut bad = file(1, 0, None);
        bad.meta.pages = Arc::new(PageMap {
            dropped: vec![5, 9],
            patched: Vec::new(),
        });
        let mut bytes = VersionEdit {
            new_files: vec![bad],
            ..Default::default()
        }
        .encode();
        let list = [NF_DROPPED_PAGES as u8, 3, 2, 5, 4];
        let at = bytes.windows(list.len()).position(|w| w == list).expect("the list") + 4;
        bytes[at] = 0;
        let err = VersionEdit::decode(&bytes).expect_err("not ascending");
        assert_eq!((err.offset, err.reason), (at, "dropped pages not ascending"));

        // The fuzz target's seed with a page map decodes to one.
        let seed = VersionEdit::decode(include_bytes!("../../fuzz/corpus/manifest_edit/seed-patched")).expect("seed");
        let pages = &seed.new_files[0].meta.pages;
        assert_eq!((pages.dropped.len(), pages.patched.len()), (1, 2));

        // Every truncation of a valid edit fails or decodes without panicking; strict
        // prefixes that cut a field must fail.
        for n in 0..good.len() {
            let _ = VersionEdit::decode(&good[..n]);
        }
        assert!(VersionEdit::decode(&good[..good.len() - 1]).is_err());
    }

    fn arb_meta() -> impl Strategy<Value = FileMeta> {
        (
            (any::<u64>(), any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..24),
            proptest::collection::vec(any::<u8>(), 0..24),
            (any::<u64>(), any::<u64>()),
            (any::<u64>(), any::<u64>(), any::<u64>()),
            proptest::option::of(any::<u64>()),
            any::<u64>(),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(
                |(
                    (number, size),
                    smallest,
                    largest,
                    (min_seq, max_seq),
                    (entries, tombstones, range_tombstones),
                    oldest_tombstone_time,
                    raw_bytes,
                    global_seq,
                )| FileMeta {
                    number,
                    size,
                    smallest,
                    largest,
                    min_seq,
                    max_seq,
                    entries,
                    tombstones,
                    range_tombstones,
                    oldest_tombstone_time,
                    raw_bytes,
                    global_seq,
                    // Every third file has dropped and patched pages (tags 16 and 18).
                    pages: Arc::new(if number % 3 == 0 {
                        PageMap {
                            dropped: vec![1, 5],
                            patched: vec![PagePatch {
                                page: 3,
                                file: number / 2,
                                handle: BlockHandle {
                                    offset: size >> 8,
                                    size: size >> 40,
                                },
                                applied: max_seq,
                            }],
                        }
                    } else {
                        PageMap::default()
                    }),
                    deletes_applied: max_seq / 2,
                },
            )
    }

    fn arb_edit() -> impl Strategy<Value = VersionEdit> {
        use proptest::collection::vec;
        let new_file =
            (any::<u32>(), any::<u32>(), any::<u64>(), arb_meta()).prop_map(|(keyspace, level, run, meta)| NewFile {
                keyspace,
                level,
                run,
                meta,
            });
        (
            vec((any::<u32>(), ".{0,12}"), 0..4),
            vec(any::<u32>(), 0..4),
            vec(new_file, 0..4),
            vec((any::<u32>(), any::<u64>()), 0..4),
            (
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u32>()),
            ),
            vec((".{0,12}", proptest::option::of(vec(any::<u8>(), 0..16))), 0..4),
        )
            .prop_map(
                |(
                    new_keyspaces,
                    dropped_keyspaces,
                    new_files,
                    deleted_files,
                    (next_file_number, last_seq, log_number, next_keyspace_id),
                    meta,
                )| VersionEdit {
                    new_keyspaces,
                    dropped_keyspaces,
                    new_files,
                    deleted_files,
                    next_file_number,
                    last_seq,
                    log_number,
                    next_keyspace_id,
                    meta,
                },
            )
    }

    proptest! {
        #[test]
        fn edit_roundtrip(edit in arb_edit()) {
            let bytes = edit.encode();
            prop_assert_eq!(VersionEdit::decode(&bytes), Ok(edit));
        }

        #[test]
        fn decode_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = VersionEdit::decode(&bytes);
        }

        #[test]
        fn decode_mutated_edits_never_panics(edit in arb_edit(), pos in any::<prop::sample::Index>(), byte: u8) {
            let mut bytes = edit.encode();
            if !bytes.is_empty() {
                let i = pos.index(bytes.len());
                bytes[i] = byte;
            }
            let _ = VersionEdit::decode(&bytes);
        }
    }
}
