//! Loader tests over the shipped traces and hand-made bad rows.

use super::*;

fn load_file(rel: &str, bad: BadRows) -> Result<Trace, CoreError> {
    let path = format!("{}/../../traces/{rel}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    let tputs = gavel::Throughputs::parse(
        "simulation_throughputs.json",
        &std::fs::read(format!(
            "{}/../../traces/gavel/simulation_throughputs.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let opts = LoadOptions {
        bad_rows: bad,
        gavel_throughputs: Some(&tputs),
        gavel_gpu_type: None,
    };
    load_auto(None, rel, &bytes, &opts)
}

#[test]
fn shipped_traces_are_detected_and_load() {
    let cases: &[(&str, Format, usize)] = &[
        ("pollux/workloads/workload-1.csv", Format::Pollux, 160),
        ("pollux/philly.csv", Format::Philly, 82_247),
        ("tiresias/60_job.csv", Format::Tiresias, 60),
        ("gavel/physical_cluster/small_test.trace", Format::Gavel, 20),
        ("gavel/msr/ed69ec.trace", Format::Gavel, 951),
        (
            "shockwave/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace",
            Format::Shockwave,
            120,
        ),
        ("pal/philly/workload-1.csv", Format::Pal, 160),
        ("pal/sia/sia-160job-reduced.csv", Format::Pal, 160),
    ];
    for (rel, format, jobs) in cases {
        let t = load_file(rel, BadRows::Fail).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(t.format, *format, "{rel}");
        assert_eq!(t.jobs.len(), *jobs, "{rel}");
        assert!(t.jobs.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
    }
}

#[test]
fn philly_times_are_relative_and_gpu_time_checked() {
    let t = load_file("pollux/philly.csv", BadRows::Fail).unwrap();
    assert_eq!(t.jobs[0].submit_s, 0.0);
    // 2017-09-04 10:30:41 .. 2017-12-22 08:02:11
    assert_eq!(t.jobs.last().unwrap().submit_s, 9_408_690.0);
    let s = stats(&t);
    assert_eq!(s.total_gpu_s, 3_521_082_502.0);
    assert_eq!(s.gpu_histogram[&128], 3);
}

#[test]
fn gavel_rows_without_a_throughput_are_reported_or_skipped() {
    let e = load_file("gavel/msr/51b7ef.trace", BadRows::Fail).unwrap_err();
    assert!(
        e.to_string()
            .contains("gavel/msr/51b7ef.trace:9:job_type: no v100 throughput for ('CycleGAN', 8 GPUs)"),
        "{e}"
    );
    let t = load_file("gavel/msr/51b7ef.trace", BadRows::Skip).unwrap();
    assert_eq!(t.skipped_rows, 1);
    assert_eq!(t.jobs.len(), 17);
}

#[test]
fn every_bad_row_is_reported_and_skipping_counts_them() {
    let text = "timestamp,duration,num_gpus,gpu_time,cluster\n\
        2017-10-09 07:01:55,66.0,1,66.0,a\n\
        2017-13-09 07:01:55,66.0,1,66.0,a\n\
        2017-10-09 07:01:55,-1,1,-1,a\n\
        2017-10-09 07:01:55,10,2,30,a\n\
        2017-10-09 07:01:56,10,0,0,\n\
        2017-10-09 07:02:55,10,2,20,b\n";
    let e = load(Format::Philly, "p.csv", text.as_bytes(), &LoadOptions::default()).unwrap_err();
    let CoreError::Parse(errs) = e else {
        panic!("not a parse error")
    };
    let got: Vec<String> = errs.iter().map(|e| format!("{}:{}", e.line, e.field)).collect();
    assert_eq!(
        got,
        [
            "3:timestamp",
            "4:duration",
            "4:gpu_time",
            "5:gpu_time",
            "6:num_gpus",
            "6:gpu_time",
            "6:cluster"
        ]
    );
    let opts = LoadOptions {
        bad_rows: BadRows::Skip,
        ..Default::default()
    };
    let t = load(Format::Philly, "p.csv", text.as_bytes(), &opts).unwrap();
    assert_eq!(t.jobs.len(), 2);
    assert_eq!(t.skipped_rows, 4);
    assert_eq!(t.jobs[1].submit_s, 60.0);
}

#[test]
fn unknown_models_are_errors_not_defaults() {
    let pal = "job_id,num_gpus,submit_time,duration,model\n0,1,0,100,googlenet\n1,1,0,100,vgg19\n";
    let e = load(Format::Pal, "w.csv", pal.as_bytes(), &LoadOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("w.csv:2:model: unknown model 'googlenet'; valid: BERT"),
        "{e}"
    );
    let native = "name,submit_s,gpus,app,batch_size\na,0,1,resnet,32\n";
    let e = load(
        Format::Gpuplan,
        "n.csv",
        native.as_bytes(),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("n.csv:2:app: unknown application 'resnet'"),
        "{e}"
    );
}

#[test]
fn native_format_round_trips() {
    for rel in [
        "tiresias/60_job.csv",
        "pollux/workloads/workload-3.csv",
        "pal/sia/sia-160job-trace.csv",
    ] {
        let t = load_file(rel, BadRows::Fail).unwrap();
        let mut buf = Vec::new();
        native::write(&mut buf, &t.jobs).unwrap();
        let back = load(Format::Gpuplan, "x.csv", &buf, &LoadOptions::default()).unwrap();
        assert_eq!(back.jobs, t.jobs, "{rel}");
        assert_eq!(detect(&buf), Some(Format::Gpuplan));
    }
}

#[test]
fn cluster_files_load() {
    let dir = format!("{}/../../traces", env!("CARGO_MANIFEST_DIR"));
    for (f, gpus, nodes) in [
        ("clusters/pollux-16x4.csv", 64, 16),
        ("clusters/hetero-64.csv", 64, 16),
        ("clusters/cluster-2048.csv", 2048, 256),
    ] {
        let c = cluster_file::parse(f, &std::fs::read(format!("{dir}/{f}")).unwrap()).unwrap();
        assert_eq!((c.total_gpus(), c.num_nodes()), (gpus, nodes), "{f}");
    }
    let (c, cpu_only) = alibaba::parse(
        "pai_machine_spec.csv",
        &std::fs::read(format!("{dir}/alibaba/pai_machine_spec.csv")).unwrap(),
    )
    .unwrap();
    assert_eq!((c.total_gpus(), c.num_nodes(), cpu_only), (6742, 1814, 83));
    let e = cluster_file::parse("c.csv", b"name,gpus,gpu_type\na,4,t4\na,0,t4\nb,2,\n").unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("c.csv:3:gpus") && s.contains("c.csv:4:gpu_type"),
        "{s}"
    );
}

/// Every loader over a small corpus of malformed inputs: an error or a
/// trace, never a panic, and every error names a line and a field.
#[test]
fn loaders_survive_malformed_inputs() {
    let dir = format!("{}/tests/malformed", env!("CARGO_MANIFEST_DIR"));
    let tputs = gavel::Throughputs::parse(
        "t.json",
        br#"{"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 2.5}}}"#,
    )
    .unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for format in Format::ALL {
            for bad_rows in [BadRows::Fail, BadRows::Skip] {
                let opts = LoadOptions {
                    bad_rows,
                    gavel_throughputs: Some(&tputs),
                    gavel_gpu_type: None,
                };
                if let Err(CoreError::Parse(errs)) = load(format, &name, &bytes, &opts) {
                    for e in errs {
                        assert!(!e.field.is_empty(), "{name} as {format:?}: {e}");
                        assert!(e.to_string().starts_with(&name), "{name}: {e}");
                    }
                }
            }
        }
        let _ = cluster_file::parse(&name, &bytes);
        let _ = alibaba::parse(&name, &bytes);
        let _ = gavel::Throughputs::parse(&name, &bytes);
        let _ = detect(&bytes);
    }
}

/// Two jobs of one name would be two rows of that name in `jobs.csv` (and
/// one job to the daemon): the second is a row error naming file:line:field.
#[test]
fn duplicate_job_names_are_row_errors() {
    let text = "name,time,application,num_replicas,batch_size\n\
        a,0,cifar10,1,128\n\
        b,10,cifar10,1,128\n\
        a,20,cifar10,2,128\n";
    let e = load(Format::Pollux, "w.csv", text.as_bytes(), &LoadOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("w.csv:4:name: duplicate job name 'a', first on line 2"),
        "{msg}"
    );
    let opts = LoadOptions {
        bad_rows: BadRows::Skip,
        ..Default::default()
    };
    let t = load(Format::Pollux, "w.csv", text.as_bytes(), &opts).unwrap();
    assert_eq!(t.jobs.len(), 2);
}
