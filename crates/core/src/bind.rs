//! Naming GPUs: turning node-level slots ("some GPU on node 3") into
//! particular GPUs ("GPU 1 of node 3").
//!
//! Planners that decide at node level, and round files written before GPUs
//! had identity, leave slots unnamed. Binding happens in one place so every
//! driver gives a job the same devices: named GPUs stay as they are, a job
//! keeps its own current GPUs on a node first (so "same nodes" means "same
//! GPUs" and no planner's keep turns into a move), and the rest take the
//! lowest free index.

use crate::job::{Allocation, JobId};
use crate::plan::Plan;
use crate::round::Round;

use crate::gpu_table::bind_all;
// Defined beside `Round`, whose loading binds; its path stays here.
pub use crate::round::bind_round;

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
    let pinned: std::collections::HashSet<JobId> = round
        .jobs
        .iter()
        .filter(|j| !j.preemptible)
        .map(|j| j.id)
        .collect();
    let mut allocs: Vec<(bool, &mut Allocation, Option<&Allocation>)> = plan
        .allocations
        .iter_mut()
        .map(|(id, a)| (pinned.contains(id), a, current.get(id).copied()))
        .collect();
    // Pinned jobs name their own GPUs first: under sharing a GPU can be
    // the own GPU of a pinned job and of a preemptible partner, and only
    // the pinned one must keep it. Without pinned jobs the order is the
    // plan's, as before.
    allocs.sort_by_key(|a| !a.0);
    let mut allocs: Vec<(&mut Allocation, Option<&Allocation>)> =
        allocs.into_iter().map(|(_, a, c)| (a, c)).collect();
    bind_all(&round.cluster, &round.reserved, &mut allocs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GpuId, JobState, NodeId, PlanStatus, PolicyParams, RoundJob};

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
            reserved: Vec::new(),
            queues: Vec::new(),
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
            reserved: Vec::new(),
            queues: Vec::new(),
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
