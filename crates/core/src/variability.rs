//! Per-GPU speed variability as a round carries it (PAL, SC'24).
//!
//! GPUs of one model differ in speed, and by how much depends on the
//! application: PAL bins applications into four classes (A most variable,
//! ResNet-like; D least, PageRank-like) and measures each GPU's slowdown per
//! class. The simulator draws these for a cluster and puts them in each
//! [`crate::Round`] so placements can prefer fast GPUs; a round without them
//! (every live cluster today) plans as before.
//!
//! The job model is PAL's: a bulk-synchronous job steps at the pace of its
//! slowest GPU, and a rigid job spanning nodes is slowed further by the
//! cross-node factor L. It is written here once, for the simulator (ground
//! truth) and the planners (expected cost).

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, NodeId};
use crate::job::{Allocation, GpuId};

/// PAL's application classes, in table order.
pub const CLASSES: [&str; 4] = ["A", "B", "C", "D"];

/// PAL's class of an application, as an index into [`CLASSES`].
///
/// PAL's own models map as its artifact does (resnet50 A; BERT, GPT2, DCGAN
/// B; vgg19 C; PointNet D). Pollux's applications are mapped by kind, an
/// assumption documented in docs/heterogeneity.md: the ResNets (cifar10,
/// imagenet) A; the sequence models (bert, deepspeech2) B; the detector with
/// a VGG-like backbone (yolov3) C; the small, memory-bound recommender (ncf)
/// D. Anything else is class A, the most variable (the cautious choice).
pub fn class_of(app: &str) -> usize {
    match app.to_ascii_lowercase().as_str() {
        "resnet50" | "resnet" | "cifar10" | "imagenet" => 0,
        "bert" | "gpt2" | "dcgan" | "deepspeech2" => 1,
        "vgg19" | "vgg" | "yolov3" => 2,
        "pointnet" | "ncf" | "pagerank" => 3,
        _ => 0,
    }
}

/// A job's variability class, written `"A"`..`"D"` in round files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PerfClass {
    /// Most variable (ResNet-like).
    A,
    /// Sequence models (BERT, GPT2).
    B,
    /// VGG-like models.
    C,
    /// Least variable (PageRank-like, memory-bound).
    D,
}

impl PerfClass {
    /// Every class, in table order ([`CLASSES`]).
    pub const ALL: [PerfClass; 4] = [PerfClass::A, PerfClass::B, PerfClass::C, PerfClass::D];

    /// The class of an application name ([`class_of`]).
    pub fn of_app(app: &str) -> PerfClass {
        PerfClass::ALL[class_of(app)]
    }

    /// Index into [`CLASSES`] and the per-class tables.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Every GPU's slowdown per class and the cross-node factor L, as a round
/// carries them. 1 = the model's median speed; > 1 slower.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundVariability {
    /// `per_node[node][gpu][class]`, laid out like `cluster.nodes`.
    pub per_node: Vec<Vec<[f64; 4]>>,
    /// How many times slower a rigid job runs when it spans nodes (PAL's L).
    pub cross_node_factor: f64,
}

impl RoundVariability {
    /// Slowdown of `g` for `class`; an unnamed slot counts as its node's
    /// slowest GPU (the worst it could be bound to). `None` if the node does
    /// not exist.
    pub fn slowdown(&self, g: GpuId, class: usize) -> Option<f64> {
        let node = self.per_node.get(g.node.0 as usize)?;
        match node.get(g.index as usize).filter(|_| g.is_bound()) {
            Some(x) => Some(x[class]),
            None => node.iter().map(|x| x[class]).reduce(f64::max),
        }
    }

    /// The slowest GPU of `alloc` for `class` and its slowdown (the first
    /// of equals); an unnamed slot is its node's slowest GPU. `None` for an
    /// empty allocation or one on nodes the round does not have.
    pub fn slowest(&self, class: usize, alloc: &Allocation) -> Option<(GpuId, f64)> {
        let mut best: Option<(GpuId, f64)> = None;
        for g in alloc.gpus() {
            let node = self.per_node.get(g.node.0 as usize)?;
            let on = |i: usize| node.get(i).map(|x| (GpuId::new(g.node, i as u32), x[class]));
            let here = if g.is_bound() {
                on(g.index as usize)
            } else {
                (0..node.len())
                    .filter_map(on)
                    .fold(None, |b: Option<(GpuId, f64)>, x| match b {
                        Some(b) if b.1 >= x.1 => Some(b),
                        _ => Some(x),
                    })
            };
            let here = here?;
            if best.is_none_or(|b| here.1 > b.1) {
                best = Some(here);
            }
        }
        best
    }

    /// How many times slower a job of `class` runs on `alloc` than on median
    /// GPUs: its slowest GPU's slowdown, times L when `cross_node` applies
    /// (a rigid job) and it spans nodes. 1 for an empty allocation.
    pub fn job_factor(&self, class: usize, alloc: &Allocation, cross_node: bool) -> f64 {
        let worst = alloc
            .gpus()
            .iter()
            .filter_map(|g| self.slowdown(*g, class))
            .fold(0.0, f64::max);
        if worst == 0.0 {
            return 1.0;
        }
        self.spanning(worst, alloc.num_nodes(), cross_node)
    }

    /// [`Self::job_factor`] from its parts: the slowest GPU's slowdown
    /// `worst`, times L when `cross_node` applies and the job spans
    /// `nodes` > 1. Planners that keep GPU counts per node (pollux-ga) call
    /// this so that they value a row exactly as the simulator charges it.
    pub fn spanning(&self, worst: f64, nodes: u32, cross_node: bool) -> f64 {
        if cross_node && nodes > 1 {
            worst * self.cross_node_factor
        } else {
            worst
        }
    }

    /// Per node, what an unnamed slot there counts as for `class` (its
    /// slowest GPU, [`Self::slowdown`]), for planners that decide counts
    /// per node and leave the GPUs to the binder.
    pub fn node_slowest(&self, class: usize) -> Vec<f64> {
        (0..self.per_node.len())
            .map(|n| {
                self.slowdown(GpuId::new(NodeId(n as u32), GpuId::ANY), class)
                    .unwrap_or(1.0)
            })
            .collect()
    }

    /// Shape and value problems against `cluster`, each naming its path
    /// (`variability.per_node[3][1][0]`).
    pub fn check(&self, cluster: &Cluster, errs: &mut Vec<String>) {
        if !(self.cross_node_factor.is_finite() && self.cross_node_factor >= 1.0) {
            errs.push(format!(
                "variability.cross_node_factor: must be finite and >= 1, got {}",
                self.cross_node_factor
            ));
        }
        if self.per_node.len() != cluster.nodes.len() {
            errs.push(format!(
                "variability.per_node: {} nodes, but the cluster has {}",
                self.per_node.len(),
                cluster.nodes.len()
            ));
            return;
        }
        for (n, (gpus, node)) in self.per_node.iter().zip(&cluster.nodes).enumerate() {
            if gpus.len() != node.gpus as usize {
                errs.push(format!(
                    "variability.per_node[{n}]: {} GPUs, but cluster.nodes[{n}] has {}",
                    gpus.len(),
                    node.gpus
                ));
                continue;
            }
            for (g, s) in gpus.iter().enumerate() {
                if let Some(c) = s.iter().position(|v| !(v.is_finite() && *v > 0.0)) {
                    errs.push(format!(
                        "variability.per_node[{n}][{g}][{c}]: must be finite and > 0, got {}",
                        s[c]
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeId;

    fn gpus(list: &[(u32, u32)]) -> Allocation {
        Allocation::from_gpus(list.iter().map(|&(n, i)| GpuId::new(NodeId(n), i)).collect())
    }

    #[test]
    fn slowest_gpu_and_l() {
        let v = RoundVariability {
            per_node: vec![vec![[1.0; 4], [1.2, 1.0, 1.0, 1.0]], vec![[1.0; 4]; 2]],
            cross_node_factor: 1.7,
        };
        assert_eq!(v.job_factor(0, &gpus(&[(0, 0), (0, 1)]), true), 1.2);
        assert!((v.job_factor(0, &gpus(&[(0, 0), (1, 0)]), true) - 1.7).abs() < 1e-12);
        assert_eq!(v.job_factor(0, &gpus(&[(0, 0), (1, 0)]), false), 1.0);
        assert_eq!(v.job_factor(0, &Allocation::default(), true), 1.0);
        // An unnamed slot on node 0 is priced as its slowest GPU.
        assert_eq!(
            v.job_factor(0, &Allocation::from_counts(&[(NodeId(0), 1)]), true),
            1.2
        );
    }

    #[test]
    fn slowest_names_the_gpu_that_sets_the_pace() {
        let v = RoundVariability {
            per_node: vec![
                vec![[1.0; 4], [1.2, 1.0, 1.0, 1.0]],
                vec![[1.1, 1.3, 1.0, 1.0]; 2],
            ],
            cross_node_factor: 1.7,
        };
        let a = gpus(&[(0, 0), (0, 1), (1, 1)]);
        assert_eq!(v.slowest(0, &a), Some((GpuId::new(NodeId(0), 1), 1.2)));
        assert_eq!(v.slowest(1, &a), Some((GpuId::new(NodeId(1), 1), 1.3)));
        // Ties: the first named.
        assert_eq!(v.slowest(2, &a), Some((GpuId::new(NodeId(0), 0), 1.0)));
        // An unnamed slot: its node's slowest GPU.
        let any = Allocation::from_counts(&[(NodeId(0), 1)]);
        assert_eq!(v.slowest(0, &any), Some((GpuId::new(NodeId(0), 1), 1.2)));
        assert_eq!(v.slowest(0, &Allocation::default()), None);
        assert_eq!(v.slowest(0, &gpus(&[(5, 0)])), None);
        assert_eq!(v.slowest(0, &gpus(&[(0, 9)])), None);
    }

    #[test]
    fn check_names_the_path() {
        let c: Cluster = "2x2".parse().unwrap();
        let mut v = RoundVariability {
            per_node: vec![vec![[1.0; 4]; 2], vec![[1.0, 1.0, f64::NAN, 1.0], [1.0; 4]]],
            cross_node_factor: 0.5,
        };
        let mut e = Vec::new();
        v.check(&c, &mut e);
        assert_eq!(
            e,
            vec![
                "variability.cross_node_factor: must be finite and >= 1, got 0.5",
                "variability.per_node[1][0][2]: must be finite and > 0, got NaN"
            ]
        );
        v.per_node.pop();
        v.cross_node_factor = 1.0;
        let mut e = Vec::new();
        v.check(&c, &mut e);
        assert_eq!(e, vec!["variability.per_node: 1 nodes, but the cluster has 2"]);
        assert_eq!(PerfClass::of_app("PointNet"), PerfClass::D);
        assert_eq!(serde_json::to_string(&PerfClass::B).unwrap(), "\"B\"");
    }
}
