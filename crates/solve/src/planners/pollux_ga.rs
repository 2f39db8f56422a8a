//! `pollux-ga`: the Pollux scheduler as published (OSDI'21 §4.2-4.3).
//!
//! A population of allocation matrices (jobs × nodes, GPUs per cell) evolves
//! for a fixed number of generations with NSGA-II survival on two
//! objectives (the power-mean fitness and cluster utility), single-cut
//! crossover over jobs, Pollux's three mutations and its repair. The final
//! pick is the individual with the best fitness. The population is kept
//! across rounds as the next round's warm start.

use std::collections::{HashMap, HashSet};

use gpuplan_core::objective::restart_factor;
use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus, Round};
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
}

impl PolluxGa {
    pub fn new(config: GaConfig) -> Self {
        PolluxGa { config, last: None }
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
}

impl Ctx<'_> {
    fn idx(&self, j: usize, n: usize) -> usize {
        j * self.nodes + n
    }

    fn shape(&self, g: &[u32], j: usize) -> (u32, u32) {
        let row = &g[j * self.nodes..(j + 1) * self.nodes];
        (row.iter().filter(|&&x| x > 0).count() as u32, row.iter().sum())
    }

    /// (fitness, utility): both to maximise.
    fn evaluate(&self, g: &[u32], cache: &mut [SpeedupCache]) -> (f64, f64) {
        let p = self.round.params.p;
        let mut acc = 0.0;
        let mut min = f64::INFINITY;
        let mut util = 0.0;
        for j in 0..self.jobs {
            let (n, k) = self.shape(g, j);
            let job = &self.round.jobs[j];
            let s = cache[j].get(job, n, k);
            let changed = g[j * self.nodes..(j + 1) * self.nodes] != self.current[j][..];
            let v = s * self.scale * if changed { self.factor[j] } else { 1.0 } + 1e-3;
            min = min.min(v);
            acc += if p == 0.0 { v.libm_ln() } else { v.libm_pow(p) };
            util += s / self.round.cluster.total_gpus().max(1) as f64;
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

    fn mutate(&self, g: &mut [u32], cfg: &GaConfig, rng: &mut ChaCha8Rng) {
        for j in 0..self.jobs {
            if rng.gen_bool(cfg.p_reset) {
                g[j * self.nodes..(j + 1) * self.nodes].copy_from_slice(&self.current[j]);
            }
        }
        for j in 0..self.jobs {
            if rng.gen_bool(cfg.p_zero) {
                for n in 0..self.nodes {
                    if rng.gen_bool(cfg.p_zero) {
                        g[j * self.nodes + n] = 0;
                    }
                }
            }
        }
        // Grow: nodes with free GPUs, biased toward nodes the job already uses.
        let mut used = vec![0u32; self.nodes];
        for j in 0..self.jobs {
            for n in 0..self.nodes {
                used[n] += g[j * self.nodes + n];
            }
        }
        let free_nodes: Vec<usize> = (0..self.nodes).filter(|&n| used[n] < self.cap[n]).collect();
        if free_nodes.is_empty() {
            return;
        }
        let p1 = 1.0 / free_nodes.len() as f64;
        for j in 0..self.jobs {
            let mine = free_nodes.iter().filter(|&&n| g[j * self.nodes + n] > 0).count();
            for &n in &free_nodes {
                let p2 = if mine > 0 && g[j * self.nodes + n] > 0 {
                    1.0 / mine as f64
                } else {
                    0.0
                };
                if rng.gen_bool((p1 + p2 - p1 * p2).min(1.0)) {
                    let cur = g[j * self.nodes + n];
                    g[j * self.nodes + n] = rng.gen_range(cur..=self.cap[n]);
                }
            }
        }
    }

    fn repair(&self, g: &mut [u32], rng: &mut ChaCha8Rng) {
        // Pinned jobs keep their allocation, whatever the genome says.
        for j in 0..self.jobs {
            if self.pinned[j] {
                g[j * self.nodes..(j + 1) * self.nodes].copy_from_slice(&self.current[j]);
            }
        }
        // 1. Interference: on each node only the first distributed job stays.
        if self.round.params.interference == gpuplan_core::Interference::Avoid {
            let mut taken = vec![false; self.nodes];
            for &j in self.pinned_first() {
                let distributed = self.shape(g, j).0 > 1;
                if !distributed {
                    continue;
                }
                for (n, t) in taken.iter_mut().enumerate() {
                    let i = self.idx(j, n);
                    if g[i] > 0 {
                        if *t && !self.pinned[j] {
                            g[i] = 0;
                        } else {
                            *t = true;
                        }
                    }
                }
            }
        }
        // 2. Per-job caps: one GPU type (the one holding most of the job's
        // GPUs, the first on ties), GPUs (random node order) and nodes.
        let mut nodes_order: Vec<usize> = (0..self.nodes).collect();
        let n_types = self.node_type.iter().max().map_or(1, |m| m + 1);
        for j in 0..self.jobs {
            if self.pinned[j] {
                continue;
            }
            if n_types > 1 {
                let mut per_type = vec![0u32; n_types];
                for n in 0..self.nodes {
                    per_type[self.node_type[n]] += g[self.idx(j, n)];
                }
                let keep = (0..n_types).max_by(|&a, &b| per_type[a].cmp(&per_type[b]).then(b.cmp(&a)));
                for n in 0..self.nodes {
                    if Some(self.node_type[n]) != keep {
                        g[j * self.nodes + n] = 0;
                    }
                }
            }
            nodes_order.shuffle(rng);
            let mut left = self.max_gpus[j];
            let mut nodes_left = self.max_nodes;
            for &n in &nodes_order {
                let i = self.idx(j, n);
                if g[i] == 0 {
                    continue;
                }
                if nodes_left == 0 {
                    g[i] = 0;
                    continue;
                }
                g[i] = g[i].min(left);
                left -= g[i];
                if g[i] > 0 {
                    nodes_left -= 1;
                }
            }
        }
        // 3. Node capacity, in priority order.
        let mut used = vec![0u32; self.nodes];
        for &j in self.pinned_first() {
            for (n, u) in used.iter_mut().enumerate() {
                let i = self.idx(j, n);
                g[i] = g[i].min(self.cap[n] - *u);
                *u += g[i];
            }
        }
        // 4. Minimum size: a job below its minimum gets nothing.
        for j in 0..self.jobs {
            let k: u32 = g[j * self.nodes..(j + 1) * self.nodes].iter().sum();
            if k > 0 && k < self.round.jobs[j].min_gpus && !self.pinned[j] {
                g[j * self.nodes..(j + 1) * self.nodes].fill(0);
            }
        }
    }

    fn pinned_first(&self) -> &[usize] {
        &self.order
    }
}

/// NSGA-II: non-dominated fronts, then crowding distance within the last front.
fn select_survivors(objs: &[(f64, f64)], keep: usize) -> Vec<usize> {
    let n = objs.len();
    let dominates = |a: usize, b: usize| {
        let (x, y) = (objs[a], objs[b]);
        x.0 >= y.0 && x.1 >= y.1 && (x.0 > y.0 || x.1 > y.1)
    };
    let mut dominated_by = vec![0usize; n];
    let mut dominating: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (a, dom) in dominating.iter_mut().enumerate() {
        for (b, by) in dominated_by.iter_mut().enumerate() {
            if a != b && dominates(a, b) {
                dom.push(b);
                *by += 1;
            }
        }
    }
    let mut front: Vec<usize> = (0..n).filter(|&i| dominated_by[i] == 0).collect();
    let mut out = Vec::with_capacity(keep);
    while !front.is_empty() && out.len() < keep {
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
        front = next;
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
            node_type: round.cluster.type_index(),
        };
        let mut cache: Vec<SpeedupCache> = max_g
            .iter()
            .map(|&m| SpeedupCache::new(round, m.min(round.params.max_nodes_per_job).min(nodes as u32), m))
            .collect();
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
        for g in pop.iter_mut() {
            ctx.repair(g, &mut rng);
        }
        let mut objs: Vec<(f64, f64)> = pop.iter().map(|g| ctx.evaluate(g, &mut cache)).collect();
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
            let mut seen: HashSet<Vec<u32>> = pop.iter().cloned().collect();
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
                let mut c1 = pop[a][..cut].to_vec();
                c1.extend_from_slice(&pop[b][cut..]);
                let mut c2 = pop[b][..cut].to_vec();
                c2.extend_from_slice(&pop[a][cut..]);
                for mut c in [c1, c2] {
                    ctx.mutate(&mut c, &self.config, &mut rng);
                    ctx.repair(&mut c, &mut rng);
                    if seen.insert(c.clone()) {
                        children.push(c);
                    }
                }
            }
            let child_objs: Vec<(f64, f64)> = children.iter().map(|g| ctx.evaluate(g, &mut cache)).collect();
            pop.extend(children);
            objs.extend(child_objs);
            let keep = select_survivors(&objs, self.config.population);
            pop = keep.iter().map(|&i| pop[i].clone()).collect();
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
