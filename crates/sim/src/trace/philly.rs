//! Pollux's Philly-derived `philly.csv`:
//! `timestamp,duration,num_gpus,gpu_time,cluster` (82,247 jobs of the
//! Microsoft Philly trace). Submission times become seconds after the
//! earliest good row; `gpu_time` must equal `duration × num_gpus`.

use gpuplan_core::CoreError;

use super::util::{parse_datetime_s, push, read_csv};
use super::{Rows, TraceJob};

pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let want = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"];
    let csv = read_csv(source, bytes, &want, &mut rows)?;
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let line = r.line;
        let ts = parse_datetime_s(r.get("timestamp"));
        if ts.is_none() {
            let raw = r.get("timestamp");
            r.err(
                "timestamp",
                format!("expected 'YYYY-MM-DD HH:MM:SS', got '{raw}'"),
            );
        }
        let duration = r.number("duration", true);
        let gpus = r.gpus("num_gpus");
        let gpu_time = r.number("gpu_time", true);
        if let (Some(d), Some(g), Some(t)) = (duration, gpus, gpu_time) {
            let want = d * g as f64;
            if (t - want).abs() > 1e-6 * want.max(1.0) {
                r.err(
                    "gpu_time",
                    format!("must equal duration × num_gpus = {want}, got {t}"),
                );
            }
        }
        let group = r.text("cluster");
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: format!("philly-{line}"),
                submit_s: ts?,
                gpus: gpus?,
                app: None,
                batch_size: None,
                duration_s: Some(duration?),
                model: None,
                group: Some(group?),
            })
        })();
        push(&mut rows, r, job);
    }
    let t0 = rows.jobs.iter().map(|j| j.submit_s).fold(f64::INFINITY, f64::min);
    for j in &mut rows.jobs {
        j.submit_s -= t0;
    }
    Ok(rows)
}
