//! End-to-end tests of `gpuplan serve` with the fake device backend and real
//! child processes on loopback. The jobs are examples/sleep_train.py, which
//! holds an exclusive flock on its (job, rank) and on its GPU while it runs:
//! a job running twice at once, or two jobs sharing a GPU, leave a line in
//! LOCK_DIR/conflicts.log. Waits count rounds and events; the only clock
//! is a generous deadline that turns a hang into a failure.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};

/// The lock-based checks every end-to-end run must pass.
fn assert_clean_run(locks: &Path, names: &[String], jobs: &[Value]) {
    assert_eq!(
        read(&locks.join("conflicts.log")),
        "",
        "a job ran twice or two jobs shared a GPU"
    );
    for j in jobs {
        assert_eq!(j["phase"], "completed", "{j:#}");
    }
    let done = read(&locks.join("done.log"));
    for n in names {
        assert_eq!(
            done.lines().filter(|l| l == n).count(),
            1,
            "{n} must finish exactly once: {done}"
        );
    }
    // CUDA_VISIBLE_DEVICES was the job's GPUs on the rank's node.
    for l in read(&locks.join("starts.log")).lines() {
        let s: Value = serde_json::from_str(l).unwrap();
        let vis: Vec<&str> = s["visible"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(vis.contains(&s["gpu"].as_str().unwrap()), "{l}");
        let node = &vis[0][..vis[0].rfind('-').unwrap()];
        assert!(
            vis.iter().all(|v| v.starts_with(node)),
            "visible devices span nodes: {l}"
        );
    }
}

#[test]
fn six_jobs_on_2x4_are_reallocated_and_all_complete() {
    let dir = tmp("six");
    let locks = dir.join("locks");
    let srv = Server::start("fake:2x4", &dir.join("state"), free_port());
    let names: Vec<String> = (0..6).map(|i| format!("job{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        srv.submit(train_job(n, &locks, 6000 + 2000 * i as u32, 4));
    }
    let r0 = srv.rounds();
    srv.wait_for("all six jobs to complete", assert_disjoint, all_final);
    let jobs = srv.jobs();
    assert_clean_run(&locks, &names, &jobs);
    assert!(srv.rounds() > r0 + 3, "several rounds ran");
    // Re-allocation: some job ran on two different GPU sets across rounds.
    let starts = read(&locks.join("starts.log"));
    let moved = names.iter().any(|n| {
        let sets: std::collections::BTreeSet<String> = starts
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|s| s["job"] == n.as_str() && s["rank"] == 0)
            .map(|s| s["visible"].to_string())
            .collect();
        sets.len() >= 2
    });
    assert!(moved, "no job was re-allocated: {starts}");
    assert!(jobs.iter().any(|j| j["restarts"].as_u64().unwrap() > 0));
    // The daemon learnt goodput models from the reports.
    assert!(
        jobs.iter().any(|j| !j["model"].is_null())
            || srv.jobs().iter().all(|j| j["step"].as_u64().unwrap() > 0)
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kill_9_mid_round_loses_and_duplicates_nothing() {
    let dir = tmp("kill9");
    let locks = dir.join("locks");
    let mut srv = Server::start("fake:2x4", &dir.join("state"), free_port());
    let names: Vec<String> = (0..6).map(|i| format!("k{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        srv.submit(train_job(n, &locks, 8000 + 1000 * i as u32, 4));
    }
    // Kill while a plan is half applied: some job starting or stopping.
    for _ in 0..3 {
        srv.wait_for("a job being moved", assert_disjoint, |jobs| {
            jobs.iter()
                .any(|j| ["starting", "stopping"].contains(&j["phase"].as_str().unwrap()))
                || all_final(jobs)
        });
        srv.kill9();
        srv.restart();
    }
    srv.wait_for("all jobs to complete after restarts", assert_disjoint, all_final);
    let jobs = srv.jobs();
    assert_eq!(jobs.len(), 6, "no job lost");
    assert_clean_run(&locks, &names, &jobs);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_gpu_moves_its_job() {
    let dir = tmp("fault");
    let locks = dir.join("locks");
    let srv = Server::start("fake:1x2", &dir.join("state"), free_port());
    let mut spec = train_job("f", &locks, 10_000_000, 1);
    spec["grace_s"] = json!(1.0);
    let id = srv.submit(spec);
    let mut first = String::new();
    srv.wait_for(
        "the job to run",
        |_| {},
        |jobs| {
            let j = &jobs[0];
            if j["phase"] == "running" && j["step"].as_u64().unwrap() > 0 {
                first = j["gpus"][0].as_str().unwrap().to_string();
                true
            } else {
                false
            }
        },
    );
    let tok = srv.token.clone();
    let (c, v) = srv.req(
        "POST",
        "/v1/devices/fault",
        Some(&tok),
        Some(json!({"uuid": first, "fault": "unhealthy"})),
    );
    assert_eq!(c, 200, "{v}");
    srv.wait_for("the job to move", assert_disjoint, |jobs| {
        let j = &jobs[0];
        j["phase"] == "running" && j["gpus"][0].as_str().unwrap() != first
    });
    let j = srv.get(&format!("/v1/jobs/{id}"));
    assert!(j["reason"].as_str().unwrap().contains("unhealthy"), "{j}");
    assert_eq!(j["crashes"], 0, "a move is not a crash");
    let status = srv.get("/v1/status");
    assert!(status["last_round"]["healthy_gpus"] == 1, "{status}");
    let (c, _) = srv.req("POST", &format!("/v1/jobs/{id}/cancel"), Some(&tok), None);
    assert_eq!(c, 200);
    srv.wait_for("the job to stop", |_| {}, all_final);
    assert_eq!(read(&locks.join("conflicts.log")), "");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_specs_bad_tokens_and_crashing_jobs_are_refused_or_failed_clearly() {
    let dir = tmp("bad");
    let srv = Server::start("fake:1x2", &dir.join("state"), free_port());
    let tok = srv.token.clone();
    // No token, wrong token.
    let (c, v) = srv.req("GET", "/v1/jobs", None, None);
    assert_eq!(c, 401);
    assert!(v["error"].as_str().unwrap().contains("token"), "{v}");
    let (c, _) = srv.req("POST", "/v1/jobs", Some("wrong"), Some(json!({})));
    assert_eq!(c, 401);
    // Bad JSON spec: every problem named.
    let (c, v) = srv.req(
        "POST",
        "/v1/jobs",
        Some(&tok),
        Some(json!({"name": "x", "command": "true", "min_gpus": 0, "max_gpus": 0, "batch_size": 0})),
    );
    assert_eq!(c, 400);
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("request:min_gpus: must be >= 1") && e.contains("request:batch_size"),
        "{e}"
    );
    let (c, v) = srv.req(
        "POST",
        "/v1/jobs",
        Some(&tok),
        Some(json!({"name": "x", "max_gpu": 2})),
    );
    assert_eq!(c, 400);
    assert!(v["error"].as_str().unwrap().contains("max_gpu"), "{v}");
    // Bad TOML through the CLI: file, line and field; exit code 2.
    let f = dir.join("bad.toml");
    std::fs::write(
        &f,
        "name = \"a\"\ncommand = \"true\"\nmin_gpus = 4\nmax_gpus = 2\nbatch_size = 8\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .arg("submit")
        .arg(&f)
        .args(["--server", &srv.url("")])
        .env("GPUPLAN_TOKEN", &tok)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:4:max_gpus: must be >= min_gpus (4), got 2"),
        "{err}"
    );
    // The CLI without a token is refused by the daemon.
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(["jobs", "--server", &srv.url("")])
        .env("GPUPLAN_TOKEN", "nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    // A crashing job is restarted with back-off, then failed with its last log lines.
    let crash = srv.submit(json!({
        "name": "crasher", "command": "echo boom on $CUDA_VISIBLE_DEVICES; exit 7",
        "min_gpus": 1, "max_gpus": 1, "batch_size": 8, "max_crashes": 3
    }));
    let other = srv.submit(json!({
        "name": "other", "command": "sleep 30", "min_gpus": 1, "max_gpus": 1, "batch_size": 8, "grace_s": 0.5
    }));
    // A job's token reaches its own job only.
    let crash_tok = {
        let st = std::fs::read_to_string(dir.join("state/journal.jsonl")).unwrap();
        st.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["id"] == crash)
            .map(|v| v["token"].as_str().unwrap().to_string())
            .unwrap()
    };
    let (c, _) = srv.req("GET", &format!("/v1/jobs/{crash}"), Some(&crash_tok), None);
    assert_eq!(c, 200);
    let (c, _) = srv.req("GET", &format!("/v1/jobs/{other}"), Some(&crash_tok), None);
    assert_eq!(c, 401);
    let (c, _) = srv.req(
        "POST",
        &format!("/v1/jobs/{other}/cancel"),
        Some(&crash_tok),
        None,
    );
    assert_eq!(c, 401);
    srv.wait_for(
        "the crashing job to fail",
        |_| {},
        |jobs| jobs.iter().any(|j| j["id"] == crash && j["phase"] == "failed"),
    );
    let j = srv.get(&format!("/v1/jobs/{crash}"));
    assert_eq!(j["crashes"], 3);
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("exited with code 7; failed after 3 crashes"),
        "{j}"
    );
    assert!(
        j["last_log"][0]
            .as_str()
            .unwrap()
            .starts_with("boom on GPU-fake-0-"),
        "{j}"
    );
    let (c, _) = srv.req("POST", &format!("/v1/jobs/{other}/cancel"), Some(&tok), None);
    assert_eq!(c, 200);
    let (c, v) = srv.req("POST", &format!("/v1/jobs/{other}/cancel"), Some(&tok), None);
    assert!(c == 409 || c == 200, "{v}");
    srv.wait_for("cancel", |_| {}, all_final);
    let (c, _) = srv.req("GET", "/v1/jobs/999", Some(&tok), None);
    assert_eq!(c, 404);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn jobs_run_as_the_submitting_user_when_the_daemon_is_root() {
    use std::os::unix::fs::MetadataExt;
    let dir = tmp("uid");
    let srv = Server::start("fake:1x1", &dir.join("state"), free_port());
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    let id = srv.submit(json!({
        "name": "who", "command": "id -u", "min_gpus": 1, "max_gpus": 1, "batch_size": 1, "uid": 65534
    }));
    srv.wait_for("the job to finish", |_| {}, all_final);
    let j = srv.get(&format!("/v1/jobs/{id}"));
    assert_eq!(j["phase"], "completed", "{j}");
    let logs = srv.get(&format!("/v1/jobs/{id}/logs"));
    // Root can switch users; anyone else runs jobs as themselves.
    let want = if me == 0 {
        "65534".to_string()
    } else {
        me.to_string()
    };
    assert_eq!(logs["lines"][0], want.as_str(), "{logs}");
    let mode = std::fs::metadata(dir.join("state/journal.jsonl")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "the journal holds job tokens");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 33, item 6: `gpuplan submit` of a 10 MB job file says which
/// bound it breaks (the command's) instead of "Broken pipe"; nothing is
/// sent, so no daemon need listen.
#[test]
fn a_huge_job_file_is_refused_by_submit_with_its_bound() {
    let dir = tmp("huge");
    let f = dir.join("huge.toml");
    let cmd = "x".repeat(10 << 20);
    std::fs::write(
        &f,
        format!("name = \"a\"\ncommand = \"{cmd}\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 8\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .arg("submit")
        .arg(&f)
        .args(["--server", &format!("http://127.0.0.1:{}", free_port())])
        .env("GPUPLAN_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("huge.toml:2:command: must be at most 32768 bytes, got 10485760")
            && !err.contains("Broken pipe"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
