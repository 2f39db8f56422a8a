//! `pollux-ga`: the Pollux scheduler as published (OSDI'21 §4.2-4.3).
//!
//! A population of allocation matrices (jobs × nodes, GPUs per cell) evolves
//! for a fixed number of generations with NSGA-II survival on two
//! objectives (the power-mean fitness and cluster utility), single-cut
//! crossover over jobs, Pollux's three mutations and its repair. The final
//! pick is the individual with the best fitness. The population is kept
//! across rounds as the next round's warm start.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus, Round, RoundVariability};
use rand::distributions::Bernoulli;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
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
}

impl PolluxGa {
    pub fn new(config: GaConfig) -> Self {
        PolluxGa {
            config,
            last: None,
            fitness: 0.0,
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

/// Buffers reused across repairs, mutations and survivor selections.
#[derive(Default)]
struct Scratch {
    used: Vec<u32>,
    free_nodes: Vec<usize>,
    taken: Vec<bool>,
    nodes_order: Vec<usize>,
    per_type: Vec<u32>,
    /// [`fronts`]: each individual's front, the sort order, each front's last member.
    rank: Vec<usize>,
    sorted: Vec<usize>,
    last: Vec<usize>,
}

/// FxHash-style hasher for the generation's set of genomes: hashing only
/// decides where a genome sits in the set, never whether it is there (that
/// is equality), so the set answers as with the default hasher, faster.
#[derive(Default)]
struct GenomeHasher(u64);

impl GenomeHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for GenomeHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // murmur3's finaliser, so every bit of the hash depends on every word.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type GenomeSet = HashSet<Vec<u32>, BuildHasherDefault<GenomeHasher>>;

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

    fn repair(&self, g: &mut [u32], rng: &mut ChaCha8Rng, s: &mut Scratch) {
        let nodes = self.nodes;
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
        let nodes_order = &mut s.nodes_order;
        nodes_order.clear();
        nodes_order.extend(0..nodes);
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
            nodes_order.shuffle(rng);
            let mut left = max_gpus;
            let mut nodes_left = self.max_nodes;
            for &n in nodes_order.iter() {
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
            ctx.repair(g, &mut rng, &mut scratch);
        }
        let mut objs: Vec<(f64, f64)> = pop
            .iter()
            .map(|g| ctx.evaluate(g, &mut cache, &mut terms))
            .collect();
        // The time limit stops the search between generations (a generation
        // of 3000 jobs takes ~0.1 s); the best individual so far is the plan.
        for gen in 0..self.config.generations {
            if t0.elapsed().as_secs_f64() > limits.time_limit_s {
                plan.reason = Some(format!(
                    "time limit reached after {gen} of {} generations",
                    self.config.generations
                ));
                break;
            }
            // Sized for parents and children at once: no rehash as it fills.
            let mut seen = GenomeSet::with_capacity_and_hasher(2 * pop.len() + 2, Default::default());
            seen.extend(pop.iter().cloned());
            let mut children = Vec::with_capacity(pop.len());
            let mut tries = 0;
            while children.len() < pop.len() && tries < 4 * pop.len() {
                tries += 1;
                let pick = |rng: &mut ChaCha8Rng| {
                    // Indices drawn as u32: a usize range draws differently on
                    // 32-bit wasm than on 64-bit hosts, and the browser must
                    // reproduce the CLI's plans.
                    let a = rng.gen_range(0..pop.len() as u32) as usize;
                    let b = rng.gen_range(0..pop.len() as u32) as usize;
                    if objs[a].0 >= objs[b].0 {
                        a
                    } else {
                        b
                    }
                };
                let (a, b) = (pick(&mut rng), pick(&mut rng));
                let cut = rng.gen_range(0..=jobs as u32) as usize * nodes;
                let cross = |x: &[u32], y: &[u32]| {
                    let mut c = Vec::with_capacity(jobs * nodes);
                    c.extend_from_slice(&x[..cut]);
                    c.extend_from_slice(&y[cut..]);
                    c
                };
                let (c1, c2) = (cross(&pop[a], &pop[b]), cross(&pop[b], &pop[a]));
                for mut c in [c1, c2] {
                    ctx.mutate(&mut c, &self.config, &mut rng, &mut scratch);
                    ctx.repair(&mut c, &mut rng, &mut scratch);
                    if seen.insert(c.clone()) {
                        children.push(c);
                    }
                }
            }
            let child_objs: Vec<(f64, f64)> = children
                .iter()
                .map(|g| ctx.evaluate(g, &mut cache, &mut terms))
                .collect();
            pop.extend(children);
            objs.extend(child_objs);
            let keep = select_survivors(&objs, self.config.population, &mut scratch);
            // Survivors are distinct indices: move them out instead of cloning.
            let mut all = std::mem::take(&mut pop);
            pop = keep.iter().map(|&i| std::mem::take(&mut all[i])).collect();
            objs = keep.iter().map(|&i| objs[i]).collect();
        }
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
