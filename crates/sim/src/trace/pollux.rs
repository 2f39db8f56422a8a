//! Pollux artifact workload CSV: `name,time,application,num_replicas,batch_size`.
//!
//! Jobs name a bundled application and keep the user's GPUs and batch size.

use gpuplan_core::{CoreError, POLLUX_APPS};

use super::util::{push, read_csv};
use super::{Rows, TraceJob};

pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let want = ["name", "time", "application", "num_replicas", "batch_size"];
    let csv = read_csv(source, bytes, &want, &mut rows)?;
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let name = r.text("name");
        let time = r.number("time", false);
        let app = r.text("application");
        if let Some(a) = &app {
            if !POLLUX_APPS.contains(&a.as_str()) {
                r.err(
                    "application",
                    format!("unknown application '{a}'; valid: {}", POLLUX_APPS.join(", ")),
                );
            }
        }
        let gpus = r.gpus("num_replicas");
        let batch = r.int("batch_size", true, 1 << 24).map(|b| b as u32);
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: name?,
                submit_s: time?,
                gpus: gpus?,
                app: Some(app?),
                batch_size: Some(batch?),
                duration_s: None,
                model: None,
                group: None,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}
