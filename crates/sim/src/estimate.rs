//! When will a job start and finish? The planner that will decide, run
//! forward from a snapshot of the cluster (issue 53; docs/estimates.md).
//!
//! A [`Snapshot`] is one round as a driver would plan it (the daemon's
//! live state, or a simulated round) plus each job's remaining work
//! ([`RemainingWork`]: declared, predicted from history by
//! [`predict_work`], or unknown). [`estimate`] then simulates forward
//! round by round: each round goes through [`gpuplan_solve::run_round`],
//! the one pipeline every driver uses, with a fresh planner of the same
//! name; each running job advances by its fitted model's goodput on its
//! allocation (progress per second = goodput ÷ the model's initial batch,
//! the simulator's own rate), a changed allocation serves the restart
//! delay first, and a job leaves when its remaining work is done. No job
//! arrives: the future holds only the jobs the snapshot knows.
//!
//! Each job's range comes from two more runs with every job's remaining
//! work at the low and at the high end of its uncertainty. The whole
//! estimate stops at its wall-clock budget ([`EstimateConfig::budget_s`])
//! and says how far it got ([`Estimates::reached_s`], [`Estimates::cut_short`]).
//! [`what_if`] runs it with one job added, and reports the new job's
//! estimate and the largest delay it causes any other job.

use std::collections::BTreeMap;

use gpuplan_core::{Allocation, GoodputModel, JobId, Round, RoundJob, TypedModel};
use gpuplan_solve::{run_round, Change, Limits, PlanError, Planner, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// Where a job's remaining work comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkSource {
    /// The job declared its total (`total_progress`), in the units of its progress.
    Declared,
    /// Predicted from finished jobs like it ([`predict_work`]).
    History,
    /// Nothing like it has finished: a wide range from all finished jobs.
    Unknown,
}

/// The unit remaining work is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkUnit {
    /// The job's own progress (what it reports; scale-invariant iterations
    /// for a job with a goodput model, seconds at its requested GPUs for
    /// one without).
    Progress,
    /// GPU-seconds at its requested size: turned into progress at the
    /// start of an estimate by the job's rate on its requested GPUs. What
    /// an unknown job's range is counted in, as jobs of different
    /// applications count progress in different units.
    GpuSeconds,
}

/// A job's remaining work: expected, and the low and high ends of its
/// uncertainty (equal for declared work).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RemainingWork {
    /// Expected work left.
    pub expected: f64,
    /// Low end of the work left.
    pub lo: f64,
    /// High end of the work left.
    pub hi: f64,
    /// What the three count.
    pub unit: WorkUnit,
    /// Where they come from.
    pub source: WorkSource,
}

impl RemainingWork {
    /// A declared total: `total − progress` left, no uncertainty.
    pub fn declared(total: f64, progress: f64) -> Self {
        let left = (total - progress).max(0.0);
        RemainingWork {
            expected: left,
            lo: left,
            hi: left,
            unit: WorkUnit::Progress,
            source: WorkSource::Declared,
        }
    }

    /// A history prediction ([`predict_work`]) less what the job has done:
    /// its progress, or its attained GPU-seconds for a prediction in
    /// GPU-seconds. A job already past a predicted end has a little left
    /// (one percent of the prediction): it has not finished yet.
    pub fn predicted(p: &WorkPrediction, progress: f64, attained_gpu_s: f64) -> Self {
        let done = match p.unit {
            WorkUnit::Progress => progress,
            WorkUnit::GpuSeconds => attained_gpu_s,
        };
        let left = |x: f64| (x - done).max(0.01 * x).max(0.0);
        let (lo, expected, hi) = (left(p.lo), left(p.expected), left(p.hi));
        RemainingWork {
            expected,
            lo: lo.min(expected),
            hi: hi.max(expected),
            unit: p.unit,
            source: p.source,
        }
    }
}

/// What the estimate needs to know of one job beside the round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JobWork {
    /// The work it has left.
    pub remaining: RemainingWork,
    /// Whether its batch adapts under a goodput planner (the driver's rule:
    /// the daemon's `max_batch_size > batch_size`, the simulator's
    /// [`crate::batch_target`]); it then runs at the goodput-optimal batch,
    /// else at its own batch size.
    pub batch_grows: bool,
    /// Seconds of restart delay its current allocation still has to serve
    /// at the snapshot (0: none).
    pub restart_left_s: f64,
}

impl JobWork {
    /// A job with this work left, whose batch may grow, serving no restart.
    pub fn new(remaining: RemainingWork) -> Self {
        JobWork {
            remaining,
            batch_grows: true,
            restart_left_s: 0.0,
        }
    }
}

/// The state an estimate starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The round as the driver would plan it now: cluster, jobs (fitted
    /// models, progress, allocations), params, queues; `now_s` on the
    /// driver's clock.
    pub round: Round,
    /// Each job's work, in `round.jobs`' order.
    pub work: Vec<JobWork>,
    /// When the next round is planned (the daemon's next tick); absent:
    /// at `round.now_s`. Until then running jobs run on as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_round_s: Option<f64>,
    /// Models fitted earlier for jobs of each application (the last one
    /// the driver saw, finished jobs' included): the rate of a job with no
    /// model of its own when no job of the round of its application has
    /// one. Without any, such a job progresses one unit per second at its
    /// requested size.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub app_models: BTreeMap<String, AppModel>,
}

/// A model fitted for a job of an application, and the GPU type it was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppModel {
    /// The fitted goodput model.
    pub model: GoodputModel,
    /// The type it was fitted on; absent: it holds for every type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<gpuplan_core::GpuType>,
}

impl Snapshot {
    /// A snapshot of `round` with each job's work, planned next at
    /// `round.now_s`, with no earlier models.
    pub fn new(round: Round, work: Vec<JobWork>) -> Self {
        Snapshot {
            round,
            work,
            next_round_s: None,
            app_models: BTreeMap::new(),
        }
    }
}

/// Which jobs an estimate must follow to the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Targets {
    /// Every job of the snapshot.
    All,
    /// These jobs: the forward run stops once they have finished.
    Jobs(Vec<JobId>),
}

/// How an estimate runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimateConfig {
    /// Seconds between rounds (the daemon's `--interval`, the simulator's).
    pub interval_s: f64,
    /// Seconds a job makes no progress after its allocation changes.
    pub restart_delay_s: f64,
    /// Wall-clock seconds the whole estimate (all its runs) may take.
    pub budget_s: f64,
    /// Most rounds one forward run simulates (a count, for tests that must
    /// not depend on the machine's speed); `u64::MAX`: no limit.
    pub max_rounds: u64,
    /// Simulated seconds past the snapshot after which a job not yet
    /// started or finished is reported as beyond the horizon.
    pub horizon_s: f64,
    /// Each simulated round's planner limits; the time limit is cut to the
    /// budget left.
    pub limits: Limits,
    /// The jobs to follow; the run stops once they are done.
    pub targets: Targets,
    /// Also run the low and high ends of every job's remaining work for
    /// the ranges (skipped when no job's work is uncertain and
    /// `rate_spread` is 0).
    pub ranges: bool,
    /// How far the fitted models' rates may be off, as a fraction: the low
    /// run takes every job's rate × (1 + this), the high run × (1 − this).
    /// A declared total still leaves this uncertainty (the gradient noise
    /// moves the rate as training goes on).
    pub rate_spread: f64,
    /// After a round whose plan changes nothing, keep that plan for up to
    /// this many rounds without planning, unless a job finishes (0: plan
    /// every round, as the live loop does). Trades accuracy for planner
    /// time on long horizons.
    pub skip_steady_rounds: u32,
}

impl Default for EstimateConfig {
    fn default() -> Self {
        EstimateConfig {
            interval_s: 60.0,
            restart_delay_s: 30.0,
            budget_s: 5.0,
            max_rounds: u64::MAX,
            horizon_s: 30.0 * 86400.0,
            limits: Limits {
                time_limit_s: 1.0,
                ..Limits::default()
            },
            targets: Targets::All,
            ranges: true,
            rate_spread: 0.1,
            skip_steady_rounds: 0,
        }
    }
}

/// A low and a high time; `None`: beyond what the runs reached.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Span {
    /// The earliest of the runs.
    pub lo: Option<f64>,
    /// The latest of the runs; `None` if any run did not reach it.
    pub hi: Option<f64>,
}

/// One job's estimate. Times are absolute seconds on the snapshot's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEstimate {
    /// The job.
    pub id: JobId,
    /// Its name.
    pub name: String,
    /// Whether it holds GPUs at the snapshot (then it has no start to wait for).
    pub running: bool,
    /// Expected start: the round whose plan first gives it GPUs. `None`
    /// when it is running, or its start lies beyond what the run reached.
    pub start_s: Option<f64>,
    /// Expected finish; `None` beyond what the run reached.
    pub finish_s: Option<f64>,
    /// Start over the low/expected/high runs.
    pub start_range: Span,
    /// Finish over the low/expected/high runs.
    pub finish_range: Span,
    /// Where its remaining work came from.
    pub source: WorkSource,
    /// Whether the budget (time or rounds) ran out before the expected run
    /// reached its finish (else a missing time lies beyond the horizon, or
    /// the job can never run: nothing else was left running).
    pub cut_short: bool,
}

/// Every followed job's estimate, and how far the runs got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimates {
    /// The planner that decided the simulated rounds.
    pub planner: String,
    /// The snapshot's time.
    pub now_s: f64,
    /// Each job of the snapshot, in its order.
    pub jobs: Vec<JobEstimate>,
    /// Simulated time the expected run reached.
    pub reached_s: f64,
    /// Rounds the three runs simulated together.
    pub rounds: u64,
    /// Whether any run stopped at the budget.
    pub cut_short: bool,
    /// Wall-clock seconds the estimate took.
    pub wall_s: f64,
}

impl Estimates {
    /// The estimate of this job.
    pub fn job(&self, id: JobId) -> Option<&JobEstimate> {
        self.jobs.iter().find(|j| j.id == id)
    }
}

/// The largest delay one added job causes another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delay {
    /// The job delayed.
    pub job: JobId,
    /// Its name.
    pub name: String,
    /// How much later it starts (0 for a running job); `None`: it started
    /// within the run before, and not after.
    pub start_s: Option<f64>,
    /// How much later it finishes; `None`: it finished within the run
    /// before, and not after.
    pub finish_s: Option<f64>,
}

/// A job not submitted: its estimate, and what it does to the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    /// The added job's estimate.
    pub job: JobEstimate,
    /// The others as they are.
    pub before: Estimates,
    /// Everyone with the job added.
    pub after: Estimates,
    /// The job it delays most (by finish, else start; a delay past the
    /// run counts as the largest); `None`: it delays no one.
    pub largest_delay: Option<Delay>,
}

/// The forward simulation of one job.
struct Fwd {
    /// Work left, in progress units.
    left: f64,
    /// The model its rate comes from: its own, else another job's of the
    /// same application (what its agent would fit once it runs).
    rate_model: Option<(GoodputModel, Option<gpuplan_core::GpuType>, Vec<TypedModel>)>,
    batch_grows: bool,
    restart_left_s: f64,
    started_s: Option<f64>,
    finished_s: Option<f64>,
    ever_ran: bool,
    /// Held GPUs at the snapshot: it has no start to wait for.
    running_at_snapshot: bool,
    /// Its rate's factor in this run (the rate spread).
    speed: f64,
}

/// How one forward run ended.
struct RunOut {
    start: Vec<Option<f64>>,
    finish: Vec<Option<f64>>,
    reached_s: f64,
    rounds: u64,
    cut_short: bool,
}

/// Which end of the remaining work a run takes.
#[derive(Clone, Copy)]
enum End {
    Lo,
    Expected,
    Hi,
}

/// Estimate the start and finish of every job of the snapshot under the
/// registered planner `planner` (a fresh one per run: the estimate never
/// touches a live planner's state).
pub fn estimate(snapshot: &Snapshot, planner: &str, cfg: &EstimateConfig) -> Result<Estimates, SimError> {
    gpuplan_solve::registry::entry(planner)?;
    estimate_with(snapshot, &mut || gpuplan_solve::registry::create(planner), cfg)
}

/// [`estimate`] with planners made by `make` (one per forward run).
pub fn estimate_with(
    snapshot: &Snapshot,
    make: &mut dyn FnMut() -> Result<Box<dyn Planner>, PlanError>,
    cfg: &EstimateConfig,
) -> Result<Estimates, SimError> {
    check(snapshot, cfg)?;
    let wall = web_time::Instant::now();
    let deadline = |share: f64| cfg.budget_s * share;
    let uncertain = snapshot
        .work
        .iter()
        .any(|w| w.remaining.lo < w.remaining.expected || w.remaining.hi > w.remaining.expected);
    let ranges = cfg.ranges && (uncertain || cfg.rate_spread > 0.0);
    let mut planner = make()?;
    let name = planner.name().to_string();
    let first = deadline(if ranges { 0.5 } else { 1.0 });
    let exp = forward(snapshot, planner.as_mut(), cfg, End::Expected, &wall, first)?;
    let (mut lo, mut hi) = (None, None);
    if ranges {
        let mut p = make()?;
        lo = Some(forward(
            snapshot,
            p.as_mut(),
            cfg,
            End::Lo,
            &wall,
            deadline(0.75),
        )?);
        let mut p = make()?;
        hi = Some(forward(snapshot, p.as_mut(), cfg, End::Hi, &wall, deadline(1.0))?);
    }
    let span = |i: usize, pick: &dyn Fn(&RunOut) -> Vec<Option<f64>>| -> Span {
        let runs: Vec<Option<f64>> = [Some(&exp), lo.as_ref(), hi.as_ref()]
            .into_iter()
            .flatten()
            .map(|r| pick(r)[i])
            .collect();
        Span {
            lo: runs.iter().flatten().copied().reduce(f64::min),
            hi: if runs.iter().all(Option::is_some) {
                runs.iter().flatten().copied().reduce(f64::max)
            } else {
                None
            },
        }
    };
    let jobs = snapshot
        .round
        .jobs
        .iter()
        .zip(&snapshot.work)
        .enumerate()
        .map(|(i, (j, w))| JobEstimate {
            id: j.id,
            name: j.name.clone(),
            running: !j.state.allocation.is_empty(),
            start_s: exp.start[i],
            finish_s: exp.finish[i],
            start_range: span(i, &|r| r.start.clone()),
            finish_range: span(i, &|r| r.finish.clone()),
            source: w.remaining.source,
            cut_short: exp.cut_short && exp.finish[i].is_none(),
        })
        .collect();
    let runs = [Some(&exp), lo.as_ref(), hi.as_ref()];
    Ok(Estimates {
        planner: name,
        now_s: snapshot.round.now_s,
        jobs,
        reached_s: exp.reached_s,
        rounds: runs.iter().flatten().map(|r| r.rounds).sum(),
        cut_short: runs.iter().flatten().any(|r| r.cut_short),
        wall_s: wall.elapsed().as_secs_f64(),
    })
}

/// What submitting `job` (with its work) would do: its estimate, and the
/// largest delay it causes any job of the snapshot. Nothing in the
/// snapshot changes; `job.id` must not be one of its jobs'. Both runs
/// follow every job, each with half the budget.
pub fn what_if(
    snapshot: &Snapshot,
    job: RoundJob,
    work: JobWork,
    planner: &str,
    cfg: &EstimateConfig,
) -> Result<WhatIf, SimError> {
    gpuplan_solve::registry::entry(planner)?;
    what_if_with(
        snapshot,
        job,
        work,
        &mut || gpuplan_solve::registry::create(planner),
        cfg,
    )
}

/// [`what_if`] with planners made by `make` (one per forward run).
pub fn what_if_with(
    snapshot: &Snapshot,
    job: RoundJob,
    work: JobWork,
    make: &mut dyn FnMut() -> Result<Box<dyn Planner>, PlanError>,
    cfg: &EstimateConfig,
) -> Result<WhatIf, SimError> {
    if snapshot.round.jobs.iter().any(|j| j.id == job.id) {
        return Err(SimError::Invalid(format!(
            "what-if: job id {} is already in the snapshot",
            job.id.0
        )));
    }
    let half = EstimateConfig {
        budget_s: cfg.budget_s / 2.0,
        targets: Targets::All,
        ..cfg.clone()
    };
    let before = estimate_with(snapshot, make, &half)?;
    let mut with = snapshot.clone();
    let id = job.id;
    with.round.jobs.push(job);
    with.work.push(work);
    let after = estimate_with(&with, make, &half)?;
    let added = after
        .job(id)
        .cloned()
        .ok_or_else(|| SimError::Invalid("what-if: the added job has no estimate".into()))?;
    let largest_delay = largest_delay(&before, &after);
    Ok(WhatIf {
        job: added,
        before,
        after,
        largest_delay,
    })
}

/// The job of `before` that `after` delays most: by finish, else start; a
/// time reached before and not after counts as an unbounded delay.
fn largest_delay(before: &Estimates, after: &Estimates) -> Option<Delay> {
    let diff = |b: Option<f64>, a: Option<f64>| -> Option<Option<f64>> {
        match (b, a) {
            (Some(b), Some(a)) => Some(Some((a - b).max(0.0))),
            (Some(_), None) => Some(None),
            _ => None,
        }
    };
    let key = |d: Option<Option<f64>>| match d {
        Some(None) => f64::INFINITY,
        Some(Some(x)) => x,
        None => 0.0,
    };
    let mut best: Option<(f64, Delay)> = None;
    for b in &before.jobs {
        let Some(a) = after.job(b.id) else { continue };
        let start = if b.running {
            Some(Some(0.0))
        } else {
            diff(b.start_s, a.start_s)
        };
        let finish = diff(b.finish_s, a.finish_s);
        let k = key(finish).max(key(start));
        if k > 0.0 && best.as_ref().is_none_or(|(bk, _)| k > *bk) {
            best = Some((
                k,
                Delay {
                    job: b.id,
                    name: b.name.clone(),
                    start_s: start.flatten(),
                    finish_s: finish.flatten(),
                },
            ));
        }
    }
    best.map(|(_, d)| d)
}

fn check(snapshot: &Snapshot, cfg: &EstimateConfig) -> Result<(), SimError> {
    let mut errs = Vec::new();
    if snapshot.work.len() != snapshot.round.jobs.len() {
        errs.push(format!(
            "work: {} entries for {} jobs",
            snapshot.work.len(),
            snapshot.round.jobs.len()
        ));
    }
    if !(cfg.interval_s > 0.0 && cfg.interval_s.is_finite()) {
        errs.push(format!("interval_s: must be > 0, got {}", cfg.interval_s));
    }
    if cfg.restart_delay_s.is_nan() || cfg.restart_delay_s < 0.0 {
        errs.push(format!(
            "restart_delay_s: must be >= 0, got {}",
            cfg.restart_delay_s
        ));
    }
    if !(0.0..1.0).contains(&cfg.rate_spread) {
        errs.push(format!("rate_spread: must be in [0, 1), got {}", cfg.rate_spread));
    }
    if cfg.budget_s.is_nan() || cfg.budget_s < 0.0 {
        errs.push(format!("budget_s: must be >= 0, got {}", cfg.budget_s));
    }
    for (i, w) in snapshot.work.iter().enumerate() {
        let r = &w.remaining;
        let ok = r.lo.is_finite() && r.lo >= 0.0 && r.expected >= r.lo && r.hi >= r.expected;
        if !ok {
            errs.push(format!(
                "work[{i}]: remaining work must be 0 <= lo <= expected <= hi, lo finite, got {} / {} / {}",
                r.lo, r.expected, r.hi
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(SimError::Invalid(format!("estimate: {}", errs.join("; "))))
    }
}

/// The job's progress per second on `alloc`: its model's goodput (at the
/// goodput-optimal batch where its batch grows under this planner, else at
/// its batch size) ÷ the model's initial batch, the simulator's rate; with
/// no model, GPUs ÷ requested GPUs (progress in seconds at the requested
/// size, the simulator's rigid jobs). Slowed by the round's per-GPU
/// variability.
fn rate(round: &Round, job: &RoundJob, f: &Fwd, traits: &PlannerTraits, alloc: &Allocation) -> f64 {
    let gpus = alloc.num_gpus();
    if gpus == 0 {
        return 0.0;
    }
    let nodes = alloc.num_nodes().max(1);
    let factor = round.variability_factor(job, alloc).max(1e-9);
    let Some((m, t, typed)) = &f.rate_model else {
        return f64::from(gpus) / f64::from(job.requested_gpus.max(1)) / factor;
    };
    let with = RoundJob {
        model: Some(*m),
        model_type: t.clone(),
        type_models: typed.clone(),
        ..RoundJob::new(job.id, job.name.clone(), job.app.clone())
    };
    let Some(m) = with.model_on(round.cluster.type_of(alloc)) else {
        return 0.0;
    };
    let choice = if gpuplan_solve::batch_adapts(traits, f.batch_grows) {
        m.optimize(nodes, gpus)
    } else {
        m.at_batch(nodes, gpus, f64::from(job.batch_size.max(1)))
    };
    choice.map_or(0.0, |c| {
        c.goodput / f64::from(m.limits.init_batch.max(1)) / factor
    })
}

/// The model a job's rate comes from: its own; else the model of another
/// job of the same application that has one (the most progressed); else
/// the snapshot's earlier model of its application.
fn rate_model(
    snapshot: &Snapshot,
    round: &Round,
    i: usize,
) -> Option<(GoodputModel, Option<gpuplan_core::GpuType>, Vec<TypedModel>)> {
    let of = |j: &RoundJob| j.model.map(|m| (m, j.model_type.clone(), j.type_models.clone()));
    let job = &round.jobs[i];
    of(job)
        .or_else(|| {
            round
                .jobs
                .iter()
                .filter(|o| o.app == job.app && o.model.is_some())
                .max_by(|a, b| a.state.progress.total_cmp(&b.state.progress))
                .and_then(of)
        })
        .or_else(|| {
            snapshot
                .app_models
                .get(&job.app)
                .map(|m| (m.model, m.model_type.clone(), Vec::new()))
        })
}

/// One forward run: rounds until the targets are done, the horizon, the
/// round count or `until_s` of the budget (seconds since `wall`).
fn forward(
    snapshot: &Snapshot,
    planner: &mut dyn Planner,
    cfg: &EstimateConfig,
    end: End,
    wall: &web_time::Instant,
    until_s: f64,
) -> Result<RunOut, SimError> {
    let traits = planner.traits();
    let mut round = snapshot.round.clone();
    let n = round.jobs.len();
    let mut fwd = start_state(snapshot, &round, cfg, end, &traits);
    let targets: Vec<bool> = round
        .jobs
        .iter()
        .map(|j| match &cfg.targets {
            Targets::All => true,
            Targets::Jobs(ids) => ids.contains(&j.id),
        })
        .collect();
    // `alive[k]`: snapshot index of the k-th job still in the round.
    let mut alive: Vec<usize> = (0..n).collect();
    let start_s = snapshot.round.now_s;
    let horizon = start_s + cfg.horizon_s;
    let mut now = start_s;
    let first = snapshot.next_round_s.unwrap_or(start_s).max(start_s);
    if first > now {
        advance(&mut round, &mut fwd, &mut alive, &traits, now, first - now);
        now = first;
    }
    let mut rounds = 0u64;
    let mut cut_short = false;
    let mut idle_rounds = 0;
    let mut skip_left = 0u32;
    loop {
        let open = alive.iter().any(|&i| targets[i]);
        if !open || now > horizon {
            break;
        }
        let spent = wall.elapsed().as_secs_f64();
        if spent >= until_s || rounds >= cfg.max_rounds {
            cut_short = true;
            break;
        }
        if skip_left > 0 {
            // A steady plan holds until a job finishes or the skips run out.
            skip_left -= 1;
            let before = alive.len();
            advance(&mut round, &mut fwd, &mut alive, &traits, now, cfg.interval_s);
            now += cfg.interval_s;
            if alive.len() < before {
                skip_left = 0;
            }
            continue;
        }
        round.now_s = now;
        let limits = Limits {
            time_limit_s: cfg.limits.time_limit_s.min((until_s - spent).max(0.01)),
            seed: cfg.limits.seed.wrapping_add(rounds),
            ..cfg.limits
        };
        let decision = match run_round(planner, &round, &limits) {
            Ok(d) => d,
            Err(PlanError::InvalidPlan { planner, violations }) => {
                let v: Vec<String> = violations.iter().map(ToString::to_string).collect();
                return Err(SimError::Invalid(format!(
                    "estimate: planner {planner} returned an invalid plan at t={now}: {}",
                    v.join("; ")
                )));
            }
            Err(e) => return Err(e.into()),
        };
        rounds += 1;
        let steady = decision
            .diff
            .iter()
            .all(|c| matches!(c.change, Change::Keep | Change::Wait));
        skip_left = if steady { cfg.skip_steady_rounds } else { 0 };
        apply(&mut round, &mut fwd, &alive, &decision, now, cfg.restart_delay_s);
        let running = round.jobs.iter().any(|j| !j.state.allocation.is_empty());
        // With nothing running and no arrivals, nothing changes any more:
        // a job still waiting can never start.
        idle_rounds = if running { 0 } else { idle_rounds + 1 };
        if idle_rounds >= 2 {
            break;
        }
        advance(&mut round, &mut fwd, &mut alive, &traits, now, cfg.interval_s);
        now += cfg.interval_s;
    }
    Ok(RunOut {
        start: fwd.iter().map(|f| f.started_s).collect(),
        finish: fwd.iter().map(|f| f.finished_s).collect(),
        reached_s: now,
        rounds,
        cut_short,
    })
}

/// Each job's state at the snapshot for one forward run: its work left at
/// `end` of its range (GPU-seconds turned into progress at its requested
/// size's rate), its rate model, its speed at that end of the spread.
fn start_state(
    snapshot: &Snapshot,
    round: &Round,
    cfg: &EstimateConfig,
    end: End,
    traits: &PlannerTraits,
) -> Vec<Fwd> {
    let n = round.jobs.len();
    let mut fwd: Vec<Fwd> = (0..n)
        .map(|i| {
            let w = &snapshot.work[i];
            let r = &w.remaining;
            let amount = match end {
                End::Lo => r.lo,
                End::Expected => r.expected,
                End::Hi => r.hi,
            };
            Fwd {
                left: amount,
                rate_model: rate_model(snapshot, round, i),
                batch_grows: w.batch_grows,
                restart_left_s: w.restart_left_s.max(0.0),
                started_s: None,
                finished_s: None,
                ever_ran: !round.jobs[i].state.allocation.is_empty()
                    || round.jobs[i].state.attained_gpu_s > 0.0,
                running_at_snapshot: !round.jobs[i].state.allocation.is_empty(),
                speed: match end {
                    End::Lo => 1.0 + cfg.rate_spread,
                    End::Expected => 1.0,
                    End::Hi => (1.0 - cfg.rate_spread).max(0.01),
                },
            }
        })
        .collect();
    // GPU-seconds at the requested size become progress at that size's rate.
    for (i, f) in fwd.iter_mut().enumerate() {
        if snapshot.work[i].remaining.unit == WorkUnit::GpuSeconds {
            let j = &round.jobs[i];
            let k = j.requested_gpus.clamp(j.min_gpus.max(1), j.max_gpus.max(1));
            let alloc = packed(round, k);
            let per_s = rate(round, j, f, traits, &alloc);
            if f.left.is_finite() && per_s > 0.0 {
                f.left = f.left / f64::from(k.max(1)) * per_s;
            }
        }
    }
    fwd
}

/// A round's decision applied to the forward run: each changed job gets
/// its new GPUs (its start, a restart and the restart delay counted; its
/// rate model shown to the planner once it has run) or waits.
fn apply(
    round: &mut Round,
    fwd: &mut [Fwd],
    alive: &[usize],
    decision: &gpuplan_solve::Decision,
    now: f64,
    restart_delay_s: f64,
) {
    for (k, change) in decision.diff.iter().enumerate() {
        let i = alive[k];
        let (j, f) = (&mut round.jobs[k], &mut fwd[i]);
        if matches!(change.change, Change::Keep | Change::Wait) {
            continue;
        }
        let new = decision.plan.get(j.id);
        if new.is_empty() {
            j.state.allocation = new;
            f.restart_left_s = 0.0;
            continue;
        }
        if f.started_s.is_none() && !f.running_at_snapshot {
            f.started_s = Some(now);
        }
        if f.ever_ran {
            j.state.restarts += 1;
        }
        f.ever_ran = true;
        // Once it has run, its agent has a model: the planner sees it.
        if j.model.is_none() {
            if let Some((m, t, typed)) = &f.rate_model {
                j.model = Some(*m);
                j.model_type = t.clone();
                j.type_models = typed.clone();
            }
        }
        j.state.max_gpus_used = j.state.max_gpus_used.max(new.num_gpus());
        j.state.allocation = new;
        f.restart_left_s = restart_delay_s;
    }
}

/// An allocation of `k` GPUs packed onto the cluster's first nodes (for a
/// job's rate at its requested size).
fn packed(round: &Round, k: u32) -> Allocation {
    let mut counts = Vec::new();
    let mut left = k;
    for (i, n) in round.cluster.nodes.iter().enumerate() {
        if left == 0 {
            break;
        }
        let take = n.gpus.min(left);
        if take > 0 {
            counts.push((gpuplan_core::NodeId(i as u32), take));
            left -= take;
        }
    }
    Allocation::from_counts(&counts)
}

/// Run every job in the round `dt` seconds from `now` on its allocation;
/// jobs that finish leave the round (and `alive`).
fn advance(
    round: &mut Round,
    fwd: &mut [Fwd],
    alive: &mut Vec<usize>,
    traits: &PlannerTraits,
    now: f64,
    dt: f64,
) {
    let rates: Vec<f64> = alive
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            fwd[i].speed
                * rate(
                    round,
                    &round.jobs[k],
                    &fwd[i],
                    traits,
                    &round.jobs[k].state.allocation,
                )
        })
        .collect();
    for (k, &i) in alive.iter().enumerate() {
        let (j, f) = (&mut round.jobs[k], &mut fwd[i]);
        j.state.age_s += dt;
        let gpus = f64::from(j.state.allocation.num_gpus());
        if gpus == 0.0 {
            continue;
        }
        let delay = f.restart_left_s.min(dt);
        f.restart_left_s -= delay;
        let run = dt - delay;
        let r = rates[k];
        if r > 0.0 && f.left <= r * run {
            let took = f.left / r;
            j.state.progress += f.left;
            f.left = 0.0;
            f.finished_s = Some(now + delay + took);
            j.state.attained_gpu_s += (delay + took) * gpus;
        } else {
            j.state.progress += r * run;
            f.left -= r * run;
            j.state.attained_gpu_s += dt * gpus;
        }
    }
    let mut k = 0;
    alive.retain(|&i| {
        let keep = fwd[i].finished_s.is_none();
        if keep {
            k += 1;
        } else {
            round.jobs.remove(k);
        }
        keep
    });
}

/// One finished job, as the history predictor reads it: what the journal
/// (or a simulation) keeps of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinishedJob {
    /// Its application.
    pub app: String,
    /// Its model name, where the submission gave one (a trace's model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its name.
    pub name: String,
    /// Its progress at the end, in the units it reported.
    pub total_progress: f64,
    /// Seconds from its first start to its finish.
    pub run_s: f64,
    /// GPU-seconds it held.
    pub gpu_s: f64,
}

/// Which rule matched a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatchRule {
    /// Finished jobs of the same application and model.
    AppModel,
    /// Finished jobs whose name has the same prefix (the name less its
    /// trailing digits and separators: `resnet-bs64-7` → `resnet-bs64`).
    NamePrefix,
    /// No match: every finished job's GPU-seconds.
    All,
    /// No finished job at all.
    None,
}

/// A job's predicted total work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkPrediction {
    /// History for a match, Unknown otherwise.
    pub source: WorkSource,
    /// The rule that matched.
    pub rule: MatchRule,
    /// Finished jobs it rests on.
    pub matched: usize,
    /// The median of the matches.
    pub expected: f64,
    /// Their 10th percentile.
    pub lo: f64,
    /// Their 90th percentile.
    pub hi: f64,
    /// Progress (a match: same units as the job's), or GPU-seconds (no
    /// match: jobs of other applications count progress otherwise).
    pub unit: WorkUnit,
}

/// A name's prefix: the name less its trailing numbered parts (`-7`,
/// `_12`, `.3`, repeatedly: `resnet-bs64-7` → `resnet-bs64`, `cifar10-3` →
/// `cifar10`); empty for a name that is all such parts.
pub fn name_prefix(name: &str) -> &str {
    let mut s = name;
    while let Some(i) = s.rfind(['-', '_', '.']) {
        let tail = &s[i + 1..];
        if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        s = &s[..i];
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        ""
    } else {
        s
    }
}

/// Predict a new job's total work from finished jobs, the rule of Helios's
/// and Lucid's estimators (similar past jobs' median): the median (p10 to
/// p90 for its range) of the total progress of finished jobs of the same
/// application and model; else of those of the same name prefix
/// ([`name_prefix`]) and application; else, unknown, every finished job's
/// GPU-seconds (median, p10 to p90). With no history at all: unknown, no
/// expected work (`f64::INFINITY`: the estimate gives a start, no finish).
pub fn predict_work(history: &[FinishedJob], app: &str, model: Option<&str>, name: &str) -> WorkPrediction {
    let pick = |rule: MatchRule, source: WorkSource, unit: WorkUnit, mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        WorkPrediction {
            source,
            rule,
            matched: xs.len(),
            expected: crate::percentile(&xs, 50.0),
            lo: crate::percentile(&xs, 10.0),
            hi: crate::percentile(&xs, 90.0),
            unit,
        }
    };
    let same: Vec<f64> = history
        .iter()
        .filter(|h| h.app == app && h.model.as_deref() == model)
        .map(|h| h.total_progress)
        .collect();
    if !same.is_empty() {
        return pick(MatchRule::AppModel, WorkSource::History, WorkUnit::Progress, same);
    }
    let prefix = name_prefix(name);
    if !prefix.is_empty() {
        let like: Vec<f64> = history
            .iter()
            .filter(|h| h.app == app && name_prefix(&h.name) == prefix)
            .map(|h| h.total_progress)
            .collect();
        if !like.is_empty() {
            return pick(
                MatchRule::NamePrefix,
                WorkSource::History,
                WorkUnit::Progress,
                like,
            );
        }
    }
    if history.is_empty() {
        return WorkPrediction {
            source: WorkSource::Unknown,
            rule: MatchRule::None,
            matched: 0,
            expected: f64::INFINITY,
            lo: 0.0,
            hi: f64::INFINITY,
            unit: WorkUnit::GpuSeconds,
        };
    }
    let all = history.iter().map(|h| h.gpu_s).collect();
    pick(MatchRule::All, WorkSource::Unknown, WorkUnit::GpuSeconds, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplan_core::{Cluster, GpuId, NodeId};

    /// A round of `nodes` × `gpus` at `now_s` with `jobs` (built through
    /// serde, so fields added to `Round` later keep their defaults).
    fn round(nodes: u32, gpus: u32, now_s: f64, jobs: Vec<RoundJob>) -> Round {
        let cluster = Cluster::homogeneous(nodes, gpus, gpuplan_core::DEFAULT_GPU_TYPE);
        let mut r: Round = serde_json::from_value(serde_json::json!({
            "now_s": now_s,
            "cluster": serde_json::to_value(&cluster).unwrap(),
            "jobs": [],
        }))
        .unwrap();
        r.jobs = jobs;
        r
    }

    /// A one-GPU job without a model (progress: seconds on its GPU).
    fn job(id: u32, submit_s: f64, on: Option<u32>) -> RoundJob {
        let mut j = RoundJob {
            submit_s,
            ..RoundJob::new(JobId(id), format!("job-{id}"), "rigid")
        };
        if let Some(g) = on {
            j.state.allocation = Allocation::from_gpus(vec![GpuId::new(NodeId(0), g)]);
            j.state.attained_gpu_s = 100.0;
        }
        j
    }

    fn cfg() -> EstimateConfig {
        EstimateConfig {
            budget_s: 60.0,
            max_rounds: 10_000,
            rate_spread: 0.0,
            ..EstimateConfig::default()
        }
    }

    fn declared(left: f64) -> JobWork {
        JobWork::new(RemainingWork::declared(left, 0.0))
    }

    /// One GPU: A runs with 150 s left, B waits with 100 s. A finishes at
    /// 150; B starts at the next round (180), serves the 30 s restart
    /// delay and runs 100 s: 310.
    fn one_gpu() -> Snapshot {
        Snapshot {
            round: round(1, 1, 0.0, vec![job(0, 0.0, Some(0)), job(1, 10.0, None)]),
            work: vec![declared(150.0), declared(100.0)],
            next_round_s: None,
            app_models: Default::default(),
        }
    }

    #[test]
    fn a_waiting_job_starts_at_the_round_after_the_running_one_finishes() {
        let e = estimate(&one_gpu(), "fifo", &cfg()).unwrap();
        let (a, b) = (&e.jobs[0], &e.jobs[1]);
        assert!(a.running && !b.running);
        assert_eq!(a.start_s, None);
        assert_eq!(a.finish_s, Some(150.0));
        assert_eq!(b.start_s, Some(180.0));
        assert_eq!(b.finish_s, Some(310.0));
        assert_eq!(b.source, WorkSource::Declared);
        // Declared work: no uncertainty, one run, ranges are the point.
        assert_eq!(
            b.finish_range,
            Span {
                lo: Some(310.0),
                hi: Some(310.0)
            }
        );
        assert!(!e.cut_short && !b.cut_short);
        assert_eq!(e.planner, "fifo");
        // Rounds at 0, 60, 120, 180, 240, 300.
        assert_eq!(e.rounds, 6);
    }

    #[test]
    fn every_planner_name_gives_the_same_future_here() {
        for p in ["fifo", "tiresias", "fair-share", "gpuplan-mip", "greedy"] {
            let e = estimate(&one_gpu(), p, &cfg()).unwrap();
            assert_eq!(e.jobs[1].start_s, Some(180.0), "{p}");
            assert_eq!(e.jobs[1].finish_s, Some(310.0), "{p}");
        }
    }

    #[test]
    fn the_next_round_time_and_a_restart_still_served_count() {
        let mut s = one_gpu();
        // Planned again at 30; A still has 20 s of its restart to serve.
        s.next_round_s = Some(30.0);
        s.work[0].restart_left_s = 20.0;
        let e = estimate(&s, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(170.0));
        assert_eq!(e.jobs[1].start_s, Some(210.0));
        assert_eq!(e.jobs[1].finish_s, Some(340.0));
    }

    #[test]
    fn uncertain_work_gives_a_range() {
        let mut s = one_gpu();
        s.work[0].remaining = RemainingWork {
            expected: 150.0,
            lo: 50.0,
            hi: 250.0,
            unit: WorkUnit::Progress,
            source: WorkSource::History,
        };
        let e = estimate(&s, "fifo", &cfg()).unwrap();
        let b = &e.jobs[1];
        assert_eq!(b.start_s, Some(180.0));
        assert_eq!(
            b.start_range,
            Span {
                lo: Some(60.0),
                hi: Some(300.0)
            }
        );
        assert_eq!(
            b.finish_range,
            Span {
                lo: Some(190.0),
                hi: Some(430.0)
            }
        );
        assert_eq!(e.jobs[0].source, WorkSource::History);
    }

    #[test]
    fn a_tiny_budget_returns_cut_short() {
        let tiny = EstimateConfig {
            budget_s: 0.0,
            ..cfg()
        };
        let e = estimate(&one_gpu(), "gpuplan-mip", &tiny).unwrap();
        assert!(e.cut_short);
        assert!(e.jobs.iter().all(|j| j.cut_short && j.finish_s.is_none()));
        assert_eq!(e.rounds, 0);
        assert_eq!(e.reached_s, 0.0);
        // A round budget stops as surely, and says how far it got.
        let two = EstimateConfig {
            max_rounds: 2,
            ..cfg()
        };
        let e = estimate(&one_gpu(), "fifo", &two).unwrap();
        assert!(e.cut_short && e.jobs[1].cut_short);
        assert_eq!((e.rounds, e.reached_s), (2, 120.0));
        assert_eq!(e.jobs[0].finish_s, None);
    }

    #[test]
    fn targets_stop_the_run_once_they_are_done() {
        let only_a = EstimateConfig {
            targets: Targets::Jobs(vec![JobId(0)]),
            ..cfg()
        };
        let e = estimate(&one_gpu(), "fifo", &only_a).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(150.0));
        assert_eq!(e.jobs[1].start_s, None);
        assert!(!e.cut_short);
    }

    #[test]
    fn a_job_that_can_never_run_has_no_start_and_the_run_ends() {
        let mut big = job(1, 10.0, None);
        (big.requested_gpus, big.min_gpus, big.max_gpus) = (2, 2, 2);
        let s = Snapshot {
            round: round(1, 1, 0.0, vec![job(0, 0.0, Some(0)), big]),
            work: vec![declared(30.0), declared(100.0)],
            next_round_s: None,
            app_models: Default::default(),
        };
        let e = estimate(&s, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(30.0));
        assert_eq!(e.jobs[1].start_s, None);
        assert!(!e.cut_short && !e.jobs[1].cut_short);
        assert!(e.rounds < 10);
    }

    #[test]
    fn what_if_reports_the_new_job_and_the_delay_and_changes_nothing() {
        // Two GPUs: A runs on one, B on the other; C (new, 1 GPU, 100 s)
        // under FIFO waits for A (150 s): starts 180, finishes 310.
        let s = Snapshot {
            round: round(1, 2, 0.0, vec![job(0, 0.0, Some(0)), job(1, 5.0, None)]),
            work: vec![declared(150.0), declared(500.0)],
            next_round_s: None,
            app_models: Default::default(),
        };
        let kept = s.clone();
        let c = job(7, 20.0, None);
        let w = what_if(&s, c, declared(100.0), "fifo", &cfg()).unwrap();
        assert_eq!(s, kept, "the snapshot is untouched");
        assert_eq!(w.before.jobs.len(), 2);
        assert_eq!(w.after.jobs.len(), 3);
        assert_eq!(w.job.id, JobId(7));
        // B started at once on the free GPU before and after: no one is delayed.
        assert_eq!(w.job.start_s, Some(180.0));
        assert_eq!(w.job.finish_s, Some(310.0));
        assert_eq!(w.largest_delay, None);
        // Now C is submitted before B: under FIFO it takes the free GPU
        // and B waits for A.
        let early = job(7, 1.0, None);
        let w = what_if(&s, early, declared(100.0), "fifo", &cfg()).unwrap();
        assert_eq!(w.job.start_s, Some(0.0));
        let d = w.largest_delay.unwrap();
        assert_eq!(d.job, JobId(1));
        assert_eq!(d.start_s, Some(180.0));
        assert_eq!(d.finish_s, Some(180.0));
        // An id already in the snapshot is refused.
        assert!(what_if(&s, job(1, 0.0, None), declared(1.0), "fifo", &cfg()).is_err());
    }

    #[test]
    fn bad_input_is_refused_with_its_field() {
        let mut s = one_gpu();
        s.work.pop();
        let e = estimate(&s, "fifo", &cfg()).unwrap_err().to_string();
        assert!(e.contains("work: 1 entries for 2 jobs"), "{e}");
        let e = estimate(&one_gpu(), "nope", &cfg()).unwrap_err().to_string();
        assert!(e.contains("unknown planner"), "{e}");
    }

    fn done(app: &str, model: Option<&str>, name: &str, total: f64, gpu_s: f64) -> FinishedJob {
        FinishedJob {
            app: app.into(),
            model: model.map(Into::into),
            name: name.into(),
            total_progress: total,
            run_s: gpu_s,
            gpu_s,
        }
    }

    #[test]
    fn history_predicts_by_app_and_model_then_name_prefix_then_all() {
        let h = vec![
            done("cifar10", None, "cifar10-0", 100.0, 1000.0),
            done("cifar10", None, "cifar10-1", 300.0, 3000.0),
            done("cifar10", None, "cifar10-2", 200.0, 2000.0),
            done("trace", Some("vgg19"), "sweep-a-1", 50.0, 50.0),
            done("trace", Some("resnet50"), "sweep-a-2", 70.0, 70.0),
        ];
        let p = predict_work(&h, "cifar10", None, "cifar10-9");
        assert_eq!(
            (p.rule, p.source, p.unit, p.matched),
            (MatchRule::AppModel, WorkSource::History, WorkUnit::Progress, 3)
        );
        assert_eq!((p.expected, p.lo, p.hi), (200.0, 120.0, 280.0));
        let p = predict_work(&h, "trace", Some("vgg19"), "x");
        assert_eq!((p.rule, p.expected), (MatchRule::AppModel, 50.0));
        // Another model of the same application: by its name's prefix.
        let p = predict_work(&h, "trace", Some("bert"), "sweep-a-17");
        assert_eq!((p.rule, p.matched, p.expected), (MatchRule::NamePrefix, 2, 60.0));
        // Nothing like it: every job's GPU-seconds, unknown.
        let p = predict_work(&h, "imagenet", None, "imagenet-3");
        assert_eq!(
            (p.rule, p.source, p.unit, p.matched),
            (MatchRule::All, WorkSource::Unknown, WorkUnit::GpuSeconds, 5)
        );
        assert_eq!(p.expected, 1000.0);
        assert_eq!(p.lo, 58.0);
        assert_eq!(p.hi, 2600.0);
        let p = predict_work(&[], "a", None, "b");
        assert_eq!((p.rule, p.source), (MatchRule::None, WorkSource::Unknown));
        assert!(p.expected.is_infinite());
        assert_eq!(name_prefix("resnet-bs64-7"), "resnet-bs64");
        assert_eq!(name_prefix("42"), "");
        assert_eq!(name_prefix("cifar10-3"), "cifar10");
        assert_eq!(name_prefix("a_1.2"), "a");
    }

    #[test]
    fn predicted_work_is_less_what_the_job_has_done() {
        let h = vec![
            done("a", None, "a-0", 100.0, 10.0),
            done("a", None, "a-1", 300.0, 30.0),
        ];
        let p = predict_work(&h, "a", None, "a-2");
        let r = RemainingWork::predicted(&p, 150.0, 0.0);
        assert_eq!((r.lo, r.expected, r.hi), (1.2, 50.0, 130.0));
        assert_eq!(r.source, WorkSource::History);
        // An unknown job with no history: a start, never a finish.
        let none = predict_work(&[], "a", None, "a-2");
        let s = Snapshot {
            round: round(1, 1, 0.0, vec![job(0, 0.0, None)]),
            work: vec![JobWork::new(RemainingWork::predicted(&none, 0.0, 0.0))],
            next_round_s: None,
            app_models: Default::default(),
        };
        let e = estimate(
            &s,
            "fifo",
            &EstimateConfig {
                max_rounds: 5,
                ..cfg()
            },
        )
        .unwrap();
        assert_eq!(e.jobs[0].start_s, Some(0.0));
        assert_eq!(e.jobs[0].finish_s, None);
        assert_eq!(e.jobs[0].source, WorkSource::Unknown);
    }

    #[test]
    fn gpu_seconds_become_progress_at_the_requested_size() {
        // 2 GPUs requested, no model: 1 progress/s at 2 GPUs; 200 GPU-s = 100 s.
        let mut j = job(0, 0.0, None);
        (j.requested_gpus, j.min_gpus, j.max_gpus) = (2, 2, 2);
        let w = RemainingWork {
            expected: 200.0,
            lo: 200.0,
            hi: 200.0,
            unit: WorkUnit::GpuSeconds,
            source: WorkSource::Unknown,
        };
        let s = Snapshot {
            round: round(1, 2, 0.0, vec![j]),
            work: vec![JobWork::new(w)],
            next_round_s: None,
            app_models: Default::default(),
        };
        let e = estimate(&s, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(130.0));
    }

    /// A model whose one-GPU step takes 2 s at its batch of 10 (its
    /// initial batch, no noise): 0.5 progress per second.
    fn slow_model() -> GoodputModel {
        serde_json::from_value(serde_json::json!({
            "perf": {"alpha_c": 2.0, "beta_c": 0.0, "alpha_n": 0.0, "beta_n": 0.0,
                     "alpha_r": 0.0, "beta_r": 0.0, "gamma": 1.0},
            "grad": {"sqr": 1.0, "var": 0.0},
            "limits": {"init_batch": 10, "max_batch": 10, "min_local": 1, "max_local": 10},
            "accumulation": false,
        }))
        .unwrap()
    }

    #[test]
    fn a_model_sets_the_rate_and_a_job_without_one_borrows_its_apps() {
        // A runs with its own model: 100 left at 0.5/s finishes at 200.
        let mut a = RoundJob {
            batch_size: 10,
            ..job(0, 0.0, Some(0))
        };
        a.app = "slow".into();
        a.model = Some(slow_model());
        // B, same application, no model yet: A's model, once it starts
        // on the second GPU at 0 (after 30 s of restart): 50 / 0.5 = 100 s.
        let mut b = RoundJob {
            batch_size: 10,
            ..job(1, 1.0, None)
        };
        b.app = "slow".into();
        let s = Snapshot::new(
            round(1, 2, 0.0, vec![a, b.clone()]),
            vec![declared(100.0), declared(50.0)],
        );
        let e = estimate(&s, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(200.0));
        assert_eq!(e.jobs[1].start_s, Some(0.0));
        assert_eq!(e.jobs[1].finish_s, Some(130.0));
        // Alone, B takes its application's earlier model from the snapshot.
        let mut alone = Snapshot::new(round(1, 1, 0.0, vec![b]), vec![declared(50.0)]);
        alone.app_models.insert(
            "slow".into(),
            AppModel {
                model: slow_model(),
                model_type: None,
            },
        );
        let e = estimate(&alone, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(130.0));
        // With no model anywhere: one unit per second at its requested size.
        alone.app_models.clear();
        let e = estimate(&alone, "fifo", &cfg()).unwrap();
        assert_eq!(e.jobs[0].finish_s, Some(80.0));
    }

    #[test]
    fn the_rate_spread_widens_a_declared_jobs_range() {
        let spread = EstimateConfig {
            rate_spread: 0.25,
            ..cfg()
        };
        let e = estimate(&one_gpu(), "fifo", &spread).unwrap();
        let b = &e.jobs[1];
        assert_eq!(b.finish_s, Some(310.0));
        // A: 150 s at 1.25× → 120 s, at 0.75× → 200 s; B starts at 120 or 240.
        assert_eq!(
            b.start_range,
            Span {
                lo: Some(120.0),
                hi: Some(240.0)
            }
        );
        assert_eq!(b.finish_range.lo, Some(230.0));
        let hi = b.finish_range.hi.unwrap();
        assert!((hi - (240.0 + 30.0 + 100.0 / 0.75)).abs() < 1e-9, "{hi}");
    }

    #[test]
    fn steady_rounds_are_skipped_until_a_job_finishes() {
        let every = estimate(&one_gpu(), "fifo", &cfg()).unwrap();
        let skip = EstimateConfig {
            skip_steady_rounds: 10,
            ..cfg()
        };
        let e = estimate(&one_gpu(), "fifo", &skip).unwrap();
        // A finishes at 150: the round at 180 plans B's start as before.
        assert_eq!(e.jobs[1].start_s, Some(180.0));
        assert_eq!(e.jobs[1].finish_s, Some(310.0));
        assert!(e.rounds < every.rounds, "{} < {}", e.rounds, every.rounds);
    }
}
