//! Opening a database: lock the directory, recover the version set from the manifest,
//! replay the WAL into level 0, sweep files nothing references, and start a new WAL.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::flush_memtable;
use super::{BgState, DEFAULT_KEYSPACE, DbInner, SuperVersion, WalState};
use crate::batch::WriteBatch;
use crate::cache::{BlockCache, TableCache};
use crate::compaction::{CompactionPicker, DeferredRegistry, JobContext};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::sstable::TableOptions;
use crate::version::set::VersionSet;
use crate::version::{FileContext, ObsoleteFiles, VersionEdit};
use crate::wal;

const LOCK_FILE: &str = "LOCK";

pub(crate) fn open_inner(path: &Path, mut opts: crate::Options) -> Result<DbInner> {
    opts.validate()?;
    if opts.direct_reads {
        opts.fs = opts.fs.with_direct_reads().ok_or_else(|| {
            Error::InvalidArgument("direct_reads: the file system does not support direct I/O".into())
        })?;
    }
    let fs = opts.fs.clone();
    let dir = path.to_path_buf();
    if dir.exists() && !dir.is_dir() {
        return Err(Error::NotADatabase {
            path: dir,
            reason: "it is a file, not a directory".into(),
        });
    }
    if !fs.exists(&dir) {
        if !opts.create_if_missing {
            return Err(Error::NotADatabase {
                path: dir,
                reason: "directory does not exist (create_if_missing is off)".into(),
            });
        }
        fs.create_dir_all(&dir)?;
    }
    let has_current = fs.exists(&dir.join("CURRENT"));
    if !has_current {
        let foreign: Vec<String> = fs.list(&dir)?.into_iter().filter(|n| n != LOCK_FILE).collect();
        if !foreign.is_empty() {
            return Err(Error::NotADatabase {
                path: dir,
                reason: format!(
                    "directory is not empty and has no CURRENT file (found {:?})",
                    &foreign[..foreign.len().min(3)]
                ),
            });
        }
        if !opts.create_if_missing {
            return Err(Error::NotADatabase {
                path: dir,
                reason: "no database here (create_if_missing is off)".into(),
            });
        }
    } else if opts.error_if_exists {
        return Err(Error::AlreadyExists(format!("database at {}", dir.display())));
    }
    let lock_path = dir.join(LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        return Err(Error::InvalidArgument(format!(
            "database {} is already open (LOCK is held by another process or handle)",
            dir.display()
        )));
    }

    let block_cache = (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
    let table_cache = Arc::new(TableCache::new(
        fs.clone(),
        dir.clone(),
        opts.max_open_files,
        block_cache.clone(),
    ));
    let retired = Arc::new(ObsoleteFiles::new(fs.clone()));
    let ctx = || FileContext {
        dir: dir.clone(),
        fs: fs.clone(),
        retired: retired.clone(),
        table_cache: table_cache.clone(),
    };
    let mut vs = match VersionSet::recover(ctx())? {
        Some(vs) => vs,
        None => {
            let mut vs = VersionSet::new_empty(ctx());
            vs.log_and_apply(VersionEdit {
                new_keyspaces: vec![(0, DEFAULT_KEYSPACE.to_string())],
                next_keyspace_id: Some(1),
                ..Default::default()
            })?;
            vs
        }
    };

    let table_opts = TableOptions {
        block_size: opts.block_size,
        bloom_fpr: opts.bloom_fpr,
        compression: opts.compression,
        ..TableOptions::default()
    };
    let job_ctx = JobContext {
        fs: fs.clone(),
        dir: dir.clone(),
        table_cache: table_cache.clone(),
        table_opts,
        file_numbers: vs.next_file_number.clone(),
        target_file_size: opts.target_file_size,
        clock: opts.clock.clone(),
    };

    sweep_unreferenced(&vs, fs.as_ref(), &dir)?;
    let table_states = Mutex::new(std::collections::HashMap::new());
    let catalog = crate::table::runtime::Catalog::build(&vs.current(), &table_states)?;
    let registry = catalog.registry.clone();
    let (last_seq, torn) = replay_wal(&mut vs, &job_ctx, &opts, &dir, &registry)?;

    // New WAL, then a fresh manifest whose log number forgets every replayed log.
    let wal_number = vs.new_file_number();
    let wal_path = dir.join(wal::log_file_name(wal_number));
    let writer = wal::Writer::new(fs.create(&wal_path)?);
    fs.sync_dir(&dir)?;
    vs.log_number = wal_number;
    vs.last_seq = vs.last_seq.max(last_seq);
    vs.write_new_manifest()?;
    let manifest = vs.manifest_number().map(|n| format!("MANIFEST-{n:06}"));
    for n in fs.list(&dir)? {
        let old_wal = n
            .strip_suffix(".wal")
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|num| num < wal_number);
        let old_manifest = n.starts_with("MANIFEST-") && Some(&n) != manifest.as_ref();
        let is_torn = old_wal
            && n.strip_suffix(".wal")
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|num| torn.contains(&num));
        if is_torn {
            // Its tail did not checksum: most likely a torn write, but keep the bytes
            // for an operator rather than destroy what might be a damaged record.
            fs.rename(&dir.join(&n), &dir.join(format!("{n}.torn")))?;
        } else if old_wal || old_manifest {
            fs.remove(&dir.join(&n))?;
        }
    }

    let version = vs.current();
    let counters = super::stats::Counters::default();
    if let Some(saved) = version.meta.get(super::stats::STATS_META) {
        counters.restore(saved);
    }
    let now = opts.clock.now_micros();
    let last = vs.last_seq;
    Ok(DbInner {
        dir,
        table_cache,
        retired,
        block_cache,
        versions: Mutex::new(vs),
        sv: RwLock::new(Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new(wal_number, now)),
            imm: Vec::new(),
            version,
        })),
        wal: Mutex::new(Some(WalState { writer })),
        queue: Mutex::new(Default::default()),
        queue_cv: Condvar::new(),
        last_seq: AtomicU64::new(last),
        visible_seq: AtomicU64::new(last),
        snapshots: Mutex::new(BTreeMap::new()),
        bg: Mutex::new(BgState {
            busy: HashSet::new(),
            paused: HashSet::new(),
            flushing: false,
            compacting: 0,
            manual: 0,
            error: None,
            shutdown: false,
        }),
        bg_cv: Condvar::new(),
        picker: Mutex::new(CompactionPicker::default()),
        counters,
        job_ctx,
        catalog: RwLock::new(Arc::new(catalog)),
        table_states,
        ddl: RwLock::new(()),
        deferred_emitted: Mutex::new(BTreeMap::new()),
        purged: Default::default(),
        closed: AtomicBool::new(false),
        purge: crate::table::purge::PurgeQueue::new(),
        lock: Mutex::new(Some(lock)),
        opts,
    })
}

/// Removes SSTables no version lists (outputs of a job that crashed before its edit)
/// and temporary files, after checking that every file the manifest lists is there:
/// a manifest that lost its last edit must not lead to deleting that edit's outputs.
fn sweep_unreferenced(vs: &VersionSet, fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
    let live: HashSet<u64> = vs.current().live_files().into_iter().collect();
    let present: HashSet<String> = fs.list(dir)?.into_iter().collect();
    for n in &live {
        let name = crate::sstable::table_file_name(*n);
        if !present.contains(&name) {
            return Err(Error::corruption(
                dir.join(&name),
                0,
                "the manifest lists this SSTable but it is missing; nothing was changed",
            ));
        }
    }
    for n in fs.list(dir)? {
        let orphan_sst = n
            .strip_suffix(".sst")
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|num| !live.contains(&num));
        if orphan_sst || n.ends_with(".tmp") {
            fs.remove(&dir.join(&n))?;
        }
    }
    Ok(())
}

/// Replays WAL files not yet flushed into level-0 runs; returns the last seqno seen.
fn replay_wal(
    vs: &mut VersionSet,
    ctx: &JobContext,
    opts: &crate::Options,
    dir: &Path,
    registry: &DeferredRegistry,
) -> Result<(u64, Vec<u64>)> {
    let fs = opts.fs.clone();
    let mut torn = Vec::new();
    let mut logs: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| n.strip_suffix(".wal").and_then(|s| s.parse::<u64>().ok()))
        .filter(|n| *n >= vs.log_number)
        .collect();
    logs.sort_unstable();
    let flushed_seq = vs.last_seq;
    let mut last_seq = flushed_seq;
    let mut mem = Arc::new(MemTable::new(0, opts.clock.now_micros()));
    let newest = logs.last().copied();
    for number in logs {
        let path = dir.join(wal::log_file_name(number));
        let mut reader = wal::Reader::open(fs.as_ref(), &path)?;
        while let Some((offset, payload)) = reader.next_record()? {
            let (base, batch) = WriteBatch::decode_record(&payload)
                .map_err(|reason| Error::corruption(&path, offset, format!("bad batch in WAL record: {reason}")))?;
            let end = base + batch.seq_count().saturating_sub(1);
            if end <= flushed_seq {
                continue; // already in SSTables
            }
            let version = vs.current();
            // Operations on keyspaces dropped since are skipped.
            super::write::insert_batch(&mem, &batch, base, |ks| version.keyspace(ks).is_some());
            mem.note_seq(end);
            last_seq = last_seq.max(end);
            maybe_flush(vs, ctx, &mut mem, opts, registry)?;
        }
        if let Some(at) = reader.torn_tail_at() {
            torn.push(number);
            // Older logs are synced before a new one starts: only the newest may be
            // cut short by a crash.
            if Some(number) != newest {
                return Err(Error::corruption(
                    &path,
                    at,
                    "WAL ends in a torn record but newer WAL files follow it",
                ));
            }
        }
    }
    if !mem.is_empty() {
        flush_recovered(vs, ctx, &mem, opts, registry)?;
    }
    vs.last_seq = vs.last_seq.max(last_seq);
    Ok((last_seq, torn))
}

fn maybe_flush(
    vs: &mut VersionSet,
    ctx: &JobContext,
    mem: &mut Arc<MemTable>,
    opts: &crate::Options,
    registry: &DeferredRegistry,
) -> Result<()> {
    if mem.approximate_bytes() >= opts.memtable_budget {
        flush_recovered(vs, ctx, mem, opts, registry)?;
        *mem = Arc::new(MemTable::new(0, opts.clock.now_micros()));
    }
    Ok(())
}

fn flush_recovered(
    vs: &mut VersionSet,
    ctx: &JobContext,
    mem: &Arc<MemTable>,
    opts: &crate::Options,
    registry: &DeferredRegistry,
) -> Result<()> {
    let run = vs.new_file_number();
    let version = vs.current();
    let res = flush_memtable(ctx, mem, &version, &[], run, registry, opts.deferred_sort_memory)?;
    vs.log_and_apply(res.edit)?;
    Ok(())
}
