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
//! - `pal` ([`pal`]): the least expected slowdown, locality × variability.
//!
//! A new placement is one file implementing [`Place`] plus one arm in
//! [`stage`]. The stage, not the placement, keeps every job on one GPU type
//! and within `max_nodes_per_job` (falling back to packing, as the
//! policies' own placements do), so no placement can break those rules.

pub mod packed;
pub mod pal;
pub mod pm_first;
pub mod random;

use gpuplan_core::{Allocation, GpuId, NodeId, Placement, Plan, Round, RoundJob};

use crate::bins::{Bins, DEFAULT_TOLERANCE};

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
    pub nodes: Vec<(NodeId, Vec<u32>)>,
}

impl FreeView {
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
struct FreeSet {
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

    fn view(&self, ty: usize) -> FreeView {
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
/// at most `max_nodes_per_job` nodes, else packed, else it waits.
pub fn place_all(round: &Round, seed: u64, place: &dyn Place, plan: &mut Plan, jobs: Vec<(&RoundJob, u32)>) {
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
        seed,
    };
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    if place.class_first() {
        order.sort_by_key(|&i| jobs[i].0.perf_class());
    }
    let n_types = free.types.iter().max().map_or(0, |m| m + 1);
    let max_nodes = round.params.max_nodes_per_job;
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
                .choose(&ctx, job, &view, k)
                .filter(ok)
                .or_else(|| packed::Packed.choose(&ctx, job, &view, k).filter(ok))
            else {
                continue;
            };
            let rank = (place.cost(&ctx, job, &g), nodes_of(&g), t);
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
            let a = Allocation::from_gpus(g);
            free.take(&a);
            plan.allocations.insert(job.id, a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::testutil::{job, round};
    use crate::{pipeline::run_round, registry, Limits};
    use gpuplan_core::{Interference, PolicyParams, RoundVariability, Sticky};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Class A slowdowns of a 3×4 cluster (other classes 1):
    /// node 0 [1.0 1.0 1.1 1.1], node 1 [1.0 1.1 1.1 1.1], node 2 [1.0 1.0 1.0 1.2].
    fn variable(jobs: Vec<RoundJob>, placement: Placement) -> Round {
        let a = [[1.0, 1.0, 1.1, 1.1], [1.0, 1.1, 1.1, 1.1], [1.0, 1.0, 1.0, 1.2]];
        let mut r = round("3x4", 0.0, jobs);
        r.variability = Some(RoundVariability {
            per_node: a
                .iter()
                .map(|n| n.iter().map(|&s| [s, 1.0, 1.0, 1.0]).collect())
                .collect(),
            cross_node_factor: 1.7,
        });
        r.params.placement = placement;
        for j in &mut r.jobs {
            j.app = "resnet50".into();
        }
        r
    }

    fn gpus_of(plan: &Plan, id: u32) -> Vec<(u32, u32)> {
        plan.get(gpuplan_core::JobId(id))
            .gpus()
            .iter()
            .map(|g| (g.node.0, g.index))
            .collect()
    }

    fn plan(r: &Round) -> Plan {
        let mut p = registry::create("fifo").unwrap();
        run_round(p.as_mut(), r, &Limits::default()).unwrap().plan
    }

    /// Each placement picks the GPUs its rule says, for a 3-GPU and a
    /// 4-GPU class A job on the hand-made cluster.
    #[test]
    fn each_placement_picks_the_expected_gpus() {
        let three = |p| plan(&variable(vec![job(0, 3, 0.0, 0.0, &[])], p));
        // packed: the first node with the most free GPUs, lowest indices.
        assert_eq!(
            gpus_of(&three(Placement::Packed), 0),
            vec![(0, 0), (0, 1), (0, 2)]
        );
        // pm-first and pal: node 2's three median GPUs (no 1.1 among them).
        assert_eq!(
            gpus_of(&three(Placement::PmFirst), 0),
            vec![(2, 0), (2, 1), (2, 2)]
        );
        assert_eq!(gpus_of(&three(Placement::Pal), 0), vec![(2, 0), (2, 1), (2, 2)]);
        let four = |p| plan(&variable(vec![job(0, 4, 0.0, 0.0, &[])], p));
        // pm-first: the six median GPUs first, best-matching node first:
        // node 2's three, then node 0's first; across nodes (1.0 × L).
        assert_eq!(
            gpus_of(&four(Placement::PmFirst), 0),
            vec![(0, 0), (2, 0), (2, 1), (2, 2)]
        );
        // pal: a whole node at 1.1 beats 1.0 × 1.7 across nodes; of nodes
        // 0 and 1 (both 1.1), the first.
        assert_eq!(
            gpus_of(&four(Placement::Pal), 0),
            vec![(0, 0), (0, 1), (0, 2), (0, 3)]
        );
        // random: seeded, so the same round gives the same GPUs.
        let r = variable(vec![job(0, 4, 0.0, 0.0, &[])], Placement::Random);
        assert_eq!(gpus_of(&plan(&r), 0), gpus_of(&plan(&r), 0));
        let mut p = registry::create("fifo").unwrap();
        let other = Limits {
            seed: 7,
            ..Limits::default()
        };
        let a = run_round(p.as_mut(), &r, &other).unwrap().plan;
        assert_eq!(a.get(gpuplan_core::JobId(0)).num_gpus(), 4);
    }

    /// PM-First and PAL place the most variable class first: a class D job
    /// ahead in the queue does not take the fast GPUs a class A job needs.
    #[test]
    fn variable_classes_choose_first() {
        let mut r = variable(
            vec![job(0, 3, 0.0, 0.0, &[]), job(1, 3, 1.0, 0.0, &[])],
            Placement::Pal,
        );
        r.jobs[0].app = "pointnet".into();
        let p = plan(&r);
        assert_eq!(gpus_of(&p, 1), vec![(2, 0), (2, 1), (2, 2)]);
        assert_eq!(p.get(gpuplan_core::JobId(0)).num_gpus(), 3);
    }

    /// Without `sticky`, a running job is placed afresh (here onto faster
    /// GPUs); with it, it keeps its GPUs. Pinned jobs always keep theirs.
    #[test]
    fn sticky_keeps_running_jobs() {
        let mut r = variable(vec![job(0, 2, 0.0, 0.0, &[])], Placement::PmFirst);
        r.jobs[0].state.allocation =
            Allocation::from_gpus(vec![GpuId::new(NodeId(1), 2), GpuId::new(NodeId(1), 3)]);
        assert_eq!(gpus_of(&plan(&r), 0), vec![(0, 0), (0, 1)]);
        r.params.sticky = Sticky::Keep;
        assert_eq!(gpus_of(&plan(&r), 0), vec![(1, 2), (1, 3)]);
        r.params.sticky = Sticky::Replace;
        r.jobs[0].preemptible = false;
        assert_eq!(gpus_of(&plan(&r), 0), vec![(1, 2), (1, 3)]);
    }

    /// A job never mixes GPU types, and never spans more nodes than
    /// allowed: pm-first's spread choice falls back to packing, else waits.
    #[test]
    fn types_and_node_limits_hold() {
        for pl in [Placement::Random, Placement::PmFirst, Placement::Pal] {
            let mut r = variable(vec![job(0, 4, 0.0, 0.0, &[])], pl);
            r.params.max_nodes_per_job = 1;
            let g = gpus_of(&plan(&r), 0);
            assert_eq!(g.len(), 4);
            assert!(g.iter().all(|x| x.0 == g[0].0), "{pl:?}: {g:?}");
            // 6 GPUs fit no node; a job that may not shrink waits.
            r.jobs[0].requested_gpus = 6;
            r.jobs[0].min_gpus = 6;
            assert!(gpus_of(&plan(&r), 0).is_empty(), "{pl:?}");
            let mut t = variable(vec![job(0, 3, 0.0, 0.0, &[])], pl);
            t.cluster = "1x4:a+2x4:b".parse().unwrap();
            t.jobs[0].requested_gpus = 6;
            let g = gpus_of(&plan(&t), 0);
            assert_eq!(g.len(), 6);
            assert!(g.iter().all(|x| x.0 >= 1), "{pl:?}: {g:?}");
        }
    }

    /// PAL never expects a job to run slower than packing would place it,
    /// under its own cost, on random clusters, slowdowns and occupancy.
    #[test]
    fn pal_is_never_worse_than_packed_under_its_cost() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for case in 0..400 {
            let nodes = rng.gen_range(1..6);
            let per = rng.gen_range(1..9);
            let per_node: Vec<Vec<[f64; 4]>> = (0..nodes)
                .map(|_| (0..per).map(|_| [rng.gen_range(0.95..1.3); 4]).collect())
                .collect();
            let v = RoundVariability {
                per_node,
                cross_node_factor: rng.gen_range(1.0..3.0),
            };
            let bins = Bins::new(&v, DEFAULT_TOLERANCE);
            let ctx = Ctx {
                bins: Some(&bins),
                cross_node_factor: v.cross_node_factor,
                seed: 0,
            };
            let view = FreeView {
                nodes: (0..nodes)
                    .map(|n| {
                        (
                            NodeId(n),
                            (0..per).filter(|_| rng.gen_bool(0.7)).collect::<Vec<u32>>(),
                        )
                    })
                    .filter(|(_, g)| !g.is_empty())
                    .collect(),
            };
            let total = view.total();
            if total == 0 {
                continue;
            }
            let k = rng.gen_range(1..=total);
            let j = job(0, k, 0.0, 0.0, &[]);
            let pal = pal::Pal.choose(&ctx, &j, &view, k).unwrap();
            let packed = packed::Packed.choose(&ctx, &j, &view, k).unwrap();
            assert_eq!(pal.len(), k as usize);
            let (a, b) = (
                expected_slowdown(&ctx, 0, &pal),
                expected_slowdown(&ctx, 0, &packed),
            );
            assert!(a <= b + 1e-12, "case {case}: pal {a} > packed {b}");
        }
    }

    /// Every placement's plans pass the validator (run_round validates
    /// them) under every planner with the stage, with running and pinned
    /// jobs, on random variable rounds; other planners refuse the stage.
    #[test]
    fn plans_validate_and_other_planners_refuse() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for case in 0..30 {
            let mut jobs = Vec::new();
            let mut used = [0u32; 3];
            for id in 0..rng.gen_range(1..8u32) {
                let k = [1, 2, 3, 4, 6, 8][rng.gen_range(0..6)];
                let n = rng.gen_range(0..3);
                let run = k <= 4 - used[n] && rng.gen_bool(0.4);
                let alloc: Vec<(u32, u32)> = if run { vec![(n as u32, k)] } else { vec![] };
                if run {
                    used[n] += k;
                }
                let mut j = job(id, k, f64::from(id), 0.0, &alloc);
                j.preemptible = !(run && rng.gen_bool(0.3));
                j.app = ["resnet50", "vgg19", "bert", "pointnet"][rng.gen_range(0..4)].into();
                jobs.push(j);
            }
            for pl in Placement::ALL {
                for sticky in [Sticky::Replace, Sticky::Keep] {
                    let mut r = variable(jobs.clone(), pl);
                    for (j, orig) in r.jobs.iter_mut().zip(&jobs) {
                        j.app = orig.app.clone();
                    }
                    r.params.sticky = sticky;
                    gpuplan_core::bind_round(&mut r);
                    for name in registry::placement_names() {
                        let mut p = registry::create(name).unwrap();
                        let d = run_round(p.as_mut(), &r, &Limits::default())
                            .unwrap_or_else(|e| panic!("case {case} {name} {pl:?}: {e}"));
                        gpuplan_core::validate(
                            &Round {
                                params: PolicyParams {
                                    interference: Interference::Allow,
                                    ..r.params
                                },
                                ..r.clone()
                            },
                            &d.plan,
                        )
                        .unwrap();
                    }
                }
            }
        }
        let r = variable(vec![job(0, 2, 0.0, 0.0, &[])], Placement::Pal);
        let mut p = registry::create("pollux-ga").unwrap();
        let e = run_round(p.as_mut(), &r, &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("params.placement: 'pal'") && e.contains("fifo"), "{e}");
    }
}
