//! The API's error and its JSON step: below every part of the API.

use serde::Serialize;

/// Everything that can go wrong at the boundary; the message is what the page shows.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A round or its parameters are invalid (core's check).
    #[error(transparent)]
    Core(#[from] gpuplan_core::CoreError),
    /// The simulation failed: a workload that does not parse, a scenario the simulator refuses.
    #[error(transparent)]
    Sim(#[from] gpuplan_sim::SimError),
    /// The planner cannot be created or failed.
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
    /// A scenario, cluster, options or run id the page sent is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The progress callback asked to stop.
    #[error("cancelled")]
    Cancelled,
}

pub(super) fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::Invalid(msg.into())
}

pub(super) fn to_json<T: Serialize>(v: &T) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(|e| invalid(format!("serialising: {e}")))
}
