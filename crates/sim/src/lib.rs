//! gpuplan-sim: the trace-driven round simulator every claim of gpuplan rests on.
//!
//! It exists to keep ground truth (the measured application profiles) in one
//! place, away from planners: they see only what a real agent would measure.
//! Main entry: [`simulate`]. Workloads: [`workload::parse_pollux_workload`].
//!
//! ```no_run
//! use gpuplan_sim::{data, simulate, workload, Control, SimConfig};
//! let profiles = data::pollux_profiles().unwrap();
//! let (name, text) = data::WORKLOADS[5];
//! let jobs = workload::parse_pollux_workload(name, text.as_bytes(), &profiles).unwrap();
//! let mut planner = gpuplan_solve::registry::create("fifo").unwrap();
//! let r = simulate(&SimConfig::default(), &profiles, &jobs, planner.as_mut(), &mut |_, _| Control::Continue).unwrap();
//! println!("average JCT {:.0} s", r.summary.avg_jct_s);
//! ```

pub mod analysis;
pub mod colocation;
pub mod data;
pub mod engine;
pub mod error;
pub mod instances;
pub mod metrics;
pub mod scenario;
pub mod trace;
pub mod variability;
pub mod workload;

pub use engine::{
    batch_target, largest_type_gpus, shrink_to_fit, simulate, simulate_workload, Control, IdleRounds,
    SimConfig, Work, WorkloadJob,
};
pub use error::SimError;
pub use metrics::{SimResult, Summary};
pub use scenario::{ParamFlags, ScenarioError, ScenarioField, SimScenario};
