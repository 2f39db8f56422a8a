//! The Slurm client: one function per verb (`sinfo`, `squeue`, `sbatch`,
//! `scontrol update|release|requeuehold|hold`, `scancel`), each run with a
//! timeout, its JSON parsed with serde. A failed or hung call is an error
//! naming the command and Slurm's message; the caller retries next round.
//!
//! Written against Slurm 22.05 (Debian 12's slurm-wlm, OpenAPI v0.0.38
//! JSON); `scontrol` has no `--json` there, so updates are plain commands.
//! [`SlurmDevices`] is the cluster as Slurm reports it, for the round loop.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;

use crate::device::{Devices, Gpu, Health};
use crate::ExecError;

/// How to reach Slurm.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// The partition gpuplan plans (`--partition`).
    pub partition: String,
    /// Per command.
    pub timeout: Duration,
    /// Where the Slurm commands are; `None` = `PATH`. Tests point it at
    /// stand-ins that fail or hang.
    pub bin_dir: Option<PathBuf>,
}

/// A node of the partition, from `sinfo --json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SlurmNode {
    /// Node name, as jobs are placed on it.
    pub name: String,
    /// `idle`, `mixed`, `allocated`, `down`, `drained`, ...
    #[serde(default)]
    pub state: String,
    /// `DRAIN`, `NOT_RESPONDING`, `FAIL`, ...
    #[serde(default)]
    pub state_flags: Vec<String>,
    /// e.g. `gpu:a100:4` or `gpu:4(S:0-1)`.
    #[serde(default)]
    pub gres: String,
    /// Why the node is down or drained, as the admin wrote it.
    #[serde(default)]
    pub reason: String,
    /// The partitions it belongs to.
    #[serde(default)]
    pub partitions: Vec<String>,
}

impl SlurmNode {
    /// (GPU type, count) from the node's GRES; type `gpu` when untyped.
    pub fn gpus(&self) -> (String, u32) {
        for g in self.gres.split(',') {
            let g = g.split('(').next().unwrap_or("");
            let parts: Vec<&str> = g.split(':').collect();
            match parts.as_slice() {
                ["gpu", n] => return ("gpu".into(), n.parse().unwrap_or(0)),
                ["gpu", t, n] => return (t.to_string(), n.parse().unwrap_or(0)),
                _ => {}
            }
        }
        ("gpu".into(), 0)
    }

    /// Why the node may not run jobs, if it may not: down, drained or
    /// draining, failing, not responding.
    pub fn unusable(&self) -> Option<String> {
        let bad_state = [
            "down", "drained", "draining", "fail", "failing", "future", "unknown",
        ];
        let bad_flag = [
            "DRAIN",
            "DRAINED",
            "DRAINING",
            "FAIL",
            "NOT_RESPONDING",
            "POWERED_DOWN",
        ];
        let state = self.state.to_ascii_lowercase();
        let flags: Vec<&str> = self
            .state_flags
            .iter()
            .map(String::as_str)
            .filter(|f| bad_flag.contains(f))
            .collect();
        if bad_state.contains(&state.as_str()) || !flags.is_empty() {
            let mut what = state;
            for f in flags {
                what.push('+');
                what.push_str(&f.to_ascii_lowercase());
            }
            let why = if self.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", self.reason)
            };
            return Some(format!("node {} is {what}{why}", self.name));
        }
        None
    }
}

#[derive(Deserialize)]
struct NodesReply {
    #[serde(default)]
    nodes: Vec<SlurmNode>,
}

/// A job, from `squeue --json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SlurmJob {
    /// Slurm's job id.
    pub job_id: u64,
    /// Job name (`--job-name`).
    #[serde(default)]
    pub name: String,
    /// `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, `FAILED`, ...
    #[serde(default)]
    pub job_state: String,
    /// Why it waits or ended (`Held`, `Resources`, ...).
    #[serde(default)]
    pub state_reason: String,
    /// `--comment`; `gpuplan` marks a user's job for gpuplan to run.
    #[serde(default)]
    pub comment: String,
    /// The partition it is queued in.
    #[serde(default)]
    pub partition: String,
    /// Its allocated nodes, as a Slurm host list; empty while pending.
    #[serde(default)]
    pub nodes: String,
    /// The batch script's exit code, once ended.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// Times Slurm requeued it.
    #[serde(default)]
    pub restart_cnt: u32,
    /// Path of the batch script's output file.
    #[serde(default)]
    pub standard_output: String,
    /// The Slurm account it is charged to: its queue under `serve
    /// --queues` unless its script names one.
    #[serde(default)]
    pub account: String,
    /// The submitting user's uid.
    #[serde(default)]
    pub user_id: Option<u32>,
    /// The array job this record belongs to (`gpuplan sweep --slurm`); 0 or
    /// absent for a plain job. A pending array is one record, each started
    /// task one more.
    #[serde(default)]
    pub array_job_id: Option<u64>,
}

impl SlurmJob {
    /// Held by a user or an admin (`sbatch -H`, `scontrol hold`,
    /// `requeuehold`): Slurm will not start it until released.
    pub fn held(&self) -> bool {
        // By the reason only: a site's priority plugin may give pending
        // jobs priority 0 without holding them.
        self.job_state == "PENDING"
            && (self.state_reason.starts_with("JobHeld") || self.state_reason.contains("held"))
    }

    /// Finished for Slurm (it can still be requeued).
    pub fn ended(&self) -> bool {
        !matches!(
            self.job_state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "SUSPENDED"
                | "STOPPED"
                | "REQUEUED"
                | "RESIZING"
        )
    }
}

#[derive(Deserialize)]
struct JobsReply {
    #[serde(default)]
    jobs: Vec<SlurmJob>,
}

/// Run `program args` with a timeout; stdout on success.
pub fn run_timed(program: &str, args: &[String], timeout: Duration) -> Result<String, String> {
    let shown = || {
        let mut s = program.to_string();
        for a in args {
            s.push(' ');
            s.push_str(a);
        }
        s
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}`: cannot run: {e}", shown()))?;
    // Read both pipes on threads so a chatty command cannot block on a full pipe.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t0 = crate::clock::Stopwatch::start();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if t0.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{}`: timed out after {:.0} s",
                    shown(),
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("`{}`: {e}", shown())),
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        let msg = stderr.trim();
        let msg = if msg.is_empty() { stdout.trim() } else { msg };
        Err(format!(
            "`{}` failed ({}): {}",
            shown(),
            status
                .code()
                .map_or("killed by a signal".to_string(), |c| format!("exit {c}")),
            msg.lines().take(3).collect::<Vec<_>>().join(" / ")
        ))
    }
}

impl Slurm {
    /// Slurm from `PATH`, 20 s per command, planning `partition`.
    pub fn new(partition: &str) -> Self {
        Slurm {
            partition: partition.to_string(),
            timeout: Duration::from_secs(20),
            bin_dir: None,
        }
    }

    fn run(&self, verb: &str, args: &[String]) -> Result<String, ExecError> {
        let program = match &self.bin_dir {
            Some(d) => d.join(verb).to_string_lossy().into_owned(),
            None => verb.to_string(),
        };
        run_timed(&program, args, self.timeout).map_err(|e| ExecError::Engine(format!("slurm: {e}")))
    }

    fn json<T: for<'de> Deserialize<'de>>(&self, verb: &str, args: &[String]) -> Result<T, ExecError> {
        let out = self.run(verb, args)?;
        serde_json::from_str(&out).map_err(|e| {
            ExecError::Engine(format!(
                "slurm: `{verb} {}`: unreadable JSON: {e}",
                args.join(" ")
            ))
        })
    }

    /// The partition's nodes.
    pub fn nodes(&self) -> Result<Vec<SlurmNode>, ExecError> {
        let r: NodesReply = self.json("sinfo", &["--json".into()])?;
        Ok(r.nodes
            .into_iter()
            .filter(|n| n.partitions.contains(&self.partition))
            .collect())
    }

    /// Every job Slurm knows, in any partition (22.05's `squeue --json`
    /// ignores filters).
    pub fn all_jobs(&self) -> Result<Vec<SlurmJob>, ExecError> {
        let r: JobsReply = self.json("squeue", &["--json".into()])?;
        Ok(r.jobs)
    }

    /// The partition's jobs.
    pub fn jobs(&self) -> Result<Vec<SlurmJob>, ExecError> {
        Ok(self
            .all_jobs()?
            .into_iter()
            .filter(|j| j.partition == self.partition)
            .collect())
    }

    /// One job by id; `None` once Slurm has forgotten it.
    pub fn job(&self, id: u64) -> Result<Option<SlurmJob>, ExecError> {
        Ok(self.jobs()?.into_iter().find(|j| j.job_id == id))
    }

    /// Submit a held batch job; its id.
    pub fn sbatch_held(
        &self,
        script: &std::path::Path,
        name: &str,
        output: &std::path::Path,
    ) -> Result<u64, ExecError> {
        let out = self.run(
            "sbatch",
            &[
                "--parsable".into(),
                "-H".into(),
                format!("--partition={}", self.partition),
                format!("--job-name={name}"),
                "--comment=gpuplan".into(),
                "--nodes=1".into(),
                "--ntasks-per-node=1".into(),
                "--gres=gpu:1".into(),
                "--requeue".into(),
                format!("--output={}", output.display()),
                script.to_string_lossy().into_owned(),
            ],
        )?;
        let id = out.trim().split(';').next().unwrap_or("");
        id.parse()
            .map_err(|_| ExecError::Engine(format!("slurm: sbatch printed {out:?}, not a job id")))
    }

    /// `scontrol update jobid=ID FIELD=VALUE ...`.
    pub fn update(&self, id: u64, fields: &[(&str, String)]) -> Result<(), ExecError> {
        let mut args = vec!["update".to_string(), format!("jobid={id}")];
        args.extend(fields.iter().map(|(k, v)| format!("{k}={v}")));
        self.run("scontrol", &args).map(drop)
    }

    /// `scontrol release ID`: let a held job start.
    pub fn release(&self, id: u64) -> Result<(), ExecError> {
        self.run("scontrol", &["release".into(), id.to_string()])
            .map(drop)
    }

    /// `scontrol hold ID`: keep a pending job from starting.
    pub fn hold(&self, id: u64) -> Result<(), ExecError> {
        self.run("scontrol", &["hold".into(), id.to_string()]).map(drop)
    }

    /// Requeue in held state: a running job gets SIGTERM (then SIGKILL
    /// after Slurm's KillWait) and waits, held, for its next allocation.
    pub fn requeue_hold(&self, id: u64) -> Result<(), ExecError> {
        self.run("scontrol", &["requeuehold".into(), id.to_string()])
            .map(drop)
    }

    /// Signal every process of the job (batch script and steps).
    pub fn signal(&self, id: u64, signal: &str) -> Result<(), ExecError> {
        self.run(
            "scancel",
            &[format!("--signal={signal}"), "--full".into(), id.to_string()],
        )
        .map(drop)
    }

    /// `scancel ID`.
    pub fn cancel(&self, id: u64) -> Result<(), ExecError> {
        self.run("scancel", &[id.to_string()]).map(drop)
    }

    /// The job's batch script (to read a user's `#GPUPLAN` lines).
    pub fn batch_script(&self, id: u64) -> Result<String, ExecError> {
        self.run(
            "scontrol",
            &["write".into(), "batch_script".into(), id.to_string(), "-".into()],
        )
    }
}

/// The partition's GPUs as the round loop sees them: one [`Gpu`] per GRES
/// GPU, named `NODE/gpuK` (Slurm picks the device indices inside a node;
/// gpuplan decides nodes and counts). A node that is down, drained or
/// failing shows its GPUs unhealthy, so its jobs are re-planned.
pub struct SlurmDevices {
    pub slurm: Slurm,
}

impl Devices for SlurmDevices {
    fn backend(&self) -> &'static str {
        "slurm"
    }

    fn collect(&mut self) -> Result<Vec<Gpu>, ExecError> {
        let mut out = Vec::new();
        for n in self.slurm.nodes()? {
            let (kind, count) = n.gpus();
            let health = match n.unusable() {
                Some(reason) => Health::Unhealthy { reason },
                None => Health::Ok,
            };
            for k in 0..count {
                out.push(Gpu {
                    uuid: format!("{}/gpu{k}", n.name),
                    node: n.name.clone(),
                    index: k,
                    name: kind.clone(),
                    memory_total_bytes: 0,
                    memory_used_bytes: 0,
                    utilization_pct: None,
                    processes: Vec::new(),
                    health: health.clone(),
                    topology: Vec::new(),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_and_node_states_parse() {
        let n: Vec<SlurmNode> = serde_json::from_str::<NodesReply>(
            r#"{"nodes":[{"name":"n1","state":"idle","state_flags":[],"gres":"gpu:fake:4","reason":"","partitions":["all"]},
            {"name":"n2","state":"idle","state_flags":["DRAIN"],"gres":"gpu:4(S:0)","reason":"test","partitions":["all"],"cpus":8}]}"#,
        )
        .unwrap()
        .nodes;
        assert_eq!(n[0].gpus(), ("fake".to_string(), 4));
        assert_eq!(n[1].gpus(), ("gpu".to_string(), 4));
        assert_eq!(n[0].unusable(), None);
        assert_eq!(n[1].unusable().unwrap(), "node n2 is idle+drain: test");
    }

    #[test]
    fn failed_and_hung_commands_name_themselves() {
        let e = run_timed(
            "sh",
            &["-c".into(), "echo nope >&2; exit 3".into()],
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(
            e.contains("`sh -c") && e.contains("exit 3") && e.contains("nope"),
            "{e}"
        );
        let t0 = crate::clock::Stopwatch::start();
        let e = run_timed("sleep", &["30".into()], Duration::from_millis(200)).unwrap_err();
        assert!(
            e.contains("timed out") && t0.elapsed() < Duration::from_secs(5),
            "{e}"
        );
        let e = run_timed("/nonexistent/scontrol", &[], Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("cannot run"), "{e}");
    }
}
