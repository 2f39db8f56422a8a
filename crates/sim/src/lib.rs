#![warn(missing_docs)]
//! gpuplan-sim: the trace-driven round simulator every claim of gpuplan rests on.
//!
//! It exists to keep ground truth (the measured application profiles) in one
//! place, away from planners: they see only what a real agent would measure.
//!
//! - Entry points: [`simulate_workload`] runs a [`WorkloadJob`] list (profiled
//!   and rigid jobs) under one planner; [`simulate`] is the same for plain
//!   Pollux job specs. Settings: [`SimConfig`], or [`SimScenario`] (what the
//!   CLI and the browser edit) turned into one by [`SimScenario::config`].
//! - Results: [`SimResult`] (per job, per round, per GPU) with its headline
//!   [`Summary`]; [`analyse`] and [`isolated_jcts`] add queueing and
//!   fairness ([`Analysis`]).
//! - Inputs: the measured profiles ([`pollux_profiles`], [`Profiles`]),
//!   Pollux workloads ([`parse_pollux_workload`], [`WORKLOADS`]), and traces
//!   in seven formats ([`trace::load`] into a [`trace::Trace`], then
//!   [`trace::workload::to_workload`]).
//! - Files a user names ([`files`], native only): the cluster, the workload
//!   and Gavel's table, and [`files::simulate_named`], the run that
//!   `gpuplan simulate` and the Python package share.
//! - Start and finish estimates ([`estimate`], [`what_if`]): the planner
//!   that will decide, run forward from a [`Snapshot`] of the cluster; the
//!   history predictor of remaining work ([`predict_work`]).
//! - Ground truth beyond the profiles: per-GPU speed [`variability`] and
//!   Gavel's measured [`colocation`] slowdowns.
//!
//! ```no_run
//! use gpuplan_sim::{parse_pollux_workload, pollux_profiles, simulate, Control, SimConfig, WORKLOADS};
//! let profiles = pollux_profiles().unwrap();
//! let (name, text) = WORKLOADS[5];
//! let jobs = parse_pollux_workload(name, text.as_bytes(), &profiles).unwrap();
//! let mut planner = gpuplan_solve::registry::create("fifo").unwrap();
//! let r = simulate(&SimConfig::default(), &profiles, &jobs, planner.as_mut(), &mut |_, _| Control::Continue).unwrap();
//! println!("average JCT {:.0} s", r.summary.avg_jct_s);
//! ```

mod analysis;
mod calibrate;
pub mod colocation; // kept: `family`, `ground_truth`, `measured_pairs`, `KeyFacts` are unclear without `colocation::`
mod data;
mod engine;
mod error;
mod estimate;
// Files a user names (cluster, workload, Gavel's table): native drivers only.
#[cfg(not(target_arch = "wasm32"))]
pub mod files; // kept: `files::load_cluster`, `files::load_trace` say they open files
mod instances;
mod metrics;
mod pollux_workload;
pub mod roundlog; // kept: `roundlog::compare`, `roundlog::read` say what they compare and read
mod scenario;
pub mod trace; // kept: its per-format modules each have `parse`, `FIELDS`, `write`; flat they would collide
pub mod variability; // kept: `Draw`, `Measurements`, `BUNDLED` are unclear without `variability::`
mod work_rate;
mod workload;

pub use analysis::{analyse, isolated_jcts, Analysis, AppJct, Fairness, JobAnalysis, LeftOut, Spread};
pub use calibrate::{
    records_csv, simulate_with_estimates, summarise, CalibrationConfig, CalibrationSummary, EstimateRecord,
    KnownWork,
};
pub use data::{load_profiles_dir, pollux_profiles, utilization_samples, Profiles, WORKLOADS};
pub use engine::{
    batch_target, largest_type_gpus, shrink_to_fit, simulate, simulate_workload, Control, IdleRounds,
    RestartCost, SimConfig,
};
pub use error::SimError;
pub use estimate::{
    estimate, estimate_with, name_prefix, predict_work, what_if, what_if_with, AppModel, Delay,
    EstimateConfig, Estimates, FinishedJob, JobEstimate, JobWork, MatchRule, RemainingWork, Snapshot, Span,
    Targets, WhatIf, WorkPrediction, WorkSource, WorkUnit,
};
pub use instances::{fitted_params, generate_round, with_types};
pub use metrics::{
    percentile, GpuUsage, JobResult, PlannerMs, QueueSummary, RoundRecord, Segment, SimResult, Summary,
};
pub use pollux_workload::parse_pollux_workload;
pub use roundlog::{LogJob, RoundLog};
pub use scenario::{ParamFlags, ScenarioError, ScenarioField, SimScenario};
pub use workload::{Work, WorkloadJob};
