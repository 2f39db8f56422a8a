//! Start and finish estimates (docs/estimates.md): the daemon's part is a
//! snapshot of the live state, taken under its lock from copies (the job
//! table, the last devices), so that the forward simulation
//! ([`gpuplan_sim::estimate`]) runs off the lock with the planner that
//! will decide. Nothing here changes the daemon: a what-if's job is added
//! to the copy only.

use std::collections::BTreeSet;

use gpuplan_core::{JobId, JobState, RoundJob};
use gpuplan_sim::{
    predict_work, EstimateConfig, FinishedJob, JobWork, RemainingWork, Snapshot, Targets, WorkUnit,
};
use gpuplan_solve::{round_job, Agent, FitMemo};

use super::Daemon;
use crate::jobs::{JobRecord, JobStatus};
use crate::round::Rounds;
use crate::spec::JobSubmission;
use crate::ExecError;

/// What an estimate runs on, taken under the daemon's lock: everything it
/// needs and nothing shared with the daemon.
pub struct EstimateInput {
    /// The live state as the next round would plan it.
    pub snapshot: Snapshot,
    /// The daemon's planner, by its registry name.
    pub planner: String,
    /// Interval, restart delay, budget, the planner's limits.
    pub cfg: EstimateConfig,
    /// The round the snapshot follows (for the cache and `stale`).
    pub round: u64,
    /// A what-if's job and its work, not in the snapshot.
    pub extra: Option<(RoundJob, JobWork)>,
}

impl Daemon {
    /// A snapshot for an estimate of every job (and of `what_if`'s job,
    /// which gets the id the next submission would), within `budget_s`
    /// of wall-clock time. `Ok(None)` when there is nothing to estimate
    /// (no healthy GPU, or no job and no what-if).
    pub fn estimate_input(
        &self,
        what_if: Option<&JobSubmission>,
        budget_s: f64,
    ) -> Result<Option<EstimateInput>, ExecError> {
        let now = self.clock.now_unix_s();
        let round = self.rounds.counter().load(std::sync::atomic::Ordering::Relaxed);
        let mut jobs = self.jobs.clone();
        let mut rounds = Rounds::new(self.rounds.backend());
        let begun = rounds.begin();
        let collected = rounds.collect(self.rounds.gpus().to_vec(), &mut jobs, &mut BTreeSet::new(), now);
        let params = gpuplan_core::PolicyParams {
            even_nodes: self.even_nodes().into(),
            ..self.cfg.params
        };
        let colocation = (self.cfg.params.sharing > 1).then(|| self.colocation());
        let mut memo = FitMemo::default();
        let history = history(self.jobs.values());
        let prepared = rounds.build(
            begun,
            collected,
            &mut jobs,
            &mut memo,
            params,
            colocation,
            &self.cfg.queues,
            now,
        );
        let extra = what_if.map(|s| self.what_if_job(s, now, &history, &mut memo));
        let round_now = match prepared {
            Some(p) => p.round,
            // No job to plan: an empty round on the healthy GPUs, for a what-if.
            None => {
                let cluster = crate::round::device_cluster(self.rounds.gpus()).cluster;
                if extra.is_none() || cluster.nodes.is_empty() {
                    return Ok(None);
                }
                gpuplan_core::Round {
                    now_s: now,
                    cluster,
                    jobs: Vec::new(),
                    params,
                    variability: None,
                    colocation: None,
                    reserved: Vec::new(),
                    queues: self.cfg.queues.clone(),
                }
            }
        };
        let work = round_now
            .jobs
            .iter()
            .map(|rj| {
                let j = &jobs[&rj.id];
                JobWork {
                    batch_grows: batch_grows(&j.spec),
                    ..JobWork::new(remaining(j, &history))
                }
            })
            .collect();
        let cfg = EstimateConfig {
            interval_s: self.cfg.interval_s,
            restart_delay_s: self.cfg.params.restart_penalty_s,
            budget_s,
            limits: gpuplan_solve::Limits {
                time_limit_s: self.cfg.limits.time_limit_s.min(budget_s),
                ..self.cfg.limits
            },
            targets: Targets::All,
            // Rounds in which nothing finishes or arrives are not re-planned
            // (up to 10 in a row): a fifth of the planner time for the same
            // answer on the calibration runs (docs/estimates.md).
            skip_steady_rounds: 10,
            ..EstimateConfig::default()
        };
        let mut snapshot = Snapshot::new(round_now, work);
        snapshot.next_round_s = Some(self.last_tick_unix_s.max(now));
        // The rate of a job that has not reported yet: the last fitted model
        // of its application (finished jobs' too), as the simulator borrows.
        for j in jobs.values_mut() {
            let (Some(app), true) = (j.spec.app.clone(), j.agent.is_fitted()) else {
                continue;
            };
            if let Some(model) = j.model(&mut memo) {
                snapshot.app_models.insert(
                    app,
                    gpuplan_sim::AppModel {
                        model,
                        model_type: None,
                    },
                );
            }
        }
        Ok(Some(EstimateInput {
            snapshot,
            planner: self.cfg.planner.clone(),
            cfg,
            round,
            extra,
        }))
    }

    /// A submission as the round would see it once queued: the id the next
    /// submission gets, no measurements, its declared or predicted work.
    fn what_if_job(
        &self,
        s: &JobSubmission,
        now: f64,
        history: &[FinishedJob],
        memo: &mut FitMemo,
    ) -> (RoundJob, JobWork) {
        let id = JobId(self.next_id);
        let probe = JobRecord::queued(id, s.clone(), String::new(), now, None);
        let facts = crate::round::job_facts(&probe, &self.cfg.queues);
        let state = JobState {
            batch_size: s.batch_size,
            ..JobState::default()
        };
        let rj = round_job(facts, state, &mut Agent::default(), None, memo);
        let work = JobWork {
            batch_grows: batch_grows(s),
            ..JobWork::new(remaining(&probe, history))
        };
        (rj, work)
    }
}

/// Whether the job's batch may grow (the daemon's rule: a `max_batch_size`
/// above its `batch_size`).
fn batch_grows(s: &JobSubmission) -> bool {
    s.max_batch_size.is_some_and(|m| m > s.batch_size)
}

/// A job's remaining work, from the best source there is: its declared
/// total, else finished jobs like it, else unknown (a range from all).
///
/// Jobs report progress in examples at their initial batch (the protocol's
/// unit, `gpuplan.job`'s); the forward simulation counts Pollux's
/// scale-invariant iterations, one per M0 examples, so progress is divided
/// by the job's `batch_size`.
fn remaining(j: &JobRecord, history: &[FinishedJob]) -> RemainingWork {
    let m0 = f64::from(j.spec.batch_size.max(1));
    if let Some(total) = j.total_progress {
        return RemainingWork::declared(total / m0, j.progress / m0);
    }
    let app = j.spec.app.as_deref().unwrap_or("");
    let p = predict_work(history, app, j.spec.model.as_deref(), &j.spec.name);
    let r = RemainingWork::predicted(&p, j.progress, j.attained_gpu_s);
    match r.unit {
        WorkUnit::Progress => RemainingWork {
            expected: r.expected / m0,
            lo: r.lo / m0,
            hi: r.hi / m0,
            ..r
        },
        WorkUnit::GpuSeconds => r,
    }
}

/// The journal's completed jobs, as the history predictor reads them.
fn history<'a>(jobs: impl Iterator<Item = &'a JobRecord>) -> Vec<FinishedJob> {
    jobs.filter(|j| j.status == JobStatus::Completed && j.progress > 0.0)
        .map(|j| FinishedJob {
            app: j.spec.app.clone().unwrap_or_default(),
            model: j.spec.model.clone(),
            name: j.spec.name.clone(),
            total_progress: j.progress,
            run_s: j.finished_unix_s.map_or(0.0, |f| (f - j.submit_unix_s).max(0.0)),
            gpu_s: j.attained_gpu_s,
        })
        .collect()
}

/// What [`run`] found: every job's estimate, and a what-if's where asked.
pub enum Outcome {
    /// Every job of the snapshot.
    Estimates(gpuplan_sim::Estimates),
    /// The job not submitted, and what it would do to the others.
    WhatIf(Box<gpuplan_sim::WhatIf>),
}

/// The forward simulation of `input`, off the daemon's lock (it may take
/// the whole budget).
pub fn run(input: EstimateInput) -> Result<Outcome, ExecError> {
    let EstimateInput {
        snapshot,
        planner,
        cfg,
        extra,
        ..
    } = input;
    let err = |e: gpuplan_sim::SimError| ExecError::Estimate(e.to_string());
    match extra {
        None => gpuplan_sim::estimate(&snapshot, &planner, &cfg)
            .map(Outcome::Estimates)
            .map_err(err),
        Some((job, work)) => gpuplan_sim::what_if(&snapshot, job, work, &planner, &cfg)
            .map(|w| Outcome::WhatIf(Box::new(w)))
            .map_err(err),
    }
}
