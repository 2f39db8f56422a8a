//! Gavel's measured co-located throughputs (OSDI'20,
//! `simulation_throughputs.json`), and the interference curve fitted to them
//! (`gpuplan_core::colocation`).
//!
//! The file maps, per GPU type, `('<job type>', <scale>)` to `{"null": solo
//! iterations/s, "('<other>', <scale>)": [own, other's iterations/s when
//! co-located]}`. Gavel gives throughputs, not utilizations, so each job
//! type gets a utilization proxy ([`utilization_proxy`]). Only single-GPU
//! pairs (scale 1 with scale 1) are used: they are what one shared GPU is.
//! `[0, 0]` entries are pairs Gavel could not run together (out of memory)
//! and are left out of the fit.

use std::collections::BTreeMap;
use std::io::Read;

use gpuplan_core::colocation::{Colocation, MeasuredPair, SlowdownCurve};
use gpuplan_core::Libm;

use crate::SimError;

/// One GPU type's table: job key → (solo iterations/s, co-located pairs).
pub type GavelTable = BTreeMap<String, BTreeMap<(String, u32), GavelEntry>>;

/// A job type at a scale: its solo throughput and what it does beside others.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GavelEntry {
    /// Iterations/s alone on the GPU (Gavel's `"null"` entry).
    pub solo: f64,
    /// (other job, other's scale) → (own, other's) iterations/s together.
    pub pairs: BTreeMap<(String, u32), (f64, f64)>,
}

/// Parse `"('ResNet-18 (batch size 32)', 1)"`.
fn parse_key(k: &str) -> Option<(String, u32)> {
    let inner = k.trim().strip_prefix("('")?.strip_suffix(')')?;
    let (name, scale) = inner.rsplit_once("',")?;
    Some((name.to_string(), scale.trim().parse().ok()?))
}

/// Read Gavel's throughput file. Errors name the source and the key.
pub fn parse_gavel<R: Read>(source: &str, reader: R) -> Result<GavelTable, SimError> {
    let raw: BTreeMap<String, BTreeMap<String, BTreeMap<String, serde_json::Value>>> =
        serde_json::from_reader(reader).map_err(|e| SimError::Invalid(format!("{source}: {e}")))?;
    let mut out = GavelTable::new();
    for (gpu, jobs) in raw {
        let mut table = BTreeMap::new();
        for (k, entries) in jobs {
            let at = |what: &str| SimError::Invalid(format!("{source}: {gpu}.{k}: {what}"));
            let key = parse_key(&k).ok_or_else(|| at("key must read ('<job type>', <scale>)"))?;
            let mut e = GavelEntry::default();
            for (other, v) in entries {
                if other == "null" {
                    e.solo = v.as_f64().ok_or_else(|| at("\"null\": a number"))?;
                    continue;
                }
                let okey = parse_key(&other).ok_or_else(|| at(&format!("{other}: not a job key")))?;
                let pair = v
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .and_then(|a| Some((a[0].as_f64()?, a[1].as_f64()?)))
                    .ok_or_else(|| at(&format!("{other}: [own, other's] throughputs")))?;
                e.pairs.insert(okey, pair);
            }
            table.insert(key, e);
        }
        out.insert(gpu, table);
    }
    Ok(out)
}

/// Model family and batch size of a Gavel job type: "ResNet-18 (batch size 32)"
/// → ("ResNet-18", Some(32)); "A3C" → ("A3C", None).
pub fn family(job: &str) -> (&str, Option<u32>) {
    if let Some((f, rest)) = job.split_once(" (batch size ") {
        if let Some(b) = rest.strip_suffix(')').and_then(|b| b.parse().ok()) {
            return (f, Some(b));
        }
    }
    (job, None)
}

/// Utilization of the two job types Gavel runs at one batch size only,
/// which a batch sweep cannot calibrate: A3C is CPU-bound reinforcement
/// learning (its GPU idles between environment steps), CycleGAN's two
/// generators and discriminators keep the GPU busy.
pub const FIXED_UTILIZATION: [(&str, f64); 2] = [("A3C", 0.3), ("CycleGAN", 1.0)];

/// Each single-GPU job type's utilization proxy on one GPU type: its solo
/// samples/s (iterations/s × batch) over the best samples/s of its family
/// at any batch size on that GPU. A small batch leaves the GPU partly idle
/// (kernel launches, data loading), the family's saturating batch marks a
/// full GPU; so the ratio is the share of the GPU the job keeps busy.
/// Families without a batch sweep take [`FIXED_UTILIZATION`].
pub fn utilization_proxy(table: &BTreeMap<(String, u32), GavelEntry>) -> BTreeMap<String, f64> {
    let mut best: BTreeMap<&str, f64> = BTreeMap::new();
    for ((job, scale), e) in table {
        if let (1, (f, Some(b))) = (*scale, family(job)) {
            let s = best.entry(f).or_default();
            *s = s.max(e.solo * b as f64);
        }
    }
    let mut out = BTreeMap::new();
    for ((job, scale), e) in table {
        if *scale != 1 {
            continue;
        }
        let u = match family(job) {
            (f, Some(b)) => {
                let top = best.get(f).copied().unwrap_or(0.0);
                if top > 0.0 {
                    e.solo * b as f64 / top
                } else {
                    continue;
                }
            }
            (f, None) => match FIXED_UTILIZATION.iter().find(|(n, _)| *n == f) {
                Some(&(_, u)) => u,
                None => continue,
            },
        };
        out.insert(job.clone(), u);
    }
    out
}

/// One measured single-GPU pair as the fit sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GavelPoint {
    /// GPU type the pair ran on (one of [`GAVEL_GPUS`]).
    pub gpu: String,
    /// The job type whose slowdown this point is.
    pub job: String,
    /// The job type beside it.
    pub other: String,
    /// Summed utilization proxy of the two.
    pub sum_util: f64,
    /// Solo over co-located throughput of `job`.
    pub slowdown: f64,
}

/// The GPU types whose consolidated single-GPU pairs are used.
pub const GAVEL_GPUS: [&str; 3] = ["k80", "p100", "v100"];

/// Every single-GPU pair Gavel ran together, one point per job of the pair.
pub fn gavel_points(all: &GavelTable) -> Vec<GavelPoint> {
    let mut pts = Vec::new();
    for gpu in GAVEL_GPUS {
        let Some(table) = all.get(gpu) else {
            continue;
        };
        let util = utilization_proxy(table);
        for ((job, scale), e) in table {
            let Some(&u) = util.get(job) else {
                continue;
            };
            if *scale != 1 || e.solo <= 0.0 {
                continue;
            }
            for ((other, oscale), &(own, _)) in &e.pairs {
                let Some(&v) = util.get(other) else {
                    continue;
                };
                if *oscale != 1 || own <= 0.0 {
                    continue;
                }
                pts.push(GavelPoint {
                    gpu: gpu.to_string(),
                    job: job.clone(),
                    other: other.clone(),
                    sum_util: u + v,
                    slowdown: e.solo / own,
                });
            }
        }
    }
    pts
}

/// The curve fitted to all points.
pub fn fit_gavel(points: &[GavelPoint]) -> Option<SlowdownCurve> {
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.sum_util, p.slowdown)).collect();
    SlowdownCurve::fit(&xy)
}

/// Held-out error of the curve, folds by model-family pair.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CrossValidation {
    /// Held-out family pairs, one fold each.
    pub folds: usize,
    /// Points predicted, over all folds.
    pub points: usize,
    /// Root mean squared log error of the held-out slowdowns.
    pub rmsle: f64,
    /// Median |predicted − measured| / measured.
    pub median_rel_err: f64,
    /// The same for a constant predictor (the held-in median slowdown):
    /// what the utilization buys.
    pub constant_rmsle: f64,
}

/// Leave-one-family-pair-out: every point whose two families form the
/// held-out (unordered) pair is predicted by a curve fitted to the rest.
pub fn cross_validate(points: &[GavelPoint]) -> Option<CrossValidation> {
    let key = |p: &GavelPoint| {
        let (a, b) = (family(&p.job).0.to_string(), family(&p.other).0.to_string());
        if a <= b {
            (a, b)
        } else {
            (b, a)
        }
    };
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, p) in points.iter().enumerate() {
        groups.entry(key(p)).or_default().push(i);
    }
    let (mut se, mut se0, mut rel) = (0.0, 0.0, Vec::new());
    for held in groups.values() {
        let train: Vec<GavelPoint> = points
            .iter()
            .enumerate()
            .filter(|(i, _)| held.binary_search(i).is_err())
            .map(|(_, p)| p.clone())
            .collect();
        let curve = fit_gavel(&train)?;
        let mut logs: Vec<f64> = train.iter().map(|p| p.slowdown.libm_ln()).collect();
        logs.sort_by(f64::total_cmp);
        let median = logs[logs.len() / 2];
        for &i in held {
            let p = &points[i];
            let pred = curve.slowdown(p.sum_util);
            se += (pred.libm_ln() - p.slowdown.libm_ln()).powi(2);
            se0 += (median - p.slowdown.libm_ln()).powi(2);
            rel.push((pred - p.slowdown).abs() / p.slowdown);
        }
    }
    rel.sort_by(f64::total_cmp);
    let n = points.len() as f64;
    Some(CrossValidation {
        folds: groups.len(),
        points: points.len(),
        rmsle: (se / n).sqrt(),
        median_rel_err: rel[rel.len() / 2],
        constant_rmsle: (se0 / n).sqrt(),
    })
}

/// Gavel's measured single-GPU pairs on one GPU type as overrides.
pub fn measured_pairs(all: &GavelTable, gpu: &str) -> Vec<MeasuredPair> {
    let mut out = Vec::new();
    let Some(table) = all.get(gpu) else {
        return out;
    };
    for ((job, scale), e) in table {
        for ((other, oscale), &(own, theirs)) in &e.pairs {
            let solo_other = table.get(&(other.clone(), *oscale)).map_or(0.0, |o| o.solo);
            if *scale != 1
                || *oscale != 1
                || own <= 0.0
                || theirs <= 0.0
                || e.solo <= 0.0
                || solo_other <= 0.0
            {
                continue;
            }
            out.push(MeasuredPair {
                a: job.clone(),
                b: other.clone(),
                slowdown_a: e.solo / own,
                slowdown_b: solo_other / theirs,
            });
        }
    }
    out
}

/// The simulator's ground truth for sharing: the curve fitted to Gavel's
/// pairs, overridden by Gavel's measured V100 pairs for jobs that map to a
/// Gavel job type ([`gavel_key`]).
pub fn ground_truth(all: &GavelTable) -> Colocation {
    let curve = fit_gavel(&gavel_points(all)).unwrap_or_default();
    Colocation::new(curve, measured_pairs(all, "v100"))
}

/// The Gavel job type a Pollux application's job is measured as, if Gavel
/// measured the same model: ResNet-18 for CIFAR-10, ResNet-50 for ImageNet,
/// Recommendation for NCF, at the Gavel batch size nearest the job's local
/// batch (in log scale). Other applications use the curve.
pub fn gavel_key(app: &str, local_bsz: u32) -> Option<String> {
    let (fam, sizes): (&str, &[u32]) = match app {
        "cifar10" => ("ResNet-18", &[16, 32, 64, 128, 256]),
        "imagenet" => ("ResNet-50", &[16, 32, 64, 128]),
        "ncf" => ("Recommendation", &[512, 1024, 2048, 4096, 8192]),
        _ => return None,
    };
    let b = local_bsz.max(1) as f64;
    let best = sizes
        .iter()
        .min_by(|x, y| ((**x as f64 / b).libm_ln().abs()).total_cmp(&(**y as f64 / b).libm_ln().abs()))?;
    Some(format!("{fam} (batch size {best})"))
}

/// The anchor file, where the repository's shared data lives beside it.
pub const GAVEL_PATH: &str = "../shared/anchors/traces/gavel/simulation_throughputs.json";

/// What sharing needs to know of a rigid job's model: how busy it keeps a
/// GPU and its memory per GPU (`None`: unknown, never shared).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeyFacts {
    /// Share of the GPU it keeps busy alone, in [0, 1].
    pub utilization: f64,
    /// GPU memory it needs per GPU (GiB); `None`: unknown, so never shared.
    pub mem_gib: Option<f64>,
}

/// Estimated peak memory (GiB) of a Gavel job type, `base + per_sample ×
/// batch` by family. Gavel's table gives no memory, so these are our
/// estimates from the models' sizes and activations at their inputs
/// (ResNet-50 at 224², ResNet-18 at 32², a Transformer on Multi30k, a
/// 2-layer LSTM LM, NCF; A3C and CycleGAN at their one batch), not
/// measurements; docs/colocation.md says how often they disagree with the
/// pairs Gavel could not co-locate.
pub fn gavel_memory_gib(job: &str) -> Option<f64> {
    let (fam, batch) = family(job);
    let b = f64::from(batch.unwrap_or(0));
    Some(match fam {
        "ResNet-18" => 0.8 + 0.004 * b,
        "ResNet-50" => 1.0 + 0.1 * b,
        "Transformer" => 1.0 + 0.03 * b,
        "LM" => 1.5 + 0.05 * b,
        "Recommendation" => 1.0 + 0.0002 * b,
        "A3C" => 1.0,
        "CycleGAN" => 4.0,
        _ => return None,
    })
}

/// Each single-GPU Gavel job type's sharing facts on `gpu`: the
/// utilization proxy ([`utilization_proxy`]) and the memory estimate
/// ([`gavel_memory_gib`]). Keyed by job type, as the traces name them.
pub fn gavel_jobs(all: &GavelTable, gpu: &str) -> BTreeMap<String, KeyFacts> {
    let Some(table) = all.get(gpu) else {
        return BTreeMap::new();
    };
    utilization_proxy(table)
        .into_iter()
        .map(|(job, u)| {
            let mem_gib = gavel_memory_gib(&job);
            (
                job,
                KeyFacts {
                    utilization: u.clamp(0.0, 1.0),
                    mem_gib,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{"v100": {
        "('ResNet-18 (batch size 32)', 1)": {"null": 30.0,
            "('ResNet-18 (batch size 128)', 1)": [20.0, 10.0],
            "('A3C', 1)": [0.0, 0.0]},
        "('ResNet-18 (batch size 128)', 1)": {"null": 18.0,
            "('ResNet-18 (batch size 32)', 1)": [10.0, 20.0]},
        "('A3C', 1)": {"null": 7.0}
    }}"#;

    #[test]
    fn proxies_pairs_and_overrides_by_hand() {
        let t = parse_gavel("small.json", SMALL.as_bytes()).unwrap();
        let u = utilization_proxy(&t["v100"]);
        // 30 × 32 = 960 and 18 × 128 = 2304 samples/s: 960/2304 and 1.
        assert!((u["ResNet-18 (batch size 32)"] - 960.0 / 2304.0).abs() < 1e-12);
        assert_eq!(u["ResNet-18 (batch size 128)"], 1.0);
        assert_eq!(u["A3C"], 0.3);
        let pts = gavel_points(&t);
        // The [0, 0] pair is left out; two points remain.
        assert_eq!(pts.len(), 2);
        let p = pts.iter().find(|p| p.job.contains("32")).unwrap();
        assert!((p.slowdown - 1.5).abs() < 1e-12 && (p.sum_util - (1.0 + 960.0 / 2304.0)).abs() < 1e-12);
        let m = Colocation::new(SlowdownCurve::default(), measured_pairs(&t, "v100"));
        let (a, b) = m
            .lookup("ResNet-18 (batch size 128)", "ResNet-18 (batch size 32)")
            .unwrap();
        assert!((a - 1.8).abs() < 1e-12 && (b - 1.5).abs() < 1e-12);
        assert_eq!(
            gavel_key("cifar10", 100).as_deref(),
            Some("ResNet-18 (batch size 128)")
        );
        assert_eq!(gavel_key("bert", 12), None);
    }

    #[test]
    fn bad_input_names_the_source_and_key() {
        let e = parse_gavel("g.json", r#"{"v100": {"nonsense": {"null": 1}}}"#.as_bytes()).unwrap_err();
        assert!(e.to_string().starts_with("g.json: v100.nonsense:"), "{e}");
        let e = parse_gavel(
            "g.json",
            r#"{"v100": {"('A', 1)": {"('B', 1)": [1]}}}"#.as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("[own, other's]"), "{e}");
    }

    /// The anchor file: the fit is the one core ships ([`GAVEL_CURVE`]),
    /// and it beats a constant on held-out family pairs.
    #[test]
    fn the_shipped_curve_is_the_fit_to_gavel() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(GAVEL_PATH);
        let Ok(file) = std::fs::File::open(&path) else {
            eprintln!("skipped: {} absent", path.display());
            return;
        };
        let t = parse_gavel("simulation_throughputs.json", file).unwrap();
        let pts = gavel_points(&t);
        let c = fit_gavel(&pts).unwrap();
        let shipped = gpuplan_core::colocation::GAVEL_CURVE;
        assert!(
            (c.knee - shipped.knee).abs() < 1e-9
                && (c.base - shipped.base).abs() < 5e-4
                && (c.slope - shipped.slope).abs() < 5e-4,
            "fit {c:?} vs shipped {shipped:?}"
        );
        let cv = cross_validate(&pts).unwrap();
        eprintln!("{} points, curve {c:?}, held out {cv:?}", pts.len());
        assert!(cv.rmsle < cv.constant_rmsle, "{cv:?}");
    }

    /// Every single-GPU V100 job type of the bundled table gets facts
    /// (utilization in [0, 1], a memory estimate), and the memory estimates
    /// are checked against the pairs Gavel could not co-locate (`[0, 0]`):
    /// the count they would still allow is printed for docs/colocation.md.
    #[test]
    fn gavel_jobs_have_facts_and_memory_against_gavels_refusals() {
        let t = parse_gavel(
            "simulation_throughputs.json",
            include_bytes!("../../../traces/gavel/simulation_throughputs.json").as_slice(),
        )
        .unwrap();
        let jobs = gavel_jobs(&t, "v100");
        assert_eq!(jobs.len(), 26);
        assert!(jobs
            .values()
            .all(|f| (0.0..=1.0).contains(&f.utilization) && f.mem_gib.is_some()));
        assert_eq!(jobs["ResNet-50 (batch size 128)"].mem_gib, Some(13.8));
        let (mut refused, mut allowed) = (0, 0);
        for ((job, scale), e) in &t["v100"] {
            for ((other, oscale), &(own, theirs)) in &e.pairs {
                if *scale == 1 && *oscale == 1 && own == 0.0 && theirs == 0.0 {
                    refused += 1;
                    let m = [jobs[job].mem_gib, jobs[other].mem_gib];
                    if gpuplan_core::colocation::fits_memory("v100", &m) {
                        allowed += 1;
                    }
                }
            }
        }
        eprintln!("Gavel could not co-locate {refused} ordered pairs; the estimates allow {allowed} of them");
        assert_eq!(refused, 40);
        assert!(allowed < refused);
    }
}
