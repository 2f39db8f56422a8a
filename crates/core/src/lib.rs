#![warn(missing_docs)]

//! gpuplan-core: the domain model every other gpuplan crate shares.
//!
//! It exists so that the simulator, the planners, the executor and the
//! browser build all agree on one definition of a cluster, a job and the
//! Pollux goodput model. It does no I/O (parsers take a reader and a source
//! name), knows no solver and has no clock, so it builds for wasm32.
//!
//! Main types:
//! - [`Round`]: the whole input of one planning round (the [`Cluster`], its
//!   jobs as [`RoundJob`]s, and the [`PolicyParams`] every planner reads);
//! - [`Plan`]: a planner's answer, each job's [`Allocation`] of GPUs;
//! - [`validate()`]: the one independent check every plan goes through,
//!   reporting each broken rule as a [`Violation`];
//! - [`objective::evaluate`]: the one number every planner is judged by;
//! - [`GoodputModel`]: what planners believe about a job (Pollux), fitted by
//!   [`fit_perf_params`]; [`JobSpec`] and [`JobState`] are the job itself.
//!
//! Sharing a GPU has its rules in [`colocation`], the utilization predictor
//! lives in [`predict`]; everything else is re-exported here, flat.
//!
//! ```
//! use gpuplan_core::Cluster;
//! let c: Cluster = "16x4".parse().unwrap();
//! assert_eq!(c.total_gpus(), 64);
//! ```

mod bind;
mod capacity;
mod cluster;
// A namespace: its rules (`may_group`, `round_model`, `Observed`, ...) read
// unclearly without `colocation::`, and `Observed` would sit beside `Observation`.
pub mod colocation;
mod colocation_table;
mod error;
mod fit;
mod gpu_speed;
mod gpu_table;
mod job;
mod math;
mod model;
// A namespace: callers write `objective::evaluate`, `objective::speedup`,
// `objective::EPSILON`; flat, `speedup` and `EPSILON` would be unclear.
pub mod objective;
mod plan;
// A namespace: `predict::Sample`, `predict::Form`, `predict::fit` flat would
// be unclear (and read as the `gpuplan-predict` crate's).
pub mod predict;
mod profile;
// A namespace: `queue::check`, `queue::QueueTree` read as queue rules.
pub mod queue;
mod report;
mod round;
mod validate;
mod variability;

pub use bind::{bind_plan, bind_round};
pub use capacity::{largest_type_gpus, never_fits, NeverFits};
pub use cluster::{Cluster, GpuType, Node, NodeId, DEFAULT_GPU_TYPE, MAX_GPUS_PER_NODE, MAX_GPUS_TOTAL};
pub use error::{CoreError, ParseError};
pub use fit::{fit_perf_params, prior_perf_params, FitStarts, Observation};
pub use gpu_speed::{perf_on, type_speed, TypeSpeed};
pub use job::{Allocation, GpuId, JobId, JobSpec, JobState};
pub use math::Libm;
pub use model::{BatchChoice, BatchLimits, GoodputModel, GradParams, PerfParams, Searches};
pub use plan::{Plan, PlanStatus};
pub use profile::{pollux_app_constants, AppConstants, AppProfile, MeasuredPoint, StepTime, POLLUX_APPS};
pub use report::{JobGpus, JobVariability, PlanReport};
pub use round::{
    check_p, min_runtime_problem, Interference, NodeCounts, Oracle, ParamError, ParamField, Placement,
    PolicyParams, Priority, RestartCharge, Round, RoundJob, SharingPairs, Sight, Sticky, TypedModel,
    MAX_MIN_RUNTIME_S, MAX_SHARING, P_MAX, P_MIN,
};
pub use validate::{validate, validate_rules, validate_under, QueueRules, Violation};
pub use variability::{class_of, PerfClass, RoundVariability, CLASSES};
