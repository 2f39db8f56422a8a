//! The PyO3 module `gpuplan._gpuplan`: thin wrappers over [`crate::api`],
//! JSON text in and out (the Python side converts dicts). The GIL is
//! released while a round is planned or a workload simulated, so other
//! Python threads run meanwhile.

use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::api::{self, ApiError, Session};

fn py_err(e: ApiError) -> PyErr {
    match e {
        ApiError::Value(m) => PyValueError::new_err(m),
        ApiError::Runtime(m) => PyRuntimeError::new_err(m),
    }
}

/// Every registered planner name, in registry order.
#[pyfunction]
fn policies() -> Vec<&'static str> {
    api::policies()
}

/// A planner's round parameters (registry defaults) as JSON text.
#[pyfunction]
fn default_params_json(name: &str) -> PyResult<String> {
    api::default_params(name).map_err(py_err)
}

/// Simulate a workload; arguments and summary as JSON text.
#[pyfunction]
fn simulate_json(py: Python<'_>, args_json: &str) -> PyResult<String> {
    py.detach(|| api::simulate_json(args_json)).map_err(py_err)
}

/// One planner with its cross-round state (the Python `Planner` wraps it).
#[pyclass(module = "gpuplan._gpuplan")]
struct RawPlanner {
    // A Mutex: a planner is Send, not Sync, and Python may share the object
    // between threads; one round at a time plans on it.
    session: Mutex<Session>,
}

#[pymethods]
impl RawPlanner {
    #[new]
    fn new(name: &str, time_limit_s: f64, gap: f64, seed: u64, threads: u32) -> PyResult<Self> {
        let session = Session::new(name, time_limit_s, gap, seed, threads).map_err(py_err)?;
        Ok(RawPlanner {
            session: Mutex::new(session),
        })
    }

    /// The planner's name.
    #[getter]
    fn name(&self) -> String {
        self.session
            .lock()
            .map(|s| s.name().to_string())
            .unwrap_or_default()
    }

    /// Plan one round (round-file JSON); the plan as JSON text.
    fn plan_json(&self, py: Python<'_>, source: &str, round_json: &str) -> PyResult<String> {
        py.detach(|| {
            let mut s = self
                .session
                .lock()
                .map_err(|_| ApiError::Runtime("the planner panicked in an earlier round".into()))?;
            s.plan_json(source, round_json)
        })
        .map_err(py_err)
    }
}

/// gpuplan's planners and simulator (the native half of the `gpuplan` package).
#[pymodule]
fn _gpuplan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(default_params_json, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_json, m)?)?;
    m.add_class::<RawPlanner>()?;
    Ok(())
}
