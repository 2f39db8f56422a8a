use gpuplan_core::CoreError;

/// Why a simulation did not finish. Non-exhaustive: a caller matches the
/// kinds it handles (a cancelled run is not a failure) and shows the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
    #[error("{0}")]
    Invalid(String),
    /// The observer asked to stop ([`crate::Control::Cancel`]).
    #[error("cancelled")]
    Cancelled,
}
