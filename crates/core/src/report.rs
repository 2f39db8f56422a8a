//! What users see of a plan (CLI `plan`, the browser inspector): its
//! summary with the objective ([`PlanReport`]) and each job's GPUs
//! ([`JobGpus`]), one shape for every front end.
//!
//! Above the objective, which a report evaluates.

use serde::Serialize;

use crate::job::Allocation;
use crate::plan::{Plan, PlanStatus};
use crate::round::{Round, RoundJob};
use crate::variability::PerfClass;

/// How a plan is reported to users (CLI `plan`, the browser inspector): one
/// shape, so every front end shows the same keys and the same objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReport {
    /// Name of the planner that produced the plan.
    pub planner: String,
    /// How the plan was obtained ([`Plan::status`]).
    pub status: PlanStatus,
    /// Generalized mean of job speedups (higher is better), evaluated the same way for every planner.
    pub objective: f64,
    /// The planner's bound on the objective, when it has one ([`Plan::bound`]).
    pub bound: Option<f64>,
    /// Relative gap between bound and objective ([`Plan::gap`]).
    pub gap: Option<f64>,
    /// Wall-clock milliseconds the planner took.
    pub solve_ms: f64,
    /// Why the plan fell back or left jobs out ([`Plan::reason`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PlanReport {
    /// The report of `plan` for `round`, with the objective evaluated here.
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

/// What a job's GPUs are, as users see them (CLI `plan`, the browser
/// inspector): their type and, where the round carries variability, the
/// GPU that sets the job's pace. One code path for every front end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobGpus {
    /// GPU types of the job's nodes, as the cluster names them (one, unless
    /// it spans types), in node order.
    pub gpu_types: Vec<String>,
    /// With `round.variability`: its slowest GPU and the expected factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variability: Option<JobVariability>,
}

/// The job's slowest GPU for its class and what PAL's model expects of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobVariability {
    /// The job's variability class (its own, else its application's).
    pub class: PerfClass,
    /// `[node index, GPU index on the node]` of the slowest GPU.
    pub slowest_gpu: (u32, u32),
    /// That node's name in the cluster.
    pub slowest_node: String,
    /// The slowest GPU's slowdown for the class (1 = median speed).
    pub slowdown: f64,
    /// How many times slower than on median GPUs the job is expected to
    /// run: the slowdown, × the round's cross-node factor L if the job
    /// spans nodes. This is how the placement stage prices a placement; the
    /// simulator applies L to rigid (trace) jobs only.
    pub expected_factor: f64,
}

impl JobGpus {
    /// `None` for a job without GPUs (or on nodes the round lacks).
    pub fn new(round: &Round, job: &RoundJob, alloc: &Allocation) -> Option<Self> {
        if alloc.is_empty() {
            return None;
        }
        let mut gpu_types: Vec<String> = Vec::new();
        for n in alloc.nodes() {
            let t = &round.cluster.nodes.get(n.0 as usize)?.gpu_type.0;
            if !gpu_types.contains(t) {
                gpu_types.push(t.clone());
            }
        }
        let variability = match &round.variability {
            None => None,
            Some(v) => {
                let class = job.perf_class();
                let (g, slowdown) = v.slowest(class.index(), alloc)?;
                Some(JobVariability {
                    class,
                    slowest_gpu: (g.node.0, g.index),
                    slowest_node: round.cluster.nodes.get(g.node.0 as usize)?.name.clone(),
                    slowdown,
                    expected_factor: v.job_factor(class.index(), alloc, true),
                })
            }
        };
        Some(JobGpus {
            gpu_types,
            variability,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::{test_job, test_round};
    use crate::{GpuId, NodeId};

    fn g(n: u32, i: u32) -> GpuId {
        GpuId::new(NodeId(n), i)
    }

    #[test]
    fn job_gpus_name_the_type_and_the_gpu_that_sets_the_pace() {
        let mut r = test_round(vec![test_job(0)]);
        let one = Allocation::from_gpus(vec![g(1, 0), g(1, 3)]);
        let j = &r.jobs[0];
        assert_eq!(JobGpus::new(&r, j, &Allocation::default()), None);
        let plain = JobGpus::new(&r, j, &one).unwrap();
        assert_eq!(plain.gpu_types, vec!["a100"]);
        assert_eq!(plain.variability, None);
        assert!(!serde_json::to_string(&plain).unwrap().contains("variability"));
        let mut v = crate::RoundVariability {
            per_node: vec![vec![[1.0; 4]; 4]; 2],
            cross_node_factor: 1.5,
        };
        v.per_node[1][3] = [1.25, 1.0, 1.0, 1.0];
        v.per_node[0][2] = [1.1, 1.0, 1.0, 2.0];
        r.variability = Some(v);
        r.jobs[0].class = Some(PerfClass::A);
        let j = &r.jobs[0];
        let x = JobGpus::new(&r, j, &one).unwrap().variability.unwrap();
        assert_eq!(
            (x.class, x.slowest_gpu, x.slowest_node.as_str()),
            (PerfClass::A, (1, 3), "b")
        );
        assert_eq!((x.slowdown, x.expected_factor), (1.25, 1.25));
        // Across nodes: × L, as the placement stage prices it.
        let across = Allocation::from_gpus(vec![g(0, 2), g(1, 0)]);
        let y = JobGpus::new(&r, j, &across).unwrap();
        assert_eq!(y.gpu_types, vec!["t4", "a100"]);
        let y = y.variability.unwrap();
        assert_eq!((y.slowest_gpu, y.slowdown), ((0, 2), 1.1));
        assert!((y.expected_factor - 1.1 * 1.5).abs() < 1e-12);
        // Allocations outside the cluster give nothing rather than a panic.
        assert_eq!(JobGpus::new(&r, j, &Allocation::from_gpus(vec![g(7, 0)])), None);
    }
}
