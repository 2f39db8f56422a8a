//! Per-round memo of job speedups, because planners ask for the same
//! (nodes, GPUs) thousands of times per round and each answer is a batch-size
//! optimisation.

use gpuplan_core::objective;
use gpuplan_core::{Round, RoundJob};

/// Lazily filled speedup table of one job for one round.
#[derive(Debug, Clone)]
pub struct SpeedupCache {
    fair: (u32, u32),
    max_nodes: u32,
    max_gpus: u32,
    cells: Vec<f64>,
}

impl SpeedupCache {
    pub fn new(round: &Round, max_nodes: u32, max_gpus: u32) -> Self {
        SpeedupCache {
            fair: objective::fair_share(round),
            max_nodes,
            max_gpus,
            cells: vec![f64::NAN; ((max_nodes + 1) * (max_gpus + 1)) as usize],
        }
    }

    /// Speedup over the fair share, as [`objective::speedup`] computes it.
    pub fn get(&mut self, job: &RoundJob, nodes: u32, gpus: u32) -> f64 {
        if gpus == 0 {
            return 0.0;
        }
        if nodes > self.max_nodes || gpus > self.max_gpus {
            return objective::speedup(job, nodes, gpus, self.fair);
        }
        let i = (nodes * (self.max_gpus + 1) + gpus) as usize;
        if self.cells[i].is_nan() {
            self.cells[i] = objective::speedup(job, nodes, gpus, self.fair);
        }
        self.cells[i]
    }
}

/// GPUs a goodput-based planner may give a job: its limits, the cluster, and
/// Pollux's exploration cap (factor × the most GPUs it has used, at least 1).
pub fn max_gpus(job: &RoundJob, round: &Round) -> u32 {
    let explore = (round.params.exploration_factor * job.state.max_gpus_used).max(1);
    job.max_gpus
        .min(explore.max(job.min_gpus))
        .min(round.cluster.total_gpus())
}
