//! The one round pipeline every driver calls: check the round → plan →
//! name the GPUs → the stages every planner gets (unshare, even nodes,
//! queues) → validate against the rules the planner honours → bound rule →
//! diff.
//!
//! The simulator, the daemon, the browser, `gpuplan plan` and `gpuplan
//! bench` all go through [`run_round`], so a rule added here holds for all
//! of them at once (the daemon once drifted from the simulator and threw
//! away every plan of a baseline planner).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use gpuplan_core::{
    bind_plan, bind_round, objective, validate_under, Allocation, GpuId, Interference, JobId, NodeCounts,
    NodeId, ParamError, ParamField, Placement, Plan, PolicyParams, Round, Sight,
};

use crate::{registry, BatchPolicy, Limits, PlanError, Planner, PlannerTraits};

/// What happens to one job this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Not running before, running now.
    Start,
    /// Running before, not now.
    Stop,
    /// Same GPU count, other GPUs.
    Move,
    /// Another GPU count.
    Resize,
    /// The same GPUs.
    Keep,
    /// Not running before or now.
    Wait,
}

impl Change {
    /// Whether the job's processes restart (Pollux's re-allocation).
    pub fn restarts(self) -> bool {
        matches!(self, Change::Start | Change::Move | Change::Resize)
    }
}

/// One job's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobChange {
    /// The job, by id.
    pub job: JobId,
    /// What happens to it this round.
    pub change: Change,
}

/// The outcome of one round: the plan (every GPU named) and what changes
/// for each job of the round, in round order.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The validated plan, every GPU named.
    pub plan: Plan,
    /// Each job's change against its current allocation, in round order.
    pub diff: Vec<JobChange>,
}

impl Decision {
    /// A plan and each round job's change under it (a bound plan, checked
    /// by the caller: [`run_round`] is the one that validates).
    pub fn new(round: &Round, plan: Plan) -> Self {
        let diff = round
            .jobs
            .iter()
            .map(|j| JobChange {
                job: j.id,
                change: change(&j.state.allocation, plan.gpus_of(j.id)),
            })
            .collect();
        Decision { plan, diff }
    }

    /// The plan's objective, the one evaluation every planner is judged by.
    /// On demand: the simulator does not need it every round, and for
    /// goodput jobs it costs a batch-size search per job.
    pub fn objective(&self, round: &Round) -> f64 {
        objective::evaluate(round, &self.plan)
    }

    /// This job's change; `None` for a job not in the round.
    pub fn change(&self, job: JobId) -> Option<Change> {
        self.diff.iter().find(|c| c.job == job).map(|c| c.change)
    }
}

/// The rules a planner's plans are held to: the round's, less the
/// interference rule where the planner does not claim to honour it
/// (published baselines place without it, as in their papers).
pub fn rules(traits: &PlannerTraits, params: &PolicyParams) -> PolicyParams {
    PolicyParams {
        interference: if traits.honours_interference {
            params.interference
        } else {
            Interference::Allow
        },
        ..*params
    }
}

/// Whether a job's batch size adapts under a planner: only under a goodput
/// planner, and only where the job allows it (a job whose batch may not
/// grow, or one the trace pins, keeps its own). The simulator and the
/// daemon both ask here.
pub fn batch_adapts(traits: &PlannerTraits, job_allows: bool) -> bool {
    traits.batch == BatchPolicy::Adaptive && job_allows
}

/// Stop the preemptible jobs of a GPU whose jobs may no longer share it
/// (over `params.sharing`, over its memory, or an unmeasured pair under
/// `measured`), later jobs of the round first, until the rest may. Planners
/// that keep running jobs where they are keep pairs too, and a pair that
/// fitted when it started need not fit now (a job's memory figure grew).
/// A stage of its own so that every planner gets it once; a valid plan is
/// left as it is. Pinned jobs are never stopped: the round check refuses
/// pinned sharers that may not share.
pub fn unshare(round: &Round, plan: &mut Plan) {
    use gpuplan_core::colocation::{may_group, round_model};
    // Without sharing no kept group exists (the round check refuses one),
    // so a shared GPU is a planner's bug for the validator to report; and
    // the simulator's rounds skip the per-GPU table.
    if round.params.sharing < 2 {
        return;
    }
    let mut holders: std::collections::BTreeMap<gpuplan_core::GpuId, Vec<usize>> =
        std::collections::BTreeMap::new();
    for (i, j) in round.jobs.iter().enumerate() {
        for g in plan.gpus_of(j.id).gpus().iter().filter(|g| g.is_bound()) {
            holders.entry(*g).or_default().push(i);
        }
    }
    if holders.values().all(|h| h.len() < 2) {
        return;
    }
    let model = round_model(round);
    let k = round.params.sharing.max(1) as usize;
    let mut stopped: Vec<usize> = Vec::new();
    for (g, held) in &holders {
        let Some(node) = round.cluster.nodes.get(g.node.0 as usize) else {
            continue;
        };
        let mut on: Vec<usize> = held.iter().copied().filter(|i| !stopped.contains(i)).collect();
        let ok = |on: &[usize]| {
            on.len() <= 1
                || (on.len() <= k && {
                    let jobs: Vec<&gpuplan_core::RoundJob> = on.iter().map(|&i| &round.jobs[i]).collect();
                    may_group(round, &model, node.gpu_type.as_str(), &jobs)
                })
        };
        while !ok(&on) {
            let Some(pos) = on.iter().rposition(|&i| round.jobs[i].preemptible) else {
                break;
            };
            stopped.push(on.remove(pos));
        }
    }
    if stopped.is_empty() {
        return;
    }
    stopped.sort_unstable();
    for &i in &stopped {
        plan.allocations.remove(&round.jobs[i].id);
    }
    let names: Vec<&str> = stopped.iter().map(|&i| round.jobs[i].name.as_str()).collect();
    plan.add_note(format!(
        "stopped {}: their GPU's jobs may no longer share it",
        names.join(", ")
    ));
}

/// Under `even_nodes`, make each multi-node allocation the planner made
/// uneven even with the same GPU count where the free GPUs allow: on the
/// same nodes (4+2 → 3+3), else on another set of nodes of its type with
/// as many GPUs on each, current and emptiest nodes first; the job's value
/// is unchanged (one node or several, the same count). Otherwise cut it to
/// its smallest per-node count (4+2 → 2+2), or to nothing where that falls
/// below the job's minimum. A stage of its own rather than a rule in every
/// planner: only drivers whose workload manager allocates one GPU count
/// per node (Slurm) ask for it. Kept allocations are left alone (a pinned
/// job must not move).
pub fn even_out(round: &Round, plan: &mut Plan) {
    let mut used: std::collections::HashSet<GpuId> = plan
        .allocations
        .values()
        .flat_map(|a| a.gpus().iter().copied())
        .collect();
    let avoid = round.params.interference == Interference::Avoid;
    let mut notes = Vec::new();
    for j in &round.jobs {
        let Some(alloc) = plan.allocations.get(&j.id).cloned() else {
            continue;
        };
        let per = alloc.per_node();
        let k = per.iter().map(|&(_, k)| k).min().unwrap_or(0);
        if per.len() < 2 || per.iter().all(|&(_, c)| c == k) || alloc.same_gpus(&j.state.allocation) {
            continue;
        }
        for g in alloc.gpus() {
            used.remove(g);
        }
        // Nodes another multi-node job of the plan holds (the interference rule).
        let multi: std::collections::HashSet<NodeId> = if avoid {
            plan.allocations
                .iter()
                .filter(|(id, a)| **id != j.id && a.per_node().len() > 1)
                .flat_map(|(_, a)| a.per_node().into_iter().map(|(n, _)| n))
                .collect()
        } else {
            Default::default()
        };
        let before = per
            .iter()
            .map(|&(_, c)| c.to_string())
            .collect::<Vec<_>>()
            .join("+");
        let even = even_placement(round, &alloc, &used, &multi);
        let (next, note) = match even {
            Some(a) => {
                let counts = a.per_node();
                let after = counts
                    .iter()
                    .map(|&(_, c)| c.to_string())
                    .collect::<Vec<_>>()
                    .join("+");
                (a, format!("{} {before} placed {after}", j.name))
            }
            None => {
                let mut kept = Vec::new();
                for &(n, _) in &per {
                    kept.extend(
                        alloc
                            .gpus()
                            .iter()
                            .filter(|g| g.node == n)
                            .take(k as usize)
                            .copied(),
                    );
                }
                if (kept.len() as u32) < j.min_gpus.max(1) {
                    kept.clear();
                }
                let n = kept.len();
                (
                    Allocation::from_gpus(kept),
                    format!("{} {before} cut to {n}", j.name),
                )
            }
        };
        used.extend(next.gpus().iter().copied());
        notes.push(note);
        if next.is_empty() {
            plan.allocations.remove(&j.id);
        } else {
            plan.allocations.insert(j.id, next);
        }
    }
    if !notes.is_empty() {
        plan.add_note(format!("even_nodes: {}", notes.join(", ")));
    }
}

/// `alloc`'s GPU count on nodes of its type with the same count on each,
/// from GPUs not in `used` (its own are free to it): its own nodes first
/// (fewest nodes, then the nodes it holds most on), else any nodes outside
/// `multi` within `max_nodes_per_job`, emptiest first. Named GPUs, its own
/// first on each node.
fn even_placement(
    round: &Round,
    alloc: &Allocation,
    used: &std::collections::HashSet<GpuId>,
    multi: &std::collections::HashSet<NodeId>,
) -> Option<Allocation> {
    let total = alloc.num_gpus();
    let per = alloc.per_node();
    let ty = &round.cluster.nodes.get(per[0].0 .0 as usize)?.gpu_type;
    let free_on = |n: usize| -> Vec<GpuId> {
        let node = &round.cluster.nodes[n];
        let mut own: Vec<GpuId> = alloc
            .gpus()
            .iter()
            .copied()
            .filter(|g| g.node.0 as usize == n)
            .collect();
        let others: Vec<GpuId> = (0..node.gpus)
            .map(|i| GpuId::new(NodeId(n as u32), i))
            .filter(|g| !used.contains(g) && !own.contains(g) && !round.reserved.contains(g))
            .collect();
        own.extend(others);
        own
    };
    let mut order: Vec<usize> = (0..round.cluster.nodes.len())
        .filter(|&n| round.cluster.nodes[n].gpu_type == *ty && !multi.contains(&NodeId(n as u32)))
        .collect();
    let mine = |n: usize| per.iter().find(|(m, _)| m.0 as usize == n).map_or(0, |x| x.1);
    let free: Vec<usize> = (0..round.cluster.nodes.len()).map(|n| free_on(n).len()).collect();
    order.sort_by_key(|&n| (std::cmp::Reverse(mine(n)), std::cmp::Reverse(free[n]), n));
    let max_nodes = (round.params.max_nodes_per_job as usize).min(order.len());
    for nodes in 2..=max_nodes {
        if !total.is_multiple_of(nodes as u32) {
            continue;
        }
        let each = (total / nodes as u32) as usize;
        let chosen: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&n| free[n] >= each)
            .take(nodes)
            .collect();
        if chosen.len() == nodes {
            let gpus = chosen
                .iter()
                .flat_map(|&n| free_on(n).into_iter().take(each))
                .collect();
            return Some(Allocation::from_gpus(gpus));
        }
    }
    None
}

/// Under `params.type_blind`, the round as a planner that does not know
/// GPU types sees it (Pollux): each job keeps only its reference model, so
/// every planner values an allocation on any type as on that one. Here,
/// not in a planner, so any goodput planner can be run blind and `gpuplan
/// plan` on a dumped round plans as the simulator did.
pub fn blind(round: &mut Round) {
    for j in &mut round.jobs {
        j.blind();
    }
}

/// The change from `before` to `after`.
pub fn change(before: &Allocation, after: &Allocation) -> Change {
    match (before.is_empty(), after.is_empty()) {
        (true, true) => Change::Wait,
        (true, false) => Change::Start,
        (false, true) => Change::Stop,
        (false, false) if before.same_gpus(after) => Change::Keep,
        (false, false) if before.num_gpus() == after.num_gpus() => Change::Move,
        (false, false) => Change::Resize,
    }
}

/// Refuse, before anything runs, a planner that cannot run on a live
/// cluster (it reads the simulator's oracle); the message lists those that can.
pub fn check_live(planner: &dyn Planner) -> Result<(), PlanError> {
    if planner.traits().needs_oracle {
        return Err(PlanError::NeedsOracle {
            name: planner.name().to_string(),
            live: registry::live_names().into_iter().map(String::from).collect(),
        });
    }
    Ok(())
}

/// Refuse a placement (`params.placement`) the planner would ignore: only
/// fixed-size policies place through the stage; the message lists them.
pub fn check_placement(planner: &dyn Planner, params: &PolicyParams) -> Result<(), ParamError> {
    if params.placement == Placement::Default || planner.placement_stage() {
        return Ok(());
    }
    Err(ParamError::new(
        ParamField::Placement,
        format!(
            "'{}' applies to the planners that place through the placement stage ({}); {} places jobs itself (use default)",
            params.placement.name(),
            registry::placement_names().join(", "),
            planner.name()
        ),
    ))
}

/// Run one round through `planner`. `Err` means the round was malformed,
/// or the plan broke a rule the planner claims to honour (a planner bug,
/// never applied); a solver failure is a valid fallback plan instead.
pub fn run_round(planner: &mut dyn Planner, round: &Round, limits: &Limits) -> Result<Decision, PlanError> {
    // The round as given (GPUs named): the bound rule judges plans on it.
    let given: Cow<Round> = if round.jobs.iter().all(|j| j.state.allocation.is_bound()) {
        Cow::Borrowed(round)
    } else {
        let mut r = round.clone();
        bind_round(&mut r);
        Cow::Owned(r)
    };
    // Checked as given, before blinding: a placement that needs per-GPU
    // speeds needs them in the round, whether or not the planner sees them.
    let mut errs = given.check().err().unwrap_or_default();
    gpuplan_core::colocation::check_pinned_sharers(&given, &mut errs);
    if !errs.is_empty() {
        return Err(PlanError::Malformed(errs));
    }
    check_placement(planner, &given.params).map_err(|e| PlanError::Malformed(vec![e.to_string()]))?;
    // The round as the planner sees it.
    let mut round: Cow<Round> = Cow::Borrowed(&given);
    if round.params.type_blind == Sight::Hidden {
        blind(round.to_mut());
    }
    if round.params.variability_blind == Sight::Hidden {
        round.to_mut().variability = None;
    }
    let held = hold_min_runtime(&mut round);
    let mut plan = match crate::reserve::hide(&round) {
        None => {
            let mut plan = crate::run_planner(planner, &round, limits)?;
            bind_plan(&round, &mut plan);
            plan
        }
        // Every GPU reserved: no job of the round can run, nothing to solve.
        Some(h) if h.round.cluster.nodes.is_empty() => {
            let mut plan = Plan::new(planner.name(), gpuplan_core::PlanStatus::Optimal);
            plan.reason = Some("every GPU is reserved by jobs outside the round".into());
            // The one plan there is: its objective is the bound.
            plan.bound = Some(gpuplan_core::objective::evaluate(&round, &plan));
            plan.gap = Some(0.0);
            plan
        }
        Some(h) => {
            let mut plan = crate::run_planner(planner, &h.round, limits)?;
            bind_plan(&h.round, &mut plan);
            h.restore(&mut plan);
            plan
        }
    };
    unshare(&round, &mut plan);
    if round.params.even_nodes == NodeCounts::Even {
        even_out(&round, &mut plan);
    }
    crate::queues::enforce(&round, &mut plan);
    if let Err(v) = validate_under(&round, &plan, &rules(&planner.traits(), &round.params)) {
        return Err(PlanError::InvalidPlan {
            planner: plan.planner.clone(),
            violations: v,
        });
    }
    if !held.is_empty() {
        plan.add_note(format!("kept within their minimum run time: {}", held.join(", ")));
    }
    crate::bound::enforce(planner, &given, limits, &mut plan);
    Ok(Decision::new(&round, plan))
}

/// The minimum run time (Kueue's and KAI's): a running job that has held
/// its allocation for less than its `min_runtime_s` is pinned for the
/// round, as a non-preemptible job is, so no planner shrinks, moves or
/// preempts it and the validator holds every plan to that. Here, not in a
/// planner or a driver, so the simulator and the daemon keep the same
/// rule. A job that cannot keep its GPUs (a node gone, a rule broken) or
/// that shares a GPU is not held: pinning it would make the round
/// unplannable. Returns the held jobs' names.
pub fn hold_min_runtime(round: &mut Cow<Round>) -> Vec<String> {
    let allocs: Vec<&Allocation> = round.jobs.iter().map(|j| j.current()).collect();
    let shared = gpuplan_core::colocation::shared_gpus(&allocs);
    let held: Vec<usize> = (0..round.jobs.len())
        .filter(|&i| {
            let j = &round.jobs[i];
            j.preemptible
                && j.within_min_runtime(&round.params)
                && round.keep_problem(j).is_none()
                && !j.current().gpus().iter().any(|g| shared.contains_key(g))
        })
        .collect();
    let r = if held.is_empty() {
        return Vec::new();
    } else {
        round.to_mut()
    };
    held.into_iter()
        .map(|i| {
            r.jobs[i].preemptible = false;
            r.jobs[i].name.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::testutil::{job, round};
    use gpuplan_core::{GpuId, NodeId};

    #[test]
    fn changes_by_hand() {
        let a = Allocation::from_gpus(vec![GpuId::new(NodeId(0), 0), GpuId::new(NodeId(0), 1)]);
        let b = Allocation::from_gpus(vec![GpuId::new(NodeId(0), 2), GpuId::new(NodeId(0), 3)]);
        let e = Allocation::default();
        assert_eq!(change(&e, &e), Change::Wait);
        assert_eq!(change(&e, &a), Change::Start);
        assert_eq!(change(&a, &e), Change::Stop);
        assert_eq!(change(&a, &a), Change::Keep);
        assert_eq!(change(&a, &b), Change::Move);
        assert_eq!(
            change(&a, &Allocation::from_gpus(vec![GpuId::new(NodeId(0), 0)])),
            Change::Resize
        );
        assert!(!Change::Keep.restarts() && Change::Move.restarts());
    }

    /// The Slurm rule: a 6-GPU job planned 4+2 on 4-GPU nodes is refused
    /// by the validator under `even_nodes`; the pipeline's stage places it
    /// 3+3 where the GPUs are free, else cuts it to 2+2, or to nothing
    /// below the job's minimum.
    #[test]
    fn even_nodes_places_or_cuts_uneven_multi_node_plans() {
        let mut r = round(
            "2x4",
            600.0,
            vec![job(0, 6, 0.0, 0.0, &[]), job(1, 2, 0.0, 0.0, &[])],
        );
        r.params.even_nodes = NodeCounts::Even;
        r.jobs[0].min_gpus = 6;
        let g = |n, i| GpuId::new(NodeId(n), i);
        let four_two = Allocation::from_gpus(vec![g(0, 0), g(0, 1), g(0, 2), g(0, 3), g(1, 0), g(1, 1)]);
        let plan = Plan {
            planner: "hand".into(),
            allocations: [(JobId(0), four_two.clone())].into_iter().collect(),
            status: gpuplan_core::PlanStatus::Feasible,
            reason: None,
            bound: None,
            gap: None,
            solve_ms: 0.0,
            solver: None,
        };
        let e = gpuplan_core::validate(&r, &plan).unwrap_err();
        assert!(e.iter().any(|v| v.to_string().contains("4+2")), "{e:?}");
        // Node 1's other GPUs free: the same 6 GPUs, 3+3.
        let mut p = plan.clone();
        even_out(&r, &mut p);
        assert_eq!(
            p.gpus_of(JobId(0)).per_node(),
            vec![(NodeId(0), 3), (NodeId(1), 3)]
        );
        assert!(
            p.reason.as_deref().unwrap().contains("j0 4+2 placed 3+3"),
            "{:?}",
            p.reason
        );
        gpuplan_core::validate(&r, &p).unwrap();
        // j1 holds them: 2+2 is below the minimum 6, so nothing.
        let mut busy = plan.clone();
        busy.allocations
            .insert(JobId(1), Allocation::from_gpus(vec![g(1, 2), g(1, 3)]));
        let mut p = busy.clone();
        even_out(&r, &mut p);
        assert!(p.gpus_of(JobId(0)).is_empty(), "2+2 is below the minimum 6");
        assert!(
            p.reason.as_deref().unwrap().contains("j0 4+2 cut to 0"),
            "{:?}",
            p.reason
        );
        r.jobs[0].min_gpus = 1;
        let mut p = busy.clone();
        even_out(&r, &mut p);
        assert_eq!(p.gpus_of(JobId(0)).gpus(), &[g(0, 0), g(0, 1), g(1, 0), g(1, 1)]);
        gpuplan_core::validate(&r, &p).unwrap();
        // Off by default: the same plan is valid without the rule.
        r.params.even_nodes = NodeCounts::Any;
        gpuplan_core::validate(&r, &plan).unwrap();
    }

    /// Sia's valuation (`left_out_cost`, with `spare_waiting` and p = −0.5)
    /// on two waiting jobs and one 2-GPU node: each job's one GPU is worth
    /// 1 and two GPUs r ≈ 1.9 (its least configuration's multiple), so
    /// starting both costs 2·1^−0.5 = 2 while growing one and leaving the
    /// other out costs r^−0.5 + 1.1 ≈ 1.83: gpuplan-mip grows one. Off
    /// (Pollux's valuation, the same p), a job left out costs ε^−0.5 ≈ 32
    /// and both start. The one evaluation agrees with the planner.
    #[test]
    fn a_left_out_cost_lets_one_job_wait_while_another_grows() {
        use gpuplan_core::Libm;
        let jobs: Vec<gpuplan_core::RoundJob> = (0..2)
            .map(|id| {
                let mut j = crate::testutil::job(id, 1, 0.0);
                j.model = Some(crate::testutil::model());
                j.state.max_gpus_used = 1;
                j.state.restarts = 3;
                j
            })
            .collect();
        let mut r = crate::testutil::round("1x2", jobs, Interference::Avoid);
        r.params = registry::default_params("gpuplan-mip");
        r.params.p = -0.5;
        let fair = objective::fair_share(&r);
        let two = objective::speedup(&r.jobs[0], None, 1, 2, fair)
            / objective::speedup(&r.jobs[0], None, 1, 1, fair);
        assert!(two > 1.0 / (0.9f64 * 0.9), "two GPUs worth only {two}× one");
        let run = |r: &Round| {
            let d = run_round(
                registry::create("gpuplan-mip").unwrap().as_mut(),
                r,
                &Limits::default(),
            )
            .unwrap();
            gpuplan_core::validate(r, &d.plan).unwrap();
            let mut k: Vec<u32> = (0..2).map(|i| d.plan.gpus_of(JobId(i)).num_gpus()).collect();
            k.sort();
            (k, objective::evaluate(r, &d.plan))
        };
        assert_eq!(run(&r).0, vec![1, 1], "Pollux's valuation starts both");

        r.params.left_out_cost = 1.1;
        r.params.spare_waiting = gpuplan_core::RestartCharge::HoldersOnly;
        let (k, value) = run(&r);
        assert_eq!(k, vec![0, 2], "one grows, one waits");
        // By hand: the left-out job's term is λ = 1.1; the grown one's least
        // configuration (one GPU) is worth 1 and a waiting job pays no restart
        // factor (its 3 restarts would cost it (600 − 180)/(600 + 60) otherwise).
        let v0 = objective::left_out_value(&r.params);
        assert!(((v0 + objective::EPSILON).libm_pow(-0.5) - 1.1).abs() < 1e-12);
        let one = Allocation::from_counts(&[(NodeId(0), 1)]);
        assert!((objective::job_value(&r.jobs[0], &r.cluster, &one, fair, &r.params) - 1.0).abs() < 1e-12);
        let both_start = (2.0 * (1.0 + objective::EPSILON).libm_pow(-0.5) / 2.0).libm_pow(-2.0);
        let expect = ((((two + objective::EPSILON).libm_pow(-0.5)) + 1.1) / 2.0).libm_pow(-2.0);
        assert!(
            (value - expect).abs() < 1e-9 && value > both_start,
            "{value} {expect} {both_start}"
        );
    }

    /// Type-blind planning (Pollux's): to the planner an a100 and a t4
    /// allocation of one shape are worth the same, the t4's worth; type-aware,
    /// the a100 is worth more, and pollux-ga takes it.
    #[test]
    fn a_type_blind_planner_values_every_type_alike() {
        let mut j = crate::testutil::job(0, 2, 0.0);
        j.model = Some(crate::testutil::model());
        j.model_type = Some("t4".into());
        j.max_gpus = 2;
        let mut r = crate::testutil::round("1x4:t4+1x4:a100", vec![j], Interference::Avoid);
        let value_on = |r: &Round, node: u32| {
            let a = Allocation::from_counts(&[(NodeId(node), 2)]);
            objective::job_value(&r.jobs[0], &r.cluster, &a, objective::fair_share(r), &r.params)
        };
        let (t4, a100) = (value_on(&r, 0), value_on(&r, 1));
        assert!(a100 > 1.5 * t4, "aware: t4 {t4}, a100 {a100}");
        let aware = run_round(
            registry::create("pollux-ga").unwrap().as_mut(),
            &r,
            &Limits::default(),
        )
        .unwrap();
        assert!(aware
            .plan
            .gpus_of(JobId(0))
            .gpus()
            .iter()
            .all(|g| g.node == NodeId(1)));

        r.params.type_blind = Sight::Hidden;
        let mut seen = r.clone();
        blind(&mut seen);
        assert_eq!(value_on(&seen, 0), value_on(&seen, 1));
        assert_eq!(value_on(&seen, 0), t4);
        // The driver's round keeps its per-type models; the plan is valid.
        let d = run_round(
            registry::create("pollux-ga").unwrap().as_mut(),
            &r,
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(r.jobs[0].model_type.as_ref().map(|t| t.as_str()), Some("t4"));
        assert!(!d.plan.gpus_of(JobId(0)).is_empty());
        gpuplan_core::validate(&r, &d.plan).unwrap();
    }

    /// The minimum run time (issue 52): tiresias preempts a job past its
    /// first queue's threshold for a new one; within its minimum run time
    /// it is kept, by the round's default and by its own, and said so; past
    /// it, or with its run time unknown, it is preempted as before.
    #[test]
    fn a_job_within_its_minimum_run_time_is_not_preempted() {
        let long = 20.0 * 3600.0;
        let mut r = round(
            "1x1",
            long,
            vec![job(0, 1, 0.0, long, &[(0, 1)]), job(1, 1, 10.0, 0.0, &[])],
        );
        let run = |r: &Round| {
            let mut p = registry::create("tiresias").unwrap();
            let d = run_round(p.as_mut(), r, &Limits::default()).unwrap();
            gpuplan_core::validate(r, &d.plan).unwrap();
            d
        };
        let d = run(&r);
        assert!(
            d.plan.gpus_of(JobId(0)).is_empty(),
            "tiresias preempts the long job"
        );
        assert_eq!(d.plan.gpus_of(JobId(1)).num_gpus(), 1);

        r.params.min_runtime_s = 600.0;
        let d = run(&r);
        assert!(d.plan.gpus_of(JobId(0)).is_empty(), "run time unknown: not held");
        r.jobs[0].state.run_s = Some(599.0);
        let d = run(&r);
        assert_eq!(d.plan.gpus_of(JobId(0)).num_gpus(), 1, "held");
        assert!(d.plan.gpus_of(JobId(1)).is_empty());
        assert!(
            d.plan
                .reason
                .as_deref()
                .unwrap_or("")
                .contains("minimum run time: j0"),
            "{:?}",
            d.plan.reason
        );
        r.jobs[0].state.run_s = Some(600.0);
        assert!(run(&r).plan.gpus_of(JobId(0)).is_empty(), "past it: preempted");
        // The job's own figure wins over the round's.
        r.jobs[0].min_runtime_s = Some(3600.0);
        assert_eq!(run(&r).plan.gpus_of(JobId(0)).num_gpus(), 1);
        r.jobs[0].min_runtime_s = Some(0.0);
        r.jobs[0].state.run_s = Some(1.0);
        assert!(run(&r).plan.gpus_of(JobId(0)).is_empty(), "its own 0: none");
    }

    #[test]
    fn oracle_planners_are_refused_live_with_the_list() {
        let p = registry::create("srtf").unwrap();
        let e = check_live(p.as_ref()).unwrap_err().to_string();
        assert!(
            e.contains("srtf") && e.contains("tiresias") && !e.contains("optimus,"),
            "{e}"
        );
        assert!(check_live(registry::create("tiresias").unwrap().as_ref()).is_ok());
    }

    /// A kept pair whose memory no longer fits (issue 31, item 4): every
    /// planner's plan comes out valid, the later preemptible job stopped
    /// where the planner kept both, with the reason.
    #[test]
    fn kept_sharers_that_no_longer_fit_are_split() {
        let g0 = Allocation::from_gpus(vec![GpuId::new(NodeId(0), 0)]);
        let mut r = round(
            "1x4",
            0.0,
            vec![job(0, 1, 0.0, 0.0, &[]), job(1, 1, 0.0, 0.0, &[])],
        );
        r.params.sharing = 2;
        for j in &mut r.jobs {
            j.state.allocation = g0.clone();
            j.max_gpus = 1;
            j.mem_gib = Some(12.0);
        }
        r.check().unwrap();
        for name in registry::names()
            .into_iter()
            .filter(|n| !registry::create(n).unwrap().traits().needs_oracle)
        {
            let d = run_round(registry::create(name).unwrap().as_mut(), &r, &Limits::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            gpuplan_core::validate(&r, &d.plan).unwrap();
        }
        let mut keep = Plan::new("hand", gpuplan_core::PlanStatus::Feasible);
        keep.allocations.insert(JobId(0), g0.clone());
        keep.allocations.insert(JobId(1), g0.clone());
        unshare(&r, &mut keep);
        assert_eq!(keep.gpus_of(JobId(0)), &g0);
        assert!(keep.gpus_of(JobId(1)).is_empty());
        assert!(keep.reason.unwrap().contains("stopped j1"));
    }

    /// Three 6-GPU jobs on 3×4: a baseline planner may put two multi-node
    /// jobs on one node; the pipeline holds it to the rules it honours, so
    /// every driver applies the plan (the daemon once threw it away).
    #[test]
    fn baselines_are_held_to_their_own_rules() {
        let mut r = round(
            "3x4",
            0.0,
            vec![job(0, 6, 0.0, 0.0, &[]), job(1, 6, 0.0, 0.0, &[])],
        );
        r.params.interference = Interference::Avoid;
        let mut p = registry::create("tiresias").unwrap();
        let d = run_round(p.as_mut(), &r, &Limits::default()).unwrap();
        assert_eq!(d.plan.allocations.len(), 2);
        assert!(d.plan.allocations.values().all(Allocation::is_bound));
        assert!(d.diff.iter().all(|c| c.change == Change::Start));
    }

    /// The bound rule (`crate::bound`), through the pipeline.
    mod bound_rule {
        use super::super::*;
        use crate::testutil::{job, model, round};
        use crate::{registry, Limits, PlanError};
        use gpuplan_core::Interference;
        use gpuplan_core::{Plan, PlanStatus, Round};

        /// Greedy's plan, claimed optimal under a bound of `bound`.
        struct Claims {
            bound: Option<f64>,
        }

        impl Planner for Claims {
            fn name(&self) -> &str {
                "claims"
            }

            fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
                let mut p = registry::create("greedy")?.plan(round, limits)?;
                p.planner = "claims".into();
                p.status = PlanStatus::Optimal;
                p.bound = self.bound;
                Ok(p)
            }
        }

        fn two_jobs() -> Round {
            let jobs = (0..2)
                .map(|id| {
                    let mut j = job(id, 2, 0.0);
                    j.model = Some(model());
                    j
                })
                .collect();
            round("2x4", jobs, Interference::Avoid)
        }

        /// A bound below the plan's own true objective, or none at all beside
        /// `optimal`, is not reported: `feasible`, with the reason.
        #[test]
        fn false_or_missing_bounds_lose_optimal() {
            let r = two_jobs();
            let d = run_round(&mut Claims { bound: Some(1e-9) }, &r, &Limits::default()).unwrap();
            assert_eq!(
                (d.plan.status, d.plan.bound, d.plan.gap),
                (PlanStatus::Feasible, None, None)
            );
            let why = d.plan.reason.unwrap();
            assert!(
                why.contains("no proven bound: its bound 0.000000 is below the plan's true objective"),
                "{why}"
            );
            let d = run_round(&mut Claims { bound: None }, &r, &Limits::default()).unwrap();
            assert_eq!(d.plan.status, PlanStatus::Feasible);
            assert!(d
                .plan
                .reason
                .unwrap()
                .contains("no bound on the round's objective"));
            // A true bound stays, but optimal only within the gap of it.
            let d = run_round(&mut Claims { bound: Some(1e9) }, &r, &Limits::default()).unwrap();
            assert_eq!((d.plan.status, d.plan.bound), (PlanStatus::Feasible, Some(1e9)));
            assert!(d
                .plan
                .reason
                .as_deref()
                .unwrap()
                .contains("more than the gap allows"));
            let obj = d.objective(&r);
            let d = run_round(&mut Claims { bound: Some(obj) }, &r, &Limits::default()).unwrap();
            assert_eq!((d.plan.status, d.plan.bound), (PlanStatus::Optimal, Some(obj)));
        }

        /// A model that leaves out what the round has bounds nothing: a
        /// planner that never shares on a sharing round, a blind model, binned
        /// per-GPU speeds. mip-exact keeps its bound where its model is exact.
        #[test]
        fn models_that_leave_out_a_feature_report_no_bound() {
            let mut r = two_jobs();
            let lim = Limits::default();
            let d = run_round(registry::create("mip-exact").unwrap().as_mut(), &r, &lim).unwrap();
            assert_eq!(d.plan.status, PlanStatus::Optimal);
            assert!(d.plan.bound.unwrap() >= d.objective(&r) - 1e-9);
            r.params.sharing = 2;
            let d = run_round(&mut Claims { bound: Some(1e9) }, &r, &lim).unwrap();
            assert!(d.plan.reason.unwrap().contains("it plans without sharing"));
            r.params.sharing = 1;
            r.params.type_blind = gpuplan_core::Sight::Hidden;
            let d = run_round(registry::create("mip-exact").unwrap().as_mut(), &r, &lim).unwrap();
            assert_eq!((d.plan.status, d.plan.bound), (PlanStatus::Feasible, None));
            assert!(d.plan.reason.unwrap().contains("type-blind"));
        }
    }
}
