//! A round's state and steps: collect devices → build the [`Round`] from
//! the job table → (the shared pipeline, [`gpuplan_solve::run_round`], run
//! by the loop in [`crate::driver`]) → map the plan's GPUs to devices and
//! order the moves. Launches follow in the daemon's tick once the GPUs are
//! free.
//!
//! [`Rounds`] owns what rounds keep between rounds (the device source, its
//! last collection, the fitted models); its steps take the job table as an
//! argument and hand back what must be journaled and which stops to send,
//! so the daemon, which owns the journal and the supervisor, stays the one
//! place that writes and signals, and this module needs nothing of it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gpuplan_core::colocation::Colocation;
use gpuplan_core::predict::PredictAt;
use gpuplan_core::queue::{self, Queue};
use gpuplan_core::{
    Allocation, Cluster, GoodputModel, GpuId, GpuType, JobId, JobSpec, JobState, Node, NodeId, PlanStatus,
    PolicyParams, Round,
};
use gpuplan_solve::{round_job, Change, Decision, FitMemo, JobFacts, PlannerTraits};
use serde::{Deserialize, Serialize};

use crate::clock::Stopwatch;
use crate::device::{Gpu, Health};
use crate::jobs::{partners, JobRecord, JobStatus};
use crate::supervise::{Order, Supervisor};

/// Timings and outcome of one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundStats {
    /// Round number, from 1 since the daemon opened.
    pub round: u64,
    /// Milliseconds to collect devices and build the planner's input.
    pub collect_ms: f64,
    /// Milliseconds the planner took.
    pub plan_ms: f64,
    /// Milliseconds to apply the plan (journal, stops, launches).
    pub apply_ms: f64,
    /// Jobs the round planned for.
    pub active_jobs: usize,
    /// GPUs the round could give out.
    pub healthy_gpus: usize,
    /// Jobs whose GPUs the plan changed.
    pub changed_jobs: usize,
    /// The plan's status (`optimal`, `feasible`, `fallback`), `error` when
    /// the planner failed, `None` when there was nothing to plan.
    pub status: Option<RoundStatus>,
    /// Why there was no plan (`no healthy GPUs`, the planner's error).
    pub note: Option<String>,
    /// The plan's objective (`gpuplan_core::objective::evaluate`, the number
    /// every planner is judged by); `None` without a plan. Defaulted so
    /// stats written before it existed still load.
    #[serde(default)]
    pub objective: Option<f64>,
    /// The planner's relative MIP gap, when it reports one.
    #[serde(default)]
    pub gap: Option<f64>,
}

/// How a round ended: its plan's [`PlanStatus`], or `error` when the
/// planner failed. Written in lowercase, as the strings stats held before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundStatus {
    /// The planner proved its plan optimal.
    Optimal,
    /// A valid plan, not proved optimal (time or gap limit).
    Feasible,
    /// The planner fell back to its simple rule.
    Fallback,
    /// The planner failed; allocations stay as they were.
    Error,
}

impl RoundStatus {
    /// Every status, in the order `/metrics` lists them.
    pub const ALL: [RoundStatus; 4] = [
        RoundStatus::Optimal,
        RoundStatus::Feasible,
        RoundStatus::Fallback,
        RoundStatus::Error,
    ];

    /// Its name in JSON and in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoundStatus::Optimal => "optimal",
            RoundStatus::Feasible => "feasible",
            RoundStatus::Fallback => "fallback",
            RoundStatus::Error => "error",
        }
    }
}

impl From<PlanStatus> for RoundStatus {
    fn from(s: PlanStatus) -> Self {
        match s {
            PlanStatus::Optimal => RoundStatus::Optimal,
            PlanStatus::Feasible => RoundStatus::Feasible,
            PlanStatus::Fallback => RoundStatus::Fallback,
        }
    }
}

/// A prepared round: the planner input plus what `apply` needs to map the
/// plan's GPUs back to devices.
pub struct Prepared {
    /// The planner's input.
    pub round: Round,
    node_gpus: Vec<Vec<String>>,
    targets: HashMap<JobId, Vec<String>>,
    stats: RoundStats,
}

/// The cluster a round sees in the devices: healthy GPUs grouped by node
/// (nodes in name order), each node's GPUs by device index. `gpuplan
/// cluster show` prints the same, so what an operator sees is what the
/// planner gets.
pub struct DeviceCluster {
    /// The healthy GPUs as a round's cluster.
    pub cluster: Cluster,
    /// `node_gpus[i][k]`: the UUID of GPU k of round node i.
    pub node_gpus: Vec<Vec<String>>,
    /// Each healthy GPU's place in the round.
    pub slot_of: HashMap<String, GpuId>,
}

/// Map devices to the round's cluster: healthy GPUs only, nodes by name, GPUs by index.
pub fn device_cluster(gpus: &[Gpu]) -> DeviceCluster {
    let mut by_node: BTreeMap<&str, Vec<&Gpu>> = BTreeMap::new();
    for g in gpus.iter().filter(|g| g.health == Health::Ok) {
        by_node.entry(g.node.as_str()).or_default().push(g);
    }
    let mut slot_of: HashMap<String, GpuId> = HashMap::new();
    let mut nodes = Vec::new();
    let mut node_gpus = Vec::new();
    for (i, (name, gs)) in by_node.iter_mut().enumerate() {
        gs.sort_by_key(|g| g.index);
        for (k, g) in gs.iter().enumerate() {
            slot_of.insert(g.uuid.clone(), GpuId::new(NodeId(i as u32), k as u32));
        }
        nodes.push(Node {
            name: name.to_string(),
            gpus: gs.len() as u32,
            gpu_type: gs[0].name.as_str().into(),
        });
        node_gpus.push(gs.iter().map(|g| g.uuid.clone()).collect::<Vec<_>>());
    }
    DeviceCluster {
        cluster: Cluster { nodes },
        node_gpus,
        slot_of,
    }
}

/// The GPU type a round gives the node of GPU `uuid`: the model name of the
/// node's lowest-index healthy GPU, as [`device_cluster`] names nodes, so a
/// job's step-time reports are fitted under the type the planner prices.
pub fn node_type(gpus: &[Gpu], uuid: &str) -> Option<GpuType> {
    let g = gpus.iter().find(|g| g.uuid == uuid)?;
    let lead = gpus
        .iter()
        .filter(|h| h.node == g.node && h.health == Health::Ok)
        .min_by_key(|h| h.index)
        .unwrap_or(g);
    Some(lead.name.as_str().into())
}

/// How many nodes the GPUs `uuids` span (at least 1).
pub(crate) fn node_count(gpus: &[Gpu], uuids: &[String]) -> u32 {
    uuids
        .iter()
        .filter_map(|u| gpus.iter().find(|g| &g.uuid == u))
        .map(|g| g.node.as_str())
        .collect::<BTreeSet<_>>()
        .len()
        .max(1) as u32
}

/// The job table as a round reads and changes it (the daemon's).
pub(crate) type Jobs = BTreeMap<JobId, JobRecord>;

/// What rounds keep between rounds: the last device collection (the
/// device source itself is an effect's, read off the daemon's lock), the
/// round count (shared, so health reads it with no lock) and last stats, and each job's goodput
/// model as the last round planned with it. `/metrics` predicts from
/// these: a report drops a job's cached fit until the next round, and a
/// scrape must not fit (an L-BFGS run per job).
pub struct Rounds {
    backend: &'static str,
    gpus: Vec<Gpu>,
    count: Arc<AtomicU64>,
    last: Option<RoundStats>,
    models: HashMap<JobId, GoodputModel>,
}

/// A round begun by [`Rounds::begin`]: its number, on a stopwatch.
pub(crate) struct Begun {
    t0: Stopwatch,
    stats: RoundStats,
}

/// What [`Rounds::collect`] leaves the daemon to do, in order: journal
/// `journal`, then send `stops`.
pub(crate) struct Collected {
    cluster: DeviceCluster,
    pub journal: Vec<JobId>,
    pub stops: Vec<Order>,
}

/// The journal line of a round that moved jobs.
pub(crate) struct PlanLine {
    pub round: u64,
    pub planner: String,
    pub allocations: Vec<(JobId, Vec<String>)>,
}

/// What [`Rounds::apply`] leaves the daemon to do, in order: journal the
/// plan line and the moved jobs, send the stops, then
/// [`Rounds::finish`] with `done`.
pub(crate) struct Applied {
    pub line: Option<PlanLine>,
    pub moved: Vec<JobId>,
    pub stops: Vec<Order>,
    pub done: Done,
}

/// A round's stats, waiting for [`Rounds::finish`]; `t0` is `None` when
/// there was no plan to apply (its `apply_ms` stays 0).
pub(crate) struct Done {
    stats: RoundStats,
    t0: Option<Stopwatch>,
}

impl Rounds {
    pub fn new(backend: &'static str) -> Self {
        Rounds {
            backend,
            gpus: Vec::new(),
            count: Arc::new(AtomicU64::new(0)),
            last: None,
            models: HashMap::new(),
        }
    }

    /// The last device collection.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Devices collected outside a round (to check a submission before
    /// the first round has), kept only if no round has collected yet.
    pub(crate) fn first_gpus(&mut self, gpus: Vec<Gpu>) {
        if self.gpus.is_empty() {
            self.gpus = gpus;
        }
    }

    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Rounds begun so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The round count, for readers that take no lock (health).
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.count.clone()
    }

    pub fn last(&self) -> Option<&RoundStats> {
        self.last.as_ref()
    }

    pub fn models(&self) -> &HashMap<JobId, GoodputModel> {
        &self.models
    }

    /// Count a new round and start its stopwatch.
    pub(crate) fn begin(&mut self) -> Begun {
        let t0 = Stopwatch::start();
        let round = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        Begun {
            t0,
            stats: RoundStats {
                round,
                ..RoundStats::default()
            },
        }
    }

    /// Take the devices collected for this round. Jobs on GPUs that left
    /// or turned unhealthy lose them now and are re-planned; each running
    /// job's utilization is recorded (jobs it changes enough join `dirty`).
    pub(crate) fn collect(
        &mut self,
        gpus: Vec<Gpu>,
        jobs: &mut Jobs,
        dirty: &mut BTreeSet<JobId>,
        now: f64,
    ) -> Collected {
        self.gpus = gpus;
        let cluster = device_cluster(&self.gpus);
        let mut lost = Vec::new();
        let mut stops = Vec::new();
        for j in jobs.values_mut() {
            let Some(bad) = j.gpus.iter().find(|u| !cluster.slot_of.contains_key(*u)).cloned() else {
                continue;
            };
            let why = match self.gpus.iter().find(|g| g.uuid == bad) {
                Some(Gpu {
                    health: Health::Unhealthy { reason },
                    ..
                }) => format!("GPU {bad} is unhealthy ({reason})"),
                _ => format!("GPU {bad} disappeared"),
            };
            // Said in the log too: an operator who drains a node reads why its jobs moved.
            tracing::warn!("job {} ({}): {why}; stopped and re-planned", j.id.0, j.spec.name);
            j.reason = Some(format!("{why}; re-planned"));
            j.gpus.clear();
            if j.status == JobStatus::Running {
                j.status = JobStatus::Queued;
            }
            stops.extend(Supervisor::order_stop(j, now));
            lost.push(j.id);
        }
        record_utilization(&self.gpus, jobs, dirty);
        Collected {
            cluster,
            journal: dirty.iter().copied().chain(lost).collect(),
            stops,
        }
    }

    /// Build the round from the job table: `None` when there is nothing to
    /// plan (no healthy GPU, or no active job). Fits each job's model (the
    /// agent's cache, in the job record) and keeps the fits for `/metrics`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        &mut self,
        begun: Begun,
        collected: Collected,
        jobs: &mut Jobs,
        memo: &mut FitMemo,
        params: PolicyParams,
        colocation: Option<Colocation>,
        queues: &[Queue],
        now: f64,
    ) -> Option<Prepared> {
        let Begun { t0, mut stats } = begun;
        let DeviceCluster {
            cluster: Cluster { nodes },
            node_gpus,
            slot_of,
        } = collected.cluster;
        stats.healthy_gpus = slot_of.len();
        if nodes.is_empty() {
            self.models.clear();
            stats.note = Some("no healthy GPUs".into());
            stats.collect_ms = t0.elapsed_ms();
            self.last = Some(stats);
            return None;
        }
        let mut round_jobs = Vec::new();
        let mut targets = HashMap::new();
        let mut reserved = Vec::new();
        for j in jobs.values_mut() {
            let active = match j.status {
                JobStatus::Running => true,
                JobStatus::Queued => j.backoff_until_unix_s <= now && !j.live(),
                _ => false,
            };
            if !active {
                // Its GPUs are no round job's to take.
                reserved.extend(j.gpus.iter().filter_map(|u| slot_of.get(u).copied()));
                continue;
            }
            let alloc = Allocation::from_gpus(j.gpus.iter().map(|u| slot_of[u]).collect());
            targets.insert(j.id, j.gpus.clone());
            let facts = job_facts(j, queues);
            let state = JobState {
                progress: j.progress,
                epoch: j.epoch,
                attained_gpu_s: j.attained_gpu_s,
                age_s: (now - j.submit_unix_s).max(0.0),
                restarts: j.restarts,
                allocation: alloc,
                max_gpus_used: j.max_gpus_used,
                batch_size: j.batch_size,
                local_bsz: j.local_bsz,
                accum_steps: j.accum_steps,
                since_checkpoint_s: j.since_checkpoint_s(now),
                lost_s: (j.checkpoint.lost_s > 0.0).then_some(j.checkpoint.lost_s),
                run_s: j.run_s(now),
            };
            let mut rj = round_job(facts, state, &mut j.agent, None, memo);
            rj.utilization = j.sharing.util_solo;
            rj.colocation_key = Some(j.colocation_key());
            // The job file's figure, else the peak measured alone (the
            // application's estimate is core's fallback after both).
            rj.mem_gib = j.spec.mem_gib.or(j.sharing.mem_gib_peak);
            round_jobs.push(rj);
        }
        self.models = round_jobs.iter().filter_map(|j| Some((j.id, j.model?))).collect();
        stats.active_jobs = round_jobs.len();
        stats.collect_ms = t0.elapsed_ms();
        if round_jobs.is_empty() {
            self.last = Some(stats);
            return None;
        }
        // GPUs lost to faults shrink every guarantee in proportion
        // rather than make the round invalid.
        let capacity = (nodes.iter().map(|n| n.gpus).sum::<u32>())
            .saturating_sub(reserved.iter().collect::<BTreeSet<_>>().len() as u32);
        let queues = match queue::fit_guarantees(queues, capacity) {
            Some(fitted) => {
                stats.note = Some(format!(
                    "queues: guarantees scaled to the {capacity} GPUs jobs may hold"
                ));
                fitted
            }
            None => queues.to_vec(),
        };
        Some(Prepared {
            round: Round {
                now_s: now,
                cluster: Cluster { nodes },
                jobs: round_jobs,
                params,
                variability: None,
                colocation,
                reserved,
                queues,
            },
            node_gpus,
            targets,
            stats,
        })
    }

    /// Apply a round's decision (already validated by the pipeline): map
    /// its GPUs to devices and change the moved jobs' records; the daemon
    /// journals them and sends the stops.
    pub(crate) fn apply(
        &mut self,
        prep: Prepared,
        decision: Result<Decision, String>,
        jobs: &mut Jobs,
        traits: &PlannerTraits,
        memo: &mut FitMemo,
        now: f64,
    ) -> Applied {
        let t0 = Stopwatch::start();
        let Prepared {
            round,
            node_gpus,
            targets,
            mut stats,
        } = prep;
        let (plan, d_diff) = match decision {
            Ok(d) => {
                // Once a round, on the round's jobs: one batch-size search
                // per goodput job, small beside the plan itself.
                stats.objective = Some(d.objective(&round)).filter(|o| o.is_finite());
                (d.plan, d.diff)
            }
            Err(e) => {
                // The pipeline refused the round or its plan: nothing changes.
                tracing::error!(
                    round = stats.round,
                    "planner error: {e}; the round changes nothing"
                );
                stats.status = Some(RoundStatus::Error);
                stats.note = Some(format!("planner error: {e}"));
                return Applied {
                    line: None,
                    moved: Vec::new(),
                    stops: Vec::new(),
                    done: Done { stats, t0: None },
                };
            }
        };
        stats.plan_ms = plan.solve_ms;
        stats.status = Some(plan.status.into());
        stats.gap = plan.gap.filter(|g| g.is_finite());
        // The decision's changes, for jobs still as the round saw them (one
        // that ended or crashed since keeps its new state).
        let changed: Vec<(JobId, Allocation)> = d_diff
            .iter()
            .filter(|c| !matches!(c.change, Change::Keep | Change::Wait))
            .filter(|c| {
                jobs.get(&c.job).is_some_and(|j| {
                    matches!(j.status, JobStatus::Queued | JobStatus::Running)
                        && targets.get(&c.job) == Some(&j.gpus)
                })
            })
            .map(|c| (c.job, plan.get(c.job)))
            .collect();
        let mut stops = Vec::new();
        for (id, alloc) in &changed {
            let Some(j) = jobs.get_mut(id) else { continue };
            let per_node = alloc.per_node();
            // The plan's very GPUs: the pipeline validated them against the
            // round, whose `reserved` holds every GPU a job outside it holds.
            let picked: Vec<String> = alloc
                .gpus()
                .iter()
                .filter_map(|g| node_gpus.get(g.node.0 as usize)?.get(g.index as usize).cloned())
                .collect();
            let had = !j.gpus.is_empty() || j.live();
            j.gpus = picked;
            if j.gpus.is_empty() {
                j.status = JobStatus::Queued;
            } else {
                j.status = JobStatus::Running;
                if had || j.attempts > 0 {
                    j.restarts += 1;
                }
                j.max_gpus_used = j.max_gpus_used.max(j.gpus.len() as u32);
                let nodes = per_node.len() as u32;
                j.choose_batch(traits, nodes, j.gpus.len() as u32, memo);
            }
            stops.extend(Supervisor::order_stop(j, now));
        }
        stats.changed_jobs = changed.len();
        let moved: Vec<JobId> = changed.iter().map(|c| c.0).collect();
        let line = (!moved.is_empty()).then(|| PlanLine {
            round: stats.round,
            planner: plan.planner.clone(),
            allocations: moved
                .iter()
                .filter_map(|id| Some((*id, jobs.get(id)?.gpus.clone())))
                .collect(),
        });
        Applied {
            line,
            moved,
            stops,
            done: Done { stats, t0: Some(t0) },
        }
    }

    /// Close a round: its stats become the last round's.
    pub(crate) fn finish(&mut self, done: Done) -> RoundStats {
        let Done { mut stats, t0 } = done;
        if let Some(t0) = t0 {
            stats.apply_ms = t0.elapsed_ms();
        }
        self.last = Some(stats.clone());
        stats
    }
}

/// Each running job's GPU utilization from the last device collection
/// (the mean over its GPUs; NVML's per-GPU figure, the fake backend's
/// too): always as `util_last`, and as `util_solo` while no other job's
/// running attempt holds one of its GPUs. Its memory too, while alone:
/// the most used memory of its GPUs, kept as a running peak.
fn record_utilization(gpus: &[Gpu], jobs: &mut Jobs, dirty: &mut BTreeSet<JobId>) {
    let pct: HashMap<&str, u32> = gpus
        .iter()
        .filter_map(|g| Some((g.uuid.as_str(), g.utilization_pct?)))
        .collect();
    let used: HashMap<&str, u64> = gpus
        .iter()
        .map(|g| (g.uuid.as_str(), g.memory_used_bytes))
        .collect();
    let mut seen: Vec<(JobId, f64, Option<PredictAt>)> = Vec::new();
    let mut peaks: Vec<(JobId, f64)> = Vec::new();
    for j in jobs.values() {
        let held = j.running_gpus();
        if held.is_empty() {
            continue;
        }
        let alone = partners(jobs, j.id).is_empty();
        if alone {
            let gib = held
                .iter()
                .filter_map(|u| used.get(u.as_str()))
                .map(|&b| b as f64 / f64::from(1u32 << 30))
                .fold(0.0, f64::max);
            if gib > 0.0 && j.sharing.mem_gib_peak.is_none_or(|p| gib > p) {
                peaks.push((j.id, gib));
            }
        }
        let vals: Vec<f64> = held
            .iter()
            .filter_map(|u| pct.get(u.as_str()))
            .map(|p| f64::from(*p) / 100.0)
            .collect();
        if vals.len() != held.len() {
            continue;
        }
        let u = (vals.iter().sum::<f64>() / vals.len() as f64).clamp(0.0, 1.0);
        let alone = alone.then(|| PredictAt {
            nodes: node_count(gpus, held),
            gpus: held.len() as u32,
            local_bsz: j.local_bsz,
            gpu_type: node_type(gpus, &held[0]),
        });
        seen.push((j.id, u, alone));
    }
    for (id, gib) in peaks {
        let Some(j) = jobs.get_mut(&id) else { continue };
        // Journaled when it grows by a quarter GiB or more.
        if j.sharing.mem_gib_peak.is_none_or(|p| gib - p >= 0.25) {
            dirty.insert(id);
        }
        j.sharing.mem_gib_peak = Some(gib);
    }
    for (id, u, at) in seen {
        let alone = at.is_some();
        let Some(j) = jobs.get_mut(&id) else { continue };
        // Journaled when it moves by 5 points or more, not every round.
        let moved = |old: Option<f64>| old.is_none_or(|o| (o - u).abs() >= 0.05);
        let journal = moved(j.sharing.util_last) || (alone && moved(j.sharing.util_solo));
        j.sharing.util_last = Some(u);
        if let Some(at) = at {
            j.sharing.util_solo = Some(u);
            if j.sharing.util_at.as_ref() != Some(&at) {
                j.sharing.util_at = Some(at);
                dirty.insert(id);
            }
        }
        if journal {
            dirty.insert(id);
        }
    }
}

/// What a round knows of a job's submission: the planner's view of its
/// spec, with the round's name for it and its queue as the daemon has it.
/// Rounds and the estimates' what-if build their jobs here alike.
pub(crate) fn job_facts(j: &JobRecord, queues: &[Queue]) -> JobFacts {
    JobFacts {
        spec: JobSpec {
            id: j.id,
            // Users may give several jobs one name; a round's names are
            // unique (plans are reported by name), so the id goes in.
            name: format!("{}#{}", j.spec.name, j.id.0),
            app: j.spec.app.clone().unwrap_or_default(),
            submit_s: j.submit_unix_s,
            requested_gpus: j.spec.max_gpus,
            batch_size: j.spec.batch_size,
            min_gpus: j.spec.min_gpus,
            max_gpus: j.spec.max_gpus,
            preemptible: j.spec.preemptible,
            // A queue the daemon no longer has (the file changed
            // since the job was journaled) puts it in `default`
            // rather than failing every round.
            queue: j
                .spec
                .queue
                .clone()
                .filter(|q| queue::leaf_problem(queues, Some(q)).is_none()),
        },
        restart_penalty_s: j.spec.restart_cost_s,
        min_runtime_s: j.spec.min_runtime_s,
        limits: Some(j.limits()),
        features: j.spec.features,
    }
}
