//! `gpuplan simulate` and `gpuplan sweep`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_core::{Cluster, Interference, Placement, Sticky};
use gpuplan_sim::{
    files::simulate_named, Control, ParamFlags, Profiles, ScenarioError, ScenarioField, SimConfig, SimResult,
    SimScenario, WorkloadJob,
};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;

use crate::common::{memory_limit_mb, Format, SharingPairsArg};
use crate::inputs::{load_cluster, load_profiles, read_queues, DurationJobsArg, TraceOpts};
use crate::sweep_slurm::{result_file, SweepTask};

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

#[derive(Args, Debug)]
pub struct SimulateArgs {
    #[arg(long)]
    pub workload: PathBuf,
    #[arg(long)]
    pub policy: String,
    #[command(flatten)]
    pub opts: SimOpts,
    /// Write jobs.csv, rounds.csv and SVG plots here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every round's input (the `gpuplan plan --input` format) here.
    #[arg(long)]
    pub dump_rounds: Option<PathBuf>,
    /// Write one JSON line per round here: each job's GPUs, nodes, batch
    /// size, goodput, progress and restarts, and the fitness of the chosen
    /// allocation (for `gpuplan compare-rounds`; docs/fidelity.md).
    #[arg(long)]
    pub round_log: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also report queueing delay, JCT per application and finish-time
    /// fairness (each job simulated again alone), as the browser explorer does.
    #[arg(long)]
    pub analysis: bool,
    #[command(flatten)]
    pub estimates: EstimateOpts,
}

/// `simulate --estimates`: each job's predicted start and finish at its
/// submission against its actual ones (docs/estimates.md).
#[derive(Args, Debug)]
pub struct EstimateOpts {
    /// Estimate each job's start and finish at its submission (the
    /// planner run forward from that round), then compare with what
    /// happened: estimates.csv and estimates.json in --out, and a summary.
    #[arg(long)]
    pub estimates: bool,
    /// What the estimate knows of each job's total work: declared (its true
    /// total) or history (predicted from the jobs finished so far).
    #[arg(long, value_enum, default_value = "declared", requires = "estimates")]
    pub estimate_work: EstimateWorkArg,
    /// Estimate every Nth submitted job (1: all), to bound the cost.
    #[arg(long, default_value_t = 1, requires = "estimates")]
    pub estimate_every: usize,
    /// Wall-clock seconds each estimate may take.
    #[arg(long, default_value_t = 5.0, requires = "estimates")]
    pub estimate_budget: f64,
    /// Skip the low/high runs (no ranges; a third of the cost with history).
    #[arg(long, requires = "estimates")]
    pub estimate_no_ranges: bool,
    /// How far the fitted models' rates may be off (fraction): the ranges'
    /// low run is that much faster, the high run slower.
    #[arg(long, default_value_t = 0.1, requires = "estimates")]
    pub estimate_spread: f64,
    /// After a simulated round that changes nothing, keep its plan up to
    /// this many rounds without planning, unless a job finishes (0: plan
    /// every round).
    #[arg(long, default_value_t = 0, requires = "estimates")]
    pub estimate_skip_steady: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EstimateWorkArg {
    Declared,
    History,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Workload files or folders of them.
    #[arg(long, num_args = 1.., required = true)]
    pub workloads: Vec<PathBuf>,
    /// Comma-separated policy names.
    #[arg(long, value_delimiter = ',', required = true)]
    pub policies: Vec<String>,
    /// Comma-separated seeds to sweep over (default: --seed alone).
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<u64>,
    #[command(flatten)]
    pub opts: SimOpts,
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Run each (workload, policy, seed) cell as a task of one Slurm array
    /// job, then write the summary here once every cell is in. Needs --out
    /// on a file system the nodes share; a rerun submits only missing cells.
    #[arg(long, conflicts_with = "cell")]
    pub slurm: bool,
    /// The Slurm partition of the array job (default: sbatch's, i.e. SBATCH_PARTITION or Slurm's default).
    #[arg(long, requires = "slurm")]
    pub partition: Option<String>,
    /// Run only this cell (an index into the sweep's task order) and write
    /// its result.json: what each Slurm array task runs.
    #[arg(long, hide = true)]
    pub cell: Option<usize>,
}

impl SimOpts {
    /// The scenario as stated by the flags; sim's builder checks it.
    fn scenario(&self) -> Result<SimScenario> {
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
        self.scenario()?.config().map_err(|es| {
            let lines: Vec<String> = es.iter().map(flag_error).collect();
            anyhow::anyhow!("{}", lines.join("; "))
        })
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
fn load_workload(
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

/// Run one simulation; the shared path of `simulate` and `sweep`.
fn run_one_dumping(
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

pub fn print_table(rows: &[&gpuplan_sim::Summary]) {
    println!(
        "{:<16} {:<14} {:>5} {:>9} {:>9} {:>9} {:>10} {:>9} {:>6} {:>6} {:>8} {:>10} {:>8}",
        "policy",
        "workload",
        "jobs",
        "avg_jct_h",
        "p50_jct_h",
        "p99_jct_h",
        "imagenet_h",
        "makespan_h",
        "util",
        "busy",
        "restarts",
        "plan_ms",
        "wall_s"
    );
    for s in rows {
        println!(
            "{:<16} {:<14} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>9.2} {:>6.2} {:>6.2} {:>8} {:>10.2} {:>8.1}",
            s.policy,
            s.workload,
            s.jobs,
            s.avg_jct_s / 3600.0,
            s.p50_jct_s / 3600.0,
            s.p99_jct_s / 3600.0,
            s.imagenet_mean_jct_s
                .map_or("-".into(), |v| format!("{:.3}", v / 3600.0)),
            s.makespan_s / 3600.0,
            s.gpu_utilization,
            s.gpu_busy,
            s.restarts,
            s.planner_ms.mean,
            s.wall_s
        );
    }
}

pub fn simulate(a: SimulateArgs) -> Result<ExitCode> {
    let mut cfg = a.opts.scenario()?.config_for(&a.policy).map_err(|es| {
        let lines: Vec<String> = es.iter().map(flag_error).collect();
        anyhow::anyhow!("{}", lines.join("; "))
    })?;
    cfg.round_log = a.round_log.is_some();
    let profiles = load_profiles(a.opts.traces.clone())?;
    let jobs = load_workload(&a.workload, &a.opts, &profiles, &cfg.cluster)?;
    let r = if a.estimates.estimates {
        run_with_estimates(&a, &cfg, &profiles, &jobs)?
    } else {
        run_one_dumping(
            &cfg,
            &profiles,
            &a.workload,
            &jobs,
            &a.policy,
            a.dump_rounds.as_deref(),
        )?
    };
    if let Some(out) = &a.out {
        write_outputs(out, &r, &cfg)?;
    }
    if let Some(path) = &a.round_log {
        let mut text = String::new();
        for line in &r.round_log {
            text.push_str(&serde_json::to_string(line)?);
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let r = SimResult {
        round_log: Vec::new(),
        ..r
    };
    let analysis = if a.analysis {
        let isolated = gpuplan_sim::isolated_jcts(&cfg, &profiles, &jobs, &mut |_| Control::Continue)?;
        let an = gpuplan_sim::analyse(&r).with_fairness(&r, &isolated);
        if let Some(out) = &a.out {
            std::fs::write(out.join("analysis.json"), serde_json::to_string_pretty(&an)?)?;
        }
        Some(an)
    } else {
        None
    };
    match a.format {
        Format::Json => {
            /// The summary's keys, plus `analysis` with --analysis.
            #[derive(Serialize)]
            struct Out<'a> {
                #[serde(flatten)]
                summary: &'a gpuplan_sim::Summary,
                #[serde(skip_serializing_if = "Option::is_none")]
                analysis: Option<&'a gpuplan_sim::Analysis>,
                /// Per queue, with --queues.
                #[serde(skip_serializing_if = "<[_]>::is_empty")]
                queues: &'a [gpuplan_sim::QueueSummary],
            }
            let out = Out {
                summary: &r.summary,
                analysis: analysis.as_ref(),
                queues: &r.queues,
            };
            println!("{}", serde_json::to_string_pretty(&out)?)
        }
        Format::Table => {
            print_table(&[&r.summary]);
            if let Some(an) = &analysis {
                print_analysis(an);
            }
            print_queues(&r.queues);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `simulate --estimates`: the run with each sampled job's estimate at
/// its submission; writes estimates.csv and estimates.json to --out and
/// prints the calibration summary on stderr.
fn run_with_estimates(
    a: &SimulateArgs,
    cfg: &SimConfig,
    profiles: &Profiles,
    jobs: &[WorkloadJob],
) -> Result<SimResult> {
    let e = &a.estimates;
    if a.dump_rounds.is_some() {
        bail!("--estimates: not with --dump-rounds");
    }
    if e.estimate_every == 0 {
        bail!("--estimate-every: must be >= 1");
    }
    if e.estimate_budget.is_nan() || e.estimate_budget <= 0.0 {
        bail!("--estimate-budget: must be > 0, got {}", e.estimate_budget);
    }
    let calib = gpuplan_sim::CalibrationConfig {
        work: match e.estimate_work {
            EstimateWorkArg::Declared => gpuplan_sim::KnownWork::Declared,
            EstimateWorkArg::History => gpuplan_sim::KnownWork::History,
        },
        every: e.estimate_every,
        budget_s: e.estimate_budget,
        ranges: !e.estimate_no_ranges,
        rate_spread: e.estimate_spread,
        skip_steady_rounds: e.estimate_skip_steady,
    };
    let (mut r, records, summary) =
        gpuplan_sim::simulate_with_estimates(cfg, profiles, jobs, &a.policy, &calib).with_context(|| {
            format!(
                "simulating {} under {} with estimates",
                a.workload.display(),
                a.policy
            )
        })?;
    r.summary.workload = gpuplan_sim::files::workload_name(&a.workload);
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("estimates.csv"), gpuplan_sim::records_csv(&records)?)?;
        std::fs::write(
            out.join("estimates.json"),
            serde_json::to_string_pretty(&summary)?,
        )?;
    }
    let h = |x: f64| x / 3600.0;
    eprintln!(
        "estimates ({:?}, {} of {} jobs, {} cut short): start error p50 {:.0} s p90 {:.0} s (mean wait {:.0} s, p50/mean wait {:.3}); finish error p50 {:.0} s p90 {:.0} s ({:.2} h / {:.2} h); finishes in range {:.0}%; {:.2} s per estimate, {:.0} s in all",
        summary.work,
        summary.estimated,
        jobs.len(),
        summary.cut_short,
        summary.start_err_p50_s,
        summary.start_err_p90_s,
        summary.wait_mean_s,
        summary.start_err_over_wait,
        summary.finish_err_p50_s,
        summary.finish_err_p90_s,
        h(summary.finish_err_p50_s),
        h(summary.finish_err_p90_s),
        100.0 * summary.finish_in_range,
        summary.wall_p50_s,
        summary.wall_total_s
    );
    Ok(r)
}

/// The per-queue figures of a run with --queues (docs/tenants.md).
fn print_queues(qs: &[gpuplan_sim::QueueSummary]) {
    if qs.is_empty() {
        return;
    }
    println!(
        "\n{:<16} {:>5} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "queue", "jobs", "avg_jct_h", "p99_jct_h", "gpu_hours", "borrowed_h", "shortfall_h"
    );
    for q in qs {
        let [jobs, avg, p99, gpu_h, borrowed, short] = queue_cells(q);
        println!(
            "{:<16} {jobs:>5} {avg:>10} {p99:>10} {gpu_h:>10} {borrowed:>12} {short:>12}",
            q.queue
        );
    }
}

/// A queue's figures as table cells, in hours: jobs, average and p99 JCT,
/// GPU-hours, borrowed and shortfall (the CLI table and the report's).
fn queue_cells(q: &gpuplan_sim::QueueSummary) -> [String; 6] {
    [
        q.jobs.to_string(),
        format!("{:.3}", q.avg_jct_s / 3600.0),
        format!("{:.3}", q.p99_jct_s / 3600.0),
        format!("{:.2}", q.gpu_hours),
        format!("{:.2}", q.borrowed_gpu_s / 3600.0),
        format!("{:.2}", q.shortfall_gpu_s / 3600.0),
    ]
}

fn print_analysis(an: &gpuplan_sim::Analysis) {
    let h = |s: f64| s / 3600.0;
    let q = &an.queueing_delay_s;
    println!(
        "\nqueueing delay (start - submit): mean {:.3} h, p50 {:.3} h, p99 {:.3} h",
        h(q.mean),
        h(q.p50),
        h(q.p99)
    );
    if let Some(f) = &an.fairness {
        println!(
            "finish-time fairness rho = JCT / isolated JCT: mean {:.3}, p50 {:.3}, p99 {:.3}, max {:.3}; {} job(s) with rho > 1",
            f.rho.mean, f.rho.p50, f.rho.p99, f.rho.max, f.unfair_jobs
        );
        println!("  isolated JCT: {}", f.isolated);
    }
    for j in &an.left_out {
        println!("  left out of fairness: {} ({})", j.name, j.reason);
    }
    println!(
        "\n{:<14} {:>5} {:>10} {:>10} {:>10}",
        "application", "jobs", "mean_jct_h", "p50_jct_h", "p99_jct_h"
    );
    for a in &an.per_app {
        println!(
            "{:<14} {:>5} {:>10.3} {:>10.3} {:>10.3}",
            a.app,
            a.jobs,
            h(a.jct_s.mean),
            h(a.jct_s.p50),
            h(a.jct_s.p99)
        );
    }
}

/// jobs.csv, rounds.csv and the plots.
pub fn write_outputs(dir: &Path, r: &SimResult, cfg: &SimConfig) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut w = csv::Writer::from_path(dir.join("jobs.csv"))?;
    w.write_record([
        "name",
        "app",
        "submit_s",
        "completion_s",
        "jct_s",
        "restarts",
        "attained_gpu_s",
        "max_gpus_used",
    ])?;
    for j in &r.jobs {
        w.write_record([
            j.name.clone(),
            j.app.clone(),
            format!("{}", j.submit_s),
            format!("{}", j.completion_s),
            format!("{}", j.jct_s),
            j.restarts.to_string(),
            format!("{:.1}", j.attained_gpu_s),
            j.max_gpus_used.to_string(),
        ])?;
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("rounds.csv"))?;
    w.write_record([
        "time_s",
        "active",
        "running",
        "gpus_allocated",
        "restarts",
        "planner_ms",
        "status",
    ])?;
    for x in &r.rounds {
        w.write_record([
            format!("{}", x.time_s),
            x.active.to_string(),
            x.running.to_string(),
            x.gpus_allocated.to_string(),
            x.restarts.to_string(),
            format!("{:.3}", x.planner_ms),
            serde_json::to_value(x.status)?.as_str().unwrap_or("").to_string(),
        ])?;
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("gpus.csv"))?;
    w.write_record(["node", "gpu", "held_s", "shared_s", "busy_s", "utilization"])?;
    for g in &r.gpus {
        w.write_record([
            g.node.to_string(),
            g.gpu.to_string(),
            format!("{:.1}", g.held_s),
            format!("{:.1}", g.shared_s),
            format!("{:.1}", g.busy_s),
            format!(
                "{:.4}",
                if r.summary.makespan_s > 0.0 {
                    g.busy_s / r.summary.makespan_s
                } else {
                    0.0
                }
            ),
        ])?;
    }
    w.flush()?;
    // Goodput over time in ground truth, the explorer's work chart (sim's
    // `SimResult::work_rate`): jobs' worth of work per hour over each
    // interval, from the first round on.
    let mut w = csv::Writer::from_path(dir.join("work_rate.csv"))?;
    w.write_record(["from_s", "to_s", "jobs_per_h"])?;
    let mut from = r.rounds.first().map_or(0.0, |x| x.time_s);
    for &(t, rate) in &r.work_rate {
        w.write_record([format!("{from}"), format!("{t}"), format!("{rate}")])?;
        from = t;
    }
    w.flush()?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&r.summary)?,
    )?;
    crate::plots::jct_cdf(&dir.join("jct_cdf.svg"), &[(&r.summary.policy, r)])?;
    crate::plots::utilization(
        &dir.join("utilization.svg"),
        &[(&r.summary.policy, r)],
        cfg.cluster.total_gpus(),
    )?;
    crate::plots::gantt(&dir.join("gantt.svg"), r, &cfg.cluster)?;
    if !r.queues.is_empty() {
        crate::plots::queue_gpus(&dir.join("queues.svg"), r)?;
    }
    Ok(())
}

fn expand_workloads(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("{}: cannot list", p.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "csv" || e == "trace"))
                .collect();
            v.sort_by_key(|p| natural_key(p));
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Sort `workload-10` after `workload-9`.
fn natural_key(p: &Path) -> (String, u64) {
    let s = gpuplan_sim::files::workload_name(p);
    let digits: String = s
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .chars()
        .rev()
        .collect();
    (
        s[..s.len() - digits.len()].to_string(),
        digits.parse().unwrap_or(0),
    )
}

#[derive(Serialize)]
struct PolicyAgg {
    avg_jct_s: f64,
    per_workload: BTreeMap<String, gpuplan_sim::Summary>,
}

#[derive(Serialize)]
struct SweepOut {
    policies: BTreeMap<String, PolicyAgg>,
}

/// Written next to the results, so a resumed sweep cannot mix settings.
#[derive(Serialize, serde::Deserialize, PartialEq)]
struct SweepSettings {
    config: SimConfig,
    duration_jobs: String,
}

/// What a sweep runs, checked. `tasks` is in one fixed order (policy, then
/// workload, then seed), so that `--cell N` names the same simulation in
/// every process of a Slurm sweep.
struct SweepPlan {
    cfg: SimConfig,
    opts: SimOpts,
    profiles: Profiles,
    workloads: Vec<PathBuf>,
    seeds: Vec<u64>,
    tasks: Vec<SweepTask>,
}

fn sweep_plan(a: &SweepArgs) -> Result<SweepPlan> {
    let cfg = a.opts.config()?;
    // Each policy's run checked as it will run: its own params, and the
    // policy able to honour them (`SimScenario::config_for`).
    let scenario = a.opts.scenario()?;
    for p in &a.policies {
        scenario.config_for(p).map_err(|es| {
            let lines: Vec<String> = es.iter().map(flag_error).collect();
            anyhow::anyhow!("{}", lines.join("; "))
        })?;
    }
    let profiles = load_profiles(a.opts.traces.clone())?;
    let workloads = expand_workloads(&a.workloads)?;
    if workloads.is_empty() {
        bail!("no workload files found in {:?}", a.workloads);
    }
    let seeds = if a.seeds.is_empty() {
        vec![a.opts.seed]
    } else {
        a.seeds.clone()
    };
    let mut tasks = Vec::new();
    for p in &a.policies {
        for w in &workloads {
            for &seed in &seeds {
                let name = gpuplan_sim::files::workload_name(w);
                tasks.push(SweepTask {
                    path: w.clone(),
                    workload: if seeds.len() > 1 {
                        format!("{name}-seed{seed}")
                    } else {
                        name
                    },
                    policy: p.clone(),
                    seed,
                });
            }
        }
    }
    Ok(SweepPlan {
        cfg,
        opts: a.opts.clone(),
        profiles,
        workloads,
        seeds,
        tasks,
    })
}

/// A workload's jobs as the task's seed draws them.
fn load_task_workload(a: &SweepArgs, plan: &SweepPlan, path: &Path, seed: u64) -> Result<Vec<WorkloadJob>> {
    let opts = SimOpts {
        seed,
        ..a.opts.clone()
    };
    load_workload(path, &opts, &plan.profiles, &plan.cfg.cluster)
}

/// Create the output folder and write sweep-settings.json, or check that
/// the one there holds these settings.
fn open_sweep_dir(dir: &Path, a: &SweepArgs, cfg: &SimConfig) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let settings = SweepSettings {
        config: cfg.clone(),
        duration_jobs: format!("{:?}", a.opts.duration_jobs),
    };
    let file = dir.join("sweep-settings.json");
    if file.exists() {
        let old: SweepSettings = serde_json::from_slice(&std::fs::read(&file)?)
            .with_context(|| format!("{}: unreadable", file.display()))?;
        if old != settings {
            bail!(
                "{} holds a sweep with other settings (cluster, interval, seed, ...); use another --out",
                dir.display()
            );
        }
    } else {
        std::fs::write(&file, serde_json::to_string_pretty(&settings)?)?;
    }
    Ok(())
}

/// The results already in the output folder, by task index.
fn finished_tasks(dir: &Path, tasks: &[SweepTask]) -> Result<BTreeMap<usize, SimResult>> {
    let mut done = BTreeMap::new();
    for (i, t) in tasks.iter().enumerate() {
        let f = result_file(dir, t);
        if let Ok(bytes) = std::fs::read(&f) {
            let r: SimResult =
                serde_json::from_slice(&bytes).with_context(|| format!("{}: unreadable", f.display()))?;
            done.insert(i, r);
        }
    }
    Ok(done)
}

/// Run one task; with `out`, also save its result.json. Written through a
/// temporary file and a rename, so an interruption never leaves a half
/// result for a resumed sweep to read; the temporary name carries the pid
/// because two processes may run the same cell (a Slurm task requeued
/// while its first run still ends).
fn run_task(plan: &SweepPlan, t: &SweepTask, jobs: &[WorkloadJob], out: Option<&Path>) -> Result<SimResult> {
    let cfg = SimConfig {
        seed: t.seed,
        params: plan.opts.params_for(&t.policy)?,
        ..plan.cfg.clone()
    };
    let mut r = run_one_dumping(&cfg, &plan.profiles, &t.path, jobs, &t.policy, None)?;
    r.summary.workload = t.workload.clone();
    if let Some(dir) = out {
        let f = result_file(dir, t);
        let parent = f.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let tmp = parent.join(format!("result.json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec(&r)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &f).with_context(|| format!("writing {}", f.display()))?;
    }
    Ok(r)
}

pub fn sweep(a: SweepArgs) -> Result<ExitCode> {
    if a.slurm && a.out.is_none() {
        bail!("--slurm needs --out DIR: each Slurm task writes its cell there (on a file system the nodes share)");
    }
    let plan = sweep_plan(&a)?;
    if let Some(i) = a.cell {
        return sweep_cell(&a, &plan, i);
    }
    // Parse everything first, so bad input fails before hours of simulation.
    let mut loaded = BTreeMap::new();
    for w in &plan.workloads {
        for &seed in &plan.seeds {
            loaded.insert((w.clone(), seed), load_task_workload(&a, &plan, w, seed)?);
        }
    }
    let tasks = &plan.tasks;
    // Resume: results already in the output folder are read, not re-run.
    let mut done: BTreeMap<usize, SimResult> = BTreeMap::new();
    if let Some(dir) = &a.out {
        open_sweep_dir(dir, &a, &plan.cfg)?;
        done = finished_tasks(dir, tasks)?;
        if !done.is_empty() {
            eprintln!(
                "resuming: {} of {} simulations already in {}",
                done.len(),
                tasks.len(),
                dir.display()
            );
        }
        if a.slurm {
            crate::sweep_slurm::run(a.partition.as_deref(), dir, tasks, &done)?;
            done = finished_tasks(dir, tasks)?;
            if done.len() < tasks.len() {
                return Ok(crate::sweep_slurm::report_missing(dir, tasks, &done));
            }
            return sweep_summary(&a, &plan.cfg, done);
        }
    }
    let bar = ProgressBar::new(tasks.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} simulations  {elapsed_precise} {msg}",
    )?);
    bar.inc(done.len() as u64);
    let todo: Vec<usize> = (0..tasks.len()).filter(|i| !done.contains_key(i)).collect();
    let fresh: Vec<(usize, Result<SimResult>)> = todo
        .par_iter()
        .map(|&i| {
            let t = &tasks[i];
            let jobs = &loaded[&(t.path.clone(), t.seed)];
            let r = run_task(&plan, t, jobs, a.out.as_deref());
            bar.inc(1);
            (i, r)
        })
        .collect();
    bar.finish_and_clear();
    for (i, r) in fresh {
        done.insert(i, r?);
    }
    sweep_summary(&a, &plan.cfg, done)
}

/// `--cell INDEX`: one Slurm array task. Runs that task of the sweep and
/// writes its result.json, nothing else; the submitting process writes
/// the summary once every cell is in.
fn sweep_cell(a: &SweepArgs, plan: &SweepPlan, i: usize) -> Result<ExitCode> {
    let Some(dir) = &a.out else {
        bail!("--cell needs --out DIR");
    };
    let Some(t) = plan.tasks.get(i) else {
        bail!(
            "--cell {i}: the sweep has {} cells (0 to {})",
            plan.tasks.len(),
            plan.tasks.len().saturating_sub(1)
        );
    };
    open_sweep_dir(dir, a, &plan.cfg)?;
    let f = result_file(dir, t);
    if f.exists() {
        eprintln!("cell {i}: {} is already there", f.display());
        return Ok(ExitCode::SUCCESS);
    }
    let jobs = load_task_workload(a, plan, &t.path, t.seed)?;
    let r = run_task(plan, t, &jobs, Some(dir))?;
    eprintln!(
        "cell {i}: {} on {} (seed {}): avg JCT {:.3} h, {:.1} s, written to {}",
        t.policy,
        t.workload,
        t.seed,
        r.summary.avg_jct_s / 3600.0,
        r.summary.wall_s,
        f.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Per-cell outputs, sweep.json and report.md from every cell's result
/// (in task order), and the printed summary.
fn sweep_summary(a: &SweepArgs, cfg: &SimConfig, done: BTreeMap<usize, SimResult>) -> Result<ExitCode> {
    let results: Vec<SimResult> = done.into_values().collect();
    let mut out = SweepOut {
        policies: BTreeMap::new(),
    };
    for r in &results {
        if let Some(dir) = &a.out {
            write_outputs(&dir.join(&r.summary.policy).join(&r.summary.workload), r, cfg)?;
        }
        let agg = out
            .policies
            .entry(r.summary.policy.clone())
            .or_insert_with(|| PolicyAgg {
                avg_jct_s: 0.0,
                per_workload: BTreeMap::new(),
            });
        agg.per_workload
            .insert(r.summary.workload.clone(), r.summary.clone());
    }
    for agg in out.policies.values_mut() {
        agg.avg_jct_s =
            agg.per_workload.values().map(|s| s.avg_jct_s).sum::<f64>() / agg.per_workload.len() as f64;
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("sweep.json"), serde_json::to_string_pretty(&out)?)?;
        write_report(dir, &results, &out, cfg)?;
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => {
            let rows: Vec<&gpuplan_sim::Summary> = out
                .policies
                .values()
                .flat_map(|a| a.per_workload.values())
                .collect();
            print_table(&rows);
            println!();
            println!("{:<16} {:>14}", "policy", "mean avg_jct_h");
            for (p, agg) in &out.policies {
                println!("{:<16} {:>14.3}", p, agg.avg_jct_s / 3600.0);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// report.md: the summary table and side-by-side plots per workload.
fn write_report(dir: &Path, results: &[SimResult], out: &SweepOut, cfg: &SimConfig) -> Result<()> {
    use std::fmt::Write as _;
    let mut md = String::new();
    writeln!(md, "# gpuplan simulation report\n")?;
    writeln!(
        md,
        "Cluster {} GPUs on {} nodes, interval {} s, restart delay {} s, seed {}.\n",
        cfg.cluster.total_gpus(),
        cfg.cluster.num_nodes(),
        cfg.interval_s,
        cfg.restart_delay_s,
        cfg.seed
    )?;
    writeln!(md, "| policy | workload | jobs | avg JCT (h) | p50 (h) | p99 (h) | imagenet mean (h) | makespan (h) | GPU util | GPU busy | restarts | planner ms (mean / p99) | wall s |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in results {
        let s = &r.summary;
        writeln!(
            md,
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} / {:.2} | {:.1} |",
            s.policy,
            s.workload,
            s.jobs,
            s.avg_jct_s / 3600.0,
            s.p50_jct_s / 3600.0,
            s.p99_jct_s / 3600.0,
            s.imagenet_mean_jct_s
                .map_or("-".into(), |v| format!("{:.3}", v / 3600.0)),
            s.makespan_s / 3600.0,
            s.gpu_utilization,
            s.gpu_busy,
            s.restarts,
            s.planner_ms.mean,
            s.planner_ms.p99,
            s.wall_s
        )?;
    }
    writeln!(md, "\nMean average JCT over workloads:\n")?;
    for (p, agg) in &out.policies {
        writeln!(md, "- {p}: {:.3} h", agg.avg_jct_s / 3600.0)?;
    }
    let mut workloads: Vec<&str> = results.iter().map(|r| r.summary.workload.as_str()).collect();
    workloads.dedup();
    workloads.sort();
    workloads.dedup();
    for w in workloads {
        let runs: Vec<(&str, &SimResult)> = results
            .iter()
            .filter(|r| r.summary.workload == w)
            .map(|r| (r.summary.policy.as_str(), r))
            .collect();
        let cdf = format!("{w}-jct_cdf.svg");
        let util = format!("{w}-utilization.svg");
        crate::plots::jct_cdf(&dir.join(&cdf), &runs)?;
        crate::plots::utilization(&dir.join(&util), &runs, cfg.cluster.total_gpus())?;
        writeln!(md, "\n## {w}\n\n![JCT CDF]({cdf})\n\n![GPU allocation]({util})\n")?;
        for (p, _) in &runs {
            writeln!(md, "![{p} allocation Gantt]({p}/{w}/gantt.svg)\n")?;
        }
        queue_section(&mut md, &runs)?;
    }
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// Under queues, the report's per-queue table (JCT, GPU-hours, borrowed
/// and shortfall per policy and queue) and each run's holdings chart.
fn queue_section(md: &mut String, runs: &[(&str, &SimResult)]) -> Result<()> {
    use std::fmt::Write as _;
    if runs.iter().all(|(_, r)| r.queues.is_empty()) {
        return Ok(());
    }
    writeln!(md, "### Per queue\n")?;
    writeln!(md, "| policy | queue | guarantee | jobs | avg JCT (h) | p99 (h) | GPU-h | borrowed (GPU-h) | shortfall (GPU-h) |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
    for (p, r) in runs {
        for q in &r.queues {
            writeln!(
                md,
                "| {p} | {} | {} | {} |",
                q.queue,
                q.guarantee,
                queue_cells(q).join(" | ")
            )?;
        }
    }
    writeln!(md)?;
    let w = runs[0].1.summary.workload.as_str();
    for (p, _) in runs.iter().filter(|(_, r)| !r.queues.is_empty()) {
        writeln!(md, "![{p} GPUs per queue]({p}/{w}/queues.svg)\n")?;
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct CompareRoundsArgs {
    /// The first round log (JSON lines).
    pub a: PathBuf,
    /// The second round log.
    pub b: PathBuf,
    /// Names of the two logs in the table.
    #[arg(long, value_delimiter = ',', default_values_t = ["a".to_string(), "b".to_string()])]
    pub labels: Vec<String>,
    /// Rounds per stretch in the table (0: the whole run only).
    #[arg(long, default_value_t = 60)]
    pub window: usize,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// `gpuplan compare-rounds`: two round logs side by side.
pub fn compare_rounds(a: CompareRoundsArgs) -> Result<ExitCode> {
    let la = gpuplan_sim::roundlog::read(&a.a)?;
    let lb = gpuplan_sim::roundlog::read(&a.b)?;
    let c = gpuplan_sim::roundlog::compare(&la, &lb, a.window);
    if a.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (x, y) = (
        a.labels.first().map_or("a", String::as_str),
        a.labels.get(1).map_or("b", String::as_str),
    );
    let opt = |t: Option<f64>| t.map_or("never".to_string(), |t| format!("{t:.0} s"));
    println!("rounds in both: {}", c.common_rounds);
    println!(
        "first round a job holds different GPUs: {}",
        opt(c.first_gpu_difference_s)
    );
    println!(
        "first round a job finished in one only: {}",
        opt(c.first_finish_difference_s)
    );
    println!(
        "same-shape (job, round) pairs: {}, largest goodput difference {:.2e}",
        c.same_shape_pairs, c.same_shape_max_goodput_diff
    );
    println!(
        "avg JCT of jobs finished in both (to the round): {x} {:.0} s, {y} {:.0} s",
        c.avg_jct_s[0], c.avg_jct_s[1]
    );
    println!(
        "\n{:>8} {:>8} | {:>13} | {:>13} | {:>13} | {:>11} | {:>11} | {:>15}",
        "from_h", "to_h", "active", "running", "gpus", "restarts", "finished", "fitness"
    );
    println!(
        "{:>8} {:>8} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>5} {:>5} | {:>5} {:>5} | {:>7} {:>7}",
        "", "", x, y, x, y, x, y, x, y, x, y, x, y
    );
    for w in c.windows.iter().chain(std::iter::once(&c.total)) {
        println!(
            "{:>8.2} {:>8.2} | {:>6.1} {:>6.1} | {:>6.1} {:>6.1} | {:>6.1} {:>6.1} | {:>5} {:>5} | {:>5} {:>5} | {:>7.4} {:>7.4}",
            w.from_s / 3600.0,
            w.to_s / 3600.0,
            w.active[0],
            w.active[1],
            w.running[0],
            w.running[1],
            w.gpus[0],
            w.gpus[1],
            w.restarts[0],
            w.restarts[1],
            w.finished[0],
            w.finished[1],
            w.fitness[0],
            w.fitness[1]
        );
    }
    println!(
        "\n{:<12} {:>17} {:>17}",
        "application", "gpus/running job", "waiting rounds"
    );
    for (app, g) in &c.gpus_per_running_job {
        let w = c.waiting_rounds.get(app).copied().unwrap_or_default();
        println!("{app:<12} {:>8.2} {:>8.2} {:>8} {:>8}", g[0], g[1], w[0], w[1]);
    }
    Ok(ExitCode::SUCCESS)
}
