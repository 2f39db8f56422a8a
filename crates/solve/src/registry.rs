//! The one list of planners. A new policy is one file plus one line here.

use crate::mip::aggregate::MipAggregate;
use crate::mip::exact::{MipExact, PolluxMip};
use crate::mip::node::MipNode;
use crate::mip::sia::Sia;
use crate::planners::greedy::Greedy;
use crate::planners::{
    fifo::Fifo, optimus::Optimus, pollux_ga::PolluxGa, srtf::Srtf, tiresias::Tiresias,
    tiresias_gittins::TiresiasGittins,
};
use crate::solver::Solver;
use crate::{PlanError, Planner};
use gpuplan_core::PolicyParams;

/// Rounds with at most this many job × node cells use the exact model in
/// `pollux-mip` (400 jobs on 128 nodes: about 0.5 s measured with `gpuplan bench`).
pub const POLLUX_MIP_EXACT_MAX_CELLS: usize = 400 * 128;

type Ctor = fn() -> Box<dyn Planner>;

const PLANNERS: &[(&str, Ctor)] = &[
    ("fifo", || Box::new(Fifo)),
    ("srtf", || Box::new(Srtf)),
    ("optimus", || Box::new(Optimus)),
    ("tiresias", || Box::new(Tiresias::default())),
    ("tiresias-gittins", || Box::new(TiresiasGittins::default())),
    ("pollux-ga", || Box::new(PolluxGa::default())),
    ("greedy", || Box::new(Greedy)),
    ("mip-exact", || {
        Box::new(MipExact::new(Solver::default_native(), "mip-exact"))
    }),
    ("mip-aggregate", || {
        Box::new(MipAggregate::new(Solver::default_native(), "mip-aggregate"))
    }),
    ("mip-exact-microlp", || {
        Box::new(MipExact::new(Solver::Microlp, "mip-exact-microlp"))
    }),
    ("mip-aggregate-microlp", || {
        Box::new(MipAggregate::new(Solver::Microlp, "mip-aggregate-microlp"))
    }),
    ("mip-node", || {
        Box::new(MipNode::new(Solver::default_native(), "mip-node"))
    }),
    ("pollux-mip", || {
        Box::new(PolluxMip {
            solver: Solver::default_native(),
            exact_max_cells: POLLUX_MIP_EXACT_MAX_CELLS,
            name: "pollux-mip",
        })
    }),
    ("gpuplan-mip", || {
        Box::new(PolluxMip {
            solver: Solver::default_native(),
            exact_max_cells: POLLUX_MIP_EXACT_MAX_CELLS,
            name: "gpuplan-mip",
        })
    }),
    ("sia", || Box::new(Sia::new(Solver::default_native()))),
    ("pollux-mip-aggregate", || {
        Box::new(MipAggregate::new(
            Solver::default_native(),
            "pollux-mip-aggregate",
        ))
    }),
];

/// A policy's own round parameters, before a user's flags or a round
/// file's keys override them: Pollux's for every policy but `gpuplan-mip`,
/// whose objective differs only here (docs/policy.md). Every driver starts
/// its rounds' params from this, so a policy means the same everywhere.
pub fn default_params(name: &str) -> PolicyParams {
    let mut params = PolicyParams::default();
    if name == "gpuplan-mip" {
        params.exploration_factor = GPUPLAN_MIP_EXPLORATION_FACTOR;
        params.restart_weight = GPUPLAN_MIP_RESTART_WEIGHT;
    }
    params
}

/// `gpuplan-mip`'s exploration cap: a job may take 4× the most GPUs it has
/// run on (Pollux: 2×), so it reaches its best size in half the restarts.
pub const GPUPLAN_MIP_EXPLORATION_FACTOR: u32 = 4;

/// `gpuplan-mip` charges a restart twice its duration: besides the lost
/// seconds, a moved job loses its place and often re-grows over later rounds.
pub const GPUPLAN_MIP_RESTART_WEIGHT: f64 = 2.0;

/// Every registered planner id, in registry order.
pub fn names() -> Vec<&'static str> {
    PLANNERS.iter().map(|(n, _)| *n).collect()
}

/// The planners that can run on a live cluster (no oracle), in registry order.
pub fn live_names() -> Vec<&'static str> {
    PLANNERS
        .iter()
        .filter(|(_, c)| !c().traits().needs_oracle)
        .map(|(n, _)| *n)
        .collect()
}

/// The planners whose GPUs the placement stage chooses (`params.placement`).
pub fn placement_names() -> Vec<&'static str> {
    PLANNERS
        .iter()
        .filter(|(_, c)| c().placement_stage())
        .map(|(n, _)| *n)
        .collect()
}

/// A fresh planner by id; unknown ids list the valid ones.
pub fn create(name: &str) -> Result<Box<dyn Planner>, PlanError> {
    PLANNERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c())
        .ok_or_else(|| PlanError::UnknownPlanner {
            name: name.to_string(),
            valid: names().into_iter().map(String::from).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gpuplan_mip_changes_the_objective() {
        for name in names() {
            let p = default_params(name);
            if name == "gpuplan-mip" {
                assert_eq!(p.exploration_factor, GPUPLAN_MIP_EXPLORATION_FACTOR);
                assert_eq!(p.restart_weight, GPUPLAN_MIP_RESTART_WEIGHT);
                assert_eq!(create(name).unwrap().name(), "gpuplan-mip");
            } else {
                assert_eq!(p, PolicyParams::default(), "{name}");
            }
        }
    }
}
