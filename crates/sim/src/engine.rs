//! The one round loop: one clock, jobs advanced by the ground-truth profile.
//!
//! Each round: advance every running job by `interval_s` using the true step
//! times and gradient statistics of its application; then hand the planner
//! a [`Round`] holding only what a real agent would have measured (fitted
//! model, current gradient statistics, age, attained service, restarts);
//! then apply the plan, charging a restart delay to every changed job.
//! This follows the Pollux artifact's simulator (see docs/fidelity.md).

use gpuplan_core::colocation::{compute_share, shared_gpus, sharing_slowdowns, Colocation};
use gpuplan_core::{
    type_speed, Allocation, AppProfile, Cluster, GpuId, GpuType, JobSpec, JobState, Observation, Oracle,
    Plan, PolicyParams, Round, TypeSpeed,
};
use gpuplan_solve::{
    batch_adapts, round_job, run_round, Agent, BatchTarget, Change, Decision, FitMemo, JobFacts, Limits,
    PlanError, Planner, PlannerTraits,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::data::Profiles;
use crate::error::SimError;
use crate::metrics::{GpuUsage, JobResult, RoundRecord, Segment, SimResult};
use crate::workload::{Work, WorkloadJob};

/// Seconds one job held its GPUs, and GPU-busy seconds (held × its
/// utilization), over one interval.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    held_s: f64,
    busy_s: f64,
}

/// Simulation settings (the CLI's flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// The simulated cluster: nodes, GPUs and their types.
    pub cluster: Cluster,
    /// Seconds between scheduling rounds.
    pub interval_s: f64,
    /// Seconds a job makes no progress after its allocation changes.
    pub restart_delay_s: f64,
    /// Slowdown of multi-node jobs on nodes shared by several of them (0 = none).
    pub interference_slowdown: f64,
    /// The planners' knobs, passed to every round.
    pub params: PolicyParams,
    /// Seeds the variability draw and, mixed with the round index, each
    /// round's planner, so a run is reproducible.
    pub seed: u64,
    /// Wall-clock limit of each round's solve ([`Limits::time_limit_s`]).
    pub time_limit_s: f64,
    /// Relative MIP gap at which a round's solve may stop.
    pub gap: f64,
    /// Most memory a round's model may take, MiB ([`Limits::memory_limit_mb`]):
    /// a larger one falls back to greedy for that round, marked. `None`:
    /// no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<u64>,
    /// Stop (with an error) if jobs are still running this much simulated
    /// time after the last arrival.
    pub max_sim_s: f64,
    /// Whether rounds with no job in the system are simulated or skipped.
    #[serde(default)]
    pub idle_rounds: IdleRounds,
    /// Per-GPU variability ([`crate::variability`]), drawn per node with
    /// `seed` when the run starts; `None`: every GPU runs at the median
    /// speed of its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variability: Option<crate::variability::Variability>,
    /// Ground truth of co-located jobs' slowdowns, read when
    /// `params.sharing` > 1 lets planners share GPUs; `None`: the shipped
    /// curve alone ([`gpuplan_core::colocation::GAVEL_CURVE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocation: Option<Colocation>,
    /// What sharing needs to know of a rigid job's model (by
    /// [`WorkloadJob::model`]): its utilization and memory. Rigid jobs have
    /// no profile, so without this they count as fully busy and of unknown
    /// memory, and never share.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub colocation_jobs: BTreeMap<String, crate::colocation::KeyFacts>,
    /// The teams' queues every round carries (docs/tenants.md), jobs in
    /// the queue their workload names (`queue`/`group`); empty: one pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<gpuplan_core::queue::Queue>,
    /// Keep a [`crate::RoundLog`] of every round in the result (for
    /// comparing with another simulator round by round; off by default, as
    /// it holds every job's state every round).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub round_log: bool,
    /// Seconds of run time between every job's checkpoints, where its
    /// workload gives none: a restart (a move, a resize, a preemption)
    /// throws away the work since the last one, beside the restart delay.
    /// `None`, and no job's own: jobs checkpoint when stopped and lose only
    /// the delay, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval_s: Option<f64>,
    /// What the planner is told a restart costs a job that checkpoints.
    #[serde(default, skip_serializing_if = "is_default_cost")]
    pub restart_charge: RestartCost,
}

fn is_default_cost(c: &RestartCost) -> bool {
    *c == RestartCost::default()
}

/// What planners are told a restart costs a job that checkpoints
/// periodically: the work since its last checkpoint as well as the delay
/// (what it really loses), or the fixed penalty alone (before jobs
/// reported checkpoints; for comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartCost {
    /// The penalty plus the work since the last checkpoint.
    #[default]
    Checkpoint,
    /// The penalty alone, whatever the job would lose.
    Fixed,
}

/// Why `s` is no checkpoint interval, if it is not: a finite count of
/// seconds > 0.
pub fn checkpoint_interval_problem(s: f64) -> Option<String> {
    (!(s.is_finite() && s > 0.0)).then(|| format!("must be > 0 seconds, got {s}"))
}

/// Rounds in which no job has arrived yet or all arrived jobs are done.
///
/// Nothing can progress in them, so skipping them gives the same jobs and
/// segments as running them (a test checks this); only the per-round
/// records and planner-time statistics differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleRounds {
    /// Jump to the next arrival (the default: same jobs, fewer rounds).
    #[default]
    Skip,
    /// Simulate them, e.g. to compare per-round records with another tool.
    Run,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cluster: Cluster::homogeneous(16, 4, gpuplan_core::DEFAULT_GPU_TYPE),
            interval_s: 60.0,
            restart_delay_s: 30.0,
            interference_slowdown: 0.0,
            params: PolicyParams::default(),
            seed: 0,
            time_limit_s: 10.0,
            gap: 1e-4,
            memory_limit_mb: None,
            max_sim_s: 60.0 * 86400.0,
            idle_rounds: IdleRounds::Skip,
            variability: None,
            colocation: None,
            colocation_jobs: BTreeMap::new(),
            queues: Vec::new(),
            round_log: false,
            checkpoint_interval_s: None,
            restart_charge: RestartCost::Checkpoint,
        }
    }
}

/// What the observer of a run may ask for after each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Go on to the next round.
    Continue,
    /// Stop the run; it returns [`SimError::Cancelled`].
    Cancel,
}

/// The simulator's private view of one job: ground truth plus what its
/// agent has measured.
struct SimJob<'a> {
    spec: JobSpec,
    /// `None` for rigid jobs, which progress by wall-clock time instead.
    profile: Option<&'a AppProfile>,
    /// Seconds of work at the requested GPUs (rigid jobs only).
    rigid_s: f64,
    /// Fixed total batch (fixed-batch policies, and NCF as in the artifact).
    target: BatchTarget,
    max_gpus: u32,
    alloc: Allocation,
    shape: Vec<u32>,
    local_bsz: u32,
    accum_steps: u32,
    progress: f64,
    epoch: u32,
    rescale_left_s: f64,
    attained_gpu_s: f64,
    /// None until the first start (Pollux counts re-allocations after it).
    restarts: Option<u32>,
    max_gpus_used: u32,
    completion_s: Option<f64>,
    /// What the job's agent has measured (first measurement per configuration).
    agent: Agent,
    segment_start_s: f64,
    oracle_steps: Option<Vec<f64>>,
    /// The GPU type it runs on and that type's speed for its application
    /// ([`gpuplan_core::gpu_speed`]); set with each allocation.
    gpu_type: Option<GpuType>,
    speed: TypeSpeed,
    /// A rigid job's model key and its sharing facts, where known.
    coloc: Option<(String, crate::colocation::KeyFacts)>,
    /// Its checkpoints, where it takes them periodically.
    ckpt: Option<Checkpoints>,
}

/// A job that checkpoints every `every_s` seconds of run time: what its
/// last checkpoint holds, and what its restarts threw away.
#[derive(Debug, Clone, Copy)]
struct Checkpoints {
    every_s: f64,
    /// Progress and epoch the last checkpoint holds (a restart resumes there).
    progress: f64,
    epoch: u32,
    /// Run time since then, restart delays not counted.
    since_s: f64,
    /// Seconds and GPU-seconds of work restarts threw away.
    lost_s: f64,
    lost_gpu_s: f64,
}

/// A rigid job's co-location key and facts: its trace model where
/// `cfg.colocation_jobs` knows it. Profiled jobs have their profile.
fn coloc_of(cfg: &SimConfig, job: &WorkloadJob) -> Option<(String, crate::colocation::KeyFacts)> {
    if job.work == Work::Profiled {
        return None;
    }
    let m = job.model.as_ref()?;
    Some((m.clone(), *cfg.colocation_jobs.get(m)?))
}

impl SimJob<'_> {
    fn batch(&self) -> u32 {
        self.alloc.num_gpus() * self.local_bsz * (self.accum_steps + 1)
    }

    /// Re-choose local batch and accumulation for the current placement, as
    /// the artifact's `update_local_bsz` does.
    fn update_local_bsz(&mut self, memo: &FitMemo) {
        let Some(profile) = self.profile else {
            return;
        };
        let (nodes, r) = (self.alloc.num_nodes(), self.alloc.num_gpus());
        if let Some(c) = self.agent.choose_batch_on(
            profile.limits,
            self.target,
            &self.spec.app,
            self.gpu_type.as_ref(),
            nodes,
            r,
            memo,
        ) {
            self.local_bsz = c.local_bsz;
            self.accum_steps = c.accum_steps;
        }
    }

    /// Advance by `seconds` from `now` ([`SimJob::advance`]), taking the
    /// checkpoints that fall in them: the last one holds the progress
    /// reached then, interpolated over the interval's run time.
    fn step(&mut self, now: f64, seconds: f64, slowdown: f64, memo: &FitMemo) -> Usage {
        let (p0, e0, delay) = (self.progress, self.epoch, self.rescale_left_s.min(seconds));
        let usage = self.advance(now, seconds, slowdown, memo);
        let Some(c) = self.ckpt.as_mut() else {
            return usage;
        };
        let ran = (seconds - delay).max(0.0);
        if ran <= 0.0 || self.completion_s.is_some() {
            return usage;
        }
        c.since_s += ran;
        if c.since_s >= c.every_s {
            c.since_s %= c.every_s;
            let at = ((ran - c.since_s) / ran).clamp(0.0, 1.0);
            c.progress = p0 + (self.progress - p0) * at;
            c.epoch = match self.profile {
                Some(p) => {
                    let mut e = e0;
                    while e < self.epoch && p.progress_at_epoch(e + 1) <= c.progress {
                        e += 1;
                    }
                    e
                }
                None => 0,
            };
        }
        usage
    }

    /// A restart: the work since the last checkpoint is thrown away, and
    /// the job resumes from what the checkpoint holds.
    fn lose_since_checkpoint(&mut self) {
        let gpus = f64::from(self.alloc.num_gpus());
        let Some(c) = self.ckpt.as_mut() else {
            return;
        };
        c.lost_s += c.since_s;
        c.lost_gpu_s += c.since_s * gpus;
        c.since_s = 0.0;
        self.progress = c.progress;
        self.epoch = c.epoch;
    }

    /// Advance by `seconds` from `now`, updating state. Returns how the
    /// job used its GPUs over those seconds ([`Usage`]).
    fn advance(&mut self, now: f64, mut seconds: f64, slowdown: f64, memo: &FitMemo) -> Usage {
        let mut usage = Usage::default();
        if self.alloc.is_empty() || self.completion_s.is_some() {
            return usage;
        }
        let gpus = self.alloc.num_gpus() as f64;
        let delay = self.rescale_left_s.min(seconds);
        let mut t = now + delay;
        self.attained_gpu_s += delay * gpus;
        self.rescale_left_s -= delay;
        seconds -= delay;
        usage.held_s = delay;
        let Some(profile) = self.profile else {
            // Rigid: work is seconds at the requested GPUs; other sizes scale linearly.
            // With no profile its GPUs count as fully busy.
            let rate = gpus / self.spec.requested_gpus.max(1) as f64 * (1.0 - slowdown);
            let left = self.rigid_s - self.progress;
            let ran = if rate > 0.0 && left <= rate * seconds {
                let delta = left / rate;
                self.progress = self.rigid_s;
                self.attained_gpu_s += delta * gpus;
                self.completion_s = Some(t + delta);
                delta
            } else {
                self.progress += rate * seconds;
                self.attained_gpu_s += seconds * gpus;
                seconds
            };
            usage.held_s += ran;
            usage.busy_s += ran;
            return usage;
        };
        let nodes = self.alloc.num_nodes();
        while seconds > 0.0 && self.completion_s.is_none() {
            let r = self.alloc.num_gpus();
            let batch = self.batch() as f64;
            let st = self
                .speed
                .step(profile.step_time(&self.shape, self.local_bsz as f64), nodes);
            let accum_time = (st.step_s - st.sync_s).max(1e-9);
            self.agent.observe_first_on(
                self.gpu_type.as_ref(),
                Observation {
                    nodes,
                    gpus: r,
                    local_bsz: self.local_bsz,
                    accum_time_s: accum_time,
                    step_time_s: st.step_s,
                },
            );
            self.agent.grad = Some(profile.grad_params(self.epoch, batch));
            let gain = profile.gain(self.epoch, batch);
            let total = st.step_s + accum_time * self.accum_steps as f64;
            let rate = gain / total * (1.0 - slowdown);
            let next = profile.progress_at_epoch(self.epoch + 1);
            let util = compute_share(total, st.sync_s);
            if self.progress + rate * seconds < next {
                self.progress += rate * seconds;
                self.attained_gpu_s += seconds * gpus;
                usage.held_s += seconds;
                usage.busy_s += seconds * util;
                t += seconds;
                seconds = 0.0;
            } else {
                self.epoch += 1;
                let delta = ((next - self.progress) / rate).round().clamp(0.0, seconds);
                if self.epoch >= profile.max_epochs {
                    self.completion_s = Some(t + delta);
                }
                self.progress = next;
                self.attained_gpu_s += delta * gpus;
                usage.held_s += delta;
                usage.busy_s += delta * util;
                t += delta;
                seconds -= delta;
            }
            self.update_local_bsz(memo);
        }
        usage
    }

    /// The true progress rate of the job's configuration (scale-invariant
    /// iterations per second, before any slowdown), as [`SimJob::step`]
    /// advances it; `None` for a rigid job or one without GPUs.
    fn goodput(&self) -> Option<f64> {
        let profile = self.profile?;
        if self.alloc.is_empty() {
            return None;
        }
        let st = self.speed.step(
            profile.step_time(&self.shape, self.local_bsz as f64),
            self.alloc.num_nodes(),
        );
        let accum_time = (st.step_s - st.sync_s).max(1e-9);
        let total = st.step_s + accum_time * self.accum_steps as f64;
        Some(profile.gain(self.epoch, self.batch() as f64) / total)
    }

    /// The job's true utilization at its current configuration, the compute
    /// share of its step with accumulation ([`compute_share`]); a rigid job
    /// counts as fully busy.
    fn utilization(&self) -> f64 {
        let Some(profile) = self.profile else {
            return self.coloc.as_ref().map_or(1.0, |c| c.1.utilization);
        };
        let st = profile.step_time(&self.shape, self.local_bsz as f64);
        let total = st.step_s + (st.step_s - st.sync_s).max(1e-9) * self.accum_steps as f64;
        compute_share(total, st.sync_s)
    }

    /// True seconds per optimizer step on k packed GPUs at the fixed batch.
    fn oracle(&mut self, cluster: &Cluster) -> Oracle {
        let Some(profile) = self.profile else {
            // One "iteration" is one second at the requested size.
            let g = self.spec.requested_gpus.max(1);
            return Oracle {
                remaining_iters: (self.rigid_s - self.progress).max(0.0),
                step_time_s: (1..=g).map(|k| g as f64 / k as f64).collect(),
            };
        };
        let lim = profile.limits;
        let batch = match self.target {
            BatchTarget::Fixed(b) => b,
            BatchTarget::Adaptive => self.spec.batch_size,
        };
        if self.oracle_steps.is_none() {
            let g = cluster.max_gpus_per_node().max(1);
            let kmax =
                (batch / lim.min_local.max(1)).clamp(1, self.max_gpus.min(cluster.total_gpus()).max(1));
            let steps = (1..=kmax)
                .map(|k| {
                    let mut shape = vec![g; (k / g) as usize];
                    if k % g > 0 {
                        shape.push(k % g);
                    }
                    let (atomic, accum) = fixed_batch_split(batch, k, lim.max_local, lim.init_batch);
                    let st = profile.step_time(&shape, atomic as f64);
                    st.step_s + (st.step_s - st.sync_s) * accum as f64
                })
                .collect();
            self.oracle_steps = Some(steps);
        }
        let mut iters = 0.0;
        for e in self.epoch..profile.max_epochs {
            let start = profile.progress_at_epoch(e).max(self.progress);
            let need = (profile.progress_at_epoch(e + 1) - start).max(0.0);
            iters += need / profile.gain(e, batch as f64).max(1e-12);
        }
        Oracle {
            remaining_iters: iters,
            step_time_s: self.oracle_steps.clone().unwrap_or_default(),
        }
    }
}

use gpuplan_solve::fixed_batch_split;

/// GPUs of the cluster's largest GPU type: core's, the bound the fit rule
/// ([`gpuplan_core::never_fits`]) that the daemon shares reads.
pub use gpuplan_core::largest_type_gpus;

/// Where the user allows it (`--shrink-to-fit`): a job that needs more GPUs
/// than the largest GPU type is cut to that size, so the run goes on
/// instead of being refused. A rigid job keeps its GPU-seconds of work (its
/// duration grows by requested ÷ new); a profiled job's model simply gets
/// fewer GPUs. Returns one note per shrunk job, `name (from → to GPUs)`.
pub fn shrink_to_fit(cluster: &Cluster, jobs: &mut [WorkloadJob]) -> Vec<String> {
    let cap = largest_type_gpus(cluster);
    let mut notes = Vec::new();
    if cap == 0 {
        return notes;
    }
    for WorkloadJob { spec, work, .. } in jobs.iter_mut() {
        let need = match work {
            Work::Profiled => spec.min_gpus,
            Work::Rigid { .. } => spec.min_gpus.max(spec.requested_gpus),
        };
        if need <= cap {
            continue;
        }
        if let Work::Rigid { duration_s } = work {
            *duration_s *=
                f64::from(spec.requested_gpus.max(1)) / f64::from(cap.min(spec.requested_gpus.max(1)));
        }
        notes.push(format!("{} ({need} → {cap} GPUs)", spec.name));
        spec.requested_gpus = spec.requested_gpus.min(cap);
        spec.min_gpus = spec.min_gpus.min(cap);
        spec.max_gpus = spec.max_gpus.min(cap);
    }
    notes
}

/// Which batch a job of a workload runs at under a planner: the one policy
/// ([`BatchTarget::for_job`]); the artifact pins NCF to its tuned batch, and
/// a rigid job has no batch to adapt. The daemon asks the same question.
pub fn batch_target(traits: &PlannerTraits, job: &WorkloadJob) -> BatchTarget {
    let allows = match job.work {
        Work::Profiled => job.spec.app != "ncf",
        Work::Rigid { .. } => false,
    };
    BatchTarget::for_job(traits, allows, job.spec.batch_size)
}

/// Run one workload of profile-driven jobs under one planner.
pub fn simulate(
    cfg: &SimConfig,
    profiles: &Profiles,
    specs: &[JobSpec],
    planner: &mut dyn Planner,
    observer: &mut dyn FnMut(&Round, &Plan) -> Control,
) -> Result<SimResult, SimError> {
    let jobs: Vec<WorkloadJob> = specs
        .iter()
        .map(|s| WorkloadJob {
            spec: s.clone(),
            work: Work::Profiled,
            model: None,
            checkpoint_interval_s: None,
        })
        .collect();
    simulate_workload(cfg, profiles, &jobs, planner, observer)
}

/// Run one workload (profile-driven and rigid jobs) under one planner.
///
/// Per-round cost is proportional to the jobs in the system: jobs that have
/// not arrived or have finished are not touched, and with
/// [`IdleRounds::Skip`] rounds with no job in the system are jumped over.
///
/// One loop, one clock, named stages: advance the jobs by an interval,
/// retire the finished, admit arrivals, build the round, plan (the one
/// pipeline), apply the decision, record.
pub fn simulate_workload(
    cfg: &SimConfig,
    profiles: &Profiles,
    specs: &[WorkloadJob],
    planner: &mut dyn Planner,
    observer: &mut dyn FnMut(&Round, &Plan) -> Control,
) -> Result<SimResult, SimError> {
    let wall = web_time::Instant::now();
    let mut world = World::new(cfg, profiles, specs, planner.traits())?;
    let mut work = crate::work_rate::WorkRate::new(specs, profiles);
    while !world.done() {
        world.advance();
        world.retire();
        if world.done() {
            break;
        }
        world.check_deadline()?;
        world.skip_idle();
        world.admit();
        let limits = world.build_round();
        let decision = match run_round(planner, &world.round, &limits) {
            Ok(d) => d,
            Err(PlanError::InvalidPlan { planner, violations }) => {
                let v: Vec<String> = violations.iter().map(ToString::to_string).collect();
                return Err(SimError::Invalid(format!(
                    "planner {planner} returned an invalid plan at t={}: {}",
                    world.now(),
                    v.join("; ")
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let restarts = world.apply(&decision);
        world.record(&decision.plan, restarts);
        work.observe(&world.round);
        if observer(&world.round, &decision.plan) == Control::Cancel {
            return Err(SimError::Cancelled);
        }
    }
    let mut r = world.finish(planner.name(), wall.elapsed().as_secs_f64());
    r.work_rate = work.finish(&r.jobs);
    Ok(r)
}

/// The simulator between two rounds: its one clock (`tick`), the jobs and
/// which of them are in the system, and what the run has recorded.
struct World<'a> {
    cfg: &'a SimConfig,
    traits: PlannerTraits,
    jobs: Vec<SimJob<'a>>,
    /// Arrival order; ties keep workload order.
    order: Vec<usize>,
    last_submit_s: f64,
    next_arrival: usize,
    /// Arrived, unfinished jobs, by workload index (the order planners see).
    active: Vec<usize>,
    finished: usize,
    /// Time is ticks × interval (not a running sum), so skipping ticks lands
    /// on exactly the times full rounds reach.
    tick: u64,
    round_index: u64,
    speeds: Option<crate::variability::GpuSpeeds>,
    /// One round value for the whole run: the cluster is cloned once, not
    /// every round (its node names are strings).
    round: Round,
    memo: FitMemo,
    truth: Colocation,
    gpu_use: GpuUse,
    rounds: Vec<RoundRecord>,
    segments: Vec<Segment>,
    planner_ms: Vec<f64>,
    /// Per queue (the run's queues, then `default`): GPU-seconds borrowed
    /// and short of guarantee, summed over rounds.
    queue_gpu_s: Vec<(f64, f64)>,
    /// Jobs that finished in the last interval (for the round log).
    retired: Vec<usize>,
    round_log: Vec<crate::RoundLog>,
}

impl<'a> World<'a> {
    /// The workload checked and its jobs set up, before the first round.
    fn new(
        cfg: &'a SimConfig,
        profiles: &'a Profiles,
        specs: &[WorkloadJob],
        traits: PlannerTraits,
    ) -> Result<Self, SimError> {
        let jobs = sim_jobs(cfg, profiles, specs, &traits)?;
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&a, &b| jobs[a].spec.submit_s.total_cmp(&jobs[b].spec.submit_s));
        let last_submit_s = order.last().map_or(0.0, |&i| jobs[i].spec.submit_s);
        let speeds = cfg.variability.as_ref().map(|v| v.draw(&cfg.cluster, cfg.seed));
        // Planners see the drawn slowdowns (placements may use them); they do
        // not change during a run, so the round holds them once.
        let round = Round {
            now_s: 0.0,
            cluster: cfg.cluster.clone(),
            jobs: Vec::new(),
            params: cfg.params,
            variability: speeds.as_ref().map(|s| s.gpus.clone()),
            // Planners value pairs with the measurements the run knows, and
            // the rest with the shipped curve (as before measurements existed).
            colocation: (cfg.params.sharing > 1).then(|| {
                let measured = cfg.colocation.as_ref().map(|c| c.measured().to_vec());
                Colocation::new(
                    gpuplan_core::colocation::GAVEL_CURVE,
                    measured.unwrap_or_default(),
                )
            }),
            reserved: Vec::new(),
            queues: cfg.queues.clone(),
        };
        Ok(World {
            cfg,
            traits,
            jobs,
            order,
            last_submit_s,
            next_arrival: 0,
            active: Vec::new(),
            finished: 0,
            tick: 0,
            round_index: 0,
            speeds,
            round,
            memo: FitMemo::default(),
            truth: cfg.colocation.clone().unwrap_or_default(),
            gpu_use: GpuUse::new(&cfg.cluster),
            rounds: Vec::new(),
            segments: Vec::new(),
            planner_ms: Vec::new(),
            queue_gpu_s: Vec::new(),
            retired: Vec::new(),
            round_log: Vec::new(),
        })
    }

    fn now(&self) -> f64 {
        self.tick as f64 * self.cfg.interval_s
    }

    fn done(&self) -> bool {
        self.finished == self.jobs.len()
    }

    /// Advance every job in the system by one interval, at its true pace
    /// (interference, sharing, variability), and count its GPUs' use.
    fn advance(&mut self) {
        let cfg = self.cfg;
        let now = self.now();
        let (jobs, active) = (&self.jobs, &self.active);
        let mut slow = slowdowns(jobs, active, &cfg.cluster, cfg.interference_slowdown);
        if cfg.params.sharing > 1 {
            // Jobs on a shared GPU run at the true co-located pace:
            // progress rate × (1 − s) becomes rate × (1 − s) / f.
            let allocs: Vec<&Allocation> = active.iter().map(|&i| &jobs[i].alloc).collect();
            let f = sharing_slowdowns(
                &self.truth,
                &allocs,
                |k| {
                    let j = &jobs[active[k]];
                    match j.profile {
                        Some(_) => crate::colocation::gavel_key(&j.spec.app, j.local_bsz),
                        None => j.coloc.as_ref().map(|c| c.0.clone()),
                    }
                },
                |k| jobs[active[k]].utilization(),
            );
            for (s, f) in slow.iter_mut().zip(f).filter(|(_, f)| *f > 1.0) {
                *s = 1.0 - (1.0 - *s) / f;
            }
        }
        let slow: Vec<f64> = active
            .iter()
            .zip(&slow)
            .map(|(&i, &s)| match &self.speeds {
                None => s,
                Some(v) => {
                    // Progress rate × (1 − s) becomes rate × (1 − s) / factor.
                    let j = &jobs[i];
                    let class = crate::variability::class_of(&j.spec.app);
                    1.0 - (1.0 - s) / v.job_factor(class, &j.alloc, j.profile.is_none())
                }
            })
            .collect();
        // Jobs advance independently (a job's fit depends on its own
        // measurements only; the memo merely saves repeats), so natively
        // they advance in parallel: fitting is much of a goodput policy's
        // simulation time. `collect` keeps `active`'s order.
        let memo = &self.memo;
        let advancing: Vec<(&mut SimJob, f64)> = pick_mut(&mut self.jobs, &self.active)
            .into_iter()
            .zip(slow)
            .collect();
        #[cfg(not(target_arch = "wasm32"))]
        let used: Vec<Usage> = {
            use rayon::prelude::*;
            advancing
                .into_par_iter()
                .with_max_len(1)
                .map(|(j, s)| j.step(now, cfg.interval_s, s, memo))
                .collect()
        };
        #[cfg(target_arch = "wasm32")]
        let used: Vec<Usage> = advancing
            .into_iter()
            .map(|(j, s)| j.step(now, cfg.interval_s, s, memo))
            .collect();
        self.gpu_use.add(&self.jobs, &self.active, &used);
        self.tick += 1;
    }

    /// Jobs that completed leave the system, closing their last segment.
    fn retire(&mut self) {
        let (jobs, segments, finished) = (&mut self.jobs, &mut self.segments, &mut self.finished);
        let retired = &mut self.retired;
        retired.clear();
        self.active.retain(|&i| {
            let j = &mut jobs[i];
            let Some(c) = j.completion_s else {
                return true;
            };
            if !j.alloc.is_empty() {
                segments.push(Segment {
                    job: j.spec.id,
                    start_s: j.segment_start_s,
                    end_s: c,
                    nodes: j.alloc.per_node().into_iter().map(|(n, k)| (n.0, k)).collect(),
                });
                j.alloc = Allocation::default();
            }
            *finished += 1;
            retired.push(i);
            false
        });
    }

    /// A run that no longer ends (a cluster too small for its workload) stops.
    fn check_deadline(&self) -> Result<(), SimError> {
        if self.now() > self.last_submit_s + self.cfg.max_sim_s {
            return Err(SimError::Invalid(format!(
                "jobs still running {} simulated seconds after the last arrival; is the cluster too small for the workload?",
                self.cfg.max_sim_s
            )));
        }
        Ok(())
    }

    /// With no job in the system nothing can progress until the next
    /// arrival: jump to the first round boundary at or after it, as full
    /// rounds would.
    fn skip_idle(&mut self) {
        if self.active.is_empty() && self.cfg.idle_rounds == IdleRounds::Skip {
            let t = self.jobs[self.order[self.next_arrival]].spec.submit_s;
            let target = ((t / self.cfg.interval_s).ceil() as u64).max(self.tick);
            self.round_index += target - self.tick;
            self.tick = target;
        }
    }

    /// Jobs submitted by now enter the system.
    fn admit(&mut self) {
        let now = self.now();
        let before = self.active.len();
        while self.next_arrival < self.order.len()
            && self.jobs[self.order[self.next_arrival]].spec.submit_s <= now
        {
            self.active.push(self.order[self.next_arrival]);
            self.next_arrival += 1;
        }
        if self.active.len() > before {
            self.active.sort_unstable();
        }
    }

    /// The round the planner sees: only what a real agent would have
    /// measured of each job in the system; and this round's limits.
    fn build_round(&mut self) -> Limits {
        let (cfg, now) = (self.cfg, self.now());
        let mut round_jobs = Vec::with_capacity(self.active.len());
        for &i in &self.active {
            let j = &mut self.jobs[i];
            let oracle = if self.traits.needs_oracle {
                Some(j.oracle(&cfg.cluster))
            } else {
                None
            };
            let facts = JobFacts {
                spec: JobSpec {
                    min_gpus: if j.profile.is_some() {
                        j.spec.min_gpus
                    } else {
                        j.spec.min_gpus.max(j.spec.requested_gpus)
                    },
                    max_gpus: j.max_gpus,
                    ..j.spec.clone()
                },
                restart_penalty_s: None,
                min_runtime_s: None,
                limits: j.profile.map(|p| p.limits),
                features: None,
            };
            let state = JobState {
                progress: j.progress,
                epoch: j.epoch,
                attained_gpu_s: j.attained_gpu_s,
                age_s: now - j.spec.submit_s,
                restarts: j.restarts.unwrap_or(0),
                allocation: j.alloc.clone(),
                max_gpus_used: j.max_gpus_used,
                batch_size: j.batch(),
                local_bsz: j.local_bsz,
                accum_steps: j.accum_steps,
                // What the job's reports would say: its run time since its
                // checkpoint and what its restarts lost (not told under
                // the fixed charge).
                since_checkpoint_s: j
                    .ckpt
                    .filter(|_| cfg.restart_charge == RestartCost::Checkpoint)
                    .map(|c| c.since_s),
                lost_s: j
                    .ckpt
                    .filter(|_| cfg.restart_charge == RestartCost::Checkpoint)
                    .map(|c| c.lost_s),
                run_s: (!j.alloc.is_empty()).then_some(now - j.segment_start_s),
            };
            let mut rj = round_job(facts, state, &mut j.agent, oracle, &self.memo);
            if self.speeds.is_some() {
                rj.class = Some(gpuplan_core::PerfClass::of_app(&rj.app));
            }
            if let Some((key, facts)) = &j.coloc {
                // A rigid job's model is known: its pairs' measurements
                // (by key), how busy it keeps a GPU, and its memory.
                rj.colocation_key = Some(key.clone());
                rj.utilization = Some(facts.utilization);
                rj.mem_gib = facts.mem_gib;
            }
            round_jobs.push(rj);
        }
        self.round.now_s = now;
        self.round.jobs = round_jobs;
        let limits = Limits {
            time_limit_s: cfg.time_limit_s,
            gap: cfg.gap,
            threads: 1,
            seed: cfg
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(self.round_index),
            memory_limit_mb: cfg.memory_limit_mb,
        };
        self.round_index += 1;
        limits
    }

    /// Apply the decision as decided: the pipeline's diff (in round order,
    /// which is `active`'s) says which jobs change; a changed allocation
    /// restarts after a delay. Returns the restarts.
    fn apply(&mut self, decision: &Decision) -> u32 {
        let (cfg, now) = (self.cfg, self.now());
        let plan = &decision.plan;
        let mut restarts_now = 0;
        for (&i, change) in self.active.iter().zip(&decision.diff) {
            let j = &mut self.jobs[i];
            debug_assert_eq!(j.spec.id, change.job, "the diff follows the round's jobs");
            if matches!(change.change, Change::Keep | Change::Wait) {
                continue;
            }
            let new = plan.get(j.spec.id);
            if !j.alloc.is_empty() {
                j.lose_since_checkpoint();
                self.segments.push(Segment {
                    job: j.spec.id,
                    start_s: j.segment_start_s,
                    end_s: now,
                    nodes: j.alloc.per_node().into_iter().map(|(n, k)| (n.0, k)).collect(),
                });
            }
            j.segment_start_s = now;
            if new.is_empty() {
                j.alloc = new;
                j.shape.clear();
                j.rescale_left_s = 0.0;
                continue;
            }
            j.restarts = Some(j.restarts.map_or(0, |r| {
                restarts_now += 1;
                r + 1
            }));
            j.max_gpus_used = j.max_gpus_used.max(new.num_gpus());
            j.shape = new.shape();
            j.gpu_type = cfg.cluster.type_of(&new).cloned();
            j.speed = j
                .gpu_type
                .as_ref()
                .map_or(TypeSpeed::T4, |t| type_speed(t.as_str(), &j.spec.app));
            j.alloc = new;
            j.rescale_left_s = cfg.restart_delay_s;
            j.update_local_bsz(&self.memo);
        }
        restarts_now
    }

    /// The run's queues with `default` after them unless defined: the
    /// queues every per-queue figure is kept for, in a stable order.
    fn queue_list(&self) -> Vec<gpuplan_core::queue::Queue> {
        use gpuplan_core::queue::{Queue, DEFAULT_QUEUE};
        let mut qs = self.cfg.queues.clone();
        if !qs.is_empty() && !qs.iter().any(|q| q.name == DEFAULT_QUEUE) {
            qs.push(Queue::new(DEFAULT_QUEUE));
        }
        qs
    }

    /// Add this round's borrowed and short GPU-seconds per queue (until the
    /// next round, `interval_s` later): a queue borrows what it holds
    /// beyond its guarantee; while a queue beside it borrows, it is short by
    /// what its waiting jobs' minimums ask within its unused guarantee
    /// (min(guarantee − held, Σ min_gpus of its waiting jobs)): the demand
    /// the reclaim rule answers (docs/tenants.md).
    ///
    /// Returns each queue's GPUs held after the round, for the record.
    fn account_queues(&mut self) -> Vec<u32> {
        let qs = self.queue_list();
        let (jobs, active) = (&self.jobs, &self.active);
        let names: Vec<Option<&str>> = active.iter().map(|&i| jobs[i].spec.queue.as_deref()).collect();
        let Some(tree) =
            gpuplan_core::queue::QueueTree::from_queues(&qs, &names, self.cfg.cluster.total_gpus())
        else {
            return Vec::new();
        };
        let h = tree.holdings(|k| jobs[active[k]].alloc.num_gpus(), |_| false);
        let waiting = |k: usize| {
            let j = &jobs[active[k]];
            if j.alloc.is_empty() {
                j.spec.min_gpus.max(1)
            } else {
                0
            }
        };
        let demand = tree.holdings(waiting, |_| false).held;
        let dt = self.cfg.interval_s;
        self.queue_gpu_s.resize(tree.queues.len(), (0.0, 0.0));
        for (q, &want) in demand.iter().enumerate() {
            let g = tree.queues[q].guarantee;
            self.queue_gpu_s[q].0 += f64::from(h.held[q].saturating_sub(g)) * dt;
            let short = g.saturating_sub(h.held[q]).min(want);
            if short > 0
                && tree
                    .beside(q)
                    .iter()
                    .any(|&b| h.held[b] > tree.queues[b].guarantee)
            {
                self.queue_gpu_s[q].1 += f64::from(short) * dt;
            }
        }
        h.held
    }

    /// One round's record.
    fn record(&mut self, plan: &Plan, restarts: u32) {
        let queue_gpus = if self.cfg.queues.is_empty() {
            Vec::new()
        } else {
            self.account_queues()
        };
        let (jobs, active) = (&self.jobs, &self.active);
        self.planner_ms.push(plan.solve_ms);
        self.rounds.push(RoundRecord {
            time_s: self.now(),
            active: active.len(),
            running: active.iter().filter(|&&i| !jobs[i].alloc.is_empty()).count(),
            gpus_allocated: active.iter().map(|&i| jobs[i].alloc.num_gpus()).sum(),
            restarts,
            planner_ms: plan.solve_ms,
            status: plan.status,
            queue_gpus,
        });
        if self.cfg.round_log {
            self.log_round(plan);
        }
    }

    /// The round's line of the round log: every job in the system after the
    /// plan is applied, and those that finished in the last interval.
    fn log_round(&mut self, plan: &Plan) {
        use gpuplan_core::objective::{fair_share, job_value, power_mean, speedup};
        let round = &self.round;
        let fair = fair_share(round);
        let entry = |i: usize, done: bool| {
            let j = &self.jobs[i];
            let rj = round.jobs.iter().find(|r| r.id == j.spec.id);
            crate::LogJob {
                name: j.spec.name.clone(),
                gpus: j.alloc.num_gpus(),
                nodes: j.alloc.num_nodes(),
                allocation: j.alloc.gpus().iter().map(|g| g.node.0).collect(),
                batch_size: j.batch(),
                progress: j.progress,
                epoch: j.epoch,
                restarts: j.restarts.unwrap_or(0),
                done,
                goodput: if done { None } else { j.goodput() },
                speedup: rj.filter(|_| !done).map(|r| {
                    let a = &j.alloc;
                    speedup(r, round.cluster.type_of(a), a.num_nodes(), a.num_gpus(), fair)
                }),
            }
        };
        let mut jobs: Vec<crate::LogJob> = self.active.iter().map(|&i| entry(i, false)).collect();
        jobs.extend(self.retired.iter().map(|&i| entry(i, true)));
        // Pollux's fitness: values scaled by dominant share × nodes.
        let scale = round.cluster.nodes.len() as f64 / f64::from(round.cluster.total_gpus().max(1));
        let values: Vec<f64> = round
            .jobs
            .iter()
            .map(|r| job_value(r, &round.cluster, plan.gpus_of(r.id), fair, &round.params) * scale)
            .collect();
        self.round_log.push(crate::RoundLog {
            time: self.now(),
            jobs,
            fitness: (!values.is_empty()).then(|| power_mean(&values, round.params.p)),
        });
    }

    /// The run's results.
    fn finish(self, planner: &str, wall_s: f64) -> SimResult {
        let queued = !self.cfg.queues.is_empty();
        let results: Vec<JobResult> = self
            .jobs
            .iter()
            .map(|j| JobResult {
                id: j.spec.id,
                name: j.spec.name.clone(),
                app: j.spec.app.clone(),
                submit_s: j.spec.submit_s,
                completion_s: j.completion_s.unwrap_or(f64::NAN),
                jct_s: j.completion_s.unwrap_or(f64::NAN) - j.spec.submit_s,
                restarts: j.restarts.unwrap_or(0),
                attained_gpu_s: j.attained_gpu_s,
                max_gpus_used: j.max_gpus_used,
                queue: queued.then(|| {
                    j.spec
                        .queue
                        .clone()
                        .unwrap_or_else(|| gpuplan_core::queue::DEFAULT_QUEUE.to_string())
                }),
                lost_gpu_s: j.ckpt.map(|c| c.lost_gpu_s),
            })
            .collect();
        let list = self.queue_list();
        let queues = if queued {
            crate::metrics::queue_summaries(&list, &results, &self.queue_gpu_s)
        } else {
            Vec::new()
        };
        // Each round's holdings in the summaries' order (they leave out an
        // implicit `default` without jobs).
        let kept: Vec<usize> = queues
            .iter()
            .filter_map(|s| list.iter().position(|q| q.name == s.queue))
            .collect();
        let mut rounds = self.rounds;
        for x in rounds.iter_mut().filter(|x| !x.queue_gpus.is_empty()) {
            x.queue_gpus = kept
                .iter()
                .map(|&q| x.queue_gpus.get(q).copied().unwrap_or(0))
                .collect();
        }
        let mut r = SimResult::new(
            planner,
            self.cfg.cluster.total_gpus(),
            results,
            rounds,
            self.segments,
            self.planner_ms,
            wall_s,
        )
        .with_gpu_usage(self.gpu_use.gpus, self.gpu_use.double_counted_s);
        r.queues = queues;
        r.round_log = self.round_log;
        r
    }
}

/// The workload's jobs as the simulator tracks them, every job checked
/// first (a submit time, an application with a profile, a duration, a
/// size the cluster can hold).
fn sim_jobs<'a>(
    cfg: &SimConfig,
    profiles: &'a Profiles,
    specs: &[WorkloadJob],
    traits: &PlannerTraits,
) -> Result<Vec<SimJob<'a>>, SimError> {
    // A job runs on one GPU type, so the largest type bounds what it can
    // get, and under queues so do its queues' limits: core's one rule,
    // which the daemon applies to submissions.
    let total_gpus = largest_type_gpus(&cfg.cluster);
    let mut jobs: Vec<SimJob> = Vec::with_capacity(specs.len());
    let mut too_big = Vec::new();
    let mut over_queue = Vec::new();
    for job @ WorkloadJob { spec, work, .. } in specs {
        if !(spec.submit_s.is_finite() && spec.submit_s >= 0.0) {
            return Err(SimError::Invalid(format!(
                "job {}: submit time must be finite and >= 0, got {}",
                spec.name, spec.submit_s
            )));
        }
        if let Some(e) = job.checkpoint_interval_s.and_then(checkpoint_interval_problem) {
            return Err(SimError::Invalid(format!(
                "job {}: checkpoint_interval_s {e}",
                spec.name
            )));
        }
        let (profile, rigid_s, min_gpus) = match work {
            Work::Profiled => {
                let p = profiles.get(&spec.app).ok_or_else(|| {
                    SimError::Invalid(format!(
                        "job {}: unknown application '{}'; valid: {}",
                        spec.name,
                        spec.app,
                        profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))
                })?;
                (Some(p), 0.0, spec.min_gpus)
            }
            Work::Rigid { duration_s } => {
                if !(duration_s.is_finite() && *duration_s > 0.0) {
                    return Err(SimError::Invalid(format!(
                        "job {}: duration must be finite and > 0, got {duration_s}",
                        spec.name
                    )));
                }
                (None, *duration_s, spec.min_gpus.max(spec.requested_gpus))
            }
        };
        match gpuplan_core::never_fits(&cfg.cluster, min_gpus, spec.queue.as_deref(), &cfg.queues) {
            Some(gpuplan_core::NeverFits::LargestType { .. }) => {
                too_big.push(format!("{} ({min_gpus} GPUs)", spec.name));
            }
            Some(gpuplan_core::NeverFits::QueueLimit { queue, limit, .. }) => {
                over_queue.push(format!("{} ({min_gpus} GPUs, queue {queue}: {limit})", spec.name));
            }
            None => {}
        }
        // The artifact pins NCF to its tuned batch and one GPU for adaptive
        // policies; rigid jobs have no batch to adapt.
        let pinned_app = spec.app == "ncf" && profile.is_some();
        let ncf_pin = pinned_app && batch_adapts(traits, true);
        jobs.push(SimJob {
            spec: spec.clone(),
            profile,
            rigid_s,
            target: batch_target(
                traits,
                &WorkloadJob {
                    spec: spec.clone(),
                    work: *work,
                    model: None,
                    checkpoint_interval_s: None,
                },
            ),
            max_gpus: if ncf_pin { 1 } else { spec.max_gpus },
            alloc: Allocation::default(),
            shape: Vec::new(),
            local_bsz: 0,
            accum_steps: 0,
            progress: 0.0,
            epoch: 0,
            rescale_left_s: 0.0,
            attained_gpu_s: 0.0,
            restarts: None,
            max_gpus_used: 0,
            completion_s: None,
            agent: Agent::default(),
            segment_start_s: 0.0,
            oracle_steps: None,
            gpu_type: None,
            speed: TypeSpeed::T4,
            coloc: coloc_of(cfg, job),
            ckpt: job
                .checkpoint_interval_s
                .or(cfg.checkpoint_interval_s)
                .map(|every_s| Checkpoints {
                    every_s,
                    progress: 0.0,
                    epoch: 0,
                    since_s: 0.0,
                    lost_s: 0.0,
                    lost_gpu_s: 0.0,
                }),
        });
    }
    if !too_big.is_empty() {
        let n = too_big.len();
        too_big.truncate(10);
        return Err(SimError::Invalid(format!(
            "{n} job(s) need more GPUs than the cluster's {total_gpus} (of its largest GPU type; a job never mixes types): {}{}; shrink them to fit with --shrink-to-fit",
            too_big.join(", "),
            if n > 10 { ", ..." } else { "" }
        )));
    }
    if !over_queue.is_empty() {
        let n = over_queue.len();
        over_queue.truncate(10);
        return Err(SimError::Invalid(format!(
            "{n} job(s) need more GPUs than their queue may ever hold (its guarantee plus borrowing limit): {}{}",
            over_queue.join(", "),
            if n > 10 { ", ..." } else { "" }
        )));
    }
    Ok(jobs)
}

/// Per-GPU use over a run: a GPU held by several jobs counts once, its
/// busy time is the jobs' summed busy time capped at the time it was held.
struct GpuUse {
    /// First flat index of each node's GPUs.
    offset: Vec<usize>,
    gpus: Vec<GpuUsage>,
    /// GPU-seconds that jobs' `attained_gpu_s` count twice or more
    /// (each job on a shared GPU counts it): taken off the held total.
    double_counted_s: f64,
}

impl GpuUse {
    fn new(cluster: &Cluster) -> Self {
        let mut offset = Vec::with_capacity(cluster.nodes.len());
        let mut gpus = Vec::new();
        for (n, node) in cluster.nodes.iter().enumerate() {
            offset.push(gpus.len());
            gpus.extend((0..node.gpus).map(|g| GpuUsage {
                node: n as u32,
                gpu: g,
                ..Default::default()
            }));
        }
        GpuUse {
            offset,
            gpus,
            double_counted_s: 0.0,
        }
    }

    /// One interval: `used` aligned with `active`. Within an interval the
    /// cap applies to the sums (jobs' busy time is not resolved below it).
    fn add(&mut self, jobs: &[SimJob], active: &[usize], used: &[Usage]) {
        let allocs: Vec<&Allocation> = active.iter().map(|&i| &jobs[i].alloc).collect();
        let shared = shared_gpus(&allocs);
        for (g, holders) in &shared {
            let held = holders.iter().map(|&k| used[k].held_s).fold(0.0, f64::max);
            let sum: f64 = holders.iter().map(|&k| used[k].held_s).sum();
            let busy: f64 = holders.iter().map(|&k| used[k].busy_s).sum();
            self.double_counted_s += sum - held;
            if let Some(u) = self.at(*g) {
                u.held_s += held;
                u.shared_s += held;
                u.busy_s += busy.min(held);
            }
        }
        for (a, u) in allocs.iter().zip(used) {
            for g in a.gpus().iter().filter(|g| !shared.contains_key(g)) {
                if let Some(x) = self.at(*g) {
                    x.held_s += u.held_s;
                    x.busy_s += u.busy_s;
                }
            }
        }
    }

    fn at(&mut self, g: GpuId) -> Option<&mut GpuUsage> {
        if !g.is_bound() {
            return None;
        }
        let i = self.offset.get(g.node.0 as usize)? + g.index as usize;
        self.gpus.get_mut(i)
    }
}

/// The items at `sorted` (strictly increasing indices), each mutably.
fn pick_mut<'a, T>(items: &'a mut [T], sorted: &[usize]) -> Vec<&'a mut T> {
    let mut out = Vec::with_capacity(sorted.len());
    let mut rest = items;
    let mut base = 0;
    for &i in sorted {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(i - base);
        let (item, tail) = tail.split_first_mut().expect("index within the slice");
        out.push(item);
        rest = tail;
        base = i + 1;
    }
    out
}

/// Per-job slowdown (aligned with `active`): multi-node jobs on a node
/// shared by several of them.
fn slowdowns(jobs: &[SimJob], active: &[usize], cluster: &Cluster, slowdown: f64) -> Vec<f64> {
    if slowdown <= 0.0 {
        return vec![0.0; active.len()];
    }
    let mut multi = vec![0u32; cluster.num_nodes()];
    for j in active
        .iter()
        .map(|&i| &jobs[i])
        .filter(|j| j.alloc.num_nodes() > 1)
    {
        for (n, _) in j.alloc.per_node() {
            multi[n.0 as usize] += 1;
        }
    }
    active
        .iter()
        .map(|&i| {
            let j = &jobs[i];
            let hit =
                j.alloc.num_nodes() > 1 && j.alloc.per_node().iter().any(|(n, _)| multi[n.0 as usize] > 1);
            if hit {
                slowdown
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod scale_tests {
    use super::*;
    use gpuplan_core::JobId;

    fn rigid(id: u32, submit_s: f64, gpus: u32, duration_s: f64) -> WorkloadJob {
        WorkloadJob {
            spec: JobSpec {
                id: JobId(id),
                name: format!("r{id}"),
                app: "rigid".into(),
                submit_s,
                requested_gpus: gpus,
                batch_size: 1,
                min_gpus: gpus,
                max_gpus: gpus,
                preemptible: true,
                queue: None,
            },
            work: Work::Rigid { duration_s },
            model: None,
            checkpoint_interval_s: None,
        }
    }

    fn profiled(id: u32, submit_s: f64, app: &str, gpus: u32, batch: u32) -> WorkloadJob {
        WorkloadJob {
            spec: JobSpec {
                id: JobId(id),
                name: format!("p{id}"),
                app: app.into(),
                submit_s,
                requested_gpus: gpus,
                batch_size: batch,
                min_gpus: 1,
                max_gpus: 16,
                preemptible: true,
                queue: None,
            },
            work: Work::Profiled,
            model: None,
            checkpoint_interval_s: None,
        }
    }

    fn run(cfg: &SimConfig, jobs: &[WorkloadJob], policy: &str) -> SimResult {
        let profiles = crate::data::pollux_profiles().unwrap();
        let mut p = gpuplan_solve::registry::create(policy).unwrap();
        simulate_workload(cfg, &profiles, jobs, p.as_mut(), &mut |_, _| Control::Continue).unwrap()
    }

    /// A job never mixes GPU types, so one larger than every type is
    /// refused up front (not left queued until the 60-day limit).
    #[test]
    fn a_job_larger_than_every_gpu_type_is_refused() {
        let mut cluster: Cluster = "1x4:t4".parse().unwrap();
        cluster.nodes.extend("1x4:a100".parse::<Cluster>().unwrap().nodes);
        let cfg = SimConfig {
            cluster,
            ..Default::default()
        };
        let profiles = crate::data::pollux_profiles().unwrap();
        let mut p = gpuplan_solve::registry::create("fifo").unwrap();
        let e = simulate_workload(
            &cfg,
            &profiles,
            &[rigid(0, 0.0, 6, 10.0)],
            p.as_mut(),
            &mut |_, _| Control::Continue,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("r0 (6 GPUs)") && e.contains("largest GPU type"), "{e}");
        // Where the user allows it, the job is shrunk to 4 GPUs, keeping its
        // GPU-seconds (10 s on 6 GPUs → 15 s on 4), and the run completes.
        let mut jobs = vec![rigid(0, 0.0, 6, 10.0)];
        let notes = shrink_to_fit(&cfg.cluster, &mut jobs);
        assert_eq!(notes, ["r0 (6 → 4 GPUs)"]);
        assert_eq!(jobs[0].work, Work::Rigid { duration_s: 15.0 });
        assert_eq!((jobs[0].spec.requested_gpus, jobs[0].spec.max_gpus), (4, 4));
        let r = run(&cfg, &jobs, "fifo");
        assert_eq!(r.jobs[0].max_gpus_used, 4);
        assert_eq!(
            run(&cfg, &[rigid(0, 0.0, 4, 10.0)], "fifo").jobs[0].max_gpus_used,
            4
        );
    }

    /// A job larger than its queue may ever hold (guarantee plus borrowing
    /// limit) is refused up front too, by the rule the daemon shares.
    #[test]
    fn a_job_larger_than_its_queues_limit_is_refused() {
        let cfg = SimConfig {
            cluster: "2x4".parse().unwrap(),
            queues: vec![gpuplan_core::queue::Queue {
                guarantee: 2,
                borrow_limit: Some(2),
                ..gpuplan_core::queue::Queue::new("a")
            }],
            ..SimConfig::default()
        };
        let mut job = rigid(0, 0.0, 6, 10.0);
        job.spec.queue = Some("a".into());
        let profiles = crate::data::pollux_profiles().unwrap();
        let mut p = gpuplan_solve::registry::create("fifo").unwrap();
        let e = simulate_workload(&cfg, &profiles, &[job], p.as_mut(), &mut |_, _| Control::Continue)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("r0 (6 GPUs, queue a: 4)") && e.contains("borrowing limit"),
            "{e}"
        );
    }

    /// Under queues each round records what every queue holds, in the
    /// summaries' order: a's two 4-GPU jobs then b's one on 2x4, each
    /// queue guaranteed 4; the two queues' holdings add up to the GPUs
    /// allocated in every round, and b holds 4 once its job runs.
    #[test]
    fn rounds_record_each_queues_gpus() {
        let q = |name: &str| gpuplan_core::queue::Queue {
            guarantee: 4,
            ..gpuplan_core::queue::Queue::new(name)
        };
        let cfg = SimConfig {
            cluster: "2x4".parse().unwrap(),
            queues: vec![q("a"), q("b")],
            ..SimConfig::default()
        };
        let mut jobs = vec![
            rigid(0, 0.0, 4, 3000.0),
            rigid(1, 0.0, 4, 3000.0),
            rigid(2, 600.0, 4, 600.0),
        ];
        for (j, queue) in jobs.iter_mut().zip(["a", "a", "b"]) {
            j.spec.queue = Some(queue.into());
        }
        let r = run(&cfg, &jobs, "fifo");
        let names: Vec<&str> = r.queues.iter().map(|x| x.queue.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(r.queues[1].guarantee, 4);
        for x in &r.rounds {
            assert_eq!(x.queue_gpus.len(), 2, "{x:?}");
            assert_eq!(x.queue_gpus.iter().sum::<u32>(), x.gpus_allocated, "{x:?}");
        }
        assert!(
            r.rounds.iter().any(|x| x.queue_gpus == [4, 4]),
            "b's job ran beside one of a's"
        );
    }

    /// Checkpoints (issue 52): tiresias preempts a 20 h job past its
    /// 16 GPU-hour threshold for a new one at 17 h. Checkpointing every
    /// hour of run time, it loses the 3,510 s since its last checkpoint
    /// (it ran 61,110 s from 90 s), so it finishes exactly that much later
    /// than a job that checkpoints when stopped; and a minimum run time of
    /// a day keeps it running, so the new job waits for it.
    #[test]
    fn a_preempted_job_loses_the_work_since_its_checkpoint() {
        let mut cfg = SimConfig {
            cluster: "1x1".parse().unwrap(),
            ..SimConfig::default()
        };
        let jobs = [rigid(0, 0.0, 1, 20.0 * 3600.0), rigid(1, 61_200.0, 1, 1000.0)];
        let plain = run(&cfg, &jobs, "tiresias");
        assert_eq!(plain.jobs[0].restarts, 1, "preempted once");
        assert_eq!(plain.jobs[0].lost_gpu_s, None);
        assert_eq!(plain.summary.lost_gpu_h, None);
        cfg.checkpoint_interval_s = Some(3600.0);
        let ckpt = run(&cfg, &jobs, "tiresias");
        assert_eq!(ckpt.jobs[0].lost_gpu_s, Some(3510.0));
        assert_eq!(ckpt.jobs[1].lost_gpu_s, Some(0.0));
        assert!((ckpt.summary.lost_gpu_h.unwrap() - 3510.0 / 3600.0).abs() < 1e-12);
        let later = ckpt.jobs[0].completion_s - plain.jobs[0].completion_s;
        assert!((later - 3510.0).abs() < 60.0, "{later}");
        assert_eq!(ckpt.jobs[1].completion_s, plain.jobs[1].completion_s);
        // The workload's own interval wins over the run's.
        let mut own = jobs.clone();
        own[0].checkpoint_interval_s = Some(60.0);
        let r = run(&cfg, &own, "tiresias");
        assert_eq!(r.jobs[0].lost_gpu_s, Some(30.0), "61,110 s is 30 s past a minute");
        // Held by a minimum run time of a day: never preempted, nothing lost.
        cfg.params.min_runtime_s = 86_400.0;
        let held = run(&cfg, &jobs, "tiresias");
        assert_eq!(held.jobs[0].restarts, 0);
        assert_eq!(held.jobs[0].lost_gpu_s, Some(0.0));
        assert!(held.jobs[1].completion_s >= held.jobs[0].completion_s + 1000.0);
    }

    /// A rigid job alone runs its duration after the restart delay.
    #[test]
    fn rigid_job_runs_its_duration() {
        let cfg = SimConfig::default();
        let r = run(&cfg, &[rigid(0, 0.0, 4, 1000.0)], "fifo");
        let j = &r.jobs[0];
        // Starts at the first round (60 s), loses 30 s to the restart delay.
        assert_eq!(j.completion_s, 60.0 + 30.0 + 1000.0);
        assert_eq!(j.max_gpus_used, 4);
    }

    /// PM-First beats random placement where it obviously should: four
    /// 1-GPU jobs on one 8-GPU node whose GPUs 0-3 are median speed and 4-7
    /// 50% slower. PM-First puts every job on a fast GPU; random puts each
    /// on a slow one with probability 1/2 (all four fast: 1 in 70), and,
    /// placed afresh every round, also restarts jobs it moves.
    #[test]
    fn pm_first_beats_random_on_a_variable_cluster() {
        use crate::variability::{Measurements, Variability};
        let mut t = String::from("class,node,gpu,slowdown\n");
        for c in ["A", "B", "C", "D"] {
            for g in 0..8 {
                t += &format!("{c},n,{g},{}\n", if g < 4 { 1.0 } else { 1.5 });
            }
        }
        let mut cfg = SimConfig {
            cluster: "1x8".parse().unwrap(),
            variability: Some(Variability {
                measurements: Measurements::parse("t", &t).unwrap(),
                cross_node_factor: 1.7,
                draw: Default::default(),
            }),
            ..Default::default()
        };
        let jobs: Vec<WorkloadJob> = (0..4).map(|i| rigid(i, 0.0, 1, 3600.0)).collect();
        let avg = |cfg: &SimConfig| {
            let r = run(cfg, &jobs, "fifo");
            r.jobs.iter().map(|j| j.jct_s).sum::<f64>() / r.jobs.len() as f64
        };
        cfg.params.placement = gpuplan_core::Placement::PmFirst;
        let pm = avg(&cfg);
        cfg.params.placement = gpuplan_core::Placement::Random;
        let random = avg(&cfg);
        assert!(pm < random, "pm-first {pm} vs random {random}");
        // Every job on a fast GPU from the start: one interval, the restart
        // delay, then 3,600 s of work.
        assert!((pm - (60.0 + 30.0 + 3600.0)).abs() < 1e-6, "{pm}");
    }

    /// Per-GPU variability: a rigid job runs at its slowest GPU's pace, and
    /// pays PAL's L on top when it spans nodes; all-median GPUs change nothing.
    #[test]
    fn variability_slows_a_job_to_its_slowest_gpu() {
        use crate::variability::{Measurements, Variability};
        let table = |slow: f64| {
            let mut t = String::from("class,node,gpu,slowdown\n");
            for c in ["A", "B", "C", "D"] {
                t += &format!("{c},n,0,1.0\n{c},n,1,1.0\n{c},n,2,1.0\n{c},n,3,{slow}\n");
            }
            Measurements::parse("t", &t).unwrap()
        };
        let mut cfg = SimConfig {
            cluster: "2x4".parse().unwrap(),
            ..Default::default()
        };
        let plain = run(&cfg, &[rigid(0, 0.0, 4, 1000.0)], "fifo");
        cfg.variability = Some(Variability {
            measurements: table(1.0),
            cross_node_factor: 1.0,
            draw: Default::default(),
        });
        assert_eq!(run(&cfg, &[rigid(0, 0.0, 4, 1000.0)], "fifo").jobs, plain.jobs);
        // GPU 3 of every node is 25% slower: a 4-GPU job holds one.
        cfg.variability = Some(Variability {
            measurements: table(1.25),
            cross_node_factor: 1.7,
            draw: Default::default(),
        });
        let j = &run(&cfg, &[rigid(0, 0.0, 4, 1000.0)], "fifo").jobs[0];
        assert!(
            (j.completion_s - (60.0 + 30.0 + 1250.0)).abs() < 1e-6,
            "{}",
            j.completion_s
        );
        // Across two nodes: 1.25 × L.
        let j = &run(&cfg, &[rigid(0, 0.0, 8, 1000.0)], "fifo").jobs[0];
        let want = 60.0 + 30.0 + 1000.0 * 1.25 * 1.7;
        assert!(
            (j.completion_s - want).abs() < 1e-6,
            "{} vs {want}",
            j.completion_s
        );
    }

    /// The type-speed table is the ground truth: a 1-GPU cifar10 job at a
    /// fixed batch (tiresias) runs on one GPU, so its training time scales
    /// nearly by the compute multiplier (0.292 on an A100, 0.560 on an
    /// RTX 2080 Ti; the profile's one-GPU steps hold a little sync time,
    /// which the RTX's PCIe leaves as it is); a rigid job takes its
    /// duration on any type.
    #[test]
    fn each_gpu_type_runs_at_its_table_speed() {
        let at = |shape: &str, job: WorkloadJob| {
            let cfg = SimConfig {
                cluster: shape.parse().unwrap(),
                ..Default::default()
            };
            let j = run(&cfg, &[job], "tiresias").jobs[0].clone();
            // Starts at the first round (60 s) and loses the 30 s restart delay.
            j.completion_s - 90.0
        };
        let t4 = at("1x1:t4", profiled(0, 0.0, "cifar10", 1, 128));
        for (ty, f) in [("a100", 0.292), ("rtx2080ti", 0.560)] {
            let t = at(&format!("1x1:{ty}"), profiled(0, 0.0, "cifar10", 1, 128));
            // Progress moves in whole epochs, each rounded to the second.
            assert!(
                t / t4 >= f - 0.01 && t / t4 < f + 0.03,
                "{ty}: {t} s vs t4 {t4} s"
            );
        }
        assert_eq!(at("1x4:a100", rigid(0, 0.0, 4, 1000.0)), 1000.0);
    }

    /// Skipping idle time gives the same jobs and segments as running every
    /// round, for a workload with long gaps and both kinds of job.
    #[test]
    fn idle_skipping_equals_full_rounds() {
        let jobs = vec![
            rigid(0, 10.0, 2, 500.0),
            profiled(1, 35.0, "bert", 2, 48),
            rigid(2, 20_000.0, 8, 3000.0),
            rigid(3, 20_030.0, 1, 100.0),
            profiled(4, 40_000.5, "bert", 4, 96),
            rigid(5, 40_000.5, 64, 900.0),
        ];
        for policy in ["tiresias", "greedy", "fifo"] {
            let mut cfg = SimConfig {
                interval_s: 37.5,
                ..Default::default()
            };
            cfg.idle_rounds = IdleRounds::Run;
            let full = run(&cfg, &jobs, policy);
            cfg.idle_rounds = IdleRounds::Skip;
            let skip = run(&cfg, &jobs, policy);
            assert_eq!(full.jobs, skip.jobs, "{policy}");
            assert_eq!(full.segments, skip.segments, "{policy}");
            assert_eq!(full.summary.avg_jct_s, skip.summary.avg_jct_s, "{policy}");
            // And skipping did skip: far fewer rounds were simulated.
            assert!(
                skip.rounds.len() * 2 < full.rounds.len(),
                "{policy}: {} vs {}",
                skip.rounds.len(),
                full.rounds.len()
            );
        }
    }

    /// `--sharing` end to end: two 1-GPU jobs on one T4 under pollux-mip
    /// with p = 1 share it from the first round (2 / f(2) = 1.06 > 1), run
    /// at the ground truth's slowdown, and the GPU is counted once.
    #[test]
    fn shared_jobs_run_at_the_true_slowdown_and_the_gpu_counts_once() {
        let mut cfg = SimConfig {
            cluster: "1x1".parse().unwrap(),
            ..Default::default()
        };
        cfg.params.p = 1.0;
        let mut jobs = vec![rigid(0, 0.0, 1, 1000.0), rigid(1, 0.0, 1, 1000.0)];
        for j in &mut jobs {
            // A known application: its memory (4 GiB) lets the pair fit a T4.
            j.spec.app = "cifar10".into();
        }
        let alone = run(&cfg, &jobs, "pollux-mip");
        assert_eq!(alone.summary.gpu_shared, 0.0);
        cfg.params.sharing = 2;
        let r = run(&cfg, &jobs, "pollux-mip");
        // Rigid jobs count as fully busy: f(1 + 1) from the shipped curve.
        let f = gpuplan_core::colocation::GAVEL_CURVE.slowdown(2.0);
        for j in &r.jobs {
            let want = 60.0 + 30.0 + 1000.0 * f;
            assert!(
                (j.completion_s - want).abs() < 1e-6,
                "{} vs {want}",
                j.completion_s
            );
        }
        let g = r.gpus[0];
        assert!((g.shared_s - g.held_s).abs() < 1e-6 && g.held_s > 1000.0, "{g:?}");
        // Busy: two fully busy jobs (2 × 1,888 s) capped at the time held
        // (the cap is per interval, so the restart delays hide under it).
        assert!((g.busy_s - g.held_s).abs() < 1e-6, "{g:?}");
        let s = &r.summary;
        assert!(
            (s.gpu_utilization - g.held_s / s.makespan_s).abs() < 1e-9,
            "{s:?}"
        );
        assert!(
            s.gpu_utilization <= 1.0 && s.gpu_busy <= s.gpu_utilization,
            "{s:?}"
        );
        // The run's ground truth, not the planner's curve, sets the pace.
        let truth = gpuplan_core::colocation::SlowdownCurve {
            knee: 0.0,
            base: 1.25,
            slope: 0.0,
        };
        cfg.colocation = Some(gpuplan_core::colocation::Colocation::new(truth, Vec::new()));
        for j in &run(&cfg, &jobs, "pollux-mip").jobs {
            assert!((j.completion_s - (60.0 + 30.0 + 1250.0)).abs() < 1e-6, "{j:?}");
        }
    }

    #[test]
    fn pick_mut_gives_each_listed_item_once() {
        let mut v: Vec<u32> = (0..8).collect();
        for x in pick_mut(&mut v, &[0, 3, 4, 7]) {
            *x += 100;
        }
        assert_eq!(v, [100, 1, 2, 103, 104, 5, 6, 107]);
        assert!(pick_mut(&mut v, &[]).is_empty());
    }

    #[test]
    fn jobs_larger_than_the_cluster_are_an_error() {
        let profiles = crate::data::pollux_profiles().unwrap();
        let mut p = gpuplan_solve::registry::create("fifo").unwrap();
        let e = simulate_workload(
            &SimConfig::default(),
            &profiles,
            &[rigid(0, 0.0, 128, 10.0)],
            p.as_mut(),
            &mut |_, _| Control::Continue,
        )
        .unwrap_err();
        assert!(e.to_string().contains("r0 (128 GPUs)"), "{e}");
    }
}
