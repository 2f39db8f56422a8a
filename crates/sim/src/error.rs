use gpuplan_core::CoreError;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Plan(#[from] gpuplan_solve::PlanError),
    #[error("{0}")]
    Invalid(String),
}
