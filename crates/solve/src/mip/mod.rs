//! MIP round planners. Each round is a choice, per job, among candidate
//! configurations (nodes, GPUs), "keep the current placement" and
//! "nothing", with a per-choice objective coefficient computed from the
//! goodput model: the power-mean objective becomes linear in the choice
//! binaries. `docs/formulation.md` states both formulations.
//!
//! The solver is a value ([`Solver`]): HiGHS natively, microlp everywhere
//! (including wasm32).

pub mod aggregate;
pub mod exact;
pub mod node;

use good_lp::{
    constraint::ConstraintReference, variable, Constraint, Expression, ProblemVariables, ResolutionError,
    Solution, SolutionStatus, SolverModel, Variable, WithInitialSolution, WithTimeLimit,
};

use gpuplan_core::objective::{fair_share, restart_factor, EPSILON};
use gpuplan_core::{objective, Plan, PlanStatus, Round, RoundJob};

use crate::planners::greedy::{greedy_choices, plan_from_choices};
use crate::speedup::{max_gpus, SpeedupCache};
use crate::{BatchPolicy, Limits, PlannerTraits};
use gpuplan_core::math::Libm;

/// What every MIP planner promises: goodput batches, no oracle, the interference rule.
pub const MIP_TRAITS: PlannerTraits = PlannerTraits {
    batch: BatchPolicy::Adaptive,
    needs_oracle: false,
    honours_interference: true,
};

/// Fill `gap` from the bound and the plan's own objective (the same
/// evaluation every planner gets).
pub fn set_gap(round: &Round, plan: &mut Plan) {
    if let Some(b) = plan.bound {
        let obj = objective::evaluate(round, plan);
        plan.gap = Some(((b - obj) / obj.abs().max(1e-12)).max(0.0));
    }
}

/// [`set_gap`] with the planner's speedup tables (`speedup::evaluate_cached`).
pub fn set_gap_cached(round: &Round, plan: &mut Plan, caches: &mut [SpeedupCache]) {
    if let Some(b) = plan.bound {
        let obj = crate::speedup::evaluate_cached(round, plan, caches);
        plan.gap = Some(((b - obj) / obj.abs().max(1e-12)).max(0.0));
    }
}

/// The greedy plan, marked `fallback` with the reason.
pub fn fallback(name: &str, round: &Round, reason: &str) -> Plan {
    let mut plan = plan_from_choices(name, round, &greedy_choices(round), PlanStatus::Fallback);
    plan.reason = Some(format!("{reason}; greedy plan used"));
    plan
}

/// The common end of the node-placing MIPs: the independent validator (a
/// solver bug or numerical slip must not reach users), the gap, per-job
/// notes; any failure becomes the greedy fallback.
pub fn finish(name: &str, round: &Round, solved: Result<(Plan, Vec<String>), String>) -> Plan {
    match solved {
        Ok((mut plan, notes)) => {
            if let Err(v) = gpuplan_core::validate(round, &plan) {
                return fallback(name, round, &format!("solution failed validation ({})", v[0]));
            }
            plan.planner = name.to_string();
            set_gap(round, &mut plan);
            if !notes.is_empty() {
                plan.reason = Some(notes.join("; "));
            }
            plan
        }
        Err(reason) => fallback(name, round, &reason),
    }
}

/// Which MIP solver runs a formulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    #[cfg(feature = "highs")]
    Highs,
    Microlp,
}

impl Solver {
    /// HiGHS where it is built in, else microlp.
    pub fn default_native() -> Self {
        #[cfg(feature = "highs")]
        {
            Solver::Highs
        }
        #[cfg(not(feature = "highs"))]
        {
            Solver::Microlp
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "highs")]
            Solver::Highs => "highs",
            Solver::Microlp => "microlp",
        }
    }
}

/// One way a job may run this round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    /// Keep exactly the current GPUs: full speedup, no restart.
    Keep,
    /// Any placement with this many nodes and GPUs: speedup × restart factor.
    Config { nodes: u32, gpus: u32 },
}

/// A candidate with its value (speedup × factor) for the objective.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub choice: Choice,
    pub value: f64,
}

/// Everything about one job's options this round.
#[derive(Debug, Clone)]
pub struct JobOptions {
    pub candidates: Vec<Candidate>,
    /// Value if the job gets nothing (0: a running job loses its speedup too).
    pub none_value: f64,
    /// Non-preemptible and running: must keep.
    pub pinned: bool,
    /// Why the job cannot run at all, if so.
    pub infeasible: Option<String>,
}

/// Node counts to offer for k GPUs on G-GPU nodes. The goodput model
/// depends on the node count only through "one node or several" (the sync
/// constants), so two candidates cover every placement exactly: 1 (if k
/// fits a node) and 2, which stands for "two or more" — the exact model
/// lets such a job span 2..=min(k, max_nodes) nodes.
pub fn node_counts(k: u32, per_node: u32, max_nodes: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if k <= per_node {
        v.push(1);
    }
    if k >= 2 && max_nodes >= 2 {
        v.push(2);
    }
    v
}

/// Build every job's options for the exact formulation (all k, pruned node counts).
pub fn job_options(round: &Round, caches: &mut [SpeedupCache], shapes: Shapes) -> Vec<JobOptions> {
    let g = round.cluster.max_gpus_per_node().max(1);
    let nodes = round.cluster.num_nodes() as u32;
    let max_nodes = round.params.max_nodes_per_job.min(nodes);
    round
        .jobs
        .iter()
        .zip(caches.iter_mut())
        .map(|(j, cache)| {
            let factor = restart_factor(j, round.params.restart_penalty_s);
            let cur = j.current();
            let pinned = !j.preemptible && !cur.is_empty();
            let mut candidates = Vec::new();
            // Keeping is offered only where the current GPUs obey this
            // round's per-job rules (limits change; old plans mixed types).
            if pinned || round.keepable(j) {
                candidates.push(Candidate {
                    choice: Choice::Keep,
                    value: cache.get(j, cur.num_nodes(), cur.num_gpus()),
                });
            }
            let kmax = max_gpus(j, round);
            let mut infeasible = None;
            if j.min_gpus.max(1) > round.cluster.total_gpus() {
                infeasible = Some(format!(
                    "job {} needs at least {} GPUs but the cluster has {}",
                    j.name,
                    j.min_gpus,
                    round.cluster.total_gpus()
                ));
            } else if !pinned {
                for k in j.min_gpus.max(1)..=kmax {
                    let counts: Vec<u32> = match shapes {
                        Shapes::Any => node_counts(k, g, max_nodes),
                        Shapes::Packable => {
                            if k <= g && k.is_power_of_two() {
                                vec![1]
                            } else if k > g && k % g == 0 && k / g <= max_nodes {
                                vec![k / g]
                            } else {
                                vec![]
                            }
                        }
                    };
                    for n in counts {
                        let s = cache.get(j, n, k);
                        if s > 0.0 {
                            candidates.push(Candidate {
                                choice: Choice::Config { nodes: n, gpus: k },
                                value: s * factor,
                            });
                        }
                    }
                }
                // A job whose every allowed size is unpackable (rigid 12 GPUs on
                // 8-GPU nodes, or 6 on one node) would never run: offer it whole
                // nodes, of which it uses `k` GPUs (see [`charge`]).
                if shapes == Shapes::Packable && candidates.iter().all(|c| c.choice == Choice::Keep) {
                    for k in j.min_gpus.max(1)..=kmax {
                        let n = k.div_ceil(g);
                        if n > max_nodes {
                            break;
                        }
                        let s = cache.get(j, n, k);
                        if s > 0.0 {
                            candidates.push(Candidate {
                                choice: Choice::Config { nodes: n, gpus: k },
                                value: s * factor,
                            });
                        }
                    }
                }
                if candidates.iter().all(|c| c.choice == Choice::Keep) && kmax < j.min_gpus.max(1) {
                    infeasible = Some(format!(
                        "job {} may use at most {kmax} GPUs this round but needs at least {}",
                        j.name, j.min_gpus
                    ));
                }
            }
            JobOptions {
                candidates,
                none_value: 0.0,
                pinned,
                infeasible,
            }
        })
        .collect()
}

/// What a shape takes from the pool on nodes of `g` GPUs: (GPUs, whole
/// nodes). A power of two within a node takes its GPUs and packs with
/// others; whole nodes beyond take exactly themselves; any other size
/// reserves ⌈k/g⌉ whole nodes (at least `nodes`), because only then does
/// every choice the aggregate model accepts still pack.
pub fn charge(nodes: u32, gpus: u32, g: u32) -> (u32, u32) {
    let g = g.max(1);
    if nodes <= 1 && gpus <= g && gpus.is_power_of_two() {
        (gpus, 0)
    } else if nodes > 1 && gpus == nodes * g {
        (gpus, nodes)
    } else {
        let n = gpus.div_ceil(g).max(nodes).max(1);
        (n * g, n)
    }
}

/// Which configurations a formulation offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shapes {
    /// Every GPU count, with the fewest or one more nodes (exact placement follows).
    Any,
    /// Powers of two within a node, whole nodes beyond: always packable.
    /// A job with no such size in its limits gets whole nodes instead.
    Packable,
}

/// The objective is linear in the choices: each choice contributes a term of
/// its value. Direction and transform depend on p.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sense {
    /// p < 0: minimise Σ (v+ε)^p.
    MinPower(f64),
    /// p = 0: maximise Σ ln(v+ε).
    MaxLog,
    /// p > 0: maximise Σ (v+ε)^p.
    MaxPower(f64),
    /// p = −∞: maximise the minimum.
    MaxMin,
}

impl Sense {
    pub fn of(p: f64) -> Self {
        if p == f64::NEG_INFINITY {
            Sense::MaxMin
        } else if p < 0.0 {
            Sense::MinPower(p)
        } else if p == 0.0 {
            Sense::MaxLog
        } else {
            Sense::MaxPower(p)
        }
    }

    pub fn term(self, v: f64) -> f64 {
        let x = v.max(0.0) + EPSILON;
        match self {
            Sense::MinPower(p) | Sense::MaxPower(p) => x.libm_pow(p),
            Sense::MaxLog => x.libm_ln(),
            Sense::MaxMin => x,
        }
    }

    /// Convert a bound on Σ terms over `n` jobs to a bound on the power mean.
    pub fn to_mean(self, total: f64, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Sense::MinPower(p) | Sense::MaxPower(p) => (total / n).libm_pow(1.0 / p),
            Sense::MaxLog => (total / n).libm_exp(),
            Sense::MaxMin => total,
        }
    }
}

/// A built model, solver-agnostic: variables, constraints, objective.
pub struct Model {
    pub vars: ProblemVariables,
    pub constraints: Vec<Constraint>,
    pub objective: Expression,
    pub minimise: bool,
    /// Variables whose values the caller reads back.
    pub watched: Vec<Variable>,
    /// A starting solution (warm start), where known.
    pub initial: Vec<(Variable, f64)>,
    /// Constant part of the objective (pinned jobs, jobs without options).
    /// Solvers drop constants, so it is added back to the reported bound.
    pub offset: f64,
    /// Whether any variable is integer: HiGHS's MIP dual bound means
    /// nothing for a pure LP (it reads 0), whose optimum is its own bound.
    pub integral: bool,
}

impl Model {
    pub fn new() -> Self {
        Model {
            vars: ProblemVariables::new(),
            constraints: Vec::new(),
            objective: Expression::from(0.0),
            minimise: true,
            watched: Vec::new(),
            initial: Vec::new(),
            offset: 0.0,
            integral: false,
        }
    }

    /// An empty model in the direction of `sense`, with the max-min level
    /// variable τ when p = −∞.
    pub fn for_sense(sense: Sense) -> (Self, Option<Variable>) {
        let mut m = Model::new();
        m.minimise = matches!(sense, Sense::MinPower(_));
        let t = (sense == Sense::MaxMin).then(|| m.continuous(0.0, 1e9));
        (m, t)
    }

    pub fn binary(&mut self) -> Variable {
        self.integral = true;
        let v = self.vars.add(variable().binary());
        self.watched.push(v);
        v
    }

    pub fn integer(&mut self, lo: f64, hi: f64) -> Variable {
        self.integral = true;
        let v = self.vars.add(variable().integer().min(lo).max(hi));
        self.watched.push(v);
        v
    }

    pub fn continuous(&mut self, lo: f64, hi: f64) -> Variable {
        let v = self.vars.add(variable().min(lo).max(hi));
        self.watched.push(v);
        v
    }
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

/// What came back from a solve.
pub struct Solved {
    /// Value of each watched variable, in order.
    pub values: Vec<f64>,
    pub status: SolutionStatus,
    /// Proven bound on the model's objective (Σ of terms, or τ), offset
    /// included: HiGHS's MIP dual bound; for microlp, known only at
    /// optimality (objective relaxed by the gap tolerance).
    pub bound: Option<f64>,
}

fn finish_solve<M>(
    mut m: M,
    constraints: Vec<Constraint>,
    initial: Vec<(Variable, f64)>,
    watched: &[Variable],
) -> Result<Solved, ResolutionError>
where
    M: SolverModel<Error = ResolutionError> + WithInitialSolution,
{
    let _: Vec<ConstraintReference> = constraints.into_iter().map(|c| m.add_constraint(c)).collect();
    let m = if initial.is_empty() {
        m
    } else {
        m.with_initial_solution(initial)
    };
    let sol = m.solve()?;
    Ok(Solved {
        values: watched.iter().map(|v| sol.value(*v)).collect(),
        status: sol.status(),
        bound: None,
    })
}

/// Solve with the chosen backend, time limit, gap and threads.
pub fn solve(model: Model, solver: Solver, limits: &Limits) -> Result<Solved, ResolutionError> {
    let Model {
        vars,
        constraints,
        objective,
        minimise,
        watched,
        initial,
        offset,
        integral,
    } = model;
    // Only HiGHS reports a MIP bound; microlp builds (wasm) do not read it.
    #[cfg(not(feature = "highs"))]
    let _ = integral;
    if watched.is_empty() {
        // Nothing to decide (every job pinned or unservable): HiGHS calls this
        // ModelEmpty; the optimum is the constant.
        return Ok(Solved {
            values: Vec::new(),
            status: SolutionStatus::Optimal,
            bound: Some(offset),
        });
    }
    // Model objective value from the watched values (the solvers drop constants).
    let lin: Vec<(Variable, f64)> = {
        use good_lp::IntoAffineExpression;
        (&objective).linear_coefficients().collect()
    };
    let problem = if minimise {
        vars.minimise(objective)
    } else {
        vars.maximise(objective)
    };
    let tl = limits.time_limit_s.max(0.001);
    let gap = limits.gap.max(0.0);
    match solver {
        #[cfg(feature = "highs")]
        Solver::Highs => solve_highs(problem, constraints, initial, &watched, offset, integral, limits),
        Solver::Microlp => {
            let mut m = problem
                .using(good_lp::solvers::microlp::microlp)
                .with_time_limit(tl);
            use good_lp::WithMipGap;
            m = m
                .with_mip_gap(gap as f32)
                .map_err(|e| ResolutionError::Str(e.to_string()))?;
            let mut solved = finish_solve(m, constraints, initial, &watched)?;
            if matches!(solved.status, SolutionStatus::Optimal | SolutionStatus::GapLimit) {
                let index: std::collections::HashMap<Variable, usize> =
                    watched.iter().enumerate().map(|(i, v)| (*v, i)).collect();
                let obj: f64 = offset
                    + lin
                        .iter()
                        .map(|(v, c)| c * index.get(v).map_or(0.0, |&i| solved.values[i]))
                        .sum::<f64>();
                let slack = gap * obj.abs();
                solved.bound = Some(if minimise { obj - slack } else { obj + slack });
            }
            Ok(solved)
        }
    }
}

/// HiGHS through its own crate rather than good_lp's wrapper, because only
/// the model itself exposes the MIP dual bound (`mip_dual_bound`). Columns
/// are created in the order of `watched`, so a column index is a position there.
#[cfg(feature = "highs")]
fn solve_highs(
    problem: good_lp::variable::UnsolvedProblem,
    constraints: Vec<Constraint>,
    initial: Vec<(Variable, f64)>,
    watched: &[Variable],
    offset: f64,
    integral: bool,
    limits: &Limits,
) -> Result<Solved, ResolutionError> {
    use highs::{HighsModelStatus, HighsSolutionStatus};
    let mut hp = problem.using(good_lp::solvers::highs::highs);
    for c in constraints {
        hp.add_constraint(c);
    }
    let mut model = hp.try_into_inner()?;
    model.make_quiet();
    let opt = |e| ResolutionError::Str(format!("HiGHS option: {e:?}"));
    // Measured: at 2048 GPUs presolve took 1.9 s of 2.6 s and removed 3% of
    // the rows; the root LP of this model is integral, so presolve buys nothing.
    model.try_set_option("presolve", "off").map_err(opt)?;
    model
        .try_set_option("time_limit", limits.time_limit_s.max(0.001))
        .map_err(opt)?;
    model
        .try_set_option("mip_rel_gap", limits.gap.max(0.0))
        .map_err(opt)?;
    model
        .try_set_option("threads", limits.threads.max(1) as i32)
        .map_err(opt)?;
    if !initial.is_empty() {
        let index: std::collections::HashMap<Variable, usize> =
            watched.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        let mut cols = vec![0.0; watched.len()];
        for (v, x) in initial {
            if let Some(&i) = index.get(&v) {
                cols[i] = x;
            }
        }
        // A rejected start only costs the warm start, never the solve.
        let _ = model.try_set_solution(Some(&cols), None, None, None);
    }
    let solved = model
        .try_solve()
        .map_err(|e| ResolutionError::Str(format!("HiGHS error while solving: {e:?}")))?;
    let status = match solved.status() {
        HighsModelStatus::Infeasible | HighsModelStatus::UnboundedOrInfeasible => {
            return Err(ResolutionError::Infeasible)
        }
        HighsModelStatus::Unbounded => return Err(ResolutionError::Unbounded),
        HighsModelStatus::Optimal | HighsModelStatus::ObjectiveBound | HighsModelStatus::ObjectiveTarget => {
            let g = solved.mip_gap();
            if g.is_finite() && g > 0.0 {
                SolutionStatus::GapLimit
            } else {
                SolutionStatus::Optimal
            }
        }
        HighsModelStatus::ReachedTimeLimit
        | HighsModelStatus::ReachedSolutionLimit
        | HighsModelStatus::ReachedInterrupt
        | HighsModelStatus::ReachedIterationLimit
        | HighsModelStatus::ReachedMemoryLimit => SolutionStatus::TimeLimit,
        other => return Err(ResolutionError::Str(format!("HiGHS status {other:?}"))),
    };
    if solved.primal_solution_status() != HighsSolutionStatus::Feasible {
        return Err(ResolutionError::Other("NoSolutionFound"));
    }
    let objective = solved.objective_value();
    let mip_bound = if integral {
        solved.double_info_value(c"mip_dual_bound").ok()
    } else {
        None
    };
    let bound = mip_bound
        .filter(|b| b.is_finite())
        .or(matches!(status, SolutionStatus::Optimal).then_some(objective))
        .map(|b| b + offset);
    let values = solved.get_solution().columns().to_vec();
    if values.len() != watched.len() {
        return Err(ResolutionError::Str(
            "HiGHS returned a solution of the wrong size".into(),
        ));
    }
    Ok(Solved {
        values,
        status,
        bound,
    })
}

/// A bound on Σ terms (or τ) as a bound on the generalized mean over `n` jobs,
/// the same scale as `objective::evaluate`; `None` if it is not finite.
pub fn bound_to_mean(sense: Sense, bound: f64, n: usize) -> Option<f64> {
    let b = match sense {
        // For p < 0 every term is positive, so a bound ≤ 0 carries no information.
        Sense::MinPower(_) if bound <= 0.0 => return None,
        _ => sense.to_mean(bound, n),
    };
    b.is_finite().then_some(b)
}

/// The fair share, exposed so formulations and tests agree on it.
pub fn fair(round: &Round) -> (u32, u32) {
    fair_share(round)
}

/// Value of one job under an allocation, for incumbents and checks.
pub fn value_of(
    job: &RoundJob,
    nodes: u32,
    gpus: u32,
    keep: bool,
    cache: &mut SpeedupCache,
    round: &Round,
) -> f64 {
    let s = cache.get(job, nodes, gpus);
    if keep {
        s
    } else {
        s * restart_factor(job, round.params.restart_penalty_s)
    }
}
