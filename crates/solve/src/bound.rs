//! The pipeline's bound rule (docs/formulation.md, "Bounds"): a plan's
//! `bound` is an upper bound on the round's true objective (core's one
//! evaluation: true speeds, variability, sharing slowdowns, restart
//! factors) over every plan of the round, and `optimal` means the plan's
//! true objective is within the gap of it. Otherwise neither is reported.
//!
//! A planner's bound is its model's. Where the model leaves out something
//! the round has, its bound says nothing about the round: a blind model
//! (the pipeline hid GPU types or per-GPU speeds), speeds binned by node
//! (per-GPU variability), or a planner that never shares on a round that
//! allows sharing. There the bound is dropped and `optimal` becomes
//! `feasible`, with the reason. A bound below the plan's own true objective
//! is false on its face and is dropped too, whatever the cause.

use gpuplan_core::{objective, Plan, PlanStatus, Round, Sight};

use crate::{Limits, Planner};

/// Why `planner`'s bound on `given` (the round as the driver gave it, not
/// as the planner saw it) cannot be reported, if it cannot: the first
/// reason found.
fn unproven(planner: &dyn Planner, given: &Round, plan: &Plan) -> Option<String> {
    if given.params.type_blind == Sight::Hidden {
        return Some("the planner valued a type-blind model (type_blind)".into());
    }
    if given.params.variability_blind == Sight::Hidden && given.variability.is_some() {
        return Some("the planner did not see per-GPU speeds (variability_blind)".into());
    }
    if given.variability.is_some() {
        return Some("its model bins per-GPU speeds by node, so its bound is the binned model's".into());
    }
    if given.params.sharing > 1 && !planner.shares_gpus() {
        return Some(format!(
            "it plans without sharing, and the round allows {} jobs per GPU",
            given.params.sharing
        ));
    }
    let Some(bound) = plan.bound else {
        // `optimal` is a claim about the round, and none can be checked
        // without a bound (sia's own ILP reports its optimum so).
        return (plan.status == PlanStatus::Optimal)
            .then(|| "its model's optimum comes with no bound on the round's objective".into());
    };
    let obj = objective::evaluate(given, plan);
    let tol = 1e-6 * bound.abs().max(obj.abs()).max(1.0);
    (bound < obj - tol).then(|| format!("its bound {bound:.6} is below the plan's true objective {obj:.6}"))
}

/// The gap on the generalized mean that a solver's relative gap `gap` on
/// its sum of terms allows (docs/formulation.md), taking the gap relative
/// to the larger of the two sums (HiGHS's, the looser reading): the sums
/// differ by a factor of at most 1/(1 − gap), so the means by
/// (1 − gap)^(−1/|p|) for p ≠ 0; for p = 0 the sum is of logarithms, so
/// the gap scales with the mean's own logarithm; for p = −∞ the gap is on
/// the minimum itself.
fn mean_gap(p: f64, gap: f64, objective: f64) -> f64 {
    use gpuplan_core::Libm;
    let gap = gap.clamp(0.0, 0.5);
    let sums = 1.0 / (1.0 - gap);
    if p == 0.0 {
        ((sums - 1.0) * objective.abs().max(1e-12).libm_ln().abs().max(1.0)).libm_exp() - 1.0
    } else if p.is_finite() {
        sums.libm_pow(1.0 / p.abs()) - 1.0
    } else {
        sums - 1.0
    }
}

/// Apply the rule to a validated plan: drop a bound that is not proven for
/// the round, and with it `optimal`; keep `optimal` only within the gap of
/// the bound, measured on the plan's true objective.
pub(crate) fn enforce(planner: &dyn Planner, given: &Round, limits: &Limits, plan: &mut Plan) {
    if plan.bound.is_none() && plan.status != PlanStatus::Optimal {
        // No bound, no gap to it.
        plan.gap = None;
        return;
    }
    let Some(why) = unproven(planner, given, plan) else {
        let Some(bound) = plan.bound else { return };
        let obj = objective::evaluate(given, plan);
        let gap = (bound - obj) / obj.abs().max(1e-12);
        // The gap of the plan returned: the stages after the planner (the
        // reserved GPUs, the queue rule, even_nodes) may have changed it
        // since the planner set its own.
        plan.gap = Some(gap.max(0.0));
        if plan.status == PlanStatus::Optimal {
            let p = given.params.p;
            let allowed = mean_gap(p, crate::solver::solver_gap(p, limits.gap), obj) + 1e-6;
            if gap > allowed {
                plan.status = PlanStatus::Feasible;
                plan.add_note(format!(
                    "not optimal: {:.4}% below its bound, more than the gap allows",
                    100.0 * gap
                ));
            }
        }
        return;
    };
    plan.bound = None;
    plan.gap = None;
    if plan.status == PlanStatus::Optimal {
        plan.status = PlanStatus::Feasible;
    }
    plan.add_note(format!("no proven bound: {why}"));
}
