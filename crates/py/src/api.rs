//! The Python package's API on JSON text, in plain Rust: every rule lives
//! in the library crates, so this file only reads arguments, calls the
//! functions `gpuplan plan` and `gpuplan simulate` call, and words errors.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use gpuplan_sim::files::{load_cluster, load_trace, simulate_named, workload_jobs, TraceLoad};
use gpuplan_sim::trace::workload::DurationJobs;
use gpuplan_sim::trace::{BadRows, Format};
use gpuplan_sim::{Control, ParamFlags, Profiles, SimScenario};
use gpuplan_solve::{parse_round, registry, run_round, Limits, PlanError, PlanOut, Planner};

/// What went wrong, as Python raises it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Bad input (a round, a name, an argument): `ValueError`.
    #[error("{0}")]
    Value(String),
    /// Input that is fine but a run that failed (a planner's invalid plan,
    /// a simulation past its time cap): `RuntimeError`.
    #[error("{0}")]
    Runtime(String),
}

impl From<PlanError> for ApiError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Malformed(problems) => {
                ApiError::Value(format!("invalid round:\n  {}", problems.join("\n  ")))
            }
            PlanError::UnknownPlanner { .. } | PlanError::NeedsOracle { .. } => {
                ApiError::Value(e.to_string())
            }
            _ => ApiError::Runtime(e.to_string()),
        }
    }
}

/// Every registered planner, in registry order (`gpuplan policies`).
pub fn policies() -> Vec<&'static str> {
    registry::names()
}

/// A planner's round parameters before a round file's keys override them
/// (`registry::default_params`), as a JSON object of round-file keys.
pub fn default_params(name: &str) -> Result<String, ApiError> {
    let e = registry::entry(name).map_err(|e| ApiError::Value(e.to_string()))?;
    serde_json::to_string(&e.default_params()).map_err(|e| ApiError::Runtime(e.to_string()))
}

/// One planner with its cross-round state (warm start, GA population,
/// Tiresias queues) and limits: Python's `gpuplan.Planner`.
pub struct Session {
    name: String,
    planner: Box<dyn Planner>,
    limits: Limits,
}

impl Session {
    /// A fresh planner by name, with `gpuplan plan`'s limits.
    pub fn new(name: &str, time_limit_s: f64, gap: f64, seed: u64, threads: u32) -> Result<Self, ApiError> {
        let planner = registry::create(name)?;
        let limits = Limits {
            time_limit_s,
            gap,
            threads,
            seed,
            memory_limit_mb: None,
        };
        if let Err(errs) = limits.check() {
            let lines: Vec<String> = errs.iter().map(|(f, e)| format!("{f}: {e}")).collect();
            return Err(ApiError::Value(lines.join("; ")));
        }
        Ok(Session {
            name: name.to_string(),
            planner,
            limits,
        })
    }

    /// The planner's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The planner's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Plan one round given as round-file JSON (`source` names it in
    /// errors): the round file's reading ([`parse_round`]: the planner's
    /// registry defaults under the file's params, every problem named by
    /// its path), the one pipeline ([`run_round`]), and the plan as
    /// `gpuplan plan --format json` prints it ([`PlanOut`]).
    pub fn plan_json(&mut self, source: &str, round_json: &str) -> Result<String, ApiError> {
        let round =
            parse_round(source, round_json, &self.name).map_err(|e| ApiError::Value(e.to_string()))?;
        let decision = run_round(self.planner.as_mut(), &round, &self.limits)?;
        serde_json::to_string(&PlanOut::new(&round, &decision)).map_err(|e| ApiError::Runtime(e.to_string()))
    }
}

/// `gpuplan simulate`'s settings that the package exposes, by the keyword
/// names of Python's `gpuplan.simulate`. `None`: the CLI's default (a
/// policy parameter: the policy's own registry default, as the CLI's
/// absent flag). Unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimArgs {
    /// Workload file (any trace format `gpuplan simulate` reads).
    pub workload: PathBuf,
    /// Registered planner name.
    pub policy: String,
    /// `NODESxGPUS[:type]`, a cluster file or an Alibaba machine spec.
    pub cluster: Option<String>,
    /// Seconds between rounds.
    pub interval_s: Option<f64>,
    /// Seconds a job loses when its allocation changes.
    pub restart_delay_s: Option<f64>,
    /// Simulation seed.
    pub seed: Option<u64>,
    /// Solver time limit per round.
    pub time_limit_s: Option<f64>,
    /// Give up this many simulated days after the last arrival.
    pub max_sim_days: Option<f64>,
    /// Slowdown of multi-node jobs sharing a node (the artifact's --interference).
    pub interference_slowdown: Option<f64>,
    /// `rigid` or `pollux`: jobs with a duration and no application.
    pub duration_jobs: Option<String>,
    /// Trace format; detected when absent.
    pub trace_format: Option<String>,
    /// Skip and count malformed rows instead of failing.
    pub skip_bad_rows: Option<bool>,
    /// Shrink jobs larger than the largest GPU type to fit.
    pub shrink_to_fit: Option<bool>,
    /// Profiles directory instead of the bundled Pollux profiles.
    pub traces: Option<PathBuf>,
    /// Power-mean exponent (`"-inf"`: max-min is not offered here).
    pub p: Option<f64>,
    /// δ of the restart factor (default: restart_delay_s).
    pub restart_penalty_s: Option<f64>,
    /// Times its duration a restart is charged.
    pub restart_weight: Option<f64>,
    /// Pollux's exploration cap.
    pub exploration_factor: Option<u32>,
    /// Sia's cost of a job left without GPUs.
    pub left_out_cost: Option<f64>,
    /// Charge restarts only to running jobs (Sia's rule).
    pub spare_waiting: Option<bool>,
    /// `avoid` or `allow`: multi-node jobs sharing nodes.
    pub interference: Option<String>,
    /// A queues file (TOML, docs/tenants.md), as `--queues`.
    pub queues: Option<PathBuf>,
    /// Plan as Pollux, not knowing GPU types (`--type-blind`).
    pub type_blind: Option<bool>,
    /// Plan without per-GPU speeds (`--variability-blind`).
    pub variability_blind: Option<bool>,
    /// How fixed-size policies pick GPUs (`--placement`).
    pub placement: Option<String>,
    /// With `placement`: running jobs keep their GPUs (`--sticky`).
    pub sticky: Option<bool>,
    /// Up to this many jobs may share a GPU (`--sharing K`).
    pub sharing: Option<u32>,
}

fn value<T>(key: &str, r: Result<T, impl std::fmt::Display>) -> Result<T, ApiError> {
    r.map_err(|e| ApiError::Value(format!("{key}: {e}")))
}

impl SimArgs {
    /// The scenario as `gpuplan simulate` builds it from the same flags.
    pub fn scenario(&self) -> Result<SimScenario, ApiError> {
        let d = SimScenario::default();
        let cluster = match &self.cluster {
            Some(c) => load_cluster(c).map_err(|e| ApiError::Value(e.to_string()))?,
            None => d.cluster.clone(),
        };
        let interference = match self.interference.as_deref() {
            None => None,
            Some(name) => Some(
                name.parse::<gpuplan_core::Interference>()
                    .map_err(|e| ApiError::Value(format!("interference: {e}")))?,
            ),
        };
        let queues = match &self.queues {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ApiError::Value(format!("queues: {}: cannot read: {e}", path.display())))?;
                gpuplan_core::queue::parse_queues_toml(&text, &path.display().to_string())
                    .map_err(|es| ApiError::Value(format!("queues: {}", es.join("; "))))?
            }
        };
        Ok(SimScenario {
            cluster,
            queues,
            interval_s: self.interval_s.unwrap_or(d.interval_s),
            restart_delay_s: self.restart_delay_s.unwrap_or(d.restart_delay_s),
            interference_slowdown: self.interference_slowdown.unwrap_or(d.interference_slowdown),
            time_limit_s: self.time_limit_s.unwrap_or(d.time_limit_s),
            max_sim_s: self.max_sim_days.map_or(d.max_sim_s, |days| days * 86400.0),
            seed: self.seed.unwrap_or(d.seed),
            colocation_gpu_type: gpuplan_sim::trace::gavel::DEFAULT_GPU_TYPE.to_string(),
            params: ParamFlags {
                p: self.p,
                restart_penalty_s: self.restart_penalty_s,
                interference,
                exploration_factor: self.exploration_factor,
                restart_weight: self.restart_weight,
                left_out_cost: self.left_out_cost,
                spare_waiting: self.spare_waiting,
                placement: match &self.placement {
                    Some(p) => Some(value("placement", p.parse::<gpuplan_core::Placement>())?),
                    None => None,
                },
                sticky: self.sticky.and_then(|k| k.then_some(gpuplan_core::Sticky::Keep)),
                sharing: self.sharing,
                type_blind: self.type_blind,
                variability_blind: self.variability_blind,
                ..ParamFlags::default()
            },
            ..d
        })
    }

    fn trace_load(&self) -> Result<TraceLoad, ApiError> {
        let format = match &self.trace_format {
            Some(f) => Some(value("trace_format", Format::from_name(f))?),
            None => None,
        };
        Ok(TraceLoad {
            format,
            bad_rows: if self.skip_bad_rows == Some(true) {
                BadRows::Skip
            } else {
                BadRows::Fail
            },
            ..TraceLoad::default()
        })
    }

    fn duration_jobs(&self) -> Result<DurationJobs, ApiError> {
        match self.duration_jobs.as_deref() {
            None | Some("rigid") => Ok(DurationJobs::Rigid),
            Some("pollux") => Ok(DurationJobs::Pollux),
            Some(o) => Err(ApiError::Value(format!(
                "duration_jobs: 'rigid' or 'pollux', got '{o}'"
            ))),
        }
    }
}

fn profiles(dir: Option<&Path>) -> Result<Profiles, ApiError> {
    match dir {
        Some(d) => gpuplan_sim::load_profiles_dir(d)
            .map_err(|e| ApiError::Value(format!("loading profiles from {}: {e}", d.display()))),
        None => gpuplan_sim::pollux_profiles()
            .map_err(|e| ApiError::Runtime(format!("parsing the bundled profiles: {e}"))),
    }
}

/// Simulate a workload file under one policy, given [`SimArgs`] as JSON;
/// the summary as `gpuplan simulate --format json` prints it (without
/// `--analysis`). The same steps as the CLI: the scenario checked for the
/// policy ([`SimScenario::config_for`]), the workload read by the
/// simulator's loaders, and [`simulate_named`].
pub fn simulate_json(args_json: &str) -> Result<String, ApiError> {
    let a: SimArgs = serde_json::from_str(args_json).map_err(|e| ApiError::Value(e.to_string()))?;
    let scenario = a.scenario()?;
    let cfg = scenario
        .config_for(&a.policy)
        .map_err(|es| ApiError::Value(es.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    let profiles = profiles(a.traces.as_deref())?;
    let trace = load_trace(&a.workload, &a.trace_load()?).map_err(|e| ApiError::Value(e.to_string()))?;
    let mut jobs = workload_jobs(&trace, a.duration_jobs()?, &profiles, a.seed.unwrap_or(0))
        .map_err(|e| ApiError::Value(format!("{}: {e}", a.workload.display())))?;
    if a.shrink_to_fit == Some(true) {
        gpuplan_sim::shrink_to_fit(&cfg.cluster, &mut jobs);
    }
    let r = simulate_named(&cfg, &profiles, &a.workload, &jobs, &a.policy, &mut |_, _| {
        Control::Continue
    })
    .map_err(|e| {
        ApiError::Runtime(format!(
            "simulating {} under {}: {e}",
            a.workload.display(),
            a.policy
        ))
    })?;
    // As `gpuplan simulate --format json`: the summary's keys, and one row
    // per queue under `queues`.
    let mut out = serde_json::to_value(&r.summary).map_err(|e| ApiError::Runtime(e.to_string()))?;
    if !r.queues.is_empty() {
        out["queues"] = serde_json::to_value(&r.queues).map_err(|e| ApiError::Runtime(e.to_string()))?;
    }
    Ok(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(path: &str) -> String {
        format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn policies_and_defaults_come_from_the_registry() {
        assert_eq!(policies(), registry::names());
        let mip: serde_json::Value = serde_json::from_str(&default_params("gpuplan-mip").unwrap()).unwrap();
        let want = registry::default_params("gpuplan-mip");
        assert_eq!(mip["exploration_factor"], want.exploration_factor);
        assert_eq!(mip["restart_weight"], want.restart_weight);
        let e = default_params("nope").unwrap_err();
        assert!(
            matches!(&e, ApiError::Value(m) if m.contains("gpuplan-mip")),
            "{e}"
        );
    }

    #[test]
    fn plans_a_round_file_as_the_cli_reads_it() {
        let text = std::fs::read_to_string(repo("tests/data/round-tiny.json")).unwrap();
        let mut s = Session::new("greedy", 10.0, 1e-4, 0, 1).unwrap();
        let out: serde_json::Value = serde_json::from_str(&s.plan_json("round", &text).unwrap()).unwrap();
        assert_eq!(out["planner"], "greedy");
        assert!(
            out["allocations"].as_object().is_some_and(|a| !a.is_empty()),
            "{out}"
        );
        // The round the CLI reads gives the same plan through the library.
        let round = parse_round("round", &text, "greedy").unwrap();
        let d = run_round(registry::create("greedy").unwrap().as_mut(), &round, &s.limits()).unwrap();
        let want = serde_json::to_value(PlanOut::new(&round, &d)).unwrap();
        assert_eq!(out["allocations"], want["allocations"]);
        assert_eq!(out["objective"], want["objective"]);
    }

    #[test]
    fn bad_input_is_a_value_error_naming_every_path() {
        let text = std::fs::read_to_string(repo("tests/data/round-tiny.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["jobs"][0]["min_gpus"] = 99.into();
        v["cluster"]["nodes"][1]["gpus"] = 0.into();
        let mut s = Session::new("fifo", 10.0, 1e-4, 0, 1).unwrap();
        let ApiError::Value(m) = s.plan_json("round", &v.to_string()).unwrap_err() else {
            panic!("not a value error")
        };
        assert!(m.contains("jobs[0] (resnet-a).min_gpus"), "{m}");
        assert!(m.contains("cluster.nodes[1].gpus"), "{m}");
        assert!(matches!(s.plan_json("round", "{"), Err(ApiError::Value(_))));
        assert!(matches!(
            Session::new("nope", 10.0, 1e-4, 0, 1),
            Err(ApiError::Value(_))
        ));
        let e = Session::new("fifo", 0.0, -1.0, 0, 1).err().unwrap().to_string();
        assert!(e.contains("time_limit_s") && e.contains("gap"), "{e}");
    }

    #[test]
    fn simulate_refuses_bad_arguments_by_name() {
        let w = repo("tests/data/short-workload.csv");
        let e = simulate_json(&format!(
            r#"{{"workload": "{w}", "policy": "fifo", "interval_s": 0}}"#
        ))
        .unwrap_err();
        assert!(e.to_string().contains("interval_s"), "{e}");
        let e = simulate_json(&format!(r#"{{"workload": "{w}", "policy": "fifo", "nope": 1}}"#)).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let e = simulate_json(r#"{"workload": "/no/such.csv", "policy": "fifo"}"#).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        let e = simulate_json(&format!(r#"{{"workload": "{w}", "policy": "nope"}}"#)).unwrap_err();
        assert!(e.to_string().contains("valid planners"), "{e}");
    }

    #[test]
    fn simulates_a_small_workload() {
        let w = repo("tests/data/short-workload.csv");
        let out = simulate_json(&format!(r#"{{"workload": "{w}", "policy": "fifo"}}"#)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["policy"], "fifo");
        assert_eq!(v["workload"], "short-workload");
        assert_eq!(v["jobs"], 14);
        assert!(v.get("queues").is_none(), "no queues, no rows");
        // With a queues file: one row per queue, as the CLI's JSON.
        let w = repo("tests/data/queued-workload.csv");
        let q = repo("examples/queues-ab.toml");
        let out = simulate_json(&format!(
            r#"{{"workload": "{w}", "policy": "fifo", "cluster": "4x4", "queues": "{q}"}}"#
        ))
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let names: Vec<&str> = v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["queue"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let e = simulate_json(&format!(
            r#"{{"workload": "{w}", "policy": "fifo", "queues": "/no/such.toml"}}"#
        ))
        .unwrap_err();
        assert!(
            e.to_string().contains("queues: /no/such.toml: cannot read"),
            "{e}"
        );
    }
}
