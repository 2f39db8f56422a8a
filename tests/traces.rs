//! Every shipped trace loads, inspects, converts and simulates under every
//! policy (on a short slice and a small cluster, to stay fast); sweeps
//! resume from their output folder; bad rows are reported or skipped.

use std::path::{Path, PathBuf};
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

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuplan-traces-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The first `n` jobs that run under `max_s` on at most `max_gpus`, with
/// times shifted to start at 0: a short slice of a native workload.
fn slice(native: &Path, out: &Path, n: usize, max_s: f64, max_gpus: u32) {
    let mut rdr = csv::Reader::from_path(native).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (submit, gpus, app, dur) = (col("submit_s"), col("gpus"), col("app"), col("duration_s"));
    let mut rows: Vec<csv::StringRecord> = rdr
        .records()
        .map(Result::unwrap)
        .filter(|r| {
            let g: u32 = r[gpus].parse().unwrap();
            let short = match r[dur].parse::<f64>() {
                Ok(d) => d <= max_s,
                Err(_) => matches!(&r[app], "bert" | "ncf"),
            };
            // Powers of two: the packable sizes every planner can place.
            g <= max_gpus && g.is_power_of_two() && short
        })
        .take(n)
        .collect();
    assert_eq!(rows.len(), n, "{}: not enough short jobs", native.display());
    let t0: f64 = rows[0][submit].parse().unwrap();
    let mut w = csv::Writer::from_path(out).unwrap();
    w.write_record(&headers).unwrap();
    for r in &mut rows {
        let t: f64 = r[submit].parse::<f64>().unwrap() - t0;
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == submit {
                    format!("{t}")
                } else {
                    c.to_string()
                }
            })
            .collect();
        w.write_record(&cells).unwrap();
    }
    w.flush().unwrap();
}

const SHIPPED: &[(&str, &str)] = &[
    ("pollux/workloads/workload-1.csv", "pollux"),
    ("pollux/philly.csv", "philly"),
    ("tiresias/60_job.csv", "tiresias"),
    ("gavel/msr/ed69ec.trace", "gavel"),
    ("gavel/physical_cluster/small_test.trace", "gavel"),
    (
        "shockwave/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace",
        "shockwave",
    ),
    ("pal/philly/workload-1.csv", "pal"),
    ("pal/sia/sia-160job-trace.csv", "pal"),
];

#[test]
fn every_trace_loads_inspects_and_simulates_under_every_policy() {
    let dir = tmp("all");
    let policies: Vec<String> = ok(&run(&["policies"]))
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(policies.len() >= 10);
    let mut slices = Vec::new();
    for (i, (rel, format)) in SHIPPED.iter().enumerate() {
        let path = format!("traces/{rel}");
        let v: serde_json::Value =
            serde_json::from_str(&ok(&run(&["trace", "inspect", &path, "--format", "json"]))).unwrap();
        assert_eq!(v["format"], *format, "{rel}");
        assert!(v["jobs"].as_u64().unwrap() > 0, "{rel}");
        for key in ["span_s", "gpu_histogram", "mean_gpus_demanded", "problems"] {
            assert!(v.get(key).is_some(), "{rel}: missing {key}");
        }
        let native = dir.join(format!("full-{i}.csv"));
        ok(&run(&[
            "trace",
            "convert",
            &path,
            "--to",
            "gpuplan",
            "--out",
            native.to_str().unwrap(),
        ]));
        let s = dir.join(format!("slice-{i}.csv"));
        slice(&native, &s, 3, 900.0, 8);
        slices.push(s);
    }
    // Every policy on every slice, in one sweep (all cores, progress bar).
    let mut args = vec!["sweep".to_string(), "--workloads".into()];
    args.extend(slices.iter().map(|s| s.display().to_string()));
    args.extend(
        [
            "--policies",
            &policies.join(","),
            "--cluster",
            "traces/clusters/pollux-16x4.csv",
            "--interval",
            "120",
            "--time-limit",
            "2",
            "--format",
            "json",
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&argv))).unwrap();
    for p in &policies {
        let per = &v["policies"][p]["per_workload"];
        assert_eq!(per.as_object().unwrap().len(), slices.len(), "{p}");
        for (w, s) in per.as_object().unwrap() {
            assert_eq!(s["jobs"], 3, "{p} {w}");
            assert!(s["avg_jct_s"].as_f64().unwrap() > 0.0, "{p} {w}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn duration_jobs_pollux_method_and_sampling() {
    let dir = tmp("sample");
    let out = dir.join("s.csv");
    let args = [
        "trace",
        "sample",
        "traces/pollux/philly.csv",
        "--jobs",
        "20",
        "--window",
        "8h",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ];
    ok(&run(&args));
    let a = std::fs::read_to_string(&out).unwrap();
    ok(&run(&args));
    assert_eq!(
        a,
        std::fs::read_to_string(&out).unwrap(),
        "same seed, same sample"
    );
    let rows: Vec<&str> = a.lines().skip(1).collect();
    assert_eq!(rows.len(), 20);
    for r in &rows {
        let c: Vec<&str> = r.split(',').collect();
        let t: f64 = c[1].parse().unwrap();
        assert!((0.0..8.0 * 3600.0).contains(&t), "{r}");
        assert!(
            ["cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet"].contains(&c[3]),
            "{r}"
        );
    }
    // The same mapping, applied while simulating a raw trace.
    let s = dir.join("slice.csv");
    let full = dir.join("full.csv");
    ok(&run(&[
        "trace",
        "convert",
        "traces/tiresias/60_job.csv",
        "--out",
        full.to_str().unwrap(),
    ]));
    slice(&full, &s, 5, 600.0, 4);
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        "simulate",
        "--workload",
        s.to_str().unwrap(),
        "--policy",
        "pollux-ga",
        "--duration-jobs",
        "pollux",
        "--cluster",
        "traces/clusters/pollux-16x4.csv",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(v["jobs"], 5);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweeps_resume_from_their_output_folder() {
    let dir = tmp("resume");
    let out = dir.join("out");
    let args = [
        "sweep",
        "--workloads",
        "traces/tiresias/60_job.csv",
        "--policies",
        "fifo,tiresias",
        "--seeds",
        "1,2",
        "--cluster",
        "16x4",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ];
    let first = run(&args);
    let a = ok(&first);
    // Simulate an interruption: one result is lost.
    let lost = out.join("tiresias/60_job-seed2/result.json");
    assert!(lost.exists());
    std::fs::remove_file(&lost).unwrap();
    let second = run(&args);
    let b = ok(&second);
    let e = String::from_utf8_lossy(&second.stderr);
    assert!(e.contains("resuming: 3 of 4 simulations"), "{e}");
    let strip = |s: &str| {
        let mut v: serde_json::Value = serde_json::from_str(s).unwrap();
        for p in v["policies"].as_object_mut().unwrap().values_mut() {
            for w in p["per_workload"].as_object_mut().unwrap().values_mut() {
                w["wall_s"] = 0.0.into();
                w["planner_ms"] = 0.0.into();
            }
        }
        v
    };
    assert_eq!(strip(&a), strip(&b));
    // Other settings in the same folder are refused.
    let mut other = args.to_vec();
    other[8] = "8x4";
    let o = run(&other);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("other settings"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_rows_fail_with_positions_or_are_skipped() {
    let dir = tmp("bad");
    let p = dir.join("bad.csv");
    std::fs::write(
        &p,
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,10,vgg19,100,0\n1,0,5,10,vgg19,100,0\n2,1,x,10,,100,0\n",
    )
    .unwrap();
    let ps = p.to_str().unwrap();
    let o = run(&["simulate", "--workload", ps, "--policy", "fifo"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    for want in [
        "bad.csv:3:num_gpu",
        "bad.csv:4:submit_time",
        "bad.csv:4:model_name",
    ] {
        assert!(e.contains(want), "{want} in {e}");
    }
    let o = run(&[
        "simulate",
        "--workload",
        ps,
        "--policy",
        "fifo",
        "--skip-bad-rows",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["jobs"], 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped 2 bad row(s)"));
    // inspect reports problems and exits 1.
    let o = run(&["trace", "inspect", ps]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("bad.csv:3:num_gpu"));
    // A heterogeneous cluster from a file.
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        "simulate",
        "--workload",
        "traces/tiresias/60_job.csv",
        "--policy",
        "tiresias",
        "--cluster",
        "traces/clusters/hetero-64.csv",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(v["jobs"], 60);
    // A cluster that is neither a shape nor a file.
    let o = run(&[
        "simulate",
        "--workload",
        ps,
        "--policy",
        "fifo",
        "--cluster",
        "nope/c.csv",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such file"));
    std::fs::remove_dir_all(&dir).ok();
}
