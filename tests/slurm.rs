//! `gpuplan serve --engine slurm` against a real Slurm cluster: Debian's
//! slurm-wlm, started by scripts/slurm-cluster.sh (munge, slurmctld and two
//! slurmd with 4 fake GPUs each, in a temporary directory on free ports)
//! and stopped by its pids when the test ends, passed or failed. Needs
//! root and slurm-wlm, which `make test`'s set-up installs; where neither
//! can be had, GPUPLAN_SKIP_SLURM=1 skips these tests and says so.
//!
//! The jobs are examples/sleep_train.py: it locks its (job, rank) and its
//! GPU (node and Slurm's device index) while it runs, so a job running
//! twice or two jobs sharing a GPU leave a line in conflicts.log.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

struct Cluster {
    dir: PathBuf,
    conf: String,
}

impl Cluster {
    /// `None` (with a message) when GPUPLAN_SKIP_SLURM is set.
    fn start(tag: &str) -> Option<Cluster> {
        Self::start_with(tag, false)
    }

    /// With `accounting`, the cluster keeps job accounting (`sacct`):
    /// slurm-cluster.sh's ACCOUNTING=1, its own MariaDB and slurmdbd.
    fn start_with(tag: &str, accounting: bool) -> Option<Cluster> {
        Self::start_cpus(tag, accounting, 8)
    }

    /// With `cpus` CPUs declared a node (each job takes one a node).
    fn start_cpus(tag: &str, accounting: bool, cpus: u32) -> Option<Cluster> {
        if std::env::var_os("GPUPLAN_SKIP_SLURM").is_some() {
            eprintln!("GPUPLAN_SKIP_SLURM is set: the Slurm test {tag} is skipped");
            return None;
        }
        let dir = tmp(&format!("slurm-{tag}")).join("cluster");
        let script = root().join("scripts/slurm-cluster.sh");
        let start = || {
            Command::new("bash")
                .arg(&script)
                .arg("start")
                .arg(&dir)
                .env("ACCOUNTING", if accounting { "1" } else { "0" })
                .env("CPUS", cpus.to_string())
                .output()
                .expect("run scripts/slurm-cluster.sh")
        };
        let mut out = start();
        // Ports are picked free, then bound by the daemons: a test's
        // cluster starting beside another can lose one in between
        // ("Address already in use"). Such a start is retried, twice.
        for _ in 0..2 {
            if out.status.success() {
                break;
            }
            let _ = Command::new("bash").arg(&script).arg("stop").arg(&dir).status();
            let _ = std::fs::remove_dir_all(&dir);
            out = start();
        }
        assert!(
            out.status.success(),
            "a Slurm cluster for tests needs root and slurm-wlm (make test installs it; \
             GPUPLAN_SKIP_SLURM=1 skips): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Cluster {
            conf: dir.join("slurm.conf").to_string_lossy().into_owned(),
            dir,
        })
    }

    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn jobs(&self) -> Vec<Value> {
        let v: Value = serde_json::from_str(&self.run("squeue", &["--json"])).unwrap();
        v["jobs"].as_array().unwrap().clone()
    }

    fn server(&self, state: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut backend = vec!["--engine", "slurm", "--partition", "all", "--interval", "500ms"];
        backend.extend_from_slice(extra);
        let mut envs = vec![("SLURM_CONF", self.conf.as_str())];
        envs.extend_from_slice(env);
        Server::start_with(&backend, &envs, state, free_port())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("scripts/slurm-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Nodes of a job's GPUs as the API shows them (`n1/gpu0`).
fn nodes_of(j: &Value) -> BTreeSet<String> {
    j["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap().split('/').next().unwrap().to_string())
        .collect()
}

fn starts(locks: &Path) -> Vec<Value> {
    read(&locks.join("starts.log"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each attempt ran where Slurm put it, as the plan laid it out: ranks on
/// n1/n2 only, as many ranks on each of its nodes (one GPU count per
/// node), each rank seeing its node's GPUs of the job (Slurm's indices).
/// Returns (job, attempt) → (nodes, world) for attempts whose every rank
/// started.
fn check_layouts(locks: &Path) -> BTreeMap<(String, u64), (BTreeSet<String>, u64)> {
    let mut per: BTreeMap<(String, u64), Vec<Value>> = BTreeMap::new();
    for s in starts(locks) {
        let attempt = s["attempt"].as_str().unwrap().parse().unwrap();
        let key = (s["job"].as_str().unwrap().to_string(), attempt);
        per.entry(key).or_default().push(s);
    }
    let mut out = BTreeMap::new();
    for (key, ranks) in per {
        let world = ranks[0]["world"].as_u64().unwrap();
        // A rank stopped while its interpreter started may never log; none logs twice.
        let ids: BTreeSet<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
        assert_eq!(
            ids.len(),
            ranks.len(),
            "{key:?}: a rank started twice: {ranks:#?}"
        );
        assert!(ids.iter().all(|&r| r < world), "{key:?}: {ranks:#?}");
        if (ranks.len() as u64) < world {
            continue;
        }
        let mut by_node: BTreeMap<String, usize> = BTreeMap::new();
        for r in &ranks {
            let node = r["node"].as_str().unwrap().to_string();
            assert!(node == "n1" || node == "n2", "{r}");
            let vis = r["visible"].as_array().unwrap();
            assert!(
                vis.iter()
                    .all(|v| ["0", "1", "2", "3"].contains(&v.as_str().unwrap())),
                "{r}"
            );
            *by_node.entry(node).or_default() += 1;
        }
        for r in &ranks {
            let on_node = by_node[r["node"].as_str().unwrap()];
            assert_eq!(r["visible"].as_array().unwrap().len(), on_node, "{key:?}: {r}");
        }
        let counts: BTreeSet<usize> = by_node.values().copied().collect();
        assert_eq!(counts.len(), 1, "{key:?}: one GPU count per node: {by_node:?}");
        out.insert(key, (by_node.keys().cloned().collect(), world));
    }
    out
}

fn slurm_job(name: &str, locks: &Path, examples: u32, max_gpus: u32, extra: &str) -> Value {
    let mut j = train_job(name, locks, examples, max_gpus);
    let cmd = format!("{} {extra}", j["command"].as_str().unwrap());
    j["command"] = json!(cmd);
    j
}

#[test]
fn six_jobs_run_where_planned_move_and_leave_a_drained_node() {
    let Some(cl) = Cluster::start("six") else { return };
    let dir = tmp("slurm-six-run");
    let locks = dir.join("locks");
    let srv = cl.server(&dir.join("state"), &[], &[]);

    // The cluster as a round sees it, from sinfo.
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args([
            "cluster",
            "show",
            "--engine",
            "slurm",
            "--partition",
            "all",
            "--format",
            "json",
        ])
        .env("SLURM_CONF", &cl.conf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = shown["cluster"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{shown}");
    assert!(
        nodes.iter().all(|n| n["gpus"] == 4 && n["gpu_type"] == "fake"),
        "{shown}"
    );

    let names: Vec<String> = (0..6).map(|i| format!("job{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        srv.submit(slurm_job(n, &locks, 16000 + 4000 * i as u32, 8, ""));
    }
    // Every job is a held Slurm job in the partition from its submission on.
    let ours = cl.jobs().iter().filter(|j| j["comment"] == "gpuplan").count();
    assert_eq!(ours, 6);

    // Drain n2 once a job runs there; its jobs leave it within a round or two.
    let t0 = Instant::now();
    while !starts(&locks).iter().any(|s| s["node"] == "n2") {
        assert!(t0.elapsed() < DEADLINE, "nothing ran on n2: {:#?}", srv.jobs());
        assert_disjoint(&srv.jobs());
        std::thread::sleep(Duration::from_millis(100));
    }
    cl.run(
        "scontrol",
        &["update", "nodename=n2", "state=drain", "reason=test"],
    );
    let drained_at = srv.rounds();
    srv.wait_for("no job on n2", assert_disjoint, |js| {
        js.iter().all(|j| !nodes_of(j).contains("n2"))
    });
    assert!(
        srv.rounds() <= drained_at + 2,
        "re-planned off n2 within one round ({} -> {})",
        drained_at,
        srv.rounds()
    );
    let t_left = srv.rounds();
    srv.wait_for("all six jobs to complete", assert_disjoint, all_final);
    let jobs = srv.jobs();
    for j in &jobs {
        assert_eq!(j["phase"], "completed", "{j:#}");
    }
    assert_eq!(
        read(&locks.join("conflicts.log")),
        "",
        "a job ran twice or two jobs shared a GPU"
    );
    let done = read(&locks.join("done.log"));
    for n in &names {
        assert_eq!(
            done.lines().filter(|l| l == n).count(),
            1,
            "{n} finishes exactly once: {done}"
        );
    }
    let layouts = check_layouts(&locks);
    // Some job was re-allocated while it ran, to other nodes and to another
    // GPU count (by the drain and by the planner).
    let mut moved = false;
    for n in &names {
        let shapes: Vec<&(BTreeSet<String>, u64)> = layouts
            .iter()
            .filter(|((job, _), _)| job == n)
            .map(|(_, v)| v)
            .collect();
        let nodes: BTreeSet<_> = shapes.iter().map(|s| &s.0).collect();
        let counts: BTreeSet<_> = shapes.iter().map(|s| s.1).collect();
        moved |= nodes.len() > 1 && counts.len() > 1;
    }
    assert!(
        moved,
        "no job moved to other nodes and another GPU count: {layouts:#?}"
    );
    assert!(t_left > 0);
    // Slurm was told the same: within a round, nothing of ours is left
    // queued or running there. A job that finished while a requeue-hold
    // was under way has its requeued copy cancelled.
    let t0 = Instant::now();
    loop {
        let left: Vec<Value> = cl
            .jobs()
            .into_iter()
            .filter(|j| j["comment"] == "gpuplan")
            .filter(|j| !["COMPLETED", "CANCELLED"].contains(&j["job_state"].as_str().unwrap()))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(t0.elapsed() < DEADLINE, "left in Slurm: {left:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 56: the operator's case. Elastic jobs (1-4 GPUs) under the
/// default planner, shell commands that never report, and a drain a few
/// seconds after they start: the drained node's job is re-planned off it
/// within three rounds, the daemon's log says why, and it runs again on
/// the other node.
#[test]
fn elastic_jobs_that_never_report_leave_a_node_drained_soon_after_they_start() {
    // The operator's nodes: 2 CPUs each, so a node runs two jobs at most.
    let Some(cl) = Cluster::start_cpus("drain", false, 2) else {
        return;
    };
    let dir = tmp("slurm-drain-run");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let log = dir.join("daemon.log");
    // The operator's round interval, not the other tests' 500 ms.
    let srv = Server::start_with(
        &[
            "--engine",
            "slurm",
            "--partition",
            "all",
            "--interval",
            "2s",
            "--log",
            log.to_str().unwrap(),
        ],
        &[("SLURM_CONF", cl.conf.as_str())],
        &dir.join("state"),
        free_port(),
    );
    for i in 0..3 {
        srv.submit(json!({
            "name": format!("e{i}"),
            "command": format!(
                "echo node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES >> {}; sleep 20",
                out.join(format!("e{i}")).display()
            ),
            "min_gpus": 1,
            "max_gpus": 4,
            "batch_size": 64,
        }));
    }
    let first = out.join("e0");
    let t0 = Instant::now();
    let node = loop {
        if let Some(n) = read(&first)
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().next())
        {
            break n.trim_start_matches("node=").to_string();
        }
        assert!(t0.elapsed() < DEADLINE, "e0 never started: {:#?}", srv.jobs());
        std::thread::sleep(Duration::from_millis(100));
    };
    let other = if node == "n1" { "n2" } else { "n1" };
    // A few seconds into its run.
    std::thread::sleep(Duration::from_secs(3));
    cl.run(
        "scontrol",
        &[
            "update",
            &format!("nodename={node}"),
            "state=drain",
            "reason=test",
        ],
    );
    let drained_at = srv.rounds();
    srv.wait_for(
        "e0 off the drained node",
        |_| {},
        |js| {
            js.iter()
                .find(|j| j["name"] == "e0")
                .is_some_and(|j| !nodes_of(j).contains(node.as_str()))
        },
    );
    assert!(
        srv.rounds() <= drained_at + 3,
        "re-planned off {node} within three rounds ({} -> {})",
        drained_at,
        srv.rounds()
    );
    let t0 = Instant::now();
    while !read(&first).contains(&format!("node={other}")) {
        assert!(
            t0.elapsed() < DEADLINE,
            "e0 never ran again on {other}: {} {:#?}",
            read(&first),
            srv.jobs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = read(&log);
    assert!(
        said.lines()
            .any(|l| l.contains("(e0)") && l.contains("unhealthy") && l.contains(node.as_str())),
        "the daemon's log says why e0 moved: {said}"
    );
}

#[test]
fn kill_9_between_requeue_hold_and_release_runs_the_job_again_once() {
    let Some(cl) = Cluster::start("kill") else { return };
    let dir = tmp("slurm-kill-run");
    let locks = dir.join("locks");
    let mut srv = cl.server(&dir.join("state"), &["--grace", "20s"], &[]);
    // Checkpointing on SIGTERM takes 4 s: Slurm shows the job COMPLETING,
    // requeued and held, and gpuplan cannot release it before it ends.
    // Fixed at 4 GPUs, so only the drain moves it.
    let mut job = slurm_job("long", &locks, 60000, 4, "--term-s 4");
    job["min_gpus"] = json!(4);
    srv.submit(job);
    let ours = |cl: &Cluster| cl.jobs().into_iter().find(|j| j["comment"] == "gpuplan").unwrap();
    let t0 = Instant::now();
    while ours(&cl)["job_state"] != "RUNNING" || starts(&locks).len() < 4 {
        assert!(t0.elapsed() < DEADLINE, "the job never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let node = ours(&cl)["nodes"].as_str().unwrap().to_string();
    let before = ours(&cl)["restart_cnt"].as_u64().unwrap();
    cl.run(
        "scontrol",
        &[
            "update",
            &format!("nodename={node}"),
            "state=drain",
            "reason=test",
        ],
    );
    // Wait for the requeue-hold, then kill the daemon before the release.
    let t0 = Instant::now();
    loop {
        let j = ours(&cl);
        if j["job_state"] == "COMPLETING" && j["restart_cnt"].as_u64() > Some(before) {
            break;
        }
        assert!(t0.elapsed() < DEADLINE, "no requeue-hold: {j:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
    srv.kill9();
    let j = ours(&cl);
    assert_ne!(j["job_state"], "RUNNING", "killed before the release: {j:#}");
    srv.restart();
    srv.wait_for("the job to complete", |_| {}, all_final);
    let jobs = srv.jobs();
    assert_eq!(jobs[0]["phase"], "completed", "{:#}", jobs[0]);
    assert_eq!(read(&locks.join("conflicts.log")), "");
    assert_eq!(read(&locks.join("done.log")), "long\n", "completes exactly once");
    let layouts = check_layouts(&locks);
    assert_eq!(
        layouts.len(),
        2,
        "two attempts, the second on the other node: {layouts:#?}"
    );
    let other: Vec<_> = layouts.values().map(|(n, _)| n.clone()).collect();
    assert!(
        other[0].contains(&node) && !other[1].contains(&node),
        "{layouts:#?}"
    );
}

#[test]
fn failing_or_hanging_slurm_commands_are_named_and_retried_and_users_jobs_are_adopted() {
    let Some(cl) = Cluster::start("flaky") else { return };
    let dir = tmp("slurm-flaky-run");
    let locks = dir.join("locks");
    // A stand-in scontrol that fails or hangs while a flag file exists.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v scontrol"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let stand_in = bin.join("scontrol");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\n[ -e {d}/fail ] && {{ echo 'slurm_update error: injected failure' >&2; exit 1; }}\n\
             [ -e {d}/hang ] && sleep 30\nexec {real} \"$@\"\n",
            d = dir.display(),
            real = real.trim()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&stand_in).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let srv = cl.server(&dir.join("state"), &["--slurm-timeout", "1s"], &[("PATH", &path)]);

    std::fs::write(dir.join("fail"), "").unwrap();
    srv.submit(slurm_job("a", &locks, 2000, 2, ""));
    srv.wait_for(
        "the failure to be reported",
        |_| {},
        |js| {
            js[0]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("`scontrol") && r.contains("injected failure"))
        },
    );
    std::fs::remove_file(dir.join("fail")).unwrap();
    srv.wait_for("job a to complete after the retry", |_| {}, all_final);

    std::fs::write(dir.join("hang"), "").unwrap();
    srv.submit(slurm_job("b", &locks, 2000, 2, ""));
    srv.wait_for(
        "the time-out to be reported",
        |_| {},
        |js| {
            js.iter().any(|j| {
                j["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("timed out after 1 s"))
            })
        },
    );
    std::fs::remove_file(dir.join("hang")).unwrap();
    srv.wait_for("job b to complete after the retry", |_| {}, all_final);
    assert_eq!(read(&locks.join("done.log")), "a\nb\n");

    // A job that needs both nodes: 4+4, one task per node, eight ranks.
    let mut wide = slurm_job("wide", &locks, 4000, 8, "");
    wide["min_gpus"] = json!(8);
    srv.submit(wide);
    srv.wait_for("the wide job to complete", |_| {}, all_final);
    let layouts = check_layouts(&locks);
    let (nodes, world) = &layouts[&("wide".to_string(), 1)];
    assert_eq!((nodes.len(), *world), (2, 8), "{layouts:#?}");

    // A user's own held job with --comment=gpuplan is adopted and run.
    // One GPU at most: such a script cannot say when it is done, so a
    // re-allocation that lands as it exits would run it again
    // (docs/slurm.md); that is not what this checks.
    let script = dir.join("user.sh");
    let marker = dir.join("user-ran");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#GPUPLAN min_gpus = 1\n#GPUPLAN max_gpus = 1\n#GPUPLAN batch_size = 32\n\
             echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES\" >> {}\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = cl.run(
        "sbatch",
        &[
            "--parsable",
            "-H",
            "--comment=gpuplan",
            "-p",
            "all",
            "-J",
            "users-own",
            "-o",
            &dir.join("user-%j.out").to_string_lossy(),
            &script.to_string_lossy(),
        ],
    );
    assert!(out.trim().parse::<u64>().is_ok(), "{out}");
    srv.wait_for(
        "the user's job to be adopted and complete",
        |_| {},
        |js| js.len() == 4 && all_final(js),
    );
    let jobs = srv.jobs();
    let users = jobs.iter().find(|j| j["name"] == "users-own").expect("adopted");
    assert_eq!(users["phase"], "completed", "{users:#}");
    let ran = read(&marker);
    assert_eq!(ran.lines().count(), 1, "ran once: {ran}");
    assert!(ran.starts_with("n1 ") || ran.starts_with("n2 "), "{ran}");
}

/// `gpuplan ARGS` run in `dir` against the test cluster.
fn gpuplan_in(cl: &Cluster, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(args)
        .current_dir(dir)
        .env("SLURM_CONF", &cl.conf)
        .output()
        .unwrap()
}

/// A sweep.json without the fields that time the run (planner_ms, wall_s).
fn sweep_summary(path: &Path) -> Value {
    fn strip(v: &mut Value) {
        if let Some(m) = v.as_object_mut() {
            m.remove("planner_ms");
            m.remove("wall_s");
            m.values_mut().for_each(strip);
        }
    }
    let mut v: Value = serde_json::from_str(&read(path)).unwrap();
    strip(&mut v);
    v
}

/// The array job id in `sweep --slurm`'s "submitted array job N (...)".
fn array_id(stderr: &str) -> u64 {
    let rest = stderr
        .split("submitted array job ")
        .nth(1)
        .unwrap_or_else(|| panic!("no array job submitted: {stderr}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// The array's tasks as `squeue` lists them: (job_state, node).
fn array_tasks(cl: &Cluster, id: u64) -> Vec<(String, String)> {
    cl.jobs()
        .iter()
        .filter(|j| j["array_job_id"] == id)
        .map(|j| {
            (
                j["job_state"].as_str().unwrap().to_string(),
                j["nodes"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_sweep_on_slurm_gives_the_local_summary_and_resumes_with_only_the_missing_cells() {
    let Some(cl) = Cluster::start("sweep") else { return };
    let dir = tmp("slurm-sweep-run");
    // Two small workloads (well under a second each), given as relative
    // paths: the cells run in the submitter's working directory.
    let w = dir.join("w");
    std::fs::create_dir_all(&w).unwrap();
    let short = read(&root().join("tests/data/short-workload.csv"));
    std::fs::write(w.join("short-workload.csv"), &short).unwrap();
    let first8: Vec<&str> = short.lines().take(9).collect();
    std::fs::write(w.join("shorter.csv"), first8.join("\n") + "\n").unwrap();
    let sweep = [
        "sweep",
        "--workloads",
        "w",
        "--policies",
        "fifo,tiresias",
        "--format",
        "json",
    ];
    let with = |extra: &[&'static str]| -> Vec<&str> { sweep.iter().chain(extra).copied().collect() };
    let on_slurm = with(&["--out", "out", "--slurm", "--partition", "all"]);

    let local = gpuplan_in(&cl, &dir, &with(&["--out", "local"]));
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    let expected = sweep_summary(&dir.join("local/sweep.json"));
    assert_eq!(expected["policies"].as_object().unwrap().len(), 2, "{expected}");

    // Cells in task order: fifo (short-workload, shorter), tiresias (same).
    let t0 = Instant::now();
    let o = gpuplan_in(&cl, &dir, &on_slurm);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    eprintln!(
        "the Slurm sweep of 4 cells took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(o.status.success(), "{err}");
    assert!(err.contains("(4 cells: 0-3) to partition all"), "{err}");
    assert_eq!(sweep_summary(&dir.join("out/sweep.json")), expected);
    let stdout: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stdout["policies"].as_object().unwrap().len(), 2);
    let tasks = array_tasks(&cl, array_id(&err));
    assert_eq!(tasks.len(), 4, "{tasks:?}");
    assert!(
        tasks
            .iter()
            .all(|(s, n)| s == "COMPLETED" && (n == "n1" || n == "n2")),
        "{tasks:?}"
    );
    for cell in 0..4 {
        assert!(dir.join(format!("out/slurm/cell-{cell}.out")).exists());
    }

    // A cell that fails (its folder is a file) leaves the sweep without a
    // summary: exit 1, naming the cell, its log and the log's error.
    let cell3 = dir.join("out/tiresias/shorter");
    std::fs::remove_dir_all(&cell3).unwrap();
    std::fs::write(&cell3, "").unwrap();
    std::fs::remove_file(dir.join("out/sweep.json")).unwrap();
    let o = gpuplan_in(&cl, &dir, &on_slurm);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("resuming: 3 of 4"), "{err}");
    assert!(err.contains("(1 cell: 3)"), "{err}");
    assert!(
        err.contains("cell 3: tiresias on shorter (seed 0), log out/slurm/cell-3.out: error: creating out/tiresias/shorter"),
        "{err}"
    );
    assert!(!dir.join("out/sweep.json").exists());

    // Fixed, the same command submits that cell alone and completes the sweep.
    std::fs::remove_file(&cell3).unwrap();
    let o = gpuplan_in(&cl, &dir, &on_slurm);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("(1 cell: 3)"), "{err}");
    assert_eq!(array_tasks(&cl, array_id(&err)).len(), 1);
    assert_eq!(sweep_summary(&dir.join("out/sweep.json")), expected);

    // The submitter killed while its array waits (the partition is down):
    // the same command waits for that array instead of submitting again.
    std::fs::remove_file(dir.join("out/fifo/shorter/result.json")).unwrap();
    cl.run("scontrol", &["update", "partitionname=all", "state=down"]);
    let log = dir.join("first.err");
    let mut first = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(&on_slurm)
        .current_dir(&dir)
        .env("SLURM_CONF", &cl.conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !read(&log).contains("submitted array job") {
        assert!(t0.elapsed() < DEADLINE, "not submitted: {}", read(&log));
        std::thread::sleep(Duration::from_millis(100));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let id = array_id(&read(&log));
    let second = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(&on_slurm)
        .current_dir(&dir)
        .env("SLURM_CONF", &cl.conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    cl.run("scontrol", &["update", "partitionname=all", "state=up"]);
    let o = second.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("array job {id} of an earlier run still runs")),
        "{err}"
    );
    assert!(!err.contains("submitted array job"), "{err}");
    assert_eq!(array_tasks(&cl, id).len(), 1);
    assert_eq!(sweep_summary(&dir.join("out/sweep.json")), expected);
}

/// The daemon's two-team scenario through Slurm (docs/tenants.md): queues
/// a and b guaranteed 4 GPUs each of the test cluster's 8, and users'
/// own held jobs whose Slurm accounts name their queues. a's elastic job
/// grows to all 8 while b is idle; b's 4-GPU job arrives, and a shrinks to
/// 4 while b's runs.
#[test]
fn slurm_accounts_are_queues_and_a_queue_gets_its_guarantee_back() {
    let Some(cl) = Cluster::start("queues") else {
        return;
    };
    let dir = tmp("slurm-queues-run");
    let queues = dir.join("queues.toml");
    std::fs::write(
        &queues,
        "[[queue]]\nname = \"a\"\nguarantee = 4\n\n[[queue]]\nname = \"b\"\nguarantee = 4\n",
    )
    .unwrap();
    let srv = cl.server(&dir.join("state"), &["--queues", &queues.to_string_lossy()], &[]);
    let held = |name: &str, account: &str, min: u32, max: u32| {
        let script = dir.join(format!("{name}.sh"));
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n#GPUPLAN min_gpus = {min}\n#GPUPLAN max_gpus = {max}\n\
                 #GPUPLAN batch_size = 256\n#GPUPLAN max_batch_size = 4096\nsleep 600\n"
            ),
        )
        .unwrap();
        let out = cl.run(
            "sbatch",
            &[
                "--parsable",
                "-H",
                "--comment=gpuplan",
                "-p",
                "all",
                &format!("--account={account}"),
                "-J",
                name,
                "-o",
                &dir.join(format!("{name}-%j.out")).to_string_lossy(),
                &script.to_string_lossy(),
            ],
        );
        assert!(out.trim().parse::<u64>().is_ok(), "{out}");
    };
    let gpus = |js: &[Value], name: &str| {
        js.iter()
            .find(|j| j["name"] == name)
            .map_or(0, |j| j["gpus"].as_array().map_or(0, Vec::len))
    };
    held("team-a", "a", 1, 8);
    srv.wait_for(
        "a's job to take all 8 GPUs while b is idle",
        |_| {},
        |js| gpus(js, "team-a") == 8,
    );
    let a = srv.jobs().into_iter().find(|j| j["name"] == "team-a").unwrap();
    assert_eq!(a["queue"], "a", "its account is its queue: {a:#}");
    held("team-b", "b", 4, 4);
    srv.wait_for(
        "b's job to run on its guarantee and a's to give it back",
        |_| {},
        |js| {
            gpus(js, "team-a") == 4
                && gpus(js, "team-b") == 4
                && js
                    .iter()
                    .any(|j| j["name"] == "team-b" && j["phase"] == "running")
        },
    );
    let b = srv.jobs().into_iter().find(|j| j["name"] == "team-b").unwrap();
    assert_eq!(b["queue"], "b", "{b:#}");
    let metrics = ureq::get(&srv.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(metrics.contains("gpuplan_queue_gpus{queue=\"b\"} 4"), "{metrics}");
    for j in srv.jobs() {
        srv.req(
            "POST",
            &format!("/v1/jobs/{}/cancel", j["id"]),
            Some(&srv.token.clone()),
            None,
        );
    }
}

/// The import check on a real run: jobs of two accounts on the
/// test cluster with accounting (one on GPUs of both nodes, one that
/// fails, one cancelled while pending, one cancelled while running);
/// `trace import-slurm` turns `sacct --json` and `sinfo --json` into a
/// workload, cluster and queues file; every imported job's submit time,
/// run time, GPUs and account agree with `sacct`'s own text output; and
/// the files simulate, every job finishing, with the accounts as queues.
#[test]
fn import_slurm_reads_a_real_clusters_accounting_and_simulates() {
    let Some(cl) = Cluster::start_with("import", true) else {
        return;
    };
    let dir = tmp("slurm-import-run");
    cl.run("sacctmgr", &["-i", "add", "account", "a,b"]);
    cl.run("sacctmgr", &["-i", "add", "user", "root", "account=a,b"]);
    let sbatch = |account: &str, name: &str, extra: &[&str], cmd: &str| {
        let mut args = vec!["--parsable", "-A", account, "-J", name, "-D"];
        let d = dir.to_string_lossy().into_owned();
        args.push(&d);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--wrap", cmd]);
        cl.run("sbatch", &args).trim().to_string()
    };
    sbatch("a", "a-train", &["-N2", "--gres=gpu:4"], "sleep 3");
    sbatch("b", "b-eval", &["--gres=gpu:2"], "sleep 2");
    sbatch("b", "b-fail", &["--gres=gpu:1"], "sleep 1; exit 3");
    let pending = sbatch("a", "a-cancel", &["--gres=gpu:4"], "sleep 100");
    std::thread::sleep(Duration::from_secs(1));
    cl.run("scancel", &[&pending]);
    let running = sbatch("b", "b-cancel-run", &["--gres=gpu:1"], "sleep 100");
    let until = Instant::now() + Duration::from_secs(60);
    while !cl.jobs().iter().any(|j| {
        j["job_id"].as_u64().map(|i| i.to_string()) == Some(running.clone()) && j["job_state"] == "RUNNING"
    }) {
        assert!(Instant::now() < until, "b-cancel-run never ran: {:?}", cl.jobs());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    cl.run("scancel", &[&running]);
    // Every job over, and recorded (slurmdbd takes the end a moment later).
    loop {
        let text = cl.run("sacct", &["-a", "-X", "-n", "-P", "-o", "State"]);
        if text.lines().count() == 5 && !text.contains("RUNNING") && !text.contains("PENDING") {
            break;
        }
        assert!(Instant::now() < until, "jobs did not end: {text}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let sacct = dir.join("sacct.json");
    let sinfo = dir.join("sinfo.json");
    std::fs::write(&sacct, cl.run("sacct", &["--json", "-a", "-X"])).unwrap();
    std::fs::write(&sinfo, cl.run("sinfo", &["--json"])).unwrap();
    let text = cl.run(
        "sacct",
        &["-a", "-X", "-P", "-o", "JobID,Account,Submit,Start,End,AllocTRES"],
    );
    let p = |x: &Path| x.to_string_lossy().into_owned();
    let (w, c, q) = (
        dir.join("w.csv"),
        dir.join("cluster.csv"),
        dir.join("queues.toml"),
    );
    let out = gpuplan_in(
        &cl,
        &dir,
        &[
            "trace",
            "import-slurm",
            "--sacct",
            &p(&sacct),
            "--nodes",
            &p(&sinfo),
            "--out",
            &p(&w),
            "--cluster-out",
            &p(&c),
            "--queues-out",
            &p(&q),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("wrote 4 jobs (2 accounts)") && stderr.contains("skipped 1 never ran"),
        "{stderr}"
    );
    assert_eq!(read(&c), "name,gpus,gpu_type\nn1,4,fake\nn2,4,fake\n");
    // sacct's text, read here on its own: JobID|Account|Submit|Start|End|AllocTRES.
    let ts = |s: &str| {
        let out = Command::new("date")
            .args(["-u", "-d", s, "+%s"])
            .env("TZ", "UTC")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .unwrap()
    };
    let mut want = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('|').collect();
        if let Some(g) = f[5].split(',').find_map(|kv| kv.strip_prefix("gres/gpu=")) {
            want.insert(
                format!("slurm-{}", f[0]),
                (f[1].to_string(), ts(f[2]), ts(f[4]) - ts(f[3]), g.to_string()),
            );
        }
    }
    let rows: Vec<Vec<String>> = read(&w)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), want.len());
    let t0 = want.values().map(|w| w.1).fold(f64::INFINITY, f64::min);
    // name,submit_s,gpus,app,batch_size,duration_s,model,group
    for r in &rows {
        let (account, submit, run, gpus) = &want[&r[0]];
        assert_eq!(&r[7], account, "{r:?}");
        assert_eq!(r[1].parse::<f64>().unwrap(), submit - t0, "{r:?}");
        assert_eq!(r[5].parse::<f64>().unwrap(), *run, "{r:?}");
        assert_eq!(&r[2], gpus, "{r:?}");
    }
    assert!(rows.iter().any(|r| r[6] == "b-fail") && rows.iter().any(|r| r[6] == "b-cancel-run"));
    let out = gpuplan_in(
        &cl,
        &dir,
        &[
            "simulate",
            "--workload",
            &p(&w),
            "--cluster",
            &p(&c),
            "--queues",
            &p(&q),
            "--policy",
            "fifo",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sim: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sim["jobs"], 4, "{sim}");
    assert!(sim["avg_jct_s"].as_f64().unwrap() > 0.0, "{sim}");
    let queues: BTreeSet<String> = sim["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(queues, BTreeSet::from(["a".to_string(), "b".to_string()]));
}
