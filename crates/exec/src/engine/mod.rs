//! The engine seam: how one attempt of one job is started, watched, stopped,
//! found again after a daemon restart, and read (logs, done-file).
//!
//! The trait is job-level on purpose: the supervisor hands over *what* to
//! run (command, GPUs by node, the job protocol's variables) and gets back a
//! serialisable [`Handle`] it journals. *How* it runs (processes on this
//! host, or a Slurm allocation) is the engine's: the environment, the
//! rendezvous address and port, where logs, exit codes, the checkpoint
//! directory and the done-file live. So a second engine is one more module
//! here and one more arm in [`open`]; the supervisor, journal, round driver
//! and API stay as they are.
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
mod local;
mod slurm;

pub use fake::{FakeEngine, FakeScript};
pub use local::LocalEngine;
pub use slurm::SlurmEngine;

/// One attempt to start: what to run and where; the engine decides how.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptSpec {
    pub job: JobId,
    /// Attempt number (1 for the first launch).
    pub attempt: u32,
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
    pub fn ranks(&self) -> u32 {
        self.nodes.iter().map(|(_, g)| g.len() as u32).sum()
    }
}

/// One rank of an attempt as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankProc {
    pub rank: u32,
    /// The engine's id for the rank (local: the process group of its
    /// wrapper; 0 = not found).
    pub pgid: i32,
}

/// Where an attempt lives, journaled with it: enough for a restarted daemon
/// to find it again. Its fields are the journal's (`dir`, `ranks`), so
/// journals of earlier releases load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handle {
    /// The attempt's directory (local: `rank-R.log`, `rank-R.exit`).
    pub dir: PathBuf,
    /// Filled in when the attempt starts (or is adopted).
    pub ranks: Vec<RankProc>,
    /// The Slurm job that runs the attempt (Slurm engine only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankStatus {
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

pub trait Engine: Send {
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

/// The engines `serve --engine` accepts.
pub const ENGINES: &[&str] = &["local", "slurm"];

/// Open an engine by name over the daemon's state directory; an unknown
/// name is refused with the valid ones. The Slurm engine needs its
/// partition: [`SlurmEngine::new`].
pub fn open(name: &str, state_dir: &Path) -> Result<Box<dyn Engine>, ExecError> {
    match name {
        "local" => Ok(Box::new(LocalEngine::new(state_dir))),
        "slurm" => Err(ExecError::Config(
            "--engine slurm needs --partition NAME".to_string(),
        )),
        _ => Err(ExecError::Config(format!(
            "--engine {name}: unknown engine; valid: {}",
            ENGINES.join(", ")
        ))),
    }
}

/// Why `--sharing` is refused with the Slurm engine. A planned partner
/// would otherwise wait in Slurm behind the GPU its partner holds as
/// `gres:gpu` while the daemon counts it running. Slurm's `gres/shard` runs
/// two jobs on one device, but 22.05 refuses to switch a job between
/// `gres/gpu` and `gres/shard` once either is set, and this engine keeps one
/// held Slurm job per gpuplan job across attempts (docs/slurm.md, "Sharing").
pub const SLURM_SHARING: &str = "--sharing with --engine slurm is not supported: a job the plan \
     puts on a GPU another job holds would wait in Slurm behind it. Slurm's gres/shard could run \
     both (slurm.conf GresTypes=gpu,shard), but Slurm 22.05 cannot switch a held job between \
     gres/gpu and gres/shard (`scontrol update ... TresPerNode=gres:shard:1`: Invalid generic \
     resource (gres) specification); run without --sharing, or with the local engine \
     (docs/slurm.md, \"Sharing\")";

/// Where GPUs come from, and how jobs run on them.
pub type Backends = (Box<dyn crate::device::Devices>, Box<dyn Engine>);

/// The device source and engine `serve` runs on: `--engine slurm` takes
/// both from Slurm (the partition's nodes and GRES); otherwise `--devices`
/// (`nvml` or `fake:NxG`) and the named engine.
/// `sharing` is the daemon's jobs per GPU (1 = none).
pub fn backends(
    engine: &str,
    devices: &str,
    partition: Option<&str>,
    slurm_timeout: std::time::Duration,
    state_dir: &Path,
    sharing: u32,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
) -> Result<Backends, ExecError> {
    if engine == "slurm" {
        let partition =
            partition.ok_or_else(|| ExecError::Config("--engine slurm needs --partition NAME".into()))?;
        if sharing > 1 {
            return Err(ExecError::Config(SLURM_SHARING.into()));
        }
        let mut slurm = crate::slurm::Slurm::new(partition);
        slurm.timeout = slurm_timeout;
        return Ok((
            Box::new(crate::slurm::SlurmDevices { slurm: slurm.clone() }),
            Box::new(SlurmEngine::new(slurm, state_dir, clock)),
        ));
    }
    if partition.is_some() {
        return Err(ExecError::Config("--partition needs --engine slurm".into()));
    }
    Ok((open_devices(devices)?, open(engine, state_dir)?))
}

/// Open a device source from the `--devices` value: `nvml` or
/// `fake:NODESxGPUS` (typed groups joined by `+`, as cluster shapes:
/// `fake:1x4:t4+1x8:a100`). Here, beside the engines, so the device layer
/// knows none of its implementations.
fn open_devices(spec: &str) -> Result<Box<dyn crate::device::Devices>, ExecError> {
    if spec == "nvml" {
        return Ok(Box::new(crate::nvml::NvmlDevices::open()?));
    }
    if let Some(shape) = spec.strip_prefix("fake:") {
        return Ok(Box::new(crate::device::FakeDevices::parse(shape)?));
    }
    Err(ExecError::Config(format!(
        "--devices {spec}: expected `nvml` or `fake:NODESxGPUS[:TYPE]+...` (e.g. fake:2x4)"
    )))
}

/// Where a job's files live under the daemon's state directory, whichever
/// engine runs it: `STATE/jobs/ID/` with its attempts and its checkpoint
/// directory, so the job protocol reads the same under every engine.
pub fn job_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join("jobs").join(job.0.to_string())
}

/// The job's checkpoint directory (`GPUPLAN_CHECKPOINT_DIR`), kept across attempts.
pub fn checkpoint_dir(state_dir: &Path, job: JobId) -> PathBuf {
    job_dir(state_dir, job).join("checkpoint")
}

/// The file a finished job creates (`GPUPLAN_DONE_FILE`). A stop that
/// lands while a job exits can turn its 0 into 143 (Python, for one,
/// restores the default SIGTERM action while it shuts down), and a job
/// relaunched after finishing would finish twice.
pub fn done_file(state_dir: &Path, job: JobId) -> PathBuf {
    checkpoint_dir(state_dir, job).join("gpuplan-done")
}

/// `mkdir -p`, the error naming the directory.
pub(crate) fn mkdir(d: &Path) -> Result<(), ExecError> {
    std::fs::create_dir_all(d).map_err(|source| ExecError::Io {
        context: format!("create {}", d.display()),
        source,
    })
}

/// Last `n` lines of a file (reads at most its last 64 KiB).
pub fn tail(path: &Path, n: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_engines_are_refused_with_the_valid_ones() {
        let d = std::env::temp_dir();
        assert_eq!(open("local", &d).unwrap().name(), "local");
        let e = open("pbs", &d).err().expect("not an engine").to_string();
        assert!(e.contains("pbs") && e.contains("valid: local, slurm"), "{e}");
    }

    #[test]
    fn device_sources_are_opened_by_name() {
        assert!(open_devices("fake:1x4").is_ok());
        assert!(open_devices("fake:0x4").is_err());
        assert!(open_devices("nvml").is_err() || std::path::Path::new("/dev/nvidiactl").exists());
        assert!(open_devices("cuda").err().unwrap().to_string().contains("nvml"));
    }

    /// Refused before any Slurm command runs, so no Slurm is needed here.
    #[test]
    fn sharing_with_the_slurm_engine_is_refused_with_the_reason() {
        let d = std::env::temp_dir();
        let t = std::time::Duration::from_secs(1);
        let clock = || std::sync::Arc::new(crate::clock::SystemClock);
        let e = backends("slurm", "", Some("all"), t, &d, 2, clock())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("--sharing") && e.contains("gres/shard") && e.contains("docs/slurm.md"),
            "{e}"
        );
        // Without sharing nothing changes, and the local engine shares.
        assert!(backends("local", "fake:1x1", None, t, &d, 2, clock()).is_ok());
    }
}
