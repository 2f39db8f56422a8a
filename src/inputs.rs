//! Reading the files commands share: application profiles, queues files,
//! traces and workloads, clusters. Below every command, importing none.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use gpuplan_core::Cluster;
use gpuplan_sim::files::{load_trace, workload_jobs, TraceLoad};
use gpuplan_sim::trace::workload::DurationJobs;
use gpuplan_sim::trace::{gavel, BadRows, Format as TraceFormat, Trace};
use gpuplan_sim::{load_profiles_dir, pollux_profiles, Profiles, WorkloadJob};

/// The application profiles: `--traces DIR`, else the bundled ones.
pub fn load_profiles(traces: Option<PathBuf>) -> Result<Profiles> {
    match traces {
        Some(dir) => {
            load_profiles_dir(&dir).with_context(|| format!("loading profiles from {}", dir.display()))
        }
        None => Ok(pollux_profiles().context("parsing the bundled profiles")?),
    }
}

/// A queues file (`--queues FILE` of simulate, sweep and serve), every
/// problem named `FILE:LINE:FIELD`.
pub(crate) fn read_queues(path: &std::path::Path) -> Result<Vec<gpuplan_core::queue::Queue>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--queues {}: cannot read: {e}", path.display()))?;
    gpuplan_core::queue::parse_queues_toml(&text, &path.display().to_string())
        .map_err(|es| anyhow::anyhow!("{}", es.join("\n")))
}

fn parse_trace_format(s: &str) -> Result<TraceFormat, String> {
    TraceFormat::from_name(s).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurationJobsArg {
    Rigid,
    Pollux,
}

/// How to read a trace (shared by `trace`, `simulate` and `sweep`).
#[derive(Args, Debug, Clone, Default)]
pub struct TraceOpts {
    /// Trace format; detected from the first line when not given.
    #[arg(long = "trace-format", value_parser = parse_trace_format)]
    pub trace_format: Option<TraceFormat>,
    /// Skip and count malformed rows instead of failing.
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// GPU type whose Gavel throughput turns a job's steps into a duration.
    #[arg(long, default_value = gavel::DEFAULT_GPU_TYPE)]
    pub gavel_gpu_type: String,
    /// Gavel throughput table (default: the bundled simulation_throughputs.json).
    #[arg(long)]
    pub gavel_throughputs: Option<PathBuf>,
}

impl TraceOpts {
    /// The flags as the simulator's file loader reads them.
    pub fn trace_load(&self) -> TraceLoad {
        TraceLoad {
            format: self.trace_format,
            bad_rows: if self.skip_bad_rows {
                BadRows::Skip
            } else {
                BadRows::Fail
            },
            gavel_gpu_type: self.gavel_gpu_type.clone(),
            gavel_throughputs: self.gavel_throughputs.clone(),
        }
    }

    pub fn load(&self, path: &Path) -> Result<Trace> {
        let t = load_trace(path, &self.trace_load())?;
        if t.skipped_rows > 0 {
            eprintln!(
                "warning: {}: skipped {} bad row(s); first: {}",
                path.display(),
                t.skipped_rows,
                t.problems.first().map(|p| p.to_string()).unwrap_or_default()
            );
        }
        Ok(t)
    }
}

/// Simulator jobs from a workload file of any supported format.
pub fn load_workload(
    path: &Path,
    opts: &TraceOpts,
    treatment: DurationJobsArg,
    seed: u64,
    profiles: &Profiles,
) -> Result<Vec<WorkloadJob>> {
    let t = opts.load(path)?;
    let treatment = match treatment {
        DurationJobsArg::Rigid => DurationJobs::Rigid,
        DurationJobsArg::Pollux => DurationJobs::Pollux,
    };
    workload_jobs(&t, treatment, profiles, seed).with_context(|| format!("{}", path.display()))
}

/// `--cluster`: a shape `NxG[:type]`, a cluster file (`name,gpus,gpu_type[,count]`)
/// or an Alibaba PAI machine spec ([`gpuplan_sim::files::load_cluster`]).
pub fn load_cluster(arg: &str) -> Result<Cluster> {
    Ok(gpuplan_sim::files::load_cluster(arg)?)
}
