//! `pollux-ga`: the Pollux scheduler as published (OSDI'21 §4.2-4.3).
//!
//! A population of allocation matrices (jobs × nodes, GPUs per cell) evolves
//! for a fixed number of generations with NSGA-II survival on two
//! objectives (the power-mean fitness and cluster utility), single-cut
//! crossover over jobs, Pollux's three mutations and its repair. The final
//! pick is the individual with the best fitness. The population is kept
//! across rounds as the next round's warm start.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus, Round, RoundVariability};
use rand::distributions::Bernoulli;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::speedup::{max_gpus, SpeedupCache};
use crate::{BatchPolicy, Limits, PlanError, Planner, PlannerTraits};
use gpuplan_core::math::Libm;

/// GA size and rates; defaults are the published ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaConfig {
    pub population: usize,
    pub generations: usize,
    /// Probability that a job's row is reset to its current allocation.
    pub p_reset: f64,
    /// Probability that a job is picked for zeroing, and per cell once picked.
    pub p_zero: f64,
}

impl Default for GaConfig {
    fn default() -> Self {
        GaConfig {
            population: 100,
            generations: 100,
            p_reset: 0.1,
            p_zero: 0.1,
        }
    }
}

#[derive(Debug, Default)]
pub struct PolluxGa {
    pub config: GaConfig,
    /// Last round's final population, by job id and node count.
    last: Option<(Vec<JobId>, usize, Vec<Vec<u32>>)>,
    /// The fitness of last round's pick, for tests that hold it against
    /// the common objective's per-job values.
    fitness: f64,
    /// Tests force the one-thread or the two-thread search; `None`: by size.
    pipeline: Option<bool>,
}

impl PolluxGa {
    pub fn new(config: GaConfig) -> Self {
        PolluxGa {
            config,
            last: None,
            fitness: 0.0,
            pipeline: None,
        }
    }
}

/// (nodes used, GPUs) of one job's row.
fn shape(row: &[u32]) -> (u32, u32) {
    (row.iter().filter(|&&x| x > 0).count() as u32, row.iter().sum())
}

/// One job's memo of [`Ctx::evaluate`]'s summands, by (nodes capped at 2,
/// GPUs up to `max_gpus`, changed): (v, v^p or ln v, s / total GPUs), NaN
/// while not computed yet.
struct Terms {
    max_gpus: u32,
    cells: Vec<(f64, f64, f64)>,
}

impl Terms {
    fn new(max_gpus: u32, n_types: usize) -> Self {
        Terms {
            max_gpus,
            cells: vec![(f64::NAN, f64::NAN, f64::NAN); 6 * (max_gpus as usize + 1) * n_types.max(1)],
        }
    }

    /// The cell of (GPU type, nodes, GPUs, changed): a job's value depends on its type.
    fn slot(&self, ty: usize, nodes: u32, gpus: u32, changed: bool) -> Option<usize> {
        (gpus <= self.max_gpus).then(|| {
            ((ty * 2 + usize::from(changed)) * 3 + nodes.min(2) as usize) * (self.max_gpus as usize + 1)
                + gpus as usize
        })
    }
}

/// Everything fixed during one round's search.
struct Ctx<'a> {
    round: &'a Round,
    jobs: usize,
    nodes: usize,
    cap: Vec<u32>,
    /// Job order for repair: least attained service first.
    order: Vec<usize>,
    max_gpus: Vec<u32>,
    current: Vec<Vec<u32>>,
    pinned: Vec<bool>,
    factor: Vec<f64>,
    /// Pollux scales speedups by dominant share × nodes (= 1 / GPUs per node).
    scale: f64,
    max_nodes: u32,
    /// Each node's GPU type index ([`gpuplan_core::Cluster::type_index`]).
    node_type: Vec<usize>,
    /// The cluster's GPUs (at least 1), as the utility's denominator.
    total_gpus: f64,
    /// GPU types present (1 + the largest of `node_type`).
    n_types: usize,
    /// Per job and type, its one-GPU speedup there: repair keeps the type
    /// where the job's GPUs are worth most, not the one that holds most.
    type_speed: Vec<Vec<f64>>,
    /// Under per-GPU variability, per job: each node's slowdown for the
    /// job's class and whether L applies ([`Slowdowns`]); `None` without.
    slow: Option<Slowdowns<'a>>,
}

/// What a row of GPU counts costs in speed under per-GPU variability, by
/// core's rule ([`RoundVariability::node_slowest`] for the unnamed slots
/// the plan's counts become, [`RoundVariability::spanning`] for L): the
/// slowdown the common objective and the simulator apply to the plan.
struct Slowdowns<'a> {
    v: &'a RoundVariability,
    /// Per job, each node's slowdown for the job's class.
    node: Vec<Vec<f64>>,
    /// Per job, whether L applies across nodes (a rigid job).
    cross: Vec<bool>,
}

impl Slowdowns<'_> {
    fn new(round: &Round) -> Option<Slowdowns<'_>> {
        let v = round.variability.as_ref()?;
        let per_class: Vec<Vec<f64>> = (0..4).map(|c| v.node_slowest(c)).collect();
        Some(Slowdowns {
            v,
            node: round
                .jobs
                .iter()
                .map(|j| per_class[j.perf_class().index()].clone())
                .collect(),
            cross: round.jobs.iter().map(|j| j.pays_cross_node()).collect(),
        })
    }

    /// How many times slower job `j` runs on `row` (1 on no GPUs).
    fn factor(&self, j: usize, row: &[u32]) -> f64 {
        let (n, _) = shape(row);
        let worst = row
            .iter()
            .zip(&self.node[j])
            .filter(|(&x, _)| x > 0)
            .fold(0.0, |w: f64, (_, &s)| w.max(s));
        if worst == 0.0 {
            return 1.0;
        }
        self.v.spanning(worst, n, self.cross[j])
    }
}

/// `rand` 0.8's rejection zone for a draw below `range` (< 2^32): a 32-bit
/// word `v` is accepted iff the low half of `v × range` is at most this.
fn zone(range: u32) -> u32 {
    (range << range.leading_zeros()).wrapping_sub(1)
}

/// `order.shuffle(rng)` exactly: the same words drawn, the same swaps, so the
/// same permutation and the same stream after it (the seed's results must
/// not move), for slices shorter than 2^32. `rand` loops on each rejected
/// word; a rejection is a coin flip to the branch predictor (up to half the
/// words are rejected), and the shuffles were a quarter of a pollux-ga
/// simulation. Here a rejected word swaps an element with itself and the
/// same index is drawn again: no branch on the word. `zones[i]` is
/// [`zone`]`(i + 1)`.
fn shuffle_exact(order: &mut [usize], rng: &mut ChaCha8Rng, zones: &[u32]) {
    debug_assert!(order.len() <= zones.len() && order.len() as u64 <= u64::from(u32::MAX));
    let Some(mut i) = order.len().checked_sub(1) else {
        return;
    };
    while i > 0 {
        let m = u64::from(rng.next_u32()) * (i as u64 + 1);
        let accept = (m as u32) <= zones[i];
        let j = if accept { (m >> 32) as usize } else { i };
        order.swap(i, j);
        i -= usize::from(accept);
    }
}

/// The words [`shuffle_exact`] of `len` elements would draw, drawn and
/// dropped: the same rejections, no swaps. Most children never walk a
/// node order, so the breeder only moves the stream past them and repair
/// draws an order again ([`NodeOrders`]) when it needs one.
fn skip_shuffle(len: usize, rng: &mut ChaCha8Rng, zones: &[u32]) {
    debug_assert!(len <= zones.len());
    let Some(mut i) = len.checked_sub(1) else {
        return;
    };
    while i > 0 {
        let m = u64::from(rng.next_u32()) * (i as u64 + 1);
        i -= usize::from((m as u32) <= zones[i]);
    }
}

/// One child as [`Ctx::breed`] made it: its cells, and where in the stream
/// the node orders its repair may walk begin.
struct Kid {
    genome: Vec<u32>,
    orders_at: u128,
}

/// The node orders of one repair, drawn on demand: the u-th unpinned job's
/// order is `0..nodes` shuffled u + 1 times in a row from `at`, as the
/// breeder drew them before it only skipped them (the same plans for a
/// seed). `rng` is a second stream of the same seed, moved to `at` at the
/// first order asked for.
struct NodeOrders<'a> {
    rng: &'a mut ChaCha8Rng,
    at: u128,
    order: &'a mut Vec<usize>,
    drawn: usize,
}

impl NodeOrders<'_> {
    fn get(&mut self, u: usize, zones: &[u32]) -> &[usize] {
        if self.drawn == 0 {
            self.rng.set_word_pos(self.at);
            self.order.clear();
            self.order.extend(0..zones.len());
        }
        while self.drawn <= u {
            shuffle_exact(self.order, self.rng, zones);
            self.drawn += 1;
        }
        self.order
    }
}

/// Buffers reused across repairs, mutations and survivor selections.
#[derive(Default)]
struct Scratch {
    used: Vec<u32>,
    free_nodes: Vec<usize>,
    taken: Vec<bool>,
    /// The node order [`NodeOrders`] draws.
    nodes_order: Vec<usize>,
    /// [`zone`] of 1..=nodes, for [`shuffle_exact`].
    zones: Vec<u32>,
    per_type: Vec<u32>,
    /// [`fronts`]: each individual's front, the sort order, each front's last member.
    rank: Vec<usize>,
    sorted: Vec<usize>,
    last: Vec<usize>,
}

impl Scratch {
    /// [`zone`] of 1..=nodes in `zones`, for shuffles of `nodes` nodes.
    fn zones_for(&mut self, nodes: usize) {
        if self.zones.len() != nodes {
            self.zones.clear();
            self.zones.extend((1..=nodes as u32).map(zone));
        }
    }
}

impl Ctx<'_> {
    /// (fitness, utility): both to maximise.
    ///
    /// Each job's two summands depend only on (nodes capped at 2, GPUs,
    /// changed), so they are memoised in `terms` by that key: the very same
    /// expressions, evaluated once, summed in the same order.
    fn evaluate(&self, g: &[u32], cache: &mut [SpeedupCache], terms: &mut [Terms]) -> (f64, f64) {
        let p = self.round.params.p;
        let mut acc = 0.0;
        let mut min = f64::INFINITY;
        let mut util = 0.0;
        for j in 0..self.jobs {
            let row = &g[j * self.nodes..(j + 1) * self.nodes];
            let (n, k) = shape(row);
            let ty = row.iter().position(|&x| x > 0).map_or(0, |m| self.node_type[m]);
            let changed = row != &self.current[j][..];
            if let Some(slow) = &self.slow {
                // The value depends on which nodes, not only on the shape:
                // no memo, the speedup table is memoised already.
                let f = slow.factor(j, row);
                let s = cache[j].get(&self.round.jobs[j], ty, n, k) / f;
                let v = s * self.scale * if changed { self.factor[j] } else { 1.0 } + 1e-3;
                min = min.min(v);
                acc += if p == 0.0 { v.libm_ln() } else { v.libm_pow(p) };
                util += s / self.total_gpus;
                continue;
            }
            let t = &mut terms[j];
            let slot = t.slot(ty, n, k, changed);
            let (v, term, u) = match slot.map(|i| t.cells[i]) {
                Some(c) if !c.1.is_nan() => c,
                _ => {
                    let s = cache[j].get(&self.round.jobs[j], ty, n, k);
                    let v = s * self.scale * if changed { self.factor[j] } else { 1.0 } + 1e-3;
                    let term = if p == 0.0 { v.libm_ln() } else { v.libm_pow(p) };
                    let c = (v, term, s / self.total_gpus);
                    if let Some(i) = slot {
                        t.cells[i] = c;
                    }
                    c
                }
            };
            min = min.min(v);
            acc += term;
            util += u;
        }
        let jn = self.jobs.max(1) as f64;
        let fit = if p == f64::NEG_INFINITY {
            min
        } else if p == 0.0 {
            (acc / jn).libm_exp()
        } else {
            (acc / jn).libm_pow(1.0 / p)
        };
        (fit, util)
    }

    fn mutate(&self, g: &mut [u32], cfg: &GaConfig, rng: &mut ChaCha8Rng, s: &mut Scratch) {
        let nodes = self.nodes;
        // `gen_bool(p)` is `sample(Bernoulli::new(p).unwrap())`: the same draws.
        let reset = Bernoulli::new(cfg.p_reset).unwrap();
        let zero = Bernoulli::new(cfg.p_zero).unwrap();
        for (row, cur) in g.chunks_exact_mut(nodes).zip(&self.current) {
            if rng.sample(reset) {
                row.copy_from_slice(cur);
            }
        }
        for row in g.chunks_exact_mut(nodes) {
            if rng.sample(zero) {
                for x in row.iter_mut() {
                    if rng.sample(zero) {
                        *x = 0;
                    }
                }
            }
        }
        // Grow: nodes with free GPUs, biased toward nodes the job already uses.
        let used = &mut s.used;
        used.clear();
        used.resize(nodes, 0);
        for row in g.chunks_exact(nodes) {
            for (u, &x) in used.iter_mut().zip(row) {
                *u += x;
            }
        }
        let free_nodes = &mut s.free_nodes;
        free_nodes.clear();
        free_nodes.extend((0..nodes).filter(|&n| used[n] < self.cap[n]));
        if free_nodes.is_empty() {
            return;
        }
        let p1 = 1.0 / free_nodes.len() as f64;
        for row in g.chunks_exact_mut(nodes) {
            let mine = free_nodes.iter().filter(|&&n| row[n] > 0).count();
            for &n in free_nodes.iter() {
                let p2 = if mine > 0 && row[n] > 0 {
                    1.0 / mine as f64
                } else {
                    0.0
                };
                if rng.gen_bool((p1 + p2 - p1 * p2).min(1.0)) {
                    let cur = row[n];
                    row[n] = rng.gen_range(cur..=self.cap[n]);
                }
            }
        }
    }

    /// Repair drawing from `rng` (`replay`: a second stream of its seed).
    fn repair(&self, g: &mut [u32], rng: &mut ChaCha8Rng, replay: &mut ChaCha8Rng, s: &mut Scratch) {
        let at = rng.get_word_pos();
        self.skip_orders(rng, s);
        self.repair_with(g, at, replay, s);
    }

    /// Cells of a genome.
    fn cells(&self) -> usize {
        self.jobs * self.nodes
    }

    /// Repair's only draws, which depend on nothing but the stream: the node
    /// order each unpinned job's GPUs are capped in (one shuffle each, in job
    /// order, each starting from the last). Only the stream moves past them
    /// here ([`skip_shuffle`]); repair draws an order again from where they
    /// began when it walks one ([`NodeOrders`]). Apart from repair, the
    /// draws run ahead on one thread while another repairs.
    fn skip_orders(&self, rng: &mut ChaCha8Rng, s: &mut Scratch) {
        let nodes = self.nodes;
        s.zones_for(nodes);
        for _ in self.pinned.iter().filter(|&&p| !p) {
            skip_shuffle(nodes, rng, &s.zones);
        }
    }

    /// Pollux's repair, its node orders drawn from `at` in `replay` when
    /// walked ([`Ctx::skip_orders`] moved the breeding stream past them).
    fn repair_with(&self, g: &mut [u32], at: u128, replay: &mut ChaCha8Rng, s: &mut Scratch) {
        let nodes = self.nodes;
        s.zones_for(nodes);
        // Pinned jobs keep their allocation, whatever the genome says.
        for ((row, cur), &pinned) in g.chunks_exact_mut(nodes).zip(&self.current).zip(&self.pinned) {
            if pinned {
                row.copy_from_slice(cur);
            }
        }
        // 1. Interference: on each node only the first distributed job stays.
        if self.round.params.interference == gpuplan_core::Interference::Avoid {
            let taken = &mut s.taken;
            taken.clear();
            taken.resize(nodes, false);
            for &j in self.pinned_first() {
                let row = &mut g[j * nodes..(j + 1) * nodes];
                let distributed = shape(row).0 > 1;
                if !distributed {
                    continue;
                }
                let pinned = self.pinned[j];
                for (x, t) in row.iter_mut().zip(taken.iter_mut()) {
                    if *x > 0 {
                        if *t && !pinned {
                            *x = 0;
                        } else {
                            *t = true;
                        }
                    }
                }
            }
        }
        // 2. Per-job caps: one GPU type (the one where the job's GPUs are
        // worth most: GPUs × its one-GPU speedup there; then most GPUs, then
        // the first), GPUs (random node order) and nodes.
        let mut orders = NodeOrders {
            rng: replay,
            at,
            order: &mut s.nodes_order,
            drawn: 0,
        };
        let mut unpinned = 0;
        let n_types = self.n_types;
        for (j, ((row, &pinned), &max_gpus)) in g
            .chunks_exact_mut(nodes)
            .zip(&self.pinned)
            .zip(&self.max_gpus)
            .enumerate()
        {
            if pinned {
                continue;
            }
            if n_types > 1 {
                let per_type = &mut s.per_type;
                per_type.clear();
                per_type.resize(n_types, 0);
                for (&x, &t) in row.iter().zip(&self.node_type) {
                    per_type[t] += x;
                }
                let w = &self.type_speed[j];
                let worth = |t: usize| per_type[t] as f64 * w[t];
                let keep = (0..n_types).max_by(|&a, &b| {
                    worth(a)
                        .total_cmp(&worth(b))
                        .then(per_type[a].cmp(&per_type[b]))
                        .then(b.cmp(&a))
                });
                for (x, &t) in row.iter_mut().zip(&self.node_type) {
                    if Some(t) != keep {
                        *x = 0;
                    }
                }
            }
            let u = unpinned;
            unpinned += 1;
            // Within both caps the walk below changes nothing: skip it (most
            // rows; its branch on each cell, in random order, mispredicts).
            let (used_nodes, gpus) = row.iter().fold((0u32, 0u32), |(n, k), &x| {
                (n + u32::from(x > 0), k.saturating_add(x))
            });
            if gpus <= max_gpus && used_nodes <= self.max_nodes {
                continue;
            }
            let mut left = max_gpus;
            let mut nodes_left = self.max_nodes;
            for &n in orders.get(u, &s.zones) {
                let x = &mut row[n];
                if *x == 0 {
                    continue;
                }
                if nodes_left == 0 {
                    *x = 0;
                    continue;
                }
                *x = (*x).min(left);
                left -= *x;
                if *x > 0 {
                    nodes_left -= 1;
                }
            }
        }
        // 3. Node capacity, in priority order.
        let used = &mut s.used;
        used.clear();
        used.resize(nodes, 0);
        for &j in self.pinned_first() {
            let row = &mut g[j * nodes..(j + 1) * nodes];
            for ((x, u), &cap) in row.iter_mut().zip(used.iter_mut()).zip(&self.cap) {
                *x = (*x).min(cap - *u);
                *u += *x;
            }
        }
        // 4. Minimum size: a job below its minimum gets nothing.
        for ((row, job), &pinned) in g.chunks_exact_mut(nodes).zip(&self.round.jobs).zip(&self.pinned) {
            let k: u32 = row.iter().sum();
            if k > 0 && k < job.min_gpus && !pinned {
                row.fill(0);
            }
        }
    }

    fn pinned_first(&self) -> &[usize] {
        &self.order
    }
}

impl Ctx<'_> {
    /// One try of a generation: two parents by binary tournament on fitness,
    /// a cut between jobs, the two crossed children mutated, and the stream
    /// moved past the node orders their repairs may walk (each child keeps
    /// where they begin). Every draw of a try is here, in the stream's
    /// order; repairing, deduplicating and evaluating draw nothing (repair
    /// draws orders again on a second stream).
    fn breed(
        &self,
        pop: &Population,
        cfg: &GaConfig,
        rng: &mut ChaCha8Rng,
        s: &mut Scratch,
        spare: &mut Vec<Vec<u32>>,
    ) -> [Kid; 2] {
        let (genomes, objs) = (&pop.genomes, &pop.objs);
        let pick = |rng: &mut ChaCha8Rng| {
            // Indices drawn as u32: a usize range draws differently on
            // 32-bit wasm than on 64-bit hosts, and the browser must
            // reproduce the CLI's plans.
            let a = rng.gen_range(0..genomes.len() as u32) as usize;
            let b = rng.gen_range(0..genomes.len() as u32) as usize;
            if objs[a].0 >= objs[b].0 {
                a
            } else {
                b
            }
        };
        let (a, b) = (pick(rng), pick(rng));
        let cut = rng.gen_range(0..=self.jobs as u32) as usize * self.nodes;
        // Buffers of genomes the search let go of, or new ones.
        let mut cross = |x: &[u32], y: &[u32]| {
            let mut c = spare.pop().unwrap_or_default();
            c.clear();
            c.reserve_exact(self.cells());
            c.extend_from_slice(&x[..cut]);
            c.extend_from_slice(&y[cut..]);
            c
        };
        let kids = [cross(&genomes[a], &genomes[b]), cross(&genomes[b], &genomes[a])];
        kids.map(|mut genome| {
            self.mutate(&mut genome, cfg, rng, s);
            let orders_at = rng.get_word_pos();
            self.skip_orders(rng, s);
            Kid { genome, orders_at }
        })
    }
}

/// A generation's parents and their (fitness, utility).
struct Population {
    genomes: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    /// [`genome_hash`] of each genome, kept from when it was a child.
    hashes: Vec<u64>,
}

impl Population {
    fn new(genomes: Vec<Vec<u32>>, objs: Vec<(f64, f64)>) -> Self {
        let hashes = genomes.iter().map(|g| genome_hash(g)).collect();
        Population {
            genomes,
            objs,
            hashes,
        }
    }
}

/// The genomes a generation has seen, without copies: 64-bit hash → the
/// first genome with it (0.. the parents, then the children); equality, not
/// the hash, decides, so a collision only costs a look in `overflow`.
struct Seen {
    first: HashMap<u64, u32, BuildHasherDefault<PassHasher>>,
    overflow: Vec<(u64, u32)>,
}

/// For keys that are hashes already.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// FxHash-style over the genome's words two at a time, then murmur3's
/// finaliser so every bit depends on every word: the hash only decides
/// where a genome sits in [`Seen`], never whether it is there.
fn genome_hash(g: &[u32]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let add = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let mut pairs = g.chunks_exact(2);
    let mut h = (&mut pairs).fold(0, |h, p| add(h, u64::from(p[0]) | u64::from(p[1]) << 32));
    if let [x] = pairs.remainder() {
        h = add(h, u64::from(*x));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// One generation's children as they come: repaired, kept if new,
/// evaluated, in the order tried (as one thread would).
struct Brood<'p> {
    parents: &'p [Vec<u32>],
    seen: Seen,
    children: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    hashes: Vec<u64>,
    /// Duplicates' buffers, for [`Ctx::breed`] to reuse.
    spare: Vec<Vec<u32>>,
}

impl<'p> Brood<'p> {
    fn new(pop: &'p Population, spare: Vec<Vec<u32>>) -> Self {
        let parents = &pop.genomes[..];
        let mut b = Brood {
            parents,
            seen: Seen {
                first: HashMap::with_capacity_and_hasher(2 * parents.len() + 2, Default::default()),
                overflow: Vec::new(),
            },
            children: Vec::with_capacity(parents.len() + 1),
            objs: Vec::with_capacity(parents.len() + 1),
            hashes: Vec::with_capacity(parents.len() + 1),
            spare,
        };
        for (i, (g, &h)) in parents.iter().zip(&pop.hashes).enumerate() {
            b.insert(g, h, i as u32);
        }
        b
    }

    fn genome(&self, id: u32) -> &[u32] {
        let i = id as usize;
        match self.parents.get(i) {
            Some(g) => g,
            None => &self.children[i - self.parents.len()],
        }
    }

    /// Whether `g` is new; if so it is known as `id` from now on.
    fn insert(&mut self, g: &[u32], h: u64, id: u32) -> bool {
        use std::collections::hash_map::Entry;
        let other = match self.seen.first.entry(h) {
            Entry::Vacant(e) => {
                e.insert(id);
                return true;
            }
            Entry::Occupied(e) => *e.get(),
        };
        if self.genome(other) == g {
            return false;
        }
        if self
            .seen
            .overflow
            .iter()
            .any(|&(x, i)| x == h && self.genome(i) == g)
        {
            return false;
        }
        self.seen.overflow.push((h, id));
        true
    }

    /// Repairs a child from [`Ctx::breed`], keeps and evaluates it if new.
    fn take(
        &mut self,
        ctx: &Ctx,
        kid: Kid,
        replay: &mut ChaCha8Rng,
        cache: &mut [SpeedupCache],
        terms: &mut [Terms],
        s: &mut Scratch,
    ) {
        let Kid {
            genome: mut kid,
            orders_at,
        } = kid;
        ctx.repair_with(&mut kid, orders_at, replay, s);
        let id = (self.parents.len() + self.children.len()) as u32;
        let h = genome_hash(&kid);
        if self.insert(&kid, h, id) {
            self.objs.push(ctx.evaluate(&kid, cache, terms));
            self.children.push(kid);
            self.hashes.push(h);
        } else {
            self.spare.push(kid);
        }
    }

    fn full(&self) -> bool {
        self.children.len() >= self.parents.len()
    }

    fn done(self) -> Bred {
        Bred {
            children: Population {
                genomes: self.children,
                objs: self.objs,
                hashes: self.hashes,
            },
            spare: self.spare,
        }
    }
}

/// The population after the search, and why it stopped early, if it did.
struct Evolved {
    pop: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    stopped: Option<String>,
}

/// A generation's children, and buffers to reuse.
struct Bred {
    children: Population,
    spare: Vec<Vec<u32>>,
}

/// The generations: `breed_generation` makes each one's children and their
/// objectives (up to 4 × population tries, until population new genomes)
/// from the parents and buffers to reuse, NSGA-II keeps the population's
/// size. `deadline(gen)` says why to stop before `gen`.
fn evolve(
    cfg: &GaConfig,
    pop: Population,
    cache: &mut [SpeedupCache],
    terms: &mut [Terms],
    deadline: impl Fn(usize) -> Option<String>,
    mut breed_generation: impl FnMut(&Arc<Population>, Vec<Vec<u32>>, &mut [SpeedupCache], &mut [Terms]) -> Bred,
) -> Evolved {
    let mut scratch = Scratch::default();
    let mut pop = Arc::new(pop);
    let mut spare = Vec::new();
    let mut stopped = None;
    for gen in 0..cfg.generations {
        if let Some(why) = deadline(gen) {
            stopped = Some(why);
            break;
        }
        let bred = breed_generation(&pop, std::mem::take(&mut spare), cache, terms);
        let Population {
            mut genomes,
            mut objs,
            mut hashes,
        } = Arc::into_inner(pop).expect("a generation's breeders have let go of its parents");
        genomes.extend(bred.children.genomes);
        objs.extend(bred.children.objs);
        hashes.extend(bred.children.hashes);
        spare = bred.spare;
        let keep = select_survivors(&objs, cfg.population, &mut scratch);
        // Survivors are distinct indices: move them out instead of cloning.
        pop = Arc::new(Population {
            genomes: keep.iter().map(|&i| std::mem::take(&mut genomes[i])).collect(),
            objs: keep.iter().map(|&i| objs[i]).collect(),
            hashes: keep.iter().map(|&i| hashes[i]).collect(),
        });
        spare.extend(genomes.into_iter().filter(|g| g.capacity() > 0));
    }
    let Population { genomes, objs, .. } = Arc::into_inner(pop).expect("no breeder is left");
    Evolved {
        pop: genomes,
        objs,
        stopped,
    }
}

/// Whether to breed on a second thread (natively only).
fn pipelined(jobs: usize, nodes: usize) -> bool {
    jobs * nodes >= PIPELINE_MIN_CELLS
}

/// Rounds of fewer jobs × nodes breed on one thread, sparing a thread for
/// a search that is over in microseconds. Workload-6 takes as long from
/// 1 to 32 (37.5 against 37.7-38.4 s) and longer at 128 (41.3 s).
const PIPELINE_MIN_CELLS: usize = 32;

/// [`evolve`] with the draws on a second thread: it breeds tries ahead
/// (every draw of a try is in [`Ctx::breed`]) while this thread repairs,
/// deduplicates and evaluates them in order. When this thread has its
/// generation's children it tells the breeder which try was the last used;
/// the breeder rewinds its stream to just after that try (ChaCha's word
/// position), so the next generation draws exactly what one thread would:
/// the same plans for a seed, on two cores.
#[cfg(not(target_arch = "wasm32"))]
fn evolve_pipelined(
    ctx: &Ctx,
    cfg: &GaConfig,
    pop: Population,
    mut rng: ChaCha8Rng,
    cache: &mut [SpeedupCache],
    terms: &mut [Terms],
    deadline: impl Fn(usize) -> Option<String>,
) -> Evolved {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    // This thread repairs, drawing node orders again from a second stream.
    let mut replay = rng.clone();

    /// Hand-overs are a few µs apart and both threads are busy, so a
    /// waiting thread spins a while before it sleeps: waking a sleeper
    /// costs more than a try. Measured on workload-6 (2 cores): 2^11
    /// polls 37.4-38.0 s; 2^9 38.7 s; 2^14 44-53 s (long spins starve the
    /// other thread when the simulator's pool threads wake).
    const SPINS: u32 = 1 << 11;
    fn recv<T>(rx: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvError> {
        for _ in 0..SPINS {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            }
        }
        rx.recv()
    }
    fn send<T>(tx: &mpsc::SyncSender<T>, mut v: T) -> Result<(), mpsc::SendError<T>> {
        for _ in 0..SPINS {
            match tx.try_send(v) {
                Ok(()) => return Ok(()),
                Err(mpsc::TrySendError::Full(back)) => {
                    v = back;
                    std::hint::spin_loop();
                }
                Err(mpsc::TrySendError::Disconnected(back)) => return Err(mpsc::SendError(back)),
            }
        }
        tx.send(v)
    }
    /// A try's two children, or: the breeder has let go of the parents.
    enum Msg {
        Try([Kid; 2]),
        Done,
    }
    const RUNNING: usize = usize::MAX;
    let stop_after = AtomicUsize::new(RUNNING);
    let (gen_tx, gen_rx) = mpsc::channel::<(Arc<Population>, Vec<Vec<u32>>)>();
    let (try_tx, try_rx) = mpsc::sync_channel::<Msg>(8);
    std::thread::scope(|scope| {
        let stop_after = &stop_after;
        scope.spawn(move || {
            let mut s = Scratch::default();
            let mut after: Vec<u128> = Vec::new();
            while let Ok((pop, mut spare)) = recv(&gen_rx) {
                after.clear();
                let tries = 4 * pop.genomes.len();
                loop {
                    let stop = stop_after.load(Ordering::Acquire);
                    if stop != RUNNING {
                        if rng.get_word_pos() != after[stop] {
                            rng.set_word_pos(after[stop]);
                        }
                        break;
                    }
                    if after.len() == tries {
                        std::hint::spin_loop();
                        continue;
                    }
                    let kids = ctx.breed(&pop, cfg, &mut rng, &mut s, &mut spare);
                    after.push(rng.get_word_pos());
                    if send(&try_tx, Msg::Try(kids)).is_err() {
                        return;
                    }
                }
                drop(pop);
                if send(&try_tx, Msg::Done).is_err() {
                    return;
                }
            }
        });
        let mut s = Scratch::default();
        let evolved = evolve(cfg, pop, cache, terms, deadline, |pop, spare, cache, terms| {
            let tries = 4 * pop.genomes.len();
            stop_after.store(RUNNING, Ordering::Release);
            // The buffers go to the breeder; duplicates come back next time.
            gen_tx
                .send((Arc::clone(pop), spare))
                .expect("the breeder runs while evolve does");
            let mut brood = Brood::new(pop, Vec::new());
            let mut used = 0;
            loop {
                match recv(&try_rx).expect("the breeder answers every generation") {
                    Msg::Try(_) if used == tries || brood.full() => {}
                    Msg::Try(kids) => {
                        for kid in kids {
                            brood.take(ctx, kid, &mut replay, cache, terms, &mut s);
                        }
                        used += 1;
                        if used == tries || brood.full() {
                            stop_after.store(used - 1, Ordering::Release);
                        }
                    }
                    Msg::Done => return brood.done(),
                }
            }
        });
        drop(gen_tx);
        evolved
    })
}

#[cfg(target_arch = "wasm32")]
fn evolve_pipelined(
    _: &Ctx,
    _: &GaConfig,
    _: Population,
    _: ChaCha8Rng,
    _: &mut [SpeedupCache],
    _: &mut [Terms],
    _: impl Fn(usize) -> Option<String>,
) -> Evolved {
    unreachable!("pipelined() is false on wasm32")
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
fn select_survivors(objs: &[(f64, f64)], keep: usize, s: &mut Scratch) -> Vec<usize> {
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

impl Planner for PolluxGa {
    fn name(&self) -> &str {
        "pollux-ga"
    }

    fn traits(&self) -> PlannerTraits {
        PlannerTraits {
            batch: BatchPolicy::Adaptive,
            needs_oracle: false,
            honours_interference: true,
        }
    }

    fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
        let t0 = web_time::Instant::now();
        let jobs = round.jobs.len();
        let nodes = round.cluster.num_nodes();
        let mut plan = Plan::new(self.name(), PlanStatus::Feasible);
        if jobs == 0 || nodes == 0 {
            return Ok(plan);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(limits.seed);
        // Repair draws its node orders again from here (see `NodeOrders`).
        let mut replay = rng.clone();
        let current: Vec<Vec<u32>> = round
            .jobs
            .iter()
            .map(|j| {
                let mut row = vec![0u32; nodes];
                for (n, k) in j.current().per_node() {
                    if let Some(c) = row.get_mut(n.0 as usize) {
                        *c = k;
                    }
                }
                row
            })
            .collect();
        let mut order: Vec<usize> = (0..jobs).collect();
        let pinned = |j: &gpuplan_core::RoundJob| !j.preemptible && !j.current().is_empty();
        order.sort_by(|&a, &b| {
            let (x, y) = (&round.jobs[a], &round.jobs[b]);
            // Pinned jobs first so repair never takes their GPUs; then least attained service.
            (!pinned(x))
                .cmp(&!pinned(y))
                .then(x.state.attained_gpu_s.total_cmp(&y.state.attained_gpu_s))
                .then(x.submit_s.total_cmp(&y.submit_s))
                .then(x.id.cmp(&y.id))
        });
        let gpn = round.cluster.max_gpus_per_node().max(1);
        let max_g: Vec<u32> = round.jobs.iter().map(|j| max_gpus(j, round)).collect();
        let node_type = round.cluster.type_index();
        let ctx = Ctx {
            round,
            jobs,
            nodes,
            cap: round.cluster.nodes.iter().map(|n| n.gpus).collect(),
            order,
            max_gpus: max_g.clone(),
            current: current.clone(),
            pinned: round.jobs.iter().map(pinned).collect(),
            factor: round
                .jobs
                .iter()
                .map(|j| restart_factor(j, &round.params))
                .collect(),
            scale: 1.0 / gpn as f64,
            max_nodes: round.params.max_nodes_per_job,
            total_gpus: round.cluster.total_gpus().max(1) as f64,
            n_types: node_type.iter().max().map_or(1, |m| m + 1),
            node_type,
            type_speed: Vec::new(),
            slow: Slowdowns::new(round),
        };
        let mut cache: Vec<SpeedupCache> = max_g
            .iter()
            .map(|&m| SpeedupCache::new(round, m.min(round.params.max_nodes_per_job).min(nodes as u32), m))
            .collect();
        let mut ctx = ctx;
        if ctx.n_types > 1 {
            ctx.type_speed = round
                .jobs
                .iter()
                .zip(cache.iter_mut())
                .map(|(j, c)| (0..ctx.n_types).map(|t| c.get(j, t, 1, 1)).collect())
                .collect();
        }
        let ctx = ctx;
        let mut terms: Vec<Terms> = max_g.iter().map(|&m| Terms::new(m, ctx.n_types)).collect();
        // Warm start: last population remapped to this round's jobs and nodes.
        let flat_current: Vec<u32> = current.concat();
        let mut pop: Vec<Vec<u32>> = match &self.last {
            Some((ids, n_last, last_pop)) if *n_last == nodes => {
                let pos: HashMap<JobId, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
                last_pop
                    .iter()
                    .map(|g| {
                        let mut out = vec![0u32; jobs * nodes];
                        for (j, job) in round.jobs.iter().enumerate() {
                            if let Some(&pj) = pos.get(&job.id) {
                                out[j * nodes..(j + 1) * nodes]
                                    .copy_from_slice(&g[pj * nodes..(pj + 1) * nodes]);
                            }
                        }
                        out
                    })
                    .collect()
            }
            _ => vec![flat_current.clone(); self.config.population],
        };
        pop.truncate(self.config.population);
        while pop.len() < self.config.population {
            pop.push(flat_current.clone());
        }
        let mut scratch = Scratch::default();
        for g in pop.iter_mut() {
            ctx.repair(g, &mut rng, &mut replay, &mut scratch);
        }
        let objs: Vec<(f64, f64)> = pop
            .iter()
            .map(|g| ctx.evaluate(g, &mut cache, &mut terms))
            .collect();
        // The time limit stops the search between generations (a generation
        // of 3000 jobs takes ~0.1 s); the best individual so far is the plan.
        let deadline = |gen: usize| {
            (t0.elapsed().as_secs_f64() > limits.time_limit_s).then(|| {
                format!(
                    "time limit reached after {gen} of {} generations",
                    self.config.generations
                )
            })
        };
        let cfg = &self.config;
        let pop = Population::new(pop, objs);
        let two_threads = self.pipeline.unwrap_or_else(|| pipelined(jobs, nodes)) && !pop.genomes.is_empty();
        let evolved = if cfg!(not(target_arch = "wasm32")) && two_threads {
            evolve_pipelined(&ctx, cfg, pop, rng, &mut cache, &mut terms, deadline)
        } else {
            evolve(
                cfg,
                pop,
                &mut cache,
                &mut terms,
                deadline,
                |pop, spare, cache, terms| {
                    let mut brood = Brood::new(pop, spare);
                    for _ in 0..4 * pop.genomes.len() {
                        let kids = ctx.breed(pop, cfg, &mut rng, &mut scratch, &mut brood.spare);
                        for kid in kids {
                            brood.take(&ctx, kid, &mut replay, cache, terms, &mut scratch);
                        }
                        if brood.full() {
                            break;
                        }
                    }
                    brood.done()
                },
            )
        };
        let (pop, objs) = (evolved.pop, evolved.objs);
        plan.reason = evolved.stopped;
        let best = (0..pop.len())
            .max_by(|&a, &b| objs[a].0.total_cmp(&objs[b].0).then(b.cmp(&a)))
            .unwrap_or(0);
        for (j, job) in round.jobs.iter().enumerate() {
            let counts: Vec<(NodeId, u32)> = (0..nodes)
                .filter(|&n| pop[best][j * nodes + n] > 0)
                .map(|n| (NodeId(n as u32), pop[best][j * nodes + n]))
                .collect();
            if !counts.is_empty() {
                plan.allocations.insert(job.id, Allocation::from_counts(&counts));
            }
        }
        self.fitness = objs[best].0;
        self.last = Some((round.jobs.iter().map(|j| j.id).collect(), nodes, pop));
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{job, model, round, running};
    use gpuplan_core::{objective, validate, Interference};

    /// The GA's results for a seed must not move: [`shuffle_exact`] draws
    /// the very words, and makes the very swaps, of `rand`'s shuffle;
    /// [`skip_shuffle`] draws the very words; [`NodeOrders`] gives the u-th
    /// of a run of shuffles, asked for out of turn.
    #[test]
    fn exact_shuffle_is_rands_shuffle() {
        use rand::seq::SliceRandom;
        for len in 0..70usize {
            let zones: Vec<u32> = (1..=len as u32).map(zone).collect();
            for seed in 0..40u64 {
                let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(seed), ChaCha8Rng::seed_from_u64(seed));
                // Start mid-block, as repair does after other draws.
                for _ in 0..seed % 7 {
                    a.next_u32();
                    b.next_u32();
                }
                let (mut x, mut y): (Vec<usize>, Vec<usize>) = ((0..len).collect(), (0..len).collect());
                // The breeder skips the orders; repair draws them again from there.
                let mut c = b.clone();
                let at = c.get_word_pos();
                let (mut replay, mut order) = (ChaCha8Rng::seed_from_u64(seed), Vec::new());
                let mut lazy = NodeOrders {
                    rng: &mut replay,
                    at,
                    order: &mut order,
                    drawn: 0,
                };
                for u in 0..5 {
                    x.shuffle(&mut a);
                    shuffle_exact(&mut y, &mut b, &zones);
                    skip_shuffle(len, &mut c, &zones);
                    assert_eq!(x, y, "len {len}, seed {seed}");
                    assert_eq!(a.get_word_pos(), b.get_word_pos(), "len {len}, seed {seed}");
                    assert_eq!(a.get_word_pos(), c.get_word_pos(), "len {len}, seed {seed}");
                    if u % 2 == 1 || len < 3 {
                        assert_eq!(lazy.get(u, &zones), &x[..], "len {len}, seed {seed}, order {u}");
                    }
                }
            }
        }
    }

    fn small_round() -> Round {
        let mut jobs = vec![
            running(job(0, 2, 0.0), &[(0, 2)]),
            job(1, 1, 10.0),
            job(2, 4, 20.0),
            job(3, 1, 30.0),
        ];
        for j in jobs.iter_mut().take(3) {
            j.model = Some(model());
        }
        jobs[1].state.max_gpus_used = 2;
        round("2x4", jobs, Interference::Avoid)
    }

    #[test]
    fn plans_are_valid_deterministic_and_use_the_cluster() {
        let r = small_round();
        let lim = Limits {
            seed: 7,
            ..Default::default()
        };
        let small = GaConfig {
            population: 30,
            generations: 30,
            ..Default::default()
        };
        let a = PolluxGa::new(small).plan(&r, &lim).unwrap();
        let b = PolluxGa::new(small).plan(&r, &lim).unwrap();
        validate(&r, &a).unwrap();
        assert_eq!(a.allocations, b.allocations, "same seed, same plan");
        // Four jobs and 8 GPUs: the harmonic mean punishes starving anyone.
        for j in &r.jobs {
            assert!(!a.get(j.id).is_empty(), "{:?} starved: {:?}", j.id, a.allocations);
        }
        // Better than leaving everything as it is.
        let mut idle = a.clone();
        idle.allocations
            .retain(|id, _| r.jobs.iter().any(|j| j.id == *id && !j.current().is_empty()));
        assert!(objective::evaluate(&r, &a) > objective::evaluate(&r, &idle));
    }

    /// The two-thread search is the one-thread search, draw for draw: the
    /// same plans, fitness and final population over consecutive rounds
    /// (each warm-started from the last), with pinned jobs, both
    /// interference rules, several seeds and populations small enough that
    /// generations often run out of tries.
    #[test]
    fn two_threads_search_as_one_does() {
        let rounds = |interference| {
            (0..3)
                .map(|k| {
                    let mut jobs: Vec<gpuplan_core::RoundJob> = (0..9)
                        .map(|i| {
                            let mut j = job(i, 1 + i % 4, 10.0 * f64::from(i));
                            j.model = Some(model());
                            j.state.max_gpus_used = 1 + (i + k) % 5;
                            j
                        })
                        .collect();
                    jobs[0] = running(jobs[0].clone(), &[(0, 2), (1, 2)]);
                    jobs[1] = running(jobs[1].clone(), &[(2, 3)]);
                    jobs[2] = running(jobs[2].clone(), &[(3, 1)]);
                    jobs[2].preemptible = false;
                    jobs.truncate(6 + k as usize);
                    round("6x4", jobs, interference)
                })
                .collect::<Vec<_>>()
        };
        for interference in [Interference::Avoid, Interference::Allow] {
            for (seed, population) in [(0, 12), (3, 30), (11, 5)] {
                let cfg = GaConfig {
                    population,
                    generations: 25,
                    ..Default::default()
                };
                let lim = Limits {
                    seed,
                    time_limit_s: 1e9,
                    ..Default::default()
                };
                let (mut one, mut two) = (PolluxGa::new(cfg), PolluxGa::new(cfg));
                one.pipeline = Some(false);
                two.pipeline = Some(true);
                for r in rounds(interference) {
                    let (a, b) = (one.plan(&r, &lim).unwrap(), two.plan(&r, &lim).unwrap());
                    validate(&r, &b).unwrap();
                    assert_eq!(
                        a.allocations, b.allocations,
                        "seed {seed}, population {population}"
                    );
                    assert_eq!(one.fitness.to_bits(), two.fitness.to_bits());
                    assert_eq!(one.last, two.last);
                }
            }
        }
    }

    /// Under per-GPU variability the GA's fitness of its pick is Pollux's
    /// fitness over the common objective's per-job values: each job's
    /// speedup divided by core's slowdown for the plan's GPUs
    /// ([`Round::variability_factor`]), scaled and restart-charged as
    /// Pollux does. Node 0 is 1.5× slower for class A and node 1 has one
    /// GPU 1.2× slower, so which nodes a job gets matters.
    #[test]
    fn fitness_agrees_with_core_under_variability() {
        let mut r = small_round();
        let mut node1 = vec![[1.0; 4]; 4];
        node1[3] = [1.2, 1.1, 1.0, 1.0];
        r.variability = Some(RoundVariability {
            per_node: vec![vec![[1.5, 1.0, 1.3, 1.0]; 4], node1],
            cross_node_factor: 1.7,
        });
        r.jobs[2].class = Some(gpuplan_core::PerfClass::ALL[2]);
        let mut ga = PolluxGa::new(GaConfig {
            population: 30,
            generations: 30,
            ..Default::default()
        });
        let plan = ga.plan(&r, &Limits::default()).unwrap();
        validate(&r, &plan).unwrap();
        let fair = objective::fair_share(&r);
        let p = r.params.p;
        let vals: Vec<f64> = r
            .jobs
            .iter()
            .map(|j| {
                let a = plan.get(j.id);
                let s = objective::speedup(j, None, a.num_nodes(), a.num_gpus(), fair);
                let changed = a.per_node() != j.current().per_node();
                let restart = if changed {
                    restart_factor(j, &r.params)
                } else {
                    1.0
                };
                s / r.variability_factor(j, &a) * 0.25 * restart + 1e-3
            })
            .collect();
        let n = vals.len() as f64;
        let want = if p == 0.0 {
            (vals.iter().map(|v| v.libm_ln()).sum::<f64>() / n).libm_exp()
        } else {
            (vals.iter().map(|v| v.libm_pow(p)).sum::<f64>() / n).libm_pow(1.0 / p)
        };
        assert!(
            (ga.fitness - want).abs() < 1e-12 * want,
            "{} vs {want}",
            ga.fitness
        );
        // Some job's value is really changed by the slow GPUs.
        assert!(r
            .jobs
            .iter()
            .any(|j| r.variability_factor(j, &plan.get(j.id)) > 1.0));
    }

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

    #[test]
    fn pinned_jobs_keep_their_gpus_and_interference_is_avoided() {
        let mut r = small_round();
        r.jobs[0].preemptible = false;
        r.jobs[0].state.allocation = gpuplan_core::Allocation::from_counts(&[(NodeId(0), 1), (NodeId(1), 1)]);
        let mut ga = PolluxGa::new(GaConfig {
            population: 20,
            generations: 20,
            ..Default::default()
        });
        for seed in 0..5 {
            let p = ga
                .plan(
                    &r,
                    &Limits {
                        seed,
                        ..Default::default()
                    },
                )
                .unwrap();
            validate(&r, &p).unwrap();
            assert_eq!(p.get(r.jobs[0].id), r.jobs[0].state.allocation);
        }
    }
}
