//! The queue rules every plan keeps (docs/tenants.md): above the round,
//! whose jobs and plan they read.
//!
//! A round may carry a tree of queues (organisation → team → …); each job
//! names a leaf ([`RoundJob::queue`], `default` when absent). The rules
//! every plan keeps, checked by the validator and enforced by the
//! pipeline's queue stage and the MIPs' constraints, are stated once here
//! ([`QueueTree::breaches`]):
//!
//! - **Limit.** A queue holds at most `guarantee + borrow_limit` GPUs
//!   (GPUs its pinned jobs already hold are never taken away).
//! - **Reclaim.** A job left waiting whose `min_gpus` fit in the unused
//!   guarantee of its queue or of one of its ancestors (and within the
//!   borrowing limits on the way up), while a queue beside that one (a
//!   sibling of it or of one of its ancestors) holds GPUs beyond its own
//!   guarantee that it could give back (held by preemptible jobs): the
//!   borrower must give them back first. This is
//!   Kueue's reclaim within a cohort and KAI's reclaim of over-quota
//!   resources, stated on the plan after the round.
//! - **Lending.** A queue that does not lend keeps its idle guarantee
//!   idle: the GPUs held outside it stay within the cluster less its
//!   guarantee.
//! - **Non-preemptible jobs do not borrow.** A non-preemptible job may start
//!   only if its queue and every ancestor stay within their guarantees:
//!   a borrowed GPU must be reclaimable.
//!
//! A round without queues has none of these rules: it plans as before.

use super::spec::{Queue, DEFAULT_QUEUE};
use crate::job::JobId;
use crate::round::Round;

/// A broken queue rule in a plan ([`QueueTree::breaches`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueBreach {
    /// A queue above its guarantee plus its borrowing limit.
    #[error("queue {queue} holds {held} GPUs, more than its guarantee plus borrowing limit ({limit})")]
    OverLimit {
        /// The queue.
        queue: String,
        /// GPUs its jobs hold in the plan.
        held: u32,
        /// Its guarantee plus borrowing limit.
        limit: u32,
    },
    /// A job waits within its queue's unused guarantee while another queue borrows.
    #[error("job {job:?} waits for {min} GPUs within queue {queue}'s unused guarantee ({free}), while queue {borrower} holds {borrowed} GPUs beyond its guarantee")]
    Unreclaimed {
        /// The waiting job.
        job: JobId,
        /// Its `min_gpus`.
        min: u32,
        /// The queue (the job's or an ancestor) whose unused guarantee fits it.
        queue: String,
        /// That queue's guarantee less what it holds.
        free: u32,
        /// A queue beside it that borrows.
        borrower: String,
        /// GPUs the borrower could give back.
        borrowed: u32,
    },
    /// Others use the idle guarantee of a queue that does not lend.
    #[error("queue {queue} does not lend, but {outside} GPUs are held outside it, more than the {allowed} its guarantee leaves")]
    Unlent {
        /// The queue that does not lend.
        queue: String,
        /// GPUs held outside it.
        outside: u32,
        /// The cluster's GPUs less its guarantee.
        allowed: u32,
    },
    /// A non-preemptible job started on borrowed GPUs.
    #[error("job {job:?} is not preemptible and starts with queue {queue} above its guarantee ({held} > {guarantee}): it could not be reclaimed")]
    PinnedBorrows {
        /// The job.
        job: JobId,
        /// The queue over its guarantee.
        queue: String,
        /// GPUs the queue holds.
        held: u32,
        /// Its guarantee.
        guarantee: u32,
    },
}

/// The round's queues resolved: parents by index, each job's leaf.
#[derive(Debug, Clone)]
pub struct QueueTree {
    /// The queues, the round's own then `default` where jobs need it and
    /// the round does not define it.
    pub queues: Vec<Queue>,
    /// Each queue's parent.
    pub parent: Vec<Option<usize>>,
    /// Each round job's leaf queue, in round order.
    pub leaf: Vec<usize>,
    /// GPUs jobs of the round may hold: the cluster's, less reserved ones.
    pub capacity: u32,
    /// Each queue's [`QueueTree::path`].
    paths: Vec<Vec<usize>>,
}

/// GPUs held per queue (each queue counts its whole subtree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holdings {
    /// GPUs each queue's jobs hold.
    pub held: Vec<u32>,
    /// Of those, GPUs held by non-preemptible jobs that keep their GPUs.
    pub pinned: Vec<u32>,
}

impl QueueTree {
    /// The round's tree; `None` for a round without queues (no rules).
    /// Assumes a round that passed [`check`]; unknown names fall back to
    /// `default` rather than panic.
    pub fn new(round: &Round) -> Option<QueueTree> {
        let reserved: std::collections::BTreeSet<_> = round.reserved.iter().collect();
        let capacity = round.cluster.total_gpus().saturating_sub(reserved.len() as u32);
        let names: Vec<Option<&str>> = round.jobs.iter().map(|j| j.queue.as_deref()).collect();
        Self::from_queues(&round.queues, &names, capacity)
    }

    /// The tree of `queues` for jobs in the queues `jobs` name (`None`:
    /// `default`), on `capacity` GPUs; `None` without queues. The
    /// simulator's metrics use it on the jobs of each round.
    pub fn from_queues(queues: &[Queue], jobs: &[Option<&str>], capacity: u32) -> Option<QueueTree> {
        if queues.is_empty() {
            return None;
        }
        let mut queues = queues.to_vec();
        let index = |qs: &[Queue], name: &str| qs.iter().position(|q| q.name == name);
        let needs_default = jobs.iter().any(|j| j.unwrap_or(DEFAULT_QUEUE) == DEFAULT_QUEUE);
        if needs_default && index(&queues, DEFAULT_QUEUE).is_none() {
            queues.push(Queue::new(DEFAULT_QUEUE));
        }
        let parent: Vec<Option<usize>> = queues
            .iter()
            .map(|q| q.parent.as_deref().and_then(|p| index(&queues, p)))
            .collect();
        let default = index(&queues, DEFAULT_QUEUE).unwrap_or(0);
        let leaf = jobs
            .iter()
            .map(|j| index(&queues, j.unwrap_or(DEFAULT_QUEUE)).unwrap_or(default))
            .collect();
        // Each queue's path, walked once here: the validator asks for
        // paths per job and pair every round. Bounded by the queue count,
        // so a cycle (refused by the round check) cannot hang it.
        let paths = (0..queues.len())
            .map(|q| {
                let mut out = vec![q];
                let mut at = q;
                while let Some(p) = parent[at] {
                    if out.len() > queues.len() {
                        break;
                    }
                    out.push(p);
                    at = p;
                }
                out
            })
            .collect();
        Some(QueueTree {
            queues,
            parent,
            leaf,
            capacity,
            paths,
        })
    }

    /// The queue and its ancestors, the queue first.
    pub fn path(&self, q: usize) -> &[usize] {
        &self.paths[q]
    }

    /// Whether `a` is `b` or one of its ancestors.
    pub fn is_ancestor_or_self(&self, a: usize, b: usize) -> bool {
        self.paths[b].contains(&a)
    }

    /// The queues beside `q`: siblings of it and of each of its ancestors
    /// (top-level queues for the top). Their borrowing is what `q`'s
    /// unused guarantee reclaims.
    pub fn beside(&self, q: usize) -> Vec<usize> {
        let path = self.path(q);
        (0..self.queues.len())
            .filter(|&b| !path.contains(&b) && self.parent[b].is_none_or(|p| path.contains(&p)))
            .collect()
    }

    /// Each round job's weight in the nested objective (docs/tenants.md,
    /// "The objective"), in round order, scaled so they sum to the job
    /// count: the job count over its leaf's jobs, times, for each queue on
    /// its path, that queue's weight over the summed weights of it and its
    /// siblings that have jobs in the round. Queues without jobs take no
    /// share, so an idle team's weight goes to the teams beside it. With
    /// every job in one leaf each share is 1: the round's plain mean.
    pub fn shares(&self) -> Vec<f64> {
        let n = self.queues.len();
        let mut jobs_in = vec![0usize; n];
        for &leaf in &self.leaf {
            for &q in self.path(leaf) {
                jobs_in[q] += 1;
            }
        }
        let (mut top, mut under) = (0.0, vec![0.0; n]);
        for q in (0..n).filter(|&q| jobs_in[q] > 0) {
            match self.parent[q] {
                Some(p) => under[p] += self.queues[q].weight,
                None => top += self.queues[q].weight,
            }
        }
        let jobs = self.leaf.len() as f64;
        self.leaf
            .iter()
            .map(|&leaf| {
                let mut s = jobs / jobs_in[leaf] as f64;
                for &q in self.path(leaf) {
                    let total = self.parent[q].map_or(top, |p| under[p]);
                    s *= self.queues[q].weight / total;
                }
                s
            })
            .collect()
    }

    /// GPUs held per queue when round job `i` holds `gpus(i)`; `keeps(i)`
    /// says whether it is a non-preemptible job keeping its GPUs.
    pub fn holdings(&self, gpus: impl Fn(usize) -> u32, keeps: impl Fn(usize) -> bool) -> Holdings {
        let n = self.queues.len();
        let mut held = vec![0u32; n];
        let mut pinned = vec![0u32; n];
        for (i, &leaf) in self.leaf.iter().enumerate() {
            let g = gpus(i);
            if g == 0 {
                continue;
            }
            let k = keeps(i);
            for &q in self.path(leaf) {
                held[q] = held[q].saturating_add(g);
                if k {
                    pinned[q] = pinned[q].saturating_add(g);
                }
            }
        }
        Holdings { held, pinned }
    }

    /// The most queue `q` may hold: guarantee plus borrowing limit, or
    /// what its pinned jobs hold if more; `u32::MAX` without a limit.
    pub fn limit(&self, q: usize, h: &Holdings) -> u32 {
        self.queues[q].borrow_limit.map_or(u32::MAX, |l| {
            self.queues[q].guarantee.saturating_add(l).max(h.pinned[q])
        })
    }

    /// GPUs queue `q` holds beyond its guarantee that it could give back.
    pub fn reclaimable(&self, q: usize, h: &Holdings) -> u32 {
        h.held[q].saturating_sub(self.queues[q].guarantee.max(h.pinned[q]))
    }

    /// Every broken rule when round job `i` holds `gpus(i)` GPUs (`round`
    /// is the one the tree was built from). `starts(i)`: a job not running
    /// before that runs now.
    pub fn breaches(&self, round: &Round, gpus: impl Fn(usize) -> u32) -> Vec<QueueBreach> {
        let keeps = |i: usize| {
            let j = &round.jobs[i];
            !j.preemptible && !j.state.allocation.is_empty() && gpus(i) > 0
        };
        let h = self.holdings(&gpus, keeps);
        let mut out = Vec::new();
        for (q, queue) in self.queues.iter().enumerate() {
            let limit = self.limit(q, &h);
            if h.held[q] > limit {
                out.push(QueueBreach::OverLimit {
                    queue: queue.name.clone(),
                    held: h.held[q],
                    limit,
                });
            }
            if !queue.lend {
                let outside = (0..round.jobs.len())
                    .filter(|&i| !self.is_ancestor_or_self(q, self.leaf[i]))
                    .map(&gpus)
                    .sum::<u32>();
                let pinned_out = (0..round.jobs.len())
                    .filter(|&i| !self.is_ancestor_or_self(q, self.leaf[i]) && keeps(i))
                    .map(&gpus)
                    .sum::<u32>();
                let allowed = self.capacity.saturating_sub(queue.guarantee).max(pinned_out);
                if outside > allowed {
                    out.push(QueueBreach::Unlent {
                        queue: queue.name.clone(),
                        outside,
                        allowed,
                    });
                }
            }
        }
        for (i, j) in round.jobs.iter().enumerate() {
            let g = gpus(i);
            if g > 0 && !j.preemptible && j.state.allocation.is_empty() {
                if let Some(&q) = self
                    .path(self.leaf[i])
                    .iter()
                    .find(|&&q| h.held[q] > self.queues[q].guarantee)
                {
                    out.push(QueueBreach::PinnedBorrows {
                        job: j.id,
                        queue: self.queues[q].name.clone(),
                        held: h.held[q],
                        guarantee: self.queues[q].guarantee,
                    });
                }
            }
            if g > 0 || j.max_gpus == 0 {
                continue;
            }
            let min = j.min_gpus.max(1);
            'path: for &a in self.path(self.leaf[i]) {
                // A limit on the way up that the job's start would pass
                // blocks it here and above: it could not start anyway.
                if h.held[a].saturating_add(min) > self.limit(a, &h) {
                    break;
                }
                let free = self.queues[a].guarantee.saturating_sub(h.held[a]);
                if free < min {
                    continue;
                }
                for b in self.beside(a) {
                    let borrowed = self.reclaimable(b, &h);
                    if borrowed > 0 {
                        out.push(QueueBreach::Unreclaimed {
                            job: j.id,
                            min,
                            queue: self.queues[a].name.clone(),
                            free,
                            borrower: self.queues[b].name.clone(),
                            borrowed,
                        });
                        break 'path;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Allocation, GpuId};
    use crate::queue::parse_queues_toml;
    use crate::round::test_job;
    use crate::NodeId;

    fn round(queues: Vec<Queue>, jobs: Vec<(&str, u32, u32)>) -> Round {
        let mut r = crate::round::test_round(Vec::new());
        r.cluster = "1x8".parse().unwrap();
        r.queues = queues;
        r.jobs = jobs
            .into_iter()
            .enumerate()
            .map(|(i, (q, min, max))| crate::RoundJob {
                name: format!("j{i}"),
                queue: Some(q.to_string()),
                min_gpus: min,
                max_gpus: max,
                ..test_job(i as u32)
            })
            .collect();
        r
    }

    fn two_teams() -> Vec<Queue> {
        vec![
            Queue {
                guarantee: 4,
                ..Queue::new("a")
            },
            Queue {
                guarantee: 4,
                ..Queue::new("b")
            },
        ]
    }

    #[test]
    fn shares_nest_weights_by_hand() {
        // a (weight 1): 3 jobs; b (weight 3): 1 job; 4 jobs in all.
        let mut qs = two_teams();
        qs[1].weight = 3.0;
        let r = round(
            qs.clone(),
            vec![("a", 1, 8), ("a", 1, 8), ("a", 1, 8), ("b", 1, 8)],
        );
        let s = QueueTree::new(&r).unwrap().shares();
        // a's jobs: 4/3 × 1/4; b's job: 4/1 × 3/4.
        let want = [1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 3.0];
        for (got, want) in s.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{s:?}");
        }
        assert!((s.iter().sum::<f64>() - 4.0).abs() < 1e-12);
        // One queue with jobs: a's weight is all there is, plain mean.
        let r = round(qs, vec![("a", 1, 8), ("a", 1, 8)]);
        assert_eq!(QueueTree::new(&r).unwrap().shares(), vec![1.0, 1.0]);
        // A tree: org x (weight 1) over x1, x2 (weights 1, 1); y (weight 1).
        let tree = parse_queues_toml(
            "[[queue]]\nname = \"x\"\n[[queue]]\nname = \"x1\"\nparent = \"x\"\n\
             [[queue]]\nname = \"x2\"\nparent = \"x\"\n[[queue]]\nname = \"y\"\n",
            "t",
        )
        .unwrap();
        let r = round(tree, vec![("x1", 1, 8), ("x1", 1, 8), ("x2", 1, 8), ("y", 1, 8)]);
        let s = QueueTree::new(&r).unwrap().shares();
        // x1: 4/2 × 1/2 × 1/2; x2: 4 × 1/2 × 1/2; y: 4 × 1/2.
        assert_eq!(s, vec![0.5, 0.5, 1.0, 2.0]);
    }

    #[test]
    fn a_round_without_queues_has_no_tree_and_no_rules() {
        let mut r = round(vec![], vec![]);
        r.jobs.push(test_job(0));
        assert!(QueueTree::new(&r).is_none());
        let errs = r.check().err().unwrap_or_default();
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn a_waiting_job_within_its_guarantee_reclaims_from_a_borrower() {
        let r = round(two_teams(), vec![("a", 1, 8), ("b", 2, 2)]);
        let t = QueueTree::new(&r).unwrap();
        // a holds all 8 while b's job waits: b's guarantee is unused.
        let b = t.breaches(&r, |i| [8, 0][i]);
        assert!(
            matches!(&b[..], [QueueBreach::Unreclaimed { queue, borrower, borrowed: 4, .. }] if queue == "b" && borrower == "a"),
            "{b:?}"
        );
        // a shrinks to its guarantee and b runs: nothing broken.
        assert!(t.breaches(&r, |i| [4, 2][i]).is_empty());
        // b's job asks for more than b's guarantee: a may keep borrowing.
        let r = round(two_teams(), vec![("a", 1, 8), ("b", 5, 5)]);
        let t = QueueTree::new(&r).unwrap();
        assert!(t.breaches(&r, |i| [8, 0][i]).is_empty());
    }

    #[test]
    fn limits_lending_and_pinned_borrowing() {
        let mut qs = two_teams();
        qs[0].borrow_limit = Some(2);
        let r = round(qs.clone(), vec![("a", 1, 8)]);
        let t = QueueTree::new(&r).unwrap();
        assert!(matches!(
            &t.breaches(&r, |_| 7)[..],
            [QueueBreach::OverLimit {
                held: 7,
                limit: 6,
                ..
            }]
        ));
        assert!(t.breaches(&r, |_| 6).is_empty());
        // b does not lend: a may hold only 8 − 4 even with b idle.
        let mut qs = two_teams();
        qs[1].lend = false;
        let r = round(qs, vec![("a", 1, 8)]);
        let t = QueueTree::new(&r).unwrap();
        assert!(matches!(
            &t.breaches(&r, |_| 5)[..],
            [QueueBreach::Unlent {
                outside: 5,
                allowed: 4,
                ..
            }]
        ));
        // A non-preemptible job may not start on borrowed GPUs, but one
        // already running keeps its GPUs, and they count as its queue's.
        let mut r = round(two_teams(), vec![("a", 6, 6), ("b", 2, 2)]);
        r.jobs[0].preemptible = false;
        let t = QueueTree::new(&r).unwrap();
        assert!(matches!(
            &t.breaches(&r, |i| [6, 2][i])[..],
            [QueueBreach::PinnedBorrows { .. }]
        ));
        r.jobs[0].state.allocation =
            Allocation::from_gpus((0..6).map(|g| GpuId::new(NodeId(0), g)).collect());
        let t = QueueTree::new(&r).unwrap();
        assert!(
            t.breaches(&r, |i| [6, 2][i]).is_empty(),
            "pinned and running: spared"
        );
        // b waits within its guarantee, but a's extra GPUs are pinned: nothing to reclaim.
        assert!(t.breaches(&r, |i| [6, 0][i]).is_empty());
    }

    #[test]
    fn reclaim_goes_to_the_queues_beside_and_not_within_the_family() {
        // org x (6) = x1 (3) + x2 (3); y (2). x1 borrows from x2 inside x.
        let qs = vec![
            Queue {
                guarantee: 6,
                ..Queue::new("x")
            },
            Queue {
                guarantee: 3,
                parent: Some("x".into()),
                ..Queue::new("x1")
            },
            Queue {
                guarantee: 3,
                parent: Some("x".into()),
                ..Queue::new("x2")
            },
            Queue {
                guarantee: 2,
                ..Queue::new("y")
            },
        ];
        let r = round(qs, vec![("x1", 1, 8), ("y", 1, 1), ("x2", 1, 1)]);
        let t = QueueTree::new(&r).unwrap();
        assert_eq!(t.beside(1), vec![2, 3]);
        // x1 holds 6 (3 of x2's), y waits: x holds 6 = its guarantee, so
        // y has nothing to reclaim; x2's waiting job reclaims from x1.
        let b = t.breaches(&r, |i| [6, 0, 0][i]);
        assert!(
            !b.iter()
                .any(|b| matches!(b, QueueBreach::Unreclaimed { queue, .. } if queue == "y")),
            "{b:?}"
        );
        assert!(b.iter().any(|b| matches!(b, QueueBreach::Unreclaimed { queue, borrower, .. } if queue == "x2" && borrower == "x1")), "{b:?}");
        // x1 holds 7: x borrows 1 from y, y's job waits.
        let b = t.breaches(&r, |i| [7, 0, 1][i]);
        assert!(b.iter().any(|b| matches!(b, QueueBreach::Unreclaimed { queue, borrower, .. } if queue == "y" && borrower == "x")), "{b:?}");
        // x2's job waits while x1 borrows inside x: x2 reclaims from x1.
        let b = t.breaches(&r, |i| [6, 1, 0][i]);
        assert!(b.iter().any(|b| matches!(b, QueueBreach::Unreclaimed { queue, borrower, .. } if queue == "x2" && borrower == "x1")), "{b:?}");
    }

    #[test]
    fn queues_files_load_and_their_errors_name_line_and_field() {
        let text = "# two teams\n[[queue]]\nname = \"org\"\nguarantee = 8\n\n[[queue]]\nname = \"team\"\nparent = \"org\"\nguarantee = 4\nweight = 2\nborrow_limit = 2\nlend = false\n";
        let qs = parse_queues_toml(text, "q.toml").unwrap();
        assert_eq!(qs.len(), 2);
        assert_eq!(
            qs[1],
            Queue {
                parent: Some("org".into()),
                guarantee: 4,
                weight: 2.0,
                borrow_limit: Some(2),
                lend: false,
                ..Queue::new("team")
            }
        );
        let bad = text
            .replace("guarantee = 4", "guarantee = 9")
            .replace("weight = 2", "weight = -1");
        let e = parse_queues_toml(&bad, "q.toml").unwrap_err();
        assert!(
            e.contains(&"q.toml:4:guarantee: 8 GPUs, less than its children's guarantees (9)".to_string()),
            "{e:?}"
        );
        assert!(
            e.contains(&"q.toml:10:weight: must be > 0, got -1".to_string()),
            "{e:?}"
        );
        let e = parse_queues_toml("[[queue]]\nname = \"a\"\ngurantee = 3\n", "q.toml").unwrap_err();
        assert!(
            e[0].starts_with("q.toml:3:gurantee: unknown field `gurantee`"),
            "{e:?}"
        );
        // A wrong type names its field too (issue 54: it said only the line).
        let e = parse_queues_toml("[[queue]]\nname = \"a\"\nguarantee = \"x\"\n", "q.toml").unwrap_err();
        assert!(e[0].starts_with("q.toml:3:guarantee: invalid type"), "{e:?}");
        assert!(parse_queues_toml("", "q.toml").is_err());
    }

    /// The shipped examples load, and their trees fit the clusters they are written for.
    #[test]
    fn the_example_queues_file_loads() {
        let text = include_str!("../../../../examples/queues.toml");
        let qs = parse_queues_toml(text, "examples/queues.toml").unwrap();
        assert_eq!(qs.len(), 4);
        let mut errs = Vec::new();
        crate::queue::check_parts(&qs, 64, &[], &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        // The files docs/tenants.md measures with, on their clusters.
        for (text, name, gpus, n) in [
            (
                include_str!("../../../../examples/queues-ab.toml"),
                "queues-ab.toml",
                16,
                2,
            ),
            (
                include_str!("../../../../examples/philly-sampled-vcs.toml"),
                "philly-sampled-vcs.toml",
                64,
                6,
            ),
        ] {
            let qs = parse_queues_toml(text, name).unwrap();
            assert_eq!(qs.len(), n, "{name}");
            crate::queue::check_parts(&qs, gpus, &[], &mut errs);
            assert!(errs.is_empty(), "{name}: {errs:?}");
        }
    }

    /// A cluster that lost GPUs owes each queue its proportion of what is
    /// left, children within parents; guarantees that fit are kept.
    #[test]
    fn guarantees_shrink_with_the_cluster() {
        let qs = vec![
            Queue {
                guarantee: 6,
                ..Queue::new("org")
            },
            Queue {
                guarantee: 3,
                parent: Some("org".into()),
                ..Queue::new("t1")
            },
            Queue {
                guarantee: 3,
                parent: Some("org".into()),
                ..Queue::new("t2")
            },
            Queue {
                guarantee: 2,
                ..Queue::new("other")
            },
        ];
        assert!(crate::queue::fit_guarantees(&qs, 8).is_none());
        let fitted = crate::queue::fit_guarantees(&qs, 5).unwrap();
        let g: Vec<u32> = fitted.iter().map(|q| q.guarantee).collect();
        assert_eq!(g, vec![3, 1, 1, 1]);
        let mut errs = Vec::new();
        crate::queue::check_parts(&fitted, 5, &[], &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        // Where a job may be, worded for the round check and the daemon.
        use crate::queue::leaf_problem;
        assert_eq!(leaf_problem(&qs, Some("t1")), None);
        assert_eq!(leaf_problem(&qs, None), None, "the implicit default queue");
        assert_eq!(
            leaf_problem(&qs, Some("x")).unwrap(),
            "no queue named 'x'; queues: org, t1, t2, other"
        );
        assert!(leaf_problem(&qs, Some("org"))
            .unwrap()
            .contains("a job names a leaf queue"));
        assert_eq!(leaf_problem(&[], Some("x")), None, "no queues: one pool");
    }

    #[test]
    fn bad_queues_are_named_by_path() {
        let qs = vec![
            Queue {
                guarantee: 9,
                ..Queue::new("x")
            },
            Queue {
                guarantee: 5,
                parent: Some("x".into()),
                ..Queue::new("x1")
            },
            Queue {
                guarantee: 5,
                parent: Some("nope".into()),
                weight: 0.0,
                ..Queue::new("x1")
            },
        ];
        let r = round(qs, vec![("x", 1, 1), ("z", 1, 1)]);
        let errs = r.check().err().unwrap_or_default();
        let all = errs.join("\n");
        for want in [
            "queues[2].name: duplicate 'x1', also queues[1]",
            "queues[2].weight: must be > 0",
            "queues[2].parent: no queue named 'nope'",
            "queues: top-level guarantees sum to",
            "jobs[0] (j0).queue: 'x' has queues below it",
            "jobs[1] (j1).queue: no queue named 'z'",
        ] {
            assert!(all.contains(want), "missing {want:?} in\n{all}");
        }
        let mut qs = two_teams();
        qs[0].parent = Some("b".into());
        qs[1].parent = Some("a".into());
        let r = round(qs, vec![]);
        let errs = r.check().err().unwrap_or_default();
        assert!(errs.iter().any(|e| e.contains("is its own ancestor")), "{errs:?}");
    }
}
