//! Hand-built rounds for unit tests.

use gpuplan_core::{
    Allocation, BatchLimits, Cluster, GoodputModel, GradParams, Interference, JobId, JobState, NodeId,
    Oracle, PerfParams, PolicyParams, Round, RoundJob,
};

pub fn job(id: u32, gpus: u32, submit_s: f64) -> RoundJob {
    RoundJob {
        submit_s,
        requested_gpus: gpus,
        batch_size: 128 * gpus,
        max_gpus: 16,
        state: JobState {
            age_s: 600.0,
            ..Default::default()
        },
        ..RoundJob::new(JobId(id), format!("j{id}"), "cifar10")
    }
}

pub fn running(mut j: RoundJob, nodes: &[(u32, u32)]) -> RoundJob {
    let counts: Vec<(NodeId, u32)> = nodes.iter().map(|&(n, k)| (NodeId(n), k)).collect();
    j.state.allocation = Allocation::from_counts(&counts);
    j.state.max_gpus_used = j.state.allocation.num_gpus();
    j
}

pub fn with_oracle(mut j: RoundJob, remaining_iters: f64, step_time_s: Vec<f64>) -> RoundJob {
    j.oracle = Some(Oracle {
        remaining_iters,
        step_time_s,
    });
    j
}

/// A plausible fitted model: compute-bound, with sync costs that grow across nodes.
pub fn model() -> GoodputModel {
    GoodputModel {
        perf: PerfParams {
            alpha_c: 0.02,
            beta_c: 0.0005,
            alpha_n: 0.08,
            beta_n: 0.004,
            alpha_r: 0.01,
            beta_r: 0.002,
            gamma: 1.5,
        },
        grad: GradParams { sqr: 1.0, var: 4.0 },
        limits: BatchLimits {
            init_batch: 128,
            max_batch: 4096,
            min_local: 32,
            max_local: 256,
        },
        accumulation: true,
    }
}

pub fn round(cluster: &str, jobs: Vec<RoundJob>, interference: Interference) -> Round {
    let cluster: Cluster = cluster.parse().unwrap();
    Round {
        now_s: 600.0,
        cluster,
        jobs,
        params: PolicyParams {
            interference,
            ..Default::default()
        },
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: Vec::new(),
    }
}

/// A round on `cluster` of `n` jobs of varied scaling, at most 4 GPUs each
/// (models fitted on t4, so each type is valued through the speed table).
pub fn typed_round(cluster: &str, n: u32, seed: u64) -> Round {
    let mut s = seed;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) % 1000) as f64 / 1000.0
    };
    let jobs = (0..n)
        .map(|i| {
            let mut m = model();
            m.perf.alpha_n *= 0.2 + 4.0 * next();
            m.perf.beta_c *= 0.5 + 3.0 * next();
            m.grad.var *= 0.3 + 20.0 * next();
            let mut j = job(i, 1 + (next() * 4.0) as u32, i as f64);
            j.max_gpus = 4;
            j.model = Some(m);
            j.model_type = Some("t4".into());
            j
        })
        .collect();
    round(cluster, jobs, Interference::Avoid)
}
