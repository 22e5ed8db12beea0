//! SELECT: equality on a prefix of an index's fields and/or a range on the next field,
//! forward or reverse, with a limit, streamed.
//!
//! On a secondary index every hit `(index key, pk)` at seqno `s` is looked up in the
//! primary index at the same snapshot and skipped when dirty (deferred invariant 5).

use std::ops::Bound;
use std::sync::Arc;

use super::deferred::validate::live_row;
use super::layout::Layout;
use super::state::{IndexCounters, TableRuntime, add};
use super::value::Value;
use super::{Row, Table};
use crate::db::{Entry, Keyspace, Scan, ScanRange, Snapshot};
use crate::error::{Error, Result};
use crate::key::SeqNo;

/// Name that selects through the primary index.
pub const PRIMARY: &str = "primary";

/// A query under construction: `table.select("by_age").eq(vec![..]).range(..).rows()`.
#[derive(Debug)]
pub struct Select {
    table: Table,
    index: String,
    q: Query,
    snapshot: Option<Snapshot>,
}

/// What a select asks, apart from the index and the snapshot, as plain data: for
/// callers that hold a select's settings as values (a CLI's flags, a binding's keyword
/// arguments) rather than as a chain of builder calls. The builder methods of
/// [`Select`] and of a partitioned table's select set the same fields.
///
/// ```
/// # use strata::table::{schema::Schema, select::Query, value::Value};
/// # use std::ops::Bound;
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
/// let t = db.create_table(Schema::parse("table t (id u64, age i64) primary key (id) index by_age (age)").unwrap()).unwrap();
/// for (id, age) in [(1, 30), (2, 40), (3, 50)] {
///     t.insert(vec![Value::U64(id), Value::I64(age)]).unwrap();
/// }
/// let newest_first = true;
/// let q = Query {
///     lower: Bound::Included(Value::I64(35)),
///     reverse: newest_first,
///     limit: Some(1),
///     ..Query::default()
/// };
/// let rows: Vec<_> = t.select("by_age").with_query(q).rows().unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(rows, vec![vec![Value::U64(3), Value::I64(50)]]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Equality on the first `eq.len()` fields of the index.
    pub eq: Vec<Value>,
    /// Lower bound on the field after the equality prefix.
    pub lower: Bound<Value>,
    /// Upper bound on that field.
    pub upper: Bound<Value>,
    /// Descending order.
    pub reverse: bool,
    /// At most this many rows.
    pub limit: Option<u64>,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            eq: Vec::new(),
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            reverse: false,
            limit: None,
        }
    }
}

/// The builder methods (`eq`, `range`, `reverse`, `limit`, `with_query`) and `count` of a select
/// type with a field `q: Query` and a method `rows()`.
macro_rules! query_builder {
    () => {
        /// Equality on the first `values.len()` fields of the index.
        pub fn eq(mut self, values: Vec<Value>) -> Self {
            self.q.eq = values;
            self
        }

        /// A range on the field after the equality prefix. Values compare as
        /// [`Value::cmp_total`] orders them, NULL first: an unbounded lower end takes
        /// the NULLs of a nullable field (unlike SQL's `x < 30`); start at
        /// `Excluded(Value::Null)` to leave them out.
        pub fn range(mut self, lower: Bound<Value>, upper: Bound<Value>) -> Self {
            self.q.lower = lower;
            self.q.upper = upper;
            self
        }

        /// Descending order.
        pub fn reverse(mut self) -> Self {
            self.q.reverse = true;
            self
        }

        /// At most `n` rows.
        pub fn limit(mut self, n: u64) -> Self {
            self.q.limit = Some(n);
            self
        }

        /// Replaces every setting of `eq`, `range`, `reverse` and `limit` at once.
        pub fn with_query(mut self, q: Query) -> Self {
            self.q = q;
            self
        }

        /// Number of matching rows.
        pub fn count(self) -> Result<u64> {
            let mut n = 0;
            for r in self.rows()? {
                r?;
                n += 1;
            }
            Ok(n)
        }
    };
}
pub(crate) use query_builder;

impl Select {
    pub(crate) fn new(table: Table, index: &str) -> Self {
        Select {
            table,
            index: index.to_string(),
            q: Query::default(),
            snapshot: None,
        }
    }

    query_builder!();

    /// Reads at a snapshot instead of the latest state.
    pub fn at(mut self, snapshot: &Snapshot) -> Self {
        self.snapshot = Some(snapshot.clone());
        self
    }

    /// The matching rows, streamed in index order.
    pub fn rows(self) -> Result<Rows> {
        let rt = self.table.runtime()?;
        let plan = Plan::new(&rt.layout, &self.index, &self.q)?;
        Rows::open(self.table, rt, &plan, self.snapshot)
    }
}

/// A select resolved against a table's layout: the index it reads and the key range
/// the query covers there. Made once and shared by the selects of every partition of a
/// partitioned table, whose layouts agree (`fits`).
#[derive(Debug)]
pub(crate) struct Plan {
    layout: Arc<Layout>,
    /// The index read, by position in `layout.indexes` (`None`: the primary key).
    ix: Option<usize>,
    /// `None`: nothing can match. Its prefix is the encoded equality prefix, when the
    /// index's filters can rule it out (`IndexLayout::filter`).
    range: Option<Arc<ScanRange>>,
    reverse: bool,
    limit: Option<u64>,
}

impl Plan {
    /// Checks `q` against index `index` of `layout` and encodes its bounds.
    pub(crate) fn new(layout: &Arc<Layout>, index: &str, q: &Query) -> Result<Plan> {
        let (shape, ix) = if index == PRIMARY {
            (&layout.pk, None)
        } else {
            let ix = layout.index(index)?;
            if ix.building {
                return Err(Error::InvalidArgument(format!("index {index:?} is still being built")));
            }
            (&ix.shape, Some(ix))
        };
        if q.eq.len() > shape.types.len() || (q.eq.len() == shape.types.len() && !is_unbounded(&q.lower, &q.upper)) {
            return Err(Error::InvalidArgument(format!(
                "index {index:?} has {} fields: {} equalities{} given",
                shape.types.len(),
                q.eq.len(),
                if is_unbounded(&q.lower, &q.upper) {
                    ""
                } else {
                    " and a range"
                }
            )));
        }
        let mut prefix = Vec::new();
        shape.encode_prefix(&q.eq, &mut prefix)?;
        let bound_key = |v: &Value| -> Result<Vec<u8>> {
            let mut vals = q.eq.clone();
            vals.push(v.clone());
            let mut k = Vec::new();
            shape.encode_prefix(&vals, &mut k)?;
            Ok(k)
        };
        let succ = |k: &[u8]| super::encoding::prefix_successor(k);
        let lower = match &q.lower {
            Bound::Unbounded => Some(Bound::Included(prefix.clone())),
            Bound::Included(v) => Some(Bound::Included(bound_key(v)?)),
            Bound::Excluded(v) => succ(&bound_key(v)?).map(Bound::Included),
        };
        let upper = match &q.upper {
            Bound::Unbounded => succ(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
            Bound::Included(v) => succ(&bound_key(v)?).map_or(Bound::Unbounded, Bound::Excluded),
            Bound::Excluded(v) => Bound::Excluded(bound_key(v)?),
        };
        let filtered = ix.is_some_and(|i| !q.eq.is_empty() && i.filter.of_prefix(&prefix).is_some());
        Ok(Plan {
            layout: layout.clone(),
            ix: ix.and_then(|i| layout.indexes.iter().position(|j| j.name == i.name)),
            range: lower.map(|lower| {
                Arc::new(ScanRange {
                    lower,
                    upper,
                    prefix: filtered.then_some(prefix),
                })
            }),
            reverse: q.reverse,
            limit: q.limit,
        })
    }

    /// Whether the plan reads `layout` as it reads its own: the same index, at the same
    /// position, with the same key fields, and not being built there.
    pub(crate) fn fits(&self, layout: &Arc<Layout>) -> bool {
        if Arc::ptr_eq(&self.layout, layout) {
            return true;
        }
        match self.ix {
            None => layout.pk.types == self.layout.pk.types,
            Some(i) => match (self.layout.indexes.get(i), layout.indexes.get(i)) {
                (Some(a), Some(b)) => a.name == b.name && a.shape.types == b.shape.types && !b.building,
                _ => false,
            },
        }
    }
}

impl Rows {
    /// Opens the rows `plan` selects from `table` (whose runtime is `rt`), at
    /// `snapshot` or the latest state.
    pub(crate) fn open(table: Table, rt: TableRuntime, plan: &Plan, snapshot: Option<Snapshot>) -> Result<Rows> {
        let Some(range) = &plan.range else {
            return Ok(Rows::empty(table, rt));
        };
        let layout = rt.layout.clone();
        let ix = plan.ix.and_then(|i| layout.indexes.get(i));
        let db = table.db.clone();
        let ks_id = ix.map_or(layout.primary, |i| i.keyspace);
        let snapshot = match snapshot {
            Some(s) => s,
            None => Snapshot::new(db.clone()),
        };
        if let Some(i) = ix
            && snapshot.seq() < i.readable_from
        {
            return Err(Error::InvalidArgument(format!(
                "index {:?} of table {:?} was built after this snapshot (it reads from seqno {}, the snapshot is at {}): select at a newer snapshot, or by the primary key",
                i.name,
                layout.name,
                i.readable_from,
                snapshot.seq()
            )));
        }
        let counters = plan.ix.and_then(|i| rt.index_counters.get(i)).cloned();
        if let Some(c) = &counters {
            add(&c.reads, 1);
            rt.state.note_secondary_read();
        }
        let ks = Keyspace::unnamed(db.clone(), ks_id);
        let scan = snapshot.scan_shared(&ks, range.clone())?;
        // No entry with the prefix anywhere (most partitions of a selective
        // scatter-gather): no cursor to build, no primary to read.
        if range.prefix.is_some() && scan.holds_nothing() {
            return Ok(Rows::empty(table, rt));
        }
        Ok(Rows {
            primary: Keyspace::unnamed(db, layout.primary),
            table,
            rt,
            layout,
            ix: plan.ix,
            scan: Some(scan),
            snapshot: Some(snapshot),
            reverse: plan.reverse,
            left: plan.limit,
            counters,
        })
    }
}

fn is_unbounded(a: &Bound<Value>, b: &Bound<Value>) -> bool {
    matches!((a, b), (Bound::Unbounded, Bound::Unbounded))
}

/// Streamed rows of a [`Select`].
pub struct Rows {
    table: Table,
    rt: TableRuntime,
    layout: Arc<Layout>,
    /// The index read, by position in `layout.indexes` (`None`: the primary key).
    ix: Option<usize>,
    primary: Keyspace,
    scan: Option<Scan>,
    snapshot: Option<Snapshot>,
    reverse: bool,
    left: Option<u64>,
    counters: Option<Arc<IndexCounters>>,
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rows").field("table", &self.table.name()).finish()
    }
}

impl Rows {
    fn empty(table: Table, rt: TableRuntime) -> Rows {
        Rows {
            primary: Keyspace::unnamed(table.db.clone(), rt.layout.primary),
            layout: rt.layout.clone(),
            table,
            rt,
            ix: None,
            scan: None,
            snapshot: None,
            reverse: false,
            left: Some(0),
            counters: None,
        }
    }

    /// The next entry of the scan, not yet checked against its row: its key (index
    /// fields ++ primary key, or the primary key), the seqno of its version and its
    /// value. The scan's order is the index order, which merges of several partitions'
    /// rows follow. The select's limit is not applied here (see `next`).
    pub(crate) fn next_entry(&mut self) -> Result<Option<Entry>> {
        let Some(scan) = self.scan.as_mut() else {
            return Ok(None);
        };
        let next = if self.reverse {
            scan.next_back_versioned()
        } else {
            scan.next_versioned()
        };
        next.transpose()
    }

    /// The row of the entry (from `next_entry`) with `key`, `seq` and `value`, or
    /// `None` when it is a dirty index entry its row no longer matches ([`live_row`]):
    /// a secondary index's entry costs a primary lookup at the select's snapshot, a
    /// primary entry is its row.
    pub(crate) fn resolve(&self, key: &[u8], seq: SeqNo, value: &[u8]) -> Result<Option<Row>> {
        let Some(ix) = self.ix.and_then(|i| self.layout.indexes.get(i)) else {
            return Ok(Some(self.layout.decode(value)?));
        };
        let (ikey, pk) = self.layout.split_secondary(ix, key)?;
        let snap = self.snapshot.as_ref().ok_or(Error::Closed)?;
        add(&self.rt.state.counters.primary_lookups, 1);
        let visible = match snap.get_present(&self.primary, pk)? {
            Some((row_seq, bytes)) => Some((row_seq, self.layout.decode(&bytes)?)),
            None => None,
        };
        let row = live_row(ix, ikey, seq, visible);
        if let Some(c) = &self.counters {
            add(if row.is_some() { &c.hits } else { &c.dirty }, 1);
        }
        Ok(row)
    }

    /// The next live row.
    fn step(&mut self) -> Result<Option<Row>> {
        while let Some((key, seq, value)) = self.next_entry()? {
            if let Some(row) = self.resolve(&key, seq, &value)? {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}

impl Iterator for Rows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == Some(0) {
            return None;
        }
        let r = self.step();
        count_row(&mut self.left, r)
    }
}

/// A row stream's next item from `step`, its next row, counted against `left` (the
/// rows left to yield, `None` without a limit). The end of the rows, or an error, ends
/// the stream: `left` becomes `Some(0)`.
pub(crate) fn count_row(left: &mut Option<u64>, step: Result<Option<Row>>) -> Option<Result<Row>> {
    match &step {
        Ok(Some(_)) => {
            if let Some(l) = left.as_mut() {
                *l -= 1;
            }
        }
        _ => *left = Some(0),
    }
    step.transpose()
}
