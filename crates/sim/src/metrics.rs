//! What a run produced: per-job results, per-round records and the summary
//! whose JSON keys are the CLI's contract.

use gpuplan_core::{JobId, PlanStatus};
use serde::{Deserialize, Serialize};

/// How one job of the workload fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    /// The job's id in the workload.
    pub id: JobId,
    /// The job's name in the workload file.
    pub name: String,
    /// Its application (a profile name, or the trace's label for rigid jobs).
    pub app: String,
    /// Simulated time it arrived.
    pub submit_s: f64,
    /// Simulated time it finished (NaN if it never did).
    pub completion_s: f64,
    /// Job completion time: `completion_s - submit_s`.
    pub jct_s: f64,
    /// Allocation changes after its first start; each cost a restart delay.
    pub restarts: u32,
    /// GPU-seconds it held, restart delays included.
    pub attained_gpu_s: f64,
    /// Most GPUs it ever held at once.
    pub max_gpus_used: u32,
    /// Its queue, in a run with queues (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// GPU-seconds of work its restarts threw away (run since its last
    /// checkpoint × the GPUs it held), in a run with checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gpu_s: Option<f64>,
}

/// The state after one scheduling round, for time series and plots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// Simulated time of the round.
    pub time_s: f64,
    /// Jobs arrived and not yet finished.
    pub active: usize,
    /// Active jobs holding GPUs after the round.
    pub running: usize,
    /// GPUs held after the round.
    pub gpus_allocated: u32,
    /// Jobs whose allocation the round changed (first starts excluded).
    pub restarts: u32,
    /// Wall-clock time the planner took on the round.
    pub planner_ms: f64,
    /// Whether the plan was proven optimal, merely feasible, or a fallback.
    pub status: PlanStatus,
    /// Under queues: GPUs each queue holds after the round (its subtree
    /// counted), in the order of the result's `queues`; empty without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_gpus: Vec<u32>,
}

/// One queue's figures over a run with queues (docs/tenants.md); each
/// queue counts its whole subtree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSummary {
    /// The queue's name.
    pub queue: String,
    /// Jobs of the workload in it.
    pub jobs: usize,
    /// Mean completion time of its finished jobs.
    pub avg_jct_s: f64,
    /// 99th-percentile completion time of its finished jobs.
    pub p99_jct_s: f64,
    /// GPU-hours its jobs held.
    pub gpu_hours: f64,
    /// GPU-seconds it held beyond its guarantee.
    pub borrowed_gpu_s: f64,
    /// GPU-seconds its waiting jobs' minimums went unmet within its unused
    /// guarantee while a queue beside it held more than its own guarantee.
    pub shortfall_gpu_s: f64,
    /// Its guarantee (GPUs), for charts against its holdings.
    #[serde(default)]
    pub guarantee: u32,
}

/// One job holding the same GPUs over [start_s, end_s): the Gantt chart's bars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// The job holding the GPUs.
    pub job: JobId,
    /// Simulated time the allocation began.
    pub start_s: f64,
    /// Simulated time it changed or the job finished.
    pub end_s: f64,
    /// (node index, GPUs on it).
    pub nodes: Vec<(u32, u32)>,
}

/// One GPU over a run: seconds some job held it (counted once however
/// many held it), seconds two or more held it, and busy seconds: its
/// holders' utilization × time, summed over co-located jobs and capped at
/// the held time (a GPU is at most fully busy).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuUsage {
    /// Node index in the cluster.
    pub node: u32,
    /// GPU index on that node.
    pub gpu: u32,
    /// Seconds at least one job held it.
    pub held_s: f64,
    /// Seconds two or more jobs held it.
    pub shared_s: f64,
    /// Seconds of compute: holders' utilization × time, capped at `held_s`.
    pub busy_s: f64,
}

/// The planner's wall-clock time per round, in milliseconds (0 with no rounds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlannerMs {
    /// Mean over the rounds.
    pub mean: f64,
    /// Median over the rounds (absent from summaries written before it
    /// was added: 0 when read from them).
    #[serde(default)]
    pub p50: f64,
    /// 99th percentile over the rounds.
    pub p99: f64,
    /// Slowest round.
    pub max: f64,
}

/// The summary printed by `gpuplan simulate --format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The planner's registry name.
    pub policy: String,
    /// The workload's name (set by the caller; empty from [`SimResult::new`]).
    pub workload: String,
    /// Jobs in the workload.
    pub jobs: usize,
    /// Mean job completion time: the headline figure.
    pub avg_jct_s: f64,
    /// Median job completion time.
    pub p50_jct_s: f64,
    /// 99th-percentile job completion time (interpolated, as numpy).
    pub p99_jct_s: f64,
    /// The artifact's "99th percentile" column: the mean JCT of imagenet jobs.
    pub imagenet_mean_jct_s: Option<f64>,
    /// First arrival to last completion.
    pub makespan_s: f64,
    /// Allocated GPU-time over capacity × makespan; a GPU that several
    /// jobs share counts once.
    pub gpu_utilization: f64,
    /// Busy GPU-time over capacity × makespan: each GPU's holders'
    /// utilization (compute share of their step) × time, summed over
    /// co-located jobs and capped at 1 per GPU ([`GpuUsage`]).
    #[serde(default)]
    pub gpu_busy: f64,
    /// GPU-time held by two or more jobs over capacity × makespan.
    #[serde(default)]
    pub gpu_shared: f64,
    /// Restarts summed over the jobs ([`JobResult::restarts`]).
    pub restarts: u64,
    /// Scheduling rounds simulated (skipped idle rounds not counted).
    pub rounds: usize,
    /// Planner time per round.
    pub planner_ms: PlannerMs,
    /// Wall-clock seconds the whole run took.
    pub wall_s: f64,
    /// GPU-hours of work restarts threw away (work since each job's last
    /// checkpoint), in a run with checkpoints (`--checkpoint-interval` or
    /// the workload's column); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gpu_h: Option<f64>,
}

/// Everything a run produced: the summary and the detail behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// The headline figures.
    pub summary: Summary,
    /// One per job, in workload order.
    pub jobs: Vec<JobResult>,
    /// One per simulated round, in time order.
    pub rounds: Vec<RoundRecord>,
    /// Every allocation each job held, for the Gantt chart.
    pub segments: Vec<Segment>,
    /// Per GPU, in cluster order (empty in results written before it).
    #[serde(default)]
    pub gpus: Vec<GpuUsage>,
    /// Per queue, in the queues' order, for a run with queues (absent otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSummary>,
    /// Every round's jobs, where [`crate::SimConfig::round_log`] asked for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_log: Vec<crate::RoundLog>,
    /// Goodput over time in ground truth: (time s, jobs' worth of work done
    /// per hour in the interval ending then), one point per round
    /// (`work_rate.rs`); its integral is the number of jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub work_rate: Vec<(f64, f64)>,
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

/// Each queue's figures (its subtree's jobs by their `queue`), in `queues`
/// order; `gpu_s[q]` is (borrowed, short) GPU-seconds as the run summed them.
pub fn queue_summaries(
    queues: &[gpuplan_core::queue::Queue],
    jobs: &[JobResult],
    gpu_s: &[(f64, f64)],
) -> Vec<QueueSummary> {
    let names: Vec<Option<&str>> = jobs.iter().map(|j| j.queue.as_deref()).collect();
    let Some(tree) = gpuplan_core::queue::QueueTree::from_queues(queues, &names, 0) else {
        return Vec::new();
    };
    (0..queues.len())
        // The implicit `default` only where jobs are in it.
        .filter(|&q| queues[q].name != gpuplan_core::queue::DEFAULT_QUEUE || tree.leaf.contains(&q))
        .map(|q| {
            let mine: Vec<&JobResult> = jobs
                .iter()
                .zip(&tree.leaf)
                .filter(|(_, &leaf)| tree.is_ancestor_or_self(q, leaf))
                .map(|(j, _)| j)
                .collect();
            let mut jcts: Vec<f64> = mine.iter().map(|j| j.jct_s).filter(|x| x.is_finite()).collect();
            jcts.sort_by(f64::total_cmp);
            let (borrowed, short) = gpu_s.get(q).copied().unwrap_or((0.0, 0.0));
            QueueSummary {
                queue: queues[q].name.clone(),
                guarantee: queues[q].guarantee,
                jobs: mine.len(),
                avg_jct_s: if jcts.is_empty() { f64::NAN } else { mean(&jcts) },
                p99_jct_s: percentile(&jcts, 99.0),
                gpu_hours: mine.iter().fold(0.0, |s, j| s + j.attained_gpu_s) / 3600.0,
                borrowed_gpu_s: borrowed,
                shortfall_gpu_s: short,
            }
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl SimResult {
    /// Assemble a result and compute its [`Summary`] from the per-job
    /// results and the planner's per-round times; per-GPU use comes after
    /// ([`SimResult::with_gpu_usage`]).
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
            gpu_busy: 0.0,
            gpu_shared: 0.0,
            restarts: jobs.iter().map(|j| j.restarts as u64).sum(),
            rounds: rounds.len(),
            planner_ms: PlannerMs {
                mean: if ms.is_empty() { 0.0 } else { mean(&ms) },
                p50: if ms.is_empty() { 0.0 } else { percentile(&ms, 50.0) },
                p99: if ms.is_empty() { 0.0 } else { percentile(&ms, 99.0) },
                max: ms.last().copied().unwrap_or(0.0),
            },
            wall_s,
            lost_gpu_h: jobs
                .iter()
                .filter_map(|j| j.lost_gpu_s)
                .reduce(|a, b| a + b)
                .map(|s| s / 3600.0),
        };
        SimResult {
            summary,
            jobs,
            rounds,
            segments,
            gpus: Vec::new(),
            queues: Vec::new(),
            round_log: Vec::new(),
            work_rate: Vec::new(),
        }
    }

    /// Add per-GPU use; `double_counted_s`, the GPU-seconds that jobs'
    /// `attained_gpu_s` count more than once because they shared a GPU,
    /// comes off `gpu_utilization` (exactly nothing without sharing, so
    /// the figure is the same as before sharing existed).
    pub fn with_gpu_usage(mut self, gpus: Vec<GpuUsage>, double_counted_s: f64) -> Self {
        let s = &mut self.summary;
        let cap = gpus.len() as f64 * s.makespan_s;
        if cap > 0.0 {
            let gpu_s: f64 = self.jobs.iter().map(|j| j.attained_gpu_s).sum();
            if double_counted_s > 0.0 {
                s.gpu_utilization = (gpu_s - double_counted_s) / cap;
            }
            s.gpu_busy = gpus.iter().map(|g| g.busy_s).sum::<f64>() / cap;
            s.gpu_shared = gpus.iter().map(|g| g.shared_s).sum::<f64>() / cap;
        }
        self.gpus = gpus;
        self
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
