//! A simulation whose inputs a user names as files: `gpuplan simulate` and
//! the Python package's `simulate` read the cluster, the workload and
//! Gavel's table here and run through [`simulate_named`], so both give the
//! same summary for the same inputs.
//!
//! The parsers underneath take bytes and a source name (`trace`,
//! `colocation`); this module is the one place that opens the files.

use std::path::{Path, PathBuf};

use gpuplan_core::{Cluster, Plan, Round};

use crate::colocation::{parse_gavel, GavelTable};
use crate::engine::{simulate_workload, Control, SimConfig};
use crate::trace::workload::{to_workload, DurationJobs};
use crate::trace::{self, alibaba, cluster_file, gavel, BadRows, Format, Trace};
use crate::workload::WorkloadJob;
use crate::{Profiles, SimError, SimResult};

/// Gavel's throughput table, bundled so Gavel traces load from anywhere.
pub const GAVEL_THROUGHPUTS: &[u8] = include_bytes!("../../../traces/gavel/simulation_throughputs.json");

/// The source name of the bundled [`GAVEL_THROUGHPUTS`] in errors.
const GAVEL_NAME: &str = "simulation_throughputs.json";

fn read(path: &Path) -> Result<Vec<u8>, SimError> {
    std::fs::read(path).map_err(|e| SimError::Invalid(format!("{}: cannot read: {e}", path.display())))
}

/// Gavel's per-type throughputs (a Gavel trace's durations): the file at
/// `path`, else the bundled table.
pub fn gavel_throughputs(path: Option<&Path>) -> Result<gavel::Throughputs, SimError> {
    Ok(match path {
        Some(p) => gavel::Throughputs::parse(&p.display().to_string(), &read(p)?)?,
        None => gavel::Throughputs::parse(GAVEL_NAME, GAVEL_THROUGHPUTS)?,
    })
}

/// Gavel's co-location table (the ground truth of shared GPUs): the file at
/// `path`, else the bundled table.
pub fn gavel_table(path: Option<&Path>) -> Result<GavelTable, SimError> {
    match path {
        Some(p) => parse_gavel(&p.display().to_string(), read(p)?.as_slice()),
        None => parse_gavel(GAVEL_NAME, GAVEL_THROUGHPUTS),
    }
}

/// How to read a workload file (the CLI's trace flags).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLoad {
    /// The trace format; `None`: detected from the first line.
    pub format: Option<Format>,
    /// Fail on a bad row, or skip and count it.
    pub bad_rows: BadRows,
    /// GPU type whose Gavel throughput turns a job's steps into a duration.
    pub gavel_gpu_type: String,
    /// Gavel's throughput table; `None`: the bundled one.
    pub gavel_throughputs: Option<PathBuf>,
}

impl Default for TraceLoad {
    fn default() -> Self {
        TraceLoad {
            format: None,
            bad_rows: BadRows::Fail,
            gavel_gpu_type: gavel::DEFAULT_GPU_TYPE.to_string(),
            gavel_throughputs: None,
        }
    }
}

/// A trace file of any supported format. Skipped rows are counted in the
/// trace ([`Trace::skipped_rows`]); warning about them is the caller's.
pub fn load_trace(path: &Path, opts: &TraceLoad) -> Result<Trace, SimError> {
    let bytes = read(path)?;
    let source = path.display().to_string();
    let format = opts.format.or_else(|| trace::detect(&bytes));
    let tputs = if format == Some(Format::Gavel) {
        Some(gavel_throughputs(opts.gavel_throughputs.as_deref())?)
    } else {
        None
    };
    let load = trace::LoadOptions {
        bad_rows: opts.bad_rows,
        gavel_throughputs: tputs.as_ref(),
        gavel_gpu_type: Some(&opts.gavel_gpu_type),
    };
    Ok(trace::load_auto(format, &source, &bytes, &load)?)
}

/// Simulator jobs from a trace: rigid or Pollux-mapped duration jobs
/// (`treatment`), drawn by `seed` where the mapping draws.
pub fn workload_jobs(
    trace: &Trace,
    treatment: DurationJobs,
    profiles: &Profiles,
    seed: u64,
) -> Result<Vec<WorkloadJob>, SimError> {
    Ok(to_workload(trace, treatment, profiles, seed)?)
}

/// A cluster as a user names it: a shape `NxG[:type]`, a cluster file
/// (`name,gpus,gpu_type[,count]`) or an Alibaba PAI machine spec.
pub fn load_cluster(arg: &str) -> Result<Cluster, SimError> {
    let path = Path::new(arg);
    if path.is_file() {
        let bytes = read(path)?;
        let first = String::from_utf8_lossy(&bytes[..bytes.len().min(256)])
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        if first.starts_with("name,") {
            return Ok(cluster_file::parse(arg, &bytes)?);
        }
        let (c, _cpu_only) = alibaba::parse(arg, &bytes)?;
        return Ok(c);
    }
    match arg.parse::<Cluster>() {
        Ok(c) => Ok(c),
        Err(e) if arg.contains('/') || arg.ends_with(".csv") => Err(SimError::Invalid(format!(
            "--cluster {arg}: no such file (and not a NODESxGPUS shape: {e})"
        ))),
        Err(e) => Err(SimError::Invalid(format!("--cluster: {e}"))),
    }
}

/// The workload's name in a summary: its file's stem (`workload-6`).
pub fn workload_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// Run `jobs` (read from `path`) under `policy` with `cfg` (its params
/// already the policy's: [`crate::SimScenario::params_for`]): a fresh
/// planner from the registry, the one round loop, and the summary named
/// after the workload file. `observer` sees every round and its plan.
pub fn simulate_named(
    cfg: &SimConfig,
    profiles: &Profiles,
    path: &Path,
    jobs: &[WorkloadJob],
    policy: &str,
    observer: &mut dyn FnMut(&Round, &Plan) -> Control,
) -> Result<SimResult, SimError> {
    let mut planner = gpuplan_solve::registry::create(policy)?;
    let mut r = simulate_workload(cfg, profiles, jobs, planner.as_mut(), observer)?;
    r.summary.workload = workload_name(path);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_by_shape_and_file() {
        assert_eq!(load_cluster("2x4").unwrap().total_gpus(), 8);
        let file = format!(
            "{}/../../traces/clusters/pollux-16x4.csv",
            env!("CARGO_MANIFEST_DIR")
        );
        assert_eq!(load_cluster(&file).unwrap().total_gpus(), 64);
        let e = load_cluster("nope/x.csv").unwrap_err().to_string();
        assert!(e.contains("no such file"), "{e}");
    }

    #[test]
    fn bundled_gavel_table_parses() {
        gavel_throughputs(None).unwrap();
        gavel_table(None).unwrap();
        assert_eq!(workload_name(Path::new("a/workload-6.csv")), "workload-6");
    }
}
