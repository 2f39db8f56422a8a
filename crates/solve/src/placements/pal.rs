//! `pal`: PAL's placement, locality × variability. Of the candidate
//! allocations, the one with the least expected slowdown: its slowest GPU's
//! bin, times L if it spans nodes ([`super::expected_slowdown`]).
//!
//! PAL walks a sorted list of (bin, within/across node) products and takes
//! the first it can satisfy; the candidates here are the same, enumerated:
//! - on one node: for each node with `k` free GPUs, its `k` fastest;
//! - across nodes: the smallest bin threshold that `k` free GPUs meet, and
//!   those GPUs packed onto the fewest nodes (any set under the threshold
//!   costs the same, so fewer nodes is free).
//!
//! Where PAL's artifact differs, on purpose: L is the round's, not a fixed
//! per-class design constant (1.16, 1.0, 1.0, 1.10), so the trade-off is
//! priced as the cluster really behaves; single-node candidates are
//! considered for every size that fits a node, not only 2..=GPUs per node;
//! and equal costs go to fewer nodes, then to the node left fullest (best
//! fit, keeping whole nodes free for large jobs), where PAL takes the
//! first it finds. Since a packed allocation is one of these candidates or
//! costs at least as much as one, `pal` never expects a job to run slower
//! than `packed` would place it.

use gpuplan_core::{GpuId, NodeId, RoundJob};

use super::{expected_slowdown, nodes_of, packed::Packed, pick_on_node, Ctx, FreeView, Place};

/// The `pal` placement: the GPUs with the least expected slowdown, by PAL's cost.
pub struct Pal;

impl Place for Pal {
    fn choose(&self, ctx: &Ctx, job: &RoundJob, free: &FreeView, k: u32) -> Option<Vec<GpuId>> {
        let Some(bins) = ctx.bins else {
            return Packed.choose(ctx, job, free, k);
        };
        let class = job.perf_class().index();
        let speed = |g: GpuId| bins.speed(g, class);
        let mut cands: Vec<Vec<GpuId>> = free
            .nodes
            .iter()
            .filter(|(_, idx)| idx.len() >= k as usize)
            .map(|(n, idx)| pick_on_node(job, *n, idx, k as usize, speed))
            .collect();
        // Across nodes: GPUs at or under the k-th smallest bin, packed.
        let mut speeds: Vec<f64> = free.gpus().map(speed).collect();
        if speeds.len() >= k as usize && k > 0 {
            speeds.sort_by(f64::total_cmp);
            let v = speeds[k as usize - 1];
            let mut under: Vec<(NodeId, Vec<u32>)> = free
                .nodes
                .iter()
                .map(|(n, idx)| {
                    let ok: Vec<u32> = idx
                        .iter()
                        .copied()
                        .filter(|&i| speed(GpuId::new(*n, i)) <= v)
                        .collect();
                    (*n, ok)
                })
                .filter(|(_, ok)| !ok.is_empty())
                .collect();
            under.sort_by_key(|(n, ok)| (std::cmp::Reverse(ok.len()), n.0));
            let mut g = Vec::with_capacity(k as usize);
            for (n, ok) in &under {
                let need = k as usize - g.len();
                if need == 0 {
                    break;
                }
                g.extend(pick_on_node(job, *n, ok, need.min(ok.len()), speed));
            }
            cands.push(g);
        }
        let left = |g: &[GpuId]| -> usize {
            // Free GPUs left on the nodes it uses (best fit: fewer is better).
            free.nodes
                .iter()
                .filter(|(n, _)| g.iter().any(|x| x.node == *n))
                .map(|(_, idx)| idx.len())
                .sum::<usize>()
                - g.len()
        };
        cands.into_iter().min_by(|a, b| {
            expected_slowdown(ctx, class, a)
                .total_cmp(&expected_slowdown(ctx, class, b))
                .then(nodes_of(a).cmp(&nodes_of(b)))
                .then(left(a).cmp(&left(b)))
                .then(
                    a.iter()
                        .map(|g| g.node.0)
                        .min()
                        .cmp(&b.iter().map(|g| g.node.0).min()),
                )
        })
    }

    fn cost(&self, ctx: &Ctx, job: &RoundJob, gpus: &[GpuId]) -> f64 {
        expected_slowdown(ctx, job.perf_class().index(), gpus)
    }

    fn class_first(&self) -> bool {
        true
    }
}
