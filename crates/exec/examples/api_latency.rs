//! API latency benchmark (not a test): starts the real `gpuplan serve` on
//! fake devices with the local engine and a 1 s round interval, loads it,
//! and measures how long its HTTP API takes to answer. One thread polls
//! `GET /v1/health` and `GET /metrics` (one after the other, then a 20 ms
//! pause) for the whole scenario; submissions are timed too where there are
//! any. Every request is a fresh HTTP/1.1 connection (`Connection: close`)
//! and is timed from connect to the last byte; a failed or non-2xx request
//! counts in `errors` and its time still counts in the percentiles.
//!
//! Scenarios (`--scenario NAME`, default all three, in this order):
//! - `jobs2000`: `fake:64x8`; 2,000 jobs of `sleep 600` (1 to 8 GPUs,
//!   elastic) submitted by 4 threads as fast as the daemon takes them, then
//!   60 s while rounds plan them.
//! - `logs`: `fake:1x8`; 8 one-GPU jobs that each write 1 GiB of 100-byte
//!   lines to stdout (their log); until all have ended, at most 120 s.
//! - `submits`: `fake:4x8`; 10 submissions a second of one-GPU `sleep 1`
//!   jobs for 60 s.
//!
//! Each scenario gets a fresh state directory under the temp dir; at its
//! end the daemon gets SIGTERM (SIGKILL after 10 s), every process whose
//! command line or environment names the state directory (the jobs' rank
//! wrappers carry their exit-file path, their children inherit
//! `GPUPLAN_CHECKPOINT_DIR`) is killed with its process group, and the
//! directory is removed. The logs scenario needs about 8.5 GB of disk there.
//!
//! CARGO_TARGET_DIR=$HOME/.cache/gpuplan/target cargo build --release --bin gpuplan
//! CARGO_TARGET_DIR=$HOME/.cache/gpuplan/target cargo build --release -p gpuplan-exec --example api_latency
//! $HOME/.cache/gpuplan/target/release/examples/api_latency [--scenario jobs2000|logs|submits|all]
//!     [--gpuplan PATH] [--out FILE.json] [--seconds S]
//!
//! `--gpuplan` defaults to `$CARGO_TARGET_DIR/release/gpuplan`, else
//! `$HOME/.cache/gpuplan/target/release/gpuplan`, else the `gpuplan` beside
//! this example's directory. `--seconds` replaces the scenarios' 60 s and
//! 120 s (for a quick try; the figures are for the full lengths). Prints a
//! table (scenario, endpoint, n, errors, p50 / p99 / max ms) and writes it,
//! with a few notes per scenario, as JSON to `--out`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Longest one request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two polls of health and metrics.
const POLL_PAUSE: Duration = Duration::from_millis(20);

struct Args {
    gpuplan: PathBuf,
    scenarios: Vec<String>,
    out: Option<PathBuf>,
    seconds: Option<u64>,
}

fn usage() -> ! {
    eprintln!(
        "usage: api_latency [--scenario jobs2000|logs|submits|all] [--gpuplan PATH] [--out FILE] [--seconds S]"
    );
    std::process::exit(2)
}

fn default_gpuplan() -> PathBuf {
    let mut candidates = Vec::new();
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(t).join("release/gpuplan"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(h).join(".cache/gpuplan/target/release/gpuplan"));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().and_then(|p| p.parent()).map(Path::to_path_buf))
    {
        candidates.push(dir.join("gpuplan"));
    }
    match candidates.iter().find(|c| c.is_file()) {
        Some(c) => c.clone(),
        None => {
            eprintln!("no gpuplan binary at any of {candidates:?}; build it or pass --gpuplan PATH");
            std::process::exit(2)
        }
    }
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let (mut gpuplan, mut scenario, mut out, mut seconds) = (None, "all".to_string(), None, None);
    while let Some(a) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--gpuplan" => gpuplan = Some(PathBuf::from(val())),
            "--scenario" => scenario = val(),
            "--out" => out = Some(PathBuf::from(val())),
            "--seconds" => seconds = Some(val().parse().unwrap_or_else(|_| usage())),
            _ => usage(),
        }
    }
    let all = ["jobs2000", "logs", "submits"];
    let scenarios = match scenario.as_str() {
        "all" => all.iter().map(|s| s.to_string()).collect(),
        s if all.contains(&s) => vec![s.to_string()],
        _ => usage(),
    };
    Args {
        gpuplan: gpuplan.unwrap_or_else(default_gpuplan),
        scenarios,
        out,
        seconds,
    }
}

/// One HTTP/1.1 request on a fresh connection: the status code and body.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(REQUEST_TIMEOUT))
        .map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = c.set_nodelay(true);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if method != "GET" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    c.write_all(req.as_bytes()).map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    c.read_to_end(&mut out).map_err(|e| format!("read: {e}"))?;
    let out = String::from_utf8_lossy(&out);
    let code = out
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            format!(
                "not an HTTP response: {:?}",
                out.chars().take(80).collect::<String>()
            )
        })?;
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    Ok((code, body))
}

/// Latencies of one endpoint in one scenario.
#[derive(Default)]
struct Series {
    ms: Vec<f64>,
    errors: usize,
    first_error: Option<String>,
}

impl Series {
    fn record(&mut self, took: Duration, outcome: &Result<(u16, String), String>) {
        self.ms.push(took.as_secs_f64() * 1e3);
        let err = match outcome {
            Ok((code, _)) if (200..300).contains(code) => None,
            Ok((code, body)) => Some(format!("{code} {}", body.chars().take(200).collect::<String>())),
            Err(e) => Some(e.clone()),
        };
        if let Some(e) = err {
            self.errors += 1;
            self.first_error.get_or_insert(e);
        }
    }

    /// Nearest-rank percentile, `q` in (0, 1].
    fn pct(sorted: &[f64], q: f64) -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    fn row(&self, scenario: &str, endpoint: &str) -> Value {
        let mut s = self.ms.clone();
        s.sort_by(f64::total_cmp);
        json!({
            "scenario": scenario,
            "endpoint": endpoint,
            "n": s.len(),
            "errors": self.errors,
            "first_error": self.first_error,
            "p50_ms": Self::pct(&s, 0.50),
            "p99_ms": Self::pct(&s, 0.99),
            "max_ms": s.last().copied().unwrap_or(f64::NAN),
        })
    }
}

/// A running `gpuplan serve` with its own state directory; dropping it
/// stops the daemon, kills its jobs and removes the directory.
struct Serve {
    child: Child,
    state: PathBuf,
    log: PathBuf,
    addr: SocketAddr,
    token: String,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl Serve {
    fn start(gpuplan: &Path, scenario: &str, devices: &str) -> Serve {
        let base =
            std::env::temp_dir().join(format!("gpuplan-api-latency-{}-{scenario}", std::process::id()));
        let state = base.join("state");
        let log = base.join("daemon.log");
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("create the scenario's directory");
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let child = Command::new(gpuplan)
            .arg("serve")
            .args([
                "--devices",
                devices,
                "--interval",
                "1s",
                "--listen",
                &addr.to_string(),
            ])
            .arg("--state")
            .arg(&state)
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", gpuplan.display()));
        let mut s = Serve {
            child,
            state,
            log,
            addr,
            token: String::new(),
        };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!(
                    "gpuplan serve exited at start ({st}); its log: {}",
                    s.log.display()
                );
            }
            if let Ok(t) = std::fs::read_to_string(s.state.join("token")) {
                let ok = matches!(request(addr, "GET", "/v1/health", None, None), Ok((200, _)));
                if ok && !t.trim().is_empty() {
                    s.token = t.trim().to_string();
                    return s;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "gpuplan serve did not answer within 30 s; its log: {}",
                s.log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String), String> {
        request(self.addr, method, path, Some(&self.token), body)
    }

    fn rounds(&self) -> Option<u64> {
        let (_, b) = request(self.addr, "GET", "/v1/health", None, None).ok()?;
        serde_json::from_str::<Value>(&b).ok()?.get("rounds")?.as_u64()
    }
}

/// Pids (not ours) whose command line or environment contains `needle`.
fn pids_naming(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            ["cmdline", "environ"].iter().any(|f| {
                std::fs::read(format!("/proc/{pid}/{f}"))
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            })
        })
        .collect()
}

impl Drop for Serve {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: kill takes plain integers; pid is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t0 = Instant::now();
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: getpgid(0) reads our own process group.
        let own_group = unsafe { libc::getpgid(0) };
        let needle = self.state.as_os_str().as_encoded_bytes().to_vec();
        for _ in 0..50 {
            let pids = pids_naming(&needle);
            if pids.is_empty() {
                break;
            }
            for p in pids {
                // SAFETY: plain integers; a group is killed only when it is not ours.
                unsafe {
                    let g = libc::getpgid(p);
                    if g > 1 && g != own_group {
                        libc::kill(-g, libc::SIGKILL);
                    }
                    libc::kill(p, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(base) = self.state.parent() {
            if std::env::var_os("API_LATENCY_KEEP").is_none() {
                let _ = std::fs::remove_dir_all(base);
            }
        }
    }
}

/// Polls health and metrics from one thread until stopped.
struct Poller {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(Series, Series)>,
}

impl Poller {
    fn start(addr: SocketAddr) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut health, mut metrics) = (Series::default(), Series::default());
            while !s.load(Ordering::Relaxed) {
                for (path, series) in [("/v1/health", &mut health), ("/metrics", &mut metrics)] {
                    let t = Instant::now();
                    let r = request(addr, "GET", path, None, None);
                    series.record(t.elapsed(), &r);
                }
                std::thread::sleep(POLL_PAUSE);
            }
            (health, metrics)
        });
        Poller { stop, handle }
    }

    fn finish(self) -> (Series, Series) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("poller")
    }
}

fn submission(name: &str, command: &str, min_gpus: u32, max_gpus: u32) -> String {
    json!({
        "name": name,
        "command": command,
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "batch_size": 64,
        "max_batch_size": 512,
    })
    .to_string()
}

struct Outcome {
    rows: Vec<Value>,
    notes: Value,
}

fn rows(scenario: &str, health: &Series, metrics: &Series, submits: Option<&Series>) -> Vec<Value> {
    let mut r = vec![
        health.row(scenario, "GET /v1/health"),
        metrics.row(scenario, "GET /metrics"),
    ];
    if let Some(s) = submits {
        r.push(s.row(scenario, "POST /v1/jobs"));
    }
    r
}

fn jobs2000(a: &Args) -> Outcome {
    const JOBS: u32 = 2000;
    const THREADS: u32 = 4;
    let hold = Duration::from_secs(a.seconds.unwrap_or(60));
    let d = Serve::start(&a.gpuplan, "jobs2000", "fake:64x8");
    let poller = Poller::start(d.addr);
    let submits = Arc::new(Mutex::new(Series::default()));
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let (d, submits) = (&d, submits.clone());
            sc.spawn(move || {
                for i in (t..JOBS).step_by(THREADS as usize) {
                    let body = submission(&format!("j{i}"), "sleep 600", 1, 1 + i % 8);
                    let t = Instant::now();
                    let r = d.call("POST", "/v1/jobs", Some(&body));
                    submits.lock().unwrap().record(t.elapsed(), &r);
                }
            });
        }
    });
    let submit_s = t0.elapsed().as_secs_f64();
    let rounds_before = d.rounds();
    std::thread::sleep(hold);
    let (health, metrics) = poller.finish();
    let rounds_after = d.rounds();
    let submits = std::mem::take(&mut *submits.lock().unwrap());
    let running = d
        .call("GET", "/v1/jobs", None)
        .ok()
        .and_then(|(_, b)| serde_json::from_str::<Vec<Value>>(&b).ok())
        .map(|v| v.iter().filter(|j| j["status"] == "running").count());
    eprintln!(
        "jobs2000: {JOBS} submitted in {submit_s:.1} s, then {} s; rounds {rounds_before:?} -> {rounds_after:?}; running at the end: {running:?}",
        hold.as_secs()
    );
    Outcome {
        rows: rows("jobs2000", &health, &metrics, Some(&submits)),
        notes: json!({
            "devices": "fake:64x8", "jobs": JOBS, "submit_threads": THREADS, "submit_s": submit_s,
            "hold_s": hold.as_secs(), "rounds_after_submits": rounds_before, "rounds_at_end": rounds_after,
            "running_at_end": running,
        }),
    }
}

fn logs(a: &Args) -> Outcome {
    const JOBS: u32 = 8;
    let limit = Duration::from_secs(a.seconds.unwrap_or(120));
    // `yes` writes 100-byte lines (99 x's and a newline); `head` passes 1 GiB.
    let command = format!("yes {} | head -c 1073741824", "x".repeat(99));
    let d = Serve::start(&a.gpuplan, "logs", "fake:1x8");
    let poller = Poller::start(d.addr);
    for i in 0..JOBS {
        let r = d.call(
            "POST",
            "/v1/jobs",
            Some(&submission(&format!("log{i}"), &command, 1, 1)),
        );
        assert!(matches!(r, Ok((201, _))), "submit log{i}: {r:?}");
    }
    let t0 = Instant::now();
    let mut finished = 0;
    let mut statuses = Value::Null;
    while t0.elapsed() < limit {
        std::thread::sleep(Duration::from_secs(1));
        if let Ok((200, b)) = d.call("GET", "/v1/jobs", None) {
            if let Ok(v) = serde_json::from_str::<Vec<Value>>(&b) {
                finished = v
                    .iter()
                    .filter(|j| matches!(j["status"].as_str(), Some("completed" | "failed" | "cancelled")))
                    .count();
                statuses = v.iter().map(|j| j["status"].clone()).collect();
                if finished == v.len() {
                    break;
                }
            }
        }
    }
    let took = t0.elapsed().as_secs_f64();
    let (health, metrics) = poller.finish();
    let log_bytes: u64 = walk_logs(&d.state);
    eprintln!(
        "logs: {finished}/{JOBS} jobs ended in {took:.1} s ({statuses}); {:.2} GB of logs",
        log_bytes as f64 / 1e9
    );
    Outcome {
        rows: rows("logs", &health, &metrics, None),
        notes: json!({
            "devices": "fake:1x8", "jobs": JOBS, "ended": finished, "seconds": took,
            "statuses": statuses, "log_bytes": log_bytes, "rounds_at_end": d.rounds(),
        }),
    }
}

/// Total size of the `rank-*.log` files under `dir`.
fn walk_logs(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk_logs(&e.path()),
            Ok(t) if t.is_file() && e.file_name().to_string_lossy().ends_with(".log") => {
                e.metadata().map_or(0, |m| m.len())
            }
            _ => 0,
        })
        .sum()
}

fn submits(a: &Args) -> Outcome {
    const PER_S: u32 = 10;
    let length = Duration::from_secs(a.seconds.unwrap_or(60));
    let d = Serve::start(&a.gpuplan, "submits", "fake:4x8");
    let poller = Poller::start(d.addr);
    let mut submits = Series::default();
    let t0 = Instant::now();
    let gap = Duration::from_secs(1) / PER_S;
    let mut i = 0u32;
    // On a fixed schedule: a slow submission delays the next ones, which
    // then go at once, as independent clients' would.
    while gap * i < length {
        let due = t0 + gap * i;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        let r = d.call(
            "POST",
            "/v1/jobs",
            Some(&submission(&format!("s{i}"), "sleep 1", 1, 1)),
        );
        submits.record(t.elapsed(), &r);
        i += 1;
    }
    let took = t0.elapsed().as_secs_f64();
    let (health, metrics) = poller.finish();
    let done = d
        .call("GET", "/v1/jobs", None)
        .ok()
        .and_then(|(_, b)| serde_json::from_str::<Vec<Value>>(&b).ok())
        .map(|v| v.iter().filter(|j| j["status"] == "completed").count());
    eprintln!("submits: {i} submitted in {took:.1} s; completed by the end: {done:?}");
    Outcome {
        rows: rows("submits", &health, &metrics, Some(&submits)),
        notes: json!({
            "devices": "fake:4x8", "per_s": PER_S, "submitted": i, "seconds": took,
            "completed_at_end": done, "rounds_at_end": d.rounds(),
        }),
    }
}

fn main() {
    let a = parse_args();
    eprintln!("gpuplan: {}", a.gpuplan.display());
    let mut all_rows = Vec::new();
    let mut notes = serde_json::Map::new();
    for s in &a.scenarios {
        eprintln!("{s}: running");
        let o = match s.as_str() {
            "jobs2000" => jobs2000(&a),
            "logs" => logs(&a),
            _ => submits(&a),
        };
        all_rows.extend(o.rows);
        notes.insert(s.clone(), o.notes);
    }
    println!(
        "{:<9} {:<15} {:>6} {:>6} {:>9} {:>9} {:>9}",
        "scenario", "endpoint", "n", "errors", "p50 ms", "p99 ms", "max ms"
    );
    for r in &all_rows {
        println!(
            "{:<9} {:<15} {:>6} {:>6} {:>9.1} {:>9.1} {:>9.1}",
            r["scenario"].as_str().unwrap_or(""),
            r["endpoint"].as_str().unwrap_or(""),
            r["n"].as_u64().unwrap_or(0),
            r["errors"].as_u64().unwrap_or(0),
            r["p50_ms"].as_f64().unwrap_or(f64::NAN),
            r["p99_ms"].as_f64().unwrap_or(f64::NAN),
            r["max_ms"].as_f64().unwrap_or(f64::NAN),
        );
        if let Some(e) = r["first_error"].as_str() {
            println!("  first error: {e}");
        }
    }
    if let Some(out) = &a.out {
        let doc = json!({
            "gpuplan": a.gpuplan.display().to_string(),
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "rows": all_rows,
            "notes": notes,
        });
        std::fs::write(out, serde_json::to_string_pretty(&doc).expect("json") + "\n")
            .unwrap_or_else(|e| panic!("write {}: {e}", out.display()));
        eprintln!("wrote {}", out.display());
    }
}
