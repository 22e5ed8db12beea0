//! The crash workload: commit streams whose every commit is a pure function of
//! (stream, commit number), so the state after any prefix of a stream's commits can be
//! recomputed by the verifier. Each stream records its own commit number in the same
//! atomic commit (a counter key or row), so the database itself says how far it got.
//!
//! Streams: two key-value streams (batches spanning two keyspaces, with overwrites,
//! point deletes and range deletes) and one table stream per index mode (transactions
//! of REPLACE and DELETE on a table with three secondary indexes, and every eighth
//! commit a `delete_where` by the commit-number field, the table's delete key).

use std::collections::BTreeMap;
use std::time::Duration;

use strata::table::Row;
use strata::table::schema::Schema;
use strata::table::value::Value;
use strata::{Options, SyncPolicy};

use crate::BenchResult;

/// Keyspaces of the key-value streams.
pub const KEYSPACES: [&str; 2] = ["crash_a", "crash_b"];
/// Slots of own keys per key-value stream: commit `n` writes slot `n % SLOTS`, so the
/// data set stays bounded however long the test runs.
const SLOTS: u64 = 1_500;
/// Keys a key-value commit writes in its slot, in each keyspace.
const OWN_KEYS: usize = 3;
/// Keys every key-value commit of a stream overwrites.
const SHARED_KEYS: usize = 4;
/// Primary keys of table rows are drawn from `0..TABLE_IDS`.
const TABLE_IDS: u64 = 400;
/// The table row that records the stream's last commit number.
const COUNTER_ID: u64 = 1_000_000;
/// The secondary indexes of the crash tables: name and the fields they cover.
pub const INDEXES: [(&str, &[usize]); 3] = [("by_a", &[1]), ("by_b", &[2]), ("by_ab", &[1, 2])];

/// What a stream writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Key-value batches under the prefix `t{id}/` of both keyspaces.
    Kv(usize),
    /// Transactions on the table `crash_eager` or `crash_deferred`.
    Table { deferred: bool },
}

/// One commit stream, run by one thread of the child.
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    /// Name in the acknowledgement log and the report.
    pub name: &'static str,
    /// What it writes.
    pub kind: StreamKind,
}

/// Every stream of the workload.
pub const STREAMS: [Stream; 4] = [
    Stream {
        name: "kv0",
        kind: StreamKind::Kv(0),
    },
    Stream {
        name: "kv1",
        kind: StreamKind::Kv(1),
    },
    Stream {
        name: "eager",
        kind: StreamKind::Table { deferred: false },
    },
    Stream {
        name: "deferred",
        kind: StreamKind::Table { deferred: true },
    },
];

/// Options of every open, in the child and in the verifier: sync on, and a small
/// memtable and small files, so that flushes and compactions run all the time and
/// a kill often lands in one of them; a delete persistence threshold adds FADE's
/// compactions.
pub fn options() -> Options {
    Options {
        sync: SyncPolicy::GroupCommit,
        memtable_budget: 32 << 10,
        target_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        l0_stall_trigger: 12,
        size_ratio: 3.0,
        delete_persistence_threshold: Some(Duration::from_secs(2)),
        ..Options::default()
    }
}

/// The table a table stream writes.
pub fn table_name(deferred: bool) -> &'static str {
    if deferred { "crash_deferred" } else { "crash_eager" }
}

/// Schema of a crash table.
pub fn schema(deferred: bool) -> BenchResult<Schema> {
    let mode = if deferred { "deferred" } else { "eager" };
    let text = format!(
        "table {} (id u64, a u64, b u64, n u64, pad bytes) primary key (id) \
         index by_a (a) index by_b (b) index by_ab (a, b) delete key (n) {mode}",
        table_name(deferred)
    );
    Ok(Schema::parse(&text)?)
}

/// A small deterministic generator (the workload must not depend on a crate's RNG
/// algorithm staying the same between versions).
struct Lcg(u64);

impl Lcg {
    fn new(stream: &str, n: u64) -> Lcg {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for b in stream.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Lcg(h ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One operation of a key-value commit; `ks` indexes [`KEYSPACES`].
#[derive(Debug, Clone, PartialEq)]
pub enum KvOp {
    Put {
        ks: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        ks: usize,
        key: Vec<u8>,
    },
    /// Deletes `[start, end)`.
    DeleteRange {
        ks: usize,
        start: Vec<u8>,
        end: Vec<u8>,
    },
    /// Deletes the entries whose delete key (the value's first 9 bytes) is in
    /// `[lo, hi)`.
    DeleteWhere {
        ks: usize,
        lo: Vec<u8>,
        hi: Vec<u8>,
    },
}

/// The delete key of keyspace 1's own values: stream `t`, commit `n`.
pub fn kv_delete_key(t: usize, n: u64) -> Vec<u8> {
    let mut k = vec![t as u8];
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// Prefix of every key of key-value stream `t`.
pub fn kv_prefix(t: usize) -> Vec<u8> {
    format!("t{t}/").into_bytes()
}

/// The key holding stream `t`'s last commit number (in keyspace 0).
pub fn kv_counter_key(t: usize) -> Vec<u8> {
    format!("t{t}/counter").into_bytes()
}

fn slot_prefix(t: usize, slot: u64) -> String {
    format!("t{t}/own/{slot:05}/")
}

/// The operations of commit `n` of key-value stream `t`, in one atomic batch: own keys
/// in both keyspaces, the shared keys overwritten, the counter, and deletes of older
/// commits' keys (a point delete in keyspace 1, every tenth commit a range delete of a
/// whole slot in keyspace 0).
pub fn kv_commit(t: usize, n: u64) -> Vec<KvOp> {
    let name = STREAMS
        .iter()
        .find(|s| s.kind == StreamKind::Kv(t))
        .map_or("kv", |s| s.name);
    let mut g = Lcg::new(name, n);
    let slot = n % SLOTS;
    let mut ops = Vec::new();
    for ks in 0..KEYSPACES.len() {
        for j in 0..OWN_KEYS {
            let mut value = if ks == 1 { kv_delete_key(t, n) } else { Vec::new() };
            value.extend_from_slice(format!("{name}:{n}:{ks}:{j}:").as_bytes());
            value.resize(40 + g.below(160) as usize, b'a' + (n % 26) as u8);
            ops.push(KvOp::Put {
                ks,
                key: format!("{}{j}", slot_prefix(t, slot)).into_bytes(),
                value,
            });
        }
    }
    for j in 0..SHARED_KEYS {
        ops.push(KvOp::Put {
            ks: j % KEYSPACES.len(),
            key: format!("t{t}/shared/{j}").into_bytes(),
            value: n.to_string().into_bytes(),
        });
    }
    if n >= 3 {
        let victim = (n - 3) % SLOTS;
        let j = g.below(OWN_KEYS as u64);
        ops.push(KvOp::Delete {
            ks: 1,
            key: format!("{}{j}", slot_prefix(t, victim)).into_bytes(),
        });
    }
    if n >= 10 && n.is_multiple_of(10) {
        let p = slot_prefix(t, (n - 10) % SLOTS);
        // '0' is the byte after '/': the range covers exactly the slot's keys.
        let end = format!("{}0", p.trim_end_matches('/'));
        ops.push(KvOp::DeleteRange {
            ks: 0,
            start: p.into_bytes(),
            end: end.into_bytes(),
        });
    }
    if n >= 7 && n.is_multiple_of(7) {
        // A secondary range delete of the own keys two to six commits back in
        // keyspace 1 (those not overwritten since).
        ops.push(KvOp::DeleteWhere {
            ks: 1,
            lo: kv_delete_key(t, n - 6),
            hi: kv_delete_key(t, n - 1),
        });
    }
    ops.push(KvOp::Put {
        ks: 0,
        key: kv_counter_key(t),
        value: n.to_string().into_bytes(),
    });
    ops
}

/// One statement of a table commit.
#[derive(Debug, Clone, PartialEq)]
pub enum TableOp {
    Replace(Row),
    Delete(u64),
    /// `delete_where("n", ..below)`: a write of its own before the transaction (a kill
    /// between the two leaves the delete alone, which the verifier accepts).
    DeleteWhere {
        below: u64,
    },
}

/// Rows a `delete_where` commit keeps: those written by the last `DELETE_WHERE_KEEPS`
/// commits.
const DELETE_WHERE_KEEPS: u64 = 30;

/// `rows` after a secondary range delete of the rows whose `n` is below `below`.
fn delete_where(rows: &mut BTreeMap<u64, Row>, below: u64) {
    rows.retain(|_, r| r[3].as_u64().is_some_and(|n| n >= below));
}

/// The statements of commit `n` of a table stream: 2-6 REPLACEs and DELETEs of random
/// rows, then the counter row carrying `n`.
pub fn table_commit(deferred: bool, n: u64) -> Vec<TableOp> {
    let mut g = Lcg::new(table_name(deferred), n);
    let mut ops = Vec::new();
    let statements = if n % 8 == 7 && n > DELETE_WHERE_KEEPS {
        ops.push(TableOp::DeleteWhere {
            below: n - DELETE_WHERE_KEEPS,
        });
        0
    } else {
        2 + g.below(5)
    };
    for _ in 0..statements {
        let id = g.below(TABLE_IDS);
        if g.below(4) == 0 {
            ops.push(TableOp::Delete(id));
        } else {
            let pad = vec![(n % 251) as u8; 50 + g.below(150) as usize];
            ops.push(TableOp::Replace(vec![
                Value::U64(id),
                Value::U64(g.below(10)),
                Value::U64(g.below(25)),
                Value::U64(n),
                Value::Bytes(pad),
            ]));
        }
    }
    ops.push(TableOp::Replace(vec![
        Value::U64(COUNTER_ID),
        Value::U64(n % 10),
        Value::U64(n % 25),
        Value::U64(n),
        Value::Bytes(Vec::new()),
    ]));
    ops
}

/// The primary key of a table stream's counter row.
pub fn table_counter_pk() -> Vec<Value> {
    vec![Value::U64(COUNTER_ID)]
}

/// The commit number stored in a counter row.
pub fn counter_of_row(row: &Row) -> Option<u64> {
    row.get(3).and_then(Value::as_u64)
}

/// The commit number stored in a counter key's value.
pub fn counter_of_value(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The expected state of one stream after a prefix of its commits.
#[derive(Debug, Clone)]
pub enum Model {
    /// Key-value pairs per keyspace.
    Kv([BTreeMap<Vec<u8>, Vec<u8>>; 2]),
    /// Rows by primary key.
    Table(BTreeMap<u64, Row>),
}

/// A stream's model and the number of commits applied to it.
#[derive(Debug, Clone)]
pub struct StreamModel {
    /// The stream.
    pub stream: Stream,
    /// Commits `0..applied` are in the model.
    pub applied: u64,
    /// The state after them.
    pub model: Model,
}

impl StreamModel {
    /// The state before any commit.
    pub fn new(stream: Stream) -> StreamModel {
        let model = match stream.kind {
            StreamKind::Kv(_) => Model::Kv([BTreeMap::new(), BTreeMap::new()]),
            StreamKind::Table { .. } => Model::Table(BTreeMap::new()),
        };
        StreamModel {
            stream,
            applied: 0,
            model,
        }
    }

    /// The rows after the model's commits and the `delete_where` alone of the next
    /// commit, if it starts with one (the state a kill between its two writes leaves).
    pub fn with_next_delete_where(&self) -> Option<BTreeMap<u64, Row>> {
        let (StreamKind::Table { deferred }, Model::Table(rows)) = (&self.stream.kind, &self.model) else {
            return None;
        };
        let Some(TableOp::DeleteWhere { below }) = table_commit(*deferred, self.applied).into_iter().next() else {
            return None;
        };
        let mut rows = rows.clone();
        delete_where(&mut rows, below);
        Some(rows)
    }

    /// Applies commits up to and including `last` (`None`: none at all).
    pub fn advance_to(&mut self, last: Option<u64>) {
        let Some(last) = last else { return };
        while self.applied <= last {
            let n = self.applied;
            match (&self.stream.kind, &mut self.model) {
                (StreamKind::Kv(t), Model::Kv(maps)) => {
                    for op in kv_commit(*t, n) {
                        match op {
                            KvOp::Put { ks, key, value } => {
                                maps[ks].insert(key, value);
                            }
                            KvOp::Delete { ks, key } => {
                                maps[ks].remove(&key);
                            }
                            KvOp::DeleteRange { ks, start, end } => {
                                let doomed: Vec<Vec<u8>> = maps[ks].range(start..end).map(|(k, _)| k.clone()).collect();
                                for k in doomed {
                                    maps[ks].remove(&k);
                                }
                            }
                            KvOp::DeleteWhere { ks, lo, hi } => {
                                maps[ks].retain(|_, v| {
                                    v.get(..9).is_none_or(|dk| !(lo.as_slice() <= dk && dk < hi.as_slice()))
                                });
                            }
                        }
                    }
                }
                (StreamKind::Table { deferred }, Model::Table(rows)) => {
                    for op in table_commit(*deferred, n) {
                        match op {
                            TableOp::Replace(r) => {
                                if let Some(id) = r[0].as_u64() {
                                    rows.insert(id, r);
                                }
                            }
                            TableOp::Delete(id) => {
                                rows.remove(&id);
                            }
                            TableOp::DeleteWhere { below } => delete_where(rows, below),
                        }
                    }
                }
                _ => unreachable!("a stream's model matches its kind"),
            }
            self.applied += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_pure_functions_of_stream_and_number() {
        assert_eq!(kv_commit(0, 17), kv_commit(0, 17));
        assert_ne!(kv_commit(0, 17), kv_commit(1, 17));
        assert_eq!(table_commit(true, 5), table_commit(true, 5));
        assert_ne!(table_commit(true, 5), table_commit(false, 5));
    }

    #[test]
    fn range_delete_covers_exactly_one_older_slot() {
        let ops = kv_commit(0, 20);
        let Some(KvOp::DeleteRange { start, end, .. }) = ops.iter().find(|o| matches!(o, KvOp::DeleteRange { .. }))
        else {
            panic!("commit 20 has a range delete");
        };
        let mut m = StreamModel::new(STREAMS[0]);
        m.advance_to(Some(20));
        let Model::Kv(maps) = &m.model else { panic!("kv model") };
        // Slot 10 was written by commit 10 and deleted by commit 20; slot 11 survives.
        assert!(maps[0].range(start.clone()..end.clone()).next().is_none());
        assert!(maps[0].contains_key(format!("{}0", slot_prefix(0, 11)).as_bytes()));
        // In keyspace 1, commit 14's secondary range delete took commits 8..13 (slot 10
        // among them); commit 15's keys are there.
        assert!(!maps[1].contains_key(format!("{}0", slot_prefix(0, 10)).as_bytes()));
        let kept =
            |slot| (0..OWN_KEYS).any(|j| maps[1].contains_key(format!("{}{j}", slot_prefix(0, slot)).as_bytes()));
        assert!(kept(13) && kept(15) && !kept(9));
        assert_eq!(maps[0].get(&kv_counter_key(0)).map(Vec::as_slice), Some(&b"20"[..]));
    }

    #[test]
    fn table_model_counts_its_commits() {
        let mut m = StreamModel::new(STREAMS[3]);
        m.advance_to(Some(9));
        assert_eq!(m.applied, 10);
        let Model::Table(rows) = &m.model else {
            panic!("table model")
        };
        assert_eq!(rows.get(&COUNTER_ID).and_then(counter_of_row), Some(9));
        assert!(rows.len() > 5, "ten commits leave several rows");
    }

    #[test]
    fn delete_where_commits_drop_old_rows_and_keep_the_counter() {
        let mut m = StreamModel::new(STREAMS[2]);
        m.advance_to(Some(38));
        let Model::Table(before) = m.model.clone() else {
            panic!("table model")
        };
        let alone = m.with_next_delete_where().expect("commit 39 deletes");
        assert!(alone.len() < before.len(), "rows of commits below 9 go");
        assert!(alone.values().all(|r| r[3].as_u64().is_some_and(|n| n >= 9)));
        m.advance_to(Some(39));
        let Model::Table(after) = &m.model else {
            panic!("table model")
        };
        assert_eq!(after.get(&COUNTER_ID).and_then(counter_of_row), Some(39));
        assert!(m.with_next_delete_where().is_none(), "commit 40 is a transaction");
    }
}
