//! The daemon: the job table, its journal, and the API's operations
//! (submit, cancel, report, views). Every change is journaled before it is
//! acted on.
//!
//! It is a state machine: it holds the job table and the journal and
//! nothing that blocks. Its methods take events (a submission, a report,
//! what the engine saw, a planned round) and return or queue effects
//! (attempts to look at, launches, stops in its outbox), which
//! the effects (effects.rs) run off the lock. A round's steps are
//! [`crate::round`]'s (over the job table, which they are handed); the one
//! loop that runs rounds and ticks is [`crate::driver`]. Between rounds a
//! tick lets the [`Supervisor`] settle what the engine saw of attempts
//! (exits, stops past their grace period, crashes with back-off) and
//! launches jobs whose GPUs are free.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use gpuplan_core::{GoodputModel, GradParams, JobId, Observation, PolicyParams};
use gpuplan_solve::{Decision, FitMemo, Planner, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SystemClock};
use crate::device::{Devices, Gpu};
use crate::engine::{AttemptSpec, Engine, Handle};
use crate::held::{SharedDevices, SharedEngine};
use crate::journal::{Journal, OnDamage};
use crate::supervise::{Order, Policy, Seen, Supervisor, Watched};
use crate::ExecError;

use crate::jobs::{JobRecord, JobStatus, JobView, Report};

mod config;
mod estimate;
mod fit;
mod protocol;
mod state_dir;
mod token;

use crate::round::{Applied, PlanLine, Prepared, RoundStats, Rounds};
use crate::spec::JobSubmission;
pub use config::{Config, ConfigError, ConfigField, JobNames, Keep, MAX_ESTIMATE_BUDGET_S};
pub use estimate::{run as run_estimate, EstimateInput, Outcome as EstimateOutcome};
use fit::never_fits;
pub use state_dir::utilization_samples;
use state_dir::{job_dirs, set_aside, tighten_job_files};
pub use token::random_token;

/// Journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub(crate) enum Entry {
    Job(Box<JobRecord>),
    Plan {
        round: u64,
        unix_s: f64,
        planner: String,
        allocations: Vec<(JobId, Vec<String>)>,
    },
}

/// The planner named `name`, if it can run on a live cluster: one that
/// reads the simulator's oracle is refused here, at start, with the list of
/// those that can (it would otherwise plan with no oracle, silently).
pub fn live_planner(name: &str) -> Result<Box<dyn Planner>, ExecError> {
    let planner = gpuplan_solve::registry::create(name)?;
    gpuplan_solve::check_live(planner.as_ref())?;
    Ok(planner)
}

/// The job table, its journal and the supervisor, with what rounds keep
/// between rounds ([`Rounds`]). Fields are private: the API, the metrics
/// and the round loop go through the methods below.
pub struct Daemon {
    cfg: Config,
    sup: Supervisor,
    /// The engine and device source: held by effects, never under this
    /// daemon's lock (clones of these handles go to the loop and the API).
    engine: SharedEngine,
    devices: SharedDevices,
    /// Stops ordered and journaled, waiting for the next effects to send them.
    outbox: Vec<Order>,
    /// Directories of pruned jobs, for the next round's effects to remove.
    pruned_dirs: Vec<PathBuf>,
    /// The engine's name and rule, read once at open.
    engine_name: &'static str,
    engine_even_nodes: bool,
    journal: Journal,
    jobs: BTreeMap<JobId, JobRecord>,
    next_id: u32,
    rounds: Rounds,
    last_tick_unix_s: f64,
    /// Jobs whose reports changed them since they were last journaled.
    dirty: BTreeSet<JobId>,
    /// The planner's traits: its batch policy decides each job's batch.
    traits: PlannerTraits,
    memo: FitMemo,
    clock: Arc<dyn Clock>,
}

/// A launch the daemon decided and journaled: the engine starts `spec`
/// into `handle` off the lock, and the outcome comes back to
/// [`Daemon::on_started`].
pub(crate) struct Launch {
    pub spec: AttemptSpec,
    pub handle: Handle,
}

/// The daemon behind the one lock the HTTP API and the round loop share;
/// it guards short sections only (no engine call, process or job file).
#[derive(Clone)]
pub struct SharedDaemon(Arc<Mutex<Daemon>>);

impl SharedDaemon {
    /// Share `d`; clones lock the same daemon.
    pub fn new(d: Daemon) -> Self {
        SharedDaemon(Arc::new(Mutex::new(d)))
    }

    /// The daemon, for one request or one step of a round; a poisoned lock is taken over.
    pub fn lock(&self) -> MutexGuard<'_, Daemon> {
        // A panic while holding the lock is a bug; keep serving what state there is.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Daemon {
    /// Open the state directory, replay the journal, and re-adopt the
    /// processes of jobs that were running when the daemon stopped.
    pub fn open(
        cfg: Config,
        devices: Box<dyn Devices>,
        engine: Box<dyn Engine>,
    ) -> Result<Daemon, ExecError> {
        Daemon::open_with_clock(cfg, devices, engine, Arc::new(SystemClock))
    }

    /// [`Daemon::open`] on an injected clock (tests advance a manual one),
    /// shared: the engine and the round loop read the same one.
    pub fn open_with_clock(
        cfg: Config,
        devices: Box<dyn Devices>,
        engine: Box<dyn Engine>,
        clock: Arc<dyn Clock>,
    ) -> Result<Daemon, ExecError> {
        if let Err(errs) = cfg.check() {
            let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
            return Err(ExecError::Config(lines.join("; ")));
        }
        let dir = &cfg.state_dir;
        crate::engine::mkdir(dir, crate::engine::DIR_SEARCH_MODE)?;
        crate::engine::mkdir(&dir.join("jobs"), crate::engine::DIR_SEARCH_MODE)?;
        tighten_job_files(&dir.join("jobs"));
        let jpath = dir.join("journal.jsonl");
        let fresh = !jpath.exists() && !crate::journal::mark_path(&jpath).exists();
        let traits = live_planner(&cfg.planner)?.traits();
        // Job directories on disk, checked against the journal below.
        let on_disk = job_dirs(&dir.join("jobs"));
        if fresh && cfg.on_damage == OnDamage::Stop && !on_disk.is_empty() {
            let ids: Vec<String> = on_disk.iter().map(|i| i.to_string()).collect();
            return Err(ExecError::Journal(format!(
                "{}: missing, with STATE/high-water, while STATE/jobs holds job directories {}; {}",
                jpath.display(),
                ids.join(", "),
                crate::journal::HOW_TO_RECOVER
            )));
        }
        let (journal, entries, recovered) = Journal::open::<Entry>(&jpath, cfg.on_damage)?;
        let mut jobs = BTreeMap::new();
        for e in entries {
            if let Entry::Job(j) = e {
                jobs.insert(j.id, *j);
            }
        }
        // Ids are never given out twice: past the journal's jobs, the
        // high-water mark and every directory on disk.
        let next_id = jobs
            .keys()
            .next_back()
            .map_or(1, |k: &JobId| k.0 + 1)
            .max(journal.mark().next_job)
            .max(on_disk.iter().next_back().map_or(1, |k| k + 1));
        // A directory no journaled job owns (a crash between an engine's
        // admission and the journal, or a lost journal) is set aside, never
        // inherited by a new job of the same id.
        for id in on_disk.iter().filter(|i| !jobs.contains_key(&JobId(**i))) {
            set_aside(dir, JobId(*id), clock.now_unix_s())?;
        }
        let mut engine = engine;
        let sup = Supervisor::new(Policy {
            grace_s: cfg.grace_s,
            backoff_s: cfg.backoff_s,
            max_crashes: cfg.max_crashes,
        });
        let (engine_name, engine_even_nodes) = (engine.name(), engine.even_nodes());
        // Open is the one time the daemon calls its engine itself: nothing
        // else can reach it yet.
        for j in jobs.values_mut() {
            if let Some(id) = j.engine_id {
                engine.known(j.id, id);
            }
        }
        let mut d = Daemon {
            cfg,
            sup,
            engine_name,
            engine_even_nodes,
            outbox: Vec::new(),
            pruned_dirs: Vec::new(),
            journal,
            jobs,
            next_id,
            rounds: Rounds::new(devices.backend()),
            engine: Arc::new(Mutex::new(engine)),
            devices: Arc::new(Mutex::new(devices)),
            last_tick_unix_s: clock.now_unix_s(),
            dirty: BTreeSet::new(),
            traits,
            memo: FitMemo::default(),
            clock,
        };
        d.journal.reserve_job_ids(next_id)?;
        if !recovered.damage.is_empty() {
            d.mark_recovered(&recovered);
        }
        d.recover()?;
        let all: Vec<Entry> = d.jobs.values().map(|j| Entry::Job(Box::new(j.clone()))).collect();
        d.journal.compact(&all)?;
        Ok(d)
    }

    /// After `serve --recover` kept what was intact of a damaged journal:
    /// a job not final whose done-file exists is completed (its completion
    /// may be what was lost); every other job not final is named in the
    /// log and its `reason`, for the operator to check (it may have been
    /// cancelled or finished in the records lost).
    fn mark_recovered(&mut self, r: &crate::journal::Recovered) {
        let now = self.clock.now_unix_s();
        for dmg in &r.damage {
            tracing::error!(
                line = dmg.line,
                "journal damage kept out by --recover: {}",
                dmg.what
            );
        }
        if let Some(p) = &r.saved_as {
            tracing::warn!("the damaged journal is kept as {}", p.display());
        }
        let engine = crate::held::lock(&self.engine);
        for j in self.jobs.values_mut().filter(|j| !j.status.is_final()) {
            if engine.done(j.id) {
                j.status = JobStatus::Completed;
                j.gpus.clear();
                j.finished_unix_s = Some(now);
                j.reason = Some("recovered (serve --recover): its done-file exists".into());
            } else {
                j.reason = Some(
                    "recovered (serve --recover) from a damaged journal: records of it may be lost; check it"
                        .into(),
                );
            }
            tracing::warn!(
                "recovered job {} ({}) is {:?}: {}",
                j.id.0,
                j.spec.name,
                j.status,
                j.reason.as_deref().unwrap_or_default()
            );
        }
    }

    /// The next job id, reserved durably (the high-water mark) before it is
    /// used, with any directory already there set aside.
    fn claim_id(&mut self) -> Result<JobId, ExecError> {
        let id = JobId(self.next_id);
        self.next_id += 1;
        self.journal.reserve_job_ids(self.next_id)?;
        set_aside(&self.cfg.state_dir, id, self.clock.now_unix_s())?;
        Ok(id)
    }

    /// Finish or roll back what a crash interrupted: attempts journaled as
    /// intended but not as spawned are looked up among live processes;
    /// a half-started attempt is stopped and relaunched.
    fn recover(&mut self) -> Result<(), ExecError> {
        let now = self.clock.now_unix_s();
        let mut engine = crate::held::lock(&self.engine);
        let mut orders = Vec::new();
        for j in self.jobs.values_mut() {
            orders.extend(self.sup.recover(engine.as_mut(), j, now));
        }
        crate::supervise::send(engine.as_mut(), orders);
        Ok(())
    }

    /// `STATE/token`: the admin token `serve` reads or creates.
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

    /// Check a submission and reserve its id and token: a submit's first
    /// step, under the lock; the engine admits it next, off the lock, and
    /// [`Daemon::enter`] journals it.
    pub(crate) fn accept(&mut self, spec: &JobSubmission) -> Result<(JobId, String), ExecError> {
        spec.check("request").map_err(ExecError::Spec)?;
        self.check_queue(spec)?;
        self.check_fits(spec)?;
        let id = self.claim_id()?;
        Ok((id, random_token()?))
    }

    /// Devices collected outside a round, for the fit check of a
    /// submission before the first round; a failure refuses nothing.
    pub(crate) fn first_gpus(&mut self, gpus: Result<Vec<Gpu>, ExecError>) {
        match gpus {
            Ok(g) => self.rounds.first_gpus(g),
            Err(e) => tracing::warn!("collecting devices to check a submission: {e}"),
        }
    }

    /// A submission's queue must be a leaf of the daemon's tree (the
    /// message lists the queues), and a daemon without queues takes none.
    fn check_queue(&self, spec: &JobSubmission) -> Result<(), ExecError> {
        let Some(q) = spec.queue.as_deref() else {
            return Ok(());
        };
        let why = if self.cfg.queues.is_empty() {
            Some(format!("'{q}': this daemon has no queues (serve --queues FILE)"))
        } else {
            gpuplan_core::queue::leaf_problem(&self.cfg.queues, Some(q))
        };
        match why {
            Some(why) => Err(ExecError::Spec(vec![format!("request:queue: {why}")])),
            None => Ok(()),
        }
    }

    /// A job whose `min_gpus` exceeds every GPU of the cluster (healthy
    /// or not) would wait forever: it is refused, naming the cluster's
    /// size and its largest node and type. Devices are collected (off the
    /// lock, [`Daemon::first_gpus`]) if no round has yet; a cluster that
    /// could not be read refuses nothing (rounds hold the job instead).
    fn check_fits(&mut self, spec: &JobSubmission) -> Result<(), ExecError> {
        match never_fits(self.rounds.gpus())(spec, &self.cfg.queues) {
            Some(why) => Err(ExecError::Spec(vec![format!("request:min_gpus: {why}")])),
            None => Ok(()),
        }
    }

    /// Final jobs the engine still holds (an engine's queued job): the
    /// effects let the engine go of them ([`Engine::retire`]).
    pub(crate) fn retire_list(&self) -> Vec<JobId> {
        self.jobs
            .values()
            .filter(|j| j.status.is_final() && !j.live() && j.engine_id.is_some())
            .map(|j| j.id)
            .collect()
    }

    /// What a round's engine effects brought: the final jobs the engine
    /// let go of (their engine id is forgotten), and the held jobs users put
    /// in the engine's queue themselves, which become jobs of the daemon (a
    /// refused one is reported once, in the log). `engine` is held by the
    /// caller; only its bookkeeping ([`Engine::known`]) is called here.
    #[allow(clippy::type_complexity)]
    pub(crate) fn on_engine_round(
        &mut self,
        retired: Vec<JobId>,
        found: Result<(Vec<(u64, JobSubmission)>, Vec<(u64, String)>), ExecError>,
        engine: &mut dyn Engine,
    ) -> Result<(), ExecError> {
        for id in &retired {
            if let Some(j) = self.jobs.get_mut(id) {
                j.engine_id = None;
            }
        }
        self.save(&retired)?;
        let (found, refused) = match found {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("looking for new jobs: {e}; retried next round");
                return Ok(());
            }
        };
        let engine_name = self.engine_name;
        for (sid, why) in refused {
            tracing::warn!("{engine_name} job {sid} asks for gpuplan but is not adopted: {why}");
        }
        for (sid, mut spec) in found {
            // Its queue (named in its script, else its engine's account)
            // must be one of ours; otherwise it runs in `default`, said once.
            if let Some(q) = spec.queue.take() {
                match gpuplan_core::queue::leaf_problem(&self.cfg.queues, Some(&q)) {
                    _ if self.cfg.queues.is_empty() => {}
                    None => spec.queue = Some(q),
                    Some(why) => tracing::warn!("{engine_name} job {sid}: queue {why}; it runs in default"),
                }
            }
            let id = self.claim_id()?;
            engine.known(id, sid);
            tracing::info!("adopted {engine_name} job {sid} ({}) as job {}", spec.name, id.0);
            self.enter(id, spec, random_token()?, Some(sid))?;
        }
        Ok(())
    }

    /// Whether rounds must give multi-node jobs one GPU count per node.
    pub fn even_nodes(&self) -> bool {
        self.cfg.params.even_nodes == gpuplan_core::NodeCounts::Even || self.engine_even_nodes
    }

    /// Journal a job accepted (and admitted by the engine): the last step
    /// of a submit, and of a job adopted from the engine's queue.
    pub(crate) fn enter(
        &mut self,
        id: JobId,
        spec: JobSubmission,
        token: String,
        queued: Option<u64>,
    ) -> Result<(), ExecError> {
        self.next_id = self.next_id.max(id.0 + 1);
        let job = JobRecord::queued(id, spec, token, self.clock.now_unix_s(), queued);
        self.jobs.insert(id, job);
        self.save(&[id])
    }

    /// The token a job's own processes authenticate with.
    pub fn job_token(&self, id: JobId) -> Option<&str> {
        self.jobs.get(&id).map(|j| j.token.as_str())
    }

    /// Cancel a job, stopping its attempt if one runs; a final job is refused.
    pub fn cancel(&mut self, id: JobId) -> Result<JobView, ExecError> {
        let now = self.clock.now_unix_s();
        let job = self.jobs.get_mut(&id).ok_or(ExecError::NoJob(id))?;
        if job.status.is_final() {
            return Err(ExecError::AlreadyFinal {
                job: id,
                phase: job.phase(now),
            });
        }
        job.status = JobStatus::Cancelled;
        job.gpus.clear();
        job.finished_unix_s = Some(now);
        let order = Supervisor::order_stop(job, now);
        self.save(&[id])?;
        // Sent by the next tick's effects (within one tick, at most 0.5 s).
        self.outbox.extend(order);
        Ok(self.view(id).expect("job exists"))
    }

    /// Record a job's measurement (docs/job-protocol.md); bad numbers are refused.
    pub fn report(&mut self, id: JobId, r: Report) -> Result<(), ExecError> {
        let bad = |field: &'static str, value: f64| ExecError::BadReport { field, value };
        for (f, v) in [
            ("step_time_s", r.step_time_s),
            ("accum_time_s", r.accum_time_s),
            ("grad_sqr", r.grad_sqr),
            ("grad_var", r.grad_var),
            ("progress", r.progress),
            ("checkpoint_progress", r.checkpoint_progress),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return Err(bad(f, v));
                }
            }
        }
        if let Some(t) = r.total_progress {
            if crate::spec::total_progress_problem(t).is_some() {
                return Err(bad("total_progress", t));
            }
        }
        let checkpointed = r.checkpoint_progress.is_some() || r.checkpoint_step.is_some();
        let measured = match (r.step_time_s, r.local_bsz) {
            (Some(t), Some(b)) if t > 0.0 && b > 0 => Some((t, b)),
            (None, None) if checkpointed || r.checkpoints_on_stop.is_some() || r.total_progress.is_some() => {
                None
            }
            _ => return Err(ExecError::EmptyReport),
        };
        let now = self.clock.now_unix_s();
        let partners = crate::jobs::partners(&self.jobs, id);
        let job = self.jobs.get_mut(&id).ok_or(ExecError::NoJob(id))?;
        // Checkpoints count from any attempt, a stopping one's above all:
        // the checkpoint written on SIGTERM is what the next attempt resumes.
        if checkpointed {
            job.checkpoint.unix_s = Some(now);
            job.checkpoint.progress = r.checkpoint_progress.or(job.checkpoint.progress);
            job.checkpoint.step = r.checkpoint_step.or(job.checkpoint.step);
            self.dirty.insert(id);
        }
        if let Some(on_stop) = r.checkpoints_on_stop {
            job.checkpoint.on_stop = on_stop;
            self.dirty.insert(id);
        }
        if let Some(t) = r.total_progress {
            job.total_progress = Some(t);
            self.dirty.insert(id);
        }
        let Some(a) = job.attempt.as_ref().filter(|a| !a.is_stopping()) else {
            // A late report from a stopping attempt describes an old placement.
            return Ok(());
        };
        let Some((step_time_s, local_bsz)) = measured else {
            return Ok(());
        };
        let gpus = a.gpus.len() as u32;
        let gpus_now = self.rounds.gpus();
        let nodes = crate::round::node_count(gpus_now, &a.gpus);
        let gpu_type = a.gpus.first().and_then(|u| crate::round::node_type(gpus_now, u));
        job.agent.observe_on(
            gpu_type.as_ref(),
            Observation {
                nodes,
                gpus,
                local_bsz,
                accum_time_s: r.accum_time_s.unwrap_or(step_time_s),
                step_time_s,
            },
        );
        // Sharing: a step alone is the baseline; a step beside exactly one
        // partner, at the same GPUs and batch, is its measured slowdown.
        match &partners[..] {
            [] => job.sharing.solo_step = Some((gpus, local_bsz, step_time_s)),
            [p] => {
                if let Some((g, b, solo)) = job.sharing.solo_step {
                    if (g, b) == (gpus, local_bsz) {
                        if let Some(f) = gpuplan_core::colocation::measured_slowdown(solo, step_time_s) {
                            job.sharing.slowdowns.insert(p.clone(), f);
                        }
                    }
                }
            }
            _ => {}
        }
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

    /// The model keys of the other jobs whose running attempts hold one of
    /// `id`'s running GPUs, sorted and deduplicated.
    pub fn partners(&self, id: JobId) -> Vec<String> {
        crate::jobs::partners(&self.jobs, id)
    }

    /// The interference model the daemon has learnt: the shipped curve,
    /// overridden by every pair its jobs were measured in (from the job
    /// records, so it survives a restart with the journal).
    pub fn colocation(&self) -> gpuplan_core::colocation::Colocation {
        crate::jobs::colocation(self.jobs.values())
    }

    /// The engine and device source, for the effects run off the lock
    /// (the round loop's, the API's admission, logs and fault injection).
    pub(crate) fn effects(&self) -> (SharedEngine, SharedDevices) {
        (self.engine.clone(), self.devices.clone())
    }

    /// The round count, read by health with no lock.
    pub(crate) fn round_counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.rounds.counter()
    }

    /// Log lines kept with a failed job (what a tick's effects read of a crash).
    pub(crate) fn log_lines(&self) -> usize {
        self.cfg.log_lines
    }

    /// Stops journaled and waiting to be sent, for the effects to send.
    pub(crate) fn take_outbox(&mut self) -> Vec<Order> {
        std::mem::take(&mut self.outbox)
    }

    /// Directories of pruned jobs, for the effects to remove off the lock.
    pub(crate) fn take_pruned_dirs(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.pruned_dirs)
    }

    /// Finished jobs past `keep_finished` leave the job table; the journal
    /// is compacted at once (so a replay cannot bring them back) and their
    /// directories wait for the effects to remove them. Their ids stay
    /// used: the journal's high-water mark is past them.
    fn prune(&mut self, now: f64) -> Result<(), ExecError> {
        let gone = self.cfg.keep_finished.expired(self.jobs.values(), now);
        if gone.is_empty() {
            return Ok(());
        }
        for id in &gone {
            self.jobs.remove(id);
            self.dirty.remove(id);
            self.pruned_dirs
                .push(crate::engine::job_dir(&self.cfg.state_dir, *id));
        }
        let all: Vec<Entry> = self
            .jobs
            .values()
            .map(|j| Entry::Job(Box::new(j.clone())))
            .collect();
        self.journal.compact(&all)?;
        tracing::info!(
            "pruned {} finished job(s) past --keep-finished: {}",
            gone.len(),
            gone.iter()
                .map(|id| id.0.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(())
    }

    /// The job as the API shows it; `None` for an unknown id.
    pub fn view(&self, id: JobId) -> Option<JobView> {
        let now = self.clock.now_unix_s();
        let j = self.jobs.get(&id)?;
        let mut m = j.clone();
        let model = if j.agent.is_fitted() {
            m.model(&mut FitMemo::default())
        } else {
            None
        };
        Some(JobView {
            id: j.id,
            name: j.spec.name.clone(),
            status: j.status,
            phase: j.phase(now),
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
            model,
            efficiency: model
                .filter(|_| j.batch_size > 0)
                .map(|m| m.efficiency(f64::from(j.batch_size))),
            observations: j.agent.observations.clone(),
            grad: j.agent.grad,
            checkpoint_progress: j.checkpoint.progress,
            checkpoint_step: j.checkpoint.step,
            checkpoint_unix_s: j.checkpoint.unix_s,
            since_checkpoint_s: j.since_checkpoint_s(now),
            lost_s: j.checkpoint.lost_s,
            total_progress: j.total_progress,
            queue: self.queue_of(j).map(str::to_string),
        })
    }

    /// The queue a job is planned in: its own if the daemon has it, else
    /// `default`; `None` without queues.
    pub fn queue_of<'a>(&'a self, j: &'a JobRecord) -> Option<&'a str> {
        if self.cfg.queues.is_empty() {
            return None;
        }
        Some(
            j.spec
                .queue
                .as_deref()
                .filter(|q| gpuplan_core::queue::leaf_problem(&self.cfg.queues, Some(q)).is_none())
                .unwrap_or(gpuplan_core::queue::DEFAULT_QUEUE),
        )
    }

    /// Every job as the API shows it, by id.
    pub fn views(&self) -> Vec<JobView> {
        self.jobs.keys().filter_map(|id| self.view(*id)).collect()
    }

    /// Where a job's latest attempt's logs are: its handle, for the engine
    /// to read off the lock, or the lines kept with it (`Err`) when it never
    /// ran. The handle of an attempt that ended is located by `engine`'s
    /// rule ([`Engine::locate`]), which the caller holds.
    pub(crate) fn log_handle(
        &self,
        id: JobId,
        engine: &dyn Engine,
    ) -> Result<Result<Handle, Vec<String>>, ExecError> {
        let j = self.jobs.get(&id).ok_or(ExecError::NoJob(id))?;
        if j.attempts == 0 {
            return Ok(Err(j.last_log.clone()));
        }
        Ok(Ok(match &j.attempt {
            Some(a) if a.n == j.attempts => a.handle.clone(),
            _ => engine.locate(j.id, j.attempts),
        }))
    }

    /// The last device collection.
    pub fn gpus(&self) -> &[Gpu] {
        self.rounds.gpus()
    }

    /// The device backend's name (`nvml`, `fake`, or the engine's own).
    pub fn backend(&self) -> &'static str {
        self.rounds.backend()
    }

    /// Rounds begun since the daemon opened.
    pub fn rounds(&self) -> u64 {
        self.rounds.count()
    }

    /// The latest finished round's stats; `None` before the first.
    pub fn last_round(&self) -> Option<&RoundStats> {
        self.rounds.last()
    }

    /// Each job's goodput model as the last round planned with it.
    pub fn models(&self) -> &HashMap<JobId, GoodputModel> {
        self.rounds.models()
    }

    /// The daemon's clock now.
    pub fn now_unix_s(&self) -> f64 {
        self.clock.now_unix_s()
    }

    /// The settings the daemon was opened with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The injected clock, shared with the round loop.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// Build the round from the devices collected for it (jobs on lost
    /// GPUs are re-planned, jobs that can never fit are held with the
    /// reason); `None` when there is nothing to plan.
    pub(crate) fn prepare_with(
        &mut self,
        gpus: Result<Vec<Gpu>, ExecError>,
    ) -> Result<Option<Prepared>, ExecError> {
        let begun = self.rounds.begin();
        let now = self.clock.now_unix_s();
        self.prune(now)?;
        let mut collected = self.rounds.collect(gpus?, &mut self.jobs, &mut self.dirty, now);
        // A queued job larger than the cluster (journaled before the check
        // at submit, or the cluster shrank) waits with the reason.
        let fits = never_fits(self.rounds.gpus());
        let mut held = Vec::new();
        for j in self.jobs.values_mut() {
            if j.status != JobStatus::Queued || j.live() {
                continue;
            }
            if let Some(why) = fits(&j.spec, &self.cfg.queues) {
                let why = format!("held: {why}");
                if j.reason.as_deref() != Some(why.as_str()) {
                    tracing::warn!("job {} ({}): {why}", j.id.0, j.spec.name);
                    j.reason = Some(why);
                    held.push(j.id);
                }
            }
        }
        self.save(&held)?;
        self.save(&collected.journal)?;
        self.outbox.append(&mut collected.stops);
        let params = PolicyParams {
            even_nodes: self.even_nodes().into(),
            ..self.cfg.params
        };
        let colocation = (self.cfg.params.sharing > 1).then(|| self.colocation());
        Ok(self.rounds.build(
            begun,
            collected,
            &mut self.jobs,
            &mut self.memo,
            params,
            colocation,
            &self.cfg.queues,
            now,
        ))
    }

    /// Apply a round's decision (already validated by the pipeline): map its
    /// GPUs to devices and journal; the stops of the jobs that move wait in
    /// the outbox for the next tick's effects, and launches happen in a tick
    /// once their GPUs are free.
    pub fn apply(
        &mut self,
        prep: Prepared,
        decision: Result<Decision, String>,
    ) -> Result<RoundStats, ExecError> {
        let now = self.clock.now_unix_s();
        let Applied {
            line,
            moved,
            stops,
            done,
        } = self
            .rounds
            .apply(prep, decision, &mut self.jobs, &self.traits, &mut self.memo, now);
        if let Some(PlanLine {
            round,
            planner,
            allocations,
        }) = line
        {
            self.journal.append(&[Entry::Plan {
                round,
                unix_s: now,
                planner,
                allocations,
            }])?;
            self.save(&moved)?;
        }
        self.outbox.extend(stops);
        Ok(self.rounds.finish(done))
    }

    /// The live attempts, for a tick's effects to look at.
    pub(crate) fn watch_list(&self) -> Vec<Watched> {
        self.jobs
            .values()
            .filter_map(|j| {
                let a = j.attempt.as_ref()?;
                Some(Watched {
                    id: j.id,
                    n: a.n,
                    handle: a.handle.clone(),
                })
            })
            .collect()
    }

    /// What a tick's effects saw of the live attempts: settle them (stops
    /// go to the outbox once journaled), then decide and journal the
    /// launches of jobs whose GPUs are free, for the effects to start.
    /// `engine` is held by the caller; only [`Engine::locate`] is called.
    pub(crate) fn on_seen(&mut self, seen: Vec<Seen>, engine: &dyn Engine) -> Result<Vec<Launch>, ExecError> {
        let now = self.clock.now_unix_s();
        let dt = (now - self.last_tick_unix_s).max(0.0);
        self.last_tick_unix_s = now;
        for s in &seen {
            let Some(j) = self.jobs.get_mut(&s.id).filter(|j| j.live()) else {
                continue;
            };
            let (changed, order) = self.sup.watch(j, s, now, dt);
            if changed {
                self.save(&[s.id])?;
            }
            self.outbox.extend(order);
        }
        // Launch: a job's GPUs must not be held by another job's live
        // attempt, unless sharing is on and that attempt runs on and stays
        // on the GPU (the plan put both jobs there; the pipeline validated it).
        let sharing = self.cfg.params.sharing > 1;
        let busy: BTreeSet<String> = self
            .jobs
            .values()
            .filter_map(|j| Some((j, j.attempt.as_ref()?)))
            .flat_map(|(j, a)| {
                a.gpus
                    .iter()
                    .filter(move |u| !(sharing && !a.is_stopping() && j.gpus.contains(u)))
                    .cloned()
            })
            .collect();
        // And every GPU must be among the devices collected now: ranks are
        // grouped by node, so a launch before the first collection after a
        // restart would put every rank on one "node" (it waits a tick).
        let known: BTreeSet<&str> = self.rounds.gpus().iter().map(|g| g.uuid.as_str()).collect();
        let ready: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| {
                j.status == JobStatus::Running
                    && !j.live()
                    && !j.gpus.is_empty()
                    && j.gpus
                        .iter()
                        .all(|u| !busy.contains(u) && known.contains(u.as_str()))
            })
            .map(|j| j.id)
            .collect();
        // Journal every launch intent with one fsync; the effects start
        // them, and `on_started` journals the engine's handles with one more.
        let launches: Vec<Launch> = ready
            .iter()
            .map(|&id| {
                let spec = self.intend_launch(id, now, engine);
                let handle = self.jobs[&id].attempt.as_ref().expect("intended").handle.clone();
                Launch { spec, handle }
            })
            .collect();
        self.save(&ready)?;
        Ok(launches)
    }

    /// The outcomes of the launches the effects started: each attempt
    /// records its handle, or the failure (a crash, or a wait for the next
    /// round); journaled at once.
    pub(crate) fn on_started(
        &mut self,
        started: Vec<(JobId, u32, Result<Handle, ExecError>)>,
    ) -> Result<(), ExecError> {
        let now = self.clock.now_unix_s();
        let mut ids = Vec::new();
        for (id, n, r) in started {
            let Some(j) = self.jobs.get_mut(&id) else { continue };
            let order = self.sup.started(j, n, r, now);
            ids.push(id);
            self.outbox.extend(order);
        }
        self.save(&ids)
    }

    /// Choose the batch, lay the job's GPUs out by node, and record the
    /// attempt as intended. The job protocol's variables are the daemon's;
    /// the engine adds its own (rendezvous, ranks, checkpoint, done-file).
    fn intend_launch(&mut self, id: JobId, now: f64, engine: &dyn Engine) -> AttemptSpec {
        let report_base = self.cfg.report_base.clone();
        let node_of: HashMap<&str, &str> = self
            .rounds
            .gpus()
            .iter()
            .map(|g| (g.uuid.as_str(), g.node.as_str()))
            .collect();
        let j = self.jobs.get_mut(&id).expect("ready job exists");
        let mut per_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in &j.gpus {
            let node = node_of.get(u.as_str()).copied().unwrap_or("?");
            per_node.entry(node.to_string()).or_default().push(u.clone());
        }
        if j.local_bsz == 0 {
            j.choose_batch(
                &self.traits,
                per_node.len() as u32,
                j.gpus.len() as u32,
                &mut self.memo,
            );
        }
        let env = protocol::env(j, &report_base, self.cfg.mps.as_deref());
        self.sup
            .intend(engine, j, per_node.into_iter().collect(), env, now)
    }

    /// Every job, for tests and the benchmark.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::FakeDevices;
    use crate::engine::LocalEngine;
    use crate::jobs::{Attempt, Lifecycle, Phase, StopCause};
    use gpuplan_core::queue::Queue;
    use gpuplan_core::{Allocation, NodeId, PlanStatus};
    use gpuplan_solve::Decision;
    use gpuplan_solve::Limits;
    use std::path::Path;

    fn daemon(state: &std::path::Path) -> Daemon {
        daemon_with(state, "greedy", FakeDevices::new(1, 4))
    }

    fn daemon_with(state: &std::path::Path, planner: &str, devices: FakeDevices) -> Daemon {
        let mut cfg = Config::new(state.to_path_buf(), planner);
        // A SIGTERM that lands while a rank's shell is still starting can be
        // lost; SIGKILL after the grace period covers it, so waits below
        // allow several grace periods.
        cfg.grace_s = 1.0;
        Daemon::open(cfg, Box::new(devices), Box::new(LocalEngine::new(state))).unwrap()
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
        apply_hand(d, prep, plan);
        d.tick().unwrap();
    }

    /// Apply a hand-made plan as if the planner had returned it.
    fn apply_hand(d: &mut Daemon, prep: crate::round::Prepared, plan: gpuplan_core::Plan) {
        let decision = Decision::new(&prep.round, plan);
        d.apply(prep, Ok(decision)).unwrap();
    }

    /// A fresh state dir, a manual clock and a fake engine on that clock:
    /// the setup of tests that drive time by hand.
    fn manual_setup(
        tag: &str,
    ) -> (
        std::path::PathBuf,
        crate::clock::ManualClock,
        crate::engine::FakeEngine,
    ) {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let clock = crate::clock::ManualClock::new(1_000_000.0);
        let engine = crate::engine::FakeEngine::new(clock.clone());
        (dir, clock, engine)
    }

    /// A job's step-time report of `step_s` seconds at local batch 8.
    fn report_step(d: &mut Daemon, id: JobId, step_s: f64) {
        let r: Report =
            serde_json::from_str(&format!(r#"{{"step_time_s": {step_s}, "local_bsz": 8}}"#)).unwrap();
        d.report(id, r).unwrap();
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

    /// Issue 53: the estimate of a scripted future. One GPU; job `a` runs
    /// on it with a declared total, its model fitted from its reports; `b`
    /// waits. `a` finishes when its work left at its model's goodput says,
    /// within a round; `b` starts the round after. The what-if of a third
    /// job changes no job and no journal byte; a tiny budget returns at
    /// once, cut short.
    #[test]
    fn estimates_follow_a_known_future_and_change_nothing() {
        let (dir, clock, engine) = manual_setup("estimate");
        let mut cfg = Config::new(dir.clone(), "greedy");
        cfg.interval_s = 60.0;
        let mut d = Daemon::open_with_clock(
            cfg,
            Box::new(FakeDevices::new(1, 1)),
            Box::new(engine),
            Arc::new(clock.clone()),
        )
        .unwrap();
        let one = |name: &str, total: f64| JobSubmission {
            name: name.into(),
            max_gpus: 1,
            total_progress: Some(total),
            ..spec()
        };
        let (a, _) = d.submit(one("a", 100_000.0)).unwrap();
        let (b, _) = d.submit(one("b", 10_000.0)).unwrap();
        plan_gpus(&mut d, a, 1);
        for _ in 0..3 {
            d.tick().unwrap();
            clock.advance(10.0);
        }
        report_step(&mut d, a, 0.5);
        let r: Report =
            serde_json::from_str(r#"{"step_time_s": 0.5, "local_bsz": 8, "progress": 20000}"#).unwrap();
        d.report(a, r).unwrap();
        let input = d.estimate_input(None, 10.0).unwrap().unwrap();
        let now = input.snapshot.round.now_s;
        let ra = input
            .snapshot
            .round
            .jobs
            .iter()
            .find(|j| j.id == a)
            .unwrap()
            .clone();
        let m = ra.model.expect("a's reports fit a model");
        let rate = m.goodput(1, 1, f64::from(ra.state.local_bsz), ra.state.accum_steps);
        assert!(rate > 0.0);
        let EstimateOutcome::Estimates(e) = run_estimate(input).unwrap() else {
            panic!("no what-if asked")
        };
        let (ea, eb) = (e.job(a).unwrap(), e.job(b).unwrap());
        assert!(ea.running && !eb.running);
        let a_end = now + 80_000.0 / rate;
        let fa = ea.finish_s.unwrap();
        assert!(
            (fa - a_end).abs() <= 60.0 + 1e-6,
            "a finishes at {fa}, its work says {a_end}"
        );
        let sb = eb.start_s.unwrap();
        assert!(
            sb >= fa - 1e-6 && sb <= fa + 60.0 + 1e-6,
            "b starts at {sb}, a ends at {fa}"
        );
        assert!(eb.finish_s.unwrap() > sb);
        assert!(ea.finish_range.lo.unwrap() <= fa && fa <= ea.finish_range.hi.unwrap());

        // A what-if changes nothing: not the table, not a journal byte.
        let journal = |dir: &Path| {
            let mut files: Vec<_> = walk(dir).into_iter().filter(|p| p.is_file()).collect();
            files.sort();
            files
                .iter()
                .map(|p| (p.clone(), std::fs::read(p).unwrap()))
                .collect::<Vec<_>>()
        };
        let (views, bytes, next) = (
            serde_json::to_string(&d.views()).unwrap(),
            journal(&dir),
            d.next_id,
        );
        let input = d.estimate_input(Some(&one("c", 5_000.0)), 10.0).unwrap().unwrap();
        let EstimateOutcome::WhatIf(w) = run_estimate(input).unwrap() else {
            panic!("a what-if was asked")
        };
        assert_eq!(w.job.id, JobId(next), "the id the next submission gets");
        assert!(w.job.start_s.is_some());
        assert_eq!(serde_json::to_string(&d.views()).unwrap(), views);
        assert_eq!(journal(&dir), bytes);
        assert_eq!(d.next_id, next);

        // A budget too small for one round: it returns, cut short.
        let input = d.estimate_input(None, 1e-6).unwrap().unwrap();
        let t = std::time::Instant::now();
        let EstimateOutcome::Estimates(e) = run_estimate(input).unwrap() else {
            panic!("no what-if asked")
        };
        assert!(e.cut_short, "{e:?}");
        assert!(t.elapsed().as_secs_f64() < 5.0);
    }

    /// Issue 53: snapshots taken while rounds move a job between 1 and 4
    /// GPUs (another thread, the shared lock) are each a plannable round:
    /// the round check passes, no GPU is held twice, and the snapshot's job
    /// holds the GPUs of one applied plan, never a mix of two.
    #[test]
    fn snapshots_taken_while_rounds_run_are_consistent() {
        let (dir, clock, engine) = manual_setup("estimate-race");
        let d = Daemon::open_with_clock(
            Config::new(dir.clone(), "greedy"),
            Box::new(FakeDevices::new(1, 4)),
            Box::new(engine),
            Arc::new(clock.clone()),
        )
        .unwrap();
        let shared = SharedDaemon::new(d);
        let (a, _) = shared
            .lock()
            .submit(JobSubmission {
                total_progress: Some(1e6),
                ..spec()
            })
            .unwrap();
        let rounds = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for k in 0..200u32 {
                    let mut d = shared.lock();
                    plan_gpus(&mut d, a, 1 + k % 4);
                    d.tick().unwrap();
                    clock.advance(1.0);
                }
            })
        };
        let mut seen = BTreeSet::new();
        while !rounds.is_finished() {
            let Some(input) = shared.lock().estimate_input(None, 0.5).unwrap() else {
                continue;
            };
            let r = &input.snapshot.round;
            r.check().unwrap();
            if let Some(j) = r.jobs.iter().find(|j| j.id == a) {
                let gpus = j.state.allocation.gpus();
                let distinct: BTreeSet<_> = gpus.iter().collect();
                assert_eq!(distinct.len(), gpus.len(), "a GPU held twice: {gpus:?}");
                assert!(gpus.len() <= 4);
                seen.insert(gpus.len());
            }
        }
        rounds.join().unwrap();
        assert!(!seen.is_empty(), "no snapshot saw the job");
    }

    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
        out
    }

    /// The settings' one check: every problem at once, each with its field,
    /// and a daemon refuses to open on them.
    #[test]
    fn a_config_is_checked_once_with_every_problem() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-cfg-{}", std::process::id()));
        let mut cfg = Config::new(dir.clone(), "greedy");
        cfg.check().unwrap();
        cfg.interval_s = 0.005;
        cfg.mps = Some("/mps".into());
        cfg.params.restart_penalty_s = -1.0;
        // Once raised in silence: 0 crashes to 1, 0 threads to 1 (issue 50).
        cfg.max_crashes = 0;
        cfg.limits.threads = 0;
        // A child guaranteed more than its parent.
        cfg.queues = vec![
            Queue {
                guarantee: 2,
                ..Queue::new("org")
            },
            Queue {
                guarantee: 3,
                parent: Some("org".into()),
                ..Queue::new("team")
            },
        ];
        let errs = cfg.check().unwrap_err();
        let fields: Vec<ConfigField> = errs.iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            vec![
                ConfigField::Param(gpuplan_core::ParamField::RestartPenalty),
                ConfigField::Interval,
                ConfigField::MaxCrashes,
                ConfigField::Limit("threads"),
                ConfigField::Mps,
                ConfigField::Queues
            ]
        );
        assert!(
            errs[5]
                .to_string()
                .starts_with("queues[0].guarantee: 2 GPUs, less than its children's"),
            "{}",
            errs[5]
        );
        assert_eq!(errs[1].to_string(), "interval_s: must be at least 10 ms");
        assert_eq!(errs[3].to_string(), "limits.threads: must be >= 1, got 0");
        let e = Daemon::open(
            cfg,
            Box::new(FakeDevices::new(1, 1)),
            Box::new(LocalEngine::new(&dir)),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("params.restart_penalty_s") && e.contains("mps: needs --sharing"),
            "{e}"
        );
        assert!(!dir.exists(), "nothing written");
    }

    /// A job outside the round that still holds a GPU: the round carries
    /// the GPU as reserved, the planner plans around it, and the daemon
    /// applies the plan's very GPUs (it never picks others).
    #[test]
    fn gpus_held_outside_the_round_are_reserved_and_plans_applied_as_planned() {
        let dir = std::env::temp_dir().join(format!("gpuplan-daemon-reserved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut d = daemon(&dir);
        let (a, _) = d.submit(spec()).unwrap();
        let (b, _) = d.submit(spec()).unwrap();
        drop(d.prepare().unwrap());
        let held = d.gpus()[0].uuid.clone();
        let now = d.clock().now_unix_s();
        let ja = d.jobs.get_mut(&a).unwrap();
        ja.backoff_until_unix_s = now + 1e6;
        ja.gpus = vec![held.clone()];
        let prep = d.prepare().unwrap().unwrap();
        assert_eq!(prep.round.reserved, vec![gpuplan_core::GpuId::new(NodeId(0), 0)]);
        assert_eq!(prep.round.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![b]);
        let mut planner = gpuplan_solve::registry::create("greedy").unwrap();
        let decision = gpuplan_solve::run_round(planner.as_mut(), &prep.round, &Limits::default());
        let planned: Vec<String> = {
            let g = decision.as_ref().unwrap().plan.gpus_of(b).gpus().to_vec();
            g.iter()
                .map(|g| d.gpus()[g.index as usize].uuid.clone())
                .collect()
        };
        assert!(!planned.is_empty(), "B runs");
        d.apply(prep, decision.map_err(|e| e.to_string())).unwrap();
        assert_eq!(d.jobs[&b].gpus, planned);
        assert!(!d.jobs[&b].gpus.contains(&held));
        assert_eq!(d.jobs[&a].gpus, vec![held]);
        let _ = std::fs::remove_dir_all(&dir);
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
        assert_eq!((a.n, a.handle.ranks.len()), (2, 3));
        // The daemon goes away without stopping anything; a new one adopts the ranks.
        drop(d);
        let mut d = daemon(&dir);
        let b = d.jobs[&id].attempt.clone().unwrap();
        assert_eq!(
            b.handle.ranks, a.handle.ranks,
            "re-adopted the same process groups"
        );
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
            Box::new(LocalEngine::new(&dir))
        )
        .is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Sharing on the fake engine and a manual clock (no sleeps): two jobs
    /// planned onto one GPU both start with it; the first job's step beside
    /// the second becomes a measured pair in the next round's model; the
    /// fake GPU's utilization is recorded per job; and a restarted daemon
    /// keeps all of it from the journal, with both attempts adopted on the
    /// shared GPU.
    #[test]
    fn two_jobs_planned_onto_one_gpu_share_it_and_the_journal_keeps_what_was_measured() {
        let (dir, clock, engine) = manual_setup("share");
        let open = |util: u32| {
            let mut cfg = Config::new(dir.clone(), "greedy");
            cfg.params.sharing = 2;
            cfg.mps = Some("/run/mps".into());
            let mut dev = FakeDevices::new(1, 1);
            dev.set_utilization("GPU-fake-0-0", util).unwrap();
            Daemon::open_with_clock(
                cfg,
                Box::new(dev),
                Box::new(engine.clone()),
                Arc::new(clock.clone()),
            )
            .unwrap()
        };
        let job = |name: &str, app: &str| {
            JobSubmission::from_toml(
                &format!("name = \"{name}\"\ncommand = \"run=100000\"\napp = \"{app}\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n"),
                "t",
            )
            .unwrap()
        };
        let gpu0 = Allocation::from_gpus(vec![gpuplan_core::GpuId::new(NodeId(0), 0)]);
        let mut d = open(40);
        let (a, _) = d.submit(job("a", "cifar10")).unwrap();
        // Round 1: a alone on the GPU; it reports 1 s steps alone.
        let prep = d.prepare().unwrap().unwrap();
        let mut plan = gpuplan_core::Plan::new("hand", PlanStatus::Feasible);
        plan.allocations.insert(a, gpu0.clone());
        apply_hand(&mut d, prep, plan);
        d.tick().unwrap();
        clock.advance(60.0);
        d.tick().unwrap();
        report_step(&mut d, a, 1.0);
        // Round 2: b joins a on the same GPU; a keeps it (no restart).
        let (b, _) = d.submit(job("b", "ncf")).unwrap();
        let prep = d.prepare().unwrap().unwrap();
        assert_eq!(
            d.jobs[&a].sharing.util_solo,
            Some(0.4),
            "utilization recorded while alone"
        );
        let mut plan = gpuplan_core::Plan::new("hand", PlanStatus::Feasible);
        plan.allocations.insert(a, gpu0.clone());
        plan.allocations.insert(b, gpu0.clone());
        // The plan passes the one validator: k = 2, 4 + 2 GiB in 16 GB.
        assert_eq!(gpuplan_core::validate(&prep.round, &plan), Ok(()));
        apply_hand(&mut d, prep, plan);
        d.tick().unwrap();
        let started = engine.started();
        assert_eq!(started.len(), 2, "{started:?}");
        for s in &started {
            assert_eq!(
                s.nodes,
                vec![("fake0".to_string(), vec!["GPU-fake-0-0".to_string()])]
            );
            assert!(s
                .env
                .contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), "/run/mps/pipe".into())));
        }
        assert_eq!(d.jobs[&a].restarts, 0, "a kept its GPU");
        // a runs 1.5× slower beside b: a measured pair, overriding the curve.
        clock.advance(60.0);
        d.tick().unwrap();
        report_step(&mut d, a, 1.5);
        assert_eq!(d.partners(a), vec!["ncf".to_string()]);
        let prep = d.prepare().unwrap().unwrap();
        let model = prep.round.colocation.clone().unwrap();
        assert_eq!(model.lookup("cifar10", "ncf"), Some((1.5, 1.5)));
        assert_eq!(d.jobs[&a].sharing.util_last, Some(0.4));
        assert_eq!(d.jobs[&b].sharing.util_solo, None, "b never ran alone");
        // A restart: the journal keeps the measurement and the shared GPU.
        drop(prep);
        drop(d);
        let mut d = open(90);
        assert_eq!(d.jobs[&a].sharing.slowdowns.get("ncf"), Some(&1.5));
        assert_eq!(d.jobs[&a].sharing.util_solo, Some(0.4));
        assert_eq!(d.colocation().lookup("ncf", "cifar10"), Some((1.5, 1.5)));
        d.tick().unwrap();
        for id in [a, b] {
            assert_eq!(d.view(id).unwrap().phase, "running");
            assert_eq!(d.jobs[&id].gpus, vec!["GPU-fake-0-0".to_string()]);
        }
        assert_eq!(engine.started().len(), 2, "adopted, not restarted");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 14: on a two-type cluster (fake engine, manual clock, no
    /// sleeps) step-time reports are recorded under the type of the node the
    /// job runs on, so the next round fits each type apart, the first-measured
    /// type as the reference; a restarted daemon keeps the types from the
    /// journal, and a journaled observation without a type still loads.
    #[test]
    fn reports_are_fitted_per_gpu_type_of_the_node_the_job_ran_on() {
        let (dir, clock, engine) = manual_setup("types");
        let open = || {
            Daemon::open_with_clock(
                Config::new(dir.clone(), "greedy"),
                Box::new(FakeDevices::parse("1x1:t4+1x1:a100").unwrap()),
                Box::new(engine.clone()),
                Arc::new(clock.clone()),
            )
            .unwrap()
        };
        let mut d = open();
        let sub = JobSubmission::from_toml(
            "name = \"a\"\ncommand = \"run=100000\"\napp = \"cifar10\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let (a, _) = d.submit(sub).unwrap();
        // Run `a` on node `n`'s GPU and let it report `step_s` steps there.
        let run_on = |d: &mut Daemon, n: u32, step_s: f64| {
            let prep = d.prepare().unwrap().unwrap();
            let mut plan = gpuplan_core::Plan::new("hand", PlanStatus::Feasible);
            plan.allocations.insert(
                a,
                Allocation::from_gpus(vec![gpuplan_core::GpuId::new(NodeId(n), 0)]),
            );
            apply_hand(d, prep, plan);
            for _ in 0..3 {
                d.tick().unwrap();
                clock.advance(10.0);
            }
            assert_eq!(d.jobs[&a].gpus, vec![format!("GPU-fake-{n}-0")]);
            assert_eq!(d.view(a).unwrap().phase, "running");
            report_step(d, a, step_s);
        };
        run_on(&mut d, 0, 1.0);
        run_on(&mut d, 1, 0.25);
        let typed = |d: &Daemon| {
            d.jobs[&a]
                .agent
                .observations
                .iter()
                .map(|o| o.gpu_type.as_ref().map(|t| t.as_str().to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(typed(&d), vec![Some("t4".to_string()), Some("a100".to_string())]);
        let check = |d: &mut Daemon| {
            let prep = d.prepare().unwrap().unwrap();
            let j = prep.round.jobs.iter().find(|j| j.id == a).unwrap();
            assert_eq!(j.model_type.as_ref().map(|t| t.as_str()), Some("t4"));
            assert_eq!(
                j.type_models
                    .iter()
                    .map(|m| m.gpu_type.as_str())
                    .collect::<Vec<_>>(),
                vec!["a100"]
            );
            // Each fit is its type's own: 4× faster steps on the a100.
            let (t4, a100) = (j.model.unwrap(), j.type_models[0].model);
            assert!(a100.step_time(1, 1, 8.0, 0) < 0.5 * t4.step_time(1, 1, 8.0, 0));
        };
        check(&mut d);
        drop(d);
        let mut d = open();
        assert_eq!(typed(&d), vec![Some("t4".to_string()), Some("a100".to_string())]);
        check(&mut d);
        drop(d);
        let old =
            r#"{"nodes":1,"gpus":1,"local_bsz":8,"accum_time_s_sum":1.0,"step_time_s_sum":1.0,"count":1}"#;
        let o: gpuplan_solve::ObsAgg = serde_json::from_str(old).unwrap();
        assert_eq!(o.gpu_type, None, "an untyped journal line still loads");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 15: utilization measured while a job runs alone is journaled
    /// with the configuration it was measured at, and a journal reader
    /// turns it and the job's features into a predictor training sample
    /// (`gpuplan predict --fit OUT --state-dir DIR`), beside the live daemon.
    #[test]
    fn utilization_measured_alone_becomes_a_predictor_sample() {
        let (dir, clock, engine) = manual_setup("util");
        let mut dev = FakeDevices::parse("1x2:a100").unwrap();
        dev.set_utilization("GPU-fake-0-0", 60).unwrap();
        dev.set_utilization("GPU-fake-0-1", 80).unwrap();
        let mut d = Daemon::open_with_clock(
            Config::new(dir.clone(), "greedy"),
            Box::new(dev),
            Box::new(engine.clone()),
            Arc::new(clock.clone()),
        )
        .unwrap();
        let sub = |name: &str, features: &str| {
            JobSubmission::from_toml(
                &format!("name = \"{name}\"\ncommand = \"run=100000\"\napp = \"bert\"\nmin_gpus = 1\nmax_gpus = 2\nbatch_size = 8\n{features}"),
                "t",
            )
            .unwrap()
        };
        let (a, _) = d
            .submit(sub("a", "[features]\nflops_per_sample = 1e9\nparams = 1e7\n"))
            .unwrap();
        plan_gpus(&mut d, a, 2);
        clock.advance(10.0);
        d.tick().unwrap();
        assert_eq!(d.view(a).unwrap().phase, "running");
        assert!(utilization_samples(&dir).unwrap().is_empty(), "not measured yet");
        d.prepare().unwrap().unwrap();
        let s = utilization_samples(&dir).unwrap();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].family, "bert");
        assert_eq!(s[0].features.flops_per_sample, 1e9);
        assert!((s[0].utilization - 0.7).abs() < 1e-9, "mean of 60 % and 80 %");
        let at = &s[0].at;
        assert_eq!((at.nodes, at.gpus, at.local_bsz), (1, 2, d.jobs[&a].local_bsz));
        assert_eq!(at.gpu_type.as_ref().map(|t| t.as_str()), Some("a100"));
        // A job with no features gives no sample.
        d.cancel(a).unwrap();
        let (b, _) = d.submit(sub("b", "")).unwrap();
        plan_gpus(&mut d, b, 2);
        clock.advance(10.0);
        d.tick().unwrap();
        d.prepare().unwrap();
        assert!(d.jobs[&b].sharing.util_solo.is_some());
        assert_eq!(utilization_samples(&dir).unwrap().len(), 1);
        let e = utilization_samples(&dir.join("none")).unwrap_err().to_string();
        assert!(e.contains("none/journal.jsonl"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 15: a job's memory per GPU in the round is its job file's
    /// `mem_gib`, else the most its GPUs held while it ran alone (NVML's
    /// used memory; the fake backend's here), a peak that survives a
    /// restart and never falls; so a job of no known application can share.
    #[test]
    fn memory_measured_alone_is_the_rounds_memory_unless_the_job_file_gives_one() {
        let (dir, clock, engine) = manual_setup("mem");
        let open = |gib: u64| {
            let mut dev = FakeDevices::parse("1x2").unwrap();
            dev.set_memory_used("GPU-fake-0-0", gib << 30).unwrap();
            dev.set_memory_used("GPU-fake-0-1", (gib << 30) / 2).unwrap();
            Daemon::open_with_clock(
                Config::new(dir.clone(), "greedy"),
                Box::new(dev),
                Box::new(engine.clone()),
                Arc::new(clock.clone()),
            )
            .unwrap()
        };
        let sub = |name: &str, extra: &str| {
            JobSubmission::from_toml(
                &format!("name = \"{name}\"\ncommand = \"run=100000\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n{extra}"),
                "t",
            )
            .unwrap()
        };
        let mem_in_round = |d: &mut Daemon, id: JobId| {
            let prep = d.prepare().unwrap().unwrap();
            prep.round.jobs.iter().find(|j| j.id == id).unwrap().mem_gib
        };
        let mut d = open(6);
        let (a, _) = d.submit(sub("a", "")).unwrap();
        assert_eq!(mem_in_round(&mut d, a), None, "not measured, no app: unknown");
        plan_gpus(&mut d, a, 1);
        clock.advance(10.0);
        d.tick().unwrap();
        assert_eq!(d.view(a).unwrap().phase, "running");
        assert_eq!(mem_in_round(&mut d, a), Some(6.0));
        drop(d);
        // After a restart, with its GPU now reading less, the peak stays.
        let mut d = open(3);
        assert_eq!(d.jobs[&a].sharing.mem_gib_peak, Some(6.0));
        assert_eq!(mem_in_round(&mut d, a), Some(6.0));
        // The job file's figure wins over the measurement.
        d.cancel(a).unwrap();
        let (b, _) = d.submit(sub("b", "mem_gib = 4.5\n")).unwrap();
        plan_gpus(&mut d, b, 1);
        clock.advance(10.0);
        d.tick().unwrap();
        assert_eq!(mem_in_round(&mut d, b), Some(4.5));
        assert_eq!(d.jobs[&b].sharing.mem_gib_peak, Some(3.0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The API's phase strings are serde's names of [`Phase`], and a
    /// request's mistakes are kinds a caller matches, with the messages of
    /// before.
    /// Issue 52: what a job's checkpoint reports tell the planner. Before
    /// any, a restart costs the fixed penalty (no `since_checkpoint_s`);
    /// after one, the run time since it (or since the attempt began, which
    /// resumed from it); a job that checkpoints on stop loses nothing; a stop
    /// adds what it throws away to `lost_s`, journaled; the minimum run
    /// time and run time reach the round; bad numbers name their field.
    #[test]
    fn checkpoint_reports_set_what_a_restart_costs() {
        let (dir, clock, engine) = manual_setup("ckpt");
        let open = || {
            Daemon::open_with_clock(
                Config::new(dir.clone(), "greedy"),
                Box::new(FakeDevices::new(1, 2)),
                Box::new(engine.clone()),
                Arc::new(clock.clone()),
            )
            .unwrap()
        };
        let mut d = open();
        let (id, _) = d
            .submit(JobSubmission {
                min_runtime_s: Some(300.0),
                total_progress: Some(5000.0),
                ..spec()
            })
            .unwrap();
        plan_gpus(&mut d, id, 1);
        for _ in 0..3 {
            d.tick().unwrap();
            clock.advance(10.0);
        }
        let round_job = |d: &mut Daemon| {
            let prep = d.prepare().unwrap().unwrap();
            prep.round.jobs.into_iter().find(|j| j.id == id).unwrap()
        };
        let j = round_job(&mut d);
        assert_eq!(j.state.since_checkpoint_s, None, "no reports: the fixed penalty");
        assert_eq!(j.min_runtime_s, Some(300.0));
        assert!(j.state.run_s.is_some_and(|r| r >= 20.0), "{:?}", j.state.run_s);
        let report = |json: &str| serde_json::from_str::<Report>(json).unwrap();
        d.report(
            id,
            report(r#"{"checkpoint_progress": 640, "checkpoint_step": 10}"#),
        )
        .unwrap();
        clock.advance(45.0);
        let j = round_job(&mut d);
        assert_eq!(j.state.since_checkpoint_s, Some(45.0));
        assert_eq!(d.jobs[&id].total_progress, Some(5000.0));
        // A stop throws those 45 s away; journaled, so a restart keeps them.
        let order = Supervisor::order_stop(d.jobs.get_mut(&id).unwrap(), clock.now_unix_s());
        assert!(order.is_some());
        assert_eq!(d.jobs[&id].checkpoint.lost_s, 45.0);
        d.save(&[id]).unwrap();
        drop(d);
        let mut d = open();
        assert_eq!(d.jobs[&id].checkpoint.lost_s, 45.0);
        assert_eq!(d.jobs[&id].checkpoint.step, Some(10));
        // Checkpointing on stop: a stop loses nothing.
        d.report(
            id,
            report(r#"{"checkpoints_on_stop": true, "total_progress": 6000}"#),
        )
        .unwrap();
        assert!(d.jobs[&id].checkpoint.on_stop);
        assert_eq!(d.jobs[&id].total_progress, Some(6000.0));
        // Bad numbers and half a measurement are refused by name.
        for (json, field) in [
            (r#"{"checkpoint_progress": -1}"#, "checkpoint_progress"),
            (r#"{"total_progress": 0}"#, "total_progress"),
        ] {
            let e = d.report(id, report(json)).unwrap_err();
            assert!(
                matches!(e, ExecError::BadReport { field: f, .. } if f == field),
                "{e:?}"
            );
        }
        for json in [r#"{"step_time_s": 1.0}"#, r#"{"epoch": 2}"#] {
            let e = d.report(id, report(json)).unwrap_err();
            assert!(matches!(e, ExecError::EmptyReport), "{json}: {e:?}");
        }
    }

    #[test]
    fn phases_serialise_as_before_and_request_errors_are_kinds() {
        for p in Phase::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
            assert_eq!(format!("{p:<10}|"), format!("{:<10}|", p.as_str()));
        }
        let (dir, clock, engine) = manual_setup("kinds");
        let mut d = Daemon::open_with_clock(
            Config::new(dir.clone(), "greedy"),
            Box::new(FakeDevices::new(1, 1)),
            Box::new(engine),
            Arc::new(clock),
        )
        .unwrap();
        let (id, _) = d.submit(spec()).unwrap();
        d.cancel(id).unwrap();
        let e = d.cancel(id).unwrap_err();
        assert!(
            matches!(e, ExecError::AlreadyFinal { job, phase: Phase::Cancelled } if job == id),
            "{e:?}"
        );
        assert_eq!(e.to_string(), format!("job {} is already cancelled", id.0));
        let e = d.cancel(JobId(99)).unwrap_err();
        assert!(matches!(e, ExecError::NoJob(JobId(99))), "{e:?}");
        assert_eq!(e.to_string(), "no job 99");
        let r: Report = serde_json::from_str(r#"{"step_time_s": -1.0, "local_bsz": 8}"#).unwrap();
        let e = d.report(id, r).unwrap_err();
        assert!(
            matches!(
                e,
                ExecError::BadReport {
                    field: "step_time_s",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "report:step_time_s: must be finite and >= 0, got -1"
        );
        let e = d.inject("GPU-none", crate::device::Fault::Gone).unwrap_err();
        assert!(matches!(&e, ExecError::NoGpu(u) if u == "GPU-none"), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 33, item 6: `min_gpus` above the cluster's GPUs is refused at
    /// submission (before any round has collected devices), naming the
    /// largest GPU type's count (issue 49: a job runs on one type); one
    /// that fits is taken.
    #[test]
    fn a_job_that_can_never_fit_is_refused_at_submit() {
        let (dir, clock, engine) = manual_setup("fit");
        let mut d = Daemon::open_with_clock(
            Config::new(dir.clone(), "greedy"),
            Box::new(FakeDevices::parse("1x2:t4+1x4:a100").unwrap()),
            Box::new(engine),
            Arc::new(clock),
        )
        .unwrap();
        let mut sub = spec();
        sub.min_gpus = 4096;
        sub.max_gpus = 4096;
        let e = d.submit(sub.clone()).unwrap_err();
        assert!(matches!(e, ExecError::Spec(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("request:min_gpus: 4096 GPUs can never fit: a job runs on one GPU type, and the largest, a100, has 4 GPUs (6 GPUs on 2 nodes in all)"),
            "{msg}"
        );
        assert_eq!(d.views().len(), 0, "nothing journaled");
        sub.min_gpus = 4;
        sub.max_gpus = 4;
        let (big, _) = d.submit(sub).unwrap();
        // One journaled before the check (or the cluster shrank since):
        // held with the reason, no longer `null`.
        d.jobs.get_mut(&big).unwrap().spec.min_gpus = 4096;
        let _ = d.prepare().unwrap();
        let why = d.view(big).unwrap().reason.unwrap();
        assert!(why.starts_with("held: 4096 GPUs can never fit"), "{why}");
        assert_eq!(d.view(big).unwrap().phase, "queued");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 33, item 4: a job journaled with an unbounded grace period
    /// (before submissions were bounded) that ignores SIGTERM is killed
    /// one hour (MAX_GRACE_S) after a cancel, freeing its GPUs; on the
    /// manual clock, nothing sleeps.
    #[test]
    fn an_unbounded_grace_ends_after_the_one_hour_bound() {
        let (dir, clock, engine) = manual_setup("grace");
        let mut d = Daemon::open_with_clock(
            Config::new(dir.clone(), "greedy"),
            Box::new(FakeDevices::new(1, 2)),
            Box::new(engine.clone()),
            Arc::new(clock.clone()),
        )
        .unwrap();
        let mut sub = spec();
        sub.command = "run=1000000 ignore-term".into();
        let (id, _) = d.submit(sub).unwrap();
        d.jobs.get_mut(&id).unwrap().spec.grace_s = Some(1e300);
        plan_gpus(&mut d, id, 2);
        assert_eq!(d.view(id).unwrap().phase, "running");
        d.cancel(id).unwrap();
        clock.advance(crate::spec::MAX_GRACE_S - 1.0);
        d.tick().unwrap();
        assert_eq!(d.view(id).unwrap().phase, "stopping");
        clock.advance(1.0);
        d.tick().unwrap();
        assert!(
            engine.stops().contains(&(id, 1, crate::engine::Stop::Now)),
            "{:?}",
            engine.stops()
        );
        d.tick().unwrap();
        assert_eq!(d.view(id).unwrap().phase, "cancelled");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A daemon on 1×2 fake GPUs, the fake engine and the manual clock,
    /// opening its journal as `on` says.
    fn open_on(
        dir: &Path,
        clock: &crate::clock::ManualClock,
        engine: &crate::engine::FakeEngine,
        on: OnDamage,
    ) -> Result<Daemon, ExecError> {
        let mut cfg = Config::new(dir.to_path_buf(), "greedy");
        cfg.on_damage = on;
        Daemon::open_with_clock(
            cfg,
            Box::new(FakeDevices::new(1, 2)),
            Box::new(engine.clone()),
            Arc::new(clock.clone()),
        )
    }

    /// Issue 33, item 5: a journal cut after a job completed (and another
    /// was cancelled) stops the daemon at start, naming the cut and
    /// `--recover`; `--recover` keeps what is intact, completes the job
    /// whose done-file exists (it is not run again) and marks the rest.
    #[test]
    fn a_cut_journal_stops_the_daemon_and_recover_reruns_nothing_done() {
        let (dir, clock, engine) = manual_setup("cut");
        let open = |on: OnDamage| open_on(&dir, &clock, &engine, on);
        let mut d = open(OnDamage::Stop).unwrap();
        let mut sub = spec();
        sub.command = "run=100 done".into();
        let (a, _) = d.submit(sub).unwrap();
        plan_gpus(&mut d, a, 1);
        let journal = dir.join("journal.jsonl");
        let before_end = std::fs::read_to_string(&journal).unwrap();
        clock.advance(200.0);
        d.tick().unwrap();
        assert_eq!(d.view(a).unwrap().phase, "completed");
        drop(d);
        // The completion is cut off.
        std::fs::write(&journal, &before_end).unwrap();
        let e = open(OnDamage::Stop).err().unwrap().to_string();
        assert!(e.contains("it was cut") && e.contains("serve --recover"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&journal).unwrap(),
            before_end,
            "nothing changed"
        );
        let mut d = open(OnDamage::Recover).unwrap();
        assert_eq!(d.view(a).unwrap().phase, "completed", "its done-file exists");
        let started = engine.started().len();
        d.tick().unwrap();
        assert_eq!(engine.started().len(), started, "not run again");
        assert!(std::fs::read_dir(&dir).unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with("journal.jsonl.damaged-")));
        drop(d);
        // Once recovered, the next start is clean.
        let d = open(OnDamage::Stop).unwrap();
        assert_eq!(d.view(a).unwrap().phase, "completed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 33, item 5: an emptied or deleted journal (and one deleted
    /// with its high-water mark while job directories remain) stops the
    /// daemon; with `--recover` the old directory is set aside and the next
    /// job gets a new id and none of the old job's files (its done-file).
    #[test]
    fn a_lost_journal_stops_the_daemon_and_ids_and_directories_are_never_reused() {
        let (dir, clock, engine) = manual_setup("lost");
        let open = |on: OnDamage| open_on(&dir, &clock, &engine, on);
        let mut d = open(OnDamage::Stop).unwrap();
        let (a, _) = d.submit(spec()).unwrap();
        assert_eq!(a, JobId(1));
        drop(d);
        // The old job's files, as the local engine leaves them.
        let done = crate::engine::done_file(&dir, a);
        crate::engine::mkdir(done.parent().unwrap(), 0o700).unwrap();
        std::fs::write(&done, "").unwrap();
        let journal = dir.join("journal.jsonl");
        std::fs::write(&journal, "").unwrap();
        let e = open(OnDamage::Stop).err().unwrap().to_string();
        assert!(e.contains("empty, but") && e.contains("--recover"), "{e}");
        std::fs::remove_file(&journal).unwrap();
        let e = open(OnDamage::Stop).err().unwrap().to_string();
        assert!(e.contains("missing, but"), "{e}");
        std::fs::remove_file(dir.join("high-water")).unwrap();
        let e = open(OnDamage::Stop).err().unwrap().to_string();
        assert!(e.contains("STATE/jobs holds job directories 1"), "{e}");
        let mut d = open(OnDamage::Recover).unwrap();
        assert!(!crate::engine::job_dir(&dir, a).exists(), "set aside");
        assert!(dir.join("jobs-orphaned").read_dir().unwrap().count() == 1);
        let (b, _) = d.submit(spec()).unwrap();
        assert_eq!(b, JobId(2), "ids are never reused");
        assert!(!crate::engine::done_file(&dir, b).exists());
        // A directory already where the next job's would go is set aside
        // too, never inherited.
        let next = crate::engine::done_file(&dir, JobId(3));
        crate::engine::mkdir(next.parent().unwrap(), 0o700).unwrap();
        std::fs::write(&next, "").unwrap();
        let (c, _) = d.submit(spec()).unwrap();
        assert_eq!(c, JobId(3));
        assert!(!next.exists(), "not inherited");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every event logged while it is the default subscriber: "LEVEL message".
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<String>>>);

    impl tracing::Subscriber for Captured {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, e: &tracing::Event<'_>) {
            struct Msg(String);
            impl tracing::field::Visit for Msg {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0 = format!("{v:?}");
                    }
                }
            }
            let mut m = Msg(String::new());
            e.record(&mut m);
            let line = format!("{} {}", e.metadata().level(), m.0);
            self.0.lock().unwrap().push(line);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// Issue 33, item 6: a failed launch and a refused plan reach the
    /// daemon's log as errors (not only the job's `reason`).
    #[test]
    fn failed_launches_and_refused_plans_are_logged_as_errors() {
        let (dir, clock, engine) = manual_setup("log");
        let log = Captured::default();
        tracing::subscriber::with_default(log.clone(), || {
            let mut d = open_on(&dir, &clock, &engine, OnDamage::Stop).unwrap();
            let mut sub = spec();
            sub.command = "fail-start".into();
            let (id, _) = d.submit(sub).unwrap();
            let prep = d.prepare().unwrap().unwrap();
            d.apply(prep, Err("plan refused by the validator".into()))
                .unwrap();
            plan_gpus(&mut d, id, 1);
        });
        let lines = log.0.lock().unwrap().clone();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("ERROR launch failed: fake: fail-start refused")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("ERROR planner error: plan refused by the validator")),
            "{lines:?}"
        );
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
