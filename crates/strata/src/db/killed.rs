//! The picker's view of which files still hold `Put`s a secondary range delete killed
//! (invariant KR of `compaction::tiles`): the records every reader sees, and each
//! file's tile index from the table cache.
//!
//! The picker runs under the background lock, after every flush and compaction and
//! while `wait_for_background` polls, so a file found owing nothing is remembered with
//! the seqno through which every record was checked (`DbInner::killed_checked`): later
//! picks look at newer records only, instead of opening the file and walking its tile
//! index again. This holds because a file never changes (dropped pages only leave it
//! with fewer live pages) and every record at or below that seqno was among the ones
//! checked.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::DbInner;
use crate::compaction::tiles::{KilledPuts, owes};
use crate::delete_key::DeleteWhere;
use crate::error::Result;
use crate::key::SeqNo;
use crate::sstable::SstCache;
use crate::version::TableFile;

/// The records to apply, by keyspace, and the tables to look them up in.
struct Owed {
    records: BTreeMap<u32, Vec<DeleteWhere>>,
    cache: Arc<SstCache>,
    /// Every record at or below this seqno is in `records` (the visible seqno, or the
    /// oldest snapshot if older).
    through: SeqNo,
    checked: Arc<Mutex<HashMap<u64, SeqNo>>>,
}

impl KilledPuts for Owed {
    fn has_records(&self, ks: u32) -> bool {
        self.records.contains_key(&ks)
    }

    fn owed(&self, ks: u32, f: &TableFile) -> bool {
        let Some(records) = self.records.get(&ks) else {
            return false;
        };
        let checked = self.checked.lock().get(&f.number()).copied().unwrap_or(0);
        let pending: Vec<&DeleteWhere> = records.iter().filter(|r| r.seq > checked).collect();
        // A table that cannot be opened is left alone here: its rewrite would fail too,
        // and the reads that meet it report the damage.
        let Ok(owed) = owed_by(&self.cache, &f.meta, &pending) else {
            return false;
        };
        let owed = owed.contains(&true);
        if !owed {
            self.checked.lock().insert(f.number(), self.through);
        }
        owed
    }
}

impl DbInner {
    /// The files still owing a secondary range delete, for the picker; `None` when no
    /// keyspace has a record every reader sees (none older than `oldest_snapshot`).
    pub(crate) fn killed_puts(&self, oldest_snapshot: Option<SeqNo>) -> Option<Arc<dyn KilledPuts>> {
        let visible = self.visible_seq.load(Ordering::Acquire);
        let sv = self.current();
        let applies = |r: &DeleteWhere| r.seq <= visible && oldest_snapshot.is_none_or(|s| s >= r.seq);
        let mut records: BTreeMap<u32, Vec<DeleteWhere>> = BTreeMap::new();
        for &ks in sv.version.keyspaces.keys() {
            // An undecodable record fails the jobs that apply it; here it applies nothing.
            let rs = crate::delete_key::records_of(&sv.version.meta, ks).unwrap_or_default();
            for r in rs.into_iter().filter(|r| applies(r)) {
                records.entry(ks).or_default().push(r);
            }
        }
        for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            for (ks, r) in m.all_delete_wheres() {
                if applies(&r) {
                    records.entry(ks).or_default().push(r);
                }
            }
        }
        if records.is_empty() {
            self.killed_checked.lock().clear();
            return None;
        }
        // Forget files no longer live.
        let live: HashSet<u64> = sv
            .version
            .keyspaces
            .values()
            .flat_map(|t| t.files())
            .map(|f| f.number())
            .collect();
        self.killed_checked.lock().retain(|n, _| live.contains(n));
        Some(Arc::new(Owed {
            records,
            cache: self.sst_cache.clone(),
            through: oldest_snapshot.map_or(visible, |s| s.min(visible)),
            checked: self.killed_checked.clone(),
        }))
    }
}

/// Forgets, in `edit`, the secondary range delete records that no file can need
/// once `edit` is applied to `version` (invariant RG of `compaction::tiles`): those
/// of `version` are removed, those the edit itself moves in from a flushed memtable
/// are not added. The caller holds the version set's lock from here to the install,
/// so no other edit comes between the judgement and the version it judges. Only the
/// keyspaces whose files or records the edit changes are looked at.
pub(crate) fn retire_records(
    cache: &SstCache,
    version: &crate::version::Version,
    edit: &mut crate::version::VersionEdit,
) {
    use crate::delete_key::{parse_record_name, record_name, records_of};
    // Records the edit adds (a flush moves them out of its memtable), by keyspace.
    let mut added: BTreeMap<u32, Vec<DeleteWhere>> = BTreeMap::new();
    for (name, value) in &edit.meta {
        if let (Some((ks, _)), Some(v)) = (parse_record_name(name), value)
            && let Ok(r) = DeleteWhere::decode(v)
        {
            added.entry(ks).or_default().push(r);
        }
    }
    let touched: std::collections::BTreeSet<u32> = edit
        .new_files
        .iter()
        .map(|f| f.keyspace)
        .chain(edit.deleted_files.iter().map(|(ks, _)| *ks))
        .chain(added.keys().copied())
        .filter(|ks| !edit.dropped_keyspaces.contains(ks))
        .collect();
    let (mut removed, mut not_added) = (Vec::new(), HashSet::new());
    for ks in touched {
        // Undecodable records stay, for the reads that report them.
        let Ok(mut records) = records_of(&version.meta, ks) else {
            continue;
        };
        let listed = records.len();
        records.extend(added.remove(&ks).unwrap_or_default());
        let Some(tree) = version.keyspace(ks).filter(|_| !records.is_empty()) else {
            continue;
        };
        let gone: HashSet<u64> = edit
            .deleted_files
            .iter()
            .filter(|(k, _)| *k == ks)
            .map(|(_, n)| *n)
            .collect();
        let files = tree
            .files()
            .map(|f| &f.meta)
            .filter(|m| !gone.contains(&m.number))
            .chain(edit.new_files.iter().filter(|f| f.keyspace == ks).map(|f| &f.meta));
        let mut needed = vec![false; records.len()];
        for m in files {
            let open: Vec<usize> = (0..records.len()).filter(|&i| !needed[i]).collect();
            let pending: Vec<&DeleteWhere> = open.iter().map(|&i| &records[i]).collect();
            // A table that cannot be opened may need every record.
            let owed = owed_by(cache, m, &pending).unwrap_or_else(|_| vec![true; pending.len()]);
            for (i, o) in open.into_iter().zip(owed) {
                needed[i] = o;
            }
            if needed.iter().all(|n| *n) {
                break;
            }
        }
        for (i, (r, _)) in records.iter().zip(needed).enumerate().filter(|(_, (_, n))| !n) {
            if i < listed {
                removed.push((record_name(ks, r.seq), None));
            } else {
                not_added.insert(record_name(ks, r.seq));
            }
        }
    }
    edit.meta.retain(|(name, _)| !not_added.contains(name));
    edit.meta.extend(removed);
}

/// Which of `records` the file `m` may still hold a `Put` of (rule [`owes`]), in order.
/// Its table is opened only if one of them is newer than what the file claims and than
/// its oldest entry.
fn owed_by(cache: &SstCache, m: &crate::version::FileMeta, records: &[&DeleteWhere]) -> Result<Vec<bool>> {
    let min_seq = m.global_seq.unwrap_or(m.min_seq);
    let mut owed: Vec<bool> = records
        .iter()
        .map(|r| r.seq > m.deletes_applied && min_seq < r.seq)
        .collect();
    if !owed.contains(&true) {
        return Ok(owed);
    }
    let t = cache.get(m.number, m.global_seq)?;
    // Untiled: every candidate is owed. Tiled: a page dropped, or patched by a job that
    // applied the record, owes nothing.
    if let Some(tiles) = t.tiles() {
        for (o, r) in owed.iter_mut().zip(records).filter(|(o, _)| **o) {
            let live = tiles.pages.iter().filter(|p| page_live_for(m, p.handle.offset, r.seq));
            *o = owes(r, m.deletes_applied, min_seq, Some(live));
        }
    }
    Ok(owed)
}

/// True if the page at `offset` of the file `m` is still read and not patched by a job
/// that applied the record at `seq`.
fn page_live_for(m: &crate::version::FileMeta, offset: u64, seq: SeqNo) -> bool {
    !m.pages.is_dropped(offset) && m.pages.applied(offset) < seq
}
