//! Speed pools: a round's nodes grouped by GPU type and, under per-GPU
//! variability, by speed, with each choice valued at its pool's slowest
//! node. `mip-aggregate` counts capacity per pool, and greedy does too, so
//! both value a placement by the one rule (the slowest GPU, × L across
//! nodes for a rigid job) that the simulator and `core::objective` apply.

use gpuplan_core::Round;

use crate::candidates::{type_capacity, Choice, TypeCapacity};

/// (choice, GPU type, value, pool) candidates of one job; "nothing" is
/// implicit. The pool ([`Pools`]) holds the choice's nodes; `None` for
/// "keep" and for a multi-node choice over a whole split type.
pub(crate) type Cands = Vec<(Choice, Option<usize>, f64, Option<usize>)>;

/// Most speed groups per GPU type under variability. Few, because the
/// model and its pricing grow with them (a one-node shape and two rows per
/// group): the aggregate is the model for large rounds, and `mip-exact`
/// is the one with a group per speed bin. Three is a choice, not tuned.
pub const MAX_GROUPS_PER_TYPE: usize = 3;

/// Whether the model sees the round's per-GPU variability. `sia` does
/// not: Sia models GPU types, not GPUs that differ within one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speeds {
    Seen,
    Blind,
}

/// The node sets the model counts capacity in ("pools"): without
/// variability (or blind to it), the GPU types, in `Cluster::types()`
/// order; with it, each type's nodes split into at most
/// [`MAX_GROUPS_PER_TYPE`] speed groups.
///
/// Grouping: nodes start grouped by their per-class speed vector
/// ([`crate::bins::node_speeds`]); while a type has too many groups, the
/// two whose merge loses least are merged, a loss being the slowdown added
/// to each node (a group counts at its slowest member per class), summed
/// over nodes and classes, each class weighted by its jobs in the round.
/// Ties go to the first pair in order, so it is deterministic.
///
/// Why rows per pool are enough: a one-node choice lies in one group; a
/// multi-node one in one group or over its whole type. The sets (groups
/// within types) are laminar, nested or disjoint, and for whole nodes
/// demanded from a laminar family, Hall's condition reduces to one row per
/// set (a union of sets is a disjoint union of maximal ones, whose rows
/// add up). The model goes one step further: a whole-type choice's nodes
/// are split over its groups by integer variables that enter each group's
/// GPU and node rows, so the groups' rows alone decide, and the packer
/// ([`crate::placement::pack_grouped`]) places the group choices first and
/// the whole-type ones on what is left.
pub(crate) struct Pools {
    /// Per node: its pool.
    pub(crate) of_node: Vec<usize>,
    /// Per pool: its GPU type.
    pub(crate) ty: Vec<usize>,
    /// Per pool: the slowdown assumed per class (its slowest node's).
    pub(crate) speed: Vec<[f64; 4]>,
    /// Per pool: its capacity.
    pub(crate) cap: Vec<TypeCapacity>,
    /// Per type: the slowdown per class over all its nodes.
    pub(crate) type_speed: Vec<[f64; 4]>,
    /// Per type: whether it has several pools (whole-type choices then
    /// exist and split their nodes over them).
    pub(crate) split: Vec<bool>,
    /// Whether the model sees variability (values divided by speeds).
    pub(crate) seen: bool,
}

impl Pools {
    pub(crate) fn new(round: &Round, speeds: Speeds) -> Pools {
        Pools::with_groups(round, speeds, MAX_GROUPS_PER_TYPE)
    }

    /// [`Pools::new`] with at most `max_groups` speed groups per type; with
    /// 1, each type is one pool valued at its slowest node (greedy's
    /// conservative alternative, [`crate::planners::greedy`]).
    pub(crate) fn with_groups(round: &Round, speeds: Speeds, max_groups: usize) -> Pools {
        let types = type_capacity(&round.cluster);
        let type_of = round.cluster.type_index();
        let v = match (&round.variability, speeds) {
            (Some(v), Speeds::Seen) => v,
            _ => {
                return Pools {
                    of_node: type_of,
                    ty: (0..types.len()).collect(),
                    speed: vec![[1.0; 4]; types.len()],
                    cap: types.clone(),
                    type_speed: vec![[1.0; 4]; types.len()],
                    split: vec![false; types.len()],
                    seen: false,
                }
            }
        };
        let node_speed = crate::bins::node_speeds(round, v);
        let mut weight = [0.0f64; 4];
        for j in &round.jobs {
            weight[j.perf_class().index()] += 1.0;
        }
        let slowest = |a: [f64; 4], b: [f64; 4]| std::array::from_fn(|c| a[c].max(b[c]));
        let mut pools = Pools {
            of_node: vec![0; type_of.len()],
            ty: Vec::new(),
            speed: Vec::new(),
            cap: Vec::new(),
            type_speed: vec![[1.0; 4]; types.len()],
            split: vec![false; types.len()],
            seen: true,
        };
        for t in 0..types.len() {
            // (speed, nodes) per group, from one group per distinct vector.
            let mut groups: Vec<([f64; 4], Vec<usize>)> = Vec::new();
            let mut nodes: Vec<usize> = (0..type_of.len()).filter(|&n| type_of[n] == t).collect();
            nodes.sort_by(|&a, &b| {
                let key = |n: usize| node_speed[n].map(f64::to_bits);
                key(a).cmp(&key(b)).then(a.cmp(&b))
            });
            for n in nodes {
                match groups.last_mut() {
                    Some(g) if g.0 == node_speed[n] => g.1.push(n),
                    _ => groups.push((node_speed[n], vec![n])),
                }
            }
            while groups.len() > max_groups.max(1) {
                let loss = |a: &([f64; 4], Vec<usize>), b: &([f64; 4], Vec<usize>)| {
                    let m = slowest(a.0, b.0);
                    (0..4)
                        .map(|c| {
                            weight[c]
                                * (a.1.len() as f64 * (m[c] - a.0[c]) + b.1.len() as f64 * (m[c] - b.0[c]))
                        })
                        .sum::<f64>()
                };
                let mut best = (f64::INFINITY, 0, 1);
                for a in 0..groups.len() {
                    for b in a + 1..groups.len() {
                        let l = loss(&groups[a], &groups[b]);
                        if l < best.0 {
                            best = (l, a, b);
                        }
                    }
                }
                let (_, a, b) = best;
                let (speed, members) = groups.remove(b);
                groups[a].0 = slowest(groups[a].0, speed);
                groups[a].1.extend(members);
            }
            pools.split[t] = groups.len() > 1;
            for (speed, members) in groups {
                let p = pools.ty.len();
                let mut cap = TypeCapacity {
                    nodes: 0,
                    gpus: 0,
                    max_node: 0,
                };
                for &n in &members {
                    pools.of_node[n] = p;
                    let g = round.cluster.nodes[n].gpus;
                    cap.nodes += 1;
                    cap.gpus += g;
                    cap.max_node = cap.max_node.max(g);
                }
                pools.type_speed[t] = slowest(pools.type_speed[t], speed);
                pools.ty.push(t);
                pools.speed.push(speed);
                pools.cap.push(cap);
            }
        }
        pools
    }

    /// The pools of GPU type `ty`.
    pub(crate) fn of_type(&self, ty: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.ty.len()).filter(move |&p| self.ty[p] == ty)
    }

    /// Whether some type is split (the packer must then be told the groups).
    pub(crate) fn any_split(&self) -> bool {
        self.split.iter().any(|&s| s)
    }
}

/// A job's candidates placed in pools ([`Pools`]) and valued at the pool's
/// speed for the job's class, as `mip-exact` values its groups: "keep" at
/// the simulator's rule for its GPUs, a one-node shape once per pool of
/// its type that holds it, a multi-node one per pool with enough nodes and,
/// on a split type, over the whole type (at its slowest node), × the
/// cross-node factor L for a rigid job. Without variability every speed
/// is 1 and each type is one pool: the candidates are as before.
pub(crate) fn in_pools(
    round: &Round,
    pools: &Pools,
    j: usize,
    cands: Vec<(Choice, Option<usize>, f64)>,
) -> Cands {
    let job = &round.jobs[j];
    let class = job.perf_class().index();
    let seen = pools.seen;
    let cross = match &round.variability {
        Some(v) if seen && job.pays_cross_node() => v.cross_node_factor,
        _ => 1.0,
    };
    let mut out = Vec::with_capacity(cands.len());
    for (c, ty, v) in cands {
        match (c, ty) {
            (Choice::Config { nodes, gpus }, Some(t)) => {
                let (multi, f) = if nodes > 1 { (true, cross) } else { (false, 1.0) };
                for p in pools.of_type(t) {
                    let cap = &pools.cap[p];
                    let fits = if multi {
                        nodes <= cap.nodes
                    } else {
                        gpus <= cap.max_node
                    };
                    if fits {
                        out.push((c, ty, v / (pools.speed[p][class] * f), Some(p)));
                    }
                }
                if multi && pools.split[t] {
                    out.push((c, ty, v / (pools.type_speed[t][class] * f), None));
                }
            }
            (Choice::Keep, _) if seen => {
                out.push((c, ty, v / round.variability_factor(job, job.current()), None))
            }
            _ => out.push((c, ty, v, None)),
        }
    }
    out
}
