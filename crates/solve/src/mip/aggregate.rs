//! `mip-aggregate`: the scalable formulation. One binary per (job, shape)
//! over shapes that always pack (powers of two within a node, whole nodes
//! beyond; whole nodes for a job with no such size) plus "keep", with aggregate capacity rows; the shared packer
//! then places the choices, keeping jobs on their current nodes where it
//! can. No node-level variables, so its size is linear in jobs.
//!
//! With `params.sharing` ≥ 2 it also offers one binary per admissible
//! group of 2 to `params.sharing` jobs on `g` GPUs of one node (a packable
//! single-node shape), valued and enumerated as `mip-exact` does
//! ([`crate::pairs`]); the group takes its `g` GPUs once, and the packer
//! places it as one unit.
//!
//! With per-GPU variability each type's nodes are split into at most
//! [`MAX_GROUPS_PER_TYPE`](crate::pools::MAX_GROUPS_PER_TYPE) speed groups
//! ([`Pools`]): a choice is made in one group (valued at its slowest node
//! for the job's class) or, for a multi-node choice, over the whole type
//! (valued at the type's slowest), and the packer keeps it there.

use gpuplan_core::{Plan, PlanStatus, Round};

use super::dual::count_bound;
use super::MIP_TRAITS;
use crate::candidates::{
    bound_to_mean, charge, job_options, kept_charge, type_capacity, Choice, Pick, Sense, Shapes, TypeCapacity,
};
use crate::fallback::{as_fallback, set_gap_cached};
use crate::pairs::{group_options, kept_groups, overlapping_now, GroupOpt, Sharer};
use crate::placement::pack_grouped;
use crate::planners::greedy::{greedy_choices_with, plan_from_choices};
use crate::pools::{in_pools, Cands, Pools, Speeds};
use crate::solver::{solve, Model, Solver};
use crate::speedup::evaluate_cached;
use crate::speedup::SpeedupCache;
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

/// What the aggregate model decided, before the packer places it.
#[derive(Debug, Clone)]
pub struct AggregateSolution {
    /// Per job that runs alone, its choice and GPU type.
    pub choices: Vec<Pick>,
    /// The chosen sharing groups (params.sharing ≥ 2; their jobs are in no
    /// choice): the packer places each as one unit.
    pub pairs: Vec<GroupOpt>,
    /// The model's status.
    pub status: PlanStatus,
    /// The model's bound on the generalized mean.
    pub bound: Option<f64>,
    /// Per-job notes (jobs that cannot run, and why).
    pub notes: Vec<String>,
    /// The speedup tables, reused to evaluate the plan.
    pub caches: Vec<SpeedupCache>,
    /// Per node, its speed group ([`Pick::group`]); empty when no GPU
    /// type is split into groups.
    pub node_group: Vec<usize>,
    /// The model's objective at this solution, as a power mean of the
    /// model's own values (what tests hold against the true objective).
    pub value: f64,
}

/// Everything the model is built from: GPU types in `Cluster::types()`
/// order with their capacity, each node's type, and per job its
/// candidates, its "nothing" term and whether it is pinned.
/// A planner that values shapes its own way (`sia`) rewrites `cands`'
/// values, `none_term` and `sense` before solving ([`solve_prepared`]).
pub(crate) struct Prep {
    types: Vec<TypeCapacity>,
    node_type: Vec<usize>,
    pools: Pools,
    pub(crate) cands: Vec<Cands>,
    pub(crate) none_term: Vec<f64>,
    /// Each job's queue share, which weighs its terms (`JobOptions::share`).
    pub(crate) share: Vec<f64>,
    pinned: Vec<bool>,
    pub(crate) sense: Sense,
    /// Sharing group options, pairs and larger ([`add_pairs`]); empty unless the planner shares, so
    /// a planner that revalues `cands` (`sia`) never shares.
    pairs: Vec<GroupOpt>,
}

/// How one job enters the model: fixed to one option (`None` = nothing),
/// or free over the allowed candidates (indices into its list, and
/// whether "nothing" is allowed).
#[derive(Debug, Clone)]
enum Slot {
    Fixed(Option<usize>),
    Free(Vec<usize>, bool),
}

/// Each job's packable candidates valued as Pollux does, the per-job notes
/// and the speedup tables the values came from.
pub(crate) fn prepare(round: &Round, speeds: Speeds) -> (Prep, Vec<String>, Vec<SpeedupCache>) {
    let mut caches = SpeedupCache::per_job(round, |_| 2);
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
    let types = type_capacity(&round.cluster);
    let node_type = round.cluster.type_index();
    let pools = Pools::new(round, speeds);
    let mut all = Vec::with_capacity(opts.len());
    for (j, o) in opts.iter().enumerate() {
        // (choice, type, value): keep, then packable shapes per type.
        let mut cands: Vec<(Choice, Option<usize>, f64)> = Vec::new();
        for c in &o.candidates {
            match c.choice {
                Choice::Keep => cands.push((Choice::Keep, None, c.value)),
                // Each candidate carries its type's value (`job_options`).
                Choice::Config { nodes: 1, gpus } => {
                    let (ty, tt) = (c.ty, &types[c.ty]);
                    if gpus.is_power_of_two() && gpus <= tt.max_node {
                        cands.push((Choice::Config { nodes: 1, gpus }, Some(ty), c.value));
                    }
                }
                Choice::Config { gpus, .. } => {
                    let (ty, tt) = (c.ty, &types[c.ty]);
                    let n = gpus / tt.max_node.max(1);
                    if gpus % tt.max_node.max(1) == 0 && n >= 2 && n <= maxn.min(tt.nodes) {
                        cands.push((Choice::Config { nodes: n, gpus }, Some(ty), c.value));
                    }
                }
            }
        }
        // No packable size at all (a rigid 12-GPU job on 8-GPU nodes): whole
        // nodes of a type, of which the job uses its GPUs (`charge`).
        if !cands.iter().any(|x| x.0 != Choice::Keep) {
            for c in &o.candidates {
                let Choice::Config { nodes, gpus } = c.choice else {
                    continue;
                };
                let (ty, tt) = (c.ty, &types[c.ty]);
                let n = gpus.div_ceil(tt.max_node.max(1));
                if (n == 1) == (nodes == 1) && n <= tt.nodes && (n == 1 || n <= maxn) {
                    cands.push((Choice::Config { nodes: n, gpus }, Some(ty), c.value));
                }
            }
        }
        let mut cands = in_pools(round, &pools, j, cands);
        // Per pool and shape kind, drop a count whose value does not beat a
        // smaller count of the same kind: the smaller one always packs where
        // the larger did, so the model's optimum is unchanged.
        let mut best: std::collections::HashMap<(Option<usize>, Option<usize>, bool), f64> =
            std::collections::HashMap::new();
        cands.sort_by_key(|&(c, ty, _, pool)| match c {
            Choice::Keep => (0, ty, pool, 0),
            Choice::Config { gpus, .. } => (1, ty, pool, gpus),
        });
        cands.retain(|&(c, ty, v, pool)| match c {
            Choice::Keep => true,
            Choice::Config { nodes, .. } => {
                let b = best.entry((ty, pool, nodes > 1)).or_insert(f64::NEG_INFINITY);
                let keep = v > *b + 1e-12;
                *b = b.max(v);
                keep
            }
        });
        all.push(cands);
    }
    let prep = Prep {
        types,
        node_type,
        pools,
        none_term: opts
            .iter()
            .map(|o| sense.weighted(o.none_value, o.share))
            .collect(),
        share: opts.iter().map(|o| o.share).collect(),
        pinned: opts.iter().map(|o| o.pinned).collect(),
        cands: all,
        sense,
        pairs: Vec::new(),
    };
    (prep, notes, caches)
}

/// With `params.sharing` ≥ 2, the group options (2 to k jobs) over this
/// model's candidates: packable single-node shapes (a power of two within a
/// node) at their values, and the groups that share now and may stay at
/// their keep values, enumerated and valued by the rules `mip-exact` uses.
fn add_pairs(round: &Round, prep: &mut Prep, notes: &mut Vec<String>) {
    // Pairs are valued and placed per GPU type: with speed groups they
    // are not offered (a limitation, docs/heterogeneity.md).
    if round.params.sharing < 2 || prep.pools.any_split() {
        return;
    }
    let sharers: Vec<Sharer> = prep
        .cands
        .iter()
        .zip(&prep.pinned)
        .map(|(c, &pinned)| {
            if pinned {
                return Sharer::default();
            }
            Sharer {
                singles: c
                    .iter()
                    .filter_map(|&(ch, ty, v, _)| match (ch, ty) {
                        (Choice::Config { nodes: 1, gpus }, Some(ty))
                            if gpus.is_power_of_two() && gpus <= prep.types[ty].max_node =>
                        {
                            Some((ty, gpus, v))
                        }
                        _ => None,
                    })
                    .collect(),
                keep: c.iter().find(|o| o.0 == Choice::Keep).map(|o| o.2),
            }
        })
        .collect();
    let kind_type: Vec<usize> = (0..prep.types.len()).collect();
    let mut pairs = kept_groups(round, &prep.node_type, &kind_type, &sharers);
    pairs.extend(group_options(round, &prep.types, &kind_type, &sharers, notes));
    prep.pairs = pairs;
}

/// Per job, its option binaries and the candidate each one picks.
type JobVars = Vec<Vec<(good_lp::Variable, usize)>>;

/// Build the model over the slots; the pair binaries come back in
/// `Prep::pairs` order; `start` is a starting choice per job
/// (`None` = nothing), else keep where possible.
fn build(
    round: &Round,
    prep: &Prep,
    slots: &[Slot],
    start: Option<&[Option<usize>]>,
) -> (Model, JobVars, Vec<good_lp::Variable>) {
    let Prep {
        types,
        node_type: _,
        pools,
        cands,
        none_term,
        share,
        pinned,
        sense,
        pairs,
    } = prep;
    let sense = *sense;
    let n_nodes = round.cluster.num_nodes();
    let (mut m, t) = Model::for_sense(sense);
    // Group options: one binary each, in every member's choice row and value.
    // Without a given start, a group that shares now starts kept, and its
    // jobs start in no option of their own.
    let mut joint: Vec<Vec<(good_lp::Variable, f64)>> = vec![Vec::new(); slots.len()];
    let mut paired = vec![false; slots.len()];
    let y: Vec<good_lp::Variable> = pairs.iter().map(|_| m.binary()).collect();
    for (p, &v) in pairs.iter().zip(&y) {
        for (&j, &val) in p.members.iter().zip(&p.values) {
            joint[j].push((v, val));
        }
        let on = start.is_none() && p.keep && !p.members.iter().any(|&j| paired[j]);
        if on {
            for &j in &p.members {
                paired[j] = true;
            }
        }
        m.initial.push((v, if on { 1.0 } else { 0.0 }));
    }
    let mut z: Vec<Vec<(good_lp::Variable, usize)>> = Vec::with_capacity(slots.len());
    let kept = kept_charge(round);
    // Rows per pool (the GPU types without variability); a whole-type
    // choice's nodes add to `spread`, split over the type's pools below.
    let node_type = &pools.of_node;
    let mut gpu_sum: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); pools.cap.len()];
    let mut whole_nodes: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); pools.cap.len()];
    let mut spread: Vec<Option<good_lp::Expression>> = vec![None; types.len()];
    let mut node_kept: Vec<Vec<good_lp::Variable>> = vec![Vec::new(); n_nodes];
    // Nodes that a fixed "keep" occupies for sure.
    let mut node_fixed = vec![false; n_nodes];
    let mut objective = good_lp::Expression::from(0.0);
    // Each job's GPUs and "nothing", for the queue rows.
    let mut q_gpus: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); slots.len()];
    let mut q_none: Vec<good_lp::Expression> = vec![good_lp::Expression::from(0.0); slots.len()];
    let mut q_pinned = vec![0u32; slots.len()];
    let gpus_of = |j: usize, choice: Choice| match choice {
        Choice::Keep => round.jobs[j].current().num_gpus(),
        Choice::Config { gpus, .. } => gpus,
    };
    for (j, slot) in slots.iter().enumerate() {
        let c = &cands[j];
        if pinned[j] {
            q_pinned[j] = round.jobs[j].current().num_gpus();
        }
        // Resources of one option: GPUs per type, whole nodes, kept nodes.
        let mut value = good_lp::Expression::from(0.0);
        let mut vars = Vec::new();
        match slot {
            Slot::Fixed(pick) => {
                match pick {
                    Some(i) => q_gpus[j] = good_lp::Expression::from(f64::from(gpus_of(j, c[*i].0))),
                    None => q_none[j] = good_lp::Expression::from(1.0),
                }
                let term = pick.map_or(none_term[j], |i| sense.weighted(c[i].2, share[j]));
                value += term;
                m.offset += term;
                match pick.map(|i| c[i]) {
                    Some((Choice::Keep, ..)) => {
                        for (n, k) in kept[j].per_node() {
                            if (n.0 as usize) < n_nodes {
                                node_fixed[n.0 as usize] = true;
                                gpu_sum[node_type[n.0 as usize]] += k as f64;
                            }
                        }
                    }
                    Some((Choice::Config { nodes, gpus }, Some(ty), _, at)) => {
                        let (g, w) = charge(nodes, gpus, types[ty].max_node);
                        match at {
                            Some(p) => {
                                gpu_sum[p] += g as f64;
                                whole_nodes[p] += w as f64;
                            }
                            None => *spread[ty].get_or_insert_with(Default::default) += w as f64,
                        }
                    }
                    _ => {}
                }
            }
            Slot::Free(allowed, none_ok) => {
                let mut pick = good_lp::Expression::from(0.0);
                let first = start.map(|s| s[j]);
                for &i in allowed {
                    let v = m.binary();
                    vars.push((v, i));
                    pick += v;
                    q_gpus[j] += f64::from(gpus_of(j, c[i].0)) * v;
                    value += sense.weighted(c[i].2, share[j]) * v;
                    let on = match first {
                        Some(f) => f == Some(i),
                        None => c[i].0 == Choice::Keep && !paired[j],
                    };
                    m.initial.push((v, if on { 1.0 } else { 0.0 }));
                    match (c[i].0, c[i].1, c[i].3) {
                        (Choice::Keep, ..) => {
                            for (n, k) in kept[j].per_node() {
                                if let Some(list) = node_kept.get_mut(n.0 as usize) {
                                    list.push(v);
                                    gpu_sum[node_type[n.0 as usize]] += k as f64 * v;
                                }
                            }
                        }
                        (Choice::Config { nodes, gpus }, Some(ty), Some(p)) => {
                            let (g, w) = charge(nodes, gpus, types[ty].max_node);
                            gpu_sum[p] += g as f64 * v;
                            if w > 0 {
                                whole_nodes[p] += w as f64 * v;
                            }
                        }
                        (Choice::Config { nodes, gpus }, Some(ty), None) => {
                            let (_, w) = charge(nodes, gpus, types[ty].max_node);
                            *spread[ty].get_or_insert_with(Default::default) += w as f64 * v;
                        }
                        (Choice::Config { .. }, None, _) => {}
                    }
                }
                if *none_ok && !pinned[j] {
                    // An explicit "nothing" binary keeps constants out of the
                    // objective, so the solver's relative gap is measured on
                    // the true Σ of terms.
                    let none = m.binary();
                    value += none_term[j] * none;
                    let on = match first {
                        Some(f) => f.is_none(),
                        None => !paired[j] && !c.iter().any(|o| o.0 == Choice::Keep),
                    };
                    m.initial.push((none, if on { 1.0 } else { 0.0 }));
                    pick += none;
                    q_none[j] = good_lp::Expression::from(none);
                }
                for &(v, val) in &joint[j] {
                    pick += v;
                    value += sense.weighted(val, share[j]) * v;
                }
                m.constraints.push(pick.eq(1.0));
            }
        }
        match t {
            Some(t) => m.constraints.push(good_lp::Expression::from(t).leq(value)),
            None => objective += value,
        }
        z.push(vars);
    }
    // A group takes its GPUs once: a moving one `k` GPUs of its type (a
    // packable size), a kept one its own GPUs, which also keep its node from
    // multi-node jobs, as a kept job's do.
    for (p, &v) in pairs.iter().zip(&y) {
        if p.keep {
            for (n, k) in round.jobs[p.members[0]].current().per_node() {
                if let Some(list) = node_kept.get_mut(n.0 as usize) {
                    list.push(v);
                    gpu_sum[node_type[n.0 as usize]] += k as f64 * v;
                }
            }
        } else {
            gpu_sum[p.ty] += p.gpus as f64 * v;
        }
    }
    for (p, &v) in pairs.iter().zip(&y) {
        for &j in &p.members {
            if let Some(g) = q_gpus.get_mut(j) {
                *g += f64::from(p.gpus) * v;
            }
        }
    }
    if let Some(tree) = gpuplan_core::queue::QueueTree::new(round) {
        super::queue_rows(round, &tree, &mut m, &q_gpus, &q_none, &q_pinned);
    }
    // Two jobs that share GPUs now cannot both keep them alone: one keeps
    // (the other moves or stops), or both keep them as a pair.
    let overlaps = if round.params.sharing >= 2 {
        overlapping_now(round)
    } else {
        Vec::new()
    };
    for (a, b) in overlaps {
        let keep_var = |j: usize| {
            z[j].iter()
                .find(|&&(_, i)| cands[j][i].0 == Choice::Keep)
                .map(|&(v, _)| v)
        };
        if let (Some(ka), Some(kb)) = (keep_var(a), keep_var(b)) {
            m.constraints.push((good_lp::Expression::from(ka) + kb).leq(1.0));
        }
    }
    // Multi-node jobs need whole nodes of their type that hold no kept job.
    for node in 0..n_nodes {
        if node_fixed[node] {
            whole_nodes[node_type[node]] += 1.0;
            continue;
        }
        let list = &node_kept[node];
        if list.is_empty() {
            continue;
        }
        let u = m.binary();
        for &v in list {
            m.constraints.push(good_lp::Expression::from(v).leq(u));
        }
        whole_nodes[node_type[node]] += u;
        m.initial.push((u, 1.0));
    }
    // Whole-type choices: their nodes split over the type's pools by
    // integer counts, each charged to its pool's GPU and node rows.
    for (ty, nodes) in spread.into_iter().enumerate() {
        let Some(nodes) = nodes else { continue };
        let mut split = good_lp::Expression::from(0.0);
        for p in pools.of_type(ty) {
            let y = m.integer(0.0, f64::from(pools.cap[p].nodes));
            split += y;
            gpu_sum[p] += f64::from(types[ty].max_node) * y;
            whole_nodes[p] += y;
        }
        m.constraints.push(split.eq(nodes));
    }
    for (p, cap) in pools.cap.iter().enumerate() {
        m.constraints.push(gpu_sum[p].clone().leq(cap.gpus as f64));
        m.constraints.push(whole_nodes[p].clone().leq(cap.nodes as f64));
    }
    match t {
        Some(t) => {
            m.objective = t.into();
            m.minimise = false;
            m.offset = 0.0;
            // Warm start for t: the smallest kept value.
            let v0 = cands
                .iter()
                .zip(none_term)
                .map(|(c, &nt)| {
                    c.iter()
                        .find(|o| o.0 == Choice::Keep)
                        .map_or(nt, |o| sense.term(o.2))
                })
                .fold(f64::INFINITY, f64::min);
            m.initial.push((t, if v0.is_finite() { v0 } else { 0.0 }));
        }
        None => m.objective = objective,
    }
    (m, z, y)
}

/// Where an option of the relaxation takes its GPUs and nodes.
#[derive(Debug, Clone)]
enum At {
    /// (pool, GPUs, node charge) per pool it uses: one for a shape, one
    /// per pool of its nodes for "keep".
    Pools(Vec<(usize, f64, f64)>),
    /// A whole-type choice on a split type: the model may split its nodes
    /// over the type's pools any way, so at given prices it costs what
    /// the cheapest pool charges.
    Type(usize),
}

/// One option of the relaxation: its score, GPUs and node charge in all,
/// whether it keeps its nodes, and where its resources are.
#[derive(Debug, Clone)]
struct RelaxOpt {
    score: f64,
    gpus: f64,
    nodes: f64,
    kept: bool,
    at: At,
}

/// The Lagrangian relaxation of the aggregate model, solved by its own
/// greedy rule: prices λ per GPU and μ per whole node, per pool (the GPU
/// types, or with variability their speed groups, [`Pools`]), make
/// every job pick its best option alone. `L(λ, μ)` bounds the model (a kept
/// job is charged an equal share of each of its nodes, which never exceeds
/// the node's true cost), and options whose loss against that bound exceeds
/// the gap to a feasible incumbent cannot be in a better solution: only
/// the few jobs that keep a real choice go to the solver. Scores are in
/// maximisation form (−term for p < 0).
///
/// It prices single options only: a group option takes several jobs' rows
/// at once, and jobs that share now exclude each other's keeps,
/// so with either ([`add_pairs`], `params.sharing` ≥ 2) the reduction is
/// skipped and the whole model goes to the solver.
struct Relax {
    /// Per job: its options per candidate, then "nothing".
    opts: Vec<Vec<RelaxOpt>>,
    none_ok: Vec<bool>,
    /// Per pool: GPUs, nodes, GPUs charged per whole node (its type's
    /// largest node).
    gpus: Vec<f64>,
    nodes: Vec<f64>,
    per_node: Vec<f64>,
    /// Per node: its pool.
    node_pool: Vec<usize>,
    /// Per type: its pools.
    type_pools: Vec<Vec<usize>>,
}

impl Relax {
    /// `None` when a kept allocation spans types (it has no one price).
    fn new(round: &Round, prep: &Prep) -> Option<Self> {
        let sgn = if matches!(prep.sense, Sense::MinPower(_)) {
            -1.0
        } else {
            1.0
        };
        let pools = &prep.pools;
        let n_nodes = round.cluster.num_nodes();
        let mut sharers = vec![0u32; n_nodes];
        for (j, c) in prep.cands.iter().enumerate() {
            if c.iter().any(|o| o.0 == Choice::Keep) {
                for (n, _) in round.jobs[j].current().per_node() {
                    if let Some(s) = sharers.get_mut(n.0 as usize) {
                        *s += 1;
                    }
                }
            }
        }
        let mut opts = Vec::with_capacity(prep.cands.len());
        for (j, c) in prep.cands.iter().enumerate() {
            let mut v: Vec<RelaxOpt> = Vec::with_capacity(c.len() + 1);
            for &(ch, ty, val, at) in c {
                let score = sgn * prep.sense.weighted(val, prep.share[j]);
                match ch {
                    Choice::Keep => {
                        let (mut g, mut share) = (0.0, 0.0);
                        let mut kty = None;
                        let mut uses: Vec<(usize, f64, f64)> = Vec::new();
                        for (n, k) in round.jobs[j].current().per_node() {
                            if let Some(&s) = sharers.get(n.0 as usize) {
                                g += k as f64;
                                share += 1.0 / s as f64;
                                let t = prep.node_type[n.0 as usize];
                                if kty.is_some_and(|x| x != t) {
                                    return None;
                                }
                                kty = Some(t);
                                let p = pools.of_node[n.0 as usize];
                                match uses.iter_mut().find(|u| u.0 == p) {
                                    Some(u) => {
                                        u.1 += k as f64;
                                        u.2 += 1.0 / s as f64;
                                    }
                                    None => uses.push((p, k as f64, 1.0 / s as f64)),
                                }
                            }
                        }
                        if uses.is_empty() {
                            uses.push((0, 0.0, 0.0));
                        }
                        v.push(RelaxOpt {
                            score,
                            gpus: g,
                            nodes: share,
                            kept: true,
                            at: At::Pools(uses),
                        });
                    }
                    Choice::Config { nodes, gpus } => {
                        let t = ty.unwrap_or(0);
                        let (g, w) = charge(nodes, gpus, prep.types[t].max_node);
                        let (g, w) = (g as f64, w as f64);
                        let at = match (at, ty) {
                            (None, Some(t)) => At::Type(t),
                            (p, _) => At::Pools(vec![(p.unwrap_or(0), g, w)]),
                        };
                        v.push(RelaxOpt {
                            score,
                            gpus: g,
                            nodes: w,
                            kept: false,
                            at,
                        });
                    }
                }
            }
            v.push(RelaxOpt {
                score: sgn * prep.none_term[j],
                gpus: 0.0,
                nodes: 0.0,
                kept: false,
                at: At::Pools(vec![(0, 0.0, 0.0)]),
            });
            opts.push(v);
        }
        Some(Relax {
            opts,
            none_ok: prep.pinned.iter().map(|p| !p).collect(),
            gpus: pools.cap.iter().map(|c| c.gpus as f64).collect(),
            nodes: pools.cap.iter().map(|c| c.nodes as f64).collect(),
            per_node: pools
                .ty
                .iter()
                .map(|&t| prep.types[t].max_node.max(1) as f64)
                .collect(),
            node_pool: pools.of_node.clone(),
            type_pools: (0..prep.types.len())
                .map(|t| pools.of_type(t).collect())
                .collect(),
        })
    }

    fn pools(&self) -> usize {
        self.gpus.len()
    }

    /// An option's reduced score at prices (λ, μ), and the pool a
    /// whole-type option would take its nodes from.
    fn reduced(&self, o: &RelaxOpt, lam: &[f64], mu: &[f64]) -> (f64, usize) {
        match &o.at {
            At::Pools(uses) => {
                let mut r = o.score;
                for &(p, g, n) in uses {
                    r = r - lam[p] * g - mu[p] * n;
                }
                (r, uses[0].0)
            }
            At::Type(t) => {
                let pools = &self.type_pools[*t];
                let mut best = (f64::NEG_INFINITY, pools[0]);
                for &p in pools {
                    let r = o.score - lam[p] * o.gpus - mu[p] * o.nodes;
                    if r > best.0 {
                        best = (r, p);
                    }
                }
                best
            }
        }
    }

    /// Add (`sign` 1) or remove (−1) an option's use of each pool: GPUs,
    /// node charge (none for a kept one, whose nodes are counted apart),
    /// and the whole nodes a whole-type option asks of its type.
    fn account(&self, o: &RelaxOpt, sign: f64, g: &mut [f64], whole: &mut [f64], demand: &mut [f64]) {
        match &o.at {
            At::Pools(uses) => {
                for &(p, gg, nn) in uses {
                    g[p] += sign * gg;
                    if !o.kept {
                        whole[p] += sign * nn;
                    }
                }
            }
            At::Type(t) => demand[*t] += sign * o.nodes,
        }
    }

    /// Whether pool uses fit: GPUs and whole nodes per pool, and per type
    /// its whole-type demand within what its pools have left (each pool
    /// gives as many whole nodes as both its rows allow, as the model's
    /// split variables do).
    fn room(&self, g: &[f64], whole: &[f64], demand: &[f64]) -> bool {
        (0..self.pools()).all(|p| g[p] <= self.gpus[p] + 1e-9 && whole[p] <= self.nodes[p] + 1e-9)
            && demand.iter().enumerate().all(|(t, &d)| {
                d <= 1e-9 || {
                    let left: f64 = self.type_pools[t]
                        .iter()
                        .map(|&p| {
                            let by_gpus = ((self.gpus[p] - g[p]) / self.per_node[p] + 1e-9).floor();
                            by_gpus.min((self.nodes[p] - whole[p] + 1e-9).floor())
                        })
                        .sum();
                    d <= left + 1e-9
                }
            })
    }

    /// Each job's best option at prices (λ, μ) per pool, L(λ, μ), and the
    /// GPUs and node charges used per pool.
    fn eval(&self, lam: &[f64], mu: &[f64], pick: &mut [usize]) -> (f64, Vec<f64>, Vec<f64>) {
        let mut l = 0.0;
        for t in 0..self.pools() {
            l += lam[t] * self.gpus[t] + mu[t] * self.nodes[t];
        }
        let (mut g, mut n) = (vec![0.0; self.pools()], vec![0.0; self.pools()]);
        for (j, o) in self.opts.iter().enumerate() {
            let last = if self.none_ok[j] { o.len() } else { o.len() - 1 };
            let mut best = (f64::NEG_INFINITY, 0, self.reduced(&o[0], lam, mu).1);
            for (i, oi) in o[..last].iter().enumerate() {
                let (r, p) = self.reduced(oi, lam, mu);
                if r > best.0 {
                    best = (r, i, p);
                }
            }
            pick[j] = best.1;
            l += best.0;
            match &o[best.1].at {
                At::Pools(uses) => {
                    for &(p, gg, nn) in uses {
                        g[p] += gg;
                        n[p] += nn;
                    }
                }
                At::Type(_) => {
                    g[best.2] += o[best.1].gpus;
                    n[best.2] += o[best.1].nodes;
                }
            }
        }
        (l, g, n)
    }

    /// Prices that (nearly) minimise L: coordinate bisection on the
    /// subgradients, pool by pool. On a split type, each round first
    /// raises all its pools' prices together until the type as a whole
    /// fits: its groups are near substitutes, and pool-by-pool steps alone
    /// stall there (raising one pool's price just moves its jobs to the
    /// next at almost no loss), which left L far above the optimum.
    fn prices(&self, pick: &mut [usize]) -> (Vec<f64>, Vec<f64>, f64) {
        let (mut lam, mut mu) = (vec![0.0; self.pools()], vec![0.0; self.pools()]);
        for _ in 0..3 {
            for ps in self.type_pools.iter().filter(|ps| ps.len() > 1) {
                let total = |v: &[f64]| ps.iter().map(|&p| v[p]).sum::<f64>();
                let shifted = |v: &[f64], x: f64| {
                    let mut v = v.to_vec();
                    for &p in ps {
                        v[p] += x;
                    }
                    v
                };
                let d =
                    self.bisect(|x| total(&self.eval(&shifted(&lam, x), &mu, pick).1) <= total(&self.gpus));
                if d.is_finite() {
                    lam = shifted(&lam, d);
                }
                let d =
                    self.bisect(|x| total(&self.eval(&lam, &shifted(&mu, x), pick).2) <= total(&self.nodes));
                if d.is_finite() {
                    mu = shifted(&mu, d);
                }
            }
            for t in 0..self.pools() {
                lam[t] = self.bisect(|x| {
                    let mut l2 = lam.clone();
                    l2[t] = x;
                    self.eval(&l2, &mu, pick).1[t] <= self.gpus[t]
                });
                mu[t] = self.bisect(|x| {
                    let mut m2 = mu.clone();
                    m2[t] = x;
                    self.eval(&lam, &m2, pick).2[t] <= self.nodes[t]
                });
            }
        }
        let l = self.eval(&lam, &mu, pick).0;
        (lam, mu, l)
    }

    /// The smallest x ≥ 0 (to bisection precision) where `ok(x)` holds;
    /// `ok` is monotone in x. Infinity if it never holds.
    fn bisect(&self, mut ok: impl FnMut(f64) -> bool) -> f64 {
        if ok(0.0) {
            return 0.0;
        }
        let mut hi = 1e-6;
        while !ok(hi) {
            hi *= 4.0;
            if hi > 1e300 {
                return f64::INFINITY;
            }
        }
        let mut lo = hi / 4.0;
        for _ in 0..50 {
            let mid = 0.5 * (lo + hi);
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

/// Whether the picked options fit the model, pool by pool: GPUs, and whole
/// nodes counting every node that hosts a kept job.
fn fits(round: &Round, relax: &Relax, pick: &[usize]) -> bool {
    let mut g = vec![0.0; relax.pools()];
    let mut whole = vec![0.0; relax.pools()];
    let mut demand = vec![0.0; relax.type_pools.len()];
    let mut used = vec![false; round.cluster.num_nodes()];
    for (j, &i) in pick.iter().enumerate() {
        let o = &relax.opts[j][i];
        relax.account(o, 1.0, &mut g, &mut whole, &mut demand);
        if o.kept {
            for (n, _) in round.jobs[j].current().per_node() {
                if let Some(u) = used.get_mut(n.0 as usize) {
                    *u = true;
                }
            }
        }
    }
    for (n, _) in used.iter().enumerate().filter(|(_, u)| **u) {
        whole[relax.node_pool[n]] += 1.0;
    }
    relax.room(&g, &whole, &demand)
}

/// Greedy upgrades of a feasible pick: switch jobs to better options in
/// order of gain per extra GPU while everything still fits. It narrows the
/// gap to the Lagrangian bound, so pricing fixes more jobs.
fn improve(round: &Round, relax: &Relax, pick: &mut [usize]) {
    let n_nodes = round.cluster.num_nodes();
    let nodes_of = |j: usize| {
        round.jobs[j]
            .current()
            .per_node()
            .into_iter()
            .map(|(n, _)| n.0 as usize)
            .filter(|&n| n < n_nodes)
            .collect::<Vec<usize>>()
    };
    let pools = relax.pools();
    let mut kept = vec![0u32; n_nodes];
    let (mut g, mut multi) = (vec![0.0; pools], vec![0.0; pools]);
    let mut demand = vec![0.0; relax.type_pools.len()];
    for (j, &i) in pick.iter().enumerate() {
        let o = &relax.opts[j][i];
        relax.account(o, 1.0, &mut g, &mut multi, &mut demand);
        if o.kept {
            for n in nodes_of(j) {
                kept[n] += 1;
            }
        }
    }
    let mut used = vec![0.0; pools];
    for (n, _) in kept.iter().enumerate().filter(|(_, &k)| k > 0) {
        used[relax.node_pool[n]] += 1.0;
    }
    for _ in 0..4 {
        let mut moves: Vec<(f64, usize, usize)> = Vec::new();
        for (j, o) in relax.opts.iter().enumerate() {
            let last = if relax.none_ok[j] { o.len() } else { o.len() - 1 };
            let a = &o[pick[j]];
            for (b, ob) in o[..last].iter().enumerate() {
                let gain = ob.score - a.score;
                if gain > 1e-12 {
                    moves.push((gain / (ob.gpus - a.gpus).max(1e-3), j, b));
                }
            }
        }
        moves.sort_by(|x, y| y.0.total_cmp(&x.0));
        let mut changed = false;
        let mut touched = vec![false; pick.len()];
        for (_, j, b) in moves {
            if touched[j] {
                continue;
            }
            let (a, ob) = (&relax.opts[j][pick[j]], &relax.opts[j][b]);
            let (mut g2, mut multi2, mut used2, mut demand2) =
                (g.clone(), multi.clone(), used.clone(), demand.clone());
            relax.account(a, -1.0, &mut g2, &mut multi2, &mut demand2);
            relax.account(ob, 1.0, &mut g2, &mut multi2, &mut demand2);
            let nodes = if a.kept != ob.kept {
                nodes_of(j)
            } else {
                Vec::new()
            };
            for &n in &nodes {
                if a.kept && kept[n] == 1 {
                    used2[relax.node_pool[n]] -= 1.0;
                }
                if ob.kept && kept[n] == 0 {
                    used2[relax.node_pool[n]] += 1.0;
                }
            }
            let whole2: Vec<f64> = multi2.iter().zip(&used2).map(|(m, u)| m + u).collect();
            if !relax.room(&g2, &whole2, &demand2) {
                continue;
            }
            for &n in &nodes {
                if a.kept {
                    kept[n] -= 1;
                }
                if ob.kept {
                    kept[n] += 1;
                }
            }
            (g, multi, used, demand) = (g2, multi2, used2, demand2);
            pick[j] = b;
            touched[j] = true;
            changed = true;
        }
        if !changed {
            break;
        }
    }
}

/// Whether the model is priced out before the solver runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pricing {
    /// Lagrangian pricing fixes the jobs whose choice is settled (the default).
    Lagrangian,
    /// The whole model goes to the solver (a cross-check in tests).
    Off,
}

/// Build, solve and decode the aggregate model with the pricing step
/// chosen. `Err` carries the reason for a fallback.
pub fn solve_aggregate_with(
    round: &Round,
    solver: Solver,
    limits: &Limits,
    pricing: Pricing,
) -> Result<AggregateSolution, String> {
    let t0 = web_time::Instant::now();
    let (mut prep, mut notes, caches) = prepare(round, Speeds::Seen);
    add_pairs(round, &mut prep, &mut notes);
    solve_prepared(round, prep, notes, caches, solver, limits, pricing, t0)
}

/// Peak memory of the aggregate model per column, its build and HiGHS's
/// copy together: `gpuplan plan` with sia and mip-aggregate on the bench's
/// four-type rounds peaked 1.0-1.6 KiB per column above greedy's own peak
/// on the same round (104,173 columns at 16,384 GPUs, 654,447 at 100,000;
/// docs/formulation.md), so 1.6 KiB.
pub const AGGREGATE_MODEL_BYTES_PER_COLUMN: f64 = 1.6 * 1024.0;

/// Solve and decode the aggregate model built from `prep` ([`prepare`],
/// perhaps revalued). The time since `t0`, when the caller began
/// preparing, comes off the solver's limit ([`Limits::after_build`]): at
/// 100,000 GPUs preparing and building took longer than the solve.
#[allow(clippy::too_many_arguments)]
pub(crate) fn solve_prepared(
    round: &Round,
    prep: Prep,
    notes: Vec<String>,
    caches: Vec<SpeedupCache>,
    solver: Solver,
    limits: &Limits,
    pricing: Pricing,
    t0: web_time::Instant,
) -> Result<AggregateSolution, String> {
    let sense = prep.sense;
    let n = prep.cands.len();
    let full: Vec<Slot> = (0..n)
        .map(|j| Slot::Free((0..prep.cands[j].len()).collect(), !prep.pinned[j]))
        .collect();
    let mut slots = full;
    let mut start: Option<Vec<Option<usize>>> = None;
    let mut lagrange: Option<f64> = None;
    // The pricing step knows single options only: with group options, or
    // with jobs that share GPUs now (whose keeps exclude each other), the
    // whole model goes to the solver.
    let shared = !prep.pairs.is_empty() || (round.params.sharing >= 2 && !overlapping_now(round).is_empty());
    // Under queues the pricing, which knows no queue rule, would fix jobs
    // the rules need free (a borrower's kept jobs): the full model runs.
    let queued = !round.queues.is_empty();
    if pricing == Pricing::Lagrangian && sense != Sense::MaxMin && n > 0 && !shared && !queued {
        if let Some((s, st, l)) = reduce(round, &prep) {
            slots = s;
            start = Some(st);
            lagrange = Some(l);
        }
    }
    // Its size is known before a variable is made: one column per free
    // job's option and its "none", one per pair.
    let columns = slots
        .iter()
        .map(|s| match s {
            Slot::Free(o, _) => o.len() + 1,
            Slot::Fixed(_) => 0,
        })
        .sum::<usize>()
        + prep.pairs.len();
    limits.check_memory(
        "the aggregate model",
        columns as f64 * AGGREGATE_MODEL_BYTES_PER_COLUMN,
    )?;
    let (m, z, y) = build(round, &prep, &slots, start.as_deref());
    let watched = m.watched.clone();
    // The reduced model is small: solve it (nearly) exactly, so the
    // requested gap is spent only where the pricing left real choices.
    let left = limits.after_build(t0.elapsed().as_secs_f64(), "the aggregate model")?;
    let tight = Limits {
        gap: if lagrange.is_some() {
            limits.gap.min(1e-6)
        } else {
            limits.gap
        },
        ..left
    };
    let solved = solve(m, solver, &tight).map_err(|e| format!("{} failed: {e}", solver.name()))?;
    let index: std::collections::HashMap<good_lp::Variable, usize> =
        watched.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    let value = |v: good_lp::Variable| solved.values[index[&v]];
    let mut choices = Vec::new();
    let mut terms: Vec<f64> = prep.none_term.clone();
    for (j, slot) in slots.iter().enumerate() {
        let pick = match slot {
            Slot::Fixed(p) => *p,
            Slot::Free(..) => z[j].iter().find(|(v, _)| value(*v) > 0.5).map(|&(_, i)| i),
        };
        if let Some(i) = pick {
            let (c, ty, v, at) = prep.cands[j][i];
            terms[j] = sense.weighted(v, prep.share[j]);
            choices.push(Pick {
                job: j,
                choice: c,
                gpu_type: ty,
                group: at.filter(|_| prep.pools.any_split()),
            });
        }
    }
    let pairs: Vec<GroupOpt> = prep
        .pairs
        .iter()
        .zip(&y)
        .filter(|&(_, &v)| value(v) > 0.5)
        .map(|(p, _)| p.clone())
        .collect();
    let status = match solved.status {
        // GapLimit: optimal within the requested relative gap.
        good_lp::SolutionStatus::Optimal | good_lp::SolutionStatus::GapLimit => PlanStatus::Optimal,
        _ => PlanStatus::Feasible,
    };
    // With the reduction, the solver's bound covers only the kept options;
    // the Lagrangian bound covers the whole model.
    let bound = match lagrange {
        Some(l) => {
            let minimise = matches!(sense, Sense::MinPower(_));
            let l = if minimise { -l } else { l };
            // The solver's bound on the reduced model bounds the whole
            // model too: fixing drops only options that cannot beat the
            // incumbent, which the reduced model holds. With speed groups
            // L is loose (near-substitute groups), so the tighter of the
            // two is reported. Only there: elsewhere L is kept, so plans
            // and bounds without variability stay as they were.
            match solved.bound.filter(|_| prep.pools.any_split()) {
                Some(b) if minimise => Some(l.max(b)),
                Some(b) => Some(l.min(b)),
                None => Some(l),
            }
        }
        None => solved.bound,
    };
    let bound = bound.and_then(|b| bound_to_mean(sense, b, round.jobs.len()));
    for p in &pairs {
        for (&j, &v) in p.members.iter().zip(&p.values) {
            terms[j] = sense.weighted(v, prep.share[j]);
        }
    }
    let total = match sense {
        Sense::MaxMin => terms.iter().copied().fold(f64::INFINITY, f64::min),
        _ => terms.iter().sum(),
    };
    let value = sense.to_mean(total, round.jobs.len());
    let node_group = if prep.pools.any_split() {
        prep.pools.of_node.clone()
    } else {
        Vec::new()
    };
    Ok(AggregateSolution {
        choices,
        pairs,
        status,
        bound,
        notes,
        caches,
        node_group,
        value,
    })
}

/// Price out the model: returns the slots (most jobs fixed), a feasible
/// start and the Lagrangian bound (maximisation form), or `None` when no
/// feasible rounding is found (the full model then runs).
fn reduce(round: &Round, prep: &Prep) -> Option<(Vec<Slot>, Vec<Option<usize>>, f64)> {
    let relax = Relax::new(round, prep)?;
    let n = relax.opts.len();
    let mut pick = vec![0usize; n];
    let (lam, mu, l) = relax.prices(&mut pick);
    if !l.is_finite() || !lam.iter().chain(&mu).all(|x| x.is_finite()) {
        return None;
    }
    // A feasible incumbent: raise every price until the picks fit.
    let raised = |d: f64| -> (Vec<f64>, Vec<f64>) {
        (
            lam.iter().map(|x| x + d).collect(),
            mu.iter().zip(&relax.per_node).map(|(x, g)| x + d * g).collect(),
        )
    };
    let mut inc = vec![0usize; n];
    let d = relax.bisect(|d| {
        let (a, b) = raised(d);
        relax.eval(&a, &b, &mut inc);
        fits(round, &relax, &inc)
    });
    if !d.is_finite() {
        return None;
    }
    let (a, b) = raised(d);
    relax.eval(&a, &b, &mut inc);
    if !fits(round, &relax, &inc) {
        return None;
    }
    improve(round, &relax, &mut inc);
    let inc_score: f64 = inc.iter().enumerate().map(|(j, &i)| relax.opts[j][i].score).sum();
    // Keep an option only if a solution using it could beat the incumbent.
    let tol = 1e-9 * inc_score.abs().max(1.0);
    let mut slots = Vec::with_capacity(n);
    for (j, o) in relax.opts.iter().enumerate() {
        let last = if relax.none_ok[j] { o.len() } else { o.len() - 1 };
        let red: Vec<f64> = o[..last]
            .iter()
            .map(|oi| relax.reduced(oi, &lam, &mu).0)
            .collect();
        let best = red.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let keep: Vec<usize> = (0..last)
            .filter(|&i| i == inc[j] || l - (best - red[i]) >= inc_score - tol)
            .collect();
        let none_idx = o.len() - 1;
        let none_ok = keep.contains(&none_idx);
        let cand: Vec<usize> = keep.iter().copied().filter(|&i| i != none_idx).collect();
        slots.push(if keep.len() == 1 {
            Slot::Fixed(if none_ok { None } else { Some(keep[0]) })
        } else {
            Slot::Free(cand, none_ok)
        });
    }
    let start = inc
        .iter()
        .enumerate()
        .map(|(j, &i)| (i + 1 < relax.opts[j].len()).then_some(i))
        .collect();
    Some((slots, start, l))
}

impl Planner for MipAggregate {
    fn name(&self) -> &str {
        self.name
    }

    fn traits(&self) -> PlannerTraits {
        MIP_TRAITS
    }

    fn shares_gpus(&self) -> bool {
        true
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let t0 = web_time::Instant::now();
        let (mut prep, mut notes, mut caches) = prepare(round, Speeds::Seen);
        add_pairs(round, &mut prep, &mut notes);
        // What does not depend on the solution is done first, so that the
        // solver gets only the time left (issue 32: at 100,000 GPUs the
        // bound, the greedy plan and the packing after the solve took 12 s
        // past a 30 s limit).
        // The model's own bound covers packable shapes only; the round's
        // is the count relaxation's (docs/formulation.md).
        let bound = count_bound(round, &job_options(round, &mut caches, Shapes::Any));
        let t_greedy = web_time::Instant::now();
        let picks = greedy_choices_with(round, &mut caches);
        let greedy = plan_from_choices(self.name, round, &picks, PlanStatus::Feasible);
        let theirs = evaluate_cached(round, &greedy, &mut caches);
        // Packing and evaluating the solution costs about what the greedy
        // plan just did: that much is kept back from the solver.
        let budget = Limits {
            time_limit_s: limits.time_limit_s - t_greedy.elapsed().as_secs_f64(),
            ..*limits
        };
        match solve_prepared(
            round,
            prep,
            notes,
            caches,
            self.solver,
            &budget,
            Pricing::Lagrangian,
            t0,
        ) {
            Ok(AggregateSolution {
                choices,
                pairs,
                status,
                notes,
                mut caches,
                node_group,
                ..
            }) => {
                let packed = pack_grouped(round, &choices, &pairs, &node_group);
                let mut plan = Plan::new(self.name, status);
                plan.solver = Some(self.solver.name().into());
                for (i, a) in packed.allocations {
                    plan.allocations.insert(round.jobs[i].id, a);
                }
                if !packed.notes.is_empty() {
                    plan.reason = Some(packed.notes.join("; "));
                }
                plan.bound = bound;
                if !round.queues.is_empty() && round.params.sharing > 1 {
                    // The count relaxation does not hold jobs that share
                    // GPUs to their queues' caps as the exact model does:
                    // a fuzz case had it below mip-exact's plan. No bound.
                    plan.bound = None;
                    plan.add_note(
                        "no bound: the aggregate's count relaxation does not cover queues with sharing",
                    );
                }
                set_gap_cached(round, &mut plan, &mut caches);
                if plan.reason.is_some() && plan.status == PlanStatus::Optimal {
                    // The packer had to change something: no longer the model's optimum.
                    plan.status = PlanStatus::Feasible;
                }
                if plan.gap.is_some_and(|g| g > limits.gap + 1e-9) {
                    // The bound is the aggregate model's: a packed plan below
                    // it by more than the gap is not proven optimal.
                    plan.status = PlanStatus::Feasible;
                }
                let mut all = notes;
                // Packing may shrink or drop a job; the greedy plan is
                // always packable, so the better of the two is returned
                // and the plan is never worse than greedy (docs/formulation.md).
                let ours = evaluate_cached(round, &plan, &mut caches);
                // Under queues, greedy (which knows no queue rule) competes
                // only with a plan that keeps them.
                let keeps_queues = |p: &Plan| {
                    gpuplan_core::queue::QueueTree::new(round).is_none_or(|t| {
                        t.breaches(round, |i| p.gpus_of(round.jobs[i].id).num_gpus())
                            .is_empty()
                    })
                };
                if theirs > ours + 1e-12 * ours.abs().max(1.0) && keeps_queues(&greedy) {
                    plan.allocations = greedy.allocations;
                    plan.status = PlanStatus::Feasible;
                    super::set_gap_cached(round, &mut plan, &mut caches);
                    all.push(format!(
                        "greedy plan used: objective {theirs:.6} beats the packed aggregate solution's {ours:.6}"
                    ));
                    all.extend(greedy.reason);
                    plan.reason = None;
                }
                all.extend(plan.reason.take());
                if !all.is_empty() {
                    plan.reason = Some(all.join("; "));
                }
                Ok(plan)
            }
            // The greedy plan at hand is `fallback`'s, without planning it again.
            Err(reason) => Ok(as_fallback(greedy, &reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, round};
    use gpuplan_core::{Interference, PerfClass, RoundVariability};

    /// Five one-GPU nodes at 1.0, 1.1, 1.3, 1.35 and 2.0 for the one job's
    /// class (each its own bin: no two within 2%). Merging to three groups
    /// by least added slowdown: 1.3 + 1.35 first (adds 0.05), then 1.0 +
    /// 1.1 (adds 0.1, against 0.25 for 1.1 into the 1.35 pair and 1.3 for
    /// 2.0 into it). Each group counts at its slowest node; blind, one pool.
    #[test]
    fn nodes_merge_into_three_groups_by_least_added_slowdown() {
        let mut j = job(0, 1, 0.0);
        j.class = Some(PerfClass::ALL[0]);
        let mut r = round("5x1", vec![j], Interference::Avoid);
        r.variability = Some(RoundVariability {
            per_node: [1.0, 1.1, 1.3, 1.35, 2.0]
                .iter()
                .map(|&s| vec![[s, 1.0, 1.0, 1.0]])
                .collect(),
            cross_node_factor: 1.7,
        });
        let p = Pools::new(&r, Speeds::Seen);
        assert_eq!(p.of_node, vec![0, 0, 1, 1, 2]);
        let s0: Vec<f64> = p.speed.iter().map(|s| s[0]).collect();
        assert_eq!(s0, vec![1.1, 1.35, 2.0]);
        assert_eq!(p.cap.iter().map(|c| c.nodes).collect::<Vec<_>>(), vec![2, 2, 1]);
        assert!(p.split[0] && p.seen);
        assert_eq!(p.type_speed[0][0], 2.0);
        assert!(p.speed.iter().all(|s| s[1..] == [1.0; 3]));
        let blind = Pools::new(&r, Speeds::Blind);
        assert_eq!((blind.of_node, blind.split), (vec![0; 5], vec![false]));
    }
}
