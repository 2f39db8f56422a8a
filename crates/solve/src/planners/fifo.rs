//! `fifo`: YARN-CS style first-in first-out with consolidated placement.
//!
//! Each job runs at its requested size. Running jobs are never preempted;
//! waiting jobs start in submission order when their GPUs are free. A job
//! that does not fit does not block smaller later jobs (backfilling), as the
//! capacity scheduler does within a queue.

use gpuplan_core::{Plan, Round};

use super::{fixed_gpus, place_counts};
use crate::{Limits, PlanError, Planner};

#[derive(Debug, Default)]
pub struct Fifo;

impl Planner for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn placement_stage(&self) -> bool {
        true
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let total = round.cluster.total_gpus();
        let mut order: Vec<_> = round.jobs.iter().collect();
        // Running jobs first (never preempted), then by submission.
        order.sort_by(|a, b| {
            a.current()
                .is_empty()
                .cmp(&b.current().is_empty())
                .then(a.submit_s.total_cmp(&b.submit_s))
                .then(a.id.cmp(&b.id))
        });
        let mut left = total;
        let mut decisions = Vec::new();
        for j in order {
            // A running job keeps its size unless that now breaks its limits.
            let k = if round.keepable(j) {
                j.current().num_gpus()
            } else {
                fixed_gpus(j)
            };
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
    use crate::testutil::{job, round, running};
    use gpuplan_core::{validate, Interference, JobId};

    #[test]
    fn runs_in_order_without_preempting_and_backfills() {
        // 2×4 GPUs: j0 runs on 4 GPUs; j1 wants 6 (does not fit), j2 wants 2 (backfills).
        let r = round(
            "2x4",
            vec![
                running(job(0, 4, 0.0), &[(0, 4)]),
                job(1, 6, 10.0),
                job(2, 2, 20.0),
            ],
            Interference::Allow,
        );
        let p = Fifo.plan(&r, &Limits::default()).unwrap();
        validate(&r, &p).unwrap();
        assert_eq!(p.get(JobId(0)), r.jobs[0].state.allocation);
        assert!(p.get(JobId(1)).is_empty());
        assert_eq!(p.get(JobId(2)).num_gpus(), 2);
        assert_eq!(p.get(JobId(2)).num_nodes(), 1, "consolidated");
    }
}
