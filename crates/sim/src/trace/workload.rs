//! From trace jobs to simulator jobs, and the Pollux method of sampling.
//!
//! A job that names a bundled application runs from its measured profile.
//! A job that gives only a duration gets one of two treatments, chosen by
//! the user ([`DurationJobs`]): a rigid fixed-throughput job, or the Pollux
//! method (its GPU-time class picks an application).

use gpuplan_core::{CoreError, JobId, JobSpec};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{Trace, TraceJob};
use crate::data::Profiles;
use crate::workload::{Work, WorkloadJob, MAX_GPUS_PER_JOB};

/// How jobs with a duration and no application are simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DurationJobs {
    /// Fixed throughput on exactly the trace's GPUs: runs for the trace's duration.
    #[default]
    Rigid,
    /// Pollux's mapping: GPU-time class → application, GPUs from the trace,
    /// batch = M0 × GPUs (capped at the application's largest batch).
    Pollux,
}

impl DurationJobs {
    /// The CLI's value for it (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            DurationJobs::Rigid => "rigid",
            DurationJobs::Pollux => "pollux",
        }
    }
}

/// The application Pollux's `workload.py` gives a job of this GPU-time:
/// < 1 GPU-h cifar10 or ncf, 1–10 deepspeech2 or bert, 10–100 yolov3,
/// ≥ 100 imagenet. `coin` picks between the two of a class.
pub fn pollux_app_for(gpu_s: f64, coin: bool) -> &'static str {
    let h = gpu_s / 3600.0;
    match (h, coin) {
        (h, false) if h < 1.0 => "cifar10",
        (h, true) if h < 1.0 => "ncf",
        (h, false) if h < 10.0 => "deepspeech2",
        (h, true) if h < 10.0 => "bert",
        (h, _) if h < 100.0 => "yolov3",
        _ => "imagenet",
    }
}

/// Give a duration-only job an application by the Pollux method.
fn map_pollux(job: &TraceJob, profiles: &Profiles, rng: &mut ChaCha8Rng) -> Result<TraceJob, CoreError> {
    let gpu_s = job.gpu_s().ok_or_else(|| {
        CoreError::Invalid(format!(
            "job {}: has neither an application nor a duration",
            job.name
        ))
    })?;
    let app = pollux_app_for(gpu_s, rng.gen_bool(0.5));
    let lim = profiles
        .get(app)
        .ok_or_else(|| CoreError::Invalid(format!("no profile for '{app}'")))?
        .limits;
    let mut out = job.clone();
    out.app = Some(app.to_string());
    out.batch_size = Some(lim.init_batch.saturating_mul(job.gpus).min(lim.max_batch));
    Ok(out)
}

/// Simulator jobs for a trace. Ids follow submission order.
pub fn to_workload(
    trace: &Trace,
    treatment: DurationJobs,
    profiles: &Profiles,
    seed: u64,
) -> Result<Vec<WorkloadJob>, CoreError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(trace.jobs.len());
    for (i, job) in trace.jobs.iter().enumerate() {
        let id = JobId(i as u32);
        let mapped;
        let job = if job.app.is_none() && treatment == DurationJobs::Pollux {
            mapped = map_pollux(job, profiles, &mut rng)?;
            &mapped
        } else {
            job
        };
        let w = match (&job.app, job.batch_size, job.duration_s) {
            (Some(app), Some(batch), _) => {
                let lim = profiles
                    .get(app)
                    .ok_or_else(|| {
                        CoreError::Invalid(format!(
                            "job {}: unknown application '{app}'; valid: {}",
                            job.name,
                            profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                        ))
                    })?
                    .limits;
                let max = (lim.max_batch / lim.min_local.max(1)).clamp(1, MAX_GPUS_PER_JOB);
                WorkloadJob {
                    spec: JobSpec {
                        id,
                        name: job.name.clone(),
                        app: app.clone(),
                        submit_s: job.submit_s,
                        requested_gpus: job.gpus,
                        batch_size: batch,
                        min_gpus: 1,
                        max_gpus: max.max(job.gpus),
                        preemptible: true,
                        queue: job.group.clone(),
                    },
                    work: Work::Profiled,
                    model: None,
                    checkpoint_interval_s: job.checkpoint_interval_s,
                }
            }
            (None, _, Some(d)) => WorkloadJob {
                spec: JobSpec {
                    id,
                    name: job.name.clone(),
                    app: "rigid".into(),
                    submit_s: job.submit_s,
                    requested_gpus: job.gpus,
                    batch_size: 1,
                    min_gpus: job.gpus,
                    max_gpus: job.gpus,
                    preemptible: true,
                    queue: job.group.clone(),
                },
                work: Work::Rigid { duration_s: d },
                model: job.model.clone(),
                checkpoint_interval_s: job.checkpoint_interval_s,
            },
            _ => {
                return Err(CoreError::Invalid(format!(
                    "job {}: needs an application with a batch size, or a duration",
                    job.name
                )))
            }
        };
        out.push(w);
    }
    Ok(out)
}

/// Pollux's job filter: at least a minute long, under 1000 GPU-hours.
pub fn pollux_keeps(job: &TraceJob) -> bool {
    job.duration_s.is_some_and(|d| d >= 60.0) && job.gpu_s().is_some_and(|g| g < 1000.0 * 3600.0)
}

/// `gpuplan trace sample`: the Pollux method. Keep jobs Pollux keeps, pick a
/// window of `window_s` seconds at a seeded random start, draw `n` of its
/// jobs (seeded, without replacement), shift times to the window start and
/// give duration-only jobs an application. Errors if the window holds fewer
/// than `n` jobs.
pub fn sample(
    trace: &Trace,
    n: usize,
    window_s: f64,
    seed: u64,
    profiles: &Profiles,
) -> Result<Vec<TraceJob>, CoreError> {
    if !(window_s.is_finite() && window_s > 0.0) {
        return Err(CoreError::Invalid(format!(
            "window must be > 0 s, got {window_s}"
        )));
    }
    let kept: Vec<&TraceJob> = trace
        .jobs
        .iter()
        .filter(|j| pollux_keeps(j) || j.app.is_some())
        .collect();
    let Some(last) = kept.last() else {
        return Err(CoreError::Invalid(
            "no job passes the Pollux filter (duration >= 60 s, < 1000 GPU-h)".into(),
        ));
    };
    let first = kept[0].submit_s;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Window starts at a job's submission so that it is never empty.
    let latest_start = (last.submit_s - window_s).max(first);
    let starts: Vec<f64> = kept
        .iter()
        .map(|j| j.submit_s)
        .filter(|&t| t <= latest_start)
        .collect();
    // A u32 index: a usize range draws differently on 32-bit wasm.
    let start = starts[rng.gen_range(0..starts.len() as u32) as usize];
    let in_window: Vec<&TraceJob> = kept
        .iter()
        .copied()
        .filter(|j| j.submit_s >= start && j.submit_s < start + window_s)
        .collect();
    if in_window.len() < n {
        return Err(CoreError::Invalid(format!(
            "the {window_s} s window starting at {start} s holds {} jobs, fewer than the {n} asked for",
            in_window.len()
        )));
    }
    let mut picked: Vec<&TraceJob> = in_window.choose_multiple(&mut rng, n).copied().collect();
    picked.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    let mut out = Vec::with_capacity(n);
    for j in picked {
        let mut j = if j.app.is_none() {
            map_pollux(j, profiles, &mut rng)?
        } else {
            j.clone()
        };
        j.submit_s -= start;
        out.push(j);
    }
    Ok(out)
}

/// `8h`, `30m`, `90s`, `2d` or plain seconds.
pub fn parse_duration_s(s: &str) -> Result<f64, CoreError> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'd')) => (&s[..i], 86400.0),
        Some((i, 'h')) => (&s[..i], 3600.0),
        Some((i, 'm')) => (&s[..i], 60.0),
        Some((i, 's')) => (&s[..i], 1.0),
        _ => (s, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * mult),
        _ => Err(CoreError::Invalid(format!(
            "duration '{s}': expected a number > 0 with an optional unit s, m, h or d (e.g. 8h)"
        ))),
    }
}
