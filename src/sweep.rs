//! `gpuplan sweep`: every (workload, policy, seed) cell, in parallel here or
//! as a Slurm array job (`--slurm`, each task one `--cell`), resumed from
//! the cells already in `--out`; then the summary, sweep.json and report.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_sim::{Profiles, SimConfig, SimResult, WorkloadJob};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;

use crate::common::Format;
use crate::inputs::load_profiles;
use crate::sim_flags::{load_workload, run_one_dumping, SimOpts};
use crate::sim_out::{print_table, write_outputs};
use crate::sweep_report::{write_report, PolicyAgg, SweepOut};
use crate::sweep_slurm::{result_file, SweepTask};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Workload files or folders of them.
    #[arg(long, num_args = 1.., required = true)]
    pub workloads: Vec<PathBuf>,
    /// Comma-separated policy names.
    #[arg(long, value_delimiter = ',', required = true)]
    pub policies: Vec<String>,
    /// Comma-separated seeds to sweep over (default: --seed alone).
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<u64>,
    #[command(flatten)]
    pub opts: SimOpts,
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Run each (workload, policy, seed) cell as a task of one Slurm array
    /// job, then write the summary here once every cell is in. Needs --out
    /// on a file system the nodes share; a rerun submits only missing cells.
    #[arg(long, conflicts_with = "cell")]
    pub slurm: bool,
    /// The Slurm partition of the array job (default: sbatch's, i.e. SBATCH_PARTITION or Slurm's default).
    #[arg(long, requires = "slurm")]
    pub partition: Option<String>,
    /// Run only this cell (an index into the sweep's task order) and write
    /// its result.json: what each Slurm array task runs.
    #[arg(long, hide = true)]
    pub cell: Option<usize>,
}

/// Written next to the results, so a resumed sweep cannot mix settings.
#[derive(Serialize, serde::Deserialize, PartialEq)]
struct SweepSettings {
    config: SimConfig,
    duration_jobs: String,
}

/// What a sweep runs, checked. `tasks` is in one fixed order (policy, then
/// workload, then seed), so that `--cell N` names the same simulation in
/// every process of a Slurm sweep.
struct SweepPlan {
    cfg: SimConfig,
    opts: SimOpts,
    profiles: Profiles,
    workloads: Vec<PathBuf>,
    seeds: Vec<u64>,
    tasks: Vec<SweepTask>,
}

fn sweep_plan(a: &SweepArgs) -> Result<SweepPlan> {
    let cfg = a.opts.config()?;
    // Each policy's run checked as it will run: its own params, and the
    // policy able to honour them (`SimScenario::config_for`).
    for p in &a.policies {
        a.opts.config_for(p)?;
    }
    let profiles = load_profiles(a.opts.traces.clone())?;
    let workloads = expand_workloads(&a.workloads)?;
    if workloads.is_empty() {
        bail!("no workload files found in {:?}", a.workloads);
    }
    let seeds = if a.seeds.is_empty() {
        vec![a.opts.seed]
    } else {
        a.seeds.clone()
    };
    let mut tasks = Vec::new();
    for p in &a.policies {
        for w in &workloads {
            for &seed in &seeds {
                let name = gpuplan_sim::files::workload_name(w);
                tasks.push(SweepTask {
                    path: w.clone(),
                    workload: if seeds.len() > 1 {
                        format!("{name}-seed{seed}")
                    } else {
                        name
                    },
                    policy: p.clone(),
                    seed,
                });
            }
        }
    }
    Ok(SweepPlan {
        cfg,
        opts: a.opts.clone(),
        profiles,
        workloads,
        seeds,
        tasks,
    })
}

/// A workload's jobs as the task's seed draws them.
fn load_task_workload(a: &SweepArgs, plan: &SweepPlan, path: &Path, seed: u64) -> Result<Vec<WorkloadJob>> {
    let opts = SimOpts {
        seed,
        ..a.opts.clone()
    };
    load_workload(path, &opts, &plan.profiles, &plan.cfg.cluster)
}

/// Create the output folder and write sweep-settings.json, or check that
/// the one there holds these settings.
fn open_sweep_dir(dir: &Path, a: &SweepArgs, cfg: &SimConfig) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let settings = SweepSettings {
        config: cfg.clone(),
        duration_jobs: format!("{:?}", a.opts.duration_jobs),
    };
    let file = dir.join("sweep-settings.json");
    if file.exists() {
        let old: SweepSettings = serde_json::from_slice(&std::fs::read(&file)?)
            .with_context(|| format!("{}: unreadable", file.display()))?;
        if old != settings {
            bail!(
                "{} holds a sweep with other settings (cluster, interval, seed, ...); use another --out",
                dir.display()
            );
        }
    } else {
        std::fs::write(&file, serde_json::to_string_pretty(&settings)?)?;
    }
    Ok(())
}

/// The results already in the output folder, by task index.
fn finished_tasks(dir: &Path, tasks: &[SweepTask]) -> Result<BTreeMap<usize, SimResult>> {
    let mut done = BTreeMap::new();
    for (i, t) in tasks.iter().enumerate() {
        let f = result_file(dir, t);
        if let Ok(bytes) = std::fs::read(&f) {
            let r: SimResult =
                serde_json::from_slice(&bytes).with_context(|| format!("{}: unreadable", f.display()))?;
            done.insert(i, r);
        }
    }
    Ok(done)
}

/// Run one task; with `out`, also save its result.json. Written through a
/// temporary file and a rename, so an interruption never leaves a half
/// result for a resumed sweep to read; the temporary name carries the pid
/// because two processes may run the same cell (a Slurm task requeued
/// while its first run still ends).
fn run_task(plan: &SweepPlan, t: &SweepTask, jobs: &[WorkloadJob], out: Option<&Path>) -> Result<SimResult> {
    let cfg = SimConfig {
        seed: t.seed,
        params: plan.opts.params_for(&t.policy)?,
        ..plan.cfg.clone()
    };
    let mut r = run_one_dumping(&cfg, &plan.profiles, &t.path, jobs, &t.policy, None)?;
    r.summary.workload = t.workload.clone();
    if let Some(dir) = out {
        let f = result_file(dir, t);
        let parent = f.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let tmp = parent.join(format!("result.json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec(&r)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &f).with_context(|| format!("writing {}", f.display()))?;
    }
    Ok(r)
}

pub fn sweep(a: SweepArgs) -> Result<ExitCode> {
    if a.slurm && a.out.is_none() {
        bail!("--slurm needs --out DIR: each Slurm task writes its cell there (on a file system the nodes share)");
    }
    let plan = sweep_plan(&a)?;
    if let Some(i) = a.cell {
        return sweep_cell(&a, &plan, i);
    }
    // Parse everything first, so bad input fails before hours of simulation.
    let mut loaded = BTreeMap::new();
    for w in &plan.workloads {
        for &seed in &plan.seeds {
            loaded.insert((w.clone(), seed), load_task_workload(&a, &plan, w, seed)?);
        }
    }
    let tasks = &plan.tasks;
    // Resume: results already in the output folder are read, not re-run.
    let mut done: BTreeMap<usize, SimResult> = BTreeMap::new();
    if let Some(dir) = &a.out {
        open_sweep_dir(dir, &a, &plan.cfg)?;
        done = finished_tasks(dir, tasks)?;
        if !done.is_empty() {
            eprintln!(
                "resuming: {} of {} simulations already in {}",
                done.len(),
                tasks.len(),
                dir.display()
            );
        }
        if a.slurm {
            crate::sweep_slurm::run(a.partition.as_deref(), dir, tasks, &done)?;
            done = finished_tasks(dir, tasks)?;
            if done.len() < tasks.len() {
                return Ok(crate::sweep_slurm::report_missing(dir, tasks, &done));
            }
            return sweep_summary(&a, &plan.cfg, done);
        }
    }
    let bar = ProgressBar::new(tasks.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} simulations  {elapsed_precise} {msg}",
    )?);
    bar.inc(done.len() as u64);
    let todo: Vec<usize> = (0..tasks.len()).filter(|i| !done.contains_key(i)).collect();
    let fresh: Vec<(usize, Result<SimResult>)> = todo
        .par_iter()
        .map(|&i| {
            let t = &tasks[i];
            let jobs = &loaded[&(t.path.clone(), t.seed)];
            let r = run_task(&plan, t, jobs, a.out.as_deref());
            bar.inc(1);
            (i, r)
        })
        .collect();
    bar.finish_and_clear();
    for (i, r) in fresh {
        done.insert(i, r?);
    }
    sweep_summary(&a, &plan.cfg, done)
}

/// `--cell INDEX`: one Slurm array task. Runs that task of the sweep and
/// writes its result.json, nothing else; the submitting process writes
/// the summary once every cell is in.
fn sweep_cell(a: &SweepArgs, plan: &SweepPlan, i: usize) -> Result<ExitCode> {
    let Some(dir) = &a.out else {
        bail!("--cell needs --out DIR");
    };
    let Some(t) = plan.tasks.get(i) else {
        bail!(
            "--cell {i}: the sweep has {} cells (0 to {})",
            plan.tasks.len(),
            plan.tasks.len().saturating_sub(1)
        );
    };
    open_sweep_dir(dir, a, &plan.cfg)?;
    let f = result_file(dir, t);
    if f.exists() {
        eprintln!("cell {i}: {} is already there", f.display());
        return Ok(ExitCode::SUCCESS);
    }
    let jobs = load_task_workload(a, plan, &t.path, t.seed)?;
    let r = run_task(plan, t, &jobs, Some(dir))?;
    eprintln!(
        "cell {i}: {} on {} (seed {}): avg JCT {:.3} h, {:.1} s, written to {}",
        t.policy,
        t.workload,
        t.seed,
        r.summary.avg_jct_s / 3600.0,
        r.summary.wall_s,
        f.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Per-cell outputs, sweep.json and report.md from every cell's result
/// (in task order), and the printed summary.
fn sweep_summary(a: &SweepArgs, cfg: &SimConfig, done: BTreeMap<usize, SimResult>) -> Result<ExitCode> {
    let results: Vec<SimResult> = done.into_values().collect();
    let mut out = SweepOut {
        policies: BTreeMap::new(),
    };
    for r in &results {
        if let Some(dir) = &a.out {
            write_outputs(&dir.join(&r.summary.policy).join(&r.summary.workload), r, cfg)?;
        }
        let agg = out
            .policies
            .entry(r.summary.policy.clone())
            .or_insert_with(|| PolicyAgg {
                avg_jct_s: 0.0,
                per_workload: BTreeMap::new(),
            });
        agg.per_workload
            .insert(r.summary.workload.clone(), r.summary.clone());
    }
    for agg in out.policies.values_mut() {
        agg.avg_jct_s =
            agg.per_workload.values().map(|s| s.avg_jct_s).sum::<f64>() / agg.per_workload.len() as f64;
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("sweep.json"), serde_json::to_string_pretty(&out)?)?;
        write_report(dir, &results, &out, cfg)?;
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => {
            let rows: Vec<&gpuplan_sim::Summary> = out
                .policies
                .values()
                .flat_map(|a| a.per_workload.values())
                .collect();
            print_table(&rows);
            println!();
            println!("{:<16} {:>14}", "policy", "mean avg_jct_h");
            for (p, agg) in &out.policies {
                println!("{:<16} {:>14.3}", p, agg.avg_jct_s / 3600.0);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn expand_workloads(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("{}: cannot list", p.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "csv" || e == "trace"))
                .collect();
            v.sort_by_key(|p| natural_key(p));
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Sort `workload-10` after `workload-9`.
fn natural_key(p: &Path) -> (String, u64) {
    let s = gpuplan_sim::files::workload_name(p);
    let digits: String = s
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .chars()
        .rev()
        .collect();
    (
        s[..s.len() - digits.len()].to_string(),
        digits.parse().unwrap_or(0),
    )
}
