//! `lethe --kiwi`: secondary range deletes (the KiWi half of the Lethe article). Entries
//! are sorted by a random key and deleted by their creation time (a big-endian u64 at
//! the start of the value, the keyspace's delete key). The operation mix: 0.001 %
//! secondary range deletes (each the oldest 5 % of the loaded creation times), 1 %
//! range queries (100 keys), 50 % point queries (existing keys), the rest inserts;
//! pages of 4 KiB, 256 per file.
//!
//! Every variant runs on a fresh database: a load phase that runs the same mix until
//! the loaded entries are in (so `h = auto` observes the mix), a full compaction, then
//! the measured phase. Variants: Strata with delete tiles of h = 1, 2, ..., 64 and
//! auto, where a secondary range delete is `delete_where` (whole pages dropped by a
//! manifest edit, partly covered ones left to compactions); (a) a full-tree compaction
//! with a filter dropping the qualifying rows after each delete (`delete_where` on
//! h = 1, then `compact_range`), what production engines run every 7-30 days; (b) a
//! scan of the whole keyspace deleting the qualifying rows one by one; (c) RocksDB doing
//! (a) with its compaction filter ([`rocks`], with the `rocksdb` feature; a "skipped" row
//! without it). Every engine runs the same generator ([`Work`]) behind [`Engine`], and
//! its delete's cost is counted the same way from [`Counters`].
//!
//! I/O is counted in 4 KiB pages: pages compactions and flushes read and wrote
//! (their bytes / 4096) plus data blocks foreground reads took from the files (block
//! cache misses).

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use strata::delete_key::{DeleteKey, TileChoice};
use strata::sstable::LOOKUP_COUNTERS;
use strata::table::Table;
use strata::table::catalog::primary_keyspace_name;
use strata::table::schema::Schema;
use strata::table::select::PRIMARY;
use strata::table::value::Value;
use strata::{Db, Keyspace, Options, WriteBatch};

use crate::BenchResult;
use crate::plot::{Panel, Series, line_chart};
use crate::report::{mib, thousands};

#[cfg(feature = "rocksdb")]
mod rocks;

const PAGE: u64 = 4096;
const PAGES_PER_FILE: u64 = 256;
const SRD_SHARE: f64 = 0.000_01;
const RANGE_SHARE: f64 = 0.01;
const POINT_SHARE: f64 = 0.5;
const RANGE_LEN: usize = 100;
/// Share of the loaded creation times one secondary range delete removes.
const SRD_WIDTH: f64 = 0.05;

/// Settings of a `--kiwi` run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KiwiShape {
    /// Entries loaded before the measured phase.
    pub entries: u64,
    /// Operations of the measured phase.
    pub ops: u64,
    /// Bytes of an entry (16-byte key + value).
    pub entry_size: usize,
    /// Seed.
    pub seed: u64,
}

/// How one variant executes a secondary range delete.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
enum Mode {
    /// `delete_where` on delete tiles of this h.
    Tiles(Option<u32>),
    /// (a) `delete_where` on h = 1, then a full compaction.
    FullCompaction,
    /// (b) a scan deleting qualifying rows one at a time.
    RowByRow,
    /// `Table::delete_where` on a table with the delete key and a secondary index, its
    /// primary in delete tiles of this h; deferred or eager index maintenance.
    Table {
        /// Pages per tile.
        h: u32,
        /// Deferred index maintenance (else eager).
        deferred: bool,
    },
}

/// What one variant measured.
#[derive(Debug, Clone, Serialize)]
pub struct KiwiResult {
    /// Name in tables and plots.
    pub name: String,
    /// The tile size (`None` for the baselines).
    pub h: Option<u32>,
    /// What it ran on: "keyspace", "table eager" or "table deferred".
    pub store: &'static str,
    /// The h the cost model chose for each level (auto).
    pub auto_levels: Vec<u32>,
    /// Secondary range deletes in the measured phase.
    pub srds: u64,
    /// Per secondary range delete: pages read (by the delete itself).
    pub srd_pages_read: f64,
    /// Per secondary range delete: pages dropped whole, unread.
    pub srd_pages_dropped: f64,
    /// Per secondary range delete: pages the delete covers in part (read and rewritten
    /// by a later compaction; by the delete itself in the baselines).
    pub srd_pages_partial: f64,
    /// Per secondary range delete: pages rewritten by the delete itself.
    pub srd_pages_rewritten: f64,
    /// Per secondary range delete: bytes written by the delete itself.
    pub srd_bytes_written: f64,
    /// Per secondary range delete: milliseconds.
    pub srd_ms: f64,
    /// Per point lookup: data pages searched.
    pub lookup_pages: f64,
    /// Per point lookup: bloom filters probed.
    pub lookup_probes: f64,
    /// Per point lookup: microseconds.
    pub lookup_us: f64,
    /// Per range query: data blocks touched.
    pub range_blocks: f64,
    /// Pages read and written in the measured phase (all operations and background work).
    pub total_io_pages: u64,
    /// Of which by the secondary range deletes themselves.
    pub srd_io_pages: u64,
    /// Per secondary range delete: its own I/O plus two page I/Os (read, rewrite) for
    /// each page it covers in part (the article's accounting of a delete's cost, which
    /// assumes a page can be rewritten alone).
    pub srd_io_with_partial: f64,
    /// Pages the background rewrites of files still holding killed entries read and
    /// wrote in the measured phase (`Stats::delete_rewrite_bytes_*`; part of
    /// `total_io_pages`).
    pub rewrite_io_pages: u64,
    /// Per secondary range delete: its own I/O plus its share of those rewrites (what
    /// it really costs to make it physical).
    pub srd_io_measured: f64,
    /// Entries in files at the end that the deletes killed but no compaction has
    /// removed yet (disk entries minus live keys, tombstones and versions included).
    pub leftover_entries: i64,
    /// Seconds of the measured phase.
    pub seconds: f64,
}

fn key(rng: &mut StdRng) -> [u8; 16] {
    rng.r#gen()
}

fn value(ts: u64, size: usize) -> Vec<u8> {
    let mut v = ts.to_be_bytes().to_vec();
    v.resize(size.max(9), b'v');
    v
}

fn options() -> Options {
    Options {
        block_size: PAGE as usize,
        target_file_size: PAGE * PAGES_PER_FILE,
        memtable_budget: 2 << 20,
        size_ratio: 10.0,
        runs_per_level: 1,
        bloom_fpr: 0.01,
        block_cache_bytes: 8 << 20,
        ..Options::default()
    }
}

/// Cumulative counters of an engine: bytes flushes and compactions read and wrote, data
/// blocks foreground reads took from the files (block cache misses), and what Strata's
/// delete tiles did (zero for engines without them).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    compaction_read: u64,
    compaction_written: u64,
    flush_written: u64,
    cache_misses: u64,
    /// Bytes the background rewrites of files still holding entries a secondary range
    /// delete killed read and wrote (part of the compaction bytes).
    rewrite_read: u64,
    rewrite_written: u64,
    pages_dropped: u64,
    pages_partial: u64,
}

impl Counters {
    /// Foreground and background pages read and written.
    fn io_pages(&self) -> u64 {
        (self.compaction_read + self.compaction_written + self.flush_written) / PAGE + self.cache_misses
    }

    /// Pages the background rewrites read and wrote.
    fn rewrite_pages(&self) -> u64 {
        (self.rewrite_read + self.rewrite_written) / PAGE
    }
}

/// Point-lookup counters of the calling thread's reads so far.
#[derive(Debug, Clone, Copy, Default)]
struct LookupCounters {
    /// Data pages point lookups searched.
    pages: u64,
    /// Bloom filters point lookups probed.
    probes: u64,
}

/// What the mix runs against: Strata in one of its delete modes, or (with the `rocksdb`
/// feature) RocksDB with a compaction filter ([`rocks`]).
trait Engine {
    fn put(&self, k: &[u8; 16], ts: u64, size: usize) -> BenchResult<()>;
    fn get(&self, k: &[u8; 16]) -> BenchResult<bool>;
    /// Reads up to [`RANGE_LEN`] entries from `from` on.
    fn range(&self, from: &[u8; 16]) -> BenchResult<usize>;
    /// One secondary range delete: every entry whose delete key lies in `lo..hi`.
    fn delete_where(&self, lo: u64, hi: u64) -> BenchResult<()>;
    fn counters(&self) -> Counters;
    /// Read per point lookup (cheap: read around every one).
    fn lookup_counters(&self) -> LookupCounters;
    /// Data blocks reads touched so far (cache hits and misses).
    fn blocks_touched(&self) -> u64;
    /// Fails unless every key of `gone` reads absent and every key of `kept` present
    /// (run after each measured delete by engines whose delete the benchmark builds
    /// itself; free of I/O accounting).
    fn check(&self, _gone: &[[u8; 16]], _kept: &[[u8; 16]]) -> BenchResult<()> {
        Ok(())
    }
    /// A full compaction, waited for.
    fn compact_all(&self) -> BenchResult<()>;
    /// Waits for background flushes and compactions.
    fn wait(&self) -> BenchResult<()>;
    /// Entries in files minus live keys, after a flush (see [`KiwiResult::leftover_entries`]).
    fn leftover(&self) -> BenchResult<i64>;
}

/// What the workload runs on in Strata: a keyspace, or a table with an index.
enum Store {
    Kv(Keyspace),
    Table(Table),
}

/// Strata running one delete mode.
struct StrataEngine {
    db: Db,
    store: Store,
    ks_name: String,
    mode: Mode,
}

fn id_of(k: &[u8; 16]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[..8]);
    u64::from_be_bytes(b)
}

impl Engine for StrataEngine {
    fn put(&self, k: &[u8; 16], ts: u64, size: usize) -> BenchResult<()> {
        match &self.store {
            Store::Kv(ks) => ks.put(k, &value(ts, size))?,
            Store::Table(t) => t.replace(vec![
                Value::U64(id_of(k)),
                Value::U64(ts),
                Value::U64(u64::from(k[8]) << 2 | u64::from(k[9] & 3)),
                Value::Bytes(vec![b'v'; size.saturating_sub(40)]),
            ])?,
        }
        Ok(())
    }

    fn get(&self, k: &[u8; 16]) -> BenchResult<bool> {
        Ok(match &self.store {
            Store::Kv(ks) => ks.get(k)?.is_some(),
            Store::Table(t) => t.get(&[Value::U64(id_of(k))])?.is_some(),
        })
    }

    fn range(&self, from: &[u8; 16]) -> BenchResult<usize> {
        Ok(match &self.store {
            Store::Kv(ks) => ks.scan(&from[..]..)?.take(RANGE_LEN).count(),
            Store::Table(t) => t
                .select(PRIMARY)
                .range(Bound::Included(Value::U64(id_of(from))), Bound::Unbounded)
                .limit(RANGE_LEN as u64)
                .count()? as usize,
        })
    }

    fn delete_where(&self, lo: u64, hi: u64) -> BenchResult<()> {
        match (self.mode, &self.store) {
            (Mode::Tiles(_), Store::Kv(ks)) => ks.delete_where(&lo.to_be_bytes(), &hi.to_be_bytes())?,
            (Mode::Table { .. }, Store::Table(t)) => t.delete_where("ts", Value::U64(lo)..Value::U64(hi))?,
            (Mode::FullCompaction, Store::Kv(ks)) => {
                ks.delete_where(&lo.to_be_bytes(), &hi.to_be_bytes())?;
                ks.compact_range(..)?;
            }
            (Mode::RowByRow, Store::Kv(ks)) => {
                let mut b = WriteBatch::new();
                for item in ks.scan(..)? {
                    let (k, v) = item?;
                    let ts = u64::from_be_bytes(v[..8].try_into()?);
                    if (lo..hi).contains(&ts) {
                        b.delete(ks, &k);
                        if b.len() >= 1000 {
                            self.db.write(std::mem::take(&mut b))?;
                        }
                    }
                }
                if !b.is_empty() {
                    self.db.write(b)?;
                }
            }
            _ => return Err("the table runs delete tiles; the other modes a keyspace".into()),
        }
        Ok(())
    }

    fn counters(&self) -> Counters {
        let s = self.db.stats();
        Counters {
            compaction_read: s.compaction_bytes_read,
            compaction_written: s.compaction_bytes_written,
            flush_written: s.flush_bytes_written,
            cache_misses: s.block_cache_misses,
            rewrite_read: s.delete_rewrite_bytes_read,
            rewrite_written: s.delete_rewrite_bytes_written,
            pages_dropped: s.delete_pages_dropped,
            pages_partial: s.delete_pages_partial,
        }
    }

    fn lookup_counters(&self) -> LookupCounters {
        LookupCounters {
            pages: LOOKUP_COUNTERS.pages_read.load(Ordering::Relaxed),
            probes: LOOKUP_COUNTERS.bloom_probes.load(Ordering::Relaxed),
        }
    }

    fn blocks_touched(&self) -> u64 {
        let s = self.db.stats();
        s.block_cache_hits + s.block_cache_misses
    }

    fn compact_all(&self) -> BenchResult<()> {
        self.db.compact_range()?;
        self.wait()
    }

    fn wait(&self) -> BenchResult<()> {
        self.db.wait_for_background()?;
        Ok(())
    }

    fn leftover(&self) -> BenchResult<i64> {
        // Counted from the files alone.
        self.db.flush()?;
        let stats = self.db.stats();
        let live = match &self.store {
            Store::Kv(ks) => ks.scan(..)?.count() as i64,
            Store::Table(t) => t.count()? as i64,
        };
        let on_disk = stats.keyspace(&self.ks_name).map_or(0, |k| k.entries()) as i64;
        Ok(on_disk - live)
    }
}

/// The workload's state: the keys written, the creation-time clock, the next delete.
struct Work {
    rng: StdRng,
    /// Every key written, in creation order: `keys[i]` has creation time `i`.
    keys: Vec<[u8; 16]>,
    ts: u64,
    next_cut: u64,
    cut_step: u64,
    entry_size: usize,
    /// In the load phase: its secondary range deletes name an empty range, so the
    /// counters see the mix (for `h = auto`) while the loaded tree stays whole (its
    /// deletes would otherwise remove `1e-6 * entries^2` entries: all of a large tree).
    loading: bool,
    /// Picks the keys [`Engine::check`] reads (apart from `rng`, so that every engine
    /// runs the same operations).
    check_rng: StdRng,
}

#[derive(Default)]
struct Tally {
    srds: u64,
    srd_read: u64,
    srd_dropped: u64,
    srd_partial: u64,
    srd_rewritten: u64,
    srd_written: u64,
    srd_io: u64,
    srd_secs: f64,
    lookups: u64,
    lookup_pages: u64,
    lookup_probes: u64,
    lookup_secs: f64,
    ranges: u64,
    range_blocks: u64,
}

/// Keys [`Engine::check`] reads after each measured delete: this many deleted, as many kept.
const CHECK_SAMPLE: usize = 100;

impl Work {
    fn new(shape: &KiwiShape) -> Work {
        Work {
            rng: StdRng::seed_from_u64(shape.seed),
            keys: Vec::with_capacity((shape.entries + shape.ops) as usize),
            ts: 0,
            next_cut: 0,
            cut_step: ((shape.entries as f64 * SRD_WIDTH) as u64).max(1),
            entry_size: shape.entry_size.max(32),
            loading: true,
            check_rng: StdRng::seed_from_u64(shape.seed ^ 0xC4EC),
        }
    }

    fn insert(&mut self, e: &dyn Engine) -> BenchResult<()> {
        let k = key(&mut self.rng);
        e.put(&k, self.ts, self.entry_size - 16)?;
        self.ts += 1;
        self.keys.push(k);
        Ok(())
    }

    fn srd(&mut self, e: &dyn Engine, t: &mut Tally) -> BenchResult<()> {
        let (lo, hi) = if self.loading {
            (u64::MAX - 1, u64::MAX)
        } else {
            self.next_cut += self.cut_step;
            (self.next_cut - self.cut_step, self.next_cut)
        };
        let before = e.counters();
        let start = Instant::now();
        e.delete_where(lo, hi)?;
        t.srd_secs += start.elapsed().as_secs_f64();
        let after = e.counters();
        t.srds += 1;
        // Background rewrites that ran during the call are counted with the others
        // (`rewrite_io_pages`), not as the delete's own I/O.
        let rw_read = after.rewrite_read - before.rewrite_read;
        let rw_written = after.rewrite_written - before.rewrite_written;
        t.srd_io +=
            (after.io_pages() - before.io_pages()).saturating_sub(after.rewrite_pages() - before.rewrite_pages());
        t.srd_dropped += after.pages_dropped - before.pages_dropped;
        t.srd_partial += after.pages_partial - before.pages_partial;
        let read = (after.compaction_read - before.compaction_read - rw_read) / PAGE
            + (after.cache_misses - before.cache_misses);
        let written = after.compaction_written - before.compaction_written - rw_written + after.flush_written
            - before.flush_written;
        t.srd_read += read;
        t.srd_rewritten += written / PAGE;
        t.srd_written += written;
        if !self.loading {
            let created = self.keys.len() as u64;
            let mut sample = |from: u64, to: u64| -> Vec<[u8; 16]> {
                let to = to.min(created);
                if from >= to {
                    return Vec::new();
                }
                (0..CHECK_SAMPLE)
                    .map(|_| self.keys[self.check_rng.gen_range(from..to) as usize])
                    .collect()
            };
            // Everything deleted so far reads absent; everything created since the
            // newest cut present.
            let gone = sample(0, hi);
            let kept = sample(hi, created);
            e.check(&gone, &kept)?;
        }
        Ok(())
    }

    fn point(&mut self, e: &dyn Engine, t: &mut Tally) -> BenchResult<()> {
        let k = self.keys[self.rng.gen_range(0..self.keys.len())];
        let c0 = e.lookup_counters();
        let start = Instant::now();
        std::hint::black_box(e.get(&k)?);
        t.lookup_secs += start.elapsed().as_secs_f64();
        let c1 = e.lookup_counters();
        t.lookups += 1;
        t.lookup_pages += c1.pages - c0.pages;
        t.lookup_probes += c1.probes - c0.probes;
        Ok(())
    }

    fn range(&mut self, e: &dyn Engine, t: &mut Tally) -> BenchResult<()> {
        let from = key(&mut self.rng);
        let b0 = e.blocks_touched();
        std::hint::black_box(e.range(&from)?);
        t.ranges += 1;
        t.range_blocks += e.blocks_touched() - b0;
        Ok(())
    }

    /// Runs `ops` operations of the mix; `srds` secondary range deletes spread evenly.
    fn run(&mut self, e: &dyn Engine, ops: u64, srds: u64, t: &mut Tally) -> BenchResult<()> {
        let every = ops / (srds + 1);
        for i in 1..=ops {
            if srds > 0 && every > 0 && i % every == 0 && i / every <= srds {
                self.srd(e, t)?;
                continue;
            }
            let x: f64 = self.rng.r#gen();
            if x < RANGE_SHARE {
                self.range(e, t)?;
            } else if x < RANGE_SHARE + POINT_SHARE && !self.keys.is_empty() {
                self.point(e, t)?;
            } else {
                self.insert(e)?;
            }
        }
        Ok(())
    }
}

/// The measured phase of one engine.
struct Measured {
    t: Tally,
    /// Pages read and written (all operations and background work).
    io_pages: u64,
    /// Of which by the background rewrites of files still holding killed entries.
    rewrite_io_pages: u64,
    seconds: f64,
    leftover: i64,
}

/// Loads `e` with the mix (the deletes it issues name an empty range and are not
/// measured), compacts it fully, then runs and measures the mix.
fn load_and_measure(e: &dyn Engine, shape: &KiwiShape) -> BenchResult<Measured> {
    let mut w = Work::new(shape);
    let load_ops = (shape.entries as f64 / (1.0 - SRD_SHARE - RANGE_SHARE - POINT_SHARE)) as u64;
    let load_srds = (load_ops as f64 * SRD_SHARE).round() as u64;
    w.run(e, load_ops, load_srds, &mut Tally::default())?;
    w.loading = false;
    e.compact_all()?;
    let srds = ((shape.ops as f64 * SRD_SHARE).round() as u64).max(1);
    let mut t = Tally::default();
    let c0 = e.counters();
    let start = Instant::now();
    w.run(e, shape.ops, srds, &mut t)?;
    e.wait()?;
    let seconds = start.elapsed().as_secs_f64();
    let c1 = e.counters();
    Ok(Measured {
        t,
        io_pages: c1.io_pages() - c0.io_pages(),
        rewrite_io_pages: c1.rewrite_pages() - c0.rewrite_pages(),
        seconds,
        leftover: e.leftover()?,
    })
}

/// `m`'s figures as a baseline's: the deletes finish their work themselves (a full
/// compaction's partly covered pages are among those it read and wrote), so their I/O
/// is all in the tally.
fn baseline_result(name: &str, m: &Measured) -> KiwiResult {
    let t = &m.t;
    let per = |x: u64, n: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    KiwiResult {
        name: name.to_string(),
        h: None,
        store: "keyspace",
        auto_levels: Vec::new(),
        srds: t.srds,
        srd_pages_read: per(t.srd_read, t.srds),
        srd_pages_dropped: per(t.srd_dropped, t.srds),
        srd_pages_partial: per(t.srd_partial, t.srds),
        srd_pages_rewritten: per(t.srd_rewritten, t.srds),
        srd_bytes_written: per(t.srd_written, t.srds),
        srd_ms: 1000.0 * t.srd_secs / t.srds.max(1) as f64,
        lookup_pages: per(t.lookup_pages, t.lookups),
        lookup_probes: per(t.lookup_probes, t.lookups),
        lookup_us: 1e6 * t.lookup_secs / t.lookups.max(1) as f64,
        range_blocks: per(t.range_blocks, t.ranges),
        total_io_pages: m.io_pages,
        srd_io_pages: t.srd_io,
        srd_io_with_partial: per(t.srd_io, t.srds),
        rewrite_io_pages: m.rewrite_io_pages,
        srd_io_measured: per(t.srd_io, t.srds),
        leftover_entries: m.leftover,
        seconds: m.seconds,
    }
}

fn run_variant(dir: &Path, name: &str, mode: Mode, shape: &KiwiShape) -> BenchResult<KiwiResult> {
    let db = Db::open(dir, options())?;
    let h = match mode {
        Mode::Tiles(Some(h)) | Mode::Table { h, .. } => Some(TileChoice::fixed(h)?),
        Mode::Tiles(None) => Some(TileChoice::Auto),
        Mode::FullCompaction => Some(TileChoice::Fixed(1)),
        Mode::RowByRow => None,
    };
    let (store, ks_name) = match mode {
        Mode::Table { deferred, .. } => {
            let schema = Schema::parse(&format!(
                "table kiwi (id u64, ts u64, grp u64, pad bytes) primary key (id) index by_grp (grp) \
                 delete key (ts) {}",
                if deferred { "deferred" } else { "eager" }
            ))?;
            let t = db.create_table(schema)?;
            if let Some(h) = h {
                t.set_delete_key("ts", h)?;
            }
            (Store::Table(t), primary_keyspace_name("kiwi"))
        }
        _ => {
            let ks = db.create_keyspace("kiwi")?;
            if let Some(h) = h {
                ks.set_delete_key(DeleteKey::new(0, 8)?, h)?;
            }
            (Store::Kv(ks), "kiwi".to_string())
        }
    };
    let e = StrataEngine {
        db,
        store,
        ks_name,
        mode,
    };
    let m = load_and_measure(&e, shape)?;
    let base = baseline_result(name, &m);
    let per = |x: u64| if m.t.srds == 0 { 0.0 } else { x as f64 / m.t.srds as f64 };
    let auto_levels = match mode {
        Mode::Tiles(None) => {
            e.db.stats()
                .keyspace(&e.ks_name)
                .map(|k| k.levels.iter().filter_map(|l| l.tile_h).collect())
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let r = match mode {
        // (a) stands for a compaction with a filter: the background rewrites its
        // `delete_where` starts before `compact_range` takes over are not part of it.
        Mode::FullCompaction => KiwiResult {
            total_io_pages: m.io_pages.saturating_sub(m.rewrite_io_pages),
            ..base
        },
        Mode::RowByRow => KiwiResult {
            srd_io_measured: per(m.t.srd_io + m.rewrite_io_pages),
            ..base
        },
        Mode::Tiles(h) => KiwiResult {
            h,
            auto_levels,
            srd_io_with_partial: per(m.t.srd_io + 2 * m.t.srd_partial),
            srd_io_measured: per(m.t.srd_io + m.rewrite_io_pages),
            ..base
        },
        Mode::Table { h, deferred } => KiwiResult {
            h: Some(h),
            store: if deferred { "table deferred" } else { "table eager" },
            srd_io_with_partial: per(m.t.srd_io + 2 * m.t.srd_partial),
            srd_io_measured: per(m.t.srd_io + m.rewrite_io_pages),
            ..base
        },
    };
    e.db.close()?;
    Ok(r)
}

#[derive(Serialize)]
struct KiwiJson<'a> {
    benchmark: &'static str,
    shape: KiwiShape,
    pages_per_file: u64,
    page_bytes: u64,
    mix: [f64; 3],
    rocksdb: &'static str,
    results: &'a [KiwiResult],
    targets: Option<&'a KiwiTargets>,
}

/// The targets, evaluated.
#[derive(Debug, Serialize)]
pub struct KiwiTargets {
    /// The fixed h with the least measured I/O per secondary range delete (its own
    /// I/O and the background rewrites, [`KiwiResult::srd_io_measured`]).
    pub best_h: u32,
    /// 1 - that I/O at best h / the full-tree compaction's (target >= 0.76).
    pub srd_io_saving_vs_full_compaction: f64,
    /// The same under the article's accounting (two page I/Os per partly covered page,
    /// [`KiwiResult::srd_io_with_partial`]), at the h best by it.
    pub srd_io_saving_article_accounting: f64,
    /// 1 - the whole workload's I/O at best h / the full-tree compaction run's.
    pub total_io_saving_vs_full_compaction: f64,
    /// Point-lookup time at best h / at h = 1 (target <= 1.2).
    pub lookup_time_ratio: f64,
    /// Point-lookup pages at best h / at h = 1.
    pub lookup_pages_ratio: f64,
    /// Point-lookup time of the second h = 1 run / the first (A/A control), if run.
    pub lookup_time_aa: Option<f64>,
    /// The fixed h with the least I/O of the whole workload (what the cost model
    /// minimises).
    pub best_total_h: u32,
    /// The whole workload's I/O of auto / of that h (target <= 1.1).
    pub auto_vs_best_total: f64,
}

fn targets(rs: &[KiwiResult]) -> Option<KiwiTargets> {
    let fixed: Vec<&KiwiResult> = rs
        .iter()
        .filter(|r| r.store == "keyspace" && r.h.is_some() && !r.name.contains("A/A"))
        .collect();
    let best = fixed
        .iter()
        .min_by(|a, b| a.srd_io_measured.total_cmp(&b.srd_io_measured))?;
    let best_article = fixed
        .iter()
        .min_by(|a, b| a.srd_io_with_partial.total_cmp(&b.srd_io_with_partial))?;
    let best_total = fixed.iter().min_by_key(|r| r.total_io_pages)?;
    let one = fixed.iter().find(|r| r.h == Some(1))?;
    let aa = rs.iter().find(|r| r.name.contains("A/A"));
    let full = rs.iter().find(|r| r.name.starts_with("(a)"))?;
    let auto = rs.iter().find(|r| r.name == "h = auto")?;
    Some(KiwiTargets {
        best_h: best.h?,
        srd_io_saving_vs_full_compaction: 1.0 - best.srd_io_measured / full.srd_io_measured.max(1.0),
        srd_io_saving_article_accounting: 1.0 - best_article.srd_io_with_partial / full.srd_io_with_partial.max(1.0),
        total_io_saving_vs_full_compaction: 1.0 - best.total_io_pages as f64 / full.total_io_pages.max(1) as f64,
        lookup_time_ratio: best.lookup_us / one.lookup_us.max(1e-9),
        lookup_pages_ratio: best.lookup_pages / one.lookup_pages.max(1e-9),
        lookup_time_aa: aa.map(|a| a.lookup_us / one.lookup_us.max(1e-9)),
        best_total_h: best_total.h?,
        auto_vs_best_total: auto.total_io_pages as f64 / best_total.total_io_pages.max(1) as f64,
    })
}

fn plot(path: &Path, rs: &[KiwiResult]) -> BenchResult<()> {
    let fixed: Vec<&KiwiResult> = rs
        .iter()
        .filter(|r| r.store == "keyspace" && r.h.is_some() && !r.name.contains("A/A"))
        .collect();
    let x = |r: &KiwiResult| f64::from(r.h.unwrap_or(1)).log2();
    let line = |name: &str, color: usize, f: &dyn Fn(&KiwiResult) -> f64| Series {
        name: name.to_string(),
        color,
        points: fixed.iter().map(|r| (x(r), f(r))).collect(),
    };
    let flat = |name: &str, color: usize, v: f64| Series {
        name: name.to_string(),
        color,
        points: vec![(0.0, v), (fixed.iter().map(|r| x(r)).fold(0.0, f64::max), v)],
    };
    let full = rs.iter().find(|r| r.name.starts_with("(a)"));
    let mut d = vec![
        line("pages dropped whole", 0, &|r| r.srd_pages_dropped),
        line("pages covered in part", 1, &|r| r.srd_pages_partial),
        line("I/O per delete, measured (with the file rewrites)", 4, &|r| {
            r.srd_io_measured
        }),
        line("I/O per delete, 2 per partly covered page", 3, &|r| {
            r.srd_io_with_partial
        }),
    ];
    if let Some(f) = full {
        d.push(flat("(a) full compaction: I/O per delete", 2, f.srd_io_measured));
    }
    let rocks = rs.iter().find(|r| r.name == ROCKS_NAME);
    if let Some(c) = rocks {
        d.push(flat(
            "(c) RocksDB, compaction filter: I/O per delete",
            5,
            c.srd_io_measured,
        ));
    }
    let mut e = vec![line("delete tiles", 0, &|r| r.total_io_pages as f64)];
    if let Some(f) = full {
        e.push(flat("(a) full compaction", 2, f.total_io_pages as f64));
    }
    if let Some(b) = rs.iter().find(|r| r.name.starts_with("(b)")) {
        e.push(flat("(b) row by row", 3, b.total_io_pages as f64));
    }
    if let Some(c) = rocks {
        e.push(flat("(c) RocksDB, compaction filter", 5, c.total_io_pages as f64));
    }
    let f_panel = vec![
        line("bloom probes / lookup", 4, &|r| r.lookup_probes),
        line("pages read / lookup", 0, &|r| r.lookup_pages),
    ];
    line_chart(
        path,
        "log2 h (pages per delete tile)",
        &[
            Panel {
                title: "D: pages per secondary range delete".into(),
                y_label: "pages".into(),
                series: d,
            },
            Panel {
                title: "E: total I/O of the workload (pages)".into(),
                y_label: "pages".into(),
                series: e,
            },
            Panel {
                title: "F: point-lookup cost: hashing and I/O".into(),
                y_label: "per lookup".into(),
                series: f_panel,
            },
        ],
    )
}

/// Runs `lethe --kiwi`.
/// The tile size of the table variants (the article's optimum).
const TABLE_H: u32 = 8;

/// Who runs a variant.
#[derive(Debug, Clone, Copy)]
enum Runner {
    Strata(Mode),
    /// (c) RocksDB doing (a) with its compaction filter ([`rocks`]).
    Rocks,
}

/// The name of variant (c).
const ROCKS_NAME: &str = "(c) RocksDB, compaction filter";

/// Every variant: its key for `--kiwi-only`, its name, who runs it.
fn variants() -> Vec<(String, String, Runner)> {
    let mut v: Vec<(String, String, Mode)> = [1u32, 2, 4, 8, 16, 32, 64]
        .iter()
        .map(|&h| (h.to_string(), format!("h = {h}"), Mode::Tiles(Some(h))))
        .collect();
    v.push(("aa".into(), "h = 1 (A/A)".into(), Mode::Tiles(Some(1))));
    v.push(("auto".into(), "h = auto".into(), Mode::Tiles(None)));
    v.push(("a".into(), "(a) full-tree compaction".into(), Mode::FullCompaction));
    v.push(("b".into(), "(b) scan, delete row by row".into(), Mode::RowByRow));
    for deferred in [false, true] {
        let m = if deferred { "deferred" } else { "eager" };
        v.push((
            format!("table-{m}"),
            format!("table + index, {m}, h = {TABLE_H}"),
            Mode::Table { h: TABLE_H, deferred },
        ));
    }
    let mut v: Vec<(String, String, Runner)> = v.into_iter().map(|(k, n, m)| (k, n, Runner::Strata(m))).collect();
    v.push(("c".into(), ROCKS_NAME.into(), Runner::Rocks));
    v
}

/// Why (c) is missing from a build without the `rocksdb` feature.
const ROCKS_SKIPPED: &str = "skipped: built without the rocksdb feature";

/// Runs variant (c) in `dir` (`None`: skipped, built without the `rocksdb` feature).
fn run_rocks(dir: &Path, shape: &KiwiShape) -> BenchResult<Option<KiwiResult>> {
    #[cfg(feature = "rocksdb")]
    return Ok(Some(rocks::run_variant(dir, ROCKS_NAME, shape)?));
    #[cfg(not(feature = "rocksdb"))]
    {
        let _ = (dir, shape);
        Ok(None)
    }
}

/// Runs `lethe --kiwi`; `only` lists the variants to run (keys of [`variants`]).
pub fn run(shape: KiwiShape, base: &Path, json: &Path, png: &Path, quick: bool, only: &[String]) -> BenchResult<()> {
    println!("strata-bench lethe --kiwi: secondary range deletes with delete tiles (KiWi)");
    println!(
        "  {} entries of {} bytes ({}) loaded with the mix, then {} operations: {} % secondary range deletes \
         (each the oldest {} % of the loaded creation times), {} % range queries ({RANGE_LEN} keys), {} % point \
         queries, the rest inserts; pages {PAGE} bytes, {PAGES_PER_FILE} per file, bloom 1 %, block cache 8 MiB",
        thousands(shape.entries),
        shape.entry_size,
        mib(shape.entries * shape.entry_size as u64),
        thousands(shape.ops),
        100.0 * SRD_SHARE,
        100.0 * SRD_WIDTH,
        100.0 * RANGE_SHARE,
        100.0 * POINT_SHARE,
    );
    if cfg!(feature = "rocksdb") {
        println!(
            "  (c) RocksDB: the same mix and options, a compaction filter and a full compact_range per delete \
             (pages / probes per lookup from its perf context)"
        );
    } else {
        println!("  (c) RocksDB with a compaction filter: {ROCKS_SKIPPED}");
    }
    if quick {
        println!("  NOTE: --quick is a smoke run, not the benchmark's setting");
    }
    let mut results = Vec::new();
    let mut rocks_status = "not selected";
    for (i, (k, name, runner)) in variants().into_iter().enumerate() {
        if !only.is_empty() && !only.contains(&k) {
            continue;
        }
        let dir = base.join(format!("kiwi-{i}"));
        let r = match runner {
            Runner::Strata(mode) => run_variant(&dir, &name, mode, &shape)?,
            Runner::Rocks => match run_rocks(&dir, &shape)? {
                Some(r) => {
                    rocks_status = "run";
                    r
                }
                None => {
                    rocks_status = ROCKS_SKIPPED;
                    continue;
                }
            },
        };
        eprintln!(
            "  {name}: {:.1} s, total I/O {} pages (load average {})",
            r.seconds,
            thousands(r.total_io_pages),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
        );
        results.push(r);
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!();
    println!(
        "{:<32} {:>5} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>8} {:>11} {:>9}",
        "variant",
        "SRDs",
        "read",
        "dropped",
        "partial",
        "written",
        "rewrite",
        "SRD I/O",
        "art. I/O",
        "SRD ms",
        "lk pg",
        "probes",
        "lk us",
        "total I/O",
        "leftover"
    );
    for r in &results {
        println!(
            "{:<32} {:>5} {:>7.0} {:>8.1} {:>8.1} {:>9} {:>9.0} {:>9.0} {:>9.0} {:>8.1} {:>7.3} {:>7.2} {:>8.2} {:>11} {:>9}",
            r.name,
            r.srds,
            r.srd_pages_read,
            r.srd_pages_dropped,
            r.srd_pages_partial,
            mib(r.srd_bytes_written as u64),
            r.rewrite_io_pages as f64 / r.srds.max(1) as f64,
            r.srd_io_measured,
            r.srd_io_with_partial,
            r.srd_ms,
            r.lookup_pages,
            r.lookup_probes,
            r.lookup_us,
            thousands(r.total_io_pages),
            r.leftover_entries
        );
    }
    if rocks_status == ROCKS_SKIPPED {
        println!("{ROCKS_NAME:<32} {ROCKS_SKIPPED}");
    }
    let full = results.iter().find(|r| r.name.starts_with("(a)"));
    let rocks = results.iter().find(|r| r.name == ROCKS_NAME);
    if let (Some(a), Some(c)) = (full, rocks) {
        println!(
            "(c) / (a): SRD I/O per delete {:.2}x, workload I/O {:.2}x, time per point lookup {:.2}x",
            c.srd_io_measured / a.srd_io_measured.max(1.0),
            c.total_io_pages as f64 / a.total_io_pages.max(1) as f64,
            c.lookup_us / a.lookup_us.max(1e-9)
        );
    }
    if let Some(r) = results.iter().find(|r| r.name == "h = auto") {
        println!("auto chose h per level: {:?}", r.auto_levels);
    }
    let t = targets(&results);
    println!();
    match &t {
        None => println!("targets: not evaluated (needs h = 1, another fixed h, auto and (a) in one run)"),
        Some(t) => println!(
            "targets: best fixed h = {} for the deletes' measured I/O (own + file rewrites): {:.1} % below the \
             full-tree compaction's per delete (target >= 76 %, aim 90 %; {:.1} % under the article's accounting), \
             the whole workload's I/O {:.1} % below; point lookups {:.2}x the time and {:.2}x the pages of h = 1 \
             (target <= 1.2x; A/A h = 1 rerun {}); for the whole workload's I/O the best fixed h is {} and auto is \
             {:.2}x it (target <= 1.10x)",
            t.best_h,
            100.0 * t.srd_io_saving_vs_full_compaction,
            100.0 * t.srd_io_saving_article_accounting,
            100.0 * t.total_io_saving_vs_full_compaction,
            t.lookup_time_ratio,
            t.lookup_pages_ratio,
            t.lookup_time_aa.map_or("not run".to_string(), |a| format!("{a:.2}x")),
            t.best_total_h,
            t.auto_vs_best_total
        ),
    }
    let rep = KiwiJson {
        benchmark: "lethe-kiwi",
        shape,
        pages_per_file: PAGES_PER_FILE,
        page_bytes: PAGE,
        mix: [SRD_SHARE, RANGE_SHARE, POINT_SHARE],
        rocksdb: rocks_status,
        results: &results,
        targets: t.as_ref(),
    };
    crate::report::write_json(json, &rep)?;
    println!("json: {}", json.display());
    match plot(png, &results) {
        Ok(()) => println!("plot: {}", png.display()),
        Err(e) => println!("plot: not written ({e})"),
    }
    Ok(())
}

/// A run small enough for a unit test: one measured delete.
#[cfg(test)]
fn small_shape() -> KiwiShape {
    KiwiShape {
        entries: 3000,
        ops: 4000,
        entry_size: 256,
        seed: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_drops_pages_and_hides_the_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shape = small_shape();
        let tiles = run_variant(&dir.path().join("a"), "h = 64", Mode::Tiles(Some(64)), &shape).expect("run");
        let full = run_variant(&dir.path().join("b"), "(a)", Mode::FullCompaction, &shape).expect("run");
        assert_eq!(tiles.srds, 1);
        assert!(tiles.srd_pages_dropped > 0.0, "{tiles:?}");
        assert_eq!(tiles.srd_bytes_written, 0.0, "dropping pages writes no data");
        assert!(full.srd_pages_read > tiles.srd_pages_read, "{full:?}");
    }
}
