//! End-to-end tests of `gpuplan serve` with the fake device backend and real
//! child processes on loopback. The jobs are examples/sleep_train.py, which
//! holds an exclusive flock on its (job, rank) and on its GPU while it runs:
//! a job running twice at once, or two jobs sharing a GPU, leave a line in
//! LOCK_DIR/conflicts.log. Waits count rounds and events; the only clock
//! is a generous deadline that turns a hang into a failure.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// A one-GPU shell job for the soak (a Python job costs ~0.3 s of CPU to
/// start; 200 of them would not fit a minute on two cores). Like
/// examples/sleep_train.py with --lock-dir it holds flocks on its name and
/// its GPU while it runs (a conflict is logged), writes starts.log, and
/// after its work ignores SIGTERM, creates the done-file, then appends its
/// name to done.log.
fn soak_job(name: &str, locks: &Path) -> Value {
    let l = locks.display();
    json!({
        "name": name,
        "command": format!(
            "exec 8>>'{l}/job-{name}.lock' 9>>\"{l}/gpu-$CUDA_VISIBLE_DEVICES.lock\"
             if ! flock -n 8 || ! flock -n 9; then echo '{name} could not lock' >>'{l}/conflicts.log'; exit 3; fi
             echo '{{\"job\":\"{name}\",\"rank\":0,\"gpu\":\"'$CUDA_VISIBLE_DEVICES'\",\"visible\":[\"'$CUDA_VISIBLE_DEVICES'\"]}}' >>'{l}/starts.log'
             sleep 1
             trap '' TERM
             : >\"$GPUPLAN_DONE_FILE\"
             echo {name} >>'{l}/done.log'"
        ),
        "min_gpus": 1,
        "max_gpus": 1,
        "batch_size": 8,
    })
}

/// A soak client: the daemon's address and admin token, and where it
/// records how long answered requests took once the flood has ended.
#[derive(Clone)]
struct SoakClient {
    base: String,
    token: String,
    flood_end: Arc<OnceLock<Instant>>,
    slowest: Arc<Mutex<(Duration, String)>>,
    /// Each client's last job waits for the last kill, so the run cannot
    /// end before it.
    kills_done: Arc<AtomicBool>,
}

impl SoakClient {
    fn try_req(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let sent = Instant::now();
        let r = try_req(&self.base, method, path, Some(&self.token), body)?;
        if self.flood_end.get().is_some_and(|e| sent >= *e) {
            let mut s = self.slowest.lock().unwrap();
            if sent.elapsed() > s.0 {
                *s = (sent.elapsed(), format!("{method} {path}"));
            }
        }
        Ok(r)
    }

    /// A call retried while the daemon is down or restarting.
    fn call(&self, method: &str, path: &str) -> Value {
        let t0 = Instant::now();
        loop {
            match self.try_req(method, path, None) {
                Ok((200, v)) => return v,
                Ok((c, v)) => panic!("{method} {path}: {c} {v}"),
                Err(e) => assert!(t0.elapsed() < DEADLINE, "{method} {path}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Submit a job exactly once. After a transport error the daemon may
    /// or may not have journaled it (killed before or after), so the job
    /// list of the daemon that answers next decides: names are unique.
    fn submit(&self, spec: Value) -> u64 {
        let t0 = Instant::now();
        loop {
            match self.try_req("POST", "/v1/jobs", Some(spec.clone())) {
                Ok((201, v)) => return v["id"].as_u64().unwrap(),
                Ok((c, v)) => panic!("submit: {c} {v}"),
                Err(e) => {
                    let jobs = self.call("GET", "/v1/jobs");
                    if let Some(j) = jobs
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|j| j["name"] == spec["name"])
                    {
                        return j["id"].as_u64().unwrap();
                    }
                    assert!(t0.elapsed() < DEADLINE, "submit: {e}");
                }
            }
        }
    }

    /// Submit `names` keeping at most `in_flight` of them unfinished.
    fn run(&self, names: &[String], locks: &Path, in_flight: usize) {
        let t0 = Instant::now();
        let (mut next, mut pending) = (names.iter(), Vec::new());
        loop {
            while pending.len() < in_flight {
                if next.len() == 1 && !self.kills_done.load(Ordering::SeqCst) {
                    break;
                }
                match next.next() {
                    Some(n) => pending.push(self.submit(soak_job(n, locks))),
                    None => break,
                }
            }
            if pending.is_empty() && next.len() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
            pending.retain(|id| !is_final(&self.call("GET", &format!("/v1/jobs/{id}"))));
            assert!(t0.elapsed() < DEADLINE, "jobs {pending:?} did not finish");
        }
    }
}

/// A TCP connection to `to` from the loopback address `from` (std cannot
/// bind before connecting; libc is already a dependency).
fn connect_from(
    from: std::net::Ipv4Addr,
    to: std::net::SocketAddrV4,
) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let sin = |a: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket owned by the TcpStream (closed on drop), and
    // sockaddr_in values that live across the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = std::net::TcpStream::from_raw_fd(fd);
        let (a, b) = (sin(std::net::SocketAddrV4::new(from, 0)), sin(to));
        if libc::bind(fd, &a as *const _ as *const libc::sockaddr, len) != 0
            || libc::connect(fd, &b as *const _ as *const libc::sockaddr, len) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// Whether the other end has closed `s` (EOF or reset), without blocking.
fn closed_by_peer(s: &std::net::TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    !matches!(s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// The flood: `n` idle connections from 127.0.0.2 (loopback only, and not
/// the clients' and jobs' 127.0.0.1, so the per-address limit of 64 falls
/// on the flood alone), opened through restarts, held until `stop`. Then
/// it waits (bounded) until the daemon holds at most 64 of them and
/// returns how many it still held; the test closes them all on return.
fn flood(port: u16, n: usize, opened: &AtomicBool, stop: &AtomicBool) -> usize {
    let to = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    let from = std::net::Ipv4Addr::new(127, 0, 0, 2);
    // The flood holds n descriptors here: raise the soft limit to the hard
    // one, as `serve` does for itself.
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut l = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
    let t0 = Instant::now();
    let mut held = Vec::with_capacity(n);
    while held.len() < n {
        match connect_from(from, to) {
            Ok(s) => held.push(s),
            // Refused while the daemon restarts.
            Err(e) => {
                assert!(t0.elapsed() < DEADLINE, "flood: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    eprintln!("soak: {n} flood connections opened in {:?}", t0.elapsed());
    opened.store(true, Ordering::SeqCst);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t1 = Instant::now();
    loop {
        let open = held.iter().filter(|s| !closed_by_peer(s)).count();
        if open <= 64 || t1.elapsed() > Duration::from_secs(5) {
            return open;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 33's soak: 200 one-GPU jobs from 8 client threads (each keeping 6
/// unfinished, so submissions go on all through the run) on fake:4x8,
/// three kill -9s of the daemon as 50, 100 and 150 jobs have completed,
/// and an idle flood of 2,000 connections from 127.0.0.2 between the first
/// and second kills, closed by the test once the daemon holds at most 64
/// of them. Every job completes exactly once, no
/// GPU is held by two jobs at once (the API's view each poll, and the
/// jobs' flocks), and once the flood has ended every answered request
/// took under 3 s.
#[test]
fn soak_200_jobs_8_clients_3_kills_and_a_connection_flood() {
    const CLIENTS: usize = 8;
    const PER_CLIENT: usize = 25;
    const FLOOD: usize = 2000;
    const KILL_AT: [usize; 3] = [50, 100, 150];
    const FAST: Duration = Duration::from_secs(3);
    let t0 = Instant::now();
    let dir = tmp("soak");
    let locks = dir.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    // fifo and 1-GPU jobs: the soak is of the daemon, not the planner, and
    // 32 GPUs with 100 ms rounds run 200 jobs in well under a minute.
    let backend = [
        "--devices",
        "fake:4x8",
        "--planner",
        "fifo",
        "--interval",
        "100ms",
    ];
    let mut srv = Server::start_with(&backend, &[], &dir.join("state"), free_port());
    let client = SoakClient {
        base: srv.url(""),
        token: srv.token.clone(),
        flood_end: Arc::new(OnceLock::new()),
        slowest: Arc::new(Mutex::new((Duration::ZERO, String::new()))),
        kills_done: Arc::new(AtomicBool::new(false)),
    };
    let names: Vec<String> = (0..CLIENTS * PER_CLIENT).map(|i| format!("s{i}")).collect();
    let clients: Vec<_> = names
        .chunks(PER_CLIENT)
        .map(|ns| {
            let (c, ns, l) = (client.clone(), ns.to_vec(), locks.clone());
            std::thread::spawn(move || c.run(&ns, &l, 6))
        })
        .collect();
    let (opened, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let mut flooder = None;
    let (mut kills, mut still_held, mut probe) = (0, None, None);
    loop {
        let jobs = srv.jobs();
        assert_disjoint(&jobs);
        if jobs.len() == names.len() && all_final(&jobs) {
            break;
        }
        let done = jobs.iter().filter(|j| j["phase"] == "completed").count();
        // The flood hits one daemon, between the first and second kills
        // (a kill would reset its connections).
        if kills == 1 && flooder.is_none() && still_held.is_none() {
            let (port, o, s) = (srv.port, opened.clone(), stop.clone());
            flooder = Some(std::thread::spawn(move || flood(port, FLOOD, &o, &s)));
        }
        if kills < KILL_AT.len() && done >= KILL_AT[kills] && (kills != 1 || still_held.is_some()) {
            srv.kill9();
            srv.restart();
            kills += 1;
            client.kills_done.store(kills == KILL_AT.len(), Ordering::SeqCst);
        }
        if still_held.is_none() && opened.load(Ordering::SeqCst) {
            stop.store(true, Ordering::SeqCst);
            still_held = Some(flooder.take().unwrap().join().unwrap());
            client.flood_end.set(Instant::now()).unwrap();
            let t = Instant::now();
            let status = srv.get("/v1/status");
            probe = Some(t.elapsed());
            assert!(status["rounds"].as_u64().is_some(), "{status}");
        }
        assert!(t0.elapsed() < DEADLINE, "soak timed out: {jobs:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in clients {
        c.join().unwrap();
    }
    let jobs = srv.jobs();
    assert_eq!(kills, 3, "every kill came before the last job completed");
    assert_eq!(jobs.len(), names.len(), "no job lost or submitted twice");
    assert_clean_run(&locks, &names, &jobs);
    let still_held = still_held.expect("the flood ran and was closed");
    assert!(still_held <= 64, "the daemon held {still_held} flood connections");
    let probe = probe.unwrap();
    assert!(probe < FAST, "status took {probe:?} after the flood");
    let slowest = client.slowest.lock().unwrap().clone();
    assert!(
        slowest.0 < FAST,
        "{} took {:?} after the flood",
        slowest.1,
        slowest.0
    );
    let starts = read(&locks.join("starts.log")).lines().count();
    eprintln!(
        "soak: {} jobs ({starts} launches), {kills} kills, {FLOOD} flood connections ({still_held} held by the daemon at the end), \
         status {probe:?} and slowest request {:?} after the flood, {:?} in all",
        jobs.len(),
        slowest.0,
        t0.elapsed()
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
