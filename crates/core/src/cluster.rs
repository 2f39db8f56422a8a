//! The cluster: nodes, their GPU count and GPU type.

use serde::{Deserialize, Serialize};
use std::str::FromStr;

use crate::error::CoreError;

/// Largest node accepted (GPUs on one node). Far above any real machine;
/// it keeps per-GPU tables small and sums far from overflow.
pub const MAX_GPUS_PER_NODE: u32 = 4096;

/// Largest cluster accepted (GPUs in all). Keeps every GPU sum in `u32`
/// (two nodes of 2^31 once wrapped to "the cluster has 0").
pub const MAX_GPUS_TOTAL: u64 = 1 << 20;

/// Index of a node in [`Cluster::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

/// A GPU model's name (`t4`, `a100`). A newtype so a type is never mixed up
/// with a node or job name, and so the cluster's type list has one builder
/// ([`Cluster::types`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct GpuType(pub String);

impl GpuType {
    /// The name, for lookups in per-type tables keyed by `&str`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for GpuType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for GpuType {
    fn from(s: &str) -> Self {
        GpuType(s.to_string())
    }
}

impl From<String> for GpuType {
    fn from(s: String) -> Self {
        GpuType(s)
    }
}

impl PartialEq<str> for GpuType {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for GpuType {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// One machine: a name, its GPUs and their one type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Display name (`node3`); plans and rounds refer to nodes by [`NodeId`].
    pub name: String,
    /// Number of GPUs on the node.
    pub gpus: u32,
    /// Model of every GPU on the node (a node has one type).
    pub gpu_type: GpuType,
}

/// The machines a round plans over; parses from a shape such as `16x4` or `6x4:t4+2x8:a100`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// The nodes, indexed by [`NodeId`].
    pub nodes: Vec<Node>,
}

/// GPU type used when a cluster is given as `NxG`: the Pollux testbed's T4.
pub const DEFAULT_GPU_TYPE: &str = "t4";

impl Cluster {
    /// `nodes` identical nodes of `gpus_per_node` GPUs of `gpu_type`, named `node0`, `node1`, ...
    pub fn homogeneous(nodes: u32, gpus_per_node: u32, gpu_type: &str) -> Self {
        Cluster {
            nodes: (0..nodes)
                .map(|i| Node {
                    name: format!("node{i}"),
                    gpus: gpus_per_node,
                    gpu_type: gpu_type.into(),
                })
                .collect(),
        }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// GPUs in the whole cluster (a `u32`: [`MAX_GPUS_TOTAL`] bounds it).
    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// GPUs on `node`; panics for a node outside the cluster.
    pub fn gpus(&self, node: NodeId) -> u32 {
        self.nodes[node.0 as usize].gpus
    }

    /// The GPU types present, in order of first appearance (node order), so
    /// every formulation numbers types the same way.
    pub fn types(&self) -> Vec<GpuType> {
        let mut out: Vec<GpuType> = Vec::new();
        for n in &self.nodes {
            if !out.contains(&n.gpu_type) {
                out.push(n.gpu_type.clone());
            }
        }
        out
    }

    /// Each node's index into [`Cluster::types`]. Planners call it every
    /// round, so it compares names in place instead of cloning them.
    pub fn type_index(&self) -> Vec<usize> {
        let mut seen: Vec<&GpuType> = Vec::new();
        self.nodes
            .iter()
            .map(|n| match seen.iter().position(|t| **t == n.gpu_type) {
                Some(i) => i,
                None => {
                    seen.push(&n.gpu_type);
                    seen.len() - 1
                }
            })
            .collect()
    }

    /// The largest node, which bounds what a single-node job can get.
    pub fn max_gpus_per_node(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).max().unwrap_or(0)
    }
}

impl FromStr for Cluster {
    type Err = CoreError;

    /// `16x4` = 16 nodes with 4 GPUs each; `16x4:t4` names the GPU type;
    /// `6x4:t4+3x8:rtx2080ti+2x8:a100` joins groups into one heterogeneous
    /// cluster (Sia's testbed), its nodes numbered across the groups.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut nodes = Vec::new();
        for part in s.split('+') {
            for n in parse_group(s, part.trim())? {
                nodes.push(Node {
                    name: format!("node{}", nodes.len()),
                    ..n
                });
            }
        }
        Ok(Cluster { nodes })
    }
}

/// One `NODESxGPUS[:TYPE]` group of a shape; errors quote the whole shape.
fn parse_group(whole: &str, s: &str) -> Result<Vec<Node>, CoreError> {
    let bad = |why: &str| {
        let why = if whole == s {
            why.to_string()
        } else {
            format!("in '{s}': {why}")
        };
        CoreError::Cluster(whole.to_string(), why)
    };
    if s.is_empty() {
        return Err(bad("empty group; expected NODESxGPUS[:TYPE]+..."));
    }
    let (shape, ty) = match s.split_once(':') {
        Some((a, b)) if !b.is_empty() => (a, b),
        Some(_) => return Err(bad("empty GPU type after ':'")),
        None => (s, DEFAULT_GPU_TYPE),
    };
    let (n, g) = shape
        .split_once(['x', 'X'])
        .ok_or_else(|| bad("expected NODESxGPUS, e.g. 16x4"))?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| bad("node count is not a positive integer"))?;
    let g: u32 = g
        .trim()
        .parse()
        .map_err(|_| bad("GPUs per node is not a positive integer"))?;
    if n == 0 || g == 0 {
        return Err(bad("node count and GPUs per node must be > 0"));
    }
    if g > 64 {
        return Err(bad("more than 64 GPUs per node is not supported"));
    }
    Ok(Cluster::homogeneous(n, g, ty.trim()).nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sia's 64-GPU testbed as one shape.
    #[test]
    fn parses_heterogeneous_shapes() {
        let c: Cluster = "6x4:t4+3x8:rtx2080ti+2x8:a100".parse().unwrap();
        assert_eq!((c.num_nodes(), c.total_gpus()), (11, 64));
        let types: Vec<String> = c.types().into_iter().map(|t| t.0).collect();
        assert_eq!(types, ["t4", "rtx2080ti", "a100"]);
        assert_eq!(c.nodes[6].name, "node6");
        assert_eq!((c.nodes[6].gpus, c.nodes[6].gpu_type.as_str()), (8, "rtx2080ti"));
        assert_eq!(c.nodes[10].gpu_type, "a100");
        let e = "2x4:t4++1x8".parse::<Cluster>().unwrap_err().to_string();
        assert!(e.contains("empty group"), "{e}");
        let e = "2x4:t4+0x8:a100".parse::<Cluster>().unwrap_err().to_string();
        assert!(e.contains("'0x8:a100'") && e.contains("must be > 0"), "{e}");
    }

    #[test]
    fn parses_shapes() {
        let c: Cluster = "16x4".parse().unwrap();
        assert_eq!(c.num_nodes(), 16);
        assert_eq!(c.total_gpus(), 64);
        assert_eq!(c.nodes[3].gpu_type, "t4");
        let c: Cluster = "2x8:a100".parse().unwrap();
        assert_eq!(c.nodes[1].gpu_type, "a100");
        assert_eq!(c.types(), vec![GpuType::from("a100")]);
        for bad in ["", "16", "0x4", "4x0", "ax4", "4x", "4x4:"] {
            assert!(bad.parse::<Cluster>().is_err(), "{bad}");
        }
    }
}
