//! Jobs: what the user asked for ([`JobSpec`]) and what has happened to the
//! job so far ([`JobState`]).

use serde::{Deserialize, Serialize};

use crate::cluster::NodeId;

/// Index of a job within a workload or a live daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

/// What the user submitted. Immutable for the life of the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub id: JobId,
    pub name: String,
    /// Application (model) name, a key into the application profiles.
    pub app: String,
    pub submit_s: f64,
    /// GPUs the user asked for (fixed-size policies use exactly this).
    pub requested_gpus: u32,
    /// Total batch size the user asked for.
    pub batch_size: u32,
    pub min_gpus: u32,
    pub max_gpus: u32,
    pub preemptible: bool,
}

/// A job's GPUs: one node id per GPU, sorted. Empty = not running.
///
/// One entry per GPU (rather than a node → count map) is the shape the plan
/// JSON uses, and makes "same placement" a plain equality.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Allocation(pub Vec<NodeId>);

impl Allocation {
    pub fn new(mut gpus: Vec<NodeId>) -> Self {
        gpus.sort();
        Allocation(gpus)
    }

    /// `counts[(node, gpus)]` for a job that takes `gpus` GPUs on each listed node.
    pub fn from_counts(counts: &[(NodeId, u32)]) -> Self {
        let mut v = Vec::new();
        for &(n, k) in counts {
            v.extend(std::iter::repeat_n(n, k as usize));
        }
        Allocation::new(v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn num_gpus(&self) -> u32 {
        self.0.len() as u32
    }

    /// (node, GPUs on that node), in node order.
    pub fn per_node(&self) -> Vec<(NodeId, u32)> {
        let mut out: Vec<(NodeId, u32)> = Vec::new();
        for &n in &self.0 {
            match out.last_mut() {
                Some((m, k)) if *m == n => *k += 1,
                _ => out.push((n, 1)),
            }
        }
        out
    }

    pub fn num_nodes(&self) -> u32 {
        self.per_node().len() as u32
    }

    /// GPU counts per occupied node, in node order: the "placement" of the
    /// Pollux profiles (e.g. `[2, 2]`).
    pub fn shape(&self) -> Vec<u32> {
        self.per_node().into_iter().map(|(_, k)| k).collect()
    }
}

/// Everything that has happened to a job so far, as a real agent would know it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// Scale-invariant progress (AdaScale iterations at the initial batch size).
    pub progress: f64,
    pub epoch: u32,
    /// GPU-seconds the job has held GPUs (including restart delays).
    pub attained_gpu_s: f64,
    /// Seconds since submission.
    pub age_s: f64,
    /// Number of allocation changes (including the first start, as Pollux counts).
    pub restarts: u32,
    pub allocation: Allocation,
    /// Most GPUs the job has ever run on (bounds Pollux's exploration).
    pub max_gpus_used: u32,
    /// Current total batch size and the local (per-GPU) batch and accumulation.
    pub batch_size: u32,
    pub local_bsz: u32,
    pub accum_steps: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_shape() {
        let a = Allocation::new(vec![NodeId(3), NodeId(1), NodeId(3), NodeId(1), NodeId(1)]);
        assert_eq!(a.num_gpus(), 5);
        assert_eq!(a.num_nodes(), 2);
        assert_eq!(a.shape(), vec![3, 2]);
        assert_eq!(a, Allocation::from_counts(&[(NodeId(1), 3), (NodeId(3), 2)]));
        assert!(Allocation::default().is_empty());
        assert_eq!(Allocation::default().num_nodes(), 0);
    }
}
