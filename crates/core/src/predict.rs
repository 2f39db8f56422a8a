//! Utilization before a job runs: a regression from model features.
//!
//! Co-location needs each job's utilization (the compute share of its step,
//! [`crate::colocation::compute_share`]) before the job has run, when
//! there is no goodput model and no measurement. Yeung et al. (HotCloud'20)
//! predict it from the model's computation graph; here the graph is reduced
//! to [`ModelFeatures`] (FLOPs per sample, parameters, layer counts), from
//! the job spec, from an ONNX file (`gpuplan-predict`) or from the table of
//! bundled applications ([`app_features`]).
//!
//! The regression is physically shaped. A step's compute grows with FLOPs ×
//! local batch over the GPU's speed, its all-reduce with the parameter
//! count × the ring factor 2(g − 1)/g over the link's bandwidth, so the
//! log of sync over compute is linear in their logs:
//!
//! ```text
//! z = c0 + c1·[gpus > 1] + c2·[nodes > 1] + c3·ln P + c4·ln(F·b + W0)
//!       + c5·ln(2(g−1)/g) + c6·ln(1 + layers) + ln(sync mult / compute mult of the type)
//! utilization = 1 / (1 + e^z)
//! ```
//!
//! The type term has a fixed coefficient of 1 (the training data are all
//! T4, so nothing could fit it; [`crate::type_speed`] gives the multipliers).
//! The coefficients are fitted by argmin's L-BFGS (already in core for the
//! goodput fit) on the squared log error itself, each model family
//! weighted equally, so the fit minimises the RMSLE that is reported.
//!
//! ```
//! use gpuplan_core::predict::{app_features, PredictAt, DEFAULT_PREDICTOR};
//! let f = app_features("imagenet").unwrap();
//! let one = DEFAULT_PREDICTOR.predict(&f, &PredictAt::new(1, 1, 128), "imagenet");
//! let many = DEFAULT_PREDICTOR.predict(&f, &PredictAt::new(4, 16, 128), "imagenet");
//! assert!(many < one && one <= 1.0);
//! ```

use std::collections::BTreeMap;

use argmin::core::{CostFunction, Error as ArgminError, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use serde::{Deserialize, Serialize};

use crate::cluster::GpuType;
use crate::gpu_speed::type_speed;
use crate::math::Libm;
use crate::profile::AppProfile;

/// Layer counts by kind, as an ONNX graph or a job spec gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerCounts {
    /// Conv and ConvTranspose.
    #[serde(default)]
    pub conv: u32,
    /// Gemm and MatMul (fully connected layers, projections).
    #[serde(default)]
    pub matmul: u32,
    /// BatchNorm, LayerNorm and their kin.
    #[serde(default)]
    pub norm: u32,
    /// LSTM, GRU, RNN.
    #[serde(default)]
    pub recurrent: u32,
    /// Attention blocks (an ONNX `Attention` node, or one per transformer layer in the table).
    #[serde(default)]
    pub attention: u32,
    /// Everything else with weights (embeddings, ...).
    #[serde(default)]
    pub other: u32,
}

impl LayerCounts {
    /// Layers whose weights take part in the step's compute and its all-reduce.
    pub fn weighted(&self) -> u32 {
        self.conv + self.matmul + self.recurrent + self.attention
    }
}

/// What the predictor knows about a model, independent of where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelFeatures {
    /// Forward FLOPs per sample, counted as 2 × multiply-accumulates of the
    /// Conv, Gemm/MatMul and recurrent layers (training is about 3× this; a
    /// constant factor the intercept absorbs).
    pub flops_per_sample: f64,
    /// Trainable parameters (elements of the initializers).
    pub params: f64,
    /// Layer counts by kind.
    #[serde(default)]
    pub layers: LayerCounts,
}

/// Where a prediction is wanted: the configuration of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictAt {
    /// Nodes the job runs on.
    pub nodes: u32,
    /// GPUs in all.
    pub gpus: u32,
    /// Per-GPU batch size.
    pub local_bsz: u32,
    /// Absent: the T4 of the training data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<GpuType>,
}

impl PredictAt {
    /// A configuration on the T4 of the training data.
    pub fn new(nodes: u32, gpus: u32, local_bsz: u32) -> Self {
        PredictAt {
            nodes,
            gpus,
            local_bsz,
            gpu_type: None,
        }
    }
}

/// One observed utilization: a training or test point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The model family (the unit left out in cross-validation).
    pub family: String,
    /// The model's features.
    pub features: ModelFeatures,
    /// The configuration it was measured at.
    pub at: PredictAt,
    /// Measured compute share of a step, in [0, 1].
    pub utilization: f64,
}

/// Which coefficients the fit may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// All seven coefficients.
    Free,
    /// Sync ∝ parameters and compute ∝ FLOPs × batch (c3 = 1, c4 = −1),
    /// no layer term (c6 = 0): only the intercepts and the ring exponent
    /// are fitted, so one held-out model cannot bend the physics.
    Physical,
}

impl Form {
    fn fixed(self) -> [Option<f64>; N] {
        match self {
            Form::Free => [None; N],
            Form::Physical => [None, None, None, Some(1.0), Some(-1.0), None, Some(0.0), None],
        }
    }
}

const N: usize = 8;
/// The index of ln W0, the work floor (see [`z_of`]).
const FLOOR: usize = 7;
/// Centres of the log features, so the intercept is near the data and
/// L-BFGS sees comparable scales.
const LN_PARAMS_0: f64 = 17.0;
const LN_WORK_0: f64 = 23.0;
const LN_LAYERS_0: f64 = 3.0;

/// A fitted predictor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UtilizationPredictor {
    /// The coefficients the fit was allowed to move.
    pub form: Form,
    /// c0..c6 of the module documentation, then c7 = ln W0.
    pub coef: [f64; N],
}

/// The predictor fitted to every measured point of the six Pollux profiles
/// with the features of [`app_features`] (`gpuplan predict --fit`; a test
/// in `gpuplan-sim` re-fits it and checks these digits).
pub const DEFAULT_PREDICTOR: UtilizationPredictor = UtilizationPredictor {
    form: Form::Free,
    coef: [-1.6528, 2.0194, 1.8262, 0.7258, -1.0374, 1.1975, 0.5982, 22.1315],
};

impl Default for UtilizationPredictor {
    fn default() -> Self {
        DEFAULT_PREDICTOR
    }
}

fn ln_pos(x: f64) -> f64 {
    x.max(1.0).libm_ln()
}

/// The regressors x0..x6 and the fixed type offset of a point.
fn regressors(f: &ModelFeatures, at: &PredictAt, app: &str) -> ([f64; N], f64) {
    let g = at.gpus.max(1);
    let multi = g > 1;
    let ring = if multi {
        (2.0 * (g as f64 - 1.0) / g as f64).libm_ln()
    } else {
        0.0
    };
    let x = [
        1.0,
        if multi { 1.0 } else { 0.0 },
        if at.nodes > 1 { 1.0 } else { 0.0 },
        ln_pos(f.params) - LN_PARAMS_0,
        ln_pos(f.flops_per_sample * at.local_bsz.max(1) as f64),
        ring,
        (1.0 + f.layers.weighted() as f64).libm_ln() - LN_LAYERS_0,
        0.0,
    ];
    let offset = match &at.gpu_type {
        None => 0.0,
        Some(t) => {
            let s = type_speed(t.as_str(), app);
            // Across nodes the network carries the all-reduce: not scaled by type.
            let sync = if multi && at.nodes <= 1 { s.sync_intra } else { 1.0 };
            sync.libm_ln() - s.compute.libm_ln()
        }
    };
    (x, offset)
}

fn sigmoid_neg(z: f64) -> f64 {
    1.0 / (1.0 + z.clamp(-40.0, 40.0).libm_exp())
}

impl UtilizationPredictor {
    /// Predicted utilization in (0, 1) of a model with `features` at `at`;
    /// `app` picks the per-application type speed where it is known.
    pub fn predict(&self, features: &ModelFeatures, at: &PredictAt, app: &str) -> f64 {
        let (x, off) = regressors(features, at, app);
        sigmoid_neg(z_of(&self.coef, &x, off).0)
    }

    /// Fit to `samples` (any order; families weighted equally). `None` when
    /// no sample is usable.
    pub fn fit(samples: &[Sample], form: Form) -> Option<UtilizationPredictor> {
        let problem = Problem::new(samples, form)?;
        let mut best = (f64::INFINITY, vec![0.0; problem.free.len()]);
        // The floor's gradient vanishes far below the data's work, so start
        // it at two scales (1e7 and 1e10 FLOPs) and keep the better fit.
        for floor0 in [16.0, 23.0] {
            let x0: Vec<f64> = problem
                .free
                .iter()
                .map(|&i| if i == FLOOR { floor0 } else { 0.0 })
                .collect();
            let l0 = problem.loss(&x0);
            if l0 < best.0 {
                best = (l0, x0.clone());
            }
            let Ok(solver) = LBFGS::new(MoreThuenteLineSearch::new(), 7)
                .with_tolerance_grad(1e-14)
                .and_then(|s| s.with_tolerance_cost(0.0))
            else {
                continue;
            };
            if let Ok(res) = Executor::new(problem.clone(), solver)
                .configure(|s| s.param(x0).max_iters(1000))
                .run()
            {
                if let Some(x) = res.state().get_best_param() {
                    let l = problem.loss(x);
                    if l.is_finite() && l < best.0 {
                        best = (l, x.clone());
                    }
                }
            }
        }
        Some(UtilizationPredictor {
            form,
            coef: problem.coef(&best.1),
        })
    }
}

/// z at coefficients `c` and its gradient in `c`. The work term is
/// ln(F·b + W0): a step's compute never falls below a floor (kernel
/// launches, the input pipeline), which is what a tiny model such as NCF
/// runs into; W0 = e^c7 is fitted with the rest.
fn z_of(c: &[f64; N], x: &[f64; N], off: f64) -> (f64, [f64; N]) {
    let (a, b) = (x[4], c[FLOOR]);
    let hi = a.max(b);
    let lse = hi + (1.0 + (-(a - b).abs()).libm_exp()).libm_ln();
    let mut d = *x;
    d[4] = lse - LN_WORK_0;
    // ∂ ln(e^a + e^b)/∂b = e^b / (e^a + e^b).
    d[FLOOR] = c[4] * (b - lse).libm_exp();
    let z = (0..N).filter(|&i| i != FLOOR).map(|i| c[i] * d[i]).sum::<f64>() + off;
    (z, d)
}

/// Ridge weight on the non-intercept coefficients: small, only to keep a
/// fold with few families from chasing one of them.
const RIDGE: f64 = 1e-8;

#[derive(Clone)]
struct Problem {
    rows: Vec<([f64; N], f64, f64, f64)>, // x, offset, ln(1 + u), weight
    fixed: [Option<f64>; N],
    free: Vec<usize>,
}

impl Problem {
    fn new(samples: &[Sample], form: Form) -> Option<Problem> {
        let usable: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.utilization.is_finite() && (0.0..=1.0).contains(&s.utilization))
            .collect();
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &usable {
            *count.entry(s.family.as_str()).or_default() += 1;
        }
        if usable.is_empty() {
            return None;
        }
        let total_w = count.len() as f64;
        let rows = usable
            .iter()
            .map(|s| {
                let (x, off) = regressors(&s.features, &s.at, &s.family);
                let w = 1.0 / (count[s.family.as_str()] as f64 * total_w);
                (x, off, (1.0 + s.utilization).libm_ln(), w)
            })
            .collect();
        let fixed = form.fixed();
        let free = (0..N).filter(|&i| fixed[i].is_none()).collect();
        Some(Problem { rows, fixed, free })
    }

    fn coef(&self, x: &[f64]) -> [f64; N] {
        let mut c = [0.0; N];
        let mut k = 0;
        for (i, ci) in c.iter_mut().enumerate() {
            *ci = match self.fixed[i] {
                Some(v) => v,
                None => {
                    k += 1;
                    x[k - 1]
                }
            };
        }
        c
    }

    fn ridge(&self, x: &[f64]) -> f64 {
        self.free
            .iter()
            .zip(x)
            .filter(|(&i, _)| i > 0 && i != FLOOR)
            .map(|(_, v)| v * v)
            .sum::<f64>()
            * RIDGE
    }

    fn loss(&self, x: &[f64]) -> f64 {
        let c = self.coef(x);
        let e: f64 = self
            .rows
            .iter()
            .map(|(r, off, t, w)| {
                let d = (1.0 + sigmoid_neg(z_of(&c, r, *off).0)).libm_ln() - t;
                w * d * d
            })
            .sum();
        let l = e + self.ridge(x);
        if l.is_finite() {
            l
        } else {
            1e10
        }
    }

    fn grad(&self, x: &[f64]) -> Vec<f64> {
        let c = self.coef(x);
        let mut g = vec![0.0; x.len()];
        for (r, off, t, w) in &self.rows {
            let (z, dzdc) = z_of(&c, r, *off);
            let u = sigmoid_neg(z);
            let d = (1.0 + u).libm_ln() - t;
            // d ln(1 + u)/dz = −u(1 − u)/(1 + u).
            let dz = 2.0 * w * d * (-u * (1.0 - u) / (1.0 + u));
            for (k, &i) in self.free.iter().enumerate() {
                g[k] += dz * dzdc[i];
            }
        }
        for (k, &i) in self.free.iter().enumerate() {
            if i > 0 && i != FLOOR {
                g[k] += 2.0 * RIDGE * x[k];
            }
        }
        g
    }
}

impl CostFunction for Problem {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, x: &Self::Param) -> Result<f64, ArgminError> {
        Ok(self.loss(x))
    }
}

impl Gradient for Problem {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, x: &Self::Param) -> Result<Vec<f64>, ArgminError> {
        Ok(self.grad(x))
    }
}

/// Root-mean-square log error, sqrt(mean (ln(1 + p) − ln(1 + y))²), with
/// utilization as a fraction in [0, 1]. 0 for no pairs.
pub fn rmsle(pairs: &[(f64, f64)]) -> f64 {
    if pairs.is_empty() {
        return 0.0;
    }
    let s: f64 = pairs
        .iter()
        .map(|&(p, y)| {
            let d = (1.0 + p).libm_ln() - (1.0 + y).libm_ln();
            d * d
        })
        .sum();
    (s / pairs.len() as f64).sqrt()
}

/// One held-out family's scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FamilyScore {
    /// The model family held out.
    pub family: String,
    /// How many of the samples are the family's.
    pub points: usize,
    /// The predictor fitted to the other families.
    pub rmsle: f64,
    /// The other families' mean utilization, as a constant.
    pub rmsle_mean: f64,
    /// Utilization 1 (what a planner assumes of a job with no model).
    pub rmsle_one: f64,
    /// Measured mean utilization of the family.
    pub mean_measured: f64,
    /// Predicted mean utilization of the family.
    pub mean_predicted: f64,
}

/// Leave-one-model-out cross-validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossValidation {
    /// The coefficients each fold's fit was allowed to move.
    pub form: Form,
    /// One score per held-out family.
    pub families: Vec<FamilyScore>,
    /// Over all points of all folds.
    pub rmsle: f64,
    /// The constant-mean baseline, over all points of all folds.
    pub rmsle_mean: f64,
    /// The utilization-1 baseline, over all points of all folds.
    pub rmsle_one: f64,
}

/// Fit on all families but one, score that one; for each family in turn.
pub fn leave_one_family_out(samples: &[Sample], form: Form) -> CrossValidation {
    let families: Vec<String> = samples
        .iter()
        .map(|s| s.family.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut all = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Vec::new();
    for fam in &families {
        let (test, train): (Vec<Sample>, Vec<Sample>) =
            samples.iter().cloned().partition(|s| &s.family == fam);
        let Some(p) = UtilizationPredictor::fit(&train, form) else {
            continue;
        };
        let mean = train.iter().map(|s| s.utilization).sum::<f64>() / train.len().max(1) as f64;
        let pred: Vec<(f64, f64)> = test
            .iter()
            .map(|s| (p.predict(&s.features, &s.at, &s.family), s.utilization))
            .collect();
        let base: Vec<(f64, f64)> = test.iter().map(|s| (mean, s.utilization)).collect();
        let one: Vec<(f64, f64)> = test.iter().map(|s| (1.0, s.utilization)).collect();
        let n = test.len().max(1) as f64;
        out.push(FamilyScore {
            family: fam.clone(),
            points: test.len(),
            rmsle: rmsle(&pred),
            rmsle_mean: rmsle(&base),
            rmsle_one: rmsle(&one),
            mean_measured: test.iter().map(|s| s.utilization).sum::<f64>() / n,
            mean_predicted: pred.iter().map(|p| p.0).sum::<f64>() / n,
        });
        all.0.extend(pred);
        all.1.extend(base);
        all.2.extend(one);
    }
    CrossValidation {
        form,
        families: out,
        rmsle: rmsle(&all.0),
        rmsle_mean: rmsle(&all.1),
        rmsle_one: rmsle(&all.2),
    }
}

/// Features of the bundled applications, for jobs whose spec gives none.
/// Sources (FLOPs are forward, 2 × MACs, per sample):
/// - cifar10, ResNet-18 for 32×32 inputs (the kuangliu/pytorch-cifar model
///   that adaptdl's `examples/pytorch-cifar` trains): 11,173,962 parameters,
///   0.556 GMACs (counted by ptflops, reported in that repository's issues);
///   20 conv (incl. 3 shortcut 1×1), 20 BatchNorm, 1 linear.
/// - imagenet, torchvision ResNet-50 at 224×224: 25,557,032 parameters,
///   4.09 GMACs (torchvision's model table); 53 conv, 53 BatchNorm, 1 linear.
/// - yolov3, Darknet YOLOv3 at 416×416: 61,949,149 parameters and 65.86
///   BFLOPs as darknet prints them (which count 2 × MACs); 75 conv, 72 BatchNorm.
/// - bert, BERT-base (Devlin et al.: 110 M parameters) fine-tuned on SQuAD
///   at sequence length 384: per layer 12·d² MACs per token plus 2·s·d for
///   attention scores, d = 768, s = 384, 12 layers: 70.7 GFLOPs; 73 linear
///   (6 per layer + QA head), 12 attention, 25 LayerNorm. Our arithmetic.
/// - deepspeech2, deepspeech.pytorch defaults (2 conv 41×11 and 21×11, 32
///   channels; 5 bidirectional LSTM of 1024; input 161 frequency bins):
///   86.6 M parameters, and at 150 time steps after the stride (a 3 s
///   CMU-ARCTIC utterance) 14.6 GMACs. An estimate from the architecture:
///   Pollux does not publish its exact configuration.
/// - ncf, NeuMF-end as adaptdl's `examples/NCF` configures it (factor 32,
///   3 MLP layers) on MovieLens-1M (6,040 users, 3,706 items): 1,602,657
///   parameters, 43,072 MACs; 4 linear, 4 embeddings. Our arithmetic.
pub fn app_features(app: &str) -> Option<ModelFeatures> {
    let l = |conv, matmul, norm, recurrent, attention, other| LayerCounts {
        conv,
        matmul,
        norm,
        recurrent,
        attention,
        other,
    };
    let (flops, params, layers) = match app {
        "cifar10" => (2.0 * 0.556e9, 11_173_962.0, l(20, 1, 20, 0, 0, 0)),
        "imagenet" => (2.0 * 4.09e9, 25_557_032.0, l(53, 1, 53, 0, 0, 0)),
        "yolov3" => (65.86e9, 61_949_149.0, l(75, 0, 72, 0, 0, 0)),
        "bert" => (70.7e9, 110e6, l(0, 73, 25, 0, 12, 1)),
        "deepspeech2" => (2.0 * 14.6e9, 86.6e6, l(2, 1, 7, 5, 0, 0)),
        "ncf" => (2.0 * 43_072.0, 1_602_657.0, l(0, 4, 0, 0, 0, 4)),
        _ => return None,
    };
    Some(ModelFeatures {
        flops_per_sample: flops,
        params,
        layers,
    })
}

/// Every measured point of an application's profile as a training sample
/// (utilization = its compute share); `None` for an app with no features.
pub fn profile_samples(app: &str, profile: &AppProfile) -> Option<Vec<Sample>> {
    let features = app_features(app)?;
    Some(
        profile
            .measured_points()
            .iter()
            .map(|m| Sample {
                family: app.to_string(),
                features,
                at: PredictAt::new(m.nodes, m.gpus, m.local_bsz),
                utilization: crate::model::compute_share(m.step_s, m.sync_s),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synth(c: [f64; N]) -> Vec<Sample> {
        let truth = UtilizationPredictor {
            form: Form::Free,
            coef: c,
        };
        let mut v = Vec::new();
        for app in ["cifar10", "imagenet", "yolov3", "bert", "ncf", "deepspeech2"] {
            let f = app_features(app).unwrap();
            for &(n, g) in &[(1, 1), (1, 2), (1, 4), (2, 8), (4, 16)] {
                for b in [16, 64, 256] {
                    let at = PredictAt::new(n, g, b);
                    v.push(Sample {
                        family: app.into(),
                        features: f,
                        utilization: truth.predict(&f, &at, app),
                        at,
                    });
                }
            }
        }
        v
    }

    #[test]
    fn the_fit_recovers_coefficients_it_generated() {
        let c = [-1.0, 0.5, 1.0, 1.0, -1.0, 0.8, 0.0, 20.0];
        let s = synth(c);
        let p = UtilizationPredictor::fit(&s, Form::Physical).unwrap();
        for (a, b) in p.coef.iter().zip(&c) {
            assert!((a - b).abs() < 0.05, "{:?} vs {c:?}", p.coef);
        }
        let pairs: Vec<_> = s
            .iter()
            .map(|x| (p.predict(&x.features, &x.at, &x.family), x.utilization))
            .collect();
        assert!(rmsle(&pairs) < 1e-3);
    }

    #[test]
    fn rmsle_by_hand() {
        // ln 2 − ln 1.5 = 0.28768; one exact pair: sqrt(0.28768² / 2).
        let r = rmsle(&[(1.0, 0.5), (0.3, 0.3)]);
        assert!((r - (0.287_682_072_f64.powi(2) / 2.0).sqrt()).abs() < 1e-9);
        assert_eq!(rmsle(&[]), 0.0);
    }

    #[test]
    fn more_gpus_and_faster_types_lower_utilization() {
        let p = UtilizationPredictor {
            form: Form::Free,
            coef: [-1.0, 0.5, 1.0, 1.0, -1.0, 0.8, 0.0, 20.0],
        };
        let f = app_features("bert").unwrap();
        let u1 = p.predict(&f, &PredictAt::new(1, 2, 8), "bert");
        let u2 = p.predict(&f, &PredictAt::new(2, 8, 8), "bert");
        assert!(u2 < u1);
        // A faster GPU shortens compute, not the network: lower utilization across nodes.
        let mut fast = PredictAt::new(2, 8, 8);
        fast.gpu_type = Some(GpuType("a100".into()));
        assert!(p.predict(&f, &fast, "bert") < u2);
    }

    #[test]
    fn cross_validation_holds_out_each_family() {
        let s = synth([-1.0, 0.5, 1.0, 1.0, -1.0, 0.8, 0.0, 20.0]);
        let cv = leave_one_family_out(&s, Form::Physical);
        assert_eq!(cv.families.len(), 6);
        assert!(cv.rmsle < 1e-2 && cv.rmsle < cv.rmsle_mean, "{cv:?}");
    }
}
