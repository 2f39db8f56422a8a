//! The round inspector: a kept round's jobs, plan and objective, and the
//! same round (or an uploaded one) solved again by another planner.

use gpuplan_core::{objective, JobGpus, Plan, PlanReport, Round};
use gpuplan_solve::{max_gpus, parse_round, registry, run_round, Limits};
use serde::{Deserialize, Serialize};

use super::error::{invalid, to_json, ApiError};
use super::runs::{KEPT_RUNS, RUNS};

/// One GPU count of a job's speedup table (most compact placement).
#[derive(Debug, Serialize)]
pub struct SpeedupRow {
    /// GPU count.
    pub gpus: u32,
    /// Nodes the most compact placement of them spans.
    pub nodes: u32,
    /// Speedup over the fair share at that count.
    pub speedup: f64,
}

/// One job in the round inspector.
#[derive(Debug, Serialize)]
pub struct InspectJob {
    /// The job's name.
    pub name: String,
    /// Its application (the profile its speed comes from).
    pub app: String,
    /// Seconds since it was submitted.
    pub age_s: f64,
    /// GPU-seconds it has run.
    pub attained_gpu_s: f64,
    /// Re-allocations so far.
    pub restarts: u32,
    /// Training epoch reached.
    pub epoch: u32,
    /// Whether it has a fitted goodput model (else the planner guesses).
    pub has_model: bool,
    /// GPUs it held before this round.
    pub before_gpus: u32,
    /// Nodes those GPUs spanned.
    pub before_nodes: u32,
    /// GPUs the plan gives it.
    pub chosen_gpus: u32,
    /// Nodes those GPUs span.
    pub chosen_nodes: u32,
    /// (node index, GPUs) of the chosen allocation.
    pub chosen: Vec<(u32, u32)>,
    /// Its speedup on the chosen GPUs.
    pub chosen_speedup: f64,
    /// The job's contribution to the objective (speedup × restart factor if moved).
    pub value: f64,
    /// Its speedup table, 1 GPU up to the most it may get.
    pub speedups: Vec<SpeedupRow>,
    /// The chosen GPUs' type and, with variability, the slowest of them for
    /// the job's class and its expected factor; absent for a job without GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware: Option<JobGpus>,
}

/// A round as the inspector shows it.
#[derive(Debug, Serialize)]
pub struct InspectOut {
    /// The round's index in the run, from 0.
    pub index: usize,
    /// Rounds in the run.
    pub rounds: usize,
    /// Simulated time of the round.
    pub now_s: f64,
    /// The plan's objective, bound, gap and stats, as `gpuplan plan` reports them.
    #[serde(flatten)]
    pub report: PlanReport,
    /// The objective's power-mean exponent.
    pub p: f64,
    /// Pollux's fair share (nodes, GPUs) that speedups are relative to.
    pub fair_share: (u32, u32),
    /// Every job of the round, in its order.
    pub jobs: Vec<InspectJob>,
    /// Who shares with whom: each GPU the plan gives two or more jobs,
    /// with their names (empty without sharing).
    pub shared_gpus: Vec<SharedGpu>,
}

/// One shared GPU in the inspector.
#[derive(Debug, Serialize)]
pub struct SharedGpu {
    /// Node index in the round.
    pub node: u32,
    /// The node's name.
    pub node_name: String,
    /// GPU index on the node.
    pub gpu: u32,
    /// Names of the jobs on it.
    pub jobs: Vec<String>,
}

/// Each GPU of `plan` that two or more jobs hold, with their names
/// (`gpuplan_core::colocation::shared_gpus`, the grouping the planners
/// and the simulator use).
fn shared_gpus(round: &Round, plan: &Plan) -> Vec<SharedGpu> {
    let allocs: Vec<&gpuplan_core::Allocation> = round.jobs.iter().map(|j| plan.gpus_of(j.id)).collect();
    gpuplan_core::colocation::shared_gpus(&allocs)
        .into_iter()
        .map(|(g, holders)| SharedGpu {
            node: g.node.0,
            node_name: round
                .cluster
                .nodes
                .get(g.node.0 as usize)
                .map_or_else(String::new, |n| n.name.clone()),
            gpu: g.index,
            jobs: holders.iter().map(|&j| round.jobs[j].name.clone()).collect(),
        })
        .collect()
}

pub(super) fn inspect_round(index: usize, total: usize, round: &Round, plan: &Plan) -> InspectOut {
    let fair = objective::fair_share(round);
    let per_node = round.cluster.max_gpus_per_node().max(1);
    let jobs = round
        .jobs
        .iter()
        .map(|j| {
            let alloc = plan.get(j.id);
            // Speedups on the chosen GPUs' type (else the type the job was measured on).
            let ty = round.cluster.type_of(&alloc).or(j.model_type.as_ref());
            let most = max_gpus(j, round).max(alloc.num_gpus());
            let speedups = (1..=most)
                .map(|g| {
                    let nodes = g.div_ceil(per_node);
                    SpeedupRow {
                        gpus: g,
                        nodes,
                        speedup: objective::speedup(j, ty, nodes, g, fair),
                    }
                })
                .collect();
            InspectJob {
                name: j.name.clone(),
                app: j.app.clone(),
                age_s: j.state.age_s,
                attained_gpu_s: j.state.attained_gpu_s,
                restarts: j.state.restarts,
                epoch: j.state.epoch,
                has_model: j.model.is_some(),
                before_gpus: j.state.allocation.num_gpus(),
                before_nodes: j.state.allocation.num_nodes(),
                chosen_gpus: alloc.num_gpus(),
                chosen_nodes: alloc.num_nodes(),
                chosen: alloc.per_node().into_iter().map(|(n, k)| (n.0, k)).collect(),
                chosen_speedup: objective::speedup(j, ty, alloc.num_nodes(), alloc.num_gpus(), fair),
                value: objective::job_value(j, &round.cluster, &alloc, fair, &round.params),
                speedups,
                hardware: JobGpus::new(round, j, &alloc),
            }
        })
        .collect();
    InspectOut {
        index,
        rounds: total,
        now_s: round.now_s,
        report: PlanReport::new(round, plan),
        p: round.params.p,
        fair_share: fair,
        jobs,
        shared_gpus: shared_gpus(round, plan),
    }
}

/// Round `index` of a kept run: speedup tables, chosen configurations, objective and gap.
pub fn inspect(run_id: u32, index: usize) -> Result<String, ApiError> {
    let (round, plan, total) = kept_round(run_id, index)?;
    to_json(&inspect_round(index, total, &round, &plan))
}

/// Solver settings for [`solve_round`]; defaults equal `gpuplan plan`'s flags.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolveOpts {
    /// The planner's registry name, as `--planner`.
    pub planner: String,
    /// Time limit, as `--time-limit`.
    pub time_limit_s: f64,
    /// Relative MIP gap to stop at, as `--gap`.
    pub gap: f64,
    /// Seed of randomised planners, as `--seed`.
    pub seed: u64,
}

impl Default for SolveOpts {
    fn default() -> Self {
        SolveOpts {
            planner: "pollux-mip".into(),
            time_limit_s: 10.0,
            gap: 1e-4,
            seed: 0,
        }
    }
}

/// Solve one round (the `gpuplan plan --input` format) and return the
/// inspector's view of the plan: allocations, objective, gap and stats.
/// The round is read as `gpuplan plan` reads it ([`parse_round`]: the
/// planner's registry defaults fill the params it leaves out), so the
/// browser, the CLI and the Python package plan a file alike.
pub fn solve_round(round_json: &str, opts_json: &str) -> Result<String, ApiError> {
    let opts = solve_opts(opts_json)?;
    let round = parse_round("round", round_json, &opts.planner).map_err(|e| invalid(e.to_string()))?;
    to_json(&solve_with(&round, &opts)?)
}

fn solve_opts(opts_json: &str) -> Result<SolveOpts, ApiError> {
    serde_json::from_str(opts_json).map_err(|e| invalid(format!("options:{}:{}: {e}", e.line(), e.column())))
}

/// Solve `round` afresh with the planner and limits of `opts`.
fn solve_with(round: &Round, opts: &SolveOpts) -> Result<InspectOut, ApiError> {
    let mut planner = registry::create(&opts.planner)?;
    let limits = Limits {
        time_limit_s: opts.time_limit_s,
        gap: opts.gap,
        threads: 1,
        seed: opts.seed,
        memory_limit_mb: None,
    };
    if let Err(errs) = limits.check() {
        let lines: Vec<String> = errs.iter().map(|(f, e)| format!("{f}: {e}")).collect();
        return Err(invalid(lines.join("; ")));
    }
    let decision = run_round(planner.as_mut(), round, &limits)?;
    Ok(inspect_round(0, 1, round, &decision.plan))
}

/// Round `index` of a kept run solved again by another planner (a fresh one:
/// no cross-round state), to compare with what the run's planner chose.
pub fn resolve(run_id: u32, index: usize, opts_json: &str) -> Result<String, ApiError> {
    let (round, _, total) = kept_round(run_id, index)?;
    let mut out = solve_with(&round, &solve_opts(opts_json)?)?;
    out.index = index;
    out.rounds = total;
    to_json(&out)
}

fn kept_round(run_id: u32, index: usize) -> Result<(Round, Plan, usize), ApiError> {
    RUNS.with(|runs| {
        let runs = runs.borrow();
        let (_, rounds) = runs.iter().find(|(id, _)| *id == run_id).ok_or_else(|| {
            invalid(format!(
                "run {run_id} is no longer kept (the last {KEPT_RUNS} runs are); run it again"
            ))
        })?;
        let (round, plan) = rounds.get(index).ok_or_else(|| {
            invalid(format!(
                "round {index} out of range: the run has {} rounds",
                rounds.len()
            ))
        })?;
        Ok((round.clone(), plan.clone(), rounds.len()))
    })
}
