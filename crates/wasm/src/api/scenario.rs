//! One what-if scenario, the editor's state: its cluster, jobs, config and
//! planner, under the browser's limits.

use gpuplan_core::{Cluster, Interference, Placement, Sticky};
use gpuplan_sim::trace::{self, workload::DurationJobs, Format, LoadOptions};
use gpuplan_sim::{ParamFlags, Profiles, ScenarioError, ScenarioField, SimConfig, SimScenario, WorkloadJob};
use serde::{Deserialize, Serialize};

use super::bundled::{all_workloads, bundled, GAVEL_THROUGHPUTS, UPLOAD_FORMATS};
use super::error::{invalid, ApiError};

/// The most the browser takes on. The page keeps every round's input for the
/// inspector, and wasm32 has at most 4 GiB: a cluster of 100000 nodes filled
/// it after 30 s and crashed the engine. Bigger runs belong to the CLI.
pub const MAX_NODES: u32 = 1024;
/// The most GPUs, all nodes together.
pub const MAX_GPUS: u32 = 8192;
/// The most jobs in a workload.
pub const MAX_JOBS: usize = 5000;

/// A user's workload file, uploaded in the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Upload {
    /// File name; parse errors name it as the CLI names its `--workload` path.
    pub name: String,
    /// The file's contents; its format is detected from the first line.
    pub text: String,
}

/// One what-if scenario: the editor's state, and what the URL carries.
/// Defaults equal `gpuplan simulate`'s flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// The run's name in the page's legends; empty lets the page pick one.
    pub label: String,
    /// `16x4`, `16x4:t4`, or groups joined by `+`: `12x4:t4+4x8:a100`;
    /// or `upload`: the cluster file in `cluster_upload`.
    pub cluster: String,
    /// An uploaded cluster file (`name,gpus,gpu_type[,count]`, as
    /// `--cluster FILE` reads it, e.g. `trace import-slurm`'s), when
    /// `cluster` is `upload`. Kept out of links, as workload uploads are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_upload: Option<Upload>,
    /// A bundled workload id (see [`super::Catalog::workloads`]) or `upload`.
    pub workload: String,
    /// The uploaded file, when `workload` is `upload`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload: Option<Upload>,
    /// Arrival-rate multiplier: submit times are divided by it (1 = as in the file).
    pub load: f64,
    /// The planner's registry name, as `--policy`.
    pub policy: String,
    /// Power-mean exponent of goodput-based policies, as `--p` (Pollux: -1).
    pub p: f64,
    /// Seconds a re-allocated job loses restarting, as `--restart-delay`.
    pub restart_delay_s: f64,
    /// Seconds between rounds, as `--interval`.
    pub interval_s: f64,
    /// `avoid` or `allow`, as `--interference`.
    pub interference: String,
    /// Slowdown of multi-node jobs on nodes shared by several of them (0 = none).
    pub interference_slowdown: f64,
    /// The planner's time limit per round, as `--time-limit`.
    pub time_limit_s: f64,
    /// Seed of the run's random choices (workload draws, variability, planners).
    pub seed: u64,
    /// Per-GPU speed variability, as `--variability`: `none` or a bundled
    /// set (`longhorn`, `frontera`, `ls6`); drawn per node by `seed`.
    pub variability: String,
    /// PAL's cross-node factor L, as `--cross-node-factor`.
    pub cross_node_factor: f64,
    /// The placement stage of fixed-size policies, as `--placement`:
    /// `default` (the policy's own), `packed`, `random`, `pm-first`, `pal`, `mip`.
    pub placement: String,
    /// Running jobs keep their GPUs under a placement, as `--sticky`.
    pub sticky: bool,
    /// Most jobs per GPU, as `--sharing K` (1: none). Absent from links
    /// made before sharing, which load as 1.
    #[serde(skip_serializing_if = "is_one")]
    pub sharing: u32,
    /// Goodput planners value every GPU type with the job's one model, as
    /// Pollux does (`--type-blind`). Absent from links made before it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub type_blind: bool,
    /// Planners do not see per-GPU variability (`--variability-blind`); the
    /// simulator still charges it. Absent from links made before it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub variability_blind: bool,
    /// The teams' queues: a queues file's text (TOML, docs/tenants.md), as
    /// `--queues FILE`; jobs are in the queue their workload's `queue` (or
    /// `group`) column names. Empty: one pool, and absent from links made
    /// before queues.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub queues: String,
    /// Finish-time fairness: after the run, each job simulated alone (as
    /// `simulate --analysis`). Off by default (it runs every job once more);
    /// absent from links made before it and from those without it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fairness: bool,
    /// Start and finish estimates at each job's submission against what
    /// happened (as `simulate --estimates`, its defaults: declared totals,
    /// every job, ranges). Off by default; absent from links without it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimates: bool,
}

fn is_one(k: &u32) -> bool {
    *k == 1
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            label: String::new(),
            cluster: "16x4".into(),
            cluster_upload: None,
            workload: "workloads/workload-6".into(),
            upload: None,
            load: 1.0,
            policy: "tiresias".into(),
            p: -1.0,
            restart_delay_s: 30.0,
            interval_s: 60.0,
            interference: "avoid".into(),
            interference_slowdown: 0.0,
            time_limit_s: 10.0,
            seed: 0,
            variability: "none".into(),
            cross_node_factor: gpuplan_sim::variability::DEFAULT_CROSS_NODE_FACTOR,
            placement: Placement::Default.name().into(),
            sticky: false,
            sharing: 1,
            type_blind: false,
            variability_blind: false,
            queues: String::new(),
            fairness: false,
            estimates: false,
        }
    }
}

thread_local! {
    static GAVEL: std::cell::RefCell<Option<gpuplan_sim::colocation::GavelTable>> =
        const { std::cell::RefCell::new(None) };
}

/// The bundled Gavel table, parsed on first use.
fn gavel_table() -> Result<gpuplan_sim::colocation::GavelTable, ApiError> {
    GAVEL.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(gpuplan_sim::colocation::parse_gavel(
                "simulation_throughputs.json",
                GAVEL_THROUGHPUTS,
            )?);
        }
        Ok(slot.as_ref().expect("filled above").clone())
    })
}

/// A scenario error worded with the editor's name for its field.
pub(super) fn field_error(e: &ScenarioError) -> String {
    use gpuplan_core::ParamField as P;
    use ScenarioField as F;
    let name = match e.field {
        F::Interval => "interval",
        F::RestartDelay | F::Param(P::RestartPenalty) => "restart delay",
        F::InterferenceSlowdown => "interference slowdown",
        F::TimeLimit => "time limit",
        F::CrossNodeFactor => "cross-node factor",
        F::Policy => "policy",
        F::Param(P::Placement) => "placement",
        F::Param(P::Sharing) => "sharing",
        F::Param(P::P) => "p",
        // A field the editor does not set: its key.
        _ => return e.to_string(),
    };
    format!("{name}: {}", e.problem)
}

/// Parse a cluster spec: `+`-joined `NODESxGPUS[:type]` groups.
pub fn parse_cluster(spec: &str) -> Result<Cluster, ApiError> {
    let too_big = || {
        invalid(format!(
            "cluster {spec}: the browser takes at most {MAX_NODES} nodes and {MAX_GPUS} GPUs; \
             simulate bigger clusters with the CLI (gpuplan simulate --cluster {spec})"
        ))
    };
    // Checked before parsing: the parser would allocate every node first.
    let mut count = 0u64;
    for group in spec.split('+') {
        if let Some(Ok(n)) = group.split_once(['x', 'X']).map(|(n, _)| n.trim().parse::<u64>()) {
            count += n;
            if count > u64::from(MAX_NODES) {
                return Err(too_big());
            }
        }
    }
    // The CLI's parser: the same groups, names and errors.
    let cluster: Cluster = spec.parse()?;
    if u64::from(cluster.total_gpus()) > u64::from(MAX_GPUS) {
        return Err(too_big());
    }
    Ok(cluster)
}

impl Scenario {
    /// The scenario's cluster: a shape, or the uploaded file under the
    /// browser's limits, its errors named `FILE:LINE:FIELD` as the CLI's.
    pub fn cluster(&self) -> Result<Cluster, ApiError> {
        if self.cluster != "upload" {
            return parse_cluster(&self.cluster);
        }
        let up = self
            .cluster_upload
            .as_ref()
            .ok_or_else(|| invalid("cluster: no cluster file uploaded"))?;
        let cluster = gpuplan_sim::trace::cluster_file::parse(&up.name, up.text.as_bytes())?;
        if cluster.num_nodes() > MAX_NODES as usize || cluster.total_gpus() > MAX_GPUS {
            return Err(invalid(format!(
                "cluster {}: the browser takes at most {MAX_NODES} nodes and {MAX_GPUS} GPUs; \
                 simulate bigger clusters with the CLI (gpuplan simulate --cluster FILE)",
                up.name
            )));
        }
        Ok(cluster)
    }

    /// The simulator settings, checked by sim's one scenario builder (as
    /// the CLI's flags are); only the wording of a field is the browser's.
    pub fn config(&self) -> Result<SimConfig, ApiError> {
        let interference: Interference = self
            .interference
            .parse()
            .map_err(|e| invalid(format!("interference: {e}")))?;
        let variability = if self.variability == "none" {
            None
        } else {
            use gpuplan_sim::variability::{Measurements, BUNDLED};
            // The browser has no files: only the bundled sets.
            if !BUNDLED.iter().any(|(n, _)| *n == self.variability) {
                return Err(invalid(format!(
                    "variability: '{}' is not one of none, {}",
                    self.variability,
                    BUNDLED.map(|b| b.0).join(", ")
                )));
            }
            Some(Measurements::load(&self.variability).map_err(|e| invalid(e.to_string()))?)
        };
        let placement: Placement = self
            .placement
            .parse()
            .map_err(|e| invalid(format!("placement: {e}")))?;
        let queues = if self.queues.trim().is_empty() {
            Vec::new()
        } else {
            // Core's reader names line and field (`queues:3:guarantee: …`).
            gpuplan_core::queue::parse_queues_toml(&self.queues, "queues")
                .map_err(|es| invalid(es.join("; ")))?
        };
        // Sharing reads Gavel's table as the CLI does (its bundled one at
        // its default GPU type): without it rigid jobs never share.
        let colocation = if self.sharing > 1 {
            Some(gavel_table()?)
        } else {
            None
        };
        let scenario = SimScenario {
            colocation,
            colocation_gpu_type: gpuplan_sim::trace::gavel::DEFAULT_GPU_TYPE.to_string(),
            queues,
            cluster: self.cluster()?,
            interval_s: self.interval_s,
            restart_delay_s: self.restart_delay_s,
            interference_slowdown: self.interference_slowdown,
            time_limit_s: self.time_limit_s,
            seed: self.seed,
            variability,
            cross_node_factor: self.cross_node_factor,
            params: ParamFlags {
                p: Some(self.p),
                interference: Some(interference),
                placement: Some(placement),
                sticky: self.sticky.then_some(Sticky::Keep),
                sharing: Some(self.sharing),
                type_blind: Some(self.type_blind),
                variability_blind: Some(self.variability_blind),
                ..Default::default()
            },
            ..Default::default()
        };
        // Sim's one builder for a run of one policy, as `gpuplan simulate`.
        scenario
            .config_for(&self.policy)
            .map_err(|es| invalid(es.iter().map(field_error).collect::<Vec<_>>().join("; ")))
    }

    /// The scenario's planner, refused as the CLI refuses it when it cannot
    /// honour the placement (only fixed-size policies place through the stage).
    pub fn planner(&self, cfg: &SimConfig) -> Result<Box<dyn gpuplan_solve::Planner>, ApiError> {
        SimScenario::planner(&self.policy, &cfg.params).map_err(|e| invalid(field_error(&e)))
    }

    /// The jobs and the workload's name (the file stem, as the CLI reports it).
    /// Files are read as `gpuplan simulate --workload` reads them: the format
    /// is detected from the first line, jobs with only a duration run rigid.
    pub fn jobs(&self, profiles: &Profiles) -> Result<(Vec<WorkloadJob>, String), ApiError> {
        if !(self.load.is_finite() && self.load > 0.0) {
            return Err(invalid(format!("load multiplier must be > 0, got {}", self.load)));
        }
        let (source, text) = match (self.workload.as_str(), &self.upload) {
            ("upload", Some(u)) => (u.name.clone(), u.text.as_str()),
            ("upload", None) => return Err(invalid("no workload file uploaded")),
            (id, _) => {
                let text = bundled(id).ok_or_else(|| {
                    let valid: Vec<String> = all_workloads().into_iter().map(|w| w.0).collect();
                    invalid(format!("unknown workload '{id}'; valid: {}", valid.join(", ")))
                })?;
                (format!("{id}.csv"), text)
            }
        };
        let accepted = || UPLOAD_FORMATS.map(Format::name).join(", ");
        let format = match trace::detect(text.as_bytes()) {
            Some(Format::Gavel) => {
                return Err(invalid(format!(
                    "{source}: the browser does not read Gavel traces (their steps become \
                     durations through the CLI's trace loader); convert it with `gpuplan trace \
                     convert {source} --out FILE.csv` and upload that. The browser reads: {}",
                    accepted()
                )))
            }
            Some(f) => f,
            None => {
                return Err(invalid(format!(
                    "{source}:1:header: cannot tell the trace format from the first line; \
                     the browser reads: {}",
                    accepted()
                )))
            }
        };
        let t = trace::load(format, &source, text.as_bytes(), &LoadOptions::default())?;
        if t.jobs.len() > MAX_JOBS {
            return Err(invalid(format!(
                "{source}: {} jobs; the browser takes at most {MAX_JOBS}; run it with the CLI",
                t.jobs.len()
            )));
        }
        let mut jobs = trace::workload::to_workload(&t, DurationJobs::Rigid, profiles, self.seed)
            .map_err(|e| invalid(format!("{source}: {e}")))?;
        if self.load != 1.0 {
            for j in &mut jobs {
                j.spec.submit_s /= self.load;
            }
        }
        let stem = source.rsplit('/').next().unwrap_or(&source);
        let stem = stem.rsplit_once('.').map_or(stem, |(a, _)| a).to_string();
        Ok((jobs, stem))
    }
}
