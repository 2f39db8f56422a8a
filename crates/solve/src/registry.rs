//! The one list of planners. A new policy is one file plus one line here.

use crate::mip::aggregate::MipAggregate;
use crate::mip::exact::{MipExact, PolluxMip};
use crate::mip::node::MipNode;
use crate::planners::greedy::Greedy;
use crate::planners::{
    fifo::Fifo, optimus::Optimus, pollux_ga::PolluxGa, srtf::Srtf, tiresias::Tiresias,
    tiresias_gittins::TiresiasGittins,
};
use crate::solver::Solver;
use crate::{PlanError, Planner};

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
        })
    }),
    ("pollux-mip-aggregate", || {
        Box::new(MipAggregate::new(
            Solver::default_native(),
            "pollux-mip-aggregate",
        ))
    }),
];

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
