//! `lagrange`: the production-scale planner (issue 32). No MIP is built:
//! the count relaxation's Lagrangian dual ([`super::dual`]) prices each
//! GPU type, greedy makes its moves net of those prices, the plain greedy
//! fills what the prices left, exchanges move GPUs from jobs that lose
//! little by giving them up to jobs that gain more, and the shared packer
//! places the result.
//! The dual's value is an upper bound on the round's objective (every
//! valid plan is a solution of the count relaxation), so every plan comes
//! with a proven gap, in time linear in jobs × candidates and memory
//! linear in jobs: what a MIP cannot give at 16,000-100,000 GPUs.
//!
//! Why prices and not a partition (POP) or a smaller MIP: with thousands
//! of jobs and a handful of GPU types the count relaxation's duality gap
//! is small (a few jobs' worth, by Shapley-Folkman), and the prices say
//! what plain greedy gets wrong: which jobs a scarce fast type is worth
//! most to. The measured gaps are in docs/formulation.md.

use gpuplan_core::{Plan, PlanStatus, Round};

use super::dual::count_dual;
use super::MIP_TRAITS;
use crate::candidates::{job_options, Shapes};
use crate::fallback::set_gap_cached;
use crate::planners::greedy::{choices_from_options, greedy_choices_priced, plan_from_choices};
use crate::speedup::{evaluate_cached, SpeedupCache};
use crate::{Limits, PlanError, Planner, PlannerTraits};

#[derive(Debug, Default)]
pub struct Lagrange;

impl Planner for Lagrange {
    fn name(&self) -> &str {
        "lagrange"
    }

    fn traits(&self) -> PlannerTraits {
        MIP_TRAITS
    }

    /// Its prices are on the plain power mean: on a round with queues the
    /// queue stage would cut its plans (up to 99.7% below the best, issue
    /// 51), so such a round is planned by the aggregate MIP, which decides
    /// the queues, and the plan says so.
    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        if round.queues.is_empty() {
            return Ok(plan_lagrange(self.name(), round, limits));
        }
        let mut aggregate = super::aggregate::MipAggregate::new(crate::Solver::default_native(), "lagrange");
        let mut plan = aggregate.plan(round, limits)?;
        plan.planner = self.name().into();
        plan.add_note("lagrange does not price queues: planned by mip-aggregate's model, which decides them");
        Ok(plan)
    }
}

/// What the dual's prices are scaled by, each giving one priced greedy
/// plan: on the bench's four-type rounds (4,096 × 2,000 and 16,384 ×
/// 8,000) scale 1 and 2 each won one, and 0.5, 0.8, 1.2, 1.5, 3, 4 and 6
/// neither (docs/formulation.md, "At production scale").
const PRICE_SCALES: [f64; 2] = [1.0, 2.0];

/// The best of greedy's plan and the priced greedy plans, with the count
/// relaxation's bound and, within `limits.gap` of it, `optimal`.
pub(crate) fn plan_lagrange(name: &str, round: &Round, limits: &Limits) -> Plan {
    let t0 = web_time::Instant::now();
    let mut caches = SpeedupCache::per_job(round, |_| 2);
    let any = job_options(round, &mut caches, Shapes::Any);
    let dual = count_dual(round, &any);
    drop(any);
    // Every greedy run below starts from the same packable options.
    let opts = job_options(round, &mut caches, Shapes::Packable);
    let t_greedy = web_time::Instant::now();
    let mut best = plan_from_choices(
        name,
        round,
        &choices_from_options(round, &mut caches, &opts, &[], true),
        PlanStatus::Feasible,
    );
    let mut best_value = evaluate_cached(round, &best, &mut caches);
    // A priced plan costs about what the plain one did: one that would end
    // past the time limit is not started (the plain plan and the bound
    // stand).
    let per_plan = t_greedy.elapsed().as_secs_f64();
    let mut skipped = Vec::new();
    if let Some(prices) = dual.as_ref().and_then(|d| d.prices.as_deref()) {
        for scale in PRICE_SCALES {
            if t0.elapsed().as_secs_f64() + per_plan > limits.time_limit_s {
                skipped.push(format!("{scale}"));
                continue;
            }
            let scaled: Vec<f64> = prices.iter().map(|p| p * scale).collect();
            let choices = greedy_choices_priced(round, &mut caches, &opts, &scaled, true);
            let plan = plan_from_choices(name, round, &choices, PlanStatus::Feasible);
            let value = evaluate_cached(round, &plan, &mut caches);
            if value > best_value {
                best = plan;
                best_value = value;
            }
        }
    }
    best.planner = name.to_string();
    if !skipped.is_empty() {
        best.add_note(format!(
            "time limit: the plans at price scale {} were not made",
            skipped.join(", ")
        ));
    }
    best.bound = dual.map(|d| d.bound);
    set_gap_cached(round, &mut best, &mut caches);
    if best.gap.is_some_and(|g| g <= limits.gap) {
        best.status = PlanStatus::Optimal;
    }
    best
}
