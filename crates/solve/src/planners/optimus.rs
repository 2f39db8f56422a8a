//! `optimus`: Optimus+Oracle as the Pollux paper ran it.
//!
//! Every job (in submission order) first gets one GPU while GPUs last; then
//! GPUs go one at a time to the job whose remaining time drops most:
//! `(T(k) − T(k+1)) × remaining_iters`, with T the true step time at the
//! job's fixed batch on packed GPUs (the "oracle"). A job's GPU ceiling is
//! the length of its oracle table (batch / min local batch, within limits).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use gpuplan_core::{Plan, Round, RoundJob};

use super::place_counts;
use crate::{BatchPolicy, Limits, PlanError, Planner, PlannerTraits};

#[derive(Debug, Default)]
pub struct Optimus;

fn ceiling(j: &RoundJob) -> u32 {
    let table = j.oracle.as_ref().map_or(1, |o| o.step_time_s.len() as u32);
    table.min(j.max_gpus).max(1)
}

/// Seconds saved by going from k to k+1 GPUs.
fn gain(j: &RoundJob, k: u32) -> f64 {
    match &j.oracle {
        Some(o) if (k as usize) < o.step_time_s.len() => {
            (o.step_time_s[k as usize - 1] - o.step_time_s[k as usize]) * o.remaining_iters
        }
        _ => f64::NEG_INFINITY,
    }
}

#[derive(PartialEq)]
struct Cand(f64, usize);
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        // Larger gain first; earlier job index wins ties (deterministic).
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

impl Planner for Optimus {
    fn name(&self) -> &str {
        "optimus"
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
        let mut order: Vec<usize> = (0..round.jobs.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&round.jobs[a], &round.jobs[b]);
            a.submit_s.total_cmp(&b.submit_s).then(a.id.cmp(&b.id))
        });
        let mut left = round.cluster.total_gpus();
        let mut k = vec![0u32; round.jobs.len()];
        let mut heap = BinaryHeap::new();
        for &i in &order {
            let j = &round.jobs[i];
            if left == 0 {
                break;
            }
            let need = j.min_gpus.max(1);
            // A job whose limits allow no size (max_gpus 0) waits.
            if need <= left && need <= j.max_gpus {
                k[i] = need;
                left -= need;
                if k[i] < ceiling(j) {
                    heap.push(Cand(gain(j, k[i]), i));
                }
            }
        }
        while left > 0 {
            let Some(Cand(g, i)) = heap.pop() else { break };
            if g <= 0.0 {
                break;
            }
            k[i] += 1;
            left -= 1;
            let j = &round.jobs[i];
            if k[i] < ceiling(j) {
                heap.push(Cand(gain(j, k[i]), i));
            }
        }
        let decisions: Vec<_> = order.iter().map(|&i| (round.jobs[i].id, k[i])).collect();
        Ok(place_counts(self.name(), round, limits, &decisions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, round, with_oracle};
    use gpuplan_core::{validate, Interference, JobId};

    #[test]
    fn marginal_gain_by_remaining_work() {
        // 1×4 GPUs, two jobs with perfect 2-GPU scaling then none.
        // Gains from 1→2 GPUs: j0 (1 s/iter → 0.5) × 1000 iters = 500 s; j1 × 100 iters = 50 s.
        let steps = vec![1.0, 0.5, 0.5, 0.5];
        let r = round(
            "1x4",
            vec![
                with_oracle(job(0, 1, 0.0), 1000.0, steps.clone()),
                with_oracle(job(1, 1, 1.0), 100.0, steps),
            ],
            Interference::Allow,
        );
        let p = Optimus.plan(&r, &Limits::default()).unwrap();
        validate(&r, &p).unwrap();
        // Both get 1 GPU; the first extra goes to j0 (500 s), the second to j1 (50 s);
        // the last GPU gains nothing and stays idle.
        assert_eq!(p.get(JobId(0)).num_gpus(), 2);
        assert_eq!(p.get(JobId(1)).num_gpus(), 2);
    }
}
