//! MIP round planners. Each round is a choice, per job, among candidate
//! configurations (nodes, GPUs), "keep the current placement" and
//! "nothing", with a per-choice objective coefficient computed from the
//! goodput model: the power-mean objective becomes linear in the choice
//! binaries. `docs/formulation.md` states both formulations.
//!
//! The formulations live here; the layers they stand on are modules of
//! their own (see docs/architecture.md, "solve's layers"):
//! [`crate::candidates`] (choices and their values), [`crate::solver`] (the
//! HiGHS/microlp binding) and [`crate::fallback`] (validation, gap, greedy
//! fallback).

pub(crate) mod aggregate;
mod dual;
pub(crate) mod exact;
pub(crate) mod lagrange;
pub(crate) mod node;
pub(crate) mod sia;

pub(crate) use crate::fallback::set_gap_cached;

use good_lp::Expression;
use gpuplan_core::queue::QueueTree;
use gpuplan_core::Round;

use crate::solver::Model;
use crate::{BatchPolicy, PlannerTraits};

/// The round's queue rules ([`gpuplan_core::queue`]) as rows of a model
/// whose job `j` holds `gpus[j]` GPUs and waits when `none[j]` is 1
/// (`pinned[j]`: GPUs a non-preemptible job keeps, else 0), so the model's
/// optimum is the optimum under them: limits, lending, no borrowing for
/// non-preemptible starts, and reclaim. For reclaim, with a binary w_b = 1
/// whenever queue b holds more than max(guarantee, pinned), a waiting job j
/// whose minimum m fits queue a's guarantee G_a forbids borrowing beside a:
/// held_a ≥ (G_a − m + 1)·(w_b + none_j − 1). A reclaim whose path crosses
/// a borrowing limit is left to the pipeline's queue stage (whether the
/// job could start depends on that limit's room), as the validator's rule
/// says.
pub(crate) fn queue_rows(
    round: &Round,
    tree: &QueueTree,
    m: &mut Model,
    gpus: &[Expression],
    none: &[Expression],
    pinned: &[u32],
) {
    let h = tree.holdings(|j| pinned[j], |j| pinned[j] > 0);
    let nq = tree.queues.len();
    let mut held: Vec<Expression> = vec![Expression::from(0.0); nq];
    for (j, g) in gpus.iter().enumerate() {
        for &q in tree.path(tree.leaf[j]) {
            held[q] += g.clone();
        }
    }
    let cap = f64::from(tree.capacity.max(1));
    for (q, (queue, held_q)) in tree.queues.iter().zip(&held).enumerate() {
        let limit = tree.limit(q, &h);
        if limit != u32::MAX {
            m.constraints.push(held_q.clone().leq(f64::from(limit)));
        }
        if !queue.lend {
            let mut outside = Expression::from(0.0);
            let mut pinned_out = 0u32;
            for (j, g) in gpus.iter().enumerate() {
                if !tree.is_ancestor_or_self(q, tree.leaf[j]) {
                    outside += g.clone();
                    pinned_out += pinned[j];
                }
            }
            let allowed = tree.capacity.saturating_sub(queue.guarantee).max(pinned_out);
            m.constraints.push(outside.leq(f64::from(allowed)));
        }
    }
    let mut w: Vec<Option<good_lp::Variable>> = vec![None; nq];
    for (j, job) in round.jobs.iter().enumerate() {
        if pinned[j] > 0 {
            continue;
        }
        if !job.preemptible && job.current().is_empty() {
            for &a in tree.path(tree.leaf[j]) {
                let g = f64::from(tree.queues[a].guarantee);
                m.constraints.push(held[a].clone().leq(g + cap * none[j].clone()));
            }
        }
        if job.max_gpus == 0 {
            continue;
        }
        let min = job.min_gpus.max(1);
        for &a in tree.path(tree.leaf[j]) {
            if tree.queues[a].borrow_limit.is_some() {
                break;
            }
            let ga = tree.queues[a].guarantee;
            if ga < min {
                continue;
            }
            for b in tree.beside(a) {
                let wb = *w[b].get_or_insert_with(|| {
                    let v = m.binary();
                    let floor = f64::from(tree.queues[b].guarantee.max(h.pinned[b]));
                    m.constraints.push(held[b].clone().leq(floor + cap * v));
                    v
                });
                let rhs = f64::from(ga - min + 1) * (Expression::from(wb) + none[j].clone() - 1.0);
                m.constraints.push(held[a].clone().geq(rhs));
            }
        }
    }
}

/// What every MIP planner promises: goodput batches, no oracle, the interference rule.
pub const MIP_TRAITS: PlannerTraits = PlannerTraits {
    batch: BatchPolicy::Adaptive,
    needs_oracle: false,
    honours_interference: true,
};
