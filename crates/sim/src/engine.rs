//! The one round loop: one clock, jobs advanced by the ground-truth profile.
//!
//! Each round: advance every running job by `interval_s` using the true step
//! times and gradient statistics of its application; then hand the planner
//! a [`Round`] holding only what a real agent would have measured (fitted
//! model, current gradient statistics, age, attained service, restarts);
//! then apply the plan, charging a restart delay to every changed job.
//! This follows the Pollux artifact's simulator (see docs/fidelity.md).

use std::collections::BTreeMap;

use gpuplan_core::fit::{fit_perf_params, Observation};
use gpuplan_core::profile::AppProfile;
use gpuplan_core::{
    validate, Allocation, Cluster, GoodputModel, GradParams, Interference, JobSpec, JobState, Oracle,
    PerfParams, Plan, PolicyParams, Round, RoundJob,
};
use gpuplan_solve::{run_planner, BatchPolicy, Limits, Planner};
use serde::{Deserialize, Serialize};

use crate::data::Profiles;
use crate::error::SimError;
use crate::metrics::{JobResult, RoundRecord, Segment, SimResult};

/// Simulation settings (the CLI's flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    pub cluster: Cluster,
    pub interval_s: f64,
    pub restart_delay_s: f64,
    /// Slowdown of multi-node jobs on nodes shared by several of them (0 = none).
    pub interference_slowdown: f64,
    pub params: PolicyParams,
    pub seed: u64,
    pub time_limit_s: f64,
    pub gap: f64,
    /// Stop (with an error) if jobs are still running after this much simulated time.
    pub max_sim_s: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cluster: Cluster::homogeneous(16, 4, gpuplan_core::cluster::DEFAULT_GPU_TYPE),
            interval_s: 60.0,
            restart_delay_s: 30.0,
            interference_slowdown: 0.0,
            params: PolicyParams::default(),
            seed: 0,
            time_limit_s: 10.0,
            gap: 1e-4,
            max_sim_s: 60.0 * 86400.0,
        }
    }
}

/// What the observer of a run may ask for after each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Cancel,
}

/// The simulator's private view of one job: ground truth plus what its
/// agent has measured.
struct SimJob<'a> {
    spec: JobSpec,
    profile: &'a AppProfile,
    /// Fixed total batch (fixed-batch policies, and NCF as in the artifact).
    target_batch: Option<u32>,
    max_gpus: u32,
    alloc: Allocation,
    shape: Vec<u32>,
    local_bsz: u32,
    accum_steps: u32,
    progress: f64,
    epoch: u32,
    rescale_left_s: f64,
    attained_gpu_s: f64,
    /// None until the first start (Pollux counts re-allocations after it).
    restarts: Option<u32>,
    max_gpus_used: u32,
    completion_s: Option<f64>,
    observations: BTreeMap<(u32, u32, u32), Observation>,
    perf: Option<PerfParams>,
    perf_dirty: bool,
    grad: Option<GradParams>,
    segment_start_s: f64,
    oracle_steps: Option<Vec<f64>>,
}

impl SimJob<'_> {
    fn batch(&self) -> u32 {
        self.alloc.num_gpus() * self.local_bsz * (self.accum_steps + 1)
    }

    fn fitted(&mut self) -> Option<PerfParams> {
        if self.perf_dirty {
            let obs: Vec<Observation> = self.observations.values().copied().collect();
            self.perf = Some(fit_perf_params(&obs));
            self.perf_dirty = false;
        }
        self.perf
    }

    fn model(&mut self) -> Option<GoodputModel> {
        let perf = self.fitted()?;
        let grad = self.grad?;
        Some(GoodputModel {
            perf,
            grad,
            limits: self.profile.limits,
            accumulation: true,
        })
    }

    /// Re-choose local batch and accumulation for the current placement, as
    /// the artifact's `update_local_bsz` does.
    fn update_local_bsz(&mut self) {
        let r = self.alloc.num_gpus();
        if r == 0 {
            return;
        }
        let lim = self.profile.limits;
        let fixed = match self.target_batch {
            Some(b) => Some(b),
            None if self.perf.is_none() && !self.perf_dirty => Some(lim.init_batch.max(lim.min_local * r)),
            None => None,
        };
        let (atomic, accum) = match fixed {
            Some(b) => fixed_batch_split(b, r, lim.max_local, lim.init_batch),
            None => {
                let nodes = self.alloc.num_nodes();
                match self.model().and_then(|m| m.optimize(nodes, r)) {
                    Some(c) => (c.local_bsz, c.accum_steps),
                    None => fixed_batch_split(
                        lim.init_batch.max(lim.min_local * r),
                        r,
                        lim.max_local,
                        lim.init_batch,
                    ),
                }
            }
        };
        let count = r * (accum + 1);
        self.local_bsz = atomic.min(lim.max_batch / count).max(1);
        self.accum_steps = accum;
    }

    /// Advance by `seconds` from `now`; returns nothing, updates state.
    fn step(&mut self, now: f64, mut seconds: f64, slowdown: f64) {
        if self.alloc.is_empty() || self.completion_s.is_some() {
            return;
        }
        let gpus = self.alloc.num_gpus() as f64;
        let delay = self.rescale_left_s.min(seconds);
        let mut t = now + delay;
        self.attained_gpu_s += delay * gpus;
        self.rescale_left_s -= delay;
        seconds -= delay;
        let nodes = self.alloc.num_nodes();
        while seconds > 0.0 && self.completion_s.is_none() {
            let r = self.alloc.num_gpus();
            let batch = self.batch() as f64;
            let st = self.profile.step_time(&self.shape, self.local_bsz as f64);
            let accum_time = (st.step_s - st.sync_s).max(1e-9);
            let key = (nodes, r, self.local_bsz);
            if !self.observations.contains_key(&key) {
                self.observations.insert(
                    key,
                    Observation {
                        nodes,
                        gpus: r,
                        local_bsz: self.local_bsz,
                        accum_time_s: accum_time,
                        step_time_s: st.step_s,
                    },
                );
                self.perf_dirty = true;
            }
            self.grad = Some(self.profile.grad_params(self.epoch, batch));
            let gain = self.profile.gain(self.epoch, batch);
            let total = st.step_s + accum_time * self.accum_steps as f64;
            let rate = gain / total * (1.0 - slowdown);
            let next = self.profile.progress_at_epoch(self.epoch + 1);
            if self.progress + rate * seconds < next {
                self.progress += rate * seconds;
                self.attained_gpu_s += seconds * gpus;
                t += seconds;
                seconds = 0.0;
            } else {
                self.epoch += 1;
                let delta = ((next - self.progress) / rate).round().clamp(0.0, seconds);
                if self.epoch >= self.profile.max_epochs {
                    self.completion_s = Some(t + delta);
                }
                self.progress = next;
                self.attained_gpu_s += delta * gpus;
                t += delta;
                seconds -= delta;
            }
            self.update_local_bsz();
        }
    }

    /// True seconds per optimizer step on k packed GPUs at the fixed batch.
    fn oracle(&mut self, cluster: &Cluster) -> Oracle {
        let lim = self.profile.limits;
        let batch = self.target_batch.unwrap_or(self.spec.batch_size);
        if self.oracle_steps.is_none() {
            let g = cluster.max_gpus_per_node().max(1);
            let kmax =
                (batch / lim.min_local.max(1)).clamp(1, self.max_gpus.min(cluster.total_gpus()).max(1));
            let steps = (1..=kmax)
                .map(|k| {
                    let mut shape = vec![g; (k / g) as usize];
                    if k % g > 0 {
                        shape.push(k % g);
                    }
                    let (atomic, accum) = fixed_batch_split(batch, k, lim.max_local, lim.init_batch);
                    let st = self.profile.step_time(&shape, atomic as f64);
                    st.step_s + (st.step_s - st.sync_s) * accum as f64
                })
                .collect();
            self.oracle_steps = Some(steps);
        }
        let mut iters = 0.0;
        for e in self.epoch..self.profile.max_epochs {
            let start = self.profile.progress_at_epoch(e).max(self.progress);
            let need = (self.profile.progress_at_epoch(e + 1) - start).max(0.0);
            iters += need / self.profile.gain(e, batch as f64).max(1e-12);
        }
        Oracle {
            remaining_iters: iters,
            step_time_s: self.oracle_steps.clone().unwrap_or_default(),
        }
    }
}

/// Local batch and accumulation steps for a fixed total batch on r GPUs
/// (the artifact's rule: accumulate when the local batch exceeds the limit;
/// a single GPU above M0 always accumulates, to estimate gradient noise).
pub fn fixed_batch_split(batch: u32, r: u32, max_local: u32, init_batch: u32) -> (u32, u32) {
    let local = batch.div_ceil(r.max(1));
    let mut accum = local.div_ceil(max_local.max(1)).saturating_sub(1);
    if r == 1 && batch > init_batch {
        accum = accum.max(1);
    }
    (local.div_ceil(accum + 1), accum)
}

/// Run one workload under one planner.
pub fn simulate(
    cfg: &SimConfig,
    profiles: &Profiles,
    specs: &[JobSpec],
    planner: &mut dyn Planner,
    observer: &mut dyn FnMut(&Round, &Plan) -> Control,
) -> Result<SimResult, SimError> {
    let wall = web_time::Instant::now();
    let traits = planner.traits();
    let adaptive = traits.batch == BatchPolicy::Adaptive;
    let mut jobs: Vec<SimJob> = Vec::with_capacity(specs.len());
    for spec in specs {
        let profile = profiles.get(&spec.app).ok_or_else(|| {
            SimError::Invalid(format!(
                "job {}: unknown application '{}'; valid: {}",
                spec.name,
                spec.app,
                profiles.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        // The artifact pins NCF to its tuned batch and one GPU for adaptive policies.
        let ncf_pin = adaptive && spec.app == "ncf";
        jobs.push(SimJob {
            spec: spec.clone(),
            profile,
            target_batch: if !adaptive || ncf_pin {
                Some(spec.batch_size)
            } else {
                None
            },
            max_gpus: if ncf_pin { 1 } else { spec.max_gpus },
            alloc: Allocation::default(),
            shape: Vec::new(),
            local_bsz: 0,
            accum_steps: 0,
            progress: 0.0,
            epoch: 0,
            rescale_left_s: 0.0,
            attained_gpu_s: 0.0,
            restarts: None,
            max_gpus_used: 0,
            completion_s: None,
            observations: BTreeMap::new(),
            perf: None,
            perf_dirty: false,
            grad: None,
            segment_start_s: 0.0,
            oracle_steps: None,
        });
    }
    let validate_params = PolicyParams {
        interference: if traits.honours_interference {
            cfg.params.interference
        } else {
            Interference::Allow
        },
        ..cfg.params
    };
    let mut rounds = Vec::new();
    let mut segments = Vec::new();
    let mut planner_ms = Vec::new();
    let mut now = 0.0f64;
    let mut round_index = 0u64;
    loop {
        // 1. Advance every job by one interval with the current allocations.
        let slow = slowdowns(&jobs, &cfg.cluster, cfg.interference_slowdown);
        for (j, s) in jobs.iter_mut().zip(&slow) {
            j.step(now, cfg.interval_s, *s);
        }
        now += cfg.interval_s;
        for j in jobs.iter_mut() {
            if let (Some(c), false) = (j.completion_s, j.alloc.is_empty()) {
                segments.push(Segment {
                    job: j.spec.id,
                    start_s: j.segment_start_s,
                    end_s: c,
                    nodes: j.alloc.per_node().into_iter().map(|(n, k)| (n.0, k)).collect(),
                });
                j.alloc = Allocation::default();
            }
        }
        if jobs.iter().all(|j| j.completion_s.is_some()) {
            break;
        }
        if now > cfg.max_sim_s {
            return Err(SimError::Invalid(format!(
                "jobs still running after {} simulated seconds; is the cluster too small for the workload?",
                cfg.max_sim_s
            )));
        }
        // 2. Build what the planner may see.
        let active: Vec<usize> = (0..jobs.len())
            .filter(|&i| jobs[i].spec.submit_s <= now && jobs[i].completion_s.is_none())
            .collect();
        let mut round_jobs = Vec::with_capacity(active.len());
        for &i in &active {
            let j = &mut jobs[i];
            let model = j.model();
            let oracle = if traits.needs_oracle {
                Some(j.oracle(&cfg.cluster))
            } else {
                None
            };
            round_jobs.push(RoundJob {
                id: j.spec.id,
                name: j.spec.name.clone(),
                app: j.spec.app.clone(),
                submit_s: j.spec.submit_s,
                requested_gpus: j.spec.requested_gpus,
                batch_size: j.target_batch.unwrap_or(j.spec.batch_size),
                min_gpus: j.spec.min_gpus,
                max_gpus: j.max_gpus,
                preemptible: j.spec.preemptible,
                state: JobState {
                    progress: j.progress,
                    epoch: j.epoch,
                    attained_gpu_s: j.attained_gpu_s,
                    age_s: now - j.spec.submit_s,
                    restarts: j.restarts.unwrap_or(0),
                    allocation: j.alloc.clone(),
                    max_gpus_used: j.max_gpus_used,
                    batch_size: j.batch(),
                    local_bsz: j.local_bsz,
                    accum_steps: j.accum_steps,
                },
                model,
                oracle,
            });
        }
        let round = Round {
            now_s: now,
            cluster: cfg.cluster.clone(),
            jobs: round_jobs,
            params: cfg.params,
        };
        let limits = Limits {
            time_limit_s: cfg.time_limit_s,
            gap: cfg.gap,
            threads: 1,
            seed: cfg
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(round_index),
        };
        round_index += 1;
        let plan = run_planner(planner, &round, &limits)?;
        let check_round = Round {
            params: validate_params,
            ..round.clone()
        };
        if let Err(v) = validate(&check_round, &plan) {
            let msgs: Vec<String> = v.iter().map(|e| e.to_string()).collect();
            return Err(SimError::Invalid(format!(
                "planner {} returned an invalid plan at t={now}: {}",
                plan.planner,
                msgs.join("; ")
            )));
        }
        planner_ms.push(plan.solve_ms);
        // 3. Apply: changed allocations restart after a delay.
        let mut restarts_now = 0;
        for &i in &active {
            let j = &mut jobs[i];
            let new = plan.get(j.spec.id);
            if new == j.alloc {
                continue;
            }
            if !j.alloc.is_empty() {
                segments.push(Segment {
                    job: j.spec.id,
                    start_s: j.segment_start_s,
                    end_s: now,
                    nodes: j.alloc.per_node().into_iter().map(|(n, k)| (n.0, k)).collect(),
                });
            }
            j.segment_start_s = now;
            if new.is_empty() {
                j.alloc = new;
                j.shape.clear();
                j.rescale_left_s = 0.0;
                continue;
            }
            j.restarts = Some(j.restarts.map_or(0, |r| {
                restarts_now += 1;
                r + 1
            }));
            j.max_gpus_used = j.max_gpus_used.max(new.num_gpus());
            j.shape = new.shape();
            j.alloc = new;
            j.rescale_left_s = cfg.restart_delay_s;
            j.update_local_bsz();
        }
        let running = jobs.iter().filter(|j| !j.alloc.is_empty()).count();
        let gpus: u32 = jobs.iter().map(|j| j.alloc.num_gpus()).sum();
        rounds.push(RoundRecord {
            time_s: now,
            active: active.len(),
            running,
            gpus_allocated: gpus,
            restarts: restarts_now,
            planner_ms: plan.solve_ms,
            status: plan.status,
        });
        if observer(&round, &plan) == Control::Cancel {
            return Err(SimError::Invalid("cancelled".into()));
        }
    }
    let results = jobs
        .iter()
        .map(|j| JobResult {
            id: j.spec.id,
            name: j.spec.name.clone(),
            app: j.spec.app.clone(),
            submit_s: j.spec.submit_s,
            completion_s: j.completion_s.unwrap_or(f64::NAN),
            jct_s: j.completion_s.unwrap_or(f64::NAN) - j.spec.submit_s,
            restarts: j.restarts.unwrap_or(0),
            attained_gpu_s: j.attained_gpu_s,
            max_gpus_used: j.max_gpus_used,
        })
        .collect();
    Ok(SimResult::new(
        planner.name(),
        cfg.cluster.total_gpus(),
        results,
        rounds,
        segments,
        planner_ms,
        wall.elapsed().as_secs_f64(),
    ))
}

/// Per-job slowdown: multi-node jobs on a node shared by several of them.
fn slowdowns(jobs: &[SimJob], cluster: &Cluster, slowdown: f64) -> Vec<f64> {
    if slowdown <= 0.0 {
        return vec![0.0; jobs.len()];
    }
    let mut multi = vec![0u32; cluster.num_nodes()];
    for j in jobs.iter().filter(|j| j.alloc.num_nodes() > 1) {
        for (n, _) in j.alloc.per_node() {
            multi[n.0 as usize] += 1;
        }
    }
    jobs.iter()
        .map(|j| {
            let hit =
                j.alloc.num_nodes() > 1 && j.alloc.per_node().iter().any(|(n, _)| multi[n.0 as usize] > 1);
            if hit {
                slowdown
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_split_matches_artifact_rule() {
        // 2048 over 6 GPUs: local 342 ≤ 1024 → no accumulation.
        assert_eq!(fixed_batch_split(2048, 6, 1024, 128), (342, 0));
        // 384 over 6 GPUs with max local 12: local 64 → 6 micro-batches (5 accumulation steps), atomic 11.
        assert_eq!(fixed_batch_split(384, 6, 12, 12), (11, 5));
        // One GPU above M0 always accumulates.
        assert_eq!(fixed_batch_split(256, 1, 1024, 128), (128, 1));
    }
}
