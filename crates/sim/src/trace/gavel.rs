//! Gavel `.trace` files with Gavel's `simulation_throughputs.json`.
//!
//! Two layouts, TAB-separated: the legacy 7-field one of the Philly-derived
//! `msr/` traces (`job_type, command, num_steps_arg, needs_data_dir,
//! total_steps, arrival_time, scale_factor`) and the current 10-field one
//! (`job_type, command, working_directory, num_steps_arg, needs_data_dir,
//! total_steps, scale_factor, priority_weight, SLO, arrival_time`).
//! A job's run time is `total_steps` over its isolated throughput
//! (iterations/s) for `(job_type, scale_factor)` on the chosen GPU type.

use std::collections::BTreeMap;

use gpuplan_core::{CoreError, ParseError};

use super::util::{push, read_tsv, utf8};
use super::{Rows, TraceJob};

/// The legacy 7-field layout of the `msr/` traces.
pub const LEGACY_FIELDS: [&str; 7] = [
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
];

/// The current 10-field layout.
pub const FIELDS: [&str; 10] = [
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
];

/// The GPU type used when none is named: Gavel's homogeneous clusters are V100.
pub const DEFAULT_GPU_TYPE: &str = "v100";

/// Isolated throughput (iterations/s): GPU type → (job type, GPUs) → value.
/// Zero means the job cannot run there (the table has a few, on K80).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Throughputs(pub BTreeMap<String, BTreeMap<(String, u32), f64>>);

impl Throughputs {
    /// Parse `simulation_throughputs.json`; only the isolated (`"null"`)
    /// entries are kept. Co-location pairs are ignored.
    pub fn parse(source: &str, bytes: &[u8]) -> Result<Throughputs, CoreError> {
        let err = |field: &str, why: String| CoreError::Parse(vec![ParseError::new(source, 0, field, why)]);
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
            CoreError::Parse(vec![ParseError::new(
                source,
                e.line() as u64,
                "json",
                e.to_string(),
            )])
        })?;
        let obj = v
            .as_object()
            .ok_or_else(|| err("json", "expected an object of GPU types".into()))?;
        let mut out = BTreeMap::new();
        for (gpu, table) in obj {
            let table = table
                .as_object()
                .ok_or_else(|| err(gpu, "expected an object of job keys".into()))?;
            let mut m = BTreeMap::new();
            for (key, entry) in table {
                let parsed = parse_key(key).ok_or_else(|| {
                    err(
                        &format!("{gpu}.{key}"),
                        "expected \"('<job type>', <GPUs>)\"".into(),
                    )
                })?;
                let tput = entry
                    .get("null")
                    .and_then(serde_json::Value::as_f64)
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| {
                        err(
                            &format!("{gpu}.{key}.null"),
                            "expected an isolated throughput >= 0 (0 = cannot run)".into(),
                        )
                    })?;
                m.insert(parsed, tput);
            }
            out.insert(gpu.clone(), m);
        }
        Ok(Throughputs(out))
    }

    /// Isolated iterations/s of `job_type` on `gpus` GPUs of `gpu_type`, if measured.
    pub fn get(&self, gpu_type: &str, job_type: &str, gpus: u32) -> Option<f64> {
        self.0.get(gpu_type)?.get(&(job_type.to_string(), gpus)).copied()
    }
}

/// `('ResNet-18 (batch size 16)', 1)` → ("ResNet-18 (batch size 16)", 1).
fn parse_key(key: &str) -> Option<(String, u32)> {
    let inner = key.strip_prefix("('")?.strip_suffix(')')?;
    let (name, sf) = inner.rsplit_once("',")?;
    Some((name.to_string(), sf.trim().parse().ok()?))
}

/// A Gavel trace's rows, each job's duration from its throughput on `gpu_type`.
pub fn parse(source: &str, bytes: &[u8], tputs: &Throughputs, gpu_type: &str) -> Result<Rows, CoreError> {
    let table = tputs.0.get(gpu_type).ok_or_else(|| {
        CoreError::Invalid(format!(
            "{source}: no Gavel throughputs for GPU type '{gpu_type}'; valid: {}",
            tputs.0.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let mut rows = Rows::default();
    let text = utf8(source, bytes)?;
    for mut r in read_tsv(source, text, &[&LEGACY_FIELDS, &FIELDS], &mut rows) {
        let line = r.line;
        let job_type = r.text("job_type");
        let steps = r.int("total_steps", true, u64::MAX);
        let gpus = r.gpus("scale_factor");
        let arrival = r.number("arrival_time", false);
        if r.has("priority_weight") {
            r.number("priority_weight", true);
        }
        let tput = match (&job_type, gpus) {
            (Some(jt), Some(g)) => match table.get(&(jt.clone(), g)).copied() {
                None => {
                    r.err(
                        "job_type",
                        format!("no {gpu_type} throughput for ('{jt}', {g} GPUs) in the throughput table"),
                    );
                    None
                }
                Some(t) if t <= 0.0 => {
                    r.err(
                        "job_type",
                        format!("('{jt}', {g} GPUs) cannot run on {gpu_type}: throughput 0 in the table"),
                    );
                    None
                }
                t => t,
            },
            _ => None,
        };
        let job = (|| {
            Some(TraceJob {
                checkpoint_interval_s: None,
                name: format!("job-{line}"),
                submit_s: arrival?,
                gpus: gpus?,
                app: None,
                batch_size: None,
                duration_s: Some(steps? as f64 / tput?),
                model: Some(job_type?),
                group: None,
            })
        })();
        push(&mut rows, r, job);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(
            parse_key("('ResNet-18 (batch size 16)', 1)"),
            Some(("ResNet-18 (batch size 16)".into(), 1))
        );
        assert_eq!(parse_key("ResNet"), None);
    }
}
