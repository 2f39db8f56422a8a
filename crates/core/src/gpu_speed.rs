//! How fast each GPU type runs an application, relative to the T4: the one
//! table behind the simulator's per-type ground truth and the planners'
//! guess for a type a job has not yet run on (docs/heterogeneity.md has the
//! same table with its sources).
//!
//! The Pollux profiles were measured on T4s, so the T4 is the reference
//! (both scalings 1). Every other type gets two time multipliers: one for
//! compute, one for gradient all-reduce within a node. All-reduce across
//! nodes goes over the network, assumed the same for every type, so it is
//! not scaled. `scripts/gpu-types.py` derives the compute numbers.
//!
//! - **k80, p100**: Gavel's per-type throughput table (one GPU, each model
//!   alone; geometric mean over its batch sizes) relative to the V100, times
//!   the V100's datasheet ratio to the T4.
//! - **t4, rtx2080ti, v100, a100, h100, h200**: the geometric mean of the
//!   FP32 TFLOPS ratio and the memory-bandwidth ratio to the T4 (datasheets:
//!   8.1/320, 13.4/616, 15.7/900, 19.5/1555, 67/3350 (H100 SXM5),
//!   67/4800 (H200 SXM) TFLOPS/GB/s). Gavel has none of these but the
//!   V100, so they do not depend on the application.
//! - **Sync within a node**: PCIe 3.0 x16 (15.75 GB/s) for t4, rtx2080ti,
//!   k80, p100; NVLink 2 (300 GB/s) for v100, NVLink 3 (600 GB/s) for a100,
//!   NVLink 4 (900 GB/s) for h100 and h200; time scales with the inverse
//!   bandwidth.
//! - A type not in the table runs as a T4, so clusters with other names keep
//!   their old results.
//! - A type may be named by its table key (`a100`) or as NVML reports it
//!   (`NVIDIA A100-SXM4-40GB`, `Tesla T4`, `NVIDIA GeForce RTX 2080 Ti`): the
//!   executor's rounds use NVML's names ([`table_key`]).

use crate::model::PerfParams;
use crate::profile::StepTime;
use crate::GpuType;

/// Time multipliers of a GPU type relative to the T4 (< 1: faster).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypeSpeed {
    /// Compute time per accumulation step.
    pub compute: f64,
    /// Gradient all-reduce within one node.
    pub sync_intra: f64,
}

impl TypeSpeed {
    /// The reference: the T4 of the Pollux profiles.
    pub const T4: TypeSpeed = TypeSpeed {
        compute: 1.0,
        sync_intra: 1.0,
    };

    /// True step time on this type from the T4 ground truth: compute and
    /// intra-node sync scale, cross-node sync does not. The T4 returns its
    /// input untouched (bit for bit), so homogeneous runs do not change.
    pub fn step(self, t4: StepTime, nodes: u32) -> StepTime {
        if self == Self::T4 {
            return t4;
        }
        let sync = if nodes > 1 { 1.0 } else { self.sync_intra };
        let sync_s = t4.sync_s * sync;
        StepTime {
            step_s: (t4.step_s - t4.sync_s).max(0.0) * self.compute + sync_s,
            sync_s,
        }
    }

    /// This type's speed over `from`'s: how a model fitted on `from` maps
    /// onto this type.
    pub fn relative_to(self, from: TypeSpeed) -> TypeSpeed {
        TypeSpeed {
            compute: self.compute / from.compute,
            sync_intra: self.sync_intra / from.sync_intra,
        }
    }

    /// Throughput parameters fitted on one type, moved to another by this
    /// (relative) speed: compute constants by `compute`, intra-node sync
    /// constants by `sync_intra`; cross-node ones and γ as they are.
    pub fn scale(self, p: PerfParams) -> PerfParams {
        if self == Self::T4 {
            return p;
        }
        PerfParams {
            alpha_c: p.alpha_c * self.compute,
            beta_c: p.beta_c * self.compute,
            alpha_r: p.alpha_r * self.sync_intra,
            beta_r: p.beta_r * self.sync_intra,
            ..p
        }
    }
}

/// The model family of Gavel's table nearest to each Pollux application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GavelModel {
    ResNet18,
    ResNet50,
    Transformer,
    Lm,
    Recommendation,
}

impl GavelModel {
    /// cifar10 (ResNet-18) → ResNet-18; imagenet (ResNet-50) → ResNet-50;
    /// bert → Transformer; deepspeech2 (recurrent) → LM (an LSTM); ncf →
    /// Recommendation; yolov3 (Darknet-53, a residual CNN) and anything else
    /// → ResNet-50.
    pub fn of_app(app: &str) -> Self {
        match app {
            "cifar10" => GavelModel::ResNet18,
            "bert" => GavelModel::Transformer,
            "deepspeech2" => GavelModel::Lm,
            "ncf" => GavelModel::Recommendation,
            _ => GavelModel::ResNet50,
        }
    }
}

/// Datasheet-derived compute multipliers (no per-application data).
const SHEET: [(&str, f64); 6] = [
    ("t4", 1.0),
    ("rtx2080ti", 0.560),
    ("v100", 0.428),
    ("a100", 0.292),
    ("h100", 0.107),
    ("h200", 0.090),
];

/// Gavel-derived compute multipliers relative to T4, per model:
/// ResNet-18, ResNet-50, Transformer, LM, Recommendation.
const GAVEL: [(&str, [f64; 5]); 2] = [
    ("k80", [2.762, 2.706, 1.530, 1.711, 0.327]),
    ("p100", [0.475, 0.650, 0.578, 0.510, 0.198]),
];

/// Intra-node all-reduce multipliers (PCIe 3.0 x16 = 1).
const SYNC: [(&str, f64); 4] = [
    ("v100", 15.75 / 300.0),
    ("a100", 15.75 / 600.0),
    ("h100", 15.75 / 900.0),
    ("h200", 15.75 / 900.0),
];

/// Every type the tables know.
const KEYS: [&str; 8] = ["t4", "rtx2080ti", "v100", "a100", "h100", "h200", "k80", "p100"];

/// Vendor and brand words NVML puts before the model.
const BRANDS: [&str; 4] = ["nvidia", "tesla", "geforce", "quadro"];

/// The table key of a GPU type named by its key (any case) or by NVML's
/// product name, so a real cluster's types get their speeds. The model must
/// end at a word boundary: `T400` is not a T4 and `V100S` not a V100 (both
/// stay unknown, as T4s), while `A100-SXM4-40GB` is an A100.
pub fn table_key(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .skip_while(|w| BRANDS.contains(w))
        .collect();
    // The model may be split over words ("RTX 2080 Ti"): join word by word.
    let mut joined = String::new();
    for w in words {
        joined.push_str(w);
        if let Some(k) = KEYS.iter().find(|k| **k == joined) {
            return Some(k);
        }
        if !KEYS.iter().any(|k| k.starts_with(joined.as_str())) {
            return None;
        }
    }
    None
}

fn lookup<T: Copy>(table: &[(&str, T)], t: &str) -> Option<T> {
    let key = table_key(t)?;
    table.iter().find(|(name, _)| *name == key).map(|&(_, v)| v)
}

/// How fast `app` runs on `gpu_type`, relative to the T4.
pub fn type_speed(gpu_type: &str, app: &str) -> TypeSpeed {
    let compute = lookup(&SHEET, gpu_type)
        .or_else(|| lookup(&GAVEL, gpu_type).map(|row| row[GavelModel::of_app(app) as usize]))
        .unwrap_or(1.0);
    TypeSpeed {
        compute,
        sync_intra: lookup(&SYNC, gpu_type).unwrap_or(1.0),
    }
}

/// A model fitted on `from` moved to `to` (`None`: unknown, no change).
pub fn perf_on(p: PerfParams, app: &str, from: Option<&GpuType>, to: Option<&GpuType>) -> PerfParams {
    match (from, to) {
        (Some(f), Some(t)) if f != t => type_speed(t.as_str(), app)
            .relative_to(type_speed(f.as_str(), app))
            .scale(p),
        _ => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_t4_is_the_identity_and_unknown_types_run_as_t4() {
        assert_eq!(type_speed("t4", "cifar10"), TypeSpeed::T4);
        assert_eq!(type_speed("gpu", "bert"), TypeSpeed::T4);
        let st = StepTime {
            step_s: 0.3,
            sync_s: 0.1,
        };
        assert_eq!(TypeSpeed::T4.step(st, 1), st);
    }

    #[test]
    fn nvml_names_reach_the_table_and_lookalikes_do_not() {
        for (name, key) in [
            ("a100", Some("a100")),
            ("A100", Some("a100")),
            ("NVIDIA A100-SXM4-40GB", Some("a100")),
            ("NVIDIA A100 80GB PCIe", Some("a100")),
            ("Tesla T4", Some("t4")),
            ("Tesla V100-SXM2-16GB", Some("v100")),
            ("NVIDIA GeForce RTX 2080 Ti", Some("rtx2080ti")),
            ("Tesla K80", Some("k80")),
            ("Tesla P100-PCIE-16GB", Some("p100")),
            ("NVIDIA T400", None),
            ("Tesla V100S-PCIE-32GB", None),
            ("NVIDIA GeForce RTX 2080", None),
            ("NVIDIA H100 80GB HBM3", Some("h100")),
            ("NVIDIA H100 PCIe", Some("h100")),
            ("NVIDIA H200", Some("h200")),
            ("NVIDIA H20", None),
            ("gpu", None),
            ("", None),
        ] {
            assert_eq!(table_key(name), key, "{name}");
        }
        assert_eq!(
            type_speed("NVIDIA A100-SXM4-40GB", "bert"),
            type_speed("a100", "bert")
        );
        assert_eq!(type_speed("Tesla K80", "ncf"), type_speed("k80", "ncf"));
        assert_eq!(type_speed("NVIDIA T400", "ncf"), TypeSpeed::T4);
    }

    #[test]
    fn step_times_by_hand() {
        // A100: compute × 0.292, intra-node sync × 15.75/600; across nodes sync unscaled.
        let a = type_speed("a100", "imagenet");
        let st = StepTime {
            step_s: 1.0,
            sync_s: 0.2,
        };
        let one = a.step(st, 1);
        assert!((one.step_s - (0.8 * 0.292 + 0.2 * 15.75 / 600.0)).abs() < 1e-12);
        let two = a.step(st, 2);
        assert!((two.step_s - (0.8 * 0.292 + 0.2)).abs() < 1e-12);
        // k80 follows Gavel per model: ncf (Recommendation) is faster than on a T4.
        assert_eq!(type_speed("k80", "ncf").compute, 0.327);
        assert_eq!(type_speed("K80", "cifar10").compute, 2.762);
        assert_eq!(type_speed("p100", "yolov3").compute, 0.650);
    }

    #[test]
    fn a_model_moves_between_types_by_the_ratio() {
        let p = crate::fit::prior_perf_params();
        let (t4, a100): (GpuType, GpuType) = ("t4".into(), "a100".into());
        let q = perf_on(p, "bert", Some(&t4), Some(&a100));
        assert!((q.alpha_c - 0.1 * 0.292).abs() < 1e-12);
        assert!((q.alpha_r - 0.1 * 15.75 / 600.0).abs() < 1e-12);
        assert_eq!((q.alpha_n, q.gamma), (p.alpha_n, p.gamma));
        let back = perf_on(q, "bert", Some(&a100), Some(&t4));
        assert!((back.alpha_c - p.alpha_c).abs() < 1e-12);
        assert_eq!(perf_on(p, "bert", None, Some(&a100)), p);
    }
}
