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
use std::sync::Mutex;

use gpuplan_core::{
    BatchLimits, FitStarts, GoodputModel, GpuType, GradParams, JobSpec, JobState, Observation, Oracle,
    PerfParams, RoundJob, TypedModel,
};
use serde::{Deserialize, Serialize};

use crate::pipeline::batch_adapts;
use crate::PlannerTraits;

/// Gradient statistics assumed before a job reports any (no noise).
pub const NO_NOISE: GradParams = GradParams { sqr: 1.0, var: 0.0 };

/// Mean of the step times measured at one (nodes, GPUs, local batch).
/// Serialised as the executor's journal has always written it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObsAgg {
    /// Nodes the job ran on.
    pub nodes: u32,
    /// GPUs the job ran on, over all its nodes.
    pub gpus: u32,
    /// Per-GPU batch size of the measured steps.
    pub local_bsz: u32,
    /// Sum of the reports' gradient-accumulation times; the mean is this over `count`.
    pub accum_time_s_sum: f64,
    /// Sum of the reports' step times; the mean is this over `count`.
    pub step_time_s_sum: f64,
    /// Reports averaged in.
    pub count: u64,
    /// The GPU type measured on; absent (older journals, drivers that do
    /// not know types): one model for every type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<GpuType>,
}

impl ObsAgg {
    fn key(&self) -> (u32, u32, u32) {
        (self.nodes, self.gpus, self.local_bsz)
    }

    fn matches(&self, o: &Observation, gpu_type: Option<&GpuType>) -> bool {
        self.key() == (o.nodes, o.gpus, o.local_bsz) && self.gpu_type.as_ref() == gpu_type
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
/// parameters, only sooner. Bounded: cleared when full. Shared (behind a
/// lock) so that jobs may fit on several threads at once, as the simulator
/// advances them; two threads may then fit the same set, to the same result.
#[derive(Default)]
pub struct FitMemo {
    fits: Mutex<HashMap<Vec<[u64; 5]>, PerfParams>>,
}

/// `core::fit::fit_perf_params`, natively with its two starts on two threads (the
/// same parameters): a round often refits one job only, and one fit would
/// otherwise hold one core while the other waits.
fn fit_both_starts(obs: &[Observation]) -> PerfParams {
    let starts = match FitStarts::new(obs) {
        Err(prior) => return prior,
        Ok(starts) => starts,
    };
    #[cfg(not(target_arch = "wasm32"))]
    if starts.count() == 2 {
        let (a, b) = rayon::join(|| starts.run(0), || starts.run(1));
        return starts.finish([a, b]);
    }
    starts.finish((0..starts.count()).map(|k| starts.run(k)))
}

impl FitMemo {
    const CAPACITY: usize = 1 << 16;

    /// The throughput model fitted to these measurements, from the memo
    /// when the same measurements were fitted before (fits are slow).
    pub fn fit(&self, obs: &[Observation]) -> PerfParams {
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
        // A poisoned lock holds only finished fits: still good.
        let lock = || self.fits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = lock().get(&key) {
            return *p;
        }
        let p = fit_both_starts(obs);
        let mut fits = lock();
        if fits.len() >= Self::CAPACITY {
            fits.clear();
        }
        fits.insert(key, p);
        p
    }
}

/// What a job's agent has measured, and the fit it caches. Its fields are
/// the executor journal's (`observations`, `grad`), so a job record can
/// flatten it in and old journals still load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// Step times measured so far, one entry per configuration and type.
    #[serde(default)]
    pub observations: Vec<ObsAgg>,
    /// The latest gradient statistics reported; `None` until the job reports some.
    #[serde(default)]
    pub grad: Option<GradParams>,
    /// Fits per measured type, the first-measured type first (the job's
    /// reference model, [`RoundJob::model`]).
    #[serde(skip)]
    fitted: Option<Vec<(Option<GpuType>, PerfParams)>>,
}

impl Agent {
    /// Whether any step time is known: without one there is no model to fit.
    pub fn has_measurements(&self) -> bool {
        !self.observations.is_empty()
    }

    /// Whether this configuration has been measured (on any type).
    pub fn has_measured(&self, nodes: u32, gpus: u32, local_bsz: u32) -> bool {
        self.observations
            .iter()
            .any(|o| o.key() == (nodes, gpus, local_bsz))
    }

    /// Add one step-time report: configurations measured again are averaged.
    pub fn observe(&mut self, o: Observation) {
        self.observe_on(None, o);
    }

    /// [`Agent::observe`] on GPUs of a known type: each type gets its own fit.
    pub fn observe_on(&mut self, gpu_type: Option<&GpuType>, o: Observation) {
        match self.observations.iter_mut().find(|a| a.matches(&o, gpu_type)) {
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
                gpu_type: gpu_type.cloned(),
            }),
        }
        self.fitted = None;
    }

    /// Record a configuration's first measurement only (the Pollux
    /// artifact's agent, which the simulator follows).
    pub fn observe_first(&mut self, o: Observation) {
        self.observe_first_on(None, o);
    }

    /// [`Agent::observe_first`] per GPU type.
    pub fn observe_first_on(&mut self, gpu_type: Option<&GpuType>, o: Observation) {
        if !self.observations.iter().any(|a| a.matches(&o, gpu_type)) {
            self.observe_on(gpu_type, o);
        }
    }

    /// The measured types, the first-measured first.
    fn types(&self) -> Vec<Option<GpuType>> {
        let mut out: Vec<Option<GpuType>> = Vec::new();
        for o in &self.observations {
            if !out.contains(&o.gpu_type) {
                out.push(o.gpu_type.clone());
            }
        }
        out
    }

    /// The measurements of one type the fit sees: one mean per
    /// configuration, in configuration order (so the fit does not depend on
    /// report order).
    fn measurements_of(&self, gpu_type: &Option<GpuType>) -> Vec<Observation> {
        let mut v: Vec<Observation> = self
            .observations
            .iter()
            .filter(|o| o.gpu_type == *gpu_type)
            .map(ObsAgg::mean)
            .collect();
        v.sort_by_key(|o| (o.nodes, o.gpus, o.local_bsz));
        v
    }

    /// The measurements of the reference (first-measured) type.
    pub fn measurements(&self) -> Vec<Observation> {
        self.types()
            .first()
            .map_or_else(Vec::new, |t| self.measurements_of(t))
    }

    /// Every type's fit, the reference type first; empty before any measurement.
    fn fits(&mut self, memo: &FitMemo) -> &[(Option<GpuType>, PerfParams)] {
        if self.fitted.is_none() {
            let fits = self
                .types()
                .into_iter()
                .map(|t| {
                    let p = memo.fit(&self.measurements_of(&t));
                    (t, p)
                })
                .collect();
            self.fitted = Some(fits);
        }
        self.fitted.as_deref().unwrap_or(&[])
    }

    /// Fitted throughput parameters of the reference type; `None` before any measurement.
    pub fn perf(&mut self, memo: &FitMemo) -> Option<PerfParams> {
        self.fits(memo).first().map(|f| f.1)
    }

    /// Whether a fit is cached (a view may show it without fitting).
    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    fn goodput_model(&self, perf: PerfParams, limits: BatchLimits) -> GoodputModel {
        GoodputModel {
            perf,
            grad: self.grad.unwrap_or(NO_NOISE),
            limits,
            accumulation: true,
        }
    }

    /// The fitted goodput model of the reference type: throughput fitted to
    /// its measurements, gradient statistics from the latest report.
    pub fn model(&mut self, limits: BatchLimits, memo: &FitMemo) -> Option<GoodputModel> {
        let perf = self.perf(memo)?;
        Some(self.goodput_model(perf, limits))
    }

    /// The reference model, its type, and the models fitted on other types.
    pub fn typed_models(
        &mut self,
        limits: BatchLimits,
        memo: &FitMemo,
    ) -> Option<(GoodputModel, Option<GpuType>, Vec<TypedModel>)> {
        let fits = self.fits(memo).to_vec();
        let ((t0, p0), rest) = fits.split_first()?;
        let others = rest
            .iter()
            .filter_map(|(t, p)| {
                Some(TypedModel {
                    gpu_type: t.clone()?,
                    model: self.goodput_model(*p, limits),
                })
            })
            .collect();
        Some((self.goodput_model(*p0, limits), t0.clone(), others))
    }

    /// The model on GPUs of `gpu_type` ([`RoundJob::model_on`]'s rule:
    /// fitted there, else the reference model moved by the type-speed ratio).
    pub fn model_on(
        &mut self,
        limits: BatchLimits,
        app: &str,
        gpu_type: Option<&GpuType>,
        memo: &FitMemo,
    ) -> Option<GoodputModel> {
        let fits = self.fits(memo);
        let (t0, p0) = fits.first()?.clone();
        let perf = match fits.iter().find(|(t, _)| t.as_ref() == gpu_type) {
            Some((_, p)) if gpu_type.is_some() => *p,
            _ => gpuplan_core::perf_on(p0, app, t0.as_ref(), gpu_type),
        };
        Some(self.goodput_model(perf, limits))
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
        memo: &FitMemo,
    ) -> Option<BatchSplit> {
        self.choose_batch_on(limits, target, "", None, nodes, gpus, memo)
    }

    /// [`Agent::choose_batch`] on GPUs of `gpu_type`, for application `app`
    /// (whose type-speed ratio predicts a type not yet measured).
    #[allow(clippy::too_many_arguments)]
    pub fn choose_batch_on(
        &mut self,
        limits: BatchLimits,
        target: BatchTarget,
        app: &str,
        gpu_type: Option<&GpuType>,
        nodes: u32,
        gpus: u32,
        memo: &FitMemo,
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
            None => match self
                .model_on(lim, app, gpu_type, memo)
                .and_then(|m| m.optimize(nodes, r))
            {
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
    /// Seconds a restart costs the job where the driver knows it; `None`: the round's default.
    pub restart_penalty_s: Option<f64>,
    /// Seconds the job must hold an allocation before it may be shrunk or
    /// preempted, where it names its own; `None`: the round's default.
    pub min_runtime_s: Option<f64>,
    /// Batch limits; `None` for a job with no batch to adapt (a rigid trace
    /// job), which never gets a model.
    pub limits: Option<BatchLimits>,
    /// Model features from the submission, where it gives them
    /// ([`gpuplan_core::RoundJob::features`]).
    pub features: Option<gpuplan_core::predict::ModelFeatures>,
}

/// The planner's view of one job: the facts, the state, the fitted model.
pub fn round_job(
    facts: JobFacts,
    state: JobState,
    agent: &mut Agent,
    oracle: Option<Oracle>,
    memo: &FitMemo,
) -> RoundJob {
    let (model, model_type, type_models) = match facts.limits.and_then(|l| agent.typed_models(l, memo)) {
        Some((m, t, others)) => (Some(m), t, others),
        None => (None, None, Vec::new()),
    };
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
        model_type,
        type_models,
        oracle,
        restart_penalty_s: facts.restart_penalty_s,
        min_runtime_s: facts.min_runtime_s,
        class: None,
        mem_gib: None,
        utilization: None,
        features: facts.features,
        colocation_key: None,
        queue: s.queue,
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
        let memo = FitMemo::default();
        assert_eq!(a.perf(&memo), b.perf(&memo));
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
        let memo = FitMemo::default();
        let s = a.choose_batch(lim, BatchTarget::Fixed(64), 1, 4, &memo).unwrap();
        assert_eq!((s.local_bsz, s.accum_steps, s.batch(4)), (16, 0, 64));
        // Before any measurement an adaptive job starts at M0.
        let s = a.choose_batch(lim, BatchTarget::Adaptive, 1, 4, &memo).unwrap();
        assert_eq!(s.batch(4), 64);
        assert!(a.choose_batch(lim, BatchTarget::Adaptive, 1, 0, &memo).is_none());
    }

    /// Each measured type gets its own fit; a type not yet measured is the
    /// reference (first-measured) model moved by the type-speed ratio.
    #[test]
    fn each_type_is_fitted_and_others_are_predicted_by_the_ratio() {
        let o = |l: u32, s: f64| Observation {
            nodes: 1,
            gpus: 1,
            local_bsz: l,
            accum_time_s: s,
            step_time_s: s,
        };
        let lim = BatchLimits {
            init_batch: 16,
            max_batch: 1024,
            min_local: 8,
            max_local: 64,
        };
        let (t4, a100): (GpuType, GpuType) = ("t4".into(), "a100".into());
        let mut a = Agent::default();
        let memo = FitMemo::default();
        a.observe_first_on(Some(&t4), o(16, 0.3));
        a.observe_first_on(Some(&t4), o(64, 0.9));
        let m = a.model(lim, &memo).unwrap();
        let (r, ty, others) = a.typed_models(lim, &memo).unwrap();
        assert_eq!((r, ty.as_ref(), others.len()), (m, Some(&t4), 0));
        let guess = a.model_on(lim, "bert", Some(&a100), &memo).unwrap();
        assert!((guess.perf.alpha_c - m.perf.alpha_c * 0.292).abs() < 1e-12);
        assert!((guess.perf.beta_c - m.perf.beta_c * 0.292).abs() < 1e-12);
        // Measured on the A100: its own fit, the reference unchanged.
        a.observe_first_on(Some(&a100), o(16, 0.05));
        a.observe_first_on(Some(&a100), o(64, 0.2));
        let (r, ty, others) = a.typed_models(lim, &memo).unwrap();
        assert_eq!((r, ty.as_ref()), (m, Some(&t4)));
        assert_eq!(others.len(), 1);
        assert_eq!(others[0].gpu_type, a100);
        let own = a.model_on(lim, "bert", Some(&a100), &memo).unwrap();
        assert_eq!(own, others[0].model);
        assert!(own.perf.beta_c < guess.perf.beta_c, "the A100 fit is its own");
        // Untyped reports (older journals) keep one model for every type.
        let mut b = Agent::default();
        b.observe(o(16, 0.3));
        b.observe(o(64, 0.9));
        assert_eq!(b.model_on(lim, "bert", Some(&a100), &memo), b.model(lim, &memo));
    }
}
