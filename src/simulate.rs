//! `gpuplan simulate`: one workload under one policy, with its estimates
//! (`--estimates`) and analysis (`--analysis`) on request.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_sim::{Control, Profiles, SimConfig, SimResult, WorkloadJob};
use serde::Serialize;

use crate::common::Format;
use crate::inputs::load_profiles;
use crate::sim_flags::{load_workload, run_one_dumping, SimOpts};
use crate::sim_out::{print_table, queue_cells, write_outputs};

#[derive(Args, Debug)]
pub struct SimulateArgs {
    #[arg(long)]
    pub workload: PathBuf,
    #[arg(long)]
    pub policy: String,
    #[command(flatten)]
    pub opts: SimOpts,
    /// Write jobs.csv, rounds.csv and SVG plots here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every round's input (the `gpuplan plan --input` format) here.
    #[arg(long)]
    pub dump_rounds: Option<PathBuf>,
    /// Write one JSON line per round here: each job's GPUs, nodes, batch
    /// size, goodput, progress and restarts, and the fitness of the chosen
    /// allocation (for `gpuplan compare-rounds`; docs/fidelity.md).
    #[arg(long)]
    pub round_log: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also report queueing delay, JCT per application and finish-time
    /// fairness (each job simulated again alone), as the browser explorer does.
    #[arg(long)]
    pub analysis: bool,
    #[command(flatten)]
    pub estimates: EstimateOpts,
}

/// `simulate --estimates`: each job's predicted start and finish at its
/// submission against its actual ones (docs/estimates.md).
#[derive(Args, Debug)]
pub struct EstimateOpts {
    /// Estimate each job's start and finish at its submission (the
    /// planner run forward from that round), then compare with what
    /// happened: estimates.csv and estimates.json in --out, and a summary.
    #[arg(long)]
    pub estimates: bool,
    /// What the estimate knows of each job's total work: declared (its true
    /// total) or history (predicted from the jobs finished so far).
    #[arg(long, value_enum, default_value = "declared", requires = "estimates")]
    pub estimate_work: EstimateWorkArg,
    /// Estimate every Nth submitted job (1: all), to bound the cost.
    #[arg(long, default_value_t = 1, requires = "estimates")]
    pub estimate_every: usize,
    /// Wall-clock seconds each estimate may take.
    #[arg(long, default_value_t = 5.0, requires = "estimates")]
    pub estimate_budget: f64,
    /// Skip the low/high runs (no ranges; a third of the cost with history).
    #[arg(long, requires = "estimates")]
    pub estimate_no_ranges: bool,
    /// How far the fitted models' rates may be off (fraction): the ranges'
    /// low run is that much faster, the high run slower.
    #[arg(long, default_value_t = 0.1, requires = "estimates")]
    pub estimate_spread: f64,
    /// After a simulated round that changes nothing, keep its plan up to
    /// this many rounds without planning, unless a job finishes (0: plan
    /// every round).
    #[arg(long, default_value_t = 0, requires = "estimates")]
    pub estimate_skip_steady: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EstimateWorkArg {
    Declared,
    History,
}

pub fn simulate(a: SimulateArgs) -> Result<ExitCode> {
    let mut cfg = a.opts.config_for(&a.policy)?;
    cfg.round_log = a.round_log.is_some();
    let profiles = load_profiles(a.opts.traces.clone())?;
    let jobs = load_workload(&a.workload, &a.opts, &profiles, &cfg.cluster)?;
    let r = if a.estimates.estimates {
        run_with_estimates(&a, &cfg, &profiles, &jobs)?
    } else {
        run_one_dumping(
            &cfg,
            &profiles,
            &a.workload,
            &jobs,
            &a.policy,
            a.dump_rounds.as_deref(),
        )?
    };
    if let Some(out) = &a.out {
        write_outputs(out, &r, &cfg)?;
    }
    if let Some(path) = &a.round_log {
        let mut text = String::new();
        for line in &r.round_log {
            text.push_str(&serde_json::to_string(line)?);
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let r = SimResult {
        round_log: Vec::new(),
        ..r
    };
    let analysis = if a.analysis {
        let isolated = gpuplan_sim::isolated_jcts(&cfg, &profiles, &jobs, &mut |_| Control::Continue)?;
        let an = gpuplan_sim::analyse(&r).with_fairness(&r, &isolated);
        if let Some(out) = &a.out {
            std::fs::write(out.join("analysis.json"), serde_json::to_string_pretty(&an)?)?;
        }
        Some(an)
    } else {
        None
    };
    match a.format {
        Format::Json => {
            /// The summary's keys, plus `analysis` with --analysis.
            #[derive(Serialize)]
            struct Out<'a> {
                #[serde(flatten)]
                summary: &'a gpuplan_sim::Summary,
                #[serde(skip_serializing_if = "Option::is_none")]
                analysis: Option<&'a gpuplan_sim::Analysis>,
                /// Per queue, with --queues.
                #[serde(skip_serializing_if = "<[_]>::is_empty")]
                queues: &'a [gpuplan_sim::QueueSummary],
            }
            let out = Out {
                summary: &r.summary,
                analysis: analysis.as_ref(),
                queues: &r.queues,
            };
            println!("{}", serde_json::to_string_pretty(&out)?)
        }
        Format::Table => {
            print_table(&[&r.summary]);
            if let Some(an) = &analysis {
                print_analysis(an);
            }
            print_queues(&r.queues);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `simulate --estimates`: the run with each sampled job's estimate at
/// its submission; writes estimates.csv and estimates.json to --out and
/// prints the calibration summary on stderr.
fn run_with_estimates(
    a: &SimulateArgs,
    cfg: &SimConfig,
    profiles: &Profiles,
    jobs: &[WorkloadJob],
) -> Result<SimResult> {
    let e = &a.estimates;
    if a.dump_rounds.is_some() {
        bail!("--estimates: not with --dump-rounds");
    }
    if e.estimate_every == 0 {
        bail!("--estimate-every: must be >= 1");
    }
    if e.estimate_budget.is_nan() || e.estimate_budget <= 0.0 {
        bail!("--estimate-budget: must be > 0, got {}", e.estimate_budget);
    }
    let calib = gpuplan_sim::CalibrationConfig {
        work: match e.estimate_work {
            EstimateWorkArg::Declared => gpuplan_sim::KnownWork::Declared,
            EstimateWorkArg::History => gpuplan_sim::KnownWork::History,
        },
        every: e.estimate_every,
        budget_s: e.estimate_budget,
        ranges: !e.estimate_no_ranges,
        rate_spread: e.estimate_spread,
        skip_steady_rounds: e.estimate_skip_steady,
    };
    let (mut r, records, summary) =
        gpuplan_sim::simulate_with_estimates(cfg, profiles, jobs, &a.policy, &calib).with_context(|| {
            format!(
                "simulating {} under {} with estimates",
                a.workload.display(),
                a.policy
            )
        })?;
    r.summary.workload = gpuplan_sim::files::workload_name(&a.workload);
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("estimates.csv"), gpuplan_sim::records_csv(&records)?)?;
        std::fs::write(
            out.join("estimates.json"),
            serde_json::to_string_pretty(&summary)?,
        )?;
    }
    let h = |x: f64| x / 3600.0;
    eprintln!(
        "estimates ({:?}, {} of {} jobs, {} cut short): start error p50 {:.0} s p90 {:.0} s (mean wait {:.0} s, p50/mean wait {:.3}); finish error p50 {:.0} s p90 {:.0} s ({:.2} h / {:.2} h); finishes in range {:.0}%; {:.2} s per estimate, {:.0} s in all",
        summary.work,
        summary.estimated,
        jobs.len(),
        summary.cut_short,
        summary.start_err_p50_s,
        summary.start_err_p90_s,
        summary.wait_mean_s,
        summary.start_err_over_wait,
        summary.finish_err_p50_s,
        summary.finish_err_p90_s,
        h(summary.finish_err_p50_s),
        h(summary.finish_err_p90_s),
        100.0 * summary.finish_in_range,
        summary.wall_p50_s,
        summary.wall_total_s
    );
    Ok(r)
}

/// The per-queue figures of a run with --queues (docs/tenants.md).
fn print_queues(qs: &[gpuplan_sim::QueueSummary]) {
    if qs.is_empty() {
        return;
    }
    println!(
        "\n{:<16} {:>5} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "queue", "jobs", "avg_jct_h", "p99_jct_h", "gpu_hours", "borrowed_h", "shortfall_h"
    );
    for q in qs {
        let [jobs, avg, p99, gpu_h, borrowed, short] = queue_cells(q);
        println!(
            "{:<16} {jobs:>5} {avg:>10} {p99:>10} {gpu_h:>10} {borrowed:>12} {short:>12}",
            q.queue
        );
    }
}

fn print_analysis(an: &gpuplan_sim::Analysis) {
    let h = |s: f64| s / 3600.0;
    let q = &an.queueing_delay_s;
    println!(
        "\nqueueing delay (start - submit): mean {:.3} h, p50 {:.3} h, p99 {:.3} h",
        h(q.mean),
        h(q.p50),
        h(q.p99)
    );
    if let Some(f) = &an.fairness {
        println!(
            "finish-time fairness rho = JCT / isolated JCT: mean {:.3}, p50 {:.3}, p99 {:.3}, max {:.3}; {} job(s) with rho > 1",
            f.rho.mean, f.rho.p50, f.rho.p99, f.rho.max, f.unfair_jobs
        );
        println!("  isolated JCT: {}", f.isolated);
    }
    for j in &an.left_out {
        println!("  left out of fairness: {} ({})", j.name, j.reason);
    }
    println!(
        "\n{:<14} {:>5} {:>10} {:>10} {:>10}",
        "application", "jobs", "mean_jct_h", "p50_jct_h", "p99_jct_h"
    );
    for a in &an.per_app {
        println!(
            "{:<14} {:>5} {:>10.3} {:>10.3} {:>10.3}",
            a.app,
            a.jobs,
            h(a.jct_s.mean),
            h(a.jct_s.p50),
            h(a.jct_s.p99)
        );
    }
}
