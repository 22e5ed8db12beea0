//! The tables of `tiering` (laid out as the seed's figures) and its JSON file.

use std::path::Path;

use super::bulk::BulkSweep;
use super::queries::QueryResult;
use super::{Config, Shared};
use crate::BenchResult;

/// The seed's Figure 11/12 layout: rows are key universes, columns insert counts; each
/// cell `seconds (write amplification)`.
pub fn print_bulk(b: &BulkSweep, inserts: &[u64], universes: &[u64]) {
    println!();
    println!(
        "Bulk insert, {}: seconds until settled (write amplification)",
        b.config.label()
    );
    let mut header = format!("{:>10}", "universe\\N");
    for n in inserts {
        header.push_str(&format!(" {:>16}", crate::report::thousands(*n)));
    }
    println!("{header}");
    for &d in universes {
        let mut line = format!("{:>10}", crate::report::thousands(d));
        for &n in inserts {
            let cell = b.cells.iter().find(|c| c.universe == d && c.inserts == n);
            line.push_str(&format!(
                " {:>16}",
                cell.map_or("-".to_string(), |c| format!("{:.3} ({:.2})", c.seconds, c.write_amp))
            ));
        }
        println!("{line}");
    }
    if let Some(c) = b.cells.iter().max_by_key(|c| (c.inserts, c.universe)) {
        println!(
            "largest cell: {} runs in {} levels, {} bytes on disk, settle {:.3} s",
            c.runs, c.levels, c.bytes_on_disk, c.settle_seconds
        );
    }
}

/// The seed's Figures 13-16 (milliseconds per batch of operations, one column per
/// configuration), then measured amplification.
pub fn print_queries(rs: &[QueryResult]) {
    let Some(first) = rs.first() else { return };
    println!();
    println!(
        "Queries on {} loaded keys (page cache warm): milliseconds",
        crate::report::thousands(first.keys)
    );
    let mut header = format!("{:<28}", "operations");
    for r in rs {
        header.push_str(&format!(" {:>14}", r.config.name));
    }
    println!("{header}");
    for (i, t) in first.timed.iter().enumerate() {
        let mut line = format!("{:<28}", t.what);
        for r in rs {
            line.push_str(&format!(
                " {:>14}",
                r.timed.get(i).map_or("-".to_string(), |t| format!("{:.3}", t.millis))
            ));
        }
        println!("{line}");
    }
    println!();
    println!("Amplification");
    println!(
        "{:<24} {:>6} {:>6} {:>8} {:>8} {:>9} {:>11} {:>12} {:>12} {:>12}",
        "config", "runs", "levels", "WA load", "SA", "load s", "us/get", "blk/get hit", "blk/get miss", "blk/scan"
    );
    for r in rs {
        println!(
            "{:<24} {:>6} {:>6} {:>8.2} {:>8.2} {:>9.2} {:>11.2} {:>12.2} {:>12.3} {:>12.1}",
            r.config.label(),
            r.runs,
            r.levels,
            r.load_write_amp,
            r.space_amp,
            r.load_seconds,
            r.micros_per_get,
            r.blocks_per_get_hit,
            r.blocks_per_get_miss,
            r.blocks_per_scan
        );
    }
    println!(
        "runs: sorted runs in the tree = runs a point query may probe (bloom filters skip most); blk/...: data \
         blocks looked up per operation, measured with the block cache's hit + miss counters; WA: flush + \
         compaction bytes / user bytes; SA: SSTable bytes / loaded key and value bytes"
    );
}

#[derive(serde::Serialize)]
struct TieringJson<'a> {
    benchmark: &'static str,
    settings: &'a Shared,
    configs: &'a [Config],
    bulk: &'a [BulkSweep],
    queries: &'a [QueryResult],
}

/// Writes everything measured as JSON.
pub fn write(
    path: &Path,
    shared: &Shared,
    configs: &[Config],
    bulk: &[BulkSweep],
    queries: &[QueryResult],
) -> BenchResult<()> {
    crate::report::write_json(
        path,
        &TieringJson {
            benchmark: "tiering",
            settings: shared,
            configs,
            bulk,
            queries,
        },
    )
}
