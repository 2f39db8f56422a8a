//! Seeded synthetic planning rounds drawn from the real application
//! profiles, for `gpuplan bench` and property tests.
//!
//! Each job is one of the six Pollux applications (in the Pollux workload
//! mix), with the throughput model fitted to all of that application's
//! measurements and gradient statistics from a random epoch, so speedup
//! curves are real ones. About half the cluster is already running jobs,
//! so keep-or-move decisions matter as they do in a live round.

use gpuplan_core::{
    fit_perf_params, Allocation, Cluster, GoodputModel, JobId, JobState, NodeId, Observation, PerfParams,
    PolicyParams, Round, RoundJob,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::data::Profiles;

/// Fitted throughput parameters per application, computed once.
pub fn fitted_params(profiles: &Profiles) -> Vec<(String, PerfParams)> {
    profiles
        .iter()
        .map(|(name, p)| {
            let obs: Vec<Observation> = p.measured_points().iter().map(|m| m.observation()).collect();
            (name.clone(), fit_perf_params(&obs))
        })
        .collect()
}

/// The cluster shape used for a GPU count: 4-GPU nodes up to 64 GPUs (the
/// Pollux testbed), 8-GPU nodes beyond.
pub(crate) fn cluster_for(gpus: u32) -> Cluster {
    let per = if gpus <= 64 { 4 } else { 8 };
    Cluster::homogeneous(gpus.div_ceil(per).max(1), per, gpuplan_core::DEFAULT_GPU_TYPE)
}

/// Pollux's workload mix (Table 1): share of jobs per application.
const MIX: [(&str, f64); 6] = [
    ("cifar10", 0.36),
    ("ncf", 0.36),
    ("deepspeech2", 0.10),
    ("bert", 0.10),
    ("yolov3", 0.06),
    ("imagenet", 0.02),
];

/// A reproducible round with `jobs` jobs on `gpus` GPUs.
pub fn generate_round(
    profiles: &Profiles,
    fitted: &[(String, PerfParams)],
    gpus: u32,
    jobs: usize,
    seed: u64,
) -> Round {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((gpus as u64) << 32) ^ jobs as u64);
    let cluster = cluster_for(gpus);
    let per = cluster.max_gpus_per_node();
    let mut free: Vec<u32> = cluster.nodes.iter().map(|n| n.gpus).collect();
    let mut out = Vec::with_capacity(jobs);
    let budget = cluster.total_gpus() / 2;
    let mut used = 0u32;
    for i in 0..jobs {
        let mut x = rng.gen::<f64>();
        let mut app = MIX[0].0;
        for (a, w) in MIX {
            if x < w {
                app = a;
                break;
            }
            x -= w;
        }
        let profile = &profiles[app];
        let perf = fitted
            .iter()
            .find(|(n, _)| n == app)
            .map(|(_, p)| *p)
            .unwrap_or_else(gpuplan_core::prior_perf_params);
        let epoch = rng.gen_range(0..profile.max_epochs);
        let model = GoodputModel {
            perf,
            grad: profile.grad_params(epoch, profile.limits.init_batch as f64),
            limits: profile.limits,
            accumulation: true,
        };
        let max_gpus = (profile.limits.max_batch / profile.limits.min_local).clamp(1, 64);
        let has_run = rng.gen_bool(0.7);
        let age = rng.gen_range(60.0..20000.0);
        let mut state = JobState {
            age_s: age,
            restarts: rng.gen_range(0..4),
            epoch,
            ..Default::default()
        };
        if has_run {
            let k = [1u32, 2, 4, 8, 16][rng.gen_range(0..5u32) as usize].min(max_gpus);
            state.max_gpus_used = k;
            state.attained_gpu_s = age * k as f64 * rng.gen_range(0.2..1.0);
            // Half the cluster runs jobs: place this one if it fits, packed.
            if used + k <= budget {
                let mut counts = Vec::new();
                let mut need = k;
                let mut order: Vec<usize> = (0..free.len()).collect();
                order.sort_by_key(|&n| (std::cmp::Reverse(free[n]), n));
                // Single node if it fits on one; whole nodes otherwise.
                if k <= per {
                    if let Some(&n) = order.iter().find(|&&n| free[n] >= k) {
                        counts.push((NodeId(n as u32), k));
                        need = 0;
                    }
                } else {
                    for &n in &order {
                        if need == 0 {
                            break;
                        }
                        if free[n] == per {
                            counts.push((NodeId(n as u32), per.min(need)));
                            need -= per.min(need);
                        }
                    }
                }
                if need == 0 {
                    for &(n, c) in &counts {
                        free[n.0 as usize] -= c;
                    }
                    used += k;
                    state.allocation = Allocation::from_counts(&counts);
                }
            }
        }
        out.push(RoundJob {
            batch_size: profile.limits.init_batch,
            max_gpus,
            state,
            model: if has_run { Some(model) } else { None },
            ..RoundJob::new(JobId(i as u32), format!("{app}-{i}"), app)
        });
    }
    Round {
        now_s: 20000.0,
        cluster,
        jobs: out,
        params: PolicyParams::default(),
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: Vec::new(),
    }
}

/// The round on a cluster of several GPU types: its nodes split into
/// `types.len()` contiguous groups of (nearly) equal size, the first type
/// first. The models were fitted on the Pollux (T4) profiles, so they are
/// marked as `t4` fits and valued on other types through the speed table.
/// A running job whose nodes now span two types is stopped (it has run, so
/// it keeps its model). For solver-time benches on heterogeneous rounds.
pub fn with_types(mut round: Round, types: &[gpuplan_core::GpuType]) -> Round {
    if types.is_empty() {
        return round;
    }
    let n = round.cluster.nodes.len();
    for (i, node) in round.cluster.nodes.iter_mut().enumerate() {
        node.gpu_type = types[(i * types.len() / n.max(1)).min(types.len() - 1)].clone();
    }
    let node_type = round.cluster.type_index();
    for j in &mut round.jobs {
        if j.model.is_some() {
            j.model_type = Some("t4".into());
        }
        let mixed = {
            let mut ty = j.state.allocation.nodes().map(|m| node_type[m.0 as usize]);
            let first = ty.next();
            ty.any(|t| Some(t) != first)
        };
        if mixed {
            j.state.allocation = Allocation::default();
        }
    }
    round
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_rounds_never_keep_a_job_across_types() {
        let profiles = crate::data::pollux_profiles().unwrap();
        let fitted = fitted_params(&profiles);
        let types: Vec<gpuplan_core::GpuType> = ["t4", "rtx2080ti", "a100"].map(Into::into).to_vec();
        let r = with_types(generate_round(&profiles, &fitted, 2048, 800, 1), &types);
        r.check().unwrap();
        assert_eq!(r.cluster.types().len(), 3);
        let node_type = r.cluster.type_index();
        assert_eq!(node_type.iter().filter(|&&t| t == node_type[0]).count(), 86);
        for j in &r.jobs {
            let t: std::collections::BTreeSet<usize> = j
                .state
                .allocation
                .nodes()
                .map(|m| node_type[m.0 as usize])
                .collect();
            assert!(t.len() <= 1, "{}", j.name);
        }
    }

    #[test]
    fn rounds_are_reproducible_and_consistent() {
        let profiles = crate::data::pollux_profiles().unwrap();
        let fitted = fitted_params(&profiles);
        let a = generate_round(&profiles, &fitted, 64, 40, 1);
        let b = generate_round(&profiles, &fitted, 64, 40, 1);
        assert_eq!(a, b);
        assert_eq!(a.jobs.len(), 40);
        assert_eq!(a.cluster.total_gpus(), 64);
        a.check().unwrap();
        let c = generate_round(&profiles, &fitted, 2048, 800, 1);
        c.check().unwrap();
        assert_eq!(c.cluster.num_nodes(), 256);
        assert!(c.jobs.iter().any(|j| !j.state.allocation.is_empty()));
    }
}
