//! The Pollux goodput model (OSDI'21 §3): what planners believe about a job.
//!
//! goodput = throughput × statistical efficiency. Throughput comes from a
//! 7-parameter model fitted to step times the job has observed ([`PerfParams`]);
//! efficiency from the gradient noise scale ([`GradParams`]).

use crate::math::Libm;
use serde::{Deserialize, Serialize};

/// The compute share of a step, (step − sync)/step, in [0, 1]: the part of
/// the step the GPU computes; the rest it waits for gradient sync. A job
/// with no step time (nothing measured) counts as fully busy. Here, with
/// the model, because the model, the profiles, the predictor and sharing
/// ([`crate::colocation`]) all read utilization this one way.
pub fn compute_share(step_s: f64, sync_s: f64) -> f64 {
    if step_s.is_nan() || step_s <= 0.0 || !step_s.is_finite() {
        return 1.0;
    }
    ((step_s - sync_s.max(0.0)) / step_s).clamp(0.0, 1.0)
}

/// The 7 throughput parameters (Pollux Eq. 12).
///
/// Compute time per accumulation step: `alpha_c + beta_c * local_bsz`.
/// Sync time: 0 on one GPU; `alpha_r + beta_r * (k - 2)` on one node with k
/// GPUs; `alpha_n + beta_n * (k - 2)` across nodes. `gamma` ≥ 1 blends
/// compute and sync: `(t_c^γ + t_s^γ)^(1/γ)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerfParams {
    /// Compute seconds per accumulation step at local batch 0.
    pub alpha_c: f64,
    /// Compute seconds per example of local batch.
    pub beta_c: f64,
    /// Sync seconds across nodes with 2 GPUs.
    pub alpha_n: f64,
    /// Extra cross-node sync seconds per GPU beyond 2.
    pub beta_n: f64,
    /// Sync seconds on one node with 2 GPUs.
    pub alpha_r: f64,
    /// Extra one-node sync seconds per GPU beyond 2.
    pub beta_r: f64,
    /// Overlap of compute and sync, ≥ 1: 1 adds them, larger overlaps more.
    pub gamma: f64,
}

/// Gradient statistics: `sqr` = |g|², `var` = tr(Σ) normalised to batch M0.
/// The gradient noise scale is φ = M0·var/sqr.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GradParams {
    /// |g|², the squared norm of the true gradient.
    pub sqr: f64,
    /// tr(Σ), the gradient variance at batch M0.
    pub var: f64,
}

/// Batch-size limits of an application.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchLimits {
    /// M0: the initial (smallest) total batch size, the efficiency reference.
    pub init_batch: u32,
    /// Largest total batch size the job may use.
    pub max_batch: u32,
    /// Per-GPU (atomic) batch bounds.
    pub min_local: u32,
    /// Largest per-GPU batch (what fits in GPU memory).
    pub max_local: u32,
}

/// Everything a planner knows about one job's goodput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GoodputModel {
    /// Throughput: step times at each configuration.
    pub perf: PerfParams,
    /// Statistical efficiency: the gradient noise scale.
    pub grad: GradParams,
    /// The batch sizes the job may choose from.
    pub limits: BatchLimits,
    /// Whether gradient accumulation may be used to reach larger batches.
    pub accumulation: bool,
}

/// The best (or a fixed) batch configuration for one (nodes, GPUs) pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchChoice {
    /// Examples per second × statistical efficiency.
    pub goodput: f64,
    /// Total batch size M = gpus × local_bsz × (accum_steps + 1).
    pub batch_size: f64,
    /// Per-GPU batch size.
    pub local_bsz: u32,
    /// Accumulation steps before each optimizer step (0: none).
    pub accum_steps: u32,
    /// Seconds per optimizer step.
    pub step_time_s: f64,
}

/// Number of candidate total batch sizes the optimiser tries (as the artifact).
pub const BATCH_CANDIDATES: usize = 50;

impl GradParams {
    /// φ = M0·var/sqr: the batch size at which noise and signal balance.
    pub fn noise_scale(&self, init_batch: f64) -> f64 {
        if self.sqr <= 0.0 {
            f64::INFINITY
        } else {
            init_batch * self.var / self.sqr
        }
    }
}

impl GoodputModel {
    /// Seconds of compute per accumulation step at local batch `m`.
    pub fn compute_time(&self, local_bsz: f64) -> f64 {
        self.perf.alpha_c + self.perf.beta_c * local_bsz
    }

    /// Seconds of gradient synchronisation per optimizer step. Only the
    /// (nodes, GPUs) pair matters, not how GPUs split across nodes.
    pub fn sync_time(&self, nodes: u32, gpus: u32) -> f64 {
        if gpus <= 1 {
            return 0.0;
        }
        let extra = (gpus as f64 - 2.0).max(0.0);
        if nodes > 1 {
            self.perf.alpha_n + self.perf.beta_n * extra
        } else {
            self.perf.alpha_r + self.perf.beta_r * extra
        }
    }

    /// Seconds per optimizer step: `accum_steps` plain compute steps, then one
    /// step whose compute overlaps the synchronisation (γ-norm).
    pub fn step_time(&self, nodes: u32, gpus: u32, local_bsz: f64, accum_steps: u32) -> f64 {
        let tc = self.compute_time(local_bsz);
        let ts = self.sync_time(nodes, gpus);
        let g = self.perf.gamma.max(1.0);
        // (tc^γ + ts^γ)^(1/γ), computed stably by factoring out the larger term.
        let big = tc.max(ts);
        let overlap = if big <= 0.0 {
            0.0
        } else {
            big * ((tc / big).libm_pow(g) + (ts / big).libm_pow(g)).libm_pow(1.0 / g)
        };
        accum_steps as f64 * tc + overlap
    }

    /// The compute share of a step, (step − sync)/step: how busy the job
    /// keeps its GPUs at this configuration, the utilization that sets how
    /// much it slows when it shares a GPU ([`crate::colocation`]). 1 on one GPU.
    pub fn utilization(&self, nodes: u32, gpus: u32, local_bsz: f64, accum_steps: u32) -> f64 {
        let step = self.step_time(nodes, gpus, local_bsz, accum_steps);
        compute_share(step, self.sync_time(nodes, gpus))
    }

    /// Examples per second.
    pub fn throughput(&self, nodes: u32, gpus: u32, local_bsz: f64, accum_steps: u32) -> f64 {
        let t = self.step_time(nodes, gpus, local_bsz, accum_steps);
        if t <= 0.0 {
            return 0.0;
        }
        gpus as f64 * local_bsz * (accum_steps + 1) as f64 / t
    }

    /// AdaScale gain r(M) = (var + sqr) / (var/(M/M0) + sqr): progress per
    /// optimizer step at batch M, in units of steps at M0.
    pub fn gain(&self, batch: f64) -> f64 {
        let scale = batch / self.limits.init_batch.max(1) as f64;
        let (var, sqr) = (self.grad.var.max(0.0), self.grad.sqr.max(0.0));
        let den = var / scale + sqr;
        if den <= 0.0 || !den.is_finite() {
            return 1.0;
        }
        (var + sqr) / den
    }

    /// Statistical efficiency E(M) = gain/(M/M0) = (φ+M0)/(φ+M).
    pub fn efficiency(&self, batch: f64) -> f64 {
        let scale = batch / self.limits.init_batch.max(1) as f64;
        if scale <= 0.0 {
            return 0.0;
        }
        self.gain(batch) / scale
    }

    /// Examples per second × statistical efficiency at this configuration.
    pub fn goodput(&self, nodes: u32, gpus: u32, local_bsz: f64, accum_steps: u32) -> f64 {
        let batch = gpus as f64 * local_bsz * (accum_steps + 1) as f64;
        self.throughput(nodes, gpus, local_bsz, accum_steps) * self.efficiency(batch)
    }

    fn choice(&self, nodes: u32, gpus: u32, atomic: u32, accum: u32) -> BatchChoice {
        let batch = gpus as f64 * atomic as f64 * (accum + 1) as f64;
        BatchChoice {
            goodput: self.goodput(nodes, gpus, atomic as f64, accum),
            batch_size: batch,
            local_bsz: atomic,
            accum_steps: accum,
            step_time_s: self.step_time(nodes, gpus, atomic as f64, accum),
        }
    }

    /// Split a total batch over `gpus`: local batch, accumulation, atomic
    /// (per-GPU micro-batch). `None` if the atomic size leaves the bounds.
    fn split(&self, gpus: u32, batch: f64) -> Option<(u32, u32)> {
        let lim = &self.limits;
        let local = batch / gpus as f64;
        let mut accum = if self.accumulation {
            ((local / lim.max_local as f64) - 1e-8).ceil().max(1.0) as u32 - 1
        } else {
            0
        };
        if self.accumulation && gpus == 1 && batch > lim.init_batch as f64 {
            // One GPU has no replicas to compare, so it accumulates to estimate gradient noise.
            accum = accum.max(1);
        }
        let atomic = ((local / (accum + 1) as f64) - 1e-8).ceil();
        if atomic < lim.min_local as f64 || atomic > lim.max_local as f64 {
            return None;
        }
        Some((atomic as u32, accum))
    }

    /// The goodput-maximising batch for (nodes, GPUs), as Pollux's optimiser:
    /// `BATCH_CANDIDATES` (50) geometric candidates of the total batch in
    /// [max(M0, min_local·gpus), max_batch].
    pub fn optimize(&self, nodes: u32, gpus: u32) -> Option<BatchChoice> {
        if gpus == 0 || nodes == 0 {
            return None;
        }
        let lim = &self.limits;
        let lo = (lim.init_batch as f64).max(lim.min_local as f64 * gpus as f64);
        let hi = lim.max_batch as f64;
        if lo > hi {
            return None;
        }
        let mut best: Option<BatchChoice> = None;
        for i in 0..BATCH_CANDIDATES {
            let t = i as f64 / (BATCH_CANDIDATES - 1) as f64;
            let batch = lo * (hi / lo).libm_pow(t);
            let Some((atomic, accum)) = self.split(gpus, batch) else {
                continue;
            };
            let c = self.choice(nodes, gpus, atomic, accum);
            if best.is_none_or(|b| c.goodput > b.goodput) {
                best = Some(c);
            }
        }
        best
    }

    /// A fixed total batch (Tiresias, Optimus): the smallest accumulation that
    /// fits the local batch under the limit. `None` if it cannot fit.
    pub fn at_batch(&self, nodes: u32, gpus: u32, batch: f64) -> Option<BatchChoice> {
        if gpus == 0 || nodes == 0 || batch <= 0.0 {
            return None;
        }
        let lim = &self.limits;
        let local = (batch / gpus as f64 - 1e-8).ceil();
        let mut accum = ((local / lim.max_local as f64) - 1e-8).ceil().max(1.0) as u32 - 1;
        if gpus == 1 && batch > lim.init_batch as f64 {
            accum = accum.max(1);
        }
        let atomic = ((local / (accum + 1) as f64) - 1e-8).ceil().max(1.0) as u32;
        Some(self.choice(nodes, gpus, atomic, accum))
    }

    /// Pollux's speedup (Eq. 15): best goodput at (nodes, GPUs) over best
    /// goodput at the base configuration. 0 for no GPUs or no valid batch.
    pub fn speedup(&self, nodes: u32, gpus: u32, base_nodes: u32, base_gpus: u32) -> f64 {
        let Some(c) = self.optimize(nodes, gpus) else {
            return 0.0;
        };
        let base = self
            .optimize(base_nodes, base_gpus)
            .or_else(|| self.optimize(1, 1))
            .map_or(0.0, |b| b.goodput);
        if base <= 0.0 {
            return 0.0;
        }
        c.goodput / base
    }
}

/// Batch-size searches memoised by (model, nodes, GPUs): jobs of one
/// application share a fitted model until each is profiled (a 16,384-GPU
/// bench round of 8,000 jobs holds 301 distinct models), and the search is
/// most of an evaluation's cost. A cache of a pure function, so results are
/// the same bits with it or without; behind a mutex so planners that work
/// in parallel can share one.
#[derive(Debug, Default)]
pub struct Searches {
    found: std::sync::Mutex<std::collections::HashMap<SearchKey, Option<f64>>>,
}

/// A model's exact bits and a configuration: equal keys, equal searches.
type SearchKey = ([u64; 12], u32, u32);

impl Searches {
    /// [`GoodputModel::optimize`]'s goodput, searched once per key.
    pub fn goodput(&self, m: &GoodputModel, nodes: u32, gpus: u32) -> Option<f64> {
        let key = m.key(nodes, gpus);
        if let Some(g) = self.found.lock().ok().and_then(|f| f.get(&key).copied()) {
            return g;
        }
        let g = m.optimize(nodes, gpus).map(|c| c.goodput);
        if let Ok(mut f) = self.found.lock() {
            f.insert(key, g);
        }
        g
    }
}

impl GoodputModel {
    fn key(&self, nodes: u32, gpus: u32) -> SearchKey {
        let p = &self.perf;
        let l = &self.limits;
        (
            [
                p.alpha_c.to_bits(),
                p.beta_c.to_bits(),
                p.alpha_n.to_bits(),
                p.beta_n.to_bits(),
                p.alpha_r.to_bits(),
                p.beta_r.to_bits(),
                p.gamma.to_bits(),
                self.grad.sqr.to_bits(),
                self.grad.var.to_bits(),
                u64::from(l.init_batch) << 32 | u64::from(l.max_batch),
                u64::from(l.min_local) << 32 | u64::from(l.max_local),
                u64::from(self.accumulation),
            ],
            nodes,
            gpus,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_share_is_the_step_less_sync() {
        assert_eq!(compute_share(2.0, 0.5), 0.75);
        assert_eq!(compute_share(1.0, 0.0), 1.0);
        assert_eq!(compute_share(0.0, 0.0), 1.0);
        assert_eq!(compute_share(1.0, 3.0), 0.0);
    }

    fn m(gamma: f64) -> GoodputModel {
        GoodputModel {
            perf: PerfParams {
                alpha_c: 0.1,
                beta_c: 0.01,
                alpha_n: 0.5,
                beta_n: 0.05,
                alpha_r: 0.2,
                beta_r: 0.02,
                gamma,
            },
            grad: GradParams { sqr: 1.0, var: 3.0 },
            limits: BatchLimits {
                init_batch: 100,
                max_batch: 1600,
                min_local: 10,
                max_local: 100,
            },
            accumulation: true,
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} != {b}");
    }

    #[test]
    fn equations_by_hand() {
        let g1 = m(1.0);
        // compute: 0.1 + 0.01·50 = 0.6 s
        close(g1.compute_time(50.0), 0.6);
        // sync: one GPU 0; one node, 4 GPUs: 0.2 + 0.02·2 = 0.24; 2 nodes, 8 GPUs: 0.5 + 0.05·6 = 0.8
        close(g1.sync_time(1, 1), 0.0);
        close(g1.sync_time(1, 4), 0.24);
        close(g1.sync_time(2, 8), 0.8);
        // γ = 1: no overlap, step = compute + sync = 0.6 + 0.8 = 1.4; with 2 accumulation steps + 1.2
        close(g1.step_time(2, 8, 50.0, 0), 1.4);
        close(g1.step_time(2, 8, 50.0, 2), 2.6);
        // γ = 2: (0.6² + 0.8²)^½ = 1.0
        close(m(2.0).step_time(2, 8, 50.0, 0), 1.0);
        // single GPU: no sync, step = compute
        close(m(2.0).step_time(1, 1, 50.0, 0), 0.6);
        // throughput, γ = 2, 8 GPUs × 50 × 1 micro-batch / 1.0 s = 400 examples/s
        close(m(2.0).throughput(2, 8, 50.0, 0), 400.0);
        // φ = M0·var/sqr = 300; E(400) = (300 + 100)/(300 + 400) = 4/7
        close(g1.grad.noise_scale(100.0), 300.0);
        close(g1.efficiency(400.0), 4.0 / 7.0);
        // gain r = E·M/M0 = 4/7 · 4 = 16/7; from its definition (3+1)/(3/4+1) = 16/7
        close(g1.gain(400.0), 16.0 / 7.0);
        // goodput = 400 · 4/7
        close(m(2.0).goodput(2, 8, 50.0, 0), 400.0 * 4.0 / 7.0);
        // efficiency at M0 is 1
        close(g1.efficiency(100.0), 1.0);
        // utilization = (step − sync)/step: γ = 1, (1.4 − 0.8)/1.4; one GPU: 1
        close(g1.utilization(2, 8, 50.0, 0), 0.6 / 1.4);
        close(m(2.0).utilization(1, 1, 50.0, 0), 1.0);
    }

    #[test]
    fn optimizer_respects_limits() {
        let g = m(1.5);
        for (n, k) in [(1, 1), (1, 4), (2, 8), (4, 16)] {
            let c = g.optimize(n, k).unwrap();
            assert!(c.local_bsz >= 10 && c.local_bsz <= 100, "{c:?}");
            assert!(
                c.batch_size <= 1600.0 + 1e-9 && c.batch_size >= 100.0 - 1e-9,
                "{c:?}"
            );
            close(c.goodput, g.goodput(n, k, c.local_bsz as f64, c.accum_steps));
        }
        // One GPU above M0 always accumulates at least once.
        let one = g.optimize(1, 1).unwrap();
        assert!(one.batch_size <= 100.0 + 1e-9 || one.accum_steps >= 1, "{one:?}");
        // 200 GPUs × min local 10 > max batch 1600: nothing valid.
        assert!(g.optimize(50, 200).is_none());
        // Fixed batch 800 on 4 GPUs: local 200 > 100 → one accumulation step, atomic 100.
        let f = g.at_batch(1, 4, 800.0).unwrap();
        assert_eq!((f.local_bsz, f.accum_steps), (100, 1));
        // Speedup of the base over itself is 1; more GPUs on one node help here.
        close(g.speedup(1, 2, 1, 2), 1.0);
        assert!(g.speedup(1, 4, 1, 1) > 1.0);
        assert_eq!(g.speedup(1, 0, 1, 1), 0.0);
    }
}
