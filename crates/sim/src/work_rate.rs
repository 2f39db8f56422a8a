//! Goodput over time in the simulator's ground truth (the explorer's work
//! chart, `simulate --out`'s work_rate.csv): each job's progress between
//! two rounds (statistically efficient progress, what Pollux calls goodput,
//! integrated) as a fraction of the work it needs in all, summed over jobs,
//! per hour. One unit for every application; its integral over the run is
//! the number of jobs. Computed from profiles, which only the simulator
//! knows, so it lives here rather than in a driver.

use std::collections::HashMap;

use gpuplan_core::{JobId, Round};

use crate::data::Profiles;
use crate::metrics::JobResult;
use crate::workload::{Work, WorkloadJob};

/// The work-rate series of one run, fed round by round.
pub(crate) struct WorkRate {
    /// Each job's whole work, in the units of its progress.
    total: HashMap<JobId, f64>,
    /// Progress of the jobs in the last round seen.
    prev: HashMap<JobId, f64>,
    prev_t: Option<f64>,
    out: Vec<(f64, f64)>,
}

impl WorkRate {
    pub(crate) fn new(jobs: &[WorkloadJob], profiles: &Profiles) -> Self {
        let total = jobs
            .iter()
            .map(|j| {
                let work = match j.work {
                    Work::Rigid { duration_s } => duration_s,
                    Work::Profiled => profiles
                        .get(&j.spec.app)
                        .map_or(f64::NAN, |p| p.completion_progress()),
                };
                (j.spec.id, work)
            })
            .collect();
        WorkRate {
            total,
            prev: HashMap::new(),
            prev_t: None,
            out: Vec::new(),
        }
    }

    fn share(&self, id: JobId, from: f64, to: f64) -> f64 {
        (to - from) / self.total.get(&id).copied().unwrap_or(f64::NAN)
    }

    fn whole(&self, id: JobId) -> f64 {
        self.total.get(&id).copied().unwrap_or(f64::NAN)
    }

    /// One round as the planner saw it (each job's progress then).
    pub(crate) fn observe(&mut self, round: &Round) {
        let now: HashMap<JobId, f64> = round.jobs.iter().map(|j| (j.id, j.state.progress)).collect();
        if let Some(t0) = self.prev_t {
            // A job gone since the last round finished in between: all its work is done.
            let done: f64 = self
                .prev
                .iter()
                .map(|(&id, &p)| self.share(id, p, now.get(&id).copied().unwrap_or_else(|| self.whole(id))))
                .sum();
            if round.now_s > t0 {
                self.out.push((round.now_s, done / ((round.now_s - t0) / 3600.0)));
            }
        }
        self.prev = now;
        self.prev_t = Some(round.now_s);
    }

    /// The series: (time s, jobs' worth of work per hour in the interval
    /// ending then); the last point covers the last round to the last
    /// completion of a job it held.
    pub(crate) fn finish(mut self, results: &[JobResult]) -> Vec<(f64, f64)> {
        if let Some(t0) = self.prev_t {
            let end = results
                .iter()
                .filter(|j| self.prev.contains_key(&j.id))
                .map(|j| j.completion_s)
                .fold(t0, f64::max);
            let left: f64 = self
                .prev
                .iter()
                .map(|(&id, &p)| self.share(id, p, self.whole(id)))
                .sum();
            if end > t0 {
                self.out.push((end, left / ((end - t0) / 3600.0)));
            }
        }
        self.out
    }
}
