//! Placement helpers shared by the heuristics: turn "job j gets k GPUs" into
//! node indices. Policy-agnostic on purpose (no branching on policy names).

use gpuplan_core::{Allocation, Cluster, NodeId};

/// Free GPUs per node, tracked while a plan is built.
#[derive(Debug, Clone)]
pub struct FreeGpus {
    pub free: Vec<u32>,
}

impl FreeGpus {
    pub fn new(cluster: &Cluster) -> Self {
        FreeGpus {
            free: cluster.nodes.iter().map(|n| n.gpus).collect(),
        }
    }

    pub fn total(&self) -> u32 {
        self.free.iter().sum()
    }

    /// Take the GPUs of an existing allocation out of the pool; false if they
    /// are not all free.
    pub fn take(&mut self, alloc: &Allocation) -> bool {
        let per = alloc.per_node();
        if per
            .iter()
            .any(|&(n, k)| self.free.get(n.0 as usize).is_none_or(|&f| f < k))
        {
            return false;
        }
        for (n, k) in per {
            self.free[n.0 as usize] -= k;
        }
        true
    }

    /// Consolidated placement: take GPUs from the nodes with the most free
    /// GPUs first (ties by index), so a job spans as few nodes as possible.
    /// `None` (and nothing taken) if fewer than `k` GPUs are free.
    pub fn take_packed(&mut self, k: u32) -> Option<Allocation> {
        if k == 0 || self.total() < k {
            return None;
        }
        let mut order: Vec<usize> = (0..self.free.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.free[i]), i));
        let mut need = k;
        let mut counts = Vec::new();
        for i in order {
            if need == 0 {
                break;
            }
            let t = self.free[i].min(need);
            if t > 0 {
                self.free[i] -= t;
                need -= t;
                counts.push((NodeId(i as u32), t));
            }
        }
        Some(Allocation::from_counts(&counts))
    }

    /// Best-fit on one node: the fullest node that still has `k` free GPUs.
    pub fn take_single_node(&mut self, k: u32) -> Option<Allocation> {
        let i = (0..self.free.len())
            .filter(|&i| self.free[i] >= k)
            .min_by_key(|&i| (self.free[i], i))?;
        self.free[i] -= k;
        Some(Allocation::from_counts(&[(NodeId(i as u32), k)]))
    }

    /// Spread placement: one GPU at a time from the node with the most free
    /// GPUs, so a job uses as many nodes as possible.
    pub fn take_spread(&mut self, k: u32) -> Option<Allocation> {
        if k == 0 || self.total() < k {
            return None;
        }
        let mut gpus = Vec::with_capacity(k as usize);
        for _ in 0..k {
            let i = (0..self.free.len()).max_by_key(|&i| (self.free[i], std::cmp::Reverse(i)))?;
            self.free[i] -= 1;
            gpus.push(NodeId(i as u32));
        }
        Some(Allocation::new(gpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_prefers_fullest_free_nodes() {
        let c: Cluster = "3x4".parse().unwrap();
        let mut f = FreeGpus::new(&c);
        assert!(f.take(&Allocation::from_counts(&[(NodeId(0), 3)])));
        let a = f.take_packed(5).unwrap();
        assert_eq!(a.per_node(), vec![(NodeId(1), 4), (NodeId(2), 1)]);
        assert_eq!(f.free, vec![1, 0, 3]);
        assert!(f.take_packed(5).is_none());
        assert_eq!(f.free, vec![1, 0, 3]);
        let s = f.take_single_node(1).unwrap();
        assert_eq!(s.per_node(), vec![(NodeId(0), 1)]);
        let sp = f.take_spread(2).unwrap();
        assert_eq!(sp.per_node(), vec![(NodeId(2), 2)]);
    }
}
