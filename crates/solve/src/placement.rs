//! Placement helpers shared by the heuristics: turn "job j gets k GPUs" into
//! node indices. Policy-agnostic on purpose (no branching on policy names).

use gpuplan_core::{Allocation, Cluster, NodeId};

use crate::candidates::{charge, kept_charge, Choice, Pick};
use crate::pairs::{name_group_gpus, named_gpus, GroupOpt};

/// Free GPUs per node, tracked while a plan is built.
#[derive(Debug, Clone)]
pub struct FreeGpus {
    pub free: Vec<u32>,
}

impl FreeGpus {
    pub fn new(cluster: &Cluster) -> Self {
        FreeGpus {
            free: cluster.nodes.iter().map(|n| n.gpus).collect(),
        }
    }

    pub fn total(&self) -> u32 {
        self.free.iter().sum()
    }

    /// Take the GPUs of an existing allocation out of the pool; false if they
    /// are not all free.
    pub fn take(&mut self, alloc: &Allocation) -> bool {
        let per = alloc.per_node();
        if per
            .iter()
            .any(|&(n, k)| self.free.get(n.0 as usize).is_none_or(|&f| f < k))
        {
            return false;
        }
        for (n, k) in per {
            self.free[n.0 as usize] -= k;
        }
        true
    }

    /// Consolidated placement: take GPUs from the nodes with the most free
    /// GPUs first (ties by index), so a job spans as few nodes as possible.
    /// `None` (and nothing taken) if fewer than `k` GPUs are free.
    pub fn take_packed(&mut self, k: u32) -> Option<Allocation> {
        if k == 0 || self.total() < k {
            return None;
        }
        let mut order: Vec<usize> = (0..self.free.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.free[i]), i));
        let mut need = k;
        let mut counts = Vec::new();
        for i in order {
            if need == 0 {
                break;
            }
            let t = self.free[i].min(need);
            if t > 0 {
                self.free[i] -= t;
                need -= t;
                counts.push((NodeId(i as u32), t));
            }
        }
        Some(Allocation::from_counts(&counts))
    }

    /// Best-fit on one node: the fullest node that still has `k` free GPUs.
    pub fn take_single_node(&mut self, k: u32) -> Option<Allocation> {
        let i = (0..self.free.len())
            .filter(|&i| self.free[i] >= k)
            .min_by_key(|&i| (self.free[i], i))?;
        self.free[i] -= k;
        Some(Allocation::from_counts(&[(NodeId(i as u32), k)]))
    }

    /// Spread placement: one GPU at a time from the node with the most free
    /// GPUs, so a job uses as many nodes as possible.
    pub fn take_spread(&mut self, k: u32) -> Option<Allocation> {
        if k == 0 || self.total() < k {
            return None;
        }
        let mut gpus = Vec::with_capacity(k as usize);
        for _ in 0..k {
            let i = (0..self.free.len()).max_by_key(|&i| (self.free[i], std::cmp::Reverse(i)))?;
            self.free[i] -= 1;
            gpus.push(NodeId(i as u32));
        }
        Some(Allocation::new(gpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_prefers_fullest_free_nodes() {
        let c: Cluster = "3x4".parse().unwrap();
        let mut f = FreeGpus::new(&c);
        assert!(f.take(&Allocation::from_counts(&[(NodeId(0), 3)])));
        let a = f.take_packed(5).unwrap();
        assert_eq!(a.per_node(), vec![(NodeId(1), 4), (NodeId(2), 1)]);
        assert_eq!(f.free, vec![1, 0, 3]);
        assert!(f.take_packed(5).is_none());
        assert_eq!(f.free, vec![1, 0, 3]);
        let s = f.take_single_node(1).unwrap();
        assert_eq!(s.per_node(), vec![(NodeId(0), 1)]);
        let sp = f.take_spread(2).unwrap();
        assert_eq!(sp.per_node(), vec![(NodeId(2), 2)]);
    }
}

/// Place per-job choices on nodes: kept jobs first on their own GPUs, then
/// multi-node jobs on whole free nodes (so they never share a node, which
/// satisfies the interference rule), then single-node jobs best-fit
/// decreasing, preferring the node they already run on. A job that no
/// longer fits is shrunk to the next smaller packable size, else dropped;
/// every such event is reported. The result is always a valid placement.
///
/// A pick may name its GPU type (`mip-aggregate` decides the type). A job's
/// GPUs are always of one type: a multi-node job takes whole nodes of the
/// first type (in `Cluster::types()` order) with enough of them.
pub fn pack(round: &gpuplan_core::Round, choices: &[Pick]) -> Packing {
    pack_grouped(round, choices, &[], &[])
}

/// What the packer places: one job, or a group (index into the groups)
/// that takes one set of GPUs on one node for all its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Job(usize),
    Group(usize),
}

/// [`pack`] with groups that share GPUs (`mip-aggregate` under
/// `params.sharing` ≥ 2; their jobs are in no choice). A kept group keeps
/// its GPUs after the kept jobs; a moving group is one single-node unit of
/// its GPU count, placed with the single-node jobs (preferring a node one
/// of its jobs runs on), and all its jobs get the same named GPUs. A group
/// that does not fit shrinks as a job does (never below any member's
/// minimum), else all its jobs are left unallocated.
///
/// A pick may also name its node group ([`Pick::group`]; `node_group[n]`
/// is node `n`'s group, empty for none): it then uses only that group's
/// nodes. Picks with a group are placed first, then those without
/// (whole-type multi-node choices of `mip-aggregate`). In that order every
/// solution of the aggregate model packs whenever its one-node shapes pack
/// within their group: the model's rows per group (each whole-type
/// choice's nodes split over the groups) leave enough whole free nodes in
/// each group for its share.
pub fn pack_grouped(
    round: &gpuplan_core::Round,
    choices: &[Pick],
    groups: &[GroupOpt],
    node_group: &[usize],
) -> Packing {
    let node_type = round.cluster.type_index();
    let n_types = round.cluster.types().len();
    let n_nodes = round.cluster.num_nodes();
    let cap: Vec<u32> = round.cluster.nodes.iter().map(|n| n.gpus).collect();
    let g = round.cluster.max_gpus_per_node().max(1);
    let mut free = cap.clone();
    let mut multi = vec![false; n_nodes];
    let mut out = Packing::default();
    let mut rest: Vec<Rest> = Vec::new();
    let avoid = round.params.interference == gpuplan_core::Interference::Avoid;
    // Pinned (non-preemptible) jobs first: they cannot go anywhere else.
    let kept = kept_charge(round);
    let mut ordered: Vec<Pick> = choices.to_vec();
    ordered.sort_by_key(|p| (round.jobs[p.job].preemptible, p.job));
    for &Pick {
        job: i,
        choice: c,
        gpu_type: ty,
        group,
    } in &ordered
    {
        let j = &round.jobs[i];
        match c {
            Choice::Keep => {
                let per = kept[i].per_node();
                let fits = per
                    .iter()
                    .all(|&(n, k)| (n.0 as usize) < n_nodes && free[n.0 as usize] >= k);
                let clash = avoid && per.len() > 1 && per.iter().any(|&(n, _)| multi[n.0 as usize]);
                if fits && !clash {
                    for &(n, k) in &per {
                        free[n.0 as usize] -= k;
                        if per.len() > 1 {
                            multi[n.0 as usize] = true;
                        }
                    }
                    out.allocations.push((i, j.current().clone()));
                } else {
                    out.notes.push(format!("{}: could not keep its GPUs", j.name));
                }
            }
            Choice::Config { nodes, gpus } => rest.push((Unit::Job(i), nodes, gpus, ty, group)),
        }
    }
    for (x, p) in groups.iter().enumerate() {
        let per = round.jobs[p.members[0]].current().per_node();
        if p.keep {
            if let [(n, k)] = per[..] {
                if free.get(n.0 as usize).is_some_and(|&f| f >= k) {
                    free[n.0 as usize] -= k;
                    for &j in &p.members {
                        out.allocations.push((j, round.jobs[j].current().clone()));
                    }
                    continue;
                }
            }
            let names: Vec<&str> = p.members.iter().map(|&j| round.jobs[j].name.as_str()).collect();
            out.notes
                .push(format!("{}: could not keep their shared GPUs", names.join("+")));
        }
        rest.push((Unit::Group(x), 1, p.gpus, Some(p.ty), None));
    }
    // Named GPUs so far (kept jobs and groups): a moving group's GPUs avoid them.
    let mut named = named_gpus(out.allocations.iter().map(|(_, a)| a));
    let lead = |u: &Unit| match *u {
        Unit::Job(i) => i,
        Unit::Group(x) => groups[x].members[0],
    };
    // Larger first (by what a shape takes: whole nodes for an unpackable
    // size); ties by job index for determinism.
    let taken = |r: &Rest| charge(r.1, r.2, g).0;
    // With groups, the picks without one go last (see above).
    let late = |r: &Rest| !node_group.is_empty() && r.4.is_none();
    rest.sort_by(|a, b| {
        late(a)
            .cmp(&late(b))
            .then(taken(b).cmp(&taken(a)))
            .then(b.2.cmp(&a.2))
            .then(lead(&a.0).cmp(&lead(&b.0)))
    });
    for (unit, nodes, gpus, want, grp) in rest {
        let type_ok =
            |m: usize| want.is_none_or(|t| node_type[m] == t) && grp.is_none_or(|x| node_group[m] == x);
        let i = lead(&unit);
        let j = &round.jobs[i];
        let members: Vec<usize> = match unit {
            Unit::Job(i) => vec![i],
            Unit::Group(x) => groups[x].members.clone(),
        };
        let name = members
            .iter()
            .map(|&m| round.jobs[m].name.as_str())
            .collect::<Vec<_>>()
            .join("+");
        let min_gpus = members.iter().map(|&m| round.jobs[m].min_gpus).max().unwrap_or(0);
        let current: Vec<usize> = j.current().per_node().iter().map(|(n, _)| n.0 as usize).collect();
        // A node a one-node member runs on now is preferred.
        let home = |m: usize| {
            members.iter().any(|&x| {
                let per = round.jobs[x].current().per_node();
                per.len() == 1 && per[0].0 .0 as usize == m
            })
        };
        let mut k = gpus;
        let mut n = nodes;
        loop {
            let placed = if n > 1 {
                // Whole free nodes without another multi-node job, current
                // ones first; GPUs split evenly (the first nodes take one
                // more when `k` does not divide).
                let per = k.div_ceil(n);
                // Whole nodes of one type, the type of the current nodes first.
                let pick = (0..n_types)
                    .filter(|&t| want.is_none_or(|w| w == t))
                    .map(|t| {
                        let mut cands: Vec<usize> = (0..n_nodes)
                            .filter(|&m| {
                                node_type[m] == t
                                    && type_ok(m)
                                    && free[m] == cap[m]
                                    && cap[m] >= per
                                    && !multi[m]
                            })
                            .collect();
                        cands.sort_by_key(|&m| (!current.contains(&m), m));
                        cands
                    })
                    .filter(|c| c.len() >= n as usize)
                    .min_by_key(|c| (!current.contains(&c[0]), c[0]));
                if let Some(cands) = pick {
                    let chosen: Vec<usize> = cands[..n as usize].to_vec();
                    let counts: Vec<(NodeId, u32)> = chosen
                        .iter()
                        .enumerate()
                        .map(|(x, &m)| (NodeId(m as u32), k / n + u32::from((x as u32) < k % n)))
                        .collect();
                    for &(m, c) in &counts {
                        free[m.0 as usize] -= c;
                        multi[m.0 as usize] = true;
                    }
                    Some(Allocation::from_counts(&counts))
                } else {
                    None
                }
            } else {
                let best = (0..n_nodes)
                    .filter(|&m| free[m] >= k && type_ok(m))
                    .min_by_key(|&m| (!home(m), free[m], m));
                best.map(|m| {
                    free[m] -= k;
                    Allocation::from_counts(&[(NodeId(m as u32), k)])
                })
            };
            if let Some(a) = placed {
                if k != gpus {
                    out.notes
                        .push(format!("{name}: shrunk from {gpus} to {k} GPUs to fit",));
                }
                match unit {
                    Unit::Job(i) => out.allocations.push((i, a)),
                    Unit::Group(x) => {
                        let node = a.per_node()[0].0 .0 as usize;
                        match name_group_gpus(round, &mut named, &groups[x], k, node) {
                            Ok(shared) => {
                                for &m in &members {
                                    out.allocations.push((m, shared.clone()));
                                }
                            }
                            Err(why) => out.notes.push(format!("{name}: {why}; left unallocated")),
                        }
                    }
                }
                break;
            }
            // Next smaller packable size.
            if n > 1 {
                n -= 1;
                k = n * g;
                if n == 1 {
                    k = g;
                }
            } else if k > 1 {
                k = (k / 2).max(1);
                if !k.is_power_of_two() {
                    k = k.next_power_of_two() / 2;
                }
            } else {
                k = 0;
            }
            if k == 0 || k < min_gpus.max(1) {
                out.notes
                    .push(format!("{name}: no room for {gpus} GPUs; left unallocated"));
                break;
            }
        }
    }
    out
}

/// A unit left to place: (unit, nodes, GPUs, GPU type, node group).
type Rest = (Unit, u32, u32, Option<usize>, Option<usize>);

/// Result of [`pack`]: allocations by job index, and what had to change.
#[derive(Debug, Clone, Default)]
pub struct Packing {
    /// (index in `Round::jobs`, its GPUs) per job placed; jobs left out are absent.
    pub allocations: Vec<(usize, Allocation)>,
    /// Each shrink or drop the packer had to make; empty when every choice fit.
    pub notes: Vec<String>,
}
