//! The colocation table: what is known about sharing a GPU before any
//! round is read. The slowdown curve and the measured pairs
//! ([`Colocation`]), live measurements ([`Observed`]), and the memory of GPU
//! types and applications.
//!
//! Data only: a [`crate::Round`] carries a [`Colocation`], so this sits
//! below the round; the rules over a round's jobs and a plan's GPUs are
//! `crate::colocation`'s, above both, which re-exports every item here.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::math::Libm;

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
    /// Summed utilization below which the slowdown stays at `base`.
    pub knee: f64,
    /// Slowdown of any shared pair, however light: the cost of sharing itself.
    pub base: f64,
    /// Growth of ln(slowdown) per unit of summed utilization past the knee.
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
    /// Model key of the first job.
    pub a: String,
    /// Model key of the second job.
    pub b: String,
    /// Slowdown of `a` beside `b` (≥ 1).
    pub slowdown_a: f64,
    /// Slowdown of `b` beside `a` (≥ 1).
    pub slowdown_b: f64,
}

/// The interference model: the curve, overridden by measured pairs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Colocation {
    /// The slowdown of pairs that were not measured.
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

    /// The measured pairs, each with `a ≤ b`, sorted.
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
    /// ([`crate::colocation::sharing_slowdowns`]) share.
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
    /// Model key of the measured job.
    pub key: String,
    /// Model key of the job it shared a GPU with.
    pub partner: String,
    /// The measured slowdown ([`measured_slowdown`]).
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
