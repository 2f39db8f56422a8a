#![warn(missing_docs)]
//! gpuplan-solve: every round planner, behind one trait.
//!
//! It exists so that the simulator, the executor and the browser can swap
//! policies by name without knowing how any of them works. A planner is a
//! value with cross-round state (`&mut self`): warm starts, GA populations,
//! Tiresias queues. Nothing here reads files, clocks (except to time a solve)
//! or the environment.
//!
//! The main types:
//! - [`Planner`]: the trait every policy implements, one round at a time;
//!   [`PlannerTraits`] says what it needs (an oracle?) and promises.
//! - [`registry`]: every planner by name ([`registry::create`],
//!   [`registry::names`]), with its description and parameter defaults.
//! - [`run_round`]: the one pipeline every driver calls — check the round,
//!   plan, validate, diff — giving a [`Decision`] (the plan and each job's
//!   [`Change`]).
//! - [`parse_round`] and [`PlanOut`]: a user's round file in, under the
//!   planner's registry defaults, and the plan as scripts read it out (the
//!   CLI's `plan` and the Python package share them).
//! - [`Limits`]: a round's budget (time, gap, threads, seed).
//! - [`PlanError`]: a malformed round, an unknown or oracle-only planner,
//!   or an invalid plan; a solver failure is a fallback plan, not an error.
//! - [`Agent`] and [`round_job`]: a job's measurements, fit and batch
//!   choice, shared by the simulator and the executor.
//!
//! The rest of the root (candidates, packers, placements, the greedy and GA
//! searches) is public for the integration tests and benches.
//!
//! ```
//! use gpuplan_solve::registry;
//! let p = registry::create("fifo").unwrap();
//! assert_eq!(p.name(), "fifo");
//! assert!(registry::create("nope").err().unwrap().to_string().contains("tiresias-gittins"));
//! ```

mod agent;
mod bins;
mod candidates;
mod fallback;
mod mip;
mod pairs;
mod pipeline;
mod placement;
mod placements;
mod planners;
mod pools;
// The pipeline's queue stage (guarantees, limits, reclaim).
mod queues;
// Kept public: callers write `registry::create`, `registry::names`; bare
// `create`, `names`, `entries` at the root would not say what they list.
mod bound;
pub mod registry;
mod reserve;
mod round_file;
#[cfg(test)]
mod sharing_tests;
mod solver;
mod speedup;
#[cfg(test)]
mod testutil;

// The round pipeline every driver goes through.
pub use pipeline::{
    batch_adapts, check_live, check_placement, rules, run_round, Change, Decision, JobChange,
};
// A user's round file in, the plan as their scripts read it out (CLI, Python).
pub use round_file::{parse_round, with_registry_defaults, PlanOut, RoundFileError};
// A job's measurements, fit and batch choice, shared by simulator and executor.
pub use agent::{fixed_batch_split, round_job, Agent, BatchTarget, FitMemo, JobFacts, ObsAgg};
pub use candidates::{type_capacity, TypeCapacity};
// Building blocks, public for the integration tests and benches.
pub use bins::{Bins, DEFAULT_TOLERANCE};
pub use candidates::{job_options, Candidate, Choice, JobOptions, Pick, Shapes};
pub use mip::aggregate::{solve_aggregate_with, AggregateSolution, Pricing};
pub use placement::{pack_grouped, Packing};
pub use placements::{expected_slowdown, packed::Packed, pal::Pal, Ctx, FreeView, Place};
pub use planners::greedy::{greedy_choices, plan_from_choices, Choices};
pub use planners::pollux_ga::{GaConfig, Grow, PolluxGa, Tournament};
pub use solver::Solver;
pub use speedup::{max_gpus, SpeedupCache};

use gpuplan_core::{Plan, Round};

/// Budget for one round. Counts, not wall-clock, where tests need determinism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Wall-clock limit for solvers that support one.
    pub time_limit_s: f64,
    /// Relative MIP gap at which a solve may stop.
    pub gap: f64,
    /// Solver threads (HiGHS); 1, the default, keeps solves reproducible.
    pub threads: u32,
    /// Seed for randomized planners.
    pub seed: u64,
    /// Most memory a planner's model may take, MiB (`--memory-limit`). A
    /// planner estimates its model before building it and, above this,
    /// falls back (marked, with the reason) instead of running the
    /// machine out of memory. `None`: no limit.
    pub memory_limit_mb: Option<u64>,
}

impl Limits {
    /// These limits with the time the model's build took (`elapsed_s`)
    /// taken off, so the build counts against the limit, and a tenth of
    /// the rest kept back: the solver stops a little past its limit and
    /// the solution is decoded after (on a 100,000-GPU round HiGHS
    /// returned 2.2 s past a 29 s limit). `Err` with the reason a
    /// fallback states when no time is left.
    pub fn after_build(&self, elapsed_s: f64, model: &str) -> Result<Limits, String> {
        let left = self.time_limit_s - elapsed_s;
        if left <= 0.0 {
            return Err(format!("time limit reached while building {model}"));
        }
        Ok(Limits {
            time_limit_s: 0.9 * left,
            ..*self
        })
    }

    /// `Err` with the reason a fallback states when a model estimated at
    /// `bytes` exceeds the memory limit.
    pub fn check_memory(&self, model: &str, bytes: f64) -> Result<(), String> {
        match self.memory_limit_mb {
            Some(mb) if bytes > mb as f64 * 1048576.0 => Err(format!(
                "{model} would need about {:.0} MiB, over the memory limit of {mb} MiB",
                bytes / 1048576.0
            )),
            _ => Ok(()),
        }
    }

    /// Every limit out of range, as `(field, problem)`: `time_limit_s` must
    /// be > 0, `gap` >= 0 and `threads` >= 1 (0 was once raised to 1 in
    /// silence). Drivers word the field with their own flag.
    pub fn check(&self) -> Result<(), Vec<(&'static str, String)>> {
        let mut errs = Vec::new();
        if self.time_limit_s.is_nan() || self.time_limit_s <= 0.0 {
            errs.push(("time_limit_s", format!("must be > 0, got {}", self.time_limit_s)));
        }
        if self.gap.is_nan() || self.gap < 0.0 {
            errs.push(("gap", format!("must be >= 0, got {}", self.gap)));
        }
        if self.threads == 0 {
            errs.push(("threads", "must be >= 1, got 0".to_string()));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time_limit_s: 10.0,
            gap: 1e-4,
            threads: 1,
            seed: 0,
            memory_limit_mb: None,
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
    /// No planner has this name; the message lists those that do.
    #[error("unknown planner '{name}'; valid planners: {}", .valid.join(", "))]
    UnknownPlanner {
        /// The name asked for.
        name: String,
        /// Every registered name ([`registry::names`]).
        valid: Vec<String>,
    },
    /// A simulation-only planner was asked to run a live cluster.
    #[error("planner '{name}' reads the simulator's oracle (true job lengths) and cannot run on a live cluster; planners that can: {}", .live.join(", "))]
    NeedsOracle {
        /// The planner asked for.
        name: String,
        /// The planners that can run live ([`registry::live_names`]).
        live: Vec<String>,
    },
    /// The planner broke rules it claims to honour: the validator's
    /// findings, typed, so a caller can tell which rule.
    #[error("planner {planner} produced an invalid plan (a bug): {}", joined(.violations))]
    InvalidPlan {
        /// The planner at fault.
        planner: String,
        /// What the validator found, every rule broken.
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
    /// Whether jobs keep the user's batch size or get goodput-optimal ones.
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
    /// What it needs and promises; the default is a published baseline's
    /// (fixed batches, no oracle, interference not honoured).
    fn traits(&self) -> PlannerTraits {
        PlannerTraits {
            batch: BatchPolicy::Fixed,
            needs_oracle: false,
            honours_interference: false,
        }
    }
    /// Whether its GPUs are chosen by the placement stage
    /// (`params.placement`, [`Place`]): fixed-size policies that decide
    /// counts and then place. Others place jobs themselves and are refused
    /// a placement other than `default`.
    fn placement_stage(&self) -> bool {
        false
    }
    /// Whether it may put several jobs on one GPU when the round allows
    /// sharing (`params.sharing` > 1). The others give each GPU one job
    /// whatever the round allows; the CLI and the explorer list the ones
    /// that share from here.
    fn shares_gpus(&self) -> bool {
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
