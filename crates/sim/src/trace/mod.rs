//! Public GPU-cluster traces, read into one native workload format.
//!
//! Users bring traces, not hand-made job lists. Each format has its own
//! module; all of them produce a [`Trace`] of [`TraceJob`]s, the rows of the
//! native format (`docs/workload-format.md`, written by [`native::write`]).
//! Every row is validated; every bad cell is reported as `file:line:field`.
//! With [`BadRows::Skip`] bad rows are dropped and counted instead.
//! Nothing is coerced: an unknown model name is an error, never a default.
//!
//! Parsers take bytes plus a source name, never a path, so the browser and
//! the fuzzers can call them too.

pub mod alibaba;
pub mod cluster_file;
pub mod gavel;
// Kueue's YAML manifests (native only: its YAML parser stays out of the browser).
#[cfg(not(target_arch = "wasm32"))]
pub mod kueue;
pub mod native;
mod pal;
mod philly;
mod pollux;
mod shockwave;
pub mod slurm;
mod tiresias;
mod util;
pub mod workload;

use std::collections::BTreeMap;

use gpuplan_core::{CoreError, ParseError};
use serde::{Deserialize, Serialize};

pub use util::parse_datetime_s;

/// One job of a trace, in the native format's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceJob {
    /// Unique within the trace: it keys the job in outputs.
    pub name: String,
    /// Seconds from the start of the trace.
    pub submit_s: f64,
    /// GPUs the job asked for (and ran on, in the trace).
    pub gpus: u32,
    /// A bundled application profile (`cifar10`, ...); set for jobs the
    /// simulator can run from measured profiles.
    pub app: Option<String>,
    /// Total batch size; set exactly when `app` is.
    pub batch_size: Option<u32>,
    /// Run time on `gpus` GPUs, for traces that give one.
    pub duration_s: Option<f64>,
    /// The trace's own model name (informational; never mapped to a default).
    pub model: Option<String>,
    /// Virtual cluster or user group, where the trace has one.
    pub group: Option<String>,
    /// Seconds of run time between the job's checkpoints, where the
    /// workload gives them (the native format's optional column).
    pub checkpoint_interval_s: Option<f64>,
}

impl TraceJob {
    /// GPU-seconds this job needs, when the trace gives a duration.
    pub fn gpu_s(&self) -> Option<f64> {
        self.duration_s.map(|d| d * self.gpus as f64)
    }
}

/// The formats gpuplan reads. The kebab-case name is the CLI's `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// gpuplan's native workload CSV (`docs/workload-format.md`).
    Gpuplan,
    /// Pollux artifact workload CSV: `name,time,application,num_replicas,batch_size`.
    Pollux,
    /// Pollux's Philly-derived `philly.csv`: `timestamp,duration,num_gpus,gpu_time,cluster`.
    Philly,
    /// Tiresias simulator job CSV: `job_id,num_gpu,submit_time,...,model_name,duration`.
    Tiresias,
    /// Gavel `.trace` (TAB-separated, 7 or 10 fields).
    Gavel,
    /// Shockwave `.trace` (TAB-separated, 12 fields).
    Shockwave,
    /// PAL / Sia-Philly `workload-*.csv`: `job_id,num_gpus,submit_time,duration,model`.
    Pal,
}

impl Format {
    /// Every format, in the order error messages list them.
    pub const ALL: [Format; 7] = [
        Format::Gpuplan,
        Format::Pollux,
        Format::Philly,
        Format::Tiresias,
        Format::Gavel,
        Format::Shockwave,
        Format::Pal,
    ];

    /// The CLI's `--format` value (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Format::Gpuplan => "gpuplan",
            Format::Pollux => "pollux",
            Format::Philly => "philly",
            Format::Tiresias => "tiresias",
            Format::Gavel => "gavel",
            Format::Shockwave => "shockwave",
            Format::Pal => "pal",
        }
    }

    /// The format named `s`; the error lists the valid names.
    pub fn from_name(s: &str) -> Result<Format, CoreError> {
        Format::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            CoreError::Invalid(format!(
                "unknown trace format '{s}'; valid: {}",
                Format::ALL.map(Format::name).join(", ")
            ))
        })
    }
}

/// What to do with a row that fails validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BadRows {
    /// Fail, reporting every bad row.
    #[default]
    Fail,
    /// Drop bad rows, keep their errors in [`Trace::problems`].
    Skip,
}

/// Options of [`load`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions<'a> {
    /// Fail on a bad row (the default) or skip it.
    pub bad_rows: BadRows,
    /// Gavel's `simulation_throughputs.json`, needed for Gavel traces.
    pub gavel_throughputs: Option<&'a gavel::Throughputs>,
    /// GPU type whose Gavel throughput turns steps into a duration.
    pub gavel_gpu_type: Option<&'a str>,
}

/// A loaded trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The format it was read as.
    pub format: Format,
    /// Sorted by submission time (stable: ties keep file order).
    pub jobs: Vec<TraceJob>,
    /// Errors of the rows skipped under [`BadRows::Skip`].
    pub problems: Vec<ParseError>,
    /// Rows dropped under [`BadRows::Skip`].
    pub skipped_rows: usize,
}

/// Guess the format from the first line (header or first record).
pub fn detect(bytes: &[u8]) -> Option<Format> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim_end_matches('\r');
    if first.contains('\t') {
        return match first.split('\t').count() {
            7 | 10 => Some(Format::Gavel),
            12 => Some(Format::Shockwave),
            _ => None,
        };
    }
    let cols: Vec<&str> = first.split(',').map(str::trim).collect();
    let has = |c: &str| cols.contains(&c);
    if has("submit_s") && has("gpus") {
        Some(Format::Gpuplan)
    } else if has("application") && has("num_replicas") {
        Some(Format::Pollux)
    } else if has("timestamp") && has("gpu_time") {
        Some(Format::Philly)
    } else if has("num_gpu") && has("model_name") {
        Some(Format::Tiresias)
    } else if has("num_gpus") && has("model") && has("submit_time") {
        Some(Format::Pal)
    } else {
        None
    }
}

/// Read a trace of a known format.
pub fn load(format: Format, source: &str, bytes: &[u8], opts: &LoadOptions) -> Result<Trace, CoreError> {
    let rows = match format {
        Format::Gpuplan => native::parse(source, bytes)?,
        Format::Pollux => pollux::parse(source, bytes)?,
        Format::Philly => philly::parse(source, bytes)?,
        Format::Tiresias => tiresias::parse(source, bytes)?,
        Format::Gavel => {
            let t = opts.gavel_throughputs.ok_or_else(|| {
                CoreError::Invalid(format!(
                    "{source}: Gavel traces need the throughput table (simulation_throughputs.json)"
                ))
            })?;
            gavel::parse(
                source,
                bytes,
                t,
                opts.gavel_gpu_type.unwrap_or(gavel::DEFAULT_GPU_TYPE),
            )?
        }
        Format::Shockwave => shockwave::parse(source, bytes)?,
        Format::Pal => pal::parse(source, bytes)?,
    };
    finish(format, rows, opts.bad_rows)
}

/// Detect the format (or take the given one) and read the trace.
pub fn load_auto(
    format: Option<Format>,
    source: &str,
    bytes: &[u8],
    opts: &LoadOptions,
) -> Result<Trace, CoreError> {
    let format = match format {
        Some(f) => f,
        None => detect(bytes).ok_or_else(|| {
            CoreError::Parse(vec![ParseError::new(
                source,
                1,
                "header",
                format!(
                    "cannot tell the trace format from the first line; pass --trace-format (one of {})",
                    Format::ALL.map(Format::name).join(", ")
                ),
            )])
        })?,
    };
    load(format, source, bytes, opts)
}

/// What every per-format parser returns: good rows plus every row error.
#[derive(Debug, Default)]
pub struct Rows {
    /// The rows that passed, in file order.
    pub jobs: Vec<TraceJob>,
    /// Every problem found, each naming file, line and field.
    pub errors: Vec<ParseError>,
    /// Rows that had at least one error.
    pub bad_rows: usize,
    /// Line of each job name kept so far: names key a simulation's output
    /// (`jobs.csv`) and the daemon's jobs, so a second row of one name is a
    /// row error, never a second job.
    pub names: std::collections::HashMap<String, u64>,
}

fn finish(format: Format, rows: Rows, bad: BadRows) -> Result<Trace, CoreError> {
    if !rows.errors.is_empty() && bad == BadRows::Fail {
        return Err(CoreError::Parse(rows.errors));
    }
    let mut jobs = rows.jobs;
    jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    Ok(Trace {
        format,
        jobs,
        problems: rows.errors,
        skipped_rows: rows.bad_rows,
    })
}

/// `gpuplan trace inspect`: the shape of a trace at a glance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    /// The format it was read as.
    pub format: Format,
    /// Jobs kept.
    pub jobs: usize,
    /// Earliest submission (0 for an empty trace).
    pub first_submit_s: f64,
    /// Latest submission (0 for an empty trace).
    pub last_submit_s: f64,
    /// Latest minus earliest submission.
    pub span_s: f64,
    /// GPUs per job → number of jobs.
    pub gpu_histogram: BTreeMap<u32, usize>,
    /// Jobs that name a bundled application (profile-driven).
    pub profiled_jobs: usize,
    /// Jobs that give only a duration.
    pub duration_jobs: usize,
    /// Σ duration × GPUs over jobs with a duration.
    pub total_gpu_s: f64,
    /// Average GPUs busy if every job ran as the trace says: total_gpu_s / span_s.
    pub mean_gpus_demanded: f64,
    /// The largest job's GPUs (0 for an empty trace).
    pub max_gpus_per_job: u32,
    /// Rows dropped under [`BadRows::Skip`].
    pub skipped_rows: usize,
}

/// The [`TraceStats`] of a loaded trace.
pub fn stats(trace: &Trace) -> TraceStats {
    let first = trace.jobs.first().map_or(0.0, |j| j.submit_s);
    let last = trace.jobs.last().map_or(0.0, |j| j.submit_s);
    let mut hist = BTreeMap::new();
    for j in &trace.jobs {
        *hist.entry(j.gpus).or_insert(0) += 1;
    }
    let total: f64 = trace
        .jobs
        .iter()
        .filter_map(TraceJob::gpu_s)
        .fold(0.0, |a, b| a + b);
    let span = last - first;
    TraceStats {
        format: trace.format,
        jobs: trace.jobs.len(),
        first_submit_s: first,
        last_submit_s: last,
        span_s: span,
        gpu_histogram: hist,
        profiled_jobs: trace.jobs.iter().filter(|j| j.app.is_some()).count(),
        duration_jobs: trace
            .jobs
            .iter()
            .filter(|j| j.app.is_none() && j.duration_s.is_some())
            .count(),
        total_gpu_s: total,
        mean_gpus_demanded: if span > 0.0 { total / span } else { 0.0 },
        max_gpus_per_job: trace.jobs.iter().map(|j| j.gpus).max().unwrap_or(0),
        skipped_rows: trace.skipped_rows,
    }
}

#[cfg(test)]
mod tests;
