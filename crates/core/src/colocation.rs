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
//!
//! The table ([`Colocation`], GPU and application memory) is the module
//! `colocation_table`, below [`Round`], which carries one; the rules here
//! read a round and a plan, so they sit above both. Every item keeps its
//! path here.

use std::collections::BTreeMap;

use crate::job::{Allocation, GpuId};
use crate::plan::Plan;
use crate::round::{Round, RoundJob, SharingPairs};

// Moved to the model, which the profiles and the predictor share; kept
// here for callers.
pub use crate::colocation_table::{
    app_memory_gib, gpu_memory_gib, measured_slowdown, Colocation, MeasuredPair, Observed, SlowdownCurve,
    GAVEL_CURVE,
};
pub use crate::model::compute_share;

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

/// Pinned jobs that share a GPU must stay together, so the round must
/// let them: each one's memory known, together within the GPU's, and
/// under `sharing_pairs = measured` every pair measured. Otherwise no
/// plan is valid, and that is the input's fault, reported by field. Part
/// of the round's check (the pipeline runs both); here, not in `round.rs`,
/// because it reads the sharing rules, which read rounds.
pub fn check_pinned_sharers(round: &Round, errs: &mut Vec<String>) {
    if round.params.sharing < 2 {
        return;
    }
    let mut by_gpu: std::collections::BTreeMap<crate::GpuId, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, j) in round.jobs.iter().enumerate() {
        if j.preemptible {
            continue;
        }
        for g in j.current().gpus().iter().filter(|g| g.is_bound()) {
            by_gpu.entry(*g).or_default().push(i);
        }
    }
    let model = round_model(round);
    for (g, held) in by_gpu.iter().filter(|(_, h)| h.len() > 1) {
        let Some(node) = round.cluster.nodes.get(g.node.0 as usize) else {
            continue;
        };
        let last = held[held.len() - 1];
        let at = format!("jobs[{last}] ({}).state.allocation", round.jobs[last].name);
        let names: Vec<&str> = held.iter().map(|&i| round.jobs[i].name.as_str()).collect();
        let gpu = format!(
            "GPU {} of node {} ({})",
            g.index,
            g.node.0,
            node.gpu_type.as_str()
        );
        let mems: Vec<Option<f64>> = held.iter().map(|&i| job_memory_gib(&round.jobs[i])).collect();
        let unknown: Vec<&str> = held
            .iter()
            .zip(&mems)
            .filter(|(_, m)| m.is_none())
            .map(|(&i, _)| round.jobs[i].name.as_str())
            .collect();
        if !unknown.is_empty() {
            errs.push(format!(
                "{at}: pinned jobs {} share {gpu}, but the memory of {} is unknown (give mem_gib)",
                names.join(", "),
                unknown.join(", ")
            ));
        } else if !fits_memory(node.gpu_type.as_str(), &mems) {
            let need: f64 = mems.iter().flatten().sum();
            let cap = gpu_memory_gib(node.gpu_type.as_str())
                .map_or("an unknown amount".to_string(), |c| format!("{c} GiB"));
            errs.push(format!(
                "{at}: pinned jobs {} share {gpu} and need {need} GiB together; it holds {cap}",
                names.join(", ")
            ));
        }
        for (k, &a) in held.iter().enumerate() {
            for &b in &held[k + 1..] {
                if !measured_enough(round, &model, &round.jobs[a], &round.jobs[b]) {
                    errs.push(format!(
                        "{at}: pinned jobs {} and {} share {gpu}, a pair never measured, against params.sharing_pairs \"measured\"",
                        round.jobs[a].name, round.jobs[b].name
                    ));
                }
            }
        }
    }
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
    use crate::math::Libm;

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
