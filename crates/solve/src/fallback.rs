//! The fallback policy of the MIP planners: how a solved model becomes the
//! round's plan (independent validation, gap, notes) and what replaces it
//! when the solver fails or its plan is invalid (the greedy plan, marked
//! `fallback` with the reason). Kept apart from the binding and the
//! formulations so the policy is written once.

use gpuplan_core::{objective, Plan, PlanStatus, Round};

use crate::planners::greedy::{greedy_choices, plan_from_choices};
use crate::speedup::{evaluate_cached, SpeedupCache};

/// A formulation's plan before the common end, with per-job notes (jobs
/// that cannot run, and why).
#[derive(Debug, Clone)]
pub struct SolvedPlan {
    pub plan: Plan,
    pub notes: Vec<String>,
}

/// Fill `gap` from the bound and the plan's own objective (the same
/// evaluation every planner gets).
pub fn set_gap(round: &Round, plan: &mut Plan) {
    if let Some(b) = plan.bound {
        let obj = objective::evaluate(round, plan);
        plan.gap = Some(((b - obj) / obj.abs().max(1e-12)).max(0.0));
    }
}

/// [`set_gap`] with the planner's speedup tables (`speedup::evaluate_cached`).
pub fn set_gap_cached(round: &Round, plan: &mut Plan, caches: &mut [SpeedupCache]) {
    if let Some(b) = plan.bound {
        let obj = evaluate_cached(round, plan, caches);
        plan.gap = Some(((b - obj) / obj.abs().max(1e-12)).max(0.0));
    }
}

/// The greedy plan, marked `fallback` with the reason.
pub fn fallback(name: &str, round: &Round, reason: &str) -> Plan {
    as_fallback(
        plan_from_choices(name, round, &greedy_choices(round), PlanStatus::Fallback),
        reason,
    )
}

/// A greedy plan already made, marked as [`fallback`] marks its own.
pub fn as_fallback(mut greedy: Plan, reason: &str) -> Plan {
    greedy.status = PlanStatus::Fallback;
    greedy.reason = Some(format!("{reason}; greedy plan used"));
    greedy
}

/// The common end of the node-placing MIPs: the independent validator (a
/// solver bug or numerical slip must not reach users), the gap, per-job
/// notes; any failure becomes the greedy fallback.
pub fn finish(name: &str, round: &Round, solved: Result<SolvedPlan, String>) -> Plan {
    match solved {
        Ok(SolvedPlan { mut plan, notes }) => {
            // Uneven node counts and the queue rules are the pipeline's
            // to fix (`even_out`, `queues::enforce`), as for every
            // planner: the model's plan is kept for them.
            let rules = gpuplan_core::PolicyParams {
                even_nodes: gpuplan_core::NodeCounts::Any,
                ..round.params
            };
            if let Err(v) =
                gpuplan_core::validate_rules(round, &plan, &rules, gpuplan_core::QueueRules::Deferred)
            {
                return fallback(name, round, &format!("solution failed validation ({})", v[0]));
            }
            plan.planner = name.to_string();
            set_gap(round, &mut plan);
            if !notes.is_empty() {
                plan.reason = Some(notes.join("; "));
            }
            plan
        }
        Err(reason) => fallback(name, round, &reason),
    }
}
