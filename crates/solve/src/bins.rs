//! Variability bins: GPUs grouped by speed, per application class.
//!
//! PAL treats GPUs whose slowdowns are close as equal, so that locality can
//! decide between them; only a real speed difference outweighs packing. It
//! bins each class's slowdowns by k-means with separate bins for outliers.
//! Its artifact always ends with K = 2 plus one bin per outlier (the
//! silhouette search returns inside its first iteration), which lumps a
//! 6%-slower GPU with the median ones.
//!
//! Here K is chosen by what a bin is for: the smallest K (up to
//! [`MAX_BINS`]) whose k-means bins each span at most `tolerance` (default
//! [`DEFAULT_TOLERANCE`], 2% slowdown), so treating a bin as one speed is
//! never wrong by more than that. Outliers (slower than the median by more
//! than three robust standard deviations and by more than the tolerance)
//! are binned apart by the same rule, so a cluster of slow GPUs shares one
//! outlier bin and a lone 2× GPU gets its own. Everything is deterministic:
//! k-means starts from the largest gaps of the sorted values.

use gpuplan_core::{GpuId, NodeId, Round, RoundVariability};

/// Most bins per class, outlier bins not counted.
pub const MAX_BINS: usize = 8;

/// Widest spread of slowdowns one bin may hold: 2%, about a third of the
/// median-to-p95 spread of PAL's most variable class (ResNet on V100s).
pub const DEFAULT_TOLERANCE: f64 = 0.02;

/// One bin: the GPUs of a class whose slowdowns lie in `lo..=hi`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    /// Mean slowdown of its GPUs: the speed placements assume for them.
    pub center: f64,
    pub lo: f64,
    pub hi: f64,
    pub members: usize,
    /// Whether its GPUs are outliers (far slower than the rest).
    pub outlier: bool,
}

/// Bins of one set of values, sorted by `center`, and each value's bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Binned {
    pub bins: Vec<Bin>,
    /// `of[i]`: the bin of `values[i]`.
    pub of: Vec<usize>,
}

/// Bin `values` (slowdowns; finite) as the module describes.
pub fn bin_values(values: &[f64], tolerance: f64) -> Binned {
    if values.is_empty() {
        return Binned {
            bins: Vec::new(),
            of: Vec::new(),
        };
    }
    let median = median(values.to_vec());
    let mad = median_abs_dev(values, median);
    let cut = median + (3.0 * 1.4826 * mad).max(tolerance);
    let (outliers, inliers): (Vec<usize>, Vec<usize>) = (0..values.len()).partition(|&i| values[i] > cut);
    let mut bins = Vec::new();
    let mut of = vec![0usize; values.len()];
    for (group, outlier) in [(inliers, false), (outliers, true)] {
        if group.is_empty() {
            continue;
        }
        let mut idx = group;
        idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
        let sorted: Vec<f64> = idx.iter().map(|&i| values[i]).collect();
        let ranges = smallest_k_within(&sorted, tolerance);
        for (lo, hi) in ranges {
            let part = &sorted[lo..hi];
            for &i in &idx[lo..hi] {
                of[i] = bins.len();
            }
            bins.push(Bin {
                center: part.iter().sum::<f64>() / part.len() as f64,
                lo: part[0],
                hi: part[part.len() - 1],
                members: part.len(),
                outlier,
            });
        }
    }
    // Sorted by center (outliers are slower, so already last); keep `of`
    // pointing at the same bins.
    let mut order: Vec<usize> = (0..bins.len()).collect();
    order.sort_by(|&a, &b| bins[a].center.total_cmp(&bins[b].center).then(a.cmp(&b)));
    let mut rank = vec![0; bins.len()];
    for (r, &b) in order.iter().enumerate() {
        rank[b] = r;
    }
    let bins = order.iter().map(|&b| bins[b].clone()).collect();
    Binned {
        bins,
        of: of.into_iter().map(|b| rank[b]).collect(),
    }
}

/// The k-means partition (as index ranges of `sorted`) for the smallest K
/// whose every bin spans at most `tolerance`; [`MAX_BINS`] (or one bin per
/// distinct value, if fewer) when none does.
fn smallest_k_within(sorted: &[f64], tolerance: f64) -> Vec<(usize, usize)> {
    let distinct = 1 + sorted.windows(2).filter(|w| w[1] > w[0]).count();
    let most = MAX_BINS.min(distinct);
    let mut last = Vec::new();
    for k in 1..=most {
        last = kmeans_sorted(sorted, k);
        if last
            .iter()
            .all(|&(lo, hi)| sorted[hi - 1] - sorted[lo] <= tolerance + 1e-12)
        {
            break;
        }
    }
    last
}

/// 1-D k-means on sorted values, deterministic: Lloyd's iterations from
/// two starts, the partition at the `k - 1` largest gaps (right for
/// well-separated groups) and equal-count quantiles (right for a smooth
/// spread, where gaps are noise), keeping the one with the smaller sum of
/// squares. In one dimension each cluster is a contiguous run of the
/// sorted values, so a partition is its cut positions.
pub fn kmeans_sorted(sorted: &[f64], k: usize) -> Vec<(usize, usize)> {
    let n = sorted.len();
    let k = k.clamp(1, n.max(1));
    let mut gaps: Vec<usize> = (1..n).collect();
    gaps.sort_by(|&a, &b| {
        (sorted[b] - sorted[b - 1])
            .total_cmp(&(sorted[a] - sorted[a - 1]))
            .then(a.cmp(&b))
    });
    let mut by_gap: Vec<usize> = gaps.into_iter().take(k - 1).collect();
    by_gap.sort_unstable();
    let by_count: Vec<usize> = (1..k).map(|c| c * n / k).collect();
    let a = to_ranges(&lloyd(sorted, by_gap), n);
    let b = to_ranges(&lloyd(sorted, by_count), n);
    if sse(sorted, &b) < sse(sorted, &a) - 1e-15 {
        b
    } else {
        a
    }
}

/// Lloyd's iterations from `cuts` until nothing moves (at most 100).
fn lloyd(sorted: &[f64], mut cuts: Vec<usize>) -> Vec<usize> {
    let n = sorted.len();
    for _ in 0..100 {
        let centers: Vec<f64> = to_ranges(&cuts, n).iter().map(|&r| mean(sorted, r)).collect();
        // Each cut moves to the first value nearer the next center, kept
        // strictly increasing with room left so no cluster empties.
        let mut next: Vec<usize> = Vec::with_capacity(cuts.len());
        for (c, w) in centers.windows(2).enumerate() {
            let mid = (w[0] + w[1]) / 2.0;
            let at = sorted.partition_point(|&v| v <= mid);
            let lo = next.last().map_or(1, |&p| p + 1);
            let hi = n - (cuts.len() - c);
            next.push(at.clamp(lo, hi));
        }
        if next == cuts {
            break;
        }
        cuts = next;
    }
    cuts
}

fn mean(sorted: &[f64], (lo, hi): (usize, usize)) -> f64 {
    sorted[lo..hi].iter().sum::<f64>() / (hi - lo) as f64
}

fn sse(sorted: &[f64], ranges: &[(usize, usize)]) -> f64 {
    ranges
        .iter()
        .map(|&r| {
            let m = mean(sorted, r);
            sorted[r.0..r.1].iter().map(|v| (v - m).powi(2)).sum::<f64>()
        })
        .sum()
}

fn to_ranges(cuts: &[usize], n: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut lo = 0;
    for &c in cuts {
        out.push((lo, c));
        lo = c;
    }
    out.push((lo, n));
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_abs_dev(values: &[f64], m: f64) -> f64 {
    median(values.iter().map(|v| (v - m).abs()).collect())
}

/// A round's GPUs binned per class: what variability-aware placements read.
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    /// Per class: the bins, and per GPU (nodes laid end to end) its bin.
    pub classes: [Binned; 4],
    /// Index of each node's first GPU in the flat per-GPU lists.
    offset: Vec<usize>,
}

impl Bins {
    /// Bin every GPU of the round's variability, per class.
    pub fn new(v: &RoundVariability, tolerance: f64) -> Bins {
        let mut offset = Vec::with_capacity(v.per_node.len());
        let mut total = 0;
        for n in &v.per_node {
            offset.push(total);
            total += n.len();
        }
        let classes = std::array::from_fn(|c| {
            let values: Vec<f64> = v.per_node.iter().flatten().map(|g| g[c]).collect();
            bin_values(&values, tolerance)
        });
        Bins { classes, offset }
    }

    /// The bin of GPU `g` for `class`; `None` for an unnamed slot or a GPU
    /// the variability does not cover.
    pub fn bin(&self, g: GpuId, class: usize) -> Option<&Bin> {
        if !g.is_bound() {
            return None;
        }
        let b = &self.classes[class];
        let i = self.offset.get(g.node.0 as usize)? + g.index as usize;
        let next = self
            .offset
            .get(g.node.0 as usize + 1)
            .copied()
            .unwrap_or(b.of.len());
        if i >= next {
            return None;
        }
        b.bins.get(*b.of.get(i)?)
    }

    /// The slowdown placements assume for `g`: its bin's center (1 where
    /// unknown).
    pub fn speed(&self, g: GpuId, class: usize) -> f64 {
        self.bin(g, class).map_or(1.0, |b| b.center)
    }
}

/// Per node, the slowdown a MIP model assumes for each application class
/// among the round's jobs (1 for an absent class): its slowest GPU's, the
/// rule core applies to an unnamed slot
/// ([`gpuplan_core::RoundVariability::slowdown`]), raised to the top of
/// that GPU's bin ([`Bins`]) so that nodes binned together share one
/// value and no value is optimistic. The formulations decide GPU counts
/// per node, not which GPUs, so only the slowest GPU's speed holds for
/// whatever GPUs the binder names.
pub fn node_speeds(round: &Round, v: &RoundVariability) -> Vec<[f64; 4]> {
    let bins = Bins::new(v, DEFAULT_TOLERANCE);
    let mut present = [false; 4];
    for j in &round.jobs {
        present[j.perf_class().index()] = true;
    }
    (0..round.cluster.nodes.len())
        .map(|n| {
            std::array::from_fn(|c| {
                let gpus = v.per_node.get(n).map_or(&[][..], |g| g.as_slice());
                let slowest = (0..gpus.len()).max_by(|&a, &b| gpus[a][c].total_cmp(&gpus[b][c]));
                match slowest.filter(|_| present[c]) {
                    Some(i) => bins
                        .bin(GpuId::new(NodeId(n as u32), i as u32), c)
                        .map_or(gpus[i][c], |b| b.hi.max(gpus[i][c])),
                    None => 1.0,
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn centers(b: &Binned) -> Vec<f64> {
        b.bins
            .iter()
            .map(|b| (b.center * 1000.0).round() / 1000.0)
            .collect()
    }

    /// Three obvious groups are found as three bins, whatever the order.
    #[test]
    fn obvious_clusters_are_found() {
        let v = [
            1.0, 1.06, 0.99, 1.12, 1.01, 1.05, 1.0, 1.07, 1.11, 1.13, 0.995, 1.0,
        ];
        let b = bin_values(&v, 0.02);
        assert_eq!(b.bins.len(), 3, "{:?}", b.bins);
        assert_eq!(centers(&b), vec![0.999, 1.06, 1.12]);
        assert!(b.bins.iter().all(|b| !b.outlier && b.hi - b.lo <= 0.02 + 1e-9));
        assert_eq!(b.of[1], 1);
        assert_eq!(b.of[3], 2);
        assert_eq!(b.of[2], 0);
    }

    /// K is the smallest whose bins all span at most the tolerance: one
    /// bin for a tight set, more as the tolerance shrinks.
    #[test]
    fn k_is_the_smallest_within_tolerance() {
        let v: Vec<f64> = (0..40).map(|i| 1.0 + 0.001 * f64::from(i)).collect();
        assert_eq!(bin_values(&v, 0.05).bins.len(), 1);
        assert_eq!(bin_values(&v, 0.02).bins.len(), 2);
        assert_eq!(bin_values(&v, 0.01).bins.len(), 4);
        // Never more than MAX_BINS, however tight the tolerance.
        assert_eq!(bin_values(&v, 1e-6).bins.len(), MAX_BINS);
        // All equal: one bin.
        assert_eq!(bin_values(&[1.0; 7], 0.0).bins.len(), 1);
    }

    /// Outliers get bins of their own, apart from the inliers' k-means:
    /// two close slow GPUs share one outlier bin, a far one has its own.
    #[test]
    fn outliers_are_isolated() {
        let mut v = vec![1.0; 30];
        for (i, x) in v.iter_mut().enumerate() {
            *x += 0.0005 * (i % 7) as f64;
        }
        v.extend([1.40, 1.41, 2.2]);
        let b = bin_values(&v, 0.02);
        let out: Vec<&Bin> = b.bins.iter().filter(|b| b.outlier).collect();
        assert_eq!(out.len(), 2, "{:?}", b.bins);
        assert_eq!((out[0].members, out[1].members), (2, 1));
        assert_eq!(b.bins.iter().filter(|b| !b.outlier).count(), 1);
        assert_eq!(b.of[32], b.bins.len() - 1);
    }

    #[test]
    fn deterministic_and_per_gpu() {
        let v = RoundVariability {
            per_node: vec![
                vec![[1.0, 1.0, 1.0, 1.0], [1.1, 1.0, 1.0, 1.0]],
                vec![[1.0, 1.0, 1.0, 1.0], [1.1, 1.0, 1.0, 1.0]],
            ],
            cross_node_factor: 1.7,
        };
        let b = Bins::new(&v, 0.02);
        assert_eq!(b, Bins::new(&v, 0.02));
        let g = |n, i| GpuId::new(NodeId(n), i);
        assert!((b.speed(g(1, 1), 0) - 1.1).abs() < 1e-12);
        assert_eq!(b.speed(g(1, 0), 0), 1.0);
        assert_eq!(b.classes[1].bins.len(), 1);
        assert!(b.bin(g(2, 0), 0).is_none() && b.bin(g(0, 2), 0).is_none());
        assert!(b.bin(GpuId::any_on(NodeId(0)), 0).is_none());
    }

    /// Lloyd's iterations move a cut the largest gap got wrong: with one
    /// wide-spaced pair and a dense run, k-means balances the squares.
    #[test]
    fn kmeans_refines_the_gap_start() {
        let v = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 2.0, 2.9];
        let r = kmeans_sorted(&v, 2);
        assert_eq!(r, vec![(0, 8), (8, 10)]);
        let r3 = kmeans_sorted(&v, 3);
        assert_eq!(r3.len(), 3);
        assert_eq!(kmeans_sorted(&[1.0], 3), vec![(0, 1)]);
    }
}
