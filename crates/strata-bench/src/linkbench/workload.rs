//! The operation mix and the per-client generator.
//!
//! * Kinds are drawn from [`MIX`] (LinkBench's default request mix, in tenths of a
//!   percent).
//! * Ids are drawn by Zipf popularity ([`Zipf`], exponent `--zipf`, precomputed CDF):
//!   rank `r` maps to node `(r-1)·m mod n + 1` with `m` coprime with `n`, so hot nodes are
//!   scattered over the key space. Link operations (reads, updates, deletes) draw `id1`
//!   among nodes with at least one loaded link (rejection); `deletenode` draws its id
//!   uniformly (so the hottest nodes do not simply vanish).
//! * Writes are blind where LinkBench's semantics allow: `updatelink` replaces a full new
//!   row of an existing (loaded) link, `deletelink` deletes by primary key,
//!   `updatenode` replaces a full new node row. The generator knows which loaded links
//!   and nodes are deleted (bitmaps, flipped under a per-`(id1, link_type)` stripe lock
//!   held across the engine call), so count deltas are exact without reading the link:
//!   `deletelink` of a live link decrements, `updatelink` of a deleted one re-creates it
//!   and increments, like MySQL's `INSERT ... ON DUPLICATE KEY UPDATE` in LinkBench.
//! * `addlink` targets a fresh `id2` (so the insert never collides), `addnode` a fresh
//!   id above the loaded ones.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;

use super::dist::{Zipf, coprime_at_least, mix};
use super::model::{Graph, LINK_DATA, LINK_TYPES, Link, NODE_DATA, NODE_TYPE, Node, VISIBLE, now_ms, payload};

/// One kind of LinkBench request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    GetLinkList,
    GetNode,
    AddLink,
    UpdateLink,
    UpdateNode,
    CountLink,
    DeleteLink,
    AddNode,
    DeleteNode,
    GetLink,
}

/// Every kind with its share in tenths of a percent (sums to 1000).
pub const MIX: [(OpKind, u32); 10] = [
    (OpKind::GetLinkList, 507),
    (OpKind::GetNode, 129),
    (OpKind::AddLink, 90),
    (OpKind::UpdateLink, 80),
    (OpKind::UpdateNode, 74),
    (OpKind::CountLink, 49),
    (OpKind::DeleteLink, 30),
    (OpKind::AddNode, 26),
    (OpKind::DeleteNode, 10),
    (OpKind::GetLink, 5),
];

impl OpKind {
    /// Position in [`MIX`].
    pub fn index(self) -> usize {
        MIX.iter().position(|(k, _)| *k == self).unwrap_or(0)
    }

    /// LinkBench's name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::GetLinkList => "getlinklist",
            OpKind::GetNode => "getnode",
            OpKind::AddLink => "addlink",
            OpKind::UpdateLink => "updatelink",
            OpKind::UpdateNode => "updatenode",
            OpKind::CountLink => "countlink",
            OpKind::DeleteLink => "deletelink",
            OpKind::AddNode => "addnode",
            OpKind::DeleteNode => "deletenode",
            OpKind::GetLink => "getlink",
        }
    }

    /// Share of the mix in percent.
    pub fn percent(self) -> f64 {
        MIX[self.index()].1 as f64 / 10.0
    }

    /// Reads (the rest write).
    pub fn is_read(self) -> bool {
        matches!(
            self,
            OpKind::GetLinkList | OpKind::GetNode | OpKind::CountLink | OpKind::GetLink
        )
    }
}

/// One request, fully specified, as the engine drivers execute it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Visible links of `(id1, link_type)` with `time <= max_time`, newest first.
    GetLinkList {
        id1: u64,
        link_type: u64,
        max_time: u64,
        limit: u64,
    },
    /// The node by id.
    GetNode { id: u64 },
    /// Insert a new link and increment its count.
    AddLink(Link),
    /// Replace a loaded link by a full new row; `count_delta` is +1 if it was deleted.
    UpdateLink { link: Link, slot: u64, count_delta: i64 },
    /// Replace a node by a full new row (skipped if the node was deleted).
    UpdateNode(Node),
    /// The count row of `(id, link_type)`.
    CountLink { id: u64, link_type: u64 },
    /// Delete a loaded link by primary key; `count_delta` is -1 if it was live.
    DeleteLink {
        id1: u64,
        link_type: u64,
        id2: u64,
        slot: u64,
        count_delta: i64,
    },
    /// Insert a new node.
    AddNode(Node),
    /// Delete a node by id.
    DeleteNode { id: u64 },
    /// One link by primary key.
    GetLink { id1: u64, link_type: u64, id2: u64 },
}

impl Op {
    /// The op's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::GetLinkList { .. } => OpKind::GetLinkList,
            Op::GetNode { .. } => OpKind::GetNode,
            Op::AddLink(_) => OpKind::AddLink,
            Op::UpdateLink { .. } => OpKind::UpdateLink,
            Op::UpdateNode(_) => OpKind::UpdateNode,
            Op::CountLink { .. } => OpKind::CountLink,
            Op::DeleteLink { .. } => OpKind::DeleteLink,
            Op::AddNode(_) => OpKind::AddNode,
            Op::DeleteNode { .. } => OpKind::DeleteNode,
            Op::GetLink { .. } => OpKind::GetLink,
        }
    }
}

const STRIPES: usize = 1024;
/// First id2 of links added by `addlink` (far above every node id).
const ADDED_ID2_BASE: u64 = 1 << 40;

/// State shared by all clients of one run: the graph, the popularity distribution,
/// which loaded links and nodes are deleted, id allocators and stripe locks.
pub struct Shared {
    pub graph: Graph,
    popularity: Zipf,
    scatter: u64,
    shift: u64,
    link_deleted: Vec<AtomicU64>,
    node_deleted: Vec<AtomicU64>,
    stripes: Vec<Mutex<()>>,
    next_node: AtomicU64,
    next_id2: AtomicU64,
    next_version: AtomicU64,
}

fn bitmap(bits: u64) -> Vec<AtomicU64> {
    (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect()
}

/// Sets (`on`) or clears bit `i`; returns its previous value.
fn flip(map: &[AtomicU64], i: u64, on: bool) -> bool {
    let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
    let old = if on {
        map[w].fetch_or(b, Ordering::Relaxed)
    } else {
        map[w].fetch_and(!b, Ordering::Relaxed)
    };
    old & b != 0
}

fn test(map: &[AtomicU64], i: u64) -> bool {
    map[(i / 64) as usize].load(Ordering::Relaxed) & (1u64 << (i % 64)) != 0
}

impl Shared {
    /// State for `graph` with Zipf exponent `zipf` over node popularity.
    pub fn new(graph: Graph, zipf: f64) -> Shared {
        let n = graph.nodes();
        Shared {
            popularity: Zipf::new(n, zipf),
            scatter: coprime_at_least(mix(n) % n.max(2), n),
            shift: mix(n ^ 0x5bd1) % n,
            link_deleted: bitmap(graph.links()),
            node_deleted: bitmap(n + 1),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            next_node: AtomicU64::new(n + 1),
            next_id2: AtomicU64::new(ADDED_ID2_BASE),
            next_version: AtomicU64::new(1),
            graph,
        }
    }

    /// The node at popularity quantile `u`.
    pub fn popular_id(&self, u: f64) -> u64 {
        self.id_of_rank(self.popularity.rank_at(u))
    }

    /// The node of popularity rank `rank` (1 = hottest).
    pub fn id_of_rank(&self, rank: u64) -> u64 {
        let n = self.graph.nodes();
        ((rank - 1) % n * self.scatter % n + self.shift) % n + 1
    }

    fn lock(&self, key: u64) -> std::sync::MutexGuard<'_, ()> {
        let m = &self.stripes[(mix(key) % STRIPES as u64) as usize];
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `exec` on `op` the way one client must: link writes and node updates and
    /// deletes hold the stripe of their `(id1, link_type)` / node while the generator's
    /// state is updated and the engine executes, so the count deltas are exact.
    /// `exec` gets `None` for an `updatenode` of a deleted node (nothing to write).
    pub fn execute<R>(&self, op: &mut Op, exec: impl FnOnce(Option<&Op>) -> R) -> R {
        let link_stripe = |id1: u64, t: u64| id1.wrapping_mul(LINK_TYPES + 1) + t;
        let node_stripe = |id: u64| !id;
        match op {
            Op::AddLink(l) => {
                let _g = self.lock(link_stripe(l.id1, l.link_type));
                exec(Some(op))
            }
            Op::UpdateLink {
                link,
                slot,
                count_delta,
            } => {
                let _g = self.lock(link_stripe(link.id1, link.link_type));
                *count_delta = if flip(&self.link_deleted, *slot, false) { 1 } else { 0 };
                exec(Some(op))
            }
            Op::DeleteLink {
                id1,
                link_type,
                slot,
                count_delta,
                ..
            } => {
                let _g = self.lock(link_stripe(*id1, *link_type));
                *count_delta = if flip(&self.link_deleted, *slot, true) { 0 } else { -1 };
                exec(Some(op))
            }
            Op::UpdateNode(node) => {
                let _g = self.lock(node_stripe(node.id));
                if node.id <= self.graph.nodes() && test(&self.node_deleted, node.id) {
                    exec(None)
                } else {
                    exec(Some(op))
                }
            }
            Op::DeleteNode { id } => {
                let _g = self.lock(node_stripe(*id));
                if *id <= self.graph.nodes() {
                    flip(&self.node_deleted, *id, true);
                }
                exec(Some(op))
            }
            _ => exec(Some(op)),
        }
    }
}

/// One client's request stream.
pub struct Generator {
    rng: StdRng,
}

impl Generator {
    /// The stream of client `index` for `seed`.
    pub fn new(seed: u64, index: usize) -> Generator {
        Generator {
            rng: StdRng::seed_from_u64(seed ^ mix(index as u64 + 1)),
        }
    }

    /// The next request kind.
    pub fn kind(&mut self) -> OpKind {
        let mut u = self.rng.gen_range(0..1000u32);
        for (k, share) in MIX {
            if u < share {
                return k;
            }
            u -= share;
        }
        OpKind::GetLinkList
    }

    /// A node id by popularity.
    fn node(&mut self, s: &Shared) -> u64 {
        s.popular_id(self.rng.r#gen())
    }

    /// A node id by popularity among nodes with loaded links.
    fn linked_node(&mut self, s: &Shared) -> u64 {
        for _ in 0..64 {
            let id = self.node(s);
            if s.graph.degree(id) > 0 {
                return id;
            }
        }
        // Practically unreachable: the first node with links.
        (1..=s.graph.nodes()).find(|&i| s.graph.degree(i) > 0).unwrap_or(1)
    }

    /// A loaded link by popularity of its `id1`: `(id1, link_type, id2, slot)`.
    fn loaded_link(&mut self, s: &Shared) -> (u64, u64, u64, u64) {
        let id1 = self.linked_node(s);
        let j = self.rng.gen_range(0..s.graph.degree(id1).max(1));
        let (t, id2) = s.graph.link_key(id1, j);
        (id1, t, id2, s.graph.slot(id1, j))
    }

    fn version(&self, s: &Shared) -> u64 {
        s.next_version.fetch_add(1, Ordering::Relaxed)
    }

    /// A full request of kind `kind`.
    pub fn op(&mut self, kind: OpKind, s: &Shared) -> Op {
        match kind {
            OpKind::GetLinkList => Op::GetLinkList {
                id1: self.linked_node(s),
                link_type: self.rng.gen_range(1..=LINK_TYPES),
                max_time: now_ms(),
                limit: self.rng.gen_range(10..=50),
            },
            OpKind::GetNode => Op::GetNode { id: self.node(s) },
            OpKind::CountLink => Op::CountLink {
                id: self.linked_node(s),
                link_type: self.rng.gen_range(1..=LINK_TYPES),
            },
            OpKind::GetLink => {
                let (id1, link_type, id2, _) = self.loaded_link(s);
                Op::GetLink { id1, link_type, id2 }
            }
            OpKind::AddLink => {
                let id1 = self.node(s);
                let link_type = self.rng.gen_range(1..=LINK_TYPES);
                Op::AddLink(self.link(s, id1, link_type, s.next_id2.fetch_add(1, Ordering::Relaxed)))
            }
            OpKind::UpdateLink => {
                let (id1, link_type, id2, slot) = self.loaded_link(s);
                Op::UpdateLink {
                    link: self.link(s, id1, link_type, id2),
                    slot,
                    count_delta: 0,
                }
            }
            OpKind::DeleteLink => {
                let (id1, link_type, id2, slot) = self.loaded_link(s);
                Op::DeleteLink {
                    id1,
                    link_type,
                    id2,
                    slot,
                    count_delta: 0,
                }
            }
            OpKind::UpdateNode => {
                let mut id = self.node(s);
                for _ in 0..8 {
                    if !test(&s.node_deleted, id) {
                        break;
                    }
                    id = self.node(s);
                }
                Op::UpdateNode(self.new_node(s, id))
            }
            OpKind::AddNode => {
                let id = s.next_node.fetch_add(1, Ordering::Relaxed);
                Op::AddNode(self.new_node(s, id))
            }
            OpKind::DeleteNode => Op::DeleteNode {
                id: self.rng.gen_range(1..=s.graph.nodes()),
            },
        }
    }

    fn link(&mut self, s: &Shared, id1: u64, link_type: u64, id2: u64) -> Link {
        Link {
            id1,
            link_type,
            id2,
            visibility: VISIBLE,
            data: payload(&mut self.rng, LINK_DATA),
            time: now_ms(),
            version: self.version(s),
        }
    }

    fn new_node(&mut self, s: &Shared, id: u64) -> Node {
        Node {
            id,
            ty: NODE_TYPE,
            version: self.version(s),
            time: now_ms(),
            data: payload(&mut self.rng, NODE_DATA),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_sums_to_one_hundred_percent() {
        assert_eq!(MIX.iter().map(|(_, s)| s).sum::<u32>(), 1000);
        let reads: f64 = MIX.iter().filter(|(k, _)| k.is_read()).map(|(k, _)| k.percent()).sum();
        assert!((reads - 69.0).abs() < 1e-9);
    }

    #[test]
    fn op_mix_within_tolerance_over_100k_draws() {
        let shared = Shared::new(Graph::new(2000, 5), 1.0);
        let mut g = Generator::new(11, 0);
        let mut counts = [0u64; 10];
        for _ in 0..100_000 {
            let k = g.kind();
            let op = g.op(k, &shared);
            assert_eq!(op.kind(), k);
            counts[k.index()] += 1;
        }
        for (k, _) in MIX {
            let got = counts[k.index()] as f64 / 1000.0;
            // Binomial sd is at most 0.16 points: 0.6 points is > 3.5 sd.
            assert!(
                (got - k.percent()).abs() < 0.6,
                "{}: {got}% vs {}%",
                k.name(),
                k.percent()
            );
        }
    }

    #[test]
    fn popularity_is_monotone_in_rank_and_scattered_over_ids() {
        let shared = Shared::new(Graph::new(1000, 5), 1.0);
        let mut g = Generator::new(3, 1);
        let mut counts = vec![0u64; 1001];
        for _ in 0..100_000 {
            counts[g.node(&shared) as usize] += 1;
        }
        let by_rank = |r: u64| counts[shared.id_of_rank(r) as usize];
        assert!(by_rank(1) > by_rank(2) && by_rank(2) > by_rank(4) && by_rank(4) > by_rank(16));
        assert!(by_rank(16) > by_rank(256));
        // The rank -> id map is a permutation that scatters the hot ids.
        let ids: std::collections::HashSet<u64> = (1..=1000).map(|r| shared.id_of_rank(r)).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|&i| (1..=1000).contains(&i)));
        assert!((1..=10).map(|r| shared.id_of_rank(r)).any(|i| i > 100));
    }

    #[test]
    fn link_ops_target_loaded_links_and_track_counts() {
        let shared = Shared::new(Graph::new(500, 2), 1.0);
        let mut g = Generator::new(1, 0);
        for _ in 0..200 {
            match g.op(OpKind::UpdateLink, &shared) {
                Op::UpdateLink { link, slot, .. } => {
                    let d = shared.graph.degree(link.id1);
                    assert!(d > 0);
                    let j = slot - shared.graph.slot(link.id1, 0);
                    assert_eq!(shared.graph.link_key(link.id1, j), (link.link_type, link.id2));
                }
                other => panic!("{other:?}"),
            }
        }
        let Op::DeleteLink {
            id1,
            link_type,
            id2,
            slot,
            ..
        } = g.op(OpKind::DeleteLink, &shared)
        else {
            panic!("not a deletelink");
        };
        let del = || Op::DeleteLink {
            id1,
            link_type,
            id2,
            slot,
            count_delta: 0,
        };
        let delta = |op: Option<&Op>| match op {
            Some(Op::DeleteLink { count_delta, .. }) | Some(Op::UpdateLink { count_delta, .. }) => *count_delta,
            _ => 99,
        };
        assert_eq!(shared.execute(&mut del(), delta), -1);
        assert_eq!(shared.execute(&mut del(), delta), 0);
        let mut upd = Op::UpdateLink {
            link: g.link(&shared, id1, link_type, id2),
            slot,
            count_delta: 0,
        };
        assert_eq!(shared.execute(&mut upd.clone(), delta), 1);
        assert_eq!(shared.execute(&mut upd, delta), 0);
        assert_eq!(shared.execute(&mut del(), delta), -1);
    }

    #[test]
    fn updates_of_deleted_nodes_are_skipped() {
        let shared = Shared::new(Graph::new(100, 2), 1.0);
        let mut g = Generator::new(1, 0);
        shared.execute(&mut Op::DeleteNode { id: 7 }, |_| ());
        let mut op = Op::UpdateNode(g.new_node(&shared, 7));
        assert!(shared.execute(&mut op, |o| o.is_none()));
        let mut op = Op::UpdateNode(g.new_node(&shared, 8));
        assert!(shared.execute(&mut op, |o| o.is_some()));
    }
}
