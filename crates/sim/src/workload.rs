//! A workload: the jobs a simulation runs, each what a user submits plus
//! the simulator's ground truth for it.
//!
//! Data only, below both the trace readers that build workloads
//! ([`crate::trace::workload`]) and the engine that runs them.

use gpuplan_core::JobSpec;
use serde::{Deserialize, Serialize};

/// Upper bound on one job's GPUs, as in the Pollux artifact (64).
pub(crate) const MAX_GPUS_PER_JOB: u32 = 64;

/// What a job needs to finish: the simulator's ground truth for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Work {
    /// Train its application to completion, as the measured profile says.
    Profiled,
    /// Run `duration_s` on exactly its requested GPUs (a trace job with a
    /// duration and no model: fixed throughput, rigid size).
    Rigid {
        /// Seconds of run time at the requested GPUs.
        duration_s: f64,
    },
}

/// One job of a workload: what a user submits plus its ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadJob {
    /// What the planner sees: arrival, application, GPU and batch requests.
    pub spec: JobSpec,
    /// What only the simulator knows: how much work it is.
    pub work: Work,
    /// The trace's model name (a Gavel job type), where a rigid job names
    /// one: what the co-location ground truth knows it by
    /// ([`crate::SimConfig::colocation_jobs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Seconds of run time between the job's checkpoints, where the
    /// workload gives them; absent: the run's `checkpoint_interval_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval_s: Option<f64>,
}
