//! Helpers shared by the planner test suites.

use gpuplan_core::{BatchLimits, GoodputModel, GradParams, PerfParams};

/// A plausible goodput model from three knobs: compute cost `a`, sync cost
/// `sync`, gradient noise `var`.
pub fn model(a: f64, sync: f64, var: f64) -> GoodputModel {
    GoodputModel {
        perf: PerfParams {
            alpha_c: a,
            beta_c: a / 100.0,
            alpha_n: 4.0 * sync,
            beta_n: sync / 5.0,
            alpha_r: sync,
            beta_r: sync / 10.0,
            gamma: 1.3,
        },
        grad: GradParams { sqr: 1.0, var },
        limits: BatchLimits {
            init_batch: 64,
            max_batch: 4096,
            min_local: 16,
            max_local: 256,
        },
        accumulation: true,
    }
}
