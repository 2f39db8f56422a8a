//! The Slurm engine: gpuplan plans, Slurm places and runs.
//!
//! Each gpuplan job is one Slurm batch job, submitted held (`sbatch -H`) in
//! the partition when the job is submitted. An attempt is that job given
//! an exact node list and GPUs per node, then released; a re-allocation is
//! requeue-hold (the job gets SIGTERM, may checkpoint, and waits held),
//! update, release with `StartTime=now`. Slurm's requeue restarts the batch
//! script from the top, so the job protocol's checkpoint is what keeps
//! progress. A crashed job (FAILED for Slurm) is requeued held the same way
//! for its next attempt.
//!
//! The engine reads an attempt's state from Slurm's job state, so a user's
//! own held script (`sbatch -H --comment=gpuplan`) runs as it is. Jobs
//! submitted through gpuplan run a generated script: one task per node via
//! `srun`, which starts that node's ranks, one per GPU, with the local
//! engine's layout (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR` = the
//! allocation's first node, `CUDA_VISIBLE_DEVICES` as Slurm binds it). Its
//! per-attempt settings (batch size, attempt directory) are written to
//! `STATE/slurm/SLURM_ID/attempt.env` before the release, so the state
//! directory must be on a file system the compute nodes share.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpuplan_core::JobId;

use super::flag::{self, AnyFlag, Flag};
use super::{
    checkpoint_dir, done_file, job_dir, mkdir, tail_beneath, tail_owned, AttemptSpec, Backends, Engine,
    EngineEntry, EngineSetup, Handle, RankProc, RankStatus, Stop,
};
use crate::clock::Clock;

pub(crate) mod client;

use client::{Slurm, SlurmDevices, SlurmJob};

/// `--engine slurm`: Slurm's partition is the cluster, its jobs the attempts.
pub(super) const ENTRY: EngineEntry = EngineEntry {
    name: "slurm",
    description: "gpuplan plans, Slurm runs: one held batch job per job, released onto the planned GPUs",
    flags: FLAGS,
    build,
};

/// This engine's flags, in `--help` order.
const FLAGS: &[&dyn AnyFlag] = &[&PARTITION, &TIMEOUT];

/// `--partition NAME`: the Slurm partition gpuplan plans; needed.
const PARTITION: Flag<String> = Flag {
    name: "partition",
    value_name: "NAME",
    help: "The Slurm partition gpuplan plans",
    default: None,
    parse: flag::text,
};

#[cfg(test)]
#[test]
fn flag_partition() {
    let o = super::EngineOptions::new().with("partition", "gpu");
    assert_eq!(PARTITION.require("slurm", &o).unwrap(), "gpu");
    let e = PARTITION
        .require("slurm", &super::EngineOptions::new())
        .unwrap_err();
    assert_eq!(e.to_string(), "--engine slurm needs --partition NAME");
}

/// `--slurm-timeout DURATION`: a hung `sinfo` or `scontrol` costs a round,
/// not the daemon.
const TIMEOUT: Flag<std::time::Duration> = Flag {
    name: "slurm-timeout",
    value_name: "DURATION",
    help: "Longest one Slurm command (sinfo, squeue, sbatch, scontrol) may take; \
           a slower one counts as failed and the round is retried",
    default: Some("20s"),
    parse: flag::duration,
};

#[cfg(test)]
#[test]
fn flag_slurm_timeout() {
    use std::time::Duration;
    let none = super::EngineOptions::new();
    assert_eq!(TIMEOUT.get(&none).unwrap(), Some(Duration::from_secs(20)));
    let o = none.clone().with("slurm-timeout", "500ms");
    assert_eq!(TIMEOUT.get(&o).unwrap(), Some(Duration::from_millis(500)));
    let o = none.with("slurm-timeout", "-1s");
    assert!(TIMEOUT
        .get(&o)
        .unwrap_err()
        .to_string()
        .starts_with("--slurm-timeout -1s: "));
}

/// Why `--sharing` is refused with this engine. A planned partner would
/// otherwise wait in Slurm behind the GPU its partner holds as `gres:gpu`
/// while the daemon counts it running. Slurm's `gres/shard` runs two jobs
/// on one device, but 22.05 refuses to switch a job between `gres/gpu` and
/// `gres/shard` once either is set, and this engine keeps one held Slurm
/// job per gpuplan job across attempts (docs/slurm.md, "Sharing").
const SHARING: &str = "--sharing with --engine slurm is not supported: a job the plan \
     puts on a GPU another job holds would wait in Slurm behind it. Slurm's gres/shard could run \
     both (slurm.conf GresTypes=gpu,shard), but Slurm 22.05 cannot switch a held job between \
     gres/gpu and gres/shard (`scontrol update ... TresPerNode=gres:shard:1`: Invalid generic \
     resource (gres) specification); run without --sharing, or with the local engine \
     (docs/slurm.md, \"Sharing\")";

/// The partition's nodes and GRES as the device source, and this engine;
/// needs `--partition`, refuses `--sharing`.
fn build(setup: &EngineSetup) -> Result<Backends, ExecError> {
    let partition = PARTITION.require(ENTRY.name, setup.options)?;
    if setup.sharing > 1 {
        return Err(ExecError::Config(SHARING.into()));
    }
    let mut slurm = Slurm::new(&partition);
    if let Some(t) = TIMEOUT.get(setup.options)? {
        slurm.timeout = t;
    }
    Ok((
        Box::new(SlurmDevices { slurm: slurm.clone() }),
        Box::new(SlurmEngine::new(slurm, setup.state_dir, setup.clock.clone())),
    ))
}

/// The handle key of an attempt's Slurm job id (the journal's since before
/// handles had engine state).
const JOB_KEY: &str = "slurm_job";
use crate::spec::JobSubmission;
use crate::ExecError;

/// How long one `squeue` answers every status question, in seconds: a tick
/// asks per job.
const STATUS_TTL_S: f64 = 0.5;

/// Runs each gpuplan job as one held Slurm batch job, placed where the plan says.
pub struct SlurmEngine {
    slurm: Slurm,
    state_dir: PathBuf,
    ids: HashMap<JobId, u64>,
    refused: HashSet<u64>,
    /// When `squeue` was read (on the daemon's clock) and what it said.
    cache: Option<(f64, HashMap<u64, SlurmJob>)>,
    clock: Arc<dyn Clock>,
}

/// `'...'` for sh, with embedded quotes escaped.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The batch script of a job submitted through gpuplan. The spec rides
/// along as `#GPUPLAN` lines, so a held job whose submission the journal
/// never recorded (a crash between `sbatch` and the write) is adopted back
/// with its spec.
fn batch_script(state_dir: &Path, spec: &JobSubmission) -> String {
    let toml = toml_lines(spec);
    let env = state_dir.join("slurm");
    // The per-node part runs under srun on every node (the batch script
    // itself exists on the first node only), so it is inline. SIGTERM
    // reaches every process of the step; the node shell traps it and keeps
    // waiting, so the ranks get Slurm's KillWait to checkpoint.
    let node = r#"set -a; . "$GPUPLAN_ENV"; set +a
k=$GPUPLAN_GPUS_PER_NODE; pids=""; i=0
while [ "$i" -lt "$k" ]; do
  r=$((SLURM_NODEID * k + i))
  RANK=$r LOCAL_RANK=$i GPUPLAN_NODE=$SLURMD_NODENAME sh -c "$GPUPLAN_COMMAND" > "$GPUPLAN_ATTEMPT_DIR/rank-$r.log" 2>&1 &
  pids="$pids $!"; i=$((i + 1))
done
trap "gpuplan_term=1" TERM
code=0
for p in $pids; do
  while :; do wait "$p"; c=$?; kill -0 "$p" 2>/dev/null || break; done
  [ "$c" -ne 0 ] && code=$c
done
exit $code"#;
    format!(
        "#!/bin/sh\n\
         # gpuplan: generated by `gpuplan serve --engine slurm`; one task per node starts its ranks.\n\
         {toml}\
         GPUPLAN_ENV={env}/$SLURM_JOB_ID/attempt.env; export GPUPLAN_ENV\n\
         set -a; . \"$GPUPLAN_ENV\"; set +a\n\
         mkdir -p \"$GPUPLAN_ATTEMPT_DIR\"\n\
         MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1); export MASTER_ADDR\n\
         srun -N \"$SLURM_JOB_NUM_NODES\" -n \"$SLURM_JOB_NUM_NODES\" --ntasks-per-node=1 --kill-on-bad-exit=0 sh -c {node}\n",
        env = sh_quote(&env.to_string_lossy()),
        node = sh_quote(node),
    )
}

fn toml_lines(spec: &JobSubmission) -> String {
    let text = toml::to_string(spec).unwrap_or_default();
    text.lines().map(|l| format!("#GPUPLAN {l}\n")).collect()
}

/// A user's held job: its spec from the script's `#GPUPLAN` lines (the
/// keys of a job file); `name` defaults to the Slurm job's name, `command`
/// to the script itself (Slurm runs it; the engine never reads it).
pub fn spec_from_script(job: &SlurmJob, script: &str) -> Result<JobSubmission, String> {
    let lines: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("#GPUPLAN "))
        .collect();
    if lines.is_empty() {
        return Err(
            "its script has no `#GPUPLAN key = value` lines (min_gpus, max_gpus, batch_size at least)".into(),
        );
    }
    let mut text = lines.join("\n");
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("#GPUPLAN lines: {}", e.message()))?;
    if !table.contains_key("name") {
        text.push_str(&format!("\nname = {}", toml::Value::String(job.name.clone())));
    }
    if !table.contains_key("command") {
        text.push_str("\ncommand = \"(the Slurm batch script)\"");
    }
    if !table.contains_key("queue") && !job.account.is_empty() {
        text.push_str(&format!("\nqueue = {}", toml::Value::String(job.account.clone())));
    }
    JobSubmission::from_toml(&text, &format!("slurm job {}", job.job_id)).map_err(|e| e.join("; "))
}

impl SlurmEngine {
    /// An engine over `slurm`, keeping its files under `state_dir`.
    pub fn new(slurm: Slurm, state_dir: &Path, clock: Arc<dyn Clock>) -> Self {
        SlurmEngine {
            slurm,
            state_dir: state_dir.to_path_buf(),
            ids: HashMap::new(),
            refused: HashSet::new(),
            cache: None,
            clock,
        }
    }

    /// The partition's jobs, at most [`STATUS_TTL_S`] old.
    fn jobs(&mut self) -> Result<&HashMap<u64, SlurmJob>, ExecError> {
        let now = self.clock.now_unix_s();
        // A clock set back counts as stale.
        let fresh = self
            .cache
            .as_ref()
            .is_some_and(|(t, _)| (0.0..STATUS_TTL_S).contains(&(now - t)));
        if !fresh {
            let jobs = self.slurm.jobs()?;
            let read = self.clock.now_unix_s();
            self.cache = Some((read, jobs.into_iter().map(|j| (j.job_id, j)).collect()));
        }
        Ok(&self.cache.as_ref().expect("filled").1)
    }

    fn write(path: &Path, text: &str) -> Result<(), ExecError> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|source| ExecError::Io {
                context: format!("write {}", path.display()),
                source,
            })
    }
}

impl Engine for SlurmEngine {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn locate(&self, job: JobId, attempt: u32) -> Handle {
        let mut h = Handle::new(job_dir(&self.state_dir, job).join(format!("attempt-{attempt}")));
        h.engine.set_u64(JOB_KEY, self.ids.get(&job).copied());
        h
    }

    fn start(&mut self, spec: &AttemptSpec, h: &mut Handle) -> Result<(), ExecError> {
        let id = *self
            .ids
            .get(&spec.job)
            .ok_or_else(|| ExecError::Engine(format!("job {} has no Slurm job", spec.job.0)))?;
        let counts: Vec<usize> = spec.nodes.iter().map(|(_, g)| g.len()).collect();
        let k = counts.first().copied().unwrap_or(0);
        if k == 0 || counts.iter().any(|&c| c != k) {
            return Err(ExecError::Engine(format!(
                "job {}: Slurm gives one GPU count per node, the plan has {counts:?}",
                spec.job.0
            )));
        }
        self.cache = None;
        let sj = self
            .slurm
            .job(id)?
            .ok_or_else(|| ExecError::Engine(format!("slurm: job {id} is gone from Slurm's queue")))?;
        // An ended job (crashed, or a user's that finished) is requeued
        // held; a pending one is held so the updates land before it starts.
        if sj.ended() {
            self.slurm.requeue_hold(id)?;
        } else if !sj.held() {
            if sj.job_state != "PENDING" {
                return Err(ExecError::Engine(format!(
                    "slurm: job {id} is {} while gpuplan starts a new attempt",
                    sj.job_state
                )));
            }
            self.slurm.hold(id)?;
        }
        let env_dir = self.state_dir.join("slurm").join(id.to_string());
        let ckpt = checkpoint_dir(&self.state_dir, spec.job);
        mkdir(&env_dir, super::DIR_PRIVATE_MODE)?;
        mkdir(&h.dir, super::DIR_PRIVATE_MODE)?;
        mkdir(&ckpt, super::DIR_PRIVATE_MODE)?;
        let mut env = spec.env.clone();
        env.push(super::token_file(&h.dir, &spec.token, None)?);
        for (key, v) in [
            ("GPUPLAN_COMMAND", spec.command.clone()),
            ("GPUPLAN_ATTEMPT_DIR", h.dir.to_string_lossy().into_owned()),
            ("GPUPLAN_GPUS_PER_NODE", k.to_string()),
            ("WORLD_SIZE", spec.ranks().to_string()),
            ("MASTER_PORT", (29500 + (id % 1000)).to_string()),
            ("GPUPLAN_CHECKPOINT_DIR", ckpt.to_string_lossy().into_owned()),
            (
                "GPUPLAN_DONE_FILE",
                done_file(&self.state_dir, spec.job)
                    .to_string_lossy()
                    .into_owned(),
            ),
        ] {
            env.push((key.to_string(), v));
        }
        let text: String = env
            .iter()
            .map(|(key, v)| format!("{key}={}\n", sh_quote(v)))
            .collect();
        Self::write(&env_dir.join("attempt.env"), &text)?;
        let nodes: Vec<&str> = spec.nodes.iter().map(|(n, _)| n.as_str()).collect();
        let n = nodes.len();
        // One field per call, in an order that is valid at every step:
        // Slurm refuses a node count below the required list, or CPUs that
        // no longer fit.
        self.slurm.update(id, &[("ReqNodeList", String::new())])?;
        self.slurm.update(id, &[("NumNodes", format!("{n}-{n}"))])?;
        self.slurm
            .update(id, &[("NumTasks", n.to_string()), ("NumCPUs", n.to_string())])?;
        self.slurm.update(
            id,
            &[
                ("ReqNodeList", nodes.join(",")),
                ("TresPerNode", format!("gres:gpu:{k}")),
                ("StartTime", "now".to_string()),
            ],
        )?;
        self.slurm.release(id)?;
        h.engine.set_u64(JOB_KEY, Some(id));
        h.ranks = (0..spec.ranks()).map(|rank| RankProc { rank, pgid: 0 }).collect();
        Ok(())
    }

    /// From Slurm's job state, the same for every rank: running (or
    /// released and waiting for Slurm to start it), or ended. A Slurm
    /// that does not answer counts as running: nothing is settled on a
    /// failed query, the next tick asks again.
    fn status(&mut self, h: &Handle) -> Vec<RankStatus> {
        let n = h.ranks.len().max(1);
        let Some(id) = h.engine.u64(JOB_KEY) else {
            return vec![RankStatus::Exited(None); n];
        };
        let st = match self.jobs() {
            Err(e) => {
                tracing::warn!("{e}");
                RankStatus::Running
            }
            Ok(jobs) => match jobs.get(&id) {
                None => RankStatus::Exited(None),
                Some(j) if j.held() => RankStatus::Exited(None),
                Some(j) if !j.ended() => RankStatus::Running,
                Some(j) if j.job_state == "COMPLETED" => RankStatus::Exited(Some(0)),
                Some(j) if j.job_state == "FAILED" => {
                    RankStatus::Exited(Some(j.exit_code.filter(|&c| c != 0).unwrap_or(1) as i32))
                }
                Some(_) => RankStatus::Exited(None),
            },
        };
        vec![st; n]
    }

    fn stop(&mut self, h: &Handle, how: Stop) {
        let Some(id) = h.engine.u64(JOB_KEY) else { return };
        self.cache = None;
        let job = match self.slurm.job(id) {
            Ok(Some(j)) => j,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("stop job {id}: {e}");
                return;
            }
        };
        if job.ended() || job.held() {
            return;
        }
        // Released but not started yet: hold it back (Slurm refuses to
        // requeue a pending job).
        let r = match how {
            _ if job.job_state == "PENDING" => self.slurm.hold(id),
            // It may have become pending between the query and the
            // command (a requeue under way): then hold it.
            Stop::Graceful => self.slurm.requeue_hold(id).or_else(|e| {
                if e.to_string().contains("pending execution") {
                    self.slurm.hold(id)
                } else {
                    Err(e)
                }
            }),
            Stop::Now => self.slurm.signal(id, "KILL"),
        };
        if let Err(e) = r {
            tracing::warn!("stop job {id}: {e}");
        }
    }

    fn adopt(&mut self, h: &mut Handle, ranks: u32) -> bool {
        h.ranks = (0..ranks).map(|rank| RankProc { rank, pgid: 0 }).collect();
        let Some(id) = h.engine.u64(JOB_KEY) else {
            return false;
        };
        self.cache = None;
        match self.slurm.job(id) {
            // Still held: the release never happened.
            Ok(Some(j)) => !j.held(),
            Ok(None) => true,
            Err(e) => {
                tracing::warn!("adopt job {id}: {e}");
                true
            }
        }
    }

    fn logs(&self, h: &Handle, rank: u32, lines: usize) -> Vec<String> {
        let own = h.dir.join(format!("rank-{rank}.log"));
        if std::fs::symlink_metadata(&own).is_ok() {
            return tail_beneath(&self.state_dir, &own, lines);
        }
        // A user's script: Slurm's output file.
        let Some(id) = h.engine.u64(JOB_KEY) else {
            return Vec::new();
        };
        match self.slurm.job(id) {
            Ok(Some(j)) if !j.standard_output.is_empty() => tail_owned(
                Path::new(&j.standard_output.replace("%j", &id.to_string())),
                j.user_id,
                lines,
            ),
            _ => Vec::new(),
        }
    }

    fn done(&self, job: JobId) -> bool {
        crate::jobfile::marker_beneath(&self.state_dir, &done_file(&self.state_dir, job))
    }

    fn admit(&mut self, job: JobId, spec: &JobSubmission) -> Result<Option<u64>, ExecError> {
        let dir = job_dir(&self.state_dir, job);
        mkdir(&dir, super::DIR_SEARCH_MODE)?;
        let script = dir.join("job.sh");
        Self::write(&script, &batch_script(&self.state_dir, spec))?;
        let name = format!("gpuplan-{}", spec.name);
        let id = self
            .slurm
            .sbatch_held(&script, &name, &dir.join("slurm-%j.out"))?;
        self.ids.insert(job, id);
        self.cache = None;
        Ok(Some(id))
    }

    fn known(&mut self, job: JobId, id: u64) {
        self.ids.insert(job, id);
    }

    fn discover(&mut self) -> Result<(Vec<(u64, JobSubmission)>, Vec<(u64, String)>), ExecError> {
        let ours: HashSet<u64> = self.ids.values().copied().collect();
        let mut new: Vec<SlurmJob> = self
            .jobs()?
            .values()
            .filter(|j| j.comment == "gpuplan" && j.held() && !ours.contains(&j.job_id))
            .cloned()
            .collect();
        new.retain(|j| !self.refused.contains(&j.job_id));
        new.sort_by_key(|j| j.job_id);
        let (mut found, mut refused) = (Vec::new(), Vec::new());
        for j in new {
            let parsed = self
                .slurm
                .batch_script(j.job_id)
                .map_err(|e| e.to_string())
                .and_then(|s| spec_from_script(&j, &s));
            match parsed {
                Ok(spec) => found.push((j.job_id, spec)),
                Err(why) => {
                    self.refused.insert(j.job_id);
                    refused.push((j.job_id, why));
                }
            }
        }
        Ok((found, refused))
    }

    fn retire(&mut self, job: JobId) -> Result<(), ExecError> {
        let Some(&id) = self.ids.get(&job) else {
            return Ok(());
        };
        self.cache = None;
        if let Some(j) = self.slurm.job(id)? {
            if !j.ended() {
                self.slurm.cancel(id)?;
            }
        }
        self.ids.remove(&job);
        Ok(())
    }

    fn even_nodes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(name: &str) -> SlurmJob {
        serde_json::from_value(serde_json::json!({
            "job_id": 42, "name": name, "job_state": "PENDING", "state_reason": "JobHeldUser",
            "comment": "gpuplan", "partition": "all"
        }))
        .unwrap()
    }

    #[test]
    fn a_users_script_gives_its_spec_or_a_reason() {
        let s = "#!/bin/sh\n#GPUPLAN min_gpus = 1\n#GPUPLAN max_gpus = 8\n#GPUPLAN batch_size = 256\nsrun train.py\n";
        let spec = spec_from_script(&held("resnet"), s).unwrap();
        assert_eq!(
            (spec.name.as_str(), spec.min_gpus, spec.max_gpus),
            ("resnet", 1, 8)
        );
        let e = spec_from_script(&held("x"), "#!/bin/sh\nsrun a\n").unwrap_err();
        assert!(e.contains("#GPUPLAN"), "{e}");
        let e = spec_from_script(
            &held("x"),
            "#GPUPLAN min_gpus = 0\n#GPUPLAN max_gpus = 1\n#GPUPLAN batch_size = 8\n",
        )
        .unwrap_err();
        assert!(e.contains("min_gpus"), "{e}");
        // Its Slurm account is its queue unless the script names one.
        assert_eq!(spec.queue, None, "no account, no queue");
        let mut job = held("resnet");
        job.account = "vision".into();
        assert_eq!(
            spec_from_script(&job, s).unwrap().queue.as_deref(),
            Some("vision")
        );
        let named = format!("{s}#GPUPLAN queue = \"speech\"\n");
        assert_eq!(
            spec_from_script(&job, &named).unwrap().queue.as_deref(),
            Some("speech")
        );
    }

    #[test]
    fn generated_scripts_carry_their_spec() {
        let spec = JobSubmission::from_toml(
            "name = \"it's\"\ncommand = \"echo 'hi'\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 8\n",
            "t",
        )
        .unwrap();
        let script = batch_script(Path::new("/state"), &spec);
        let back = spec_from_script(&held("other"), &script).unwrap();
        assert_eq!(back, spec);
        assert!(
            script.contains("'/state/slurm'/$SLURM_JOB_ID/attempt.env"),
            "{script}"
        );
    }

    /// Refused before any Slurm command runs, so no Slurm is needed here:
    /// sharing with its reason, this engine's flags with another engine
    /// (by the registry, naming this one), and a build without the
    /// partition.
    #[test]
    fn sharing_and_misplaced_flags_are_refused_before_slurm_is_asked() {
        use super::super::tests::setup;
        use super::super::{build, EngineOptions};
        let d = std::env::temp_dir();
        let all = EngineOptions::new().with("partition", "all");
        let e = build("slurm", &setup("", &all, 2, &d))
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("--sharing") && e.contains("gres/shard") && e.contains("docs/slurm.md"),
            "{e}"
        );
        // Without sharing nothing changes, and the local engine shares.
        let none = EngineOptions::new();
        assert!(build("local", &setup("fake:1x1", &none, 2, &d)).is_ok());
        let e = build("local", &setup("fake:1x1", &all, 1, &d))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--partition is an option of --engine slurm");
        let t = EngineOptions::new().with("slurm-timeout", "5s");
        let e = build("local", &setup("fake:1x1", &t, 1, &d))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "--slurm-timeout is an option of --engine slurm");
        let e = build("slurm", &setup("", &t, 1, &d)).err().unwrap().to_string();
        assert_eq!(e, "--engine slurm needs --partition NAME");
    }

    /// An engine's keys sit beside `dir` and `ranks` in the journal, as
    /// `slurm_job` did before handles had engine state: old lines load,
    /// and a handle is written back key for key.
    #[test]
    fn engine_state_is_journaled_beside_the_handle() {
        let old = r#"{"dir":"/s/jobs/1/attempt-2","ranks":[{"rank":0,"pgid":0}],"slurm_job":42}"#;
        let h: Handle = serde_json::from_str(old).unwrap();
        assert_eq!(h.engine.u64(JOB_KEY), Some(42));
        assert_eq!(serde_json::to_string(&h).unwrap(), old);
        let mut h = Handle::new("/d".into());
        assert_eq!(serde_json::to_string(&h).unwrap(), r#"{"dir":"/d","ranks":[]}"#);
        h.engine.set_u64(JOB_KEY, Some(7));
        h.engine.set_u64(JOB_KEY, None);
        assert_eq!(h, Handle::new("/d".into()));
    }
}
