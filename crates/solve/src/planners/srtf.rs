//! `srtf`: shortest remaining time first, preemptive, with oracle knowledge
//! of each job's remaining time at its requested size.
//!
//! An upper-bound-style baseline: it needs the simulator's ground truth
//! (`RoundJob::oracle`). Jobs without an oracle are treated as longest.

use gpuplan_core::{Plan, Round, RoundJob};

use super::{fixed_gpus, place_counts};
use crate::{BatchPolicy, Limits, PlanError, Planner, PlannerTraits};

#[derive(Debug, Default)]
pub struct Srtf;

/// Remaining seconds at `k` GPUs, from the oracle.
pub fn remaining_s(job: &RoundJob, k: u32) -> f64 {
    match &job.oracle {
        Some(o) if !o.step_time_s.is_empty() => {
            let i = (k.max(1) as usize).min(o.step_time_s.len()) - 1;
            o.remaining_iters * o.step_time_s[i]
        }
        _ => f64::INFINITY,
    }
}

impl Planner for Srtf {
    fn name(&self) -> &str {
        "srtf"
    }

    fn traits(&self) -> PlannerTraits {
        PlannerTraits {
            batch: BatchPolicy::Fixed,
            needs_oracle: true,
            honours_interference: false,
        }
    }

    fn placement_stage(&self) -> bool {
        true
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let mut order: Vec<(&RoundJob, f64)> = round
            .jobs
            .iter()
            .map(|j| (j, remaining_s(j, fixed_gpus(j))))
            .collect();
        order.sort_by(|a, b| {
            a.1.total_cmp(&b.1)
                .then(a.0.submit_s.total_cmp(&b.0.submit_s))
                .then(a.0.id.cmp(&b.0.id))
        });
        let mut left = round.cluster.total_gpus();
        let mut decisions = Vec::new();
        for (j, _) in order {
            let k = fixed_gpus(j);
            if k <= left {
                left -= k;
                decisions.push((j.id, k));
            }
        }
        Ok(place_counts(self.name(), round, limits, &decisions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, round, running, with_oracle};
    use gpuplan_core::{validate, Interference, JobId};

    #[test]
    fn shortest_remaining_first_preempts_longer() {
        // 1×4 GPUs. j0 (running, 4 GPUs) has 1000 s left; j1 (4 GPUs) 100 s; j2 (2 GPUs) 50 s.
        let r = round(
            "1x4",
            vec![
                with_oracle(
                    running(job(0, 4, 0.0), &[(0, 4)]),
                    1000.0,
                    vec![4.0, 2.0, 1.5, 1.0],
                ),
                with_oracle(job(1, 4, 5.0), 100.0, vec![4.0, 2.0, 1.5, 1.0]),
                with_oracle(job(2, 2, 9.0), 50.0, vec![2.0, 1.0]),
            ],
            Interference::Allow,
        );
        let p = Srtf.plan(&r, &Limits::default()).unwrap();
        validate(&r, &p).unwrap();
        // j2: 50 iters × 1 s = 50 s first; j1: 100 s does not fit the 2 GPUs left; j0 neither.
        assert_eq!(p.get(JobId(2)).num_gpus(), 2);
        assert!(p.get(JobId(0)).is_empty() && p.get(JobId(1)).is_empty());
    }
}
