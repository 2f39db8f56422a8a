//! Issue 53 from the command line: `simulate --estimates` writes its
//! records and summary; `trace import-kueue` turns Kueue's manifests into
//! a queues file a simulation runs on, and names FILE:LINE:field on broken
//! ones (exit 2).

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run gpuplan")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuplan-estimates-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn simulate_writes_each_jobs_estimate_and_the_summary() {
    let out = tmp("sim");
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "tiresias",
        "--estimates",
        "--estimate-work",
        "history",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("estimates (History, 14 of 14 jobs"), "{err}");
    let csv = std::fs::read_to_string(out.join("estimates.csv")).unwrap();
    assert_eq!(csv.lines().count(), 15, "{csv}");
    let head = csv.lines().next().unwrap();
    for col in [
        "start_s",
        "actual_start_s",
        "finish_s",
        "finish_lo_s",
        "finish_hi_s",
        "actual_finish_s",
        "source",
    ] {
        assert!(head.split(',').any(|c| c == col), "{col} in {head}");
    }
    let sum: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("estimates.json")).unwrap()).unwrap();
    assert_eq!(sum["estimated"], 14);
    assert_eq!(sum["work"], "history");
    for key in [
        "start_err_p50_s",
        "finish_err_p90_s",
        "finish_in_range",
        "wait_mean_s",
    ] {
        assert!(sum.get(key).is_some(), "{key}: {sum}");
    }
    // Bad flags are refused with the flag's name.
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "fifo",
        "--estimates",
        "--estimate-every",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--estimate-every"));
}

#[test]
fn kueue_queues_import_and_run() {
    let out = tmp("kueue");
    let q = out.join("queues.toml");
    let o = run(&[
        "trace",
        "import-kueue",
        "--cluster-queues",
        "tests/data/kueue/cluster-queues.yaml",
        "--cohorts",
        "tests/data/kueue/cohorts.yaml",
        "--out",
        q.to_str().unwrap(),
    ]);
    ok(&o);
    let text = std::fs::read_to_string(&q).unwrap();
    let queues = gpuplan_core::queue::parse_queues_toml(&text, "queues.toml").unwrap();
    let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["org", "research", "team-a", "team-b", "batch"]);
    // A simulation runs on the operator's quotas.
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "fair-share",
        "--queues",
        q.to_str().unwrap(),
    ]);
    ok(&o);
}

#[test]
fn broken_kueue_manifests_name_file_line_and_field() {
    let out = tmp("broken");
    let q = out.join("queues.toml");
    let o = run(&[
        "trace",
        "import-kueue",
        "--cluster-queues",
        "tests/data/kueue/broken.yaml",
        "--out",
        q.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tests/data/kueue/broken.yaml:14:spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: missing"),
        "{err}"
    );
    assert!(
        err.contains("broken.yaml:15:") && err.contains("borrowingLimit"),
        "{err}"
    );
    assert!(!q.exists(), "nothing written");
}
