//! What a page patch keeps of one delete-tile page (`sstable::patch`,
//! `db::patch`): the page's entries without the `Put`s a secondary range delete killed.
//!
//! # Invariant (PP)
//!
//! A page patch rewrites one page of a tiled file alone, into a patch file, and the
//! version reads the page from there. It runs only where a bottommost rewrite of the
//! file in place would: the file is the only input of a killed-puts job at the last
//! level whose merge is bottommost (nothing older than the file's entries exists below
//! it, and no user key spans two tiles, so every older version of a page's keys is in
//! its tile), for a keyspace that owes no obligations (a table's primary with secondary
//! indexes must read every dropped row to delete its index entries: those keep the
//! file rewrite). It applies only records every reader sees (no snapshot below the
//! record), so a killed `Put` reads, for every reader, as the point tombstone at its
//! seqno that invariant DW says it is. Then, per user key, oldest version first:
//!
//! * a killed `Put` with no older version left of its key (none kept in the page, and
//!   no other page of the tile whose fences and bloom filter admit the key) is dropped:
//!   at the bottom a tombstone with nothing behind it reads as nothing;
//! * a killed `Put` with an older version possibly left becomes a `Delete` at its seqno
//!   (what it reads as), which keeps hiding it;
//! * every other entry is kept as it is.
//!
//! So every read at every live or future snapshot returns what it returned before, and
//! the patched page holds no `Put` a record at or below the job's claim kills: the
//! patch records that claim per page (`PagePatch::applied`: the job's
//! `applied_through`, capped below records a snapshot still hides, and never below the
//! page's previous claim), and the picker (`db::killed`) stops seeing the page as
//! owing those records, so no page is patched twice for one record. The kept entries
//! are a subset of the base page's (a `Delete` keeps its `Put`'s user key and seqno),
//! so the base page's fences, bloom filter, delete-key range, largest seqno and whole
//! flag stay valid bounds for readers and for invariant TP; a page left empty is
//! dropped instead.

use crate::key::{ParsedKey, ValueKind, internal_key, parse_internal_key, user_key};

/// One entry: internal key and value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// The entries of a page (internal-key order) that a patch keeps (invariant PP):
/// `killed` says whether a `Put` is killed, `older_elsewhere` whether another page of
/// the tile may hold a version of a user key. Undecodable keys are kept as they are
/// (the reader reports them). Returns the kept entries, how many `Put`s were dropped
/// or turned into tombstones, and how many of them became tombstones (the file's
/// tombstone count must include those: readers and FADE trust it).
pub fn patch_page(
    entries: Vec<Entry>,
    killed: impl Fn(&ParsedKey<'_>, &[u8]) -> bool,
    older_elsewhere: impl Fn(&[u8]) -> bool,
) -> (Vec<Entry>, u64, u64) {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    let (mut changed, mut tombstones) = (0, 0);
    let mut start = 0;
    while start < entries.len() {
        let uk = user_key(&entries[start].0).to_vec();
        let end = start + entries[start..].iter().take_while(|(k, _)| user_key(k) == uk).count();
        // Oldest version first, remembering whether an older one is left.
        let mut older_left = older_elsewhere(&uk);
        let mut group: Vec<Entry> = Vec::with_capacity(end - start);
        for (k, v) in entries[start..end].iter().rev() {
            match parse_internal_key(k) {
                Some(p) if p.kind == ValueKind::Put && killed(&p, v) => {
                    changed += 1;
                    if older_left {
                        group.push((internal_key(p.user_key, p.seq, ValueKind::Delete), Vec::new()));
                        tombstones += 1;
                    }
                }
                _ => {
                    group.push((k.clone(), v.clone()));
                    older_left = true;
                }
            }
        }
        out.extend(group.into_iter().rev());
        start = end;
    }
    (out, changed, tombstones)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, seq: u64, dk: u8) -> Entry {
        (internal_key(k.as_bytes(), seq, ValueKind::Put), vec![dk])
    }

    #[test]
    fn killed_puts_go_or_become_tombstones_over_older_versions() {
        // dk 5 is killed.
        let kill = |_: &ParsedKey<'_>, v: &[u8]| v == [5];
        let entries = vec![
            put("a", 9, 5),
            put("b", 8, 1),
            put("c", 7, 5),
            put("c", 3, 1),
            put("d", 6, 5),
        ];
        let (kept, changed, tombstones) = patch_page(entries, kill, |uk| uk == b"d");
        assert_eq!((changed, tombstones), (3, 2));
        assert_eq!(
            kept,
            vec![
                put("b", 8, 1),
                (internal_key(b"c", 7, ValueKind::Delete), Vec::new()),
                put("c", 3, 1),
                (internal_key(b"d", 6, ValueKind::Delete), Vec::new()),
            ],
            "a goes; c and d keep hiding an older version"
        );
        // Two killed versions with nothing older: both go.
        let (kept, changed, tombstones) = patch_page(vec![put("e", 9, 5), put("e", 4, 5)], kill, |_| false);
        assert_eq!((kept.len(), changed, tombstones), (0, 2, 0));
        // Tombstones are kept, and hide what a killed put below them would have been.
        let del = (internal_key(b"f", 9, ValueKind::Delete), Vec::new());
        let (kept, _, tombstones) = patch_page(vec![del.clone(), put("f", 4, 5)], kill, |_| false);
        assert_eq!(
            tombstones, 0,
            "the kept tombstone was counted when its file was written"
        );
        assert_eq!(kept, vec![del]);
    }
}
