//! Runs one explorer scenario natively through the same API the browser
//! calls (microlp, no rayon), so its cost can be profiled with native tools:
//! `cargo run --release -p gpuplan-wasm --example scenario_time -- pollux-mip`.
//! Prints wall time, rounds, planner seconds and the average JCT; with a
//! third argument, writes the per-job results there as JSON (to check that
//! a speed-up changed no result).

use gpuplan_sim::Control;
use gpuplan_wasm::api::{run_scenario, Scenario};

fn main() {
    let policy = std::env::args().nth(1).unwrap_or_else(|| "pollux-mip".into());
    let workload = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "workloads/workload-6".into());
    let scenario = Scenario {
        policy,
        workload,
        ..Scenario::default()
    };
    let t = std::time::Instant::now();
    match run_scenario(&scenario, &mut |_| Control::Continue) {
        Ok(out) => {
            if let Some(path) = std::env::args().nth(3) {
                let jobs = serde_json::to_string_pretty(&out.jobs).expect("results serialise");
                std::fs::write(&path, jobs).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
            }
            let planner: f64 = out.rounds.iter().map(|r| r.record.planner_ms).sum::<f64>() / 1e3;
            println!(
                "{} on {}: {:.2} s wall, {} rounds, planner {:.2} s, avg JCT {:.4} h",
                scenario.policy,
                scenario.workload,
                t.elapsed().as_secs_f64(),
                out.rounds.len(),
                planner,
                out.summary.avg_jct_s / 3600.0
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
