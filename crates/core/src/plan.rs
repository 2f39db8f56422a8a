//! A round's answer ([`Plan`]): which GPUs each job gets, and how the plan
//! was obtained.
//!
//! The one independent validator every planner's output goes through
//! ([`validate`]) and what users see of a plan ([`PlanReport`], with the
//! objective; [`JobGpus`]) read the sharing rules and the objective, which
//! read plans, so they live above this module; their paths stay here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::job::{Allocation, JobId};

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
    /// Name of the planner that produced it (its registry name).
    pub planner: String,
    /// Job → its GPUs. Jobs absent from the map get nothing.
    pub allocations: BTreeMap<JobId, Allocation>,
    /// How the plan was obtained; `Fallback` means the planner itself failed.
    pub status: PlanStatus,
    /// Why the plan fell back, or why some jobs could not be served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The planner's own bound on the objective, when it has one (MIP).
    #[serde(default)]
    pub bound: Option<f64>,
    /// Relative gap between [`Plan::bound`] and the plan's objective, when bounded.
    #[serde(default)]
    pub gap: Option<f64>,
    /// Wall-clock milliseconds the planner took.
    pub solve_ms: f64,
    /// The MIP solver the planner ran for this plan (`highs`, `microlp`),
    /// absent for a heuristic: set by the planner where it solves, so
    /// a driver (`gpuplan bench`) need not guess it from the planner's
    /// name (pollux-mip runs lagrange, no solver, from 16,384 GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<String>,
}

impl Plan {
    /// An empty plan (every job gets nothing) from `planner`.
    pub fn new(planner: &str, status: PlanStatus) -> Self {
        Plan {
            planner: planner.to_string(),
            allocations: BTreeMap::new(),
            status,
            reason: None,
            bound: None,
            gap: None,
            solve_ms: 0.0,
            solver: None,
        }
    }

    /// The allocation of `job`, empty if it gets nothing.
    pub fn get(&self, job: JobId) -> Allocation {
        self.allocations.get(&job).cloned().unwrap_or_default()
    }

    /// Append a note to `reason` ("; " between notes): the pipeline's
    /// stages each say what they changed without losing the planner's.
    pub fn add_note(&mut self, note: impl Into<String>) {
        let note = note.into();
        self.reason = Some(match self.reason.take() {
            Some(r) => format!("{r}; {note}"),
            None => note,
        });
    }

    /// [`Plan::get`] without the copy, for per-round hot paths.
    pub fn gpus_of(&self, job: JobId) -> &Allocation {
        static NONE: Allocation = Allocation::EMPTY;
        self.allocations.get(&job).unwrap_or(&NONE)
    }
}
