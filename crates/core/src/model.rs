//! The Pollux goodput model (OSDI'21 §3): what planners believe about a job.
//!
//! goodput = throughput × statistical efficiency. Throughput comes from a
//! 7-parameter model fitted to step times the job has observed ([`PerfParams`]);
//! efficiency from the gradient noise scale ([`GradParams`]).

use serde::{Deserialize, Serialize};

/// The 7 throughput parameters (Pollux Eq. 12).
///
/// Compute time per accumulation step: `alpha_c + beta_c * local_bsz`.
/// Sync time: 0 on one GPU; `alpha_r + beta_r * (k - 2)` on one node with k
/// GPUs; `alpha_n + beta_n * (k - 2)` across nodes. `gamma` ≥ 1 blends
/// compute and sync: `(t_c^γ + t_s^γ)^(1/γ)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerfParams {
    pub alpha_c: f64,
    pub beta_c: f64,
    pub alpha_n: f64,
    pub beta_n: f64,
    pub alpha_r: f64,
    pub beta_r: f64,
    pub gamma: f64,
}

/// Gradient statistics: `sqr` = |g|², `var` = tr(Σ) normalised to batch M0.
/// The gradient noise scale is φ = M0·var/sqr.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GradParams {
    pub sqr: f64,
    pub var: f64,
}

/// Batch-size limits of an application.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchLimits {
    /// M0: the initial (smallest) total batch size, the efficiency reference.
    pub init_batch: u32,
    /// Largest total batch size the job may use.
    pub max_batch: u32,
    /// Per-GPU (atomic) batch bounds.
    pub min_local: u32,
    pub max_local: u32,
}

/// Everything a planner knows about one job's goodput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GoodputModel {
    pub perf: PerfParams,
    pub grad: GradParams,
    pub limits: BatchLimits,
    /// Whether gradient accumulation may be used to reach larger batches.
    pub accumulation: bool,
}
