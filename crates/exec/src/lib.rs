//! gpuplan-exec: the daemon that applies each round's plan on a real cluster.
//!
//! It exists so that the planners built for simulation drive real jobs.
//! Split by concern: the job table ([`jobs`]), a round's steps
//! ([`round`]: devices ([`device::Devices`]: NVML or fake) → a
//! [`gpuplan_core::Round`] → the shared pipeline → GPUs), the supervisor
//! ([`supervise`]) over a job-level engine ([`engine::Engine`]: local
//! processes; scripted for tests; Slurm jobs), the journal
//! ([`journal::Journal`]) and the injected clock ([`clock`]), tied together
//! by [`daemon::Daemon`]. The one round loop is
//! [`driver::RoundDriver::run_rounds`], on the injected clock until an
//! injected shutdown; [`api::serve`] runs it beside an HTTP JSON API, with
//! Prometheus metrics read from the daemon's state ([`metrics`]).
//! Native only.
//!
//! ```
//! use gpuplan_exec::device::{Devices, FakeDevices};
//! let mut d = FakeDevices::parse("2x4").unwrap();
//! assert_eq!(d.collect().unwrap().len(), 8);
//! ```

pub mod api;
pub mod clock;
pub mod daemon;
pub mod device;
pub mod driver;
pub mod engine;
pub mod jobs;
pub mod journal;
pub mod metrics;
pub mod nvml;
pub mod round;
pub mod spec;
pub mod supervise;

pub use api::{serve, serve_blocking, ServeConfig};
pub use daemon::{Config, ConfigError, ConfigField, Daemon, SharedDaemon};
pub use driver::RoundDriver;
pub use jobs::{JobStatus, JobView, Phase, Report};
pub use round::{RoundStats, RoundStatus};
pub use spec::JobSubmission;

/// The Slurm client the Slurm engine drives (`gpuplan sweep-slurm` runs
/// its commands too); it lives with the engine.
pub mod slurm {
    pub use crate::engine::slurm::client::*;
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
    #[error("invalid job spec:\n  {}", .0.join("\n  "))]
    Spec(Vec<String>),
    /// A report's field is negative or not finite.
    #[error("report:{field}: must be finite and >= 0, got {value}")]
    BadReport { field: &'static str, value: f64 },
    /// A report without a step time or a local batch.
    #[error("report: step_time_s and local_bsz must be > 0")]
    EmptyReport,
    /// Fault injection asked of a device backend that has none.
    #[error("fault injection needs the fake device backend, this daemon uses {backend}")]
    NoFaultInjection { backend: &'static str },
    /// A fault for a GPU the fake backend does not have.
    #[error("no fake GPU with uuid {0}")]
    NoGpu(String),
    #[error("no job {}", .0.0)]
    NoJob(gpuplan_core::JobId),
    /// Cancelling a job that is already completed, failed or cancelled.
    #[error("job {} is already {phase}", .job.0)]
    AlreadyFinal { job: gpuplan_core::JobId, phase: Phase },
    #[error("journal: {0}")]
    Journal(String),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("{0}")]
    Config(String),
    /// An engine's external command failed (names the command and its message).
    #[error("{0}")]
    Engine(String),
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
}
