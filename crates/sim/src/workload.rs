//! The Pollux workload CSV: `name,time,application,num_replicas,batch_size`.
//!
//! Every row is validated and every bad cell reported as `file:line:field`.
//! Unknown applications are errors that list the valid ones; nothing is
//! mapped to a default.

use std::io::Read;

use gpuplan_core::{CoreError, JobId, JobSpec, ParseError};

use crate::data::Profiles;

/// Upper bound on one job's GPUs, as in the Pollux artifact (64).
pub const MAX_GPUS_PER_JOB: u32 = 64;

/// Parse a Pollux workload. `source` names the file in error messages.
pub fn parse_pollux_workload<R: Read>(
    source: &str,
    reader: R,
    profiles: &Profiles,
) -> Result<Vec<JobSpec>, CoreError> {
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader);
    let headers = rdr
        .headers()
        .map_err(|e| ParseError::new(source, 1, "header", e.to_string()))?
        .clone();
    let want = ["name", "time", "application", "num_replicas", "batch_size"];
    let mut col = [0usize; 5];
    let mut errs = Vec::new();
    for (i, w) in want.iter().enumerate() {
        match headers.iter().position(|h| h == *w) {
            Some(c) => col[i] = c,
            None => errs.push(ParseError::new(source, 1, w, "missing column")),
        }
    }
    if !errs.is_empty() {
        return Err(CoreError::Parse(errs));
    }
    let valid_apps: Vec<&str> = profiles.keys().map(String::as_str).collect();
    let mut jobs = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(line, |p| p.line());
                errs.push(ParseError::new(source, line, "row", e.to_string()));
                continue;
            }
        };
        let get = |c: usize| rec.get(col[c]).unwrap_or("");
        let before = errs.len();
        let name = get(0).to_string();
        if name.is_empty() {
            errs.push(ParseError::new(source, line, "name", "empty"));
        }
        let time = match get(1).parse::<f64>() {
            Ok(t) if t.is_finite() && t >= 0.0 => t,
            Ok(t) => {
                errs.push(ParseError::new(
                    source,
                    line,
                    "time",
                    format!("must be a finite number >= 0, got {t}"),
                ));
                0.0
            }
            Err(_) => {
                errs.push(ParseError::new(
                    source,
                    line,
                    "time",
                    format!("not a number: '{}'", get(1)),
                ));
                0.0
            }
        };
        let app = get(2).to_string();
        let profile = profiles.get(&app);
        if profile.is_none() {
            errs.push(ParseError::new(
                source,
                line,
                "application",
                format!("unknown application '{app}'; valid: {}", valid_apps.join(", ")),
            ));
        }
        let mut positive = |c: usize, field: &str| match get(c).parse::<u32>() {
            Ok(v) if v > 0 => v,
            _ => {
                errs.push(ParseError::new(
                    source,
                    line,
                    field,
                    format!("must be a positive integer, got '{}'", get(c)),
                ));
                0
            }
        };
        let replicas = positive(3, "num_replicas");
        let batch = positive(4, "batch_size");
        if errs.len() > before {
            continue;
        }
        let limits = profile.expect("checked above").limits;
        let max_gpus = (limits.max_batch / limits.min_local.max(1)).clamp(1, MAX_GPUS_PER_JOB);
        jobs.push(JobSpec {
            id: JobId(jobs.len() as u32),
            name,
            app,
            submit_s: time,
            requested_gpus: replicas,
            batch_size: batch,
            min_gpus: 1,
            max_gpus: max_gpus.max(replicas),
            preemptible: true,
        });
    }
    if errs.is_empty() {
        Ok(jobs)
    } else {
        Err(CoreError::Parse(errs))
    }
}
