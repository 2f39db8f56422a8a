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
pub mod slurm;
pub mod spec;
pub mod supervise;

pub use api::{serve, serve_blocking, ServeConfig};
pub use daemon::{Config, Daemon, SharedDaemon};
pub use driver::RoundDriver;
pub use jobs::{JobStatus, JobView, Report};
pub use round::RoundStats;
pub use spec::JobSubmission;

/// Everything that can go wrong in the executor.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The device backend cannot be used (one sentence, shown at start).
    #[error("{0}")]
    Devices(String),
    #[error("invalid job spec:\n  {}", .0.join("\n  "))]
    Spec(Vec<String>),
    #[error("{0}")]
    Request(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
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
