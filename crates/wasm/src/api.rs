//! The explorer's API in plain Rust (JSON strings in and out), so it is
//! tested natively; `lib.rs` only wraps it for wasm-bindgen. A scenario's
//! run lives here; the scenario itself in `scenario`, what the editor lists
//! in `catalog`, the round inspector in `inspect`, and below them the
//! bundled workloads (`bundled`), the kept runs (`runs`) and the error
//! (`error`).

use std::cell::RefCell;

use gpuplan_core::{Cluster, Plan, Round};
use gpuplan_sim::{
    analyse, isolated_jcts, pollux_profiles, simulate_workload, Analysis, Control, JobResult, Profiles,
    RoundRecord, Segment, Summary,
};
use serde::Serialize;

mod bundled;
mod catalog;
mod error;
mod inspect;
mod runs;
mod scenario;

pub use catalog::{catalog, BrowserLimits, Catalog, FormatInfo, PolicyInfo, WorkloadInfo};
pub use error::ApiError;
use error::{invalid, to_json};
pub use inspect::{inspect, resolve, solve_round, InspectJob, InspectOut, SharedGpu, SolveOpts, SpeedupRow};
use runs::{keep_run, KeptRounds};
pub use scenario::{parse_cluster, Scenario, Upload, MAX_GPUS, MAX_JOBS, MAX_NODES};

/// Per-round facts beyond the simulator's record: the solver's own numbers.
#[derive(Debug, Clone, Serialize)]
pub struct RoundInfo {
    /// The simulator's record of the round.
    #[serde(flatten)]
    pub record: RoundRecord,
    /// The planner's own bound on the objective, when it has one (MIP).
    pub bound: Option<f64>,
    /// The planner's relative gap, when it reports one.
    pub gap: Option<f64>,
    /// Why the plan fell back, or why some jobs could not be served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A finished run, as the page draws it.
#[derive(Debug, Serialize)]
pub struct RunOut {
    /// Handle for [`inspect`]; rounds of the last few runs are kept.
    pub run_id: u32,
    /// The scenario as run, defaults filled in.
    pub scenario: Scenario,
    /// Average JCT, makespan and the other headline numbers.
    pub summary: Summary,
    /// GPUs in the cluster.
    pub total_gpus: u32,
    /// The cluster as run (variability drawn).
    pub cluster: Cluster,
    /// Each job's result, as `gpuplan simulate` writes it.
    pub jobs: Vec<JobResult>,
    /// Each round's record and solver numbers.
    pub rounds: Vec<RoundInfo>,
    /// Who held which GPUs when, for the timeline.
    pub segments: Vec<Segment>,
    /// Queueing delay, JCT per application and, with
    /// [`Scenario::fairness`], finish-time fairness: the numbers `gpuplan
    /// simulate --analysis` prints.
    pub analysis: Analysis,
    /// Goodput over time: (time_s, jobs' worth of work done per hour in the
    /// interval ending then): sim's [`gpuplan_sim::SimResult::work_rate`].
    pub work_rate: Vec<(f64, f64)>,
    /// Under queues, each queue's figures (as `gpuplan simulate --queues`);
    /// each round's `queue_gpus` follows their order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<gpuplan_sim::QueueSummary>,
    /// With [`Scenario::estimates`]: each job's predicted start and finish
    /// at its submission and its actual ones, and their calibration
    /// figures, as `gpuplan simulate --estimates` writes them
    /// (estimates.csv, estimates.json).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimates: Option<EstimatesOut>,
    /// What `gpuplan simulate` says about the inputs on stderr: rows
    /// skipped (`--skip-bad-rows`), jobs shrunk (`--shrink-to-fit`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The MIP solvers the rounds' plans ran (`microlp` here; the CLI runs
    /// HiGHS), each with its count of rounds; empty when no round solved a MIP.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub solvers: std::collections::BTreeMap<String, usize>,
    /// With [`Scenario::round_log`]: one line per round, as `simulate
    /// --round-log` writes them (for `compare-rounds`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub round_log: Vec<gpuplan_sim::RoundLog>,
}

/// The estimates of a run ([`gpuplan_sim::simulate_with_estimates`]).
#[derive(Debug, Serialize)]
pub struct EstimatesOut {
    /// One per estimated job, as estimates.csv's rows.
    pub records: Vec<gpuplan_sim::EstimateRecord>,
    /// As estimates.json.
    pub summary: gpuplan_sim::CalibrationSummary,
}

/// Progress after a round, as the progress callback receives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Rounds done.
    pub round: usize,
    /// Simulated time reached.
    pub now_s: f64,
    /// Jobs finished; after the run, jobs simulated alone for fairness.
    pub done_jobs: usize,
    /// Jobs in the workload.
    pub total_jobs: usize,
    /// After the run: each job is simulated alone (finish-time fairness).
    pub alone: bool,
}

thread_local! {
    static PROFILES: RefCell<Option<Profiles>> = const { RefCell::new(None) };
}

fn with_profiles<T>(f: impl FnOnce(&Profiles) -> Result<T, ApiError>) -> Result<T, ApiError> {
    PROFILES.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(pollux_profiles()?);
        }
        f(slot.as_ref().expect("filled above"))
    })
}

/// Parse the bundled profiles now (the first run would otherwise pay for it).
pub fn warm_up() -> Result<(), ApiError> {
    with_profiles(|_| Ok(()))
}

/// Parse a scenario, reporting a bad key or value by line and column.
pub fn parse_scenario(json: &str) -> Result<Scenario, ApiError> {
    serde_json::from_str(json).map_err(|e| invalid(format!("scenario:{}:{}: {e}", e.line(), e.column())))
}

/// Run a scenario. `progress` is called after every round; returning
/// [`Control::Cancel`] stops the run with [`ApiError::Cancelled`].
pub fn run(scenario_json: &str, progress: &mut dyn FnMut(Progress) -> Control) -> Result<String, ApiError> {
    let scenario = parse_scenario(scenario_json)?;
    let out = run_scenario(&scenario, progress)?;
    to_json(&out)
}

/// A simulation error as the browser's: a cancelled run is not a failure.
fn cancelled(e: gpuplan_sim::SimError) -> ApiError {
    match e {
        gpuplan_sim::SimError::Cancelled => ApiError::Cancelled,
        other => other.into(),
    }
}

/// [`run`] without the JSON step (native tests compare it with the CLI path).
pub fn run_scenario(
    scenario: &Scenario,
    progress: &mut dyn FnMut(Progress) -> Control,
) -> Result<RunOut, ApiError> {
    let mut cfg = scenario.config()?;
    cfg.round_log = scenario.round_log;
    let calibration = scenario.calibration()?;
    let mut planner = scenario.planner(&cfg)?;
    with_profiles(|profiles| {
        let (jobs, workload_name, notes) = scenario.jobs_noted(profiles)?;
        let mut submits: Vec<f64> = jobs.iter().map(|j| j.spec.submit_s).collect();
        submits.sort_by(f64::total_cmp);
        let total = jobs.len();
        let mut kept: KeptRounds = Vec::new();
        let mut observer = |round: &Round, plan: &Plan| {
            let submitted = submits.partition_point(|&s| s <= round.now_s);
            let p = Progress {
                round: kept.len(),
                now_s: round.now_s,
                done_jobs: submitted.saturating_sub(round.jobs.len()),
                total_jobs: total,
                alone: false,
            };
            kept.push((round.clone(), plan.clone()));
            progress(p)
        };
        let mut r =
            simulate_workload(&cfg, profiles, &jobs, planner.as_mut(), &mut observer).map_err(cancelled)?;
        r.summary.workload = workload_name;
        // Each job alone, for finish-time fairness, when asked; Cancel still
        // works here, and a job that cannot run alone is named, never fatal.
        let mut analysis = analyse(&r);
        if scenario.fairness {
            let isolated = isolated_jcts(&cfg, profiles, &jobs, &mut |i| {
                progress(Progress {
                    round: kept.len(),
                    now_s: r.rounds.last().map_or(0.0, |x| x.time_s),
                    done_jobs: i,
                    total_jobs: total,
                    alone: true,
                })
            })
            .map_err(cancelled)?;
            analysis = analysis.with_fairness(&r, &isolated);
        }
        // Estimates: the run once more through the CLI's own calibration
        // path (`simulate --estimates`, its settings), so the page's records
        // are the CLI's; its results are the run's (the estimates only observe).
        let estimates = if scenario.estimates {
            if progress(Progress {
                round: kept.len(),
                now_s: r.rounds.last().map_or(0.0, |x| x.time_s),
                done_jobs: total,
                total_jobs: total,
                alone: false,
            }) == Control::Cancel
            {
                return Err(ApiError::Cancelled);
            }
            let (_, records, summary) =
                gpuplan_sim::simulate_with_estimates(&cfg, profiles, &jobs, &scenario.policy, &calibration)
                    .map_err(|e| invalid(format!("estimates: {e}")))?;
            Some(EstimatesOut { records, summary })
        } else {
            None
        };
        let work_rate = r.work_rate.clone();
        let mut solvers = std::collections::BTreeMap::new();
        for (_, plan) in &kept {
            if let Some(s) = &plan.solver {
                *solvers.entry(s.clone()).or_insert(0) += 1;
            }
        }
        let round_log = std::mem::take(&mut r.round_log);
        let rounds = r
            .rounds
            .into_iter()
            .zip(&kept)
            .map(|(record, (_, plan))| RoundInfo {
                record,
                bound: plan.bound,
                gap: plan.gap,
                reason: plan.reason.clone(),
            })
            .collect();
        let run_id = keep_run(kept);
        Ok(RunOut {
            run_id,
            scenario: scenario.clone(),
            summary: r.summary,
            total_gpus: cfg.cluster.total_gpus(),
            cluster: cfg.cluster.clone(),
            jobs: r.jobs,
            rounds,
            segments: r.segments,
            analysis,
            work_rate,
            queues: r.queues,
            estimates,
            notes,
            solvers,
            round_log,
        })
    })
}

/// Every round's input of a kept run, one JSON line each (line k is the
/// round `simulate --dump-rounds DIR` writes as `round-{k:05}.json`, in the
/// `gpuplan plan --input` format).
pub fn dump_rounds(run_id: u32) -> Result<String, ApiError> {
    runs::RUNS.with(|runs| {
        let runs = runs.borrow();
        let (_, rounds) = runs.iter().find(|(id, _)| *id == run_id).ok_or_else(|| {
            invalid(format!(
                "run {run_id} is no longer kept (the last {} runs are); run it again",
                runs::KEPT_RUNS
            ))
        })?;
        let mut out = String::new();
        for (round, _) in rounds {
            out.push_str(&to_json(round)?);
            out.push('\n');
        }
        Ok(out)
    })
}

/// Two round logs (JSON lines, as `simulate --round-log` writes them) side
/// by side, as `gpuplan compare-rounds A B --window W --format json`.
pub fn compare_rounds(a: &str, b: &str, window: usize) -> Result<String, ApiError> {
    let read = |name: &str, text: &str| {
        gpuplan_sim::roundlog::parse(text).map_err(|(line, e)| invalid(format!("{name}:{line}: {e}")))
    };
    let (la, lb) = (read("a", a)?, read("b", b)?);
    to_json(&gpuplan_sim::roundlog::compare(&la, &lb, window))
}

#[cfg(test)]
mod tests {
    use super::bundled::bundled;
    use super::catalog::catalog_of;
    use super::inspect::inspect_round;
    use super::runs::RUNS;
    use super::*;
    use gpuplan_core::{Placement, Sticky};
    use gpuplan_sim::SimConfig;
    use gpuplan_solve::registry;

    fn quiet(_: Progress) -> Control {
        Control::Continue
    }

    #[test]
    fn catalog_lists_every_bundled_workload_and_planner() {
        let c: serde_json::Value = serde_json::from_str(&catalog().unwrap()).unwrap();
        let ids: Vec<&str> = c["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 40);
        assert!(ids.contains(&"workloads/workload-6"));
        assert!(ids.contains(&"workloads-realistic/workload-8"));
        let profiles = pollux_profiles().unwrap();
        for w in c["workloads"].as_array().unwrap() {
            let id = w["id"].as_str().unwrap();
            let jobs =
                gpuplan_sim::parse_pollux_workload(id, bundled(id).unwrap().as_bytes(), &profiles).unwrap();
            assert_eq!(w["jobs"], jobs.len(), "{id}");
        }
        assert!(c["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "pollux-mip"));
        assert_eq!(c["defaults"]["policy"], "tiresias");
    }

    #[test]
    fn the_catalog_explains_every_planner_from_the_registry() {
        let c: serde_json::Value = serde_json::from_str(&catalog().unwrap()).unwrap();
        let info = c["policy_info"].as_array().unwrap();
        assert_eq!(info.len(), registry::names().len());
        for (i, e) in registry::entries().iter().enumerate() {
            assert_eq!(c["policies"][i], e.name);
            assert_eq!(info[i]["name"], e.name);
            assert_eq!(info[i]["description"], e.description);
        }
        let by_name = |n: &str| info.iter().find(|p| p["name"] == n).unwrap();
        assert_eq!(
            by_name("gpuplan-mip")["params"],
            serde_json::json!({"exploration_factor": 4, "restart_weight": 2.0})
        );
        assert_eq!(by_name("pollux-mip")["goodput"], true);
        assert_eq!(by_name("tiresias")["goodput"], false);
        let names = registry::names();
        for p in c["sweep_policies"].as_array().unwrap() {
            assert!(names.contains(&p.as_str().unwrap()), "{p}");
        }
        assert!(names.contains(&c["resolve_planner"].as_str().unwrap()));
        assert_eq!(
            c["limits"],
            serde_json::json!({"nodes": MAX_NODES, "gpus": MAX_GPUS, "jobs": MAX_JOBS})
        );
    }

    /// A planner added as one registry entry reaches the page's lists and
    /// help with no edit here or in the page (which reads only the catalog).
    #[test]
    fn a_planner_registered_by_its_entry_alone_is_in_the_catalog() {
        let mut entries = registry::entries().to_vec();
        entries.push(registry::Entry {
            name: "example",
            description: "A test planner: fifo under another name.",
            params: |p| p.exploration_factor = 3,
            create: || registry::create("fifo").unwrap(),
        });
        let c = serde_json::to_value(catalog_of(&entries)).unwrap();
        assert_eq!(c["policies"].as_array().unwrap().last().unwrap(), "example");
        assert_eq!(
            c["policy_info"].as_array().unwrap().last().unwrap(),
            &serde_json::json!({
                "name": "example",
                "description": "A test planner: fifo under another name.",
                "params": {"exploration_factor": 3},
                "goodput": false,
            })
        );
        assert!(c["placement_policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "example"));
    }

    #[test]
    fn run_equals_the_simulator_called_directly() {
        let s = Scenario {
            workload: "workloads-0.5/workload-2".into(),
            policy: "fifo".into(),
            ..Default::default()
        };
        let mut calls = 0;
        let out = run_scenario(&s, &mut |p| {
            calls += usize::from(!p.alone);
            assert!(p.done_jobs <= p.total_jobs);
            Control::Continue
        })
        .unwrap();
        let profiles = pollux_profiles().unwrap();
        let (jobs, _) = s.jobs(&profiles).unwrap();
        let mut planner = registry::create("fifo").unwrap();
        let direct = simulate_workload(
            &SimConfig::default(),
            &profiles,
            &jobs,
            planner.as_mut(),
            &mut |_, _| Control::Continue,
        )
        .unwrap();
        assert_eq!(out.summary.avg_jct_s, direct.summary.avg_jct_s);
        assert_eq!(out.summary.makespan_s, direct.summary.makespan_s);
        assert_eq!(out.jobs, direct.jobs);
        assert_eq!(out.summary.workload, "workload-2");
        assert_eq!(calls, out.rounds.len());
        let busiest = busiest_round(&out);
        let insp: serde_json::Value = serde_json::from_str(&inspect(out.run_id, busiest).unwrap()).unwrap();
        assert_eq!(insp["index"], busiest);
        assert!(insp["objective"].as_f64().unwrap() > 0.0);
        assert_eq!(
            insp["jobs"].as_array().unwrap().len(),
            out.rounds[busiest].record.active
        );
        assert!(inspect(out.run_id, out.rounds.len()).is_err());
    }

    #[test]
    fn work_rate_integrates_to_the_number_of_jobs() {
        for (workload, policy) in [
            ("workloads-0.5/workload-2", "fifo"),
            ("workloads/workload-6", "tiresias"),
        ] {
            let s = Scenario {
                workload: workload.into(),
                policy: policy.into(),
                ..Default::default()
            };
            let out = run_scenario(&s, &mut quiet).unwrap();
            let mut t0 = out.rounds[0].record.time_s;
            let mut jobs = 0.0;
            for &(t, rate) in &out.work_rate {
                assert!(rate >= 0.0 && t > t0, "{t} {rate}");
                jobs += rate * (t - t0) / 3600.0;
                t0 = t;
            }
            assert!((jobs - out.jobs.len() as f64).abs() < 1e-6, "{workload}: {jobs}");
            assert_eq!(
                out.work_rate.last().unwrap().0,
                out.jobs.iter().map(|j| j.completion_s).fold(0.0, f64::max)
            );
        }
    }

    fn busiest_round(out: &RunOut) -> usize {
        (0..out.rounds.len())
            .max_by_key(|&i| out.rounds[i].record.active)
            .unwrap()
    }

    #[test]
    fn cancel_stops_the_run() {
        let s = Scenario {
            workload: "workloads-0.5/workload-1".into(),
            policy: "fifo".into(),
            ..Default::default()
        };
        let mut n = 0;
        let err = run_scenario(&s, &mut |_| {
            n += 1;
            if n == 5 {
                Control::Cancel
            } else {
                Control::Continue
            }
        })
        .unwrap_err();
        assert!(matches!(err, ApiError::Cancelled));
        assert_eq!(n, 5);
    }

    /// A scenario's queues run as `simulate --queues` runs them: the
    /// bundled two-team workload on 4x4 gives one row per queue, each
    /// round's GPUs per queue, and a run without queues none; a bad queues
    /// text is named by line and field.
    #[test]
    fn queues_run_per_queue_and_bad_queues_are_named() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let read = |f: &str| std::fs::read_to_string(format!("{root}/{f}")).unwrap();
        let s = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "queued-workload.csv".into(),
                text: read("tests/data/queued-workload.csv"),
            }),
            cluster: "4x4".into(),
            policy: "fair-share".into(),
            queues: read("examples/queues-ab.toml"),
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        let names: Vec<&str> = out.queues.iter().map(|q| q.queue.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!((out.queues[0].jobs, out.queues[1].jobs), (9, 5));
        for r in &out.rounds {
            assert_eq!(r.record.queue_gpus.iter().sum::<u32>(), r.record.gpus_allocated);
        }
        let plain = run_scenario(
            &Scenario {
                queues: String::new(),
                ..s.clone()
            },
            &mut quiet,
        )
        .unwrap();
        assert!(plain.queues.is_empty());
        let json = serde_json::to_value(&plain.scenario).unwrap();
        assert!(
            json.get("queues").is_none(),
            "links without queues stay as they were"
        );
        let bad = Scenario {
            queues: "[[queue]]\nname = \"a\"\nguarantee = 8\n\n[[queue]]\nname = \"b\"\nparent = \"a\"\nguarantee = 9\n"
                .into(),
            ..s
        };
        let msg = run_scenario(&bad, &mut quiet).unwrap_err().to_string();
        assert!(msg.contains("queues:3:guarantee"), "{msg}");
    }

    /// An uploaded cluster file (as `trace import-slurm` writes one) runs
    /// as `--cluster FILE`; a bad one is named by file, line and field.
    #[test]
    fn an_uploaded_cluster_file_runs_and_bad_ones_are_named() {
        let file = |text: &str| Upload {
            name: "c.csv".into(),
            text: text.into(),
        };
        let s = Scenario {
            cluster: "upload".into(),
            cluster_upload: Some(file("name,gpus,gpu_type,count\nn,4,fake,4\n")),
            workload: "upload".into(),
            upload: Some(Upload {
                name: "queued-workload.csv".into(),
                text: std::fs::read_to_string(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../tests/data/queued-workload.csv"
                ))
                .unwrap(),
            }),
            policy: "fifo".into(),
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        assert_eq!(out.total_gpus, 16);
        assert_eq!(out.cluster.nodes[3].name, "n3");
        assert_eq!(out.summary.jobs, 14);
        let json = serde_json::to_value(&out.scenario).unwrap();
        assert_eq!(json["cluster"], "upload");
        let bad = Scenario {
            cluster_upload: Some(file("name,gpus,gpu_type\nn1,four,fake\n")),
            ..s.clone()
        };
        let msg = run_scenario(&bad, &mut quiet).unwrap_err().to_string();
        assert!(msg.contains("c.csv:2:gpus"), "{msg}");
        let none = Scenario {
            cluster_upload: None,
            ..s
        };
        let msg = run_scenario(&none, &mut quiet).unwrap_err().to_string();
        assert!(msg.contains("no cluster file uploaded"), "{msg}");
    }

    #[test]
    fn bad_upload_names_file_line_and_field() {
        let s = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "bad.csv".into(),
                text: "name,time,application,num_replicas,batch_size\na,1,cifar10,2,128\nb,-4,cifar10,2,128\nc,5,nope,1,64\n"
                    .into(),
            }),
            ..Default::default()
        };
        let msg = run_scenario(&s, &mut quiet).unwrap_err().to_string();
        assert!(
            msg.contains("bad.csv:3:time: must be a finite number >= 0, got -4"),
            "{msg}"
        );
        assert!(
            msg.contains("bad.csv:4:application: unknown application 'nope'"),
            "{msg}"
        );
    }

    #[test]
    fn load_multiplier_compresses_arrivals_and_bad_values_are_errors() {
        let profiles = pollux_profiles().unwrap();
        let base = Scenario::default();
        let twice = Scenario {
            load: 2.0,
            ..Default::default()
        };
        let (a, _) = base.jobs(&profiles).unwrap();
        let (b, _) = twice.jobs(&profiles).unwrap();
        assert_eq!(a.len(), b.len());
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| y.spec.submit_s == x.spec.submit_s / 2.0));
        let bad = Scenario {
            load: 0.0,
            ..Default::default()
        };
        assert!(bad.jobs(&profiles).is_err());
        assert!(parse_scenario(r#"{"polcy": "fifo"}"#)
            .unwrap_err()
            .to_string()
            .contains("polcy"));
        let c = parse_cluster("2x4 + 1x8:a100").unwrap();
        assert_eq!(c.total_gpus(), 16);
        assert_eq!(c.nodes[2].gpu_type, "a100");
        assert_eq!(c.nodes[2].name, "node2");
        assert!(parse_cluster("2x").is_err());
    }

    #[test]
    fn solve_round_returns_a_valid_plan_with_objective() {
        let s = Scenario {
            workload: "workloads-0.5/workload-3".into(),
            policy: "fifo".into(),
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        let round = RUNS.with(|r| {
            let r = r.borrow();
            r.iter().find(|(id, _)| *id == out.run_id).unwrap().1[busiest_round(&out)]
                .0
                .clone()
        });
        let json = serde_json::to_string(&round).unwrap();
        let plan: serde_json::Value =
            serde_json::from_str(&solve_round(&json, r#"{"planner": "greedy"}"#).unwrap()).unwrap();
        assert_eq!(plan["planner"], "greedy");
        assert!(plan["objective"].as_f64().unwrap() > 0.0);
        assert!(solve_round("{", "{}")
            .unwrap_err()
            .to_string()
            .starts_with("round:1:"));
    }

    #[test]
    fn clusters_and_workloads_beyond_the_limits_are_refused_up_front() {
        let s = Scenario {
            cluster: "100000x8".into(),
            ..Default::default()
        };
        let msg = run_scenario(&s, &mut quiet).unwrap_err().to_string();
        assert!(msg.contains("at most 1024 nodes"), "{msg}");
        assert!(parse_cluster("1000x4+100x4").is_err());
        assert!(parse_cluster("4294967295x1").is_err());
        assert!(parse_cluster("1024x8").is_ok());
        assert!(parse_cluster("1024x9").is_err());
        let rows: String = (0..=MAX_JOBS).map(|i| format!("j{i},{i},1,,,60\n")).collect();
        let s = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "big.csv".into(),
                text: format!("name,submit_s,gpus,app,batch_size,duration_s\n{rows}"),
            }),
            ..Default::default()
        };
        let msg = run_scenario(&s, &mut quiet).unwrap_err().to_string();
        assert!(msg.contains("at most 5000"), "{msg}");
    }

    #[test]
    fn uploads_in_the_native_format_run_and_unknown_formats_name_the_accepted_ones() {
        let s = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "mine.csv".into(),
                text: "name,submit_s,gpus,app,batch_size,duration_s\na,0,4,cifar10,2048,\nb,60,2,,,600\n"
                    .into(),
            }),
            policy: "fifo".into(),
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        assert_eq!(out.jobs.len(), 2);
        assert_eq!(out.summary.workload, "mine");
        let bad = Scenario {
            upload: Some(Upload {
                name: "x.csv".into(),
                text: "foo,bar\n1,2\n".into(),
            }),
            ..s
        };
        let msg = run_scenario(&bad, &mut quiet).unwrap_err().to_string();
        assert!(
            msg.contains("x.csv:1:header") && msg.contains("gpuplan, pollux, philly"),
            "{msg}"
        );
    }

    #[test]
    fn placement_and_sticky_reach_the_simulator_and_are_refused_as_the_cli_refuses_them() {
        let s = Scenario {
            workload: "workloads-0.5/workload-2".into(),
            policy: "fifo".into(),
            variability: "longhorn".into(),
            placement: "pal".into(),
            sticky: true,
            ..Default::default()
        };
        let cfg = s.config().unwrap();
        assert_eq!(cfg.params.placement, Placement::Pal);
        assert_eq!(cfg.params.sticky, Sticky::Keep);
        let out = run_scenario(&s, &mut quiet).unwrap();
        let profiles = pollux_profiles().unwrap();
        let (jobs, _) = s.jobs(&profiles).unwrap();
        let direct = simulate_workload(
            &cfg,
            &profiles,
            &jobs,
            registry::create("fifo").unwrap().as_mut(),
            &mut |_, _| Control::Continue,
        )
        .unwrap();
        assert_eq!(out.jobs, direct.jobs);
        // The inspector: every job with GPUs has a type and a slowest GPU.
        let busiest = busiest_round(&out);
        let insp: serde_json::Value = serde_json::from_str(&inspect(out.run_id, busiest).unwrap()).unwrap();
        let placed: Vec<&serde_json::Value> = insp["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["chosen_gpus"].as_u64().unwrap() > 0)
            .collect();
        assert!(!placed.is_empty());
        for j in placed {
            let h = &j["hardware"];
            assert_eq!(h["gpu_types"], serde_json::json!(["t4"]), "{j}");
            let v = &h["variability"];
            let slow = v["slowdown"].as_f64().unwrap();
            let factor = v["expected_factor"].as_f64().unwrap();
            assert!(
                slow > 0.0 && (factor == slow || (factor - slow * 1.7).abs() < 1e-9),
                "{v}"
            );
            let (n, _) = (
                v["slowest_gpu"][0].as_u64().unwrap(),
                v["slowest_gpu"][1].as_u64().unwrap(),
            );
            assert!(j["chosen"].as_array().unwrap().iter().any(|c| c[0] == n), "{j}");
        }
        // Without variability: a type, no slowest GPU.
        let plain = run_scenario(
            &Scenario {
                variability: "none".into(),
                placement: "packed".into(),
                ..s.clone()
            },
            &mut quiet,
        )
        .unwrap();
        let insp: serde_json::Value =
            serde_json::from_str(&inspect(plain.run_id, busiest_round(&plain)).unwrap()).unwrap();
        let j = insp["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["chosen_gpus"].as_u64().unwrap() > 0)
            .unwrap();
        assert_eq!(j["hardware"]["gpu_types"][0], "t4");
        assert!(j["hardware"].get("variability").is_none());
        // Refusals, each a message rather than a panic.
        let refused = |s: Scenario| run_scenario(&s, &mut quiet).unwrap_err().to_string();
        let msg = refused(Scenario {
            policy: "pollux-mip".into(),
            ..s.clone()
        });
        assert!(
            msg.starts_with("policy: pollux-mip: placement 'pal' applies to") && msg.contains("fifo"),
            "{msg}"
        );
        let msg = refused(Scenario {
            variability: "none".into(),
            ..s.clone()
        });
        assert!(msg.contains("placement: pal needs GPU variability"), "{msg}");
        let msg = refused(Scenario {
            placement: "best".into(),
            ..s.clone()
        });
        assert!(msg.contains("unknown placement 'best'"), "{msg}");
        // Old links, without the new keys, read as the default placement.
        let old = parse_scenario(r#"{"policy": "fifo"}"#).unwrap();
        assert_eq!((old.placement.as_str(), old.sticky), ("default", false));
        let c: serde_json::Value = serde_json::from_str(&catalog().unwrap()).unwrap();
        assert_eq!(c["placements"][0], "default");
        assert!(c["placement_policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "tiresias"));
        // The sharing help names the planners that say they share.
        let sharers = c["sharing_policies"].as_array().unwrap();
        assert!(sharers.iter().any(|p| p == "pollux-mip") && !sharers.iter().any(|p| p == "fifo"));
    }

    #[test]
    fn the_mip_reports_microlps_own_bound_never_a_made_up_one() {
        let s = Scenario {
            workload: "workloads-0.5/workload-3".into(),
            policy: "fifo".into(),
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        let round = busiest_round(&out);
        let r: serde_json::Value =
            serde_json::from_str(&resolve(out.run_id, round, r#"{"planner": "pollux-mip"}"#).unwrap())
                .unwrap();
        let objective = r["objective"].as_f64().unwrap();
        if let Some(bound) = r["bound"].as_f64() {
            assert!(
                bound >= objective - 1e-9,
                "bound {bound} below objective {objective}"
            );
            // The old stand-in was objective × (1 + 1e-4): gap exactly 1e-4.
            assert!((r["gap"].as_f64().unwrap() - 1e-4).abs() > 1e-9, "{r}");
        } else {
            assert!(r["gap"].is_null());
        }
    }

    /// The inspector lists each shared GPU with its jobs; scenarios take
    /// `sharing` (old links load as 1, 0 is refused).
    #[test]
    fn the_inspector_shows_who_shares_with_whom() {
        let job = |id: u32, app: &str| {
            format!(
                r#"{{"id": {id}, "name": "j{id}", "app": "{app}", "submit_s": 0, "requested_gpus": 1, "batch_size": 8,
                "min_gpus": 1, "max_gpus": 1, "preemptible": true,
                "state": {{"progress": 0, "epoch": 0, "attained_gpu_s": 0, "age_s": 600, "restarts": 0,
                          "allocation": [], "max_gpus_used": 0, "batch_size": 8, "local_bsz": 8, "accum_steps": 0}}}}"#
            )
        };
        let text = format!(
            r#"{{"now_s": 0, "cluster": {{"nodes": [{{"name": "n0", "gpus": 2, "gpu_type": "t4"}}]}},
            "params": {{"sharing": 2}}, "jobs": [{}, {}, {}]}}"#,
            job(0, "cifar10"),
            job(1, "ncf"),
            job(2, "cifar10")
        );
        let round: Round = serde_json::from_str(&text).unwrap();
        let mut plan = Plan::new("hand", gpuplan_core::PlanStatus::Feasible);
        let on = |i: u32| {
            gpuplan_core::Allocation::from_gpus(vec![gpuplan_core::GpuId::new(gpuplan_core::NodeId(0), i)])
        };
        plan.allocations.insert(gpuplan_core::JobId(0), on(1));
        plan.allocations.insert(gpuplan_core::JobId(1), on(1));
        plan.allocations.insert(gpuplan_core::JobId(2), on(0));
        assert_eq!(gpuplan_core::validate(&round, &plan), Ok(()));
        let out: serde_json::Value = serde_json::to_value(inspect_round(0, 1, &round, &plan)).unwrap();
        assert_eq!(
            out["shared_gpus"],
            serde_json::json!([{"node": 0, "node_name": "n0", "gpu": 1, "jobs": ["j0", "j1"]}])
        );
        let old = parse_scenario(r#"{"policy": "pollux-mip"}"#).unwrap();
        assert_eq!(old.sharing, 1);
        assert!(!serde_json::to_string(&old).unwrap().contains("sharing"));
        let two = parse_scenario(r#"{"policy": "pollux-mip", "sharing": 2}"#).unwrap();
        assert_eq!(two.config().unwrap().params.sharing, 2);
        let zero = parse_scenario(r#"{"policy": "pollux-mip", "sharing": 0}"#).unwrap();
        assert!(zero
            .config()
            .unwrap_err()
            .to_string()
            .contains("sharing: must be >= 1"));
    }

    #[test]
    fn type_blind_reaches_the_simulator_and_old_links_stay_aware() {
        use gpuplan_core::Sight;
        let old = parse_scenario(r#"{"policy": "pollux-ga"}"#).unwrap();
        assert!(!old.type_blind && old.config().unwrap().params.type_blind == Sight::Seen);
        assert!(!old.variability_blind && old.config().unwrap().params.variability_blind == Sight::Seen);
        assert!(!serde_json::to_string(&old).unwrap().contains("blind"));
        let vb = parse_scenario(r#"{"policy": "pollux-mip", "variability_blind": true}"#).unwrap();
        assert_eq!(vb.config().unwrap().params.variability_blind, Sight::Hidden);
        let blind = parse_scenario(r#"{"policy": "pollux-ga", "type_blind": true}"#).unwrap();
        assert_eq!(blind.config().unwrap().params.type_blind, Sight::Hidden);
        assert!(serde_json::to_string(&blind)
            .unwrap()
            .contains(r#""type_blind":true"#));
    }

    /// Issue 54, item 7: every flag of `simulate` the editor sets reaches
    /// the simulator as the CLI's does, and unset ones keep the policy's own.
    #[test]
    fn the_rest_of_simulates_flags_reach_the_config() {
        let s = parse_scenario(
            r#"{"policy": "gpuplan-mip", "exploration_factor": 3, "restart_penalty_s": 45,
                "priority_exponent": 0.5, "priority_scale_gpu_s": 3600, "p": -0.5, "left_out_cost": 1.1,
                "spare_waiting": true, "min_runtime_s": 120, "checkpoint_interval_s": 900,
                "restart_charge": "fixed", "max_sim_days": 2, "run_idle_rounds": true, "memory_limit_mb": 512,
                "sharing": 2, "sharing_pairs": "measured", "gavel_gpu_type": "p100"}"#,
        )
        .unwrap();
        let cfg = s.config().unwrap();
        let p = &cfg.params;
        assert_eq!(p.exploration_factor, 3);
        // Unset: gpuplan-mip's own restart weight, as the CLI without --restart-weight.
        assert_eq!(
            p.restart_weight,
            registry::default_params("gpuplan-mip").restart_weight
        );
        assert_eq!(
            (p.restart_penalty_s, p.left_out_cost, p.min_runtime_s),
            (45.0, 1.1, 120.0)
        );
        assert_eq!((p.priority.exponent, p.priority.scale_gpu_s), (0.5, 3600.0));
        assert_eq!(p.spare_waiting, true.into());
        assert_eq!(p.sharing_pairs, gpuplan_core::SharingPairs::Measured);
        assert_eq!(cfg.max_sim_s, 2.0 * 86400.0);
        assert_eq!(cfg.idle_rounds, gpuplan_sim::IdleRounds::Run);
        assert_eq!(cfg.memory_limit_mb, Some(512));
        assert_eq!(cfg.checkpoint_interval_s, Some(900.0));
        assert_eq!(cfg.restart_charge, gpuplan_sim::RestartCost::Fixed);
        // Defaults stay out of links; a bad value names the editor's field.
        assert!(!serde_json::to_string(&Scenario::default())
            .unwrap()
            .contains("max_sim_days"));
        let bad = Scenario {
            max_sim_days: 0.0,
            exploration_factor: Some(0),
            ..Default::default()
        };
        let msg = bad.config().unwrap_err().to_string();
        assert!(
            msg.contains("max sim days: must be > 0") && msg.contains("exploration factor: "),
            "{msg}"
        );
        let est = parse_scenario(
            r#"{"estimates": true, "estimate_work": "history", "estimate_every": 2, "estimate_no_ranges": true,
                "estimate_spread": 0.2, "estimate_skip_steady": 3, "estimate_budget_s": 1}"#,
        )
        .unwrap()
        .calibration()
        .unwrap();
        assert_eq!(est.work, gpuplan_sim::KnownWork::History);
        assert_eq!((est.every, est.ranges, est.skip_steady_rounds), (2, false, 3));
        assert_eq!((est.rate_spread, est.budget_s), (0.2, 1.0));
        let never = Scenario {
            estimate_every: 0,
            ..Default::default()
        };
        assert_eq!(
            never.calibration().unwrap_err().to_string(),
            "estimate every: must be >= 1"
        );
        let pal = Scenario {
            variability: "ls6".into(),
            variability_draw: gpuplan_sim::variability::Draw::Pal,
            ..Default::default()
        };
        assert!(pal.config().unwrap_err().to_string().contains("runs/ls6.csv"));
    }

    /// Skipped rows and shrunk jobs are named as the CLI names them; a
    /// Gavel trace loads through the bundled table.
    #[test]
    fn reading_flags_skip_shrink_and_map_as_the_cli() {
        let profiles = pollux_profiles().unwrap();
        let s = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "rows.csv".into(),
                text: "name,submit_s,gpus,app,batch_size,duration_s
a,0,16,,,600
bad,x,1,,,60
"
                .into(),
            }),
            cluster: "1x8".into(),
            skip_bad_rows: true,
            shrink_to_fit: true,
            ..Default::default()
        };
        let (jobs, _, notes) = s.jobs_noted(&profiles).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            notes,
            [
                "warning: rows.csv: skipped 1 bad row(s); first: rows.csv:3:submit_s: not a number: 'x'",
                "rows.csv: --shrink-to-fit shrank 1 job(s): a (16 → 8 GPUs)"
            ]
        );
        let gavel = Scenario {
            workload: "upload".into(),
            upload: Some(Upload {
                name: "small_test.trace".into(),
                text: include_str!("../../../traces/gavel/physical_cluster/small_test.trace").into(),
            }),
            ..Default::default()
        };
        assert_eq!(gavel.jobs(&profiles).unwrap().0.len(), 20);
    }

    #[test]
    fn dumped_rounds_and_round_logs_compare_as_the_cli() {
        let s = Scenario {
            workload: "workloads-0.5/workload-3".into(),
            policy: "fifo".into(),
            round_log: true,
            ..Default::default()
        };
        let out = run_scenario(&s, &mut quiet).unwrap();
        let dumped = dump_rounds(out.run_id).unwrap();
        assert_eq!(dumped.lines().count(), out.rounds.len());
        let first: Round = serde_json::from_str(dumped.lines().next().unwrap()).unwrap();
        assert_eq!(first.now_s, out.rounds[0].record.time_s);
        let log: String = out
            .round_log
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        let c: serde_json::Value = serde_json::from_str(&compare_rounds(&log, &log, 10).unwrap()).unwrap();
        assert_eq!(c["common_rounds"], out.round_log.len());
        assert!(c["first_gpu_difference_s"].is_null());
        assert!(compare_rounds("{", &log, 10)
            .unwrap_err()
            .to_string()
            .starts_with("a:1: "));
    }

    /// Issue 54: a bad queues file names the field, as the docs promise.
    #[test]
    fn a_bad_queues_file_names_line_and_field() {
        let s = Scenario {
            queues: "[[queue]]\nname = \"a\"\nguarantee = \"x\"\n".into(),
            ..Default::default()
        };
        let msg = s.config().unwrap_err().to_string();
        assert!(msg.starts_with("queues:3:guarantee: "), "{msg}");
    }
}
