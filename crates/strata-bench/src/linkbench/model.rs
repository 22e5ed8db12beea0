//! The LinkBench data model and the loaded graph.
//!
//! Rows of the three tables (`node`, `link`, `count`) as plain structs the engine drivers
//! translate, and [`Graph`]: the nodes and links of the load phase as a pure function of
//! the seed. Node `i` (1-based) has `degree(i)` out-links drawn from the power-law
//! [`Degree`] distribution; its link `j` goes to a distinct `id2` with link type 1 or 2.
//! The generator uses the same function to address loaded links by a global slot
//! number (`offsets[i-1] + j`), so it can update and delete existing links blind.

use rand::{Rng, RngCore};

use super::dist::{Degree, coprime_at_least, mix, unit};

/// `visibility` of a live link (LinkBench `VISIBILITY_DEFAULT`).
pub const VISIBLE: u64 = 1;
/// Node type of every node (LinkBench's default `id1_type`).
pub const NODE_TYPE: u64 = 2048;
/// Link types are `1..=LINK_TYPES`.
pub const LINK_TYPES: u64 = 2;
/// Mean out-degree of a loaded node.
pub const MEAN_DEGREE: f64 = 4.0;
/// Node payload sizes (bytes, inclusive).
pub const NODE_DATA: (usize, usize) = (100, 200);
/// Link payload sizes (bytes, inclusive).
pub const LINK_DATA: (usize, usize) = (8, 32);
/// Loaded links' times are spread over this many milliseconds before the load.
const TIME_SPREAD_MS: u64 = 30 * 24 * 3600 * 1000;

/// A row of `node(id, type, version, time, data)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: u64,
    pub ty: u64,
    pub version: u64,
    pub time: u64,
    pub data: Vec<u8>,
}

/// A row of `link(id1, link_type, id2, visibility, data, time, version)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub id1: u64,
    pub link_type: u64,
    pub id2: u64,
    pub visibility: u64,
    pub data: Vec<u8>,
    pub time: u64,
    pub version: u64,
}

/// A row of `count(id, link_type, count, time, version)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    pub id: u64,
    pub link_type: u64,
    pub count: u64,
    pub time: u64,
    pub version: u64,
}

/// Random payload of a size uniform in `size.0..=size.1`.
pub fn payload(rng: &mut impl RngCore, size: (usize, usize)) -> Vec<u8> {
    let mut v = vec![0u8; rng.gen_range(size.0..=size.1)];
    rng.fill_bytes(&mut v);
    v
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The loaded graph: `n` nodes, their out-degrees and their links, from one seed.
#[derive(Debug)]
pub struct Graph {
    n: u64,
    seed: u64,
    /// `offsets[i-1]` = slot of node i's first link; `offsets[n]` = total links.
    offsets: Vec<u64>,
    /// Step between the targets of one node's links (coprime with n: distinct id2).
    step: u64,
    degree: Degree,
}

impl Graph {
    /// The graph of `n` nodes (n ≥ 1).
    pub fn new(n: u64, seed: u64) -> Graph {
        let n = n.max(1);
        let degree = Degree::with_mean(MEAN_DEGREE);
        let mut offsets = Vec::with_capacity(n as usize + 1);
        let mut acc = 0u64;
        offsets.push(0);
        for i in 1..=n {
            acc += degree.at(unit(mix(seed ^ mix(i)))).min(n);
            offsets.push(acc);
        }
        Graph {
            n,
            seed,
            offsets,
            step: coprime_at_least(n / 3 + 7, n),
            degree,
        }
    }

    /// Loaded nodes (ids `1..=n`).
    pub fn nodes(&self) -> u64 {
        self.n
    }

    /// Loaded links over all nodes.
    pub fn links(&self) -> u64 {
        self.offsets[self.n as usize]
    }

    /// The degree distribution's exponent (for the report).
    pub fn degree_exponent(&self) -> f64 {
        self.degree.exponent()
    }

    /// Out-degree of node `id` in the load.
    pub fn degree(&self, id: u64) -> u64 {
        let i = (id.clamp(1, self.n) - 1) as usize;
        self.offsets[i + 1] - self.offsets[i]
    }

    /// Global slot of node `id`'s link `j` (j < degree).
    pub fn slot(&self, id: u64, j: u64) -> u64 {
        self.offsets[(id - 1) as usize] + j
    }

    /// `(link_type, id2)` of node `id1`'s loaded link `j`.
    pub fn link_key(&self, id1: u64, j: u64) -> (u64, u64) {
        let h = mix(self.seed ^ mix(id1).rotate_left(17) ^ j);
        let base = mix(self.seed.wrapping_add(id1)) % self.n;
        let id2 = (base + (j % self.n) * self.step) % self.n + 1;
        (1 + h % LINK_TYPES, id2)
    }

    /// Load rows of node `id`: the node, its links and its non-zero counts.
    pub fn load_rows(&self, id: u64, load_time: u64, rng: &mut impl RngCore) -> (Node, Vec<Link>, Vec<Count>) {
        let node = Node {
            id,
            ty: NODE_TYPE,
            version: 0,
            time: load_time,
            data: payload(rng, NODE_DATA),
        };
        let mut links = Vec::with_capacity(self.degree(id) as usize);
        let mut per_type = [0u64; LINK_TYPES as usize];
        for j in 0..self.degree(id) {
            let (link_type, id2) = self.link_key(id, j);
            per_type[(link_type - 1) as usize] += 1;
            links.push(Link {
                id1: id,
                link_type,
                id2,
                visibility: VISIBLE,
                data: payload(rng, LINK_DATA),
                time: load_time - rng.gen_range(0..TIME_SPREAD_MS),
                version: 0,
            });
        }
        let counts = (1..=LINK_TYPES)
            .filter(|t| per_type[(t - 1) as usize] > 0)
            .map(|t| Count {
                id,
                link_type: t,
                count: per_type[(t - 1) as usize],
                time: load_time,
                version: 0,
            })
            .collect();
        (node, links, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng};
    use std::collections::HashSet;

    #[test]
    fn loaded_links_have_distinct_keys_and_consistent_counts() {
        let g = Graph::new(5000, 9);
        let mean = g.links() as f64 / g.nodes() as f64;
        assert!((2.5..6.0).contains(&mean), "mean degree {mean}");
        let mut rng = StdRng::seed_from_u64(1);
        let mut keys = HashSet::new();
        for id in 1..=g.nodes() {
            let (node, links, counts) = g.load_rows(id, 1 << 50, &mut rng);
            assert_eq!(node.id, id);
            assert!((NODE_DATA.0..=NODE_DATA.1).contains(&node.data.len()));
            assert_eq!(links.len() as u64, g.degree(id));
            for (j, l) in links.iter().enumerate() {
                assert!(keys.insert((l.id1, l.link_type, l.id2)), "duplicate link");
                assert_eq!((l.link_type, l.id2), g.link_key(id, j as u64));
                assert!((1..=g.nodes()).contains(&l.id2));
            }
            assert_eq!(counts.iter().map(|c| c.count).sum::<u64>(), g.degree(id));
        }
        assert_eq!(keys.len() as u64, g.links());
        assert_eq!(g.slot(g.nodes(), g.degree(g.nodes())), g.links());
    }
}
