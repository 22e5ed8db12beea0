//! The bulk insert sweep: for each key universe and insert count, a fresh tree, N random
//! inserts in batches, then flush and wait for compactions; time and write amplification.

use std::path::Path;
use std::time::Instant;

use strata::WriteBatch;

use super::{Config, Shared};
use crate::BenchResult;
use crate::kv::{Rng, Values, make_key};

/// One cell of the sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BulkCell {
    pub universe: u64,
    pub inserts: u64,
    /// Insert and settle time.
    pub seconds: f64,
    /// Of which: waiting for the final flush and compactions.
    pub settle_seconds: f64,
    pub write_amp: f64,
    pub runs: usize,
    pub levels: usize,
    pub bytes_on_disk: u64,
}

/// The sweep of one configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BulkSweep {
    pub config: Config,
    pub cells: Vec<BulkCell>,
}

/// Runs every (universe, inserts) cell for configuration `c`.
pub fn sweep(base: &Path, c: &Config, s: &Shared, inserts: &[u64], universes: &[u64]) -> BenchResult<BulkSweep> {
    let values = Values::new(s.value_size);
    let total: u64 = inserts.iter().sum::<u64>() * universes.len() as u64;
    let pb = crate::report::count_bar(total, &format!("bulk {}", c.name), "inserts");
    let mut cells = Vec::new();
    for &d in universes {
        for &n in inserts {
            let dir = base.join(format!("bulk-{}-{d}-{n}", c.name));
            let db = super::open(&dir, c, s)?;
            let ks = db.default_keyspace();
            let mut rng = Rng::for_thread(0, d as usize, n as usize);
            let mut key = [0u8; 16];
            let start = Instant::now();
            let mut done = 0u64;
            while done < n {
                let m = (n - done).min(s.batch as u64);
                let mut b = WriteBatch::new();
                for j in 0..m {
                    make_key(rng.below(d.max(1)), &mut key);
                    b.put(&ks, &key, values.get(done + j));
                }
                db.write(b)?;
                done += m;
                pb.inc(m);
            }
            let settle = Instant::now();
            db.flush()?;
            db.wait_for_background()?;
            let settle_seconds = settle.elapsed().as_secs_f64();
            let seconds = start.elapsed().as_secs_f64();
            let st = db.stats();
            cells.push(BulkCell {
                universe: d,
                inserts: n,
                seconds,
                settle_seconds,
                write_amp: st.write_amplification,
                runs: super::runs(&db),
                levels: super::levels(&db),
                bytes_on_disk: st.total_bytes(),
            });
            db.close()?;
            std::fs::remove_dir_all(&dir)?;
        }
    }
    pb.finish_and_clear();
    Ok(BulkSweep {
        config: c.clone(),
        cells,
    })
}
