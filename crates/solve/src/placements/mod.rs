//! The placement stage of fixed-size policies: which GPUs a job gets once
//! its policy (fifo, srtf, tiresias, ...) has decided how many.
//!
//! PAL (SC'24) shows that on GPUs of uneven speed this choice matters as
//! much as the order: a job steps at its slowest GPU's pace, and spanning
//! nodes costs a factor L. `params.placement` picks one placement for every
//! such policy, so placements are compared under the same orders:
//!
//! - `packed` ([`packed`]): fewest nodes, variability ignored;
//! - `random` ([`random`]): free GPUs drawn at random, seeded per round;
//! - `pm-first` ([`pm_first`]): the fastest free GPUs for the job's class;
//! - `pal` ([`pal`]): the least expected slowdown, locality × variability;
//! - `mip` ([`mip`]): PAL's cost, minimised over all the round's jobs at
//!   once by a MIP ([`Place::place_jointly`]).
//!
//! A new placement is one file implementing [`Place`] plus one arm in
//! [`stage`]. The stage, not the placement, keeps every job on one GPU type
//! and within `max_nodes_per_job` (falling back to packing, as the
//! policies' own placements do), so no placement can break those rules.

pub mod mip;
pub mod packed;
pub mod pal;
pub mod pm_first;
pub mod random;

use gpuplan_core::{Allocation, GpuId, NodeId, Placement, Plan, Round, RoundJob};

use crate::bins::{Bins, DEFAULT_TOLERANCE};
use crate::Limits;

/// What a placement may read besides the job and the free GPUs.
pub struct Ctx<'a> {
    /// The round's GPUs binned per class; `None` without variability.
    pub bins: Option<&'a Bins>,
    /// PAL's L, the round's (1 without variability).
    pub cross_node_factor: f64,
    /// The round's seed ([`crate::Limits::seed`]).
    pub seed: u64,
}

/// The free GPUs of one type: per node (ascending), the free indices
/// (ascending). Nodes without a free GPU are left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FreeView {
    /// Per node with a free GPU, the free GPU indices on it.
    pub nodes: Vec<(NodeId, Vec<u32>)>,
}

impl FreeView {
    /// Free GPUs in all.
    pub fn total(&self) -> u32 {
        self.nodes.iter().map(|(_, g)| g.len() as u32).sum()
    }

    /// Every free GPU, node by node.
    pub fn gpus(&self) -> impl Iterator<Item = GpuId> + '_ {
        self.nodes
            .iter()
            .flat_map(|(n, g)| g.iter().map(move |&i| GpuId::new(*n, i)))
    }
}

/// One placement: `k` GPUs for `job` out of `free` (all of one type).
pub trait Place {
    /// `None` if it finds no `k` GPUs it accepts; the stage then packs.
    fn choose(&self, ctx: &Ctx, job: &RoundJob, free: &FreeView, k: u32) -> Option<Vec<GpuId>>;

    /// How the placement ranks its choices on different GPU types (lower
    /// is better; ties go to fewer nodes, then the first type). Packing's
    /// measure by default: the nodes spanned.
    fn cost(&self, _ctx: &Ctx, _job: &RoundJob, gpus: &[GpuId]) -> f64 {
        f64::from(nodes_of(gpus))
    }

    /// Whether jobs are placed most variable class first (PAL's artifact
    /// does so for PM-First and PAL: class A jobs lose most on slow GPUs).
    fn class_first(&self) -> bool {
        false
    }

    /// Place all of `jobs` at once, for a placement that decides jointly:
    /// per job (in `jobs`' order) its GPUs, or `None` if it waits. `None`,
    /// the default, places the jobs one at a time with [`Place::choose`].
    /// The stage checks a joint answer as it checks single choices.
    fn place_jointly(
        &self,
        _round: &Round,
        _ctx: &Ctx,
        _limits: &Limits,
        _free: &FreeSet,
        _jobs: &[(&RoundJob, u32)],
    ) -> Option<Vec<Option<Vec<GpuId>>>> {
        None
    }
}

/// The placement `params.placement` names; `None` for `default`, the
/// policy's own.
pub fn stage(p: Placement) -> Option<Box<dyn Place>> {
    match p {
        Placement::Default => None,
        Placement::Packed => Some(Box::new(packed::Packed)),
        Placement::Random => Some(Box::new(random::Random)),
        Placement::PmFirst => Some(Box::new(pm_first::PmFirst)),
        Placement::Pal => Some(Box::new(pal::Pal)),
        Placement::Mip => Some(Box::new(mip::Mip)),
    }
}

/// Nodes spanned by a list of GPUs.
pub fn nodes_of(gpus: &[GpuId]) -> u32 {
    let mut n: Vec<u32> = gpus.iter().map(|g| g.node.0).collect();
    n.sort_unstable();
    n.dedup();
    n.len() as u32
}

/// The slowdown a placement expects of `gpus` for a job of `class`: its
/// slowest GPU's bin, times L when it spans nodes (PAL's job model, priced
/// with bins). 1 (or L) without variability.
pub fn expected_slowdown(ctx: &Ctx, class: usize, gpus: &[GpuId]) -> f64 {
    let worst = gpus
        .iter()
        .map(|g| ctx.bins.map_or(1.0, |b| b.speed(*g, class)))
        .fold(0.0, f64::max);
    if nodes_of(gpus) > 1 {
        worst * ctx.cross_node_factor
    } else {
        worst
    }
}

/// `count` GPUs of `free` (one node's free indices), the job's own first,
/// then by `key` (then index): how every placement names GPUs on a node,
/// so a re-placed job that stays on a node keeps its devices.
pub fn pick_on_node(
    job: &RoundJob,
    node: NodeId,
    free: &[u32],
    count: usize,
    key: impl Fn(GpuId) -> f64,
) -> Vec<GpuId> {
    let own = |g: &GpuId| job.current().gpus().contains(g);
    let mut g: Vec<GpuId> = free.iter().map(|&i| GpuId::new(node, i)).collect();
    g.sort_by(|a, b| {
        key(*a)
            .total_cmp(&key(*b))
            .then(own(b).cmp(&own(a)))
            .then(a.index.cmp(&b.index))
    });
    g.truncate(count);
    g
}

/// Which GPUs are free while the stage places, one flag per GPU.
#[derive(Debug, Clone)]
pub struct FreeSet {
    free: Vec<Vec<bool>>,
    types: Vec<usize>,
}

impl FreeSet {
    fn new(round: &Round) -> Self {
        FreeSet {
            free: round
                .cluster
                .nodes
                .iter()
                .map(|n| vec![true; n.gpus as usize])
                .collect(),
            types: round.cluster.type_index(),
        }
    }

    /// Mark `alloc` taken: named GPUs as named, unnamed slots as their
    /// node's lowest free GPUs (the binder names them later, count-exact).
    /// How many GPU types the cluster has.
    pub fn n_types(&self) -> usize {
        self.types.iter().max().map_or(0, |m| m + 1)
    }

    /// Whether GPU `g` is free.
    pub fn is_free(&self, g: GpuId) -> bool {
        g.is_bound()
            && self
                .free
                .get(g.node.0 as usize)
                .and_then(|n| n.get(g.index as usize))
                .copied()
                .unwrap_or(false)
    }

    fn take(&mut self, alloc: &Allocation) {
        for g in alloc.gpus() {
            let Some(node) = self.free.get_mut(g.node.0 as usize) else {
                continue;
            };
            let slot = if g.is_bound() {
                node.get_mut(g.index as usize)
            } else {
                node.iter_mut().find(|f| **f)
            };
            if let Some(f) = slot {
                *f = false;
            }
        }
    }

    /// The free GPUs of type `ty` (the cluster's [`gpuplan_core::Cluster::type_index`]).
    pub fn view(&self, ty: usize) -> FreeView {
        let nodes = self
            .free
            .iter()
            .enumerate()
            .filter(|&(n, _)| self.types[n] == ty)
            .map(|(n, f)| {
                let idx: Vec<u32> = (0..f.len() as u32).filter(|&i| f[i as usize]).collect();
                (NodeId(n as u32), idx)
            })
            .filter(|(_, idx)| !idx.is_empty())
            .collect();
        FreeView { nodes }
    }
}

/// Place `rest` (job, GPU count), in order, with `place`, on the GPUs the
/// plan so far (pinned and kept jobs) leaves free; each job on one type and
/// at most `max_nodes_per_job` nodes, else packed, else it waits. A
/// placement that decides jointly ([`Place::place_jointly`]) places them all
/// at once; an answer breaking those rules is replaced by the one-by-one one.
pub fn place_all(
    round: &Round,
    limits: &Limits,
    place: &dyn Place,
    plan: &mut Plan,
    jobs: Vec<(&RoundJob, u32)>,
) {
    if jobs.is_empty() {
        return;
    }
    let mut free = FreeSet::new(round);
    for a in plan.allocations.values() {
        free.take(a);
    }
    let bins = round
        .variability
        .as_ref()
        .map(|v| Bins::new(v, DEFAULT_TOLERANCE));
    let ctx = Ctx {
        bins: bins.as_ref(),
        cross_node_factor: round.variability.as_ref().map_or(1.0, |v| v.cross_node_factor),
        seed: limits.seed,
    };
    let chosen = place
        .place_jointly(round, &ctx, limits, &free, &jobs)
        .filter(|c| joint_ok(round, &free, &jobs, c))
        .unwrap_or_else(|| place_in_order(round, &ctx, place, &mut free, &jobs));
    for ((job, _), g) in jobs.iter().zip(chosen) {
        if let Some(g) = g {
            plan.allocations.insert(job.id, Allocation::from_gpus(g));
        }
    }
}

/// Whether a joint answer keeps the stage's rules: one entry per job, each
/// placed job on exactly its count of free GPUs of one type, on at most
/// `max_nodes_per_job` nodes, no GPU given twice.
fn joint_ok(round: &Round, free: &FreeSet, jobs: &[(&RoundJob, u32)], chosen: &[Option<Vec<GpuId>>]) -> bool {
    if chosen.len() != jobs.len() {
        return false;
    }
    let mut left = free.clone();
    jobs.iter().zip(chosen).all(|((_, k), g)| {
        let Some(g) = g else { return true };
        let one_type = g
            .iter()
            .all(|x| left.types.get(x.node.0 as usize) == left.types.get(g[0].node.0 as usize));
        let ok = g.len() == *k as usize
            && nodes_of(g) <= round.params.max_nodes_per_job
            && one_type
            && g.iter().all(|x| left.is_free(*x));
        // Taking them one by one also catches a GPU named twice.
        ok && g.iter().all(|x| {
            let was = left.is_free(*x);
            left.free[x.node.0 as usize][x.index as usize] = false;
            was
        })
    })
}

/// Place `jobs` one at a time with `place` (class A first where it asks),
/// taking their GPUs from `free`: per job, in `jobs`' order, its GPUs or
/// `None` if it waits.
pub fn place_in_order(
    round: &Round,
    ctx: &Ctx,
    place: &dyn Place,
    free: &mut FreeSet,
    jobs: &[(&RoundJob, u32)],
) -> Vec<Option<Vec<GpuId>>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    if place.class_first() {
        order.sort_by_key(|&i| jobs[i].0.perf_class());
    }
    let n_types = free.n_types();
    let max_nodes = round.params.max_nodes_per_job;
    let mut out = vec![None; jobs.len()];
    for i in order {
        let (job, k) = jobs[i];
        let mut best: Option<((f64, u32, usize), Vec<GpuId>)> = None;
        for t in 0..n_types {
            let view = free.view(t);
            if view.total() < k {
                continue;
            }
            let ok = |g: &Vec<GpuId>| g.len() == k as usize && nodes_of(g) <= max_nodes;
            let Some(g) = place
                .choose(ctx, job, &view, k)
                .filter(ok)
                .or_else(|| packed::Packed.choose(ctx, job, &view, k).filter(ok))
            else {
                continue;
            };
            let rank = (place.cost(ctx, job, &g), nodes_of(&g), t);
            let better = best.as_ref().is_none_or(|(r, _)| {
                rank.0
                    .total_cmp(&r.0)
                    .then(rank.1.cmp(&r.1))
                    .then(rank.2.cmp(&r.2))
                    .is_lt()
            });
            if better {
                best = Some((rank, g));
            }
        }
        if let Some((_, g)) = best {
            free.take(&Allocation::from_gpus(g.clone()));
            out[i] = Some(g);
        }
    }
    out
}
