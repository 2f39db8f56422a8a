//! Drift case 3 of issue 12: whether a job's batch size adapts is decided
//! once (`gpuplan_solve::BatchTarget::for_job`), and the simulator
//! and the daemon agree on it for the same job under every planner. This
//! test sits at the root because only the binary sees both drivers.

use gpuplan_core::{JobId, JobSpec};
use gpuplan_exec::{batch_target as exec_target, JobSubmission};
use gpuplan_sim::{batch_target as sim_target, Work, WorkloadJob};
use gpuplan_solve::{registry, BatchTarget};

fn sim_job(app: &str, work: Work) -> WorkloadJob {
    WorkloadJob {
        spec: JobSpec {
            id: JobId(0),
            name: "j".into(),
            app: app.into(),
            submit_s: 0.0,
            requested_gpus: 2,
            batch_size: 64,
            min_gpus: 1,
            max_gpus: 8,
            preemptible: true,
            queue: None,
        },
        work,
        model: None,
        checkpoint_interval_s: None,
    }
}

fn exec_job(max_batch: Option<u32>) -> JobSubmission {
    let extra = max_batch.map_or(String::new(), |m| format!("max_batch_size = {m}\n"));
    JobSubmission::from_toml(
        &format!("name = \"j\"\ncommand = \"true\"\nmin_gpus = 1\nmax_gpus = 8\nbatch_size = 64\n{extra}"),
        "t",
    )
    .unwrap()
}

#[test]
fn sim_and_exec_agree_on_batch_adaptivity_for_every_planner() {
    // (simulated job, the same job as a daemon spec): one whose batch may
    // grow, and two that keep it (a pinned app; a rigid trace job).
    let pairs = [
        (sim_job("bert", Work::Profiled), exec_job(Some(640))),
        (sim_job("ncf", Work::Profiled), exec_job(None)),
        (
            sim_job("rigid", Work::Rigid { duration_s: 60.0 }),
            exec_job(Some(64)),
        ),
    ];
    let mut seen = Vec::new();
    for name in registry::names() {
        let traits = registry::create(name).unwrap().traits();
        for (sim, exec) in &pairs {
            let (s, e) = (sim_target(&traits, sim), exec_target(&traits, exec));
            assert_eq!(s, e, "{name}: {} job", sim.spec.app);
            seen.push(s);
        }
    }
    // Not vacuous: some planner adapts a batch, and fixed planners keep it.
    assert!(seen.contains(&BatchTarget::Adaptive));
    assert!(seen.contains(&BatchTarget::Fixed(64)));
    let tiresias = registry::create("tiresias").unwrap().traits();
    assert_eq!(exec_target(&tiresias, &pairs[0].1), BatchTarget::Fixed(64));
}
