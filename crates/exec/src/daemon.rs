//! The daemon's state and its round: collect devices → build a [`Round`] →
//! plan → validate → apply, with every decision journaled before it is acted on.
//!
//! Between rounds a faster `tick` watches processes: it reaps exits, turns
//! SIGTERM into SIGKILL after the grace period, restarts crashed jobs with
//! back-off, and launches jobs whose GPUs have been released.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use gpuplan_core::fit::Observation;
use gpuplan_core::{
    Allocation, BatchLimits, Cluster, GoodputModel, GpuId, GradParams, JobId, JobState, Node, NodeId,
    PolicyParams, Round,
};
use gpuplan_solve::agent::{round_job, Agent, BatchTarget, FitMemo, JobFacts};
use gpuplan_solve::{run_round, Decision, Limits, Planner, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SystemClock};
use crate::device::{Devices, Fault, Gpu, Health};
use crate::engine::{log_file, Engine, LaunchRequest, RankProc, RankSpec, RankStatus, Signal};
use crate::journal::Journal;
use crate::spec::JobSubmission;
use crate::ExecError;

/// Daemon settings (the `serve` flags).
#[derive(Debug, Clone)]
pub struct Config {
    pub state_dir: PathBuf,
    pub planner: String,
    pub interval_s: f64,
    /// Seconds between SIGTERM and SIGKILL, unless the job sets `grace_s`.
    pub grace_s: f64,
    /// First restart delay after a crash; doubles with each further crash.
    pub backoff_s: f64,
    pub max_crashes: u32,
    /// Log lines kept with a failed job.
    pub log_lines: usize,
    pub limits: Limits,
    pub params: PolicyParams,
    /// Base URL jobs report to, e.g. `http://127.0.0.1:7077`.
    pub report_base: String,
}

impl Config {
    pub fn new(state_dir: PathBuf, planner: &str) -> Self {
        Config {
            state_dir,
            planner: planner.to_string(),
            interval_s: 60.0,
            grace_s: 30.0,
            backoff_s: 10.0,
            max_crashes: 3,
            log_lines: 20,
            limits: Limits {
                time_limit_s: 10.0,
                ..Limits::default()
            },
            params: PolicyParams::default(),
            report_base: String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStatus {
    /// Waiting for GPUs (or for its crash back-off to end).
    Queued,
    /// Holds GPUs: running, starting, or being moved.
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl JobStatus {
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
    pub dir: PathBuf,
    pub ranks: Vec<RankProc>,
    pub life: Lifecycle,
    pub started_unix_s: f64,
}

impl Attempt {
    pub fn is_stopping(&self) -> bool {
        matches!(self.life, Lifecycle::Stopping { .. })
    }

    /// Start stopping it on the daemon's order; false if already stopping
    /// (the first SIGTERM's time keeps counting the grace period).
    fn order_stop(&mut self, now: f64) -> bool {
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
    pub dir: PathBuf,
    pub launched: bool,
    pub ranks: Vec<RankProc>,
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
            dir: w.dir,
            ranks: w.ranks,
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
            dir: a.dir,
            launched,
            ranks: a.ranks,
            term_sent_unix_s: term,
            kill_sent: killed,
            crashed,
            started_unix_s: a.started_unix_s,
        }
    }
}

pub use gpuplan_solve::agent::ObsAgg;

/// Everything the daemon knows about one job; the journal's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: JobId,
    pub spec: JobSubmission,
    pub submit_unix_s: f64,
    pub status: JobStatus,
    #[serde(default)]
    pub reason: Option<String>,
    /// Lets the job's own processes report and read their state, nothing else.
    pub token: String,
    /// GPUs the last plan gave the job (UUIDs); empty = none.
    pub gpus: Vec<String>,
    pub attempt: Option<Attempt>,
    pub attempts: u32,
    pub crashes: u32,
    pub backoff_until_unix_s: f64,
    pub restarts: u32,
    pub max_gpus_used: u32,
    pub attained_gpu_s: f64,
    pub batch_size: u32,
    pub local_bsz: u32,
    pub accum_steps: u32,
    pub progress: f64,
    pub epoch: u32,
    pub step: u64,
    /// Measurements and the fit (journaled as `observations` and `grad`).
    #[serde(flatten)]
    pub agent: Agent,
    pub last_log: Vec<String>,
    pub finished_unix_s: Option<f64>,
}

/// What a job sends to its report endpoint (see docs/job-protocol.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    #[serde(default)]
    pub step: Option<u64>,
    /// Seconds per optimizer step, synchronisation included.
    pub step_time_s: f64,
    /// Seconds of one accumulation (compute-only) step; default `step_time_s`.
    #[serde(default)]
    pub accum_time_s: Option<f64>,
    pub local_bsz: u32,
    #[serde(default)]
    pub accum_steps: Option<u32>,
    #[serde(default)]
    pub grad_sqr: Option<f64>,
    #[serde(default)]
    pub grad_var: Option<f64>,
    /// Progress in the job's own units (e.g. examples processed at M0).
    #[serde(default)]
    pub progress: Option<f64>,
    #[serde(default)]
    pub epoch: Option<u32>,
}

/// Journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
enum Entry {
    Job(Box<JobRecord>),
    Plan {
        round: u64,
        unix_s: f64,
        planner: String,
        allocations: Vec<(JobId, Vec<String>)>,
    },
}

/// Timings and outcome of one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundStats {
    pub round: u64,
    pub collect_ms: f64,
    pub plan_ms: f64,
    pub apply_ms: f64,
    pub active_jobs: usize,
    pub healthy_gpus: usize,
    pub changed_jobs: usize,
    pub status: Option<String>,
    pub note: Option<String>,
}

/// A prepared round: the planner input plus what `apply` needs to map node
/// counts back to GPUs.
pub struct Prepared {
    pub round: Round,
    node_gpus: Vec<Vec<String>>,
    targets: HashMap<JobId, Vec<String>>,
    stats: RoundStats,
}

/// The planner named `name`, if it can run on a live cluster: one that
/// reads the simulator's oracle is refused here, at start, with the list of
/// those that can (it would otherwise plan with no oracle, silently).
pub fn live_planner(name: &str) -> Result<Box<dyn Planner>, ExecError> {
    let planner = gpuplan_solve::registry::create(name)?;
    gpuplan_solve::pipeline::check_live(planner.as_ref())?;
    Ok(planner)
}

/// Which batch a job runs at under a planner: the one policy
/// ([`BatchTarget::for_job`]), where the job allows adapting when its spec
/// lets the batch grow (`max_batch_size` above `batch_size`). The simulator
/// asks the same question.
pub fn batch_target(traits: &PlannerTraits, spec: &JobSubmission) -> BatchTarget {
    let allows = spec.max_batch_size.is_some_and(|m| m > spec.batch_size);
    BatchTarget::for_job(traits, allows, spec.batch_size)
}

/// The system clock's time (the API's; the daemon reads its own [`Clock`]).
pub fn now_unix_s() -> f64 {
    SystemClock.now_unix_s()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A random hex token from the kernel's generator.
pub fn random_token() -> Result<String, ExecError> {
    use std::io::Read;
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|source| ExecError::Io {
            context: "read /dev/urandom".into(),
            source,
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Last `n` lines of a file (reads at most its last 64 KiB).
pub fn tail(path: &std::path::Path, n: usize) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(64 * 1024);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl JobRecord {
    fn limits(&self) -> BatchLimits {
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
    fn choose_batch(&mut self, traits: &PlannerTraits, nodes: u32, gpus: u32, memo: &mut FitMemo) {
        let target = batch_target(traits, &self.spec);
        let limits = self.limits();
        if let Some(c) = self.agent.choose_batch(limits, target, nodes, gpus, memo) {
            self.local_bsz = c.local_bsz;
            self.accum_steps = c.accum_steps;
            self.batch_size = c.batch(gpus);
        }
    }

    fn live(&self) -> bool {
        self.attempt.is_some()
    }

    /// `queued`, `backoff`, `starting`, `running`, `stopping`, or a final status.
    pub fn phase(&self, now: f64) -> &'static str {
        match self.status {
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled if self.live() => "stopping",
            JobStatus::Cancelled => "cancelled",
            _ => match &self.attempt {
                Some(a) => match a.life {
                    Lifecycle::Stopping { .. } => "stopping",
                    Lifecycle::Running => "running",
                    Lifecycle::Starting => "starting",
                },
                None if !self.gpus.is_empty() => "starting",
                None if self.backoff_until_unix_s > now => "backoff",
                None => "queued",
            },
        }
    }
}

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    pub name: String,
    pub status: JobStatus,
    pub phase: String,
    pub gpus: Vec<String>,
    pub attempts: u32,
    pub restarts: u32,
    pub crashes: u32,
    pub step: u64,
    pub progress: f64,
    pub batch_size: u32,
    pub local_bsz: u32,
    pub accum_steps: u32,
    pub attained_gpu_s: f64,
    pub reason: Option<String>,
    pub last_log: Vec<String>,
    pub submit_unix_s: f64,
    pub finished_unix_s: Option<f64>,
    pub model: Option<GoodputModel>,
}

pub struct Daemon {
    pub cfg: Config,
    devices: Box<dyn Devices>,
    engine: Box<dyn Engine>,
    journal: Journal,
    jobs: BTreeMap<JobId, JobRecord>,
    next_id: u32,
    gpus: Vec<Gpu>,
    rounds: u64,
    last_round: Option<RoundStats>,
    last_tick_unix_s: f64,
    /// Jobs whose reports changed them since they were last journaled.
    dirty: BTreeSet<JobId>,
    /// The planner's traits: its batch policy decides each job's batch.
    traits: PlannerTraits,
    memo: FitMemo,
    clock: Box<dyn Clock>,
}

impl Daemon {
    /// Open the state directory, replay the journal, and re-adopt the
    /// processes of jobs that were running when the daemon stopped.
    pub fn open(
        cfg: Config,
        devices: Box<dyn Devices>,
        engine: Box<dyn Engine>,
    ) -> Result<Daemon, ExecError> {
        Daemon::open_with_clock(cfg, devices, engine, Box::new(SystemClock))
    }

    /// [`Daemon::open`] on an injected clock (tests advance a manual one).
    pub fn open_with_clock(
        cfg: Config,
        devices: Box<dyn Devices>,
        engine: Box<dyn Engine>,
        clock: Box<dyn Clock>,
    ) -> Result<Daemon, ExecError> {
        let dir = &cfg.state_dir;
        std::fs::create_dir_all(dir.join("jobs")).map_err(|source| ExecError::Io {
            context: format!("create state directory {}", dir.display()),
            source,
        })?;
        let (journal, entries) = Journal::open::<Entry>(&dir.join("journal.jsonl"))?;
        let mut jobs = BTreeMap::new();
        for e in entries {
            if let Entry::Job(j) = e {
                jobs.insert(j.id, *j);
            }
        }
        let next_id = jobs.keys().next_back().map_or(1, |k: &JobId| k.0 + 1);
        let traits = live_planner(&cfg.planner)?.traits();
        let mut d = Daemon {
            cfg,
            devices,
            engine,
            journal,
            jobs,
            next_id,
            gpus: Vec::new(),
            rounds: 0,
            last_round: None,
            last_tick_unix_s: clock.now_unix_s(),
            dirty: BTreeSet::new(),
            traits,
            memo: FitMemo::default(),
            clock,
        };
        d.recover()?;
        let all: Vec<Entry> = d.jobs.values().map(|j| Entry::Job(Box::new(j.clone()))).collect();
        d.journal.compact(&all)?;
        Ok(d)
    }

    /// Finish or roll back what a crash interrupted: attempts journaled as
    /// intended but not as spawned are looked up among live processes;
    /// a half-started attempt is stopped and relaunched.
    fn recover(&mut self) -> Result<(), ExecError> {
        let now = self.clock.now_unix_s();
        let ids: Vec<JobId> = self.jobs.keys().copied().collect();
        for id in ids {
            let job = self.jobs.get_mut(&id).expect("id from keys");
            let Some(a) = job.attempt.as_mut() else {
                continue;
            };
            // Find the ranks by the exit-file path in their command line,
            // not by the journaled process group: a group that died while
            // the daemon was down may have had its id reused.
            let found = self.engine.adopt(&a.dir, a.gpus.len() as u32);
            let started = found.iter().all(Option::is_some);
            a.ranks = found
                .into_iter()
                .enumerate()
                .map(|(r, f)| {
                    f.unwrap_or(RankProc {
                        rank: r as u32,
                        pgid: 0,
                    })
                })
                .collect();
            if a.life == Lifecycle::Starting && !started {
                // Half started: roll back (stop what started, relaunch later).
                a.order_stop(now);
            }
            if a.life == Lifecycle::Starting {
                a.life = Lifecycle::Running;
            }
            if let Lifecycle::Stopping { since_unix_s, .. } = &mut a.life {
                // The grace period restarts: the old clock is lost.
                *since_unix_s = now;
                for r in &a.ranks {
                    self.engine.signal(r, Signal::Term);
                }
            }
        }
        Ok(())
    }

    pub fn admin_token_path(&self) -> PathBuf {
        self.cfg.state_dir.join("token")
    }

    fn save(&mut self, ids: &[JobId]) -> Result<(), ExecError> {
        let entries: Vec<Entry> = ids
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .map(|j| Entry::Job(Box::new(j.clone())))
            .collect();
        for id in ids {
            self.dirty.remove(id);
        }
        self.journal.append(&entries)?;
        if self.journal.appended > 4096.max(4 * self.jobs.len()) {
            let all: Vec<Entry> = self
                .jobs
                .values()
                .map(|j| Entry::Job(Box::new(j.clone())))
                .collect();
            self.journal.compact(&all)?;
        }
        Ok(())
    }

    pub fn submit(&mut self, spec: JobSubmission) -> Result<(JobId, String), ExecError> {
        spec.check("request").map_err(ExecError::Spec)?;
        let id = JobId(self.next_id);
        self.next_id += 1;
        let token = random_token()?;
        let job = JobRecord {
            id,
            batch_size: spec.batch_size,
            spec,
            submit_unix_s: self.clock.now_unix_s(),
            status: JobStatus::Queued,
            reason: None,
            token: token.clone(),
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
        };
        self.jobs.insert(id, job);
        self.save(&[id])?;
        Ok((id, token))
    }

    pub fn job_token(&self, id: JobId) -> Option<&str> {
        self.jobs.get(&id).map(|j| j.token.as_str())
    }

    pub fn cancel(&mut self, id: JobId) -> Result<JobView, ExecError> {
        let now = self.clock.now_unix_s();
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| ExecError::NotFound(format!("no job {}", id.0)))?;
        if job.status.is_final() {
            return Err(ExecError::Conflict(format!(
                "job {} is already {}",
                id.0,
                job.phase(now)
            )));
        }
        job.status = JobStatus::Cancelled;
        job.gpus.clear();
        job.finished_unix_s = Some(now);
        let mut term = Vec::new();
        if let Some(a) = job.attempt.as_mut() {
            if a.order_stop(now) {
                term = a.ranks.clone();
            }
        }
        self.save(&[id])?;
        for r in &term {
            self.engine.signal(r, Signal::Term);
        }
        Ok(self.view(id).expect("job exists"))
    }

    pub fn report(&mut self, id: JobId, r: Report) -> Result<(), ExecError> {
        let bad =
            |f: &str, v: f64| ExecError::Request(format!("report:{f}: must be finite and >= 0, got {v}"));
        for (f, v) in [
            ("step_time_s", Some(r.step_time_s)),
            ("accum_time_s", r.accum_time_s),
            ("grad_sqr", r.grad_sqr),
            ("grad_var", r.grad_var),
            ("progress", r.progress),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return Err(bad(f, v));
                }
            }
        }
        if r.step_time_s <= 0.0 || r.local_bsz == 0 {
            return Err(ExecError::Request(
                "report: step_time_s and local_bsz must be > 0".into(),
            ));
        }
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| ExecError::NotFound(format!("no job {}", id.0)))?;
        let Some(a) = job.attempt.as_ref().filter(|a| !a.is_stopping()) else {
            // A late report from a stopping attempt describes an old placement.
            return Ok(());
        };
        let gpus = a.gpus.len() as u32;
        let nodes = a
            .gpus
            .iter()
            .filter_map(|u| self.gpus.iter().find(|g| &g.uuid == u))
            .map(|g| g.node.as_str())
            .collect::<BTreeSet<_>>()
            .len()
            .max(1) as u32;
        job.agent.observe(Observation {
            nodes,
            gpus,
            local_bsz: r.local_bsz,
            accum_time_s: r.accum_time_s.unwrap_or(r.step_time_s),
            step_time_s: r.step_time_s,
        });
        if let (Some(sqr), Some(var)) = (r.grad_sqr, r.grad_var) {
            job.agent.grad = Some(GradParams { sqr, var });
        }
        if let Some(s) = r.step {
            job.step = s;
        }
        if let Some(p) = r.progress {
            job.progress = p;
        }
        if let Some(e) = r.epoch {
            job.epoch = e;
        }
        self.dirty.insert(id);
        Ok(())
    }

    pub fn inject(&mut self, uuid: &str, fault: Fault) -> Result<(), ExecError> {
        self.devices.inject(uuid, fault)
    }

    pub fn view(&self, id: JobId) -> Option<JobView> {
        let now = self.clock.now_unix_s();
        let j = self.jobs.get(&id)?;
        let mut m = j.clone();
        Some(JobView {
            id: j.id,
            name: j.spec.name.clone(),
            status: j.status,
            phase: j.phase(now).to_string(),
            gpus: j.gpus.clone(),
            attempts: j.attempts,
            restarts: j.restarts,
            crashes: j.crashes,
            step: j.step,
            progress: j.progress,
            batch_size: j.batch_size,
            local_bsz: j.local_bsz,
            accum_steps: j.accum_steps,
            attained_gpu_s: j.attained_gpu_s,
            reason: j.reason.clone(),
            last_log: j.last_log.clone(),
            submit_unix_s: j.submit_unix_s,
            finished_unix_s: j.finished_unix_s,
            // A view shows a fit already made; it does not fit.
            model: if j.agent.is_fitted() {
                m.model(&mut FitMemo::default())
            } else {
                None
            },
        })
    }

    pub fn views(&self) -> Vec<JobView> {
        self.jobs.keys().filter_map(|id| self.view(*id)).collect()
    }

    /// Log lines of a job's latest attempt, rank `rank`.
    pub fn logs(&self, id: JobId, rank: u32, lines: usize) -> Result<Vec<String>, ExecError> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| ExecError::NotFound(format!("no job {}", id.0)))?;
        if j.attempts == 0 {
            return Ok(j.last_log.clone());
        }
        let dir = self.attempt_dir(id, j.attempts);
        Ok(tail(&log_file(&dir, rank), lines))
    }

    fn attempt_dir(&self, id: JobId, n: u32) -> PathBuf {
        self.cfg
            .state_dir
            .join("jobs")
            .join(id.0.to_string())
            .join(format!("attempt-{n}"))
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    pub fn backend(&self) -> &'static str {
        self.devices.backend()
    }

    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    pub fn last_round(&self) -> Option<&RoundStats> {
        self.last_round.as_ref()
    }

    /// Collect devices and build the round. `None` when there is nothing to plan.
    pub fn prepare(&mut self) -> Result<Option<Prepared>, ExecError> {
        let t0 = Instant::now();
        let now = self.clock.now_unix_s();
        self.rounds += 1;
        let mut stats = RoundStats {
            round: self.rounds,
            ..RoundStats::default()
        };
        self.gpus = self.devices.collect()?;
        let mut by_node: BTreeMap<&str, Vec<&Gpu>> = BTreeMap::new();
        for g in self.gpus.iter().filter(|g| g.health == Health::Ok) {
            by_node.entry(g.node.as_str()).or_default().push(g);
        }
        // GPU k of node i in the round is the node's k-th healthy GPU by
        // device index: `node_gpus[i][k]` maps it back to its UUID.
        let mut slot_of: HashMap<String, GpuId> = HashMap::new();
        let mut nodes = Vec::new();
        let mut node_gpus = Vec::new();
        for (i, (name, gs)) in by_node.iter_mut().enumerate() {
            gs.sort_by_key(|g| g.index);
            for (k, g) in gs.iter().enumerate() {
                slot_of.insert(g.uuid.clone(), GpuId::new(NodeId(i as u32), k as u32));
            }
            nodes.push(Node {
                name: name.to_string(),
                gpus: gs.len() as u32,
                gpu_type: gs[0].name.as_str().into(),
            });
            node_gpus.push(gs.iter().map(|g| g.uuid.clone()).collect::<Vec<_>>());
        }
        stats.healthy_gpus = slot_of.len();
        // Jobs on GPUs that left or turned unhealthy lose them now and are re-planned.
        let mut lost = Vec::new();
        let mut term = Vec::new();
        for j in self.jobs.values_mut() {
            let Some(bad) = j.gpus.iter().find(|u| !slot_of.contains_key(*u)).cloned() else {
                continue;
            };
            let why = match self.gpus.iter().find(|g| g.uuid == bad) {
                Some(Gpu {
                    health: Health::Unhealthy { reason },
                    ..
                }) => format!("GPU {bad} is unhealthy ({reason})"),
                _ => format!("GPU {bad} disappeared"),
            };
            j.reason = Some(format!("{why}; re-planned"));
            j.gpus.clear();
            if j.status == JobStatus::Running {
                j.status = JobStatus::Queued;
            }
            if let Some(a) = j.attempt.as_mut() {
                if a.order_stop(now) {
                    term.extend(a.ranks.clone());
                }
            }
            lost.push(j.id);
        }
        let dirty: Vec<JobId> = self.dirty.iter().copied().chain(lost).collect();
        self.save(&dirty)?;
        for r in &term {
            self.engine.signal(r, Signal::Term);
        }
        if nodes.is_empty() {
            stats.note = Some("no healthy GPUs".into());
            stats.collect_ms = ms(t0);
            self.last_round = Some(stats);
            return Ok(None);
        }
        let mut round_jobs = Vec::new();
        let mut targets = HashMap::new();
        for j in self.jobs.values_mut() {
            let active = match j.status {
                JobStatus::Running => true,
                JobStatus::Queued => j.backoff_until_unix_s <= now && !j.live(),
                _ => false,
            };
            if !active {
                continue;
            }
            let alloc = Allocation::from_gpus(j.gpus.iter().map(|u| slot_of[u]).collect());
            targets.insert(j.id, j.gpus.clone());
            let facts = JobFacts {
                id: j.id,
                // Users may give several jobs one name; a round's names are
                // unique (plans are reported by name), so the id goes in.
                name: format!("{}#{}", j.spec.name, j.id.0),
                app: j.spec.app.clone().unwrap_or_default(),
                submit_s: j.submit_unix_s,
                requested_gpus: j.spec.max_gpus,
                batch_size: j.spec.batch_size,
                min_gpus: j.spec.min_gpus,
                max_gpus: j.spec.max_gpus,
                preemptible: j.spec.preemptible,
                restart_penalty_s: j.spec.restart_cost_s,
                limits: Some(j.limits()),
            };
            let state = JobState {
                progress: j.progress,
                epoch: j.epoch,
                attained_gpu_s: j.attained_gpu_s,
                age_s: (now - j.submit_unix_s).max(0.0),
                restarts: j.restarts,
                allocation: alloc,
                max_gpus_used: j.max_gpus_used,
                batch_size: j.batch_size,
                local_bsz: j.local_bsz,
                accum_steps: j.accum_steps,
            };
            round_jobs.push(round_job(facts, state, &mut j.agent, None, &mut self.memo));
        }
        stats.active_jobs = round_jobs.len();
        stats.collect_ms = ms(t0);
        if round_jobs.is_empty() {
            self.last_round = Some(stats);
            return Ok(None);
        }
        Ok(Some(Prepared {
            round: Round {
                now_s: now,
                cluster: Cluster { nodes },
                jobs: round_jobs,
                params: self.cfg.params,
            },
            node_gpus,
            targets,
            stats,
        }))
    }

    /// Apply a round's decision (already validated by the pipeline): map its
    /// GPUs to devices, journal, then signal the jobs that move. Launches
    /// happen in [`Daemon::tick`] once their GPUs are free.
    pub fn apply(
        &mut self,
        prep: Prepared,
        decision: Result<Decision, String>,
    ) -> Result<RoundStats, ExecError> {
        let t0 = Instant::now();
        let now = self.clock.now_unix_s();
        let Prepared {
            round,
            node_gpus,
            targets,
            mut stats,
        } = prep;
        let plan = match decision {
            Ok(d) => d.plan,
            Err(e) => {
                stats.note = Some(format!("planner error: {e}"));
                self.last_round = Some(stats.clone());
                return Ok(stats);
            }
        };
        stats.plan_ms = plan.solve_ms;
        stats.status = Some(format!("{:?}", plan.status).to_lowercase());
        // Jobs whose plan differs and who are still as the round saw them.
        let mut changed: Vec<(JobId, Allocation)> = Vec::new();
        for rj in &round.jobs {
            let Some(j) = self.jobs.get(&rj.id) else { continue };
            let same_state = matches!(j.status, JobStatus::Queued | JobStatus::Running)
                && targets.get(&rj.id) == Some(&j.gpus);
            let new = plan.get(rj.id);
            if same_state && !new.same_gpus(&rj.state.allocation) {
                changed.push((rj.id, new));
            }
        }
        let moving: BTreeSet<JobId> = changed.iter().map(|c| c.0).collect();
        let held: BTreeSet<&String> = self
            .jobs
            .values()
            .filter(|j| !moving.contains(&j.id))
            .flat_map(|j| j.gpus.iter())
            .collect();
        let mut pool: Vec<Vec<String>> = node_gpus
            .iter()
            .map(|gs| gs.iter().filter(|u| !held.contains(u)).cloned().collect())
            .collect();
        let mut term = Vec::new();
        for (id, alloc) in &changed {
            let j = self.jobs.get_mut(id).expect("changed job exists");
            let per_node = alloc.per_node();
            let mut picked = Vec::new();
            for &(n, k) in &per_node {
                let free = &mut pool[n.0 as usize];
                // The planned GPUs, unless a job outside the round still
                // holds one; then another free GPU of the node.
                let planned: Vec<&String> = alloc
                    .gpus()
                    .iter()
                    .filter(|g| g.node == n)
                    .filter_map(|g| node_gpus[n.0 as usize].get(g.index as usize))
                    .collect();
                let mut mine: Vec<String> = free.iter().filter(|u| planned.contains(u)).cloned().collect();
                mine.truncate(k as usize);
                for u in free.iter() {
                    if mine.len() as u32 >= k {
                        break;
                    }
                    if !mine.contains(u) {
                        mine.push(u.clone());
                    }
                }
                free.retain(|u| !mine.contains(u));
                picked.extend(mine);
            }
            let had = !j.gpus.is_empty() || j.live();
            j.gpus = picked;
            if j.gpus.is_empty() {
                j.status = JobStatus::Queued;
            } else {
                j.status = JobStatus::Running;
                if had || j.attempts > 0 {
                    j.restarts += 1;
                }
                j.max_gpus_used = j.max_gpus_used.max(j.gpus.len() as u32);
                let nodes = per_node.len() as u32;
                j.choose_batch(&self.traits, nodes, j.gpus.len() as u32, &mut self.memo);
            }
            if let Some(a) = j.attempt.as_mut() {
                if a.order_stop(now) {
                    term.extend(a.ranks.clone());
                }
            }
        }
        stats.changed_jobs = changed.len();
        if !changed.is_empty() {
            let allocations = changed
                .iter()
                .map(|(id, _)| (*id, self.jobs[id].gpus.clone()))
                .collect();
            self.journal.append(&[Entry::Plan {
                round: stats.round,
                unix_s: now,
                planner: plan.planner.clone(),
                allocations,
            }])?;
            let ids: Vec<JobId> = changed.iter().map(|c| c.0).collect();
            self.save(&ids)?;
        }
        for r in &term {
            self.engine.signal(r, Signal::Term);
        }
        stats.apply_ms = ms(t0);
        self.last_round = Some(stats.clone());
        Ok(stats)
    }

    /// Watch processes: reap exits, escalate to SIGKILL, handle crashes and
    /// completions, and launch jobs whose GPUs are free.
    pub fn tick(&mut self) -> Result<(), ExecError> {
        let now = self.clock.now_unix_s();
        let dt = (now - self.last_tick_unix_s).max(0.0);
        self.last_tick_unix_s = now;
        let ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.live())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.watch(id, now, dt)?;
        }
        // Launch: a job's GPUs must not be held by another job's live attempt.
        let busy: BTreeSet<String> = self
            .jobs
            .values()
            .filter_map(|j| j.attempt.as_ref())
            .flat_map(|a| a.gpus.iter().cloned())
            .collect();
        let ready: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| {
                j.status == JobStatus::Running
                    && !j.live()
                    && !j.gpus.is_empty()
                    && j.gpus.iter().all(|u| !busy.contains(u))
            })
            .map(|j| j.id)
            .collect();
        // Journal every launch intent with one fsync, spawn, then journal
        // the process groups with one more.
        let reqs: Vec<(JobId, LaunchRequest)> = ready
            .iter()
            .map(|&id| (id, self.prepare_launch(id, now)))
            .collect();
        self.save(&ready)?;
        for (id, req) in reqs {
            self.finish_launch(id, &req, now);
        }
        self.save(&ready)?;
        Ok(())
    }

    fn watch(&mut self, id: JobId, now: f64, dt: f64) -> Result<(), ExecError> {
        let grace_default = self.cfg.grace_s;
        let done_file = done_file(&self.cfg.state_dir, id);
        let j = self.jobs.get_mut(&id).expect("live job exists");
        let grace = j.spec.grace_s.unwrap_or(grace_default);
        let a = j.attempt.as_mut().expect("live job has an attempt");
        let st: Vec<RankStatus> = a.ranks.iter().map(|r| self.engine.poll(&a.dir, r)).collect();
        let running = st.iter().filter(|s| **s == RankStatus::Running).count();
        j.attained_gpu_s += dt * a.gpus.len() as f64 * (running > 0) as u32 as f64;
        let failed = st
            .iter()
            .any(|s| matches!(s, RankStatus::Exited(c) if *c != Some(0)));
        let mut act: Option<(Signal, Vec<RankProc>)> = None;
        let mut save = false;
        let stop_since = match a.life {
            Lifecycle::Stopping {
                since_unix_s,
                killed: false,
                ..
            } => Some(since_unix_s),
            _ => None,
        };
        if failed && !a.is_stopping() && running > 0 {
            a.life = Lifecycle::Stopping {
                since_unix_s: now,
                cause: StopCause::Crashed,
                killed: false,
            };
            act = Some((Signal::Term, a.ranks.clone()));
            save = true;
        } else if running > 0 && stop_since.is_some_and(|t| now - t >= grace) {
            if let Lifecycle::Stopping { killed, .. } = &mut a.life {
                *killed = true;
            }
            act = Some((Signal::Kill, a.ranks.clone()));
            save = true;
        }
        if running == 0 {
            let a = j.attempt.take().expect("checked");
            let all_ok = st.iter().all(|s| *s == RankStatus::Exited(Some(0)));
            // Rank 0 exiting 0 after our SIGTERM means training had already
            // finished when the stop came (the protocol asks for a non-zero
            // exit on SIGTERM); the other ranks' 143 must not relaunch it.
            let (stopping, crash_stop) = match a.life {
                Lifecycle::Stopping { cause, .. } => (true, cause == StopCause::Crashed),
                _ => (false, false),
            };
            let finished_under_term =
                stopping && !crash_stop && st.first() == Some(&RankStatus::Exited(Some(0)));
            let crashed = crash_stop || (failed && !stopping);
            let marked = done_file.exists();
            if (all_ok || finished_under_term || marked) && j.status != JobStatus::Cancelled {
                j.status = JobStatus::Completed;
                j.finished_unix_s = Some(now);
                j.gpus.clear();
                j.reason = None;
            } else if crashed && j.status != JobStatus::Cancelled {
                let (rank, code) = st
                    .iter()
                    .enumerate()
                    .find_map(|(i, s)| match s {
                        RankStatus::Exited(c) if *c != Some(0) => Some((i as u32, *c)),
                        _ => None,
                    })
                    .unwrap_or((0, None));
                j.crashes += 1;
                j.last_log = tail(&log_file(&a.dir, rank), self.cfg.log_lines);
                let code = code.map_or("a signal".to_string(), |c| format!("code {c}"));
                let max = j.spec.max_crashes.unwrap_or(self.cfg.max_crashes);
                j.gpus.clear();
                if j.crashes >= max {
                    j.status = JobStatus::Failed;
                    j.finished_unix_s = Some(now);
                    j.reason = Some(format!(
                        "rank {rank} exited with {code}; failed after {} crashes",
                        j.crashes
                    ));
                } else {
                    j.status = JobStatus::Queued;
                    let delay = self.cfg.backoff_s * 2f64.powi(j.crashes as i32 - 1);
                    j.backoff_until_unix_s = now + delay;
                    j.reason = Some(format!(
                        "rank {rank} exited with {code}; crash {} of {max}, restarting after {delay:.1} s",
                        j.crashes
                    ));
                }
            }
            // Otherwise it was stopped on purpose (143 after SIGTERM is no failure).
            save = true;
        }
        if save {
            self.save(&[id])?;
        }
        if let Some((sig, ranks)) = act {
            for r in &ranks {
                self.engine.signal(r, sig);
            }
        }
        Ok(())
    }

    /// Record the attempt (not yet journaled) and build its launch request.
    fn prepare_launch(&mut self, id: JobId, now: f64) -> LaunchRequest {
        let dir = {
            let j = &self.jobs[&id];
            self.attempt_dir(id, j.attempts + 1)
        };
        let report_base = self.cfg.report_base.clone();
        let state_dir = self.cfg.state_dir.clone();
        let gpu_info: HashMap<&str, &Gpu> = self.gpus.iter().map(|g| (g.uuid.as_str(), g)).collect();
        let j = self.jobs.get_mut(&id).expect("ready job exists");
        // Ranks: one per GPU, grouped by node; each sees its node's GPUs.
        let mut per_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in &j.gpus {
            let node = gpu_info
                .get(u.as_str())
                .map_or("?".to_string(), |g| g.node.clone());
            per_node.entry(node).or_default().push(u.clone());
        }
        let mut ranks = Vec::new();
        for (node, gs) in &per_node {
            for (local, _) in gs.iter().enumerate() {
                ranks.push(RankSpec {
                    rank: ranks.len() as u32,
                    local_rank: local as u32,
                    node: node.clone(),
                    visible: gs.join(","),
                });
            }
        }
        if j.local_bsz == 0 {
            j.choose_batch(
                &self.traits,
                per_node.len() as u32,
                j.gpus.len() as u32,
                &mut self.memo,
            );
        }
        j.attempts += 1;
        j.attempt = Some(Attempt {
            n: j.attempts,
            gpus: j.gpus.clone(),
            dir: dir.clone(),
            ranks: Vec::new(),
            life: Lifecycle::Starting,
            started_unix_s: now,
        });
        let ckpt = checkpoint_dir(&state_dir, id);
        let _ = std::fs::create_dir_all(&ckpt);
        let done = done_file(&state_dir, id);
        let env = vec![
            ("MASTER_ADDR".to_string(), "127.0.0.1".to_string()),
            ("MASTER_PORT".to_string(), free_port().to_string()),
            ("GPUPLAN_JOB_ID".to_string(), id.0.to_string()),
            ("GPUPLAN_JOB_NAME".to_string(), j.spec.name.clone()),
            ("GPUPLAN_JOB_TOKEN".to_string(), j.token.clone()),
            (
                "GPUPLAN_REPORT_URL".to_string(),
                format!("{report_base}/v1/jobs/{}/report", id.0),
            ),
            ("GPUPLAN_BATCH_SIZE".to_string(), j.batch_size.to_string()),
            ("GPUPLAN_LOCAL_BSZ".to_string(), j.local_bsz.to_string()),
            ("GPUPLAN_ACCUM_STEPS".to_string(), j.accum_steps.to_string()),
            ("GPUPLAN_ATTEMPT".to_string(), j.attempts.to_string()),
            (
                "GPUPLAN_CHECKPOINT_DIR".to_string(),
                ckpt.to_string_lossy().into_owned(),
            ),
            (
                "GPUPLAN_DONE_FILE".to_string(),
                done.to_string_lossy().into_owned(),
            ),
        ];
        LaunchRequest {
            command: j.spec.command.clone(),
            dir,
            ranks,
            env,
            uid: j.spec.uid,
            writable: vec![ckpt],
        }
    }

    /// Spawn a journaled attempt; a spawn failure fails the job.
    fn finish_launch(&mut self, id: JobId, req: &LaunchRequest, now: f64) {
        let res = self.engine.launch(req);
        let j = self.jobs.get_mut(&id).expect("ready job exists");
        let a = j.attempt.as_mut().expect("just set");
        match res {
            Ok(ranks) => {
                a.ranks = ranks;
                a.life = Lifecycle::Running;
            }
            Err(e) => {
                j.attempt = None;
                j.crashes += 1;
                j.gpus.clear();
                j.status = JobStatus::Failed;
                j.reason = Some(format!("launch failed: {e}"));
                j.finished_unix_s = Some(now);
            }
        }
    }

    /// One whole round without the async loop: tick, prepare, plan, apply.
    /// The benchmark and tests drive the daemon this way.
    pub fn round_blocking(&mut self, planner: &mut dyn Planner) -> Result<RoundStats, ExecError> {
        self.tick()?;
        let Some(prep) = self.prepare()? else {
            return Ok(self.last_round.clone().unwrap_or_default());
        };
        let plan = run_round(planner, &prep.round, &self.cfg.limits).map_err(|e| e.to_string());
        let stats = self.apply(prep, plan)?;
        self.tick()?;
        Ok(stats)
    }

    /// Every job, for tests and the benchmark.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values()
    }
}

/// A free TCP port on loopback for MASTER_PORT (the OS picks it).
/// The file a finished job creates (`GPUPLAN_DONE_FILE`): completion
/// that no exit code can hide. A stop that lands while a job exits can
/// turn its 0 into 143 (Python, for one, restores the default SIGTERM
/// action while it shuts down), and a job relaunched after finishing
/// would finish twice.
fn done_file(state_dir: &Path, id: JobId) -> PathBuf {
    checkpoint_dir(state_dir, id).join("gpuplan-done")
}

/// A job's checkpoint directory (`GPUPLAN_CHECKPOINT_DIR`), kept across attempts.
fn checkpoint_dir(state_dir: &Path, id: JobId) -> PathBuf {
    state_dir.join("jobs").join(id.0.to_string()).join("checkpoint")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(29500, |a| a.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::FakeDevices;
    use crate::engine::LocalEngine;
    use gpuplan_core::PlanStatus;

    fn daemon(state: &std::path::Path) -> Daemon {
        daemon_with(state, "greedy", FakeDevices::new(1, 4))
    }

    fn daemon_with(state: &std::path::Path, planner: &str, devices: FakeDevices) -> Daemon {
        let mut cfg = Config::new(state.to_path_buf(), planner);
        // A SIGTERM that lands while a rank's shell is still starting can be
        // lost; SIGKILL after the grace period covers it, so waits below
        // allow several grace periods.
        cfg.grace_s = 1.0;
        Daemon::open(cfg, Box::new(devices), Box::new(LocalEngine::default())).unwrap()
    }

    fn spec() -> JobSubmission {
        JobSubmission::from_toml(
            "name = \"s\"\ncommand = \"exec sleep 30\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
            "t",
        )
        .unwrap()
    }

    fn plan_gpus(d: &mut Daemon, id: JobId, k: u32) {
        let prep = d.prepare().unwrap().unwrap();
        let mut plan = gpuplan_core::Plan::new("hand", PlanStatus::Feasible);
        plan.allocations
            .insert(id, Allocation::from_counts(&[(NodeId(0), k)]));
        gpuplan_core::bind_plan(&prep.round, &mut plan);
        let decision = Decision {
            plan,
            diff: Vec::new(),
        };
        d.apply(prep, Ok(decision)).unwrap();
        d.tick().unwrap();
    }

    fn wait_stopped(d: &mut Daemon, id: JobId) {
        for _ in 0..500 {
            d.tick().unwrap();
            if d.jobs[&id].attempt.is_none() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("job did not stop");
    }

    #[test]
    fn moves_keep_own_gpus_and_restart_readopts_running_ranks() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut d = daemon(&dir);
        let (id, _) = d.submit(spec()).unwrap();
        plan_gpus(&mut d, id, 2);
        let first = d.jobs[&id].gpus.clone();
        assert_eq!(first.len(), 2);
        assert_eq!(d.jobs[&id].attempt.as_ref().unwrap().life, Lifecycle::Running);
        // Growing to 3 GPUs keeps the 2 it has: SIGTERM, exit, relaunch.
        plan_gpus(&mut d, id, 3);
        let grown = d.jobs[&id].gpus.clone();
        assert!(first.iter().all(|g| grown.contains(g)), "{first:?} -> {grown:?}");
        assert_eq!(d.jobs[&id].restarts, 1);
        let a = d.jobs[&id].attempt.as_ref().unwrap();
        assert!(a.n == 2 || a.is_stopping(), "old ranks were told to stop");
        for _ in 0..500 {
            d.tick().unwrap();
            if d.jobs[&id].attempt.as_ref().is_some_and(|a| a.gpus.len() == 3) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let a = d.jobs[&id].attempt.clone().unwrap();
        assert_eq!((a.n, a.ranks.len()), (2, 3));
        // The daemon goes away without stopping anything; a new one adopts the ranks.
        drop(d);
        let mut d = daemon(&dir);
        let b = d.jobs[&id].attempt.clone().unwrap();
        assert_eq!(b.ranks, a.ranks, "re-adopted the same process groups");
        d.tick().unwrap();
        assert_eq!(d.view(id).unwrap().phase, "running");
        d.cancel(id).unwrap();
        wait_stopped(&mut d, id);
        assert_eq!(d.view(id).unwrap().phase, "cancelled");
        assert_eq!(d.jobs[&id].crashes, 0, "143 after SIGTERM is no crash");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A job's own restart cost reaches the planner's restart factor.
    #[test]
    fn a_jobs_restart_cost_reaches_the_round() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-rc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut d = daemon(&dir);
        let mut with = spec();
        with.restart_cost_s = Some(120.0);
        let (a, _) = d.submit(with).unwrap();
        let (b, _) = d.submit(spec()).unwrap();
        let prep = d.prepare().unwrap().unwrap();
        let of = |id| {
            prep.round
                .jobs
                .iter()
                .find(|j| j.id == id)
                .unwrap()
                .restart_penalty_s
        };
        assert_eq!(of(a), Some(120.0));
        assert_eq!(of(b), None, "the cluster-wide penalty applies");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A job that has said it is done is complete, even when a stop turned
    /// its exit into 143: it is not relaunched to finish a second time.
    #[test]
    fn the_done_file_completes_a_job_whatever_its_exit() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-done-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut d = daemon(&dir);
        let spec = JobSubmission::from_toml(
            "name = \"d\"\ncommand = 'touch \"$GPUPLAN_DONE_FILE\"; exec sleep 30'\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let (id, _) = d.submit(spec).unwrap();
        plan_gpus(&mut d, id, 1);
        let marker = done_file(&d.cfg.state_dir, id);
        for _ in 0..500 {
            if marker.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(marker.exists(), "the job created GPUPLAN_DONE_FILE");
        // A re-allocation stops it: sleep dies of SIGTERM (143).
        plan_gpus(&mut d, id, 2);
        wait_stopped(&mut d, id);
        assert_eq!(d.view(id).unwrap().phase, "completed");
        d.tick().unwrap();
        assert!(d.jobs[&id].attempt.is_none(), "not relaunched");
        assert_eq!(d.jobs[&id].attempts, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Drift case 1 of issue 12: tiresias does not honour the interference
    /// rule, and three 6-GPU jobs on 3×4 GPUs need two of them to share a
    /// node. The daemon once threw such plans away every round, so none
    /// ever started; the pipeline now relaxes the rule, and all complete.
    #[test]
    fn tiresias_runs_three_six_gpu_jobs_on_3x4_to_completion() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-tir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut d = daemon_with(&dir, "tiresias", FakeDevices::new(3, 4));
        let mut planner = live_planner("tiresias").unwrap();
        let spec = JobSubmission::from_toml(
            "name = \"six\"\ncommand = \"exec sleep 1\"\nmin_gpus = 6\nmax_gpus = 6\nbatch_size = 48\nmax_batch_size = 480\n",
            "t",
        )
        .unwrap();
        let ids: Vec<JobId> = (0..3).map(|_| d.submit(spec.clone()).unwrap().0).collect();
        let mut rounds = 0;
        while !ids.iter().all(|id| d.jobs[id].status.is_final()) {
            rounds += 1;
            assert!(rounds < 300, "not all complete: {:?}", d.views());
            let st = d.round_blocking(planner.as_mut()).unwrap();
            assert!(st.note.is_none(), "round {rounds}: {:?}", st.note);
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        for id in &ids {
            let j = &d.jobs[id];
            assert_eq!(j.status, JobStatus::Completed, "{:?}", d.view(*id));
            assert_eq!(j.max_gpus_used, 6);
            // A fixed-batch planner keeps the user's batch, though the spec
            // would let it grow.
            assert_eq!(j.batch_size, 48);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Drift case 2: a planner that needs the simulator's oracle is refused
    /// at start (`serve` calls this), naming the planners that can run.
    #[test]
    fn oracle_planners_are_refused_with_the_live_list() {
        let e = live_planner("srtf").err().expect("srtf is refused").to_string();
        assert!(e.contains("srtf"), "{e}");
        for live in gpuplan_solve::registry::live_names() {
            assert!(e.contains(live), "{e} lacks {live}");
        }
        assert!(live_planner("tiresias").is_ok());
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-srtf-{}", std::process::id()));
        let mut cfg = Config::new(dir.clone(), "srtf");
        cfg.grace_s = 1.0;
        assert!(Daemon::open(
            cfg,
            Box::new(FakeDevices::new(1, 1)),
            Box::new(LocalEngine::default())
        )
        .is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Supervision reads only the injected clock: a job that ignores
    /// SIGTERM is killed once the clock passes its grace period, not before,
    /// and a crashed job waits out its back-off on the same clock.
    #[test]
    fn grace_and_backoff_follow_the_injected_clock() {
        use crate::clock::ManualClock;
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-clock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let clock = ManualClock::new(1_000_000.0);
        let mut cfg = Config::new(dir.clone(), "greedy");
        cfg.grace_s = 60.0;
        cfg.backoff_s = 100.0;
        let mut d = Daemon::open_with_clock(
            cfg,
            Box::new(FakeDevices::new(1, 4)),
            Box::new(LocalEngine::default()),
            Box::new(clock.clone()),
        )
        .unwrap();
        let stubborn = JobSubmission::from_toml(
            "name = \"t\"\ncommand = \"trap '' TERM; exec sleep 30\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let (id, _) = d.submit(stubborn).unwrap();
        plan_gpus(&mut d, id, 1);
        std::thread::sleep(std::time::Duration::from_millis(300));
        d.cancel(id).unwrap();
        for _ in 0..10 {
            d.tick().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        assert_eq!(d.view(id).unwrap().phase, "stopping", "SIGTERM is ignored");
        clock.advance(61.0);
        wait_stopped(&mut d, id);
        assert_eq!(d.view(id).unwrap().phase, "cancelled");

        let crash = JobSubmission::from_toml(
            "name = \"c\"\ncommand = \"exit 3\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let (id, _) = d.submit(crash).unwrap();
        plan_gpus(&mut d, id, 1);
        wait_stopped(&mut d, id);
        assert_eq!(d.jobs[&id].crashes, 1);
        assert_eq!(d.view(id).unwrap().phase, "backoff");
        assert!(d.prepare().unwrap().is_none(), "not planned during its back-off");
        clock.advance(101.0);
        assert_eq!(d.view(id).unwrap().phase, "queued");
        assert!(d.prepare().unwrap().is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An attempt journaled by the previous release (lifecycle as flags)
    /// loads into the lifecycle enum and is written back the same way.
    #[test]
    fn attempts_keep_the_previous_releases_journal_form() {
        let old = r#"{"n":2,"gpus":["fake-0-1"],"dir":"/s/jobs/1/attempt-2","launched":true,"ranks":[{"rank":0,"pgid":4242}],"term_sent_unix_s":17.5,"kill_sent":true,"started_unix_s":3.0}"#;
        let a: Attempt = serde_json::from_str(old).unwrap();
        assert_eq!(
            a.life,
            Lifecycle::Stopping {
                since_unix_s: 17.5,
                cause: StopCause::Ordered,
                killed: true
            }
        );
        let back: serde_json::Value = serde_json::to_value(&a).unwrap();
        assert_eq!(back["term_sent_unix_s"], 17.5);
        assert_eq!(back["launched"], true);
        assert_eq!(back["crashed"], false);
        let starting = r#"{"n":1,"gpus":[],"dir":"/d","launched":false,"ranks":[],"started_unix_s":1.0}"#;
        let a: Attempt = serde_json::from_str(starting).unwrap();
        assert_eq!(a.life, Lifecycle::Starting);
    }
}
