//! A bound on the round's true objective for formulations that offer only
//! some shapes (`mip-aggregate`'s packable ones), whose own solver bound
//! covers their model and not the round (docs/formulation.md, "The bound
//! rule").
//!
//! The count relaxation: each job keeps its GPUs, gets nothing, or takes
//! any GPU count of one type at the best value any placement of that count
//! has; the only rows left are GPUs per type, each GPU counted
//! `params.sharing` times (a shared GPU holds that many jobs, each valued
//! solo, which sharing never beats). Every valid plan is a solution of it,
//! so any value of its Lagrangian dual bounds the true objective. One price
//! per type, found by coordinate descent; the dual's minimum is the LP
//! bound. Linear in the options, so it scales with the aggregate model.

use gpuplan_core::Round;

use crate::candidates::{bound_to_mean, kept_charge, Choice, JobOptions, Sense};

/// One way a job may be charged: its score in maximisation form and GPUs
/// per type.
struct Opt {
    score: f64,
    gpus: Vec<(usize, f64)>,
}

/// Per job: the fixed options (keep, nothing) and, per type, the upper
/// concave hull of (count, score) up to the best score: only hull points
/// can be a job's best choice at some price.
struct Job {
    fixed: Vec<Opt>,
    hulls: Vec<(usize, Vec<(f64, f64)>)>,
}

/// The count relaxation's bound on the generalized mean over the round's
/// jobs, or `None` when it is not finite. `opts` must be `job_options` with
/// every count (`Shapes::Any`).
pub(crate) fn count_bound(round: &Round, opts: &[JobOptions]) -> Option<f64> {
    count_dual(round, opts).map(|d| d.bound)
}

/// The count relaxation's dual: the bound and, but for p = −∞ (which has
/// no additive form), the prices that give it, one per GPU type in
/// maximisation form (a GPU of type t costs `prices[t]` of a job's score,
/// `Sense::term` with the sign that makes larger better).
pub(crate) struct CountDual {
    pub bound: f64,
    pub prices: Option<Vec<f64>>,
}

/// [`count_bound`] with its prices ([`CountDual`]).
pub(crate) fn count_dual(round: &Round, opts: &[JobOptions]) -> Option<CountDual> {
    let sense = Sense::of(round.params.p);
    let node_type = round.cluster.type_index();
    let n_types = round.cluster.types().len();
    let k = f64::from(round.params.sharing.max(1));
    let mut cap = vec![0.0; n_types];
    for (node, &t) in round.cluster.nodes.iter().zip(&node_type) {
        cap[t] += k * f64::from(node.gpus);
    }
    if sense == Sense::MaxMin {
        return max_min_bound(round, opts, &node_type, &cap).map(|bound| CountDual { bound, prices: None });
    }
    let sgn = if matches!(sense, Sense::MinPower(_)) {
        -1.0
    } else {
        1.0
    };
    let score = |v: f64, share: f64| sgn * sense.weighted(v, share);
    let kept = kept_charge(round);
    let jobs: Vec<Job> = opts
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut fixed = Vec::new();
            let mut per_type: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n_types];
            for c in &o.candidates {
                match c.choice {
                    Choice::Keep => {
                        let mut gpus: Vec<(usize, f64)> = Vec::new();
                        for (n, g) in kept[i].per_node() {
                            let t = node_type.get(n.0 as usize).copied().unwrap_or(0);
                            match gpus.iter_mut().find(|x| x.0 == t) {
                                Some(x) => x.1 += f64::from(g),
                                None => gpus.push((t, f64::from(g))),
                            }
                        }
                        fixed.push(Opt {
                            score: score(c.value, o.share),
                            gpus,
                        });
                    }
                    Choice::Config { gpus, .. } => {
                        per_type[c.ty].push((f64::from(gpus), score(c.value, o.share)))
                    }
                }
            }
            if !o.pinned {
                fixed.push(Opt {
                    score: score(o.none_value, o.share),
                    gpus: Vec::new(),
                });
            }
            let hulls = per_type
                .into_iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(t, p)| (t, upper_hull(p)))
                .collect();
            Job { fixed, hulls }
        })
        .collect();
    // Each price runs from 0 to where no job would pay it for one GPU.
    let spread = jobs
        .iter()
        .flat_map(|j| {
            j.fixed
                .iter()
                .map(|o| o.score)
                .chain(j.hulls.iter().flat_map(|h| h.1.iter().map(|p| p.1)))
        })
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
            (lo.min(s), hi.max(s))
        });
    if !spread.0.is_finite() || !spread.1.is_finite() {
        return None;
    }
    let top = (spread.1 - spread.0).max(1e-12) * 2.0;
    let mut lam = vec![0.0; n_types];
    let mut best = dual(&jobs, &cap, &lam).0;
    for _pass in 0..8 {
        let before = best;
        for t in 0..n_types {
            // L is convex and piecewise linear in λ_t (the others held),
            // with slope cap − use: its exact minimiser is a breakpoint,
            // found by one sweep instead of a bisection of full
            // evaluations (at 100,000 GPUs the bisection took 9 s).
            let old = lam[t];
            lam[t] = line_min(&jobs, &cap, &lam, t).min(top);
            let l = dual(&jobs, &cap, &lam).0;
            if l < best {
                best = l;
            } else {
                lam[t] = old;
            }
        }
        if before - best <= 1e-12 * best.abs().max(1.0) {
            break;
        }
    }
    let total = sgn * best;
    bound_to_mean(sense, total, round.jobs.len()).map(|bound| CountDual {
        bound,
        prices: Some(lam),
    })
}

/// The λ_t minimising L(λ) with the other prices held: the smallest λ_t
/// at which the GPUs of type t the jobs' maximisers use fall to the
/// capacity. Each job's term is the upper envelope of one line per option
/// (intercept its score net of the other types' prices, slope minus its
/// type-t GPUs), so its use of t drops at the envelope's breakpoints; the
/// breakpoints of all jobs, sorted, give the step function `use(λ_t)`.
/// `f64::INFINITY` when the use never falls to the capacity (pinned jobs
/// over it; the caller caps λ_t).
fn line_min(jobs: &[Job], cap: &[f64], lam: &[f64], t: usize) -> f64 {
    let mut drops: Vec<(f64, f64)> = Vec::new();
    let mut used = 0.0;
    // (GPUs of type t, intercept) of the options that use type t.
    let mut lines: Vec<(f64, f64)> = Vec::new();
    for j in jobs {
        lines.clear();
        let mut flat = f64::NEG_INFINITY;
        for o in &j.fixed {
            let (mut g, mut b) = (0.0, o.score);
            for &(u, x) in &o.gpus {
                if u == t {
                    g += x;
                } else {
                    b -= lam[u] * x;
                }
            }
            if g > 0.0 {
                lines.push((g, b));
            } else {
                flat = flat.max(b);
            }
        }
        for (u, pts) in &j.hulls {
            if *u == t {
                lines.extend(pts.iter().filter(|p| p.0 > 0.0));
            } else {
                for &(g, s) in pts {
                    flat = flat.max(s - lam[*u] * g);
                }
            }
        }
        if lines.is_empty() {
            continue;
        }
        if flat.is_finite() {
            lines.push((0.0, flat));
        }
        // The envelope's piece just above λ = 0: the best intercept, the
        // fewest GPUs among ties.
        let mut cur = lines
            .iter()
            .copied()
            .reduce(|a, b| {
                if b.1 > a.1 || (b.1 == a.1 && b.0 < a.0) {
                    b
                } else {
                    a
                }
            })
            .expect("lines is not empty");
        if !cur.1.is_finite() {
            continue;
        }
        used += cur.0;
        let mut at = 0.0f64;
        // Walk down the envelope: the next piece is the line with fewer
        // GPUs that overtakes the current one first.
        loop {
            let next = lines
                .iter()
                .filter(|l| l.0 < cur.0 && l.1.is_finite())
                .map(|&l| (((cur.1 - l.1) / (cur.0 - l.0)).max(at), l))
                .reduce(|a, b| {
                    if b.0 < a.0 || (b.0 == a.0 && b.1 .0 < a.1 .0) {
                        b
                    } else {
                        a
                    }
                });
            let Some((x, l)) = next else { break };
            drops.push((x, cur.0 - l.0));
            at = x;
            cur = l;
        }
    }
    if used <= cap[t] {
        return 0.0;
    }
    drops.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (x, d) in drops {
        used -= d;
        if used <= cap[t] + 1e-9 * cap[t].max(1.0) {
            return x;
        }
    }
    f64::INFINITY
}

/// L(λ) = Σ_j max_o (score − λ·GPUs) + λ·cap, and each type's GPUs at the
/// maximisers.
fn dual(jobs: &[Job], cap: &[f64], lam: &[f64]) -> (f64, Vec<f64>) {
    let mut used = vec![0.0; cap.len()];
    let mut total: f64 = cap.iter().zip(lam).map(|(c, l)| c * l).sum();
    for j in jobs {
        let mut best = f64::NEG_INFINITY;
        let mut charge: (Option<usize>, Option<usize>, usize) = (None, None, 0);
        for (i, o) in j.fixed.iter().enumerate() {
            let r = o.score - o.gpus.iter().map(|&(t, g)| lam[t] * g).sum::<f64>();
            if r > best {
                best = r;
                charge = (Some(i), None, 0);
            }
        }
        for (h, (t, pts)) in j.hulls.iter().enumerate() {
            for (p, &(g, s)) in pts.iter().enumerate() {
                let r = s - lam[*t] * g;
                if r > best {
                    best = r;
                    charge = (None, Some(h), p);
                }
            }
        }
        if !best.is_finite() {
            // A pinned job with no keep cannot happen (job_options), but
            // an empty job adds nothing rather than poisoning the bound.
            continue;
        }
        total += best;
        match charge {
            (Some(i), _, _) => {
                for &(t, g) in &j.fixed[i].gpus {
                    used[t] += g;
                }
            }
            (None, Some(h), p) => {
                let (t, pts) = &j.hulls[h];
                used[*t] += pts[p].0;
            }
            _ => {}
        }
    }
    (total, used)
}

/// The points of the upper concave hull of (count, score), from the
/// smallest count to the best score: past the best score a larger count
/// never wins at a price ≥ 0, and below the hull a point never wins.
fn upper_hull(mut pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    // Per count, its best score.
    pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    pts.dedup_by(|b, a| a.0 == b.0);
    let top = pts
        .iter()
        .enumerate()
        .fold(0, |bi, (i, p)| if p.1 > pts[bi].1 { i } else { bi });
    pts.truncate(top + 1);
    let mut hull: Vec<(f64, f64)> = Vec::with_capacity(pts.len());
    for p in pts {
        while hull.len() >= 2 {
            let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            // b lies on or below the chord a–p: drop it.
            if (b.1 - a.1) * (p.0 - a.0) <= (p.1 - a.1) * (b.0 - a.0) {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
    }
    hull
}

/// p = −∞: the largest level τ such that every job can reach τ with GPUs
/// that fit the whole cluster's (types merged, a relaxation too).
fn max_min_bound(round: &Round, opts: &[JobOptions], node_type: &[usize], cap: &[f64]) -> Option<f64> {
    let total_cap: f64 = cap.iter().sum();
    let sense = Sense::MaxMin;
    // Per job: (value, GPUs) of every option.
    let kept = kept_charge(round);
    let per_job: Vec<Vec<(f64, f64)>> = opts
        .iter()
        .zip(&kept)
        .map(|(o, held)| {
            let mut v: Vec<(f64, f64)> = o
                .candidates
                .iter()
                .map(|c| {
                    let g = match c.choice {
                        Choice::Keep => held
                            .per_node()
                            .iter()
                            .filter(|(n, _)| (n.0 as usize) < node_type.len())
                            .map(|(_, g)| f64::from(*g))
                            .sum(),
                        Choice::Config { gpus, .. } => f64::from(gpus),
                    };
                    (sense.term(c.value), g)
                })
                .collect();
            if !o.pinned {
                v.push((sense.term(o.none_value), 0.0));
            }
            v
        })
        .collect();
    let fits = |tau: f64| -> bool {
        let mut need = 0.0;
        for v in &per_job {
            match v.iter().filter(|x| x.0 >= tau).map(|x| x.1).reduce(f64::min) {
                Some(g) => need += g,
                None => return false,
            }
        }
        need <= total_cap
    };
    let mut levels: Vec<f64> = per_job
        .iter()
        .flatten()
        .map(|x| x.0)
        .filter(|x| x.is_finite())
        .collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    // The largest level that fits (fits is monotone: a lower level needs no more).
    let (mut lo, mut hi) = (0usize, levels.len());
    if levels.is_empty() || !fits(levels[0]) {
        return bound_to_mean(sense, levels.first().copied().unwrap_or(0.0), round.jobs.len());
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(levels[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    bound_to_mean(sense, levels[lo], round.jobs.len())
}

#[cfg(test)]
mod tests {
    use super::upper_hull;

    #[test]
    fn the_hull_keeps_concave_points_up_to_the_best_score() {
        let pts = vec![
            (1.0, 1.0),
            (2.0, 1.5),
            (3.0, 3.0),
            (4.0, 3.2),
            (5.0, 2.0),
            (3.0, 0.5),
        ];
        assert_eq!(upper_hull(pts), vec![(1.0, 1.0), (3.0, 3.0), (4.0, 3.2)]);
    }
}
