//! gpuplan-exec: the daemon that applies each round's plan on a real cluster.
//!
//! It exists so that the planners built for simulation drive real jobs: a
//! round loop collects devices ([`device::Devices`]: NVML or fake), builds a
//! [`gpuplan_core::Round`] from job state and the goodput models fitted to
//! what jobs report, plans with any registered planner, validates, journals
//! ([`journal::Journal`]) and applies the plan through an engine
//! ([`engine::Engine`]: local processes; Slurm later). [`api::serve`] wraps
//! it in an HTTP JSON API. Native only.
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
pub mod engine;
pub mod journal;
pub mod nvml;
pub mod spec;

pub use api::{serve, serve_blocking, ServeConfig};
pub use daemon::{Config, Daemon, JobStatus, JobView, Report, RoundStats};
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
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
}
