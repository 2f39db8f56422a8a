//! `mip-aggregate`: the scalable formulation. One binary per (job, shape)
//! over shapes that always pack (powers of two within a node, whole nodes
//! beyond) plus "keep", with aggregate capacity rows; the shared packer
//! then places the choices, keeping jobs on their current nodes where it
//! can. No node-level variables, so its size is linear in jobs.

use gpuplan_core::{Plan, PlanStatus, Round};

use super::{job_options, solve, Choice, Model, Sense, Shapes, Solver};
use crate::planners::greedy::{greedy_choices, plan_from_choices};
use crate::speedup::{max_gpus, SpeedupCache};
use crate::{BatchPolicy, Limits, PlanError, Planner, PlannerTraits};

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

/// Build, solve and decode the aggregate model. `Err` carries the reason
/// for a fallback.
/// Chosen (job index, choice) pairs, the model's status, and per-job notes.
pub type AggregateSolution = (Vec<(usize, Choice)>, PlanStatus, Vec<String>);

pub fn solve_aggregate(round: &Round, solver: Solver, limits: &Limits) -> Result<AggregateSolution, String> {
    let mut caches: Vec<SpeedupCache> = round
        .jobs
        .iter()
        .map(|j| {
            let m = max_gpus(j, round).max(j.current().num_gpus()).max(1);
            SpeedupCache::new(round, m.min(round.cluster.num_nodes() as u32).max(1), m)
        })
        .collect();
    let opts = job_options(round, &mut caches, Shapes::Packable);
    let notes: Vec<String> = opts.iter().filter_map(|o| o.infeasible.clone()).collect();
    let sense = Sense::of(round.params.p);
    let n_nodes = round.cluster.num_nodes();
    let mut m = Model::new();
    m.minimise = matches!(sense, Sense::MinPower(_));
    let t = if sense == Sense::MaxMin {
        Some(m.continuous(0.0, 1e9))
    } else {
        None
    };
    let mut z: Vec<Vec<good_lp::Variable>> = Vec::with_capacity(opts.len());
    let mut gpu_sum = good_lp::Expression::from(0.0);
    let mut whole_nodes = good_lp::Expression::from(0.0);
    let mut node_kept: Vec<Vec<good_lp::Variable>> = vec![Vec::new(); n_nodes];
    let mut objective = good_lp::Expression::from(0.0);
    for (j, o) in opts.iter().enumerate() {
        let job = &round.jobs[j];
        let vars: Vec<good_lp::Variable> = o.candidates.iter().map(|_| m.binary()).collect();
        let none_term = sense.term(o.none_value);
        let mut pick = good_lp::Expression::from(0.0);
        // An explicit "nothing" binary keeps constants out of the objective, so
        // the solver's relative gap is measured on the true Σ of terms.
        let none = m.binary();
        let mut value = none_term * none;
        for (c, &v) in o.candidates.iter().zip(&vars) {
            pick += v;
            value += sense.term(c.value) * v;
            match c.choice {
                Choice::Keep => {
                    gpu_sum += job.current().num_gpus() as f64 * v;
                    for (n, _) in job.current().per_node() {
                        if let Some(list) = node_kept.get_mut(n.0 as usize) {
                            list.push(v);
                        }
                    }
                    m.initial.push((v, 1.0));
                }
                Choice::Config { nodes, gpus } => {
                    gpu_sum += gpus as f64 * v;
                    if nodes > 1 {
                        whole_nodes += nodes as f64 * v;
                    }
                    m.initial.push((v, 0.0));
                }
            }
        }
        let kept = o.candidates.iter().any(|c| c.choice == Choice::Keep);
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
    m.constraints.push(gpu_sum.leq(round.cluster.total_gpus() as f64));
    // Multi-node jobs need whole nodes that hold no kept job.
    for list in node_kept.iter().filter(|l| !l.is_empty()) {
        let u = m.binary();
        for &v in list {
            m.constraints.push(good_lp::Expression::from(v).leq(u));
        }
        whole_nodes += u;
        m.initial.push((u, 1.0));
    }
    m.constraints.push(whole_nodes.leq(n_nodes as f64));
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
        if let Some((ci, _)) = vars.iter().enumerate().find(|(_, v)| value(**v) > 0.5) {
            choices.push((j, opts[j].candidates[ci].choice));
        }
    }
    let status = match solved.status {
        // GapLimit: optimal within the requested relative gap.
        good_lp::SolutionStatus::Optimal | good_lp::SolutionStatus::GapLimit => PlanStatus::Optimal,
        _ => PlanStatus::Feasible,
    };
    Ok((choices, status, notes))
}

impl Planner for MipAggregate {
    fn name(&self) -> &str {
        self.name
    }

    fn traits(&self) -> PlannerTraits {
        PlannerTraits {
            batch: BatchPolicy::Adaptive,
            needs_oracle: false,
            honours_interference: true,
        }
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        match solve_aggregate(round, self.solver, limits) {
            Ok((choices, status, notes)) => {
                let mut plan = plan_from_choices(self.name, round, &choices, status);
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
            Err(reason) => {
                let mut plan =
                    plan_from_choices(self.name, round, &greedy_choices(round), PlanStatus::Fallback);
                plan.reason = Some(format!("{reason}; greedy plan used"));
                Ok(plan)
            }
        }
    }
}
