//! After a kill: reopen the database and check every stream against its model. A
//! stream passes when the database holds a commit number at or past both the last
//! acknowledged one and the last one an earlier check found (nothing acknowledged or
//! once recovered is lost), at most one past them (one commit may have been durable
//! but not yet acknowledged), and exactly the state the model has after that commit
//! (no batch half-applied); tables must also pass `Db::check`. A table commit that
//! starts with a `delete_where` is two writes, and a kill between them leaves exactly
//! the delete's state, which passes too.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use strata::table::Row;
use strata::table::check::CheckOptions;
use strata::table::select::PRIMARY;
use strata::{Db, Keyspace};

use super::workload::{
    INDEXES, KEYSPACES, Model, StreamKind, StreamModel, counter_of_row, counter_of_value, kv_counter_key, kv_prefix,
    options, table_counter_pk, table_name,
};
use crate::BenchResult;

/// What one verification found (all of it consistent, or it returns an error).
#[derive(Debug, Default)]
pub struct Verified {
    /// Per stream: the last commit the database holds.
    pub recovered: HashMap<&'static str, Option<u64>>,
    /// Flushes and compactions the database has done so far (they span reopens).
    pub flushes: u64,
    /// Compactions so far.
    pub compactions: u64,
}

/// Reopens `dir` and checks every stream in `models` against `acked` (the last
/// acknowledged commit per stream), advancing the models to what the database holds.
pub fn verify(dir: &Path, models: &mut [StreamModel], acked: &HashMap<String, u64>) -> BenchResult<Verified> {
    let db = Db::open(dir, options())?;
    let mut out = Verified::default();
    for m in models.iter_mut() {
        let name = m.stream.name;
        let last = last_commit(&db, m.stream.kind)?;
        let ack = acked.get(name).copied();
        // The last commit an earlier check found: it may never have been acknowledged
        // (durable, then killed), and the stream went on from it.
        let seen = m.applied.checked_sub(1);
        match (ack.max(seen), last) {
            (Some(k), None) => {
                return Err(format!("{name}: commit {k} was acknowledged or seen, the database holds none").into());
            }
            (Some(k), Some(l)) if l < k => {
                return Err(
                    format!("{name}: commit {k} was acknowledged or seen, the database holds only up to {l}").into(),
                );
            }
            (Some(k), Some(l)) if l > k + 1 => {
                return Err(
                    format!("{name}: the database holds commit {l}, only up to {k} was acknowledged or seen").into(),
                );
            }
            (None, Some(l)) if l > 0 => {
                return Err(format!("{name}: the database holds commit {l}, none was acknowledged").into());
            }
            _ => {}
        }
        m.advance_to(last);
        match (&m.model, m.stream.kind) {
            (Model::Kv(maps), StreamKind::Kv(t)) => check_kv(&db, t, maps, name)?,
            (Model::Table(rows), StreamKind::Table { deferred }) => {
                if let Err(e) = check_table(&db, deferred, rows, name) {
                    // A kill between a delete_where and its commit's transaction leaves
                    // the whole delete and nothing else: accepted; a part of it is not.
                    match m.with_next_delete_where() {
                        Some(alone) => check_table(&db, deferred, &alone, name).map_err(|_| e)?,
                        None => return Err(e),
                    }
                }
            }
            _ => return Err(format!("{name}: model does not match its stream").into()),
        }
        out.recovered.insert(name, last);
    }
    let report = db.check(CheckOptions::default())?;
    if !report.ok() {
        return Err(format!("check failed:\n{report}").into());
    }
    let st = db.stats();
    out.flushes = st.flushes;
    out.compactions = st.compactions;
    db.close()?;
    Ok(out)
}

fn last_commit(db: &Db, kind: StreamKind) -> BenchResult<Option<u64>> {
    Ok(match kind {
        StreamKind::Kv(t) => match db.keyspace(KEYSPACES[0])?.get(&kv_counter_key(t))? {
            Some(v) => Some(counter_of_value(&v).ok_or("unreadable kv counter")?),
            None => None,
        },
        StreamKind::Table { deferred } => match db.table(table_name(deferred))?.get(&table_counter_pk())? {
            Some(r) => Some(counter_of_row(&r).ok_or("unreadable table counter")?),
            None => None,
        },
    })
}

/// Both keyspaces under the stream's prefix hold exactly the model's pairs, by scan
/// and by point reads.
fn check_kv(db: &Db, t: usize, maps: &[BTreeMap<Vec<u8>, Vec<u8>>; 2], name: &str) -> BenchResult<()> {
    let lo = kv_prefix(t);
    let mut hi = lo.clone();
    if let Some(last) = hi.last_mut() {
        *last += 1;
    }
    for (i, want) in maps.iter().enumerate() {
        let ks: Keyspace = db.keyspace(KEYSPACES[i])?;
        let got: BTreeMap<Vec<u8>, Vec<u8>> = ks.scan(lo.clone()..hi.clone())?.collect::<Result<_, _>>()?;
        if &got != want {
            return Err(format!("{name}: keyspace {}: {}", KEYSPACES[i], first_difference(&got, want)).into());
        }
        for (k, v) in want {
            if ks.get(k)?.as_ref() != Some(v) {
                return Err(format!("{name}: get {} in {} disagrees with the scan", show(k), KEYSPACES[i]).into());
            }
        }
    }
    Ok(())
}

fn first_difference(got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> String {
    for (k, v) in want {
        match got.get(k) {
            None => return format!("{} missing ({} keys, want {})", show(k), got.len(), want.len()),
            Some(g) if g != v => return format!("{} holds {}, want {}", show(k), show(g), show(v)),
            _ => {}
        }
    }
    match got.keys().find(|k| !want.contains_key(*k)) {
        Some(k) => format!(
            "{} should not be there ({} keys, want {})",
            show(k),
            got.len(),
            want.len()
        ),
        None => "differs".to_string(),
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(48)]).into_owned()
}

/// The primary index and every secondary index return exactly the model's rows.
fn check_table(db: &Db, deferred: bool, rows: &BTreeMap<u64, Row>, name: &str) -> BenchResult<()> {
    let t = db.table(table_name(deferred))?;
    let want: Vec<Row> = rows.values().cloned().collect();
    let got: Vec<Row> = t.select(PRIMARY).rows()?.collect::<Result<_, _>>()?;
    if got != want {
        return Err(format!("{name}: primary index has {} rows, want {}", got.len(), want.len()).into());
    }
    for (index, fields) in INDEXES {
        let mut w = want.clone();
        w.sort_by(|a, b| {
            let key = |r: &Row| -> Vec<u64> {
                fields
                    .iter()
                    .chain(&[0])
                    .map(|&f| r[f].as_u64().unwrap_or(u64::MAX))
                    .collect()
            };
            key(a).cmp(&key(b))
        });
        let got: Vec<Row> = t.select(index).rows()?.collect::<Result<_, _>>()?;
        if got != w {
            return Err(format!("{name}: index {index} returns {} rows, want {}", got.len(), w.len()).into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use strata::WriteBatch;

    use super::super::workload::{KvOp, STREAMS, kv_commit};
    use super::*;

    /// Commits `0..n` of stream kv0 the way the child does.
    fn commit_kv0(dir: &Path, n: u64) {
        let db = Db::open(dir, options()).expect("open");
        let ks: Vec<Keyspace> = KEYSPACES.iter().map(|k| db.keyspace(k).expect("keyspace")).collect();
        for i in 0..n {
            let mut b = WriteBatch::new();
            for op in kv_commit(0, i) {
                match op {
                    KvOp::Put { ks: k, key, value } => b.put(&ks[k], &key, &value),
                    KvOp::Delete { ks: k, key } => b.delete(&ks[k], &key),
                    KvOp::DeleteRange { ks: k, start, end } => b.delete_range(&ks[k], &start, &end),
                    KvOp::DeleteWhere { ks: k, lo, hi } => b.delete_where(&ks[k], &lo, &hi),
                }
            }
            db.write(b).expect("write");
        }
        db.close().expect("close");
    }

    fn fresh() -> (tempfile::TempDir, Vec<StreamModel>) {
        let tmp = tempfile::tempdir().expect("tempdir");
        super::super::child::create(tmp.path()).expect("create");
        (tmp, STREAMS.iter().map(|s| StreamModel::new(*s)).collect())
    }

    /// A fresh database whose kv0 stream holds commits up to `n`.
    fn fresh_with(n: u64) -> (tempfile::TempDir, Vec<StreamModel>) {
        let (tmp, models) = fresh();
        commit_kv0(tmp.path(), n);
        (tmp, models)
    }

    fn acks(n: u64) -> HashMap<String, u64> {
        HashMap::from([("kv0".to_string(), n)])
    }

    #[test]
    fn a_consistent_database_passes() {
        let (tmp, mut models) = fresh_with(25);
        // 24 acknowledged, commit 24 durable but unacknowledged: allowed.
        let v = verify(tmp.path(), &mut models, &acks(23)).expect("verify");
        assert_eq!(v.recovered.get("kv0"), Some(&Some(24)));
        assert_eq!(v.recovered.get("eager"), Some(&None));
    }

    #[test]
    fn a_lost_acknowledged_commit_fails() {
        let (tmp, mut models) = fresh_with(10);
        let e = verify(tmp.path(), &mut models, &acks(12)).expect_err("lost commits");
        assert!(e.to_string().contains("holds only up to 9"), "{e}");
    }

    #[test]
    fn a_commit_lost_after_an_earlier_check_fails() {
        let (tmp, mut models) = fresh_with(10);
        verify(tmp.path(), &mut models, &acks(8)).expect("first check");
        // A second database with fewer commits stands in for one that lost commit 9.
        let (tmp2, _) = fresh_with(9);
        let e = verify(tmp2.path(), &mut models, &acks(8)).expect_err("commit 9 vanished");
        assert!(e.to_string().contains("acknowledged or seen"), "{e}");
    }

    #[test]
    fn a_half_applied_commit_fails() {
        let (tmp, mut models) = fresh_with(12);
        {
            // Commit 12's counter without the rest of its batch.
            let db = Db::open(tmp.path(), options()).expect("open");
            db.keyspace(KEYSPACES[0])
                .expect("ks")
                .put(&kv_counter_key(0), b"12")
                .expect("put");
            db.close().expect("close");
        }
        let e = verify(tmp.path(), &mut models, &acks(11)).expect_err("half-applied");
        assert!(e.to_string().contains("kv0: keyspace"), "{e}");
    }

    #[test]
    fn a_wrong_table_row_fails() {
        let (tmp, mut models) = fresh();
        {
            let db = Db::open(tmp.path(), options()).expect("open");
            let t = db.table(table_name(true)).expect("table");
            let mut tx = t.transaction();
            for op in super::super::workload::table_commit(true, 0) {
                if let super::super::workload::TableOp::Replace(mut r) = op {
                    r[2] = strata::table::value::Value::U64(999); // not what commit 0 wrote
                    tx.replace(r);
                }
            }
            tx.commit().expect("commit");
            db.close().expect("close");
        }
        let acked = HashMap::from([("deferred".to_string(), 0)]);
        let e = verify(tmp.path(), &mut models, &acked).expect_err("wrong row");
        assert!(e.to_string().contains("deferred: primary index"), "{e}");
    }
}
