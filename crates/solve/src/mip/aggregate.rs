//! `mip-aggregate`: the scalable formulation. One binary per (job, shape)
//! over shapes that always pack (powers of two within a node, whole nodes
//! beyond) plus "keep", with aggregate capacity rows; the shared packer
//! then places the choices, keeping jobs on their current nodes where it
//! can. No node-level variables, so its size is linear in jobs.

use gpuplan_core::{Plan, PlanStatus, Round};

use super::{job_options, solve, Choice, Model, Sense, Shapes, Solver};
use crate::placement::pack_typed;
use crate::speedup::{max_gpus, SpeedupCache};
use crate::{Limits, PlanError, Planner, PlannerTraits};

#[derive(Debug)]
pub struct MipAggregate {
    pub solver: Solver,
    name: &'static str,
}

impl MipAggregate {
    pub fn new(solver: Solver, name: &'static str) -> Self {
        MipAggregate { solver, name }
    }
}

/// Chosen (job index, choice, GPU type) triples, the model's status, its
/// bound on the generalized mean, and per-job notes.
pub type AggregateSolution = (
    Vec<(usize, Choice, Option<String>)>,
    PlanStatus,
    Option<f64>,
    Vec<String>,
);

/// Build, solve and decode the aggregate model. `Err` carries the reason
/// for a fallback.
pub fn solve_aggregate(round: &Round, solver: Solver, limits: &Limits) -> Result<AggregateSolution, String> {
    let mut caches: Vec<SpeedupCache> = round
        .jobs
        .iter()
        .map(|j| {
            let m = max_gpus(j, round).max(j.current().num_gpus()).max(1);
            SpeedupCache::new(round, 2, m)
        })
        .collect();
    // A packable shape's value is the one-node or several-nodes speedup at its
    // GPU count. With one node size the packable candidates are all we need
    // (far fewer speedups to compute); with several, take every GPU count.
    let sizes: std::collections::BTreeSet<u32> = round.cluster.nodes.iter().map(|n| n.gpus).collect();
    let shapes = if sizes.len() == 1 {
        Shapes::Packable
    } else {
        Shapes::Any
    };
    let opts = job_options(round, &mut caches, shapes);
    let notes: Vec<String> = opts.iter().filter_map(|o| o.infeasible.clone()).collect();
    let sense = Sense::of(round.params.p);
    let n_nodes = round.cluster.num_nodes();
    let maxn = round.params.max_nodes_per_job.min(n_nodes as u32);
    // GPU types in order of first appearance: (name, nodes, GPUs, largest node).
    let mut types: Vec<(String, u32, u32, u32)> = Vec::new();
    let mut node_type = Vec::with_capacity(n_nodes);
    for n in &round.cluster.nodes {
        let i = match types.iter().position(|t| t.0 == n.gpu_type) {
            Some(i) => i,
            None => {
                types.push((n.gpu_type.clone(), 0, 0, 0));
                types.len() - 1
            }
        };
        types[i].1 += 1;
        types[i].2 += n.gpus;
        types[i].3 = types[i].3.max(n.gpus);
        node_type.push(i);
    }
    let mut m = Model::new();
    m.minimise = matches!(sense, Sense::MinPower(_));
    let t = if sense == Sense::MaxMin {
        Some(m.continuous(0.0, 1e9))
    } else {
        None
    };
    let mut z: Vec<Vec<(good_lp::Variable, Choice, Option<usize>)>> = Vec::with_capacity(opts.len());
    let mut gpu_sum: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); types.len()];
    let mut whole_nodes: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); types.len()];
    let mut node_kept: Vec<Vec<good_lp::Variable>> = vec![Vec::new(); n_nodes];
    let mut objective = good_lp::Expression::from(0.0);
    for (j, o) in opts.iter().enumerate() {
        let job = &round.jobs[j];
        // (choice, type, value): keep, then packable shapes per type.
        let mut cands: Vec<(Choice, Option<usize>, f64)> = Vec::new();
        for c in &o.candidates {
            match c.choice {
                Choice::Keep => cands.push((Choice::Keep, None, c.value)),
                Choice::Config { nodes: 1, gpus } => {
                    for (ty, tt) in types.iter().enumerate() {
                        if gpus.is_power_of_two() && gpus <= tt.3 {
                            cands.push((Choice::Config { nodes: 1, gpus }, Some(ty), c.value));
                        }
                    }
                }
                Choice::Config { gpus, .. } => {
                    for (ty, tt) in types.iter().enumerate() {
                        let n = gpus / tt.3.max(1);
                        if gpus % tt.3.max(1) == 0 && n >= 2 && n <= maxn.min(tt.1) {
                            cands.push((Choice::Config { nodes: n, gpus }, Some(ty), c.value));
                        }
                    }
                }
            }
        }
        // Per type and shape kind, drop a count whose value does not beat a
        // smaller count of the same kind: the smaller one always packs where
        // the larger did, so the model's optimum is unchanged.
        let mut best: std::collections::HashMap<(Option<usize>, bool), f64> =
            std::collections::HashMap::new();
        cands.sort_by_key(|&(c, ty, _)| match c {
            Choice::Keep => (0, ty, 0),
            Choice::Config { gpus, .. } => (1, ty, gpus),
        });
        cands.retain(|&(c, ty, v)| match c {
            Choice::Keep => true,
            Choice::Config { nodes, .. } => {
                let b = best.entry((ty, nodes > 1)).or_insert(f64::NEG_INFINITY);
                let keep = v > *b + 1e-12;
                *b = b.max(v);
                keep
            }
        });
        let vars: Vec<(good_lp::Variable, Choice, Option<usize>)> =
            cands.iter().map(|&(c, ty, _)| (m.binary(), c, ty)).collect();
        let none_term = sense.term(o.none_value);
        let mut pick = good_lp::Expression::from(0.0);
        // An explicit "nothing" binary keeps constants out of the objective, so
        // the solver's relative gap is measured on the true Σ of terms.
        let none = m.binary();
        let mut value = none_term * none;
        for (&(v, c, ty), &(_, _, val)) in vars.iter().zip(&cands) {
            pick += v;
            value += sense.term(val) * v;
            match (c, ty) {
                (Choice::Keep, _) => {
                    for (n, k) in job.current().per_node() {
                        if let Some(list) = node_kept.get_mut(n.0 as usize) {
                            list.push(v);
                            gpu_sum[node_type[n.0 as usize]] += k as f64 * v;
                        }
                    }
                    m.initial.push((v, 1.0));
                }
                (Choice::Config { nodes, gpus }, Some(ty)) => {
                    gpu_sum[ty] += gpus as f64 * v;
                    if nodes > 1 {
                        whole_nodes[ty] += nodes as f64 * v;
                    }
                    m.initial.push((v, 0.0));
                }
                (Choice::Config { .. }, None) => {}
            }
        }
        let kept = cands.iter().any(|c| c.0 == Choice::Keep);
        m.initial.push((none, if kept { 0.0 } else { 1.0 }));
        if o.pinned {
            m.constraints.push(pick.eq(1.0));
            m.constraints.push(good_lp::Expression::from(none).eq(0.0));
        } else {
            m.constraints.push((pick + none).eq(1.0));
        }
        match t {
            Some(t) => m.constraints.push(good_lp::Expression::from(t).leq(value)),
            None => objective += value,
        }
        z.push(vars);
    }
    // Multi-node jobs need whole nodes of their type that hold no kept job.
    for (node, list) in node_kept.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        let u = m.binary();
        for &v in list {
            m.constraints.push(good_lp::Expression::from(v).leq(u));
        }
        whole_nodes[node_type[node]] += u;
        m.initial.push((u, 1.0));
    }
    for (ty, tt) in types.iter().enumerate() {
        m.constraints.push(gpu_sum[ty].clone().leq(tt.2 as f64));
        m.constraints.push(whole_nodes[ty].clone().leq(tt.1 as f64));
    }
    match t {
        Some(t) => {
            m.objective = t.into();
            m.minimise = false;
        }
        None => m.objective = objective,
    }
    let watched = m.watched.clone();
    if let Some(t) = t {
        // Warm start for t: the smallest kept value.
        let v0 = opts
            .iter()
            .map(|o| {
                o.candidates
                    .iter()
                    .find(|c| c.choice == Choice::Keep)
                    .map_or(o.none_value, |c| c.value)
            })
            .fold(f64::INFINITY, f64::min);
        m.initial
            .push((t, sense.term(if v0.is_finite() { v0 } else { 0.0 })));
    }
    let solved = solve(m, solver, limits).map_err(|e| format!("{} failed: {e}", solver.name()))?;
    let index: std::collections::HashMap<good_lp::Variable, usize> =
        watched.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    let value = |v: good_lp::Variable| solved.values[index[&v]];
    let mut choices = Vec::new();
    for (j, vars) in z.iter().enumerate() {
        if let Some(&(_, c, ty)) = vars.iter().find(|(v, _, _)| value(*v) > 0.5) {
            choices.push((j, c, ty.map(|ty| types[ty].0.clone())));
        }
    }
    let status = match solved.status {
        // GapLimit: optimal within the requested relative gap.
        good_lp::SolutionStatus::Optimal | good_lp::SolutionStatus::GapLimit => PlanStatus::Optimal,
        _ => PlanStatus::Feasible,
    };
    let bound = solved
        .bound
        .and_then(|b| super::bound_to_mean(sense, b, round.jobs.len()));
    Ok((choices, status, bound, notes))
}

impl Planner for MipAggregate {
    fn name(&self) -> &str {
        self.name
    }

    fn traits(&self) -> PlannerTraits {
        super::MIP_TRAITS
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        match solve_aggregate(round, self.solver, limits) {
            Ok((choices, status, bound, notes)) => {
                let typed: Vec<(usize, Choice, Option<&str>)> =
                    choices.iter().map(|(j, c, t)| (*j, *c, t.as_deref())).collect();
                let packed = pack_typed(round, &typed);
                let mut plan = Plan::new(self.name, status);
                for (i, a) in packed.allocations {
                    plan.allocations.insert(round.jobs[i].id, a);
                }
                if !packed.notes.is_empty() {
                    plan.reason = Some(packed.notes.join("; "));
                }
                // The bound is over packable shapes only: a bound for this
                // model, not for the exact problem (docs/formulation.md).
                plan.bound = bound;
                super::set_gap(round, &mut plan);
                if plan.reason.is_some() && plan.status == PlanStatus::Optimal {
                    // The packer had to change something: no longer the model's optimum.
                    plan.status = PlanStatus::Feasible;
                }
                let mut all = notes;
                all.extend(plan.reason.take());
                if !all.is_empty() {
                    plan.reason = Some(all.join("; "));
                }
                Ok(plan)
            }
            Err(reason) => Ok(super::fallback(self.name, round, &reason)),
        }
    }
}
