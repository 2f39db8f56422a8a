//! The MIP solver binding: a solver-agnostic [`Model`], the [`Solver`]
//! value (HiGHS natively, microlp everywhere including wasm32) and
//! [`solve`], which reads back values, status and the dual bound. Nothing
//! here knows about jobs; formulations build a `Model` and decode `Solved`.

use good_lp::{
    constraint::ConstraintReference, variable, Constraint, Expression, ProblemVariables, ResolutionError,
    Solution, SolutionStatus, SolverModel, Variable, WithInitialSolution, WithTimeLimit,
};

use crate::candidates::Sense;
use crate::Limits;

/// Which MIP solver runs a formulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// HiGHS (the `highs` feature): fast, with a dual bound; not in wasm32.
    #[cfg(feature = "highs")]
    Highs,
    /// microlp, pure Rust: always built, wasm32 included.
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

    /// Its lowercase name, as failure notes give it.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "highs")]
            Solver::Highs => "highs",
            Solver::Microlp => "microlp",
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
    /// Whether HiGHS presolves. Off by default: the planners' allocation
    /// models gain nothing from it (see [`solve`]); placement models with
    /// many big-M rows do.
    pub presolve: bool,
    /// Solve only the LP relaxation (HiGHS; microlp ignores it and solves
    /// the MIP). For a warm start's guide: values only, status and bound are
    /// the LP's.
    pub relax: bool,
    /// How HiGHS keeps LP rows and pool cuts (HiGHS only).
    pub cuts: CutPool,
    /// Skip HiGHS's feasibility-jump heuristic and symmetry detection,
    /// which do not watch the time limit: on the node-level model at 2,048
    /// GPUs × 800 jobs they ran 45 s past a 10 s limit (HiGHS only).
    pub skip_untimed: bool,
    /// The exponent p of the sum of terms this model maximises (or
    /// minimises), so that the solver's gap on the sum is the requested
    /// gap on the mean ([`solver_gap`]); 1 where the objective is no such
    /// sum (placement models).
    pub p: f64,
}

/// The relative gap to give a solver on a sum of (v+ε)^p terms so that
/// the power mean is within about `gap` of optimal: a relative gap g on
/// the sum allows (1 − g)^(−1/|p|) − 1 ≈ g/|p| on the mean, so at
/// |p| < 1 the solver works to g·|p| (at p = 0.01 the requested 10⁻⁴
/// would otherwise allow 1% on the mean). The log sum (p = 0) and max-min
/// keep g (`bound::mean_gap` converts them).
pub fn solver_gap(p: f64, gap: f64) -> f64 {
    let gap = gap.max(0.0);
    if p.is_finite() && p != 0.0 && p.abs() < 1.0 {
        gap * p.abs()
    } else {
        gap
    }
}

/// HiGHS's handling of cuts in the MIP's LP and cut pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CutPool {
    /// HiGHS's defaults.
    #[default]
    Default,
    /// Cuts leave the LP after 2 rounds unused (`mip_lp_age_limit`, default
    /// 10) and the pool is kept to 100 (`mip_pool_soft_limit`, default
    /// 10,000). Why: on rounds of several GPU types HiGHS spends its time in
    /// the root cut loop; measured faster there (docs/heterogeneity.md).
    Lean,
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
            presolve: false,
            relax: false,
            cuts: CutPool::Default,
            skip_untimed: false,
            p: 1.0,
        }
    }

    /// An empty model in the direction of `sense`, with the max-min level
    /// variable τ when p = −∞.
    pub fn for_sense(sense: Sense) -> (Self, Option<Variable>) {
        let mut m = Model::new();
        m.minimise = matches!(sense, Sense::MinPower(_));
        m.p = sense.p();
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
    /// included: HiGHS's MIP dual bound, microlp's best bound.
    pub bound: Option<f64>,
}

fn finish_solve<M>(
    mut m: M,
    constraints: Vec<Constraint>,
    initial: Vec<(Variable, f64)>,
    watched: &[Variable],
    bound_of: impl FnOnce(M::Solution) -> Option<f64>,
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
    let values = watched.iter().map(|v| sol.value(*v)).collect();
    let status = sol.status();
    Ok(Solved {
        values,
        status,
        bound: bound_of(sol),
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
        presolve,
        relax,
        cuts,
        skip_untimed,
        p,
    } = model;
    // Only HiGHS reports a MIP bound; microlp builds (wasm) do not read it.
    #[cfg(not(feature = "highs"))]
    let _ = (integral, presolve, relax, cuts, skip_untimed);
    #[cfg(feature = "highs")]
    let integral = integral && !relax;
    if watched.is_empty() {
        // Nothing to decide (every job pinned or unservable): HiGHS calls this
        // ModelEmpty; the optimum is the constant.
        return Ok(Solved {
            values: Vec::new(),
            status: SolutionStatus::Optimal,
            bound: Some(offset),
        });
    }
    let problem = if minimise {
        vars.minimise(objective)
    } else {
        vars.maximise(objective)
    };
    let tl = limits.time_limit_s.max(0.001);
    let gap = solver_gap(p, limits.gap);
    match solver {
        #[cfg(feature = "highs")]
        Solver::Highs => solve_highs(
            problem,
            constraints,
            initial,
            &watched,
            offset,
            integral,
            presolve,
            relax,
            cuts,
            skip_untimed,
            &Limits { gap, ..*limits },
        ),
        Solver::Microlp => {
            let mut m = problem
                .using(good_lp::solvers::microlp::microlp)
                .with_time_limit(tl);
            use good_lp::WithMipGap;
            m = m
                .with_mip_gap(gap as f32)
                .map_err(|e| ResolutionError::Str(e.to_string()))?;
            // microlp's own proven bound; it never sees good_lp's constant.
            finish_solve(m, constraints, initial, &watched, |sol| {
                sol.into_inner().stats().best_bound.map(|b| b + offset)
            })
        }
    }
}

/// HiGHS through its own crate rather than good_lp's wrapper, because only
/// the model itself exposes the MIP dual bound (`mip_dual_bound`). Columns
/// are created in the order of `watched`, so a column index is a position there.
#[cfg(feature = "highs")]
#[allow(clippy::too_many_arguments)]
fn solve_highs(
    problem: good_lp::variable::UnsolvedProblem,
    constraints: Vec<Constraint>,
    initial: Vec<(Variable, f64)>,
    watched: &[Variable],
    offset: f64,
    integral: bool,
    presolve: bool,
    relax: bool,
    cuts: CutPool,
    skip_untimed: bool,
    limits: &Limits,
) -> Result<Solved, ResolutionError> {
    use highs::{HighsModelStatus, HighsSolutionStatus};
    // Handing the model to HiGHS counts against the limit too: HiGHS's
    // own clock starts after it (0.4 s for sia's model of a 100,000-GPU
    // round, 0.04 s for mip-exact's at 4,096).
    let t0 = web_time::Instant::now();
    let mut hp = problem.using(good_lp::solvers::highs::highs);
    for c in constraints {
        hp.add_constraint(c);
    }
    let mut model = hp.try_into_inner()?;
    model.make_quiet();
    let opt = |e| ResolutionError::Str(format!("HiGHS option: {e:?}"));
    // Measured: at 2048 GPUs presolve took 1.9 s of 2.6 s and removed 3% of
    // the rows; the root LP of this model is integral, so presolve buys nothing.
    let presolve = if presolve { "on" } else { "off" };
    model.try_set_option("presolve", presolve).map_err(opt)?;
    if relax {
        model.try_set_option("solve_relaxation", true).map_err(opt)?;
    }
    if skip_untimed {
        model
            .try_set_option("mip_heuristic_run_feasibility_jump", false)
            .map_err(opt)?;
        model.try_set_option("mip_detect_symmetry", false).map_err(opt)?;
    }
    if cuts == CutPool::Lean {
        model.try_set_option("mip_lp_age_limit", 2).map_err(opt)?;
        model.try_set_option("mip_pool_soft_limit", 100).map_err(opt)?;
    }
    let left = limits.time_limit_s - t0.elapsed().as_secs_f64();
    model.try_set_option("time_limit", left.max(0.001)).map_err(opt)?;
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
