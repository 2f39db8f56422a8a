//! One what-if scenario, the editor's state: its cluster, jobs, config and
//! planner, under the browser's limits.

use gpuplan_core::{Cluster, Interference, Placement, SharingPairs, Sticky};
use gpuplan_sim::trace::{self, workload::DurationJobs, BadRows, Format, LoadOptions};
use gpuplan_sim::variability::Draw;
use gpuplan_sim::{
    CalibrationConfig, IdleRounds, KnownWork, ParamFlags, Profiles, RestartCost, ScenarioError,
    ScenarioField, SimConfig, SimScenario, WorkloadJob,
};
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
    // Issue 54, item 7: the rest of `simulate`'s flags. Each is absent from
    // links while it keeps the CLI's default, so older links read the same.
    /// Pollux's exploration cap, as `--exploration-factor` (none: the policy's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exploration_factor: Option<u32>,
    /// Times its duration a restart is charged, as `--restart-weight`
    /// (none: the policy's own, 1 for Pollux, 2 for gpuplan-mip).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_weight: Option<f64>,
    /// δ of the restart factor, as `--restart-penalty` (none: the restart delay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_penalty_s: Option<f64>,
    /// Attained-service priority exponent, as `--priority-exponent` (none: the policy's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_exponent: Option<f64>,
    /// GPU-seconds at which the priority factor reaches 2^exponent, as `--priority-scale`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_scale_gpu_s: Option<f64>,
    /// Sia's cost of a job left without GPUs, as `--left-out-cost` (0: off).
    #[serde(skip_serializing_if = "is_zero")]
    pub left_out_cost: f64,
    /// Restarts charged only to jobs that hold GPUs (Sia's rule), as `--spare-waiting`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spare_waiting: bool,
    /// Least seconds a job holds its GPUs before a round may change them, as `--min-runtime`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_runtime_s: Option<f64>,
    /// Seconds between checkpoints where the workload gives none, as `--checkpoint-interval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval_s: Option<f64>,
    /// What goodput policies charge a restart, as `--restart-charge`.
    #[serde(skip_serializing_if = "is_default")]
    pub restart_charge: RestartCost,
    /// Fail when jobs still run this many simulated days after the last
    /// arrival, as `--max-sim-days`.
    #[serde(skip_serializing_if = "is_sixty")]
    pub max_sim_days: f64,
    /// Simulate rounds with no job in the system, as `--run-idle-rounds`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub run_idle_rounds: bool,
    /// Most memory a round's model may take, MiB, as `--memory-limit` (none or 0: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<u64>,
    /// The workload's format, as `--trace-format` (empty: told from the first line).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace_format: String,
    /// Skip and count malformed rows, as `--skip-bad-rows`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skip_bad_rows: bool,
    /// Jobs with only a duration, as `--duration-jobs`.
    #[serde(skip_serializing_if = "is_default")]
    pub duration_jobs: DurationJobs,
    /// Shrink jobs larger than the cluster's largest GPU type, as `--shrink-to-fit`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shrink_to_fit: bool,
    /// GPU type whose Gavel throughput turns a Gavel job's steps into a
    /// duration (and whose rows describe rigid jobs when sharing), as `--gavel-gpu-type`.
    #[serde(skip_serializing_if = "is_default_gavel_type")]
    pub gavel_gpu_type: String,
    /// An uploaded Gavel throughput table, as `--gavel-throughputs FILE`:
    /// a Gavel trace's durations and the co-located speeds when sharing
    /// (none: the bundled one). Kept out of links, as other uploads are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gavel_throughputs_upload: Option<Upload>,
    /// How per-GPU slowdowns are drawn, as `--variability-draw`.
    #[serde(skip_serializing_if = "is_default")]
    pub variability_draw: Draw,
    /// An uploaded variability file (`class,node,gpu,slowdown`), when
    /// `variability` is `upload`. Kept out of links, as other uploads are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variability_upload: Option<Upload>,
    /// Which pairs may share a GPU, as `--sharing-pairs`.
    #[serde(skip_serializing_if = "is_default")]
    pub sharing_pairs: SharingPairs,
    /// Keep the run's round log (`--round-log`: one JSON line per round,
    /// for `compare-rounds`), returned in [`super::RunOut::round_log`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub round_log: bool,
    /// With [`Scenario::estimates`]: what the estimate knows of each job's
    /// total work, as `--estimate-work declared|history`.
    #[serde(skip_serializing_if = "is_declared")]
    pub estimate_work: KnownWork,
    /// Estimate every Nth submitted job, as `--estimate-every`.
    #[serde(skip_serializing_if = "is_one_usize")]
    pub estimate_every: usize,
    /// Wall-clock seconds each estimate may take, as `--estimate-budget`
    /// (the browser runs slower than the CLI: a tight budget cuts more short).
    #[serde(skip_serializing_if = "is_default_budget")]
    pub estimate_budget_s: f64,
    /// Skip the low/high runs, as `--estimate-no-ranges`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimate_no_ranges: bool,
    /// How far the fitted models' rates may be off, as `--estimate-spread`.
    #[serde(skip_serializing_if = "is_default_spread")]
    pub estimate_spread: f64,
    /// Rounds a steady plan is kept without planning, as `--estimate-skip-steady`.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub estimate_skip_steady: u32,
}

fn is_declared(w: &KnownWork) -> bool {
    *w == KnownWork::Declared
}

fn is_one_usize(k: &usize) -> bool {
    *k == 1
}

fn is_zero_u32(k: &u32) -> bool {
    *k == 0
}

fn is_default_budget(x: &f64) -> bool {
    *x == CalibrationConfig::default().budget_s
}

fn is_default_spread(x: &f64) -> bool {
    *x == CalibrationConfig::default().rate_spread
}

fn is_one(k: &u32) -> bool {
    *k == 1
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_sixty(x: &f64) -> bool {
    *x == DEFAULT_MAX_SIM_DAYS
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_default_gavel_type(t: &String) -> bool {
    t == gpuplan_sim::trace::gavel::DEFAULT_GPU_TYPE
}

/// `--max-sim-days`' default.
pub const DEFAULT_MAX_SIM_DAYS: f64 = 60.0;

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
            exploration_factor: None,
            restart_weight: None,
            restart_penalty_s: None,
            priority_exponent: None,
            priority_scale_gpu_s: None,
            left_out_cost: 0.0,
            spare_waiting: false,
            min_runtime_s: None,
            checkpoint_interval_s: None,
            restart_charge: RestartCost::default(),
            max_sim_days: DEFAULT_MAX_SIM_DAYS,
            run_idle_rounds: false,
            memory_limit_mb: None,
            trace_format: String::new(),
            skip_bad_rows: false,
            duration_jobs: DurationJobs::default(),
            shrink_to_fit: false,
            gavel_gpu_type: gpuplan_sim::trace::gavel::DEFAULT_GPU_TYPE.to_string(),
            gavel_throughputs_upload: None,
            variability_draw: Draw::default(),
            variability_upload: None,
            sharing_pairs: SharingPairs::default(),
            round_log: false,
            estimate_work: KnownWork::Declared,
            estimate_every: 1,
            estimate_budget_s: CalibrationConfig::default().budget_s,
            estimate_no_ranges: false,
            estimate_spread: CalibrationConfig::default().rate_spread,
            estimate_skip_steady: 0,
        }
    }
}

thread_local! {
    static GAVEL: Cache<gpuplan_sim::colocation::GavelTable> = const { std::cell::RefCell::new(None) };
    static GAVEL_TPUTS: Cache<trace::gavel::Throughputs> = const { std::cell::RefCell::new(None) };
}

/// A bundled table, parsed on first use.
type Cache<T> = std::cell::RefCell<Option<T>>;

fn cached<T: Clone>(
    key: &'static std::thread::LocalKey<Cache<T>>,
    parse: impl FnOnce() -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    key.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(parse()?);
        }
        Ok(slot.as_ref().expect("filled above").clone())
    })
}

/// The bundled Gavel table (co-located speeds), as the CLI's without `--gavel-throughputs`.
fn gavel_table() -> Result<gpuplan_sim::colocation::GavelTable, ApiError> {
    cached(&GAVEL, || {
        Ok(gpuplan_sim::colocation::parse_gavel(
            "simulation_throughputs.json",
            GAVEL_THROUGHPUTS,
        )?)
    })
}

/// Gavel's per-type throughputs (a Gavel trace's durations) from the same
/// bundled table, as the CLI reads them without `--gavel-throughputs`.
fn gavel_throughputs() -> Result<trace::gavel::Throughputs, ApiError> {
    cached(&GAVEL_TPUTS, || {
        Ok(trace::gavel::Throughputs::parse(
            "simulation_throughputs.json",
            GAVEL_THROUGHPUTS,
        )?)
    })
}

/// A scenario error worded with the editor's name for its field.
pub(super) fn field_error(e: &ScenarioError) -> String {
    use gpuplan_core::ParamField as P;
    use ScenarioField as F;
    let name = match e.field {
        F::Interval => "interval",
        F::RestartDelay => "restart delay",
        // Set by the restart penalty field, else the restart delay.
        F::Param(P::RestartPenalty) => "restart penalty",
        F::InterferenceSlowdown => "interference slowdown",
        F::TimeLimit => "time limit",
        F::CrossNodeFactor => "cross-node factor",
        F::Policy => "policy",
        F::Param(P::Placement) => "placement",
        F::Param(P::Sharing) => "sharing",
        F::Param(P::P) => "p",
        F::Param(P::ExplorationFactor) => "exploration factor",
        F::Param(P::RestartWeight) => "restart weight",
        F::Param(P::LeftOutCost) => "left-out cost",
        F::Param(P::PriorityExponent) => "priority exponent",
        F::Param(P::PriorityScale) => "priority scale",
        F::Param(P::MinRuntime) => "min runtime",
        F::MaxSim => "max sim days",
        F::VariabilityDraw => return "variability draw: needs GPU variability".into(),
        F::CheckpointInterval => "checkpoint interval",
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
        let variability = self.variability()?;
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
        let colocation = match (&self.gavel_throughputs_upload, self.sharing > 1) {
            (_, false) => None,
            (None, true) => Some(gavel_table()?),
            (Some(up), true) => Some(gpuplan_sim::colocation::parse_gavel(
                &up.name,
                up.text.as_bytes(),
            )?),
        };
        let scenario = SimScenario {
            colocation,
            colocation_gpu_type: self.gavel_gpu_type.clone(),
            queues,
            cluster: self.cluster()?,
            interval_s: self.interval_s,
            restart_delay_s: self.restart_delay_s,
            interference_slowdown: self.interference_slowdown,
            time_limit_s: self.time_limit_s,
            // As the CLI: days, checked by the builder (NaN too).
            max_sim_s: self.max_sim_days * 86400.0,
            seed: self.seed,
            idle_rounds: if self.run_idle_rounds {
                IdleRounds::Run
            } else {
                IdleRounds::Skip
            },
            variability,
            // As the CLI: the default draw is no statement; another needs variability.
            variability_draw: (self.variability_draw != Draw::default()).then_some(self.variability_draw),
            cross_node_factor: self.cross_node_factor,
            // The CLI's default is half the machine's memory; the browser
            // has no such reading, so none unless given (0: none, as the CLI).
            memory_limit_mb: self.memory_limit_mb.filter(|&mb| mb > 0),
            checkpoint_interval_s: self.checkpoint_interval_s,
            restart_charge: self.restart_charge,
            // The CLI's flags, the same `None`s: the policy's own defaults.
            params: ParamFlags {
                p: Some(self.p),
                restart_penalty_s: self.restart_penalty_s,
                interference: Some(interference),
                exploration_factor: self.exploration_factor,
                placement: Some(placement),
                sticky: self.sticky.then_some(Sticky::Keep),
                restart_weight: self.restart_weight,
                left_out_cost: Some(self.left_out_cost),
                spare_waiting: Some(self.spare_waiting),
                priority_exponent: self.priority_exponent,
                priority_scale_gpu_s: self.priority_scale_gpu_s,
                sharing: Some(self.sharing),
                sharing_pairs: Some(self.sharing_pairs),
                type_blind: Some(self.type_blind),
                variability_blind: Some(self.variability_blind),
                min_runtime_s: self.min_runtime_s,
            },
        };
        // Sim's one builder for a run of one policy, as `gpuplan simulate`.
        scenario
            .config_for(&self.policy)
            .map_err(|es| invalid(es.iter().map(field_error).collect::<Vec<_>>().join("; ")))
    }

    /// How `simulate --estimates` estimates: the CLI's settings, checked
    /// as it checks them.
    pub fn calibration(&self) -> Result<CalibrationConfig, ApiError> {
        if self.estimate_every == 0 {
            return Err(invalid("estimate every: must be >= 1"));
        }
        if self.estimate_budget_s.is_nan() || self.estimate_budget_s <= 0.0 {
            return Err(invalid(format!(
                "estimate budget: must be > 0, got {}",
                self.estimate_budget_s
            )));
        }
        Ok(CalibrationConfig {
            work: self.estimate_work,
            every: self.estimate_every,
            budget_s: self.estimate_budget_s,
            ranges: !self.estimate_no_ranges,
            rate_spread: self.estimate_spread,
            skip_steady_rounds: self.estimate_skip_steady,
        })
    }

    /// The run's per-GPU speed measurements: none, a bundled set, or the
    /// uploaded file (`class,node,gpu,slowdown`, as `--variability FILE`).
    fn variability(&self) -> Result<Option<gpuplan_sim::variability::Measurements>, ApiError> {
        use gpuplan_sim::variability::{Measurements, BUNDLED};
        match self.variability.as_str() {
            "none" => Ok(None),
            "upload" => {
                let up = self
                    .variability_upload
                    .as_ref()
                    .ok_or_else(|| invalid("variability: no variability file uploaded"))?;
                Ok(Some(Measurements::parse(&up.name, &up.text)?))
            }
            name if BUNDLED.iter().any(|(n, _)| *n == name) => {
                // The CLI's bundled sets draw PAL's way from every measured
                // run, which the page does not carry (244 KB): the same draw
                // is an upload of the runs file, never a silent other one.
                if self.variability_draw == Draw::Pal {
                    return Err(invalid(format!(
                        "variability draw pal: the browser does not bundle {name}'s measured runs; \
                         upload traces/pal/variability/runs/{name}.csv as the variability file \
                         (the draw of gpuplan simulate --variability {name} --variability-draw pal)"
                    )));
                }
                Ok(Some(Measurements::load(name)?))
            }
            other => Err(invalid(format!(
                "variability: '{other}' is not one of none, upload, {}",
                BUNDLED.map(|b| b.0).join(", ")
            ))),
        }
    }

    /// The scenario's planner, refused as the CLI refuses it when it cannot
    /// honour the placement (only fixed-size policies place through the stage).
    pub fn planner(&self, cfg: &SimConfig) -> Result<Box<dyn gpuplan_solve::Planner>, ApiError> {
        SimScenario::planner(&self.policy, &cfg.params).map_err(|e| invalid(field_error(&e)))
    }

    /// The jobs and the workload's name (the file stem, as the CLI reports it).
    pub fn jobs(&self, profiles: &Profiles) -> Result<(Vec<WorkloadJob>, String), ApiError> {
        self.jobs_noted(profiles).map(|(jobs, name, _)| (jobs, name))
    }

    /// [`Scenario::jobs`] and what the CLI says about them on stderr:
    /// rows skipped (`--skip-bad-rows`) and jobs shrunk (`--shrink-to-fit`).
    /// Files are read as `gpuplan simulate --workload` reads them: the
    /// format told from the first line unless given, Gavel traces through
    /// the bundled throughput table.
    pub fn jobs_noted(
        &self,
        profiles: &Profiles,
    ) -> Result<(Vec<WorkloadJob>, String, Vec<String>), ApiError> {
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
        let format = if self.trace_format.is_empty() {
            trace::detect(text.as_bytes()).ok_or_else(|| {
                invalid(format!(
                    "{source}:1:header: cannot tell the trace format from the first line; \
                     pick it in Format (the CLI's --trace-format); the browser reads: {}",
                    accepted()
                ))
            })?
        } else {
            Format::from_name(&self.trace_format).map_err(|e| invalid(format!("trace format: {e}")))?
        };
        let tputs = match (&self.gavel_throughputs_upload, format == Format::Gavel) {
            (_, false) => None,
            (None, true) => Some(gavel_throughputs()?),
            (Some(up), true) => Some(trace::gavel::Throughputs::parse(&up.name, up.text.as_bytes())?),
        };
        let opts = LoadOptions {
            bad_rows: if self.skip_bad_rows {
                BadRows::Skip
            } else {
                BadRows::Fail
            },
            gavel_throughputs: tputs.as_ref(),
            gavel_gpu_type: Some(&self.gavel_gpu_type),
        };
        let t = trace::load(format, &source, text.as_bytes(), &opts)?;
        let mut notes = Vec::new();
        if t.skipped_rows > 0 {
            // The CLI's warning, word for word.
            notes.push(format!(
                "warning: {source}: skipped {} bad row(s); first: {}",
                t.skipped_rows,
                t.problems.first().map(|p| p.to_string()).unwrap_or_default()
            ));
        }
        if t.jobs.len() > MAX_JOBS {
            return Err(invalid(format!(
                "{source}: {} jobs; the browser takes at most {MAX_JOBS}; run it with the CLI",
                t.jobs.len()
            )));
        }
        let mut jobs = trace::workload::to_workload(&t, self.duration_jobs, profiles, self.seed)
            .map_err(|e| invalid(format!("{source}: {e}")))?;
        if self.shrink_to_fit {
            let shrunk = gpuplan_sim::shrink_to_fit(&self.cluster()?, &mut jobs);
            if !shrunk.is_empty() {
                notes.push(format!(
                    "{source}: --shrink-to-fit shrank {} job(s): {}",
                    shrunk.len(),
                    shrunk.join(", ")
                ));
            }
        }
        if self.load != 1.0 {
            for j in &mut jobs {
                j.spec.submit_s /= self.load;
            }
        }
        let stem = source.rsplit('/').next().unwrap_or(&source);
        let stem = stem.rsplit_once('.').map_or(stem, |(a, _)| a).to_string();
        Ok((jobs, stem, notes))
    }
}
