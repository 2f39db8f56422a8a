//! The local engine: each rank is a process group on this host.
//!
//! It owns everything about how an attempt runs here: the rank layout
//! (`CUDA_VISIBLE_DEVICES`, `RANK`, `WORLD_SIZE`), the rendezvous
//! (`MASTER_ADDR=127.0.0.1` and a free port), each attempt's directory with
//! its logs and exit files, the job's checkpoint directory and done-file.
//! A restarted daemon finds ranks by their exit-file path in `/proc`.

use std::collections::HashMap;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use gpuplan_core::JobId;

use super::{
    mkdir, tail_beneath, AttemptSpec, Backends, Engine, EngineEntry, EngineSetup, Handle, RankProc,
    RankStatus, Stop,
};
use crate::ExecError;

/// `--engine local`, the default: ranks are processes on this host.
pub(super) const ENTRY: EngineEntry = EngineEntry {
    name: "local",
    description: "each rank a process group on this host, on the GPUs of --devices",
    flags: &[],
    build,
};

/// The `--devices` source and this engine.
fn build(setup: &EngineSetup) -> Result<Backends, ExecError> {
    Ok((
        open_devices(setup.devices)?,
        Box::new(LocalEngine::new(setup.state_dir)),
    ))
}

/// Open a device source from the `--devices` value: `nvml` or
/// `fake:NODESxGPUS` (typed groups joined by `+`, as cluster shapes:
/// `fake:1x4:t4+1x8:a100`). The local engine's own
/// device source, so the device layer knows none of its implementations.
fn open_devices(spec: &str) -> Result<Box<dyn crate::device::Devices>, ExecError> {
    if spec == "nvml" {
        return Ok(Box::new(crate::nvml::NvmlDevices::open()?));
    }
    if let Some(shape) = spec.strip_prefix("fake:") {
        return Ok(Box::new(crate::device::FakeDevices::parse(shape)?));
    }
    Err(ExecError::Config(format!(
        "--devices {spec}: expected `nvml` or `fake:NODESxGPUS[:TYPE]+...` (e.g. fake:2x4)"
    )))
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

/// Runs the user's command under `sh`, keeps SIGTERM from killing the
/// wrapper (so it can record the exit code), and writes the code to a file
/// that a restarted daemon can read for processes it did not spawn.
const WRAPPER: &str = r#"trap 'gpuplan_term=1' TERM
sh -c 'trap "exit \$?" TERM; c=$1; shift; eval "$c"' gpuplan-rank "$1" &
child=$!
while :; do
  wait "$child"; code=$?
  kill -0 "$child" 2>/dev/null || break
done
printf '%s\n' "$code" > "$2.tmp" && mv "$2.tmp" "$2"
exit "$code""#;

fn exit_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.exit"))
}

fn log_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.log"))
}

/// Processes on this host, one process group per rank.
pub struct LocalEngine {
    state_dir: PathBuf,
    children: HashMap<i32, Child>,
    /// Wrappers reaped while other members of their group lived on.
    reaped: HashMap<i32, Option<i32>>,
}

impl LocalEngine {
    /// Attempts live under `STATE/jobs/ID/`.
    pub fn new(state_dir: &Path) -> Self {
        LocalEngine {
            state_dir: state_dir.to_path_buf(),
            children: HashMap::new(),
            reaped: HashMap::new(),
        }
    }

    /// [`super::checkpoint_dir`] under this engine's state directory.
    pub fn checkpoint_dir(&self, job: JobId) -> PathBuf {
        super::checkpoint_dir(&self.state_dir, job)
    }

    /// [`super::done_file`] under this engine's state directory.
    pub fn done_file(&self, job: JobId) -> PathBuf {
        super::done_file(&self.state_dir, job)
    }

    fn signal(&mut self, p: &RankProc, sig: Stop) {
        if p.pgid <= 1 {
            return;
        }
        let s = match sig {
            Stop::Graceful => libc::SIGTERM,
            Stop::Now => libc::SIGKILL,
        };
        // SAFETY: plain kill(2) on a process group we started.
        unsafe {
            libc::kill(-p.pgid, s);
        }
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
        // The wrapper's own status when this engine spawned it (waitpid,
        // which the job cannot forge); the exit file only for a rank
        // adopted after a restart.
        let file = match self.reaped.get(&p.pgid) {
            Some(code) => Some(*code),
            None => read_exit(&self.state_dir, dir, p.rank),
        };
        // A zombie leader is a wrapper that has ended but that this engine
        // cannot reap: one an earlier engine in this same process spawned
        // (init reaps those of a daemon that really restarted). Killed before
        // it wrote its exit file, it would otherwise look alive forever.
        let zombie = is_zombie(p.pgid);
        let wrapper_done = file.is_some() || self.reaped.contains_key(&p.pgid) || zombie;
        if group_alive(p.pgid) {
            if wrapper_done {
                // The command is done; stray children of it must not hold GPUs.
                self.signal(p, Stop::Now);
            }
            if !zombie {
                return RankStatus::Running;
            }
        }
        let reaped = self.reaped.remove(&p.pgid);
        RankStatus::Exited(file.or(reaped).flatten())
    }
}

/// A free TCP port on loopback for MASTER_PORT (the OS picks it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(29500, |a| a.port())
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

/// The exit code a rank's wrapper wrote, read through the one safe reader
/// (the attempt directory is the job's: the file may be a FIFO, a link to
/// `/dev/zero`, or huge). `None`: no file yet; `Some(None)`: a file that
/// is refused or holds no code (logged), read as killed.
fn read_exit(state_dir: &Path, dir: &Path, rank: u32) -> Option<Option<i32>> {
    let path = exit_file(dir, rank);
    match crate::jobfile::read_small_beneath(state_dir, &path, crate::jobfile::EXIT_FILE_MAX_BYTES) {
        Ok(b) => Some(String::from_utf8_lossy(&b).trim().parse().ok()),
        Err(crate::jobfile::Unread::Missing) => None,
        Err(crate::jobfile::Unread::Refused(why)) => {
            tracing::warn!("exit file {} refused: {why}", path.display());
            Some(None)
        }
    }
}

impl Engine for LocalEngine {
    fn name(&self) -> &'static str {
        "local"
    }

    fn locate(&self, job: JobId, attempt: u32) -> Handle {
        Handle::new(super::job_dir(&self.state_dir, job).join(format!("attempt-{attempt}")))
    }

    fn start(&mut self, spec: &AttemptSpec, h: &mut Handle) -> Result<(), ExecError> {
        let ckpt = self.checkpoint_dir(spec.job);
        // STATE/jobs/ID stays the daemon's (a job cannot swap its
        // attempt directory for a link); what is below it is the job's own.
        mkdir(&super::job_dir(&self.state_dir, spec.job), super::DIR_SEARCH_MODE)?;
        mkdir(&h.dir, super::DIR_PRIVATE_MODE)?;
        mkdir(&ckpt, super::DIR_PRIVATE_MODE)?;
        let user = run_as(spec.uid);
        if let Some((uid, gid)) = user {
            for d in [&ckpt, &h.dir] {
                // lchown: never through a link.
                std::os::unix::fs::lchown(d, Some(uid), Some(gid)).map_err(|source| ExecError::Io {
                    context: format!("chown {} to uid {uid}", d.display()),
                    source,
                })?;
            }
        }
        // Shared by all ranks: the protocol's variables, then the engine's own.
        let mut shared = spec.env.clone();
        shared.push(super::token_file(&h.dir, &spec.token, user)?);
        for (k, v) in [
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", free_port().to_string()),
            ("WORLD_SIZE", spec.ranks().to_string()),
            ("GPUPLAN_CHECKPOINT_DIR", ckpt.to_string_lossy().into_owned()),
            (
                "GPUPLAN_DONE_FILE",
                self.done_file(spec.job).to_string_lossy().into_owned(),
            ),
        ] {
            shared.push((k.to_string(), v));
        }
        let mut out = Vec::new();
        for (node, gpus) in &spec.nodes {
            for local in 0..gpus.len() {
                let rank = out.len() as u32;
                let mut env = shared.clone();
                for (k, v) in [
                    ("CUDA_VISIBLE_DEVICES", gpus.join(",")),
                    ("RANK", rank.to_string()),
                    ("LOCAL_RANK", local.to_string()),
                    ("GPUPLAN_NODE", node.clone()),
                ] {
                    env.push((k.to_string(), v));
                }
                match self.spawn_rank(&spec.command, h, rank, &env, user) {
                    Ok(pgid) => out.push(RankProc { rank, pgid }),
                    Err(e) => {
                        for p in &out {
                            self.signal(p, Stop::Now);
                        }
                        return Err(e);
                    }
                }
            }
        }
        h.ranks = out;
        Ok(())
    }

    fn status(&mut self, h: &Handle) -> Vec<RankStatus> {
        h.ranks.iter().map(|r| self.poll(&h.dir, r)).collect()
    }

    fn stop(&mut self, h: &Handle, how: Stop) {
        for r in &h.ranks {
            self.signal(r, how);
        }
    }

    /// Ranks are found by the exit-file path in their command line, not by
    /// the journaled process group: a group that died while the daemon was
    /// down may have had its id reused.
    fn adopt(&mut self, h: &mut Handle, ranks: u32) -> bool {
        let mut found: Vec<Option<RankProc>> = (0..ranks)
            .map(|r| {
                // lstat: the job's file is looked at, never opened, here.
                std::fs::symlink_metadata(exit_file(&h.dir, r))
                    .is_ok()
                    .then_some(RankProc { rank: r, pgid: 0 })
            })
            .collect();
        if let Ok(procs) = std::fs::read_dir("/proc") {
            let marks: Vec<String> = (0..ranks)
                .map(|r| exit_file(&h.dir, r).to_string_lossy().into_owned())
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
        }
        let all = found.iter().all(Option::is_some);
        h.ranks = found
            .into_iter()
            .enumerate()
            .map(|(r, f)| {
                f.unwrap_or(RankProc {
                    rank: r as u32,
                    pgid: 0,
                })
            })
            .collect();
        all
    }

    fn logs(&self, h: &Handle, rank: u32, lines: usize) -> Vec<String> {
        tail_beneath(&self.state_dir, &log_file(&h.dir, rank), lines)
    }

    fn done(&self, job: JobId) -> bool {
        crate::jobfile::marker_beneath(&self.state_dir, &self.done_file(job))
    }
}

impl LocalEngine {
    /// One rank: the wrapper under `sh`, in its own process group, with its log.
    fn spawn_rank(
        &mut self,
        command: &str,
        h: &Handle,
        rank: u32,
        env: &[(String, String)],
        user: Option<(u32, u32)>,
    ) -> Result<i32, ExecError> {
        let log_path = log_file(&h.dir, rank);
        let log = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(super::LOG_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&log_path)
            .map_err(|source| ExecError::Io {
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
            .arg(command)
            .arg(exit_file(&h.dir, rank))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|source| ExecError::Io {
                context: "spawn sh".into(),
                source,
            })?;
        let pgid = child.id() as i32;
        self.children.insert(pgid, child);
        Ok(pgid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_sources_are_opened_by_name() {
        assert!(open_devices("fake:1x4").is_ok());
        assert!(open_devices("fake:0x4").is_err());
        assert!(open_devices("nvml").is_err() || std::path::Path::new("/dev/nvidiactl").exists());
        assert!(open_devices("cuda").err().unwrap().to_string().contains("nvml"));
    }

    fn spec(command: &str) -> AttemptSpec {
        AttemptSpec {
            job: JobId(1),
            attempt: 1,
            command: command.into(),
            nodes: vec![("n0".into(), vec!["g0".into()])],
            env: Vec::new(),
            uid: None,
            token: "t".into(),
        }
    }

    /// Rank 0's status once it stops reading as running (or after 5 s).
    fn settled(e: &mut LocalEngine, h: &Handle) -> RankStatus {
        for _ in 0..500 {
            let s = e.status(h)[0];
            if s != RankStatus::Running {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        RankStatus::Running
    }

    /// A command whose shell forks its program (`A=1 prog; true`, not
    /// `exec prog`) is not cut short by a stop: the shell waits for the
    /// program's own SIGTERM handling (a checkpoint) and exits with its
    /// status, instead of dying at once and leaving the program to the
    /// SIGKILL of "stray children" (a torch job lost its checkpoint so).
    #[test]
    fn a_stop_waits_for_the_program_behind_the_commands_shell() {
        let dir = std::env::temp_dir().join(format!("gpuplan-local-fork-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let saved = dir.join("saved");
        let mut e = LocalEngine::new(&dir);
        let mut h = e.locate(JobId(1), 1);
        let prog = format!(
            "sh -c 'trap \"sleep 1; echo ok > {}; exit 143\" TERM; sleep 30 & wait'; true",
            saved.display()
        );
        e.start(&spec(&prog), &mut h).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(e.status(&h), vec![RankStatus::Running]);
        e.stop(&h, Stop::Graceful);
        assert_eq!(settled(&mut e, &h), RankStatus::Exited(Some(143)));
        assert_eq!(
            std::fs::read_to_string(&saved).unwrap().trim(),
            "ok",
            "the checkpoint was written"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A rank adopted by a second engine of the same process (as the daemon
    /// tests restart it) and killed before its wrapper wrote an exit file
    /// stays a zombie nobody reaps: it must read as exited, not running.
    #[test]
    fn an_adopted_rank_killed_before_its_exit_file_is_exited() {
        let dir = std::env::temp_dir().join(format!("gpuplan-local-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut first = LocalEngine::new(&dir);
        let mut h = first.locate(JobId(1), 1);
        first.start(&spec("exec sleep 30"), &mut h).unwrap();
        let mut second = LocalEngine::new(&dir);
        let mut adopted = Handle {
            ranks: Vec::new(),
            ..h.clone()
        };
        let mut found = false;
        for _ in 0..200 {
            found = second.adopt(&mut adopted, 1);
            if found {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            found && adopted.ranks == h.ranks,
            "{:?} vs {:?}",
            adopted.ranks,
            h.ranks
        );
        assert_eq!(second.status(&adopted), vec![RankStatus::Running]);
        second.stop(&adopted, Stop::Now);
        assert_eq!(
            settled(&mut second, &adopted),
            RankStatus::Exited(None),
            "killed, no exit file"
        );
        // The first engine still holds the child: reaping it is its job.
        assert_eq!(settled(&mut first, &h), RankStatus::Exited(None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
