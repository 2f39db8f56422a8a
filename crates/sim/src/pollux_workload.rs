//! The Pollux workload CSV: `name,time,application,num_replicas,batch_size`.
//!
//! Every row is validated and every bad cell reported as `file:line:field`.
//! Unknown applications are errors that list the valid ones; nothing is
//! mapped to a default.

use std::io::Read;

use gpuplan_core::{CoreError, JobSpec, ParseError};

use crate::data::Profiles;
use crate::trace;

/// Parse a Pollux workload. `source` names the file in error messages.
///
/// One parser serves every caller (CLI, browser, tests): this goes through
/// [`crate::trace`], so the messages are the same wherever a file is read.
pub fn parse_pollux_workload<R: Read>(
    source: &str,
    mut reader: R,
    profiles: &Profiles,
) -> Result<Vec<JobSpec>, CoreError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| CoreError::Parse(vec![ParseError::new(source, 1, "file", e.to_string())]))?;
    let t = trace::load(
        trace::Format::Pollux,
        source,
        &bytes,
        &trace::LoadOptions::default(),
    )?;
    let jobs = trace::workload::to_workload(&t, trace::workload::DurationJobs::Rigid, profiles, 0)?;
    Ok(jobs.into_iter().map(|w| w.spec).collect())
}
