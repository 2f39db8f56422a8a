//! `mip-node`: the plain node-level placement model, exact for the goodput
//! model but slow (node symmetry). Kept as a cross-check of `mip-exact`.
//!
//! Per job: one binary per candidate (keep current placement, or any
//! (nodes, GPUs) configuration), integer GPUs per node and node-use
//! binaries tied to the chosen configuration, so the node count the speedup
//! depends on is exact. Node capacity, pinned jobs, the interference rule
//! and keep-or-move are rows of the model. Identical nodes that hold no
//! running job are interchangeable, so they are ordered by load (symmetry
//! breaking) — this keeps optimality proofs cheap. Rows and variables are
//! listed in docs/formulation.md.

use std::collections::BTreeMap;

use good_lp::{Expression, Variable};
use gpuplan_core::{Allocation, Interference, NodeId, Plan, PlanStatus, Round};

use super::MIP_TRAITS;
use crate::candidates::{bound_to_mean, job_options, Choice, Sense, Shapes};
use crate::fallback::{finish, SolvedPlan};
use crate::planners::greedy::{greedy_choices, plan_from_choices};
use crate::solver::{solve, Model, Solver};
use crate::speedup::SpeedupCache;
use crate::{Limits, PlanError, Planner, PlannerTraits};

#[derive(Debug)]
pub struct MipNode {
    pub solver: Solver,
    name: &'static str,
}

impl MipNode {
    pub fn new(solver: Solver, name: &'static str) -> Self {
        MipNode { solver, name }
    }
}

/// Peak memory of the node-level model per (movable job, node) pair, its
/// own build and HiGHS's copy together: `gpuplan plan --planner mip-node`
/// on the bench's rounds peaked at 9.2, 9.1 and 8.9 KiB per pair at
/// 512 × 200, 1,024 × 400 and 2,048 × 800 (docs/formulation.md, "At
/// production scale"), so 9.5 KiB errs on the safe side.
pub const NODE_MODEL_BYTES_PER_CELL: f64 = 9.5 * 1024.0;

/// Largest node-level model (job-node pairs) that keeps HiGHS's
/// feasibility jump and symmetry detection ([`crate::solver::Model::skip_untimed`]).
const NODE_MODEL_JUMP_MAX_CELLS: usize = 50_000;

/// Solve the exact model; `Err` is the reason for a fallback.
pub fn solve_node(round: &Round, solver: Solver, limits: &Limits) -> Result<SolvedPlan, String> {
    solve_node_from(round, solver, limits, None, web_time::Instant::now())
}

/// [`solve_node`] for a planner that already built the round's speedup
/// tables (one per job, in round order) and started its clock at `t0`:
/// mip-exact, when it falls to this model, neither redoes its batch-size
/// searches nor runs past its limit by the time it spent first.
pub(crate) fn solve_node_from(
    round: &Round,
    solver: Solver,
    limits: &Limits,
    caches: Option<Vec<SpeedupCache>>,
    t0: web_time::Instant,
) -> Result<SolvedPlan, String> {
    let n_nodes = round.cluster.num_nodes();
    let cap: Vec<f64> = round.cluster.nodes.iter().map(|n| n.gpus as f64).collect();
    let mut caches = caches.unwrap_or_else(|| SpeedupCache::per_job(round, |m| m.min(n_nodes as u32).max(1)));
    let opts = job_options(round, &mut caches, Shapes::Any);
    // The model holds per-node variables and rows for every movable job
    // with options: its size is known before a variable is made.
    let cells = opts
        .iter()
        .filter(|o| !o.pinned && !o.candidates.is_empty())
        .count()
        * n_nodes;
    limits.check_memory("the node-level model", cells as f64 * NODE_MODEL_BYTES_PER_CELL)?;
    let notes: Vec<String> = opts.iter().filter_map(|o| o.infeasible.clone()).collect();
    let sense = Sense::of(round.params.p);
    let avoid = round.params.interference == Interference::Avoid;
    let max_nodes = round.params.max_nodes_per_job.min(n_nodes as u32);
    let (mut m, t) = Model::for_sense(sense);
    let mut objective = Expression::from(0.0);
    // Capacity left after pinned jobs, and nodes whose multi-node slot they hold.
    let mut cap_left = cap.clone();
    let mut multi_taken = vec![0.0f64; n_nodes];
    let mut load: Vec<Expression> = vec![Expression::from(0.0); n_nodes];
    let mut slot: Vec<Expression> = vec![Expression::from(0.0); n_nodes];
    // Nodes touched by any current allocation cannot be relabelled.
    let mut touched = vec![false; n_nodes];
    for j in &round.jobs {
        for (n, _) in j.current().per_node() {
            if let Some(tch) = touched.get_mut(n.0 as usize) {
                *tch = true;
            }
        }
    }
    struct JobVars {
        z: Vec<Variable>,
        /// What each `z` stands for.
        opts: Vec<SpeedOption>,
        none: Variable,
        x: Vec<Variable>,
        y: Vec<Variable>,
        w: Vec<Option<Variable>>,
    }
    let mut jv: Vec<Option<JobVars>> = Vec::with_capacity(opts.len());
    let node_type = round.cluster.type_index();
    // Under per-GPU variability, each node's speed per class as mip-exact
    // assumes it (its slowest GPU, binned: [`crate::bins::node_speeds`]).
    let speeds: Option<Vec<[f64; 4]>> = round
        .variability
        .as_ref()
        .map(|v| crate::bins::node_speeds(round, v));
    let n_types = round.cluster.types().len();
    let mut type_vars: Vec<Option<Vec<Variable>>> = Vec::new();
    let mut pinned_allocs: BTreeMap<usize, Allocation> = BTreeMap::new();
    // Each job's GPUs and "nothing", for the queue rows.
    let mut q_gpus: Vec<Expression> = vec![Expression::from(0.0); opts.len()];
    let mut q_none: Vec<Expression> = vec![Expression::from(1.0); opts.len()];
    let mut q_pinned: Vec<u32> = vec![0; opts.len()];
    for (j, o) in opts.iter().enumerate() {
        // Building counts against the time limit (at 2,048 GPUs × 800 jobs
        // it took most of a minute): past it, the fallback takes over.
        if t0.elapsed().as_secs_f64() > limits.time_limit_s {
            return Err(format!(
                "time limit reached while building the node-level model ({j} of {} jobs)",
                opts.len()
            ));
        }
        let job = &round.jobs[j];
        let none_term = sense.weighted(o.none_value, o.share);
        if o.pinned {
            let per = job.current().per_node();
            for &(n, k) in &per {
                cap_left[n.0 as usize] -= k as f64;
                if per.len() > 1 {
                    multi_taken[n.0 as usize] += 1.0;
                }
            }
            let v = pinned_value(round, j, &o.candidates);
            match t {
                Some(t) => m
                    .constraints
                    .push(Expression::from(t).leq(sense.weighted(v, o.share))),
                None => m.offset += sense.weighted(v, o.share),
            }
            pinned_allocs.insert(j, job.current().clone());
            q_gpus[j] = Expression::from(f64::from(job.current().num_gpus()));
            q_none[j] = Expression::from(0.0);
            q_pinned[j] = job.current().num_gpus();
            jv.push(None);
            type_vars.push(None);
            continue;
        }
        if o.candidates.is_empty() {
            match t {
                Some(t) => m.constraints.push(Expression::from(t).leq(none_term)),
                None => m.offset += none_term,
            }
            jv.push(None);
            type_vars.push(None);
            continue;
        }
        let opts_j = speed_options(round, j, &o.candidates, speeds.as_deref(), &node_type);
        let z: Vec<Variable> = opts_j.iter().map(|_| m.binary()).collect();
        let x: Vec<Variable> = cap.iter().map(|&c| m.integer(0.0, c)).collect();
        let y: Vec<Variable> = cap.iter().map(|_| m.binary()).collect();
        let cur: Vec<f64> = {
            let mut v = vec![0.0; n_nodes];
            for (n, k) in job.current().per_node() {
                v[n.0 as usize] = k as f64;
            }
            v
        };
        let mut pick = Expression::from(0.0);
        let mut gpus = Expression::from(0.0);
        let mut nodes_lo = Expression::from(0.0);
        let mut nodes_hi = Expression::from(0.0);
        let mut distributed = Expression::from(0.0);
        // An explicit "nothing" binary keeps constants out of the objective, so
        // the solver's relative gap is measured on the true Σ of terms.
        let none = m.binary();
        let mut value = none_term * none;
        let mut keep_var = None;
        for (so, &v) in opts_j.iter().zip(&z) {
            let c = &o.candidates[so.cand];
            pick += v;
            value += sense.weighted(so.value, o.share) * v;
            let (cn, ck) = match c.choice {
                Choice::Keep => {
                    keep_var = Some(v);
                    (job.current().num_nodes(), job.current().num_gpus())
                }
                Choice::Config { nodes, gpus } => (nodes, gpus),
            };
            gpus += ck as f64 * v;
            // A multi-node configuration may use any number of nodes from 2 up.
            let hi = match c.choice {
                Choice::Config { nodes, gpus } if nodes > 1 => gpus.min(max_nodes).max(2),
                _ => cn,
            };
            nodes_lo += cn as f64 * v;
            nodes_hi += hi as f64 * v;
            if cn > 1 {
                distributed += v;
            }
        }
        m.constraints.push((pick + none).eq(1.0));
        q_gpus[j] = gpus.clone();
        q_none[j] = Expression::from(none);
        let sum_x: Expression = x.iter().map(|&v| Expression::from(v)).sum();
        let sum_y: Expression = y.iter().map(|&v| Expression::from(v)).sum();
        m.constraints.push(sum_x.eq(gpus));
        m.constraints.push(sum_y.clone().geq(nodes_lo));
        m.constraints.push(sum_y.leq(nodes_hi));
        let has_multi = o.candidates.iter().any(|c| match c.choice {
            Choice::Keep => job.current().num_nodes() > 1,
            Choice::Config { nodes, .. } => nodes > 1,
        });
        let mut ws = vec![None; n_nodes];
        if let Some(sp) = &speeds {
            // A choice valued at speed θ may use no node slower than θ.
            let class = job.perf_class().index();
            for n in 0..n_nodes {
                let slower: Vec<Variable> = opts_j
                    .iter()
                    .zip(&z)
                    .filter(|(so, _)| so.speed.is_some_and(|t| sp[n][class] > t))
                    .map(|(_, &v)| v)
                    .collect();
                // No row where nothing is slower: all-median GPUs give the
                // very model (and plan) of no variability.
                if !slower.is_empty() {
                    let slower: Expression = slower.into_iter().map(Expression::from).sum();
                    m.constraints.push((y[n] + slower).leq(1.0));
                }
            }
        }
        for n in 0..n_nodes {
            m.constraints.push(Expression::from(x[n]).leq(cap[n] * y[n]));
            m.constraints.push(Expression::from(y[n]).leq(x[n]));
            if let Some(k) = keep_var {
                // Keeping pins every node's GPUs to the current ones.
                m.constraints.push(Expression::from(x[n]).geq(cur[n] * k));
                m.constraints.push((x[n] + cap[n] * k).leq(cur[n] + cap[n]));
            }
            load[n] += x[n];
            if avoid && has_multi {
                let w = m.continuous(0.0, 1.0);
                m.constraints.push((y[n] + distributed.clone() - 1.0).leq(w));
                slot[n] += w;
                ws[n] = Some(w);
            }
        }
        match t {
            Some(t) => m.constraints.push(Expression::from(t).leq(value)),
            None => objective += value,
        }
        // GPU types: a job's nodes are all of one type.
        if n_types > 1 {
            let pick_type: Vec<Variable> = (0..n_types).map(|_| m.binary()).collect();
            let one: Expression = pick_type.iter().map(|&v| Expression::from(v)).sum();
            m.constraints.push(one.leq(1.0));
            for n in 0..n_nodes {
                m.constraints
                    .push(Expression::from(y[n]).leq(pick_type[node_type[n]]));
            }
            // A configuration is valued on its type, so it must run there.
            for (so, &v) in opts_j.iter().zip(&z) {
                let c = &o.candidates[so.cand];
                if matches!(c.choice, Choice::Config { .. }) {
                    m.constraints.push(Expression::from(v).leq(pick_type[c.ty]));
                }
            }
            type_vars.push(Some(pick_type));
        } else {
            type_vars.push(None);
        }
        jv.push(Some(JobVars {
            z,
            opts: opts_j,
            none,
            x,
            y,
            w: ws,
        }));
    }
    if let Some(tree) = gpuplan_core::queue::QueueTree::new(round) {
        super::queue_rows(round, &tree, &mut m, &q_gpus, &q_none, &q_pinned);
    }
    for n in 0..n_nodes {
        m.constraints.push(load[n].clone().leq(cap_left[n].max(0.0)));
        if avoid {
            m.constraints
                .push(slot[n].clone().leq((1.0 - multi_taken[n]).max(0.0)));
        }
    }
    // Symmetry: untouched nodes of the same size and type are interchangeable;
    // order them by load.
    // Nodes of different speeds are not interchangeable.
    let mut classes: BTreeMap<(u32, gpuplan_core::GpuType, [u64; 4]), Vec<usize>> = BTreeMap::new();
    for (n, node) in round.cluster.nodes.iter().enumerate() {
        if !touched[n] {
            let speed = speeds.as_ref().map_or([0; 4], |sp| sp[n].map(f64::to_bits));
            classes
                .entry((node.gpus, node.gpu_type.clone(), speed))
                .or_default()
                .push(n);
        }
    }
    for members in classes.values() {
        for w in members.windows(2) {
            m.constraints.push(load[w[1]].clone().leq(load[w[0]].clone()));
        }
    }
    match t {
        Some(t) => {
            m.objective = t.into();
            m.minimise = false;
        }
        None => m.objective = objective,
    }
    // Warm start: the greedy plan, with untouched interchangeable nodes
    // relabelled to satisfy the symmetry rows. The solver starts from an
    // incumbent at least as good as the heuristic, so a time-out still
    // returns a plan no worse than greedy.
    let greedy = plan_from_choices("greedy", round, &greedy_choices(round), PlanStatus::Feasible);
    let mut node_map: Vec<usize> = (0..n_nodes).collect();
    {
        let mut load0 = vec![0u32; n_nodes];
        for a in greedy.allocations.values() {
            for (n, k) in a.per_node() {
                load0[n.0 as usize] += k;
            }
        }
        for members in classes.values() {
            let mut by_load = members.clone();
            by_load.sort_by_key(|&n| (std::cmp::Reverse(load0[n]), n));
            for (slot_i, &old) in by_load.iter().enumerate() {
                node_map[old] = members[slot_i];
            }
        }
    }
    let mut min_term = f64::INFINITY;
    for (j, vars) in jv.iter().enumerate() {
        let job = &round.jobs[j];
        let o = &opts[j];
        let Some(vars) = vars else {
            if o.pinned {
                let v = pinned_value(round, j, &o.candidates);
                min_term = min_term.min(sense.term(v));
            } else {
                min_term = min_term.min(sense.term(o.none_value));
            }
            continue;
        };
        let alloc = greedy.get(job.id);
        let mut xs = vec![0.0; n_nodes];
        for (n, k) in alloc.per_node() {
            xs[node_map[n.0 as usize]] += k as f64;
        }
        let used = xs.iter().filter(|&&v| v > 0.0).count() as u32;
        let k = alloc.num_gpus();
        let cand = if alloc.is_empty() {
            None
        } else if alloc.same_gpus(job.current()) {
            o.candidates.iter().position(|c| c.choice == Choice::Keep)
        } else {
            let ty = alloc.nodes().next().map(|n| node_type[n.0 as usize]);
            o.candidates.iter().position(|c| match c.choice {
                Choice::Config { nodes, gpus } => {
                    gpus == k && ((nodes == 1) == (used == 1)) && (n_types == 1 || Some(c.ty) == ty)
                }
                Choice::Keep => false,
            })
        };
        // Its speed option: the slowest node it uses (relabelling keeps speeds).
        let slowest = speeds.as_ref().map(|sp| {
            let class = job.perf_class().index();
            alloc.nodes().map(|n| sp[n.0 as usize][class]).fold(0.0, f64::max)
        });
        let pick = cand.and_then(|c| {
            vars.opts
                .iter()
                .position(|so| so.cand == c && (so.speed.is_none() || so.speed == slowest))
        });
        if pick.is_none() {
            xs.iter_mut().for_each(|v| *v = 0.0);
        }
        for (ci, &z) in vars.z.iter().enumerate() {
            m.initial.push((z, if Some(ci) == pick { 1.0 } else { 0.0 }));
        }
        m.initial
            .push((vars.none, if pick.is_none() { 1.0 } else { 0.0 }));
        let multi = pick.is_some() && used > 1;
        if let Some(tv) = &type_vars[j] {
            let ty = xs.iter().position(|&v| v > 0.0).map(|n| node_type[n]);
            for (t, &v) in tv.iter().enumerate() {
                m.initial.push((v, if Some(t) == ty { 1.0 } else { 0.0 }));
            }
        }
        for (n, &xn) in xs.iter().enumerate() {
            m.initial.push((vars.x[n], xn));
            m.initial.push((vars.y[n], if xn > 0.0 { 1.0 } else { 0.0 }));
            if let Some(w) = vars.w[n] {
                m.initial.push((w, if multi && xn > 0.0 { 1.0 } else { 0.0 }));
            }
        }
        let v = pick.map_or(o.none_value, |ci| vars.opts[ci].value);
        min_term = min_term.min(sense.term(v));
    }
    if let Some(t) = t {
        m.initial
            .push((t, if min_term.is_finite() { min_term } else { 0.0 }));
    }
    let watched = m.watched.clone();
    let index: std::collections::HashMap<Variable, usize> =
        watched.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    // Past this size HiGHS's feasibility jump and symmetry detection
    // overran the time limit several times over (45 s past 10 s at 204,800
    // pairs); below it the model is solved as it always was.
    m.skip_untimed = cells > NODE_MODEL_JUMP_MAX_CELLS;
    // The solver gets what the build left of the time limit.
    let limits = limits.after_build(t0.elapsed().as_secs_f64(), "the node-level model")?;
    let solved = solve(m, solver, &limits).map_err(|e| format!("{} failed: {e}", solver.name()))?;
    let value = |v: Variable| solved.values[index[&v]];
    let status = match solved.status {
        // GapLimit: optimal within the requested relative gap.
        good_lp::SolutionStatus::Optimal | good_lp::SolutionStatus::GapLimit => PlanStatus::Optimal,
        _ => PlanStatus::Feasible,
    };
    let mut plan = Plan::new("mip-node", status);
    plan.solver = Some(solver.name().into());
    for (j, a) in pinned_allocs {
        plan.allocations.insert(round.jobs[j].id, a);
    }
    for (j, vars) in jv.iter().enumerate() {
        let Some(vars) = vars else { continue };
        if !vars.z.iter().any(|&z| value(z) > 0.5) {
            continue;
        }
        let counts: Vec<(NodeId, u32)> = vars
            .x
            .iter()
            .enumerate()
            .map(|(n, &x)| (NodeId(n as u32), value(x).round().max(0.0) as u32))
            .filter(|&(_, k)| k > 0)
            .collect();
        if !counts.is_empty() {
            plan.allocations
                .insert(round.jobs[j].id, Allocation::from_counts(&counts));
        }
    }
    plan.bound = solved
        .bound
        .and_then(|b| bound_to_mean(sense, b, round.jobs.len()));
    Ok(SolvedPlan { plan, notes })
}

/// A pinned job's value: keeping its GPUs, at their true speed
/// ([`Round::variability_factor`], 1 without variability).
fn pinned_value(round: &Round, j: usize, cands: &[crate::candidates::Candidate]) -> f64 {
    let job = &round.jobs[j];
    cands
        .iter()
        .find(|c| c.choice == Choice::Keep)
        .map_or(0.0, |c| c.value / round.variability_factor(job, job.current()))
}

/// One binary of a job: a candidate (index into its options) valued at
/// speed `speed` for its class: it may use no node slower. `None`: no
/// speed limit (no variability, or "keep", valued at its GPUs' true speed).
struct SpeedOption {
    cand: usize,
    speed: Option<f64>,
    value: f64,
}

/// A job's binaries. Without variability, one per candidate at its value,
/// as before. With it, "keep" at the simulator's rule for its GPUs
/// ([`Round::variability_factor`]) and each configuration once per
/// distinct node speed θ of its type (mip-exact's binned node speeds),
/// valued at 1/θ (× L across nodes for a rigid job); the model then keeps
/// it off nodes slower than θ, so no value is optimistic.
fn speed_options(
    round: &Round,
    j: usize,
    cands: &[crate::candidates::Candidate],
    speeds: Option<&[[f64; 4]]>,
    node_type: &[usize],
) -> Vec<SpeedOption> {
    let Some((sp, v)) = speeds.zip(round.variability.as_ref()) else {
        return (0..cands.len())
            .map(|c| SpeedOption {
                cand: c,
                speed: None,
                value: cands[c].value,
            })
            .collect();
    };
    let job = &round.jobs[j];
    let class = job.perf_class().index();
    let mut out = Vec::new();
    for (ci, c) in cands.iter().enumerate() {
        match c.choice {
            Choice::Keep => out.push(SpeedOption {
                cand: ci,
                speed: None,
                value: c.value / round.variability_factor(job, job.current()),
            }),
            Choice::Config { nodes, .. } => {
                let mut thetas: Vec<f64> = (0..sp.len())
                    .filter(|&n| node_type[n] == c.ty)
                    .map(|n| sp[n][class])
                    .collect();
                thetas.sort_by(f64::total_cmp);
                thetas.dedup();
                for t in thetas {
                    out.push(SpeedOption {
                        cand: ci,
                        speed: Some(t),
                        value: c.value / v.spanning(t, nodes, job.pays_cross_node()),
                    });
                }
            }
        }
    }
    out
}

impl Planner for MipNode {
    fn name(&self) -> &str {
        self.name
    }

    fn traits(&self) -> PlannerTraits {
        MIP_TRAITS
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        Ok(finish(self.name, round, solve_node(round, self.solver, limits)))
    }
}
