//! What `simulate` and `sweep` share: the simulator's flags ([`SimOpts`]),
//! read into a checked [`SimConfig`], a workload's jobs and one run. Below
//! both commands; it imports none of them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use gpuplan_core::{Cluster, Interference, Placement, Sticky};
use gpuplan_sim::{
    files::simulate_named, Control, ParamFlags, Profiles, ScenarioError, ScenarioField, SimConfig, SimResult,
    SimScenario, WorkloadJob,
};

use crate::common::{memory_limit_mb, SharingPairsArg};
use crate::inputs::{load_cluster, read_queues, DurationJobsArg, TraceOpts};

#[derive(Args, Debug, Clone)]
pub struct SimOpts {
    /// Cluster: shape NODESxGPUS (e.g. 16x4), a cluster file (traces/clusters/*.csv) or an Alibaba PAI machine spec.
    #[arg(long, default_value = "16x4")]
    pub cluster: String,
    /// Teams' queues (TOML, docs/tenants.md): guarantees, borrowing limits and
    /// reclaim in every round; jobs go to the queue their workload's `queue`
    /// (or `group`) column names, else `default`. Per-queue figures in the result.
    #[arg(long, value_name = "FILE")]
    pub queues: Option<std::path::PathBuf>,
    /// Seconds between scheduling rounds.
    #[arg(long, default_value_t = 60.0)]
    pub interval: f64,
    /// Seconds a job loses when its allocation changes.
    #[arg(long, default_value_t = 30.0)]
    pub restart_delay: f64,
    /// Seconds of run time between each job's checkpoints, where the workload's
    /// `checkpoint_interval_s` column gives none: a restart then also throws away the work
    /// since the last checkpoint (the result's `lost_gpu_h`). Default: none, jobs checkpoint
    /// when stopped and lose only --restart-delay.
    #[arg(long, value_name = "SECONDS")]
    pub checkpoint_interval: Option<f64>,
    /// What goodput-based policies charge a restart of a job that checkpoints: its penalty
    /// plus the work since its last checkpoint (`checkpoint`), or the penalty alone (`fixed`,
    /// as before checkpoints were reported).
    #[arg(long, value_enum, default_value = "checkpoint")]
    pub restart_charge: RestartChargeArg,
    /// Least seconds a job holds an allocation before a round may shrink, move or preempt it
    /// (default 0: none).
    #[arg(long, value_name = "SECONDS")]
    pub min_runtime: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Power-mean exponent p of goodput-based policies.
    #[arg(long, default_value_t = -1.0, allow_hyphen_values = true)]
    pub p: f64,
    /// Attained-service priority of goodput-based policies: each job's value is
    /// multiplied by (1 + attained GPU-seconds / --priority-scale)^this (0 = off,
    /// Pollux's objective). See docs/policy.md.
    #[arg(long)]
    pub priority_exponent: Option<f64>,
    /// GPU-seconds of service at which the priority factor reaches 2^exponent.
    #[arg(long)]
    pub priority_scale: Option<f64>,
    /// δ of the restart factor (age − δ·restarts)/(age + δ) in goodput-based
    /// policies' objective (default: --restart-delay, the time a restart really costs).
    #[arg(long)]
    pub restart_penalty: Option<f64>,
    /// Times its duration a restart is charged in goodput-based policies'
    /// restart factor (default 1, Pollux's; gpuplan-mip 2).
    #[arg(long)]
    pub restart_weight: Option<f64>,
    /// Sia's valuation in goodput-based policies: each job's speedups divided
    /// by its least configuration's, and a job left without GPUs costing
    /// this in the objective's Σ (v+ε)^p (Sia: 1.1), so a job may wait while
    /// another grows. Needs --p below 0 (Sia's: -0.5). Default 0: off, Pollux's.
    /// See docs/heterogeneity.md
    #[arg(long, default_value_t = 0.0)]
    pub left_out_cost: f64,
    /// Charge goodput-based policies' restart factor only to jobs that hold
    /// GPUs (Sia's rule); by default a waiting job's start is charged too (Pollux's)
    #[arg(long)]
    pub spare_waiting: bool,
    /// Pollux's exploration cap in goodput-based policies: a job gets at most
    /// this many times the most GPUs it has run on (default 2, Pollux's).
    #[arg(long)]
    pub exploration_factor: Option<u32>,
    /// Interference rule of goodput-based policies: at most one multi-node job per node (avoid) or none (allow).
    #[arg(long, default_value = "avoid", value_parser = interference_names())]
    pub interference: String,
    /// Slowdown of multi-node jobs sharing a node with another (0 = none), as the artifact's --interference.
    #[arg(long, default_value_t = 0.0)]
    pub interference_slowdown: f64,
    /// Solver time limit per round, seconds (MIP planners).
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Most memory a round's model may take, MiB, as `plan --memory-limit`:
    /// a larger model is not built and that round falls back to greedy,
    /// marked (default: half the machine's memory; 0: no limit)
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,
    /// Read application profiles from this directory instead of the bundled ones.
    #[arg(long)]
    pub traces: Option<PathBuf>,
    #[command(flatten)]
    pub trace: TraceOpts,
    /// Jobs with a duration and no application: rigid fixed-throughput jobs, or the Pollux mapping to an application.
    #[arg(long, value_enum, default_value = "rigid")]
    pub duration_jobs: DurationJobsArg,
    /// Fail if jobs are still running this many simulated days after the last arrival.
    #[arg(long, default_value_t = 60.0)]
    pub max_sim_days: f64,
    /// Simulate rounds with no job in the system instead of skipping them (same results, slower).
    #[arg(long)]
    pub run_idle_rounds: bool,
    /// Shrink a job that needs more GPUs than the cluster's largest GPU type to that
    /// type's size (a rigid job's duration grows in proportion), instead of refusing the run.
    #[arg(long)]
    pub shrink_to_fit: bool,
    /// Per-GPU speed variability (PAL's measurements): none, longhorn (V100), frontera
    /// (RTX 5000), ls6 (A100), or a file of class,node,gpu,slowdown rows; drawn per node by --seed.
    #[arg(long, default_value = "none")]
    pub variability: String,
    /// With --variability: how many times slower a rigid job runs when it spans nodes (PAL's L).
    #[arg(long, default_value_t = gpuplan_sim::variability::DEFAULT_CROSS_NODE_FACTOR)]
    pub cross_node_factor: f64,
    /// With --variability: `node` draws whole measured nodes (per-GPU medians; slow
    /// GPUs stay together), `pal` gives each GPU one measured run, as PAL's simulator does.
    #[arg(long, default_value = "node")]
    pub variability_draw: String,
    /// How fixed-size policies (fifo, srtf, tiresias, ...) pick GPUs: default (the
    /// policy's own, running jobs kept), packed, random, pm-first or pal (PAL's), or
    /// mip (PAL's cost minimised over all the round's jobs at once; pm-first, pal and
    /// mip need --variability). See docs/heterogeneity.md.
    #[arg(long, default_value = "default")]
    pub placement: String,
    /// With --placement: running jobs keep their GPUs instead of being placed afresh every round.
    #[arg(long)]
    pub sticky: bool,
    /// Let up to K jobs share a GPU (K = 2 when given alone; off by default). Planners that
    /// share (marked in `gpuplan policies`) decide which;
    /// shared jobs run at Gavel's measured co-located speed where their models were measured,
    /// else the fitted curve. See docs/colocation.md.
    #[arg(long, value_name = "K", num_args = 0..=1, default_missing_value = "2")]
    pub sharing: Option<u32>,
    /// With --sharing: which pairs may share a GPU. `all`: any two whose memories fit (unmeasured
    /// pairs valued by the fitted curve); `measured`: only pairs whose co-located speeds Gavel
    /// measured (Lucid's rule).
    #[arg(long, value_enum, default_value = "all")]
    pub sharing_pairs: SharingPairsArg,
    /// Goodput-based policies plan without knowing GPU types, as Pollux does: every
    /// type is valued by the job's model on the type it was first measured on. Jobs
    /// still run at their true per-type speed. See docs/heterogeneity.md.
    #[arg(long)]
    pub type_blind: bool,
    /// With --variability: planners plan without seeing per-GPU speeds (every GPU of a
    /// type alike); jobs still run at their true slowdowns. See docs/heterogeneity.md.
    #[arg(long)]
    pub variability_blind: bool,
}

/// `--interference`'s values, core's names (one reading for every driver).
fn interference_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Interference::ALL.map(Interference::name))
}

impl SimOpts {
    /// The scenario as stated by the flags; sim's builder checks it.
    pub fn scenario(&self) -> Result<SimScenario> {
        let cluster: Cluster = load_cluster(&self.cluster)?;
        let variability = match self.variability.as_str() {
            "none" => None,
            name => Some(gpuplan_sim::variability::Measurements::load(name)?),
        };
        let draw: gpuplan_sim::variability::Draw = self
            .variability_draw
            .parse()
            .map_err(|e| anyhow::anyhow!("--variability-draw: {e}"))?;
        let colocation = match self.sharing {
            Some(k) if k > 1 => Some(self.gavel_table()?),
            _ => None,
        };
        Ok(SimScenario {
            cluster,
            interval_s: self.interval,
            restart_delay_s: self.restart_delay,
            interference_slowdown: self.interference_slowdown,
            time_limit_s: self.time_limit,
            memory_limit_mb: memory_limit_mb(self.memory_limit),
            max_sim_s: self.max_sim_days * 86400.0,
            seed: self.seed,
            idle_rounds: if self.run_idle_rounds {
                gpuplan_sim::IdleRounds::Run
            } else {
                gpuplan_sim::IdleRounds::Skip
            },
            variability,
            // The flag's default is no statement: only another draw needs
            // --variability.
            variability_draw: (draw != Default::default()).then_some(draw),
            cross_node_factor: self.cross_node_factor,
            colocation,
            colocation_gpu_type: self.trace.gavel_gpu_type.clone(),
            params: self.param_flags()?,
            queues: match &self.queues {
                None => Vec::new(),
                Some(path) => read_queues(path)?,
            },
            checkpoint_interval_s: self.checkpoint_interval,
            restart_charge: match self.restart_charge {
                RestartChargeArg::Checkpoint => gpuplan_sim::RestartCost::Checkpoint,
                RestartChargeArg::Fixed => gpuplan_sim::RestartCost::Fixed,
            },
        })
    }

    /// The policy parameters the flags set (`None`: the policy's own).
    fn param_flags(&self) -> Result<ParamFlags> {
        let placement: Placement = self
            .placement
            .parse()
            .map_err(|e| anyhow::anyhow!("--placement: {e}"))?;
        Ok(ParamFlags {
            p: Some(self.p),
            restart_penalty_s: self.restart_penalty,
            interference: Some(
                self.interference
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--interference: {e}"))?,
            ),
            exploration_factor: self.exploration_factor,
            placement: Some(placement),
            sticky: self.sticky.then_some(Sticky::Keep),
            restart_weight: self.restart_weight,
            left_out_cost: Some(self.left_out_cost),
            spare_waiting: Some(self.spare_waiting),
            priority_exponent: self.priority_exponent,
            priority_scale_gpu_s: self.priority_scale,
            sharing: self.sharing,
            sharing_pairs: Some(self.sharing_pairs.into()),
            type_blind: Some(self.type_blind),
            variability_blind: Some(self.variability_blind),
            min_runtime_s: self.min_runtime,
        })
    }

    /// The checked simulator settings; every bad flag is named at once.
    pub fn config(&self) -> Result<SimConfig> {
        self.scenario()?.config().map_err(flag_errors)
    }

    /// The settings of a run under `policy`, checked with that policy's
    /// params ([`SimScenario::config_for`]); every bad flag named at once.
    pub fn config_for(&self, policy: &str) -> Result<SimConfig> {
        self.scenario()?.config_for(policy).map_err(flag_errors)
    }

    /// The run's params under one policy: the policy's own defaults
    /// (`registry::default_params`: `gpuplan-mip`'s objective) wherever the
    /// user gave no flag, so a sweep of several policies gives each its own.
    pub fn params_for(&self, policy: &str) -> Result<gpuplan_core::PolicyParams> {
        Ok(self.param_flags()?.over(
            gpuplan_solve::registry::default_params(policy),
            self.restart_delay,
        ))
    }

    /// Gavel's throughput table, from `--gavel-throughputs` or the bundled
    /// one: the simulator's ground truth for co-located jobs (measured
    /// pairs, the curve fitted to them) and its rigid jobs' sharing facts.
    fn gavel_table(&self) -> Result<gpuplan_sim::colocation::GavelTable> {
        Ok(gpuplan_sim::files::gavel_table(
            self.trace.gavel_throughputs.as_deref(),
        )?)
    }
}

/// The workload's jobs; with `--shrink-to-fit`, cut to the run's `cluster`.
pub fn load_workload(
    path: &Path,
    opts: &SimOpts,
    profiles: &Profiles,
    cluster: &Cluster,
) -> Result<Vec<WorkloadJob>> {
    let mut jobs = crate::inputs::load_workload(path, &opts.trace, opts.duration_jobs, opts.seed, profiles)?;
    if opts.shrink_to_fit {
        let shrunk = gpuplan_sim::shrink_to_fit(cluster, &mut jobs);
        if !shrunk.is_empty() {
            eprintln!(
                "{}: --shrink-to-fit shrank {} job(s): {}",
                path.display(),
                shrunk.len(),
                shrunk.join(", ")
            );
        }
    }
    Ok(jobs)
}

/// `--restart-charge`'s values ([`gpuplan_sim::RestartCost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RestartChargeArg {
    /// The penalty plus the work since the job's last checkpoint.
    Checkpoint,
    /// The penalty alone.
    Fixed,
}

/// A scenario error worded with the flag that sets the field.
fn flag_error(e: &ScenarioError) -> String {
    use gpuplan_core::ParamField as P;
    use ScenarioField as F;
    let flag = match e.field {
        F::Interval => "--interval",
        F::RestartDelay => "--restart-delay",
        F::InterferenceSlowdown => "--interference-slowdown",
        F::TimeLimit => "--time-limit",
        F::MaxSim => "--max-sim-days",
        F::CrossNodeFactor => "--cross-node-factor",
        // The other field is a flag too: name it.
        F::VariabilityDraw => return "--variability-draw: needs --variability".into(),
        F::Queues => "--queues",
        F::CheckpointInterval => "--checkpoint-interval",
        F::Policy => "--policy",
        F::Param(P::P) => "--p",
        F::Param(P::RestartPenalty) => "--restart-penalty",
        F::Param(P::ExplorationFactor) => "--exploration-factor",
        F::Param(P::Placement) => "--placement",
        F::Param(P::RestartWeight) => "--restart-weight",
        F::Param(P::LeftOutCost) => "--left-out-cost",
        F::Param(P::PriorityExponent) => "--priority-exponent",
        F::Param(P::PriorityScale) => "--priority-scale",
        F::Param(P::Sharing) => "--sharing",
        F::Param(P::MinRuntime) => "--min-runtime",
        // A field no flag of simulate sets: its round-file key.
        _ => return e.to_string(),
    };
    format!("{flag}: {}", e.problem)
}

/// Every scenario error, each worded with its flag, on one line.
fn flag_errors(es: Vec<ScenarioError>) -> anyhow::Error {
    let lines: Vec<String> = es.iter().map(flag_error).collect();
    anyhow::anyhow!("{}", lines.join("; "))
}

/// Run one simulation; the shared path of `simulate` and `sweep`.
pub fn run_one_dumping(
    cfg: &SimConfig,
    profiles: &Profiles,
    path: &Path,
    jobs: &[WorkloadJob],
    policy: &str,
    dump: Option<&Path>,
) -> Result<SimResult> {
    if let Some(d) = dump {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut index = 0usize;
    let mut dump_err: Option<anyhow::Error> = None;
    let mut observer = |round: &gpuplan_core::Round, _: &gpuplan_core::Plan| {
        if let Some(d) = dump {
            let file = d.join(format!("round-{index:05}.json"));
            index += 1;
            let res = serde_json::to_string_pretty(round)
                .map_err(anyhow::Error::from)
                .and_then(|s| {
                    std::fs::write(&file, s).with_context(|| format!("writing {}", file.display()))
                });
            if let Err(e) = res {
                dump_err = Some(e);
                return Control::Cancel;
            }
        }
        Control::Continue
    };
    let result = simulate_named(cfg, profiles, path, jobs, policy, &mut observer);
    if let Some(e) = dump_err {
        return Err(e);
    }
    result.with_context(|| format!("simulating {} under {policy}", path.display()))
}
