//! Helpers shared by the planner test suites.

use gpuplan_core::{BatchLimits, GoodputModel, GradParams, PerfParams};

/// A plausible goodput model from three knobs: compute cost `a`, sync cost
/// `sync`, gradient noise `var`.
#[allow(dead_code)]
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

/// The nested mean of docs/tenants.md computed as written there: each leaf
/// queue's power mean of its jobs' (v + ε), then the weighted power mean of
/// each queue's children with jobs (weights over those siblings' sum), up
/// to the top; the plain power mean without queues. The per-job values
/// (after slowdowns) are core's; the nesting is independent of
/// `objective::evaluate`'s per-job shares, so the two agree only if the
/// shares are exact (issue 51: at p = 0.01 they once cancelled to 0).
#[allow(dead_code)]
pub fn documented_mean(round: &gpuplan_core::Round, plan: &gpuplan_core::Plan) -> f64 {
    use gpuplan_core::objective::{fair_share, job_value, shared_values, shifted, variability_values};
    use gpuplan_core::queue::QueueTree;
    use gpuplan_core::Libm;
    let fair = fair_share(round);
    let mut v: Vec<f64> = round
        .jobs
        .iter()
        .map(|j| job_value(j, &round.cluster, plan.gpus_of(j.id), fair, &round.params))
        .collect();
    shared_values(round, plan, &mut v);
    variability_values(round, plan, &mut v);
    let x: Vec<f64> = v.iter().map(|&v| shifted(v)).collect();
    let p = round.params.p;
    // Weighted power mean of (weight, value) items, weights normalised here.
    let mean = |items: &[(f64, f64)]| -> f64 {
        let w: f64 = items.iter().map(|i| i.0).sum();
        if p == f64::NEG_INFINITY {
            items.iter().map(|i| i.1).fold(f64::INFINITY, f64::min)
        } else if p == 0.0 {
            items
                .iter()
                .map(|i| i.0 / w * i.1.libm_ln())
                .sum::<f64>()
                .libm_exp()
        } else {
            items
                .iter()
                .map(|i| i.0 / w * i.1.libm_pow(p))
                .sum::<f64>()
                .libm_pow(1.0 / p)
        }
    };
    let Some(t) = QueueTree::new(round) else {
        let items: Vec<(f64, f64)> = x.iter().map(|&x| (1.0, x)).collect();
        return mean(&items);
    };
    type Mean<'a> = &'a dyn Fn(&[(f64, f64)]) -> f64;
    fn of(q: Option<usize>, t: &QueueTree, x: &[f64], mean: Mean) -> Option<f64> {
        let mut items: Vec<(f64, f64)> = Vec::new();
        if let Some(q) = q {
            items.extend(
                t.leaf
                    .iter()
                    .zip(x)
                    .filter(|(&l, _)| l == q)
                    .map(|(_, &x)| (1.0, x)),
            );
        }
        for c in (0..t.queues.len()).filter(|&c| t.parent[c] == q) {
            if let Some(m) = of(Some(c), t, x, mean) {
                items.push((t.queues[c].weight, m));
            }
        }
        (!items.is_empty()).then(|| mean(&items))
    }
    of(None, &t, &x, &mean).unwrap_or(0.0)
}
