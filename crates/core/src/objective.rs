//! The one evaluation of a plan that every planner is judged by: the
//! generalized (power) mean of job speedups, with Pollux's restart factor.
//!
//! Keeping it here (not in a planner) means the MIP, the GA and the greedy
//! heuristic are compared on exactly the same number.

use crate::job::Allocation;
use crate::math::Libm;
use crate::plan::Plan;
use crate::round::{Round, RoundJob};

/// Added to every speedup so that p ≤ 0 stays finite when a job gets nothing
/// (Pollux adds 1e-3 to its scaled speedups for the same reason).
pub const EPSILON: f64 = 1e-3;

/// Pollux's fair-share baseline: ceil(total GPUs / jobs) GPUs on one node.
pub fn fair_share(round: &Round) -> (u32, u32) {
    let jobs = round.jobs.len().max(1) as u32;
    (1, round.cluster.total_gpus().div_ceil(jobs).max(1))
}

/// Speedup of running `job` on `gpus` GPUs over `nodes` nodes, relative to
/// the fair share. Jobs without a fitted model scale linearly, as Pollux
/// assumes for jobs that never ran.
pub fn speedup(job: &RoundJob, nodes: u32, gpus: u32, fair: (u32, u32)) -> f64 {
    if gpus == 0 {
        return 0.0;
    }
    match &job.model {
        Some(m) => m.speedup(nodes, gpus, fair.0, fair.1),
        None => gpus as f64 / fair.1 as f64,
    }
}

/// Pollux's re-allocation factor (age − δ·restarts)/(age + δ), floored at 0.
/// δ is the job's own restart penalty where it has one, else the round's.
pub fn restart_factor(job: &RoundJob, restart_penalty_s: f64) -> f64 {
    let restart_penalty_s = job.restart_penalty_s.unwrap_or(restart_penalty_s);
    let age = job.state.age_s.max(0.0);
    ((age - restart_penalty_s * job.state.restarts as f64).max(0.0)) / (age + restart_penalty_s).max(1e-9)
}

/// The value a job contributes: its speedup, times the restart factor if its
/// placement changes (any change, including a first start, as in Pollux).
pub fn job_value(job: &RoundJob, alloc: &Allocation, fair: (u32, u32), restart_penalty_s: f64) -> f64 {
    let s = speedup(job, alloc.num_nodes(), alloc.num_gpus(), fair);
    if alloc.same_gpus(&job.state.allocation) {
        s
    } else {
        s * restart_factor(job, restart_penalty_s)
    }
}

/// Generalized mean of `values + EPSILON` with exponent `p`
/// (p = −∞: minimum; p = 0: geometric mean).
pub fn power_mean(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let v = values.iter().map(|x| x.max(0.0) + EPSILON);
    if p == f64::NEG_INFINITY {
        v.fold(f64::INFINITY, f64::min)
    } else if p == f64::INFINITY {
        v.fold(0.0, f64::max)
    } else if p == 0.0 {
        (v.map(|x| x.libm_ln()).sum::<f64>() / n).libm_exp()
    } else {
        (v.map(|x| x.libm_pow(p)).sum::<f64>() / n).libm_pow(1.0 / p)
    }
}

/// The objective of a plan: higher is better, same for every planner.
pub fn evaluate(round: &Round, plan: &Plan) -> f64 {
    let fair = fair_share(round);
    let mut values: Vec<f64> = round
        .jobs
        .iter()
        .map(|j| job_value(j, plan.gpus_of(j.id), fair, round.params.restart_penalty_s))
        .collect();
    shared_values(round, plan, &mut values);
    power_mean(&values, round.params.p)
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

    #[test]
    fn restart_factor_by_hand() {
        let mut j = crate::round::RoundJob {
            id: crate::JobId(0),
            name: "j".into(),
            app: "a".into(),
            submit_s: 0.0,
            requested_gpus: 1,
            batch_size: 1,
            min_gpus: 1,
            max_gpus: 4,
            preemptible: true,
            state: crate::JobState {
                age_s: 600.0,
                restarts: 2,
                ..Default::default()
            },
            model: None,
            oracle: None,
            restart_penalty_s: None,
            class: None,
            mem_gib: None,
            utilization: None,
        };
        // (600 − 30·2)/(600 + 30) = 540/630
        assert!((restart_factor(&j, 30.0) - 540.0 / 630.0).abs() < 1e-12);
        // A job's own penalty wins over the round's: (600 − 120·2)/(600 + 120).
        j.restart_penalty_s = Some(120.0);
        assert!((restart_factor(&j, 30.0) - 360.0 / 720.0).abs() < 1e-12);
        j.restart_penalty_s = None;
        j.state.age_s = 30.0;
        assert_eq!(restart_factor(&j, 30.0), 0.0, "floored at 0");
        // No model: linear speedup over the fair share; unchanged placement keeps it whole.
        let a = Allocation::from_counts(&[(crate::NodeId(0), 2)]);
        assert_eq!(
            job_value(&j, &a, (1, 4), 30.0),
            0.0,
            "a change at factor 0 is worth nothing"
        );
        j.state.allocation = a.clone();
        assert_eq!(job_value(&j, &a, (1, 4), 30.0), 0.5);
    }
}
