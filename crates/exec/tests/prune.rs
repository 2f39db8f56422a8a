//! Finished jobs are pruned after `--keep-finished` (issue 49, item 6):
//! out of the job table, the journal (a restart does not bring them back)
//! and the disk; their ids are never given out again. A scripted engine on
//! a manual clock: nothing sleeps.

use gpuplan_core::{Allocation, JobId, NodeId, Plan, PlanStatus};
use gpuplan_exec::engine::FakeEngine;
use gpuplan_exec::{Config, Daemon, FakeDevices, JobSubmission, Keep, ManualClock};
use gpuplan_solve::Decision;

fn open(dir: &std::path::Path, clock: &ManualClock, keep: Keep) -> Daemon {
    let mut cfg = Config::new(dir.to_path_buf(), "greedy");
    cfg.keep_finished = keep;
    Daemon::open_with_clock(
        cfg,
        Box::new(FakeDevices::new(1, 4)),
        Box::new(FakeEngine::new(clock.clone())),
        std::sync::Arc::new(clock.clone()),
    )
    .unwrap()
}

fn job(name: &str) -> JobSubmission {
    JobSubmission::from_toml(
        &format!("name = \"{name}\"\ncommand = \"run=1\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n"),
        "t",
    )
    .unwrap()
}

/// Give each job one GPU of node 0 by hand and launch them.
fn run(d: &mut Daemon, ids: &[JobId]) {
    let prep = d.prepare().unwrap().unwrap();
    let mut plan = Plan::new("hand", PlanStatus::Feasible);
    for id in ids {
        plan.allocations
            .insert(*id, Allocation::from_counts(&[(NodeId(0), 1)]));
    }
    gpuplan_core::bind_plan(&prep.round, &mut plan);
    let decision = Decision::new(&prep.round, plan);
    d.apply(prep, Ok(decision)).unwrap();
    d.tick().unwrap();
}

#[test]
fn finished_jobs_leave_after_their_retention_and_do_not_come_back() {
    let dir = std::env::temp_dir().join(format!("gpuplan-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(1_000.0);
    let mut d = open(&dir, &clock, Keep::parse("1d").unwrap());
    let a = d.submit(job("a")).unwrap().0;
    let b = d.submit(job("b")).unwrap().0;
    run(&mut d, &[a, b]);
    clock.advance(2.0);
    d.tick().unwrap();
    let keep = d.submit(job("waiting")).unwrap().0;
    assert!(d.view(a).unwrap().status.is_final());
    std::fs::create_dir_all(dir.join(format!("jobs/{}/attempt-1", a.0))).unwrap();
    // Within a day they stay.
    clock.advance(3_600.0);
    d.prepare().unwrap();
    assert!(d.view(a).is_some() && d.view(b).is_some());
    // Past it they go, with their directories (removed by the next
    // round's effects, off the daemon's lock).
    clock.advance(86_400.0);
    d.prepare().unwrap();
    assert!(d.view(a).is_none() && d.view(b).is_none(), "{:?}", d.views());
    assert!(d.view(keep).is_some(), "a job not finished is never pruned");
    d.prepare().unwrap();
    assert!(!dir.join(format!("jobs/{}", a.0)).exists());
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(!journal.contains("\"name\":\"a\""), "{journal}");
    drop(d);
    // A restart replays the journal: they stay gone, and ids move on.
    let mut d = open(&dir, &clock, Keep::default());
    assert_eq!(d.views().len(), 1);
    let next = d.submit(job("next")).unwrap().0;
    assert_eq!(next.0, keep.0 + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_count_keeps_the_latest_finished_jobs() {
    let dir = std::env::temp_dir().join(format!("gpuplan-prune-count-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(1_000.0);
    let mut d = open(&dir, &clock, Keep::parse("1").unwrap());
    let a = d.submit(job("a")).unwrap().0;
    run(&mut d, &[a]);
    clock.advance(2.0);
    d.tick().unwrap();
    let b = d.submit(job("b")).unwrap().0;
    run(&mut d, &[b]);
    clock.advance(2.0);
    d.tick().unwrap();
    d.prepare().unwrap();
    assert!(d.view(a).is_none(), "the older one goes");
    assert!(d.view(b).is_some_and(|v| v.status.is_final()), "the latest stays");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retentions_parse_as_durations_or_counts() {
    assert_eq!(Keep::parse("7d"), Ok(Keep::For(604_800.0)));
    assert_eq!(Keep::parse("12h"), Ok(Keep::For(43_200.0)));
    assert_eq!(Keep::parse("30m"), Ok(Keep::For(1_800.0)));
    assert_eq!(Keep::parse("90s"), Ok(Keep::For(90.0)));
    assert_eq!(Keep::parse("100"), Ok(Keep::Last(100)));
    for bad in ["", "7w", "-1d", "d", "1.5", "nand"] {
        assert!(Keep::parse(bad).is_err(), "{bad}");
    }
}
