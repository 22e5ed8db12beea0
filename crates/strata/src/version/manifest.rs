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
//! Each record holds one [`VersionEdit`] in the encoding its module documents
//! (`version::edit`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::RecoveryMode;
use crate::wal::{HEADER_LEN, Reader, Writer};

use super::edit::VersionEdit;

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

/// Whether `names` (a directory's files, `LOCK` aside, with no `CURRENT`) are what a
/// database creation that stopped before writing `CURRENT` leaves: `CURRENT.tmp` and
/// manifests whose every complete record describes an empty database (the creation
/// writes nothing else before `CURRENT`). A manifest holding anything more, damage, or
/// any other file means a database that lost its `CURRENT`, never to be cleared.
pub(crate) fn is_interrupted_creation(fs: &dyn FileSystem, dir: &Path, names: &[String]) -> Result<bool> {
    for name in names {
        if name == CURRENT_TMP_NAME {
            continue;
        }
        if parse_manifest_file_name(name).is_none() {
            return Ok(false);
        }
        let mut reader = Reader::open(fs, &dir.join(name))?;
        loop {
            match reader.next_record() {
                Ok(Some((_, payload))) => match VersionEdit::decode(&payload) {
                    Ok(e) if describes_an_empty_database(&e) => {}
                    _ => return Ok(false),
                },
                Ok(None) => break,
                Err(_) => return Ok(false),
            }
        }
    }
    Ok(true)
}

/// True for an edit a new database's first manifest may hold: the default keyspace
/// and counters, no file, no catalog entry, no seqno.
fn describes_an_empty_database(e: &VersionEdit) -> bool {
    e.new_files.is_empty()
        && e.deleted_files.is_empty()
        && e.dropped_keyspaces.is_empty()
        && e.meta.is_empty()
        && e.new_keyspaces
            .iter()
            .all(|(id, name)| *id == 0 && name == crate::db::DEFAULT_KEYSPACE)
        && e.last_seq.unwrap_or(0) == 0
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
    /// Each edit's record offset in the manifest, by position in `edits`.
    pub offsets: Vec<u64>,
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
    let (read, stopped_at, valid_len) = read_edits(fs, &path, mode)?;
    let (offsets, edits) = read.into_iter().unzip();
    Ok(Some(ManifestRead {
        number,
        path,
        edits,
        offsets,
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
    let (read, stopped_at, valid_len) = read_edits(fs, path, mode)?;
    Ok((read.into_iter().map(|(_, e)| e).collect(), stopped_at, valid_len))
}

/// Edits with their record offsets, where reading stopped short, and the valid length
/// ([`read_manifest_with`]'s result).
type EditsRead = (Vec<(u64, VersionEdit)>, Option<u64>, u64);

/// [`read_manifest_with`], each edit with its record's offset.
fn read_edits(fs: &dyn FileSystem, path: &Path, mode: RecoveryMode) -> Result<EditsRead> {
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
        edits.push((offset, edit));
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
    use super::*;
    use crate::fs::RealFs;
    use crate::version::edit::tests::{file, snapshot};

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

    /// A manifest from `write_manifest` in a new directory, with its path and bytes.
    fn written_manifest() -> (tempfile::TempDir, Vec<u64>, PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = write_manifest(dir.path());
        let path = dir.path().join("MANIFEST-000007");
        let bytes = RealFs.read_all(&path).expect("read");
        (dir, offsets, path, bytes)
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
        let (dir, offsets, path, bytes) = written_manifest();
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
        let (dir, offsets, path, bytes) = written_manifest();
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
        let (dir, _, path, bytes) = written_manifest();
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
}
