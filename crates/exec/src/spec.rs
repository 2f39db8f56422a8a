//! What a user submits: a job file (`JOB.toml`) or the same fields as JSON.
//!
//! Unknown keys are errors, so a typo (`max_gpu = 4`) is refused rather than
//! silently ignored; every problem is reported at once, each as
//! `FILE:LINE:FIELD: message`.

use serde::{Deserialize, Serialize};

/// A job submission. `name`, `command`, `min_gpus`, `max_gpus` and
/// `batch_size` are required; the rest have defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSubmission {
    /// A name for people; need not be unique.
    pub name: String,
    /// Run by `sh -c`, once per GPU (rank).
    pub command: String,
    /// Fewest GPUs it runs on.
    pub min_gpus: u32,
    /// Most GPUs it may be given.
    pub max_gpus: u32,
    /// Initial total batch size (M0 of the goodput model).
    pub batch_size: u32,
    /// Application hint (e.g. `cifar10`); informational.
    #[serde(default)]
    pub app: Option<String>,
    /// Model hint; informational.
    #[serde(default)]
    pub model: Option<String>,
    /// Largest total batch the job accepts; default `batch_size` (fixed batch).
    #[serde(default)]
    pub max_batch_size: Option<u32>,
    /// Per-GPU batch bounds; default 1 and `batch_size`.
    #[serde(default)]
    pub min_local_bsz: Option<u32>,
    /// Largest per-GPU batch; default `batch_size`.
    #[serde(default)]
    pub max_local_bsz: Option<u32>,
    /// Seconds a restart costs the job (checkpoint + reload); recorded and
    /// shown. The planner's restart penalty is cluster-wide (`--restart-penalty`).
    #[serde(default)]
    pub restart_cost_s: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL on re-allocation; default the daemon's `--grace`.
    #[serde(default)]
    pub grace_s: Option<f64>,
    /// Whether planners may stop or move it once it runs (default yes).
    #[serde(default = "yes")]
    pub preemptible: bool,
    /// Crashes before the job is marked failed; default the daemon's `--max-crashes`.
    #[serde(default)]
    pub max_crashes: Option<u32>,
    /// Unix user id to run as; `gpuplan submit` fills in the submitting
    /// user's. Honoured when the daemon runs as root, else jobs run as the
    /// daemon's user.
    #[serde(default)]
    pub uid: Option<u32>,
    /// The model's features (`flops_per_sample`, `params`, `[features.layers]`),
    /// for the utilization predictor while the job has no measurements
    /// (`gpuplan predict --onnx MODEL` prints them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<gpuplan_core::predict::ModelFeatures>,
    /// GPU memory the job needs on each of its GPUs (GiB), so `--sharing`
    /// puts it only beside jobs whose memory fits with it. Without it the
    /// bundled app's estimate applies, else the job never shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_gib: Option<f64>,
    /// The leaf queue the job is in, under `serve --queues`; absent:
    /// `default` (docs/tenants.md). A daemon refuses a queue it has not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

fn yes() -> bool {
    true
}

/// Most GPUs one job may ask for; a guard against typos like `max_gpus = 80000`.
pub const MAX_GPUS_PER_JOB: u32 = 4096;

/// Longest `grace_s` (one hour): a job that ignores SIGTERM holds its GPUs
/// this long at most after a stop (docs/job-protocol.md, "Limits and failure").
pub const MAX_GRACE_S: f64 = 3600.0;

/// Longest `command`, in bytes: well under Linux's 128 KiB for one
/// argument (`MAX_ARG_STRLEN`), which a longer one fails at launch.
pub const MAX_COMMAND_BYTES: usize = 32 * 1024;

/// Largest `uid`: 2^31 - 2. Above it are ids no account has, and
/// 4294967295 is `(uid_t) -1`, which `setuid` reads as "unchanged".
pub const MAX_UID: u32 = i32::MAX as u32 - 1;

/// Longest `app` and `model` hints, like `name`.
pub const MAX_HINT_CHARS: usize = 128;

impl JobSubmission {
    /// Semantic checks: (field, message) for every problem.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        if self.name.trim().is_empty() {
            p.push(("name", "must not be empty".to_string()));
        }
        if self.name.len() > 128 || self.name.chars().any(char::is_control) {
            p.push(("name", "must be at most 128 printable characters".to_string()));
        }
        if self.command.trim().is_empty() {
            p.push(("command", "must not be empty".to_string()));
        }
        if self.command.len() > MAX_COMMAND_BYTES {
            p.push((
                "command",
                format!(
                    "must be at most {MAX_COMMAND_BYTES} bytes, got {} (put a long script in a file and run that)",
                    self.command.len()
                ),
            ));
        }
        for (f, v) in [("app", &self.app), ("model", &self.model), ("queue", &self.queue)] {
            if v.as_ref()
                .is_some_and(|v| v.chars().count() > MAX_HINT_CHARS || v.chars().any(char::is_control))
            {
                p.push((
                    f,
                    format!("must be at most {MAX_HINT_CHARS} printable characters"),
                ));
            }
        }
        if let Some(u) = self.uid {
            if u > MAX_UID {
                p.push(("uid", format!("must be <= {MAX_UID}, got {u}")));
            }
        }
        if let Some(g) = self.grace_s {
            if g > MAX_GRACE_S {
                // `{:e}`: 1e300 in full is three hundred digits.
                p.push((
                    "grace_s",
                    format!("must be <= {MAX_GRACE_S} (one hour), got {g:e}"),
                ));
            }
        }
        if self.min_gpus == 0 {
            p.push(("min_gpus", "must be >= 1, got 0".to_string()));
        }
        if self.max_gpus < self.min_gpus {
            p.push((
                "max_gpus",
                format!("must be >= min_gpus ({}), got {}", self.min_gpus, self.max_gpus),
            ));
        }
        if self.max_gpus > MAX_GPUS_PER_JOB {
            p.push((
                "max_gpus",
                format!("must be <= {MAX_GPUS_PER_JOB}, got {}", self.max_gpus),
            ));
        }
        if self.batch_size == 0 {
            p.push(("batch_size", "must be >= 1, got 0".to_string()));
        }
        if let Some(m) = self.max_batch_size {
            if m < self.batch_size {
                p.push((
                    "max_batch_size",
                    format!("must be >= batch_size ({}), got {m}", self.batch_size),
                ));
            }
        }
        if self.min_local_bsz == Some(0) {
            p.push(("min_local_bsz", "must be >= 1, got 0".to_string()));
        }
        if let (Some(lo), Some(hi)) = (self.min_local_bsz, self.max_local_bsz) {
            if hi < lo {
                p.push((
                    "max_local_bsz",
                    format!("must be >= min_local_bsz ({lo}), got {hi}"),
                ));
            }
        }
        if self.max_local_bsz == Some(0) {
            p.push(("max_local_bsz", "must be >= 1, got 0".to_string()));
        }
        if let Some(f) = &self.features {
            for (name, v) in [
                ("features.flops_per_sample", f.flops_per_sample),
                ("features.params", f.params),
            ] {
                if !v.is_finite() || v <= 0.0 {
                    p.push((name, format!("must be a finite number > 0, got {v}")));
                }
            }
        }
        if let Some(m) = self.mem_gib {
            if !m.is_finite() || m <= 0.0 {
                p.push(("mem_gib", format!("must be a finite number > 0, got {m}")));
            }
        }
        for (f, v) in [("restart_cost_s", self.restart_cost_s), ("grace_s", self.grace_s)] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    p.push((f, format!("must be a finite number >= 0, got {v}")));
                }
            }
        }
        p
    }

    /// Check, naming each problem as `source:field: message` (no line: JSON requests).
    pub fn check(&self, source: &str) -> Result<(), Vec<String>> {
        let p = self.problems();
        if p.is_empty() {
            return Ok(());
        }
        Err(p.into_iter().map(|(f, m)| format!("{source}:{f}: {m}")).collect())
    }

    /// Parse and check a job file. `source` names it in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self, Vec<String>> {
        let sub: JobSubmission = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(text, s.start));
            let msg = e.message().trim().to_string();
            vec![format!("{source}:{line}: {msg}")]
        })?;
        let p = sub.problems();
        if p.is_empty() {
            return Ok(sub);
        }
        Err(p
            .into_iter()
            .map(|(f, m)| {
                let line = field_line(text, f).unwrap_or(0);
                format!("{source}:{line}:{f}: {m}")
            })
            .collect())
    }
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}

/// The line of `field = ...` in a flat TOML file.
fn field_line(text: &str, field: &str) -> Option<usize> {
    // A field of a table (`features.params`) is written `params = ...` under `[features]`.
    let field = field.rsplit('.').next().unwrap_or(field);
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(field)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "name = \"a\"\ncommand = \"true\"\nmin_gpus = 1\nmax_gpus = 4\nbatch_size = 64\n";

    #[test]
    fn memory_is_optional_and_checked() {
        assert_eq!(JobSubmission::from_toml(OK, "j.toml").unwrap().mem_gib, None);
        let ok = JobSubmission::from_toml(&format!("{OK}mem_gib = 6.5\n"), "j.toml").unwrap();
        assert_eq!(ok.mem_gib, Some(6.5));
        let bad = JobSubmission::from_toml(&format!("{OK}mem_gib = 0\n"), "j.toml").unwrap_err();
        assert_eq!(
            bad,
            vec!["j.toml:6:mem_gib: must be a finite number > 0, got 0".to_string()]
        );
    }

    #[test]
    fn model_features_are_optional_and_checked() {
        assert_eq!(JobSubmission::from_toml(OK, "j.toml").unwrap().features, None);
        let with = format!(
            "{OK}[features]\nflops_per_sample = 2.2e9\nparams = 11e6\n[features.layers]\nconv = 20\n"
        );
        let f = JobSubmission::from_toml(&with, "j.toml")
            .unwrap()
            .features
            .unwrap();
        assert_eq!(
            (f.flops_per_sample, f.params, f.layers.conv, f.layers.matmul),
            (2.2e9, 11e6, 20, 0)
        );
        let bad = format!("{OK}[features]\nflops_per_sample = 2.2e9\nparams = -1\n");
        let e = JobSubmission::from_toml(&bad, "j.toml").unwrap_err();
        assert_eq!(
            e,
            vec!["j.toml:8:features.params: must be a finite number > 0, got -1".to_string()]
        );
    }

    /// Issue 33, items 4 and 6: an unbounded grace period, a command too
    /// long to launch and a uid no account has are refused at submission,
    /// each naming its bound.
    #[test]
    fn oversize_inputs_are_refused_with_their_bounds() {
        let long = "x".repeat(140 * 1024);
        let bad = format!(
            "{OK}grace_s = 1e300\nuid = 4294967295\napp = \"{}\"\n",
            "a".repeat(200)
        )
        .replace("command = \"true\"", &format!("command = \"{long}\""));
        let e = JobSubmission::from_toml(&bad, "j.toml").unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(
            e[0].starts_with("j.toml:2:command: must be at most 32768 bytes, got 143360"),
            "{}",
            e[0]
        );
        assert_eq!(e[1], "j.toml:8:app: must be at most 128 printable characters");
        assert_eq!(e[2], "j.toml:7:uid: must be <= 2147483646, got 4294967295");
        assert_eq!(e[3], "j.toml:6:grace_s: must be <= 3600 (one hour), got 1e300");
        let e = JobSubmission::from_toml(&format!("{OK}grace_s = 7200\n"), "j.toml").unwrap_err();
        assert_eq!(
            e,
            vec!["j.toml:6:grace_s: must be <= 3600 (one hour), got 7.2e3".to_string()]
        );
        let ok = format!("{OK}grace_s = 3600\nuid = 65534\n");
        assert!(JobSubmission::from_toml(&ok, "j.toml").is_ok());
    }

    #[test]
    fn minimal_spec_parses_with_defaults() {
        let s = JobSubmission::from_toml(OK, "job.toml").unwrap();
        assert!(s.preemptible);
        assert_eq!(s.max_gpus, 4);
        assert_eq!(s.max_batch_size, None);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let bad = "name = \"a\"\ncommand = \"true\"\nmin_gpus = 3\nmax_gpus = 2\nbatch_size = 0\n";
        let e = JobSubmission::from_toml(bad, "job.toml").unwrap_err();
        assert_eq!(
            e,
            vec![
                "job.toml:4:max_gpus: must be >= min_gpus (3), got 2".to_string(),
                "job.toml:5:batch_size: must be >= 1, got 0".to_string()
            ]
        );
        let typo = format!("{OK}max_gpu = 3\n");
        let e = JobSubmission::from_toml(&typo, "j.toml").unwrap_err();
        assert!(e[0].starts_with("j.toml:6:") && e[0].contains("max_gpu"), "{e:?}");
        let missing = "name = \"a\"\nmin_gpus = 1\nmax_gpus = 1\nbatch_size = 1\n";
        let e = JobSubmission::from_toml(missing, "j.toml").unwrap_err();
        assert!(e[0].contains("command"), "{e:?}");
        let wrong_type = OK.replace("min_gpus = 1", "min_gpus = \"one\"");
        let e = JobSubmission::from_toml(&wrong_type, "j.toml").unwrap_err();
        assert!(e[0].starts_with("j.toml:3:"), "{e:?}");
    }
}
