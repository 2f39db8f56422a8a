//! The engine seam: how one attempt of one job is started, watched, stopped,
//! found again after a daemon restart, and read (logs, done-file).
//!
//! The trait is job-level on purpose: the supervisor hands over *what* to
//! run (command, GPUs by node, the job protocol's variables) and gets back a
//! serialisable [`Handle`] it journals. *How* it runs (processes on this
//! host, or a workload manager's allocation) is the engine's: the
//! environment, the rendezvous address and port, where logs, exit codes,
//! the checkpoint directory and the done-file live, and what it keeps in
//! the handle.
//!
//! Engines describe themselves ([`EngineEntry`]): a name, one line for
//! `--help`, their own flags ([`flag::Flag`]: name, help, default and
//! parsing in one definition), and how to build the engine and its device
//! source from what every engine gets and those flags ([`EngineSetup`]).
//! The CLI lists every engine's flags from [`REGISTRY`], and [`build`]
//! refuses a flag given with an engine it does not belong to, naming the
//! engine it does; no engine knows another's flags. So a new engine is one
//! module here and one line in [`REGISTRY`]; the supervisor, journal,
//! round driver, API and CLI stay as they are (the test-only `instant`
//! engine, with its own flag, is added exactly that way).
//!
//! Time is the supervisor's: an engine never waits out a grace period. The
//! supervisor asks for a graceful [`Stop`] and, once its injected clock
//! passes the grace period, for an immediate one.

use std::path::{Path, PathBuf};

use gpuplan_core::JobId;
use serde::{Deserialize, Serialize};

use crate::spec::JobSubmission;
use crate::ExecError;

mod fake;
pub mod flag;
#[cfg(test)]
mod instant;
mod local;
pub(crate) mod slurm;

pub use fake::{FakeEngine, FakeScript};
pub use flag::{AnyFlag, EngineOptions};
pub use local::LocalEngine;

/// One attempt to start: what to run and where; the engine decides how.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptSpec {
    /// The job this is an attempt of.
    pub job: JobId,
    /// Attempt number (1 for the first launch).
    pub attempt: u32,
    /// Run by `sh -c` once per rank.
    pub command: String,
    /// The job's GPUs grouped by node, in rank order: one rank per GPU.
    pub nodes: Vec<(String, Vec<String>)>,
    /// The job protocol's variables (`GPUPLAN_JOB_ID`, `GPUPLAN_REPORT_URL`,
    /// batch sizes; docs/job-protocol.md). The engine adds the rank layout,
    /// rendezvous, checkpoint directory and done-file.
    pub env: Vec<(String, String)>,
    /// Run as this user (with its primary group) when the daemon is root.
    pub uid: Option<u32>,
    /// The job's token for its reports: the engine writes it to a 0600
    /// file of the attempt directory ([`token_file`]) and names the file
    /// in `GPUPLAN_JOB_TOKEN_FILE`; never put in the environment, which
    /// every child of the job inherits and any process of its user reads.
    pub token: String,
}

impl AttemptSpec {
    /// How many ranks: one per GPU.
    pub fn ranks(&self) -> u32 {
        self.nodes.iter().map(|(_, g)| g.len() as u32).sum()
    }
}

/// One rank of an attempt as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankProc {
    /// Rank number, 0 first.
    pub rank: u32,
    /// The engine's id for the rank (local: the process group of its
    /// wrapper; 0 = not found).
    pub pgid: i32,
}

/// Where an attempt lives, journaled with it: enough for a restarted daemon
/// to find it again. Its fields are the journal's (`dir`, `ranks`, and the
/// engine's own keys beside them), so journals of earlier releases load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handle {
    /// The attempt's directory (local: `rank-R.log`, `rank-R.exit`).
    pub dir: PathBuf,
    /// Filled in when the attempt starts (or is adopted).
    pub ranks: Vec<RankProc>,
    /// What the engine keeps of the attempt (its own id for it, say),
    /// opaque to the daemon: journaled beside the fields above.
    #[serde(flatten)]
    pub engine: EngineState,
}

impl Handle {
    /// A handle with no ranks yet and nothing of the engine's.
    pub fn new(dir: PathBuf) -> Self {
        Handle {
            dir,
            ranks: Vec::new(),
            engine: EngineState::default(),
        }
    }
}

/// An engine's own keys in a [`Handle`]: JSON values by name, read and
/// written by that engine alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EngineState(serde_json::Map<String, serde_json::Value>);

impl EngineState {
    /// The number under `key`, if there is one.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.0.get(key)?.as_u64()
    }

    /// Set `key` to a number, or remove it (`None`).
    pub fn set_u64(&mut self, key: &str, v: Option<u64>) {
        match v {
            Some(v) => {
                self.0.insert(key.to_string(), v.into());
            }
            None => {
                self.0.remove(key);
            }
        }
    }
}

/// One rank's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankStatus {
    /// Still running.
    Running,
    /// Exit code of the user command; `None` if killed by a signal.
    Exited(Option<i32>),
}

/// How to stop an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Ask the ranks to checkpoint and exit (SIGTERM).
    Graceful,
    /// The grace period is over (SIGKILL).
    Now,
}

/// How attempts run (local processes, a workload manager's jobs); the
/// supervisor decides when.
pub trait Engine: Send {
    /// The engine's registry name.
    fn name(&self) -> &'static str;
    /// Where attempt `attempt` of `job` lives, before it starts: the
    /// supervisor journals it with the intent to launch (write-ahead), and
    /// reads an ended attempt's logs through it.
    fn locate(&self, job: JobId, attempt: u32) -> Handle;
    /// Start every rank of the attempt; fills in `h.ranks`. On error nothing
    /// of the attempt is left running.
    fn start(&mut self, spec: &AttemptSpec, h: &mut Handle) -> Result<(), ExecError>;
    /// Each rank's state, in rank order.
    fn status(&mut self, h: &Handle) -> Vec<RankStatus>;
    /// Stop every rank, gracefully or now; idempotent, never waits.
    fn stop(&mut self, h: &Handle, how: Stop);
    /// After a daemon restart: find an attempt of `ranks` ranks again and
    /// refresh `h.ranks`. True when every rank was found (running or
    /// exited); false for an attempt that never fully started.
    fn adopt(&mut self, h: &mut Handle, ranks: u32) -> bool;
    /// The last `lines` lines of one rank's output.
    fn logs(&self, h: &Handle, rank: u32, lines: usize) -> Vec<String>;
    /// Whether the job has said it finished (`GPUPLAN_DONE_FILE`):
    /// completion that no exit code can hide.
    fn done(&self, job: JobId) -> bool;

    /// Enter a new job into the engine's own queue before the daemon
    /// journals it (a held job in a workload manager); the engine's id for
    /// it, if it keeps one. A crash before the journal write leaves the job
    /// in that queue, where [`Engine::discover`] finds it again.
    fn admit(&mut self, job: JobId, spec: &JobSubmission) -> Result<Option<u64>, ExecError> {
        let _ = (job, spec);
        Ok(None)
    }
    /// The engine's id journaled for `job` (after a daemon restart).
    fn known(&mut self, job: JobId, id: u64) {
        let _ = (job, id);
    }
    /// Jobs waiting in the engine's queue that the daemon does not know yet
    /// (jobs users queued there for gpuplan to plan), with their specs;
    /// polled each round. Refused ones come back as errors (id, why) to
    /// report once.
    #[allow(clippy::type_complexity)]
    fn discover(&mut self) -> Result<(Vec<(u64, JobSubmission)>, Vec<(u64, String)>), ExecError> {
        Ok((Vec::new(), Vec::new()))
    }
    /// The job is final: let go of what the engine still holds for it
    /// (cancel its job that is still queued there).
    fn retire(&mut self, job: JobId) -> Result<(), ExecError> {
        let _ = job;
        Ok(())
    }
    /// Whether a multi-node job must hold the same GPU count on each node
    /// (an engine that allocates one count per node); the daemon's rounds
    /// then set the pipeline's `even_nodes` rule.
    fn even_nodes(&self) -> bool {
        false
    }
}

/// What every engine is built from, whichever it is: the device source
/// `--devices` names, the daemon's state directory, sharing and clock, and
/// the engine flags given (their values the engine reads through its own
/// [`flag::Flag`]s; [`build`] has refused any that are not its own).
pub struct EngineSetup<'a> {
    /// `--devices`: `nvml` or `fake:NODESxGPUS[:TYPE]+...`. Every engine's,
    /// not one engine's flag: fake devices serve any engine that takes
    /// devices from it, and `cluster show` reads it too; an engine that
    /// brings its own device source ignores it.
    pub devices: &'a str,
    /// The engine flags given, by name.
    pub options: &'a EngineOptions,
    /// The daemon's state directory: jobs' files live under it.
    pub state_dir: &'a Path,
    /// The daemon's jobs per GPU (1 = none).
    pub sharing: u32,
    /// The daemon's clock, for engines that cache what they read.
    pub clock: std::sync::Arc<dyn crate::clock::Clock>,
}

/// One engine `serve --engine` accepts.
pub struct EngineEntry {
    /// What `--engine` takes.
    pub name: &'static str,
    /// One line for `--help` and error messages.
    pub description: &'static str,
    /// Its own flags: the CLI offers them, [`build`] refuses them with any
    /// other engine, and this entry's `build` reads them. Their names are
    /// unique across the registry.
    pub flags: &'static [&'static dyn AnyFlag],
    /// Build the device source and the engine.
    pub build: fn(&EngineSetup) -> Result<Backends, ExecError>,
}

/// Every engine, in the order `--help` lists them.
pub const REGISTRY: &[EngineEntry] = &[
    local::ENTRY,
    slurm::ENTRY,
    #[cfg(test)]
    instant::ENTRY,
];

/// The engines' names, in registry order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// The engine `--engine NAME` names; an unknown name is refused with the
/// valid ones.
pub fn entry(name: &str) -> Result<&'static EngineEntry, ExecError> {
    REGISTRY.iter().find(|e| e.name == name).ok_or_else(|| {
        ExecError::Config(format!(
            "--engine {name}: unknown engine; valid: {}",
            names().join(", ")
        ))
    })
}

/// Refuse the engine flags in `options` that `engine` does not take, here
/// and once for every engine: a flag of another engine by naming that
/// engine (`--F is an option of --engine E`), so an operator learns which
/// engine the flag was meant for and no engine lists another's flags; a
/// flag no engine has; a value its flag does not parse, naming the flag.
pub fn check_options(engine: &str, options: &EngineOptions) -> Result<(), ExecError> {
    let chosen = entry(engine)?;
    for (name, value) in options.iter() {
        let owner = REGISTRY
            .iter()
            .find_map(|e| e.flags.iter().find(|f| f.name() == name).map(|f| (e, f)));
        match owner {
            Some((e, f)) if e.name == chosen.name => f
                .check(value)
                .map_err(|why| ExecError::Config(format!("--{name} {value}: {why}")))?,
            Some((e, _)) => {
                return Err(ExecError::Config(format!(
                    "--{name} is an option of --engine {}",
                    e.name
                )))
            }
            None => return Err(ExecError::Config(format!("--{name}: no engine has this option"))),
        }
    }
    Ok(())
}

/// Where GPUs come from, and how jobs run on them.
pub type Backends = (Box<dyn crate::device::Devices>, Box<dyn Engine>);

/// The device source and engine `serve --engine NAME` runs on, built by the
/// named engine from `setup` once its options are checked
/// ([`check_options`]); an unknown name is refused with the valid ones.
pub fn build(engine: &str, setup: &EngineSetup) -> Result<Backends, ExecError> {
    let entry = entry(engine)?;
    check_options(engine, setup.options)?;
    (entry.build)(setup)
}

/// Write the job's token to `DIR/token` (0600, the job's user's; one
/// left by an earlier start of the same attempt is replaced) and return
/// the variable that names it, for every engine's `start`.
pub(crate) fn token_file(
    dir: &Path,
    token: &str,
    owner: Option<(u32, u32)>,
) -> Result<(String, String), ExecError> {
    // unlink never follows a link: whatever is there goes.
    let _ = std::fs::remove_file(dir.join("token"));
    let path = crate::jobfile::write_private(dir, "token", token, owner)?;
    Ok((
        "GPUPLAN_JOB_TOKEN_FILE".to_string(),
        path.to_string_lossy().into_owned(),
    ))
}

/// Where a job's files live under the daemon's state directory, whichever
/// engine runs it: `STATE/jobs/ID/` with its attempts and its checkpoint
/// directory, so the job protocol reads the same under every engine.
pub(crate) fn job_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join("jobs").join(job.0.to_string())
}

/// The job's checkpoint directory (`GPUPLAN_CHECKPOINT_DIR`), kept across attempts.
pub(crate) fn checkpoint_dir(state_dir: &Path, job: JobId) -> PathBuf {
    job_dir(state_dir, job).join("checkpoint")
}

/// The file a finished job creates (`GPUPLAN_DONE_FILE`). A stop that
/// lands while a job exits can turn its 0 into 143 (Python, for one,
/// restores the default SIGTERM action while it shuts down), and a job
/// relaunched after finishing would finish twice.
pub(crate) fn done_file(state_dir: &Path, job: JobId) -> PathBuf {
    checkpoint_dir(state_dir, job).join("gpuplan-done")
}

/// Mode of the directories above a job's files (`STATE`, `STATE/jobs`,
/// `STATE/jobs/ID`): search only for others, so a job run as its own user
/// reaches its own attempt and checkpoint directories, and nobody else can
/// list or read anything in them.
pub(crate) const DIR_SEARCH_MODE: u32 = 0o711;
/// Mode of a job's attempt and checkpoint directories (owned by the job's
/// user when the daemon runs jobs as their users).
pub(crate) const DIR_PRIVATE_MODE: u32 = 0o700;
/// Mode of the rank logs the daemon creates.
pub(crate) const LOG_MODE: u32 = 0o600;

/// `mkdir -p` with `mode` for `d` and any parent it creates, then `mode`
/// on `d` itself (umask aside, and tightening a directory an earlier
/// release made 0755). A link where the directory should be is refused.
pub(crate) fn mkdir(d: &Path, mode: u32) -> Result<(), ExecError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let err = |source| ExecError::Io {
        context: format!("create {}", d.display()),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(d)
        .map_err(err)?;
    let m = std::fs::symlink_metadata(d).map_err(err)?;
    if !m.is_dir() {
        return Err(err(std::io::Error::other("not a directory (a link?)")));
    }
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).map_err(err)
}

pub(crate) use crate::jobfile::{tail_beneath, tail_owned};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What `serve` passes an engine: `devices`, `options`, `sharing`,
    /// state under `dir`.
    pub(crate) fn setup<'a>(
        devices: &'a str,
        options: &'a EngineOptions,
        sharing: u32,
        dir: &'a Path,
    ) -> EngineSetup<'a> {
        EngineSetup {
            devices,
            options,
            state_dir: dir,
            sharing,
            clock: std::sync::Arc::new(crate::clock::SystemClock),
        }
    }

    #[test]
    fn unknown_engines_are_refused_with_the_valid_ones() {
        let d = std::env::temp_dir();
        let none = EngineOptions::new();
        let (_, e) = build("local", &setup("fake:1x1", &none, 1, &d)).unwrap();
        assert_eq!(e.name(), "local");
        let e = build("pbs", &setup("fake:1x1", &none, 1, &d))
            .err()
            .expect("not an engine")
            .to_string();
        assert!(
            e.contains("pbs") && e.contains(&format!("valid: {}", names().join(", "))),
            "{e}"
        );
        assert!(names().starts_with(&["local"]), "local first: the default");
    }

    /// Every engine's every flag, given with another engine, is refused
    /// by the registry naming its own engine, before that engine's build
    /// (which would otherwise complain of what it lacks); a flag no engine
    /// has is refused too.
    #[test]
    fn an_engine_flag_given_with_another_engine_is_refused_naming_its_engine() {
        let d = std::env::temp_dir();
        let mut seen = 0;
        for owner in REGISTRY {
            for f in owner.flags {
                let other = REGISTRY.iter().find(|e| e.name != owner.name).unwrap();
                let o = EngineOptions::new().with(f.name(), f.default().unwrap_or("x"));
                let e = build(other.name, &setup("fake:1x1", &o, 1, &d))
                    .err()
                    .expect("refused")
                    .to_string();
                assert_eq!(
                    e,
                    format!("--{} is an option of --engine {}", f.name(), owner.name)
                );
                seen += 1;
            }
        }
        assert!(seen > 0, "the test engine has a flag");
        let o = EngineOptions::new().with("bogus", "1");
        let e = build("local", &setup("fake:1x1", &o, 1, &d))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--bogus: no engine has this option");
    }

    /// One definition per flag: its name belongs to one engine (else the
    /// refusal above could not name it), and its help and default are fit
    /// for `--help`.
    #[test]
    fn engine_flags_are_unique_and_their_defaults_parse() {
        let mut names = std::collections::HashSet::new();
        for e in REGISTRY {
            for f in e.flags {
                assert!(names.insert(f.name()), "--{} declared twice", f.name());
                assert!(
                    !f.name().starts_with('-') && !f.help().is_empty(),
                    "--{}",
                    f.name()
                );
                assert!(f.value_name().chars().all(|c| c.is_ascii_uppercase() || c == '_'));
                if let Some(d) = f.default() {
                    assert_eq!(f.check(d), Ok(()), "--{} default {d}", f.name());
                }
            }
        }
    }
}
