#![warn(missing_docs)]
//! gpuplan-py: gpuplan from Python, the extension module `gpuplan._gpuplan`.
//!
//! It exists so that Python simulators (Pollux's, Sia's, Blox, Gavel's) can
//! call gpuplan's planners in-process, round by round, instead of shelling
//! out to the CLI. Nothing here decides anything: every rule (the round's
//! checks, the registry's parameter defaults, the pipeline's validation,
//! objective, bound and diff, the simulator's loop) is the library crates',
//! through the same functions `gpuplan plan` and `gpuplan simulate` call.
//!
//! The main types:
//! - [`api::Session`]: one planner with its cross-round state and limits
//!   (Python's `gpuplan.Planner`), planning rounds given as JSON.
//! - [`api::simulate_json`], [`api::policies`], [`api::default_params`].
//! - [`api::ApiError`]: `ValueError` (bad input) or `RuntimeError`.
//!
//! The PyO3 layer is behind the `python` feature, which maturin turns on
//! (`extension-module`); the workspace builds and tests the JSON API alone.
//!
//! ```
//! let mut s = _gpuplan::api::Session::new("fifo", 10.0, 1e-4, 0, 1).unwrap();
//! let round = r#"{"now_s": 0, "cluster": {"nodes": [{"name": "n0", "gpus": 4, "gpu_type": "t4"}]}, "jobs": []}"#;
//! let plan: serde_json::Value = serde_json::from_str(&s.plan_json("round", round).unwrap()).unwrap();
//! assert_eq!(plan["planner"], "fifo");
//! ```

pub mod api;
#[cfg(feature = "python")]
mod python;
