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
        let min_seq = f.meta.global_seq.unwrap_or(f.meta.min_seq);
        let checked = self.checked.lock().get(&f.number()).copied().unwrap_or(0);
        let pending: Vec<&DeleteWhere> = records
            .iter()
            .filter(|r| r.seq > checked && r.seq > f.meta.deletes_applied && min_seq < r.seq)
            .collect();
        if pending.is_empty() {
            return false;
        }
        // A table that cannot be opened is left alone here: its rewrite would fail too,
        // and the reads that meet it report the damage.
        let Ok(t) = self.cache.get(f.meta.number, f.meta.global_seq) else {
            return false;
        };
        let map = &f.meta.pages;
        let owed = match t.tiles() {
            None => true,
            // A page dropped, or patched by a job that applied the record, owes nothing.
            Some(tiles) => pending.iter().any(|r| {
                let live = tiles
                    .pages
                    .iter()
                    .filter(|p| !map.is_dropped(p.handle.offset) && map.applied(p.handle.offset) < r.seq);
                owes(r, f.meta.deletes_applied, min_seq, Some(live))
            }),
        };
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
