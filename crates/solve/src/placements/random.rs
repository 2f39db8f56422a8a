//! `random`: `k` free GPUs drawn uniformly at random, PAL's Random
//! baseline. Seeded by the round's seed and the job's id, so a round plans
//! the same way every time and one job's draw does not depend on others'.

use gpuplan_core::{GpuId, RoundJob};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Ctx, FreeView, Place};

pub struct Random;

impl Place for Random {
    fn choose(&self, ctx: &Ctx, job: &RoundJob, free: &FreeView, k: u32) -> Option<Vec<GpuId>> {
        let mut all: Vec<GpuId> = free.gpus().collect();
        if all.len() < k as usize {
            return None;
        }
        let seed = ctx.seed ^ u64::from(job.id.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        all.shuffle(&mut rng);
        all.truncate(k as usize);
        Some(all)
    }
}
