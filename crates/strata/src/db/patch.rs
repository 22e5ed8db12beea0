//! Page patches: a killed-puts job that rewrites only the pages of a tiled last-level
//! file that secondary range deletes cover in part, into one small patch file, and
//! re-adds the file with a page map naming them (`sstable::patch`; what each page keeps
//! is invariant PP of `compaction::patch`).
//!
//! The job takes over a task the picker's `KilledPutsTrigger` chose when the task is a
//! bottommost rewrite of one tiled file in place, its keyspace owes no obligations, and
//! the pages to patch are at most half the file's live pages (a patch reads and writes
//! each of them once; the rewrite reads every live page and writes the survivors).
//! Otherwise (untiled files, h = 1 where every page is covered in part, tables whose
//! primary has secondary indexes, upper levels) the file rewrite runs as before.
//!
//! Crash safety: the patch file is written and synced before the one manifest edit that
//! names it; a crash before the edit leaves an orphan that the next open deletes.

use std::sync::Arc;

use super::DbInner;
use super::stats::Counters;
use crate::compaction::CompactionTask;
use crate::compaction::output::JobContext;
use crate::compaction::patch::patch_page;
use crate::compaction::picker::deletes::KILLED_PUTS;
use crate::compaction::tiles::{PageCounts, owes, page_skipper};
use crate::delete_key::DeleteWhere;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQNO, SeqNo, seek_key};
use crate::sstable::block::BlockBuilder;
use crate::sstable::bloom::KeyHash;
use crate::sstable::format::BLOCK_TRAILER_LEN;
use crate::sstable::patch::{PagePatch, PatchWriter};
use crate::sstable::{Fill, Pages};
use crate::version::{NewFile, VersionEdit};

impl DbInner {
    /// Runs `task` as a page patch if it qualifies (module docs); false leaves it to
    /// the file rewrite. `ctx` is the job context the rewrite would run with.
    pub(crate) fn patch_pages(&self, task: &CompactionTask, ctx: &JobContext) -> Result<bool> {
        if task.reason != KILLED_PUTS || task.trivial_move || !task.bottommost {
            return Ok(false);
        }
        let [input] = task.inputs.as_slice() else {
            return Ok(false);
        };
        let [f] = input.files.as_slice() else {
            return Ok(false);
        };
        if input.level != task.output_level || task.output_run != Some(input.run) {
            return Ok(false);
        }
        let ks = task.keyspace;
        let obligations = self.obligations();
        if obligations.owes(ks) || obligations.receives(ks) {
            return Ok(false);
        }
        let Some(job) = ctx.deletes.get(&ks) else {
            return Ok(false);
        };
        let t = self.sst_cache.get(f.meta.number, f.meta.global_seq)?;
        let Some(tiles) = t.tiles() else {
            return Ok(false);
        };
        // Only records every reader sees apply; the claim stops below the others.
        let oldest_snapshot = self.snapshot_list().first().copied();
        let records: Vec<DeleteWhere> = job
            .records
            .iter()
            .filter(|r| oldest_snapshot.is_none_or(|s| s >= r.seq))
            .cloned()
            .collect();
        let claim = job.applied_through.min(oldest_snapshot.unwrap_or(SeqNo::MAX));
        let min_seq = f.meta.global_seq.unwrap_or(f.meta.min_seq);
        let map = &f.meta.pages;
        let live = tiles.pages.iter().filter(|p| !map.is_dropped(p.handle.offset)).count();
        let owing: Vec<usize> = (0..tiles.pages.len())
            .filter(|&i| {
                let p = &tiles.pages[i];
                let applied = f.meta.deletes_applied.max(map.applied(p.handle.offset));
                !map.is_dropped(p.handle.offset)
                    && records
                        .iter()
                        .any(|r| owes(r, applied, min_seq, Some(std::iter::once(p))))
            })
            .collect();
        if owing.is_empty() || owing.len() * 2 > live {
            return Ok(false);
        }
        let counts = Arc::new(PageCounts::default());
        let skip = page_skipper(records.clone(), oldest_snapshot, counts.clone());
        let tile_of: Vec<usize> = tiles
            .tiles
            .iter()
            .enumerate()
            .flat_map(|(ti, tm)| tm.pages.clone().map(move |_| ti))
            .collect();
        let pages = Some(Pages {
            map,
            patches: &self.sst_cache,
        });
        let (mut read, mut patched_pages, mut tombstones) = (0u64, 0u64, 0u64);
        let mut dropped = Vec::new();
        let mut blocks: Vec<(u64, Vec<u8>)> = Vec::new();
        for &i in &owing {
            let page = &tiles.pages[i];
            let at = page.handle.offset;
            // Covered whole (invariant TP): dropped unread.
            if skip(page) {
                dropped.push(at);
                continue;
            }
            let size = map.patch(at).map_or(page.handle.size, |p| p.handle.size);
            read += size + BLOCK_TRAILER_LEN as u64;
            let Some((mut it, _)) = t.open_page(page, pages, Fill::Bypass)? else {
                continue;
            };
            let mut entries = Vec::new();
            it.seek_to_first()?;
            while it.valid() {
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.next()?;
            }
            let others: Vec<_> = tiles
                .tile_pages(tile_of[i])
                .iter()
                .filter(|o| o.handle.offset != at && !map.is_dropped(o.handle.offset))
                .collect();
            let key = job.config.key;
            let (kept, _, made) = patch_page(
                entries,
                |p, v| crate::delete_key::killed(&key, &records, v, p.seq, MAX_SEQNO),
                // A whole page's keys have no other version in the file.
                |uk| {
                    let target = seek_key(uk, MAX_SEQNO);
                    let mut key = KeyHash::new(uk);
                    !page.whole && others.iter().any(|o| o.may_hold(&mut key, &target).0)
                },
            );
            if kept.is_empty() {
                dropped.push(at);
                continue;
            }
            tombstones += made;
            let mut b = BlockBuilder::new(ctx.sst_opts.restart_interval);
            for (k, v) in &kept {
                b.add(k, v);
            }
            blocks.push((at, b.finish()));
        }
        let mut written = 0;
        let mut patches = Vec::with_capacity(blocks.len());
        if !blocks.is_empty() {
            let number = self.versions.lock().new_file_number();
            let mut w = PatchWriter::create(self.opts.fs.clone(), &self.dir, number, ctx.sst_opts.compression)?;
            for (at, raw) in &blocks {
                patches.push(PagePatch {
                    page: *at,
                    file: number,
                    handle: w.add(raw)?,
                    applied: claim.max(map.applied(*at)),
                });
            }
            written = w.finish()?;
            patched_pages = patches.len() as u64;
        }
        let new_map = map.dropping(dropped).patching(patches);
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((ks, f.number()));
        if new_map.dropped.len() < tiles.pages.len() || !t.range_tombstones().is_empty() {
            let mut meta = f.meta.clone();
            meta.pages = Arc::new(new_map);
            // The tombstones a patch writes count like any other: the one-run scan
            // trusts a file without tombstones to hold only `Put`s, and FADE purges them
            // (with the versions they hide) within its threshold of the patch.
            if tombstones > 0 {
                let now = self.opts.clock.now_micros();
                meta.tombstones += tombstones;
                meta.oldest_tombstone_time = Some(meta.oldest_tombstone_time.map_or(now, |t| t.min(now)));
            }
            edit.new_files.push(NewFile {
                keyspace: ks,
                level: input.level as u32,
                run: input.run,
                meta,
            });
        }
        let c = &self.counters;
        Counters::add(&c.compaction_read, read);
        Counters::add(&c.compaction_written, written);
        Counters::add(&c.kill_rewrite_read, read);
        Counters::add(&c.kill_rewrite_written, written);
        Counters::add(&c.pages_patched, patched_pages);
        Counters::add(
            &c.pages_dropped,
            counts.dropped.load(std::sync::atomic::Ordering::Relaxed),
        );
        edit.meta.push((super::stats::STATS_META.to_string(), Some(c.encode())));
        self.install_edit(edit, None)?;
        Ok(true)
    }
}
