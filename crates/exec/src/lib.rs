#![warn(missing_docs)]
//! gpuplan-exec: the daemon that applies each round's plan on a real cluster.
//!
//! It exists so that the planners built for simulation drive real jobs.
//! [`Daemon`] holds the job table, a round's steps (devices ([`Devices`]:
//! NVML or [`FakeDevices`]) → a [`gpuplan_core::Round`] → the shared
//! pipeline → GPUs), the supervisor over a job-level engine
//! ([`engine::Engine`]: local processes, a scripted one for tests, or a
//! workload manager's jobs, each picked by name from [`engine::REGISTRY`]
//! with its own flags), the journal and the injected
//! [`Clock`]; [`Config`] is what it is started with. The one round loop is
//! [`RoundDriver::run_rounds`], on the injected clock until an injected
//! shutdown; [`serve`] runs it beside an HTTP JSON API, with Prometheus
//! metrics read from the daemon's state. Native only.
//!
//! ```
//! use gpuplan_exec::{Devices, FakeDevices};
//! let mut d = FakeDevices::parse("2x4").unwrap();
//! assert_eq!(d.collect().unwrap().len(), 8);
//! ```

mod api;
mod clock;
mod daemon;
mod device;
mod driver;
mod effects;
mod held;
// Kept a namespace: the engine registry (`engine::REGISTRY`, `engine::build`) reads unclearly flat.
pub mod engine;
mod jobfile;
mod jobs;
mod journal;
mod metrics;
mod nvml;
mod round;
mod spec;
mod supervise;

pub use api::{raise_open_file_limit, serve, serve_blocking, HttpLimits, ServeConfig, MAX_BODY_BYTES};
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use daemon::{
    run_estimate, utilization_samples, Config, ConfigError, ConfigField, Daemon, EstimateInput,
    EstimateOutcome, JobNames, Keep, SharedDaemon, MAX_ESTIMATE_BUDGET_S,
};
pub use device::{Devices, FakeDevices, Fault, Gpu, Health};
pub use driver::RoundDriver;
pub use jobs::{batch_target, JobRecord, JobStatus, JobView, Phase, Report};
pub use journal::OnDamage;
pub use round::{device_cluster, DeviceCluster, Prepared, RoundStats, RoundStatus};
pub use spec::JobSubmission;

/// The client of the engine of this name, for the commands that run it
/// outside the daemon; it lives with its engine. Kept a namespace: the
/// module's name says whose commands `run_timed` runs, flat it would not.
pub mod slurm {
    pub use crate::engine::slurm::client::{run_timed, Slurm, SlurmJob, SlurmNode};
}

/// Everything that can go wrong in the executor. A request's mistakes are
/// kinds of their own (what the API answers 400, 404 or 409 to), so a
/// caller matches them instead of reading messages; failures of what the
/// daemon runs on (devices, journal, configuration, an engine's command)
/// carry the message an operator reads. Messages are those of before.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The device backend cannot be used (one sentence, shown at start).
    #[error("{0}")]
    Devices(String),
    /// A submitted job's spec is invalid: every problem, one a line.
    #[error("invalid job spec:\n  {}", .0.join("\n  "))]
    Spec(Vec<String>),
    /// A report's field is out of range: negative or not finite, or for
    /// `total_progress` not in (0, 1e15].
    #[error("report:{field}: must be {}, got {value}", if *field == "total_progress" { "finite, > 0 and <= 1e15" } else { "finite and >= 0" })]
    BadReport {
        /// The report's field.
        field: &'static str,
        /// What it held.
        value: f64,
    },
    /// A report with a step time but no local batch (or the reverse), a
    /// zero, or neither a measurement nor a checkpoint.
    #[error("report: step_time_s and local_bsz must be > 0 and given together (or neither, in a report of checkpoint_progress, checkpoint_step, checkpoints_on_stop or total_progress)")]
    EmptyReport,
    /// A start and finish estimate failed (its snapshot or its planner).
    #[error("estimate: {0}")]
    Estimate(String),
    /// Fault injection asked of a device backend that has none.
    #[error("fault injection needs the fake device backend, this daemon uses {backend}")]
    NoFaultInjection {
        /// The backend in use.
        backend: &'static str,
    },
    /// A fault for a GPU the fake backend does not have.
    #[error("no fake GPU with uuid {0}")]
    NoGpu(String),
    /// No job has this id.
    #[error("no job {}", .0.0)]
    NoJob(gpuplan_core::JobId),
    /// Cancelling a job that is already completed, failed or cancelled.
    #[error("job {} is already {phase}", .job.0)]
    AlreadyFinal {
        /// The job.
        job: gpuplan_core::JobId,
        /// The final phase it is in.
        phase: Phase,
    },
    /// The journal cannot be read or written (a corrupt record names its line).
    #[error("journal: {0}")]
    Journal(String),
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A setting or `serve` flag is refused (the message names it).
    #[error("{0}")]
    Config(String),
    /// An engine's external command failed (names the command and its message).
    #[error("{0}")]
    Engine(String),
    /// The planner cannot be created or failed.
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
}
