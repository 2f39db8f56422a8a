//! NSGA-II survival on the GA's two objectives (fitness, utility): the
//! non-dominated fronts, then crowding distance within the last one kept.
//! Apart because it knows nothing of genomes, clusters or the stream: it
//! ranks pairs of numbers, with buffers of its own.

/// Buffers reused across survivor selections.
#[derive(Default)]
pub(super) struct Scratch {
    /// [`fronts`]: each individual's front, the sort order, each front's last member.
    rank: Vec<usize>,
    sorted: Vec<usize>,
    last: Vec<usize>,
}

fn dominates(x: (f64, f64), y: (f64, f64)) -> bool {
    x.0 >= y.0 && x.1 >= y.1 && (x.0 > y.0 || x.1 > y.1)
}

/// Each individual's non-dominated front (0 = not dominated), as peeling
/// fronts off finds them, in O(n log n) for two objectives: in order of
/// decreasing (objective 0, objective 1) every dominator comes before what
/// it dominates, along one front objective 1 never decreases, so a front
/// dominates a point iff the front's last member does, and if front k does
/// then so does every front before it (transitivity): binary search. NaN
/// objectives dominate nothing and are never dominated: front 0.
fn fronts(objs: &[(f64, f64)], s: &mut Scratch) -> usize {
    let (rank, order, last) = (&mut s.rank, &mut s.sorted, &mut s.last);
    rank.clear();
    rank.resize(objs.len(), 0);
    order.clear();
    order.extend((0..objs.len()).filter(|&i| !objs[i].0.is_nan() && !objs[i].1.is_nan()));
    let desc = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal);
    order.sort_unstable_by(|&a, &b| {
        desc(objs[a].0, objs[b].0)
            .then(desc(objs[a].1, objs[b].1))
            .then(a.cmp(&b))
    });
    last.clear();
    for &b in order.iter() {
        let k = last.partition_point(|&a| dominates(objs[a], objs[b]));
        rank[b] = k;
        if k == last.len() {
            last.push(b);
        } else {
            last[k] = b;
        }
    }
    last.len().max(1)
}

/// NSGA-II: non-dominated fronts, then crowding distance within the last front.
pub(super) fn select_survivors(objs: &[(f64, f64)], keep: usize, s: &mut Scratch) -> Vec<usize> {
    let n_fronts = fronts(objs, s);
    let rank = &s.rank;
    let mut out = Vec::with_capacity(keep);
    for k in 0..n_fronts {
        if out.len() >= keep {
            break;
        }
        let front: Vec<usize> = (0..objs.len()).filter(|&i| rank[i] == k).collect();
        if out.len() + front.len() <= keep {
            out.extend(&front);
        } else {
            let mut dist = vec![0.0f64; front.len()];
            for obj in 0..2 {
                let val = |i: usize| {
                    if obj == 0 {
                        objs[front[i]].0
                    } else {
                        objs[front[i]].1
                    }
                };
                let mut idx: Vec<usize> = (0..front.len()).collect();
                idx.sort_by(|&a, &b| val(a).total_cmp(&val(b)).then(front[a].cmp(&front[b])));
                let range = (val(idx[idx.len() - 1]) - val(idx[0])).max(1e-12);
                dist[idx[0]] = f64::INFINITY;
                dist[idx[idx.len() - 1]] = f64::INFINITY;
                for w in 1..idx.len().saturating_sub(1) {
                    dist[idx[w]] += (val(idx[w + 1]) - val(idx[w - 1])) / range;
                }
            }
            let mut idx: Vec<usize> = (0..front.len()).collect();
            idx.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(front[a].cmp(&front[b])));
            out.extend(idx.into_iter().take(keep - out.len()).map(|i| front[i]));
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The published peeling, quadratic: the reference for [`fronts`].
    fn select_survivors_quadratic(objs: &[(f64, f64)], keep: usize) -> Vec<usize> {
        let n = objs.len();
        let mut dominated_by = vec![0usize; n];
        let mut dominating: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (a, dom) in dominating.iter_mut().enumerate() {
            for (b, by) in dominated_by.iter_mut().enumerate() {
                if a != b && dominates(objs[a], objs[b]) {
                    dom.push(b);
                    *by += 1;
                }
            }
        }
        let mut front: Vec<usize> = (0..n).filter(|&i| dominated_by[i] == 0).collect();
        let mut fronts = Vec::new();
        while !front.is_empty() {
            let mut next = Vec::new();
            for &a in &front {
                for &b in &dominating[a] {
                    dominated_by[b] -= 1;
                    if dominated_by[b] == 0 {
                        next.push(b);
                    }
                }
            }
            next.sort_unstable();
            fronts.push(std::mem::replace(&mut front, next));
        }
        let _ = keep;
        fronts.concat()
    }

    #[test]
    fn fast_fronts_equal_the_peeled_ones() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut s = Scratch::default();
        let vals = [0.0, -0.0, 1.0, 2.0, 2.5, 3.0, f64::NAN, f64::INFINITY, -1.0];
        for case in 0..3000 {
            let n = rng.gen_range(0..60u32) as usize;
            let objs: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    if case % 2 == 0 {
                        let (a, b) = (
                            rng.gen_range(0..vals.len() as u32),
                            rng.gen_range(0..vals.len() as u32),
                        );
                        (vals[a as usize], vals[b as usize])
                    } else {
                        (rng.gen::<f64>(), rng.gen::<f64>())
                    }
                })
                .collect();
            let want = select_survivors_quadratic(&objs, n);
            let k = fronts(&objs, &mut s);
            let rank = s.rank.clone();
            let got: Vec<usize> = (0..k)
                .flat_map(|f| (0..n).filter(|&i| rank[i] == f).collect::<Vec<_>>())
                .collect();
            assert_eq!(got, want, "{objs:?}");
            for keep in [0, n / 3, n / 2, n] {
                let fast = select_survivors(&objs, keep, &mut s);
                assert_eq!(fast.len(), keep.min(n));
            }
        }
    }
}
