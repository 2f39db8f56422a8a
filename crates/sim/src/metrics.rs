//! What a run produced: per-job results, per-round records and the summary
//! whose JSON keys are the CLI's contract.

use gpuplan_core::{JobId, PlanStatus};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub id: JobId,
    pub name: String,
    pub app: String,
    pub submit_s: f64,
    pub completion_s: f64,
    pub jct_s: f64,
    pub restarts: u32,
    pub attained_gpu_s: f64,
    pub max_gpus_used: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub time_s: f64,
    pub active: usize,
    pub running: usize,
    pub gpus_allocated: u32,
    pub restarts: u32,
    pub planner_ms: f64,
    pub status: PlanStatus,
}

/// One job holding the same GPUs over [start_s, end_s): the Gantt chart's bars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub job: JobId,
    pub start_s: f64,
    pub end_s: f64,
    /// (node index, GPUs on it).
    pub nodes: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlannerMs {
    pub mean: f64,
    pub p99: f64,
    pub max: f64,
}

/// The summary printed by `gpuplan simulate --format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub policy: String,
    pub workload: String,
    pub jobs: usize,
    pub avg_jct_s: f64,
    pub p50_jct_s: f64,
    pub p99_jct_s: f64,
    /// The artifact's "99th percentile" column: the mean JCT of imagenet jobs.
    pub imagenet_mean_jct_s: Option<f64>,
    pub makespan_s: f64,
    /// Allocated GPU-time over capacity × makespan.
    pub gpu_utilization: f64,
    pub restarts: u64,
    pub rounds: usize,
    pub planner_ms: PlannerMs,
    pub wall_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    pub summary: Summary,
    pub jobs: Vec<JobResult>,
    pub rounds: Vec<RoundRecord>,
    pub segments: Vec<Segment>,
}

/// Percentile with linear interpolation between order statistics (numpy's default).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl SimResult {
    pub fn new(
        policy: &str,
        total_gpus: u32,
        jobs: Vec<JobResult>,
        rounds: Vec<RoundRecord>,
        segments: Vec<Segment>,
        planner_ms: Vec<f64>,
        wall_s: f64,
    ) -> Self {
        let mut jcts: Vec<f64> = jobs.iter().map(|j| j.jct_s).collect();
        jcts.sort_by(f64::total_cmp);
        let imagenet: Vec<f64> = jobs
            .iter()
            .filter(|j| j.app == "imagenet")
            .map(|j| j.jct_s)
            .collect();
        let start = jobs.iter().map(|j| j.submit_s).fold(f64::INFINITY, f64::min);
        let end = jobs
            .iter()
            .map(|j| j.completion_s)
            .fold(f64::NEG_INFINITY, f64::max);
        let makespan = if jobs.is_empty() { 0.0 } else { end - start };
        let gpu_s: f64 = jobs.iter().map(|j| j.attained_gpu_s).sum();
        let mut ms = planner_ms.clone();
        ms.sort_by(f64::total_cmp);
        let summary = Summary {
            policy: policy.to_string(),
            workload: String::new(),
            jobs: jobs.len(),
            avg_jct_s: mean(&jcts),
            p50_jct_s: percentile(&jcts, 50.0),
            p99_jct_s: percentile(&jcts, 99.0),
            imagenet_mean_jct_s: if imagenet.is_empty() {
                None
            } else {
                Some(mean(&imagenet))
            },
            makespan_s: makespan,
            gpu_utilization: if makespan > 0.0 {
                gpu_s / (total_gpus as f64 * makespan)
            } else {
                0.0
            },
            restarts: jobs.iter().map(|j| j.restarts as u64).sum(),
            rounds: rounds.len(),
            planner_ms: PlannerMs {
                mean: if ms.is_empty() { 0.0 } else { mean(&ms) },
                p99: if ms.is_empty() { 0.0 } else { percentile(&ms, 99.0) },
                max: ms.last().copied().unwrap_or(0.0),
            },
            wall_s,
        };
        SimResult {
            summary,
            jobs,
            rounds,
            segments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 99.0) - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 4.0);
    }
}
