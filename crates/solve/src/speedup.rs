//! Per-round memo of job speedups, because planners ask for the same
//! (nodes, GPUs) thousands of times per round and each answer is a batch-size
//! optimisation.

use std::sync::Arc;

use gpuplan_core::objective;
use gpuplan_core::{
    Allocation, Cluster, GoodputModel, GpuType, Plan, PolicyParams, Round, RoundJob, Searches,
};

/// Lazily filled speedup table of one job for one round, per GPU type
/// (indexed as `Cluster::types()`): a job's goodput depends on the type.
#[derive(Debug, Clone)]
pub struct SpeedupCache {
    /// What every job's table of the round shares, built once per round
    /// ([`SpeedupCache::tables`]): per job it cost O(nodes), which made
    /// building the tables quadratic at 16k GPUs × 8k jobs.
    round: Arc<RoundShape>,
    max_nodes: u32,
    max_gpus: u32,
    cells: Vec<f64>,
    /// Goodput at the fair share, computed once (it is the denominator of every speedup).
    base: Option<f64>,
    /// The job's model per type, computed once each.
    models: Vec<Option<Option<GoodputModel>>>,
    /// Under `params.left_out_cost`, [`objective::least_speedup`]'s answer
    /// once computed: every speedup is divided by it, as
    /// [`objective::job_value`] divides.
    least: Option<f64>,
}

/// The part of the speedup tables that depends on the round only.
#[derive(Debug)]
struct RoundShape {
    fair: (u32, u32),
    types: Vec<GpuType>,
    /// Each node's type index, to find an allocation's type.
    node_type: Vec<usize>,
    /// What [`objective::least_speedup`] needs, kept only under
    /// `params.left_out_cost`.
    least_of: Option<(Cluster, PolicyParams)>,
    /// Batch-size searches by (model, nodes, GPUs), across the round's
    /// jobs: jobs of one application share a model until each is profiled
    /// (a 16,384-GPU bench round of 8,000 jobs holds 301 distinct models),
    /// and the search is most of a round's planning time. A job's own
    /// table still answers first; this only spares the repeats.
    searched: Searches,
}

impl SpeedupCache {
    /// An empty table for configurations up to `max_nodes` nodes and `max_gpus` GPUs.
    /// For every job of a round, [`SpeedupCache::tables`] shares the round's part.
    pub fn new(round: &Round, max_nodes: u32, max_gpus: u32) -> Self {
        Self::with_shape(Arc::new(RoundShape::of(round)), max_nodes, max_gpus)
    }

    /// One table per `(max_nodes, max_gpus)`, in order, sharing the round's
    /// part (types, each node's type, fair share).
    pub fn tables(round: &Round, dims: impl IntoIterator<Item = (u32, u32)>) -> Vec<Self> {
        let shape = Arc::new(RoundShape::of(round));
        dims.into_iter()
            .map(|(n, g)| Self::with_shape(Arc::clone(&shape), n, g))
            .collect()
    }

    /// One table per job of the round, in order, each as large as the job
    /// may grow: [`max_gpus_of`] (at least its current GPUs, at least 1)
    /// and `max_nodes` of that. Every goodput planner sizes its tables so.
    pub fn per_job(round: &Round, max_nodes: impl Fn(u32) -> u32) -> Vec<Self> {
        let total = round.cluster.total_gpus();
        Self::tables(
            round,
            round.jobs.iter().map(|j| {
                let m = max_gpus_of(j, &round.params, total)
                    .max(j.current().num_gpus())
                    .max(1);
                (max_nodes(m), m)
            }),
        )
    }

    fn with_shape(round: Arc<RoundShape>, max_nodes: u32, max_gpus: u32) -> Self {
        let per_type = ((max_nodes + 1) * (max_gpus + 1)) as usize;
        let types = round.types.len();
        SpeedupCache {
            max_nodes,
            max_gpus,
            cells: vec![f64::NAN; per_type * types.max(1)],
            models: vec![None; types],
            base: None,
            least: None,
            round,
        }
    }

    /// The divisor of this job's speedups: 1 unless `params.left_out_cost`.
    fn least(&mut self, job: &RoundJob) -> f64 {
        let Some(of) = &self.round.least_of else {
            return 1.0;
        };
        let fair = self.round.fair;
        *self
            .least
            .get_or_insert_with(|| objective::least_speedup(job, &of.0, fair, &of.1))
    }

    /// GPU types of the round's cluster, in `Cluster::types()` order.
    pub fn num_types(&self) -> usize {
        self.round.types.len()
    }

    /// Speedup on GPUs of type `ty` over the fair share, as
    /// [`objective::speedup`] computes it.
    pub fn get(&mut self, job: &RoundJob, ty: usize, nodes: u32, gpus: u32) -> f64 {
        if gpus == 0 {
            return 0.0;
        }
        let s = self.get_raw(job, ty, nodes, gpus);
        if self.round.least_of.is_none() {
            s
        } else {
            s / self.least(job)
        }
    }

    /// [`Self::get`] before the `left_out_cost` normalisation.
    fn get_raw(&mut self, job: &RoundJob, ty: usize, nodes: u32, gpus: u32) -> f64 {
        // The model sees only "one node or several" (`GoodputModel::sync_time`),
        // so every multi-node count shares one cell.
        let nodes = nodes.min(2);
        if nodes > self.max_nodes || gpus > self.max_gpus || ty >= self.round.types.len() {
            return objective::speedup(job, self.round.types.get(ty), nodes, gpus, self.round.fair);
        }
        let per_type = (self.max_nodes + 1) * (self.max_gpus + 1);
        let i = (ty as u32 * per_type + nodes * (self.max_gpus + 1) + gpus) as usize;
        if self.cells[i].is_nan() {
            self.cells[i] = self.compute(job, ty, nodes, gpus);
        }
        self.cells[i]
    }

    /// The type index of an allocation's GPUs (0 when it has none).
    pub fn type_of(&self, alloc: &Allocation) -> usize {
        alloc
            .nodes()
            .next()
            .and_then(|n| self.round.node_type.get(n.0 as usize).copied())
            .unwrap_or(0)
    }

    /// Speedup of an allocation, on its own type.
    pub fn get_alloc(&mut self, job: &RoundJob, alloc: &Allocation) -> f64 {
        let ty = self.type_of(alloc);
        self.get(job, ty, alloc.num_nodes(), alloc.num_gpus())
    }
}

impl RoundShape {
    fn of(round: &Round) -> Self {
        RoundShape {
            fair: objective::fair_share(round),
            types: round.cluster.types(),
            node_type: round.cluster.type_index(),
            least_of: (round.params.left_out_cost > 0.0).then(|| (round.cluster.clone(), round.params)),
            searched: Searches::default(),
        }
    }
}

impl SpeedupCache {
    /// [`objective::speedup`] with the fair-share goodput and the per-type
    /// model memoised: the same arithmetic, half the batch-size searches.
    fn compute(&mut self, job: &RoundJob, ty: usize, nodes: u32, gpus: u32) -> f64 {
        let Some(m) = &job.model else {
            return objective::speedup(job, self.round.types.get(ty), nodes, gpus, self.round.fair);
        };
        let fair = self.round.fair;
        let searched = &self.round.searched;
        let base = *self
            .base
            .get_or_insert_with(|| objective::fair_goodput_in(m, fair, searched));
        if base <= 0.0 {
            return 0.0;
        }
        let types = &self.round.types;
        let on = *self.models[ty].get_or_insert_with(|| job.model_on(types.get(ty)));
        let Some(on) = on else {
            return 0.0;
        };
        self.round
            .searched
            .goodput(&on, nodes, gpus)
            .map_or(0.0, |g| g / base)
    }
}

/// GPUs a goodput-based planner may give a job: its limits, the cluster, and
/// Pollux's exploration cap (factor × the most GPUs it has used, at least 1).
pub fn max_gpus(job: &RoundJob, round: &Round) -> u32 {
    max_gpus_of(job, &round.params, round.cluster.total_gpus())
}

/// [`max_gpus`] with the cluster's GPU count given: summing it is O(nodes),
/// too much to repeat per job on a 100k-GPU round.
pub fn max_gpus_of(job: &RoundJob, params: &PolicyParams, total_gpus: u32) -> u32 {
    let explore = (params.exploration_factor * job.state.max_gpus_used).max(1);
    job.max_gpus.min(explore.max(job.min_gpus)).min(total_gpus)
}

/// [`objective::evaluate`] through the planner's own speedup tables (one
/// per job, in round order): the same values, without recomputing the batch
/// searches the planner already did.
pub fn evaluate_cached(round: &Round, plan: &Plan, caches: &mut [SpeedupCache]) -> f64 {
    let mut values: Vec<f64> = round
        .jobs
        .iter()
        .zip(caches.iter_mut())
        .map(|(j, c)| {
            let a = plan.get(j.id);
            if a.num_gpus() == 0 {
                let v = objective::left_out_value(&round.params);
                return objective::prioritise(j, &round.params, v);
            }
            let s = c.get_alloc(j, &a);
            let v = if a.same_gpus(&j.state.allocation) {
                s
            } else {
                s * objective::restart_factor(j, &round.params)
            };
            objective::prioritise(j, &round.params, v)
        })
        .collect();
    objective::shared_values(round, plan, &mut values);
    objective::variability_values(round, plan, &mut values);
    objective::queue_mean(round, &values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoised_base_gives_the_same_speedups() {
        use crate::testutil::{job, model, round};
        let mut jobs = vec![job(0, 2, 0.0), job(1, 4, 1.0)];
        jobs[1].model = Some(model());
        let round = round("2x4", jobs, gpuplan_core::Interference::Avoid);
        for j in &round.jobs {
            let mut c = SpeedupCache::new(&round, 2, 8);
            for n in 1..=4 {
                for k in 0..=8 {
                    let want = objective::speedup(j, None, n, k, objective::fair_share(&round));
                    assert_eq!(c.get(j, 0, n, k).to_bits(), want.to_bits(), "n={n} k={k}");
                }
            }
        }
    }

    #[test]
    fn cached_evaluation_matches_the_common_one() {
        use crate::testutil::{job, model, round, running};
        use gpuplan_core::{Allocation, NodeId, PlanStatus};
        let mut jobs = vec![running(job(0, 2, 0.0), &[(0, 2)]), job(1, 4, 1.0), job(2, 1, 2.0)];
        jobs[0].state.restarts = 1;
        jobs[1].model = Some(model());
        let round = round("2x4", jobs, gpuplan_core::Interference::Avoid);
        let mut plan = Plan::new("t", PlanStatus::Optimal);
        plan.allocations
            .insert(round.jobs[0].id, Allocation::from_counts(&[(NodeId(0), 2)]));
        plan.allocations.insert(
            round.jobs[1].id,
            Allocation::from_counts(&[(NodeId(0), 1), (NodeId(1), 4)]),
        );
        let mut caches: Vec<SpeedupCache> = round
            .jobs
            .iter()
            .map(|_| SpeedupCache::new(&round, 2, 8))
            .collect();
        let want = objective::evaluate(&round, &plan);
        assert_eq!(
            evaluate_cached(&round, &plan, &mut caches).to_bits(),
            want.to_bits()
        );
        // A moved job pays the restart factor in both.
        plan.allocations
            .insert(round.jobs[0].id, Allocation::from_counts(&[(NodeId(1), 2)]));
        let want = objective::evaluate(&round, &plan);
        assert_eq!(
            evaluate_cached(&round, &plan, &mut caches).to_bits(),
            want.to_bits()
        );
    }
}
