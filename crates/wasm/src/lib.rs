#![warn(missing_docs)]
//! gpuplan-wasm: the simulator and planners of gpuplan, compiled to
//! WebAssembly for the browser scenario explorer (`web/`).
//!
//! It exists so that "what if" questions are answered by the very code the
//! CLI runs: same planners, same arithmetic, microlp instead of HiGHS (which
//! is C++ and does not build for wasm32), no rayon. Everything crosses the
//! boundary as JSON strings (serde), so the API is tested natively in
//! [`api`] and this file only adapts it to wasm-bindgen. The exports
//! `web/src/*.js` calls: [`catalog`] and [`warm_up`] at start,
//! [`run_scenario`] for a run (an [`api::Scenario`] in, an [`api::RunOut`]
//! back), [`inspect_round`] and [`resolve_round`] for one of its rounds,
//! [`solve_round`] for a round file, [`dump_rounds`] for a run's round
//! inputs and [`compare_rounds`] for two round logs.
//!
//! ```
//! use gpuplan_sim::Control;
//! let catalog: serde_json::Value = serde_json::from_str(&gpuplan_wasm::api::catalog().unwrap()).unwrap();
//! assert_eq!(catalog["defaults"]["workload"], "workloads/workload-6");
//! let run = gpuplan_wasm::api::run(
//!     r#"{"workload": "workloads-0.5/workload-1", "policy": "fifo"}"#,
//!     &mut |_| Control::Continue,
//! )
//! .unwrap();
//! assert!(run.contains("\"avg_jct_s\""));
//! ```

// Kept a namespace: its `catalog`, `warm_up`, `run_scenario`, `solve_round` would collide with the exports.
pub mod api;

use gpuplan_sim::Control;
use wasm_bindgen::prelude::*;

fn js_err(e: api::ApiError) -> JsError {
    JsError::new(&e.to_string())
}

/// Bundled workloads, the planners (names, help, parameters) and the
/// default scenario (JSON).
#[wasm_bindgen]
pub fn catalog() -> Result<String, JsError> {
    api::catalog().map_err(js_err)
}

/// Parse the bundled application profiles ahead of the first run.
#[wasm_bindgen]
pub fn warm_up() -> Result<(), JsError> {
    api::warm_up().map_err(js_err)
}

/// Run a scenario (JSON, see `api::Scenario`) and return the result (JSON).
/// `progress(round, now_s, done_jobs, total_jobs, alone)` is called after
/// every round, then (`alone` true) before each job is simulated alone for
/// finish-time fairness; if it returns `false` the run stops with the error
/// "cancelled".
#[wasm_bindgen]
pub fn run_scenario(scenario_json: &str, progress: &js_sys::Function) -> Result<String, JsError> {
    let mut call = |p: api::Progress| {
        let args = js_sys::Array::of5(
            &JsValue::from(p.round as f64),
            &JsValue::from(p.now_s),
            &JsValue::from(p.done_jobs as f64),
            &JsValue::from(p.total_jobs as f64),
            &JsValue::from(p.alone),
        );
        match progress.apply(&JsValue::NULL, &args) {
            Ok(v) if v == JsValue::FALSE => Control::Cancel,
            Ok(_) => Control::Continue,
            // A throwing callback cancels rather than losing the error silently.
            Err(_) => Control::Cancel,
        }
    };
    api::run(scenario_json, &mut call).map_err(js_err)
}

/// Round `index` of a recent run: speedup tables, chosen configurations,
/// objective, bound and gap (JSON).
#[wasm_bindgen]
pub fn inspect_round(run_id: u32, index: usize) -> Result<String, JsError> {
    api::inspect(run_id, index).map_err(js_err)
}

/// Round `index` of a recent run solved again by the planner named in
/// `options` (`{planner, time_limit_s, gap, seed}`); same shape as `inspect_round`.
#[wasm_bindgen]
pub fn resolve_round(run_id: u32, index: usize, options_json: &str) -> Result<String, JsError> {
    api::resolve(run_id, index, options_json).map_err(js_err)
}

/// Solve one round (the `gpuplan plan --input` JSON) with options
/// `{planner, time_limit_s, gap, seed}`; returns the plan and its stats (JSON).
#[wasm_bindgen]
pub fn solve_round(round_json: &str, options_json: &str) -> Result<String, JsError> {
    api::solve_round(round_json, options_json).map_err(js_err)
}

/// Every round's input of a recent run, one JSON line a round (as
/// `simulate --dump-rounds` writes them, one file each).
#[wasm_bindgen]
pub fn dump_rounds(run_id: u32) -> Result<String, JsError> {
    api::dump_rounds(run_id).map_err(js_err)
}

/// Two round logs (JSON lines) compared as `gpuplan compare-rounds
/// --window W --format json` compares them (JSON).
#[wasm_bindgen]
pub fn compare_rounds(a: &str, b: &str, window: usize) -> Result<String, JsError> {
    api::compare_rounds(a, b, window).map_err(js_err)
}
