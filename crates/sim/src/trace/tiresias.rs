//! The Tiresias simulator's job CSV (`60_job.csv`):
//! `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`.
//!
//! `duration` is the run time on the requested GPUs. `model_name` is kept as
//! the trace's model and never looked up: the Tiresias simulator silently
//! maps unknown names (e.g. googlenet) to inception3; we do not.

use gpuplan_core::CoreError;

use super::util::{push, read_csv};
use super::{Rows, TraceJob};

pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let want = ["job_id", "num_gpu", "submit_time", "model_name", "duration"];
    let csv = read_csv(source, bytes, &want, &mut rows)?;
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let id = r.text("job_id");
        let gpus = r.gpus("num_gpu");
        let submit = r.number("submit_time", false);
        let model = r.text("model_name");
        let duration = r.number("duration", true);
        if r.has("iterations") {
            r.int("iterations", false, u64::MAX);
        }
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: format!("job-{}", id?),
                submit_s: submit?,
                gpus: gpus?,
                app: None,
                batch_size: None,
                duration_s: Some(duration?),
                model: Some(model?),
                group: None,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}
