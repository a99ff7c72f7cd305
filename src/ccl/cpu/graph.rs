//! Komura's generalized connected-component labeling (Y. Komura, "A generalized GPU-based
//! connected component labeling algorithm", CPC 2016) on an arbitrary graph given as a
//! nearest-neighbour (NN) list: the same four steps as the square-lattice version, with
//! "lower-numbered neighbours" read from the list instead of the lattice.
//!
//! (i) initialisation: each site's label is the lowest-numbered of its lower-numbered
//! neighbours (the "residual list"), or its own number; (ii) analysis: pointer jumping to the
//! root; (iii) label reduction (Komura's alg. 1, atomicMin) with the rest of the residual list;
//! (iv) analysis. Each step runs over all sites in parallel (rayon) with atomics, as the GPU
//! threads do. A library API (CPU); every cluster ends labeled with its smallest site number.

use crate::error::{Error, Result};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// An undirected graph as a nearest-neighbour list in CSR form: the neighbours of site i are
/// `targets[offsets[i]..offsets[i + 1]]`. Every edge is listed from both ends (the paper's NN
/// lists are symmetric; the residual lists rely on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourList {
    offsets: Vec<usize>,
    targets: Vec<u32>,
}

impl NeighbourList {
    /// Checks the CSR arrays: `offsets` has sites + 1 non-decreasing entries from 0 to
    /// `targets.len()`, every target is a site, and every edge is listed from both ends.
    pub fn new(offsets: Vec<usize>, targets: Vec<u32>) -> Result<Self> {
        let bad = |why: String| Err(Error::Invalid(format!("neighbour list: {why}")));
        if offsets.first() != Some(&0) || offsets.last() != Some(&targets.len()) {
            return bad(format!(
                "offsets must start at 0 and end at the number of targets ({})",
                targets.len()
            ));
        }
        if offsets.windows(2).any(|p| p[0] > p[1]) {
            return bad("offsets must not decrease".into());
        }
        let sites = offsets.len() - 1;
        if sites > u32::MAX as usize {
            return bad(format!("{sites} sites do not fit 32-bit labels"));
        }
        let list = NeighbourList { offsets, targets };
        let mut sorted: Vec<Vec<u32>> = (0..sites).map(|i| list.neighbours(i).to_vec()).collect();
        for s in &mut sorted {
            s.sort_unstable();
        }
        for i in 0..sites {
            for &j in list.neighbours(i) {
                if j as usize >= sites {
                    return bad(format!(
                        "site {i} lists neighbour {j}, but there are {sites} sites"
                    ));
                }
                if sorted[j as usize].binary_search(&(i as u32)).is_err() {
                    return bad(format!("site {i} lists {j}, but {j} does not list {i}"));
                }
            }
        }
        Ok(list)
    }

    /// The symmetric list of `sites` sites with the undirected `edges`.
    pub fn from_edges(sites: usize, edges: &[(u32, u32)]) -> Result<Self> {
        let mut degree = vec![0usize; sites];
        for &(a, b) in edges {
            if a as usize >= sites || b as usize >= sites {
                return Err(Error::Invalid(format!(
                    "edge ({a}, {b}) names a site beyond the {sites} sites"
                )));
            }
            degree[a as usize] += 1;
            degree[b as usize] += 1;
        }
        let mut offsets = vec![0usize; sites + 1];
        for i in 0..sites {
            offsets[i + 1] = offsets[i] + degree[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; offsets[sites]];
        for &(a, b) in edges {
            targets[fill[a as usize]] = b;
            fill[a as usize] += 1;
            targets[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        NeighbourList::new(offsets, targets)
    }

    pub fn sites(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn neighbours(&self, site: usize) -> &[u32] {
        &self.targets[self.offsets[site]..self.offsets[site + 1]]
    }
}

/// Root of label `l` (plain loads; labels only point to smaller ones).
fn root(label: &[AtomicU32], mut l: u32) -> u32 {
    loop {
        let p = label[l as usize].load(Ordering::Acquire);
        if p == l {
            return l;
        }
        l = p;
    }
}

/// The initial label of site i: its lowest-numbered lower neighbour, or i.
fn initial(graph: &NeighbourList, i: usize) -> u32 {
    graph
        .neighbours(i)
        .iter()
        .copied()
        .filter(|&j| (j as usize) < i)
        .min()
        .unwrap_or(i as u32)
}

/// Labels the clusters (connected components) of `graph`: `labels[i]` is the smallest site
/// number of i's cluster.
pub fn label_graph(graph: &NeighbourList) -> Vec<u32> {
    let n = graph.sites();
    // (i) Initialisation.
    let label: Vec<AtomicU32> = (0..n)
        .into_par_iter()
        .map(|i| AtomicU32::new(initial(graph, i)))
        .collect();
    let analysis = || {
        (0..n).into_par_iter().for_each(|i| {
            let l = label[i].load(Ordering::Acquire);
            let r = root(&label, l);
            if r != l {
                label[i].store(r, Ordering::Release);
            }
        })
    };
    // (ii) Analysis.
    analysis();
    // (iii) Label reduction with the residual list (lower neighbours but the initial one).
    (0..n).into_par_iter().for_each(|i| {
        let first = initial(graph, i);
        for &j in graph.neighbours(i) {
            if (j as usize) < i && j != first {
                reduce(&label, i as u32, j);
            }
        }
    });
    // (iv) Analysis.
    analysis();
    label.into_iter().map(AtomicU32::into_inner).collect()
}

/// Komura's alg. 1: joins the clusters of sites i and j, the smaller root winning.
fn reduce(label: &[AtomicU32], i: u32, j: u32) {
    let l1 = root(label, label[i as usize].load(Ordering::Acquire));
    let l2 = root(label, label[j as usize].load(Ordering::Acquire));
    join_roots(l1, l2, |l, v| {
        label[l as usize].fetch_min(v, Ordering::AcqRel)
    });
}

/// The loop of Komura's alg. 1 from the roots `l1` and `l2`: `fetch_min(l, v)` lowers label
/// `l`'s parent to at most `v` and returns the parent it had (an atomic minimum). It follows a
/// root that was lowered meanwhile until the larger root points at the smaller one.
pub(crate) fn join_roots(mut l1: u32, mut l2: u32, mut fetch_min: impl FnMut(u32, u32) -> u32) {
    if l1 == l2 {
        return;
    }
    if l1 < l2 {
        std::mem::swap(&mut l1, &mut l2);
    }
    loop {
        let l3 = fetch_min(l1, l2);
        if l3 == l2 || l3 == l1 {
            return;
        }
        if l3 > l2 {
            l1 = l3;
        } else {
            l1 = l2;
            l2 = l3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt;

    /// Breadth-first search: the smallest site number of each site's cluster.
    fn oracle(g: &NeighbourList) -> Vec<u32> {
        let n = g.sites();
        let mut label = vec![u32::MAX; n];
        for s in 0..n {
            if label[s] != u32::MAX {
                continue;
            }
            label[s] = s as u32;
            let mut queue = std::collections::VecDeque::from([s]);
            while let Some(i) = queue.pop_front() {
                for &j in g.neighbours(i) {
                    if label[j as usize] == u32::MAX {
                        label[j as usize] = s as u32;
                        queue.push_back(j as usize);
                    }
                }
            }
        }
        label
    }

    #[test]
    fn random_graphs_match_bfs() {
        let mut rng = Mt::new(2016);
        for round in 0..200u32 {
            let sites = 1 + (rng.next_u32() % 400) as usize;
            // From very sparse (many clusters) to dense (one cluster), with self-loops and
            // repeated edges.
            let edges_count = (rng.next_u32() as usize) % (sites * (1 + round as usize % 4));
            let edges: Vec<(u32, u32)> = (0..edges_count)
                .map(|_| (rng.next_u32() % sites as u32, rng.next_u32() % sites as u32))
                .collect();
            let g = NeighbourList::from_edges(sites, &edges).unwrap();
            assert_eq!(label_graph(&g), oracle(&g), "round {round}: {sites} sites");
        }
    }

    #[test]
    fn long_chain_numbered_backwards() {
        // A path whose site numbers fall along it: every site's residual list is empty but one.
        let n = 5000u32;
        let edges: Vec<(u32, u32)> = (1..n).map(|i| (n - i, n - i - 1)).collect();
        let g = NeighbourList::from_edges(n as usize, &edges).unwrap();
        assert!(label_graph(&g).iter().all(|&l| l == 0));
    }

    #[test]
    fn invalid_lists_are_rejected() {
        assert!(NeighbourList::new(vec![0, 1, 1], vec![1]).is_err()); // 1 does not list 0
        assert!(NeighbourList::new(vec![0, 1], vec![5]).is_err()); // no site 5
        assert!(NeighbourList::new(vec![1, 1], vec![]).is_err()); // bad offsets
        assert!(NeighbourList::from_edges(2, &[(0, 2)]).is_err());
        assert!(NeighbourList::new(vec![0, 1, 2], vec![1, 0]).is_ok());
    }
}
