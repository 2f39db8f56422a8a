//! Group options for GPU sharing (issue 15), shared by both MIP
//! formulations (`mip-exact` and `mip-aggregate`) and the packer: which
//! groups of 2 to k jobs (k = `params.sharing`) may share `g` GPUs of one
//! node and what each job is worth there, which groups share now and may
//! stay, and which GPUs a placed group gets. One module so that the two
//! formulations cannot drift apart on who may share or at what value; the
//! rules themselves live in core (`gpuplan_core::colocation`), which the
//! validator and the simulator call too.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use gpuplan_core::colocation::{
    fits_memory, job_memory_gib, may_group, measured_enough, predicted_group, predicted_utilization,
    round_model, shared_gpus,
};
use gpuplan_core::{Allocation, GpuId, NodeId, Round, RoundJob};

use crate::candidates::{Sense, TypeCapacity};

/// Two to k jobs sharing `gpus` GPUs of one node of kind `ty`
/// (params.sharing ≥ 2): one joint option, so the objective stays linear.
/// Each job's value is its single-node value there divided by the group's
/// predicted slowdown ([`predicted_group`], the function the simulator
/// charges with). A kept group (`keep`: all its jobs already share exactly
/// these GPUs, no other job on them, and stay) is valued at their keep
/// values, without the restart factor, and takes no new GPUs: it is an
/// occupant of its node, as a kept job is. A pair is the two-job group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOpt {
    /// Its jobs, ascending.
    pub members: Vec<usize>,
    /// Each member's value there, in `members` order.
    pub values: Vec<f64>,
    pub ty: usize,
    pub gpus: u32,
    pub keep: bool,
}

/// Most pair options one model gets; past it the rest are dropped (with a
/// note), so sharing cannot blow up the solve.
pub const PAIR_BUDGET: usize = 20_000;

/// Most options of three or more jobs one model gets (before pruning, over
/// all sizes); past it the rest are dropped with a note.
pub const GROUP_BUDGET: usize = 20_000;

/// Partners kept per job and (GPU type, GPUs) ([`prune`]): with n jobs
/// that may all pair, the pair options grow like n², and so does the
/// solve (256 GPUs × 100 jobs took ~4 s with all 4,950 pairs against
/// 0.15 s without sharing); a job rarely gains from more than its few best
/// partners. Groups of each larger size are pruned the same way.
pub const PARTNERS: usize = 8;

/// One job as the group rules see it, in a formulation's own values.
#[derive(Debug, Clone, Default)]
pub struct Sharer {
    /// The single-node options it may share: (GPU type, GPUs, value).
    /// Empty for a pinned job.
    pub singles: Vec<(usize, u32, f64)>,
    /// Its keep value where it may keep its GPUs (never for a pinned job).
    pub keep: Option<f64>,
}

impl Sharer {
    /// Its single-node value at (kind, GPUs), if it may run there.
    fn single(&self, ty: usize, gpus: u32) -> Option<f64> {
        self.singles
            .iter()
            .find(|&&(t, g, _)| t == ty && g == gpus)
            .map(|x| x.2)
    }
}

/// Pairs of jobs (a < b) whose current allocations share a named GPU.
pub fn overlapping_now(round: &Round) -> Vec<(usize, usize)> {
    let allocs: Vec<&Allocation> = round.jobs.iter().map(|j| j.current()).collect();
    let mut out: BTreeSet<(usize, usize)> = BTreeSet::new();
    for holders in shared_gpus(&allocs).values() {
        for (i, &a) in holders.iter().enumerate() {
            for &b in &holders[i + 1..] {
                out.insert((a.min(b), a.max(b)));
            }
        }
    }
    out.into_iter().collect()
}

/// The jobs that share GPUs now, grouped: two jobs sharing a GPU are in
/// one group, and so (transitively) are their other partners. Each group
/// ascending, the groups by their first job.
fn sharing_now(round: &Round) -> Vec<Vec<usize>> {
    let mut root: Vec<usize> = (0..round.jobs.len()).collect();
    fn find(root: &mut [usize], mut j: usize) -> usize {
        while root[j] != j {
            root[j] = root[root[j]];
            j = root[j];
        }
        j
    }
    let pairs = overlapping_now(round);
    for &(a, b) in &pairs {
        let (ra, rb) = (find(&mut root, a), find(&mut root, b));
        root[ra.max(rb)] = ra.min(rb);
    }
    let mut groups: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for &(a, b) in &pairs {
        let r = find(&mut root, a);
        groups.entry(r).or_default().extend([a, b]);
    }
    groups.into_values().map(|g| g.into_iter().collect()).collect()
}

/// With `params.sharing` ≥ 2, the groups of at most k jobs that share
/// exactly the same GPUs of one node now, with no other job on them, and
/// may all keep them: the option to stay as they are, at each job's keep
/// value (no restart) over the group's predicted slowdown. A model's node
/// kinds (GPU types, or mip-exact's type × speed groups) are `node_kind`
/// per node and `kind_type` per kind; [`GroupOpt::ty`] is the kind.
pub fn kept_groups(
    round: &Round,
    node_kind: &[usize],
    kind_type: &[usize],
    sharers: &[Sharer],
) -> Vec<GroupOpt> {
    if round.params.sharing < 2 {
        return Vec::new();
    }
    let model = round_model(round);
    let mut out = Vec::new();
    for members in sharing_now(round) {
        let jobs: Vec<&RoundJob> = members.iter().map(|&j| &round.jobs[j]).collect();
        let first = jobs[0].current();
        let per = first.per_node();
        if per.len() != 1
            || members.len() as u32 > round.params.sharing
            || !jobs.iter().all(|j| j.current().same_gpus(first))
        {
            continue;
        }
        let ty = node_kind[per[0].0 .0 as usize];
        if !may_group(
            round,
            &model,
            round.cluster.types()[kind_type[ty]].as_str(),
            &jobs,
        ) {
            continue;
        }
        let Some(keeps) = members
            .iter()
            .map(|&j| sharers[j].keep)
            .collect::<Option<Vec<f64>>>()
        else {
            continue;
        };
        let gpus = first.num_gpus();
        let fs = predicted_group(&model, &jobs, gpus);
        out.push(GroupOpt {
            values: keeps.iter().zip(&fs).map(|(v, f)| v / f).collect(),
            members,
            ty,
            gpus,
            keep: true,
        });
    }
    out
}

/// The group options of a round with `params.sharing` = k ≥ 2: first the
/// pairs, every two movable jobs that both may run on `g` GPUs of one node
/// of a kind, whose memories fit together in that type's GPU and, under
/// `sharing_pairs = measured`, whose pair was measured; each valued by the
/// round's model (measured pair, else curve). At most [`PAIR_BUDGET`], then
/// pruned to each job's best [`PARTNERS`] per (kind, GPUs). With k ≥ 3,
/// then groups of 3 to k jobs built from the pruned pairs only
/// ([`larger_groups`]). `kinds` and `kind_type`: each node kind's capacity
/// and GPU type ([`kept_groups`]).
pub fn group_options(
    round: &Round,
    kinds: &[TypeCapacity],
    kind_type: &[usize],
    sharers: &[Sharer],
    notes: &mut Vec<String>,
) -> Vec<GroupOpt> {
    if round.params.sharing < 2 {
        return Vec::new();
    }
    let model = round_model(round);
    let names = round.cluster.types();
    let mut util: HashMap<(usize, u32), f64> = HashMap::new();
    let mem: Vec<Option<f64>> = round.jobs.iter().map(job_memory_gib).collect();
    let mut out = Vec::new();
    'enumerate: for a in 0..sharers.len() {
        for b in a + 1..sharers.len() {
            for &(ty, k, va) in &sharers[a].singles {
                let Some(vb) = sharers[b].single(ty, k) else {
                    continue;
                };
                if k > kinds[ty].max_node
                    || !fits_memory(names[kind_type[ty]].as_str(), &[mem[a], mem[b]])
                    || !measured_enough(round, &model, &round.jobs[a], &round.jobs[b])
                {
                    continue;
                }
                if out.len() >= PAIR_BUDGET {
                    notes.push(format!(
                        "sharing: more than {PAIR_BUDGET} pair options; the rest dropped"
                    ));
                    break 'enumerate;
                }
                let mut u = |j: usize| {
                    *util
                        .entry((j, k))
                        .or_insert_with(|| predicted_utilization(&round.jobs[j], 1, k))
                };
                let (ka, kb) = (&round.jobs[a].colocation_key, &round.jobs[b].colocation_key);
                let fs = model.group(&[(ka.as_deref(), u(a)), (kb.as_deref(), u(b))]);
                out.push(GroupOpt {
                    members: vec![a, b],
                    values: vec![va / fs[0], vb / fs[1]],
                    ty,
                    gpus: k,
                    keep: false,
                });
            }
        }
    }
    let before = out.len();
    let mut out = prune(round, sharers, out);
    note_pruned(notes, before, out.len());
    let larger = larger_groups(round, kind_type, sharers, &out, notes);
    out.extend(larger);
    out
}

/// Groups of 3 to k jobs (k = `params.sharing`), grown one job at a time
/// from the pruned pairs: a group of size s + 1 is a group of size s that
/// survived pruning and one more job, later than its members, paired (in `pairs`, at the
/// same kind and GPUs) with every one of them, all memories fitting
/// together ([`may_group`]). So the enumeration stays within the pruned
/// pair graph; each size is pruned as pairs are ([`prune`]), and at most
/// [`GROUP_BUDGET`] options are built over all sizes. Valued at each
/// member's single-node value over the group's predicted slowdown.
fn larger_groups(
    round: &Round,
    kind_type: &[usize],
    sharers: &[Sharer],
    pairs: &[GroupOpt],
    notes: &mut Vec<String>,
) -> Vec<GroupOpt> {
    let k = round.params.sharing as usize;
    if k < 3 {
        return Vec::new();
    }
    let model = round_model(round);
    let names = round.cluster.types();
    // The pruned pair graph per (kind, GPUs): later partners of each job, and every edge.
    let mut later: HashMap<(usize, u32, usize), Vec<usize>> = HashMap::new();
    let mut edge: HashSet<(usize, u32, usize, usize)> = HashSet::new();
    let moving: Vec<&GroupOpt> = pairs.iter().filter(|p| !p.keep && p.members.len() == 2).collect();
    for p in &moving {
        let (a, b) = (p.members[0], p.members[1]);
        later.entry((p.ty, p.gpus, a)).or_default().push(b);
        edge.insert((p.ty, p.gpus, a, b));
    }
    let mut out: Vec<GroupOpt> = Vec::new();
    let mut last: Vec<GroupOpt> = moving.into_iter().cloned().collect();
    let mut built = 0usize;
    'sizes: for _ in 3..=k {
        let mut grown = Vec::new();
        for g in &last {
            let top = *g.members.last().unwrap_or(&0);
            let Some(next) = later.get(&(g.ty, g.gpus, g.members[0])) else {
                continue;
            };
            for &c in next.iter().filter(|&&c| c > top) {
                if !g.members[1..]
                    .iter()
                    .all(|&m| edge.contains(&(g.ty, g.gpus, m, c)))
                {
                    continue;
                }
                let mut members = g.members.clone();
                members.push(c);
                let jobs: Vec<&RoundJob> = members.iter().map(|&j| &round.jobs[j]).collect();
                if !may_group(round, &model, names[kind_type[g.ty]].as_str(), &jobs) {
                    continue;
                }
                let Some(solo) = members
                    .iter()
                    .map(|&j| sharers[j].single(g.ty, g.gpus))
                    .collect::<Option<Vec<f64>>>()
                else {
                    continue;
                };
                if built >= GROUP_BUDGET {
                    notes.push(format!(
                        "sharing: more than {GROUP_BUDGET} options of three or more jobs; the rest dropped"
                    ));
                    out.extend(prune(round, sharers, grown));
                    break 'sizes;
                }
                built += 1;
                let fs = predicted_group(&model, &jobs, g.gpus);
                grown.push(GroupOpt {
                    values: solo.iter().zip(&fs).map(|(v, f)| v / f).collect(),
                    members,
                    ty: g.ty,
                    gpus: g.gpus,
                    keep: false,
                });
            }
        }
        let before = grown.len();
        last = prune(round, sharers, grown);
        note_pruned(notes, before, last.len());
        out.extend(last.iter().cloned());
        if last.is_empty() {
            break;
        }
    }
    out
}

/// Say that pruning dropped group options: the model then leaves out
/// plans of the round, so its bound is not the round's ([`model_is_partial`]).
fn note_pruned(notes: &mut Vec<String>, before: usize, after: usize) {
    if after < before {
        notes.push(format!(
            "sharing: {} of {before} group options pruned (each job keeps its best {PARTNERS} partners)",
            before - after
        ));
    }
}

/// Why a sharing model built from these options leaves out plans of the
/// round, if it does: options dropped or pruned (a `sharing:` note), or a
/// running job that another job could join on its own GPUs, which no group
/// option offers (a joiner is valued as moving, the job that stays is not
/// charged a restart). Its bound is then not the round's.
pub fn model_is_partial(
    round: &Round,
    node_kind: &[usize],
    sharers: &[Sharer],
    notes: &[String],
) -> Option<String> {
    if round.params.sharing < 2 {
        return None;
    }
    if let Some(n) = notes.iter().find(|n| n.starts_with("sharing:")) {
        return Some(n.clone());
    }
    for (a, s) in sharers.iter().enumerate() {
        if s.keep.is_none() {
            continue;
        }
        let cur = round.jobs[a].current();
        let per = cur.per_node();
        let [(node, g)] = per[..] else { continue };
        let Some(&ty) = node_kind.get(node.0 as usize) else {
            continue;
        };
        // Those on its GPUs now stay together as a kept group; a full
        // GPU takes no one else.
        let holders: Vec<usize> = (0..round.jobs.len())
            .filter(|&b| round.jobs[b].current().same_gpus(cur))
            .collect();
        if holders.len() as u32 >= round.params.sharing {
            continue;
        }
        if sharers
            .iter()
            .enumerate()
            .any(|(b, t)| !holders.contains(&b) && t.single(ty, g).is_some())
        {
            return Some(format!(
                "another job could join {} on its GPUs, which the group options do not offer",
                round.jobs[a].name
            ));
        }
    }
    None
}

/// Keep a group only if it is among the best [`PARTNERS`] groups of its
/// size, by gain, of one of its jobs at its (kind, GPUs). A group's gain is
/// what its objective terms win over the best use of the same GPUs by one
/// of its jobs alone, the others waiting. A heuristic, not a dominance
/// argument: the optimum may use a pruned group (measured in
/// docs/colocation.md); rounds where no job has more than [`PARTNERS`]
/// partners at a (kind, GPUs) keep every pair. `groups` are all of one size.
fn prune(round: &Round, sharers: &[Sharer], groups: Vec<GroupOpt>) -> Vec<GroupOpt> {
    let sense = Sense::of(round.params.p);
    let shares = gpuplan_core::objective::queue_shares(round);
    // Job j's term in maximisation form (weighted by its queue share), so
    // a larger gain is better for every p.
    let score = |j: usize, v: f64| {
        let t = sense.weighted(v, shares.as_ref().map_or(1.0, |s| s[j]));
        match sense {
            Sense::MinPower(_) => -t,
            _ => t,
        }
    };
    let none: Vec<f64> = round
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| score(i, gpuplan_core::objective::prioritise(j, &round.params, 0.0)))
        .collect();
    let solo = |j: usize, ty: usize, k: u32| {
        sharers[j]
            .single(ty, k)
            .map_or(f64::NEG_INFINITY, |v| score(j, v))
    };
    let mut by: HashMap<(usize, usize, u32), Vec<(f64, usize)>> = HashMap::new();
    for (i, p) in groups.iter().enumerate() {
        // Each member alone in turn, summed in member order.
        let alone = (0..p.members.len())
            .map(|m| {
                p.members
                    .iter()
                    .enumerate()
                    .map(|(x, &j)| if x == m { solo(j, p.ty, p.gpus) } else { none[j] })
                    .reduce(|s, t| s + t)
                    .unwrap_or(0.0)
            })
            .fold(f64::NEG_INFINITY, f64::max);
        let won = p
            .values
            .iter()
            .zip(&p.members)
            .map(|(&v, &j)| score(j, v))
            .reduce(|s, t| s + t)
            .unwrap_or(0.0);
        let gain = won - alone;
        for &j in &p.members {
            by.entry((j, p.ty, p.gpus)).or_default().push((gain, i));
        }
    }
    let mut kept = vec![false; groups.len()];
    for list in by.values_mut() {
        list.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, i) in list.iter().take(PARTNERS) {
            kept[i] = true;
        }
    }
    groups
        .into_iter()
        .zip(kept)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
}

/// Name the GPUs of a group placed on `node`: all its jobs get the same
/// ones, their own current GPUs on the node first, then the lowest not in
/// `taken` (the plan's named GPUs, which this extends). Unnamed
/// allocations are bound later and avoid named GPUs; the caller's counts
/// leave room for the group.
pub fn name_group_gpus(
    round: &Round,
    taken: &mut BTreeSet<(u32, u32)>,
    p: &GroupOpt,
    gpus: u32,
    node: usize,
) -> Result<Allocation, String> {
    let n = node as u32;
    let mut want: Vec<u32> = p
        .members
        .iter()
        .flat_map(|&j| round.jobs[j].current().gpus().to_vec())
        .filter(|g| g.is_bound() && g.node.0 == n)
        .map(|g| g.index)
        .collect();
    want.extend(0..round.cluster.nodes[node].gpus);
    let mut got = Vec::new();
    for ix in want {
        if got.len() as u32 == gpus {
            break;
        }
        if taken.insert((n, ix)) {
            got.push(GpuId::new(NodeId(n), ix));
        }
    }
    if got.len() as u32 != gpus {
        let what = if p.members.len() == 2 { "pair" } else { "group" };
        return Err(format!("no {gpus} free GPUs on node {n} for a shared {what}"));
    }
    Ok(Allocation::from_gpus(got))
}

/// The named GPUs of some allocations, as [`name_group_gpus`] takes them.
pub fn named_gpus<'a>(allocs: impl IntoIterator<Item = &'a Allocation>) -> BTreeSet<(u32, u32)> {
    allocs
        .into_iter()
        .flat_map(|a| {
            a.gpus()
                .iter()
                .filter(|g| g.is_bound())
                .map(|g| (g.node.0, g.index))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::type_capacity;
    use crate::testutil::{job, round};

    /// `n` light one-GPU jobs on one 4-GPU T4 node, sharing on; job i
    /// alone is worth `1 − i/100` on one GPU.
    fn light(n: u32) -> (Round, Vec<Sharer>) {
        let jobs = (0..n)
            .map(|i| {
                let mut j = job(i, 1, 0.0);
                j.utilization = Some(0.1);
                j.mem_gib = Some(1.0);
                j
            })
            .collect();
        let mut r = round("1x4", jobs, gpuplan_core::Interference::Avoid);
        r.params.sharing = 2;
        let sharers = (0..n)
            .map(|i| Sharer {
                singles: vec![(0, 1, 1.0 - i as f64 / 100.0)],
                keep: None,
            })
            .collect();
        (r, sharers)
    }

    /// k = 3 and 4 over four light jobs (1 GiB each): all 4 triples, then
    /// the one group of four; every pair inside a group is a pair option;
    /// values are each job's single value over the curve at the summed
    /// utilization (0.3 and 0.4, both at the knee or below: base). With
    /// 6 GiB jobs no three fit a T4 and only pairs are built.
    #[test]
    fn groups_grow_from_the_pruned_pairs_within_memory() {
        for (k, want) in [(2, 6), (3, 6 + 4), (4, 6 + 4 + 1)] {
            let (mut r, s) = light(4);
            r.params.sharing = k;
            let all = group_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
            assert_eq!(all.len(), want, "k = {k}");
            for g in &all {
                assert!(g.members.len() <= k as usize && g.members.windows(2).all(|w| w[0] < w[1]));
                for (x, &a) in g.members.iter().enumerate() {
                    for &b in &g.members[x + 1..] {
                        assert!(all.iter().any(|p| p.members == [a, b]), "{g:?}");
                    }
                }
                let f = gpuplan_core::colocation::GAVEL_CURVE.base;
                for (&j, &v) in g.members.iter().zip(&g.values) {
                    assert!((v - (1.0 - j as f64 / 100.0) / f).abs() < 1e-12, "{g:?}");
                }
            }
        }
        let (mut r, s) = light(4);
        r.params.sharing = 3;
        for j in &mut r.jobs {
            j.mem_gib = Some(6.0);
        }
        let all = group_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
        assert!(all.iter().all(|g| g.members.len() == 2) && all.len() == 6);
    }

    /// With at most PARTNERS partners per job nothing is pruned; with
    /// more, each job keeps its PARTNERS best partners (here the most
    /// valuable jobs, as every pair slows alike), and a pair that neither
    /// job ranks among its best is dropped.
    #[test]
    fn pruning_keeps_each_jobs_best_partners() {
        let n = PARTNERS as u32 + 1;
        let (r, s) = light(n);
        let all = group_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
        assert_eq!(all.len(), (n * (n - 1) / 2) as usize);
        let (r, s) = light(20);
        let kept = group_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
        // The 28 pairs among jobs 0..8 and the 12 × 8 of every other job with them.
        assert_eq!(kept.len(), 28 + 12 * 8);
        // Job 19 (the least valuable) keeps jobs 0..8.
        for b in 0..PARTNERS {
            assert!(kept.iter().any(|p| p.members == [b, 19]), "0..8 with 19");
        }
        for p in &kept {
            assert!(
                p.members[0] < PARTNERS || p.members[1] < PARTNERS,
                "{p:?}: neither ranks the other"
            );
        }
    }
}
