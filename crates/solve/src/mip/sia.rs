//! `sia`: Sia's scheduler (Jayaram Subramanya et al., SOSP'23), written
//! from its paper as a rival to compare with, not as gpuplan's own policy.
//!
//! Sia chooses, per job, one configuration (GPU type, nodes, GPUs) by an
//! ILP whose only rows are GPUs per type, then places the choices on GPUs
//! in a separate step. Its rules, as here:
//! - **Configurations**: powers of two within a node, whole nodes beyond
//!   (4-GPU nodes: 1, 2, 4, 8, 12, …), per type, up to the job's
//!   exploration cap (Pollux's, which Sia keeps). A job that has never run
//!   (no model) is offered one GPU of each type, valued 1 on every type:
//!   Sia profiles a new job on one GPU before it scales it.
//! - **Values**: the job's goodput on the type ([`RoundJob::model_on`]:
//!   its own fit there, else its reference fit moved by the type-speed
//!   ratio, Sia's bootstrap), **normalised per job by its smallest goodput
//!   over all its configurations** (in practice one GPU of its slowest
//!   type), so every job's worst configuration is worth 1 and values are
//!   "how many slowest-type GPUs this is worth". Values below 1e-4 count as
//!   1e-4, as in Sia.
//! - **Restarts**: for a running job, every configuration but the current
//!   one (kept on the same GPUs) is multiplied by Pollux's re-allocation
//!   factor (age − δ·restarts)/(age + δ), which Sia uses; a waiting job
//!   and a job younger than δ are not penalised.
//! - **Fairness**: Sia minimises Σ value^p with p = [`SIA_P`] (−0.5), each
//!   job that gets nothing costing [`SIA_LAMBDA_NO_ALLOC`] (1.1). A job's
//!   least configuration costs 1, so starting it saves only 0.1, less than
//!   growing another from 1 GPU to 2 (1 − 2^−0.5 ≈ 0.29 where it scales
//!   well): when GPUs are short, Sia leaves jobs waiting and grows others.
//!   That is what makes it win on loaded workloads (docs/heterogeneity.md),
//!   and it is also why its plans score low under the power mean with
//!   ε-terms, where a left-out job costs 1/ε. Its p is its own: the round's
//!   `params.p` is the power mean every plan is judged by, not Sia's. The
//!   same valuation is open to every goodput planner as `params.left_out_cost`
//!   and `params.spare_waiting`.
//! - **Placement**: the shared packer ([`crate::placement::pack`]), kept
//!   jobs on their own GPUs first. Sia's ILP knows neither locality nor
//!   interference beyond its shapes; the packer's whole-node rule for
//!   multi-node jobs is what keeps its plans valid.
//!
//! Differences, on purpose: the terms are (v + ε)^p with the project's
//! ε = 1e-3 instead of Sia's rounding to two decimals; the ILP is the
//! aggregate model (`mip-aggregate`'s rows: GPUs and whole nodes per type,
//! so the packer never has to drop a choice), solved whole, without the
//! Lagrangian pricing, as Sia solves its ILP whole.

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Plan, PlanStatus, Round, RoundJob};

use super::aggregate::{prepare, solve_prepared, AggregateSolution, Prep, Pricing};
use super::MIP_TRAITS;
use crate::candidates::{Choice, Sense};
use crate::fallback::fallback;
use crate::placement::pack;
use crate::pools::Speeds;
use crate::solver::Solver;
use crate::speedup::SpeedupCache;
use crate::{Limits, PlanError, Planner, PlannerTraits};

/// Sia's fairness exponent (its paper's and artifact's default).
pub const SIA_P: f64 = -0.5;

/// What a job that gets nothing costs in Sia's objective (its λ_n).
pub const SIA_LAMBDA_NO_ALLOC: f64 = 1.1;

/// The smallest normalised value Sia counts (its zero-allocation gain).
const SIA_MIN_VALUE: f64 = 1e-4;

#[derive(Debug)]
pub struct Sia {
    pub solver: Solver,
}

impl Sia {
    pub fn new(solver: Solver) -> Self {
        Sia { solver }
    }
}

/// Revalue the aggregate model's candidates as Sia does (module docs).
fn revalue(round: &Round, prep: &mut Prep, caches: &mut [SpeedupCache]) {
    prep.sense = Sense::MinPower(SIA_P);
    for ((j, cands), cache) in round
        .jobs
        .iter()
        .zip(prep.cands.iter_mut())
        .zip(caches.iter_mut())
    {
        if j.model.is_none() {
            // Not profiled yet: one GPU (or its minimum) of each type.
            let least = j.min_gpus.max(1);
            cands.retain(|&(c, ..)| match c {
                Choice::Keep => true,
                Choice::Config { gpus, .. } => gpus == least,
            });
        }
        let raw = |cache: &mut SpeedupCache, c: Choice, ty: Option<usize>| match (c, ty) {
            (Choice::Keep, _) => cache.get_alloc(j, j.current()),
            (Choice::Config { nodes, gpus }, Some(t)) => cache.get(j, t, nodes, gpus),
            (Choice::Config { nodes, gpus }, None) => cache.get(j, 0, nodes, gpus),
        };
        let norm = cands
            .iter()
            .filter(|x| x.0 != Choice::Keep)
            .map(|&(c, ty, ..)| raw(cache, c, ty))
            .filter(|&s| s > 0.0)
            .fold(f64::INFINITY, f64::min);
        let norm = if norm.is_finite() { norm } else { 1.0 };
        let factor = sia_restart_factor(j, round);
        for x in cands.iter_mut() {
            let v = raw(cache, x.0, x.1) / norm;
            let v = if x.0 == Choice::Keep { v } else { v * factor };
            x.2 = v.max(SIA_MIN_VALUE);
        }
    }
    for t in prep.none_term.iter_mut() {
        *t = SIA_LAMBDA_NO_ALLOC;
    }
    // Sia has no tenants: its terms are unweighted (docs/tenants.md).
    prep.share.fill(1.0);
}

/// Pollux's re-allocation factor, charged as Sia charges it
/// (`spare_waiting`): only to a job that holds GPUs now (a waiting job has
/// no configuration to leave), and not to one younger than its restart
/// penalty.
fn sia_restart_factor(j: &RoundJob, round: &Round) -> f64 {
    let params = gpuplan_core::PolicyParams {
        spare_waiting: gpuplan_core::RestartCharge::HoldersOnly,
        ..round.params
    };
    restart_factor(j, &params)
}

impl Planner for Sia {
    fn name(&self) -> &str {
        "sia"
    }

    fn traits(&self) -> PlannerTraits {
        MIP_TRAITS
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let t0 = web_time::Instant::now();
        let (mut prep, notes, mut caches) = prepare(round, Speeds::Blind);
        revalue(round, &mut prep, &mut caches);
        match solve_prepared(round, prep, notes, caches, self.solver, limits, Pricing::Off, t0) {
            Ok(AggregateSolution {
                choices,
                status,
                notes,
                ..
            }) => {
                let packed = pack(round, &choices);
                let mut plan = Plan::new("sia", status);
                plan.solver = Some(self.solver.name().into());
                for (i, a) in packed.allocations {
                    plan.allocations.insert(round.jobs[i].id, a);
                }
                if !packed.notes.is_empty() && plan.status == PlanStatus::Optimal {
                    plan.status = PlanStatus::Feasible;
                }
                // No bound: Sia's objective is not the round's power mean.
                let all: Vec<String> = notes.into_iter().chain(packed.notes).collect();
                if !all.is_empty() {
                    plan.reason = Some(all.join("; "));
                }
                Ok(plan)
            }
            Err(reason) => Ok(fallback("sia", round, &reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, model, round};
    use gpuplan_core::{Interference, JobId, NodeId, TypedModel};

    /// Two one-GPU jobs, one a100 and two t4 GPUs. Job 0 was fitted on the
    /// t4 only, so on the a100 it is worth 1/0.292 = 3.42 t4s (the table's
    /// compute ratio; one GPU has no sync). Job 1 was measured on the a100
    /// too, only 1.5× faster there. Both are younger than δ (no restart
    /// factor). Sia's terms v^−0.5: job 0 on the a100 and job 1 on a t4
    /// cost 3.42^−0.5 + 1 = 1.540; the other way 1 + 1.5^−0.5 = 1.816. Sia
    /// gives the a100 to job 0.
    #[test]
    fn the_faster_type_goes_to_the_job_it_speeds_up_most() {
        let mut jobs = Vec::new();
        for id in 0..2 {
            let mut j = job(id, 1, 0.0);
            j.max_gpus = 1;
            j.state.age_s = 10.0;
            j.model = Some(model());
            j.model_type = Some("t4".into());
            jobs.push(j);
        }
        let mut on = model();
        on.perf.alpha_c /= 1.5;
        on.perf.beta_c /= 1.5;
        jobs[1].type_models.push(TypedModel {
            gpu_type: "a100".into(),
            model: on,
        });
        let r = round("1x2:t4+1x1:a100", jobs, Interference::Avoid);
        let mut sia = Sia::new(Solver::default_native());
        let plan = sia.plan(&r, &Limits::default()).unwrap();
        gpuplan_core::validate(&r, &plan).unwrap();
        let node_of = |id| plan.gpus_of(JobId(id)).gpus()[0].node;
        assert_eq!(node_of(0), NodeId(1), "{plan:?}");
        assert_eq!(node_of(1), NodeId(0), "{plan:?}");

        // The values behind it, by hand.
        let (mut prep, _, mut caches) = prepare(&r, Speeds::Blind);
        revalue(&r, &mut prep, &mut caches);
        let a100 = r
            .cluster
            .types()
            .iter()
            .position(|t| t.as_str() == "a100")
            .unwrap();
        let value = |j: usize, ty: usize| prep.cands[j].iter().find(|c| c.1 == Some(ty)).unwrap().2;
        assert!((value(0, a100) - 1.0 / 0.292).abs() < 1e-6, "{}", value(0, a100));
        assert!((value(0, 1 - a100) - 1.0).abs() < 1e-9);
        assert!((value(1, a100) - 1.5).abs() < 1e-6, "{}", value(1, a100));
    }

    /// A job that has not run is offered one GPU of each type, worth 1 on
    /// each; a running job's other configurations carry the restart factor.
    #[test]
    fn new_jobs_start_on_one_gpu_and_moves_pay_the_restart_factor() {
        let mut fresh = job(0, 4, 0.0);
        fresh.state.age_s = 0.0;
        let mut old = crate::testutil::running(job(1, 2, 0.0), &[(0, 2)]);
        old.model = Some(model());
        old.model_type = Some("t4".into());
        old.state.age_s = 600.0;
        old.state.restarts = 2;
        let r = round("1x4:t4+1x4:a100", vec![fresh, old], Interference::Avoid);
        let (mut prep, _, mut caches) = prepare(&r, Speeds::Blind);
        revalue(&r, &mut prep, &mut caches);
        assert_eq!(prep.cands[0].len(), 2, "{:?}", prep.cands[0]);
        assert!(prep.cands[0]
            .iter()
            .all(|c| c.0 == Choice::Config { nodes: 1, gpus: 1 } && c.2 == 1.0));
        // (600 − 30·2)/(600 + 30) on a move; the kept 2 GPUs are unpenalised.
        let f = 540.0 / 630.0;
        let t4 = r.cluster.types().iter().position(|t| t.as_str() == "t4");
        let keep = prep.cands[1].iter().find(|c| c.0 == Choice::Keep).unwrap().2;
        let same_elsewhere = prep.cands[1]
            .iter()
            .find(|c| c.0 == Choice::Config { nodes: 1, gpus: 2 } && c.1 == t4)
            .unwrap()
            .2;
        assert!(
            (same_elsewhere - keep * f).abs() < 1e-9,
            "{keep} {same_elsewhere}"
        );
        assert_eq!(prep.none_term, vec![SIA_LAMBDA_NO_ALLOC; 2]);
        // Waiting, the same job pays nothing to start anywhere.
        let mut waiting = r.clone();
        waiting.jobs[1].state.allocation = gpuplan_core::Allocation::default();
        assert_eq!(sia_restart_factor(&waiting.jobs[1], &waiting), 1.0);
        assert!((sia_restart_factor(&r.jobs[1], &r) - f).abs() < 1e-12);
    }
}
