//! The device layer: what GPUs exist, where, and whether they are healthy.
//!
//! The round loop only sees [`Gpu`] values through [`Devices`], so the real
//! NVML path and the fake backend used by tests run the same code above it.

use serde::{Deserialize, Serialize};

use crate::ExecError;

/// Whether a GPU may be given to jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Health {
    /// May be given to jobs.
    Ok,
    /// Kept from jobs (an NVML error, an injected fault).
    Unhealthy {
        /// Why, for the operator.
        reason: String,
    },
}

/// One GPU as the daemon sees it in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Stable identity (NVML UUID); also the value put in `CUDA_VISIBLE_DEVICES`.
    pub uuid: String,
    /// Host (node) name; GPUs with the same node form one planner node.
    pub node: String,
    /// Device index on its node; the order of a node's GPUs in a round.
    pub index: u32,
    /// Model name (e.g. `NVIDIA A100-SXM4-80GB`); a round takes it as the node's GPU type.
    pub name: String,
    /// Device memory.
    pub memory_total_bytes: u64,
    /// Device memory in use, by any process.
    pub memory_used_bytes: u64,
    /// Busy time over the last sample period (NVML); `None` when not reported.
    pub utilization_pct: Option<u32>,
    /// PIDs of processes using the GPU (NVML compute processes).
    pub processes: Vec<u32>,
    /// Whether jobs may be given it.
    pub health: Health,
    /// Interconnect to each other GPU of the node: (uuid, level), level one of
    /// `internal`, `single-switch`, `multi-switch`, `host-bridge`, `numa`, `system`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology: Vec<(String, String)>,
}

/// A fault injected into the fake backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// The GPU vanishes from enumeration (fell off the bus).
    Gone,
    /// The GPU is listed but reports an uncorrectable error.
    Unhealthy,
    /// Clear any fault.
    Ok,
}

/// A source of GPUs. `collect` is called once per round.
pub trait Devices: Send {
    /// `nvml` or `fake`.
    fn backend(&self) -> &'static str;
    /// Every GPU now, healthy or not.
    fn collect(&mut self) -> Result<Vec<Gpu>, ExecError>;
    /// Fault injection; only the fake backend supports it.
    fn inject(&mut self, uuid: &str, fault: Fault) -> Result<(), ExecError> {
        let _ = (uuid, fault);
        Err(ExecError::NoFaultInjection {
            backend: self.backend(),
        })
    }
}

/// Simulated GPUs: `nodes` × `gpus_per_node`, with injectable faults.
#[derive(Debug, Clone)]
pub struct FakeDevices {
    gpus: Vec<(Gpu, Option<Fault>)>,
}

impl FakeDevices {
    /// `nodes` nodes of `gpus_per_node` healthy 16 GB GPUs each.
    pub fn new(nodes: u32, gpus_per_node: u32) -> Self {
        Self::from_nodes((0..nodes).map(|_| (gpus_per_node, "Fake GPU 16GB")))
    }

    /// One fake node per `(gpus, model name)`; the model name is what a
    /// round takes as the node's GPU type, as NVML's name is on real nodes.
    fn from_nodes<'a>(nodes: impl Iterator<Item = (u32, &'a str)>) -> Self {
        let mut gpus = Vec::new();
        for (n, (count, name)) in nodes.enumerate() {
            for g in 0..count {
                gpus.push((
                    Gpu {
                        uuid: format!("GPU-fake-{n}-{g}"),
                        node: format!("fake{n}"),
                        index: g,
                        name: name.into(),
                        memory_total_bytes: 16 << 30,
                        memory_used_bytes: 0,
                        utilization_pct: Some(0),
                        processes: Vec::new(),
                        health: Health::Ok,
                        topology: Vec::new(),
                    },
                    None,
                ));
            }
        }
        FakeDevices { gpus }
    }

    /// Report `pct` as the utilization of GPU `uuid` from now on (the fake
    /// backend's stand-in for NVML's reading; 0 until set).
    pub fn set_utilization(&mut self, uuid: &str, pct: u32) -> Result<(), ExecError> {
        self.slot(uuid)?.0.utilization_pct = Some(pct.min(100));
        Ok(())
    }

    /// Report `bytes` as the used memory of GPU `uuid` from now on (NVML's
    /// `memory_info().used`; 0 until set).
    pub fn set_memory_used(&mut self, uuid: &str, bytes: u64) -> Result<(), ExecError> {
        self.slot(uuid)?.0.memory_used_bytes = bytes;
        Ok(())
    }

    fn slot(&mut self, uuid: &str) -> Result<&mut (Gpu, Option<Fault>), ExecError> {
        self.gpus
            .iter_mut()
            .find(|(g, _)| g.uuid == uuid)
            .ok_or_else(|| ExecError::NoGpu(uuid.to_string()))
    }

    /// `2x4` = 2 nodes with 4 GPUs each. A shape that names types
    /// (`1x4:t4+1x8:a100`) gives a heterogeneous cluster whose GPUs carry
    /// those names; without types the GPUs keep the fake model name.
    pub fn parse(shape: &str) -> Result<Self, ExecError> {
        let c: gpuplan_core::Cluster = shape
            .parse()
            .map_err(|e| ExecError::Config(format!("--devices fake:{shape}: {e}")))?;
        if !shape.contains(':') {
            return Ok(FakeDevices::new(c.num_nodes() as u32, c.max_gpus_per_node()));
        }
        Ok(Self::from_nodes(
            c.nodes.iter().map(|n| (n.gpus, n.gpu_type.as_str())),
        ))
    }
}

impl Devices for FakeDevices {
    fn backend(&self) -> &'static str {
        "fake"
    }

    fn collect(&mut self) -> Result<Vec<Gpu>, ExecError> {
        Ok(self
            .gpus
            .iter()
            .filter(|(_, f)| *f != Some(Fault::Gone))
            .map(|(g, f)| {
                let mut g = g.clone();
                if *f == Some(Fault::Unhealthy) {
                    g.health = Health::Unhealthy {
                        reason: "injected fault: uncorrectable ECC error".into(),
                    };
                }
                g
            })
            .collect())
    }

    fn inject(&mut self, uuid: &str, fault: Fault) -> Result<(), ExecError> {
        self.slot(uuid)?.1 = if fault == Fault::Ok { None } else { Some(fault) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_faults() {
        let mut d = FakeDevices::parse("2x4").unwrap();
        assert_eq!(d.collect().unwrap().len(), 8);
        d.inject("GPU-fake-1-2", Fault::Gone).unwrap();
        d.inject("GPU-fake-0-0", Fault::Unhealthy).unwrap();
        let g = d.collect().unwrap();
        assert_eq!(g.len(), 7);
        assert!(matches!(g[0].health, Health::Unhealthy { .. }));
        d.inject("GPU-fake-1-2", Fault::Ok).unwrap();
        assert_eq!(d.collect().unwrap().len(), 8);
        assert!(d.inject("GPU-x", Fault::Gone).is_err());
    }
}
