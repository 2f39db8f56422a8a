//! One file per policy (a folder where a policy has seams of its own:
//! `pollux_ga`). Shared helpers for fixed-size policies live here.

pub mod fair_share;
pub mod fifo;
pub mod greedy;
pub mod optimus;
pub mod pollux_ga;
pub mod srtf;
pub mod tiresias;
pub mod tiresias_gittins;

use gpuplan_core::{Allocation, JobId, Plan, PlanStatus, Round, RoundJob, Sticky};

use crate::candidates::kept_charge;
use crate::placement::FreeGpus;
use crate::{placements, Limits};

/// GPUs a fixed-size job runs with: its request, within its limits.
/// 0 when the job may not run at all (`max_gpus` 0, or min above max).
pub fn fixed_gpus(job: &RoundJob) -> u32 {
    if job.max_gpus < job.min_gpus.max(1) {
        return 0;
    }
    job.requested_gpus.clamp(job.min_gpus.max(1), job.max_gpus)
}

/// Turn a list of (job, GPU count) decisions into a plan.
///
/// Jobs whose count is unchanged keep their current GPUs (no restart); the
/// rest are placed consolidated, in the given order. Jobs that no longer fit
/// get nothing. Pinned (non-preemptible, running) jobs always keep theirs.
/// A round whose `params.placement` is not `default` places through that
/// placement instead ([`crate::placements`]).
pub fn place_counts(name: &str, round: &Round, limits: &Limits, decisions: &[(JobId, u32)]) -> Plan {
    place_counts_with(name, round, limits, decisions, |_, free, k| free.take_packed(k))
}

/// [`place_counts`] with a caller-chosen placement for jobs that (re)start,
/// for policies whose placement depends on the job (e.g. Tiresias's
/// profile-based consolidation). A placement named in the round's params
/// replaces it: the user asked for that one.
pub fn place_counts_with(
    name: &str,
    round: &Round,
    limits: &Limits,
    decisions: &[(JobId, u32)],
    mut place: impl FnMut(&RoundJob, &mut FreeGpus, u32) -> Option<Allocation>,
) -> Plan {
    let stage = placements::stage(round.params.placement);
    // The policy's own placement always keeps running jobs; a chosen one
    // keeps them only when asked to (PAL re-places every round).
    let sticky = stage.is_none() || round.params.sticky == Sticky::Keep;
    let (mut plan, mut free, rest) = keep_and_admit(name, round, decisions, sticky);
    if let Some(stage) = stage {
        placements::place_all(round, limits, stage.as_ref(), &mut plan, rest);
        return plan;
    }
    let types = round.cluster.type_index();
    for (j, k) in rest {
        if let Some(a) = place_one_type(round, &types, &mut free, k, |free, k| place(j, free, k)) {
            plan.allocations.insert(j.id, a);
        }
    }
    plan
}

/// The plan's fixed part and what is left to place: pinned jobs keep their
/// GPUs; each decision's count is fitted to the job's limits and the
/// largest GPU type; with `sticky`, a running job whose count is unchanged
/// keeps its GPUs when they are free. Returns the plan so far, the GPUs it
/// leaves free, and the (job, count) pairs to place, in decision order.
fn keep_and_admit<'r>(
    name: &str,
    round: &'r Round,
    decisions: &[(JobId, u32)],
    sticky: bool,
) -> (Plan, FreeGpus, Vec<(&'r RoundJob, u32)>) {
    let mut free = FreeGpus::new(&round.cluster);
    let mut plan = Plan::new(name, PlanStatus::Feasible);
    // Ids are unique (the round check), so an index finds the same job.
    let index: std::collections::HashMap<JobId, &RoundJob> = round.jobs.iter().map(|j| (j.id, j)).collect();
    let by_id = |id: JobId| index.get(&id).copied();
    // Pinned jobs keep their GPUs, sharers included (the round check let
    // them share): each GPU they hold is taken once.
    let kept = kept_charge(round);
    for (j, charge) in round.jobs.iter().zip(&kept) {
        if !j.preemptible && !j.current().is_empty() {
            free.take(charge);
            plan.allocations.insert(j.id, j.current().clone());
        }
    }
    let mut rest = Vec::new();
    // Types once per round, not once per job placed.
    let types = round.cluster.type_index();
    let most = most_in_one_type(round, &types);
    for &(id, k) in decisions {
        if k == 0 || plan.allocations.contains_key(&id) {
            continue;
        }
        let Some(j) = by_id(id) else { continue };
        // A request larger than any one GPU type can hold (48 GPUs where
        // the largest type has 32) runs on as many as it can, within its
        // limits; otherwise it would wait forever.
        let k = if k > most && most >= j.min_gpus.max(1) {
            most
        } else {
            k
        };
        // A size outside the job's limits is never placed, whatever the
        // policy asked (it would be an invalid plan).
        if k < j.min_gpus.max(1) || k > j.max_gpus {
            continue;
        }
        if sticky && j.current().num_gpus() == k && round.keepable(j) && free.take(j.current()) {
            plan.allocations.insert(id, j.current().clone());
        } else {
            rest.push((j, k));
        }
    }
    (plan, free, rest)
}

/// The most GPUs one job can get: one type's largest nodes, up to
/// `max_nodes_per_job` of them.
fn most_in_one_type(round: &Round, types: &[usize]) -> u32 {
    let n_types = types.iter().max().map_or(0, |m| m + 1);
    (0..n_types)
        .map(|t| {
            let mut sizes: Vec<u32> = (0..types.len())
                .filter(|&i| types[i] == t)
                .map(|i| round.cluster.nodes[i].gpus)
                .collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            sizes
                .iter()
                .take(round.params.max_nodes_per_job as usize)
                .sum::<u32>()
        })
        .max()
        .unwrap_or(0)
}

/// Run `place` once per GPU type on a pool showing only that type's free
/// GPUs, and take the result spanning the fewest nodes (the first type on
/// ties; on a one-type cluster this is `place` itself). A job never mixes
/// types, and never spans more than `max_nodes_per_job` nodes: where the
/// policy's own placement would, it falls back to packing, else waits.
fn place_one_type(
    round: &Round,
    types: &[usize],
    free: &mut FreeGpus,
    k: u32,
    mut place: impl FnMut(&mut FreeGpus, u32) -> Option<Allocation>,
) -> Option<Allocation> {
    let n_types = types.iter().max().map_or(0, |m| m + 1);
    let max_nodes = round.params.max_nodes_per_job;
    if n_types <= 1 {
        // One type: the same choice as below, without the per-type views.
        let mut tried = free.clone();
        if let Some(a) = place(&mut tried, k).filter(|a| a.num_nodes() <= max_nodes) {
            *free = tried;
            return Some(a);
        }
        let mut packed = free.clone();
        let a = packed.take_packed(k).filter(|a| a.num_nodes() <= max_nodes)?;
        *free = packed;
        return Some(a);
    }
    let mut best: Option<(Allocation, FreeGpus)> = None;
    for t in 0..n_types {
        let mut view = free.clone();
        for (f, &ty) in view.free.iter_mut().zip(types) {
            if ty != t {
                *f = 0;
            }
        }
        let mut tried = view.clone();
        let a = place(&mut tried, k)
            .filter(|a| a.num_nodes() <= max_nodes)
            .map(|a| (a, tried))
            .or_else(|| {
                let mut packed = view.clone();
                packed
                    .take_packed(k)
                    .filter(|a| a.num_nodes() <= max_nodes)
                    .map(|a| (a, packed))
            });
        if let Some((a, after)) = a {
            if best.as_ref().is_none_or(|(b, _)| a.num_nodes() < b.num_nodes()) {
                // Only this type's nodes changed: carry the others over.
                let mut next = free.clone();
                for (i, &ty) in types.iter().enumerate() {
                    if ty == t {
                        next.free[i] = after.free[i];
                    }
                }
                best = Some((a, next));
            }
        }
    }
    let (a, next) = best?;
    *free = next;
    Some(a)
}

/// Hand-built rounds for planner unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    use gpuplan_core::{
        validate, Allocation, Interference, JobId, JobState, NodeId, PolicyParams, Round, RoundJob,
    };

    use crate::{Limits, Planner};

    /// A preemptible fixed-size job; `alloc` is (node, GPUs) pairs.
    pub fn job(id: u32, gpus: u32, submit_s: f64, attained_gpu_s: f64, alloc: &[(u32, u32)]) -> RoundJob {
        let counts: Vec<(NodeId, u32)> = alloc.iter().map(|&(n, k)| (NodeId(n), k)).collect();
        RoundJob {
            submit_s,
            requested_gpus: gpus,
            batch_size: 32,
            max_gpus: 64,
            state: JobState {
                attained_gpu_s,
                allocation: Allocation::from_counts(&counts),
                ..JobState::default()
            },
            ..RoundJob::new(JobId(id), format!("j{id}"), "test")
        }
    }

    /// A round on an `NxG` cluster, without the interference rule (the
    /// baselines do not apply it).
    pub fn round(cluster: &str, now_s: f64, jobs: Vec<RoundJob>) -> Round {
        Round {
            now_s,
            cluster: cluster.parse().unwrap(),
            jobs,
            params: PolicyParams {
                interference: Interference::Allow,
                ..PolicyParams::default()
            },
            variability: None,
            colocation: None,
            reserved: Vec::new(),
            queues: Vec::new(),
        }
    }

    /// A tiny discrete-time driver: jobs `(gpus, service in GPU-units)` all
    /// arrive at t=0; each unit step plans (every plan is validated), adds
    /// the GPUs held to each running job's attained service and completes
    /// jobs that reached their size. Returns each job's completion time (JCT).
    pub fn run_unit_steps(p: &mut dyn Planner, cluster: &str, jobs: &[(u32, f64)]) -> Vec<f64> {
        let n = jobs.len();
        let mut attained = vec![0.0; n];
        let mut alloc = vec![Allocation::default(); n];
        let mut jct: Vec<Option<f64>> = vec![None; n];
        let mut t = 0u32;
        while jct.iter().any(Option::is_none) {
            assert!(t < 10_000, "driver did not finish");
            let active: Vec<RoundJob> = (0..n)
                .filter(|&i| jct[i].is_none())
                .map(|i| {
                    let mut j = job(i as u32, jobs[i].0, 0.0, attained[i], &[]);
                    j.state.allocation = alloc[i].clone();
                    j
                })
                .collect();
            let r = round(cluster, f64::from(t), active);
            let plan = p.plan(&r, &Limits::default()).unwrap();
            validate(&r, &plan).unwrap();
            for i in 0..n {
                if jct[i].is_some() {
                    continue;
                }
                alloc[i] = plan.get(JobId(i as u32));
                attained[i] += f64::from(alloc[i].num_gpus());
                if attained[i] >= jobs[i].1 - 1e-9 {
                    jct[i] = Some(f64::from(t + 1));
                }
            }
            t += 1;
        }
        jct.into_iter().map(Option::unwrap).collect()
    }
}
