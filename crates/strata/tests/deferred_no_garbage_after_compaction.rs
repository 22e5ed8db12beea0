//! After replacing every row many times and deleting half of them, a full compaction
//! leaves deferred secondary indexes with exactly one entry per live row, and both
//! modes answer every select identically.

use strata::table::check::CheckOptions;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Db, Options};

fn opts() -> Options {
    Options {
        memtable_budget: 64 << 10,
        target_file_size: 32 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 12,
        ..Options::default()
    }
}

fn run(mode: &str) -> (Vec<Vec<Value>>, strata::table::TableStats) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db
        .create_table(
            Schema::parse(&format!(
                "table t (id u64, a u64, b str, c i64 null) primary key (id) index by_a (a) index by_bc (b, c) {mode}"
            ))
            .unwrap(),
        )
        .unwrap();
    let n = 400u64;
    for round in 0..6u64 {
        let mut tx = t.transaction();
        for id in 0..n {
            let c = if id % 7 == 0 {
                Value::Null
            } else {
                Value::I64(id as i64 - 200 + round as i64)
            };
            tx.replace(vec![
                Value::U64(id),
                Value::U64((id * 31 + round) % 50),
                Value::from(format!("s{}", id % 9)),
                c,
            ]);
        }
        tx.commit().unwrap();
    }
    for id in (0..n).step_by(2) {
        t.delete(&[Value::U64(id)]).unwrap();
    }
    let report = db.check(CheckOptions { compact_first: true }).unwrap();
    assert!(report.ok(), "{report}");
    let tc = &report.tables[0];
    assert_eq!(tc.rows, n / 2);
    for ix in &tc.indexes {
        assert_eq!(ix.dirty, 0, "{report}");
        assert_eq!(ix.valid, n / 2);
        assert_eq!(ix.file_entries, n / 2, "index {} holds garbage: {report}", ix.name);
    }
    let mut rows = Vec::new();
    for a in 0..50u64 {
        rows.extend(
            t.select("by_a")
                .eq(vec![Value::U64(a)])
                .rows()
                .unwrap()
                .map(|r| r.unwrap()),
        );
    }
    let stats = t.stats().unwrap();
    (rows, stats)
}

#[test]
fn deferred_indexes_hold_no_garbage_after_full_compaction() {
    let (deferred_rows, deferred) = run("deferred");
    let (eager_rows, eager) = run("eager");
    assert_eq!(deferred_rows, eager_rows);
    assert_eq!(deferred_rows.len(), 200);
    assert_eq!(deferred.hidden_reads, 0);
    assert_eq!(eager.hidden_reads, 6 * 400 + 200);
    assert!(deferred.deferred_deletes_emitted >= 2 * (5 * 400 + 200), "{deferred}");
    assert_eq!(eager.deferred_deletes_emitted, 0);
}
