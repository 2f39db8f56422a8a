//! The one evaluation of a plan that every planner is judged by: the
//! generalized (power) mean of job speedups, with Pollux's restart factor.
//!
//! Keeping it here (not in a planner) means the MIP, the GA and the greedy
//! heuristic are compared on exactly the same number.

use crate::cluster::{Cluster, GpuType};
use crate::job::Allocation;
use crate::math::Libm;
use crate::model::{GoodputModel, Searches};
use crate::plan::Plan;
use crate::round::{PolicyParams, Round, RoundJob};

/// Added to every speedup so that p ≤ 0 stays finite when a job gets nothing
/// (Pollux adds 1e-3 to its scaled speedups for the same reason).
pub const EPSILON: f64 = 1e-3;

/// Pollux's fair-share baseline: ceil(GPUs / jobs) GPUs on one node,
/// over the GPUs the round's jobs can have: those reserved by jobs outside
/// the round ([`Round::reserved`]) are not theirs to share. The pipeline
/// plans a round without its reserved GPUs, so this keeps one fair share
/// for the planners' model and the objective (issue 51: with two, a
/// model's bound could fall below a valid plan).
pub fn fair_share(round: &Round) -> (u32, u32) {
    let jobs = round.jobs.len().max(1) as u32;
    let gpus = round
        .cluster
        .total_gpus()
        .saturating_sub(round.reserved.len() as u32);
    (1, gpus.div_ceil(jobs).max(1))
}

/// Speedup of running `job` on `gpus` GPUs of `gpu_type` over `nodes`
/// nodes, relative to the fair share on the type its model was fitted on
/// (one denominator per job, whatever the type). Jobs without a fitted
/// model scale linearly, as Pollux assumes for jobs that never ran.
pub fn speedup(job: &RoundJob, gpu_type: Option<&GpuType>, nodes: u32, gpus: u32, fair: (u32, u32)) -> f64 {
    speedup_with(job, gpu_type, nodes, gpus, fair, None)
}

/// [`speedup`] with its batch-size searches memoised in `searches`: the
/// same value, bit for bit.
pub fn speedup_in(
    job: &RoundJob,
    gpu_type: Option<&GpuType>,
    nodes: u32,
    gpus: u32,
    fair: (u32, u32),
    searches: &Searches,
) -> f64 {
    speedup_with(job, gpu_type, nodes, gpus, fair, Some(searches))
}

fn speedup_with(
    job: &RoundJob,
    gpu_type: Option<&GpuType>,
    nodes: u32,
    gpus: u32,
    fair: (u32, u32),
    searches: Option<&Searches>,
) -> f64 {
    if gpus == 0 {
        return 0.0;
    }
    let Some(m) = &job.model else {
        return gpus as f64 / fair.1 as f64;
    };
    let on = job.model_on(gpu_type);
    let model = match &on {
        Some(on) if on != m => on,
        _ => m,
    };
    let Some(goodput) = search(model, nodes, gpus, searches) else {
        return 0.0;
    };
    let base = fair_goodput_with(m, fair, searches);
    if base <= 0.0 {
        return 0.0;
    }
    goodput / base
}

/// One batch-size search's goodput, through `searches` when given.
fn search(m: &GoodputModel, nodes: u32, gpus: u32, searches: Option<&Searches>) -> Option<f64> {
    match searches {
        Some(s) => s.goodput(m, nodes, gpus),
        None => m.optimize(nodes, gpus).map(|c| c.goodput),
    }
}

/// The speedup denominator: best goodput at the fair share, else on one GPU
/// ([`GoodputModel::speedup`]'s base).
pub fn fair_goodput(m: &GoodputModel, fair: (u32, u32)) -> f64 {
    fair_goodput_with(m, fair, None)
}

/// [`fair_goodput`] through `searches`.
pub fn fair_goodput_in(m: &GoodputModel, fair: (u32, u32), searches: &Searches) -> f64 {
    fair_goodput_with(m, fair, Some(searches))
}

fn fair_goodput_with(m: &GoodputModel, fair: (u32, u32), searches: Option<&Searches>) -> f64 {
    search(m, fair.0, fair.1, searches)
        .or_else(|| search(m, 1, 1, searches))
        .unwrap_or(0.0)
}

/// Pollux's re-allocation factor (age − wδ·restarts)/(age + wδ), floored
/// at 0. δ is the job's own restart penalty where it has one, else the
/// round's; w is `params.restart_weight` (1 in Pollux), so a policy may
/// charge a restart more than the time it takes (gpuplan-mip: a move also
/// costs the job the rounds it spends re-growing).
///
/// A job that reports checkpoints is charged what a restart really costs
/// it: the next restart adds the work since its last checkpoint to δ
/// ([`restart_cost_s`]), and its past restarts the work they lost
/// (`state.lost_s`). Without checkpoint reports both are 0: Pollux's factor.
///
/// Under `params.spare_waiting` (Sia's rule) a job that holds no GPUs, or
/// is younger than its penalty, pays nothing: 1.
pub fn restart_factor(job: &RoundJob, params: &PolicyParams) -> f64 {
    let delta = job.restart_penalty_s.unwrap_or(params.restart_penalty_s);
    if params.spare_waiting == crate::RestartCharge::HoldersOnly
        && (job.state.allocation.is_empty() || job.state.age_s < delta)
    {
        return 1.0;
    }
    let w = params.restart_weight;
    let d = delta * w;
    // Written so that with no checkpoint facts the arithmetic is Pollux's
    // to the last bit (d·restarts, age + d): results before and after agree.
    let past = d * job.state.restarts as f64 + w * job.state.lost_s.unwrap_or(0.0);
    let next = d + w * (restart_cost_s(job, params) - delta);
    let age = job.state.age_s.max(0.0);
    ((age - past).max(0.0)) / (age + next).max(1e-9)
}

/// Seconds a re-allocation now costs `job`: its restart penalty (its own,
/// else the round's) plus the work it would lose, its run time since its
/// last checkpoint where it reports checkpoints. A waiting job loses no
/// work: it holds nothing to lose.
pub fn restart_cost_s(job: &RoundJob, params: &PolicyParams) -> f64 {
    let delta = job.restart_penalty_s.unwrap_or(params.restart_penalty_s);
    let lost = if job.state.allocation.is_empty() {
        0.0
    } else {
        job.state.since_checkpoint_s.unwrap_or(0.0)
    };
    delta + lost
}

/// Under `params.left_out_cost` (Sia's valuation): the speedup of a job's
/// least configuration, by which all its speedups are divided, so that
/// every job's smallest allocation is worth 1 however well it scales —
/// `min_gpus` (at least 1) GPUs, on one node where they fit, of the type
/// on which that is slowest. 1 when off, or when the job gains nothing
/// anywhere.
pub fn least_speedup(job: &RoundJob, cluster: &Cluster, fair: (u32, u32), params: &PolicyParams) -> f64 {
    least_speedup_with(job, cluster, fair, params, None)
}

fn least_speedup_with(
    job: &RoundJob,
    cluster: &Cluster,
    fair: (u32, u32),
    params: &PolicyParams,
    searches: Option<&Searches>,
) -> f64 {
    if params.left_out_cost <= 0.0 {
        return 1.0;
    }
    let k = job.min_gpus.max(1);
    let mut least = f64::INFINITY;
    for ty in cluster.types() {
        let nodes = cluster.nodes.iter().filter(|n| n.gpu_type == ty);
        let (count, most, total) = nodes.fold((0u32, 0u32, 0u32), |(c, m, t), n| {
            (c + 1, m.max(n.gpus), t + n.gpus)
        });
        if count == 0 || total < k {
            continue;
        }
        let span = if k <= most { 1 } else { 2 };
        let s = speedup_with(job, Some(&ty), span, k, fair, searches);
        if s > 0.0 {
            least = least.min(s);
        }
    }
    if least.is_finite() {
        least
    } else {
        1.0
    }
}

/// What a job without GPUs is worth: 0, or under `params.left_out_cost` λ
/// the value whose term (v+ε)^p is λ (Sia's λ_n), so that leaving a job out
/// costs λ against 1 for its least configuration.
pub fn left_out_value(params: &PolicyParams) -> f64 {
    let l = params.left_out_cost;
    if l > 0.0 && params.p < 0.0 {
        (l.libm_pow(1.0 / params.p) - EPSILON).max(0.0)
    } else {
        0.0
    }
}

/// The value a job contributes: its speedup (under `params.left_out_cost`
/// divided by [`least_speedup`], and [`left_out_value`] without GPUs), times
/// the restart factor if its placement changes (any change, including a
/// first start, as in Pollux, unless `params.spare_waiting`), times its
/// attained-service priority (1 unless `params.priority` is on).
pub fn job_value(
    job: &RoundJob,
    cluster: &Cluster,
    alloc: &Allocation,
    fair: (u32, u32),
    params: &PolicyParams,
) -> f64 {
    job_value_with(job, cluster, alloc, fair, params, None)
}

fn job_value_with(
    job: &RoundJob,
    cluster: &Cluster,
    alloc: &Allocation,
    fair: (u32, u32),
    params: &PolicyParams,
    searches: Option<&Searches>,
) -> f64 {
    if alloc.num_gpus() == 0 {
        return prioritise(job, params, left_out_value(params));
    }
    let s = speedup_with(
        job,
        cluster.type_of(alloc),
        alloc.num_nodes(),
        alloc.num_gpus(),
        fair,
        searches,
    ) / least_speedup_with(job, cluster, fair, params, searches);
    let v = if alloc.same_gpus(&job.state.allocation) {
        s
    } else {
        s * restart_factor(job, params)
    };
    prioritise(job, params, v)
}

/// A job's value under `params.priority`: `f·(v + ε) − ε` for its factor f,
/// so that its term of Σ (v+ε)^p is `f^p·(v+ε)^p`, a true weight even when
/// the job gets nothing (a plain `f·v` would leave an idle job's term at
/// ε^p for every job, and p < 0 would still start everyone first).
/// Identity when the priority is off.
pub fn prioritise(job: &RoundJob, params: &PolicyParams, value: f64) -> f64 {
    let f = params.priority.factor(job.state.attained_gpu_s);
    if f == 1.0 {
        value
    } else {
        f * (value.max(0.0) + EPSILON) - EPSILON
    }
}

/// A job's value shifted by [`EPSILON`], the base of its term (v+ε)^p.
/// Values below 0 come only from [`prioritise`], whose
/// shifted value they encode (down to just above 0), so they are kept;
/// values of 0 and above shift exactly as they always have.
pub fn shifted(v: f64) -> f64 {
    if v >= 0.0 {
        v + EPSILON
    } else {
        (v + EPSILON).max(f64::MIN_POSITIVE)
    }
}

/// Each round job's weight in the nested objective across queues
/// ([`crate::queue::QueueTree::shares`]); `None` for a round without
/// queues, where every job weighs 1.
pub fn queue_shares(round: &Round) -> Option<Vec<f64>> {
    crate::queue::QueueTree::new(round).map(|t| t.shares())
}

/// A job's term of the objective's sum: `share`·(v+ε)^p (for p = 0,
/// `share`·ln(v+ε); under max-min, p = −∞, v+ε unweighted, since weights
/// change no minimum). The share multiplies the term rather than being
/// folded into the value (v' = share^(1/p)·(v+ε) − ε): at small |p| that
/// power under- or overflows and v' − ε cancels to nothing (issue 51).
pub fn weighted_term(value: f64, share: f64, p: f64) -> f64 {
    let x = shifted(value);
    if p.is_infinite() {
        x
    } else if p == 0.0 {
        share * x.libm_ln()
    } else {
        share * x.libm_pow(p)
    }
}

/// Generalized mean of `values + EPSILON` with exponent `p`
/// (p = −∞: minimum; p = 0: geometric mean).
pub fn power_mean(values: &[f64], p: f64) -> f64 {
    weighted_power_mean(values, None, p)
}

/// [`power_mean`] with job j's term weighted by `shares[j]` (the queue
/// shares, which sum to the number of jobs): the nested mean of
/// docs/tenants.md, (Σ c_j·(v_j+ε)^p / n)^(1/p), exact for every p.
/// `None` weighs every job 1, the plain power mean to the bit.
pub fn weighted_power_mean(values: &[f64], shares: Option<&[f64]>, p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let v = values.iter().map(|&x| shifted(x));
    if p == f64::NEG_INFINITY {
        return v.fold(f64::INFINITY, f64::min);
    }
    if p == f64::INFINITY {
        return v.fold(0.0, f64::max);
    }
    let term = |x: f64| if p == 0.0 { x.libm_ln() } else { x.libm_pow(p) };
    let sum: f64 = match shares {
        None => v.map(term).sum(),
        Some(c) => v.zip(c).map(|(x, &c)| c * term(x)).sum(),
    };
    if p == 0.0 {
        (sum / n).libm_exp()
    } else {
        (sum / n).libm_pow(1.0 / p)
    }
}

/// The objective of a plan: higher is better, same for every planner.
pub fn evaluate(round: &Round, plan: &Plan) -> f64 {
    let fair = fair_share(round);
    // Jobs of one model share their searches (the same values): repeated
    // searches were most of an evaluation of a 16,384-GPU round.
    let searches = Searches::default();
    let mut values: Vec<f64> = round
        .jobs
        .iter()
        .map(|j| {
            job_value_with(
                j,
                &round.cluster,
                plan.gpus_of(j.id),
                fair,
                &round.params,
                Some(&searches),
            )
        })
        .collect();
    shared_values(round, plan, &mut values);
    variability_values(round, plan, &mut values);
    queue_mean(round, &values)
}

/// The round's objective from its jobs' values (after slowdowns): the power
/// mean, nested across queues by their shares ([`weighted_power_mean`]).
pub fn queue_mean(round: &Round, values: &[f64]) -> f64 {
    let shares = queue_shares(round);
    weighted_power_mean(values, shares.as_deref(), round.params.p)
}

/// Divide each job's value by how much slower its GPUs run it
/// ([`Round::variability_factor`]), so a planner that sees per-GPU
/// variability is judged by the speed the job will really get; nothing
/// without variability.
pub fn variability_values(round: &Round, plan: &Plan, values: &mut [f64]) {
    if round.variability.is_none() {
        return;
    }
    for (v, j) in values.iter_mut().zip(&round.jobs) {
        *v /= round.variability_factor(j, plan.gpus_of(j.id));
    }
}

/// Divide the values of jobs that share GPUs by their predicted slowdown
/// ([`crate::colocation::plan_slowdowns`]); nothing without sharing.
pub fn shared_values(round: &Round, plan: &Plan, values: &mut [f64]) {
    if round.params.sharing <= 1 {
        return;
    }
    let slow = crate::colocation::plan_slowdowns(round, plan, &crate::colocation::GAVEL_CURVE);
    for (v, f) in values.iter_mut().zip(slow) {
        *v /= f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_means_by_hand() {
        let v = [1.0 - EPSILON, 3.0 - EPSILON];
        // Harmonic mean of 1 and 3 = 2 / (1 + 1/3) = 1.5.
        assert!((power_mean(&v, -1.0) - 1.5).abs() < 1e-12);
        assert!((power_mean(&v, 0.0) - 3f64.sqrt()).abs() < 1e-12);
        assert!((power_mean(&v, 1.0) - 2.0).abs() < 1e-12);
        assert!((power_mean(&v, f64::NEG_INFINITY) - 1.0).abs() < 1e-12);
    }

    /// Issue 52: a job that reports checkpoints is charged the work since
    /// its last one on top of δ for the next restart, and what its past
    /// restarts lost; a waiting job loses nothing; without reports, Pollux's.
    #[test]
    fn restart_factor_charges_the_work_since_the_checkpoint() {
        let mut j = crate::round::RoundJob {
            state: crate::JobState {
                age_s: 600.0,
                restarts: 2,
                allocation: crate::Allocation::from_counts(&[(crate::NodeId(0), 1)]),
                ..Default::default()
            },
            ..crate::round::test_job(0)
        };
        let p = PolicyParams::default();
        assert!((restart_factor(&j, &p) - 540.0 / 630.0).abs() < 1e-12);
        // 90 s since its checkpoint: (600 − 30·2)/(600 + 30 + 90).
        j.state.since_checkpoint_s = Some(90.0);
        assert_eq!(restart_cost_s(&j, &p), 120.0);
        assert!((restart_factor(&j, &p) - 540.0 / 720.0).abs() < 1e-12);
        // Its past restarts threw away 100 s of work: (600 − 60 − 100)/(720).
        j.state.lost_s = Some(100.0);
        assert!((restart_factor(&j, &p) - 440.0 / 720.0).abs() < 1e-12);
        // Charged twice, as gpuplan-mip does: (600 − 2·160)/(600 + 2·120).
        let twice = PolicyParams {
            restart_weight: 2.0,
            ..Default::default()
        };
        assert!((restart_factor(&j, &twice) - 280.0 / 840.0).abs() < 1e-12);
        // Waiting: nothing to lose now, only δ.
        j.state.allocation = crate::Allocation::default();
        assert_eq!(restart_cost_s(&j, &p), 30.0);
        assert!((restart_factor(&j, &p) - 440.0 / 630.0).abs() < 1e-12);
    }

    #[test]
    fn restart_factor_by_hand() {
        let mut j = crate::round::RoundJob {
            name: "j".into(),
            app: "a".into(),
            batch_size: 1,
            min_gpus: 1,
            max_gpus: 4,
            state: crate::JobState {
                age_s: 600.0,
                restarts: 2,
                ..Default::default()
            },
            ..crate::round::test_job(0)
        };
        // (600 − 30·2)/(600 + 30) = 540/630
        assert!((restart_factor(&j, &PolicyParams::default()) - 540.0 / 630.0).abs() < 1e-12);
        // A job's own penalty wins over the round's: (600 − 120·2)/(600 + 120).
        j.restart_penalty_s = Some(120.0);
        assert!((restart_factor(&j, &PolicyParams::default()) - 360.0 / 720.0).abs() < 1e-12);
        // Charged twice: (600 − 240·2)/(600 + 240) with the job's own δ, then the round's.
        let twice = PolicyParams {
            restart_weight: 2.0,
            ..Default::default()
        };
        assert!((restart_factor(&j, &twice) - 120.0 / 840.0).abs() < 1e-12);
        j.restart_penalty_s = None;
        assert!((restart_factor(&j, &twice) - 480.0 / 660.0).abs() < 1e-12);
        assert!((restart_factor(&j, &PolicyParams::default()) - 540.0 / 630.0).abs() < 1e-12);
        j.state.age_s = 30.0;
        assert_eq!(restart_factor(&j, &PolicyParams::default()), 0.0, "floored at 0");
        // No model: linear speedup over the fair share; unchanged placement keeps it whole.
        let a = Allocation::from_counts(&[(crate::NodeId(0), 2)]);
        let c: Cluster = "1x4".parse().unwrap();
        assert_eq!(
            job_value(&j, &c, &a, (1, 4), &PolicyParams::default()),
            0.0,
            "a change at factor 0 is worth nothing"
        );
        j.state.allocation = a.clone();
        assert_eq!(job_value(&j, &c, &a, (1, 4), &PolicyParams::default()), 0.5);
        // Attained-service priority: factor (1 + 3600/3600)^1 = 2, value 2·(0.5 + ε) − ε.
        j.state.attained_gpu_s = 3600.0;
        let params = PolicyParams {
            priority: crate::Priority {
                exponent: 1.0,
                scale_gpu_s: 3600.0,
            },
            ..Default::default()
        };
        assert!((job_value(&j, &c, &a, (1, 4), &params) - (1.0 + EPSILON)).abs() < 1e-12);
        assert!(
            (prioritise(&j, &params, 0.0) - EPSILON).abs() < 1e-12,
            "an idle job's term is weighted too"
        );
    }

    /// A job measured on T4 is valued on an A100 through the table's ratio
    /// (compute × 0.292, intra-node sync × 15.75/600), over one denominator.
    #[test]
    fn per_type_values_by_hand() {
        use crate::model::{BatchLimits, GoodputModel, GradParams, PerfParams};
        let perf = PerfParams {
            alpha_c: 0.2,
            beta_c: 0.01,
            alpha_n: 0.3,
            beta_n: 0.01,
            alpha_r: 0.1,
            beta_r: 0.005,
            gamma: 1.0,
        };
        let m = GoodputModel {
            perf,
            grad: GradParams { sqr: 1.0, var: 0.0 },
            limits: BatchLimits {
                init_batch: 64,
                max_batch: 64,
                min_local: 16,
                max_local: 64,
            },
            accumulation: false,
        };
        let mut j: RoundJob = serde_json::from_str(
            r#"{"id":0,"name":"a","app":"imagenet","submit_s":0,"requested_gpus":1,"batch_size":64,
                "min_gpus":0,"max_gpus":8,"preemptible":true,"state":{"progress":0,"epoch":0,
                "attained_gpu_s":0,"age_s":0,"restarts":0,"allocation":[],"max_gpus_used":0,
                "batch_size":64,"local_bsz":64,"accum_steps":0}}"#,
        )
        .unwrap();
        j.model = Some(m);
        j.model_type = Some("t4".into());
        let (t4, a100): (GpuType, GpuType) = ("t4".into(), "a100".into());
        // Fixed batch 64 (no noise: efficiency 1). One GPU, local 64:
        // T4 step 0.2 + 0.01·64 = 0.84 s; A100 0.84 × 0.292 s.
        let fair = (1, 1);
        let on_t4 = speedup(&j, Some(&t4), 1, 1, fair);
        let on_a100 = speedup(&j, Some(&a100), 1, 1, fair);
        assert!((on_t4 - 1.0).abs() < 1e-12);
        assert!((on_a100 - 1.0 / 0.292).abs() < 1e-9, "{on_a100}");
        // Two GPUs on one node, local 32: compute 0.2 + 0.32 = 0.52 s, sync
        // 0.1 (γ = 1 adds them). A100: 0.52·0.292 + 0.1·15.75/600.
        let t4_2 = 0.52 + 0.1;
        let a100_2 = 0.52 * 0.292 + 0.1 * 15.75 / 600.0;
        assert!((speedup(&j, Some(&t4), 1, 2, fair) - 0.84 / t4_2).abs() < 1e-9);
        assert!((speedup(&j, Some(&a100), 1, 2, fair) - 0.84 / a100_2).abs() < 1e-9);
        // Across two nodes the sync is not scaled: 0.52·0.292 + 0.3.
        let cross = 0.52 * 0.292 + 0.3;
        assert!((speedup(&j, Some(&a100), 2, 2, fair) - 0.84 / cross).abs() < 1e-9);
        // Once measured on the A100, that fit wins over the ratio.
        let mut fast = m;
        fast.perf.alpha_c = 0.0;
        fast.perf.beta_c = 0.84 / 64.0 / 10.0;
        j.type_models.push(crate::TypedModel {
            gpu_type: a100.clone(),
            model: fast,
        });
        assert!((speedup(&j, Some(&a100), 1, 1, fair) - 10.0).abs() < 1e-9);
        // A model of no known type (an older round file) is the same on every type.
        j.model_type = None;
        j.type_models.clear();
        assert_eq!(
            speedup(&j, Some(&a100), 1, 2, fair),
            speedup(&j, None, 1, 2, fair)
        );
    }
}
