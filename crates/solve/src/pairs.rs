//! Pair options for GPU sharing (issue 15), shared by both MIP
//! formulations (`mip-exact` and `mip-aggregate`) and the packer: which two
//! jobs may share `k` GPUs of one node and what each is worth there, which
//! pairs share now and may stay, and which GPUs a placed pair gets. One
//! module so that the two formulations cannot drift apart on who may share
//! or at what value; the rules themselves live in core
//! (`gpuplan_core::colocation`), which the validator calls too.

use std::collections::{BTreeSet, HashMap};

use gpuplan_core::colocation::{
    fits_memory, job_memory_gib, may_pair, measured_enough, predicted_pair, predicted_utilization,
    round_model, shared_gpus,
};
use gpuplan_core::{Allocation, GpuId, NodeId, Round};

use crate::candidates::{Sense, TypeCapacity};

/// Two jobs sharing `gpus` GPUs of one node of type `ty` (params.sharing
/// ≥ 2): one joint option, so the objective stays linear. Each job's value
/// is its single-node value there divided by the pair's predicted slowdown.
/// A kept pair (`keep`: both already share exactly these GPUs and stay)
/// is valued at their keep values, without the restart factor, and takes
/// no new GPUs: it is an occupant of its node, as a kept job is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairOpt {
    pub a: usize,
    pub b: usize,
    pub ty: usize,
    pub gpus: u32,
    pub va: f64,
    pub vb: f64,
    pub keep: bool,
}

/// Most pair options one model gets; past it the rest are dropped (with a
/// note), so sharing cannot blow up the solve.
pub const PAIR_BUDGET: usize = 20_000;

/// Partners kept per job and (GPU type, GPUs) ([`prune`]): with n jobs
/// that may all pair, the pair options grow like n², and so does the
/// solve (256 GPUs × 100 jobs took ~4 s with all 4,950 pairs against
/// 0.15 s without sharing); a job rarely gains from more than its few best
/// partners.
pub const PARTNERS: usize = 8;

/// One job as the pair rules see it, in a formulation's own values.
#[derive(Debug, Clone, Default)]
pub struct Sharer {
    /// The single-node options it may share: (GPU type, GPUs, value).
    /// Empty for a pinned job.
    pub singles: Vec<(usize, u32, f64)>,
    /// Its keep value where it may keep its GPUs (never for a pinned job).
    pub keep: Option<f64>,
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

/// With `params.sharing` ≥ 2, the pairs that share exactly the same GPUs
/// of one node now, with no third job on them, and may both keep them: the
/// option to stay as they are, at each job's keep value (no restart) over
/// the pair's predicted slowdown. A model's node kinds (GPU types, or
/// mip-exact's type × speed groups) are `node_kind` per node and
/// `kind_type` per kind; [`PairOpt::ty`] is the kind.
pub fn kept_pairs(
    round: &Round,
    node_kind: &[usize],
    kind_type: &[usize],
    sharers: &[Sharer],
) -> Vec<PairOpt> {
    if round.params.sharing < 2 {
        return Vec::new();
    }
    let model = round_model(round);
    let pairs = overlapping_now(round);
    let mut out = Vec::new();
    for &(a, b) in &pairs {
        let (ja, jb) = (&round.jobs[a], &round.jobs[b]);
        let per = ja.current().per_node();
        let third = pairs
            .iter()
            .any(|&(x, y)| (x == a || x == b || y == a || y == b) && (x, y) != (a, b));
        let ty = node_kind[per.first().map_or(0, |x| x.0 .0 as usize)];
        let fits = may_pair(
            round,
            &model,
            round.cluster.types()[kind_type[ty]].as_str(),
            ja,
            jb,
        );
        if per.len() != 1 || !ja.current().same_gpus(jb.current()) || third || !fits {
            continue;
        }
        let (Some(va), Some(vb)) = (sharers[a].keep, sharers[b].keep) else {
            continue;
        };
        let g = ja.current().num_gpus();
        let (fa, fb) = predicted_pair(&model, ja, jb, g);
        out.push(PairOpt {
            a,
            b,
            ty,
            gpus: g,
            va: va / fa,
            vb: vb / fb,
            keep: true,
        });
    }
    out
}

/// The pair options of a round with `params.sharing` ≥ 2: every two
/// movable jobs that both may run on `k` GPUs of one node of a type, whose
/// memories fit together in that type's GPU and, under `sharing_pairs =
/// measured`, whose pair was measured; each valued by the round's model
/// (measured pair, else curve). Only pairs (k = 2 jobs per
/// GPU): a third job on a GPU is never planned. At most [`PAIR_BUDGET`],
/// then pruned to each job's best [`PARTNERS`] per (type, GPUs). `kinds`
/// and `kind_type`: each node kind's capacity and GPU type ([`kept_pairs`]).
pub fn pair_options(
    round: &Round,
    kinds: &[TypeCapacity],
    kind_type: &[usize],
    sharers: &[Sharer],
    notes: &mut Vec<String>,
) -> Vec<PairOpt> {
    if round.params.sharing < 2 {
        return Vec::new();
    }
    let model = round_model(round);
    let names = round.cluster.types();
    let mut util: HashMap<(usize, u32), f64> = HashMap::new();
    let mem: Vec<Option<f64>> = round.jobs.iter().map(job_memory_gib).collect();
    let mut out = Vec::new();
    for a in 0..sharers.len() {
        for b in a + 1..sharers.len() {
            for &(ty, k, va) in &sharers[a].singles {
                let Some(&(_, _, vb)) = sharers[b].singles.iter().find(|&&(t, g, _)| t == ty && g == k)
                else {
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
                    return prune(round, sharers, out);
                }
                let mut u = |j: usize| {
                    *util
                        .entry((j, k))
                        .or_insert_with(|| predicted_utilization(&round.jobs[j], 1, k))
                };
                let (ka, kb) = (&round.jobs[a].colocation_key, &round.jobs[b].colocation_key);
                let (fa, fb) = model.pair((ka.as_deref(), u(a)), (kb.as_deref(), u(b)));
                out.push(PairOpt {
                    a,
                    b,
                    ty,
                    gpus: k,
                    va: va / fa,
                    vb: vb / fb,
                    keep: false,
                });
            }
        }
    }
    prune(round, sharers, out)
}

/// Keep a pair only if it is among the best [`PARTNERS`] pairs, by gain,
/// of one of its two jobs at its (type, GPUs). A pair's gain is what its
/// two objective terms win over the better use of the same GPUs by one of
/// the two jobs alone, the other waiting. A heuristic, not a dominance
/// argument: the optimum may use a pruned pair (measured in
/// docs/colocation.md); rounds where no job has more than [`PARTNERS`]
/// partners at a (type, GPUs) keep every pair.
fn prune(round: &Round, sharers: &[Sharer], pairs: Vec<PairOpt>) -> Vec<PairOpt> {
    let sense = Sense::of(round.params.p);
    // In maximisation form, so a larger gain is better for every p.
    let score = |v: f64| match sense {
        Sense::MinPower(_) => -sense.term(v),
        _ => sense.term(v),
    };
    let none: Vec<f64> = round
        .jobs
        .iter()
        .map(|j| score(gpuplan_core::objective::prioritise(j, &round.params, 0.0)))
        .collect();
    let solo = |j: usize, ty: usize, k: u32| {
        sharers[j]
            .singles
            .iter()
            .find(|&&(t, g, _)| t == ty && g == k)
            .map_or(f64::NEG_INFINITY, |x| score(x.2))
    };
    let mut by: HashMap<(usize, usize, u32), Vec<(f64, usize)>> = HashMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let alone = (solo(p.a, p.ty, p.gpus) + none[p.b]).max(none[p.a] + solo(p.b, p.ty, p.gpus));
        let gain = score(p.va) + score(p.vb) - alone;
        for j in [p.a, p.b] {
            by.entry((j, p.ty, p.gpus)).or_default().push((gain, i));
        }
    }
    let mut kept = vec![false; pairs.len()];
    for list in by.values_mut() {
        list.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, i) in list.iter().take(PARTNERS) {
            kept[i] = true;
        }
    }
    pairs
        .into_iter()
        .zip(kept)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
}

/// Name the GPUs of a pair placed on `node`: both jobs get the same ones,
/// their own current GPUs on the node first, then the lowest not in
/// `taken` (the plan's named GPUs, which this extends). Unnamed
/// allocations are bound later and avoid named GPUs; the caller's counts
/// leave room for both.
pub fn name_pair_gpus(
    round: &Round,
    taken: &mut BTreeSet<(u32, u32)>,
    p: &PairOpt,
    gpus: u32,
    node: usize,
) -> Result<Allocation, String> {
    let n = node as u32;
    let mut want: Vec<u32> = [p.a, p.b]
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
        return Err(format!("no {gpus} free GPUs on node {n} for a shared pair"));
    }
    Ok(Allocation::from_gpus(got))
}

/// The named GPUs of some allocations, as [`name_pair_gpus`] takes them.
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

    /// With at most PARTNERS partners per job nothing is pruned; with
    /// more, each job keeps its PARTNERS best partners (here the most
    /// valuable jobs, as every pair slows alike), and a pair that neither
    /// job ranks among its best is dropped.
    #[test]
    fn pruning_keeps_each_jobs_best_partners() {
        let n = PARTNERS as u32 + 1;
        let (r, s) = light(n);
        let all = pair_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
        assert_eq!(all.len(), (n * (n - 1) / 2) as usize);
        let (r, s) = light(20);
        let kept = pair_options(&r, &type_capacity(&r.cluster), &[0], &s, &mut Vec::new());
        // The 28 pairs among jobs 0..8 and the 12 × 8 of every other job with them.
        assert_eq!(kept.len(), 28 + 12 * 8);
        // Job 19 (the least valuable) keeps jobs 0..8.
        for b in 0..PARTNERS {
            assert!(kept.iter().any(|p| (p.a, p.b) == (b, 19)), "0..8 with 19");
        }
        for p in &kept {
            assert!(p.a < PARTNERS || p.b < PARTNERS, "{p:?}: neither ranks the other");
        }
    }
}
