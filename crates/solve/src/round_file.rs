//! A round file as a user hands it in (`gpuplan plan --input`, Python's
//! `Planner.plan`), and the plan as their scripts read it back.
//!
//! One reading for every front end that takes a round from a user: the
//! JSON is parsed, the planner's registry defaults fill the params the
//! file leaves unset ([`with_registry_defaults`]), and the round is checked,
//! every problem named by its JSON path. The CLI and the Python package
//! both call [`parse_round`], so a file gives the same round, the same
//! errors and (through [`crate::run_round`]) the same plan in both.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use gpuplan_core::{JobGpus, Plan, PlanReport, Round};

use crate::{registry, Change, Decision};

/// Why a round file was refused: a JSON error (where serde stopped) or
/// every problem the round check found. Displays as `gpuplan plan` prints it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RoundFileError {
    /// Not JSON, or JSON that is not a round (a missing key, a wrong type).
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file's name, as the caller names it.
        file: String,
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
        /// serde's message.
        message: String,
    },
    /// A round that parses but breaks the round's rules; every problem, each
    /// starting with its JSON path (`jobs[0] (a).min_gpus: …`).
    #[error("{file}: invalid round:\n  {}", .problems.join("\n  "))]
    Invalid {
        /// The file's name, as the caller names it.
        file: String,
        /// Every problem of the round, each naming its JSON path.
        problems: Vec<String>,
    },
}

impl RoundFileError {
    /// Every problem as a line starting with its path (one line for a
    /// JSON error).
    pub fn problems(&self) -> Vec<String> {
        match self {
            RoundFileError::Syntax {
                line,
                column,
                message,
                ..
            } => vec![format!("{line}:{column}: {message}")],
            RoundFileError::Invalid { problems, .. } => problems.clone(),
        }
    }
}

/// A round file's text (`source` names it in errors) as `planner` plans
/// it: the planner's registry defaults ([`registry::Entry::param_defaults`],
/// e.g. `gpuplan-mip`'s exploration cap and restart weight) fill every
/// `params` key the file leaves out, while every key the file gives wins,
/// as the simulator's flags win over the same defaults. An unknown planner
/// adds nothing (the caller refuses it when it creates the planner).
pub fn parse_round(source: &str, text: &str, planner: &str) -> Result<Round, RoundFileError> {
    let syntax = |e: serde_json::Error| RoundFileError::Syntax {
        file: source.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    // Deserialised from the text first, so that an error names its line.
    let mut round: Round = serde_json::from_str(text).map_err(syntax)?;
    let defaults = registry::entry(planner)
        .map(|e| e.param_defaults())
        .unwrap_or_default();
    if !defaults.is_empty() {
        let mut value: Value = serde_json::from_str(text).map_err(syntax)?;
        if let Some(obj) = value.as_object_mut() {
            let params = obj.entry("params").or_insert_with(|| Value::Object(Map::new()));
            if let Some(given) = params.as_object_mut() {
                fill(given, &defaults);
            }
        }
        // The same text with keys added that the round's own types wrote:
        // it deserialises as the text did.
        round = serde_json::from_value(value).map_err(syntax)?;
    }
    round.check().map_err(|problems| RoundFileError::Invalid {
        file: source.to_string(),
        problems,
    })?;
    Ok(round)
}

/// `params` as a round file gives them (a JSON object of round-file keys),
/// with `planner`'s registry defaults for every key it leaves out: the rule
/// of [`parse_round`], for callers that hold params rather than a file.
pub fn with_registry_defaults(planner: &str, given: &Map<String, Value>) -> Map<String, Value> {
    let mut out = given.clone();
    if let Ok(e) = registry::entry(planner) {
        fill(&mut out, &e.param_defaults());
    }
    out
}

/// Insert each key of `defaults` that `given` lacks; inside an object both
/// have (`priority`), the same one level down.
fn fill(given: &mut Map<String, Value>, defaults: &Map<String, Value>) {
    for (k, d) in defaults {
        match (given.get_mut(k), d) {
            (None, _) => {
                given.insert(k.clone(), d.clone());
            }
            (Some(Value::Object(g)), Value::Object(d)) => fill(g, d),
            (Some(_), _) => {}
        }
    }
}

/// The plan as users' scripts read it (`gpuplan plan --format json`,
/// Python's `Planner.plan`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanOut {
    /// Planner, status, objective, bound, gap, solve time and reason.
    #[serde(flatten)]
    pub report: PlanReport,
    /// Job name → one node index per GPU.
    pub allocations: BTreeMap<String, Vec<u32>>,
    /// Job name → its GPUs as `[node, index on the node]`.
    pub gpus: BTreeMap<String, Vec<(u32, u32)>>,
    /// Job name → what changes for it (start, stop, move, resize, keep, wait).
    pub changes: BTreeMap<String, Change>,
    /// Job name → its GPUs' type and, when the round has variability, its
    /// slowest GPU and expected factor (as the browser's round inspector shows).
    pub hardware: BTreeMap<String, JobGpus>,
}

impl PlanOut {
    /// The report of `decision` on `round` (the objective evaluated here).
    pub fn new(round: &Round, decision: &Decision) -> Self {
        let plan: &Plan = &decision.plan;
        let mut allocations = BTreeMap::new();
        let mut gpus = BTreeMap::new();
        let mut hardware = BTreeMap::new();
        for j in &round.jobs {
            if let Some(a) = plan.allocations.get(&j.id) {
                if let Some(h) = JobGpus::new(round, j, a) {
                    hardware.insert(j.name.clone(), h);
                }
                allocations.insert(j.name.clone(), a.nodes().map(|n| n.0).collect());
                gpus.insert(
                    j.name.clone(),
                    a.gpus().iter().map(|g| (g.node.0, g.index)).collect(),
                );
            }
        }
        let changes = round
            .jobs
            .iter()
            .zip(&decision.diff)
            .map(|(j, c)| (j.name.clone(), c.change))
            .collect();
        PlanOut {
            report: PlanReport::new(round, plan),
            allocations,
            gpus,
            changes,
            hardware,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str =
        r#"{"now_s": 0, "cluster": {"nodes": [{"name": "n0", "gpus": 4, "gpu_type": "t4"}]}, "jobs": []}"#;

    #[test]
    fn registry_defaults_fill_only_what_the_file_leaves_out() {
        let r = parse_round("t.json", TINY, "gpuplan-mip").unwrap();
        let d = registry::default_params("gpuplan-mip");
        assert_eq!(r.params.exploration_factor, d.exploration_factor);
        assert_eq!(r.params.restart_weight, d.restart_weight);
        // A key the file gives wins over the planner's default.
        let given = TINY.replace(
            r#""jobs": []"#,
            r#""jobs": [], "params": {"exploration_factor": 3}"#,
        );
        let r = parse_round("t.json", &given, "gpuplan-mip").unwrap();
        assert_eq!(r.params.exploration_factor, 3);
        assert_eq!(r.params.restart_weight, d.restart_weight);
        // Other planners: Pollux's params, as before.
        let r = parse_round("t.json", TINY, "pollux-mip").unwrap();
        assert_eq!(r.params, gpuplan_core::PolicyParams::default());
        let m = with_registry_defaults("gpuplan-mip", &Map::new());
        assert_eq!(
            Value::Object(m),
            Value::Object(registry::entry("gpuplan-mip").unwrap().param_defaults())
        );
    }

    #[test]
    fn errors_name_the_line_or_every_path() {
        let e = parse_round("t.json", "{\n  \"now_s\": 0,\n}", "fifo").unwrap_err();
        assert!(matches!(e, RoundFileError::Syntax { line: 3, .. }), "{e}");
        assert!(e.to_string().starts_with("t.json:3:"), "{e}");
        let bad = r#"{"now_s": 0, "cluster": {"nodes": [{"name": "n0", "gpus": 0, "gpu_type": "t4"}]},
            "jobs": [], "params": {"sharing": 0}}"#;
        let e = parse_round("t.json", bad, "gpuplan-mip").unwrap_err();
        let problems = e.problems();
        assert!(
            problems.iter().any(|p| p.starts_with("cluster.nodes[0].gpus:")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("params.sharing:")),
            "{problems:?}"
        );
        assert!(e.to_string().starts_with("t.json: invalid round:\n  "), "{e}");
    }
}
