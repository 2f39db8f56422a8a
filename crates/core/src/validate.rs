//! The one independent validator every planner's output goes through
//! ([`validate`]): capacity, limits, locality, interference, GPU types,
//! pinned jobs, sharing and the queues' guarantees and limits, checked in
//! one place.
//!
//! It reads the sharing rules ([`crate::colocation`]), which read plans,
//! so it sits above the plan.

use crate::job::JobId;
use crate::plan::Plan;
use crate::round::{Interference, Round};
use crate::NodeId;

/// One broken rule in a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// The plan gives GPUs to a job the round does not have.
    #[error("job {0:?} is not in the round")]
    UnknownJob(JobId),
    /// An allocation names a node index past the cluster's last.
    #[error("job {job:?} uses node {node} which does not exist")]
    UnknownNode {
        /// The job given the node.
        job: JobId,
        /// The node index it names.
        node: u32,
    },
    /// More GPUs handed out on a node than it has.
    #[error("node {node} holds {used} GPUs but has {capacity}")]
    Capacity {
        /// The node's index.
        node: u32,
        /// GPUs the plan (and reserved GPUs) use there.
        used: u32,
        /// GPUs the node has.
        capacity: u32,
    },
    /// A running job's GPU count outside its `[min_gpus, max_gpus]`.
    #[error("job {job:?} gets {gpus} GPUs, outside its limits [{min}, {max}]")]
    GpuLimits {
        /// The job.
        job: JobId,
        /// GPUs the plan gives it.
        gpus: u32,
        /// Its `min_gpus`.
        min: u32,
        /// Its `max_gpus`.
        max: u32,
    },
    /// A job spread over more nodes than `params.max_nodes_per_job`.
    #[error("job {job:?} spans {nodes} nodes, more than the limit {max}")]
    TooManyNodes {
        /// The job.
        job: JobId,
        /// Nodes it spans in the plan.
        nodes: u32,
        /// The round's limit.
        max: u32,
    },
    /// Several multi-node jobs on one node under `Interference::Avoid`.
    #[error("node {node} hosts {count} multi-node jobs; at most one is allowed")]
    Interference {
        /// The node's index.
        node: u32,
        /// Multi-node jobs placed on it.
        count: u32,
    },
    /// A non-preemptible running job that does not keep its exact GPUs.
    #[error("job {0:?} is not preemptible and was moved or stopped")]
    PinnedMoved(JobId),
    /// A named GPU index past the node's GPU count.
    #[error("job {job:?} uses GPU {index} of node {node}, which has {capacity}")]
    UnknownGpu {
        /// The job given the GPU.
        job: JobId,
        /// The node's index.
        node: u32,
        /// The GPU index it names.
        index: u32,
        /// GPUs the node has.
        capacity: u32,
    },
    /// One GPU given to two jobs while sharing is off (`params.sharing` 1).
    #[error("GPU {index} of node {node} is given to jobs {first:?} and {second:?}")]
    SharedGpu {
        /// The node's index.
        node: u32,
        /// The GPU's index on the node.
        index: u32,
        /// The first job holding it.
        first: JobId,
        /// The second job holding it.
        second: JobId,
    },
    /// More jobs on one GPU than `params.sharing` allows.
    #[error("GPU {index} of node {node} holds {count} jobs; params.sharing allows {max}")]
    OverShared {
        /// The node's index.
        node: u32,
        /// The GPU's index on the node.
        index: u32,
        /// Jobs placed on the GPU.
        count: u32,
        /// `params.sharing`.
        max: u32,
    },
    /// Jobs sharing a GPU whose pair was never measured, under `sharing_pairs: measured`.
    #[error("GPU {index} of node {node} is shared by jobs {jobs:?} whose pair was not measured; params.sharing_pairs is measured")]
    Unmeasured {
        /// The node's index.
        node: u32,
        /// The GPU's index on the node.
        index: u32,
        /// The jobs sharing it.
        jobs: Vec<JobId>,
    },
    /// Jobs sharing a GPU whose memory needs exceed (or are unknown to) its type's memory.
    #[error("GPU {index} of node {node} ({gpu_type}) is shared by jobs {jobs:?} that do not fit in its memory (need {need})")]
    Memory {
        /// The node's index.
        node: u32,
        /// The GPU's index on the node.
        index: u32,
        /// The node's GPU type, whose memory is the cap.
        gpu_type: String,
        /// The jobs sharing it.
        jobs: Vec<JobId>,
        /// Each job's memory in GiB, "?" where unknown.
        need: String,
    },
    /// A job given GPUs of more than one type.
    #[error("job {job:?} mixes GPU types ({types})")]
    MixedTypes {
        /// The job.
        job: JobId,
        /// The types it got, listed.
        types: String,
    },
    /// Unequal GPU counts on a multi-node job's nodes, when the round asks for even nodes.
    #[error("job {job:?} holds {counts} GPUs on its nodes; the round asks for the same count on each (even_nodes)")]
    UnevenNodes {
        /// The job.
        job: JobId,
        /// Its GPU count per node, listed.
        counts: String,
    },
    /// A queue rule broken ([`crate::queue`]): a limit, a guarantee not
    /// reclaimed, lending, or a non-preemptible job on borrowed GPUs.
    #[error("{0}")]
    Queue(crate::queue::QueueBreach),
    /// A job placed on a GPU that a job outside the round holds ([`Round::reserved`]).
    #[error("job {job:?} uses GPU {index} of node {node}, which a job outside the round holds (reserved)")]
    Reserved {
        /// The job.
        job: JobId,
        /// The node's index.
        node: u32,
        /// The GPU's index on the node.
        index: u32,
    },
}

/// Check a plan against the round: per-node and per-GPU capacity (a named
/// GPU exists and goes to one job), GPU limits, locality (node limit),
/// interference, one GPU type per job, and pinned (non-preemptible) jobs.
///
/// Independent of every planner on purpose: tests run all planners' plans
/// through it, so one planner's bug cannot hide behind its own checks.
pub fn validate(round: &Round, plan: &Plan) -> Result<(), Vec<Violation>> {
    validate_under(round, plan, &round.params)
}

/// [`validate`] under other policy parameters than the round's: the rules
/// a planner is held to (the pipeline relaxes the interference rule for
/// planners that do not claim it).
pub fn validate_under(
    round: &Round,
    plan: &Plan,
    params: &crate::PolicyParams,
) -> Result<(), Vec<Violation>> {
    validate_rules(round, plan, params, QueueRules::Checked)
}

/// Whether [`validate_rules`] checks the round's queue rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueRules {
    /// Checked: every plan a driver applies.
    Checked,
    /// Left to the pipeline's queue stage, which runs after the planner:
    /// a planner's own check of its solution (as `even_nodes`).
    Deferred,
}

/// [`validate_under`], with the queue rules checked or deferred.
pub fn validate_rules(
    round: &Round,
    plan: &Plan,
    params: &crate::PolicyParams,
    queues: QueueRules,
) -> Result<(), Vec<Violation>> {
    let mut errs = Vec::new();
    // Sorted (id, index) pairs: a binary search per job, no hashing.
    let mut jobs: Vec<(JobId, usize)> = round.jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    jobs.sort_unstable();
    let n_nodes = round.cluster.num_nodes();
    let mut used = vec![0u32; n_nodes];
    let mut multi = vec![0u32; n_nodes];
    let mut holder: crate::gpu_table::GpuTable<Option<JobId>> =
        crate::gpu_table::GpuTable::new(&round.cluster, None);
    // With sharing (k > 1): every holder of each GPU, checked after the loop.
    let k = params.sharing.max(1);
    // GPUs in use per node under sharing: distinct named GPUs plus unnamed
    // slots (each a GPU of its own: only a planner that names GPUs shares).
    let mut distinct = vec![0u32; n_nodes];
    // A reserved GPU is in use on its node, whatever the round plans.
    let mut reserved = crate::gpu_table::GpuTable::new(&round.cluster, false);
    for g in &round.reserved {
        if let Some(r) = reserved.get_mut(*g) {
            if !*r {
                *r = true;
                used[g.node.0 as usize] = used[g.node.0 as usize].saturating_add(1);
                distinct[g.node.0 as usize] += 1;
            }
        }
    }
    let mut sharers: crate::gpu_table::GpuTable<Vec<usize>> = if k > 1 {
        crate::gpu_table::GpuTable::new(&round.cluster, Vec::new())
    } else {
        crate::gpu_table::GpuTable::new(&crate::Cluster { nodes: Vec::new() }, Vec::new())
    };
    for (&id, alloc) in &plan.allocations {
        let Ok(ji) = jobs.binary_search_by_key(&id, |&(j, _)| j).map(|k| jobs[k].1) else {
            errs.push(Violation::UnknownJob(id));
            continue;
        };
        let job = &round.jobs[ji];
        if alloc.is_empty() {
            continue;
        }
        let mut ok_nodes = true;
        for (n, k) in alloc.node_runs() {
            if (n.0 as usize) < n_nodes {
                used[n.0 as usize] = used[n.0 as usize].saturating_add(k);
            } else {
                errs.push(Violation::UnknownNode { job: id, node: n.0 });
                ok_nodes = false;
            }
        }
        for g in alloc.gpus().iter().filter(|g| g.is_bound()) {
            let Some(node) = round.cluster.nodes.get(g.node.0 as usize) else {
                continue;
            };
            if g.index >= node.gpus {
                errs.push(Violation::UnknownGpu {
                    job: id,
                    node: g.node.0,
                    index: g.index,
                    capacity: node.gpus,
                });
            } else if reserved.get_mut(*g).is_some_and(|r| *r) {
                // Counted once on its node, as reserved.
                used[g.node.0 as usize] -= 1;
                errs.push(Violation::Reserved {
                    job: id,
                    node: g.node.0,
                    index: g.index,
                });
            } else if k > 1 {
                if let Some(h) = sharers.get_mut(*g) {
                    if h.is_empty() {
                        distinct[g.node.0 as usize] += 1;
                    }
                    h.push(ji);
                }
            } else if let Some(h) = holder.get_mut(*g) {
                if let Some(first) = *h {
                    errs.push(Violation::SharedGpu {
                        node: g.node.0,
                        index: g.index,
                        first,
                        second: id,
                    });
                }
                *h = Some(id);
            }
        }
        job_shape(round, job, alloc, params, ok_nodes, &mut errs);
        let nodes = alloc.num_nodes();
        if nodes > 1 && ok_nodes {
            for (n, _) in alloc.node_runs() {
                multi[n.0 as usize] += 1;
            }
        }
    }
    if k > 1 {
        shared_gpus(round, &mut sharers, k, &mut errs);
    }
    if k > 1 {
        for alloc in plan.allocations.values() {
            for g in alloc.gpus().iter().filter(|g| !g.is_bound()) {
                if let Some(d) = distinct.get_mut(g.node.0 as usize) {
                    *d += 1;
                }
            }
        }
    }
    // GPUs in use per node: distinct GPUs under sharing, else every holder.
    let in_use = if k > 1 { &distinct } else { &used };
    node_totals(round, in_use, &multi, params, &mut errs);
    for job in &round.jobs {
        if !job.preemptible
            && !job.state.allocation.is_empty()
            && !plan.gpus_of(job.id).same_gpus(&job.state.allocation)
        {
            errs.push(Violation::PinnedMoved(job.id));
        }
    }
    if queues == QueueRules::Checked {
        if let Some(tree) = crate::queue::QueueTree::new(round) {
            let gpus: Vec<u32> = round.jobs.iter().map(|j| plan.gpus_of(j.id).num_gpus()).collect();
            errs.extend(
                tree.breaches(round, |i| gpus[i])
                    .into_iter()
                    .map(Violation::Queue),
            );
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// Each node's totals: GPUs in use within its capacity, and under
/// `interference = avoid` at most one multi-node job on it.
fn node_totals(
    round: &Round,
    in_use: &[u32],
    multi: &[u32],
    params: &crate::PolicyParams,
    errs: &mut Vec<Violation>,
) {
    for (i, node) in round.cluster.nodes.iter().enumerate() {
        if in_use[i] > node.gpus {
            errs.push(Violation::Capacity {
                node: i as u32,
                used: in_use[i],
                capacity: node.gpus,
            });
        }
        if params.interference == Interference::Avoid && multi[i] > 1 {
            errs.push(Violation::Interference {
                node: i as u32,
                count: multi[i],
            });
        }
    }
}

/// One job's allocation against its own rules: one GPU type, its GPU
/// limits, the node limit, and even node counts where asked (a kept
/// allocation keeps its counts). `ok_nodes`: every node exists.
fn job_shape(
    round: &Round,
    job: &crate::RoundJob,
    alloc: &crate::Allocation,
    params: &crate::PolicyParams,
    ok_nodes: bool,
    errs: &mut Vec<Violation>,
) {
    let type_of = |n: NodeId| round.cluster.nodes[n.0 as usize].gpu_type.as_str();
    if ok_nodes
        && alloc
            .node_runs()
            .any(|(n, _)| type_of(n) != type_of(alloc.gpus()[0].node))
    {
        let mut types: Vec<&str> = alloc.node_runs().map(|(n, _)| type_of(n)).collect();
        types.sort_unstable();
        types.dedup();
        errs.push(Violation::MixedTypes {
            job: job.id,
            types: types.join(", "),
        });
    }
    let gpus = alloc.num_gpus();
    if gpus < job.min_gpus.max(1) || gpus > job.max_gpus {
        errs.push(Violation::GpuLimits {
            job: job.id,
            gpus,
            min: job.min_gpus,
            max: job.max_gpus,
        });
    }
    let nodes = alloc.num_nodes();
    if nodes > params.max_nodes_per_job {
        errs.push(Violation::TooManyNodes {
            job: job.id,
            nodes,
            max: params.max_nodes_per_job,
        });
    }
    if params.even_nodes == crate::NodeCounts::Even && nodes > 1 && !alloc.same_gpus(&job.state.allocation) {
        let counts: Vec<u32> = alloc.per_node().iter().map(|&(_, k)| k).collect();
        if counts.iter().any(|&k| k != counts[0]) {
            errs.push(Violation::UnevenNodes {
                job: job.id,
                counts: counts.iter().map(u32::to_string).collect::<Vec<_>>().join("+"),
            });
        }
    }
}

/// Sharing rules per GPU: at most `k` jobs, the jobs of a shared GPU fit
/// in its memory ([`crate::colocation::fits_memory`]), and under
/// `sharing_pairs = measured` every pair on it was measured.
fn shared_gpus(
    round: &Round,
    sharers: &mut crate::gpu_table::GpuTable<Vec<usize>>,
    k: u32,
    errs: &mut Vec<Violation>,
) {
    let model = crate::colocation::round_model(round);
    for (n, node) in round.cluster.nodes.iter().enumerate() {
        for index in 0..node.gpus {
            let Some(h) = sharers.get_mut(crate::GpuId::new(NodeId(n as u32), index)) else {
                continue;
            };
            if h.len() <= 1 {
                continue;
            }
            if h.len() as u32 > k {
                errs.push(Violation::OverShared {
                    node: n as u32,
                    index,
                    count: h.len() as u32,
                    max: k,
                });
            }
            let unmeasured = h.iter().enumerate().any(|(i, &a)| {
                h[i + 1..].iter().any(|&b| {
                    !crate::colocation::measured_enough(round, &model, &round.jobs[a], &round.jobs[b])
                })
            });
            if unmeasured {
                errs.push(Violation::Unmeasured {
                    node: n as u32,
                    index,
                    jobs: h.iter().map(|&j| round.jobs[j].id).collect(),
                });
            }
            let mems: Vec<Option<f64>> = h
                .iter()
                .map(|&j| crate::colocation::job_memory_gib(&round.jobs[j]))
                .collect();
            if !crate::colocation::fits_memory(node.gpu_type.as_str(), &mems) {
                errs.push(Violation::Memory {
                    node: n as u32,
                    index,
                    gpu_type: node.gpu_type.as_str().to_string(),
                    jobs: h.iter().map(|&j| round.jobs[j].id).collect(),
                    need: mems
                        .iter()
                        .map(|m| m.map_or("?".to_string(), |m| format!("{m} GiB")))
                        .collect::<Vec<_>>()
                        .join(" + "),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanStatus;
    use crate::round::test_round;
    use crate::{Allocation, GpuId, JobState, NodeId, RoundJob};

    fn job(id: u32, preemptible: bool, alloc: Allocation) -> RoundJob {
        RoundJob {
            requested_gpus: 2,
            preemptible,
            state: JobState {
                allocation: alloc,
                ..JobState::default()
            },
            ..crate::round::test_job(id)
        }
    }

    fn g(n: u32, i: u32) -> GpuId {
        GpuId::new(NodeId(n), i)
    }

    fn plan(allocs: &[(u32, Allocation)]) -> Plan {
        let mut p = Plan::new("t", PlanStatus::Feasible);
        for (id, a) in allocs {
            p.allocations.insert(JobId(*id), a.clone());
        }
        p
    }

    #[test]
    fn a_job_mixing_gpu_types_is_rejected() {
        let r = test_round(vec![job(0, true, Allocation::default())]);
        let mixed = plan(&[(0, Allocation::from_gpus(vec![g(0, 0), g(1, 0)]))]);
        let v = validate(&r, &mixed).unwrap_err();
        assert!(
            matches!(&v[..], [Violation::MixedTypes { job: JobId(0), types }] if types == "a100, t4"),
            "{v:?}"
        );
        let one_type = plan(&[(0, Allocation::from_gpus(vec![g(1, 0), g(1, 3)]))]);
        assert!(validate(&r, &one_type).is_ok());
    }

    #[test]
    fn one_gpu_for_two_jobs_or_a_missing_gpu_is_rejected() {
        let r = test_round(vec![
            job(0, true, Allocation::default()),
            job(1, true, Allocation::default()),
        ]);
        let shared = plan(&[
            (0, Allocation::from_gpus(vec![g(0, 0), g(0, 1)])),
            (1, Allocation::from_gpus(vec![g(0, 1)])),
        ]);
        let v = validate(&r, &shared).unwrap_err();
        assert_eq!(
            v,
            vec![Violation::SharedGpu {
                node: 0,
                index: 1,
                first: JobId(0),
                second: JobId(1)
            }]
        );
        let missing = plan(&[(0, Allocation::from_gpus(vec![g(0, 4)]))]);
        assert!(matches!(
            validate(&r, &missing).unwrap_err()[..],
            [Violation::UnknownGpu {
                node: 0,
                index: 4,
                ..
            }]
        ));
        // Node-level slots are counted per node, not per GPU.
        let counted = plan(&[
            (0, Allocation::from_counts(&[(NodeId(0), 3)])),
            (1, Allocation::from_counts(&[(NodeId(0), 2)])),
        ]);
        assert!(matches!(
            validate(&r, &counted).unwrap_err()[..],
            [Violation::Capacity {
                node: 0,
                used: 5,
                capacity: 4
            }]
        ));
    }

    #[test]
    fn sharing_passes_within_k_and_memory_and_fails_past_either() {
        let mut jobs = vec![
            job(0, true, Allocation::default()),
            job(1, true, Allocation::default()),
            job(2, true, Allocation::default()),
        ];
        for (j, app) in jobs.iter_mut().zip(["cifar10", "ncf", "imagenet"]) {
            j.app = app.into();
            j.min_gpus = 1;
        }
        let mut r = test_round(jobs);
        let one = |n, i| Allocation::from_gpus(vec![g(n, i)]);
        let pair = plan(&[(0, one(0, 1)), (1, one(0, 1))]);
        // Sharing off: one GPU, one job, as always.
        assert!(matches!(
            validate(&r, &pair).unwrap_err()[..],
            [Violation::SharedGpu { .. }]
        ));
        r.params.sharing = 2;
        // cifar10 (4 GiB) + ncf (2 GiB) on a 16 GiB T4.
        assert_eq!(validate(&r, &pair), Ok(()));
        // A third job on the GPU: past k.
        let three = plan(&[(0, one(0, 1)), (1, one(0, 1)), (2, one(0, 1))]);
        assert!(validate(&r, &three).unwrap_err().iter().any(|v| matches!(
            v,
            Violation::OverShared {
                node: 0,
                index: 1,
                count: 3,
                max: 2
            }
        )));
        // Within k but past memory: imagenet 14 + cifar10 4 > 16 GiB.
        let heavy = plan(&[(0, one(0, 1)), (2, one(0, 1))]);
        assert!(matches!(
            validate(&r, &heavy).unwrap_err()[..],
            [Violation::Memory {
                node: 0,
                index: 1,
                ..
            }]
        ));
        // A job's own mem_gib overrides its application's estimate.
        r.jobs[2].mem_gib = Some(8.0);
        assert_eq!(validate(&r, &heavy), Ok(()));
        // Only measured pairs: cifar10 + ncf share only once their pair is in
        // the round's measurements (by colocation_key), in either order.
        r.params.sharing_pairs = crate::SharingPairs::Measured;
        assert!(matches!(
            validate(&r, &pair).unwrap_err()[..],
            [Violation::Unmeasured {
                node: 0,
                index: 1,
                ..
            }]
        ));
        r.jobs[0].colocation_key = Some("a".into());
        r.jobs[1].colocation_key = Some("b".into());
        r.colocation = Some(crate::colocation::Colocation::new(
            crate::colocation::GAVEL_CURVE,
            vec![crate::colocation::MeasuredPair {
                a: "b".into(),
                b: "a".into(),
                slowdown_a: 1.2,
                slowdown_b: 1.3,
            }],
        ));
        assert_eq!(validate(&r, &pair), Ok(()));
        r.params.sharing_pairs = crate::SharingPairs::All;
        // A job of unknown memory never shares.
        r.jobs[1].app = "mystery".into();
        assert!(matches!(
            validate(&r, &pair).unwrap_err()[..],
            [Violation::Memory { .. }]
        ));
        r.jobs[1].app = "ncf".into();
        // k = 3: three on the GPU pass within memory (4 + 2 + 8 GiB), four do
        // not; three whose pairs fit but whose sum (4 + 2 + 12) does not fail.
        r.params.sharing = 3;
        assert_eq!(validate(&r, &three), Ok(()));
        r.jobs.push(job(3, true, Allocation::default()));
        r.jobs[3].app = "ncf".into();
        let four = plan(&[(0, one(0, 1)), (1, one(0, 1)), (2, one(0, 1)), (3, one(0, 1))]);
        assert!(validate(&r, &four)
            .unwrap_err()
            .iter()
            .any(|v| matches!(v, Violation::OverShared { count: 4, max: 3, .. })));
        r.jobs.pop();
        r.jobs[2].mem_gib = Some(12.0);
        assert!(validate(&r, &pair).is_ok() && validate(&r, &heavy).is_ok());
        assert!(matches!(
            validate(&r, &three).unwrap_err()[..],
            [Violation::Memory {
                node: 0,
                index: 1,
                ..
            }]
        ));
        // Under `measured`, three share only when every pair among them was measured.
        r.jobs[2].mem_gib = Some(8.0);
        r.jobs[2].colocation_key = Some("c".into());
        r.params.sharing_pairs = crate::SharingPairs::Measured;
        assert!(matches!(
            validate(&r, &three).unwrap_err()[..],
            [Violation::Unmeasured { .. }]
        ));
        let m = |a: &str, b: &str| crate::colocation::MeasuredPair {
            a: a.into(),
            b: b.into(),
            slowdown_a: 1.2,
            slowdown_b: 1.3,
        };
        r.colocation = Some(crate::colocation::Colocation::new(
            crate::colocation::GAVEL_CURVE,
            vec![m("a", "b"), m("a", "c"), m("b", "c")],
        ));
        assert_eq!(validate(&r, &three), Ok(()));
        r.params.sharing_pairs = crate::SharingPairs::All;
        // Unnamed slots are GPUs of their own: 4 + 1 on a 4-GPU node is over.
        let counted = plan(&[
            (0, Allocation::from_counts(&[(NodeId(0), 4)])),
            (2, Allocation::from_counts(&[(NodeId(0), 1)])),
        ]);
        assert!(matches!(
            validate(&r, &counted).unwrap_err()[..],
            [Violation::Capacity {
                node: 0,
                used: 5,
                capacity: 4
            }]
        ));
    }

    /// A GPU a job outside the round holds: refused by name, and counted on
    /// its node for node-level slots; the round refuses one a job of the
    /// round holds, one named twice and one that does not exist; the field
    /// is written only when set, and read as absent from older files.
    #[test]
    fn reserved_gpus_are_refused_and_counted() {
        let mut r = test_round(vec![job(0, true, Allocation::default())]);
        r.reserved = vec![g(0, 1), g(0, 2), g(0, 3)];
        r.check().unwrap();
        let e = validate(&r, &plan(&[(0, Allocation::from_gpus(vec![g(0, 0), g(0, 1)]))])).unwrap_err();
        assert_eq!(
            e,
            vec![Violation::Reserved {
                job: JobId(0),
                node: 0,
                index: 1
            }]
        );
        assert!(e[0].to_string().contains("outside the round"), "{}", e[0]);
        validate(&r, &plan(&[(0, Allocation::from_gpus(vec![g(0, 0)]))])).unwrap();
        let slots = Allocation::from_gpus(vec![GpuId::any_on(NodeId(0)), GpuId::any_on(NodeId(0))]);
        let e = validate(&r, &plan(&[(0, slots)])).unwrap_err();
        assert!(
            matches!(
                e[..],
                [Violation::Capacity {
                    node: 0,
                    used: 5,
                    capacity: 4
                }]
            ),
            "{e:?}"
        );

        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""reserved":[[0,1],[0,2],[0,3]]"#), "{json}");
        let back: Round = serde_json::from_str(&json).unwrap();
        assert_eq!(back.reserved, r.reserved);
        r.reserved.clear();
        assert!(!serde_json::to_string(&r).unwrap().contains("reserved"));

        let mut bad = test_round(vec![job(0, true, Allocation::from_gpus(vec![g(1, 0)]))]);
        bad.reserved = vec![g(1, 0), g(0, 2), g(0, 2), g(0, 9), g(5, 0)];
        let e = bad.check().unwrap_err().join("\n");
        for want in [
            "reserved[0]: GPU 0 of node 1 is held by jobs[0] (j0)",
            "reserved[2]: GPU 2 of node 0 is listed twice",
            "reserved[3]: node 0 (a) has GPUs 0..4",
            "reserved[4]: node 5 does not exist",
        ] {
            assert!(e.contains(want), "{want} in {e}");
        }
    }

    /// Pinned jobs sharing a GPU must stay so; a round where they may not
    /// (memory, unknown memory, an unmeasured pair under `measured`) has
    /// no valid plan, and its check says which field.
    #[test]
    fn pinned_sharers_that_may_not_share_are_refused_by_field() {
        let check = |r: &Round| {
            let mut errs = r.check().err().unwrap_or_default();
            crate::colocation::check_pinned_sharers(r, &mut errs);
            if errs.is_empty() {
                Ok(())
            } else {
                Err(errs)
            }
        };
        let pinned = |id, mem| RoundJob {
            mem_gib: mem,
            app: "mystery".into(),
            ..job(id, false, Allocation::from_gpus(vec![g(0, 0)]))
        };
        let mut r = test_round(vec![pinned(0, Some(8.0)), pinned(1, Some(8.0))]);
        r.params.sharing = 2;
        check(&r).unwrap();
        r.jobs[1].mem_gib = Some(12.0);
        let e = check(&r).unwrap_err().join("\n");
        assert!(e.contains("jobs[1] (j1).state.allocation: pinned jobs j0, j1 share GPU 0 of node 0 (t4) and need 20 GiB together; it holds 16 GiB"), "{e}");
        r.jobs[1].mem_gib = None;
        let e = check(&r).unwrap_err().join("\n");
        assert!(e.contains("the memory of j1 is unknown (give mem_gib)"), "{e}");
        r.jobs[1].mem_gib = Some(8.0);
        r.params.sharing_pairs = crate::SharingPairs::Measured;
        let e = check(&r).unwrap_err().join("\n");
        assert!(
            e.contains("pinned jobs j0 and j1 share GPU 0 of node 0 (t4), a pair never measured"),
            "{e}"
        );
        // A preemptible partner may be moved: no error.
        r.params.sharing_pairs = crate::SharingPairs::All;
        r.jobs[1].preemptible = true;
        r.jobs[1].mem_gib = Some(12.0);
        check(&r).unwrap();
    }

    #[test]
    fn a_pinned_job_keeps_its_very_gpus() {
        let held = Allocation::from_gpus(vec![g(0, 2), g(0, 3)]);
        let r = test_round(vec![job(0, false, held.clone())]);
        assert!(validate(&r, &plan(&[(0, held)])).is_ok());
        let other = plan(&[(0, Allocation::from_gpus(vec![g(0, 0), g(0, 1)]))]);
        assert_eq!(
            validate(&r, &other).unwrap_err(),
            vec![Violation::PinnedMoved(JobId(0))]
        );
    }
}
