//! `gpuplan sweep --slurm`: a sweep too big for one machine. Its unfinished
//! cells go to Slurm as one array job, task N running `gpuplan sweep ...
//! --cell N` (cell N of the sweep's fixed task order) in the submitter's
//! working directory, which writes that cell's result.json into --out.
//! Results travel only through that folder, which the nodes must share;
//! this process waits until every cell is in or the array has ended, and
//! the local sweep then writes the summary from the files, as on resume.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gpuplan_exec::slurm::{run_timed, Slurm};
use gpuplan_sim::SimResult;

/// Per Slurm command, as `serve --engine slurm`'s default.
const TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_secs(2);
/// `squeue` failures in a row before this process stops waiting; the array
/// runs on, and a rerun waits for it again.
const MAX_FAILURES: u32 = 10;
/// The array job's name, so a rerun finds its own array and no other.
const JOB_NAME: &str = "gpuplan-sweep";

/// One simulation of a sweep: where its finished result lives on disk.
pub(crate) struct SweepTask {
    pub(crate) path: PathBuf,
    pub(crate) workload: String,
    pub(crate) policy: String,
    pub(crate) seed: u64,
}

pub(crate) fn result_file(dir: &Path, t: &SweepTask) -> PathBuf {
    dir.join(&t.policy).join(&t.workload).join("result.json")
}

/// Submit the cells not in `done` (or wait for the array an earlier run
/// submitted, if it still runs) and return once each is in or the array
/// has ended. The caller reads the results back from `dir`.
pub fn run(
    partition: Option<&str>,
    dir: &Path,
    tasks: &[SweepTask],
    done: &BTreeMap<usize, SimResult>,
) -> Result<()> {
    let cells: Vec<usize> = (0..tasks.len()).filter(|i| !done.contains_key(i)).collect();
    if cells.is_empty() {
        eprintln!(
            "slurm: every cell is already in {}; nothing to submit",
            dir.display()
        );
        return Ok(());
    }
    let logs = dir.join("slurm");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    // Interrupting this process leaves the array running: a rerun waits for
    // it rather than submitting its cells a second time.
    let id_file = logs.join("array-job");
    let earlier = std::fs::read_to_string(&id_file)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(id) = earlier {
        if array_active(id).map_err(|e| anyhow!("{e}"))? {
            eprintln!("slurm: array job {id} of an earlier run still runs; waiting for it (squeue -j {id})");
            return wait(dir, tasks, &cells, id);
        }
    }
    let exe = std::env::current_exe().context("--slurm: cannot find this program's path")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let script = logs.join("cell.sh");
    std::fs::write(&script, cell_script(&exe, &argv)?)
        .with_context(|| format!("writing {}", script.display()))?;
    let id = submit(partition, &logs, &script, &cells)?;
    std::fs::write(&id_file, format!("{id}\n")).with_context(|| format!("writing {}", id_file.display()))?;
    eprintln!(
        "slurm: submitted array job {id} ({} cell{}: {}) to {}; follow it with `squeue -j {id}`; logs in {}",
        cells.len(),
        if cells.len() == 1 { "" } else { "s" },
        ranges(&cells),
        partition.map_or("sbatch's default partition".to_string(), |p| format!(
            "partition {p}"
        )),
        logs.join("cell-N.out").display()
    );
    wait(dir, tasks, &cells, id)
}

/// `sbatch` the array; its job id.
fn submit(partition: Option<&str>, logs: &Path, script: &Path, cells: &[usize]) -> Result<u64> {
    let utf8 = |p: &Path| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("--slurm: {} is not a UTF-8 path", p.display()))
    };
    let mut args = vec![
        "--parsable".to_string(),
        format!("--array={}", ranges(cells)),
        format!("--job-name={JOB_NAME}"),
        format!("--output={}", utf8(&logs.join("cell-%a.out"))?),
    ];
    if let Some(p) = partition {
        args.push(format!("--partition={p}"));
    }
    args.push(utf8(script)?);
    let out = run_timed("sbatch", &args, TIMEOUT).map_err(|e| anyhow!("slurm: {e}"))?;
    let id = out.trim().split(';').next().unwrap_or("");
    id.parse()
        .map_err(|_| anyhow!("slurm: sbatch printed {:?}, not a job id", out.trim()))
}

/// Poll until every one of `cells` has its result.json or the array has no
/// task pending or running.
fn wait(dir: &Path, tasks: &[SweepTask], cells: &[usize], id: u64) -> Result<()> {
    let mut failures = 0;
    let mut shown = None;
    loop {
        let arrived = cells
            .iter()
            .filter(|&&i| result_file(dir, &tasks[i]).exists())
            .count();
        if arrived == cells.len() {
            return Ok(());
        }
        if shown != Some(arrived) {
            eprintln!("slurm: {arrived} of {} submitted cells in", cells.len());
            shown = Some(arrived);
        }
        match array_active(id) {
            Ok(false) => return Ok(()),
            Ok(true) => failures = 0,
            Err(e) => {
                failures += 1;
                eprintln!("{e} (failure {failures} of {MAX_FAILURES} in a row)");
                if failures >= MAX_FAILURES {
                    bail!(
                        "{e}; stopped waiting, array job {id} may still run \
                         (squeue -j {id}): rerun the same command to wait for it again"
                    );
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Whether array job `id` has a task that is pending or running, in
/// whatever partition it went to. Errors start with `slurm:`.
fn array_active(id: u64) -> Result<bool, String> {
    let mut slurm = Slurm::new("");
    slurm.timeout = TIMEOUT;
    let jobs = slurm.all_jobs().map_err(|e| e.to_string())?;
    Ok(jobs
        .iter()
        .any(|j| j.array_job_id == Some(id) && j.name == JOB_NAME && !j.ended()))
}

/// The cells still without a result after the array ended, each with its
/// log and the log's last line (a failed cell's error); exit status 1.
pub fn report_missing(dir: &Path, tasks: &[SweepTask], done: &BTreeMap<usize, SimResult>) -> ExitCode {
    let missing: Vec<usize> = (0..tasks.len()).filter(|i| !done.contains_key(i)).collect();
    eprintln!(
        "error: {} of {} cells have no result in {} after the Slurm array ended:",
        missing.len(),
        tasks.len(),
        dir.display()
    );
    for i in missing {
        let t = &tasks[i];
        let log = dir.join("slurm").join(format!("cell-{i}.out"));
        let last = match std::fs::read_to_string(&log) {
            Ok(s) => s
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map_or(String::new(), |l| format!(": {}", l.trim())),
            Err(_) => " (not there: the task never started)".to_string(),
        };
        eprintln!(
            "  cell {i}: {} on {} (seed {}), log {}{last}",
            t.policy,
            t.workload,
            t.seed,
            log.display()
        );
    }
    eprintln!("rerun the same command to submit only the missing cells");
    ExitCode::from(1)
}

/// The array's batch script: this program with the submitter's arguments,
/// less `--slurm` and `--partition`, plus `--cell $SLURM_ARRAY_TASK_ID`.
fn cell_script(exe: &Path, argv: &[OsString]) -> Result<String> {
    let mut words = vec![sh_word(exe.as_os_str())?];
    words.extend(cell_args(argv)?);
    Ok(format!(
        "#!/bin/sh\n\
         # Written by `gpuplan sweep --slurm`: array task N runs cell N of the\n\
         # sweep, in the submitter's working directory (Slurm's default).\n\
         exec {} --cell \"$SLURM_ARRAY_TASK_ID\"\n",
        words.join(" ")
    ))
}

/// The sweep's arguments less the Slurm ones, each a quoted sh word.
fn cell_args(argv: &[OsString]) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--slurm") => {}
            Some("--partition") => {
                it.next();
            }
            Some(s) if s.starts_with("--partition=") => {}
            _ => words.push(sh_word(arg)?),
        }
    }
    Ok(words)
}

/// Single-quoted, so that sh neither splits nor expands it.
fn sh_word(s: &std::ffi::OsStr) -> Result<String> {
    let s = s
        .to_str()
        .ok_or_else(|| anyhow!("--slurm: argument {s:?} is not UTF-8, which the job script cannot carry"))?;
    Ok(format!("'{}'", s.replace('\'', r"'\''")))
}

/// Ascending indices as Slurm's array spec: `0-3,5,7-8`.
fn ranges(cells: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cells.len() {
        let mut j = i;
        while j + 1 < cells.len() && cells[j + 1] == cells[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cells[i].to_string()
        } else {
            format!("{}-{}", cells[i], cells[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_spec_compresses_runs() {
        assert_eq!(ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(ranges(&[4]), "4");
    }

    #[test]
    fn cells_get_the_sweeps_arguments_less_slurms_quoted_for_sh() {
        let argv: Vec<OsString> = [
            "sweep",
            "--slurm",
            "--workloads",
            "it's here/a b.csv",
            "--partition",
            "gpu",
            "--policies",
            "fifo",
            "--partition=x",
            "--out",
            "$HOME",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let words = cell_args(&argv).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf '%s\\n' {}", words.join(" "))])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "sweep\n--workloads\nit's here/a b.csv\n--policies\nfifo\n--out\n$HOME\n"
        );
        let script = cell_script(Path::new("/opt/gpu plan"), &argv).unwrap();
        assert!(
            script.ends_with("exec '/opt/gpu plan' 'sweep' '--workloads' 'it'\\''s here/a b.csv' '--policies' 'fifo' '--out' '$HOME' --cell \"$SLURM_ARRAY_TASK_ID\"\n"),
            "{script}"
        );
    }
}
