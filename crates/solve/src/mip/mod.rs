//! MIP round planners. Each round is a choice, per job, among candidate
//! configurations (nodes, GPUs), "keep the current placement" and
//! "nothing", with a per-choice objective coefficient computed from the
//! goodput model: the power-mean objective becomes linear in the choice
//! binaries. `docs/formulation.md` states both formulations.
//!
//! The formulations live here; the layers they stand on are modules of
//! their own (see docs/architecture.md, "solve's layers"):
//! [`crate::candidates`] (choices and their values), [`crate::solver`] (the
//! HiGHS/microlp binding) and [`crate::fallback`] (validation, gap, greedy
//! fallback).

pub(crate) mod aggregate;
mod dual;
pub(crate) mod exact;
pub(crate) mod node;
pub(crate) mod sia;

pub(crate) use crate::fallback::set_gap_cached;

use crate::{BatchPolicy, PlannerTraits};

/// What every MIP planner promises: goodput batches, no oracle, the interference rule.
pub const MIP_TRAITS: PlannerTraits = PlannerTraits {
    batch: BatchPolicy::Adaptive,
    needs_oracle: false,
    honours_interference: true,
};
