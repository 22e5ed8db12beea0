//! Deferred deletes arrive out of source order (docs/design/deferred.md, "Rules that
//! keep it correct"; vinyl #10895): a `DeferredDelete(k, s1)` lands in a newer run than
//! a `Put(k, s3)` with s3 > s1 that already sits deeper. No read or compaction of the
//! secondary index may trust "newer run means newer entry": the put must survive, while
//! the delete still removes the put it names.
//!
//! The order is forced by compacting the secondary keyspace on its own before the
//! primary one (automatic compactions are held off with a high level-0 trigger).

mod table_harness;

use strata::table::schema::Schema;
use strata::table::{Row, Table};
use strata::{Db, Options};
use table_harness::{check_ok, collect, small_options, u};

fn options(runs_per_level: usize) -> Options {
    Options {
        l0_compaction_trigger: 100,
        l0_stall_trigger: 200,
        runs_per_level,
        ..small_options()
    }
}

fn row(id: u64, a: u64, v: u64) -> Row {
    vec![u(id), u(a), u(v)]
}

fn by_a(t: &Table, a: u64) -> Vec<Row> {
    collect(t.select("by_a").eq(vec![u(a)])).expect("select")
}

fn index_entries(db: &Db) -> (u64, u64) {
    let st = db.stats();
    let ks = st
        .keyspaces
        .iter()
        .find(|k| k.name == "table:t:by_a")
        .expect("index keyspace");
    (ks.entries(), ks.tombstones())
}

#[test]
fn late_deferred_delete_does_not_remove_a_newer_put() {
    for runs_per_level in [1, 3] {
        for via_delete in [false, true] {
            let ctx = format!("runs per level {runs_per_level}, key left through a delete: {via_delete}");
            let dir = table_harness::tempdir();
            let db = Db::open(dir.path(), options(runs_per_level)).expect("open");
            let t = db
                .create_table(
                    Schema::parse("table t (id u64, a u64, v u64) primary key (id) index by_a (a) deferred")
                        .expect("schema"),
                )
                .expect("table");
            let primary = db.keyspace("table:t").expect("primary keyspace");
            let index = db.keyspace("table:t:by_a").expect("index keyspace");
            // Row 1: a = 1 (s1), then leaves a = 1 (s2), then comes back to a = 1 (s3),
            // each version flushed on its own. Row 2 stays as a witness.
            t.replace(row(1, 1, 1)).expect("s1");
            t.replace(row(2, 1, 1)).expect("witness");
            db.flush().expect("flush");
            if via_delete {
                t.delete(&[u(1)]).expect("s2: delete");
            } else {
                t.replace(row(1, 2, 2)).expect("s2: a = 2");
            }
            db.flush().expect("flush");
            t.replace(row(1, 1, 3)).expect("s3: back to a = 1");
            db.flush().expect("flush");
            // Push the index entries down first: (1, 1)@s3 now sits at the bottom.
            index.compact_range(..).expect("compact the index");
            // Then the primary: it drops the versions s1 (and s2) and sends their
            // deferred deletes to the index, into a run newer than the one holding s3.
            primary.compact_range(..).expect("compact the primary");
            let ts = t.stats().expect("stats");
            assert!(ts.deferred_deletes_emitted >= 1, "{ctx}: {ts}");
            let (_, late_deletes) = index_entries(&db);
            assert!(
                late_deletes >= 1,
                "{ctx}: the deferred deletes did not land in the index files"
            );
            let want = vec![row(1, 1, 3), row(2, 1, 1)];
            assert_eq!(by_a(&t, 1), want, "{ctx}: a late deferred delete hid a newer entry");
            assert_eq!(by_a(&t, 2), Vec::<Row>::new(), "{ctx}");
            assert_eq!(
                collect(t.select("by_a").reverse()).expect("select"),
                vec![row(2, 1, 1), row(1, 1, 3)],
                "{ctx}"
            );
            // The check's point lookups on the index must see the entry too.
            let report = check_ok(&db, false);
            assert_eq!(report.tables[0].indexes[0].missing, 0, "{ctx}: {report}");
            // Compacting the index merges the late deletes with the newer put.
            index.compact_range(..).expect("compact the index again");
            assert_eq!(by_a(&t, 1), want, "{ctx}: the index compaction let the late delete win");
            let report = check_ok(&db, false);
            assert_eq!(report.tables[0].indexes[0].missing, 0, "{ctx}: {report}");
            check_ok(&db, true);
            assert_eq!(index_entries(&db), (2, 0), "{ctx}");
            assert_eq!(by_a(&t, 1), want, "{ctx}: after full compaction");
            // And after a reopen.
            drop((t, primary, index));
            db.close().expect("close");
            let db = Db::open(dir.path(), options(runs_per_level)).expect("reopen");
            let t = db.table("t").expect("table");
            assert_eq!(by_a(&t, 1), want, "{ctx}: after reopen");
            assert_eq!(t.get(&[u(1)]).expect("get"), Some(row(1, 1, 3)));
        }
    }
}
