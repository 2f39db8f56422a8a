//! `GET /metrics`: the daemon's state in the OpenMetrics text format, which
//! Prometheus scrapes.
//!
//! Every value is read from the [`Daemon`] at scrape time (the last round's
//! [`RoundStats`], the job table, the devices of the last collection), not
//! counted by an engine, so the metrics are the same whichever engine runs
//! and a restarted daemon reports what its journal holds. A scrape copies
//! what it needs under the daemon's lock ([`Snapshot::of`]) and encodes
//! after the lock is released ([`Snapshot::render`]).
//!
//! Encoding is `prometheus-client`'s: a [`Collector`] writes constant
//! metrics, so nothing is kept between scrapes and a job that finishes
//! simply stops being listed (no stale series to remove).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpuplan_core::GoodputModel;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::{Registry, Unit};

use crate::daemon::Daemon;
use crate::device::Health;
use crate::jobs::{JobRecord, Phase};
use crate::round::{RoundStats, RoundStatus};

/// The Content-Type of [`Snapshot::render`]'s output (what the crate encodes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Values of `gpuplan_round_status`'s `status` label, all listed (0 or 1)
/// so that an alert on one of them sees 0, not a missing series.
/// `error`: the planner failed and nothing was applied; `idle`: nothing to
/// plan (no job waiting or running, or no healthy GPU).
pub const ROUND_STATUSES: [&str; 5] = ["optimal", "feasible", "fallback", "error", "idle"];

/// `job_id`, and `job_name` only where the daemon shows names.
type JobLabels = Vec<(&'static str, String)>;
type NodeLabels = [(&'static str, String); 1];

/// One job's row. Only jobs that are not final, or still have ranks
/// stopping, are listed: finished jobs would grow the series without bound.
#[derive(Debug, Clone)]
struct JobRow {
    labels: JobLabels,
    gpus: u64,
    goodput: Option<f64>,
    restarts: u64,
}

/// One queue's row (`serve --queues`), each counting its subtree.
#[derive(Debug, Clone)]
struct QueueRow {
    labels: NodeLabels,
    guarantee: u64,
    gpus: u64,
    jobs: u64,
    waiting: u64,
}

#[derive(Debug, Clone)]
struct NodeRow {
    labels: NodeLabels,
    gpus: u64,
    healthy_gpus: u64,
}

/// What one scrape reports, copied out of the daemon.
#[derive(Debug, Clone)]
pub struct Snapshot {
    rounds: u64,
    last_round: Option<RoundStats>,
    phases: Vec<(&'static str, u64)>,
    jobs: Vec<JobRow>,
    nodes: Vec<NodeRow>,
    queues: Vec<QueueRow>,
}

/// Per queue of the daemon's tree: its guarantee, GPUs its jobs hold, its
/// jobs not final and those of them without GPUs. Empty without queues.
fn queue_rows(d: &Daemon) -> Vec<QueueRow> {
    let live: Vec<&JobRecord> = d.jobs().filter(|j| !j.status.is_final() || j.live()).collect();
    let names: Vec<Option<&str>> = live.iter().map(|j| d.queue_of(j)).collect();
    let Some(tree) = gpuplan_core::queue::QueueTree::from_queues(&d.config().queues, &names, u32::MAX) else {
        return Vec::new();
    };
    let mut rows: Vec<QueueRow> = tree
        .queues
        .iter()
        .map(|q| QueueRow {
            labels: [("queue", q.name.clone())],
            guarantee: u64::from(q.guarantee),
            gpus: 0,
            jobs: 0,
            waiting: 0,
        })
        .collect();
    for (j, &leaf) in live.iter().zip(&tree.leaf) {
        for &q in tree.path(leaf) {
            let r = &mut rows[q];
            r.gpus += j.gpus.len() as u64;
            r.jobs += 1;
            r.waiting += u64::from(j.gpus.is_empty());
        }
    }
    rows
}

/// Predicted goodput (examples/s, scaled by statistical efficiency) of the
/// job on its GPUs and batch now, from the model the last round planned
/// with ([`Daemon::models`]). `None` for a job without GPUs, or without a
/// model: one that has not reported yet, or has not been in a round since.
fn predicted_goodput(
    j: &JobRecord,
    model: Option<&GoodputModel>,
    node_of: &HashMap<&str, &str>,
) -> Option<f64> {
    let model = model?;
    if j.gpus.is_empty() || j.local_bsz == 0 {
        return None;
    }
    let nodes = j
        .gpus
        .iter()
        .filter_map(|u| node_of.get(u.as_str()))
        .collect::<BTreeSet<_>>()
        .len()
        .max(1) as u32;
    let g = model.goodput(nodes, j.gpus.len() as u32, j.local_bsz as f64, j.accum_steps);
    g.is_finite().then_some(g)
}

impl Snapshot {
    /// Copy what a scrape reports; cheap enough to run under the lock.
    pub fn of(d: &Daemon) -> Snapshot {
        let now = d.clock().now_unix_s();
        // In PHASES' (lifecycle) order; a phase missing there still counts.
        let mut phases: Vec<(&'static str, u64)> = Phase::ALL.iter().map(|p| (p.as_str(), 0)).collect();
        for j in d.jobs() {
            let p = j.phase(now).as_str();
            match phases.iter_mut().find(|(q, _)| *q == p) {
                Some((_, n)) => *n += 1,
                None => phases.push((p, 1)),
            }
        }
        let node_of: HashMap<&str, &str> = d
            .gpus()
            .iter()
            .map(|g| (g.uuid.as_str(), g.node.as_str()))
            .collect();
        let jobs = d
            .jobs()
            .filter(|j| !j.status.is_final() || j.live())
            .map(|j| JobRow {
                labels: match d.config().metrics_job_names {
                    crate::daemon::JobNames::Hidden => vec![("job_id", j.id.0.to_string())],
                    crate::daemon::JobNames::Shown => {
                        vec![("job_id", j.id.0.to_string()), ("job_name", j.spec.name.clone())]
                    }
                },
                gpus: j.gpus.len() as u64,
                goodput: predicted_goodput(j, d.models().get(&j.id), &node_of),
                restarts: u64::from(j.restarts),
            })
            .collect();
        let mut by_node: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for g in d.gpus() {
            let n = by_node.entry(g.node.as_str()).or_default();
            n.0 += 1;
            if g.health == Health::Ok {
                n.1 += 1;
            }
        }
        let nodes = by_node
            .into_iter()
            .map(|(node, (gpus, healthy_gpus))| NodeRow {
                labels: [("node", node.to_string())],
                gpus,
                healthy_gpus,
            })
            .collect();
        Snapshot {
            rounds: d.rounds(),
            last_round: d.last_round().cloned(),
            phases,
            jobs,
            nodes,
            queues: queue_rows(d),
        }
    }

    /// The OpenMetrics text (ends with `# EOF`), served as [`CONTENT_TYPE`].
    pub fn render(self) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

/// One metric without labels.
fn single<M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    m: M,
) -> std::fmt::Result {
    m.encode(enc.encode_descriptor(name, help, unit, M::TYPE)?)
}

/// One metric with a sample per label set, in the order given.
fn family<L: EncodeLabelSet, M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: impl IntoIterator<Item = (L, M)>,
) -> std::fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, unit, M::TYPE)?;
    for (labels, m) in rows {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The last round's metrics: plan time, status, objective and gap where
/// known, active and changed jobs.
fn last_round(e: &mut DescriptorEncoder, r: &RoundStats) -> std::fmt::Result {
    single(
        e,
        "gpuplan_round_plan",
        "Time the planner took in the last round.",
        Some(&Unit::Seconds),
        ConstGauge::new(r.plan_ms / 1e3),
    )?;
    let status = r.status.map_or("idle", RoundStatus::as_str);
    let statuses: Vec<&str> = ROUND_STATUSES.to_vec();
    family(
        e,
        "gpuplan_round_status",
        "Outcome of the last round: 1 for its status, 0 for the others (optimal, feasible, fallback; error: the planner failed; idle: nothing to plan).",
        None,
        statuses
            .into_iter()
            .map(|s| ([("status", s)], ConstGauge::new(i64::from(s == status)))),
    )?;
    if let Some(o) = r.objective {
        single(
            e,
            "gpuplan_round_objective",
            "Objective of the last round's plan: generalized mean of job speedups, higher is better.",
            None,
            ConstGauge::new(o),
        )?;
    }
    if let Some(g) = r.gap {
        single(
            e,
            "gpuplan_round_gap",
            "Relative MIP gap the planner reported for the last round's plan.",
            Some(&Unit::Other("ratio".into())),
            ConstGauge::new(g),
        )?;
    }
    single(
        e,
        "gpuplan_round_active_jobs",
        "Jobs the last round planned for (queued past their back-off, or running).",
        None,
        ConstGauge::new(r.active_jobs as u64),
    )?;
    single(
        e,
        "gpuplan_round_changed_jobs",
        "Jobs whose GPUs the last round changed (each one a start, stop or restart).",
        None,
        ConstGauge::new(r.changed_jobs as u64),
    )?;
    Ok(())
}

impl Snapshot {
    /// Jobs by phase, then each job's GPUs, goodput and restarts.
    fn job_families(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        family(
            e,
            "gpuplan_jobs",
            "Jobs by phase (all jobs in the journal, final ones included).",
            None,
            self.phases
                .iter()
                .map(|(p, n)| ([("phase", *p)], ConstGauge::new(*n))),
        )?;
        family(
            e,
            "gpuplan_job_gpus",
            "GPUs the last plan gives the job (jobs not yet final).",
            None,
            self.jobs
                .iter()
                .map(|j| (j.labels.clone(), ConstGauge::new(j.gpus))),
        )?;
        family(
            e,
            "gpuplan_job_goodput_examples_per_second",
            "Predicted goodput of the job on its GPUs and batch: examples per second times statistical efficiency, from the model fitted to its reports (absent until it has reported and a round has fitted the model).",
            None,
            self.jobs
                .iter()
                .filter_map(|j| Some((j.labels.clone(), ConstGauge::new(j.goodput?)))),
        )?;
        family(
            e,
            "gpuplan_job_restarts",
            "Times a plan started the job again after it had run: a move, or a relaunch after a crash or a lost GPU (jobs not yet final).",
            None,
            self.jobs
                .iter()
                .map(|j| (j.labels.clone(), ConstCounter::new(j.restarts))),
        )?;
        Ok(())
    }

    /// Each queue's guarantee, GPUs, borrowed GPUs, jobs and waiting jobs.
    fn queue_families(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let mut per_queue = |name: &str, help: &str, f: fn(&QueueRow) -> i64| -> std::fmt::Result {
            family(
                &mut *e,
                name,
                help,
                None,
                self.queues
                    .iter()
                    .map(|q| (q.labels.clone(), ConstGauge::new(f(q)))),
            )
        };
        per_queue(
            "gpuplan_queue_guarantee_gpus",
            "GPUs the queue is guaranteed (serve --queues), as configured.",
            |q| q.guarantee as i64,
        )?;
        per_queue(
            "gpuplan_queue_gpus",
            "GPUs the last plan gives the queue's jobs (its subtree's).",
            |q| q.gpus as i64,
        )?;
        per_queue(
            "gpuplan_queue_borrowed_gpus",
            "GPUs the queue's jobs hold beyond its guarantee.",
            |q| q.gpus.saturating_sub(q.guarantee) as i64,
        )?;
        per_queue("gpuplan_queue_jobs", "The queue's jobs not yet final.", |q| {
            q.jobs as i64
        })?;
        per_queue(
            "gpuplan_queue_waiting_jobs",
            "The queue's jobs not yet final that hold no GPUs.",
            |q| q.waiting as i64,
        )?;
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let e = &mut enc;
        single(
            e,
            "gpuplan_rounds",
            "Rounds started since the daemon started (planned or not).",
            None,
            ConstCounter::new(self.rounds),
        )?;
        if let Some(r) = &self.last_round {
            last_round(e, r)?;
        }
        self.job_families(e)?;
        family(
            e,
            "gpuplan_node_gpus",
            "GPUs the device backend listed on the node at the last collection (a GPU that fell off the bus is not listed).",
            None,
            self.nodes
                .iter()
                .map(|n| (n.labels.clone(), ConstGauge::new(n.gpus))),
        )?;
        family(
            e,
            "gpuplan_node_healthy_gpus",
            "Healthy GPUs on the node at the last collection: those the planner may use.",
            None,
            self.nodes
                .iter()
                .map(|n| (n.labels.clone(), ConstGauge::new(n.healthy_gpus))),
        )?;
        if !self.queues.is_empty() {
            self.queue_families(e)?;
        }
        family(
            e,
            "gpuplan_node_healthy",
            "1 if every GPU listed on the node is healthy, else 0.",
            None,
            self.nodes.iter().map(|n| {
                (
                    n.labels.clone(),
                    ConstGauge::new(i64::from(n.healthy_gpus == n.gpus)),
                )
            }),
        )?;
        Ok(())
    }
}

/// A daemon on fake devices and the scripted engine, on a manual clock:
/// real rounds with the greedy planner, nothing sleeps.
#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use gpuplan_core::JobId;

    use super::*;
    use crate::clock::ManualClock;
    use crate::daemon::{Config, SharedDaemon};
    use crate::device::{FakeDevices, Fault};
    use crate::driver::RoundDriver;
    use crate::engine::FakeEngine;
    use crate::jobs::Report;
    use crate::spec::JobSubmission;

    struct Rig {
        dir: std::path::PathBuf,
        clock: ManualClock,
        shared: SharedDaemon,
        driver: RoundDriver,
        rt: tokio::runtime::Runtime,
    }

    impl Rig {
        /// Job names shown (`--metrics-job-labels`), as the tests below read them.
        fn new(tag: &str) -> Rig {
            Rig::with(tag, "greedy", (2, 4), |c| {
                c.metrics_job_names = crate::daemon::JobNames::Shown
            })
        }

        /// A rig with `planner` on `nodes` fake NODESxGPUS, its config
        /// changed by `set` first.
        fn with(tag: &str, planner: &str, nodes: (u32, u32), set: impl FnOnce(&mut Config)) -> Rig {
            let dir = std::env::temp_dir().join(format!("gpuplan-metrics-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let clock = ManualClock::new(1_000.0);
            let mut cfg = Config::new(dir.clone(), planner);
            set(&mut cfg);
            let d = Daemon::open_with_clock(
                cfg,
                Box::new(FakeDevices::new(nodes.0, nodes.1)),
                Box::new(FakeEngine::new(clock.clone())),
                std::sync::Arc::new(clock.clone()),
            )
            .unwrap();
            let shared = SharedDaemon::new(d);
            let driver = RoundDriver::new(shared.clone()).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            Rig {
                dir,
                clock,
                shared,
                driver,
                rt,
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Daemon> {
            self.shared.lock()
        }

        /// What the round loop does at the clock's time (a round, when one
        /// is due); the stats of the last round.
        fn round(&mut self) -> RoundStats {
            self.rt.block_on(self.driver.run_rounds(async {}));
            self.lock().last_round().cloned().unwrap_or_default()
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn job(name: &str, min: u32, max: u32) -> JobSubmission {
        JobSubmission::from_toml(
            &format!(
                "name = {}\ncommand = \"run=100000\"\nmin_gpus = {min}\nmax_gpus = {max}\nbatch_size = 64\nmax_batch_size = 512\n",
                toml_str(name)
            ),
            "t",
        )
        .unwrap()
    }

    fn toml_str(s: &str) -> String {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }

    /// Series (name and labels, as encoded) → value.
    fn scrape(d: &Daemon) -> BTreeMap<String, f64> {
        let text = Snapshot::of(d).render().unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    fn job_series(name: &str, d: &Daemon, id: JobId) -> String {
        let n = d
            .view(id)
            .unwrap()
            .name
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        format!("{name}{{job_id=\"{}\",job_name=\"{n}\"}}", id.0)
    }

    /// Issue 49, item 6: `/metrics` needs no token, so by default its job
    /// series carry ids only; names only with `--metrics-job-labels`.
    #[test]
    fn job_names_are_shown_only_when_asked() {
        let rig = Rig::with("names", "greedy", (1, 4), |_| {});
        let id = rig.lock().submit(job("secret-project", 1, 1)).unwrap().0;
        let text = Snapshot::of(&rig.lock()).render().unwrap();
        assert!(!text.contains("secret-project"), "{text}");
        assert!(
            text.contains(&format!("gpuplan_job_gpus{{job_id=\"{}\"}} 0", id.0)),
            "{text}"
        );
        let rig = Rig::new("names-shown");
        rig.lock().submit(job("secret-project", 1, 1)).unwrap();
        assert!(Snapshot::of(&rig.lock())
            .render()
            .unwrap()
            .contains("job_name=\"secret-project\""));
    }

    #[test]
    fn a_round_shows_in_the_metrics_as_the_daemon_holds_it() {
        let mut rig = Rig::new("round");
        let before = scrape(&rig.lock());
        assert_eq!(before["gpuplan_rounds_total"], 0.0);
        assert!(
            !before.keys().any(|k| k.starts_with("gpuplan_round_")),
            "no round yet"
        );
        assert_eq!(before["gpuplan_jobs{phase=\"queued\"}"], 0.0);

        let ids: Vec<JobId> = [
            job("wide", 4, 4),
            job("flex", 1, 4),
            job("a \"quoted\" \\ name", 1, 2),
            job("too big to fit now", 8, 8),
        ]
        .into_iter()
        .map(|s| rig.lock().submit(s).unwrap().0)
        .collect();
        // Jobs that waited a while are worth starting (Pollux's restart
        // factor is 0 for a job of age 0).
        rig.clock.advance(600.0);
        let st = rig.round();
        let guard = rig.lock();
        let d = &*guard;
        let m = scrape(d);

        assert_eq!(m["gpuplan_rounds_total"], 1.0);
        let status = st.status.expect("a plan was made").as_str();
        for s in ROUND_STATUSES {
            let want = if s == status { 1.0 } else { 0.0 };
            assert_eq!(m[&format!("gpuplan_round_status{{status=\"{s}\"}}")], want, "{s}");
        }
        assert_eq!(m["gpuplan_round_plan_seconds"], st.plan_ms / 1e3);
        assert_eq!(m["gpuplan_round_active_jobs"], 4.0);
        assert!(m["gpuplan_round_objective"] > 0.0);
        assert_eq!(Some(m["gpuplan_round_objective"]), st.objective);

        // GPUs per job are the plan's, as the job table holds them.
        let mut held = 0.0;
        for id in &ids {
            let v = d.view(*id).unwrap();
            let gpus = m[&job_series("gpuplan_job_gpus", d, *id)];
            assert_eq!(gpus, v.gpus.len() as f64, "{v:?}");
            assert_eq!(m[&job_series("gpuplan_job_restarts_total", d, *id)], 0.0);
            held += gpus;
        }
        let distinct: BTreeSet<String> = d.views().into_iter().flat_map(|v| v.gpus).collect();
        assert_eq!(held, distinct.len() as f64, "no GPU counted twice");
        assert!(held >= 6.0, "{:?}", d.views());
        assert_eq!(
            m[&job_series("gpuplan_job_gpus", d, ids[0])],
            4.0,
            "min = max = 4"
        );
        assert_eq!(
            m[&job_series("gpuplan_job_gpus", d, ids[3])],
            0.0,
            "no room for 8"
        );

        // Jobs by phase match the views, every phase listed.
        let views = d.views();
        for p in Phase::ALL.map(Phase::as_str) {
            let n = views.iter().filter(|v| v.phase == p).count();
            assert_eq!(m[&format!("gpuplan_jobs{{phase=\"{p}\"}}")], n as f64, "{p}");
        }
        assert_eq!(m["gpuplan_jobs{phase=\"running\"}"], 3.0);
        assert_eq!(m["gpuplan_jobs{phase=\"queued\"}"], 1.0);

        // Two nodes of four, all healthy.
        let nodes: Vec<&String> = m.keys().filter(|k| k.starts_with("gpuplan_node_gpus{")).collect();
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        for n in ["fake0", "fake1"] {
            assert_eq!(m[&format!("gpuplan_node_gpus{{node=\"{n}\"}}")], 4.0);
            assert_eq!(m[&format!("gpuplan_node_healthy_gpus{{node=\"{n}\"}}")], 4.0);
            assert_eq!(m[&format!("gpuplan_node_healthy{{node=\"{n}\"}}")], 1.0);
        }
        // No job has reported, so no goodput is predicted yet.
        assert!(!m.keys().any(|k| k.starts_with("gpuplan_job_goodput")));
    }

    #[test]
    fn goodput_faults_and_finished_jobs_show_after_the_next_round() {
        let mut rig = Rig::new("later");
        let (a, _) = rig.lock().submit(job("a", 1, 4)).unwrap();
        let (b, _) = rig.lock().submit(job("b", 1, 4)).unwrap();
        rig.clock.advance(600.0);
        rig.round();
        let mut d = rig.lock();
        let local_bsz = d.view(a).unwrap().local_bsz;
        assert!(local_bsz > 0, "{:?}", d.view(a));
        let report = |local_bsz, step| Report {
            step: Some(step),
            step_time_s: Some(0.25),
            local_bsz: Some(local_bsz),
            grad_sqr: Some(1.0),
            grad_var: Some(4.0),
            progress: Some(640.0),
            ..Report::default()
        };
        d.report(a, report(local_bsz, 10)).unwrap();
        d.cancel(b).unwrap();
        d.inject("GPU-fake-1-0", Fault::Unhealthy).unwrap();
        drop(d);
        // The next round is due one interval on.
        rig.clock.advance(60.0);
        rig.round();
        let mut d = rig.lock();
        d.tick().unwrap();
        let m = scrape(&d);

        let v = d.view(a).unwrap();
        assert!(v.model.is_some(), "the round fitted a's model");
        let goodput = m[&job_series("gpuplan_job_goodput_examples_per_second", &d, a)];
        assert!(goodput > 0.0 && goodput.is_finite(), "{goodput}");
        assert_eq!(m[&job_series("gpuplan_job_gpus", &d, a)], v.gpus.len() as f64);
        // A report between rounds drops the job's cached fit; the metric
        // keeps the model the round planned with.
        let local_bsz = d.view(a).unwrap().local_bsz;
        d.report(a, report(local_bsz, 20)).unwrap();
        assert!(
            d.view(a).unwrap().model.is_none(),
            "the fit waits for the next round"
        );
        let again = scrape(&d);
        assert_eq!(
            again[&job_series("gpuplan_job_goodput_examples_per_second", &d, a)],
            goodput
        );

        assert_eq!(d.view(b).unwrap().phase, "cancelled");
        assert!(
            !m.keys().any(|k| k.contains("job_id=\"2\"")),
            "a final job is not listed"
        );
        assert_eq!(m["gpuplan_jobs{phase=\"cancelled\"}"], 1.0);

        assert_eq!(m["gpuplan_node_gpus{node=\"fake1\"}"], 4.0);
        assert_eq!(m["gpuplan_node_healthy_gpus{node=\"fake1\"}"], 3.0);
        assert_eq!(m["gpuplan_node_healthy{node=\"fake1\"}"], 0.0);
        assert_eq!(m["gpuplan_node_healthy{node=\"fake0\"}"], 1.0);
        assert_eq!(m["gpuplan_rounds_total"], 2.0);
    }

    /// Stats journaled or sent before objective and gap existed still load.
    #[test]
    fn round_stats_without_objective_or_gap_load() {
        let old = r#"{"round":3,"collect_ms":1.0,"plan_ms":2.0,"apply_ms":0.5,"active_jobs":1,"healthy_gpus":4,"changed_jobs":1,"status":"optimal","note":null}"#;
        let st: RoundStats = serde_json::from_str(old).unwrap();
        assert_eq!((st.objective, st.gap, st.round), (None, None, 3));
    }

    /// The issue's two teams on one 8-GPU node (docs/tenants.md): queues
    /// a and b guaranteed 4 each. a's elastic job takes all 8 while b is
    /// idle; b submits a 4-GPU job, and within one round a's job is down
    /// to 4 and b's runs. A submission to a queue the daemon lacks is
    /// refused with the list; the job view and /metrics say who holds what.
    #[test]
    fn a_queue_gets_its_guarantee_back_within_one_round() {
        use gpuplan_core::queue::Queue;
        for planner in ["gpuplan-mip", "greedy", "fifo"] {
            let mut rig = Rig::with(&format!("queues-{planner}"), planner, (1, 8), |cfg| {
                cfg.queues = ["a", "b"]
                    .map(|n| Queue {
                        guarantee: 4,
                        ..Queue::new(n)
                    })
                    .to_vec();
            });
            let submit = |rig: &Rig, text: &str| {
                let spec = JobSubmission::from_toml(text, "t").unwrap();
                rig.lock().submit(spec)
            };
            let a = submit(
                &rig,
                "name = \"a\"\ncommand = \"run=100000\"\nmin_gpus = 1\nmax_gpus = 8\nbatch_size = 64\nmax_batch_size = 4096\nqueue = \"a\"\n",
            )
            .unwrap()
            .0;
            let gpus = |rig: &Rig, id: JobId| rig.lock().view(id).unwrap().gpus.len();
            // A new elastic job grows round by round (the exploration cap);
            // fifo runs it at its request (max_gpus) at once.
            rig.clock.advance(600.0);
            for _ in 0..6 {
                rig.round();
                if gpus(&rig, a) == 8 {
                    break;
                }
                rig.clock.advance(60.0);
            }
            assert_eq!(gpus(&rig, a), 8, "{planner}: b is idle, a borrows its guarantee");
            let before = rig.lock().rounds();
            let e = submit(
                &rig,
                "name = \"x\"\ncommand = \"run=1\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\nqueue = \"c\"\n",
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("request:queue: no queue named 'c'; queues: a, b"),
                "{e}"
            );
            let b = submit(
                &rig,
                "name = \"b\"\ncommand = \"run=100000\"\nmin_gpus = 4\nmax_gpus = 4\nbatch_size = 64\nqueue = \"b\"\n",
            )
            .unwrap()
            .0;
            rig.clock.advance(60.0);
            rig.round();
            // The stop of a's old attempt and the relaunches follow in ticks.
            for _ in 0..20 {
                rig.clock.advance(0.5);
                rig.round();
            }
            assert_eq!(
                rig.lock().rounds(),
                before + 1,
                "{planner}: one round after b's submission"
            );
            assert_eq!((gpus(&rig, a), gpus(&rig, b)), (4, 4), "{planner}");
            let v = rig.lock().view(b).unwrap();
            assert_eq!(
                (v.phase.as_str(), v.queue.as_deref()),
                ("running", Some("b")),
                "{planner}"
            );
            let m = scrape(&rig.lock());
            for (series, value) in [
                ("gpuplan_queue_gpus{queue=\"a\"}", 4.0),
                ("gpuplan_queue_gpus{queue=\"b\"}", 4.0),
                ("gpuplan_queue_guarantee_gpus{queue=\"b\"}", 4.0),
                ("gpuplan_queue_borrowed_gpus{queue=\"a\"}", 0.0),
                ("gpuplan_queue_waiting_jobs{queue=\"b\"}", 0.0),
            ] {
                assert_eq!(m.get(series), Some(&value), "{planner}: {series} in {m:?}");
            }
        }
    }
}
