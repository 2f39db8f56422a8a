//! What the page needs to draw its editor: bundled workloads, upload
//! formats, the browser's limits and every planner fact, read from the
//! registry.

use gpuplan_core::Placement;
use gpuplan_sim::trace::Format;
use gpuplan_solve::{registry, BatchPolicy};
use serde::Serialize;

use super::bundled::{all_workloads, UPLOAD_FORMATS};
use super::error::{to_json, ApiError};
use super::scenario::{Scenario, MAX_GPUS, MAX_JOBS, MAX_NODES};

/// One accepted upload format, as the page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct FormatInfo {
    /// The format's name, as the CLI's `--format`.
    pub name: &'static str,
    /// What the file looks like (its header, or the field count).
    pub looks_like: &'static str,
}

fn looks_like(f: Format) -> &'static str {
    match f {
        Format::Gpuplan => "gpuplan native CSV: name,submit_s,gpus,... (docs/workload-format.md)",
        Format::Pollux => "Pollux workload CSV: name,time,application,num_replicas,batch_size",
        Format::Philly => "Pollux's philly.csv: timestamp,duration,num_gpus,gpu_time,cluster",
        Format::Tiresias => "Tiresias job CSV: job_id,num_gpu,submit_time,...,model_name,duration",
        Format::Shockwave => "Shockwave .trace: 12 TAB-separated fields",
        Format::Pal => "PAL / Sia-Philly CSV: job_id,num_gpus,submit_time,duration,model",
        Format::Gavel => "Gavel .trace: 7 or 10 TAB-separated fields",
    }
}

/// One bundled workload as the page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadInfo {
    /// `workloads/workload-6`: the trace path without `.csv`.
    pub id: String,
    /// What the page's menu shows (its set and file).
    pub label: String,
    /// How many jobs it has.
    pub jobs: usize,
}

/// What the page needs to draw its editor. Everything about planners comes
/// from the registry, so the page holds no list or help text of its own.
#[derive(Debug, Serialize)]
pub struct Catalog {
    /// The bundled workloads, in menu order.
    pub workloads: Vec<WorkloadInfo>,
    /// Every planner the browser can run, in registry order.
    pub policies: Vec<&'static str>,
    /// Each policy's description and parameter defaults, in `policies`' order.
    pub policy_info: Vec<PolicyInfo>,
    /// The scenario the editor starts from.
    pub defaults: Scenario,
    /// The default of each key [`Catalog::defaults`] and links leave out
    /// while it holds it (an unset optional number has none: the policy's
    /// own), so the editor's fields start from the CLI's defaults.
    pub omitted_defaults: serde_json::Value,
    /// Formats an upload may be in (detected from the first line, as the CLI does).
    pub formats: Vec<FormatInfo>,
    /// What the browser takes on at most, for the page to state.
    pub limits: BrowserLimits,
    /// Placement stages, `default` first (the CLI's `--placement` values).
    pub placements: Vec<&'static str>,
    /// The policies that place through the stage; the others refuse any
    /// placement but `default`, as the CLI does.
    pub placement_policies: Vec<&'static str>,
    /// The policies that may put several jobs on one GPU (`sharing` > 1).
    pub sharing_policies: Vec<&'static str>,
    /// The policies a load sweep compares unless the user picks others.
    pub sweep_policies: Vec<&'static str>,
    /// The planner the round inspector re-solves with unless the user picks another.
    pub resolve_planner: &'static str,
    /// The values of the CLI's choice flags, by scenario key, each in the
    /// simulator's own spelling, default first: the editor's menus.
    pub choices: Choices,
}

/// The values of the CLI's choice flags (serde's names of sim's and core's
/// enums, so a renamed value reaches the page with no edit here).
#[derive(Debug, Serialize)]
pub struct Choices {
    /// `--duration-jobs`.
    pub duration_jobs: Vec<serde_json::Value>,
    /// `--variability-draw`.
    pub variability_draw: Vec<serde_json::Value>,
    /// `--sharing-pairs`.
    pub sharing_pairs: Vec<serde_json::Value>,
    /// `--restart-charge`.
    pub restart_charge: Vec<serde_json::Value>,
    /// `--interference`.
    pub interference: Vec<&'static str>,
    /// `--trace-format` (empty: told from the first line).
    pub trace_format: Vec<&'static str>,
    /// `--variability`: none, the bundled sets, and `upload` (a file).
    pub variability: Vec<&'static str>,
    /// `--estimate-work`.
    pub estimate_work: Vec<serde_json::Value>,
}

fn names<T: Serialize>(values: &[T]) -> Vec<serde_json::Value> {
    values
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or_default())
        .collect()
}

fn omitted_defaults() -> serde_json::Value {
    let d = Scenario::default();
    serde_json::json!({
        "sharing": d.sharing,
        "queues": d.queues,
        "fairness": d.fairness,
        "estimates": d.estimates,
        "type_blind": d.type_blind,
        "variability_blind": d.variability_blind,
        "left_out_cost": d.left_out_cost,
        "spare_waiting": d.spare_waiting,
        "restart_charge": d.restart_charge,
        "max_sim_days": d.max_sim_days,
        "run_idle_rounds": d.run_idle_rounds,
        "trace_format": d.trace_format,
        "skip_bad_rows": d.skip_bad_rows,
        "duration_jobs": d.duration_jobs,
        "shrink_to_fit": d.shrink_to_fit,
        "gavel_gpu_type": d.gavel_gpu_type,
        "variability_draw": d.variability_draw,
        "sharing_pairs": d.sharing_pairs,
        "round_log": d.round_log,
        "estimate_work": d.estimate_work,
        "estimate_every": d.estimate_every,
        "estimate_budget_s": d.estimate_budget_s,
        "estimate_no_ranges": d.estimate_no_ranges,
        "estimate_spread": d.estimate_spread,
        "estimate_skip_steady": d.estimate_skip_steady,
    })
}

fn choices() -> Choices {
    use gpuplan_core::{Interference, SharingPairs};
    use gpuplan_sim::trace::workload::DurationJobs;
    use gpuplan_sim::variability::{Draw, BUNDLED};
    use gpuplan_sim::RestartCost;
    Choices {
        duration_jobs: names(&[DurationJobs::Rigid, DurationJobs::Pollux]),
        variability_draw: names(&[Draw::Node, Draw::Pal]),
        sharing_pairs: names(&[SharingPairs::All, SharingPairs::Measured]),
        restart_charge: names(&[RestartCost::Checkpoint, RestartCost::Fixed]),
        interference: Interference::ALL.map(Interference::name).to_vec(),
        trace_format: std::iter::once("")
            .chain(UPLOAD_FORMATS.map(Format::name))
            .collect(),
        estimate_work: names(&[gpuplan_sim::KnownWork::Declared, gpuplan_sim::KnownWork::History]),
        variability: std::iter::once("none")
            .chain(BUNDLED.map(|b| b.0))
            .chain(std::iter::once("upload"))
            .collect(),
    }
}

/// One registered planner as the page explains it (`registry::Entry`).
#[derive(Debug, Serialize)]
pub struct PolicyInfo {
    /// Its registry name.
    pub name: &'static str,
    /// One line: the policy's help.
    pub description: &'static str,
    /// The round-file keys it sets differently from Pollux's, with its values.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Whether it plans for goodput (batch sizes re-optimised: the goodput
    /// objective the inspector shows is what it maximises).
    pub goodput: bool,
}

/// [`MAX_NODES`], [`MAX_GPUS`], [`MAX_JOBS`], by name.
#[derive(Debug, Serialize)]
pub struct BrowserLimits {
    /// [`MAX_NODES`].
    pub nodes: u32,
    /// [`MAX_GPUS`].
    pub gpus: u32,
    /// [`MAX_JOBS`].
    pub jobs: usize,
}

/// The sweep's default comparison: a published baseline against Pollux's
/// objective solved exactly.
const SWEEP_POLICIES: [&str; 2] = ["tiresias", "pollux-mip"];

/// The inspector re-solves with the exact goodput MIP: the plan the round's
/// objective could reach.
const RESOLVE_PLANNER: &str = "pollux-mip";

/// Bundled workloads, planners and the default scenario. Cheap (no profile
/// parsing), so the page can draw its editor as soon as the module loads.
pub fn catalog() -> Result<String, ApiError> {
    to_json(&catalog_of(registry::entries()))
}

/// The catalog over a list of registry entries: every planner fact the page
/// shows is read from them (a test adds an entry and sees it everywhere).
pub(super) fn catalog_of(entries: &[registry::Entry]) -> Catalog {
    let planners: Vec<_> = entries.iter().map(|e| (e, (e.create)())).collect();
    let workloads = all_workloads()
        .into_iter()
        .map(|(id, label, text)| WorkloadInfo {
            id,
            label,
            // Bundled files are well-formed: one job a line after the header.
            jobs: text.lines().skip(1).filter(|l| !l.trim().is_empty()).count(),
        })
        .collect();
    Catalog {
        workloads,
        policies: entries.iter().map(|e| e.name).collect(),
        policy_info: planners
            .iter()
            .map(|(e, p)| PolicyInfo {
                name: e.name,
                description: e.description,
                params: e.param_defaults(),
                goodput: p.traits().batch == BatchPolicy::Adaptive,
            })
            .collect(),
        defaults: Scenario::default(),
        omitted_defaults: omitted_defaults(),
        formats: UPLOAD_FORMATS
            .iter()
            .map(|&f| FormatInfo {
                name: f.name(),
                looks_like: looks_like(f),
            })
            .collect(),
        limits: BrowserLimits {
            nodes: MAX_NODES,
            gpus: MAX_GPUS,
            jobs: MAX_JOBS,
        },
        placements: Placement::ALL.map(Placement::name).to_vec(),
        placement_policies: planners
            .iter()
            .filter(|(_, p)| p.placement_stage())
            .map(|(e, _)| e.name)
            .collect(),
        sharing_policies: planners
            .iter()
            .filter(|(_, p)| p.shares_gpus())
            .map(|(e, _)| e.name)
            .collect(),
        sweep_policies: SWEEP_POLICIES.to_vec(),
        resolve_planner: RESOLVE_PLANNER,
        choices: choices(),
    }
}
