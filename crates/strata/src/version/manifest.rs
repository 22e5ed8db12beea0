//! The manifest log: the durable history of [`VersionEdit`]s, and the `CURRENT` pointer.
//!
//! Files in the database directory:
//! - `MANIFEST-<number:06>`: records framed exactly like the WAL (see [`crate::wal`]),
//!   each holding one encoded [`VersionEdit`]. The first record is a full-state snapshot;
//!   every later record is a delta. An edit is durable once [`ManifestWriter::log`]
//!   returns.
//! - `CURRENT`: the name of the live manifest followed by `"\n"` (e.g.
//!   `MANIFEST-000007\n`), always replaced atomically (`CURRENT.tmp`, sync, rename, sync
//!   the directory), so it names either the old or the new manifest, never neither.
//!
//! Invariants: `CURRENT` only ever names a manifest whose snapshot record is synced, so
//! a manifest named by `CURRENT` with no complete record is corruption. A torn final
//! record is tolerated on reading (that edit was never acknowledged), unless the
//! [`RecoveryMode`] says otherwise; the state it leaves is then checked against the
//! files on disk before anything is deleted (`db::open`, `docs/design/recovery.md`). A manifest that
//! was read with a torn tail is never appended to: the caller rolls to a new manifest
//! with [`ManifestWriter::create`].
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
//! tags, each at most once; all required except 13:
//! 1 keyspace (u32), 2 level (u32), 3 run, 4 number, 5 size, 6 smallest (bytes),
//! 7 largest (bytes), 8 min_seq, 9 max_seq, 10 entries, 11 tombstones,
//! 12 range_tombstones, 13 oldest_tombstone_time (absent = `None`), 14 raw_bytes,
//! 15 global_seq (absent = `None`; an ingested file, read with this seqno),
//! 16 dropped pages (optional: `varint count ++ varint offset delta*`, ascending).
//!
//! The codec checks syntax only; whether an edit makes sense (seqno ranges, known
//! keyspaces) is checked when it is applied to a version.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::{DecodeError, Decoder, put_bytes, put_varint};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::RecoveryMode;
use crate::wal::{HEADER_LEN, Reader, Writer};

use super::edit::{FileMeta, NewFile, VersionEdit};

/// Name of the file that points at the live manifest.
pub const CURRENT_FILE_NAME: &str = "CURRENT";

const CURRENT_TMP_NAME: &str = "CURRENT.tmp";
const MANIFEST_PREFIX: &str = "MANIFEST-";

/// The file name of manifest number `number`, e.g. `MANIFEST-000007`.
pub fn manifest_file_name(number: u64) -> String {
    format!("{MANIFEST_PREFIX}{number:06}")
}

/// The number of a name produced by [`manifest_file_name`], or `None` for any other
/// name (non-canonical spellings such as `MANIFEST-7` included).
pub fn parse_manifest_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(MANIFEST_PREFIX)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.parse::<u64>().ok()?;
    (manifest_file_name(n) == name).then_some(n)
}

// ---------------------------------------------------------------------------------
// VersionEdit codec
// ---------------------------------------------------------------------------------

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
    if !m.dropped_pages.is_empty() {
        put_varint(out, NF_DROPPED_PAGES);
        let mut b = Vec::new();
        put_varint(&mut b, m.dropped_pages.len() as u64);
        let mut prev = 0;
        for &o in &m.dropped_pages {
            put_varint(&mut b, o - prev);
            prev = o;
        }
        put_bytes(out, &b);
    }
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
    if !d.is_empty() {
        return Err(DecodeError {
            offset: d.position(),
            reason: "trailing bytes after the dropped pages",
        });
    }
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
            NF_DROPPED_PAGES => {
                let b = d.length_prefixed()?;
                let pages = decode_dropped_pages(b).map_err(|e| DecodeError {
                    offset: at + e.offset,
                    reason: e.reason,
                })?;
                set_once(&mut dropped, pages, at)?
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
            dropped_pages: dropped.unwrap_or_default(),
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

/// Appends edits to the live manifest.
///
/// After any I/O error the writer refuses further edits (the file may end in a partial
/// record); the caller rolls to a new manifest with [`ManifestWriter::create`].
#[derive(Debug)]
pub struct ManifestWriter {
    number: u64,
    path: PathBuf,
    log: Writer,
}

impl ManifestWriter {
    /// Writes `MANIFEST-<number>` in `dir` starting with `snapshot` (the full state),
    /// syncs it, then atomically points `CURRENT` at it and syncs the directory.
    ///
    /// On success the new manifest is live and the previous one may be deleted. On
    /// error `CURRENT` may name either manifest; the caller must not assume the old one
    /// is still live without re-reading `CURRENT`. Refuses (`AlreadyExists`) to
    /// overwrite the manifest `CURRENT` names; any other file of that name is a leftover
    /// of an interrupted roll and is replaced.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, number: u64, snapshot: &VersionEdit) -> Result<ManifestWriter> {
        let name = manifest_file_name(number);
        let path = dir.join(&name);
        let current = dir.join(CURRENT_FILE_NAME);
        if fs.exists(&current) && fs.read_all(&current)? == format!("{name}\n").as_bytes() {
            return Err(Error::AlreadyExists(format!("{} is the live manifest", path.display())));
        }
        let mut log = Writer::new(fs.create(&path)?);
        log.add_record(&snapshot.encode())?;
        log.sync()?;
        // The manifest's directory entry must be durable before CURRENT can name it.
        fs.sync_dir(dir)?;
        set_current(fs.as_ref(), dir, &name)?;
        Ok(ManifestWriter { number, path, log })
    }

    /// Appends `edit` and syncs; the edit is durable when this returns `Ok`.
    pub fn log(&mut self, edit: &VersionEdit) -> Result<()> {
        self.log.add_record(&edit.encode())?;
        self.log.sync()
    }

    /// Bytes in the manifest so far (decide when to roll to a new one).
    pub fn size(&self) -> u64 {
        self.log.len()
    }

    /// The manifest's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The manifest's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Atomically replaces `CURRENT` with `name\n`.
fn set_current(fs: &dyn FileSystem, dir: &Path, name: &str) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP_NAME);
    let mut f = fs.create(&tmp)?;
    f.append(format!("{name}\n").as_bytes())?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &dir.join(CURRENT_FILE_NAME))?;
    fs.sync_dir(dir)
}

/// Reads `CURRENT` in `dir` and every edit of the manifest it names, in order, with
/// the default [`RecoveryMode`].
///
/// Returns `None` when there is no `CURRENT` (a fresh directory). Errors: `CURRENT`
/// not holding exactly a canonical manifest name and `"\n"` is `Corruption` naming
/// `CURRENT`; damage in the manifest (see [`read_manifest`]) is `Corruption` naming the
/// manifest and the record's offset.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<Option<(u64, Vec<VersionEdit>)>> {
    Ok(read_current_with(fs, dir, RecoveryMode::default())?.map(|m| (m.number, m.edits)))
}

/// What reading the live manifest found.
#[derive(Debug)]
pub struct ManifestRead {
    /// The manifest's number.
    pub number: u64,
    /// Its path.
    pub path: PathBuf,
    /// The edits read, in order.
    pub edits: Vec<VersionEdit>,
    /// Offset of a torn tail (or, in the salvaging modes, of damage) where reading
    /// stopped; `None` when the manifest read to a clean end.
    pub stopped_at: Option<u64>,
    /// Offset just past the last edit read.
    pub valid_len: u64,
}

/// [`read_current`] under `mode`, reporting where the manifest ended.
pub fn read_current_with(fs: &dyn FileSystem, dir: &Path, mode: RecoveryMode) -> Result<Option<ManifestRead>> {
    let current = dir.join(CURRENT_FILE_NAME);
    if !fs.exists(&current) {
        return Ok(None);
    }
    let content = fs.read_all(&current)?;
    let number = std::str::from_utf8(&content)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(parse_manifest_file_name)
        .ok_or_else(|| {
            let shown: String = String::from_utf8_lossy(&content[..content.len().min(64)])
                .escape_debug()
                .collect();
            Error::corruption(
                &current,
                0,
                format!("CURRENT does not hold a manifest name and newline: \"{shown}\""),
            )
        })?;
    let path = dir.join(manifest_file_name(number));
    if !fs.exists(&path) {
        return Err(Error::corruption(
            &current,
            0,
            format!("CURRENT names {}, which is missing", manifest_file_name(number)),
        ));
    }
    let (edits, stopped_at, valid_len) = read_manifest_with(fs, &path, mode)?;
    Ok(Some(ManifestRead {
        number,
        path,
        edits,
        stopped_at,
        valid_len,
    }))
}

/// Reads every edit of the manifest at `path`, in order, with the default
/// [`RecoveryMode`].
///
/// A torn final record is dropped (it was never acknowledged). A damaged record before
/// the end, an undecodable edit, or a manifest without one complete record (its
/// snapshot) is `Corruption` naming `path` and the record's offset.
pub fn read_manifest(fs: &dyn FileSystem, path: &Path) -> Result<Vec<VersionEdit>> {
    Ok(read_manifest_with(fs, path, RecoveryMode::default())?.0)
}

/// [`read_manifest`] under `mode`: returns the edits, the offset where reading stopped
/// short of the end (a torn tail, or damage in the salvaging modes), and the offset
/// past the last edit read.
///
/// `AbsoluteConsistency` makes a torn tail an error too; `PointInTime` and
/// `SkipAnyCorruptedRecords` keep the edits before the first damage (skipping an edit
/// could resurrect deleted files, so both stop there). A manifest with no edit is
/// always an error.
pub fn read_manifest_with(
    fs: &dyn FileSystem,
    path: &Path,
    mode: RecoveryMode,
) -> Result<(Vec<VersionEdit>, Option<u64>, u64)> {
    let salvage = matches!(mode, RecoveryMode::PointInTime | RecoveryMode::SkipAnyCorruptedRecords);
    let mut reader = Reader::open(fs, path)?;
    let mut edits = Vec::new();
    let mut stopped_at = None;
    loop {
        let (offset, payload) = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(Error::Corruption { offset, .. }) if salvage && !edits.is_empty() => {
                stopped_at = Some(offset);
                break;
            }
            Err(e) => return Err(e),
        };
        let edit = match VersionEdit::decode(&payload) {
            Ok(e) => e,
            Err(_) if salvage && !edits.is_empty() => {
                stopped_at = Some(offset);
                break;
            }
            Err(e) => {
                return Err(Error::corruption(
                    path,
                    offset,
                    format!(
                        "undecodable version edit: {} at byte {} of the record",
                        e.reason,
                        HEADER_LEN + e.offset
                    ),
                ));
            }
        };
        edits.push(edit);
    }
    let valid_len = reader.valid_len();
    if stopped_at.is_none()
        && let Some(at) = reader.torn_tail_at()
    {
        if mode == RecoveryMode::AbsoluteConsistency {
            return Err(Error::corruption(
                path,
                at,
                "manifest ends in a torn record (recovery mode AbsoluteConsistency)",
            ));
        }
        stopped_at = Some(at);
    }
    if edits.is_empty() {
        return Err(Error::corruption(
            path,
            0,
            "manifest holds no complete record; its snapshot is missing",
        ));
    }
    Ok((edits, stopped_at, valid_len))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fs::RealFs;

    fn file(number: u64, keyspace: u32, oldest: Option<u64>) -> NewFile {
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
                dropped_pages: Vec::new(),
            },
        }
    }

    fn snapshot() -> VersionEdit {
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

    fn deltas() -> Vec<VersionEdit> {
        vec![
            VersionEdit {
                new_files: vec![file(11, 0, None)],
                deleted_files: vec![(0, 3)],
                last_seq: Some(600),
                ..Default::default()
            },
            VersionEdit {
                dropped_keyspaces: vec![1],
                meta: vec![("schema".into(), None)],
                ..Default::default()
            },
            VersionEdit {
                log_number: Some(12),
                next_file_number: Some(13),
                ..Default::default()
            },
        ]
    }

    fn fs() -> Arc<dyn FileSystem> {
        Arc::new(RealFs)
    }

    /// Creates manifest 7 with the snapshot and deltas; returns the record offsets.
    fn write_manifest(dir: &Path) -> Vec<u64> {
        let mut m = ManifestWriter::create(fs(), dir, 7, &snapshot()).expect("create");
        let mut offsets = vec![0];
        for e in deltas() {
            offsets.push(m.size());
            m.log(&e).expect("log");
        }
        offsets
    }

    fn rewrite(path: &Path, bytes: &[u8]) {
        let mut f = RealFs.create(path).expect("create");
        f.append(bytes).expect("append");
        f.sync().expect("sync");
    }

    fn expect_corruption(r: Result<Option<(u64, Vec<VersionEdit>)>>, file: &Path) -> u64 {
        match r {
            Err(Error::Corruption { file: f, offset, .. }) => {
                assert_eq!(f, file);
                offset
            }
            other => panic!("expected corruption in {}, got {other:?}", file.display()),
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(manifest_file_name(7), "MANIFEST-000007");
        assert_eq!(parse_manifest_file_name("MANIFEST-000007"), Some(7));
        assert_eq!(parse_manifest_file_name("MANIFEST-1234567"), Some(1_234_567));
        for bad in [
            "MANIFEST-7",
            "MANIFEST-",
            "MANIFEST-00000x",
            "manifest-000007",
            "MANIFEST-+00007",
        ] {
            assert_eq!(parse_manifest_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn create_log_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = fs();
        let mut m = ManifestWriter::create(fs.clone(), dir.path(), 7, &snapshot()).expect("create");
        assert_eq!(m.number(), 7);
        assert_eq!(m.path(), dir.path().join("MANIFEST-000007"));
        let size0 = m.size();
        assert!(size0 > 0);
        for e in deltas() {
            m.log(&e).expect("log");
        }
        assert!(m.size() > size0);
        assert_eq!(
            fs.read_all(&dir.path().join(CURRENT_FILE_NAME)).expect("CURRENT"),
            b"MANIFEST-000007\n"
        );
        assert!(!fs.exists(&dir.path().join(CURRENT_TMP_NAME)));

        let (number, edits) = read_current(fs.as_ref(), dir.path()).expect("read").expect("some");
        assert_eq!(number, 7);
        let mut want = vec![snapshot()];
        want.extend(deltas());
        assert_eq!(edits, want);
    }

    #[test]
    fn rolling_to_a_new_manifest_switches_current() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_manifest(dir.path());
        let snap = VersionEdit {
            last_seq: Some(1),
            ..Default::default()
        };
        let mut m = ManifestWriter::create(fs(), dir.path(), 9, &snap).expect("roll");
        let delta = VersionEdit {
            log_number: Some(20),
            ..Default::default()
        };
        m.log(&delta).expect("log");
        let (number, edits) = read_current(&RealFs, dir.path()).expect("read").expect("some");
        assert_eq!((number, edits), (9, vec![snap, delta]));
        // The old manifest is untouched and still readable.
        assert_eq!(
            read_manifest(&RealFs, &dir.path().join("MANIFEST-000007"))
                .expect("old")
                .len(),
            4
        );
    }

    #[test]
    fn create_refuses_to_overwrite_the_live_manifest() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_manifest(dir.path());
        let r = ManifestWriter::create(fs(), dir.path(), 7, &VersionEdit::default());
        assert!(matches!(r, Err(Error::AlreadyExists(_))), "{r:?}");
        let (_, edits) = read_current(&RealFs, dir.path()).expect("read").expect("some");
        assert_eq!(edits.len(), 4, "live manifest must be intact");
    }

    #[test]
    fn missing_current_is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read_current(&RealFs, dir.path()).expect("ok").is_none());
        // A leftover CURRENT.tmp from a crashed first start does not count.
        rewrite(&dir.path().join(CURRENT_TMP_NAME), b"MANIFEST-000001\n");
        assert!(read_current(&RealFs, dir.path()).expect("ok").is_none());
    }

    #[test]
    fn torn_last_record_is_tolerated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = write_manifest(dir.path());
        let path = dir.path().join("MANIFEST-000007");
        let bytes = RealFs.read_all(&path).expect("read");
        let last = *offsets.last().expect("offsets") as usize;
        for cut in [last + 1, last + HEADER_LEN, bytes.len() - 1] {
            rewrite(&path, &bytes[..cut]);
            let (_, edits) = read_current(&RealFs, dir.path())
                .expect("torn tail is fine")
                .expect("some");
            assert_eq!(edits.len(), 3, "cut {cut}");
            assert_eq!(edits[0], snapshot());
        }
        // A flipped byte in the last record is a torn tail too.
        let mut bad = bytes.clone();
        bad[last + HEADER_LEN] ^= 0x10;
        rewrite(&path, &bad);
        let (_, edits) = read_current(&RealFs, dir.path()).expect("ok").expect("some");
        assert_eq!(edits.len(), 3);
    }

    #[test]
    fn flipped_byte_in_middle_record_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = write_manifest(dir.path());
        let path = dir.path().join("MANIFEST-000007");
        let bytes = RealFs.read_all(&path).expect("read");
        for rec in [0, 1, 2] {
            let mut bad = bytes.clone();
            bad[offsets[rec] as usize + HEADER_LEN + 1] ^= 0x04;
            rewrite(&path, &bad);
            let at = expect_corruption(read_current(&RealFs, dir.path()), &path);
            assert_eq!(at, offsets[rec], "record {rec}");
        }
    }

    #[test]
    fn undecodable_edit_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_manifest(dir.path());
        let path = dir.path().join("MANIFEST-000007");
        let mut w = Writer::new(RealFs.open_append(&path).expect("append"));
        // A well-framed record holding tag 99, unknown to this version.
        let at = w.add_record(&[99, 0]).expect("add");
        w.sync().expect("sync");
        drop(w);
        assert_eq!(expect_corruption(read_current(&RealFs, dir.path()), &path), at);
    }

    #[test]
    fn empty_manifest_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_manifest(dir.path());
        let path = dir.path().join("MANIFEST-000007");
        let bytes = RealFs.read_all(&path).expect("read");
        for len in [3, 0] {
            rewrite(&path, &bytes[..len]);
            expect_corruption(read_current(&RealFs, dir.path()), &path);
        }
    }

    #[test]
    fn garbage_current_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_manifest(dir.path());
        let current = dir.path().join(CURRENT_FILE_NAME);
        let bad: [&[u8]; 9] = [
            b"",
            b"\n",
            b"garbage",
            b"MANIFEST-000007",
            b"MANIFEST-000007\n\n",
            b"MANIFEST-7\n",
            b"../MANIFEST-000007\n",
            b"MANIFEST-00000\xff\n",
            b"MANIFEST-000007\r\n",
        ];
        for content in bad {
            rewrite(&current, content);
            expect_corruption(read_current(&RealFs, dir.path()), &current);
        }
        // The good content still works, so the loop above tested CURRENT alone.
        rewrite(&current, b"MANIFEST-000007\n");
        assert!(read_current(&RealFs, dir.path()).expect("ok").is_some());
    }

    #[test]
    fn current_naming_a_missing_manifest_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        rewrite(&dir.path().join(CURRENT_FILE_NAME), b"MANIFEST-000003\n");
        assert!(read_current(&RealFs, dir.path()).is_err());
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
                    dropped_pages: Vec::new(),
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
