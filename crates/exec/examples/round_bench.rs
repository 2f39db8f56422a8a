//! Executor benchmark (not a test): full rounds (collect, plan, apply) on
//! the fake backend with real `sleep` processes, and the daemon's memory
//! over many rounds. Rounds come from the daemon's own loop on a manual
//! clock, advanced one interval per round, so they run back to back.
//!
//! cargo run --release -p gpuplan-exec --example round_bench -- JOBS NODESxGPUS ROUNDS PLANNER
//! e.g. `-- 1000 16x4 20 pollux-mip` and `-- 24 2x4 10000 pollux-mip`.

use std::time::Instant;

use gpuplan_core::JobId;
use gpuplan_exec::engine::LocalEngine;
use gpuplan_exec::{
    Config, Daemon, FakeDevices, JobStatus, JobSubmission, ManualClock, Report, RoundDriver, SharedDaemon,
};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let jobs: u32 = args.get(1).map_or(1000, |s| s.parse().expect("JOBS"));
    let shape = args.get(2).map_or("16x4", |s| s.as_str());
    let rounds: u64 = args.get(3).map_or(20, |s| s.parse().expect("ROUNDS"));
    let planner_name = args.get(4).map_or("pollux-mip", |s| s.as_str());
    let state = std::env::temp_dir().join(format!("gpuplan-round-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let mut cfg = Config::new(state.clone(), planner_name);
    cfg.grace_s = 0.0;
    cfg.limits.time_limit_s = 1.0;
    let interval_s = cfg.interval_s;
    let clock = ManualClock::new(1_000_000.0);
    let shared = SharedDaemon::new(
        Daemon::open_with_clock(
            cfg,
            Box::new(FakeDevices::parse(shape).expect("NODESxGPUS")),
            Box::new(LocalEngine::new(&state)),
            std::sync::Arc::new(clock.clone()),
        )
        .expect("open daemon"),
    );
    let mut driver = RoundDriver::new(shared.clone()).expect("planner");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut d = shared.lock();
    for i in 0..jobs {
        d.submit(JobSubmission {
            min_runtime_s: None,
            total_progress: None,
            name: format!("j{i}"),
            command: "exec sleep 100000".into(),
            min_gpus: 1,
            max_gpus: 1 + i % 8,
            batch_size: 64,
            app: None,
            model: None,
            max_batch_size: Some(512),
            min_local_bsz: Some(16),
            max_local_bsz: Some(128),
            restart_cost_s: None,
            grace_s: None,
            preemptible: true,
            max_crashes: None,
            uid: None,
            features: None,
            mem_gib: None,
            queue: None,
        })
        .expect("submit");
    }
    // Bounded, so the benchmark's own bookkeeping does not show as daemon growth:
    // the median is over the first 2000 rounds, the max over all.
    let mut times = Vec::with_capacity(2000);
    let mut max_ms = 0.0f64;
    let rss0 = rss_kib();
    let t_all = Instant::now();
    drop(d);
    for r in 1..=rounds {
        let t0 = Instant::now();
        rt.block_on(driver.run_rounds(async {}));
        let t = t0.elapsed().as_secs_f64() * 1e3;
        clock.advance(interval_s);
        let mut d = shared.lock();
        let st = d.last_round().cloned().unwrap_or_default();
        max_ms = max_ms.max(t);
        if times.len() < times.capacity() {
            times.push(t);
        }
        // Running jobs report as the protocol says, so models get fitted.
        let running: Vec<(JobId, u32)> = d
            .jobs()
            .filter(|j| j.status == JobStatus::Running && j.attempt.is_some())
            .map(|j| (j.id, j.gpus.len() as u32))
            .collect();
        for (id, g) in running {
            let _ = d.report(
                id,
                Report {
                    step: Some(r),
                    step_time_s: Some(0.1 + 0.02 * g as f64),
                    accum_time_s: Some(0.1),
                    local_bsz: Some(64),
                    accum_steps: Some(0),
                    grad_sqr: Some(1.0),
                    grad_var: Some(4.0),
                    progress: Some(r as f64),
                    ..Report::default()
                },
            );
        }
        if r == 1 || r % (rounds / 10).max(1) == 0 {
            println!(
                "round {r:>6}: {:8.1} ms (plan {:7.1} ms, status {:?}, changed {}), rss {} KiB",
                t,
                st.plan_ms,
                st.status,
                st.changed_jobs,
                rss_kib()
            );
        }
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let med = sorted[sorted.len() / 2];
    let max = max_ms;
    println!(
        "{jobs} jobs on fake:{shape}, planner {planner_name}: {rounds} rounds in {:.1} s; full round median {med:.1} ms, max {max:.1} ms, first {:.1} ms; rss {rss0} KiB after submit -> {} KiB at the end",
        t_all.elapsed().as_secs_f64(),
        times[0],
        rss_kib(),
    );
    // Stop every process the benchmark started.
    let mut d = shared.lock();
    let ids: Vec<JobId> = d.jobs().map(|j| j.id).collect();
    for id in ids {
        let _ = d.cancel(id);
    }
    for _ in 0..50 {
        d.tick().expect("tick");
        if d.jobs().all(|j| j.attempt.is_none()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&state);
}
