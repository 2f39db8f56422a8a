//! Whether a job can ever run: the one rule the simulator (which refuses a
//! workload) and the daemon (which refuses a submission, or holds a queued
//! job with the reason) share, so the two drivers never disagree on which
//! jobs would wait forever.

use crate::cluster::{Cluster, GpuType};
use crate::queue::{Queue, DEFAULT_QUEUE};

/// Why a job of `min_gpus` GPUs can never run ([`never_fits`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeverFits {
    /// More GPUs than the largest GPU type has: a job never mixes types.
    LargestType {
        /// The job's `min_gpus`.
        min_gpus: u32,
        /// The types with the most GPUs (several when tied), in the
        /// cluster's order ([`Cluster::types`]); empty for a cluster with no node.
        largest: Vec<GpuType>,
        /// GPUs of each of them.
        largest_gpus: u32,
        /// GPUs in the whole cluster.
        total_gpus: u32,
        /// Nodes in the whole cluster.
        nodes: usize,
    },
    /// More GPUs than the job's queue, or a queue above it, may ever hold:
    /// its guarantee plus its borrowing limit.
    QueueLimit {
        /// The job's `min_gpus`.
        min_gpus: u32,
        /// The queue whose limit is the smallest on the job's path.
        queue: String,
        /// That queue's guarantee plus borrowing limit.
        limit: u32,
    },
}

impl NeverFits {
    /// The job's `min_gpus`, whichever rule it breaks.
    pub fn min_gpus(&self) -> u32 {
        match self {
            NeverFits::LargestType { min_gpus, .. } | NeverFits::QueueLimit { min_gpus, .. } => *min_gpus,
        }
    }
}

impl std::fmt::Display for NeverFits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NeverFits::LargestType {
                min_gpus,
                largest,
                largest_gpus,
                total_gpus,
                nodes,
            } => {
                write!(f, "{} can never fit: ", count(*min_gpus, "GPU"))?;
                let (nodes, total) = (count(*nodes as u64, "node"), count(*total_gpus, "GPU"));
                match largest.as_slice() {
                    [] => write!(f, "the cluster has no GPU"),
                    [one] if *total_gpus == *largest_gpus => {
                        write!(f, "the cluster has {total} ({one}) on {nodes}")
                    }
                    [one] => write!(
                        f,
                        "a job runs on one GPU type, and the largest, {one}, has {} ({total} on {nodes} in all)",
                        count(*largest_gpus, "GPU")
                    ),
                    tied => {
                        let names: Vec<&str> = tied.iter().map(GpuType::as_str).collect();
                        let (last, rest) = names.split_last().unwrap_or((&"", &[]));
                        let comma = if rest.len() > 1 { "," } else { "" };
                        write!(
                            f,
                            "a job runs on one GPU type, and the largest, {}{comma} and {last}, have {} each \
                             ({total} on {nodes} in all)",
                            rest.join(", "),
                            count(*largest_gpus, "GPU")
                        )
                    }
                }
            }
            NeverFits::QueueLimit {
                min_gpus,
                queue,
                limit,
            } => write!(
                f,
                "{} can never fit: queue {queue} may hold at most {limit} (its guarantee plus borrowing limit)",
                count(*min_gpus, "GPU")
            ),
        }
    }
}

/// `1 GPU`, `4 GPUs`.
fn count(n: impl Into<u64>, what: &str) -> String {
    let n = n.into();
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl std::error::Error for NeverFits {}

/// Why a job of `min_gpus` GPUs in `queue` (`None`: `default`) of `queues`
/// can never run on `cluster`; `None` when it can.
///
/// A job runs on one GPU type, so the type with the most GPUs bounds it,
/// not the cluster's total. Under queues, every queue on the job's path
/// holds at most its guarantee plus its borrowing limit (docs/tenants.md),
/// as configured: a daemon scales guarantees down while its cluster has
/// shrunk, but the cluster may grow again. A queue the job names that
/// `queues` lacks sets no limit (callers refuse it, or plan the job in
/// `default`). Jobs pin no GPU type today; one that did would be bounded
/// by that type's GPUs instead.
pub fn never_fits(
    cluster: &Cluster,
    min_gpus: u32,
    queue: Option<&str>,
    queues: &[Queue],
) -> Option<NeverFits> {
    let (types, per_type) = gpus_per_type(cluster);
    let largest_gpus = per_type.iter().copied().max().unwrap_or(0);
    if min_gpus > largest_gpus {
        return Some(NeverFits::LargestType {
            min_gpus,
            largest: types
                .into_iter()
                .zip(&per_type)
                .filter(|(_, g)| **g == largest_gpus && largest_gpus > 0)
                .map(|(t, _)| t)
                .collect(),
            largest_gpus,
            total_gpus: per_type.iter().fold(0u32, |a, g| a.saturating_add(*g)),
            nodes: cluster.num_nodes(),
        });
    }
    let index = |name: &str| queues.iter().position(|q| q.name == name);
    let mut at = index(queue.unwrap_or(DEFAULT_QUEUE));
    let mut tightest: Option<(usize, u32)> = None;
    // Bounded by the queue count: a cycle (refused where queues are read)
    // must not loop here.
    for _ in 0..queues.len() {
        let Some(q) = at else { break };
        if let Some(b) = queues[q].borrow_limit {
            let limit = queues[q].guarantee.saturating_add(b);
            if tightest.is_none_or(|(_, l)| limit < l) {
                tightest = Some((q, limit));
            }
        }
        at = queues[q].parent.as_deref().and_then(index);
    }
    match tightest {
        Some((q, limit)) if min_gpus > limit => Some(NeverFits::QueueLimit {
            min_gpus,
            queue: queues[q].name.clone(),
            limit,
        }),
        _ => None,
    }
}

/// GPUs of the cluster's largest GPU type: a job never mixes types, so
/// no job can hold more.
pub fn largest_type_gpus(cluster: &Cluster) -> u32 {
    gpus_per_type(cluster).1.into_iter().max().unwrap_or(0)
}

/// The cluster's types ([`Cluster::types`]) and the GPUs of each.
fn gpus_per_type(cluster: &Cluster) -> (Vec<GpuType>, Vec<u32>) {
    let types = cluster.types();
    let mut gpus = vec![0u32; types.len()];
    for (n, t) in cluster.nodes.iter().zip(cluster.type_index()) {
        gpus[t] = gpus[t].saturating_add(n.gpus);
    }
    (types, gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mixed() -> Cluster {
        "1x4:t4+1x4:a100".parse().unwrap()
    }

    /// Issue 49, item 4: on 4 T4s and 4 A100s no job of 5 GPUs can run,
    /// though the cluster has 8; the reason names the largest types.
    #[test]
    fn a_job_is_bounded_by_its_largest_gpu_type() {
        assert_eq!(never_fits(&mixed(), 4, None, &[]), None);
        assert_eq!(largest_type_gpus(&mixed()), 4);
        let why = never_fits(&mixed(), 5, None, &[]).unwrap();
        assert_eq!(why.min_gpus(), 5);
        assert_eq!(
            why.to_string(),
            "5 GPUs can never fit: a job runs on one GPU type, and the largest, t4 and a100, have \
             4 GPUs each (8 GPUs on 2 nodes in all)"
        );
        let c: Cluster = "2x4:t4+1x4:a100".parse().unwrap();
        assert_eq!(never_fits(&c, 8, None, &[]), None);
        assert_eq!(
            never_fits(&c, 9, None, &[]).unwrap().to_string(),
            "9 GPUs can never fit: a job runs on one GPU type, and the largest, t4, has 8 GPUs \
             (12 GPUs on 3 nodes in all)"
        );
        let c: Cluster = "2x4:a100".parse().unwrap();
        assert_eq!(
            never_fits(&c, 9, None, &[]).unwrap().to_string(),
            "9 GPUs can never fit: the cluster has 8 GPUs (a100) on 2 nodes"
        );
        let none = Cluster { nodes: Vec::new() };
        assert_eq!(
            never_fits(&none, 1, None, &[]).unwrap().to_string(),
            "1 GPU can never fit: the cluster has no GPU"
        );
    }

    /// A job larger than what its queue, or a queue above it, may ever
    /// hold (guarantee plus borrowing limit) can never run either; one
    /// without a limit is bounded by the cluster alone.
    #[test]
    fn a_job_is_bounded_by_its_queues_limits() {
        let c: Cluster = "4x8:a100".parse().unwrap();
        let qs = vec![
            Queue {
                guarantee: 8,
                borrow_limit: Some(8),
                ..Queue::new("org")
            },
            Queue {
                parent: Some("org".into()),
                guarantee: 4,
                borrow_limit: Some(20),
                ..Queue::new("team")
            },
            Queue {
                guarantee: 2,
                borrow_limit: Some(1),
                ..Queue::new(DEFAULT_QUEUE)
            },
            Queue::new("free"),
        ];
        assert_eq!(never_fits(&c, 16, Some("team"), &qs), None);
        let why = never_fits(&c, 17, Some("team"), &qs).unwrap();
        assert_eq!(
            why,
            NeverFits::QueueLimit {
                min_gpus: 17,
                queue: "org".into(),
                limit: 16
            }
        );
        assert_eq!(
            why.to_string(),
            "17 GPUs can never fit: queue org may hold at most 16 (its guarantee plus borrowing limit)"
        );
        assert_eq!(never_fits(&c, 32, Some("free"), &qs), None);
        assert!(matches!(
            never_fits(&c, 33, Some("free"), &qs),
            Some(NeverFits::LargestType { .. })
        ));
        assert_eq!(never_fits(&c, 3, None, &qs), None);
        assert!(matches!(
            never_fits(&c, 4, None, &qs),
            Some(NeverFits::QueueLimit { limit: 3, .. })
        ));
        assert_eq!(
            never_fits(&c, 32, Some("gone"), &qs),
            None,
            "no such queue: no limit"
        );
    }
}
