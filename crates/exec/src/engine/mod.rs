//! The engine seam: how one attempt of one job is started, watched, stopped,
//! found again after a daemon restart, and read (logs, done-file).
//!
//! The trait is job-level on purpose: the supervisor hands over *what* to
//! run (command, GPUs by node, the job protocol's variables) and gets back a
//! serialisable [`Handle`] it journals. *How* it runs (processes on this
//! host, or a Slurm allocation) is the engine's: the environment, the
//! rendezvous address and port, where logs, exit codes, the checkpoint
//! directory and the done-file live, and what it keeps in the handle.
//!
//! Engines describe themselves ([`EngineEntry`]): a name, one line for
//! `--help`, and how to build the engine and its device source from the
//! `serve` flags ([`EngineArgs`]), refusing the ones it cannot honour. So a
//! new engine is one module here and one line in [`REGISTRY`]; the
//! supervisor, journal, round driver and API stay as they are (the
//! test-only `instant` engine is added exactly that way).
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
#[cfg(test)]
mod instant;
mod local;
pub(crate) mod slurm;

pub use fake::{FakeEngine, FakeScript};
pub use local::LocalEngine;
pub use slurm::SlurmEngine;

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
    /// What the engine keeps of the attempt (Slurm: `slurm_job`, its job
    /// id), opaque to the daemon: journaled beside the fields above.
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

/// How attempts run (local processes, Slurm jobs); the supervisor decides when.
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
    /// journals it (Slurm: a held batch job); the engine's id for it, if
    /// it keeps one. A crash before the journal write leaves the job in
    /// that queue, where [`Engine::discover`] finds it again.
    fn admit(&mut self, job: JobId, spec: &JobSubmission) -> Result<Option<u64>, ExecError> {
        let _ = (job, spec);
        Ok(None)
    }
    /// The engine's id journaled for `job` (after a daemon restart).
    fn known(&mut self, job: JobId, id: u64) {
        let _ = (job, id);
    }
    /// Jobs waiting in the engine's queue that the daemon does not know yet
    /// (Slurm: held jobs in the partition with `--comment=gpuplan`), with
    /// their specs; polled each round. Refused ones come back as errors
    /// (id, why) to report once.
    #[allow(clippy::type_complexity)]
    fn discover(&mut self) -> Result<(Vec<(u64, JobSubmission)>, Vec<(u64, String)>), ExecError> {
        Ok((Vec::new(), Vec::new()))
    }
    /// The job is final: let go of what the engine still holds for it
    /// (Slurm: cancel a job that is still queued).
    fn retire(&mut self, job: JobId) -> Result<(), ExecError> {
        let _ = job;
        Ok(())
    }
    /// Whether a multi-node job must hold the same GPU count on each node
    /// (Slurm allocates one count per node); the daemon's rounds then set
    /// the pipeline's `even_nodes` rule.
    fn even_nodes(&self) -> bool {
        false
    }
}

/// What an engine is built from: the `serve` flags that choose and shape
/// engines, and the daemon's state directory, sharing and clock. An engine
/// takes what it needs and refuses flags it cannot honour.
pub struct EngineArgs<'a> {
    /// `--devices`: `nvml` or `fake:NODESxGPUS[:TYPE]+...`.
    pub devices: &'a str,
    /// `--partition`: the Slurm partition gpuplan plans.
    pub partition: Option<&'a str>,
    /// `--slurm-timeout`: the longest one Slurm command may take.
    pub slurm_timeout: std::time::Duration,
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
    /// Build the device source and the engine.
    pub build: fn(&EngineArgs) -> Result<Backends, ExecError>,
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

/// Why `--sharing` is refused with the Slurm engine. A planned partner
/// would otherwise wait in Slurm behind the GPU its partner holds as
/// `gres:gpu` while the daemon counts it running. Slurm's `gres/shard` runs
/// two jobs on one device, but 22.05 refuses to switch a job between
/// `gres/gpu` and `gres/shard` once either is set, and this engine keeps one
/// held Slurm job per gpuplan job across attempts (docs/slurm.md, "Sharing").
pub(crate) const SLURM_SHARING: &str = "--sharing with --engine slurm is not supported: a job the plan \
     puts on a GPU another job holds would wait in Slurm behind it. Slurm's gres/shard could run \
     both (slurm.conf GresTypes=gpu,shard), but Slurm 22.05 cannot switch a held job between \
     gres/gpu and gres/shard (`scontrol update ... TresPerNode=gres:shard:1`: Invalid generic \
     resource (gres) specification); run without --sharing, or with the local engine \
     (docs/slurm.md, \"Sharing\")";

/// Where GPUs come from, and how jobs run on them.
pub type Backends = (Box<dyn crate::device::Devices>, Box<dyn Engine>);

/// The device source and engine `serve --engine NAME` runs on, built by the
/// named engine from `args`; an unknown name is refused with the valid ones.
pub fn backends(engine: &str, args: &EngineArgs) -> Result<Backends, ExecError> {
    let entry = REGISTRY.iter().find(|e| e.name == engine).ok_or_else(|| {
        ExecError::Config(format!(
            "--engine {engine}: unknown engine; valid: {}",
            names().join(", ")
        ))
    })?;
    (entry.build)(args)
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

/// Open `path`, which lies under `root`, for reading without following a
/// link on the way: each directory below `root` and the file itself are
/// opened with `O_NOFOLLOW` (relative to the one above), so a job that
/// owns its attempt directory cannot point the daemon at another file by
/// a link. Returns the file and the owner of the directory holding it.
fn open_beneath(root: &Path, path: &Path) -> std::io::Result<(std::fs::File, u32)> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let rel = path
        .strip_prefix(root)
        .map_err(|_| std::io::Error::other(format!("{} is not under {}", path.display(), root.display())))?;
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Err(std::io::Error::other("no file name"));
    };
    let mut dir: OwnedFd = std::fs::File::open(root)?.into();
    let openat = |at: &OwnedFd, name: &std::ffi::OsStr, flags: libc::c_int| -> std::io::Result<OwnedFd> {
        let c = CString::new(name.as_bytes()).map_err(std::io::Error::other)?;
        if name == ".." {
            return Err(std::io::Error::other("`..` in a job's path"));
        }
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                at.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened and owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    for d in dirs {
        dir = openat(&dir, d, libc::O_RDONLY | libc::O_DIRECTORY)?;
    }
    let dir_owner = std::fs::File::from(dir.try_clone()?).metadata()?.uid();
    // Non-blocking: a FIFO put in the log's place must not hang the daemon.
    let f = std::fs::File::from(openat(&dir, file, libc::O_RDONLY | libc::O_NONBLOCK)?);
    Ok((f, dir_owner))
}

/// Last `n` lines of a log under `root` (reads at most its last 64 KiB),
/// read without following links ([`open_beneath`]) and only if it is a
/// regular file with one link owned by the daemon's user or the owner of
/// its directory (the job's): otherwise one line saying it was refused.
pub(crate) fn tail_beneath(root: &Path, path: &Path, n: usize) -> Vec<String> {
    match open_beneath(root, path) {
        Ok((f, dir_owner)) => tail_checked(f, path, &[dir_owner], n),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => refused(path, &e.to_string()),
    }
}

/// Last `n` lines of a file outside the state directory (a user's Slurm
/// output file), opened without following a link at its last component and
/// read only if `owner` (the job's user) or the daemon's user owns it.
pub(crate) fn tail_owned(path: &Path, owner: Option<u32>, n: usize) -> Vec<String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => tail_checked(f, path, &owner.into_iter().collect::<Vec<_>>(), n),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => refused(path, &e.to_string()),
    }
}

fn refused(path: &Path, why: &str) -> Vec<String> {
    tracing::warn!("log {} refused: {why}", path.display());
    vec![format!("gpuplan: log {} refused: {why}", path.display())]
}

fn tail_checked(mut f: std::fs::File, path: &Path, owners: &[u32], n: usize) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = f.metadata() else {
        return refused(path, "cannot stat it");
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.is_file() || m.nlink() != 1 {
        return refused(path, "not a regular file with one link");
    }
    if m.uid() != me && !owners.contains(&m.uid()) {
        return refused(path, &format!("owned by uid {}, not by the job's user", m.uid()));
    }
    let start = m.len().saturating_sub(64 * 1024);
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn args<'a>(
        devices: &'a str,
        partition: Option<&'a str>,
        sharing: u32,
        dir: &'a Path,
    ) -> EngineArgs<'a> {
        EngineArgs {
            devices,
            partition,
            slurm_timeout: std::time::Duration::from_secs(1),
            state_dir: dir,
            sharing,
            clock: std::sync::Arc::new(crate::clock::SystemClock),
        }
    }

    #[test]
    fn unknown_engines_are_refused_with_the_valid_ones() {
        let d = std::env::temp_dir();
        let (_, e) = backends("local", &args("fake:1x1", None, 1, &d)).unwrap();
        assert_eq!(e.name(), "local");
        let e = backends("pbs", &args("fake:1x1", None, 1, &d))
            .err()
            .expect("not an engine")
            .to_string();
        assert!(e.contains("pbs") && e.contains("valid: local, slurm"), "{e}");
        let e = backends("local", &args("fake:1x1", Some("p"), 1, &d))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--partition needs --engine slurm");
        let e = backends("slurm", &args("", None, 1, &d))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--engine slurm needs --partition NAME");
    }

    /// Refused before any Slurm command runs, so no Slurm is needed here.
    #[test]
    fn sharing_with_the_slurm_engine_is_refused_with_the_reason() {
        let d = std::env::temp_dir();
        let e = backends("slurm", &args("", Some("all"), 2, &d))
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("--sharing") && e.contains("gres/shard") && e.contains("docs/slurm.md"),
            "{e}"
        );
        // Without sharing nothing changes, and the local engine shares.
        assert!(backends("local", &args("fake:1x1", None, 2, &d)).is_ok());
    }

    /// An engine's keys sit beside `dir` and `ranks` in the journal, as
    /// `slurm_job` did before handles had engine state: old lines load,
    /// and a handle is written back key for key.
    #[test]
    fn engine_state_is_journaled_beside_the_handle() {
        let old = r#"{"dir":"/s/jobs/1/attempt-2","ranks":[{"rank":0,"pgid":0}],"slurm_job":42}"#;
        let h: Handle = serde_json::from_str(old).unwrap();
        assert_eq!(h.engine.u64("slurm_job"), Some(42));
        assert_eq!(serde_json::to_string(&h).unwrap(), old);
        let mut h = Handle::new("/d".into());
        assert_eq!(serde_json::to_string(&h).unwrap(), r#"{"dir":"/d","ranks":[]}"#);
        h.engine.set_u64("slurm_job", Some(7));
        h.engine.set_u64("slurm_job", None);
        assert_eq!(h, Handle::new("/d".into()));
    }
}
