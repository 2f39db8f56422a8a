//! Estimates calibrated in simulation (`gpuplan simulate --estimates`):
//! at each job's submission, the estimate a daemon would give from that
//! round's snapshot, and later what happened (docs/estimates.md).
//!
//! The snapshot is the round the simulator hands its planner (fitted
//! models, progress, allocations: only what a real agent measured); each
//! job's remaining work is its true total less its progress
//! ([`KnownWork::Declared`]), or the history predictor over the jobs
//! finished so far ([`KnownWork::History`]).

use std::collections::{BTreeMap, BTreeSet};

use gpuplan_core::{JobId, Plan, Round};
use gpuplan_solve::{BatchPolicy, BatchTarget, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::data::Profiles;
use crate::engine::{batch_target, simulate_workload, Control, SimConfig};
use crate::error::SimError;
use crate::estimate::{
    estimate, predict_work, AppModel, EstimateConfig, Estimates, FinishedJob, JobEstimate, JobWork,
    RemainingWork, Snapshot, Targets, WorkSource,
};
use crate::metrics::{percentile, SimResult};
use crate::workload::{Work, WorkloadJob};

/// What the simulated daemon knows of each job's total work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KnownWork {
    /// Every job declares its true total.
    Declared,
    /// No job declares one: the history predictor over jobs finished so far.
    History,
}

/// How `simulate --estimates` estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationConfig {
    /// Where remaining work comes from.
    pub work: KnownWork,
    /// Estimate every this many submitted jobs (1: every job), to bound the cost.
    pub every: usize,
    /// Each estimate's wall-clock budget, seconds.
    pub budget_s: f64,
    /// Also estimate the ranges (two more forward runs).
    pub ranges: bool,
    /// [`EstimateConfig::rate_spread`].
    pub rate_spread: f64,
    /// [`EstimateConfig::skip_steady_rounds`].
    pub skip_steady_rounds: u32,
}

impl Default for CalibrationConfig {
    fn default() -> Self {
        CalibrationConfig {
            work: KnownWork::Declared,
            every: 1,
            budget_s: 5.0,
            ranges: true,
            rate_spread: EstimateConfig::default().rate_spread,
            skip_steady_rounds: 0,
        }
    }
}

/// One job's estimate at its submission, and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimateRecord {
    /// The job.
    pub job: u32,
    /// Its name.
    pub name: String,
    /// Its application.
    pub app: String,
    /// When it was submitted.
    pub submit_s: f64,
    /// The round whose snapshot the estimate was made from.
    pub at_s: f64,
    /// Where its remaining work came from.
    pub source: WorkSource,
    /// Predicted start; `None`: not reached.
    pub start_s: Option<f64>,
    /// Predicted finish; `None`: not reached.
    pub finish_s: Option<f64>,
    /// Range of the start.
    pub start_lo_s: Option<f64>,
    /// High end of the start.
    pub start_hi_s: Option<f64>,
    /// Range of the finish.
    pub finish_lo_s: Option<f64>,
    /// High end of the finish.
    pub finish_hi_s: Option<f64>,
    /// When it really started (its first allocation's round).
    pub actual_start_s: f64,
    /// When it really finished.
    pub actual_finish_s: f64,
    /// Whether the budget cut the estimate short.
    pub cut_short: bool,
    /// Rounds the estimate simulated.
    pub rounds: u64,
    /// Wall-clock seconds it took.
    pub wall_s: f64,
}

/// The calibration's figures over all records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationSummary {
    /// The planner.
    pub policy: String,
    /// Where remaining work came from.
    pub work: KnownWork,
    /// Jobs estimated.
    pub estimated: usize,
    /// Of them, estimates the budget cut short.
    pub cut_short: usize,
    /// Median |predicted − actual start| over jobs with a predicted start, s.
    pub start_err_p50_s: f64,
    /// 90th percentile of the same, s.
    pub start_err_p90_s: f64,
    /// Median |predicted − actual finish| over jobs with a predicted finish, s.
    pub finish_err_p50_s: f64,
    /// 90th percentile of the same, s.
    pub finish_err_p90_s: f64,
    /// Mean actual wait (actual start − estimate time), s.
    pub wait_mean_s: f64,
    /// Median actual wait, s.
    pub wait_p50_s: f64,
    /// Median absolute start error ÷ mean actual wait (the target: < 0.1).
    pub start_err_over_wait: f64,
    /// Mean absolute start error ÷ mean actual wait.
    pub start_mean_err_over_wait: f64,
    /// Median of |finish error| ÷ the actual time from estimate to finish.
    pub finish_rel_err_p50: f64,
    /// Share of actual finishes inside the predicted finish range.
    pub finish_in_range: f64,
    /// Share of actual starts inside the predicted start range.
    pub start_in_range: f64,
    /// Median wall-clock seconds per estimate.
    pub wall_p50_s: f64,
    /// Total wall-clock seconds of the estimates.
    pub wall_total_s: f64,
}

/// Run the workload under `policy` as [`simulate_workload`] does, and
/// estimate each sampled job's start and finish at its submission round.
pub fn simulate_with_estimates(
    cfg: &SimConfig,
    profiles: &Profiles,
    jobs: &[WorkloadJob],
    policy: &str,
    calib: &CalibrationConfig,
) -> Result<(SimResult, Vec<EstimateRecord>, CalibrationSummary), SimError> {
    if calib.every == 0 {
        return Err(SimError::Invalid("estimates: every must be >= 1".into()));
    }
    let adaptive = PlannerTraits {
        batch: BatchPolicy::Adaptive,
        needs_oracle: false,
        honours_interference: true,
    };
    // What the simulator knows of each job: true total, batch rule, identity.
    let by_id: BTreeMap<JobId, &WorkloadJob> = jobs.iter().map(|j| (j.spec.id, j)).collect();
    let total = |j: &WorkloadJob| match j.work {
        Work::Profiled => profiles
            .get(&j.spec.app)
            .map_or(f64::NAN, |p| p.completion_progress()),
        Work::Rigid { duration_s } => duration_s,
    };
    let ecfg = estimate_config(cfg, calib);
    let mut seen: BTreeSet<JobId> = BTreeSet::new();
    let mut last: BTreeMap<JobId, (f64, f64)> = BTreeMap::new();
    let mut history: Vec<FinishedJob> = Vec::new();
    let mut records: Vec<EstimateRecord> = Vec::new();
    let mut app_models: BTreeMap<String, AppModel> = BTreeMap::new();
    let mut submitted = 0usize;
    let mut failed: Option<SimError> = None;
    let mut observer = |round: &Round, _: &Plan| {
        let now: BTreeSet<JobId> = round.jobs.iter().map(|j| j.id).collect();
        for (id, (age, gpu_s)) in &last {
            if !now.contains(id) {
                let j = by_id[id];
                history.push(FinishedJob {
                    app: j.spec.app.clone(),
                    model: j.model.clone(),
                    name: j.spec.name.clone(),
                    total_progress: total(j),
                    run_s: *age,
                    gpu_s: *gpu_s,
                });
            }
        }
        for j in &round.jobs {
            if let Some(m) = j.model {
                let model_type = j.model_type.clone();
                app_models.insert(j.app.clone(), AppModel { model: m, model_type });
            }
        }
        last = round
            .jobs
            .iter()
            .map(|j| (j.id, (j.state.age_s, j.state.attained_gpu_s)))
            .collect();
        let mut picked = Vec::new();
        for j in &round.jobs {
            if seen.insert(j.id) {
                if submitted.is_multiple_of(calib.every) {
                    picked.push(j.id);
                }
                submitted += 1;
            }
        }
        if picked.is_empty() {
            return Control::Continue;
        }
        let work = round
            .jobs
            .iter()
            .map(|rj| {
                let j = by_id[&rj.id];
                let remaining = match calib.work {
                    KnownWork::Declared => RemainingWork::declared(total(j), rj.state.progress),
                    KnownWork::History => {
                        let p = predict_work(&history, &j.spec.app, j.model.as_deref(), &j.spec.name);
                        RemainingWork::predicted(&p, rj.state.progress, rj.state.attained_gpu_s)
                    }
                };
                JobWork {
                    remaining,
                    batch_grows: batch_target(&adaptive, j) == BatchTarget::Adaptive,
                    restart_left_s: 0.0,
                }
            })
            .collect();
        let snapshot = Snapshot {
            round: round.clone(),
            work,
            next_round_s: None,
            app_models: app_models.clone(),
        };
        let e = match estimate(
            &snapshot,
            policy,
            &EstimateConfig {
                targets: Targets::Jobs(picked.clone()),
                ..ecfg.clone()
            },
        ) {
            Ok(e) => e,
            Err(err) => {
                failed = Some(err);
                return Control::Cancel;
            }
        };
        for id in picked {
            let Some(je) = e.job(id) else { continue };
            records.push(record(by_id[&id], round.now_s, je, &e));
        }
        Control::Continue
    };
    let mut planner = gpuplan_solve::registry::create(policy)?;
    let result = simulate_workload(cfg, profiles, jobs, planner.as_mut(), &mut observer);
    if let Some(e) = failed {
        return Err(e);
    }
    let r = result?;
    fill_actuals(&r, &mut records);
    let summary = summarise(policy, calib.work, &records);
    Ok((r, records, summary))
}

/// The estimator's settings for a run under `cfg`: one thread, the run's
/// limits, the calibration's budget, ranges and steady-round skipping.
fn estimate_config(cfg: &SimConfig, calib: &CalibrationConfig) -> EstimateConfig {
    EstimateConfig {
        interval_s: cfg.interval_s,
        restart_delay_s: cfg.restart_delay_s,
        budget_s: calib.budget_s,
        limits: gpuplan_solve::Limits {
            time_limit_s: cfg.time_limit_s,
            gap: cfg.gap,
            threads: 1,
            seed: cfg.seed,
            memory_limit_mb: cfg.memory_limit_mb,
        },
        ranges: calib.ranges,
        rate_spread: calib.rate_spread,
        skip_steady_rounds: calib.skip_steady_rounds,
        ..EstimateConfig::default()
    }
}

/// Job `j`'s estimate made at `at_s`, its actual start and finish not yet
/// known (NaN until [`fill_actuals`]).
fn record(j: &WorkloadJob, at_s: f64, je: &JobEstimate, e: &Estimates) -> EstimateRecord {
    EstimateRecord {
        job: j.spec.id.0,
        name: j.spec.name.clone(),
        app: j.spec.app.clone(),
        submit_s: j.spec.submit_s,
        at_s,
        source: je.source,
        start_s: je.start_s,
        finish_s: je.finish_s,
        start_lo_s: je.start_range.lo,
        start_hi_s: je.start_range.hi,
        finish_lo_s: je.finish_range.lo,
        finish_hi_s: je.finish_range.hi,
        actual_start_s: f64::NAN,
        actual_finish_s: f64::NAN,
        cut_short: je.cut_short,
        rounds: e.rounds,
        wall_s: e.wall_s,
    }
}

/// Each record's actual start (the job's first segment) and finish, from
/// the run's result; NaN for a job that never started or finished.
fn fill_actuals(r: &SimResult, records: &mut [EstimateRecord]) {
    let mut first: BTreeMap<JobId, f64> = BTreeMap::new();
    for s in &r.segments {
        let t = first.entry(s.job).or_insert(s.start_s);
        *t = t.min(s.start_s);
    }
    let done: BTreeMap<JobId, f64> = r.jobs.iter().map(|j| (j.id, j.completion_s)).collect();
    for rec in records {
        let id = JobId(rec.job);
        rec.actual_start_s = first.get(&id).copied().unwrap_or(f64::NAN);
        rec.actual_finish_s = done.get(&id).copied().unwrap_or(f64::NAN);
    }
}

/// The calibration's figures over `records`.
pub fn summarise(policy: &str, work: KnownWork, records: &[EstimateRecord]) -> CalibrationSummary {
    let sorted = |mut v: Vec<f64>| {
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        v
    };
    let start_err = sorted(
        records
            .iter()
            .filter_map(|r| r.start_s.map(|s| (s - r.actual_start_s).abs()))
            .collect(),
    );
    let finish_err = sorted(
        records
            .iter()
            .filter_map(|r| r.finish_s.map(|s| (s - r.actual_finish_s).abs()))
            .collect(),
    );
    let waits = sorted(records.iter().map(|r| r.actual_start_s - r.at_s).collect());
    let finish_rel = sorted(
        records
            .iter()
            .filter_map(|r| {
                r.finish_s
                    .map(|s| (s - r.actual_finish_s).abs() / (r.actual_finish_s - r.at_s).max(1.0))
            })
            .collect(),
    );
    let mean = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let inside = |lo: Option<f64>, hi: Option<f64>, x: f64| {
        // One interval of slack: the simulator's finish falls inside a round, starts on one.
        lo.is_some_and(|lo| x >= lo - 1e-6) && hi.is_none_or(|hi| x <= hi + 1e-6)
    };
    let share = |n: usize| {
        if records.is_empty() {
            f64::NAN
        } else {
            n as f64 / records.len() as f64
        }
    };
    let walls = sorted(records.iter().map(|r| r.wall_s).collect());
    let wait_mean = mean(&waits);
    CalibrationSummary {
        policy: policy.to_string(),
        work,
        estimated: records.len(),
        cut_short: records.iter().filter(|r| r.cut_short).count(),
        start_err_p50_s: percentile(&start_err, 50.0),
        start_err_p90_s: percentile(&start_err, 90.0),
        finish_err_p50_s: percentile(&finish_err, 50.0),
        finish_err_p90_s: percentile(&finish_err, 90.0),
        wait_mean_s: wait_mean,
        wait_p50_s: percentile(&waits, 50.0),
        start_err_over_wait: percentile(&start_err, 50.0) / wait_mean,
        start_mean_err_over_wait: mean(&start_err) / wait_mean,
        finish_rel_err_p50: percentile(&finish_rel, 50.0),
        finish_in_range: share(
            records
                .iter()
                .filter(|r| inside(r.finish_lo_s, r.finish_hi_s, r.actual_finish_s))
                .count(),
        ),
        start_in_range: share(
            records
                .iter()
                .filter(|r| inside(r.start_lo_s, r.start_hi_s, r.actual_start_s))
                .count(),
        ),
        wall_p50_s: percentile(&walls, 50.0),
        wall_total_s: walls.iter().sum(),
    }
}

/// The records as CSV (one row per estimated job, the fields of
/// [`EstimateRecord`]; an empty cell: not reached).
pub fn records_csv(records: &[EstimateRecord]) -> Result<String, SimError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in records {
        w.serialize(r)
            .map_err(|e| SimError::Invalid(format!("estimates.csv: {e}")))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| SimError::Invalid(format!("estimates.csv: {e}")))?;
    String::from_utf8(bytes).map_err(|e| SimError::Invalid(format!("estimates.csv: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rigid job (built through serde, so fields added later keep their defaults).
    fn rigid(id: u32, submit_s: f64, gpus: u32, duration_s: f64) -> WorkloadJob {
        serde_json::from_value(serde_json::json!({
            "spec": {
                "id": id, "name": format!("job-{id}"), "app": "rigid", "submit_s": submit_s,
                "requested_gpus": gpus, "batch_size": 1, "min_gpus": gpus, "max_gpus": gpus,
                "preemptible": true,
            },
            "work": { "kind": "rigid", "duration_s": duration_s },
        }))
        .unwrap()
    }

    fn cfg() -> SimConfig {
        SimConfig {
            cluster: gpuplan_core::Cluster::homogeneous(1, 2, gpuplan_core::DEFAULT_GPU_TYPE),
            ..SimConfig::default()
        }
    }

    /// Under FIFO with one-GPU jobs no later arrival overtakes a job (a
    /// larger one could be overtaken: FIFO skips ahead to what fits), so
    /// with declared totals every estimate at submission is what happens.
    #[test]
    fn declared_rigid_jobs_under_fifo_are_estimated_exactly() {
        let jobs = vec![
            rigid(0, 0.0, 2, 500.0),
            rigid(1, 30.0, 1, 300.0),
            rigid(2, 70.0, 1, 200.0),
            rigid(3, 100.0, 1, 100.0),
            rigid(4, 130.0, 1, 400.0),
        ];
        let profiles = Profiles::new();
        let calib = CalibrationConfig {
            budget_s: 60.0,
            ..CalibrationConfig::default()
        };
        let (r, recs, sum) = simulate_with_estimates(&cfg(), &profiles, &jobs, "fifo", &calib).unwrap();
        assert_eq!(recs.len(), 5);
        assert_eq!(r.jobs.len(), 5);
        for x in &recs {
            assert_eq!(x.source, WorkSource::Declared);
            assert_eq!(x.start_s, Some(x.actual_start_s), "{x:?}");
            let f = x.finish_s.unwrap();
            assert!((f - x.actual_finish_s).abs() < 1e-6, "{x:?}");
        }
        assert_eq!(sum.start_err_p90_s, 0.0);
        assert!(sum.finish_err_p90_s < 1e-6);
        assert_eq!(sum.finish_in_range, 1.0);
        assert!(sum.wait_mean_s > 0.0);
        let csv = records_csv(&recs).unwrap();
        assert_eq!(csv.lines().count(), 6);
        assert!(
            csv.starts_with("job,name,app,submit_s,at_s,source,start_s"),
            "{csv}"
        );
    }

    #[test]
    fn history_learns_from_finished_jobs_and_every_samples() {
        let jobs: Vec<WorkloadJob> = (0..6).map(|i| rigid(i, 400.0 * f64::from(i), 1, 300.0)).collect();
        let calib = CalibrationConfig {
            work: KnownWork::History,
            every: 2,
            budget_s: 60.0,
            ranges: true,
            rate_spread: 0.0,
            skip_steady_rounds: 0,
        };
        let (_, recs, sum) =
            simulate_with_estimates(&cfg(), &Profiles::new(), &jobs, "fifo", &calib).unwrap();
        // Jobs 0, 2, 4: the first has no history (no finish), the others
        // match the finished jobs of the same application exactly.
        assert_eq!(recs.iter().map(|r| r.job).collect::<Vec<_>>(), vec![0, 2, 4]);
        assert_eq!(recs[0].source, WorkSource::Unknown);
        assert_eq!(recs[0].finish_s, None);
        assert_eq!(recs[1].source, WorkSource::History);
        assert!((recs[1].finish_s.unwrap() - recs[1].actual_finish_s).abs() < 1e-6);
        assert_eq!(sum.work, KnownWork::History);
        assert_eq!(sum.estimated, 3);
    }
}
