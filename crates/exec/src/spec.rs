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
    /// Seconds the job holds an allocation before a round may shrink,
    /// move or preempt it; default the daemon's `--min-runtime` (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_runtime_s: Option<f64>,
    /// The progress at which the job is complete, in the units of its
    /// reported `progress`: what start and finish estimates count down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_progress: Option<f64>,
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

/// Longest `name`, in characters (not bytes: "é" is one).
pub const MAX_NAME_CHARS: usize = 128;

/// Largest `restart_cost_s` (one day). No checkpoint and reload takes
/// longer, and the planner weighs a restart against what the round gains:
/// a figure like 1e300 made every start look like a loss, so the job
/// waited forever with no reason given.
pub const MAX_RESTART_COST_S: f64 = 86_400.0;

/// Largest `batch_size`, `max_batch_size`, `min_local_bsz` and
/// `max_local_bsz`: a million samples, far above any data-parallel batch
/// in use, and small enough that a batch spread over [`MAX_GPUS_PER_JOB`]
/// GPUs (gpus × local batch, kept in a `u32`) cannot overflow.
pub const MAX_BATCH_SIZE: u32 = 1_000_000;

/// Most `max_crashes`: the back-off doubles with each crash, so a job past
/// a few dozen would wait longer than any cluster runs; above this is a typo.
pub const MAX_CRASHES: u32 = 100;

/// Largest `mem_gib` (1 TiB per GPU): several times any GPU's memory, so a
/// larger figure is a unit slip (MiB or bytes) that would keep the job from
/// ever sharing.
pub const MAX_MEM_GIB: f64 = 1024.0;

/// Largest `features.flops_per_sample`, about a thousand times a large
/// language model's forward pass over a long sequence: the predictor takes
/// logarithms of it times the local batch, which must stay finite.
pub const MAX_FLOPS_PER_SAMPLE: f64 = 1e18;

/// Largest `features.params`, hundreds of times the largest models
/// trained; like the FLOPs, a guard for the predictor's logarithms.
pub const MAX_PARAMS: f64 = 1e15;

/// Most layers of one kind in `features.layers`: the predictor adds the
/// counts in a `u32`, and no model has near this many.
pub const MAX_LAYERS: u32 = 100_000;

/// Largest `total_progress` (and reported progress a job may declare):
/// 1e15 of the job's units, beyond any count of samples trained.
pub const MAX_TOTAL_PROGRESS: f64 = 1e15;

/// Why `t` is no total progress, if it is not.
pub fn total_progress_problem(t: f64) -> Option<String> {
    (!(t.is_finite() && t > 0.0 && t <= MAX_TOTAL_PROGRESS))
        .then(|| format!("must be a finite number in (0, {MAX_TOTAL_PROGRESS:e}], got {t:e}"))
}

/// A submission's model features ([`JobSubmission::problems`]): FLOPs and
/// parameters positive and bounded, layer counts bounded.
fn feature_problems(f: &gpuplan_core::predict::ModelFeatures, p: &mut Vec<(&'static str, String)>) {
    for (name, v, max) in [
        (
            "features.flops_per_sample",
            f.flops_per_sample,
            MAX_FLOPS_PER_SAMPLE,
        ),
        ("features.params", f.params, MAX_PARAMS),
    ] {
        if !v.is_finite() || v <= 0.0 {
            p.push((name, format!("must be a finite number > 0, got {v}")));
        } else if v > max {
            p.push((name, format!("must be <= {max:e}, got {v:e}")));
        }
    }
    let l = &f.layers;
    for (name, v) in [
        ("features.layers.conv", l.conv),
        ("features.layers.matmul", l.matmul),
        ("features.layers.norm", l.norm),
        ("features.layers.recurrent", l.recurrent),
        ("features.layers.attention", l.attention),
        ("features.layers.other", l.other),
    ] {
        if v > MAX_LAYERS {
            p.push((name, format!("must be <= {MAX_LAYERS}, got {v}")));
        }
    }
}

impl JobSubmission {
    /// Semantic checks: (field, message) for every problem.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        self.text_problems(&mut p);
        self.size_problems(&mut p);
        if let Some(f) = &self.features {
            feature_problems(f, &mut p);
        }
        if let Some(m) = self.mem_gib {
            if !m.is_finite() || m <= 0.0 {
                p.push(("mem_gib", format!("must be a finite number > 0, got {m}")));
            } else if m > MAX_MEM_GIB {
                p.push(("mem_gib", format!("must be <= {MAX_MEM_GIB} (1 TiB), got {m:e}")));
            }
        }
        if let Some(e) = self.min_runtime_s.and_then(gpuplan_core::min_runtime_problem) {
            p.push(("min_runtime_s", e));
        }
        if let Some(t) = self.total_progress {
            if let Some(e) = total_progress_problem(t) {
                p.push(("total_progress", e));
            }
        }
        for (f, v, max, what) in [
            (
                "restart_cost_s",
                self.restart_cost_s,
                MAX_RESTART_COST_S,
                "one day",
            ),
            ("grace_s", self.grace_s, MAX_GRACE_S, "one hour"),
        ] {
            match v {
                Some(v) if !v.is_finite() || v < 0.0 => {
                    p.push((f, format!("must be a finite number >= 0, got {v}")));
                }
                // `{:e}`: 1e300 in full is three hundred digits.
                Some(v) if v > max => p.push((f, format!("must be <= {max} ({what}), got {v:e}"))),
                _ => {}
            }
        }
        p
    }

    /// The text fields' problems ([`JobSubmission::problems`]): name,
    /// command, hints; and the uid and crash limit.
    fn text_problems(&self, p: &mut Vec<(&'static str, String)>) {
        if self.name.trim().is_empty() {
            p.push(("name", "must not be empty".to_string()));
        }
        if self.name.chars().count() > MAX_NAME_CHARS || self.name.chars().any(char::is_control) {
            p.push((
                "name",
                format!("must be at most {MAX_NAME_CHARS} printable characters"),
            ));
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
        // Newlines and tabs are a script's; a NUL cannot be passed to
        // `sh -c` at all, so every launch would fail.
        if self.command.contains('\0') {
            p.push(("command", "must not contain a NUL byte".to_string()));
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
        if let Some(c) = self.max_crashes {
            if c > MAX_CRASHES {
                p.push(("max_crashes", format!("must be <= {MAX_CRASHES}, got {c}")));
            }
        }
    }

    /// GPU counts and batch sizes ([`JobSubmission::problems`]): each at
    /// least 1, each upper bound above its lower one, none over its limit.
    fn size_problems(&self, p: &mut Vec<(&'static str, String)>) {
        if self.min_gpus == 0 {
            p.push(("min_gpus", "must be >= 1, got 0".to_string()));
        }
        if self.min_gpus > MAX_GPUS_PER_JOB {
            p.push((
                "min_gpus",
                format!("must be <= {MAX_GPUS_PER_JOB}, got {}", self.min_gpus),
            ));
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
        for (f, v) in [
            ("batch_size", Some(self.batch_size)),
            ("max_batch_size", self.max_batch_size),
            ("min_local_bsz", self.min_local_bsz),
            ("max_local_bsz", self.max_local_bsz),
        ] {
            if let Some(v) = v.filter(|v| *v > MAX_BATCH_SIZE) {
                p.push((f, format!("must be <= {MAX_BATCH_SIZE}, got {v}")));
            }
        }
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

    fn ok() -> JobSubmission {
        JobSubmission::from_toml(OK, "j.toml").unwrap()
    }

    /// Issue 52 and 53: `min_runtime_s` (0 to a week) and `total_progress`
    /// (> 0) are refused out of range with the file's line and the field.
    #[test]
    fn min_runtime_and_total_progress_are_checked_by_name() {
        let sub = JobSubmission::from_toml(
            &format!("{OK}min_runtime_s = 600\ntotal_progress = 5e4\n"),
            "j.toml",
        )
        .unwrap();
        assert_eq!((sub.min_runtime_s, sub.total_progress), (Some(600.0), Some(5e4)));
        let e = JobSubmission::from_toml(&format!("{OK}min_runtime_s = -1\ntotal_progress = 0\n"), "j.toml")
            .unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].starts_with("j.toml:6:min_runtime_s: must be in 0..=604800 seconds"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("j.toml:7:total_progress: must be a finite number in (0, 1e15]"),
            "{e:?}"
        );
        let sub = JobSubmission {
            min_runtime_s: Some(f64::NAN),
            ..ok()
        };
        assert!(sub.check("request").unwrap_err()[0].starts_with("request:min_runtime_s:"));
    }

    /// Issue 49, item 5: a restart cost of 1e300 (the job never started,
    /// `reason: null`) is refused naming the field and its one-day bound;
    /// a day is accepted, as is any finite cost below it.
    #[test]
    fn an_unbounded_restart_cost_is_refused() {
        let e = JobSubmission::from_toml(&format!("{OK}restart_cost_s = 1e300\n"), "j.toml").unwrap_err();
        assert_eq!(
            e,
            vec!["j.toml:6:restart_cost_s: must be <= 86400 (one day), got 1e300".to_string()]
        );
        for bad in [f64::INFINITY, f64::NAN, -1.0] {
            let sub = JobSubmission {
                restart_cost_s: Some(bad),
                ..ok()
            };
            let e = sub.check("request").unwrap_err();
            assert_eq!(e.len(), 1, "{e:?}");
            assert!(
                e[0].starts_with("request:restart_cost_s: must be a finite number >= 0"),
                "{e:?}"
            );
        }
        for good in [0.0, 120.0, MAX_RESTART_COST_S] {
            let sub = JobSubmission {
                restart_cost_s: Some(good),
                ..ok()
            };
            assert_eq!(sub.check("request"), Ok(()));
        }
    }

    /// Issue 49, item 5: a NUL byte in `command` (accepted, then failed at
    /// every launch) is refused naming the field; newlines and tabs, a
    /// script's, are not. Every other string field refuses it too.
    #[test]
    fn a_nul_byte_is_refused_naming_the_field() {
        let sub = JobSubmission {
            command: "echo a\0b".into(),
            ..ok()
        };
        assert_eq!(
            sub.check("request"),
            Err(vec!["request:command: must not contain a NUL byte".to_string()])
        );
        let script = JobSubmission {
            command: "set -e\n\techo a\necho b\n".into(),
            ..ok()
        };
        assert_eq!(script.check("request"), Ok(()));
        let nul = Some("a\0b".to_string());
        let sub = JobSubmission {
            name: "a\0b".into(),
            app: nul.clone(),
            model: nul.clone(),
            queue: nul,
            ..ok()
        };
        let fields: Vec<&str> = sub.problems().iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["name", "app", "model", "queue"]);
    }

    /// Issue 49, item 5: `name` is counted in characters, not bytes: 128
    /// "é" (256 bytes) are accepted, 129 refused.
    #[test]
    fn a_name_is_counted_in_characters() {
        let named = |n: usize| JobSubmission {
            name: "é".repeat(n),
            ..ok()
        };
        assert_eq!(named(128).name.len(), 256);
        assert_eq!(named(128).check("request"), Ok(()));
        assert_eq!(
            named(129).check("request"),
            Err(vec![
                "request:name: must be at most 128 printable characters".to_string()
            ])
        );
    }

    /// Every other number of a submission has a bound, and a value past it
    /// is refused naming its field (the API answers 400 with it); at the
    /// bound it is accepted.
    #[test]
    fn every_number_has_a_bound() {
        let mut huge = ok();
        huge.min_gpus = 5000;
        huge.max_gpus = 5000;
        huge.batch_size = 2_000_000;
        huge.max_batch_size = Some(u32::MAX);
        huge.min_local_bsz = Some(1_000_001);
        huge.max_local_bsz = Some(1_000_001);
        huge.max_crashes = Some(u32::MAX);
        huge.grace_s = Some(1e9);
        huge.mem_gib = Some(1e9);
        huge.features = Some(gpuplan_core::predict::ModelFeatures {
            flops_per_sample: 1e300,
            params: 1e300,
            layers: gpuplan_core::predict::LayerCounts {
                conv: u32::MAX,
                matmul: u32::MAX,
                norm: u32::MAX,
                recurrent: u32::MAX,
                attention: u32::MAX,
                other: u32::MAX,
            },
        });
        let fields: Vec<&str> = huge.problems().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            fields,
            [
                "max_crashes",
                "min_gpus",
                "max_gpus",
                "batch_size",
                "max_batch_size",
                "min_local_bsz",
                "max_local_bsz",
                "features.flops_per_sample",
                "features.params",
                "features.layers.conv",
                "features.layers.matmul",
                "features.layers.norm",
                "features.layers.recurrent",
                "features.layers.attention",
                "features.layers.other",
                "mem_gib",
                "grace_s",
            ]
        );
        let mut at = ok();
        at.min_gpus = MAX_GPUS_PER_JOB;
        at.max_gpus = MAX_GPUS_PER_JOB;
        at.batch_size = MAX_BATCH_SIZE;
        at.max_batch_size = Some(MAX_BATCH_SIZE);
        at.min_local_bsz = Some(MAX_BATCH_SIZE);
        at.max_local_bsz = Some(MAX_BATCH_SIZE);
        at.max_crashes = Some(MAX_CRASHES);
        at.uid = Some(MAX_UID);
        at.grace_s = Some(MAX_GRACE_S);
        at.restart_cost_s = Some(MAX_RESTART_COST_S);
        at.mem_gib = Some(MAX_MEM_GIB);
        at.features = Some(gpuplan_core::predict::ModelFeatures {
            flops_per_sample: MAX_FLOPS_PER_SAMPLE,
            params: MAX_PARAMS,
            layers: gpuplan_core::predict::LayerCounts {
                conv: MAX_LAYERS,
                ..Default::default()
            },
        });
        assert_eq!(at.check("request"), Ok(()));
    }
}
