//! `fair-share`: what operators run on shared clusters today, written from
//! the documentation of NVIDIA's KAI-Scheduler (deserved quota, over-quota
//! weight, reclaim by allocated-to-fair-share ratio) and Kueue (nominal
//! quota, borrowing limit, lending, fair sharing by weight), so that the
//! goodput MIPs are compared with the rule operators deploy, not only with
//! single-pool research policies.
//!
//! Each round, from scratch:
//! 1. **Fair shares.** Level by level down the queue tree, each queue is
//!    first owed min(guarantee, demand) (a non-lending queue keeps its whole
//!    guarantee aside); what is left of its parent's share is water-filled
//!    among queues with unmet demand in proportion to their weights, up to
//!    demand and guarantee + borrowing limit. Demand is the GPUs its jobs
//!    ask for.
//! 2. **Within shares.** The leaf queue with the lowest held ÷ fair share
//!    (KAI's order) starts its next job, in Tiresias's 2D-LAS order (least
//!    attained GPU-time first, then arrival), where the job fits in the free
//!    GPUs and within the share of every queue on its path. A job that does
//!    not fit waits for step 3 and later jobs of its queue go ahead.
//! 3. **Beyond shares.** The jobs left, in the same queue order, start where
//!    they fit within each queue's limit, the lending rule and the free GPUs
//!    (non-preemptible jobs never start on borrowed GPUs).
//!
//! A job not started loses its GPUs: that is the reclaim. Jobs run at their
//! requested size (no goodput model), as under those schedulers; running
//! jobs that keep their size keep their GPUs. Without queues it is 2D-LAS
//! over one pool, as `tiresias` without promotion.

use gpuplan_core::queue::QueueTree;
use gpuplan_core::{Plan, Round, RoundJob};

use super::tiresias::{admit_in_order, queue_of, POLLUX_THRESHOLD_GPU_S};
use super::{fixed_gpus, place_counts};
use crate::{Limits, PlanError, Planner};

#[derive(Debug, Default)]
pub struct FairShare;

/// 2D-LAS order: Tiresias's (Pollux-artifact) service threshold, then
/// arrival, then id.
fn las_key(j: &RoundJob) -> (usize, f64, u32) {
    (
        queue_of(&[POLLUX_THRESHOLD_GPU_S], j.state.attained_gpu_s),
        j.submit_s,
        j.id.0,
    )
}

/// Whether job `j` keeps the GPUs it holds whatever the plan (pinned).
fn pinned(j: &RoundJob) -> bool {
    !j.preemptible && !j.current().is_empty()
}

/// Each queue's fair share (GPUs, fractional) when each queue's subtree
/// asks for `demand[q]` GPUs.
pub(crate) fn fair_shares(tree: &QueueTree, demand: &[u32]) -> Vec<f64> {
    let n = tree.queues.len();
    let mut share = vec![0.0; n];
    let top: Vec<usize> = (0..n).filter(|&q| tree.parent[q].is_none()).collect();
    let mut level = vec![(top, f64::from(tree.capacity))];
    // Breadth first; bounded by the queue count (the round check refuses
    // cycles, but a tree built without it must not loop).
    let mut steps = 0;
    while let Some((kids, cap)) = level.pop() {
        steps += 1;
        if steps > n + 1 {
            break;
        }
        split(tree, &kids, cap, demand, &mut share);
        for &k in &kids {
            let grand: Vec<usize> = (0..n).filter(|&c| tree.parent[c] == Some(k)).collect();
            if !grand.is_empty() {
                level.push((grand, share[k]));
            }
        }
    }
    share
}

/// Split `cap` among sibling queues `kids`: guarantees first, then by
/// weight up to what each wants and may hold.
fn split(tree: &QueueTree, kids: &[usize], cap: f64, demand: &[u32], share: &mut [f64]) {
    let mut left = cap.max(0.0);
    for &k in kids {
        let q = &tree.queues[k];
        share[k] = f64::from(q.guarantee.min(demand[k])).min(left);
        left -= share[k];
    }
    for &k in kids {
        let q = &tree.queues[k];
        if !q.lend {
            left -= (f64::from(q.guarantee) - share[k]).clamp(0.0, left);
        }
    }
    let want = |k: usize| {
        let q = &tree.queues[k];
        let most = q.borrow_limit.map_or(u32::MAX, |l| q.guarantee.saturating_add(l));
        f64::from(demand[k].min(most))
    };
    let mut active: Vec<usize> = kids.iter().copied().filter(|&k| want(k) > share[k]).collect();
    while left > 1e-9 && !active.is_empty() {
        let total: f64 = active.iter().map(|&k| tree.queues[k].weight.max(0.0)).sum();
        let part = |k: usize| {
            if total > 0.0 {
                tree.queues[k].weight.max(0.0) / total
            } else {
                1.0 / active.len() as f64
            }
        };
        let mut used = 0.0;
        let mut next = Vec::new();
        for &k in &active {
            let give = (left * part(k)).min(want(k) - share[k]);
            share[k] += give;
            used += give;
            if want(k) - share[k] > 1e-9 {
                next.push(k);
            }
        }
        left -= used;
        if next.len() == active.len() {
            break; // everyone took a full part: nothing is left
        }
        active = next;
    }
}

/// Queue-aware admission: `(job index, GPUs)` in the order started.
fn admit(round: &Round, tree: &QueueTree) -> Vec<(usize, u32)> {
    let n = tree.queues.len();
    let size: Vec<u32> = round
        .jobs
        .iter()
        .map(|j| {
            if pinned(j) {
                j.current().num_gpus()
            } else {
                fixed_gpus(j)
            }
        })
        .collect();
    let mut demand = vec![0u32; n];
    let mut held = vec![0u32; n];
    let mut total_held = 0u32;
    for (i, j) in round.jobs.iter().enumerate() {
        for &q in tree.path(tree.leaf[i]) {
            demand[q] = demand[q].saturating_add(size[i]);
            if pinned(j) {
                held[q] = held[q].saturating_add(size[i]);
            }
        }
        if pinned(j) {
            total_held = total_held.saturating_add(size[i]);
        }
    }
    let share = fair_shares(tree, &demand);
    // Each leaf's waiting jobs, in 2D-LAS order, last first (popped).
    let mut pending: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut order: Vec<usize> = (0..round.jobs.len())
        .filter(|&i| !pinned(&round.jobs[i]) && size[i] > 0)
        .collect();
    order.sort_by(|&a, &b| {
        let (ka, kb) = (las_key(&round.jobs[a]), las_key(&round.jobs[b]));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(ka.2.cmp(&kb.2))
    });
    for &i in order.iter().rev() {
        pending[tree.leaf[i]].push(i);
    }
    let ratio = |q: usize, held: &[u32]| {
        let h = f64::from(held[q]);
        if share[q] > 0.0 {
            h / share[q]
        } else {
            f64::INFINITY
        }
    };
    let lends_ok = |leaf: usize, k: u32, held: &[u32], total: u32| {
        (0..n).all(|u| {
            let q = &tree.queues[u];
            q.lend
                || tree.is_ancestor_or_self(u, leaf)
                || (total - held[u]).saturating_add(k) <= tree.capacity.saturating_sub(q.guarantee)
        })
    };
    let mut out = Vec::new();
    let mut free = tree.capacity.saturating_sub(total_held);
    let mut later: Vec<Vec<usize>> = vec![Vec::new(); n];
    for within in [true, false] {
        let queue = if within { &mut pending } else { &mut later };
        let mut left: Vec<Vec<usize>> = std::mem::take(queue);
        if !within {
            for l in &mut left {
                l.reverse();
            }
        }
        // The leaf with the lowest held ÷ share that still has jobs, next.
        while let Some(q) = (0..n)
            .filter(|&q| !left[q].is_empty())
            .min_by(|&a, &b| ratio(a, &held).total_cmp(&ratio(b, &held)).then(a.cmp(&b)))
        {
            let Some(i) = left[q].pop() else { break };
            let j = &round.jobs[i];
            let k = size[i];
            let path = tree.path(q);
            let fits = k <= free
                && lends_ok(q, k, &held, total_held)
                && path.iter().all(|&a| {
                    let after = held[a].saturating_add(k);
                    let cap = if within {
                        (share[a] + 1e-9).floor() as u32
                    } else {
                        tree.queues[a]
                            .borrow_limit
                            .map_or(u32::MAX, |l| tree.queues[a].guarantee.saturating_add(l))
                    };
                    // A non-preemptible job may not start on borrowed GPUs.
                    after <= cap && (j.preemptible || after <= tree.queues[a].guarantee)
                });
            if fits {
                free -= k;
                total_held += k;
                for &a in path {
                    held[a] += k;
                }
                out.push((i, k));
            } else if within {
                later[q].push(i);
            }
        }
    }
    out
}

impl Planner for FairShare {
    fn name(&self) -> &str {
        "fair-share"
    }

    fn placement_stage(&self) -> bool {
        true
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let decisions = match QueueTree::new(round) {
            Some(tree) => admit(round, &tree)
                .into_iter()
                .map(|(i, k)| (round.jobs[i].id, k))
                .collect(),
            None => {
                let mut order: Vec<&RoundJob> = round.jobs.iter().collect();
                order.sort_by(|a, b| {
                    let (ka, kb) = (las_key(a), las_key(b));
                    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(ka.2.cmp(&kb.2))
                });
                admit_in_order(round, &order)
            }
        };
        Ok(place_counts(self.name(), round, limits, &decisions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::testutil::{job, round};
    use gpuplan_core::queue::Queue;
    use gpuplan_core::{validate, JobId};

    fn queued(mut j: RoundJob, q: &str) -> RoundJob {
        j.queue = Some(q.to_string());
        j
    }

    fn two_queues(ga: u32, gb: u32) -> Vec<Queue> {
        vec![
            Queue {
                guarantee: ga,
                ..Queue::new("a")
            },
            Queue {
                guarantee: gb,
                ..Queue::new("b")
            },
        ]
    }

    fn plan(r: &Round) -> Plan {
        let plan = FairShare.plan(r, &Limits::default()).unwrap();
        validate(r, &plan).unwrap();
        plan
    }

    fn held(r: &Round, p: &Plan, q: &str) -> u32 {
        r.jobs
            .iter()
            .filter(|j| j.queue.as_deref() == Some(q))
            .map(|j| p.get(j.id).num_gpus())
            .sum()
    }

    #[test]
    fn an_idle_queues_guarantee_is_borrowed_then_reclaimed() {
        // 1x8, a and b guaranteed 4 each. b idle: a's two 4-GPU jobs run.
        let mut r = round(
            "1x8",
            0.0,
            vec![
                queued(job(0, 4, 0.0, 0.0, &[]), "a"),
                queued(job(1, 4, 1.0, 0.0, &[]), "a"),
            ],
        );
        r.queues = two_queues(4, 4);
        let p = plan(&r);
        assert_eq!(held(&r, &p, "a"), 8);
        // b submits: a's younger job (by 2D-LAS the later one) gives way.
        r.jobs[0].state.allocation = p.get(JobId(0));
        r.jobs[1].state.allocation = p.get(JobId(1));
        r.jobs.push(queued(job(2, 4, 2.0, 0.0, &[]), "b"));
        let p = plan(&r);
        assert_eq!(held(&r, &p, "a"), 4);
        assert_eq!(held(&r, &p, "b"), 4);
        assert_eq!(
            p.get(JobId(0)),
            r.jobs[0].state.allocation,
            "the kept job keeps its GPUs"
        );
        assert!(p.get(JobId(1)).is_empty());
    }

    #[test]
    fn what_lies_beyond_guarantees_goes_by_weight() {
        // 12 GPUs, guarantees 2 and 2, weights 1 and 3: the 8 beyond split 2:6.
        let mut qs = two_queues(2, 2);
        qs[1].weight = 3.0;
        let jobs = (0..24)
            .map(|i| {
                queued(
                    job(i, 1, f64::from(i), 0.0, &[]),
                    if i % 2 == 0 { "a" } else { "b" },
                )
            })
            .collect();
        let mut r = round("3x4", 0.0, jobs);
        r.queues = qs;
        let p = plan(&r);
        assert_eq!((held(&r, &p, "a"), held(&r, &p, "b")), (4, 8));
    }

    #[test]
    fn limits_and_lending_are_kept() {
        // a may borrow at most 1 beyond its 2; b (guarantee 4) lends nothing.
        let mut qs = two_queues(2, 4);
        qs[0].borrow_limit = Some(1);
        qs[1].lend = false;
        let jobs = (0..6)
            .map(|i| queued(job(i, 1, f64::from(i), 0.0, &[]), "a"))
            .collect();
        let mut r = round("1x8", 0.0, jobs);
        r.queues = qs.clone();
        let p = plan(&r);
        assert_eq!(held(&r, &p, "a"), 3);
        // Without the limit, a still leaves b's unlent 4 alone.
        qs[0].borrow_limit = None;
        r.queues = qs;
        assert_eq!(held(&r, &plan(&r), "a"), 4);
    }

    #[test]
    fn nested_queues_split_their_parents_share() {
        // org (guarantee 6) holds t1 and t2 (guarantee 3 each); other has 2.
        let qs = gpuplan_core::queue::parse_queues_toml(
            "[[queue]]\nname = \"org\"\nguarantee = 6\n\
             [[queue]]\nname = \"t1\"\nparent = \"org\"\nguarantee = 3\n\
             [[queue]]\nname = \"t2\"\nparent = \"org\"\nguarantee = 3\n\
             [[queue]]\nname = \"other\"\nguarantee = 2\n",
            "q.toml",
        )
        .unwrap();
        let tree = QueueTree::from_queues(&qs, &[], 8).unwrap();
        let s = fair_shares(&tree, &[8, 8, 0, 8]);
        // org gets 6 (+0 left: other keeps 2); t1 takes org's all since t2 is idle.
        assert_eq!(s, vec![6.0, 6.0, 0.0, 2.0]);
        let s = fair_shares(&tree, &[8, 4, 4, 0]);
        assert_eq!(s, vec![8.0, 4.0, 4.0, 0.0]);
    }

    #[test]
    fn without_queues_it_is_least_attained_service_first() {
        let r = round(
            "1x4",
            0.0,
            vec![job(0, 4, 0.0, 1e6, &[]), job(1, 4, 5.0, 0.0, &[])],
        );
        let p = plan(&r);
        assert!(p.get(JobId(0)).is_empty());
        assert_eq!(p.get(JobId(1)).num_gpus(), 4);
    }
}
