//! The engine seam: how a job's ranks are started, watched and signalled.
//!
//! [`LocalEngine`] runs them as processes on this host. A Slurm engine can
//! sit behind the same trait, under the same round loop, journal and API.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::ExecError;

/// One rank of one attempt, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankProc {
    pub rank: u32,
    /// Process group of the rank's wrapper (its pid); signals go to the group.
    pub pgid: i32,
}

/// What one rank needs to start.
#[derive(Debug, Clone)]
pub struct RankSpec {
    pub rank: u32,
    pub local_rank: u32,
    pub node: String,
    /// Value of `CUDA_VISIBLE_DEVICES`: the job's GPUs on this rank's node.
    pub visible: String,
}

/// Everything needed to start one attempt of a job.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub command: String,
    /// Directory of this attempt: `rank-R.log`, `rank-R.exit`.
    pub dir: PathBuf,
    pub ranks: Vec<RankSpec>,
    /// Variables shared by all ranks (WORLD_SIZE, MASTER_*, GPUPLAN_*).
    pub env: Vec<(String, String)>,
    /// Run as this user (with its primary group) when the daemon is root.
    pub uid: Option<u32>,
    /// Directories the job must be able to write (chowned to `uid`).
    pub writable: Vec<PathBuf>,
}

/// (uid, primary gid) to switch to, if the daemon is root and `uid` is another user.
fn run_as(uid: Option<u32>) -> Option<(u32, u32)> {
    let uid = uid?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || uid == 0 {
        return None;
    }
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf outlives it.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    let gid = if rc == 0 && !out.is_null() { pw.pw_gid } else { uid };
    Some((uid, gid))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankStatus {
    Running,
    /// Exit code of the user command; `None` if killed by a signal.
    Exited(Option<i32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

pub trait Engine: Send {
    fn name(&self) -> &'static str;
    fn launch(&mut self, req: &LaunchRequest) -> Result<Vec<RankProc>, ExecError>;
    fn poll(&mut self, dir: &Path, p: &RankProc) -> RankStatus;
    fn signal(&mut self, p: &RankProc, sig: Signal);
    /// After a daemon restart: find an attempt's ranks among live processes
    /// (or their exit files). `None` = never started, or killed.
    fn adopt(&mut self, dir: &Path, ranks: u32) -> Vec<Option<RankProc>>;
}

/// The engines `serve --engine` accepts (a second, e.g. Slurm, is one
/// more name here and one more arm in [`open`]).
pub const ENGINES: &[&str] = &["local"];

/// Open an engine by name; an unknown name is refused with the valid ones.
pub fn open(name: &str) -> Result<Box<dyn Engine>, ExecError> {
    match name {
        "local" => Ok(Box::new(LocalEngine::default())),
        _ => Err(ExecError::Config(format!(
            "--engine {name}: unknown engine; valid: {}",
            ENGINES.join(", ")
        ))),
    }
}

/// Runs the user's command under `sh`, keeps SIGTERM from killing the
/// wrapper (so it can record the exit code), and writes the code to a file
/// that a restarted daemon can read for processes it did not spawn.
const WRAPPER: &str = r#"trap 'gpuplan_term=1' TERM
sh -c "$1" &
child=$!
while :; do
  wait "$child"; code=$?
  kill -0 "$child" 2>/dev/null || break
done
printf '%s\n' "$code" > "$2.tmp" && mv "$2.tmp" "$2"
exit "$code""#;

pub fn exit_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.exit"))
}

pub fn log_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.log"))
}

/// Processes on this host, one process group per rank.
#[derive(Default)]
pub struct LocalEngine {
    children: HashMap<i32, Child>,
    /// Wrappers reaped while other members of their group lived on.
    reaped: HashMap<i32, Option<i32>>,
}

fn group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks existence and permission.
    let rc = unsafe { libc::kill(-pgid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A process that has exited but is not reaped: its parent (a previous
/// daemon still alive, as in tests) does not wait for it. It holds no GPU.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Process group of `pid`, from /proc/PID/stat (fields after the command name: state, ppid, pgrp).
fn pgrp(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

fn read_exit(dir: &Path, rank: u32) -> Option<Option<i32>> {
    let s = std::fs::read_to_string(exit_file(dir, rank)).ok()?;
    Some(s.trim().parse().ok())
}

impl Engine for LocalEngine {
    fn name(&self) -> &'static str {
        "local"
    }

    fn launch(&mut self, req: &LaunchRequest) -> Result<Vec<RankProc>, ExecError> {
        std::fs::create_dir_all(&req.dir).map_err(|source| ExecError::Io {
            context: format!("create {}", req.dir.display()),
            source,
        })?;
        let world = req.ranks.len().to_string();
        let user = run_as(req.uid);
        if let Some((uid, gid)) = user {
            for d in req.writable.iter().chain([&req.dir]) {
                let _ = std::os::unix::fs::chown(d, Some(uid), Some(gid));
            }
        }
        let mut out = Vec::new();
        for r in &req.ranks {
            let log_path = log_file(&req.dir, r.rank);
            let log = File::create(&log_path).map_err(|source| ExecError::Io {
                context: format!("create {}", log_path.display()),
                source,
            })?;
            let err = log.try_clone().map_err(|source| ExecError::Io {
                context: format!("dup {}", log_path.display()),
                source,
            })?;
            let mut cmd = Command::new("sh");
            if let Some((uid, gid)) = user {
                cmd.uid(uid).gid(gid);
            }
            let child = cmd
                .arg("-c")
                .arg(WRAPPER)
                .arg("gpuplan-rank")
                .arg(&req.command)
                .arg(exit_file(&req.dir, r.rank))
                .envs(req.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("CUDA_VISIBLE_DEVICES", &r.visible)
                .env("WORLD_SIZE", &world)
                .env("RANK", r.rank.to_string())
                .env("LOCAL_RANK", r.local_rank.to_string())
                .env("GPUPLAN_NODE", &r.node)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .process_group(0)
                .spawn();
            match child {
                Ok(c) => {
                    let pgid = c.id() as i32;
                    self.children.insert(pgid, c);
                    out.push(RankProc { rank: r.rank, pgid });
                }
                Err(source) => {
                    for p in &out {
                        self.signal(p, Signal::Kill);
                    }
                    return Err(ExecError::Io {
                        context: "spawn sh".into(),
                        source,
                    });
                }
            }
        }
        Ok(out)
    }

    fn poll(&mut self, dir: &Path, p: &RankProc) -> RankStatus {
        if let Some(c) = self.children.get_mut(&p.pgid) {
            match c.try_wait() {
                Ok(None) => return RankStatus::Running,
                Ok(Some(st)) => {
                    self.children.remove(&p.pgid);
                    self.reaped.insert(p.pgid, st.code());
                }
                Err(_) => {
                    self.children.remove(&p.pgid);
                    self.reaped.insert(p.pgid, None);
                }
            }
        }
        let file = read_exit(dir, p.rank);
        let wrapper_done = file.is_some() || self.reaped.contains_key(&p.pgid);
        if group_alive(p.pgid) && !(wrapper_done && is_zombie(p.pgid)) {
            if wrapper_done {
                // The command is done; stray children of it must not hold GPUs.
                self.signal(p, Signal::Kill);
            }
            return RankStatus::Running;
        }
        let reaped = self.reaped.remove(&p.pgid);
        RankStatus::Exited(file.or(reaped).flatten())
    }

    fn signal(&mut self, p: &RankProc, sig: Signal) {
        if p.pgid <= 1 {
            return;
        }
        let s = match sig {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: plain kill(2) on a process group we started.
        unsafe {
            libc::kill(-p.pgid, s);
        }
    }

    fn adopt(&mut self, dir: &Path, ranks: u32) -> Vec<Option<RankProc>> {
        let mut found: Vec<Option<RankProc>> = (0..ranks)
            .map(|r| {
                exit_file(dir, r)
                    .exists()
                    .then_some(RankProc { rank: r, pgid: 0 })
            })
            .collect();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return found;
        };
        let marks: Vec<String> = (0..ranks)
            .map(|r| exit_file(dir, r).to_string_lossy().into_owned())
            .collect();
        for e in procs.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            // Only the wrapper, which leads its group: a just-forked child of
            // it has the same command line until it execs.
            if !args.iter().any(|a| *a == b"gpuplan-rank") || pgrp(pid) != Some(pid) {
                continue;
            }
            for (r, m) in marks.iter().enumerate() {
                if args.contains(&m.as_bytes()) {
                    found[r] = Some(RankProc {
                        rank: r as u32,
                        pgid: pid,
                    });
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_engines_are_refused_with_the_valid_ones() {
        assert_eq!(open("local").unwrap().name(), "local");
        let e = open("slurm").err().expect("not an engine yet").to_string();
        assert!(e.contains("slurm") && e.contains("valid: local"), "{e}");
    }
}
