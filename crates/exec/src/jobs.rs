//! The job table's rows: a job's record (what the journal keeps), the
//! lifecycle of its current attempt, and the views the API shows.
//!
//! An attempt's life is one enum, not flags, so no impossible mix can be
//! written down; its journaled form stays the previous release's.

use std::collections::BTreeMap;

use gpuplan_core::{BatchLimits, GoodputModel, JobId};
use gpuplan_solve::{Agent, BatchTarget, FitMemo, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::engine::Handle;
use crate::spec::JobSubmission;

/// A job's status as journaled; [`Phase`] adds its attempt's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStatus {
    /// Waiting for GPUs (or for its crash back-off to end).
    Queued,
    /// Holds GPUs: running, starting, or being moved.
    Running,
    /// Ended: its ranks exited 0 or it wrote its done-file.
    Completed,
    /// Ended: it crashed more often than allowed, or could not be started.
    Failed,
    /// Cancelled through the API.
    Cancelled,
}

impl JobStatus {
    /// Whether the job has ended and is never planned again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

/// Where an attempt is in its life. One enum instead of flags, so that no
/// impossible mix (killed but never told to stop) can be written down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lifecycle {
    /// Journaled as intended, not yet journaled as spawned.
    Starting,
    Running,
    /// Told to stop (SIGTERM) at `since_unix_s`; `killed` once SIGKILL went out.
    Stopping {
        since_unix_s: f64,
        cause: StopCause,
        killed: bool,
    },
}

/// Why an attempt is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// The daemon stopped it: a move, a cancel, a lost GPU, a restart roll-back.
    Ordered,
    /// A rank failed on its own; the others are being stopped.
    Crashed,
}

/// One launch of a job on a set of GPUs. Journaled in the previous
/// release's form ([`AttemptWire`]), so old journals load and new ones
/// read the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "AttemptWire", into = "AttemptWire")]
pub struct Attempt {
    pub n: u32,
    pub gpus: Vec<String>,
    /// The engine's handle (journaled as `dir` and `ranks`).
    pub handle: Handle,
    pub life: Lifecycle,
    pub started_unix_s: f64,
}

impl Attempt {
    pub fn is_stopping(&self) -> bool {
        matches!(self.life, Lifecycle::Stopping { .. })
    }

    /// Start stopping it on the daemon's order; false if already stopping
    /// (the first SIGTERM's time keeps counting the grace period).
    pub(crate) fn order_stop(&mut self, now: f64) -> bool {
        if self.is_stopping() {
            return false;
        }
        self.life = Lifecycle::Stopping {
            since_unix_s: now,
            cause: StopCause::Ordered,
            killed: false,
        };
        true
    }
}

/// The journal's form of an [`Attempt`] (field names of earlier releases).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptWire {
    pub n: u32,
    pub gpus: Vec<String>,
    pub launched: bool,
    /// `dir`, `ranks` and the engine's own keys, as the journal has them.
    #[serde(flatten)]
    pub handle: Handle,
    #[serde(default)]
    pub term_sent_unix_s: Option<f64>,
    #[serde(default)]
    pub kill_sent: bool,
    #[serde(default)]
    pub crashed: bool,
    pub started_unix_s: f64,
}

impl From<AttemptWire> for Attempt {
    fn from(w: AttemptWire) -> Self {
        let life = match w.term_sent_unix_s {
            Some(t) => Lifecycle::Stopping {
                since_unix_s: t,
                cause: if w.crashed {
                    StopCause::Crashed
                } else {
                    StopCause::Ordered
                },
                killed: w.kill_sent,
            },
            None if w.launched => Lifecycle::Running,
            None => Lifecycle::Starting,
        };
        Attempt {
            n: w.n,
            gpus: w.gpus,
            handle: w.handle,
            life,
            started_unix_s: w.started_unix_s,
        }
    }
}

impl From<Attempt> for AttemptWire {
    fn from(a: Attempt) -> Self {
        let (launched, term, killed, crashed) = match a.life {
            Lifecycle::Starting => (false, None, false, false),
            Lifecycle::Running => (true, None, false, false),
            Lifecycle::Stopping {
                since_unix_s,
                cause,
                killed,
            } => (true, Some(since_unix_s), killed, cause == StopCause::Crashed),
        };
        AttemptWire {
            n: a.n,
            gpus: a.gpus,
            launched,
            handle: a.handle,
            term_sent_unix_s: term,
            kill_sent: killed,
            crashed,
            started_unix_s: a.started_unix_s,
        }
    }
}

/// Everything the daemon knows about one job; the journal's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The daemon-wide id, from 1.
    pub id: JobId,
    /// What was submitted.
    pub spec: JobSubmission,
    /// When it was submitted (the daemon's clock).
    pub submit_unix_s: f64,
    /// Where it is, as journaled.
    pub status: JobStatus,
    /// Why it failed or was re-planned, for the operator; `None` when nothing went wrong.
    #[serde(default)]
    pub reason: Option<String>,
    /// Lets the job's own processes report and read their state, nothing else.
    pub token: String,
    /// GPUs the last plan gave the job (UUIDs); empty = none.
    pub gpus: Vec<String>,
    /// The attempt now on its GPUs, starting or stopping; `None` when nothing runs.
    pub attempt: Option<Attempt>,
    /// Launches so far.
    pub attempts: u32,
    /// Attempts that failed on their own (counted against `max_crashes`).
    pub crashes: u32,
    /// No relaunch before this time, after a crash.
    pub backoff_until_unix_s: f64,
    /// Re-allocations after its first (the planner's restart count).
    pub restarts: u32,
    /// Most GPUs it has held at once.
    pub max_gpus_used: u32,
    /// GPU-seconds it has run (Tiresias' attained service).
    pub attained_gpu_s: f64,
    /// Total batch of the current allocation, as its attempt is told.
    pub batch_size: u32,
    /// Per-GPU batch of the current allocation.
    pub local_bsz: u32,
    /// Gradient accumulation steps per optimizer step.
    pub accum_steps: u32,
    /// Progress last reported, in the job's own units.
    pub progress: f64,
    /// Epoch last reported.
    pub epoch: u32,
    /// Optimizer step last reported.
    pub step: u64,
    /// Measurements and the fit (journaled as `observations` and `grad`).
    #[serde(flatten)]
    pub agent: Agent,
    /// Log lines kept when an attempt failed (`Config::log_lines`).
    pub last_log: Vec<String>,
    /// When it completed, failed or was cancelled.
    pub finished_unix_s: Option<f64>,
    /// The job's id in the engine's queue, while it has one; opaque to
    /// the daemon. Journaled under the key of the first engine that kept
    /// one, so journals of earlier releases load.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "slurm_job")]
    pub engine_id: Option<u64>,
    /// What sharing has measured of the job (absent from older journals).
    #[serde(default, skip_serializing_if = "SharingRecord::is_empty")]
    pub sharing: SharingRecord,
    /// What its checkpoint reports said (absent from older journals and
    /// for jobs that report none).
    #[serde(default, skip_serializing_if = "CheckpointRecord::is_empty")]
    pub checkpoint: CheckpointRecord,
    /// The progress at which it is complete: its job file's, else its
    /// last report's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_progress: Option<f64>,
}

/// A job's checkpoints as it reported them: what a restart would cost it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// When the last checkpoint was reported written (the daemon's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_s: Option<f64>,
    /// The progress it holds, where the report said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// Its optimizer step, where the report said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The job checkpoints when told to stop, so a stop loses no work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_stop: bool,
    /// Seconds of work its stops threw away (run since its last checkpoint).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_s: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl CheckpointRecord {
    pub fn is_empty(&self) -> bool {
        *self == CheckpointRecord::default()
    }

    /// Whether the job has said anything of its checkpoints: only then is a
    /// restart charged what it loses rather than the fixed penalty.
    pub fn reported(&self) -> bool {
        self.unix_s.is_some() || self.on_stop
    }
}

/// A job's utilization and co-location measurements, journaled with it so
/// a restarted daemon keeps what its interference model learnt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingRecord {
    /// Mean utilization (0..1) of the job's GPUs at the last collection
    /// while no other job held them: what the planner predicts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_solo: Option<f64>,
    /// The configuration `util_solo` was measured at: with the job's
    /// features, one training sample for the utilization predictor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_at: Option<gpuplan_core::predict::PredictAt>,
    /// The same at the last collection, shared or not (a shared GPU's
    /// utilization is both jobs').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_last: Option<f64>,
    /// The last step time reported alone: (GPUs, local batch, seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solo_step: Option<(u32, u32, f64)>,
    /// Measured slowdown beside each partner (by the partner's model key):
    /// step time shared over alone, at the same GPUs and local batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slowdowns: BTreeMap<String, f64>,
    /// The most memory (GiB) any of its GPUs held while it ran alone on
    /// them: its memory per GPU in the round when its job file gives none,
    /// so the sharing memory cap holds for a job of any model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_gib_peak: Option<f64>,
}

impl SharingRecord {
    pub fn is_empty(&self) -> bool {
        *self == SharingRecord::default()
    }
}

/// What a job sends to its report endpoint (see docs/job-protocol.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Optimizer step reached.
    #[serde(default)]
    pub step: Option<u64>,
    /// Seconds per optimizer step, synchronisation included; with
    /// `local_bsz`, or neither in a report of a checkpoint alone.
    #[serde(default)]
    pub step_time_s: Option<f64>,
    /// Seconds of one accumulation (compute-only) step; default `step_time_s`.
    #[serde(default)]
    pub accum_time_s: Option<f64>,
    /// Per-GPU batch the step ran with.
    #[serde(default)]
    pub local_bsz: Option<u32>,
    /// Accumulation steps it used; accepted, the daemon keeps the ones it chose.
    #[serde(default)]
    pub accum_steps: Option<u32>,
    /// Squared gradient norm estimate, for the gradient noise scale.
    #[serde(default)]
    pub grad_sqr: Option<f64>,
    /// Gradient variance estimate, for the gradient noise scale.
    #[serde(default)]
    pub grad_var: Option<f64>,
    /// Progress in the job's own units (e.g. examples processed at M0).
    #[serde(default)]
    pub progress: Option<f64>,
    /// Epoch reached.
    #[serde(default)]
    pub epoch: Option<u32>,
    /// A checkpoint holding this progress has just been written.
    #[serde(default)]
    pub checkpoint_progress: Option<f64>,
    /// A checkpoint at this optimizer step has just been written.
    #[serde(default)]
    pub checkpoint_step: Option<u64>,
    /// The job checkpoints on SIGTERM within its grace, so a stop loses no
    /// work since its last checkpoint.
    #[serde(default)]
    pub checkpoints_on_stop: Option<bool>,
    /// The progress at which the job will be complete.
    #[serde(default)]
    pub total_progress: Option<f64>,
}

/// Where a job is, as the API shows it: its status and its attempt's
/// lifecycle in one word. Serialised as the kebab-case names the API has
/// always sent, so its JSON is unchanged; a caller matches it instead of
/// comparing strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Waiting for GPUs.
    Queued,
    /// Waiting out its back-off after a crash.
    Backoff,
    /// Given GPUs; its attempt is being launched.
    Starting,
    /// Its attempt runs.
    Running,
    /// Its attempt was told to stop (a move, a cancel, a crash of another rank).
    Stopping,
    /// Ended successfully.
    Completed,
    /// Ended in failure.
    Failed,
    /// Cancelled, with nothing left running.
    Cancelled,
}

impl Phase {
    /// Every phase, in lifecycle order, so that a count by phase
    /// (`/metrics`) lists the phases no job is in as 0 rather than omitting them.
    pub const ALL: [Phase; 8] = [
        Phase::Queued,
        Phase::Backoff,
        Phase::Starting,
        Phase::Running,
        Phase::Stopping,
        Phase::Completed,
        Phase::Failed,
        Phase::Cancelled,
    ];

    /// The name the API and the metrics use (serde's).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Backoff => "backoff",
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopping => "stopping",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
            Phase::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so width and alignment (`{:<10}`) apply as to a string.
        f.pad(self.as_str())
    }
}

/// Lets tests and callers write `phase == "running"`.
impl PartialEq<&str> for Phase {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Which batch a job runs at under a planner: the one policy
/// ([`BatchTarget::for_job`]), where the job allows adapting when its spec
/// lets the batch grow (`max_batch_size` above `batch_size`). The simulator
/// asks the same question.
pub fn batch_target(traits: &PlannerTraits, spec: &JobSubmission) -> BatchTarget {
    let allows = spec.max_batch_size.is_some_and(|m| m > spec.batch_size);
    BatchTarget::for_job(traits, allows, spec.batch_size)
}

impl JobRecord {
    /// A job just accepted: queued, never run, nothing measured; `engine_id`
    /// its id in the engine's queue where it came from there.
    pub(crate) fn queued(
        id: JobId,
        spec: JobSubmission,
        token: String,
        now: f64,
        engine_id: Option<u64>,
    ) -> Self {
        JobRecord {
            id,
            batch_size: spec.batch_size,
            total_progress: spec.total_progress,
            spec,
            submit_unix_s: now,
            status: JobStatus::Queued,
            reason: None,
            token,
            gpus: Vec::new(),
            attempt: None,
            attempts: 0,
            crashes: 0,
            backoff_until_unix_s: 0.0,
            restarts: 0,
            max_gpus_used: 0,
            attained_gpu_s: 0.0,
            local_bsz: 0,
            accum_steps: 0,
            progress: 0.0,
            epoch: 0,
            step: 0,
            agent: Agent::default(),
            last_log: Vec::new(),
            finished_unix_s: None,
            engine_id,
            sharing: Default::default(),
            checkpoint: Default::default(),
        }
    }

    /// The name the interference model knows the job's model by: its
    /// application, else its name (jobs of one model share measurements).
    pub fn colocation_key(&self) -> String {
        self.spec.app.clone().unwrap_or_else(|| self.spec.name.clone())
    }

    /// The GPUs of its attempt while that attempt is not being stopped.
    pub(crate) fn running_gpus(&self) -> &[String] {
        match &self.attempt {
            Some(a) if !a.is_stopping() => &a.gpus,
            _ => &[],
        }
    }

    pub(crate) fn limits(&self) -> BatchLimits {
        let s = &self.spec;
        BatchLimits {
            init_batch: s.batch_size,
            max_batch: s.max_batch_size.unwrap_or(s.batch_size),
            min_local: s.min_local_bsz.unwrap_or(1),
            max_local: s
                .max_local_bsz
                .unwrap_or(s.batch_size)
                .max(s.min_local_bsz.unwrap_or(1)),
        }
    }

    /// The fitted goodput model, built as the simulator builds it.
    pub fn model(&mut self, memo: &mut FitMemo) -> Option<GoodputModel> {
        let limits = self.limits();
        self.agent.model(limits, memo)
    }

    /// Batch size, local batch and accumulation for `gpus` GPUs on `nodes`
    /// nodes, under the planner's batch policy (the simulator's rule).
    pub(crate) fn choose_batch(&mut self, traits: &PlannerTraits, nodes: u32, gpus: u32, memo: &mut FitMemo) {
        let target = batch_target(traits, &self.spec);
        let limits = self.limits();
        if let Some(c) = self.agent.choose_batch(limits, target, nodes, gpus, memo) {
            self.local_bsz = c.local_bsz;
            self.accum_steps = c.accum_steps;
            self.batch_size = c.batch(gpus);
        }
    }

    pub(crate) fn live(&self) -> bool {
        self.attempt.is_some()
    }

    /// Seconds of work a stop would throw away now: the run time of its
    /// running attempt since its last checkpoint (or since the attempt
    /// began, which resumed from one), 0 for a job that checkpoints on
    /// stop; `None` for a job that reports no checkpoints, or nothing running.
    pub fn since_checkpoint_s(&self, now: f64) -> Option<f64> {
        let a = self.attempt.as_ref().filter(|a| !a.is_stopping())?;
        if !self.checkpoint.reported() {
            return None;
        }
        if self.checkpoint.on_stop {
            return Some(0.0);
        }
        let from = self
            .checkpoint
            .unix_s
            .unwrap_or(a.started_unix_s)
            .max(a.started_unix_s);
        Some((now - from).max(0.0))
    }

    /// Seconds its running attempt has held its GPUs; `None` when nothing runs.
    pub fn run_s(&self, now: f64) -> Option<f64> {
        let a = self.attempt.as_ref().filter(|a| !a.is_stopping())?;
        Some((now - a.started_unix_s).max(0.0))
    }

    /// One of [`PHASES`]: `queued`, `backoff`, `starting`, `running`,
    /// `stopping`, or a final status.
    pub fn phase(&self, now: f64) -> Phase {
        match self.status {
            JobStatus::Completed => Phase::Completed,
            JobStatus::Failed => Phase::Failed,
            JobStatus::Cancelled if self.live() => Phase::Stopping,
            JobStatus::Cancelled => Phase::Cancelled,
            _ => match &self.attempt {
                Some(a) => match a.life {
                    Lifecycle::Stopping { .. } => Phase::Stopping,
                    Lifecycle::Running => Phase::Running,
                    Lifecycle::Starting => Phase::Starting,
                },
                None if !self.gpus.is_empty() => Phase::Starting,
                None if self.backoff_until_unix_s > now => Phase::Backoff,
                None => Phase::Queued,
            },
        }
    }
}

/// The model keys of the other jobs whose running attempts hold one of
/// `id`'s running GPUs, sorted and deduplicated.
pub(crate) fn partners(jobs: &BTreeMap<JobId, JobRecord>, id: JobId) -> Vec<String> {
    let Some(me) = jobs.get(&id) else {
        return Vec::new();
    };
    let mine = me.running_gpus();
    let mut out: Vec<String> = jobs
        .values()
        .filter(|o| o.id != id && o.running_gpus().iter().any(|u| mine.contains(u)))
        .map(|o| o.colocation_key())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The interference model the jobs have taught: the shipped curve,
/// overridden by every pair they were measured in (from the job records,
/// so it survives a restart with the journal).
pub(crate) fn colocation<'a>(
    jobs: impl Iterator<Item = &'a JobRecord>,
) -> gpuplan_core::colocation::Colocation {
    let obs: Vec<gpuplan_core::colocation::Observed> = jobs
        .flat_map(|j| {
            let key = j.colocation_key();
            j.sharing
                .slowdowns
                .iter()
                .map(move |(p, f)| gpuplan_core::colocation::Observed {
                    key: key.clone(),
                    partner: p.clone(),
                    slowdown: *f,
                })
        })
        .collect();
    gpuplan_core::colocation::Colocation::from_observed(gpuplan_core::colocation::GAVEL_CURVE, &obs)
}

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobView {
    /// The job's id.
    pub id: JobId,
    /// Its submitted name.
    pub name: String,
    /// Its journaled status.
    pub status: JobStatus,
    /// Status and attempt in one word.
    pub phase: Phase,
    /// UUIDs of the GPUs the last plan gave it.
    pub gpus: Vec<String>,
    /// Launches so far.
    pub attempts: u32,
    /// Re-allocations after its first.
    pub restarts: u32,
    /// Attempts that failed on their own.
    pub crashes: u32,
    /// Optimizer step last reported.
    pub step: u64,
    /// Progress last reported, in the job's own units.
    pub progress: f64,
    /// Total batch of the current allocation.
    pub batch_size: u32,
    /// Per-GPU batch of the current allocation.
    pub local_bsz: u32,
    /// Gradient accumulation steps per optimizer step.
    pub accum_steps: u32,
    /// GPU-seconds run so far.
    pub attained_gpu_s: f64,
    /// Why it failed or was re-planned.
    pub reason: Option<String>,
    /// Log lines kept when an attempt failed.
    pub last_log: Vec<String>,
    /// When it was submitted.
    pub submit_unix_s: f64,
    /// When it ended.
    pub finished_unix_s: Option<f64>,
    /// Its fitted goodput model; `None` until its reports allow a fit.
    pub model: Option<GoodputModel>,
    /// The step times it reported, averaged per configuration (nodes,
    /// GPUs, local batch, GPU type): what `model` was fitted to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<gpuplan_solve::ObsAgg>,
    /// The gradient statistics it last reported (|g|², tr(Σ)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad: Option<gpuplan_core::GradParams>,
    /// Statistical efficiency of its current batch by that model (Pollux:
    /// progress per sample relative to the initial batch), from its
    /// reported gradient statistics; absent without a model or a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// The progress its last reported checkpoint holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_progress: Option<f64>,
    /// The optimizer step of its last reported checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_step: Option<u64>,
    /// When its last checkpoint was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_unix_s: Option<f64>,
    /// Seconds of work a stop would throw away now (0 for a job that
    /// checkpoints on stop); absent for a job that reports no checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_checkpoint_s: Option<f64>,
    /// Seconds of work its stops have thrown away so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_s: f64,
    /// The progress at which it is complete, where declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_progress: Option<f64>,
    /// The queue it is planned in, under `serve --queues` (`default` for
    /// a job that names none); absent without queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}
