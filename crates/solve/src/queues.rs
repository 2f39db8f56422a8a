//! The queue stage of the round pipeline: after any planner, make the plan
//! keep the round's queue rules ([`gpuplan_core::queue`]) by the fewest
//! stops and starts. Planners that know the rules (the MIPs' constraints)
//! leave it nothing to do; fixed-size policies and heuristics that do not
//! are admitted through it, so every planner and every driver gets the same
//! rule from one place.
//!
//! Order: a non-preemptible job that would start on borrowed GPUs is held
//! back; a queue over its limit stops jobs; others' use of a queue's idle
//! guarantee that it does not lend stops; then each waiting job whose
//! minimum fits in its queue's unused guarantee while a queue beside
//! borrows is started on free GPUs, or the borrower gives back what the
//! job still lacks and the job is tried again: by shrinking its largest
//! elastic job that stays at or above its minimum, else by a stop. Each
//! stop is the borrower's preemptible job that started this round if any,
//! else the largest one that keeps the borrower at or above its guarantee,
//! else its smallest. Every change is noted in
//! the plan's reason. When a round cannot be repaired so (placement rules
//! block the waiting job), every queue's reclaimable borrowing is stopped,
//! which keeps the rules by leaving nobody borrowing.

use std::collections::HashSet;

use gpuplan_core::queue::{QueueBreach, QueueTree};
use gpuplan_core::{Allocation, GpuId, Interference, JobId, NodeCounts, NodeId, Plan, Round};

/// Apply the queue rules to `plan` (bound: every GPU named). Nothing for a
/// round without queues or a plan that already keeps them.
pub fn enforce(round: &Round, plan: &mut Plan) {
    let Some(tree) = QueueTree::new(round) else {
        return;
    };
    let mut stage = Stage {
        round,
        tree: &tree,
        plan,
        stopped: Vec::new(),
        started: Vec::new(),
        shrunk: Vec::new(),
        last_resort: false,
    };
    // Bounded: each step stops or starts a job; a stopped job is not
    // restarted, and a started one is not stopped.
    let cap = 2 * round.jobs.len() + 4;
    for _ in 0..cap {
        let breaches = stage.breaches();
        let Some(b) = breaches.first() else { break };
        if !stage.repair(b) {
            stage.stop_all_borrowing();
            break;
        }
    }
    if !stage.breaches().is_empty() {
        stage.stop_all_borrowing();
    }
    let Stage {
        stopped,
        started,
        shrunk,
        ..
    } = stage;
    let shrunk: Vec<JobId> = shrunk.into_iter().filter(|id| !stopped.contains(id)).collect();
    let name = |id: &JobId| {
        round
            .jobs
            .iter()
            .find(|j| j.id == *id)
            .map_or("?", |j| j.name.as_str())
            .to_string()
    };
    let mut notes = Vec::new();
    if !stopped.is_empty() {
        notes.push(format!(
            "stopped {}",
            stopped.iter().map(name).collect::<Vec<_>>().join(", ")
        ));
    }
    if !shrunk.is_empty() {
        notes.push(format!(
            "shrank {}",
            shrunk.iter().map(name).collect::<Vec<_>>().join(", ")
        ));
    }
    if !started.is_empty() {
        notes.push(format!(
            "started {}",
            started.iter().map(name).collect::<Vec<_>>().join(", ")
        ));
    }
    if !notes.is_empty() {
        plan.add_note(format!(
            "queues: {} to keep guarantees and limits",
            notes.join("; ")
        ));
    }
}

struct Stage<'a> {
    round: &'a Round,
    tree: &'a QueueTree,
    plan: &'a mut Plan,
    stopped: Vec<JobId>,
    started: Vec<JobId>,
    shrunk: Vec<JobId>,
    /// The last resort: jobs this stage started may be stopped too.
    last_resort: bool,
}

impl Stage<'_> {
    fn gpus(&self) -> Vec<u32> {
        self.round
            .jobs
            .iter()
            .map(|j| self.plan.gpus_of(j.id).num_gpus())
            .collect()
    }

    fn breaches(&self) -> Vec<QueueBreach> {
        let g = self.gpus();
        self.tree.breaches(self.round, |i| g[i])
    }

    fn index(&self, id: JobId) -> Option<usize> {
        self.round.jobs.iter().position(|j| j.id == id)
    }

    fn queue(&self, name: &str) -> Option<usize> {
        self.tree.queues.iter().position(|q| q.name == name)
    }

    fn stop(&mut self, i: usize) {
        let id = self.round.jobs[i].id;
        self.plan.allocations.remove(&id);
        if let Some(k) = self.started.iter().position(|s| *s == id) {
            self.started.remove(k);
        } else {
            self.stopped.push(id);
        }
    }

    /// Jobs of the round in `q`'s subtree that hold GPUs and may be stopped.
    fn stoppable(&self, q: usize) -> Vec<usize> {
        (0..self.round.jobs.len())
            .filter(|&i| {
                let j = &self.round.jobs[i];
                self.tree.is_ancestor_or_self(q, self.tree.leaf[i])
                    && !self.plan.gpus_of(j.id).is_empty()
                    && j.preemptible
                    && (self.last_resort || !self.started.contains(&j.id))
            })
            .collect()
    }

    /// Stop one job of `q` that gives back at most `excess` if it can:
    /// one that starts this round first, then the largest within `excess`,
    /// else the smallest. False when `q` has none to stop.
    fn stop_one_of(&mut self, q: usize, excess: u32) -> bool {
        let cands = self.stoppable(q);
        let gpus = |i: usize| self.plan.gpus_of(self.round.jobs[i].id).num_gpus();
        let fresh = |i: usize| self.round.jobs[i].state.allocation.is_empty();
        let pick = cands
            .iter()
            .copied()
            .filter(|&i| fresh(i) && gpus(i) <= excess)
            .max_by_key(|&i| (gpus(i), i))
            .or_else(|| {
                cands
                    .iter()
                    .copied()
                    .filter(|&i| gpus(i) <= excess)
                    .max_by_key(|&i| (gpus(i), i))
            })
            .or_else(|| {
                cands
                    .iter()
                    .copied()
                    .min_by_key(|&i| (gpus(i), std::cmp::Reverse(i)))
            });
        match pick {
            Some(i) => {
                self.stop(i);
                true
            }
            None => false,
        }
    }

    fn repair(&mut self, b: &QueueBreach) -> bool {
        match b {
            QueueBreach::PinnedBorrows { job, .. } => match self.index(*job) {
                Some(i) => {
                    self.stop(i);
                    true
                }
                None => false,
            },
            QueueBreach::OverLimit { queue, held, limit } => match self.queue(queue) {
                Some(q) => self.stop_one_of(q, held - limit),
                None => false,
            },
            QueueBreach::Unlent { queue, .. } => {
                let Some(q) = self.queue(queue) else { return false };
                // The most borrowing queue outside `q` gives back first.
                let h = self.holdings();
                let mut outside: Vec<usize> = (0..self.tree.queues.len())
                    .filter(|&o| !self.tree.is_ancestor_or_self(q, o) && !self.tree.is_ancestor_or_self(o, q))
                    .collect();
                outside.sort_by_key(|&o| std::cmp::Reverse(self.tree.reclaimable(o, &h)));
                outside.into_iter().any(|o| {
                    let r = self.tree.reclaimable(o, &h).max(1);
                    self.stop_one_of(o, r)
                })
            }
            QueueBreach::Unreclaimed { job, borrower, .. } => {
                let Some(i) = self.index(*job) else { return false };
                let Some(q) = self.queue(borrower) else {
                    return false;
                };
                // Free what the job needs, as little at a time as it takes,
                // until it fits or the borrower borrows no more.
                for _ in 0..=self.round.jobs.len() {
                    if let Some(a) = self.place(i).filter(|a| self.starts_cleanly(i, a)) {
                        let id = self.round.jobs[i].id;
                        self.plan.allocations.insert(id, a);
                        self.started.push(id);
                        return true;
                    }
                    let r = self.tree.reclaimable(q, &self.holdings());
                    if r == 0 {
                        return true;
                    }
                    let want = self.round.jobs[i]
                        .min_gpus
                        .max(1)
                        .saturating_sub(self.free_gpus())
                        .clamp(1, r);
                    if !self.shrink_one_of(q, want) && !self.stop_one_of(q, r) {
                        return false;
                    }
                }
                false
            }
        }
    }

    /// Whether starting job `i` on `a` adds no breach of a limit, of
    /// lending or of the no-borrowing rule for non-preemptible jobs.
    fn starts_cleanly(&self, i: usize, a: &Allocation) -> bool {
        let hard = |b: &QueueBreach| !matches!(b, QueueBreach::Unreclaimed { .. });
        let before = self.breaches().into_iter().filter(hard).count();
        let mut g = self.gpus();
        g[i] = a.num_gpus();
        let after = self
            .tree
            .breaches(self.round, |k| g[k])
            .into_iter()
            .filter(hard)
            .count();
        after <= before
    }

    /// GPUs no job of the plan holds and no job outside the round reserves.
    fn free_gpus(&self) -> u32 {
        let mut used: HashSet<GpuId> = self.round.reserved.iter().copied().collect();
        for a in self.plan.allocations.values() {
            used.extend(a.gpus().iter().copied());
        }
        self.round.cluster.total_gpus().saturating_sub(used.len() as u32)
    }

    /// Shrink one elastic job of `q` by `by` GPUs where it stays at or
    /// above its minimum (the largest such job; a multi-node job under
    /// `even_nodes` is not shrunk), giving up the GPUs on the nodes where it
    /// holds fewest. False when no job of `q` can.
    fn shrink_one_of(&mut self, q: usize, by: u32) -> bool {
        let even = self.round.params.even_nodes == NodeCounts::Even;
        let gpus = |i: usize| self.plan.gpus_of(self.round.jobs[i].id).num_gpus();
        let pick = self
            .stoppable(q)
            .into_iter()
            .filter(|&i| {
                let a = self.plan.gpus_of(self.round.jobs[i].id);
                gpus(i) > by
                    && gpus(i) - by >= self.round.jobs[i].min_gpus.max(1)
                    && !(even && a.per_node().len() > 1)
            })
            .max_by_key(|&i| (gpus(i), i));
        let Some(i) = pick else { return false };
        let id = self.round.jobs[i].id;
        let a = self.plan.gpus_of(id).clone();
        let per = a.per_node();
        let on = |n: NodeId| per.iter().find(|(m, _)| *m == n).map_or(0, |x| x.1);
        let mut kept = a.gpus().to_vec();
        kept.sort_by_key(|g| (std::cmp::Reverse(on(g.node)), g.node, g.index));
        kept.truncate((a.num_gpus() - by) as usize);
        self.plan.allocations.insert(id, Allocation::from_gpus(kept));
        if !self.shrunk.contains(&id) {
            self.shrunk.push(id);
        }
        true
    }

    fn holdings(&self) -> gpuplan_core::queue::Holdings {
        let g = self.gpus();
        let round = self.round;
        self.tree.holdings(
            |i| g[i],
            |i| {
                let j = &round.jobs[i];
                !j.preemptible && !j.state.allocation.is_empty() && g[i] > 0
            },
        )
    }

    /// Stop every preemptible job of every queue holding more than its
    /// guarantee, the job's own start this round first, until none
    /// borrows what it could give back.
    fn stop_all_borrowing(&mut self) {
        self.last_resort = true;
        for _ in 0..=self.round.jobs.len() {
            let h = self.holdings();
            let Some(q) = (0..self.tree.queues.len())
                .filter(|&q| self.tree.reclaimable(q, &h) > 0 && !self.stoppable(q).is_empty())
                .max_by_key(|&q| self.tree.reclaimable(q, &h))
            else {
                break;
            };
            let r = self.tree.reclaimable(q, &h);
            self.stop_one_of(q, r);
        }
        // Limits and lending broken by jobs this stage started cannot
        // remain: it starts a job only within its guarantee.
    }

    /// `min_gpus` free GPUs for waiting job `i` that keep the placement
    /// rules: the fullest single node that has them, else whole free nodes
    /// of one type within `max_nodes_per_job` (equal counts under
    /// `even_nodes`). No sharing: the stage gives a job GPUs of its own.
    fn place(&self, i: usize) -> Option<Allocation> {
        let round = self.round;
        let job = &round.jobs[i];
        let k = job.min_gpus.max(1);
        if k > job.max_gpus {
            return None;
        }
        let mut used: HashSet<GpuId> = round.reserved.iter().copied().collect();
        for a in self.plan.allocations.values() {
            used.extend(a.gpus().iter().copied());
        }
        let free_on = |n: usize| -> Vec<GpuId> {
            (0..round.cluster.nodes[n].gpus)
                .map(|g| GpuId::new(NodeId(n as u32), g))
                .filter(|g| !used.contains(g))
                .collect()
        };
        let nodes = round.cluster.nodes.len();
        let free: Vec<Vec<GpuId>> = (0..nodes).map(free_on).collect();
        if let Some(n) = (0..nodes)
            .filter(|&n| free[n].len() as u32 >= k)
            .min_by_key(|&n| (free[n].len(), n))
        {
            return Some(Allocation::from_gpus(free[n][..k as usize].to_vec()));
        }
        let max_nodes = round.params.max_nodes_per_job as usize;
        if max_nodes < 2 {
            return None;
        }
        // Whole free nodes only, so the interference rule holds whatever
        // the other jobs are.
        let whole = |n: usize| free[n].len() as u32 == round.cluster.nodes[n].gpus;
        let avoid = round.params.interference == Interference::Avoid;
        for ty in round.cluster.types() {
            let mut cands: Vec<usize> = (0..nodes)
                .filter(|&n| round.cluster.nodes[n].gpu_type == ty && (whole(n) || !avoid))
                .collect();
            cands.sort_by_key(|&n| (std::cmp::Reverse(free[n].len()), n));
            if round.params.even_nodes == NodeCounts::Even {
                for count in 2..=max_nodes.min(cands.len()) {
                    if !k.is_multiple_of(count as u32) {
                        continue;
                    }
                    let each = (k / count as u32) as usize;
                    let chosen: Vec<usize> = cands
                        .iter()
                        .copied()
                        .filter(|&n| free[n].len() >= each)
                        .take(count)
                        .collect();
                    if chosen.len() == count {
                        let gpus = chosen.iter().flat_map(|&n| free[n][..each].to_vec()).collect();
                        return Some(Allocation::from_gpus(gpus));
                    }
                }
                continue;
            }
            let mut gpus = Vec::new();
            for &n in cands.iter().take(max_nodes) {
                let need = k as usize - gpus.len();
                if need == 0 {
                    break;
                }
                gpus.extend(free[n].iter().take(need).copied());
            }
            if gpus.len() == k as usize {
                return Some(Allocation::from_gpus(gpus));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::testutil::{job, round};
    use gpuplan_core::queue::Queue;
    use gpuplan_core::{validate, PlanStatus};

    fn two_queues(r: &mut Round) {
        r.queues = vec![
            Queue {
                guarantee: 4,
                ..Queue::new("a")
            },
            Queue {
                guarantee: 4,
                ..Queue::new("b")
            },
        ];
    }

    fn g(n: u32, i: u32) -> GpuId {
        GpuId::new(NodeId(n), i)
    }

    /// The daemon scenario on one 8-GPU node: a's elastic job holds
    /// all 8 while b is idle; b's 2-GPU job arrives, and the stage shrinks
    /// a's job by the 2 GPUs b's job needs and starts it.
    #[test]
    fn a_borrower_gives_back_to_a_waiting_guarantee() {
        let mut r = round(
            "1x8",
            600.0,
            vec![job(0, 8, 600.0, 0.0, &[]), job(1, 2, 0.0, 0.0, &[])],
        );
        two_queues(&mut r);
        r.jobs[0].queue = Some("a".into());
        r.jobs[0].min_gpus = 1;
        r.jobs[1].queue = Some("b".into());
        r.jobs[1].min_gpus = 2;
        let all: Vec<GpuId> = (0..8).map(|i| g(0, i)).collect();
        r.jobs[0].state.allocation = Allocation::from_gpus(all.clone());
        let mut plan = Plan::new("hand", PlanStatus::Feasible);
        plan.allocations.insert(JobId(0), Allocation::from_gpus(all));
        assert!(validate(&r, &plan).is_err());
        enforce(&r, &mut plan);
        validate(&r, &plan).unwrap();
        assert_eq!(plan.gpus_of(JobId(1)).num_gpus(), 2, "{:?}", plan.reason);
        // a gives back only what b's job needs: b has no other demand.
        assert_eq!(plan.gpus_of(JobId(0)).num_gpus(), 6);
        let reason = plan.reason.as_deref().unwrap();
        assert!(
            reason.contains("shrank j0") && reason.contains("started j1"),
            "{reason}"
        );
    }

    #[test]
    fn limits_and_pinned_starts_are_enforced_and_a_round_without_queues_is_untouched() {
        let mut r = round(
            "2x4",
            600.0,
            vec![
                job(0, 2, 0.0, 0.0, &[]),
                job(1, 2, 0.0, 0.0, &[]),
                job(2, 2, 0.0, 0.0, &[]),
            ],
        );
        let mut plan = Plan::new("hand", PlanStatus::Feasible);
        plan.allocations
            .insert(JobId(0), Allocation::from_gpus(vec![g(0, 0), g(0, 1)]));
        plan.allocations
            .insert(JobId(1), Allocation::from_gpus(vec![g(0, 2), g(0, 3)]));
        plan.allocations
            .insert(JobId(2), Allocation::from_gpus(vec![g(1, 0), g(1, 1)]));
        let before = plan.clone();
        enforce(&r, &mut plan);
        assert_eq!(plan, before, "no queues: no change");
        two_queues(&mut r);
        r.queues[0].borrow_limit = Some(0);
        for j in &mut r.jobs {
            j.queue = Some("a".into());
        }
        r.jobs[2].preemptible = false;
        enforce(&r, &mut plan);
        validate(&r, &plan).unwrap();
        // a may hold 4: the pinned start j2 goes first (it would borrow... no:
        // a holds 6 > 4 at once), then one more job until a holds 4.
        let held: u32 = (0..3).map(|i| plan.gpus_of(JobId(i)).num_gpus()).sum();
        assert!(held <= 4, "{plan:?}");
    }
}
