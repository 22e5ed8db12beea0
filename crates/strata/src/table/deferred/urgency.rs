//! When pending purges become urgent: a deferred table whose selects keep meeting dirty
//! entries (invariant 7 of [`super`]) gets its purges pushed down now, by flushing and
//! by the dirty-read compaction trigger, whatever the deadlines say.

use std::collections::HashSet;

use crate::table::state::{Catalog, get};

/// Dirty hits above this share of a deferred index's recent hits make its table's
/// pending purges urgent.
const DIRTY_SHARE: f64 = 0.05;
/// ...once at least this many dirty hits were seen since the last check.
const DIRTY_MIN: u64 = 64;
/// How long a table stays urgent after dirty reads were seen.
const URGENT_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// Hits after which a window without urgency starts over.
const WINDOW: u64 = 4096;

/// Keyspaces (primary and secondaries) of deferred tables whose selects recently met
/// many dirty entries. Each call consumes the counts seen since the previous one.
pub(crate) fn urgent_keyspaces(catalog: &Catalog) -> HashSet<u32> {
    let mut out = HashSet::new();
    for rt in catalog.tables.values() {
        if !rt.layout.deferred() {
            continue;
        }
        let mut seen = rt.state.seen.lock();
        let mut urgent = false;
        for (ix, c) in rt.layout.indexes.iter().zip(rt.index_counters.iter()) {
            let now = (get(&c.hits), get(&c.dirty));
            let before = seen.get(&ix.name).copied().unwrap_or((0, 0));
            let (hits, dirty) = (now.0.saturating_sub(before.0), now.1.saturating_sub(before.1));
            // A window closes when it shows urgency or is large enough to judge.
            if dirty >= DIRTY_MIN && dirty as f64 >= DIRTY_SHARE * (hits + dirty) as f64 {
                urgent = true;
                seen.insert(ix.name.clone(), now);
            } else if hits + dirty >= WINDOW {
                seen.insert(ix.name.clone(), now);
            }
        }
        drop(seen);
        let mut until = rt.state.urgent_until.lock();
        let now = std::time::Instant::now();
        if urgent {
            *until = Some(now + URGENT_FOR);
        }
        if until.is_some_and(|u| now < u) {
            out.insert(rt.layout.primary);
            out.extend(rt.layout.indexes.iter().map(|i| i.keyspace));
        }
    }
    out
}

/// Whether some deferred table is urgent (its selects met many dirty entries lately),
/// as the last [`urgent_keyspaces`] judged it.
pub(crate) fn any_urgent(catalog: &Catalog) -> bool {
    let now = std::time::Instant::now();
    catalog
        .tables
        .values()
        .any(|rt| rt.layout.deferred() && rt.state.urgent_until.lock().is_some_and(|u| now < u))
}
