//! The candidate layer shared by greedy and the MIPs: per job, the ways it
//! may run this round (keep, a (nodes, GPUs) configuration, nothing) and
//! each one's value from the goodput model, plus the objective's per-choice
//! terms ([`Sense`]). It sits below the solver binding, the packer and every
//! planner, so they agree on what a choice is worth without importing each
//! other.

use gpuplan_core::objective::{left_out_value, prioritise, restart_factor};
use gpuplan_core::{Allocation, Cluster, Libm, Round, RoundJob};

use crate::speedup::{max_gpus_of, SpeedupCache};

/// One way a job may run this round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    /// Keep exactly the current GPUs: full speedup, no restart.
    Keep,
    /// Any placement with this many nodes and GPUs: speedup × restart factor.
    Config {
        /// Nodes spanned (2 stands for "two or more", see `node_counts`).
        nodes: u32,
        /// GPUs in all.
        gpus: u32,
    },
}

/// A candidate with its value (speedup × factor) for the objective.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// What the job would get.
    pub choice: Choice,
    /// Its objective term: speedup, times the restart factor unless kept.
    pub value: f64,
    /// The GPU type (index into `Cluster::types()`) the value is for: a
    /// configuration is offered once per type that can hold it; `Keep` has
    /// its current GPUs' type.
    pub ty: usize,
}

/// Everything about one job's options this round.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Every way the job may run this round, each with its value.
    pub candidates: Vec<Candidate>,
    /// Value if the job gets nothing (0: a running job loses its speedup too).
    pub none_value: f64,
    /// The job's weight in the nested objective across queues (1 without
    /// queues): it multiplies the job's terms ([`Sense::weighted`]), never
    /// its values, which stay speedups (issue 51).
    pub share: f64,
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
    let nodes = round.cluster.num_nodes() as u32;
    let max_nodes = round.params.max_nodes_per_job.min(nodes);
    let types = type_capacity(&round.cluster);
    let shares = gpuplan_core::objective::queue_shares(round);
    let total = round.cluster.total_gpus();
    round
        .jobs
        .iter()
        .zip(caches.iter_mut())
        .enumerate()
        .map(|(i, (j, cache))| {
            let share = shares.as_ref().map_or(1.0, |s| s[i]);
            let cur = j.current();
            let pinned = !j.preemptible && !cur.is_empty();
            let mut candidates = Vec::new();
            // Keeping is offered only where the current GPUs obey this
            // round's per-job rules (limits change; old plans mixed types).
            if pinned || round.keepable(j) {
                candidates.push(Candidate {
                    choice: Choice::Keep,
                    value: prioritise(j, &round.params, cache.get_alloc(j, cur)),
                    ty: cache.type_of(cur),
                });
            }
            let kmax = max_gpus_of(j, &round.params, total);
            let mut infeasible = None;
            if j.min_gpus.max(1) > total {
                infeasible = Some(format!(
                    "job {} needs at least {} GPUs but the cluster has {total}",
                    j.name, j.min_gpus
                ));
            } else if !pinned {
                for (ty, t) in types.iter().enumerate() {
                    let g = t.max_node.max(1);
                    let type_nodes = max_nodes.min(t.nodes);
                    for k in j.min_gpus.max(1)..=kmax.min(t.gpus) {
                        let counts: Vec<u32> = match shapes {
                            Shapes::Any => node_counts(k, g, type_nodes),
                            Shapes::Packable => {
                                if k <= g && k.is_power_of_two() {
                                    vec![1]
                                } else if k > g && k % g == 0 && k / g <= type_nodes {
                                    vec![k / g]
                                } else {
                                    vec![]
                                }
                            }
                        };
                        for n in counts {
                            offer(&mut candidates, cache, j, ty, n, k, &round.params);
                        }
                    }
                }
                // A job whose every allowed size is unpackable (rigid 12 GPUs on
                // 8-GPU nodes, or 6 on one node) would never run: offer it whole
                // nodes, of which it uses `k` GPUs (see [`charge`]).
                if shapes == Shapes::Packable && candidates.iter().all(|c| c.choice == Choice::Keep) {
                    for (ty, t) in types.iter().enumerate() {
                        let g = t.max_node.max(1);
                        for k in j.min_gpus.max(1)..=kmax.min(t.gpus) {
                            let n = k.div_ceil(g);
                            if n > max_nodes.min(t.nodes) {
                                break;
                            }
                            offer(&mut candidates, cache, j, ty, n, k, &round.params);
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
                none_value: prioritise(j, &round.params, left_out_value(&round.params)),
                share,
                pinned,
                infeasible,
            }
        })
        .collect()
}

/// Offer `k` GPUs on `n` nodes of type `ty` where the job gains anything there.
fn offer(
    out: &mut Vec<Candidate>,
    cache: &mut SpeedupCache,
    j: &RoundJob,
    ty: usize,
    n: u32,
    k: u32,
    params: &gpuplan_core::PolicyParams,
) {
    let s = cache.get(j, ty, n, k);
    if s > 0.0 {
        let factor = restart_factor(j, params);
        out.push(Candidate {
            choice: Choice::Config { nodes: n, gpus: k },
            value: prioritise(j, params, s * factor),
            ty,
        });
    }
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
        self.weighted(v, 1.0)
    }

    /// A job's term weighted by its queue share (`JobOptions::share`):
    /// share·term(v), the weight untouched under max-min (the nested
    /// minimum is the minimum over jobs).
    pub fn weighted(self, v: f64, share: f64) -> f64 {
        gpuplan_core::objective::weighted_term(v, share, self.p())
    }

    /// The exponent this sense stands for.
    pub fn p(self) -> f64 {
        match self {
            Sense::MinPower(p) | Sense::MaxPower(p) => p,
            Sense::MaxLog => 0.0,
            Sense::MaxMin => f64::NEG_INFINITY,
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

/// One job's chosen candidate, as the packer takes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pick {
    /// Index of the job in `Round::jobs`.
    pub job: usize,
    /// The candidate chosen for it.
    pub choice: Choice,
    /// Index into `Cluster::types()` when the formulation chose the GPU type
    /// (`mip-aggregate`); `None` lets the packer take any one type.
    pub gpu_type: Option<usize>,
    /// The node group the choice must use, an index into the groups the
    /// packer is given ([`crate::placement::pack_grouped`]): `mip-aggregate`
    /// values a choice at its group's slowest node, so it must land there.
    /// `None`: any nodes of its type.
    pub group: Option<usize>,
}

impl Pick {
    /// A choice without a GPU type.
    pub fn new(job: usize, choice: Choice) -> Self {
        Pick {
            job,
            choice,
            gpu_type: None,
            group: None,
        }
    }
}

/// Capacity of one GPU type, in `Cluster::types()` order. Jobs never mix
/// types, so the models count GPUs and nodes per type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeCapacity {
    /// Nodes of this type.
    pub nodes: u32,
    /// GPUs on them in all.
    pub gpus: u32,
    /// The largest node of this type.
    pub max_node: u32,
}

/// Per GPU type (indexed as `Cluster::type_index()` indexes nodes), its capacity.
pub fn type_capacity(cluster: &Cluster) -> Vec<TypeCapacity> {
    let mut out = vec![
        TypeCapacity {
            nodes: 0,
            gpus: 0,
            max_node: 0,
        };
        cluster.types().len()
    ];
    for (n, ty) in cluster.nodes.iter().zip(cluster.type_index()) {
        let t = &mut out[ty];
        t.nodes += 1;
        t.gpus += n.gpus;
        t.max_node = t.max_node.max(n.gpus);
    }
    out
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

/// What each job's "keep" takes from its nodes: its current GPUs, less
/// those an earlier pinned job holds. Pinned jobs may share a GPU (the
/// round check let them), and a GPU is taken once; every other kept pair
/// is a group option of its own, so only pinned jobs are trimmed.
pub fn kept_charge(round: &Round) -> Vec<Allocation> {
    let mut held = std::collections::HashSet::new();
    round
        .jobs
        .iter()
        .map(|j| {
            let cur = j.current();
            if j.preemptible || cur.is_empty() || round.params.sharing < 2 {
                return cur.clone();
            }
            Allocation::from_gpus(
                cur.gpus()
                    .iter()
                    .copied()
                    .filter(|g| !g.is_bound() || held.insert(*g))
                    .collect(),
            )
        })
        .collect()
}
