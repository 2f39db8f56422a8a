//! Per-GPU performance variability, the simulator's ground truth for it.
//!
//! GPUs of one model differ in speed (PAL, SC'24: up to 22% among V100s,
//! outliers far slower), and the spread depends on the application: compute-
//! bound ResNet spreads most, memory-bound PageRank hardly at all. PAL bins
//! applications into four classes and measures a slowdown per GPU and class;
//! its tables, derived from the artifact by `scripts/pal-variability.py`, are
//! bundled in `traces/pal/variability/` (`longhorn`, `frontera`, `ls6`).
//!
//! A cluster gets its GPUs' slowdowns by drawing, for each of its nodes and
//! each class, whole measured nodes (seeded): slow GPUs stay together on a
//! node, as the measurements show. A bulk-synchronous job steps at the pace
//! of its slowest GPU; a rigid (trace) job that spans nodes is slowed
//! further by PAL's cross-node factor L. A profiled job's own model already
//! prices its cross-node synchronisation, so L is not applied to it twice.
//!
//! Each round carries the drawn slowdowns ([`GpuSpeeds::gpus`], core's
//! [`RoundVariability`]) so variability-aware placements can use them; the
//! job model itself is core's, shared with those placements.

use gpuplan_core::{Allocation, Cluster, RoundVariability};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// PAL's classes and the application → class map live in core, once,
/// for the simulator and the planners alike.
pub use gpuplan_core::{class_of, CLASSES};

/// The bundled measurement sets `--variability` names.
pub const BUNDLED: [(&str, &str); 3] = [
    (
        "longhorn",
        include_str!("../../../traces/pal/variability/longhorn.csv"),
    ),
    (
        "frontera",
        include_str!("../../../traces/pal/variability/frontera.csv"),
    ),
    ("ls6", include_str!("../../../traces/pal/variability/ls6.csv")),
];

/// Every measured run of the bundled sets (`scripts/pal-variability.py`),
/// the pool PAL's own draw picks from. Native builds only: 244 KB the
/// browser bundle does without (it draws whole nodes only).
#[cfg(not(target_arch = "wasm32"))]
const BUNDLED_RUNS: [(&str, &str); 3] = [
    (
        "longhorn",
        include_str!("../../../traces/pal/variability/runs/longhorn.csv"),
    ),
    (
        "frontera",
        include_str!("../../../traces/pal/variability/runs/frontera.csv"),
    ),
    (
        "ls6",
        include_str!("../../../traces/pal/variability/runs/ls6.csv"),
    ),
];

/// How a cluster's GPUs get their slowdowns from the measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Draw {
    /// Whole measured nodes, per-GPU medians: slow GPUs stay together on a
    /// node, as the measurements show (the model).
    #[default]
    Node,
    /// PAL's simulator: each GPU independently takes one measured run
    /// (`perf` / the file's median), so run-to-run noise and the rare very
    /// slow runs count too. Spreads far more than `node`.
    Pal,
}

impl std::str::FromStr for Draw {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "node" => Ok(Draw::Node),
            "pal" => Ok(Draw::Pal),
            _ => Err(format!("'{s}' is not one of node, pal")),
        }
    }
}

/// PAL's cross-node factor L (its default).
pub const DEFAULT_CROSS_NODE_FACTOR: f64 = 1.7;

/// A measured node while parsing: its name and (GPU index, slowdown) pairs.
type MeasuredNode = (String, Vec<(u32, f64)>);

/// What a run is told about variability: the measurements and L. The
/// GPUs' slowdowns are drawn from it by the simulator with the run's own
/// seed, so every driver (simulate, each seed of a sweep, the browser)
/// draws the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variability {
    /// The measured slowdowns drawn from.
    pub measurements: Measurements,
    /// PAL's L: extra slowdown of a rigid job spanning nodes (>= 1).
    pub cross_node_factor: f64,
    /// Absent from configs written before it existed: whole nodes.
    #[serde(default)]
    pub draw: Draw,
}

impl Variability {
    /// The cluster's GPU slowdowns for a run seeded `seed`, drawn as the `draw` field says.
    pub fn draw(&self, cluster: &Cluster, seed: u64) -> GpuSpeeds {
        match self.draw {
            Draw::Node => self.measurements.sample(cluster, seed, self.cross_node_factor),
            Draw::Pal => self
                .measurements
                .sample_runs(cluster, seed, self.cross_node_factor),
        }
    }
}

/// Measured nodes per class: each a list of its GPUs' slowdowns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// The bundled set's name or the file's path, for reports.
    pub name: String,
    /// Per PAL class ([`CLASSES`]), the measured nodes' GPU slowdowns.
    pub classes: [Vec<Vec<f64>>; 4],
    /// Per class, every measured value PAL's draw picks from: each run of
    /// a bundled set (native builds), else every row of the file.
    #[serde(default)]
    pub runs: [Vec<f64>; 4],
}

impl Measurements {
    /// A bundled set by name, or a file in the same format
    /// (`class,node,gpu,slowdown`).
    pub fn load(name_or_path: &str) -> Result<Measurements, SimError> {
        if let Some((n, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
            #[allow(unused_mut)]
            let mut m = Measurements::parse(n, text)?;
            #[cfg(not(target_arch = "wasm32"))]
            if let Some((_, runs)) = BUNDLED_RUNS.iter().find(|(r, _)| r == n) {
                m.runs = Measurements::parse(n, runs)?.runs;
            }
            return Ok(m);
        }
        let text = std::fs::read_to_string(name_or_path).map_err(|e| {
            SimError::Invalid(format!(
                "--variability {name_or_path}: not a bundled set ({}) and not a readable file: {e}",
                BUNDLED.map(|b| b.0).join(", ")
            ))
        })?;
        Measurements::parse(name_or_path, &text)
    }

    /// Parse `class,node,gpu,slowdown` rows; errors name the source, line and field.
    pub fn parse(source: &str, text: &str) -> Result<Measurements, SimError> {
        let bad = |line: usize, field: &str, why: String| {
            SimError::Invalid(format!("{source}:{line}: {field}: {why}"))
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.trim() == "class,node,gpu,slowdown" => {}
            _ => return Err(bad(1, "header", "expected class,node,gpu,slowdown".into())),
        }
        // Per class: node name → (gpu, slowdown), in file order of nodes.
        let mut per: [Vec<MeasuredNode>; 4] = Default::default();
        let mut runs: [Vec<f64>; 4] = Default::default();
        for (i, l) in lines {
            let line = i + 1;
            if l.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() != 4 {
                return Err(bad(line, "row", format!("expected 4 fields, got {}", f.len())));
            }
            let class = CLASSES
                .iter()
                .position(|c| *c == f[0])
                .ok_or_else(|| bad(line, "class", format!("'{}' is not one of A, B, C, D", f[0])))?;
            let gpu: u32 = f[2]
                .parse()
                .map_err(|_| bad(line, "gpu", format!("'{}' is not a GPU index", f[2])))?;
            let s: f64 = f[3]
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s < 100.0)
                .ok_or_else(|| {
                    bad(
                        line,
                        "slowdown",
                        format!("'{}' is not a number in (0, 100)", f[3]),
                    )
                })?;
            runs[class].push(s);
            let nodes = &mut per[class];
            match nodes.iter_mut().find(|(n, _)| n == f[1]) {
                Some((_, g)) => g.push((gpu, s)),
                None => nodes.push((f[1].to_string(), vec![(gpu, s)])),
            }
        }
        let mut classes: [Vec<Vec<f64>>; 4] = Default::default();
        for (c, nodes) in per.into_iter().enumerate() {
            classes[c] = nodes
                .into_iter()
                .map(|(_, mut g)| {
                    g.sort_by_key(|x| x.0);
                    g.into_iter().map(|x| x.1).collect()
                })
                .collect();
        }
        if let Some(c) = classes.iter().position(Vec::is_empty) {
            return Err(SimError::Invalid(format!(
                "{source}: no rows for class {}; every class needs measured GPUs",
                CLASSES[c]
            )));
        }
        Ok(Measurements {
            name: source.to_string(),
            classes,
            runs,
        })
    }

    /// Slowdowns for every GPU of `cluster`: for each node and class, whole
    /// measured nodes drawn at random (seeded) until the node's GPUs are
    /// covered, so a slow node stays slow together.
    pub fn sample(&self, cluster: &Cluster, seed: u64, cross_node_factor: f64) -> GpuSpeeds {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5641_5249_4142_494c);
        let per_node = cluster
            .nodes
            .iter()
            .map(|n| {
                let mut gpus = vec![[1.0; 4]; n.gpus as usize];
                for (c, measured) in self.classes.iter().enumerate() {
                    let mut drawn: Vec<f64> = Vec::with_capacity(n.gpus as usize);
                    while drawn.len() < n.gpus as usize {
                        let pick = rng.gen_range(0..measured.len() as u32) as usize;
                        drawn.extend(&measured[pick]);
                    }
                    for (g, s) in gpus.iter_mut().zip(drawn) {
                        g[c] = s;
                    }
                }
                gpus
            })
            .collect();
        GpuSpeeds {
            source: self.name.clone(),
            gpus: RoundVariability {
                per_node,
                cross_node_factor,
            },
        }
    }
}

impl Measurements {
    /// PAL's draw ([`Draw::Pal`]): every GPU and class independently takes
    /// one value of the class's pool, seeded.
    pub fn sample_runs(&self, cluster: &Cluster, seed: u64, cross_node_factor: f64) -> GpuSpeeds {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5041_4c52_554e_5321);
        let per_node = cluster
            .nodes
            .iter()
            .map(|n| {
                (0..n.gpus)
                    .map(|_| {
                        let mut g = [1.0; 4];
                        for (c, pool) in self.runs.iter().enumerate() {
                            if !pool.is_empty() {
                                g[c] = pool[rng.gen_range(0..pool.len() as u32) as usize];
                            }
                        }
                        g
                    })
                    .collect()
            })
            .collect();
        GpuSpeeds {
            source: format!("{} (PAL's per-run draw)", self.name),
            gpus: RoundVariability {
                per_node,
                cross_node_factor,
            },
        }
    }
}

/// Every GPU's slowdown per class, and the cross-node factor: what the
/// simulator applies to jobs' progress and shows planners each round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpeeds {
    /// Where the slowdowns came from (a bundled set's name or a file).
    pub source: String,
    /// `per_node[node][gpu][class]`; 1 = the measured median, > 1 slower.
    pub gpus: RoundVariability,
}

impl GpuSpeeds {
    /// How many times slower a job of `class` runs on `alloc` than on
    /// median GPUs: its slowest GPU's slowdown, times L when a rigid job
    /// spans nodes. A GPU not named on its node (a node-level slot) counts
    /// as the node's slowest.
    pub fn job_factor(&self, class: usize, alloc: &Allocation, rigid: bool) -> f64 {
        self.gpus.job_factor(class, alloc, rigid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplan_core::{GpuId, NodeId};

    const TABLE: &str = "class,node,gpu,slowdown\n\
        A,n1,0,1.0\nA,n1,1,1.2\nB,n1,0,1.0\nB,n1,1,1.0\nC,n1,0,1.0\nC,n1,1,1.0\nD,n1,0,0.9\nD,n1,1,1.0\n";

    fn gpus(list: &[(u32, u32)]) -> Allocation {
        Allocation::from_gpus(list.iter().map(|&(n, i)| GpuId::new(NodeId(n), i)).collect())
    }

    /// A job steps at its slowest GPU's pace; a rigid job across nodes
    /// also pays L; a profiled one does not (its model prices the sync).
    #[test]
    fn the_slowest_gpu_sets_the_pace() {
        let m = Measurements::parse("t", TABLE).unwrap();
        let cluster: Cluster = "2x2".parse().unwrap();
        let s = m.sample(&cluster, 7, 1.7);
        assert_eq!(s.gpus.per_node[1][1], [1.2, 1.0, 1.0, 1.0]);
        assert_eq!(s.job_factor(0, &gpus(&[(0, 0)]), true), 1.0);
        assert_eq!(s.job_factor(0, &gpus(&[(0, 0), (0, 1)]), true), 1.2);
        assert_eq!(s.job_factor(3, &gpus(&[(0, 0)]), false), 0.9);
        let across = gpus(&[(0, 0), (1, 0)]);
        assert!((s.job_factor(0, &across, true) - 1.7).abs() < 1e-12);
        assert_eq!(s.job_factor(0, &across, false), 1.0);
        assert_eq!(s.job_factor(0, &Allocation::default(), true), 1.0);
    }

    /// Nodes are drawn whole, so a 4-GPU node of a 2-GPU-node table is two
    /// measured nodes, and the same seed draws the same cluster.
    #[test]
    fn sampling_keeps_nodes_whole_and_is_seeded() {
        let text = "class,node,gpu,slowdown\n\
            A,fast,0,1.0\nA,fast,1,1.0\nA,slow,0,1.3\nA,slow,1,1.3\n\
            B,x,0,1.0\nC,x,0,1.0\nD,x,0,1.0\n";
        let m = Measurements::parse("t", text).unwrap();
        let cluster: Cluster = "8x4".parse().unwrap();
        let a = m.sample(&cluster, 1, 1.7);
        assert_eq!(a, m.sample(&cluster, 1, 1.7));
        assert_ne!(a, m.sample(&cluster, 2, 1.7));
        for node in &a.gpus.per_node {
            assert_eq!(node.len(), 4);
            assert_eq!(node[0][0], node[1][0], "GPUs 0 and 1 come from one measured node");
            assert_eq!(node[2][0], node[3][0]);
        }
        let slow = a.gpus.per_node.iter().flatten().filter(|g| g[0] > 1.0).count();
        assert!(slow > 0 && slow < 32, "both measured nodes drawn: {slow}");
    }

    /// PAL's draw: each GPU takes one value of the pool on its own, so a
    /// node mixes fast and slow GPUs; seeded; a bundled set's pool is its
    /// runs (more of them than GPUs, spreading wider than the medians).
    #[test]
    fn the_pal_draw_picks_runs_per_gpu_and_is_seeded() {
        let text = "class,node,gpu,slowdown\n\
            A,n,0,1.0\nA,n,0,1.5\nB,x,0,1.0\nC,x,0,1.0\nD,x,0,1.0\n";
        let m = Measurements::parse("t", text).unwrap();
        assert_eq!(m.runs[0], vec![1.0, 1.5]);
        let cluster: Cluster = "8x4".parse().unwrap();
        let v = Variability {
            measurements: m,
            cross_node_factor: 1.7,
            draw: Draw::Pal,
        };
        let a = v.draw(&cluster, 3);
        assert_eq!(a, v.draw(&cluster, 3));
        assert_ne!(a, v.draw(&cluster, 4));
        let mixed = a
            .gpus
            .per_node
            .iter()
            .filter(|n| n.iter().any(|g| g[0] == 1.0) && n.iter().any(|g| g[0] == 1.5))
            .count();
        assert!(mixed > 0, "GPUs drawn one by one, not whole nodes");
        assert!(a.gpus.per_node.iter().flatten().all(|g| g[1] == 1.0));
        let lh = Measurements::load("longhorn").unwrap();
        let gpus: usize = lh.classes[0].iter().map(Vec::len).sum();
        assert!(
            lh.runs[0].len() > 2 * gpus,
            "{} runs of {gpus} GPUs",
            lh.runs[0].len()
        );
        let max = |x: &[f64]| x.iter().copied().fold(0.0, f64::max);
        let medians: Vec<f64> = lh.classes[0].iter().flatten().copied().collect();
        assert!(
            max(&lh.runs[0]) > max(&medians),
            "single runs reach further than medians"
        );
        assert_eq!("pal".parse::<Draw>(), Ok(Draw::Pal));
        assert!("gpu".parse::<Draw>().unwrap_err().contains("node, pal"));
    }

    #[test]
    fn the_bundled_sets_load_with_every_class() {
        for (name, _) in BUNDLED {
            let m = Measurements::load(name).unwrap();
            for c in &m.classes {
                assert!(c.len() > 30, "{name}: {} measured nodes", c.len());
                let mut all: Vec<f64> = c.iter().flatten().copied().collect();
                all.sort_by(f64::total_cmp);
                let median = all[all.len() / 2];
                assert!((median - 1.0).abs() < 0.01, "{name}: median {median}");
            }
        }
        // PAL's headline: Longhorn's ResNet GPUs spread by more than 10%.
        let lh = Measurements::load("longhorn").unwrap();
        let a: Vec<f64> = lh.classes[0].iter().flatten().copied().collect();
        let (lo, hi) = a
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(hi / lo > 1.1, "{lo}..{hi}");
    }

    #[test]
    fn bad_tables_name_the_line_and_field() {
        let e = Measurements::parse("v.csv", "class,node,gpu,slowdown\nE,n,0,1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("v.csv:2: class:"), "{e}");
        let e = Measurements::parse("v.csv", "class,node,gpu,slowdown\nA,n,0,-1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("v.csv:2: slowdown:"), "{e}");
        let e = Measurements::parse("v.csv", "class,node,gpu,slowdown\nA,n,0,1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no rows for class B"), "{e}");
        assert!(Measurements::load("no-such-set").is_err());
        assert_eq!(class_of("imagenet"), 0);
        assert_eq!(class_of("PointNet"), 3);
    }
}
