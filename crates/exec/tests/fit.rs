//! Issue 49, item 4: the daemon refuses at submit a job that can never run
//! by core's one fit rule (a job runs on one GPU type; its queues' limits),
//! the rule the simulator applies to a workload. A scripted engine on a
//! manual clock: nothing runs, nothing sleeps.
use gpuplan_core::queue::Queue;
use gpuplan_exec::engine::FakeEngine;
use gpuplan_exec::{Config, Daemon, ExecError, FakeDevices, JobSubmission, ManualClock};

/// A daemon on `devices` (a `fake:` shape) under `queues`, in a fresh
/// state directory that the returned guard removes.
fn daemon(tag: &str, devices: &str, queues: Vec<Queue>) -> (Daemon, Dir) {
    let dir = std::env::temp_dir().join(format!("gpuplan-fit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(1_000.0);
    let mut cfg = Config::new(dir.clone(), "greedy");
    cfg.queues = queues;
    let d = Daemon::open_with_clock(
        cfg,
        Box::new(FakeDevices::parse(devices).unwrap()),
        Box::new(FakeEngine::new(clock.clone())),
        std::sync::Arc::new(clock),
    )
    .unwrap();
    (d, Dir(dir))
}

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn job(min_gpus: u32, queue: Option<&str>) -> JobSubmission {
    let mut j = JobSubmission::from_toml(
        "name = \"f\"\ncommand = \"run=100\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n",
        "t",
    )
    .unwrap();
    j.min_gpus = min_gpus;
    j.max_gpus = min_gpus;
    j.queue = queue.map(str::to_string);
    j
}

/// On 4 T4s and 4 A100s, 8 GPUs in all, a job of 5 can never run (it
/// would mix types): refused, naming `min_gpus` and the largest type,
/// nothing journaled. One of 4 is taken.
#[test]
fn a_job_larger_than_every_gpu_type_is_refused_at_submit() {
    let (mut d, _dir) = daemon("types", "1x4:t4+1x4:a100", Vec::new());
    for min in [5, 6, 8] {
        let e = d.submit(job(min, None)).unwrap_err();
        assert!(matches!(e, ExecError::Spec(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!(
                "request:min_gpus: {min} GPUs can never fit: a job runs on one GPU type"
            )) && msg.contains("a100")
                && msg.contains("have 4 GPUs each (8 GPUs on 2 nodes in all)"),
            "{msg}"
        );
    }
    assert_eq!(d.views().len(), 0, "nothing journaled");
    let (id, _) = d.submit(job(4, None)).unwrap();
    assert_eq!(d.view(id).unwrap().phase, "queued");
}

/// A job larger than its queue may ever hold (guarantee plus borrowing
/// limit) is refused too, naming the queue; one within it is taken.
#[test]
fn a_job_larger_than_its_queues_limit_is_refused_at_submit() {
    let team = Queue {
        guarantee: 1,
        borrow_limit: Some(2),
        ..Queue::new("team")
    };
    let (mut d, _dir) = daemon("queue", "2x4:a100", vec![team]);
    let msg = d.submit(job(4, Some("team"))).unwrap_err().to_string();
    assert!(
        msg.contains("request:min_gpus: 4 GPUs can never fit: queue team may hold at most 3"),
        "{msg}"
    );
    assert!(d.submit(job(3, Some("team"))).is_ok());
    assert!(d.submit(job(8, None)).is_ok(), "default has no limit");
}
