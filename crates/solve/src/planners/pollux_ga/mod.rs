//! `pollux-ga`: the Pollux scheduler as published (OSDI'21 §4.2-4.3).
//!
//! A population of allocation matrices (jobs × nodes, GPUs per cell) evolves
//! for a fixed number of generations with NSGA-II survival on two
//! objectives (the power-mean fitness and cluster utility), single-cut
//! crossover over jobs, Pollux's three mutations and its repair. The final
//! pick is the individual with the best fitness. The population is kept
//! across rounds as the next round's warm start.
//!
//! The file keeps the public face and what one round's search evaluates
//! with: the context, fitness, mutation and repair. Around it, one file a
//! seam: `search.rs` the generations (breeding, keeping new children,
//! the two-thread pipeline), `nsga.rs` NSGA-II survival, `seen.rs` the
//! seen-set of a generation's genomes, `rng.rs` the replay of `rand`'s
//! shuffle that keeps a seed's plans where they were.

mod nsga;
mod rng;
mod search;
mod seen;

use std::collections::HashMap;

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Allocation, JobId, Libm, NodeId, Plan, PlanStatus, Round, RoundVariability};
use rand::distributions::Bernoulli;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use self::rng::{skip_shuffle, zone, NodeOrders};
use self::search::{evolve, evolve_pipelined, pipelined, Brood, Population};
use crate::candidates::kept_charge;
use crate::speedup::{max_gpus, SpeedupCache};
use crate::{BatchPolicy, Limits, PlanError, Planner, PlannerTraits};

/// GA size and rates; defaults are the published ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaConfig {
    /// Allocation matrices kept per generation.
    pub population: usize,
    /// Generations evolved per round.
    pub generations: usize,
    /// Probability that a job's row is reset to its current allocation.
    pub p_reset: f64,
    /// Probability that a job is picked for zeroing, and per cell once picked.
    pub p_zero: f64,
    /// Probability that a pair of parents is crossed (pymoo's default 0.9;
    /// otherwise the children are copies, then mutated).
    pub crossover_prob: f64,
    /// How a parent is chosen from two drawn.
    pub tournament: Tournament,
    /// How likely a job grows onto a node with free GPUs.
    pub grow: Grow,
    /// Whether the crossover's cut runs over jobs in repair's priority
    /// order (least attained service first), as the artifact's rows are
    /// sorted, or in the round's order.
    pub cut_in_priority_order: bool,
}

/// The chance that mutation grows a job onto a node with free GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grow {
    /// The artifact's: 1/jobs, and for a job already on the node also
    /// 1/(jobs on it), combined as p1 + p2 − p1·p2.
    #[default]
    PerJob,
    /// gpuplan's before issue 36: 1/free nodes, and 1/(free nodes the job
    /// is on) for those.
    PerFreeNode,
}

/// How the GA's binary tournament picks a parent, and with it how
/// survival measures crowding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tournament {
    /// pymoo's NSGA-II, the artifact's: the parent that dominates on
    /// (fitness, utility), else the larger crowding distance, else at
    /// random; pymoo's crowding distance in survival.
    #[default]
    DominanceCrowding,
    /// The fitter parent, and gpuplan's own crowding (pollux-ga before
    /// issue 36): more pressure toward fitness, less spread along the
    /// utility front.
    Fitness,
}

/// The chance that mutation grows a job onto a free node, p1 + p2 − p1·p2:
/// p1 for any job, p2 for one already on the node (`on`). `jobs` in the
/// round, `free` nodes with a free GPU, `mine` of them the job is on,
/// `on_node` jobs on this node.
fn grow_chance(grow: Grow, jobs: usize, free: usize, mine: usize, on_node: u32, on: bool) -> f64 {
    let (p1, p2) = match grow {
        Grow::PerJob => (
            1.0 / jobs.max(1) as f64,
            if on { 1.0 / f64::from(on_node.max(1)) } else { 0.0 },
        ),
        Grow::PerFreeNode => (
            1.0 / free.max(1) as f64,
            if on { 1.0 / mine.max(1) as f64 } else { 0.0 },
        ),
    };
    (p1 + p2 - p1 * p2).min(1.0)
}

impl GaConfig {
    /// The GA gpuplan ran before issue 36 (`pollux-ga-prev`): parents by
    /// fitness, every pair crossed in round order, growth per free node.
    pub fn prev() -> Self {
        GaConfig {
            tournament: Tournament::Fitness,
            crossover_prob: 1.0,
            grow: Grow::PerFreeNode,
            cut_in_priority_order: false,
            ..GaConfig::default()
        }
    }
}

impl Default for GaConfig {
    fn default() -> Self {
        GaConfig {
            population: 100,
            generations: 100,
            p_reset: 0.1,
            p_zero: 0.1,
            crossover_prob: 0.9,
            tournament: Tournament::DominanceCrowding,
            grow: Grow::PerJob,
            cut_in_priority_order: true,
        }
    }
}

/// The `pollux-ga` planner: Pollux's genetic search over allocation
/// matrices, seeded each round with the last round's population.
#[derive(Debug, Default)]
pub struct PolluxGa {
    /// Its GA size and rates.
    pub config: GaConfig,
    /// Last round's final population, by job id and node count.
    last: Option<(Vec<JobId>, usize, Vec<Vec<u32>>)>,
    /// The fitness of last round's pick, for tests that hold it against
    /// the common objective's per-job values.
    fitness: f64,
    /// Tests force the one-thread or the two-thread search; `None`: by size.
    pipeline: Option<bool>,
    /// Its registry name (a variant's, e.g. `pollux-ga-fittest`).
    name: &'static str,
}

impl PolluxGa {
    /// A variant under its own registry name.
    pub fn named(config: GaConfig, name: &'static str) -> Self {
        PolluxGa {
            name,
            ..PolluxGa::new(config)
        }
    }

    /// A planner with no population yet (its first round starts from scratch).
    pub fn new(config: GaConfig) -> Self {
        PolluxGa {
            config,
            last: None,
            fitness: 0.0,
            pipeline: None,
            name: "",
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
    /// Each job's position in `order` (the crossover's cut runs over it).
    rank: Vec<usize>,
    max_gpus: Vec<u32>,
    current: Vec<Vec<u32>>,
    pinned: Vec<bool>,
    /// Per node, the GPUs pinned jobs hold there, each counted once:
    /// pinned jobs may share a GPU (the round check let them).
    pinned_held: Vec<u32>,
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

/// Buffers reused across repairs and mutations (survivor selections have
/// their own, [`nsga::Scratch`]).
#[derive(Default)]
struct Scratch {
    used: Vec<u32>,
    /// Per free node, the jobs on it (the artifact's growth chance).
    on_node: Vec<u32>,
    free_nodes: Vec<usize>,
    taken: Vec<bool>,
    /// The node order [`NodeOrders`] draws.
    nodes_order: Vec<usize>,
    /// [`zone`] of 1..=nodes, for `rng::shuffle_exact`.
    zones: Vec<u32>,
    per_type: Vec<u32>,
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
        // The artifact normalises both chances over the job axis: a free
        // node is picked by each job with 1/jobs, and by a job already on
        // it also with 1/(jobs on it). (gpuplan before issue 36 read them as
        // 1/free nodes and 1/free nodes the job is on: under contention,
        // with few free nodes, every job then tried to grow each time.)
        let per_job = cfg.grow == Grow::PerJob;
        let on_node = &mut s.on_node;
        if per_job {
            on_node.clear();
            on_node.resize(nodes, 0);
            for row in g.chunks_exact(nodes) {
                for &n in free_nodes.iter() {
                    on_node[n] += u32::from(row[n] > 0);
                }
            }
        }
        let n_free = free_nodes.len();
        for row in g.chunks_exact_mut(nodes) {
            let mine = free_nodes.iter().filter(|&&n| row[n] > 0).count();
            for &n in free_nodes.iter() {
                let on = row[n] > 0;
                let p = grow_chance(
                    cfg.grow,
                    self.jobs,
                    n_free,
                    mine,
                    on_node.get(n).copied().unwrap_or(0),
                    on,
                );
                if rng.gen_bool(p) {
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
        // 3. Node capacity, in priority order, after what pinned jobs hold.
        let used = &mut s.used;
        used.clear();
        used.extend_from_slice(&self.pinned_held);
        for &j in self.pinned_first() {
            if self.pinned[j] {
                continue;
            }
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

impl Planner for PolluxGa {
    fn name(&self) -> &str {
        if self.name.is_empty() {
            "pollux-ga"
        } else {
            self.name
        }
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
        let mut pinned_held = vec![0u32; nodes];
        for (_, charge) in round
            .jobs
            .iter()
            .zip(kept_charge(round))
            .filter(|(j, _)| pinned(j))
        {
            for (n, k) in charge.per_node() {
                if let Some(h) = pinned_held.get_mut(n.0 as usize) {
                    *h += k;
                }
            }
        }
        let gpn = round.cluster.max_gpus_per_node().max(1);
        let max_g: Vec<u32> = round.jobs.iter().map(|j| max_gpus(j, round)).collect();
        let node_type = round.cluster.type_index();
        let ctx = Ctx {
            round,
            jobs,
            nodes,
            cap: round.cluster.nodes.iter().map(|n| n.gpus).collect(),
            rank: {
                let mut rank = vec![0; jobs];
                for (r, &j) in order.iter().enumerate() {
                    rank[j] = r;
                }
                rank
            },
            order,
            max_gpus: max_g.clone(),
            current: current.clone(),
            pinned: round.jobs.iter().map(pinned).collect(),
            pinned_held,
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
        let mut cache = SpeedupCache::tables(
            round,
            max_g
                .iter()
                .map(|&m| (m.min(round.params.max_nodes_per_job).min(nodes as u32), m)),
        );
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
            if !job.preemptible && !job.current().is_empty() {
                // Pinned: its very GPUs (repair kept its counts), which
                // another pinned job may share.
                plan.allocations.insert(job.id, job.current().clone());
                continue;
            }
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

    /// The artifact's chances, as its numpy gives them on 3 jobs × 4 nodes
    /// (GPUs [[4,0,2,0],[0,0,1,0],[0,3,0,0]] on 4-GPU nodes; nodes 1-3
    /// have free GPUs): 1/3 for every job on every free node, and on top
    /// 1/2 for the two jobs on node 2 and 1 for the one on node 1.
    #[test]
    fn growth_chances_are_the_artifacts() {
        let per_job = |on_node, on| grow_chance(Grow::PerJob, 3, 3, 1, on_node, on);
        assert!((per_job(0, false) - 1.0 / 3.0).abs() < 1e-12);
        let both = |p1: f64, p2: f64| p1 + p2 - p1 * p2;
        assert!((per_job(2, true) - both(1.0 / 3.0, 0.5)).abs() < 1e-12);
        assert!((per_job(1, true) - 1.0).abs() < 1e-12);
        // With 78 jobs and one free node the artifact grows each job there
        // with 1/78; the earlier reading grew every job there (1/1).
        assert!((grow_chance(Grow::PerJob, 78, 1, 0, 0, false) - 1.0 / 78.0).abs() < 1e-12);
        assert_eq!(grow_chance(Grow::PerFreeNode, 78, 1, 0, 0, false), 1.0);
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
