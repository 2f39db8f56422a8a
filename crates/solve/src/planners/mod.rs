//! One file per policy. Shared helpers for fixed-size policies live here.

pub mod fifo;
pub mod optimus;
pub mod pollux_ga;
pub mod srtf;

use gpuplan_core::{Allocation, JobId, Plan, PlanStatus, Round, RoundJob};

use crate::placement::FreeGpus;

/// GPUs a fixed-size job runs with: its request, within its limits.
pub fn fixed_gpus(job: &RoundJob) -> u32 {
    job.requested_gpus.clamp(job.min_gpus.max(1), job.max_gpus.max(1))
}

/// Turn a list of (job, GPU count) decisions into a plan.
///
/// Jobs whose count is unchanged keep their current GPUs (no restart); the
/// rest are placed consolidated, in the given order. Jobs that no longer fit
/// get nothing. Pinned (non-preemptible, running) jobs always keep theirs.
pub fn place_counts(name: &str, round: &Round, decisions: &[(JobId, u32)]) -> Plan {
    let mut free = FreeGpus::new(&round.cluster);
    let mut plan = Plan::new(name, PlanStatus::Feasible);
    let by_id = |id: JobId| round.jobs.iter().find(|j| j.id == id);
    for j in round
        .jobs
        .iter()
        .filter(|j| !j.preemptible && !j.current().is_empty())
    {
        if free.take(j.current()) {
            plan.allocations.insert(j.id, j.current().clone());
        }
    }
    let mut rest = Vec::new();
    for &(id, k) in decisions {
        if k == 0 || plan.allocations.contains_key(&id) {
            continue;
        }
        let Some(j) = by_id(id) else { continue };
        if j.current().num_gpus() == k && free.take(j.current()) {
            plan.allocations.insert(id, j.current().clone());
        } else {
            rest.push((id, k));
        }
    }
    for (id, k) in rest {
        if let Some(a) = free.take_packed(k) {
            plan.allocations.insert(id, a);
        }
    }
    plan
}

/// Current allocation of a job in the round, for readability at call sites.
pub fn current(round: &Round, id: JobId) -> Allocation {
    round
        .jobs
        .iter()
        .find(|j| j.id == id)
        .map(|j| j.current().clone())
        .unwrap_or_default()
}
