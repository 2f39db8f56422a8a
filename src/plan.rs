//! `gpuplan plan`: solve one round from a file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_core::{JobGpus, Round};
use gpuplan_solve::{parse_round, registry, run_round, Limits, PlanOut};

use crate::common::{memory_limit_mb, Format};

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
    /// Most memory a planner's model may take, MiB; a larger model is not
    /// built and the planner falls back to greedy, marked with the reason
    /// (default: half the machine's memory; 0: no limit).
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
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

/// Read and check a round file for `planner` ([`gpuplan_solve::parse_round`]:
/// the planner's registry defaults fill the params the file leaves out);
/// errors name the file, line and field.
pub fn load_round(path: &Path, planner: &str) -> Result<Round> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(parse_round(&path.display().to_string(), &text, planner)?)
}

pub fn plan(a: PlanArgs) -> Result<ExitCode> {
    let mut planner = registry::create(&a.planner)?;
    let mut round = load_round(&a.input, &a.planner)?;
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
    let limits = Limits {
        time_limit_s: a.time_limit,
        gap: a.gap,
        threads: a.threads,
        seed: a.seed,
        memory_limit_mb: memory_limit_mb(a.memory_limit),
    };
    if let Err(errs) = limits.check() {
        let flag = |f: &str| match f {
            "gap" => "--gap",
            "threads" => "--threads",
            _ => "--time-limit",
        };
        let lines: Vec<String> = errs.iter().map(|(f, e)| format!("{}: {e}", flag(f))).collect();
        bail!("{}", lines.join("; "));
    }
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
