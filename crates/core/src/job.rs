//! Jobs: what the user asked for ([`JobSpec`]) and what has happened to the
//! job so far ([`JobState`]).

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, GpuType, NodeId};

/// Index of a job within a workload or a live daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

/// What the user submitted. Immutable for the life of the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The job's index, unique within its workload or daemon.
    pub id: JobId,
    /// Display name, for reports and logs.
    pub name: String,
    /// Application (model) name, a key into the application profiles.
    pub app: String,
    /// Submission time in seconds (from the start of the workload).
    pub submit_s: f64,
    /// GPUs the user asked for (fixed-size policies use exactly this).
    pub requested_gpus: u32,
    /// Total batch size the user asked for.
    pub batch_size: u32,
    /// Fewest GPUs the job may run on when it runs.
    pub min_gpus: u32,
    /// Most GPUs the job may run on.
    pub max_gpus: u32,
    /// Whether planners may stop or move it once it runs; if not, it keeps its GPUs.
    pub preemptible: bool,
    /// The team queue it is submitted to ([`crate::queue`]); absent: `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// One GPU: its node and its index on that node (NVML's device index there).
///
/// `index` may be [`GpuId::ANY`]: "some GPU on this node". Planners that
/// decide at node level produce such slots, and round files written before
/// GPUs had identity hold them; [`crate::bind_plan`] and
/// [`crate::bind_round`] turn them into named GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuId {
    /// The node the GPU is on.
    pub node: NodeId,
    /// Device index on the node, or [`GpuId::ANY`] for a node-level slot.
    pub index: u32,
}

impl GpuId {
    /// Not yet a particular GPU on the node.
    pub const ANY: u32 = u32::MAX;

    /// GPU `index` of `node`.
    pub fn new(node: NodeId, index: u32) -> Self {
        GpuId { node, index }
    }

    /// Some GPU on `node`, to be bound later.
    pub fn any_on(node: NodeId) -> Self {
        GpuId {
            node,
            index: Self::ANY,
        }
    }

    /// Whether this names a particular GPU (not a [`GpuId::ANY`] slot).
    pub fn is_bound(&self) -> bool {
        self.index != Self::ANY
    }
}

/// JSON: `[node, index]` for a named GPU; a bare `node` for "some GPU on the
/// node", which is also how every allocation was written before GPUs had
/// identity, so those files still load.
impl Serialize for GpuId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_bound() {
            (self.node.0, self.index).serialize(s)
        } else {
            self.node.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for GpuId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Node(u32),
            Gpu(u32, u32),
        }
        match Repr::deserialize(d).map_err(|_| {
            serde::de::Error::custom("a GPU is a node index or a [node, gpu index] pair of integers")
        })? {
            Repr::Node(n) => Ok(GpuId::any_on(NodeId(n))),
            Repr::Gpu(_, GpuId::ANY) => Err(serde::de::Error::custom("GPU index out of range")),
            Repr::Gpu(n, i) => Ok(GpuId::new(NodeId(n), i)),
        }
    }
}

/// A job's GPUs, sorted by node then index. Empty = not running.
///
/// One entry per GPU (rather than a node → count map) makes "same GPUs" a
/// plain equality; the per-node counts the goodput model needs are derived.
/// Loading always sorts, so a hand-written file in any order means the same.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Allocation(Vec<GpuId>);

impl<'de> Deserialize<'de> for Allocation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let gpus = Vec::<GpuId>::deserialize(d)?;
        let a = Allocation::from_gpus(gpus);
        if let Some(g) = a.duplicate() {
            return Err(serde::de::Error::custom(format!(
                "GPU {} of node {} is listed twice",
                g.index, g.node.0
            )));
        }
        Ok(a)
    }
}

impl Allocation {
    /// No GPUs (a `const`, so a static empty allocation can be borrowed).
    pub const EMPTY: Allocation = Allocation(Vec::new());

    /// Named (or node-level) GPUs, in any order.
    pub fn from_gpus(mut gpus: Vec<GpuId>) -> Self {
        gpus.sort_unstable();
        Allocation(gpus)
    }

    /// Node-level: one "some GPU on this node" slot per listed node entry.
    pub fn new(nodes: Vec<NodeId>) -> Self {
        Allocation::from_gpus(nodes.into_iter().map(GpuId::any_on).collect())
    }

    /// Node-level: `gpus` GPUs on each listed node, to be bound later.
    pub fn from_counts(counts: &[(NodeId, u32)]) -> Self {
        let mut v = Vec::new();
        for &(n, k) in counts {
            v.extend(std::iter::repeat_n(GpuId::any_on(n), k as usize));
        }
        Allocation::from_gpus(v)
    }

    /// The GPUs, sorted by node then index.
    pub fn gpus(&self) -> &[GpuId] {
        &self.0
    }

    /// A named GPU listed twice, if any (a node-level slot may repeat).
    pub fn duplicate(&self) -> Option<GpuId> {
        self.0
            .windows(2)
            .find(|w| w[0] == w[1] && w[0].is_bound())
            .map(|w| w[0])
    }

    /// Whether every GPU is a particular one (no node-level slot left).
    pub fn is_bound(&self) -> bool {
        self.0.iter().all(GpuId::is_bound)
    }

    /// Whether the job holds no GPUs (is not running).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of GPUs (node-level slots count one each).
    pub fn num_gpus(&self) -> u32 {
        self.0.len() as u32
    }

    /// (node, GPUs on that node), in node order.
    pub fn per_node(&self) -> Vec<(NodeId, u32)> {
        self.node_runs().collect()
    }

    /// [`Allocation::per_node`] without allocating, for per-round checks.
    pub fn node_runs(&self) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        self.0
            .chunk_by(|a, b| a.node == b.node)
            .map(|c| (c[0].node, c.len() as u32))
    }

    /// Nodes in order, one entry per GPU (the pre-identity view).
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.0.iter().map(|g| g.node)
    }

    /// Number of distinct nodes the GPUs are on.
    pub fn num_nodes(&self) -> u32 {
        self.node_runs().count() as u32
    }

    /// Same GPU count on every node. What a node-level planner can tell
    /// apart; after binding, same nodes means the same GPUs ([`crate::bind_plan`]
    /// keeps a job's own GPUs first).
    pub fn same_nodes(&self, other: &Allocation) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a.node == b.node)
    }

    /// The same GPUs: equal where both are named; node-level slots match
    /// any GPU of their node.
    pub fn same_gpus(&self, other: &Allocation) -> bool {
        if self.is_bound() && other.is_bound() {
            self == other
        } else {
            self.same_nodes(other)
        }
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
    /// Current training epoch; the profiles' gradient statistics depend on it.
    pub epoch: u32,
    /// GPU-seconds the job has held GPUs (including restart delays).
    pub attained_gpu_s: f64,
    /// Seconds since submission.
    pub age_s: f64,
    /// Number of allocation changes (including the first start, as Pollux counts).
    pub restarts: u32,
    /// GPUs the job holds now; empty when it is not running.
    pub allocation: Allocation,
    /// Most GPUs the job has ever run on (bounds Pollux's exploration).
    pub max_gpus_used: u32,
    /// Current total batch size: local batch × GPUs × (accumulation steps + 1).
    pub batch_size: u32,
    /// Current per-GPU batch size.
    pub local_bsz: u32,
    /// Current accumulation steps before each optimizer step (0: none).
    pub accum_steps: u32,
    /// Seconds of work a stop would lose now: the job's run time since its
    /// last checkpoint (0 for a job that checkpoints when stopped). Absent:
    /// the job reports no checkpoints, so a restart is charged its fixed
    /// penalty alone, as before checkpoints were known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_checkpoint_s: Option<f64>,
    /// Seconds of work its past restarts threw away (what each lost since
    /// its checkpoint), charged beside the fixed penalty per restart.
    /// Absent: none known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_s: Option<f64>,
    /// Seconds the job has held its current allocation (since its last
    /// start or move): what a minimum run time is measured against.
    /// Absent: unknown, and no minimum run time holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_s: Option<f64>,
}

/// Cluster queries that take an allocation, here so that the cluster stays
/// below the jobs (an allocation names the cluster's nodes).
impl Cluster {
    /// The GPU type of an allocation (of its first GPU: a valid plan never
    /// mixes types); `None` for no GPUs or a node not in the cluster.
    pub fn type_of(&self, alloc: &Allocation) -> Option<&GpuType> {
        let n = alloc.nodes().next()?;
        self.nodes.get(n.0 as usize).map(|n| &n.gpu_type)
    }
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

    #[test]
    fn allocations_load_in_both_forms_and_any_order() {
        let legacy: Allocation = serde_json::from_str("[1,0,1,0]").unwrap();
        assert_eq!(legacy, Allocation::from_counts(&[(NodeId(0), 2), (NodeId(1), 2)]));
        assert!(!legacy.is_bound());
        let named: Allocation = serde_json::from_str("[[1,3],[0,1],[1,2]]").unwrap();
        assert!(named.is_bound());
        assert_eq!(named.shape(), vec![1, 2]);
        assert_eq!(named.gpus()[0], GpuId::new(NodeId(0), 1));
        assert_eq!(serde_json::to_string(&named).unwrap(), "[[0,1],[1,2],[1,3]]");
        assert!(named.same_nodes(&legacy.clone()) == (named.shape() == legacy.shape()));
        let e = serde_json::from_str::<Allocation>("[[0,1],[0,1]]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listed twice"), "{e}");
        assert!(serde_json::from_str::<Allocation>("[[0,1,2]]").is_err());
        assert!(serde_json::from_str::<Allocation>("[-1]").is_err());
    }
}
