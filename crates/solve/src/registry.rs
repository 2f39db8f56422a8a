//! The one list of planners. A new policy is one file plus one line here.

use crate::planners::{
    fifo::Fifo, optimus::Optimus, pollux_ga::PolluxGa, srtf::Srtf, tiresias::Tiresias,
    tiresias_gittins::TiresiasGittins,
};
use crate::{PlanError, Planner};

type Ctor = fn() -> Box<dyn Planner>;

const PLANNERS: &[(&str, Ctor)] = &[
    ("fifo", || Box::new(Fifo)),
    ("srtf", || Box::new(Srtf)),
    ("optimus", || Box::new(Optimus)),
    ("tiresias", || Box::new(Tiresias::default())),
    ("tiresias-gittins", || Box::new(TiresiasGittins::default())),
    ("pollux-ga", || Box::new(PolluxGa::default())),
];

/// Every registered planner id, in registry order.
pub fn names() -> Vec<&'static str> {
    PLANNERS.iter().map(|(n, _)| *n).collect()
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
