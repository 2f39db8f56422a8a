//! GPU sharing: how busy a job keeps its GPUs, how much two jobs on one GPU
//! slow each other, and whether they fit in its memory.
//!
//! Yeung et al. (HotCloud'20) found that co-located jobs slow each other by
//! an amount set by their summed utilization: two light jobs share a GPU
//! almost for free, two busy ones each run about half as fast or worse.
//! [`SlowdownCurve`] is that relation, fitted to Gavel's measured
//! co-located throughputs (the fit and its data live in `gpuplan-sim`,
//! which does the I/O; docs/colocation.md has the numbers). A measured pair
//! overrides the curve ([`Colocation::pair`]). Memory caps sharing: the jobs
//! on one GPU must fit in it ([`fits_memory`]).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::job::{Allocation, GpuId};
use crate::math::Libm;
use crate::plan::Plan;
use crate::round::{Round, RoundJob, SharingPairs};

// Moved to the model, which the profiles and the predictor share; kept
// here for callers.
pub use crate::model::compute_share;

/// A job's slowdown when it shares a GPU, as a function of the pair's
/// summed utilization s: `ln f(s) = ln base + slope·max(0, s − knee)`,
/// never below 1.
///
/// Why this shape: it is monotone (more combined load never helps), has a
/// floor for the cost of sharing itself (context switches, cache
/// pressure) that Gavel's light pairs show, and one rate at which the
/// slowdown grows once the pair's load passes what the GPU absorbs. It is
/// fitted in log space because slowdowns are ratios: a pair measured at 4×
/// must not outweigh twenty at 1.5×.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlowdownCurve {
    pub knee: f64,
    pub base: f64,
    pub slope: f64,
}

/// The curve fitted to Gavel's single-GPU pairs on k80, p100 and v100
/// (`gpuplan_sim::colocation::fit_gavel`; a test there re-fits the anchor
/// file and checks these digits).
pub const GAVEL_CURVE: SlowdownCurve = SlowdownCurve {
    knee: 0.4,
    base: 1.5607,
    slope: 0.1190,
};

impl Default for SlowdownCurve {
    fn default() -> Self {
        GAVEL_CURVE
    }
}

impl SlowdownCurve {
    /// Slowdown (≥ 1) of each job of a pair whose utilizations sum to `s`.
    pub fn slowdown(&self, s: f64) -> f64 {
        let x = (s - self.knee).max(0.0);
        (self.base * (self.slope * x).libm_exp()).max(1.0)
    }

    /// Least squares of ln(slowdown) over the hinge, the knee on a grid of
    /// 0.05 in [0, 2] and the slope kept ≥ 0 (monotone). `points` are
    /// (summed utilization, measured slowdown ≥ some positive value).
    /// `None` without points.
    pub fn fit(points: &[(f64, f64)]) -> Option<SlowdownCurve> {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|(s, y)| s.is_finite() && y.is_finite() && *y > 0.0)
            .map(|&(s, y)| (s, y.libm_ln()))
            .collect();
        if pts.is_empty() {
            return None;
        }
        let n = pts.len() as f64;
        let mut best: Option<(f64, SlowdownCurve)> = None;
        for i in 0..=40 {
            let knee = i as f64 * 0.05;
            let xs: Vec<f64> = pts.iter().map(|(s, _)| (s - knee).max(0.0)).collect();
            let mx = xs.iter().sum::<f64>() / n;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
            let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
            let sxy: f64 = xs.iter().zip(&pts).map(|(x, p)| (x - mx) * (p.1 - my)).sum();
            let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
            let a = my - slope * mx;
            let sse: f64 = xs
                .iter()
                .zip(&pts)
                .map(|(x, p)| (a + slope * x - p.1).powi(2))
                .sum();
            let c = SlowdownCurve {
                knee,
                base: a.libm_exp(),
                slope,
            };
            if best.is_none_or(|(e, _)| sse < e - 1e-12) {
                best = Some((sse, c));
            }
        }
        best.map(|(_, c)| c)
    }
}

/// One pair whose co-located speeds were measured: each job's slowdown
/// (solo over co-located throughput). Keys are model names (e.g. Gavel's
/// "ResNet-18 (batch size 32)") as the driver maps its jobs to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPair {
    pub a: String,
    pub b: String,
    pub slowdown_a: f64,
    pub slowdown_b: f64,
}

/// The interference model: the curve, overridden by measured pairs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Colocation {
    pub curve: SlowdownCurve,
    /// Sorted by (a, b) with a ≤ b, for a binary search.
    measured: Vec<MeasuredPair>,
}

impl Colocation {
    /// A model from a curve and measured pairs (either order; a pair given
    /// twice keeps the first).
    pub fn new(curve: SlowdownCurve, pairs: Vec<MeasuredPair>) -> Self {
        let mut measured: Vec<MeasuredPair> = pairs
            .into_iter()
            .map(|p| {
                if p.a <= p.b {
                    p
                } else {
                    MeasuredPair {
                        a: p.b,
                        b: p.a,
                        slowdown_a: p.slowdown_b,
                        slowdown_b: p.slowdown_a,
                    }
                }
            })
            .collect();
        measured.sort_by(|x, y| (&x.a, &x.b).cmp(&(&y.a, &y.b)));
        measured.dedup_by(|x, y| x.a == y.a && x.b == y.b);
        Colocation { curve, measured }
    }

    pub fn measured(&self) -> &[MeasuredPair] {
        &self.measured
    }

    /// The measured slowdowns of a pair (in the order asked), if measured.
    pub fn lookup(&self, a: &str, b: &str) -> Option<(f64, f64)> {
        let (lo, hi, swap) = if a <= b { (a, b, false) } else { (b, a, true) };
        let i = self
            .measured
            .binary_search_by(|p| (p.a.as_str(), p.b.as_str()).cmp(&(lo, hi)))
            .ok()?;
        let p = &self.measured[i];
        Some(if swap {
            (p.slowdown_b, p.slowdown_a)
        } else {
            (p.slowdown_a, p.slowdown_b)
        })
    }

    /// Each job's slowdown in a pair: measured where the pair was measured
    /// (by model key), else the curve at the summed utilization.
    pub fn pair(&self, a: (Option<&str>, f64), b: (Option<&str>, f64)) -> (f64, f64) {
        if let (Some(ka), Some(kb)) = (a.0, b.0) {
            if let Some((x, y)) = self.lookup(ka, kb) {
                return (x.max(1.0), y.max(1.0));
            }
        }
        let f = self.curve.slowdown(a.1 + b.1);
        (f, f)
    }

    /// Each job's slowdown in a group of jobs on one GPU, (key,
    /// utilization) each, in the order given: [`Colocation::pair`] for two;
    /// for three or more the curve at their summed utilization (no group
    /// larger than a pair is measured, so measured pairs do not apply).
    /// The one rule the planners' values and the simulator's ground truth
    /// ([`sharing_slowdowns`]) share.
    pub fn group(&self, members: &[(Option<&str>, f64)]) -> Vec<f64> {
        if let [a, b] = members {
            let (fa, fb) = self.pair(*a, *b);
            return vec![fa, fb];
        }
        let f = self.curve.slowdown(members.iter().map(|m| m.1).sum());
        vec![f; members.len()]
    }
}

/// A co-located job's measured slowdown: its step time beside another job
/// over its step time alone at the same configuration, never below 1 (a
/// partner cannot speed a job up; a faster shared step is noise).
pub fn measured_slowdown(solo_step_s: f64, shared_step_s: f64) -> Option<f64> {
    (solo_step_s > 0.0 && shared_step_s.is_finite() && shared_step_s > 0.0)
        .then(|| (shared_step_s / solo_step_s).max(1.0))
}

/// One job's slowdown measured beside a partner (by their model keys): what
/// the executor records, and what [`Colocation::from_observed`] turns into
/// measured pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub key: String,
    pub partner: String,
    pub slowdown: f64,
}

impl Colocation {
    /// The model a live cluster learns: `curve`, overridden by every pair
    /// some job was measured in. A side measured several times takes the
    /// mean; a side never measured takes its partner's (the pair's best
    /// evidence of what sharing costs).
    pub fn from_observed(curve: SlowdownCurve, obs: &[Observed]) -> Colocation {
        let mut sides: BTreeMap<(&str, &str), (f64, u32)> = BTreeMap::new();
        for o in obs.iter().filter(|o| o.slowdown.is_finite() && o.slowdown > 0.0) {
            let e = sides.entry((o.key.as_str(), o.partner.as_str())).or_default();
            e.0 += o.slowdown;
            e.1 += 1;
        }
        let mean = |k: (&str, &str)| sides.get(&k).map(|(s, n)| s / f64::from(*n));
        let mut pairs = Vec::new();
        for &(a, b) in sides.keys() {
            if a > b && sides.contains_key(&(b, a)) {
                continue; // taken from the other side
            }
            let fa = mean((a, b));
            let fb = mean((b, a)).or(fa);
            if let (Some(fa), Some(fb)) = (fa, fb) {
                pairs.push(MeasuredPair {
                    a: a.to_string(),
                    b: b.to_string(),
                    slowdown_a: fa,
                    slowdown_b: fb,
                });
            }
        }
        Colocation::new(curve, pairs)
    }
}

/// Memory (GiB) of one GPU of a type, for the types gpuplan's traces and
/// clusters name (vendor data sheets; the 16 GiB V100, the 40 GiB A100).
/// Other names are read for a memory size the way NVML names devices
/// ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB"), so the executor's
/// types are known too. `None` for an unknown type: jobs never share it.
pub fn gpu_memory_gib(gpu_type: &str) -> Option<f64> {
    let lower = gpu_type.to_ascii_lowercase();
    let named = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| w.strip_suffix("gb")?.parse::<u32>().ok().filter(|g| *g > 0));
    if let Some(g) = named {
        return Some(f64::from(g));
    }
    // A short name as written, else NVML's product name by its table key.
    let by_name = |k: &str| {
        Some(match k {
            "t4" | "p100" | "v100" | "rtx5000" => 16.0,
            "k80" => 12.0,
            "rtx2080ti" => 11.0,
            "v100-32g" => 32.0,
            "a100" => 40.0,
            "a100-80g" | "h100" => 80.0,
            _ => return None,
        })
    };
    by_name(&lower).or_else(|| by_name(crate::gpu_speed::table_key(&lower)?))
}

/// Estimated peak memory (GiB per GPU) of the Pollux applications at their
/// largest local batch, from the model sizes and activation footprints the
/// Pollux artifact's models use: ResNet-18 on CIFAR-10 at 1024, NCF at
/// 32768 (embeddings), DeepSpeech2 at 80, BERT-base at 12 (fine-tuning,
/// sequence 384), YOLOv3 at 8 (608²), ResNet-50 at 200. They are estimates,
/// not measurements: a job whose round gives `mem_gib` uses that instead.
pub fn app_memory_gib(app: &str) -> Option<f64> {
    Some(match app {
        "cifar10" => 4.0,
        "ncf" => 2.0,
        "deepspeech2" => 10.0,
        "bert" => 12.0,
        "yolov3" => 10.0,
        "imagenet" => 14.0,
        _ => return None,
    })
}

/// A job's memory per GPU: its own (`mem_gib` in the round), else its
/// application's estimate; `None` when unknown (it never shares).
pub fn job_memory_gib(job: &RoundJob) -> Option<f64> {
    job.mem_gib.or_else(|| app_memory_gib(&job.app))
}

/// Whether jobs of these memories fit together on one GPU of `gpu_type`.
/// A job alone always fits (its memory is the user's business).
pub fn fits_memory(gpu_type: &str, mems: &[Option<f64>]) -> bool {
    if mems.len() <= 1 {
        return true;
    }
    let Some(cap) = gpu_memory_gib(gpu_type) else {
        return false;
    };
    let mut sum = 0.0;
    for m in mems {
        match m {
            Some(m) => sum += m,
            None => return false,
        }
    }
    sum <= cap + 1e-9
}

/// The interference model a round's planners value sharing with: the
/// round's own (`Round::colocation`), else the shipped curve with no pairs.
pub fn round_model(round: &Round) -> std::borrow::Cow<'_, Colocation> {
    match &round.colocation {
        Some(c) => std::borrow::Cow::Borrowed(c),
        None => std::borrow::Cow::Owned(Colocation::default()),
    }
}

/// Whether jobs may share a GPU of `gpu_type` in `round`: their memories
/// fit together, and under `params.sharing_pairs = measured` the round's
/// model measured every pair among them. The one rule the planners and the
/// validator share.
pub fn may_group(round: &Round, model: &Colocation, gpu_type: &str, jobs: &[&RoundJob]) -> bool {
    let mems: Vec<Option<f64>> = jobs.iter().map(|j| job_memory_gib(j)).collect();
    fits_memory(gpu_type, &mems)
        && jobs
            .iter()
            .enumerate()
            .all(|(i, a)| jobs[i + 1..].iter().all(|b| measured_enough(round, model, a, b)))
}

/// Under `sharing_pairs = measured`: whether the pair was measured (always
/// true under `all`).
pub fn measured_enough(round: &Round, model: &Colocation, a: &RoundJob, b: &RoundJob) -> bool {
    match round.params.sharing_pairs {
        SharingPairs::All => true,
        SharingPairs::Measured => match (&a.colocation_key, &b.colocation_key) {
            (Some(ka), Some(kb)) => model.lookup(ka, kb).is_some(),
            _ => false,
        },
    }
}

/// Each job's predicted slowdown in a group sharing `gpus` GPUs of one
/// node, by the round's model ([`Colocation::group`]): for a pair, measured
/// where both keys were measured together, else the curve at the summed
/// predicted utilization.
pub fn predicted_group(model: &Colocation, jobs: &[&RoundJob], gpus: u32) -> Vec<f64> {
    let members: Vec<(Option<&str>, f64)> = jobs
        .iter()
        .map(|j| (j.colocation_key.as_deref(), predicted_utilization(j, 1, gpus)))
        .collect();
    model.group(&members)
}

/// A job's predicted utilization on `gpus` GPUs over `nodes` nodes, at the
/// batch its goodput model would choose there: what a planner believes
/// before the pair runs; a measured `utilization` in the round wins. A job
/// with no model yet gets the feature predictor's estimate where its spec
/// gives model features (at its batch split over the GPUs), else counts as
/// fully busy, the safe side (it is then predicted to slow its partner most).
pub fn predicted_utilization(job: &RoundJob, nodes: u32, gpus: u32) -> f64 {
    if let Some(u) = job.utilization {
        return u;
    }
    let Some(m) = &job.model else {
        return job.features.map_or(1.0, |f| {
            let at = crate::predict::PredictAt::new(nodes, gpus, (job.batch_size / gpus.max(1)).max(1));
            crate::predict::DEFAULT_PREDICTOR.predict(&f, &at, &job.app)
        });
    };
    m.optimize(nodes, gpus).map_or(1.0, |c| {
        m.utilization(nodes, gpus, c.local_bsz as f64, c.accum_steps)
    })
}

/// Each job's predicted slowdown from sharing in `plan` (round order; 1 for
/// a job alone on its GPUs): the round's measured pair where both jobs'
/// keys were measured, else `curve` (or the round's model's) at the summed
/// predicted utilization of each GPU's jobs, the worst GPU setting the
/// job's pace. Named GPUs only: unnamed slots are GPUs of their own.
pub fn plan_slowdowns(round: &Round, plan: &Plan, curve: &SlowdownCurve) -> Vec<f64> {
    if round.params.sharing <= 1 {
        return vec![1.0; round.jobs.len()];
    }
    let allocs: Vec<&Allocation> = round.jobs.iter().map(|j| plan.gpus_of(j.id)).collect();
    let model = match &round.colocation {
        Some(c) => std::borrow::Cow::Borrowed(c),
        None => std::borrow::Cow::Owned(Colocation::new(*curve, Vec::new())),
    };
    sharing_slowdowns(
        &model,
        &allocs,
        |j| round.jobs[j].colocation_key.clone(),
        |j| predicted_utilization(&round.jobs[j], allocs[j].num_nodes(), allocs[j].num_gpus()),
    )
}

/// The jobs (indices into `allocs`) on each named GPU that two or more
/// hold, by GPU. The one grouping the planners' prediction and the
/// simulator's ground truth and metrics share.
pub fn shared_gpus(allocs: &[&Allocation]) -> BTreeMap<GpuId, Vec<usize>> {
    let mut on: BTreeMap<GpuId, Vec<usize>> = BTreeMap::new();
    for (j, a) in allocs.iter().enumerate() {
        for g in a.gpus().iter().filter(|g| g.is_bound()) {
            on.entry(*g).or_default().push(j);
        }
    }
    on.retain(|_, h| h.len() > 1);
    on
}

/// Each job's slowdown from sharing (1 for a job alone on its GPUs): on a
/// GPU with two jobs, the measured pair where `key` names both and `model`
/// measured them, else the curve at their summed `util`; with more than two,
/// the curve at the sum ([`Colocation::group`]). A job on several GPUs runs
/// at its worst GPU's pace. `key` and `util` are asked only for jobs that share.
pub fn sharing_slowdowns(
    model: &Colocation,
    allocs: &[&Allocation],
    key: impl Fn(usize) -> Option<String>,
    util: impl Fn(usize) -> f64,
) -> Vec<f64> {
    let mut out = vec![1.0; allocs.len()];
    let shared = shared_gpus(allocs);
    if shared.is_empty() {
        return out;
    }
    let mut utils: BTreeMap<usize, f64> = BTreeMap::new();
    let mut u = |j: usize| *utils.entry(j).or_insert_with(|| util(j));
    for holders in shared.values() {
        let keys: Vec<Option<String>> = holders.iter().map(|&j| key(j)).collect();
        let members: Vec<(Option<&str>, f64)> = holders
            .iter()
            .zip(&keys)
            .map(|(&j, k)| (k.as_deref(), u(j)))
            .collect();
        let fs = model.group(&members);
        for (&j, f) in holders.iter().zip(fs) {
            out[j] = out[j].max(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_with_features_and_no_model_gets_the_predictor() {
        let mut j = RoundJob {
            name: "j".into(),
            app: "bert".into(),
            requested_gpus: 4,
            min_gpus: 1,
            max_gpus: 4,
            ..crate::round::test_job(0)
        };
        // No model, no features: fully busy, as before.
        assert_eq!(predicted_utilization(&j, 1, 4), 1.0);
        let f = crate::predict::app_features("bert").unwrap();
        j.features = Some(f);
        let want =
            crate::predict::DEFAULT_PREDICTOR.predict(&f, &crate::predict::PredictAt::new(1, 4, 8), "bert");
        assert_eq!(predicted_utilization(&j, 1, 4), want);
        assert!(want < 0.9, "{want}");
        // A measurement still wins.
        j.utilization = Some(0.3);
        assert_eq!(predicted_utilization(&j, 1, 4), 0.3);
    }

    #[test]
    fn the_fit_recovers_a_hinge_and_stays_monotone() {
        let truth = SlowdownCurve {
            knee: 1.0,
            base: 1.2,
            slope: 0.5,
        };
        let pts: Vec<(f64, f64)> = (0..=40)
            .map(|i| {
                let s = i as f64 * 0.05;
                (s, truth.slowdown(s))
            })
            .collect();
        let c = SlowdownCurve::fit(&pts).unwrap();
        assert!((c.knee - 1.0).abs() < 1e-9, "{c:?}");
        assert!(
            (c.base - 1.2).abs() < 1e-9 && (c.slope - 0.5).abs() < 1e-9,
            "{c:?}"
        );
        // Falling data cannot give a falling curve.
        let down: Vec<(f64, f64)> = (0..10).map(|i| (i as f64 * 0.2, 3.0 - i as f64 * 0.2)).collect();
        let d = SlowdownCurve::fit(&down).unwrap();
        assert!(d.slowdown(0.0) <= d.slowdown(2.0), "{d:?}");
        assert!(SlowdownCurve::fit(&[]).is_none());
    }

    #[test]
    fn a_measured_pair_overrides_the_curve_in_either_order() {
        let c = Colocation::new(
            SlowdownCurve {
                knee: 0.0,
                base: 1.5,
                slope: 0.0,
            },
            vec![MeasuredPair {
                a: "y".into(),
                b: "x".into(),
                slowdown_a: 1.1,
                slowdown_b: 2.0,
            }],
        );
        assert_eq!(c.pair((Some("x"), 0.9), (Some("y"), 0.9)), (2.0, 1.1));
        assert_eq!(c.pair((Some("y"), 0.9), (Some("x"), 0.9)), (1.1, 2.0));
        assert_eq!(c.pair((Some("x"), 0.9), (Some("z"), 0.9)), (1.5, 1.5));
        assert_eq!(c.pair((None, 0.1), (Some("y"), 0.1)), (1.5, 1.5));
    }

    /// Live measurements become pairs: means per side, a side never
    /// measured takes its partner's, and they override the curve.
    #[test]
    fn observed_slowdowns_become_measured_pairs() {
        let o = |k: &str, p: &str, f: f64| Observed {
            key: k.into(),
            partner: p.into(),
            slowdown: f,
        };
        let c = Colocation::from_observed(
            GAVEL_CURVE,
            &[
                o("a", "b", 1.2),
                o("a", "b", 1.4),
                o("b", "a", 2.0),
                o("c", "a", 1.5),
            ],
        );
        let (x, y) = c.lookup("a", "b").unwrap();
        assert!((x - 1.3).abs() < 1e-12 && y == 2.0, "{x} {y}");
        assert_eq!(c.lookup("a", "c"), Some((1.5, 1.5)));
        assert_eq!(c.measured().len(), 2);
        assert_eq!(measured_slowdown(2.0, 3.0), Some(1.5));
        assert_eq!(measured_slowdown(2.0, 1.0), Some(1.0));
        assert_eq!(measured_slowdown(0.0, 1.0), None);
    }

    /// Ground truth per GPU: a measured pair by key, the curve for an
    /// unmeasured pair and for three jobs; a job's worst GPU sets its pace.
    #[test]
    fn sharing_slowdowns_per_gpu() {
        use crate::cluster::NodeId;
        let curve = SlowdownCurve {
            knee: 0.0,
            base: 1.5,
            slope: 0.0,
        };
        let model = Colocation::new(
            curve,
            vec![MeasuredPair {
                a: "x".into(),
                b: "y".into(),
                slowdown_a: 1.1,
                slowdown_b: 2.0,
            }],
        );
        let g = |n, i| GpuId::new(NodeId(n), i);
        let a = |gs: &[GpuId]| Allocation::from_gpus(gs.to_vec());
        // j0 (x) and j1 (y) share GPU (0,0); j2 alone; j3 spans (0,1) shared with j4 (z).
        let allocs = [
            a(&[g(0, 0)]),
            a(&[g(0, 0)]),
            a(&[g(1, 0)]),
            a(&[g(0, 1), g(0, 2)]),
            a(&[g(0, 1)]),
        ];
        let refs: Vec<&Allocation> = allocs.iter().collect();
        let keys = ["x", "y", "x", "x", "z"];
        let f = sharing_slowdowns(&model, &refs, |j| Some(keys[j].to_string()), |_| 0.5);
        assert_eq!(f, vec![1.1, 2.0, 1.0, 1.5, 1.5]);
        assert_eq!(shared_gpus(&refs).len(), 2);
        // Three on one GPU: the curve, measured pairs aside.
        let three = [a(&[g(0, 0)]), a(&[g(0, 0)]), a(&[g(0, 0)])];
        let refs: Vec<&Allocation> = three.iter().collect();
        let f = sharing_slowdowns(&model, &refs, |j| Some(keys[j].to_string()), |_| 0.5);
        assert_eq!(f, vec![1.5; 3]);
    }

    /// A group's slowdowns: a pair as `pair` (measured overrides), three or
    /// more the curve at their summed utilization, measured pairs aside; a
    /// group may share only if its memories fit and, under `measured`,
    /// every pair in it was measured.
    #[test]
    fn groups_of_three_take_the_curve_and_need_every_pair_measured() {
        let curve = SlowdownCurve {
            knee: 0.4,
            base: 1.5,
            slope: 0.5,
        };
        let m = |a: &str, b: &str| MeasuredPair {
            a: a.into(),
            b: b.into(),
            slowdown_a: 1.1,
            slowdown_b: 1.2,
        };
        let model = Colocation::new(curve, vec![m("x", "y"), m("x", "z")]);
        assert_eq!(model.group(&[(Some("x"), 0.9), (Some("y"), 0.9)]), vec![1.1, 1.2]);
        // 0.2 + 0.3 + 0.5 = 1.0: 1.5 · e^{0.5 · 0.6}.
        let f = 1.5 * (0.5f64 * 0.6).libm_exp();
        let g = model.group(&[(Some("x"), 0.2), (Some("y"), 0.3), (Some("z"), 0.5)]);
        assert!(g.iter().all(|v| (v - f).abs() < 1e-12), "{g:?}");
        let mut r: Round = serde_json::from_str(
            r#"{"now_s": 0, "cluster": {"nodes": [{"name": "a", "gpus": 1, "gpu_type": "t4"}]}, "jobs": []}"#,
        )
        .unwrap();
        r.params.sharing_pairs = SharingPairs::Measured;
        let mut jobs: Vec<RoundJob> = ["x", "y", "z"]
            .iter()
            .enumerate()
            .map(|(i, k)| RoundJob {
                colocation_key: Some((*k).into()),
                mem_gib: Some(5.0),
                ..crate::round::test_job(i as u32)
            })
            .collect();
        fn refs(js: &[RoundJob]) -> Vec<&RoundJob> {
            js.iter().collect()
        }
        assert!(may_group(&r, &model, "t4", &refs(&jobs[..2])));
        // y + z was never measured.
        assert!(!may_group(&r, &model, "t4", &refs(&jobs)));
        r.params.sharing_pairs = SharingPairs::All;
        assert!(may_group(&r, &model, "t4", &refs(&jobs)));
        // 3 × 6 = 18 > 16 GiB, though any two fit.
        for j in &mut jobs {
            j.mem_gib = Some(6.0);
        }
        assert!(may_group(&r, &model, "t4", &refs(&jobs[1..])));
        assert!(!may_group(&r, &model, "t4", &refs(&jobs)));
    }

    #[test]
    fn memory_caps_sharing() {
        assert!(fits_memory("t4", &[Some(4.0), Some(12.0)]));
        assert!(!fits_memory("t4", &[Some(4.0), Some(12.5)]));
        assert!(!fits_memory("t4", &[Some(4.0), None]));
        assert!(!fits_memory("mystery", &[Some(1.0), Some(1.0)]));
        assert!(fits_memory("mystery", &[None]));
        // NVML's device names carry their memory.
        assert_eq!(gpu_memory_gib("NVIDIA A100-SXM4-40GB"), Some(40.0));
        assert_eq!(gpu_memory_gib("NVIDIA H100 80GB HBM3"), Some(80.0));
        assert_eq!(gpu_memory_gib("Tesla V100-SXM2-16GB"), Some(16.0));
        assert_eq!(gpu_memory_gib("Fake GPU 16GB"), Some(16.0));
        // NVML names without a size: by the type's table key.
        assert_eq!(gpu_memory_gib("Tesla T4"), Some(16.0));
        assert_eq!(gpu_memory_gib("NVIDIA GeForce RTX 2080 Ti"), Some(11.0));
        assert_eq!(gpu_memory_gib("NVIDIA T400"), None);
        assert_eq!(gpu_memory_gib("v100-32g"), Some(32.0));
    }
}
