//! Fitting the 7 throughput parameters to observed step times (Pollux §4.1).
//!
//! The objective follows the Pollux artifact: root-mean-square log error of
//! the accumulation-step time plus that of the optimizer-step time, with
//! two small regularisers (γ towards 1, β small relative to α). Parameters
//! without evidence are pinned (no multi-GPU run: no sync constants; no
//! multi-node run: inter-node constants derived from intra-node ones), so a
//! job that has run on one configuration still gets a usable model.
//!
//! Bounds (α, β ≥ 1e-8; 1 ≤ γ ≤ 10) are kept by reparameterisation
//! (positive parameters as 1e-8 + e^x, γ as 1 + 9·sigmoid(x)), and the
//! smooth unconstrained problem goes to argmin's L-BFGS.

use argmin::core::{CostFunction, Error as ArgminError, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use serde::{Deserialize, Serialize};

use crate::math::Libm;
use crate::model::{BatchLimits, GoodputModel, GradParams, PerfParams};

/// One measured configuration: what an agent records per (nodes, GPUs, local batch).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Nodes the job ran on.
    pub nodes: u32,
    /// GPUs the job ran on, in all.
    pub gpus: u32,
    /// Per-GPU batch size it ran with.
    pub local_bsz: u32,
    /// Compute time of one accumulation step (step time minus sync time), s.
    pub accum_time_s: f64,
    /// Optimizer-step time including synchronisation, s.
    pub step_time_s: f64,
}

const LOWER: f64 = 1e-8;

/// Parameters used before a job has been measured at all: the starting
/// point of the artifact's fit, with inter-node sync 1.1× intra-node.
pub fn prior_perf_params() -> PerfParams {
    PerfParams {
        alpha_c: 0.1,
        beta_c: 0.01,
        alpha_n: 0.11,
        beta_n: 0.011,
        alpha_r: 0.1,
        beta_r: 0.01,
        gamma: 1.001,
    }
}

fn from_value(i: usize, v: f64) -> f64 {
    if i == 6 {
        let t = ((v - 1.0) / 9.0).clamp(1e-6, 1.0 - 1e-6);
        (t / (1.0 - t)).libm_ln()
    } else {
        (v - LOWER).max(1e-12).libm_ln()
    }
}

/// Per observation, the squared log errors (accumulation step, optimizer step).
type Terms = Vec<(f64, f64)>;

/// The fit's objective over a fixed set of observations. The measured
/// logs are taken once, and the gradient re-evaluates only the terms a
/// perturbed parameter reaches: the same arithmetic as evaluating the
/// whole loss at every perturbed point (bit for bit: the simulator's
/// results do not move), at a fraction of the cost. Fitting is most of the
/// simulator's time under goodput policies, in the browser above all.
#[derive(Clone)]
struct Problem<'a> {
    obs: &'a [Observation],
    fixed: [Option<f64>; 7],
    /// ln of each observation's measured accumulation-step and optimizer-step time.
    ln_measured: Vec<(f64, f64)>,
    /// The parameter index of each free coordinate of `x`.
    free: Vec<usize>,
    /// The last point the loss was evaluated at, and its terms: the line
    /// search asks for the gradient where it has just asked for the cost.
    last: std::cell::RefCell<(Vec<f64>, Terms)>,
}

fn model_of(p: PerfParams) -> GoodputModel {
    GoodputModel {
        perf: p,
        grad: GradParams { sqr: 1.0, var: 0.0 },
        limits: BatchLimits {
            init_batch: 1,
            max_batch: 1,
            min_local: 1,
            max_local: 1,
        },
        accumulation: false,
    }
}

/// The value of parameter `i` at free coordinate value `xi`.
fn param_value(i: usize, xi: f64) -> f64 {
    let xi = xi.clamp(-40.0, 40.0);
    if i == 6 {
        1.0 + 9.0 / (1.0 + (-xi).libm_exp())
    } else {
        LOWER + xi.libm_exp()
    }
}

/// The 7 parameter values: the fixed ones, and the free coordinates `x` in order.
fn values_of(fixed: &[Option<f64>; 7], x: &[f64]) -> [f64; 7] {
    let mut v = [0.0; 7];
    let mut k = 0;
    for (i, vi) in v.iter_mut().enumerate() {
        *vi = match fixed[i] {
            Some(f) => f,
            None => {
                k += 1;
                param_value(i, x[k - 1])
            }
        };
    }
    v
}

fn params_of(v: &[f64; 7]) -> PerfParams {
    PerfParams {
        alpha_c: v[0],
        beta_c: v[1],
        alpha_n: v[2],
        beta_n: v[3],
        alpha_r: v[4],
        beta_r: v[5],
        gamma: v[6],
    }
}

/// Whether parameter `i` (2..=6: sync constants, γ) changes the predicted
/// optimizer-step time of `o`. Without sync (one GPU) the overlap is
/// exactly the compute time, whatever γ: pow(1, γ) = 1 and pow(0, γ) = 0.
fn reaches_step(i: usize, o: &Observation) -> bool {
    let extra = o.gpus > 2;
    match i {
        2 => o.nodes > 1 && o.gpus > 1,
        3 => o.nodes > 1 && extra,
        4 => o.nodes <= 1 && o.gpus > 1,
        5 => o.nodes <= 1 && extra,
        _ => o.gpus > 1,
    }
}

impl<'a> Problem<'a> {
    fn new(obs: &'a [Observation], fixed: [Option<f64>; 7]) -> Self {
        Problem {
            obs,
            fixed,
            ln_measured: obs
                .iter()
                .map(|o| {
                    (
                        o.accum_time_s.max(1e-12).libm_ln(),
                        o.step_time_s.max(1e-12).libm_ln(),
                    )
                })
                .collect(),
            free: (0..7).filter(|&i| fixed[i].is_none()).collect(),
            last: Default::default(),
        }
    }

    fn values(&self, x: &[f64]) -> [f64; 7] {
        values_of(&self.fixed, x)
    }

    /// Squared log errors of one observation: (accumulation, optimizer step).
    fn terms(&self, m: &GoodputModel, o: &Observation, ln: (f64, f64)) -> (f64, f64) {
        let pa = m.compute_time(o.local_bsz as f64);
        let po = m.step_time(o.nodes, o.gpus, o.local_bsz as f64, 0);
        (
            (pa.max(1e-12).libm_ln() - ln.0).powi(2),
            (po.max(1e-12).libm_ln() - ln.1).powi(2),
        )
    }

    /// The loss from per-observation terms (summed in observation order).
    fn combine(&self, p: &PerfParams, terms: &[(f64, f64)]) -> f64 {
        let n = self.obs.len().max(1) as f64;
        let (mut e_acc, mut e_opt) = (0.0, 0.0);
        for t in terms {
            e_acc += t.0;
            e_opt += t.1;
        }
        let reg = 1e-3 * (p.gamma - 1.0).powi(2)
            + 1e-2 * ((p.beta_n / p.alpha_n).powi(2) + (p.beta_r / p.alpha_r).powi(2));
        let l = (e_acc / n).sqrt() + (e_opt / n).sqrt() + reg;
        if l.is_finite() {
            l
        } else {
            1e10
        }
    }

    fn all_terms(&self, p: PerfParams) -> Terms {
        let m = model_of(p);
        self.obs
            .iter()
            .zip(&self.ln_measured)
            .map(|(o, &ln)| self.terms(&m, o, ln))
            .collect()
    }

    fn loss(&self, x: &[f64]) -> f64 {
        let p = params_of(&self.values(x));
        let terms = self.all_terms(p);
        let l = self.combine(&p, &terms);
        *self.last.borrow_mut() = (x.to_vec(), terms);
        l
    }

    /// The terms at `x`, from the last loss evaluation if it was at `x`.
    fn terms_at(&self, x: &[f64], p: PerfParams) -> Terms {
        let last = self.last.borrow();
        if last.0.as_slice() == x {
            return last.1.clone();
        }
        drop(last);
        self.all_terms(p)
    }
}

impl CostFunction for Problem<'_> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, x: &Self::Param) -> Result<f64, ArgminError> {
        Ok(self.loss(x))
    }
}

impl Gradient for Problem<'_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    /// Central differences over the 7 parameters; each perturbed loss
    /// recomputes only the terms its parameter reaches.
    fn gradient(&self, x: &Self::Param) -> Result<Vec<f64>, ArgminError> {
        let base = self.values(x);
        let base_terms = self.terms_at(x, params_of(&base));
        let mut terms = base_terms.clone();
        let mut g = vec![0.0; x.len()];
        for (k, &i) in self.free.iter().enumerate() {
            let h = 1e-6 * (1.0 + x[k].abs());
            let mut at = |xi: f64| {
                let mut v = base;
                v[i] = param_value(i, xi);
                let p = params_of(&v);
                let m = model_of(p);
                for (((o, &ln), t), b) in self
                    .obs
                    .iter()
                    .zip(&self.ln_measured)
                    .zip(terms.iter_mut())
                    .zip(&base_terms)
                {
                    *t = if i <= 1 {
                        self.terms(&m, o, ln)
                    } else if reaches_step(i, o) {
                        (b.0, self.terms(&m, o, ln).1)
                    } else {
                        *b
                    };
                }
                self.combine(&p, &terms)
            };
            let a = at(x[k] + h);
            let b = at(x[k] - h);
            g[k] = (a - b) / (2.0 * h);
        }
        Ok(g)
    }
}

/// Fit [`PerfParams`] to observations. Deterministic; never NaN; with no
/// observations returns [`prior_perf_params`]. Runs [`FitStarts`] in turn.
pub fn fit_perf_params(obs: &[Observation]) -> PerfParams {
    match FitStarts::new(obs) {
        Err(prior) => prior,
        Ok(starts) => starts.finish((0..starts.count()).map(|k| starts.run(k))),
    }
}

/// The artifact starts at γ = 1.001; through the logistic that point is
/// nearly flat, so we also start from γ = 2 and keep the better fit.
const GAMMA_STARTS: [f64; 2] = [1.1, 2.0];

/// A fit's independent L-BFGS starts. [`fit_perf_params`] runs them one
/// after the other; a caller with threads may run them at once (fitting is
/// most of a goodput policy's simulation time, and a round often refits
/// one job only) and get the very same parameters from [`FitStarts::finish`].
/// Core itself stays thread-free.
#[derive(Debug, Clone)]
pub struct FitStarts {
    obs: Vec<Observation>,
    fixed: [Option<f64>; 7],
    multi_node: bool,
}

/// One start's candidate points, in the order the fit meets them: the
/// start itself, then the solver's best (when finite).
#[derive(Debug, Clone)]
pub struct Start(Vec<(f64, Vec<f64>)>);

impl FitStarts {
    /// The starts of a fit to `obs`, or the prior when no observation is usable.
    pub fn new(obs: &[Observation]) -> Result<FitStarts, PerfParams> {
        let obs: Vec<Observation> = obs
            .iter()
            .copied()
            .filter(|o| {
                o.gpus > 0
                    && o.nodes > 0
                    && o.accum_time_s.is_finite()
                    && o.step_time_s.is_finite()
                    && o.accum_time_s > 0.0
                    && o.step_time_s > 0.0
            })
            .collect();
        if obs.is_empty() {
            return Err(prior_perf_params());
        }
        let mut fixed: [Option<f64>; 7] = [None; 7];
        let mut bsz: Vec<u32> = obs.iter().map(|o| o.local_bsz).collect();
        bsz.sort_unstable();
        bsz.dedup();
        if bsz.len() == 1 {
            // One batch size cannot separate α_c from β_c: split the time evenly.
            let mean = obs.iter().map(|o| o.accum_time_s).sum::<f64>() / obs.len() as f64;
            fixed[0] = Some(mean / 2.0);
        }
        let multi_node = obs.iter().any(|o| o.nodes > 1);
        let single_node_multi = obs.iter().any(|o| o.nodes == 1 && o.gpus > 1);
        let many = obs.iter().any(|o| o.gpus > 2);
        if !multi_node {
            fixed[2] = Some(LOWER);
            fixed[3] = Some(LOWER);
        }
        if !single_node_multi {
            fixed[4] = Some(LOWER);
            fixed[5] = Some(LOWER);
        }
        if !many {
            fixed[3] = Some(LOWER);
            fixed[5] = Some(LOWER);
        }
        Ok(FitStarts {
            obs,
            fixed,
            multi_node,
        })
    }

    /// How many starts there are (with nothing free to fit, one).
    pub fn count(&self) -> usize {
        if self.fixed.iter().all(Option::is_some) {
            1
        } else {
            GAMMA_STARTS.len()
        }
    }

    /// Runs start `k` (`0..count()`), independently of the others.
    pub fn run(&self, k: usize) -> Start {
        let problem = Problem::new(&self.obs, self.fixed);
        let init = [0.1, 0.01, 0.1, 0.01, 0.1, 0.01, GAMMA_STARTS[k]];
        let x0: Vec<f64> = (0..7)
            .filter(|&i| self.fixed[i].is_none())
            .map(|i| from_value(i, init[i]))
            .collect();
        let mut out = vec![(problem.loss(&x0), x0.clone())];
        if x0.is_empty() {
            return Start(out);
        }
        let Ok(solver) = LBFGS::new(MoreThuenteLineSearch::new(), 7)
            .with_tolerance_grad(1e-10)
            .and_then(|s| s.with_tolerance_cost(1e-14))
        else {
            return Start(out);
        };
        let res = Executor::new(problem.clone(), solver)
            .configure(|s| s.param(x0).max_iters(300))
            .run();
        if let Ok(res) = res {
            if let Some(x) = res.state().get_best_param() {
                let l = problem.loss(x);
                if l.is_finite() {
                    out.push((l, x.clone()));
                }
            }
        }
        Start(out)
    }

    /// The fit from every start's result, in start order: the first point
    /// of least loss.
    pub fn finish(&self, starts: impl IntoIterator<Item = Start>) -> PerfParams {
        let mut best_x: Vec<f64> = Vec::new();
        let mut best = f64::INFINITY;
        for (l, x) in starts.into_iter().flat_map(|s| s.0) {
            if l < best {
                best = l;
                best_x = x;
            }
        }
        let mut p = params_of(&values_of(&self.fixed, &best_x));
        if !self.multi_node {
            // Never seen across nodes: assume inter-node sync is 10% slower than intra-node.
            p.alpha_n = p.alpha_n.max(1.1 * p.alpha_r);
            p.beta_n = p.beta_n.max(1.1 * p.beta_r);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synth(p: PerfParams) -> Vec<Observation> {
        let m = model_of(p);
        let mut v = Vec::new();
        for &(n, g) in &[(1, 1), (1, 2), (1, 4), (2, 4), (2, 8), (4, 16)] {
            for &b in &[32u32, 64, 128, 256] {
                v.push(Observation {
                    nodes: n,
                    gpus: g,
                    local_bsz: b,
                    accum_time_s: m.compute_time(b as f64),
                    step_time_s: m.step_time(n, g, b as f64, 0),
                });
            }
        }
        v
    }

    #[test]
    fn recovers_step_times_from_noise_free_data() {
        let truth = PerfParams {
            alpha_c: 0.02,
            beta_c: 0.0005,
            alpha_n: 0.08,
            beta_n: 0.004,
            alpha_r: 0.01,
            beta_r: 0.002,
            gamma: 1.5,
        };
        let obs = synth(truth);
        let fit = fit_perf_params(&obs);
        let m = model_of(fit);
        for o in &obs {
            let pred = m.step_time(o.nodes, o.gpus, o.local_bsz as f64, 0);
            assert!(
                (pred - o.step_time_s).abs() / o.step_time_s < 0.05,
                "{o:?}: {pred} vs {}",
                o.step_time_s
            );
        }
        assert!(
            (fit.alpha_c - truth.alpha_c).abs() / truth.alpha_c < 0.05,
            "{fit:?}"
        );
        assert!((fit.beta_c - truth.beta_c).abs() / truth.beta_c < 0.05, "{fit:?}");
    }

    /// The gradient's partial re-evaluation is bit-for-bit the plain central
    /// difference of the whole loss, so the speed-up moves no fitted value.
    #[test]
    fn partial_gradient_equals_full_central_differences() {
        let truth = PerfParams {
            alpha_c: 0.03,
            beta_c: 0.0007,
            alpha_n: 0.09,
            beta_n: 0.003,
            alpha_r: 0.02,
            beta_r: 0.001,
            gamma: 1.7,
        };
        let all = synth(truth);
        // Subsets that pin different parameters, with noise on the times.
        for (s, take) in [(0usize, 24usize), (3, 5), (0, 2), (8, 9), (1, 13)] {
            let obs: Vec<Observation> = all
                .iter()
                .skip(s)
                .take(take)
                .enumerate()
                .map(|(k, o)| Observation {
                    step_time_s: o.step_time_s * (1.0 + 0.03 * ((k * 7 % 5) as f64 - 2.0)),
                    ..*o
                })
                .collect();
            let mut fixed = [None; 7];
            if !obs.iter().any(|o| o.nodes > 1) {
                fixed[2] = Some(LOWER);
            }
            let problem = Problem::new(&obs, fixed);
            for x in [
                vec![-2.0, -4.5, -2.2, -5.0, -3.0, -6.0, 0.3],
                vec![1.0, -9.0, 0.5, -20.0, -1.0, -3.0, -2.0],
            ] {
                let x: Vec<f64> = x.into_iter().take(problem.free.len()).collect();
                let fast = problem.gradient(&x).unwrap();
                let mut slow = vec![0.0; x.len()];
                let mut y = x.clone();
                for k in 0..x.len() {
                    let h = 1e-6 * (1.0 + x[k].abs());
                    y[k] = x[k] + h;
                    let a = problem.loss(&y);
                    y[k] = x[k] - h;
                    let b = problem.loss(&y);
                    y[k] = x[k];
                    slow[k] = (a - b) / (2.0 * h);
                }
                assert_eq!(
                    fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{fast:?} vs {slow:?}"
                );
            }
        }
    }

    #[test]
    fn few_points_and_priors() {
        assert_eq!(fit_perf_params(&[]), prior_perf_params());
        let one = [Observation {
            nodes: 1,
            gpus: 1,
            local_bsz: 64,
            accum_time_s: 0.2,
            step_time_s: 0.2,
        }];
        let p = fit_perf_params(&one);
        assert!(
            (p.alpha_c - 0.1).abs() < 1e-12,
            "α_c pinned to half the time: {p:?}"
        );
        let m = model_of(p);
        assert!((m.step_time(1, 1, 64.0, 0) - 0.2).abs() / 0.2 < 0.02, "{p:?}");
        // Inter-node prior is 1.1× intra-node.
        assert!(p.alpha_n >= 1.1 * p.alpha_r - 1e-15);
        let two = [
            one[0],
            Observation {
                nodes: 1,
                gpus: 2,
                local_bsz: 64,
                accum_time_s: 0.2,
                step_time_s: 0.25,
            },
            Observation {
                nodes: 2,
                gpus: 2,
                local_bsz: 128,
                accum_time_s: 0.35,
                step_time_s: 0.5,
            },
        ];
        let p = fit_perf_params(&two);
        for v in [
            p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r, p.beta_r, p.gamma,
        ] {
            assert!(v.is_finite() && v > 0.0, "{p:?}");
        }
        assert!((1.0..=10.0).contains(&p.gamma));
        // Garbage is filtered, not propagated.
        let bad = [Observation {
            nodes: 1,
            gpus: 1,
            local_bsz: 1,
            accum_time_s: f64::NAN,
            step_time_s: -1.0,
        }];
        assert_eq!(fit_perf_params(&bad), prior_perf_params());
    }

    /// The starts share nothing: run on two threads, the second first, they
    /// give the serial fit's very bits (the simulator runs them at once).
    #[test]
    fn starts_run_apart_give_the_serial_fit() {
        let all = synth(PerfParams {
            gamma: 2.5,
            ..prior_perf_params()
        });
        for n in [1, 3, 7, all.len()] {
            let obs = &all[..n];
            let serial = fit_perf_params(obs);
            let starts = FitStarts::new(obs).expect("usable observations");
            assert_eq!(starts.count(), 2);
            let (second, first) = std::thread::scope(|s| {
                let b = s.spawn(|| starts.run(1)).join().unwrap();
                let a = s.spawn(|| starts.run(0)).join().unwrap();
                (b, a)
            });
            let apart = starts.finish([first, second]);
            let bits = |p: PerfParams| {
                [
                    p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r, p.beta_r, p.gamma,
                ]
                .map(f64::to_bits)
            };
            assert_eq!(bits(apart), bits(serial), "{n} observations");
        }
        assert!(FitStarts::new(&[]).is_err());
    }
}
