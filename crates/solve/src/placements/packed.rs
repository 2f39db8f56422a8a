//! `packed`: the fewest nodes, PAL's Packed. A job that fits on one node
//! goes to the fullest node that still fits it (best fit, so whole nodes
//! stay free for large jobs); a larger one takes the nodes with the most
//! free GPUs first ([`crate::placement::FreeGpus::take_packed`]).
//! Variability is ignored.
//!
//! It differs from the `default` placement of fifo and tiresias, which
//! packs a job that fits a node onto the node with the most free GPUs
//! (worst fit): placed afresh every round, worst fit scatters 1-GPU jobs
//! over every node and forces multi-GPU jobs across nodes.

use gpuplan_core::{GpuId, RoundJob};

use super::{pick_on_node, Ctx, FreeView, Place};
use crate::placement::FreeGpus;

/// The `packed` placement: a job on the fewest nodes.
pub struct Packed;

impl Place for Packed {
    fn choose(&self, _ctx: &Ctx, job: &RoundJob, free: &FreeView, k: u32) -> Option<Vec<GpuId>> {
        // Node counts by the shared packer, on the view's nodes in order.
        let mut counts = FreeGpus {
            free: free.nodes.iter().map(|(_, g)| g.len() as u32).collect(),
        };
        let picked = counts.take_single_node(k).or_else(|| counts.take_packed(k))?;
        let mut out = Vec::with_capacity(k as usize);
        for (slot, c) in picked.per_node() {
            let (node, idx) = &free.nodes[slot.0 as usize];
            out.extend(pick_on_node(job, *node, idx, c as usize, |_| 0.0));
        }
        Some(out)
    }
}
