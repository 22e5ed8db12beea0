//! What flushes and compactions owe for the versions they drop.
//!
//! Some keyspaces are derived from others: a table's secondary indexes from its primary
//! rows. When such a primary drops a `Put` version, the keyspaces derived from it owe
//! deletes of what that version put there. The engine knows only this shape; the layer
//! above says which keyspaces owe what ([`Obligations`], plugged in through
//! `db::Extension`) and turns dropped versions into deletes ([`Collector`]). The engine
//! places the deletes: [`emitted`] is the one path flushes and compactions take.
//!
//! Placement keeps the rule point lookups rely on: a delete of `(k, s)` lands in a run at
//! least as new as the run holding `Put(k, s)`. A flush merges the deletes into the same
//! level-0 run as the derived keyspaces' own memtable entries (one memtable serves every
//! keyspace, so the puts are in that run or older ones); a compaction writes them as
//! level-0 runs of their own, made after the versions they name were on disk.

use std::collections::BTreeMap;

use super::job::DropSink;
use super::output::{JobContext, OutputWriter};
use super::sorter::SortedStream;
use crate::error::Result;
use crate::version::{NewFile, Version};

/// Which keyspaces owe deletes to which, as the layer above declares them.
pub trait Obligations: Send + Sync {
    /// Whether versions dropped from `ks` owe deletes elsewhere (its files then carry
    /// the time of their oldest pending obligation, which delete persistence bounds).
    fn owes(&self, ks: u32) -> bool;
    /// Whether `ks` receives such deletes (its compactions keep shadowed tombstones
    /// that may still have to meet their puts).
    fn receives(&self, ks: u32) -> bool;
    /// Whether the layer above compares the seqnos of `ks`'s entries (a table's rows and
    /// index entries): a bottommost merge then keeps them instead of zeroing them
    /// (`compaction::job`).
    fn reads_seqnos(&self, ks: u32) -> bool;
    /// A collector for the versions a flush (`compaction: false`) or a compaction of
    /// `ks` drops, buffering at most `sort_memory` bytes; `None` when `ks` owes nothing.
    fn collector(&self, ks: u32, ctx: &JobContext, sort_memory: usize, compaction: bool) -> Option<Box<dyn Collector>>;
}

/// Turns the versions a job drops into sorted deletes per receiving keyspace.
pub trait Collector: DropSink {
    /// Versions dropped without a delete because one was written already, still perhaps
    /// only in the WAL: the job syncs the WAL before its result is installed.
    fn spared(&self) -> u64;
    /// The deletes, sorted, with their counts, per receiving keyspace.
    fn finish(self: Box<Self>) -> Result<BTreeMap<u32, (u64, SortedStream)>>;
}

/// A database without derived keyspaces owes nothing.
pub struct NoObligations;

impl Obligations for NoObligations {
    fn owes(&self, _: u32) -> bool {
        false
    }
    fn receives(&self, _: u32) -> bool {
        false
    }
    fn reads_seqnos(&self, _: u32) -> bool {
        false
    }
    fn collector(&self, _: u32, _: &JobContext, _: usize, _: bool) -> Option<Box<dyn Collector>> {
        None
    }
}

/// The deletes a job emitted, for keyspaces that still exist.
#[derive(Default)]
pub struct Emitted {
    /// Sorted deletes per receiving keyspace.
    pub streams: BTreeMap<u32, Vec<SortedStream>>,
    /// How many, per receiving keyspace.
    pub counts: BTreeMap<u32, u64>,
}

/// Finishes `collector` into `into`: deletes for keyspaces `version` no longer has (an
/// index dropped meanwhile) are left out.
pub fn emitted(collector: Box<dyn Collector>, version: &Version, into: &mut Emitted) -> Result<()> {
    for (ks, (n, stream)) in collector.finish()? {
        if version.keyspace(ks).is_some() {
            into.streams.entry(ks).or_default().push(stream);
            *into.counts.entry(ks).or_default() += n;
        }
    }
    Ok(())
}

/// Writes a compaction's emitted deletes as level-0 runs of their own (`new_run` gives
/// each a run id newer than every existing one), stamped with `born`: the deletes
/// inherit the age of the obligations they discharge. Returns the files and bytes.
pub fn write_runs(
    ctx: &JobContext,
    emitted: Emitted,
    born: u64,
    mut new_run: impl FnMut() -> u64,
) -> Result<(Vec<NewFile>, u64)> {
    let (mut files, mut bytes) = (Vec::new(), 0);
    for (ks, streams) in emitted.streams {
        for mut stream in streams {
            // The keyspace's own kind of filter and tiles, as its flushes write.
            let mut out = OutputWriter::new(ctx.for_output(ks, 0), ks, 0, new_run(), Vec::new());
            out.note_tombstone_time(born);
            while let Some((k, v)) = stream.next_entry()? {
                out.add(k, v)?;
            }
            let (f, written) = out.finish()?;
            files.extend(f);
            bytes += written;
        }
    }
    Ok((files, bytes))
}
