//! Shockwave `.trace`: 12 TAB-separated fields per line
//! (`job_type, command, working_directory, num_steps_arg, needs_data_dir,
//! total_steps, scale_factor, mode, priority_weight, SLO, duration, arrival_time`).
//!
//! The trace gives the isolated run time directly; `command` is data only.

use gpuplan_core::CoreError;

use super::util::{push, read_tsv, utf8};
use super::{Rows, TraceJob};

pub const FIELDS: [&str; 12] = [
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "mode",
    "priority_weight",
    "SLO",
    "duration",
    "arrival_time",
];

/// Batch-size adaptation modes Shockwave generates.
pub const MODES: [&str; 3] = ["static", "accordion", "gns"];

pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let text = utf8(source, bytes)?;
    for mut r in read_tsv(source, text, &[&FIELDS], &mut rows) {
        let line = r.line;
        let job_type = r.text("job_type");
        r.int("total_steps", true, u64::MAX);
        let gpus = r.gpus("scale_factor");
        let mode = r.get("mode");
        if !MODES.contains(&mode) {
            r.err(
                "mode",
                format!("must be one of {}, got '{mode}'", MODES.join(", ")),
            );
        }
        r.number("priority_weight", true);
        let slo = r.get("SLO");
        if !slo
            .parse::<f64>()
            .is_ok_and(|v| v == -1.0 || (v.is_finite() && v > 0.0))
        {
            r.err("SLO", format!("must be -1 (none) or a number > 0, got '{slo}'"));
        }
        let duration = r.number("duration", true);
        let arrival = r.number("arrival_time", false);
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: format!("job-{line}"),
                submit_s: arrival?,
                gpus: gpus?,
                app: None,
                batch_size: None,
                duration_s: Some(duration?),
                model: Some(job_type?),
                group: None,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}
