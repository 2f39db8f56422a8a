//! What the end-to-end tests of `gpuplan serve` share: a daemon child
//! process on loopback and its HTTP API, and the example training job.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const DEADLINE: Duration = Duration::from_secs(120);

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuplan-exec-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub state: PathBuf,
    /// The backend's arguments (`--devices fake:2x4`, or `--engine slurm ...`).
    backend: Vec<String>,
    env: Vec<(String, String)>,
    pub token: String,
}

impl Server {
    pub fn start(devices: &str, state: &Path, port: u16) -> Server {
        Server::start_with(&["--devices", devices], &[], state, port)
    }

    pub fn start_with(backend: &[&str], env: &[(&str, &str)], state: &Path, port: u16) -> Server {
        let mut s = Server {
            child: None,
            port,
            state: state.to_path_buf(),
            backend: backend.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            token: String::new(),
        };
        s.restart();
        s
    }

    pub fn restart(&mut self) {
        // Fast rounds by default; a test's own value of a flag wins.
        let mut args = self.backend.clone();
        for (flag, v) in [
            ("--interval", "200ms"),
            ("--grace", "3s"),
            ("--backoff", "200ms"),
            ("--restart-penalty", "0.2"),
            ("--time-limit", "2s"),
        ] {
            if !args.iter().any(|a| a == flag) {
                args.extend([flag.to_string(), v.to_string()]);
            }
        }
        let child = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
            .arg("serve")
            .args(&args)
            .arg("--state")
            .arg(&self.state)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .env_remove("GPUPLAN_TOKEN")
            .env("GPUPLAN_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(root())
            .stdin(Stdio::null())
            .spawn()
            .expect("start gpuplan serve");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            let up = ureq::get(&self.url("/v1/health")).call().is_ok();
            if up {
                break;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited at start: {st}");
            }
            assert!(t0.elapsed() < DEADLINE, "daemon did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        self.token = std::fs::read_to_string(self.state.join("token"))
            .unwrap()
            .trim()
            .to_string();
    }

    /// kill -9: no chance to clean up or flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn req(&self, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        try_req(&self.url(""), method, path, token, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn get(&self, path: &str) -> Value {
        let (c, v) = self.req("GET", path, Some(&self.token.clone()), None);
        assert_eq!(c, 200, "{path}: {v}");
        v
    }

    pub fn submit(&self, spec: Value) -> u64 {
        let (c, v) = self.req("POST", "/v1/jobs", Some(&self.token.clone()), Some(spec));
        assert_eq!(c, 201, "{v}");
        v["id"].as_u64().unwrap()
    }

    pub fn jobs(&self) -> Vec<Value> {
        self.get("/v1/jobs").as_array().unwrap().clone()
    }

    pub fn rounds(&self) -> u64 {
        self.get("/v1/status")["rounds"].as_u64().unwrap()
    }

    /// Poll until `f` holds, checking `each` on every job list seen.
    pub fn wait_for(&self, what: &str, mut each: impl FnMut(&[Value]), mut f: impl FnMut(&[Value]) -> bool) {
        let t0 = Instant::now();
        loop {
            let jobs = self.jobs();
            each(&jobs);
            if f(&jobs) {
                return;
            }
            assert!(t0.elapsed() < DEADLINE, "timed out waiting for {what}: {jobs:#?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One API call to the daemon at `base` (`http://127.0.0.1:PORT`): its
/// status and JSON body, or the transport error (refused, reset) of a
/// daemon that is down or restarting.
pub fn try_req(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let mut r = ureq::request(method, &format!("{base}{path}"));
    if let Some(t) = token {
        r = r.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => r.send_json(b),
        None => r.call(),
    };
    match res {
        Ok(r) => Ok((r.status(), r.into_json().unwrap())),
        Err(ureq::Error::Status(c, r)) => Ok((c, r.into_json().unwrap_or(Value::Null))),
        Err(e) => Err(e.to_string()),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn train_job(name: &str, lock_dir: &Path, examples: u32, max_gpus: u32) -> Value {
    json!({
        "name": name,
        "command": format!(
            "exec python3 {} --examples {examples} --step-s 0.02 --lock-dir {}",
            root().join("examples/sleep_train.py").display(),
            lock_dir.display()
        ),
        "min_gpus": 1,
        "max_gpus": max_gpus,
        "batch_size": 64,
        "max_batch_size": 512,
        "min_local_bsz": 16,
        "max_local_bsz": 128,
    })
}

/// Running jobs' GPU lists as the API shows them never overlap.
pub fn assert_disjoint(jobs: &[Value]) {
    let mut seen = std::collections::HashMap::new();
    for j in jobs {
        for g in j["gpus"].as_array().unwrap() {
            let g = g.as_str().unwrap().to_string();
            if let Some(other) = seen.insert(g.clone(), j["id"].clone()) {
                panic!("GPU {g} given to jobs {other} and {}", j["id"]);
            }
        }
    }
}

pub fn is_final(job: &Value) -> bool {
    ["completed", "failed", "cancelled"].contains(&job["phase"].as_str().unwrap())
}

pub fn all_final(jobs: &[Value]) -> bool {
    jobs.iter().all(is_final)
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
