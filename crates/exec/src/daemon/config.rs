//! The daemon's settings (the `serve` flags) and their one check.

use gpuplan_core::queue::Queue;
use gpuplan_core::{JobId, PolicyParams};
use gpuplan_solve::Limits;
use std::path::PathBuf;

use crate::jobs::JobRecord;
use crate::journal::OnDamage;

/// The shortest round interval: supervision ticks at a quarter of it,
/// down to 20 ms (`driver`), and a shorter one was once raised to 10 ms in
/// silence.
pub const MIN_INTERVAL_S: f64 = 0.01;

/// Daemon settings (the `serve` flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the journal, the admin token and the jobs' files live (`--state`).
    pub state_dir: PathBuf,
    /// The planner's registry name; oracle planners are refused at open.
    pub planner: String,
    /// Seconds between rounds.
    pub interval_s: f64,
    /// Seconds between SIGTERM and SIGKILL, unless the job sets `grace_s`.
    pub grace_s: f64,
    /// First restart delay after a crash; doubles with each further crash.
    pub backoff_s: f64,
    /// Crashes before a job is marked failed, unless the job sets `max_crashes`.
    pub max_crashes: u32,
    /// Log lines kept with a failed job.
    pub log_lines: usize,
    /// The planner's time limit and gap per round.
    pub limits: Limits,
    /// The planner's parameters (sharing included); default the planner's own.
    pub params: PolicyParams,
    /// Base URL jobs report to, e.g. `http://127.0.0.1:7077`.
    pub report_base: String,
    /// CUDA MPS for jobs that share GPUs (`serve --mps DIR`): every job gets
    /// `CUDA_MPS_PIPE_DIRECTORY=DIR/pipe` and `CUDA_MPS_LOG_DIRECTORY=DIR/log`,
    /// the directories of the control daemon the operator starts
    /// (`nvidia-cuda-mps-control -d` with the same variables). `None`:
    /// co-located jobs time-slice.
    pub mps: Option<PathBuf>,
    /// What a damaged journal does at start: stop the daemon (default), or
    /// keep what is intact (`serve --recover`).
    pub on_damage: OnDamage,
    /// The queue tree (`serve --queues FILE`, docs/tenants.md); empty: one
    /// pool. Submissions must name one of its leaves or none (`default`).
    pub queues: Vec<Queue>,
    /// Whether `/metrics`, which needs no token, labels job series with
    /// job names (`serve --metrics-job-labels`); by default only ids.
    pub metrics_job_names: JobNames,
    /// How long finished jobs are kept (`serve --keep-finished`): then
    /// they leave the job table, the journal and the disk.
    pub keep_finished: Keep,
    /// Wall-clock seconds one start and finish estimate may take
    /// (`serve --estimate-budget`): its forward simulation stops there and
    /// says how far it got.
    pub estimate_budget_s: f64,
}

/// Longest `estimate_budget_s`: an estimate answers an HTTP request, which
/// waits at most [`crate::api::ENGINE_REQUEST_TIMEOUT`].
pub const MAX_ESTIMATE_BUDGET_S: f64 = 25.0;

/// How long finished (completed, failed, cancelled) jobs are kept: a job
/// table, journal and `STATE/jobs` that grow with every job ever
/// submitted slow every restart and every `/v1/jobs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
    /// Each for this many seconds after it finished (`7d`, `12h`, `30m`, `90s`).
    For(f64),
    /// The latest this many (a plain count: `100`).
    Last(usize),
}

impl Default for Keep {
    /// A week, long enough to read what happened to last week's jobs.
    fn default() -> Self {
        Keep::For(7.0 * 86_400.0)
    }
}

impl Keep {
    /// `7d`, `12h`, `30m`, `90s` (a duration) or `100` (a count).
    pub fn parse(s: &str) -> Result<Keep, String> {
        let s = s.trim();
        let bad = || format!("'{s}': expected a duration (7d, 12h, 30m, 90s) or a count of jobs (100)");
        let unit = match s.chars().last() {
            Some('d') => 86_400.0,
            Some('h') => 3_600.0,
            Some('m') => 60.0,
            Some('s') => 1.0,
            Some(c) if c.is_ascii_digit() => return s.parse().map(Keep::Last).map_err(|_| bad()),
            _ => return Err(bad()),
        };
        let n: f64 = s[..s.len() - 1].parse().map_err(|_| bad())?;
        if !(n.is_finite() && n >= 0.0) {
            return Err(bad());
        }
        Ok(Keep::For(n * unit))
    }

    /// The finished jobs of `jobs` past this retention at `now`, by id.
    pub(super) fn expired<'a>(&self, jobs: impl Iterator<Item = &'a JobRecord>, now: f64) -> Vec<JobId> {
        // Let go of by the engine and stopped: nothing of them is left running.
        let done: Vec<&JobRecord> = jobs
            .filter(|j| j.status.is_final() && !j.live() && j.engine_id.is_none())
            .collect();
        match *self {
            Keep::For(s) => done
                .iter()
                .filter(|j| j.finished_unix_s.is_some_and(|t| now - t > s))
                .map(|j| j.id)
                .collect(),
            Keep::Last(n) => {
                let mut by_end: Vec<(f64, JobId)> = done
                    .iter()
                    .map(|j| (j.finished_unix_s.unwrap_or(0.0), j.id))
                    .collect();
                by_end.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
                by_end.into_iter().skip(n).map(|(_, id)| id).collect()
            }
        }
    }
}

/// Whether job names are shown where no token is asked (`/metrics`): a
/// job's name can say what a team works on, so it is opt-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobNames {
    /// Job series carry `job_id` only.
    #[default]
    Hidden,
    /// Job series carry `job_id` and `job_name`.
    Shown,
}

impl Config {
    /// The `serve` defaults for `planner` (60 s rounds, 30 s grace, 3 crashes).
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
            params: gpuplan_solve::registry::default_params(planner),
            report_base: String::new(),
            mps: None,
            on_damage: OnDamage::Stop,
            queues: Vec::new(),
            metrics_job_names: JobNames::Hidden,
            keep_finished: Keep::default(),
            estimate_budget_s: 5.0,
        }
    }

    /// The settings' one check, every problem at once: core's check of the
    /// params, a round interval > 0, and MPS only with sharing. `serve`
    /// names each field by its flag; [`Daemon::open`] refuses a config
    /// that fails it.
    pub fn check(&self) -> Result<(), Vec<ConfigError>> {
        let mut errs: Vec<ConfigError> = match self.params.check(false) {
            Ok(()) => Vec::new(),
            Err(e) => e
                .into_iter()
                .map(|e| ConfigError {
                    field: ConfigField::Param(e.field),
                    problem: e.problem,
                })
                .collect(),
        };
        if !(self.interval_s >= MIN_INTERVAL_S && self.interval_s.is_finite()) {
            errs.push(ConfigError {
                field: ConfigField::Interval,
                problem: format!("must be at least {} ms", MIN_INTERVAL_S * 1e3),
            });
        }
        if self.max_crashes == 0 {
            errs.push(ConfigError {
                field: ConfigField::MaxCrashes,
                problem: "must be >= 1 (the first crash is retried with back-off)".into(),
            });
        }
        if let Err(e) = self.limits.check() {
            errs.extend(e.into_iter().map(|(key, problem)| ConfigError {
                field: ConfigField::Limit(key),
                problem,
            }));
        }
        if !(0.0..=crate::spec::MAX_GRACE_S).contains(&self.grace_s) {
            errs.push(ConfigError {
                field: ConfigField::Grace,
                problem: format!("must be between 0 and {} s (one hour)", crate::spec::MAX_GRACE_S),
            });
        }
        if !(self.estimate_budget_s > 0.0 && self.estimate_budget_s <= MAX_ESTIMATE_BUDGET_S) {
            errs.push(ConfigError {
                field: ConfigField::EstimateBudget,
                problem: format!(
                    "must be > 0 and at most {MAX_ESTIMATE_BUDGET_S} s (an estimate answers a request), got {}",
                    self.estimate_budget_s
                ),
            });
        }
        if self.mps.is_some() && self.params.sharing < 2 {
            errs.push(ConfigError {
                field: ConfigField::Mps,
                problem: "needs --sharing: without sharing no two jobs run on one GPU".into(),
            });
        }
        let mut tree = Vec::new();
        // The cluster is not known yet: guarantees beyond it are scaled
        // each round (`queue::fit_guarantees`), so only the tree is checked.
        gpuplan_core::queue::check_parts(&self.queues, u64::MAX, &[], &mut tree);
        errs.extend(tree.into_iter().map(|problem| ConfigError {
            field: ConfigField::Queues,
            problem,
        }));
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

/// Which setting of a [`Config`] a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigField {
    /// A round parameter (core's field).
    Param(gpuplan_core::ParamField),
    /// `interval_s`.
    Interval,
    /// `grace_s`.
    Grace,
    /// `mps`.
    Mps,
    /// `queues` (the problem names the queue's path).
    Queues,
    /// `estimate_budget_s`.
    EstimateBudget,
    /// `max_crashes`.
    MaxCrashes,
    /// One of the planner's `limits` (its key in `solve::Limits::check`).
    Limit(&'static str),
}

/// One problem of a [`Config`]: its field and what is wrong, worded to
/// follow the field's name (`serve` puts its flag in front). Displays with
/// the field's key: `interval_s: must be > 0`, `params.sharing: …`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The setting at fault.
    pub field: ConfigField,
    /// What is wrong with it, worded to follow its name.
    pub problem: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field {
            ConfigField::Param(p) => write!(f, "params.{}: {}", p.key(), self.problem),
            ConfigField::Interval => write!(f, "interval_s: {}", self.problem),
            ConfigField::Grace => write!(f, "grace_s: {}", self.problem),
            ConfigField::Mps => write!(f, "mps: {}", self.problem),
            ConfigField::Queues => write!(f, "{}", self.problem),
            ConfigField::EstimateBudget => write!(f, "estimate_budget_s: {}", self.problem),
            ConfigField::MaxCrashes => write!(f, "max_crashes: {}", self.problem),
            ConfigField::Limit(key) => write!(f, "limits.{key}: {}", self.problem),
        }
    }
}

impl std::error::Error for ConfigError {}
