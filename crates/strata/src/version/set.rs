//! The version set: the current [`Version`], the manifest writer, and the counters the
//! manifest persists (next file number, last durable seqno, oldest needed WAL).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::manifest::{ManifestRead, ManifestWriter, read_current_with};
use super::{FileContext, Version, VersionEdit};
use crate::error::{Error, Result};
use crate::key::SeqNo;

/// Owns the current version and the manifest. All changes go through
/// [`VersionSet::log_and_apply`], which callers serialize with a mutex.
pub struct VersionSet {
    ctx: FileContext,
    current: Arc<Version>,
    manifest: Option<ManifestWriter>,
    /// Next unused file number (SSTables, WALs and manifests share the sequence); shared
    /// so that background jobs can take numbers without the version-set lock.
    pub next_file_number: Arc<AtomicU64>,
    /// Highest seqno known durable in SSTables or WAL.
    pub last_seq: SeqNo,
    /// Oldest WAL still needed.
    pub log_number: u64,
    /// Next unused keyspace id.
    pub next_keyspace_id: u32,
    /// Opened read-only: every change is refused and no manifest is written.
    read_only: bool,
    /// A fresh manifest is started once the live one grows past this
    /// (`Options::max_manifest_file_size`).
    pub max_manifest_bytes: u64,
}

impl VersionSet {
    /// Recovers the version set from the manifest named by CURRENT, or returns `None`
    /// when the directory has no CURRENT file.
    ///
    /// Also returns how the manifest read ended (a torn tail is dropped under the
    /// default mode; the caller checks the recovered state against the files on disk).
    pub(crate) fn recover(
        ctx: FileContext,
        mode: crate::RecoveryMode,
        read_only: bool,
    ) -> Result<Option<(VersionSet, ManifestRead)>> {
        let Some(mut read) = read_current_with(ctx.fs.as_ref(), &ctx.dir, mode)? else {
            return Ok(None);
        };
        let number = read.number;
        let edits = std::mem::take(&mut read.edits);
        let offsets = std::mem::take(&mut read.offsets);
        let mut vs = VersionSet {
            ctx,
            current: Arc::new(Version::default()),
            manifest: None,
            next_file_number: Arc::new(AtomicU64::new(number + 1)),
            last_seq: 0,
            log_number: 0,
            next_keyspace_id: 0,
            read_only,
            max_manifest_bytes: crate::options::DEFAULT_MAX_MANIFEST_FILE_SIZE,
        };
        let manifest_path = vs.ctx.dir.join(format!("MANIFEST-{number:06}"));
        for (i, e) in edits.iter().enumerate() {
            let (v, removed) = vs.current.apply(e, &vs.ctx).map_err(|reason| {
                let at = offsets.get(i).copied().unwrap_or(0);
                Error::corruption(&manifest_path, at, format!("edit {i} does not apply: {reason}"))
            })?;
            vs.current = Arc::new(v);
            super::mark_obsolete(&removed);
            vs.absorb_counters(e);
        }
        for f in vs.current.live_files() {
            vs.next_file_number.fetch_max(f.saturating_add(1), Ordering::SeqCst);
        }
        Ok(Some((vs, read)))
    }

    /// A version set for a brand-new database (no manifest written yet).
    pub(crate) fn new_empty(ctx: FileContext) -> VersionSet {
        VersionSet {
            ctx,
            current: Arc::new(Version::default()),
            manifest: None,
            next_file_number: Arc::new(AtomicU64::new(1)),
            last_seq: 0,
            log_number: 0,
            next_keyspace_id: 0,
            read_only: false,
            max_manifest_bytes: crate::options::DEFAULT_MAX_MANIFEST_FILE_SIZE,
        }
    }

    fn absorb_counters(&mut self, e: &VersionEdit) {
        if let Some(n) = e.next_file_number {
            self.next_file_number.fetch_max(n, Ordering::SeqCst);
        }
        if let Some(s) = e.last_seq {
            self.last_seq = self.last_seq.max(s);
        }
        if let Some(l) = e.log_number {
            self.log_number = self.log_number.max(l);
        }
        if let Some(k) = e.next_keyspace_id {
            self.next_keyspace_id = self.next_keyspace_id.max(k);
        }
        for (id, _) in &e.new_keyspaces {
            self.next_keyspace_id = self.next_keyspace_id.max(id + 1);
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Reserves a new file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }

    /// Starts a fresh manifest holding a snapshot of the current state.
    pub(crate) fn write_new_manifest(&mut self) -> Result<()> {
        self.refuse_if_read_only()?;
        let number = self.new_file_number();
        let mut snap = self.current.snapshot_edit();
        self.fill_counters(&mut snap);
        let old = self.manifest.as_ref().map(|m| m.number());
        self.manifest = Some(ManifestWriter::create(
            self.ctx.fs.clone(),
            &self.ctx.dir,
            number,
            &snap,
        )?);
        if let Some(old) = old {
            let _ = self.ctx.fs.remove(&self.ctx.dir.join(format!("MANIFEST-{old:06}")));
        }
        Ok(())
    }

    fn fill_counters(&self, e: &mut VersionEdit) {
        e.next_file_number = Some(self.next_file_number.load(Ordering::SeqCst));
        e.last_seq = Some(self.last_seq);
        e.log_number = Some(self.log_number);
        e.next_keyspace_id = Some(self.next_keyspace_id);
    }

    /// Applies `edit` and starts a fresh manifest holding the result: one manifest
    /// written, where an append then a snapshot would write two. The old manifest stays
    /// on disk for the caller to remove once `CURRENT` names the new one.
    pub(crate) fn apply_in_new_manifest(&mut self, edit: VersionEdit) -> Result<()> {
        self.manifest = None;
        self.log_and_apply(edit).map(|_| ())
    }

    /// Makes `edit` durable in the manifest, then installs the version it produces.
    /// On error nothing is installed.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        self.refuse_if_read_only()?;
        let saved = (self.last_seq, self.log_number, self.next_keyspace_id);
        let r = self.log_and_apply_inner(&mut edit);
        if r.is_err() {
            // The edit did not happen: its counters (the flushed seqno above all) must
            // not leak into a later manifest, or recovery would skip unflushed WAL data.
            (self.last_seq, self.log_number, self.next_keyspace_id) = saved;
            if self.manifest.is_none() {
                // Rewrite from the state before the edit (see the log failure below).
                if let Err(e2) = self.write_new_manifest() {
                    return Err(Error::Background(format!(
                        "{}; then rewriting the manifest failed: {e2}",
                        r.err().map(|e| e.to_string()).unwrap_or_default()
                    )));
                }
            }
        }
        r
    }

    fn log_and_apply_inner(&mut self, edit: &mut VersionEdit) -> Result<Arc<Version>> {
        self.absorb_counters(edit);
        self.fill_counters(edit);
        let (next, removed) = self
            .current
            .apply(edit, &self.ctx)
            .map_err(|r| Error::InvalidArgument(format!("version edit does not apply: {r}")))?;
        if self
            .manifest
            .as_ref()
            .is_none_or(|m| m.size() > self.max_manifest_bytes)
        {
            // The snapshot must include this edit, so install first, then roll.
            let prev = std::mem::replace(&mut self.current, Arc::new(next));
            if let Err(e) = self.write_new_manifest() {
                self.current = prev;
                // CURRENT may name the new manifest, which holds the edit (a failure
                // after the rename): appending to the old one would be lost at the next
                // open. The caller starts a fresh one from the state before the edit.
                self.manifest = None;
                return Err(e);
            }
        } else {
            let m = self.manifest.as_mut().ok_or(Error::Closed)?;
            if let Err(e) = m.log(edit) {
                // The edit may or may not have reached the disk. The caller starts a
                // fresh manifest from the state before it right away, so a half-written
                // (or written but unacknowledged) edit can never come back at the next open.
                self.manifest = None;
                return Err(e);
            }
            self.current = Arc::new(next);
        }
        super::mark_obsolete(&removed);
        Ok(self.current.clone())
    }

    fn refuse_if_read_only(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::InvalidArgument("the database was opened read-only".into()));
        }
        Ok(())
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.ctx.dir
    }

    /// The manifest's file number, if one is open.
    pub fn manifest_number(&self) -> Option<u64> {
        self.manifest.as_ref().map(|m| m.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::edit::tests::snapshot;

    /// An edit that does not apply to the state before it is damage named with the
    /// manifest and the edit's own record offset.
    #[test]
    fn an_edit_that_does_not_apply_is_named_by_its_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn crate::fs::FileSystem> = Arc::new(crate::fs::RealFs);
        let mut m = ManifestWriter::create(fs, dir.path(), 7, &snapshot()).expect("create");
        m.log(&VersionEdit {
            last_seq: Some(600),
            ..Default::default()
        })
        .expect("log");
        let at = m.size();
        // File 99 was never added.
        m.log(&VersionEdit {
            deleted_files: vec![(0, 99)],
            ..Default::default()
        })
        .expect("log");
        drop(m);
        let e = VersionSet::recover(FileContext::for_tests(dir.path()), crate::RecoveryMode::default(), true)
            .map(|_| ())
            .expect_err("refused");
        match &e {
            Error::Corruption { file, offset, reason } => {
                assert!(file.ends_with("MANIFEST-000007"), "{e}");
                assert_eq!(*offset, at, "{e}");
                assert!(reason.contains("edit 2 does not apply"), "{e}");
            }
            _ => panic!("{e}"),
        }
    }
}
