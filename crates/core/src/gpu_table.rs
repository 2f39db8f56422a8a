//! The binder's working parts: a flat per-GPU table and the pass that
//! names unnamed slots in it. They know a cluster and allocations, not a
//! round or a plan, so that loading a [`crate::Round`] (which binds its
//! legacy allocations) and validating a plan can both use them from below;
//! the binder over a round and a plan ([`crate::bind_plan`]) sits above,
//! in `bind`.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, NodeId, MAX_GPUS_PER_NODE};
use crate::job::{Allocation, GpuId};

/// One flat slot per GPU of the cluster (nodes laid end to end), so the
/// per-round checks cost one allocation, not one per node or a hash map.
pub(crate) struct GpuTable<T> {
    offset: Vec<usize>,
    slots: Vec<T>,
}

impl<T: Clone> GpuTable<T> {
    /// A node of absurd size is rejected by `Round::check`; capping here
    /// means an unchecked round can never allocate gigabytes.
    pub(crate) fn new(cluster: &Cluster, empty: T) -> Self {
        let mut offset = Vec::with_capacity(cluster.nodes.len() + 1);
        let mut total = 0usize;
        offset.push(0);
        for n in &cluster.nodes {
            total += n.gpus.min(MAX_GPUS_PER_NODE) as usize;
            offset.push(total);
        }
        GpuTable {
            offset,
            slots: vec![empty; total],
        }
    }

    /// The slot of a GPU, `None` if the node or index does not exist.
    pub(crate) fn get_mut(&mut self, g: GpuId) -> Option<&mut T> {
        let n = g.node.0 as usize;
        let (a, b) = (*self.offset.get(n)?, *self.offset.get(n + 1)?);
        let i = a.checked_add(g.index as usize).filter(|&i| i < b)?;
        self.slots.get_mut(i)
    }

    fn node_mut(&mut self, node: usize) -> Option<&mut [T]> {
        let (a, b) = (*self.offset.get(node)?, *self.offset.get(node + 1)?);
        Some(&mut self.slots[a..b])
    }
}

/// Which GPUs are taken.
struct Taken(GpuTable<bool>);

impl Taken {
    fn new(cluster: &Cluster) -> Self {
        Taken(GpuTable::new(cluster, false))
    }

    /// Mark a named GPU; false if it does not exist or was taken.
    fn take(&mut self, g: GpuId) -> bool {
        match self.0.get_mut(g) {
            Some(t) if !*t => {
                *t = true;
                true
            }
            _ => false,
        }
    }

    fn lowest_free(&mut self, node: usize) -> Option<u32> {
        let n = self.0.node_mut(node)?;
        let i = n.iter().position(|t| !*t)?;
        n[i] = true;
        Some(i as u32)
    }
}

/// Bind the unnamed slots of `allocs` (in order), after every named GPU in
/// them is reserved; `own` gives each allocation's preferred GPUs (its job's
/// current ones), tried before the lowest free index. Slots that cannot be
/// bound (the node is full) stay unnamed: the validator reports the node.
pub(crate) fn bind_all(
    cluster: &Cluster,
    reserved: &[crate::GpuId],
    allocs: &mut [(&mut Allocation, Option<&Allocation>)],
) {
    let mut taken = Taken::new(cluster);
    // GPUs jobs outside the round hold are never named for one inside it.
    for g in reserved {
        taken.take(*g);
    }
    for (a, _) in allocs.iter() {
        for g in a.gpus().iter().filter(|g| g.is_bound()) {
            taken.take(*g);
        }
    }
    // (allocation, node) → named GPUs it gets; two passes so a job's own
    // GPUs are never given to another job first.
    let mut out: Vec<BTreeMap<u32, Vec<u32>>> = vec![BTreeMap::new(); allocs.len()];
    let mut want: Vec<Vec<(u32, u32)>> = Vec::with_capacity(allocs.len());
    for (i, (a, own)) in allocs.iter().enumerate() {
        let mut w = Vec::new();
        for (n, k) in unnamed_per_node(a) {
            let mut k = k;
            if let Some(own) = own {
                for g in own.gpus().iter().filter(|g| g.node.0 == n && g.is_bound()) {
                    if k == 0 {
                        break;
                    }
                    if taken.take(*g) {
                        out[i].entry(n).or_default().push(g.index);
                        k -= 1;
                    }
                }
            }
            w.push((n, k));
        }
        want.push(w);
    }
    for (i, w) in want.into_iter().enumerate() {
        for (n, k) in w {
            for _ in 0..k {
                match taken.lowest_free(n as usize) {
                    Some(ix) => out[i].entry(n).or_default().push(ix),
                    None => break,
                }
            }
        }
    }
    for ((a, _), named) in allocs.iter_mut().zip(out) {
        if named.is_empty() {
            continue;
        }
        let mut gpus: Vec<GpuId> = a.gpus().iter().copied().filter(GpuId::is_bound).collect();
        let mut left: BTreeMap<u32, u32> = unnamed_per_node(a).into_iter().collect();
        for (n, ixs) in named {
            for ix in ixs {
                gpus.push(GpuId::new(NodeId(n), ix));
                *left.get_mut(&n).expect("bound only unnamed slots") -= 1;
            }
        }
        for (n, k) in left {
            gpus.extend(std::iter::repeat_n(GpuId::any_on(NodeId(n)), k as usize));
        }
        **a = Allocation::from_gpus(gpus);
    }
}

fn unnamed_per_node(a: &Allocation) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for g in a.gpus().iter().filter(|g| !g.is_bound()) {
        match out.last_mut() {
            Some((n, k)) if *n == g.node.0 => *k += 1,
            _ => out.push((g.node.0, 1)),
        }
    }
    out
}
