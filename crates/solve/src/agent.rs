//! One agent view of a job, shared by the simulator and the executor: what
//! a job's measurements say (its fitted [`GoodputModel`]), which batch size,
//! local batch and accumulation it runs at on an allocation, and the
//! [`RoundJob`] a planner sees.
//!
//! It lives here, not in each driver, because the two copies had drifted
//! (the daemon decided batch adaptivity from the job spec, the simulator
//! from the planner). It sits in solve, not core, because the batch policy
//! is the planner's ([`crate::pipeline::batch_adapts`]); exec may not see sim.

use std::collections::HashMap;

use gpuplan_core::fit::{fit_perf_params, Observation};
use gpuplan_core::{BatchLimits, GoodputModel, GradParams, JobSpec, JobState, Oracle, PerfParams, RoundJob};
use serde::{Deserialize, Serialize};

use crate::pipeline::batch_adapts;
use crate::PlannerTraits;

/// Gradient statistics assumed before a job reports any (no noise).
pub const NO_NOISE: GradParams = GradParams { sqr: 1.0, var: 0.0 };

/// Mean of the step times measured at one (nodes, GPUs, local batch).
/// Serialised as the executor's journal has always written it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObsAgg {
    pub nodes: u32,
    pub gpus: u32,
    pub local_bsz: u32,
    pub accum_time_s_sum: f64,
    pub step_time_s_sum: f64,
    pub count: u64,
}

impl ObsAgg {
    fn key(&self) -> (u32, u32, u32) {
        (self.nodes, self.gpus, self.local_bsz)
    }

    fn mean(&self) -> Observation {
        let n = self.count.max(1) as f64;
        Observation {
            nodes: self.nodes,
            gpus: self.gpus,
            local_bsz: self.local_bsz,
            accum_time_s: self.accum_time_s_sum / n,
            step_time_s: self.step_time_s_sum / n,
        }
    }
}

/// Which total batch a job runs at: the planner's batch policy applied to
/// the job (see [`BatchTarget::for_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchTarget {
    /// Goodput-optimal for the allocation, once a model exists.
    Adaptive,
    /// This total batch, split over the GPUs.
    Fixed(u32),
}

impl BatchTarget {
    /// The one batch-size policy: adaptive only under a goodput planner and
    /// only where the job allows it; otherwise the user's batch.
    pub fn for_job(traits: &PlannerTraits, job_allows: bool, user_batch: u32) -> Self {
        if batch_adapts(traits, job_allows) {
            BatchTarget::Adaptive
        } else {
            BatchTarget::Fixed(user_batch)
        }
    }
}

/// Local batch and accumulation steps chosen for an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSplit {
    pub local_bsz: u32,
    pub accum_steps: u32,
}

impl BatchSplit {
    pub fn batch(&self, gpus: u32) -> u32 {
        gpus * self.local_bsz * (self.accum_steps + 1)
    }
}

/// Fits by observation set. The fit is a pure function of the observations,
/// and jobs of one application measure the same first configurations, so
/// many jobs ask for the same fit: memoising it returns the very same
/// parameters, only sooner. Bounded: cleared when full.
#[derive(Default)]
pub struct FitMemo {
    fits: HashMap<Vec<[u64; 5]>, PerfParams>,
}

impl FitMemo {
    const CAPACITY: usize = 1 << 16;

    pub fn fit(&mut self, obs: &[Observation]) -> PerfParams {
        let key: Vec<[u64; 5]> = obs
            .iter()
            .map(|o| {
                [
                    o.nodes as u64,
                    o.gpus as u64,
                    o.local_bsz as u64,
                    o.accum_time_s.to_bits(),
                    o.step_time_s.to_bits(),
                ]
            })
            .collect();
        if let Some(p) = self.fits.get(&key) {
            return *p;
        }
        let p = fit_perf_params(obs);
        if self.fits.len() >= Self::CAPACITY {
            self.fits.clear();
        }
        self.fits.insert(key, p);
        p
    }
}

/// What a job's agent has measured, and the fit it caches. Its fields are
/// the executor journal's (`observations`, `grad`), so a job record can
/// flatten it in and old journals still load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    #[serde(default)]
    pub observations: Vec<ObsAgg>,
    #[serde(default)]
    pub grad: Option<GradParams>,
    #[serde(skip)]
    fitted: Option<PerfParams>,
}

impl Agent {
    pub fn has_measurements(&self) -> bool {
        !self.observations.is_empty()
    }

    pub fn has_measured(&self, nodes: u32, gpus: u32, local_bsz: u32) -> bool {
        self.observations
            .iter()
            .any(|o| o.key() == (nodes, gpus, local_bsz))
    }

    /// Add one step-time report: configurations measured again are averaged.
    pub fn observe(&mut self, o: Observation) {
        match self
            .observations
            .iter_mut()
            .find(|a| a.key() == (o.nodes, o.gpus, o.local_bsz))
        {
            Some(a) => {
                a.accum_time_s_sum += o.accum_time_s;
                a.step_time_s_sum += o.step_time_s;
                a.count += 1;
            }
            None => self.observations.push(ObsAgg {
                nodes: o.nodes,
                gpus: o.gpus,
                local_bsz: o.local_bsz,
                accum_time_s_sum: o.accum_time_s,
                step_time_s_sum: o.step_time_s,
                count: 1,
            }),
        }
        self.fitted = None;
    }

    /// Record a configuration's first measurement only (the Pollux
    /// artifact's agent, which the simulator follows).
    pub fn observe_first(&mut self, o: Observation) {
        if !self.has_measured(o.nodes, o.gpus, o.local_bsz) {
            self.observe(o);
        }
    }

    /// The measurements the fit sees: one mean per configuration, in
    /// configuration order (so the fit does not depend on report order).
    pub fn measurements(&self) -> Vec<Observation> {
        let mut v: Vec<Observation> = self.observations.iter().map(ObsAgg::mean).collect();
        v.sort_by_key(|o| (o.nodes, o.gpus, o.local_bsz));
        v
    }

    /// Fitted throughput parameters; `None` before any measurement.
    pub fn perf(&mut self, memo: &mut FitMemo) -> Option<PerfParams> {
        if !self.has_measurements() {
            return None;
        }
        if self.fitted.is_none() {
            self.fitted = Some(memo.fit(&self.measurements()));
        }
        self.fitted
    }

    /// Whether a fit is cached (a view may show it without fitting).
    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    /// The fitted goodput model: throughput fitted to the measurements,
    /// gradient statistics from the latest report.
    pub fn model(&mut self, limits: BatchLimits, memo: &mut FitMemo) -> Option<GoodputModel> {
        let perf = self.perf(memo)?;
        Some(GoodputModel {
            perf,
            grad: self.grad.unwrap_or(NO_NOISE),
            limits,
            accumulation: true,
        })
    }

    /// Local batch and accumulation on `gpus` GPUs over `nodes` nodes (the
    /// artifact's `update_local_bsz`): goodput-optimal for an adaptive job
    /// with a model, else a fixed total batch split over the GPUs (before
    /// any measurement an adaptive job starts at M0, or its smallest valid
    /// batch). `None` for no GPUs.
    pub fn choose_batch(
        &mut self,
        limits: BatchLimits,
        target: BatchTarget,
        nodes: u32,
        gpus: u32,
        memo: &mut FitMemo,
    ) -> Option<BatchSplit> {
        let r = gpus;
        if r == 0 {
            return None;
        }
        let lim = limits;
        let start = lim.init_batch.max(lim.min_local * r);
        let fixed = match target {
            BatchTarget::Fixed(b) => Some(b),
            BatchTarget::Adaptive if !self.has_measurements() => Some(start),
            BatchTarget::Adaptive => None,
        };
        let (atomic, accum) = match fixed {
            Some(b) => fixed_batch_split(b, r, lim.max_local, lim.init_batch),
            None => match self.model(lim, memo).and_then(|m| m.optimize(nodes, r)) {
                Some(c) => (c.local_bsz, c.accum_steps),
                None => fixed_batch_split(start, r, lim.max_local, lim.init_batch),
            },
        };
        let count = r * (accum + 1);
        Some(BatchSplit {
            local_bsz: atomic.min(lim.max_batch / count).max(1),
            accum_steps: accum,
        })
    }
}

/// Local batch and accumulation steps for a fixed total batch on r GPUs
/// (the artifact's rule: accumulate when the local batch exceeds the limit;
/// a single GPU above M0 always accumulates, to estimate gradient noise).
pub fn fixed_batch_split(batch: u32, r: u32, max_local: u32, init_batch: u32) -> (u32, u32) {
    let local = batch.div_ceil(r.max(1));
    let mut accum = local.div_ceil(max_local.max(1)).saturating_sub(1);
    if r == 1 && batch > init_batch {
        accum = accum.max(1);
    }
    (local.div_ceil(accum + 1), accum)
}

/// What a driver knows of a job apart from its agent: the submission and
/// the state it tracks.
#[derive(Debug, Clone)]
pub struct JobFacts {
    /// The submission as the round is to see it (limits as the driver
    /// enforces them).
    pub spec: JobSpec,
    pub restart_penalty_s: Option<f64>,
    /// Batch limits; `None` for a job with no batch to adapt (a rigid trace
    /// job), which never gets a model.
    pub limits: Option<BatchLimits>,
}

/// The planner's view of one job: the facts, the state, the fitted model.
pub fn round_job(
    facts: JobFacts,
    state: JobState,
    agent: &mut Agent,
    oracle: Option<Oracle>,
    memo: &mut FitMemo,
) -> RoundJob {
    let model = facts.limits.and_then(|l| agent.model(l, memo));
    let s = facts.spec;
    RoundJob {
        id: s.id,
        name: s.name,
        app: s.app,
        submit_s: s.submit_s,
        requested_gpus: s.requested_gpus,
        batch_size: s.batch_size,
        min_gpus: s.min_gpus,
        max_gpus: s.max_gpus,
        preemptible: s.preemptible,
        state,
        model,
        oracle,
        restart_penalty_s: facts.restart_penalty_s,
        class: None,
        mem_gib: None,
        utilization: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatchPolicy;

    fn traits(batch: BatchPolicy) -> PlannerTraits {
        PlannerTraits {
            batch,
            needs_oracle: false,
            honours_interference: true,
        }
    }

    #[test]
    fn fixed_split_matches_artifact_rule() {
        // 2048 over 6 GPUs: local 342 ≤ 1024 → no accumulation.
        assert_eq!(fixed_batch_split(2048, 6, 1024, 128), (342, 0));
        // 384 over 6 GPUs with max local 12: local 64 → 6 micro-batches (5 accumulation steps), atomic 11.
        assert_eq!(fixed_batch_split(384, 6, 12, 12), (11, 5));
        // One GPU above M0 always accumulates.
        assert_eq!(fixed_batch_split(256, 1, 1024, 128), (128, 1));
    }

    #[test]
    fn a_fixed_batch_planner_keeps_the_users_batch() {
        let t = BatchTarget::for_job(&traits(BatchPolicy::Fixed), true, 96);
        assert_eq!(t, BatchTarget::Fixed(96));
        assert_eq!(
            BatchTarget::for_job(&traits(BatchPolicy::Adaptive), true, 96),
            BatchTarget::Adaptive
        );
        assert_eq!(
            BatchTarget::for_job(&traits(BatchPolicy::Adaptive), false, 96),
            BatchTarget::Fixed(96)
        );
    }

    #[test]
    fn repeated_reports_are_averaged_and_the_fit_ignores_their_order() {
        let o = |l, s| Observation {
            nodes: 1,
            gpus: 2,
            local_bsz: l,
            accum_time_s: s,
            step_time_s: s,
        };
        let mut a = Agent::default();
        a.observe(o(32, 1.0));
        a.observe(o(16, 0.5));
        a.observe(o(32, 3.0));
        let m = a.measurements();
        assert_eq!((m[0].local_bsz, m[1].local_bsz), (16, 32));
        assert_eq!(m[1].step_time_s, 2.0);
        let mut b = Agent::default();
        b.observe_first(o(16, 0.5));
        b.observe_first(o(32, 2.0));
        b.observe_first(o(32, 9.0));
        let mut memo = FitMemo::default();
        assert_eq!(a.perf(&mut memo), b.perf(&mut memo));
    }

    #[test]
    fn batch_choice_respects_the_target() {
        let lim = BatchLimits {
            init_batch: 64,
            max_batch: 1024,
            min_local: 8,
            max_local: 64,
        };
        let mut a = Agent::default();
        let mut memo = FitMemo::default();
        let s = a
            .choose_batch(lim, BatchTarget::Fixed(64), 1, 4, &mut memo)
            .unwrap();
        assert_eq!((s.local_bsz, s.accum_steps, s.batch(4)), (16, 0, 64));
        // Before any measurement an adaptive job starts at M0.
        let s = a
            .choose_batch(lim, BatchTarget::Adaptive, 1, 4, &mut memo)
            .unwrap();
        assert_eq!(s.batch(4), 64);
        assert!(a
            .choose_batch(lim, BatchTarget::Adaptive, 1, 0, &mut memo)
            .is_none());
    }
}
