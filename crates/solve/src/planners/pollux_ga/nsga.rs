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

/// What NSGA-II survival keeps: the survivors' indices, and for each its
/// front and crowding distance, which the next generation's tournaments
/// compare (pymoo's `rank` and `crowding`).
pub(super) struct Survivors {
    pub(super) keep: Vec<usize>,
    pub(super) rank: Vec<u32>,
    pub(super) crowding: Vec<f64>,
}

/// NSGA-II survival as pymoo 0.4 does it (the artifact's): whole fronts
/// in order while they fit, then the split front's members by crowding
/// distance, largest first (ties by index, where pymoo breaks them at
/// random). Every kept front's crowding is computed over the whole front.
///
/// `pymoo` false: crowding as gpuplan computed it before issue 36 (only
/// the split front's; ranges floored at 1e-12, ends infinite on every
/// objective, duplicates counted), for `pollux-ga-prev`.
pub(super) fn select_survivors(objs: &[(f64, f64)], keep: usize, pymoo: bool, s: &mut Scratch) -> Survivors {
    let n_fronts = fronts(objs, s);
    let rank = &s.rank;
    let mut out = Survivors {
        keep: Vec::with_capacity(keep),
        rank: Vec::with_capacity(keep),
        crowding: Vec::with_capacity(keep),
    };
    for k in 0..n_fronts {
        if out.keep.len() >= keep {
            break;
        }
        let front: Vec<usize> = (0..objs.len()).filter(|&i| rank[i] == k).collect();
        let split = out.keep.len() + front.len() > keep;
        let dist = if pymoo {
            crowding(objs, &front)
        } else if split {
            crowding_prev(objs, &front)
        } else {
            vec![0.0; front.len()]
        };
        let mut idx: Vec<usize> = (0..front.len()).collect();
        if split {
            idx.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(front[a].cmp(&front[b])));
            idx.truncate(keep - out.keep.len());
        }
        for i in idx {
            out.keep.push(front[i]);
            out.rank.push(k as u32);
            out.crowding.push(dist[i]);
        }
    }
    out
}

/// pymoo's crowding distance of each member of `front`: infinite for
/// fronts of up to two; otherwise, per objective over the distinct points
/// sorted, (next − previous) / (max − min), infinite at either end, and no
/// contribution from an objective on which all points are equal; averaged
/// over the objectives. A point equal to an earlier one gets 0.
fn crowding(objs: &[(f64, f64)], front: &[usize]) -> Vec<f64> {
    let n = front.len();
    if n <= 2 {
        return vec![f64::INFINITY; n];
    }
    let unique: Vec<usize> = (0..n)
        .filter(|&i| !(0..i).any(|j| objs[front[j]] == objs[front[i]]))
        .collect();
    let mut dist = vec![0.0f64; n];
    for obj in 0..2 {
        let val = |i: usize| {
            let o = objs[front[i]];
            if obj == 0 {
                o.0
            } else {
                o.1
            }
        };
        let mut idx = unique.clone();
        idx.sort_by(|&a, &b| val(a).total_cmp(&val(b)));
        let norm = val(idx[idx.len() - 1]) - val(idx[0]);
        if norm.is_nan() || norm <= 0.0 {
            continue;
        }
        for (w, &i) in idx.iter().enumerate() {
            dist[i] += if w == 0 || w + 1 == idx.len() {
                f64::INFINITY
            } else {
                (val(idx[w + 1]) - val(idx[w - 1])) / norm
            };
        }
    }
    for &i in &unique {
        dist[i] /= 2.0;
    }
    dist
}

/// The split front's crowding as gpuplan computed it before issue 36.
fn crowding_prev(objs: &[(f64, f64)], front: &[usize]) -> Vec<f64> {
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
    dist
}

/// pymoo's binary tournament between two parents (by their objectives and
/// crowding): the one that dominates, else the larger crowding distance;
/// `None` on a tie, which the caller breaks at random.
pub(super) fn tournament(a: ((f64, f64), f64), b: ((f64, f64), f64)) -> Option<bool> {
    if dominates(a.0, b.0) {
        Some(true)
    } else if dominates(b.0, a.0) {
        Some(false)
    } else if a.1 > b.1 {
        Some(true)
    } else if b.1 > a.1 {
        Some(false)
    } else {
        None
    }
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
                let fast = select_survivors(&objs, keep, case % 3 == 0, &mut s);
                assert_eq!(fast.keep.len(), keep.min(n));
                assert_eq!(fast.rank.len(), fast.keep.len());
            }
        }
    }

    #[test]
    fn crowding_is_pymoos() {
        // Values pymoo 0.4.2's calc_crowding_distance gives for F = −objs:
        // ends infinite, the middle (Δobj0/2 + Δobj1/4)/2 = 0.625 … .
        let objs = [(0.0, 4.0), (1.0, 3.0), (2.0, 1.0), (4.0, 0.0), (1.0, 3.0)];
        let d = crowding(&objs, &[0, 1, 2, 3, 4]);
        assert_eq!(d[0], f64::INFINITY);
        assert_eq!(d[3], f64::INFINITY);
        assert!((d[1] - (2.0 / 4.0 + 3.0 / 4.0) / 2.0).abs() < 1e-12);
        assert!((d[2] - (3.0 / 4.0 + 3.0 / 4.0) / 2.0).abs() < 1e-12);
        assert_eq!(d[4], 0.0, "a duplicate gets 0");
        assert_eq!(crowding(&objs, &[0, 1]), vec![f64::INFINITY; 2]);
        // An objective on which all are equal adds nothing, not infinity.
        let flat = [(1.0, 0.0), (2.0, 0.0), (3.0, 0.0)];
        assert_eq!(crowding(&flat, &[0, 1, 2])[1], 0.5);
        assert_eq!(tournament(((1.0, 1.0), 0.0), ((0.0, 0.0), 9.0)), Some(true));
        assert_eq!(tournament(((1.0, 0.0), 0.5), ((0.0, 1.0), 2.0)), Some(false));
        assert_eq!(tournament(((1.0, 0.0), 2.0), ((0.0, 1.0), 2.0)), None);
    }
}
