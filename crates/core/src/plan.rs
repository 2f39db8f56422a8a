//! A round's answer ([`Plan`]) and the one independent validator every
//! planner's output goes through ([`validate`]).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::job::{Allocation, JobId};
use crate::round::{Interference, Round};

/// How a plan was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanStatus {
    /// Proven optimal (within the requested gap) for the planner's model.
    Optimal,
    /// Valid, but optimality is not proven (heuristics, time-outs with an incumbent).
    Feasible,
    /// The planner failed (time-out without incumbent, infeasible, solver
    /// error) and a heuristic produced this plan instead; see `reason`.
    Fallback,
}

/// The answer of one round: which GPUs each job gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub planner: String,
    /// Job → one node index per GPU. Jobs absent from the map get nothing.
    pub allocations: BTreeMap<JobId, Allocation>,
    pub status: PlanStatus,
    /// Why the plan fell back, or why some jobs could not be served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The planner's own bound on the objective, when it has one (MIP).
    #[serde(default)]
    pub bound: Option<f64>,
    #[serde(default)]
    pub gap: Option<f64>,
    pub solve_ms: f64,
}

/// How a plan is reported to users (CLI `plan`, the browser inspector): one
/// shape, so every front end shows the same keys and the same objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReport {
    pub planner: String,
    pub status: PlanStatus,
    /// Generalized mean of job speedups (higher is better), evaluated the same way for every planner.
    pub objective: f64,
    pub bound: Option<f64>,
    pub gap: Option<f64>,
    pub solve_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PlanReport {
    pub fn new(round: &Round, plan: &Plan) -> Self {
        PlanReport {
            planner: plan.planner.clone(),
            status: plan.status,
            objective: crate::objective::evaluate(round, plan),
            bound: plan.bound,
            gap: plan.gap,
            solve_ms: plan.solve_ms,
            reason: plan.reason.clone(),
        }
    }
}

impl Plan {
    pub fn new(planner: &str, status: PlanStatus) -> Self {
        Plan {
            planner: planner.to_string(),
            allocations: BTreeMap::new(),
            status,
            reason: None,
            bound: None,
            gap: None,
            solve_ms: 0.0,
        }
    }

    /// The allocation of `job`, empty if it gets nothing.
    pub fn get(&self, job: JobId) -> Allocation {
        self.allocations.get(&job).cloned().unwrap_or_default()
    }
}

/// One broken rule in a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("job {0:?} is not in the round")]
    UnknownJob(JobId),
    #[error("job {job:?} uses node {node} which does not exist")]
    UnknownNode { job: JobId, node: u32 },
    #[error("node {node} holds {used} GPUs but has {capacity}")]
    Capacity { node: u32, used: u32, capacity: u32 },
    #[error("job {job:?} gets {gpus} GPUs, outside its limits [{min}, {max}]")]
    GpuLimits {
        job: JobId,
        gpus: u32,
        min: u32,
        max: u32,
    },
    #[error("job {job:?} spans {nodes} nodes, more than the limit {max}")]
    TooManyNodes { job: JobId, nodes: u32, max: u32 },
    #[error("node {node} hosts {count} multi-node jobs; at most one is allowed")]
    Interference { node: u32, count: u32 },
    #[error("job {0:?} is not preemptible and was moved or stopped")]
    PinnedMoved(JobId),
    #[error("job {job:?} uses GPU {index} of node {node}, which has {capacity}")]
    UnknownGpu {
        job: JobId,
        node: u32,
        index: u32,
        capacity: u32,
    },
    #[error("GPU {index} of node {node} is given to jobs {first:?} and {second:?}")]
    SharedGpu {
        node: u32,
        index: u32,
        first: JobId,
        second: JobId,
    },
    #[error("job {job:?} mixes GPU types ({types})")]
    MixedTypes { job: JobId, types: String },
}

/// Check a plan against the round: per-node and per-GPU capacity (a named
/// GPU exists and goes to one job), GPU limits, locality (node limit),
/// interference, one GPU type per job, and pinned (non-preemptible) jobs.
///
/// Independent of every planner on purpose: tests run all planners' plans
/// through it, so one planner's bug cannot hide behind its own checks.
pub fn validate(round: &Round, plan: &Plan) -> Result<(), Vec<Violation>> {
    let mut errs = Vec::new();
    let jobs: HashMap<JobId, usize> = round.jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    let n_nodes = round.cluster.num_nodes();
    let mut used = vec![0u32; n_nodes];
    let mut multi = vec![0u32; n_nodes];
    let mut holder: HashMap<crate::job::GpuId, JobId> = HashMap::new();
    for (&id, alloc) in &plan.allocations {
        let Some(&ji) = jobs.get(&id) else {
            errs.push(Violation::UnknownJob(id));
            continue;
        };
        let job = &round.jobs[ji];
        if alloc.is_empty() {
            continue;
        }
        let per_node = alloc.per_node();
        let mut ok_nodes = true;
        for &(n, k) in &per_node {
            if (n.0 as usize) < n_nodes {
                used[n.0 as usize] = used[n.0 as usize].saturating_add(k);
            } else {
                errs.push(Violation::UnknownNode { job: id, node: n.0 });
                ok_nodes = false;
            }
        }
        for g in alloc.gpus().iter().filter(|g| g.is_bound()) {
            let Some(node) = round.cluster.nodes.get(g.node.0 as usize) else {
                continue;
            };
            if g.index >= node.gpus {
                errs.push(Violation::UnknownGpu {
                    job: id,
                    node: g.node.0,
                    index: g.index,
                    capacity: node.gpus,
                });
            } else if let Some(first) = holder.insert(*g, id) {
                errs.push(Violation::SharedGpu {
                    node: g.node.0,
                    index: g.index,
                    first,
                    second: id,
                });
            }
        }
        if ok_nodes {
            let mut types: Vec<&str> = per_node
                .iter()
                .map(|(n, _)| round.cluster.nodes[n.0 as usize].gpu_type.as_str())
                .collect();
            types.sort_unstable();
            types.dedup();
            if types.len() > 1 {
                errs.push(Violation::MixedTypes {
                    job: id,
                    types: types.join(", "),
                });
            }
        }
        let gpus = alloc.num_gpus();
        if gpus < job.min_gpus.max(1) || gpus > job.max_gpus {
            errs.push(Violation::GpuLimits {
                job: id,
                gpus,
                min: job.min_gpus,
                max: job.max_gpus,
            });
        }
        let nodes = per_node.len() as u32;
        if nodes > round.params.max_nodes_per_job {
            errs.push(Violation::TooManyNodes {
                job: id,
                nodes,
                max: round.params.max_nodes_per_job,
            });
        }
        if nodes > 1 && ok_nodes {
            for &(n, _) in &per_node {
                multi[n.0 as usize] += 1;
            }
        }
    }
    for (i, node) in round.cluster.nodes.iter().enumerate() {
        if used[i] > node.gpus {
            errs.push(Violation::Capacity {
                node: i as u32,
                used: used[i],
                capacity: node.gpus,
            });
        }
        if round.params.interference == Interference::Avoid && multi[i] > 1 {
            errs.push(Violation::Interference {
                node: i as u32,
                count: multi[i],
            });
        }
    }
    for job in &round.jobs {
        if !job.preemptible
            && !job.state.allocation.is_empty()
            && !plan.get(job.id).same_gpus(&job.state.allocation)
        {
            errs.push(Violation::PinnedMoved(job.id));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}
