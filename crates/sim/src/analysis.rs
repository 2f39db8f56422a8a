//! Metrics derived from a finished run, beyond the summary: queueing delay,
//! JCT per application and finish-time fairness. `gpuplan simulate
//! --analysis` and the browser explorer both compute them here, so the two
//! show the same numbers.

use std::collections::BTreeMap;

use gpuplan_core::JobId;
use serde::{Deserialize, Serialize};

use crate::data::Profiles;
use crate::engine::{simulate_workload, Control, SimConfig};
use crate::metrics::{percentile, SimResult};
use crate::workload::WorkloadJob;
use crate::SimError;

/// Mean and percentiles of one quantity over jobs (numpy's percentile).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile, interpolated.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// `None` for no values.
    pub fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Spread {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: percentile(&v, 50.0),
            p99: percentile(&v, 99.0),
            max: v[v.len() - 1],
        })
    }
}

/// JCT of the jobs of one application (the workload's `app` column).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppJct {
    /// The application.
    pub app: String,
    /// Its jobs in the workload.
    pub jobs: usize,
    /// Their job completion times.
    pub jct_s: Spread,
}

/// One job's derived numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobAnalysis {
    /// The job, as in [`crate::JobResult::id`].
    pub id: JobId,
    /// First time it held GPUs minus its submit time.
    pub queueing_delay_s: f64,
    /// Its JCT simulated alone (see [`Fairness::isolated`]); `None` where not computed.
    pub isolated_jct_s: Option<f64>,
    /// Finish-time fairness ρ = JCT / isolated JCT.
    pub rho: Option<f64>,
}

/// What ρ divides by. Themis' T_id is the JCT on a 1/N share of the cluster
/// (N contending jobs); that share is not a placement the engine can run, so
/// we divide by what it can: the job alone on the cluster at the GPUs it
/// asked for (fifo: no queue, no other job, same interval and restart delay).
pub(crate) const ISOLATED: &str =
    "JCT simulated alone on the same cluster at its requested GPUs (fifo, no other job); \
     Themis divides by a 1/N share instead, which the engine cannot place";

/// Finish-time fairness over the jobs: ρ > 1 means a job finished later
/// than it would have alone at the size it asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// What ρ divides by, in words, so a reader of the JSON knows it is
    /// not Themis' 1/N share.
    pub isolated: String,
    /// ρ = JCT / isolated JCT over the jobs.
    pub rho: Spread,
    /// Jobs with ρ > 1.
    pub unfair_jobs: usize,
}

/// A job left out of the fairness figures: it could not run alone (see
/// [`isolated_jcts`]). The run's own results stand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The job, as in [`crate::JobResult::id`].
    pub id: JobId,
    /// Its name in the workload.
    pub name: String,
    /// Why it has no isolated JCT.
    pub reason: String,
}

/// Rounds in a row a job alone may wait with no GPUs before its isolated
/// run is given up: alone under fifo it starts in its first round or never
/// (it asks more GPUs than the cluster, or its queue, can give).
pub(crate) const ALONE_STALL_ROUNDS: usize = 5;

/// A run's derived metrics ([`analyse`]), with fairness once isolated
/// JCTs are known ([`Analysis::with_fairness`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// First time a job held GPUs minus its submit time, over the jobs.
    pub queueing_delay_s: Spread,
    /// By application name, sorted.
    pub per_app: Vec<AppJct>,
    /// `None` until [`Analysis::with_fairness`] adds it (and while no job
    /// could run alone).
    pub fairness: Option<Fairness>,
    /// Jobs that could not run alone, named, and left out of `fairness`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// In the order of the run's jobs.
    pub jobs: Vec<JobAnalysis>,
}

/// Queueing delay and JCT per application, from the run alone.
pub fn analyse(r: &SimResult) -> Analysis {
    let mut first: BTreeMap<JobId, f64> = BTreeMap::new();
    for s in &r.segments {
        let t = first.entry(s.job).or_insert(s.start_s);
        *t = t.min(s.start_s);
    }
    let jobs: Vec<JobAnalysis> = r
        .jobs
        .iter()
        .map(|j| JobAnalysis {
            id: j.id,
            // A job that never held GPUs finished at once (no work): no wait.
            queueing_delay_s: first.get(&j.id).map_or(0.0, |&t| (t - j.submit_s).max(0.0)),
            isolated_jct_s: None,
            rho: None,
        })
        .collect();
    let mut by_app: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for j in &r.jobs {
        by_app.entry(j.app.as_str()).or_default().push(j.jct_s);
    }
    let nan = Spread {
        mean: f64::NAN,
        p50: f64::NAN,
        p99: f64::NAN,
        max: f64::NAN,
    };
    Analysis {
        queueing_delay_s: Spread::of(jobs.iter().map(|j| j.queueing_delay_s).collect()).unwrap_or(nan),
        per_app: by_app
            .into_iter()
            .map(|(app, v)| AppJct {
                app: app.to_string(),
                jobs: v.len(),
                jct_s: Spread::of(v).unwrap_or(nan),
            })
            .collect(),
        fairness: None,
        left_out: Vec::new(),
        jobs,
    }
}

/// Each job's JCT simulated alone (see [`Fairness::isolated`]), in the order of
/// `jobs`; `Err(reason)` for a job that cannot run alone: it waits
/// [`ALONE_STALL_ROUNDS`] rounds with no GPUs (it asks more than the cluster
/// or its queue gives), or its run fails. Such a job never fails the whole:
/// [`Analysis::with_fairness`] names it and leaves it out. `keep_going` is
/// asked before each job; [`Control::Cancel`] stops with [`SimError::Cancelled`].
pub fn isolated_jcts(
    cfg: &SimConfig,
    profiles: &Profiles,
    jobs: &[WorkloadJob],
    keep_going: &mut dyn FnMut(usize) -> Control,
) -> Result<Vec<Result<f64, String>>, SimError> {
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        if keep_going(i) == Control::Cancel {
            return Err(SimError::Cancelled);
        }
        let mut planner = gpuplan_solve::registry::create("fifo")?;
        let id = job.spec.id;
        let mut idle = 0usize;
        let mut stalled = false;
        let r = simulate_workload(
            cfg,
            profiles,
            std::slice::from_ref(job),
            planner.as_mut(),
            &mut |round, plan| {
                let waiting = round.jobs.iter().any(|j| j.id == id)
                    && plan.allocations.get(&id).is_none_or(|a| a.is_empty());
                idle = if waiting { idle + 1 } else { 0 };
                if idle >= ALONE_STALL_ROUNDS {
                    stalled = true;
                    Control::Cancel
                } else {
                    Control::Continue
                }
            },
        );
        out.push(match r {
            Ok(r) => Ok(r.jobs[0].jct_s),
            Err(SimError::Cancelled) if stalled => Err(format!(
                "never got GPUs alone under fifo (asks {} GPUs; {} rounds without any)",
                job.spec.requested_gpus, ALONE_STALL_ROUNDS
            )),
            Err(e) => Err(e.to_string()),
        });
    }
    Ok(out)
}

impl Analysis {
    /// Adds finish-time fairness, given each job's isolated JCT in the
    /// order of the run's jobs (as [`isolated_jcts`] gives them); a job
    /// without one is named in [`Analysis::left_out`] and has no ρ.
    pub fn with_fairness(mut self, r: &SimResult, isolated: &[Result<f64, String>]) -> Analysis {
        let mut rhos = Vec::with_capacity(isolated.len());
        for ((a, j), iso) in self.jobs.iter_mut().zip(&r.jobs).zip(isolated) {
            let iso = match iso {
                Ok(iso) => *iso,
                Err(reason) => {
                    self.left_out.push(LeftOut {
                        id: j.id,
                        name: j.name.clone(),
                        reason: reason.clone(),
                    });
                    continue;
                }
            };
            a.isolated_jct_s = Some(iso);
            if iso > 0.0 {
                let rho = j.jct_s / iso;
                a.rho = Some(rho);
                rhos.push(rho);
            }
        }
        let unfair_jobs = rhos.iter().filter(|&&x| x > 1.0).count();
        self.fairness = Spread::of(rhos).map(|rho| Fairness {
            isolated: ISOLATED.to_string(),
            rho,
            unfair_jobs,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data;

    /// A native workload file's jobs, duration-only ones rigid.
    fn jobs_of(text: &str, profiles: &Profiles) -> Vec<crate::WorkloadJob> {
        let t = crate::trace::load(
            crate::trace::Format::Gpuplan,
            "t.csv",
            text.as_bytes(),
            &Default::default(),
        )
        .unwrap();
        crate::trace::workload::to_workload(&t, crate::trace::workload::DurationJobs::Rigid, profiles, 0)
            .unwrap()
    }

    fn one_node_of_four() -> SimConfig {
        SimConfig {
            cluster: gpuplan_core::Cluster::homogeneous(1, 4, gpuplan_core::DEFAULT_GPU_TYPE),
            ..Default::default()
        }
    }

    #[test]
    fn queueing_fairness_and_apps_of_a_small_run() {
        let profiles = data::pollux_profiles().unwrap();
        let text =
            "name,submit_s,gpus,app,batch_size,duration_s\na,0,4,,,600\nb,0,4,,,600\nc,30,2,cifar10,2048,\n";
        let jobs = jobs_of(text, &profiles);
        // One node of 4 GPUs: a and b cannot run at once.
        let cfg = one_node_of_four();
        let mut planner = gpuplan_solve::registry::create("fifo").unwrap();
        let r = simulate_workload(&cfg, &profiles, &jobs, planner.as_mut(), &mut |_, _| {
            Control::Continue
        })
        .unwrap();
        let iso = isolated_jcts(&cfg, &profiles, &jobs, &mut |_| Control::Continue).unwrap();
        let a = analyse(&r).with_fairness(&r, &iso);
        // a starts in the first round (t = 60 s); b waits for a as well
        // (600 s of work + 30 s restart delay, to the next round).
        assert_eq!(a.jobs[0].queueing_delay_s, 60.0);
        assert!(a.jobs[1].queueing_delay_s >= 60.0 + 630.0, "{:?}", a.jobs[1]);
        // Alone, a and b take the same; shared, b takes longer: ρ_b > 1 = ρ_a.
        assert_eq!(iso[0], iso[1]);
        assert!(iso.iter().all(|x| x.is_ok()), "{iso:?}");
        assert_eq!(a.jobs[0].rho, Some(1.0));
        assert!(a.jobs[1].rho.unwrap() > 1.5);
        let f = a.fairness.as_ref().unwrap();
        assert!(f.unfair_jobs >= 1 && f.rho.max >= a.jobs[1].rho.unwrap());
        let apps: Vec<(&str, usize)> = a.per_app.iter().map(|x| (x.app.as_str(), x.jobs)).collect();
        assert_eq!(apps.len(), 2, "{apps:?}");
        assert_eq!(apps.iter().map(|x| x.1).sum::<usize>(), 3);
        let cancelled = isolated_jcts(&cfg, &profiles, &jobs, &mut |i| {
            if i == 1 {
                Control::Cancel
            } else {
                Control::Continue
            }
        });
        assert!(cancelled.is_err());
    }

    /// Issue 54: a job that cannot run alone (it asks 8 GPUs of 4, and fifo
    /// never shrinks it) is named and left out; the run's figures stand.
    #[test]
    fn a_job_that_cannot_run_alone_is_named_and_left_out() {
        let profiles = data::pollux_profiles().unwrap();
        let text =
            "name,submit_s,gpus,app,batch_size,duration_s\nbig,0,8,cifar10,2048,\nsmall,0,2,cifar10,2048,\n";
        let jobs = jobs_of(text, &profiles);
        let cfg = one_node_of_four();
        // greedy fits the 8-GPU job on 4 GPUs; fifo alone never starts it.
        let mut planner = gpuplan_solve::registry::create("greedy").unwrap();
        let r = simulate_workload(&cfg, &profiles, &jobs, planner.as_mut(), &mut |_, _| {
            Control::Continue
        })
        .unwrap();
        let iso = isolated_jcts(&cfg, &profiles, &jobs, &mut |_| Control::Continue).unwrap();
        assert!(
            iso[0].as_ref().unwrap_err().contains("never got GPUs alone"),
            "{iso:?}"
        );
        assert!(iso[1].is_ok(), "{iso:?}");
        let a = analyse(&r).with_fairness(&r, &iso);
        assert_eq!(a.left_out.len(), 1);
        assert_eq!(a.left_out[0].name, "big");
        assert_eq!(a.jobs[0].rho, None);
        assert!(a.jobs[1].rho.is_some());
        let f = a.fairness.as_ref().unwrap();
        assert_eq!(f.rho.mean, a.jobs[1].rho.unwrap());
        // Serialized only when some job is left out.
        assert!(serde_json::to_string(&a).unwrap().contains("left_out"));
        assert!(!serde_json::to_string(&analyse(&r)).unwrap().contains("left_out"));
    }
}
