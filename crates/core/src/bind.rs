//! Naming GPUs: turning node-level slots ("some GPU on node 3") into
//! particular GPUs ("GPU 1 of node 3").
//!
//! Planners that decide at node level, and round files written before GPUs
//! had identity, leave slots unnamed. Binding happens in one place so every
//! driver gives a job the same devices: named GPUs stay as they are, a job
//! keeps its own current GPUs on a node first (so "same nodes" means "same
//! GPUs" and no planner's keep turns into a move), and the rest take the
//! lowest free index.

use std::collections::BTreeMap;

use crate::job::{Allocation, GpuId, JobId};
use crate::plan::Plan;
use crate::round::Round;

/// One flat slot per GPU of the cluster (nodes laid end to end), so the
/// per-round checks cost one allocation, not one per node or a hash map.
pub(crate) struct GpuTable<T> {
    offset: Vec<usize>,
    slots: Vec<T>,
}

impl<T: Clone> GpuTable<T> {
    /// A node of absurd size is rejected by `Round::check`; capping here
    /// means an unchecked round can never allocate gigabytes.
    pub(crate) fn new(cluster: &crate::Cluster, empty: T) -> Self {
        let mut offset = Vec::with_capacity(cluster.nodes.len() + 1);
        let mut total = 0usize;
        offset.push(0);
        for n in &cluster.nodes {
            total += n.gpus.min(crate::round::MAX_GPUS_PER_NODE) as usize;
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
    fn new(round: &Round) -> Self {
        Taken(GpuTable::new(&round.cluster, false))
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
fn bind_all(round: &Round, allocs: &mut [(&mut Allocation, Option<&Allocation>)]) {
    let mut taken = Taken::new(round);
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
                gpus.push(GpuId::new(crate::NodeId(n), ix));
                *left.get_mut(&n).expect("bound only unnamed slots") -= 1;
            }
        }
        for (n, k) in left {
            gpus.extend(std::iter::repeat_n(GpuId::any_on(crate::NodeId(n)), k as usize));
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

/// Name the unnamed GPUs of the round's current allocations, in job order.
pub fn bind_round(round: &mut Round) {
    if round.jobs.iter().all(|j| j.state.allocation.is_bound()) {
        return;
    }
    let mut jobs = std::mem::take(&mut round.jobs);
    {
        let mut allocs: Vec<(&mut Allocation, Option<&Allocation>)> =
            jobs.iter_mut().map(|j| (&mut j.state.allocation, None)).collect();
        bind_all(round, &mut allocs);
    }
    round.jobs = jobs;
}

/// Name the unnamed GPUs of a plan: each job keeps its own current GPUs
/// first, then takes the lowest free ones. A plan that names every GPU is
/// left as it is.
pub fn bind_plan(round: &Round, plan: &mut Plan) {
    if plan.allocations.values().all(Allocation::is_bound) {
        return;
    }
    let mut current: std::collections::HashMap<JobId, &Allocation> =
        std::collections::HashMap::with_capacity(round.jobs.len());
    current.extend(round.jobs.iter().map(|j| (j.id, &j.state.allocation)));
    let mut allocs: Vec<(&mut Allocation, Option<&Allocation>)> = plan
        .allocations
        .iter_mut()
        .map(|(id, a)| (a, current.get(id).copied()))
        .collect();
    bind_all(round, &mut allocs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobState, NodeId, PlanStatus, PolicyParams, RoundJob};

    fn job(id: u32, alloc: Allocation) -> RoundJob {
        RoundJob {
            state: JobState {
                allocation: alloc,
                ..JobState::default()
            },
            ..crate::round::test_job(id)
        }
    }

    fn g(n: u32, i: u32) -> GpuId {
        GpuId::new(NodeId(n), i)
    }

    #[test]
    fn legacy_rounds_bind_in_job_order_around_named_gpus() {
        let mut r = Round {
            now_s: 0.0,
            cluster: "2x4".parse().unwrap(),
            jobs: vec![
                job(0, Allocation::from_counts(&[(NodeId(0), 2)])),
                job(1, Allocation::from_gpus(vec![g(0, 0)])),
                job(2, Allocation::from_counts(&[(NodeId(0), 1), (NodeId(1), 1)])),
            ],
            params: PolicyParams::default(),
            variability: None,
            colocation: None,
        };
        bind_round(&mut r);
        assert_eq!(r.jobs[0].state.allocation.gpus(), &[g(0, 1), g(0, 2)]);
        assert_eq!(r.jobs[1].state.allocation.gpus(), &[g(0, 0)]);
        assert_eq!(r.jobs[2].state.allocation.gpus(), &[g(0, 3), g(1, 0)]);
    }

    #[test]
    fn a_plan_keeps_each_jobs_own_gpus_first() {
        let r = Round {
            now_s: 0.0,
            cluster: "1x4".parse().unwrap(),
            jobs: vec![
                job(0, Allocation::from_gpus(vec![g(0, 2), g(0, 3)])),
                job(1, Allocation::from_gpus(vec![g(0, 0)])),
            ],
            params: PolicyParams::default(),
            variability: None,
            colocation: None,
        };
        let mut plan = Plan::new("t", PlanStatus::Feasible);
        // Job 1 grows to 2 GPUs, job 0 keeps its count: both at node level.
        plan.allocations
            .insert(JobId(1), Allocation::from_counts(&[(NodeId(0), 2)]));
        plan.allocations
            .insert(JobId(0), Allocation::from_counts(&[(NodeId(0), 2)]));
        bind_plan(&r, &mut plan);
        assert_eq!(plan.get(JobId(0)), r.jobs[0].state.allocation);
        assert_eq!(plan.get(JobId(1)).gpus(), &[g(0, 0), g(0, 1)]);
        // A full node leaves the extra slot unnamed for the validator.
        plan.allocations
            .insert(JobId(1), Allocation::from_counts(&[(NodeId(0), 3)]));
        bind_plan(&r, &mut plan);
        assert_eq!(
            plan.get(JobId(1)).gpus().iter().filter(|g| !g.is_bound()).count(),
            1
        );
    }
}
