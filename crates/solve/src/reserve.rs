//! The pipeline's reserved-GPU stage: planners never see the GPUs that jobs
//! outside the round hold ([`Round::reserved`]).
//!
//! Rather than teach every planner the rule, the stage plans a smaller
//! round: each node less its reserved GPUs (a node left with none is
//! dropped), its GPUs renumbered, per-GPU speeds and current allocations
//! carried over; the plan's GPUs are then named in the whole round again.
//! A node's GPUs keep their order and their grouping, so every term of the
//! objective (nodes spanned, slowest GPU, sharing) is the same in both
//! rounds, and the plan is valid in the whole round exactly when it is in
//! the smaller one.

use gpuplan_core::{Allocation, Cluster, GpuId, NodeId, Plan, Round};

/// The round the planners see, and the way back to the whole round's GPUs.
pub(crate) struct Hidden {
    pub round: Round,
    /// `back[n]`: the whole round's node of small-round node `n`, and the
    /// whole round's index of each of its GPUs.
    back: Vec<(NodeId, Vec<u32>)>,
}

/// The round without its reserved GPUs; `None` when none is reserved.
/// The round is checked: its jobs hold no reserved GPU.
pub(crate) fn hide(round: &Round) -> Option<Hidden> {
    if round.reserved.is_empty() {
        return None;
    }
    let mut back = Vec::new();
    let mut nodes = Vec::new();
    // fwd[n][i]: the small round's GPU for the whole round's GPU i of node n.
    let mut fwd: Vec<Vec<Option<GpuId>>> = Vec::with_capacity(round.cluster.nodes.len());
    for (n, node) in round.cluster.nodes.iter().enumerate() {
        let free: Vec<u32> = (0..node.gpus)
            .filter(|&i| !round.reserved.contains(&GpuId::new(NodeId(n as u32), i)))
            .collect();
        let mut map = vec![None; node.gpus as usize];
        if !free.is_empty() {
            let small = NodeId(nodes.len() as u32);
            for (k, &i) in free.iter().enumerate() {
                map[i as usize] = Some(GpuId::new(small, k as u32));
            }
            nodes.push(gpuplan_core::Node {
                gpus: free.len() as u32,
                ..node.clone()
            });
            back.push((NodeId(n as u32), free));
        }
        fwd.push(map);
    }
    let mut small = Round {
        cluster: Cluster { nodes },
        reserved: Vec::new(),
        ..round.clone()
    };
    for j in &mut small.jobs {
        let gpus = j
            .state
            .allocation
            .gpus()
            .iter()
            .filter_map(|g| {
                fwd.get(g.node.0 as usize)?
                    .get(g.index as usize)
                    .copied()
                    .flatten()
            })
            .collect();
        j.state.allocation = Allocation::from_gpus(gpus);
    }
    if let Some(v) = &mut small.variability {
        v.per_node = back
            .iter()
            .map(|(n, free)| {
                let speeds = &v.per_node[n.0 as usize];
                free.iter()
                    .filter_map(|&i| speeds.get(i as usize).copied())
                    .collect()
            })
            .collect();
    }
    Some(Hidden { round: small, back })
}

impl Hidden {
    /// Name the plan's GPUs in the whole round (the plan is bound).
    pub fn restore(&self, plan: &mut Plan) {
        for a in plan.allocations.values_mut() {
            let gpus = a
                .gpus()
                .iter()
                .map(|g| {
                    let (n, free) = &self.back[g.node.0 as usize];
                    GpuId::new(*n, free[g.index as usize])
                })
                .collect();
            *a = Allocation::from_gpus(gpus);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::job;
    use gpuplan_core::Interference::Allow;
    use gpuplan_core::JobId;

    fn g(n: u32, i: u32) -> GpuId {
        GpuId::new(NodeId(n), i)
    }

    /// Node 0 loses GPUs 0 and 2, node 1 all of its GPUs: the small round
    /// has one node of two GPUs (the whole round's 1 and 3), a job's GPU 3
    /// becomes the small round's 1, and a plan's GPUs map back.
    #[test]
    fn reserved_gpus_leave_the_round_and_plans_map_back() {
        let mut j = job(0, 1, 0.0);
        j.state.allocation = Allocation::from_gpus(vec![g(0, 3)]);
        let mut r = crate::testutil::round("2x4", vec![j], Allow);
        r.reserved = vec![g(0, 0), g(0, 2), g(1, 0), g(1, 1), g(1, 2), g(1, 3)];
        r.check().unwrap();
        let h = hide(&r).unwrap();
        assert_eq!(h.round.cluster.nodes.len(), 1);
        assert_eq!(h.round.cluster.nodes[0].gpus, 2);
        assert_eq!(h.round.jobs[0].state.allocation.gpus(), &[g(0, 1)]);
        h.round.check().unwrap();
        let mut p = Plan::new("t", gpuplan_core::PlanStatus::Feasible);
        p.allocations
            .insert(JobId(0), Allocation::from_gpus(vec![g(0, 0), g(0, 1)]));
        h.restore(&mut p);
        assert_eq!(p.gpus_of(JobId(0)).gpus(), &[g(0, 1), g(0, 3)]);
        assert!(hide(&crate::testutil::round("1x4", Vec::new(), Allow)).is_none());
    }
}
