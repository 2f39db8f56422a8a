use gpuplan_core::CoreError;

/// Why a simulation did not finish. Non-exhaustive: a caller matches the
/// kinds it handles (a cancelled run is not a failure) and shows the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Input the core crate refused: a profile, trace or job that does not parse or check.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A planner could not be built (unknown name) or failed a round.
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
    /// Input or a run the simulator refuses, in words: a bad file, a job it
    /// cannot place, an invalid plan, a run past `max_sim_s`.
    #[error("{0}")]
    Invalid(String),
    /// The observer asked to stop ([`crate::Control::Cancel`]).
    #[error("cancelled")]
    Cancelled,
}
