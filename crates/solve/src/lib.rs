//! gpuplan-solve: every round planner, behind one trait.
//!
//! It exists so that the simulator, the executor and the browser can swap
//! policies by name without knowing how any of them works. A planner is a
//! value with cross-round state (`&mut self`): warm starts, GA populations,
//! Tiresias queues. Nothing here reads files, clocks (except to time a solve)
//! or the environment.
//!
//! ```
//! use gpuplan_solve::registry;
//! let p = registry::create("fifo").unwrap();
//! assert_eq!(p.name(), "fifo");
//! assert!(registry::create("nope").err().unwrap().to_string().contains("tiresias-gittins"));
//! ```

pub mod agent;
pub mod bins;
pub mod candidates;
pub mod fallback;
pub mod mip;
pub mod pairs;
pub mod pipeline;
pub mod placement;
pub mod placements;
pub mod planners;
pub(crate) mod pools;
pub mod registry;
mod reserve;
#[cfg(test)]
mod sharing_tests;
pub mod solver;
pub mod speedup;
#[cfg(test)]
pub(crate) mod testutil;

pub use pipeline::{run_round, Change, Decision, JobChange};

use gpuplan_core::{Plan, Round};

/// Budget for one round. Counts, not wall-clock, where tests need determinism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Wall-clock limit for solvers that support one.
    pub time_limit_s: f64,
    /// Relative MIP gap at which a solve may stop.
    pub gap: f64,
    pub threads: u32,
    /// Seed for randomized planners.
    pub seed: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time_limit_s: 10.0,
            gap: 1e-4,
            threads: 1,
            seed: 0,
        }
    }
}

/// A round was malformed (not: the solver failed — that is a fallback plan).
/// Non-exhaustive: match the kinds you handle, show the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Every problem of the round, each naming its JSON path.
    #[error("malformed round: {}", .0.join("; "))]
    Malformed(Vec<String>),
    #[error("unknown planner '{name}'; valid planners: {}", .valid.join(", "))]
    UnknownPlanner { name: String, valid: Vec<String> },
    #[error("planner '{name}' reads the simulator's oracle (true job lengths) and cannot run on a live cluster; planners that can: {}", .live.join(", "))]
    NeedsOracle { name: String, live: Vec<String> },
    /// The planner broke rules it claims to honour: the validator's
    /// findings, typed, so a caller can tell which rule.
    #[error("planner {planner} produced an invalid plan (a bug): {}", joined(.violations))]
    InvalidPlan {
        planner: String,
        violations: Vec<gpuplan_core::Violation>,
    },
}

fn joined(v: &[gpuplan_core::Violation]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// How jobs' batch sizes are chosen while a planner runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchPolicy {
    /// The user's batch size, fixed (Tiresias, Optimus, FIFO, SRTF).
    Fixed,
    /// Re-optimised for goodput at every allocation and epoch (Pollux and the MIPs).
    Adaptive,
}

/// What a planner needs from, and promises to, whoever runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannerTraits {
    pub batch: BatchPolicy,
    /// Whether the planner reads `RoundJob::oracle` (simulation only).
    pub needs_oracle: bool,
    /// Whether its plans obey `PolicyParams::interference`. Published
    /// baselines do not; the simulator validates them with `Allow`.
    pub honours_interference: bool,
}

/// A round planner.
pub trait Planner: Send {
    /// The kebab-case id used in the CLI, JSON, bench and UI.
    fn name(&self) -> &str;
    fn traits(&self) -> PlannerTraits {
        PlannerTraits {
            batch: BatchPolicy::Fixed,
            needs_oracle: false,
            honours_interference: false,
        }
    }
    /// Whether its GPUs are chosen by the placement stage
    /// (`params.placement`, [`placements`]): fixed-size policies that decide
    /// counts and then place. Others place jobs themselves and are refused
    /// a placement other than `default`.
    fn placement_stage(&self) -> bool {
        false
    }
    /// Plan one round. `Err` only for a malformed round.
    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError>;
}

/// Run a planner and time it, filling `solve_ms` and the planner name.
/// Drivers call [`run_round`], which wraps this with the checks.
pub(crate) fn run_planner(
    planner: &mut dyn Planner,
    round: &Round,
    limits: &Limits,
) -> Result<Plan, PlanError> {
    let t0 = web_time::Instant::now();
    let mut plan = planner.plan(round, limits)?;
    plan.solve_ms = t0.elapsed().as_secs_f64() * 1e3;
    plan.planner = planner.name().to_string();
    Ok(plan)
}
