//! `gpuplan plan`: solve one round from a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_core::{JobGpus, Plan, PlanReport, Round};
use gpuplan_solve::{registry, run_round, Change, Decision, Limits};
use serde::Serialize;

use crate::cli::Format;

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Round file (JSON, docs/round-format.md).
    #[arg(long)]
    pub input: PathBuf,
    #[arg(long)]
    pub planner: String,
    /// Power-mean exponent; overrides the file's params.p. Use -inf for max-min.
    #[arg(long, allow_hyphen_values = true)]
    pub p: Option<f64>,
    /// Solver time limit, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Relative MIP gap at which to stop.
    #[arg(long, default_value_t = 1e-4)]
    pub gap: f64,
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
}

/// The plan as users' scripts read it.
#[derive(Serialize)]
pub struct PlanOut {
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

/// `  t4, slowest node3 GPU 1: 1.12 (class A), expected 1.90`: the table's
/// words for [`JobGpus`].
fn hardware_text(h: &JobGpus) -> String {
    let mut s = format!("  {}", h.gpu_types.join("+"));
    if let Some(v) = &h.variability {
        s += &format!(
            ", slowest {} GPU {}: {:.3} (class {:?}), expected {:.3}",
            v.slowest_node, v.slowest_gpu.1, v.slowdown, v.class, v.expected_factor
        );
    }
    s
}

/// Read and check a round file; errors name the file, line and field.
pub fn load_round(path: &Path) -> Result<Round> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let round: Round = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {}", path.display(), e.line(), e.column(), e))?;
    if let Err(errs) = round.check() {
        bail!("{}: invalid round:\n  {}", path.display(), errs.join("\n  "));
    }
    Ok(round)
}

pub fn plan(a: PlanArgs) -> Result<ExitCode> {
    let mut planner = registry::create(&a.planner)?;
    let mut round = load_round(&a.input)?;
    if let Some(p) = a.p {
        round.params.p = p;
        let errs = round
            .params
            .check(round.variability.is_some())
            .err()
            .unwrap_or_default();
        if let Some(e) = errs.iter().find(|e| e.field == gpuplan_core::ParamField::P) {
            bail!("--p: {}", e.problem);
        }
    }
    if a.time_limit.is_nan() || a.time_limit <= 0.0 || a.gap.is_nan() || a.gap < 0.0 {
        bail!("--time-limit must be > 0 and --gap >= 0");
    }
    let limits = Limits {
        time_limit_s: a.time_limit,
        gap: a.gap,
        threads: a.threads.max(1),
        seed: a.seed,
    };
    let decision = run_round(planner.as_mut(), &round, &limits)?;
    let out = PlanOut::new(&round, &decision);
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => {
            println!(
                "planner {}  status {:?}  objective {:.4}  solve {:.1} ms",
                out.report.planner, out.report.status, out.report.objective, out.report.solve_ms
            );
            if let Some(r) = &out.report.reason {
                println!("note: {r}");
            }
            for (job, nodes) in &out.allocations {
                let hw = out.hardware.get(job).map_or(String::new(), hardware_text);
                println!("  {job:<20} {} GPUs on nodes {:?}{hw}", nodes.len(), nodes);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
