//! A select through a secondary-index value held by 500,000 rows streams them: the
//! heap's live bytes (counted by this binary's allocator) stay within a few MiB of
//! where they started while every row is read, though the rows themselves are tens of
//! MiB (`STRATA_INDEX_HOT_ROWS` sets the row count). Table indexes store one entry per (index value, primary key), the multimap
//! layout (`docs/design/multimap.md`), so a select is one scan of that key's range.

mod streaming_harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use strata::table::schema::Schema;
use strata::table::value::Value;
use streaming_harness::{env_count, small_buffers_db};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` was allocated by `System` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn select_through_a_hot_index_value_streams() {
    // The 500,000 in release builds (a few seconds); a debug build loads
    // ten times slower, so it streams 100,000.
    let default = if cfg!(debug_assertions) { 100_000 } else { 500_000 };
    let rows = env_count("STRATA_INDEX_HOT_ROWS", default);
    let (_dir, db) = small_buffers_db();
    let schema = Schema::parse(
        "table comments (id u64, author str, body str) primary key (id) index by_author (author) deferred",
    )
    .expect("schema");
    let t = db.create_table(schema).expect("table");
    let mut id = 0u64;
    while id < rows {
        let mut txn = t.transaction();
        for _ in 0..5000 {
            let author = if id % 1000 == 999 { "alice" } else { "[deleted]" };
            txn.replace(vec![
                Value::U64(id),
                Value::from(author),
                Value::from("some comment text"),
            ]);
            id += 1;
        }
        txn.commit().expect("commit");
    }
    db.compact_range().expect("compact");
    db.wait_for_background().expect("idle");
    let hot = rows - rows / 1000;
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut n = 0u64;
    let mut last_id = None;
    for r in t
        .select("by_author")
        .eq(vec![Value::from("[deleted]")])
        .rows()
        .expect("rows")
    {
        let row = r.expect("row");
        let Value::U64(rid) = row[0] else { panic!("id field") };
        assert!(last_id < Some(rid), "rows in index order (by primary key)");
        last_id = Some(rid);
        n += 1;
    }
    assert_eq!(n, hot);
    let grew = PEAK.load(Ordering::Relaxed) - base;
    let mib = grew as f64 / (1 << 20) as f64;
    eprintln!("{n} rows streamed; peak live heap grew by {mib:.2} MiB");
    // Holding the rows would take n * (3 values + strings) ~ 100 bytes each.
    assert!(
        grew < 4 << 20,
        "peak live heap grew by {mib:.2} MiB while streaming {n} rows"
    );
}
