//! gpuplan-core: the domain model every other gpuplan crate shares.
//!
//! It exists so that the simulator, the planners, the executor and the
//! browser build all agree on one definition of a cluster, a job and the
//! Pollux goodput model. It does no I/O (parsers take a reader and a source
//! name), knows no solver and has no clock, so it builds for wasm32.
//!
//! Main types: [`Cluster`], [`JobSpec`], [`JobState`], [`Allocation`].
//!
//! ```
//! use gpuplan_core::Cluster;
//! let c: Cluster = "16x4".parse().unwrap();
//! assert_eq!(c.total_gpus(), 64);
//! ```

pub mod bind;
pub mod cluster;
pub mod colocation;
pub mod error;
pub mod fit;
pub mod gpu_speed;
pub mod job;
pub mod math;
pub mod model;
pub mod objective;
pub mod plan;
pub mod predict;
pub mod profile;
mod report;
pub mod round;
mod validate;
pub mod variability;

pub use bind::{bind_plan, bind_round};
pub use cluster::{Cluster, GpuType, Node, NodeId};
pub use error::{CoreError, ParseError};
pub use job::{Allocation, GpuId, JobId, JobSpec, JobState};
pub use model::{BatchChoice, BatchLimits, GoodputModel, GradParams, PerfParams};
pub use plan::{Plan, PlanStatus};
pub use report::{JobGpus, JobVariability, PlanReport};
pub use round::{
    check_p, Interference, NodeCounts, Oracle, ParamError, ParamField, Placement, PolicyParams, Priority,
    RestartCharge, Round, RoundJob, SharingPairs, Sight, Sticky, TypedModel,
};
pub use validate::{validate, validate_under, Violation};
pub use variability::{PerfClass, RoundVariability};
