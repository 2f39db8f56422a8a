//! `pm-first`: PAL's PM-First. The job's `k` fastest free GPUs for its
//! class (by bin), locality ignored except to break ties: among GPUs of one
//! bin, those on a node whose count of such GPUs best matches `k` first
//! (PAL's best-match locality score), then the job's own, then by index.
//! Without variability every GPU is alike and this is packing.

use gpuplan_core::{GpuId, RoundJob};

use super::{packed::Packed, Ctx, FreeView, Place};

pub struct PmFirst;

impl Place for PmFirst {
    fn choose(&self, ctx: &Ctx, job: &RoundJob, free: &FreeView, k: u32) -> Option<Vec<GpuId>> {
        let Some(bins) = ctx.bins else {
            return Packed.choose(ctx, job, free, k);
        };
        let class = job.perf_class().index();
        let mut keyed: Vec<(f64, u32, bool, GpuId)> = Vec::new();
        for (node, idx) in &free.nodes {
            for &i in idx {
                let g = GpuId::new(*node, i);
                let speed = bins.speed(g, class);
                let same = idx
                    .iter()
                    .filter(|&&o| bins.speed(GpuId::new(*node, o), class) == speed)
                    .count() as u32;
                keyed.push((speed, same.abs_diff(k), !job.current().gpus().contains(&g), g));
            }
        }
        if keyed.len() < k as usize {
            return None;
        }
        keyed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        Some(keyed.into_iter().take(k as usize).map(|x| x.3).collect())
    }

    /// Across GPU types, the faster choice wins.
    fn cost(&self, ctx: &Ctx, job: &RoundJob, gpus: &[GpuId]) -> f64 {
        let class = job.perf_class().index();
        gpus.iter()
            .map(|g| ctx.bins.map_or(1.0, |b| b.speed(*g, class)))
            .fold(0.0, f64::max)
    }

    fn class_first(&self) -> bool {
        true
    }
}
