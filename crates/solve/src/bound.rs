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

use crate::Planner;

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

/// Apply the rule to a validated plan: drop a bound that is not proven for
/// the round, and with it `optimal`.
pub(crate) fn enforce(planner: &dyn Planner, given: &Round, plan: &mut Plan) {
    if plan.bound.is_none() && plan.status != PlanStatus::Optimal {
        return;
    }
    let Some(why) = unproven(planner, given, plan) else {
        return;
    };
    plan.bound = None;
    plan.gap = None;
    if plan.status == PlanStatus::Optimal {
        plan.status = PlanStatus::Feasible;
    }
    let note = format!("no proven bound: {why}");
    plan.reason = Some(match plan.reason.take() {
        Some(r) => format!("{r}; {note}"),
        None => note,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, model, round};
    use crate::{registry, run_round, Limits, PlanError};
    use gpuplan_core::Interference;

    /// Greedy's plan, claimed optimal under a bound of `bound`.
    struct Claims {
        bound: Option<f64>,
    }

    impl Planner for Claims {
        fn name(&self) -> &str {
            "claims"
        }

        fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
            let mut p = registry::create("greedy")?.plan(round, limits)?;
            p.planner = "claims".into();
            p.status = PlanStatus::Optimal;
            p.bound = self.bound;
            Ok(p)
        }
    }

    fn two_jobs() -> Round {
        let jobs = (0..2)
            .map(|id| {
                let mut j = job(id, 2, 0.0);
                j.model = Some(model());
                j
            })
            .collect();
        round("2x4", jobs, Interference::Avoid)
    }

    /// A bound below the plan's own true objective, or none at all beside
    /// `optimal`, is not reported: `feasible`, with the reason.
    #[test]
    fn false_or_missing_bounds_lose_optimal() {
        let r = two_jobs();
        let d = run_round(&mut Claims { bound: Some(1e-9) }, &r, &Limits::default()).unwrap();
        assert_eq!(
            (d.plan.status, d.plan.bound, d.plan.gap),
            (PlanStatus::Feasible, None, None)
        );
        let why = d.plan.reason.unwrap();
        assert!(
            why.contains("no proven bound: its bound 0.000000 is below the plan's true objective"),
            "{why}"
        );
        let d = run_round(&mut Claims { bound: None }, &r, &Limits::default()).unwrap();
        assert_eq!(d.plan.status, PlanStatus::Feasible);
        assert!(d
            .plan
            .reason
            .unwrap()
            .contains("no bound on the round's objective"));
        // A true bound stays, with its optimal.
        let d = run_round(&mut Claims { bound: Some(1e9) }, &r, &Limits::default()).unwrap();
        assert_eq!((d.plan.status, d.plan.bound), (PlanStatus::Optimal, Some(1e9)));
    }

    /// A model that leaves out what the round has bounds nothing: a
    /// planner that never shares on a sharing round, a blind model, binned
    /// per-GPU speeds. mip-exact keeps its bound where its model is exact.
    #[test]
    fn models_that_leave_out_a_feature_report_no_bound() {
        let mut r = two_jobs();
        let lim = Limits::default();
        let d = run_round(registry::create("mip-exact").unwrap().as_mut(), &r, &lim).unwrap();
        assert_eq!(d.plan.status, PlanStatus::Optimal);
        assert!(d.plan.bound.unwrap() >= d.objective(&r) - 1e-9);
        r.params.sharing = 2;
        let d = run_round(&mut Claims { bound: Some(1e9) }, &r, &lim).unwrap();
        assert!(d.plan.reason.unwrap().contains("it plans without sharing"));
        r.params.sharing = 1;
        r.params.type_blind = gpuplan_core::Sight::Hidden;
        let d = run_round(registry::create("mip-exact").unwrap().as_mut(), &r, &lim).unwrap();
        assert_eq!((d.plan.status, d.plan.bound), (PlanStatus::Feasible, None));
        assert!(d.plan.reason.unwrap().contains("type-blind"));
    }
}
