//! End-to-end tests of the `gpuplan` binary: contracts (flags, JSON keys,
//! exit codes) and bad-input messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpuplan"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    bin()
        .args(args)
        .current_dir(root())
        .output()
        .expect("run gpuplan")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

#[test]
fn models_fit_reaches_ten_percent_on_every_app() {
    for app in ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"] {
        let v = json(&run(&["models", "fit", "--app", app, "--format", "json"]));
        for key in ["app", "params", "points", "median_rel_err", "max_rel_err"] {
            assert!(v.get(key).is_some(), "{app}: missing key {key}");
        }
        let med = v["median_rel_err"].as_f64().unwrap();
        assert!(med <= 0.10, "{app}: median relative error {med}");
        assert!(v["points"].as_u64().unwrap() > 100);
    }
}

#[test]
fn models_show_prints_goodput() {
    let v = json(&run(&[
        "models", "show", "--app", "imagenet", "--gpus", "8", "--nodes", "2", "--format", "json",
    ]));
    assert!(v["goodput"].as_f64().unwrap() > 0.0);
    assert!(v["speedup"].as_f64().unwrap() > 1.0);
    let o = run(&["models", "show", "--app", "nope", "--gpus", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("valid: bert, cifar10"), "{}", stderr(&o));
}

/// Copy the bundled cifar10 profile into a temp dir, with one file replaced.
fn broken_traces(name: &str, file: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuplan-test-{name}-{}", std::process::id()));
    let app = dir.join("cifar10");
    std::fs::create_dir_all(&app).unwrap();
    let src = root().join("traces/pollux/cifar10");
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let fname = e.file_name().to_string_lossy().to_string();
        let text = if fname == file { edit(&text) } else { text };
        std::fs::write(app.join(&fname), text).unwrap();
    }
    dir
}

fn replace_line(text: &str, line: usize, f: impl Fn(&str) -> String) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { f(l) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bad_profiles_name_file_line_and_field() {
    type Edit = Box<dyn Fn(&str) -> String>;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "nan",
            "placements.csv",
            Box::new(|t| replace_line(t, 3, |_| "1,45,NaN,0.0005".into())),
            "placements.csv:3:step_time",
        ),
        (
            "neg",
            "placements.csv",
            Box::new(|t| replace_line(t, 4, |_| "1,64,-0.5,0.0005".into())),
            "placements.csv:4:step_time",
        ),
        (
            "col",
            "scalability.csv",
            Box::new(|t| replace_line(t, 1, |_| "num_nodes,num_replicas,local_bsz,step_time".into())),
            "scalability.csv:1:sync_time",
        ),
        (
            "text",
            "validation-128.csv",
            Box::new(|t| replace_line(t, 5, |l| l.replacen(',', ",x", 1))),
            "validation-128.csv:5:",
        ),
    ];
    for (name, file, edit, want) in cases {
        let dir = broken_traces(name, file, edit);
        let o = run(&[
            "models",
            "fit",
            "--app",
            "cifar10",
            "--traces",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "{name}: wanted '{want}' in: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{name}");
        std::fs::remove_dir_all(&dir).ok();
    }
    // A missing file is named too.
    let dir = broken_traces("missing", "none", |t| t.to_string());
    std::fs::remove_file(dir.join("cifar10/scalability.csv")).unwrap();
    let o = run(&[
        "models",
        "fit",
        "--app",
        "cifar10",
        "--traces",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("scalability.csv"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_workload_rows_are_reported_with_position() {
    let dir = std::env::temp_dir().join(format!("gpuplan-badwl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.csv");
    std::fs::write(
        &path,
        "name,time,application,num_replicas,batch_size\na,10,cifar10,2,256\nb,-3,cifar10,2,256\nc,20,resnet,2,256\nd,30,ncf,zero,256\n",
    )
    .unwrap();
    let o = run(&[
        "simulate",
        "--workload",
        path.to_str().unwrap(),
        "--policy",
        "fifo",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("bad.csv:3:time"), "{e}");
    assert!(
        e.contains("bad.csv:4:application: unknown application 'resnet'; valid: bert"),
        "{e}"
    );
    assert!(e.contains("bad.csv:5:num_replicas"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unknown_policy_lists_valid_ones() {
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "magic",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown planner 'magic'") && e.contains("tiresias") && e.contains("pollux-ga"),
        "{e}"
    );
}

fn simulate_json(policy: &str, out: Option<&Path>) -> serde_json::Value {
    let mut args = vec![
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        policy,
        "--format",
        "json",
    ];
    let o;
    if let Some(out) = out {
        o = out.to_str().unwrap().to_string();
        args.extend(["--out", &o]);
        return json(&run(&args));
    }
    json(&run(&args))
}

/// `gpuplan policies` is the registry: every entry's name first on its
/// line, its description and its parameters beside it (and as JSON).
#[test]
fn policies_lists_each_registered_planner_with_its_description() {
    let table = String::from_utf8(run(&["policies"]).stdout).unwrap();
    let v = json(&run(&["policies", "--format", "json"]));
    let list = v.as_array().unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), list.len(), "{table}");
    for (line, p) in lines.iter().zip(list) {
        let name = p["name"].as_str().unwrap();
        let description = p["description"].as_str().unwrap();
        assert_eq!(line.split_whitespace().next(), Some(name));
        assert!(line.contains(description), "{line}");
        assert!(!description.is_empty(), "{name}");
    }
    let mip = list.iter().find(|p| p["name"] == "gpuplan-mip").unwrap();
    assert_eq!(
        mip["params"],
        serde_json::json!({"exploration_factor": 4, "restart_weight": 2.0})
    );
    assert!(table
        .lines()
        .any(|l| l.starts_with("gpuplan-mip ") && l.ends_with("[exploration_factor=4, restart_weight=2.0]")));
    let pollux = list.iter().find(|p| p["name"] == "pollux-mip").unwrap();
    assert_eq!(pollux["params"], serde_json::json!({}));
    // Which planners share GPUs comes from each planner, not from help text.
    assert_eq!(pollux["shares_gpus"], true);
    let fifo = list.iter().find(|p| p["name"] == "fifo").unwrap();
    assert_eq!(fifo["shares_gpus"], false);
    assert!(table
        .lines()
        .any(|l| l.starts_with("pollux-mip ") && l.contains("(shares GPUs under --sharing)")));
}

#[test]
fn every_policy_runs_a_short_workload() {
    let names = String::from_utf8(run(&["policies"]).stdout).unwrap();
    let mut count = 0;
    // Each line: the name, then its description.
    for policy in names.lines().filter_map(|l| l.split_whitespace().next()) {
        // Keep the slow exact MIP on the native-default solver only.
        if policy.ends_with("-microlp") {
            continue;
        }
        let v = simulate_json(policy, None);
        for key in [
            "policy",
            "workload",
            "jobs",
            "avg_jct_s",
            "p50_jct_s",
            "p99_jct_s",
            "imagenet_mean_jct_s",
            "makespan_s",
            "gpu_utilization",
            "restarts",
            "rounds",
            "planner_ms",
            "wall_s",
        ] {
            assert!(v.get(key).is_some(), "{policy}: missing {key}");
        }
        assert_eq!(v["jobs"], 14, "{policy}");
        let avg = v["avg_jct_s"].as_f64().unwrap();
        assert!(avg.is_finite() && avg > 0.0, "{policy}: {avg}");
        let util = v["gpu_utilization"].as_f64().unwrap();
        assert!(util > 0.0 && util <= 1.0 + 1e-9, "{policy}: {util}");
        for k in ["mean", "p99", "max"] {
            assert!(v["planner_ms"][k].as_f64().is_some(), "{policy}: planner_ms.{k}");
        }
        count += 1;
    }
    assert!(count >= 6, "too few policies: {names}");
}

#[test]
fn simulate_is_deterministic_and_writes_outputs() {
    let dir = std::env::temp_dir().join(format!("gpuplan-out-{}", std::process::id()));
    let a = simulate_json("pollux-ga", Some(&dir));
    let b = simulate_json("pollux-ga", None);
    for k in ["avg_jct_s", "makespan_s", "restarts", "rounds"] {
        assert_eq!(a[k], b[k], "{k}");
    }
    for f in [
        "jobs.csv",
        "rounds.csv",
        "jct_cdf.svg",
        "utilization.svg",
        "gantt.svg",
    ] {
        let p = dir.join(f);
        assert!(p.exists() && std::fs::metadata(&p).unwrap().len() > 100, "{f}");
    }
    let jobs = std::fs::read_to_string(dir.join("jobs.csv")).unwrap();
    assert_eq!(jobs.lines().count(), 15);
    // Goodput over time (issue 50: once only in the explorer): the rate
    // integrates to the number of jobs, and its last point is the makespan.
    let rate = std::fs::read_to_string(dir.join("work_rate.csv")).unwrap();
    let (mut done, mut last) = (0.0, 0.0);
    for l in rate.lines().skip(1) {
        let v: Vec<f64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        done += v[2] * (v[1] - v[0]) / 3600.0;
        last = v[1];
    }
    assert!((done - 14.0).abs() < 1e-6, "{done}");
    let end = jobs
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap().parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(last, end);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_prints_mean_per_policy() {
    let v = json(&run(&[
        "sweep",
        "--workloads",
        "tests/data/short-workload.csv",
        "--policies",
        "fifo,tiresias",
        "--format",
        "json",
    ]));
    for p in ["fifo", "tiresias"] {
        let avg = v["policies"][p]["avg_jct_s"].as_f64().unwrap();
        let per = v["policies"][p]["per_workload"]["short-workload"]["avg_jct_s"]
            .as_f64()
            .unwrap();
        assert!((avg - per).abs() < 1e-9);
    }
}

#[test]
fn sweep_on_slurm_needs_an_output_folder() {
    // Checked before any Slurm command runs (tests/slurm.rs runs the rest).
    let o = run(&[
        "sweep",
        "--workloads",
        "tests/data/short-workload.csv",
        "--policies",
        "fifo",
        "--slurm",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--slurm needs --out DIR"), "{}", stderr(&o));
    let o = run(&[
        "sweep",
        "--workloads",
        "tests/data/short-workload.csv",
        "--policies",
        "fifo",
        "--partition",
        "all",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--slurm"), "{}", stderr(&o));
}

#[test]
fn plan_reads_round_files_and_reports_contract_keys() {
    for planner in ["tiresias", "pollux-ga", "optimus"] {
        let v = json(&run(&[
            "plan",
            "--input",
            "tests/data/round-tiny.json",
            "--planner",
            planner,
            "--format",
            "json",
        ]));
        for key in [
            "allocations",
            "objective",
            "bound",
            "gap",
            "status",
            "solve_ms",
            "planner",
        ] {
            assert!(v.get(key).is_some(), "{planner}: missing {key}");
        }
        assert_eq!(v["planner"], planner);
        let total: usize = v["allocations"]
            .as_object()
            .unwrap()
            .values()
            .map(|a| a.as_array().unwrap().len())
            .sum();
        assert!(total <= 8, "{planner}");
    }
    let v = json(&run(&[
        "plan",
        "--input",
        "tests/data/round-workload6-36jobs.json",
        "--planner",
        "pollux-ga",
    ]));
    assert!(v["objective"].as_f64().unwrap() > 0.0);
}

#[test]
fn plan_rejects_bad_round_files_with_positions() {
    let dir = std::env::temp_dir().join(format!("gpuplan-badround-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let syntax = dir.join("syntax.json");
    std::fs::write(&syntax, "{\"now_s\": 1,\n \"jobs\": [}").unwrap();
    let o = run(&["plan", "--input", syntax.to_str().unwrap(), "--planner", "fifo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("syntax.json:2:"), "{}", stderr(&o));
    let text = std::fs::read_to_string(root().join("tests/data/round-tiny.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["jobs"][1]["state"]["allocation"] = serde_json::json!([0, 9]);
    let sem = dir.join("semantic.json");
    std::fs::write(&sem, v.to_string()).unwrap();
    let o = run(&["plan", "--input", sem.to_str().unwrap(), "--planner", "fifo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("jobs[1] (resnet-b).state.allocation: node 9 does not exist"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
    // A limit out of range names its flag; 0 threads was once raised to 1
    // in silence (issue 50).
    let tiny = "tests/data/round-tiny.json";
    let o = run(&["plan", "--input", tiny, "--planner", "fifo", "--threads", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--threads: must be >= 1"), "{}", stderr(&o));
}

/// `serve` refuses settings it once raised in silence (issue 50): an
/// interval under 10 ms, 0 crashes, a time limit of 0; every problem at
/// once, each with its flag, before anything starts.
#[test]
fn serve_refuses_out_of_range_settings_by_flag() {
    let state = std::env::temp_dir().join(format!("gpuplan-serve-flags-{}", std::process::id()));
    let o = run(&[
        "serve",
        "--state",
        state.to_str().unwrap(),
        "--interval",
        "5ms",
        "--max-crashes",
        "0",
        "--time-limit",
        "0s",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    for want in [
        "--interval: must be at least 10 ms",
        "--max-crashes: must be >= 1",
        "--time-limit: must be > 0",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    assert!(!state.join("journal").exists());
}

#[test]
fn dump_rounds_writes_plannable_round_files() {
    let dir = std::env::temp_dir().join(format!("gpuplan-dump-{}", std::process::id()));
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "tiresias",
        "--dump-rounds",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = dir.join("round-00005.json");
    assert!(first.exists());
    let v = json(&run(&[
        "plan",
        "--input",
        first.to_str().unwrap(),
        "--planner",
        "pollux-ga",
    ]));
    assert!(v["objective"].as_f64().is_some());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn plan_names_each_jobs_gpu_type_and_slowest_gpu_in_a_variable_round() {
    let dir = std::env::temp_dir().join(format!("gpuplan-dump-var-{}", std::process::id()));
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "fifo",
        "--variability",
        "longhorn",
        "--placement",
        "pal",
        "--dump-rounds",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let round = dir.join("round-00005.json");
    let v = json(&run(&[
        "plan",
        "--input",
        round.to_str().unwrap(),
        "--planner",
        "fifo",
    ]));
    let hw = v["hardware"].as_object().unwrap();
    assert!(!hw.is_empty());
    assert_eq!(hw.len(), v["allocations"].as_object().unwrap().len());
    for (job, h) in hw {
        assert_eq!(h["gpu_types"][0], "t4", "{job}");
        let x = &h["variability"];
        let node = x["slowest_gpu"][0].as_u64().unwrap();
        assert!(
            v["allocations"][job].as_array().unwrap().contains(&node.into()),
            "{job}: {x}"
        );
        assert!(
            x["expected_factor"].as_f64().unwrap() >= x["slowdown"].as_f64().unwrap(),
            "{job}: {x}"
        );
    }
    let table = String::from_utf8(
        run(&[
            "plan",
            "--input",
            round.to_str().unwrap(),
            "--planner",
            "fifo",
            "--format",
            "table",
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        table.contains("t4, slowest node") && table.contains("expected"),
        "{table}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_analysis_adds_queueing_fairness_and_per_app_jct() {
    let plain = simulate_json("tiresias", None);
    assert!(plain.get("analysis").is_none(), "analysis only with --analysis");
    let v = json(&run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "tiresias",
        "--analysis",
        "--format",
        "json",
    ]));
    // The summary's keys are unchanged beside it.
    assert_eq!(v["avg_jct_s"], plain["avg_jct_s"]);
    let a = &v["analysis"];
    let jobs = v["jobs"].as_u64().unwrap() as usize;
    assert_eq!(a["jobs"].as_array().unwrap().len(), jobs);
    let per_app: u64 = a["per_app"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["jobs"].as_u64().unwrap())
        .sum();
    assert_eq!(per_app as usize, jobs);
    for key in ["mean", "p50", "p99", "max"] {
        assert!(a["queueing_delay_s"][key].as_f64().unwrap() >= 0.0, "{key}");
        assert!(a["fairness"]["rho"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    for j in a["jobs"].as_array().unwrap() {
        let rho = j["rho"].as_f64().unwrap();
        let iso = j["isolated_jct_s"].as_f64().unwrap();
        assert!(iso > 0.0 && rho > 0.0);
    }
}

/// `cluster show` prints the round's view of the devices: a cluster in
/// round-file form (it loads as one) with each node's GPUs in round order;
/// a bad `--devices` exits 2 naming the flag.
#[test]
fn cluster_show_prints_the_cluster_a_round_gets() {
    let v = json(&run(&[
        "cluster",
        "show",
        "--devices",
        "fake:2x4",
        "--format",
        "json",
    ]));
    let cluster: gpuplan_core::Cluster = serde_json::from_value(v["cluster"].clone()).unwrap();
    assert_eq!((cluster.num_nodes(), cluster.total_gpus()), (2, 8));
    assert_eq!(v["gpus"][1][0], "GPU-fake-1-0");
    assert_eq!(v["unhealthy"].as_array().unwrap().len(), 0);
    let table = run(&["cluster", "show", "--devices", "fake:1x2"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("2 healthy GPUs on 1 nodes"));
    let bad = run(&["cluster", "show", "--devices", "bogus"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--devices bogus"), "{}", stderr(&bad));
}

/// Engines' own flags come from the engine registry into `serve` and
/// `cluster show`, each with its engine; given with another engine, one is
/// refused by the registry naming its engine, before anything starts.
/// `serve --memory-limit` is `plan`'s.
#[test]
fn serve_and_cluster_show_take_each_engines_flags_from_the_registry() {
    for cmd in [&["serve", "--help"][..], &["cluster", "show", "--help"]] {
        let help = String::from_utf8_lossy(&run(cmd).stdout).to_string();
        for flag in [
            "--partition <NAME>",
            "--slurm-timeout <DURATION>",
            "(with --engine slurm)",
        ] {
            assert!(help.contains(flag), "{cmd:?}: {flag} in\n{help}");
        }
    }
    let help = String::from_utf8_lossy(&run(&["serve", "--help"]).stdout).to_string();
    assert!(help.contains("--memory-limit <MIB>"), "{help}");
    let dir = std::env::temp_dir().join(format!("gpuplan-cli-engine-flags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let state = dir.to_str().unwrap();
    for (args, said) in [
        (
            &[
                "serve",
                "--devices",
                "fake:1x1",
                "--state",
                state,
                "--partition",
                "p",
            ][..],
            "error: --partition is an option of --engine slurm",
        ),
        (
            &[
                "serve",
                "--devices",
                "fake:1x1",
                "--state",
                state,
                "--slurm-timeout",
                "5s",
            ],
            "error: --slurm-timeout is an option of --engine slurm",
        ),
        (
            &["cluster", "show", "--devices", "fake:1x1", "--partition", "p"],
            "error: --partition is an option of --engine slurm",
        ),
        (
            &["serve", "--engine", "slurm", "--slurm-timeout", "soon"],
            "'soon' is not a duration",
        ),
        (
            &["cluster", "show", "--engine", "slurm"],
            "--engine slurm needs --partition NAME",
        ),
        (&["serve", "--memory-limit", "lots"], "--memory-limit <MIB>"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(said), "{args:?}: {}", stderr(&o));
    }
    assert!(!dir.exists(), "nothing written");
}

/// `--variability-draw pal` (PAL's per-run draw) changes the result of a
/// variable cluster; a bad value or one without `--variability` exits 2.
#[test]
fn the_pal_variability_draw_is_a_flag_with_clear_errors() {
    let base = [
        "simulate",
        "--workload",
        "traces/pal/philly/workload-1.csv",
        "--cluster",
        "16x4",
        "--interval",
        "360",
        "--policy",
        "fifo",
        "--format",
        "json",
    ];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        run(&a)
    };
    let node = json(&with(&["--variability", "longhorn"]));
    let pal = json(&with(&["--variability", "longhorn", "--variability-draw", "pal"]));
    assert_ne!(node["avg_jct_s"], pal["avg_jct_s"], "the draws differ");
    let o = with(&["--variability-draw", "pal"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--variability-draw: needs --variability"),
        "{}",
        stderr(&o)
    );
    let o = with(&["--variability", "longhorn", "--variability-draw", "gpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--variability-draw: 'gpu' is not one of node, pal"),
        "{}",
        stderr(&o)
    );
}

/// `gpuplan-mip`'s objective is its params: the rounds it plans carry them
/// (so `gpuplan plan` on a dumped round plans the same), flags override
/// them, and other policies keep Pollux's.
#[test]
fn gpuplan_mip_rounds_carry_its_objective_and_flags_override_it() {
    let tmp = std::env::temp_dir().join(format!("gpuplan-objective-{}", std::process::id()));
    let first_params = |policy: &str, extra: &[&str]| -> serde_json::Value {
        let dir = tmp.join(format!("{policy}{}", extra.join("")));
        let mut args = vec![
            "simulate",
            "--workload",
            "tests/data/short-workload.csv",
            "--policy",
            policy,
            "--format",
            "json",
            "--dump-rounds",
            dir.to_str().unwrap(),
        ];
        args.extend(extra);
        json(&run(&args));
        let round: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("round-00000.json")).unwrap()).unwrap();
        round["params"].clone()
    };
    let g = first_params("gpuplan-mip", &[]);
    assert_eq!(g["exploration_factor"], 4);
    assert_eq!(g["restart_weight"], 2.0);
    let p = first_params("pollux-mip", &[]);
    assert_eq!(p["exploration_factor"], 2);
    assert!(
        p.get("restart_weight").is_none(),
        "Pollux's default is left out: {p}"
    );
    let o = first_params(
        "gpuplan-mip",
        &[
            "--restart-weight",
            "1",
            "--exploration-factor",
            "2",
            "--priority-exponent",
            "1",
        ],
    );
    assert_eq!(o["exploration_factor"], 2);
    assert!(o.get("restart_weight").is_none());
    assert_eq!(o["priority"]["exponent"], 1.0);
    // Sia's valuation: absent unless asked for, then carried by the round.
    assert!(
        g.get("left_out_cost").is_none() && g.get("spare_waiting").is_none(),
        "{g}"
    );
    let s = first_params(
        "gpuplan-mip",
        &["--left-out-cost", "1.1", "--spare-waiting", "--p=-0.5"],
    );
    assert_eq!(s["left_out_cost"], 1.1);
    assert_eq!(s["spare_waiting"], true);
    // Each refused with exit 2, naming the flag; λ needs p < 0.
    for (flag, bad) in [
        ("--left-out-cost", &["--left-out-cost=-1"][..]),
        ("--left-out-cost", &["--left-out-cost=1.1", "--p=0"]),
        ("--restart-weight", &["--restart-weight=-1"]),
        ("--priority-exponent", &["--priority-exponent=9"]),
        ("--priority-scale", &["--priority-scale=0"]),
        ("--exploration-factor", &["--exploration-factor=0"]),
    ] {
        let sim = [
            "simulate",
            "--workload",
            "tests/data/short-workload.csv",
            "--policy",
            "gpuplan-mip",
        ];
        let o = run(&[&sim[..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains(flag), "{flag}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `--sharing [K]` on simulate and sweep: off by default (the same jobs as
/// `--sharing 1`), K = 2 when given alone, per-GPU use in gpus.csv and the
/// summary, and a bad K refused with exit 2.
#[test]
fn sharing_is_a_flag_off_by_default() {
    let dir = std::env::temp_dir().join(format!("gpuplan-share-{}", std::process::id()));
    let sim = |extra: &[&str], out: &Path| {
        let o = out.to_str().unwrap().to_string();
        let mut args = vec![
            "simulate",
            "--workload",
            "tests/data/short-workload.csv",
            "--policy",
            "pollux-mip",
            "--format",
            "json",
            "--out",
            &o,
        ];
        args.extend(extra);
        json(&run(&args))
    };
    let off = sim(&[], &dir.join("off"));
    let one = sim(&["--sharing", "1"], &dir.join("one"));
    let on = sim(&["--sharing"], &dir.join("on"));
    let read = |d: &str, f: &str| std::fs::read_to_string(dir.join(d).join(f)).unwrap();
    assert_eq!(read("off", "jobs.csv"), read("one", "jobs.csv"));
    for k in ["avg_jct_s", "makespan_s", "gpu_utilization", "gpu_busy"] {
        assert_eq!(off[k], one[k], "{k}");
    }
    assert_eq!(off["gpu_shared"], 0.0);
    for v in [&off, &on] {
        let (util, busy) = (
            v["gpu_utilization"].as_f64().unwrap(),
            v["gpu_busy"].as_f64().unwrap(),
        );
        assert!(busy > 0.0 && busy <= util && util <= 1.0 + 1e-9, "{v}");
        assert!(v["gpu_shared"].as_f64().unwrap() <= util, "{v}");
    }
    assert_eq!(on["jobs"], 14);
    let gpus = read("on", "gpus.csv");
    assert!(
        gpus.starts_with("node,gpu,held_s,shared_s,busy_s,utilization\n"),
        "{gpus}"
    );
    assert_eq!(gpus.lines().count(), 1 + 64, "16x4 GPUs");
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "fifo",
        "--sharing",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--sharing: must be >= 1"), "{}", stderr(&o));
    let v = json(&run(&[
        "sweep",
        "--workloads",
        "tests/data/short-workload.csv",
        "--policies",
        "tiresias",
        "--sharing",
        "3",
        "--format",
        "json",
    ]));
    assert_eq!(
        v["policies"]["tiresias"]["per_workload"]["short-workload"]["jobs"],
        14
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// allowed and says so per row.
/// One 16-GPU, 8-job bench instance of `planner`, as JSON rows.
fn bench_rows(planner: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "bench",
        "--sizes",
        "16x8",
        "--planners",
        planner,
        "--repeat",
        "1",
        "--format",
        "json",
    ];
    args.extend(extra);
    json(&run(&args))
}

#[test]
fn bench_takes_sharing() {
    let rows = |extra: &[&str]| bench_rows("pollux-mip", extra);
    assert_eq!(rows(&[])[0]["sharing"], 1);
    let on = rows(&["--sharing"]);
    assert_eq!(on[0]["sharing"], 2);
    assert_eq!(on[0]["failures"], 0);
}

/// `bench --variability` draws per-GPU speeds into the same seeded rounds:
/// the aggregate then plans (and is judged) at those speeds; a bad name
/// exits 2 naming the flag.
#[test]
fn bench_takes_variability() {
    let rows = |extra: &[&str]| bench_rows("mip-aggregate", extra);
    let (plain, varied) = (rows(&[]), rows(&["--variability", "longhorn"]));
    assert_eq!(varied[0]["failures"], 0);
    assert_ne!(plain[0]["objective"], varied[0]["objective"]);
    let o = run(&[
        "bench",
        "--sizes",
        "16x8",
        "--repeat",
        "1",
        "--variability",
        "nosuch",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--variability nosuch"), "{}", stderr(&o));
}

/// `plan --memory-limit` is a budget: a model estimated above it falls back
/// to greedy, marked with the reason, and exits 0 with a valid plan.
#[test]
fn plan_falls_back_under_the_memory_limit() {
    let input = root().join("tests/data/round-workload6-36jobs.json");
    let out = |limit: &str| {
        json(&run(&[
            "plan",
            "--input",
            input.to_str().unwrap(),
            "--planner",
            "mip-node",
            "--memory-limit",
            limit,
        ]))
    };
    let capped = out("1");
    assert_eq!(capped["status"], "fallback");
    let why = capped["reason"].as_str().unwrap_or_default();
    assert!(why.contains("over the memory limit of 1 MiB"), "{why}");
    assert_ne!(out("0")["status"], "fallback");
}

/// `simulate --memory-limit` holds every round's model to the budget, as
/// `plan --memory-limit` does: on 64 nodes mip-node's model of a few jobs
/// passes 1 MiB (9.5 KiB a job-node pair), and those rounds fall back,
/// marked in rounds.csv; with no limit none does.
#[test]
fn simulate_holds_each_round_to_the_memory_limit() {
    let statuses = |limit: &str| -> Vec<String> {
        let dir = std::env::temp_dir().join(format!("gpuplan-memlimit-{limit}-{}", std::process::id()));
        run(&[
            "simulate",
            "--workload",
            root().join("tests/data/short-workload.csv").to_str().unwrap(),
            "--cluster",
            "64x4",
            "--policy",
            "mip-node",
            "--memory-limit",
            limit,
            "--out",
            dir.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let text = std::fs::read_to_string(dir.join("rounds.csv")).unwrap();
        let mut lines = text.lines();
        let col = lines
            .next()
            .unwrap()
            .split(',')
            .position(|h| h == "status")
            .unwrap();
        let out = lines
            .map(|l| l.split(',').nth(col).unwrap().to_string())
            .collect();
        std::fs::remove_dir_all(&dir).ok();
        out
    };
    let capped = statuses("1");
    assert!(capped.iter().any(|s| s == "fallback"), "{capped:?}");
    let free = statuses("0");
    assert!(free.iter().all(|s| s != "fallback"), "{free:?}");
}

/// `bench --dump-rounds` writes the rounds it benches (the plan command
/// reads them back to the same greedy objective), and `--warm-rounds`
/// plans each one repeatedly with one planner value: pollux-ga then starts
/// from its own last population, as in a simulation, and leaves far fewer
/// jobs without GPUs than in the same round cold.
#[test]
fn bench_dumps_its_rounds_and_runs_the_ga_warm() {
    let dir = std::env::temp_dir().join(format!("gpuplan-bench-dump-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let rows = json(&run(&[
        "bench",
        "--sizes",
        "64x40",
        "--planners",
        "pollux-ga,greedy",
        "--repeat",
        "1",
        "--warm-rounds",
        "5",
        "--dump-rounds",
        d,
        "--format",
        "json",
    ]));
    let row = |p: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["planner"] == p)
            .unwrap()
            .clone()
    };
    let file = dir.join("round-64x40-0.json");
    let plan = |p: &str| json(&run(&["plan", "--input", file.to_str().unwrap(), "--planner", p]));
    let greedy = row("greedy")["objective"].as_f64().unwrap();
    let greedy_cold = plan("greedy")["objective"].as_f64().unwrap();
    assert!((greedy - greedy_cold).abs() < 1e-9, "{greedy} vs {greedy_cold}");
    let warm = row("pollux-ga")["objective"].as_f64().unwrap();
    let cold = plan("pollux-ga")["objective"].as_f64().unwrap();
    assert!(warm > 10.0 * cold, "warm {warm} vs cold {cold}");
    let o = run(&["bench", "--sizes", "16x8", "--warm-rounds", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--warm-rounds"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn predict_from_an_onnx_file_or_an_app_and_bad_input_exits_2() {
    use gpuplan_predict::{
        encode, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, TensorProto, TensorShapeProto,
        TensorTypeProto, TypeProto, ValueInfoProto,
    };
    let dir = std::env::temp_dir().join(format!("gpuplan-predict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // One Gemm layer, x [1, 784] · Wᵀ, W [10, 784]: 15,680 FLOPs, 7,850 parameters.
    let shape = |d: &[i64]| TensorShapeProto {
        dim: d
            .iter()
            .map(|&v| Dimension {
                dim_value: v,
                dim_param: String::new(),
            })
            .collect(),
    };
    let model = ModelProto {
        ir_version: 9,
        producer_name: "test".into(),
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into(), "W".into(), "b".into()],
                output: vec!["y".into()],
                name: "fc".into(),
                op_type: "Gemm".into(),
                attribute: vec![AttributeProto {
                    name: "transB".into(),
                    i: 1,
                    r#type: 2,
                    ..Default::default()
                }],
            }],
            name: "g".into(),
            initializer: vec![
                TensorProto {
                    dims: vec![10, 784],
                    data_type: 1,
                    name: "W".into(),
                },
                TensorProto {
                    dims: vec![10],
                    data_type: 1,
                    name: "b".into(),
                },
            ],
            input: vec![ValueInfoProto {
                name: "x".into(),
                r#type: Some(TypeProto {
                    tensor_type: Some(TensorTypeProto {
                        elem_type: 1,
                        shape: Some(shape(&[1, 784])),
                    }),
                }),
            }],
            output: vec![],
            value_info: vec![],
        }),
    };
    let file = dir.join("gemm.onnx");
    std::fs::write(&file, encode(&model)).unwrap();
    let f = file.to_str().unwrap();
    let v = json(&run(&[
        "predict",
        "--onnx",
        f,
        "--local-bsz",
        "64",
        "--gpus",
        "2",
        "--format",
        "json",
    ]));
    assert_eq!(v["features"]["flops_per_sample"], 15680.0);
    assert_eq!(v["features"]["params"], 7850.0);
    assert_eq!(v["features"]["layers"]["matmul"], 1);
    let u = v["utilization"].as_f64().unwrap();
    assert!(u > 0.0 && u < 1.0, "{u}");

    // The app table; more nodes, less compute share.
    let at = |nodes: &str, gpus: &str| {
        let v = json(&run(&[
            "predict",
            "--app",
            "bert",
            "--local-bsz",
            "8",
            "--gpus",
            gpus,
            "--nodes",
            nodes,
            "--format",
            "json",
        ]));
        v["utilization"].as_f64().unwrap()
    };
    assert!(at("2", "8") < at("1", "2"));

    // Bad input: exit 2, naming the file and the field.
    let junk = dir.join("junk.onnx");
    std::fs::write(&junk, [0xffu8, 0xff, 0xff]).unwrap();
    let o = run(&["predict", "--onnx", junk.to_str().unwrap(), "--local-bsz", "8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("junk.onnx: not an ONNX ModelProto"),
        "{}",
        stderr(&o)
    );
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, []).unwrap();
    let o = run(&["predict", "--onnx", empty.to_str().unwrap(), "--local-bsz", "8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("empty.onnx: graph: missing"),
        "{}",
        stderr(&o)
    );
    let o = run(&["predict", "--app", "nope", "--local-bsz", "8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--app: unknown application 'nope'"),
        "{}",
        stderr(&o)
    );
    let bad = dir.join("records.json");
    std::fs::write(&bad, "[{\"family\": 3}]").unwrap();
    let o = run(&[
        "predict",
        "--fit",
        dir.join("p.json").to_str().unwrap(),
        "--records",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("records.json:1:"), "{}", stderr(&o));
    // A serve state dir whose journal is corrupt, or that has none.
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("journal.jsonl"), "{\"t\": \"job\"}\n").unwrap();
    for (d, want) in [
        (state.clone(), "state/journal.jsonl:1: corrupt record"),
        (dir.join("nostate"), "nostate/journal.jsonl"),
    ] {
        let o = run(&[
            "predict",
            "--fit",
            dir.join("p.json").to_str().unwrap(),
            "--state-dir",
            d.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Gavel's rigid jobs share under `--sharing` (their trace model gives
/// utilization, memory and measured pairs), with any pair or only measured
/// ones; off, nothing is shared.
#[test]
fn gavel_traces_share_with_sharing_pairs() {
    let sim = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "--workload",
            "traces/gavel/physical_cluster/artifact_evaluation.trace",
            "--policy",
            "pollux-mip",
            "--cluster",
            "1x4",
            "--format",
            "json",
        ];
        args.extend(extra);
        json(&run(&args))
    };
    assert_eq!(sim(&[])["gpu_shared"], 0.0);
    for extra in [&["--sharing"][..], &["--sharing", "--sharing-pairs", "measured"]] {
        let on = sim(extra);
        assert_eq!(on["jobs"], 15);
        assert!(on["gpu_shared"].as_f64().unwrap() > 0.0, "{extra:?}: {on}");
    }
}

/// `simulate --queues`: every round keeps the queues' rules (the pipeline
/// validates each plan), so no queue is short while another borrows; the
/// result has a row per queue with the jobs the workload's `queue` column
/// puts there; without --queues the same run has no per-queue figures.
#[test]
fn simulate_with_queues_reports_each_queue_and_never_leaves_one_short() {
    let dir = std::env::temp_dir().join(format!("gpuplan-queues-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let q = dir.join("queues.toml");
    std::fs::write(
        &q,
        "[[queue]]\nname = \"a\"\nguarantee = 8\n\n[[queue]]\nname = \"b\"\nguarantee = 8\n",
    )
    .unwrap();
    let q = q.to_str().unwrap();
    for policy in ["fifo", "pollux-mip"] {
        let args = [
            "simulate",
            "--workload",
            "tests/data/queued-workload.csv",
            "--cluster",
            "4x4",
        ];
        let out = json(&run(&[
            &args[..],
            &["--policy", policy, "--queues", q, "--format", "json"],
        ]
        .concat()));
        let queues = out["queues"]
            .as_array()
            .unwrap_or_else(|| panic!("{policy}: {out}"));
        let names: Vec<&str> = queues.iter().map(|x| x["queue"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"], "{policy}");
        assert_eq!(queues[0]["jobs"], 9);
        assert_eq!(queues[1]["jobs"], 5);
        for x in queues {
            assert_eq!(x["shortfall_gpu_s"], 0.0, "{policy}: {x}");
        }
        let plain = json(&run(
            &[&args[..], &["--policy", policy, "--format", "json"]].concat()
        ));
        assert!(plain.get("queues").is_none());
    }
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[queue]]\nname = \"a\"\nguarantee = 8\n\n[[queue]]\nname = \"b\"\nparent = \"a\"\nguarantee = 9\n",
    )
    .unwrap();
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/queued-workload.csv",
        "--cluster",
        "4x4",
        "--policy",
        "fifo",
        "--queues",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("bad.toml:3:guarantee: 8 GPUs, less than its children's guarantees (9)"),
        "{}",
        stderr(&o)
    );
    // `serve --queues` reads the same files the same way, before it starts.
    let o = run(&[
        "serve",
        "--devices",
        "fake:1x8",
        "--state",
        dir.join("state").to_str().unwrap(),
        "--queues",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.toml:3:guarantee:"), "{}", stderr(&o));
    assert!(!dir.join("state").exists(), "nothing written");
}

/// `trace import-slurm` on the bundled real output (tests/data/slurm)
/// writes a workload that simulates; a damaged file is named with its
/// line and field, exit 2, and nothing is written.
#[test]
fn import_slurm_writes_simulable_files_and_names_bad_fields() {
    let dir = std::env::temp_dir().join(format!("gpuplan-cli-import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let o = run(&[
        "trace",
        "import-slurm",
        "--sacct",
        "tests/data/slurm/sacct.json",
        "--nodes",
        "tests/data/slurm/sinfo.json",
        "--out",
        &p("w.csv"),
        "--cluster-out",
        &p("c.csv"),
        "--queues-out",
        &p("q.toml"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("wrote 5 jobs (2 accounts)"), "{}", stderr(&o));
    let q = std::fs::read_to_string(p("q.toml")).unwrap();
    assert!(q.contains("name = \"a\"") && q.contains("name = \"b\""), "{q}");
    let v = json(&run(&[
        "simulate",
        "--workload",
        &p("w.csv"),
        "--cluster",
        &p("c.csv"),
        "--queues",
        &p("q.toml"),
        "--policy",
        "fifo",
        "--format",
        "json",
    ]));
    assert_eq!(v["jobs"], 5);
    let text = std::fs::read_to_string("tests/data/slurm/sacct.json").unwrap();
    let bad = text.replacen("\"submission\": 1795809945", "\"submission\": \"yesterday\"", 1);
    std::fs::write(p("bad.json"), bad).unwrap();
    let o = run(&[
        "trace",
        "import-slurm",
        "--sacct",
        &p("bad.json"),
        "--nodes",
        "tests/data/slurm/sinfo.json",
        "--out",
        &p("w2.csv"),
        "--cluster-out",
        &p("c2.csv"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("bad.json:")
            && e.contains("jobs[0].time.submission: expected a number, got \"yesterday\""),
        "{e}"
    );
    assert!(!dir.join("w2.csv").exists() && !dir.join("c2.csv").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep under `--queues` reports per queue: a table row per policy and
/// queue, and each run's chart of GPUs per queue beside its Gantt.
#[test]
fn a_sweep_with_queues_reports_per_queue_figures_and_charts() {
    let dir = std::env::temp_dir().join(format!("gpuplan-cli-queue-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = run(&[
        "sweep",
        "--workloads",
        "tests/data/queued-workload.csv",
        "--cluster",
        "4x4",
        "--queues",
        "examples/queues-ab.toml",
        "--policies",
        "fifo,fair-share",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("### Per queue"), "{md}");
    for p in ["fifo", "fair-share"] {
        for q in ["a", "b"] {
            assert!(md.contains(&format!("| {p} | {q} | 8 |")), "{p} {q}: {md}");
        }
        let svg = dir.join(p).join("queued-workload").join("queues.svg");
        let text = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
        assert!(text.contains("GPUs held per queue"), "{}", svg.display());
        assert!(md.contains(&format!("({p}/queued-workload/queues.svg)")), "{md}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `simulate --round-log` writes one line per round in the format the Pollux
/// artifact's logger writes (scripts/pollux-artifact-rounds.py), and
/// `compare-rounds` sets two logs side by side: a log against itself has no
/// difference; against the artifact's own run of the same workload (its
/// first 20 rounds, tests/data/pollux-artifact-short-20.jsonl) the two
/// simulators' step models agree wherever they hold a job alike.
#[test]
fn round_logs_compare_with_the_artifacts() {
    let dir = std::env::temp_dir().join(format!("gpuplan-roundlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("rounds.jsonl");
    let o = run(&[
        "simulate",
        "--workload",
        "tests/data/short-workload.csv",
        "--policy",
        "pollux-ga",
        "--round-log",
        log.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary = json(&o);
    assert_eq!(lines.len() as u64, summary["rounds"].as_u64().unwrap());
    let first = &lines[0];
    assert_eq!(first["time"], 60.0);
    assert_eq!(first["jobs"][0]["name"], "cifar10-0");
    assert!(first["fitness"].as_f64().unwrap() > 0.0);
    // Every job's GPUs are listed by node, and a running job has a goodput.
    for l in &lines {
        for j in l["jobs"].as_array().unwrap() {
            let gpus = j["gpus"].as_u64().unwrap();
            assert_eq!(j["allocation"].as_array().map_or(0, |a| a.len() as u64), gpus);
            if gpus > 0 && !j["done"].as_bool().unwrap() {
                assert!(j["goodput"].as_f64().unwrap() > 0.0, "{j}");
            }
        }
    }
    let same = json(&run(&[
        "compare-rounds",
        log.to_str().unwrap(),
        log.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(same["first_gpu_difference_s"], serde_json::Value::Null);
    assert_eq!(same["same_shape_max_goodput_diff"], 0.0);
    assert_eq!(same["total"]["gpus"][0], same["total"]["gpus"][1]);
    let art = "tests/data/pollux-artifact-short-20.jsonl";
    let c = json(&run(&[
        "compare-rounds",
        log.to_str().unwrap(),
        art,
        "--format",
        "json",
    ]));
    assert_eq!(c["common_rounds"], 20);
    assert!(c["same_shape_pairs"].as_u64().unwrap() > 0, "{c}");
    assert!(c["same_shape_max_goodput_diff"].as_f64().unwrap() < 1e-9, "{c}");
    let table = String::from_utf8(
        run(&[
            "compare-rounds",
            log.to_str().unwrap(),
            art,
            "--labels",
            "gpuplan,artifact",
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        table.contains("gpuplan") && table.contains("artifact") && table.contains("rounds in both: 20"),
        "{table}"
    );
    // A damaged line is named.
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        format!("{}\n{{\"time\": 1}}\n", text.lines().next().unwrap()),
    )
    .unwrap();
    let o = run(&["compare-rounds", bad.to_str().unwrap(), art]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.jsonl:2"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}
