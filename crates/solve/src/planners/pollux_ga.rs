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
use std::sync::Arc;

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus, Round};
use rand::distributions::Bernoulli;
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
}

impl PolluxGa {
    pub fn new(config: GaConfig) -> Self {
        PolluxGa { config, last: None }
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
    fn new(max_gpus: u32) -> Self {
        Terms {
            max_gpus,
            cells: vec![(f64::NAN, f64::NAN, f64::NAN); 6 * (max_gpus as usize + 1)],
        }
    }

    fn slot(&self, nodes: u32, gpus: u32, changed: bool) -> Option<usize> {
        (gpus <= self.max_gpus).then(|| {
            (usize::from(changed) * 3 + nodes.min(2) as usize) * (self.max_gpus as usize + 1) + gpus as usize
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
    /// [`Ctx::repair_now`]'s draws.
    draws: Vec<u32>,
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
            let changed = row != &self.current[j][..];
            let t = &mut terms[j];
            let slot = t.slot(n, k, changed);
            let (v, term, u) = match slot.map(|i| t.cells[i]) {
                Some(c) if !c.1.is_nan() => c,
                _ => {
                    let s = cache[j].get(&self.round.jobs[j], n, k);
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

    /// The random draws of [`Ctx::repair`], made ahead: for each job that is
    /// not pinned, in job order, the indices `SliceRandom::shuffle` draws
    /// over the nodes (for i = nodes-1 down to 1, one in 0..=i). Repair's
    /// draws never depend on the genome, so they can be drawn apart from
    /// applying them: the same stream is consumed in the same order.
    fn draw_repair(&self, rng: &mut ChaCha8Rng, out: &mut Vec<u32>) {
        out.clear();
        for _ in self.pinned.iter().filter(|&&p| !p) {
            for i in (1..self.nodes).rev() {
                // As `gen_index` in rand's shuffle: a u32 range.
                out.push(rng.gen_range(0..(i + 1) as u32));
            }
        }
    }

    /// [`Ctx::draw_repair`] then [`Ctx::repair`]: the published repair.
    fn repair_now(&self, g: &mut [u32], rng: &mut ChaCha8Rng, s: &mut Scratch) {
        let mut draws = std::mem::take(&mut s.draws);
        self.draw_repair(rng, &mut draws);
        self.repair(g, &draws, s);
        s.draws = draws;
    }

    /// Pollux's repair, with its shuffles' draws given (`draws`, from
    /// [`Ctx::draw_repair`]).
    fn repair(&self, g: &mut [u32], draws: &[u32], s: &mut Scratch) {
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
        // 2. Per-job caps: one GPU type (the one holding most of the job's
        // GPUs, the first on ties), GPUs (random node order) and nodes.
        let nodes_order = &mut s.nodes_order;
        nodes_order.clear();
        nodes_order.extend(0..nodes);
        let n_types = self.n_types;
        let mut draws = draws.chunks_exact(nodes.saturating_sub(1).max(1));
        for ((row, &pinned), &max_gpus) in g.chunks_exact_mut(nodes).zip(&self.pinned).zip(&self.max_gpus) {
            if pinned {
                continue;
            }
            // The shuffle (of the previous job's order, as the published
            // code does), from its drawn indices.
            if nodes > 1 {
                let d = draws.next().expect("one set of draws per job that is not pinned");
                for (i, &j) in (1..nodes).rev().zip(d) {
                    nodes_order.swap(i, j as usize);
                }
            }
            if n_types > 1 {
                let per_type = &mut s.per_type;
                per_type.clear();
                per_type.resize(n_types, 0);
                for (&x, &t) in row.iter().zip(&self.node_type) {
                    per_type[t] += x;
                }
                let keep = (0..n_types).max_by(|&a, &b| per_type[a].cmp(&per_type[b]).then(b.cmp(&a)));
                for (x, &t) in row.iter_mut().zip(&self.node_type) {
                    if Some(t) != keep {
                        *x = 0;
                    }
                }
            }
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

/// One try of a generation: two children after crossover and mutation,
/// the draws their repairs will use, and where the random stream stands
/// after it (the next generation resumes there if this is the last try).
struct Try {
    kids: [Vec<u32>; 2],
    draws: [Vec<u32>; 2],
    word_pos: u128,
}

impl Ctx<'_> {
    /// Everything random in one try, in the published order: two
    /// tournament picks, the cut, then per child its mutation and its
    /// repair's draws. Nothing here depends on a repaired child, so tries
    /// can be produced ahead of the repairs (see [`Search::run`]).
    fn produce(
        &self,
        pop: &[Vec<u32>],
        objs: &[(f64, f64)],
        cfg: &GaConfig,
        rng: &mut ChaCha8Rng,
        s: &mut Scratch,
    ) -> Try {
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
        let (a, b) = (pick(rng), pick(rng));
        let cut = rng.gen_range(0..=self.jobs as u32) as usize * self.nodes;
        let cross = |x: &[u32], y: &[u32]| {
            let mut c = Vec::with_capacity(x.len());
            c.extend_from_slice(&x[..cut]);
            c.extend_from_slice(&y[cut..]);
            c
        };
        let mut kids = [cross(&pop[a], &pop[b]), cross(&pop[b], &pop[a])];
        let mut draws = [Vec::new(), Vec::new()];
        for (c, d) in kids.iter_mut().zip(draws.iter_mut()) {
            self.mutate(c, cfg, rng, s);
            self.draw_repair(rng, d);
        }
        Try {
            kids,
            draws,
            word_pos: rng.get_word_pos(),
        }
    }
}

/// One generation's children, taken from tries in order until there are
/// as many as the population or 4× as many tries.
struct Brood {
    seen: GenomeSet,
    children: Vec<Vec<u32>>,
    objs: Vec<(f64, f64)>,
    tries: usize,
    /// The random stream's position after the last try taken.
    word_pos: u128,
}

/// The GA's state during one round's search.
struct Search<'a, 'r> {
    ctx: &'a Ctx<'r>,
    config: &'a GaConfig,
    cache: &'a mut [SpeedupCache],
    terms: &'a mut [Terms],
    scratch: Scratch,
    /// Shared with the producer thread during a generation ([`Search::run_threaded`]).
    pop: Arc<Vec<Vec<u32>>>,
    objs: Arc<Vec<(f64, f64)>>,
}

impl Search<'_, '_> {
    fn brood(&self, word_pos: u128) -> Brood {
        Brood {
            seen: self.pop.iter().cloned().collect(),
            children: Vec::with_capacity(self.pop.len()),
            objs: Vec::with_capacity(self.pop.len()),
            tries: 0,
            word_pos,
        }
    }

    fn wants_more(&self, b: &Brood) -> bool {
        b.children.len() < self.pop.len() && b.tries < 4 * self.pop.len()
    }

    /// Repair a try's children and keep the new ones (evaluated).
    fn take(&mut self, b: &mut Brood, t: Try) {
        b.tries += 1;
        b.word_pos = t.word_pos;
        for (mut c, d) in t.kids.into_iter().zip(t.draws) {
            self.ctx.repair(&mut c, &d, &mut self.scratch);
            if b.seen.insert(c.clone()) {
                b.objs.push(self.ctx.evaluate(&c, self.cache, self.terms));
                b.children.push(c);
            }
        }
    }

    /// NSGA-II survival over parents and children.
    fn survive(&mut self, b: Brood) {
        // Nobody else holds them between generations: no copy is made.
        let mut all = Arc::unwrap_or_clone(std::mem::take(&mut self.pop));
        let mut objs = Arc::unwrap_or_clone(std::mem::take(&mut self.objs));
        all.extend(b.children);
        objs.extend(b.objs);
        let keep = select_survivors(&objs, self.config.population, &mut self.scratch);
        // Survivors are distinct indices: move them out instead of cloning.
        self.pop = Arc::new(keep.iter().map(|&i| std::mem::take(&mut all[i])).collect());
        self.objs = Arc::new(keep.iter().map(|&i| objs[i]).collect());
    }

    /// The generations, one thread: each try produced, then taken.
    fn run(&mut self, mut rng: ChaCha8Rng, stop: impl Fn(usize) -> Option<String>) -> Option<String> {
        let mut s = Scratch::default();
        for gen in 0..self.config.generations {
            if let Some(reason) = stop(gen) {
                return Some(reason);
            }
            let mut b = self.brood(rng.get_word_pos());
            while self.wants_more(&b) {
                let t = self
                    .ctx
                    .produce(&self.pop, &self.objs, self.config, &mut rng, &mut s);
                self.take(&mut b, t);
            }
            self.survive(b);
        }
        None
    }

    /// [`Search::run`] on two threads, with the same results: a producer
    /// thread makes every random draw of a generation's tries
    /// ([`Ctx::produce`]) while this thread repairs, deduplicates and
    /// evaluates them ([`Search::take`]); the two halves cost about the
    /// same. The producer may run a few tries past the generation's end
    /// (at most [`SPECULATE`] past what is sure to be needed); those are
    /// dropped, and the next generation resumes the random stream after
    /// the last try taken, exactly where the one-thread search would.
    #[cfg(not(target_arch = "wasm32"))]
    fn run_threaded(&mut self, rng: ChaCha8Rng, stop: impl Fn(usize) -> Option<String>) -> Option<String> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::mpsc::{self, TryRecvError};
        enum Out {
            Try(Try),
            /// The producer has stopped and dropped its share of the population.
            Done,
        }
        /// Tries the producer may make past those sure to be needed.
        const SPECULATE: usize = 4;
        /// Polls of an empty queue before blocking: a try takes a few
        /// microseconds, less than putting a thread to sleep and waking it.
        const SPINS: u32 = 1000;
        let halt = AtomicBool::new(false);
        // How many tries of this generation the producer may make.
        let budget = AtomicUsize::new(0);
        let (ctx, cfg, halt, budget) = (self.ctx, self.config, &halt, &budget);
        let mut pos = rng.get_word_pos();
        std::thread::scope(|scope| {
            let (to_producer, gens) = mpsc::channel::<(Arc<Vec<Vec<u32>>>, Arc<Vec<(f64, f64)>>, u128)>();
            let (to_main, outs) = mpsc::channel::<Out>();
            scope.spawn(move || {
                let mut rng = rng;
                let mut s = Scratch::default();
                for (pop, objs, pos) in gens {
                    rng.set_word_pos(pos);
                    let mut made = 0;
                    while made < 4 * pop.len() && !halt.load(Ordering::Acquire) {
                        if made >= budget.load(Ordering::Acquire) {
                            std::hint::spin_loop();
                            std::thread::yield_now();
                            continue;
                        }
                        let t = ctx.produce(&pop, &objs, cfg, &mut rng, &mut s);
                        made += 1;
                        if to_main.send(Out::Try(t)).is_err() {
                            return;
                        }
                    }
                    drop((pop, objs));
                    if to_main.send(Out::Done).is_err() {
                        return;
                    }
                }
            });
            let recv = || {
                for _ in 0..SPINS {
                    match outs.try_recv() {
                        Ok(m) => return Some(m),
                        Err(TryRecvError::Empty) => std::hint::spin_loop(),
                        Err(TryRecvError::Disconnected) => return None,
                    }
                }
                outs.recv().ok()
            };
            for gen in 0..self.config.generations {
                if let Some(reason) = stop(gen) {
                    return Some(reason);
                }
                let n = self.pop.len();
                // Each try adds at most two children: this many are sure to be needed.
                let sure = |b: &Brood| (b.tries + (n - b.children.len().min(n)).div_ceil(2)).min(4 * n);
                halt.store(false, Ordering::Release);
                budget.store((n.div_ceil(2) + SPECULATE).min(4 * n), Ordering::Release);
                if to_producer
                    .send((self.pop.clone(), self.objs.clone(), pos))
                    .is_err()
                {
                    break; // the producer panicked: the scope re-raises it
                }
                let mut b = self.brood(pos);
                let mut done = false;
                while self.wants_more(&b) {
                    match recv() {
                        Some(Out::Try(t)) => {
                            self.take(&mut b, t);
                            budget.store((sure(&b) + SPECULATE).min(4 * n), Ordering::Release);
                        }
                        Some(Out::Done) | None => {
                            done = true;
                            break;
                        }
                    }
                }
                halt.store(true, Ordering::Release);
                while !done {
                    done = matches!(recv(), Some(Out::Done) | None);
                }
                pos = b.word_pos;
                self.survive(b);
            }
            None
        })
    }
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
        // wasm32 has no threads; the two give the same plans.
        let threads = if cfg!(target_arch = "wasm32") {
            Threads::One
        } else {
            Threads::Two
        };
        self.plan_on(round, limits, threads)
    }
}

/// How many threads one round's search uses ([`Search::run`],
/// [`Search::run_threaded`]): a speed choice only, the plans are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threads {
    One,
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    Two,
}

impl PolluxGa {
    fn plan_on(&mut self, round: &Round, limits: &Limits, threads: Threads) -> Result<Plan, PlanError> {
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
                .map(|j| restart_factor(j, round.params.restart_penalty_s))
                .collect(),
            scale: 1.0 / gpn as f64,
            max_nodes: round.params.max_nodes_per_job,
            total_gpus: round.cluster.total_gpus().max(1) as f64,
            n_types: node_type.iter().max().map_or(1, |m| m + 1),
            node_type,
        };
        let mut cache: Vec<SpeedupCache> = max_g
            .iter()
            .map(|&m| SpeedupCache::new(round, m.min(round.params.max_nodes_per_job).min(nodes as u32), m))
            .collect();
        let mut terms: Vec<Terms> = max_g.iter().map(|&m| Terms::new(m)).collect();
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
            ctx.repair_now(g, &mut rng, &mut scratch);
        }
        let objs: Vec<(f64, f64)> = pop
            .iter()
            .map(|g| ctx.evaluate(g, &mut cache, &mut terms))
            .collect();
        let mut search = Search {
            ctx: &ctx,
            config: &self.config,
            cache: &mut cache,
            terms: &mut terms,
            scratch,
            pop: Arc::new(pop),
            objs: Arc::new(objs),
        };
        // The time limit stops the search between generations (a generation
        // of 3000 jobs takes ~0.1 s); the best individual so far is the plan.
        let stop = |gen: usize| {
            (t0.elapsed().as_secs_f64() > limits.time_limit_s).then(|| {
                format!(
                    "time limit reached after {gen} of {} generations",
                    self.config.generations
                )
            })
        };
        plan.reason = match threads {
            #[cfg(not(target_arch = "wasm32"))]
            Threads::Two => search.run_threaded(rng, stop),
            _ => search.run(rng, stop),
        };
        let Search { pop, objs, .. } = search;
        let pop = Arc::unwrap_or_clone(pop);
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

    #[test]
    fn two_threads_plan_as_one() {
        // Rounds in sequence, so the warm start (the last population) is
        // compared too; one job pinned, so repair's draws skip a job.
        let mut r = small_round();
        r.jobs[0].preemptible = false;
        let cfg = GaConfig {
            population: 24,
            generations: 25,
            ..Default::default()
        };
        let (mut one, mut two) = (PolluxGa::new(cfg), PolluxGa::new(cfg));
        for seed in 0..6 {
            let lim = Limits {
                seed,
                ..Default::default()
            };
            let a = one.plan_on(&r, &lim, Threads::One).unwrap();
            let b = two.plan_on(&r, &lim, Threads::Two).unwrap();
            assert_eq!(a.allocations, b.allocations, "seed {seed}");
            assert_eq!(one.last, two.last, "seed {seed}: final populations");
        }
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
