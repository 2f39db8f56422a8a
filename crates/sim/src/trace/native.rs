//! gpuplan's native workload CSV (`docs/workload-format.md`):
//! `name,submit_s,gpus,app,batch_size,duration_s,model,group` and an
//! optional `checkpoint_interval_s`.
//!
//! Every other format converts to this one, so it says everything the
//! simulator needs and nothing format-specific.

use gpuplan_core::{CoreError, POLLUX_APPS};

use super::util::{push, read_csv, MAX_GPUS};
use super::{Rows, TraceJob};

/// Every column, in the order [`write()`] puts them.
pub const COLUMNS: [&str; 8] = [
    "name",
    "submit_s",
    "gpus",
    "app",
    "batch_size",
    "duration_s",
    "model",
    "group",
];

/// Columns that must be present; the rest may be left out.
const REQUIRED: [&str; 3] = ["name", "submit_s", "gpus"];

/// A native workload's rows; columns may come in any order.
pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let csv = read_csv(source, bytes, &REQUIRED, &mut rows)?;
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let name = r.text("name");
        let submit = r.number("submit_s", false);
        let gpus = r.gpus("gpus");
        let app = r.opt_text("app");
        if let Some(a) = &app {
            if !POLLUX_APPS.contains(&a.as_str()) {
                r.err(
                    "app",
                    format!("unknown application '{a}'; valid: {}", POLLUX_APPS.join(", ")),
                );
            }
        }
        let batch = if r.get("batch_size").is_empty() {
            Some(None)
        } else {
            r.int("batch_size", true, 1 << 24).map(|b| Some(b as u32))
        };
        let duration = r.opt_number("duration_s", true);
        let checkpoint = r.opt_number("checkpoint_interval_s", true);
        match (&app, batch) {
            (Some(_), Some(None)) => r.err("batch_size", "required when app is set"),
            (None, Some(Some(_))) => r.err("batch_size", "given without an app"),
            _ => {}
        }
        if app.is_none() && duration == Some(None) {
            r.err("duration_s", "a job needs an app or a duration");
        }
        let job = (|| {
            Some(TraceJob {
                name: name?,
                submit_s: submit?,
                gpus: gpus?,
                app: app.clone(),
                batch_size: batch?,
                duration_s: duration?,
                model: r.opt_text("model"),
                // `queue` names the job's team queue (docs/tenants.md);
                // `group`, the older name, is read where it is absent.
                group: r.opt_text("queue").or_else(|| r.opt_text("group")),
                checkpoint_interval_s: checkpoint?,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}

/// Write jobs in the native format.
pub fn write<W: std::io::Write>(out: W, jobs: &[TraceJob]) -> Result<(), CoreError> {
    let io = |e: csv::Error| CoreError::Invalid(format!("writing workload: {e}"));
    let mut w = csv::Writer::from_writer(out);
    // The checkpoint column only where a job has one, so workloads without
    // checkpoints are written as before.
    let ckpt = jobs.iter().any(|j| j.checkpoint_interval_s.is_some());
    let header = COLUMNS
        .iter()
        .copied()
        .chain(ckpt.then_some("checkpoint_interval_s"));
    w.write_record(header).map_err(io)?;
    for j in jobs {
        debug_assert!(j.gpus <= MAX_GPUS);
        w.write_record(
            [
                j.name.clone(),
                format!("{}", j.submit_s),
                j.gpus.to_string(),
                j.app.clone().unwrap_or_default(),
                j.batch_size.map_or(String::new(), |b| b.to_string()),
                j.duration_s.map_or(String::new(), |d| format!("{d}")),
                j.model.clone().unwrap_or_default(),
                j.group.clone().unwrap_or_default(),
            ]
            .into_iter()
            .chain(ckpt.then(|| j.checkpoint_interval_s.map_or(String::new(), |c| format!("{c}")))),
        )
        .map_err(io)?;
    }
    w.flush()
        .map_err(|e| CoreError::Invalid(format!("writing workload: {e}")))?;
    Ok(())
}
