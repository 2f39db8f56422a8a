//! Supervision over the job-level engine trait alone: a scripted engine
//! with no processes, on a manual clock. Nothing here sleeps. (Here, not in
//! `supervise.rs`, because it drives the whole daemon, which sits above
//! the supervisor.)
use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus};
use gpuplan_exec::engine::{FakeEngine, Stop};
use gpuplan_exec::{Config, Daemon, FakeDevices, JobStatus, JobSubmission, ManualClock};
use gpuplan_solve::Decision;

struct Rig {
    dir: std::path::PathBuf,
    clock: ManualClock,
    engine: FakeEngine,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("gpuplan-sup-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let clock = ManualClock::new(1_000.0);
        let engine = FakeEngine::new(clock.clone());
        Rig { dir, clock, engine }
    }

    fn daemon(&self) -> Daemon {
        let mut cfg = Config::new(self.dir.clone(), "greedy");
        cfg.grace_s = 30.0;
        cfg.backoff_s = 10.0;
        cfg.max_crashes = 2;
        Daemon::open_with_clock(
            cfg,
            Box::new(FakeDevices::new(1, 4)),
            Box::new(self.engine.clone()),
            std::sync::Arc::new(self.clock.clone()),
        )
        .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn job(command: &str) -> JobSubmission {
    JobSubmission::from_toml(
        &format!("name = \"f\"\ncommand = \"{command}\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n"),
        "t",
    )
    .unwrap()
}

/// Plan `k` GPUs of node 0 for a job by hand, as if the planner had, and
/// tick (the launch).
fn give(d: &mut Daemon, id: JobId, k: u32) {
    let prep = d.prepare().unwrap().unwrap();
    let mut plan = Plan::new("hand", PlanStatus::Feasible);
    plan.allocations
        .insert(id, Allocation::from_counts(&[(NodeId(0), k)]));
    gpuplan_core::bind_plan(&prep.round, &mut plan);
    let decision = Decision::new(&prep.round, plan);
    d.apply(prep, Ok(decision)).unwrap();
    d.tick().unwrap();
}

#[test]
fn the_engine_gets_the_protocol_and_owns_the_rest() {
    let rig = Rig::new("env");
    let mut d = rig.daemon();
    let (id, token) = d.submit(job("run=100")).unwrap();
    give(&mut d, id, 2);
    let started = rig.engine.started();
    assert_eq!(started.len(), 1);
    let s = &started[0];
    assert_eq!((s.job, s.attempt, s.ranks()), (id, 1, 2));
    let keys: Vec<&str> = s.env.iter().map(|(k, _)| k.as_str()).collect();
    assert!(keys.contains(&"GPUPLAN_REPORT_URL") && keys.contains(&"GPUPLAN_LOCAL_BSZ"));
    // The token travels beside the environment, for the engine's file.
    assert_eq!(s.token, token);
    assert!(!s
        .env
        .iter()
        .any(|(k, v)| k == "GPUPLAN_JOB_TOKEN" || *v == s.token));
    for engine_owned in [
        "MASTER_ADDR",
        "MASTER_PORT",
        "CUDA_VISIBLE_DEVICES",
        "GPUPLAN_DONE_FILE",
    ] {
        assert!(!keys.contains(&engine_owned), "{engine_owned} is the engine's");
    }
    assert_eq!(d.view(id).unwrap().phase, "running");
}

#[test]
fn crashes_back_off_on_the_clock_then_fail() {
    let rig = Rig::new("crash");
    let mut d = rig.daemon();
    let (id, _) = d.submit(job("run=5 exit=3")).unwrap();
    give(&mut d, id, 1);
    rig.clock.advance(4.0);
    d.tick().unwrap();
    assert_eq!(d.view(id).unwrap().phase, "running");
    rig.clock.advance(1.0);
    d.tick().unwrap();
    let v = d.view(id).unwrap();
    assert_eq!((v.phase.as_str(), v.crashes), ("backoff", 1));
    assert!(v.reason.unwrap().contains("code 3"));
    assert_eq!(v.last_log, vec!["fake rank 0: run=5 exit=3".to_string()]);
    assert!(d.prepare().unwrap().is_none(), "waits out its back-off");
    rig.clock.advance(10.0);
    give(&mut d, id, 1);
    assert_eq!(d.jobs().next().unwrap().attempts, 2);
    rig.clock.advance(5.0);
    d.tick().unwrap();
    let v = d.view(id).unwrap();
    assert_eq!((v.status, v.crashes), (JobStatus::Failed, 2));
}

#[test]
fn a_stop_escalates_after_the_grace_period_only() {
    let rig = Rig::new("grace");
    let mut d = rig.daemon();
    let (id, _) = d.submit(job("ignore-term")).unwrap();
    give(&mut d, id, 1);
    d.cancel(id).unwrap();
    rig.clock.advance(29.0);
    d.tick().unwrap();
    assert_eq!(d.view(id).unwrap().phase, "stopping");
    assert_eq!(rig.engine.stops(), vec![(id, 1, Stop::Graceful)]);
    rig.clock.advance(1.0);
    d.tick().unwrap();
    assert_eq!(rig.engine.stops().last(), Some(&(id, 1, Stop::Now)));
    d.tick().unwrap();
    assert_eq!(d.view(id).unwrap().phase, "cancelled");
}

#[test]
fn a_restarted_daemon_adopts_through_the_engine() {
    let rig = Rig::new("adopt");
    let mut d = rig.daemon();
    let (id, _) = d.submit(job("run=50")).unwrap();
    give(&mut d, id, 3);
    let before = d.jobs().next().unwrap().attempt.clone().unwrap();
    drop(d);
    let mut d = rig.daemon();
    let after = d.jobs().next().unwrap().attempt.clone().unwrap();
    assert_eq!(after.handle, before.handle, "the same ranks, found again");
    rig.clock.advance(50.0);
    d.tick().unwrap();
    assert_eq!(d.view(id).unwrap().status, JobStatus::Completed);
    assert!(rig.engine.stops().is_empty());
}

#[test]
fn a_done_job_completes_though_a_stop_ended_it() {
    let rig = Rig::new("done");
    let mut d = rig.daemon();
    let (id, _) = d.submit(job("done")).unwrap();
    give(&mut d, id, 1);
    give(&mut d, id, 2);
    d.tick().unwrap();
    let v = d.view(id).unwrap();
    assert_eq!((v.status, v.attempts), (JobStatus::Completed, 1));
}

/// Issue 33, item 3: a launch the engine refuses (locally: out of file
/// descriptors) is a crash retried after the back-off, failed only at
/// `max_crashes` (2 here), not on its first try.
#[test]
fn a_refused_start_is_a_crash_retried_with_back_off() {
    let rig = Rig::new("refuse");
    let mut d = rig.daemon();
    let (id, _) = d.submit(job("fail-start")).unwrap();
    give(&mut d, id, 1);
    let v = d.view(id).unwrap();
    assert_eq!(
        (v.status, v.phase.as_str(), v.crashes),
        (JobStatus::Queued, "backoff", 1)
    );
    let why = v.reason.unwrap();
    assert!(
        why.starts_with("launch failed") && why.contains("crash 1 of 2, restarting after 10.0 s"),
        "{why}"
    );
    rig.clock.advance(10.0);
    give(&mut d, id, 1);
    let v = d.view(id).unwrap();
    assert_eq!((v.status, v.crashes), (JobStatus::Failed, 2));
    assert!(v.reason.unwrap().contains("failed after 2 crashes"));
}
