//! PAL / Sia-Philly `workload-*.csv`: `job_id,num_gpus,submit_time,duration,model[,batch_size]`.
//!
//! As in PAL's loader, `duration` is the job's iteration count; its run time
//! is that times the model's measured seconds per iteration (below). A model
//! not in the table is an error, not a default.

use gpuplan_core::CoreError;

use super::util::{push, read_csv};
use super::{Rows, TraceJob};

/// Seconds per iteration by model, from PAL's `workload/workload.py`.
pub const ITERATION_TIME_S: [(&str, f64); 6] = [
    ("BERT", 0.179),
    ("DCGAN", 0.0469),
    ("GPT2", 3.5714),
    ("PointNet", 0.28125),
    ("resnet50", 0.1754),
    ("vgg19", 0.3006),
];

pub fn parse(source: &str, bytes: &[u8]) -> Result<Rows, CoreError> {
    let mut rows = Rows::default();
    let want = ["job_id", "num_gpus", "submit_time", "duration", "model"];
    let csv = read_csv(source, bytes, &want, &mut rows)?;
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let id = r.text("job_id");
        let gpus = r.gpus("num_gpus");
        let submit = r.number("submit_time", false);
        let iters = r.number("duration", true);
        let model = r.text("model");
        let per_iter = model.as_deref().and_then(|m| {
            let t = ITERATION_TIME_S.iter().find(|(n, _)| *n == m).map(|x| x.1);
            if t.is_none() {
                let valid: Vec<&str> = ITERATION_TIME_S.iter().map(|x| x.0).collect();
                r.err(
                    "model",
                    format!("unknown model '{m}'; valid: {}", valid.join(", ")),
                );
            }
            t
        });
        if r.has("batch_size") && !r.get("batch_size").is_empty() {
            r.int("batch_size", true, 1 << 24);
        }
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: format!("job-{}", id?),
                submit_s: submit?,
                gpus: gpus?,
                app: None,
                batch_size: None,
                duration_s: Some(iters? * per_iter?),
                model: model.clone(),
                group: None,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}
