//! One scheduling round: the input every planner gets.
//!
//! A round is a snapshot: the cluster, the active jobs with what has been
//! measured about them, and the policy parameters. It is what `gpuplan plan
//! --input` reads and what `simulate --dump-rounds` writes, so it is plain
//! serde data.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, GpuType};
use crate::job::{Allocation, GpuId, JobId, JobState};
use crate::math::Libm;
use crate::model::GoodputModel;
use crate::variability::{PerfClass, RoundVariability};

/// Whether nodes may be shared by several multi-node jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interference {
    /// Pollux's rule: at most one multi-node job per node.
    #[default]
    Avoid,
    /// No restriction.
    Allow,
}

impl Interference {
    /// Every rule, in the order drivers list them.
    pub const ALL: [Interference; 2] = [Interference::Avoid, Interference::Allow];

    /// The rule's name in round files, flags and the explorer.
    pub fn name(self) -> &'static str {
        match self {
            Interference::Avoid => "avoid",
            Interference::Allow => "allow",
        }
    }
}

/// The one reading of a rule's name, for every driver (the CLI's flag,
/// the explorer's scenario, the Python package), so none keeps a match of
/// its own.
impl std::str::FromStr for Interference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Interference::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown interference rule '{s}'; valid: {}",
                    Interference::ALL.map(Interference::name).join(", ")
                )
            })
    }
}

/// Policy parameters shared by goodput-based planners.
/// Unknown keys are refused: a misspelt parameter (`"p_min": true`) must
/// not be silently ignored.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyParams {
    /// Power-mean exponent; `f64::NEG_INFINITY` = max-min, written `"-inf"`
    /// in JSON (see `p_json`). Supported: [`P_MIN`]..=[`P_MAX`] or −∞.
    #[serde(with = "p_json")]
    pub p: f64,
    /// δ in the restart factor (age − δ·restarts)/(age + δ).
    pub restart_penalty_s: f64,
    /// Whether several multi-node jobs may share a node.
    pub interference: Interference,
    /// Pollux's exploration cap: at most this × the most GPUs a job has used.
    pub exploration_factor: u32,
    /// Most nodes one job may span.
    pub max_nodes_per_job: u32,
    /// Multi-node jobs hold as many GPUs on each of their nodes. Workload
    /// managers such as Slurm allocate one GPU count per node for a job, so
    /// a round applied through them must not plan 4+2. Off by default;
    /// absent from older round files.
    #[serde(default, skip_serializing_if = "is_default")]
    pub even_nodes: NodeCounts,
    /// How fixed-size policies (fifo, srtf, tiresias, ...) choose GPUs for
    /// the jobs they run. Absent: each policy's own placement, as before.
    #[serde(default, skip_serializing_if = "is_default")]
    pub placement: Placement,
    /// Whether a running job keeps its GPUs under a `placement` other than
    /// `default` (which always keeps them). Absent: re-placed every round.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sticky: Sticky,
    /// How many times its duration a restart is charged in the restart
    /// factor (`gpuplan-mip`: 2). Absent: 1, Pollux's.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub restart_weight: f64,
    /// Sia's valuation (SOSP'23), for heterogeneous clusters under load:
    /// when > 0 (Sia: 1.1), each job's speedups are divided by its least
    /// configuration's ([`crate::objective::least_speedup`]), so every job's
    /// smallest allocation is worth 1, and a job left without GPUs costs
    /// this in Σ (v+ε)^p instead of ε^p. A planner may then leave a job
    /// queued to grow another that gains more, which shortens average JCT
    /// when jobs outnumber GPUs (docs/heterogeneity.md). Needs p < 0.
    /// Absent: 0, off (Pollux's objective: every job is started first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out_cost: f64,
    /// Charge the restart factor only to a job that holds GPUs and is
    /// older than its restart penalty (Sia's rule): a waiting job has no
    /// allocation to lose. Absent: off (Pollux charges every change).
    #[serde(default, skip_serializing_if = "is_default")]
    pub spare_waiting: RestartCharge,
    /// Least-attained-service priority blended into the goodput mean
    /// (`gpuplan-mip`). Absent: off, Pollux's objective.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: Priority,
    /// Most jobs one GPU may hold (k). 1, the default, is no sharing: a GPU
    /// belongs to one job, as in rounds written before sharing existed.
    /// Above 1, jobs that fit in a GPU's memory may share it
    /// ([`crate::colocation`]); the planners that share decide where.
    #[serde(default = "one_u32", skip_serializing_if = "is_one_u32")]
    pub sharing: u32,
    /// Which pairs may share a GPU when `sharing` > 1: any whose memories
    /// fit, or only pairs whose co-located speeds were measured
    /// ([`crate::colocation::may_group`]). Absent: any, as before.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sharing_pairs: SharingPairs,
    /// Plan as Pollux does, not knowing GPU types: every job is valued on
    /// every type by its one reference model (as if all GPUs were the type
    /// it was fitted on). The pipeline hides the per-type models from the
    /// planner ([`RoundJob::blind`]); jobs still never mix types, and the
    /// simulator still runs them at their true speed. For comparisons with
    /// type-aware planners (Sia's). Absent: off, types known.
    #[serde(default, skip_serializing_if = "is_default")]
    pub type_blind: Sight,
    /// Plan without knowing per-GPU variability: the pipeline hides the
    /// round's `variability` from the planner (and its placement stage), so
    /// every GPU of a type is valued alike; the simulator still runs jobs at
    /// their true slowdowns. For measuring what seeing variability is worth.
    /// Absent: off.
    #[serde(default, skip_serializing_if = "is_default")]
    pub variability_blind: Sight,
    /// Seconds a job must have held its allocation before it may be
    /// shrunk, moved or preempted, where the job names no
    /// `min_runtime_s` of its own (Kueue's and KAI's minimum run time):
    /// the pipeline keeps such a job where it is
    /// ([`RoundJob::within_min_runtime`]). Absent: 0, off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_runtime_s: f64,
}

/// Which job pairs may share a GPU. Lucid shares only pairs it has
/// measured; `measured` is that rule, for a cluster that distrusts the
/// fitted curve where no pair was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingPairs {
    /// Any two jobs whose memories fit; unmeasured pairs are valued by the curve.
    #[default]
    All,
    /// Only pairs in the round's `colocation` measurements (by `colocation_key`).
    Measured,
}

/// Tiresias's least-attained-service idea inside the power mean, so short
/// jobs finish first without known durations: job j's value (speedup ×
/// restart factor) is multiplied by `(1 + attained_gpu_s / scale_gpu_s)^exponent`.
/// For p < 0 that is the same as weighting its term of Σ (v+ε)^p by that
/// factor to the power p: a job that has had more service weighs less, so
/// the GPUs it would get go to younger jobs unless it uses them much better.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Priority {
    /// 0 = off (every job's value unscaled).
    pub exponent: f64,
    /// The attained service (GPU-seconds) at which the factor reaches 2^exponent.
    pub scale_gpu_s: f64,
}

impl Default for Priority {
    fn default() -> Self {
        Priority {
            exponent: 0.0,
            scale_gpu_s: 3600.0,
        }
    }
}

impl Priority {
    /// The multiplier of a job's value at `attained_gpu_s` of service.
    pub fn factor(&self, attained_gpu_s: f64) -> f64 {
        if self.exponent == 0.0 {
            return 1.0;
        }
        (1.0 + attained_gpu_s.max(0.0) / self.scale_gpu_s).libm_pow(self.exponent)
    }
}

fn one_u32() -> u32 {
    1
}

fn is_one_u32(k: &u32) -> bool {
    *k == 1
}

fn one() -> f64 {
    1.0
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Behaviour switches that round files write as `true`/`false` (their form
/// since each key existed), named in code by what they select.
macro_rules! bool_switch {
    ($(#[$m:meta])* $name:ident { $(#[$fm:meta])* $off:ident, $(#[$tm:meta])* $on:ident $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
        #[serde(from = "bool", into = "bool")]
        pub enum $name {
            $(#[$fm])*
            #[default]
            $off,
            $(#[$tm])*
            $on,
        }

        impl From<bool> for $name {
            fn from(on: bool) -> Self {
                if on {
                    $name::$on
                } else {
                    $name::$off
                }
            }
        }

        impl From<$name> for bool {
            fn from(v: $name) -> bool {
                v == $name::$on
            }
        }
    };
}

bool_switch!(
    /// How a multi-node job's GPUs split over its nodes (`even_nodes`).
    NodeCounts {
        /// Any split (4+2 is fine).
        Any,
        /// The same count on each node (`true`): Slurm's one count per node.
        Even,
    }
);

bool_switch!(
    /// Who is charged the restart factor (`spare_waiting`).
    RestartCharge {
        /// Every job whose allocation changes (Pollux).
        Every,
        /// Only a job that holds GPUs and is older than its restart penalty
        /// (`true`, Sia's rule).
        HoldersOnly,
    }
);

bool_switch!(
    /// Whether planners see something the round knows (`type_blind`,
    /// `variability_blind`): hidden by the pipeline when `true`.
    Sight {
        /// The planner sees it.
        Seen,
        /// The pipeline hides it from the planner (`true`).
        Hidden,
    }
);

/// The placement stage of fixed-size policies (PAL's placements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// The policy's own placement (consolidated for most), running jobs
    /// kept: the behaviour before placements could be chosen.
    #[default]
    Default,
    /// Fewest nodes.
    Packed,
    /// Free GPUs drawn at random (seeded per round).
    Random,
    /// The fastest free GPUs for the job's class, locality ignored.
    PmFirst,
    /// PAL: the least expected slowdown, locality × variability.
    Pal,
    /// PAL's expected slowdowns, summed over the round's jobs and
    /// minimised jointly by a MIP (gpuplan's).
    Mip,
}

impl Placement {
    /// Every placement; parsing and the front ends' lists iterate it.
    pub const ALL: [Placement; 6] = [
        Placement::Default,
        Placement::Packed,
        Placement::Random,
        Placement::PmFirst,
        Placement::Pal,
        Placement::Mip,
    ];

    /// The kebab-case name used in the CLI and round files.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Default => "default",
            Placement::Packed => "packed",
            Placement::Random => "random",
            Placement::PmFirst => "pm-first",
            Placement::Pal => "pal",
            Placement::Mip => "mip",
        }
    }

    /// Whether the placement ranks GPUs by their measured speeds, and so
    /// means nothing on a round without per-GPU variability.
    pub fn needs_variability(self) -> bool {
        matches!(self, Placement::PmFirst | Placement::Pal | Placement::Mip)
    }
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Placement::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            format!(
                "unknown placement '{s}'; valid: {}",
                Placement::ALL.map(Placement::name).join(", ")
            )
        })
    }
}

/// Whether running jobs keep their GPUs under a chosen placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sticky {
    /// Every admitted job is placed afresh each round (PAL's PM-First and
    /// PAL; a job landing on its own GPUs again does not restart).
    #[default]
    Replace,
    /// A running job whose size is unchanged keeps its GPUs when free.
    Keep,
}

/// Most jobs one GPU may hold (`params.sharing`). The sharing planners
/// enumerate groups of up to k jobs per GPU, so their models grow as
/// jobs^k (k = 3 already strains the exact model's time limit), and the
/// slowdowns behind sharing were measured for pairs (Gavel).
pub const MAX_SHARING: u32 = 8;

/// Most negative finite p supported: below it the MIP terms (v+ε)^p exceed
/// what the solvers handle (at p = −8 HiGHS already fails on real rounds).
pub const P_MIN: f64 = -5.0;
/// Largest p supported, for the same reason on the other side.
pub const P_MAX: f64 = 10.0;

/// Whether `p` is one the planners handle: −∞ (max-min) or a number in
/// [`P_MIN`]..=[`P_MAX`]. Kept for callers that want the round file's
/// wording; drivers use [`PolicyParams::check`] and name their own flag.
pub fn check_p(p: f64) -> Result<(), String> {
    p_problem(p).map_or(Ok(()), |problem| {
        Err(ParamError::new(ParamField::P, problem).to_string())
    })
}

fn p_problem(p: f64) -> Option<String> {
    if p == f64::NEG_INFINITY || (P_MIN..=P_MAX).contains(&p) {
        None
    } else {
        Some(format!(
            "must be -inf (max-min) or in [{P_MIN}, {P_MAX}] (the range the solvers handle numerically), got {p}"
        ))
    }
}

/// The longest minimum run time a job or round may ask: a week. Longer
/// would let one job hold GPUs beyond any planning horizon.
pub const MAX_MIN_RUNTIME_S: f64 = 7.0 * 86400.0;

/// Why `s` is no minimum run time (seconds), if it is not.
pub fn min_runtime_problem(s: f64) -> Option<String> {
    (!(s.is_finite() && (0.0..=MAX_MIN_RUNTIME_S).contains(&s)))
        .then(|| format!("must be in 0..={MAX_MIN_RUNTIME_S} seconds (a week), got {s}"))
}

/// One setting of [`PolicyParams`]. Errors carry it, not a name, so each
/// driver words a problem with its own flag (`--p`) or key (`p`) and no
/// driver rewrites another's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamField {
    /// `p`.
    P,
    /// `restart_penalty_s`.
    RestartPenalty,
    /// `exploration_factor`.
    ExplorationFactor,
    /// `max_nodes_per_job`.
    MaxNodesPerJob,
    /// `placement`.
    Placement,
    /// `restart_weight`.
    RestartWeight,
    /// `left_out_cost`.
    LeftOutCost,
    /// `priority.exponent`.
    PriorityExponent,
    /// `priority.scale_gpu_s`.
    PriorityScale,
    /// `sharing`.
    Sharing,
    /// `min_runtime_s`.
    MinRuntime,
}

impl ParamField {
    /// The field's key under a round file's `params`.
    pub fn key(self) -> &'static str {
        match self {
            ParamField::P => "p",
            ParamField::RestartPenalty => "restart_penalty_s",
            ParamField::ExplorationFactor => "exploration_factor",
            ParamField::MaxNodesPerJob => "max_nodes_per_job",
            ParamField::Placement => "placement",
            ParamField::RestartWeight => "restart_weight",
            ParamField::LeftOutCost => "left_out_cost",
            ParamField::PriorityExponent => "priority.exponent",
            ParamField::PriorityScale => "priority.scale_gpu_s",
            ParamField::Sharing => "sharing",
            ParamField::MinRuntime => "min_runtime_s",
        }
    }
}

/// A policy parameter out of range: which one, and what is wrong with it
/// (`must be >= 1, got 0`), without the field's name so a driver can put
/// its own in front. Displays as a round file's path: `params.sharing: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The setting that is out of range.
    pub field: ParamField,
    /// What is wrong with it, without the field's name (`must be >= 1, got 0`).
    pub problem: String,
}

impl ParamError {
    /// The error for `field`, worded by `problem`.
    pub fn new(field: ParamField, problem: impl Into<String>) -> Self {
        ParamError {
            field,
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "params.{}: {}", self.field.key(), self.problem)
    }
}

impl std::error::Error for ParamError {}

impl PolicyParams {
    /// Every parameter out of range, for a round whose GPUs do (`variability`
    /// true) or do not carry per-GPU speeds. The one check of the params:
    /// the round check, the simulator's scenario, the daemon and the bench
    /// all call it, and only word its errors.
    pub fn check(&self, variability: bool) -> Result<(), Vec<ParamError>> {
        use ParamField as F;
        let mut errs = Vec::new();
        let mut bad = |field, problem: String| errs.push(ParamError::new(field, problem));
        if let Some(e) = p_problem(self.p) {
            bad(F::P, e);
        }
        if self.sharing == 0 {
            bad(F::Sharing, "must be >= 1 (1 = a GPU per job)".into());
        } else if self.sharing > MAX_SHARING {
            bad(
                F::Sharing,
                format!(
                    "must be at most {MAX_SHARING} jobs per GPU (the sharing planners' groups grow as \
                     jobs^k; co-location slowdowns were measured for pairs), got {}",
                    self.sharing
                ),
            );
        }
        if self.max_nodes_per_job == 0 {
            bad(F::MaxNodesPerJob, "must be >= 1".into());
        }
        if self.exploration_factor == 0 {
            bad(F::ExplorationFactor, "must be >= 1".into());
        }
        if self.restart_penalty_s.is_nan() || self.restart_penalty_s < 0.0 {
            bad(F::RestartPenalty, "must be >= 0".into());
        }
        if let Some(e) = min_runtime_problem(self.min_runtime_s) {
            bad(F::MinRuntime, e);
        }
        let w = self.restart_weight;
        if !(w.is_finite() && (0.0..=100.0).contains(&w)) {
            bad(F::RestartWeight, format!("must be in 0..=100, got {w}"));
        }
        let l = self.left_out_cost;
        if !(l.is_finite() && (0.0..=1000.0).contains(&l)) {
            bad(F::LeftOutCost, format!("must be in 0..=1000, got {l}"));
        } else if l > 0.0 && !(self.p < 0.0 && self.p.is_finite()) {
            bad(
                F::LeftOutCost,
                format!("needs a finite p < 0, got p = {}", self.p),
            );
        }
        let pr = self.priority;
        if !(pr.exponent.is_finite() && (0.0..=4.0).contains(&pr.exponent)) {
            bad(
                F::PriorityExponent,
                format!("must be in 0..=4, got {}", pr.exponent),
            );
        }
        if !(pr.scale_gpu_s.is_finite() && pr.scale_gpu_s > 0.0) {
            bad(F::PriorityScale, format!("must be > 0, got {}", pr.scale_gpu_s));
        }
        if self.placement.needs_variability() && !variability {
            bad(
                F::Placement,
                format!(
                    "{} needs GPU variability: without per-GPU speeds every GPU is alike (use packed)",
                    self.placement.name()
                ),
            );
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

/// p in JSON: a number, or the string `"-inf"` for max-min (JSON has no
/// infinity, and `null` would be ambiguous). Written the same way, so a
/// dumped round reads back.
pub mod p_json {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &f64, s: S) -> Result<S::Ok, S::Error> {
        if *p == f64::NEG_INFINITY {
            s.serialize_str("-inf")
        } else {
            s.serialize_f64(*p)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(f64),
            Str(String),
        }
        let bad = || serde::de::Error::custom("p: a number, or the string \"-inf\" for max-min");
        // `null`: what versions before this spelling dumped for −∞ (JSON
        // has no infinity), so those round files still load.
        match Option::<Repr>::deserialize(d).map_err(|_| bad())? {
            None => Ok(f64::NEG_INFINITY),
            Some(Repr::Num(p)) => Ok(p),
            Some(Repr::Str(s)) if s.trim() == "-inf" => Ok(f64::NEG_INFINITY),
            Some(Repr::Str(_)) => Err(bad()),
        }
    }
}

impl Default for PolicyParams {
    fn default() -> Self {
        PolicyParams {
            p: -1.0,
            restart_penalty_s: 30.0,
            interference: Interference::Avoid,
            exploration_factor: 2,
            max_nodes_per_job: 16,
            even_nodes: NodeCounts::Any,
            placement: Placement::Default,
            sticky: Sticky::Replace,
            restart_weight: 1.0,
            left_out_cost: 0.0,
            spare_waiting: RestartCharge::Every,
            priority: Priority::default(),
            sharing: 1,
            sharing_pairs: SharingPairs::All,
            type_blind: Sight::Seen,
            variability_blind: Sight::Seen,
            min_runtime_s: 0.0,
        }
    }
}

/// Ground truth the simulator may reveal to oracle policies (Optimus+Oracle,
/// SRTF). Real planners ignore it; in a live cluster it is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Oracle {
    /// Optimizer steps left at the job's fixed batch size.
    pub remaining_iters: f64,
    /// True seconds per optimizer step on `k` packed GPUs at the fixed batch,
    /// index `k - 1`, for k = 1..=len.
    pub step_time_s: Vec<f64>,
}

/// One job as a planner sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundJob {
    /// The job's index, unique within the round.
    pub id: JobId,
    /// Display name; plan files key allocations by it.
    pub name: String,
    /// Application name: the fallback for the job's memory, variability class and type speeds.
    pub app: String,
    /// Submission time in seconds; queue-order planners (FIFO) sort by it.
    pub submit_s: f64,
    /// GPUs the user asked for (fixed-size policies use exactly this).
    pub requested_gpus: u32,
    /// Total batch size the user asked for.
    pub batch_size: u32,
    /// Fewest GPUs the job may run on when it runs.
    pub min_gpus: u32,
    /// Most GPUs the job may run on (0: it may not run).
    pub max_gpus: u32,
    /// Whether planners may stop or move it once it runs; if not, it keeps its exact GPUs.
    pub preemptible: bool,
    /// What has happened to the job so far: progress, age, restarts, current GPUs.
    pub state: JobState,
    /// Fitted goodput model; `None` until the job has run (speedup is then
    /// linear in GPUs, as Pollux assumes).
    #[serde(default)]
    pub model: Option<GoodputModel>,
    /// The GPU type `model` was fitted on (the first the job ran on); absent:
    /// the model holds for every type, as before types had speeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<GpuType>,
    /// Models fitted on the other types the job has run on. A type in
    /// neither place is predicted from `model` by the type-speed ratio
    /// ([`crate::perf_on`]), as Sia bootstraps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub type_models: Vec<TypedModel>,
    /// Ground truth for oracle policies (simulator only); real planners ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<Oracle>,
    /// Seconds this job loses per re-allocation, where it differs from the
    /// round's `params.restart_penalty_s`: an operator who measured a job's
    /// checkpoint and restore time says so per job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_penalty_s: Option<f64>,
    /// Seconds this job must hold an allocation before it may be shrunk,
    /// moved or preempted, where it differs from the round's
    /// `params.min_runtime_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_runtime_s: Option<f64>,
    /// The job's variability class; absent: from its `app`
    /// ([`crate::class_of`]). Read only when the round has
    /// `variability`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<PerfClass>,
    /// GPU memory the job needs per GPU (GiB), where known; absent: its
    /// application's estimate ([`crate::colocation::job_memory_gib`]).
    /// Read only when `params.sharing` > 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_gib: Option<f64>,
    /// The job's measured GPU utilization in [0, 1] (e.g. NVML's), where
    /// known; it replaces the goodput model's prediction when a planner
    /// weighs sharing ([`crate::colocation::predicted_utilization`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// The model's features (FLOPs per sample, parameters, layers), where
    /// the spec gives them: a job with no measured utilization and no
    /// goodput model yet gets the utilization predictor's estimate
    /// ([`crate::predict`]) instead of "fully busy".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<crate::predict::ModelFeatures>,
    /// The name under which the round's `colocation` measurements know this
    /// job's model (e.g. Gavel's "ResNet-18 (batch size 32)"); absent: no
    /// pair with it was measured, so the curve values it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocation_key: Option<String>,
    /// The (leaf) queue the job belongs to ([`Round::queues`]); absent:
    /// `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// A job's model fitted on one GPU type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedModel {
    /// The type the model was fitted on.
    pub gpu_type: GpuType,
    /// The goodput model fitted there.
    pub model: GoodputModel,
}

impl RoundJob {
    /// A queued one-GPU job with its identity only: submitted at 0, batch
    /// size 1, preemptible, and every optional fact (model, types, oracle,
    /// class, memory, utilization, features, co-location key) absent.
    /// Builders state what they know with struct update syntax
    /// (`RoundJob { batch_size: 64, ..RoundJob::new(id, name, app) }`), so a
    /// new optional fact is added here once, not at every builder.
    pub fn new(id: JobId, name: impl Into<String>, app: impl Into<String>) -> Self {
        RoundJob {
            id,
            name: name.into(),
            app: app.into(),
            submit_s: 0.0,
            requested_gpus: 1,
            batch_size: 1,
            min_gpus: 1,
            max_gpus: 1,
            preemptible: true,
            state: JobState::default(),
            model: None,
            model_type: None,
            type_models: Vec::new(),
            oracle: None,
            restart_penalty_s: None,
            min_runtime_s: None,
            class: None,
            mem_gib: None,
            utilization: None,
            features: None,
            colocation_key: None,
            queue: None,
        }
    }

    /// Whether the job is running and has held its allocation for less
    /// than its minimum run time (its own, else `params.min_runtime_s`):
    /// then it may not be shrunk, moved or preempted this round. A job
    /// whose run time is unknown is not held.
    pub fn within_min_runtime(&self, params: &PolicyParams) -> bool {
        let min = self.min_runtime_s.unwrap_or(params.min_runtime_s);
        !self.state.allocation.is_empty() && min > 0.0 && self.state.run_s.is_some_and(|r| r < min)
    }

    /// The GPUs the job holds now (empty when it is not running).
    pub fn current(&self) -> &Allocation {
        &self.state.allocation
    }

    /// The job's goodput model on GPUs of `gpu_type`: fitted there if it has
    /// run there, else `model` moved by the type-speed ratio. `None` type,
    /// or a model of no known type: `model` itself.
    pub fn model_on(&self, gpu_type: Option<&GpuType>) -> Option<GoodputModel> {
        let m = self.model?;
        let Some(t) = gpu_type else {
            return Some(m);
        };
        if let Some(tm) = self.type_models.iter().find(|tm| tm.gpu_type == *t) {
            return Some(tm.model);
        }
        Some(GoodputModel {
            perf: crate::gpu_speed::perf_on(m.perf, &self.app, self.model_type.as_ref(), Some(t)),
            ..m
        })
    }

    /// The job as a type-blind planner sees it: only its reference model,
    /// of no known type, so [`Self::model_on`] gives that model on every type.
    pub fn blind(&mut self) {
        self.model_type = None;
        self.type_models.clear();
    }

    /// The job's variability class: its own, else its application's.
    pub fn perf_class(&self) -> PerfClass {
        self.class.unwrap_or_else(|| PerfClass::of_app(&self.app))
    }

    /// Whether PAL's cross-node factor L applies to the job: a rigid job
    /// (no goodput model, a fixed size), as the simulator charges its trace
    /// jobs. A fitted model already prices the job's cross-node sync.
    pub fn pays_cross_node(&self) -> bool {
        self.model.is_none() && self.min_gpus == self.max_gpus
    }
}

// The limits `Round::check` applies live with the cluster, so the per-GPU
// table below the round can cap at them.
use crate::cluster::{MAX_GPUS_PER_NODE, MAX_GPUS_TOTAL};

/// The whole input of one planning round.
///
/// Loading names the GPUs of allocations written at node level (files from
/// before GPUs had identity), in job order: see [`bind_round`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RoundRepr")]
pub struct Round {
    /// Time of the round in seconds on the driver's clock (reports read it; planners do not).
    pub now_s: f64,
    /// The cluster the round plans over.
    pub cluster: Cluster,
    /// The jobs to plan, running and queued.
    pub jobs: Vec<RoundJob>,
    /// The policy settings every planner of the round reads.
    #[serde(default)]
    pub params: PolicyParams,
    /// Each GPU's slowdown per class and L, where the driver knows them (the
    /// simulator with `--variability`); absent: all GPUs of a type alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variability: Option<RoundVariability>,
    /// The interference model planners value shared jobs with: the curve and
    /// the pairs measured so far (Gavel's table in the simulator, the
    /// executor's own records live). Absent: the shipped curve, no pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocation: Option<crate::colocation_table::Colocation>,
    /// GPUs that jobs outside the round hold (the daemon's jobs it does
    /// not plan this round): no job of the round may be placed on one, so
    /// a driver applies the plan's GPUs as planned instead of picking
    /// others after validation. Absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<GpuId>,
    /// The teams sharing the cluster ([`crate::queue`]): guarantees,
    /// borrowing limits and reclaim every plan keeps. Absent: one pool, no
    /// queue rules, as before queues existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<crate::queue::Queue>,
}

/// `jobs[3] (name)`, the JSON path of a job in error messages.
struct JobPath<'a>(usize, &'a str);

impl std::fmt::Display for JobPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "jobs[{}] ({})", self.0, self.1)
    }
}

/// A job's own numbers ([`Round::check`]): its GPU range, its state's
/// seconds, utilization, memory, restart penalty and least runtime.
fn check_job_values(at: &JobPath, j: &RoundJob, errs: &mut Vec<String>) {
    if j.min_gpus > j.max_gpus {
        errs.push(format!(
            "{at}.min_gpus: {} exceeds max_gpus {}",
            j.min_gpus, j.max_gpus
        ));
    }
    if !j.state.age_s.is_finite() || j.state.age_s < 0.0 {
        errs.push(format!("{at}.state.age_s: must be finite and >= 0"));
    }
    if j.utilization.is_some_and(|u| !(0.0..=1.0).contains(&u)) {
        errs.push(format!("{at}.utilization: must be in [0, 1]"));
    }
    if j.mem_gib.is_some_and(|m| !m.is_finite() || m < 0.0) {
        errs.push(format!("{at}.mem_gib: must be finite and >= 0"));
    }
    if j.restart_penalty_s.is_some_and(|d| !d.is_finite() || d < 0.0) {
        errs.push(format!("{at}.restart_penalty_s: must be finite and >= 0"));
    }
    if let Some(e) = j.min_runtime_s.and_then(min_runtime_problem) {
        errs.push(format!("{at}.min_runtime_s: {e}"));
    }
    let seconds = [
        ("since_checkpoint_s", j.state.since_checkpoint_s),
        ("lost_s", j.state.lost_s),
        ("run_s", j.state.run_s),
    ];
    for (key, v) in seconds {
        if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
            errs.push(format!("{at}.state.{key}: must be finite and >= 0"));
        }
    }
}

/// A job's goodput model ([`Round::check`]): finite, non-negative
/// parameters and usable batch limits.
fn check_model(at: &JobPath, m: &GoodputModel, errs: &mut Vec<String>) {
    let p = &m.perf;
    let all = [
        p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r, p.beta_r, p.gamma, m.grad.sqr, m.grad.var,
    ];
    if all.iter().any(|v| !v.is_finite() || *v < 0.0) {
        errs.push(format!("{at}.model: parameters must be finite and >= 0"));
    }
    if m.limits.init_batch == 0 || m.limits.min_local == 0 || m.limits.min_local > m.limits.max_local {
        errs.push(format!(
            "{at}.model.limits: need init_batch > 0 and 0 < min_local <= max_local"
        ));
    }
}

/// [`Round`] as written, before its GPUs are named.
#[derive(Deserialize)]
struct RoundRepr {
    now_s: f64,
    cluster: Cluster,
    jobs: Vec<RoundJob>,
    #[serde(default)]
    params: PolicyParams,
    #[serde(default)]
    variability: Option<RoundVariability>,
    #[serde(default)]
    colocation: Option<crate::colocation_table::Colocation>,
    #[serde(default)]
    reserved: Vec<GpuId>,
    #[serde(default)]
    queues: Vec<crate::queue::Queue>,
}

impl From<RoundRepr> for Round {
    fn from(r: RoundRepr) -> Self {
        let mut round = Round {
            now_s: r.now_s,
            cluster: r.cluster,
            jobs: r.jobs,
            params: r.params,
            variability: r.variability,
            colocation: r.colocation,
            reserved: r.reserved,
            queues: r.queues,
        };
        bind_round(&mut round);
        round
    }
}

/// Name the unnamed GPUs of the round's current allocations, in job order
/// (the binder's rules, as [`crate::bind_plan`]). Here, not there, because loading a round binds, and
/// the binder's plan half sits above the round.
pub fn bind_round(round: &mut Round) {
    if round.jobs.iter().all(|j| j.state.allocation.is_bound()) {
        return;
    }
    let mut jobs = std::mem::take(&mut round.jobs);
    {
        let mut allocs: Vec<(&mut Allocation, Option<&Allocation>)> =
            jobs.iter_mut().map(|j| (&mut j.state.allocation, None)).collect();
        crate::gpu_table::bind_all(&round.cluster, &round.reserved, &mut allocs);
    }
    round.jobs = jobs;
}

impl Round {
    /// How many times slower `job` runs on `alloc` than on median GPUs, by
    /// the simulator's rule ([`RoundVariability::job_factor`]: its slowest
    /// GPU for its class, an unnamed slot counting as its node's slowest, ×
    /// L when a rigid job spans nodes). 1 without variability.
    pub fn variability_factor(&self, job: &RoundJob, alloc: &Allocation) -> f64 {
        self.variability.as_ref().map_or(1.0, |v| {
            v.job_factor(job.perf_class().index(), alloc, job.pays_cross_node())
        })
    }

    /// Semantic checks a JSON schema cannot express. Returns every problem,
    /// each naming the job or node, so a user can fix a round file at once.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let mut errs = Vec::new();
        let total = self.check_cluster(&mut errs);
        if let Err(es) = self.params.check(self.variability.is_some()) {
            errs.extend(es.iter().map(ToString::to_string));
        }
        if let Some(v) = &self.variability {
            v.check(&self.cluster, &mut errs);
        }
        {
            let reserved: std::collections::BTreeSet<_> = self.reserved.iter().collect();
            let capacity = total.saturating_sub(reserved.len() as u64);
            let jobs: Vec<(&str, Option<&str>)> = self
                .jobs
                .iter()
                .map(|j| (j.name.as_str(), j.queue.as_deref()))
                .collect();
            crate::queue::check_parts(&self.queues, capacity, &jobs, &mut errs);
        }
        // Sorted ids find duplicates without hashing (the simulator checks
        // every round).
        let mut ids: Vec<u32> = self.jobs.iter().map(|j| j.id.0).collect();
        ids.sort_unstable();
        let dup: Vec<u32> = ids.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        let mut reported = Vec::new();
        let mut used = vec![0u32; self.cluster.nodes.len()];
        // Jobs per GPU: with sharing, up to k jobs may hold one GPU.
        let k = self.params.sharing.max(1);
        let mut holder = crate::gpu_table::GpuTable::new(&self.cluster, (u32::MAX, 0u32));
        let name_first = self.first_of_each_name();
        for (i, j) in self.jobs.iter().enumerate() {
            // Built only when something is wrong: the simulator checks every round.
            let at = JobPath(i, &j.name);
            if dup.binary_search(&j.id.0).is_ok() && reported.contains(&j.id.0) {
                errs.push(format!("{at}.id: duplicate id {}", j.id.0));
            } else if dup.binary_search(&j.id.0).is_ok() {
                reported.push(j.id.0);
            }
            // Plans are reported by job name: two jobs of one name would
            // make one job's GPUs vanish from the output.
            if let Some(first) = name_first[i] {
                errs.push(format!("{at}.name: duplicate name, also jobs[{first}]"));
            }
            check_job_values(&at, j, &mut errs);
            for (n, k) in j.state.allocation.node_runs() {
                match used.get_mut(n.0 as usize) {
                    Some(u) => *u = u.saturating_add(k),
                    None => errs.push(format!("{at}.state.allocation: node {} does not exist", n.0)),
                }
            }
            for g in j.state.allocation.gpus().iter().filter(|g| g.is_bound()) {
                let Some(node) = self.cluster.nodes.get(g.node.0 as usize) else {
                    continue;
                };
                if g.index >= node.gpus {
                    errs.push(format!(
                        "{at}.state.allocation: node {} has no GPU {} (it has {})",
                        g.node.0, g.index, node.gpus
                    ));
                } else if let Some(h) = holder.get_mut(*g) {
                    if h.1 >= k {
                        errs.push(format!(
                            "{at}.state.allocation: GPU {} of node {} is also held by jobs[{}]{}",
                            g.index,
                            g.node.0,
                            h.0,
                            if k > 1 {
                                format!(", more than params.sharing {k} jobs")
                            } else {
                                String::new()
                            }
                        ));
                    }
                    *h = (i as u32, h.1 + 1);
                }
            }
            if let Some(m) = &j.model {
                check_model(&at, m, &mut errs);
            }
        }
        self.check_pinned(&mut errs);
        self.check_reserved(&mut errs);
        for (i, (u, n)) in used.iter().zip(&self.cluster.nodes).enumerate() {
            // A reserved GPU takes all its slots: no job of the round joins it.
            let held = self.reserved.iter().filter(|g| g.node.0 as usize == i).count() as u32;
            if *u > n.gpus.saturating_sub(held).saturating_mul(k) {
                errs.push(format!(
                    "cluster.nodes[{i}]: current allocations use {u} GPUs of {}{}",
                    n.gpus,
                    if held > 0 {
                        format!(" ({held} reserved)")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// The cluster's node sizes and total (returned: [`Round::check`] needs
    /// it for the queues' capacity).
    fn check_cluster(&self, errs: &mut Vec<String>) -> u64 {
        if self.cluster.nodes.is_empty() {
            errs.push("cluster.nodes: empty".to_string());
        }
        for (i, n) in self.cluster.nodes.iter().enumerate() {
            if n.gpus == 0 || n.gpus > MAX_GPUS_PER_NODE {
                errs.push(format!(
                    "cluster.nodes[{i}].gpus: must be in 1..={MAX_GPUS_PER_NODE}, got {}",
                    n.gpus
                ));
            }
        }
        let total: u64 = self.cluster.nodes.iter().map(|n| u64::from(n.gpus)).sum();
        if total > MAX_GPUS_TOTAL {
            errs.push(format!(
                "cluster.nodes: {total} GPUs in all, more than the {MAX_GPUS_TOTAL} supported"
            ));
        }
        total
    }

    /// For each job, the first job of the same name when it is not the
    /// first. Sorted names find duplicates without hashing strings.
    fn first_of_each_name(&self) -> Vec<Option<usize>> {
        let mut by_name: Vec<(&str, usize)> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.name.as_str(), i))
            .collect();
        by_name.sort_unstable();
        let mut name_first: Vec<Option<usize>> = vec![None; self.jobs.len()];
        for w in by_name.chunk_by(|a, b| a.0 == b.0) {
            for &(_, i) in &w[1..] {
                name_first[i] = Some(w[0].1);
            }
        }
        name_first
    }

    /// Why `job`'s current allocation breaks a per-job rule of this round
    /// (GPU limits, node limit, one GPU type, nodes that exist), if it does.
    pub fn keep_problem(&self, job: &RoundJob) -> Option<String> {
        let cur = job.current();
        let per = cur.per_node();
        if per.iter().any(|(n, _)| n.0 as usize >= self.cluster.nodes.len()) {
            return Some("uses a node that does not exist".into());
        }
        let k = cur.num_gpus();
        if k < job.min_gpus.max(1) || k > job.max_gpus {
            return Some(format!(
                "holds {k} GPUs, outside min_gpus..=max_gpus {}..={}",
                job.min_gpus, job.max_gpus
            ));
        }
        if per.len() as u32 > self.params.max_nodes_per_job {
            return Some(format!(
                "spans {} nodes, more than params.max_nodes_per_job {}",
                per.len(),
                self.params.max_nodes_per_job
            ));
        }
        let ty = |n: crate::NodeId| &self.cluster.nodes[n.0 as usize].gpu_type;
        if per.iter().any(|(n, _)| ty(*n) != ty(per[0].0)) {
            return Some("mixes GPU types".into());
        }
        None
    }

    /// Whether a planner may offer to keep `job`'s current GPUs: it runs and
    /// its allocation obeys every per-job rule of this round (limits may
    /// have changed since it started; the interference rule is the
    /// planner's to check against the other jobs it keeps).
    pub fn keepable(&self, job: &RoundJob) -> bool {
        !job.current().is_empty() && self.keep_problem(job).is_none()
    }

    /// Each reserved GPU is a named GPU of the cluster, listed once, that no
    /// job of the round holds (a job outside the round holds it).
    fn check_reserved(&self, errs: &mut Vec<String>) {
        let mut seen = std::collections::HashSet::new();
        for (i, g) in self.reserved.iter().enumerate() {
            let at = format!("reserved[{i}]");
            let Some(node) = self.cluster.nodes.get(g.node.0 as usize) else {
                errs.push(format!("{at}: node {} does not exist", g.node.0));
                continue;
            };
            if !g.is_bound() || g.index >= node.gpus {
                errs.push(format!(
                    "{at}: node {} ({}) has GPUs 0..{}; a reserved GPU is named [node, index]",
                    g.node.0, node.name, node.gpus
                ));
                continue;
            }
            if !seen.insert(*g) {
                errs.push(format!(
                    "{at}: GPU {} of node {} is listed twice",
                    g.index, g.node.0
                ));
            }
            if let Some((k, j)) = self
                .jobs
                .iter()
                .enumerate()
                .find(|(_, j)| j.current().gpus().contains(g))
            {
                errs.push(format!(
                    "{at}: GPU {} of node {} is held by jobs[{k}] ({}), a job of the round",
                    g.index, g.node.0, j.name
                ));
            }
        }
    }

    /// A pinned job (not preemptible, running) must keep its GPUs, so a
    /// current allocation that breaks a rule makes the round unplannable:
    /// that is the input's fault and is reported as such, with the path.
    fn check_pinned(&self, errs: &mut Vec<String>) {
        let avoid = self.params.interference == Interference::Avoid;
        let mut multi: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for (i, j) in self.jobs.iter().enumerate() {
            if j.preemptible || j.current().is_empty() {
                continue;
            }
            let at = format!("jobs[{i}] ({}).state.allocation", j.name);
            if let Some(why) = self.keep_problem(j) {
                errs.push(format!("{at}: the job is pinned (preemptible: false) but {why}"));
                continue;
            }
            let per = j.current().per_node();
            if avoid && per.len() > 1 {
                for (n, _) in per {
                    if let Some(other) = multi.insert(n.0, i) {
                        errs.push(format!(
                            "{at}: pinned multi-node job shares node {} with pinned multi-node jobs[{other}], against params.interference \"avoid\"",
                            n.0
                        ));
                    }
                }
            }
        }
    }
}

/// Core's tests' job: `RoundJob::new` as `j{id}` of app `x`, batch 32,
/// between 0 and 8 GPUs; each test states only the fields it is about.
#[cfg(test)]
pub(crate) fn test_job(id: u32) -> RoundJob {
    RoundJob {
        batch_size: 32,
        min_gpus: 0,
        max_gpus: 8,
        ..RoundJob::new(JobId(id), format!("j{id}"), "x")
    }
}

/// Core's tests' two-type round: node 0 has 4 × t4, node 1 4 × a100.
#[cfg(test)]
pub(crate) fn test_round(jobs: Vec<RoundJob>) -> Round {
    let node = |name: &str, ty: &str| crate::cluster::Node {
        name: name.into(),
        gpus: 4,
        gpu_type: ty.into(),
    };
    Round {
        now_s: 0.0,
        cluster: Cluster {
            nodes: vec![node("a", "t4"), node("b", "a100")],
        },
        jobs,
        params: PolicyParams::default(),
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUND: &str = r#"{"now_s": 0, "cluster": {"nodes": [{"name": "a", "gpus": 2, "gpu_type": "t4"}]},
        "jobs": [JOBS]}"#;

    fn job(id: u32, alloc: &str) -> String {
        format!(
            r#"{{"id": {id}, "name": "j{id}", "app": "x", "submit_s": 0, "requested_gpus": 1, "batch_size": 8,
            "min_gpus": 0, "max_gpus": 2, "preemptible": true,
            "state": {{"progress": 0, "epoch": 0, "attained_gpu_s": 0, "age_s": 0, "restarts": 0,
                      "allocation": {alloc}, "max_gpus_used": 0, "batch_size": 8, "local_bsz": 8, "accum_steps": 0}}}}"#
        )
    }

    fn load(jobs: &[String]) -> Round {
        serde_json::from_str(&ROUND.replace("JOBS", &jobs.join(","))).unwrap()
    }

    /// The four behaviour switches are enums in code and `true`/`false` in
    /// files, as they always were: read from either, written on only.
    /// `sharing` is capped, with the cap and the reason in the message.
    #[test]
    fn sharing_is_capped() {
        let mut p = PolicyParams {
            sharing: MAX_SHARING,
            ..PolicyParams::default()
        };
        p.check(false).unwrap();
        p.sharing = 1_000_000;
        let e = p.check(false).unwrap_err();
        assert_eq!(e[0].field, ParamField::Sharing);
        assert!(
            e[0].to_string()
                .starts_with("params.sharing: must be at most 8 jobs per GPU"),
            "{}",
            e[0]
        );
    }

    #[test]
    fn behaviour_switches_read_and_write_as_booleans() {
        let on: PolicyParams = serde_json::from_str(
            r#"{"p": -1, "restart_penalty_s": 30, "interference": "avoid", "exploration_factor": 2,
                "max_nodes_per_job": 16, "even_nodes": true, "spare_waiting": true, "type_blind": true,
                "variability_blind": true}"#,
        )
        .unwrap();
        assert_eq!(on.even_nodes, NodeCounts::Even);
        assert_eq!(on.spare_waiting, RestartCharge::HoldersOnly);
        assert_eq!(
            (on.type_blind, on.variability_blind),
            (Sight::Hidden, Sight::Hidden)
        );
        let text = serde_json::to_string(&on).unwrap();
        for key in ["even_nodes", "spare_waiting", "type_blind", "variability_blind"] {
            assert!(text.contains(&format!(r#""{key}":true"#)), "{key} in {text}");
        }
        let off: PolicyParams = serde_json::from_str(&text.replace("true", "false")).unwrap();
        assert_eq!(off, PolicyParams::default());
        assert!(!serde_json::to_string(&off).unwrap().contains("blind"));
        assert!(serde_json::from_str::<PolicyParams>(&text.replace("true", "\"Even\"")).is_err());
    }

    /// Rounds without variability or a placement write exactly what they
    /// wrote before those fields existed; with them, they read back.
    #[test]
    fn new_fields_are_absent_by_default_and_round_trip() {
        let r = load(&[job(0, "[[0,0]]")]);
        let text = serde_json::to_string(&r).unwrap();
        for key in [
            "variability",
            "placement",
            "sticky",
            "class",
            "restart_weight",
            "left_out_cost",
            "spare_waiting",
            "priority",
            "sharing",
            "mem_gib",
            "colocation",
        ] {
            assert!(!text.contains(key), "{key} in {text}");
        }
        let mut v = r.clone();
        v.variability = Some(RoundVariability {
            per_node: vec![vec![[1.0, 1.1, 1.0, 0.9]; 2]],
            cross_node_factor: 1.7,
        });
        v.params.placement = Placement::PmFirst;
        v.params.sticky = Sticky::Keep;
        v.jobs[0].class = Some(PerfClass::C);
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.contains("\"placement\":\"pm-first\"") && text.contains("\"class\":\"C\""));
        let back: Round = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert!(back.check().is_ok());
        v.variability.as_mut().unwrap().per_node[0].pop();
        assert_eq!(
            v.check().unwrap_err(),
            vec!["variability.per_node[0]: 1 GPUs, but cluster.nodes[0] has 2"]
        );
        let mut w = r.clone();
        w.params.restart_weight = -1.0;
        w.params.priority.scale_gpu_s = 0.0;
        assert_eq!(
            w.check().unwrap_err(),
            vec![
                "params.restart_weight: must be in 0..=100, got -1",
                "params.priority.scale_gpu_s: must be > 0, got 0"
            ]
        );
        let mut l = r.clone();
        l.params.left_out_cost = 1.1;
        assert!(l.check().is_ok());
        l.params.p = 0.0;
        assert_eq!(
            l.check().unwrap_err(),
            vec!["params.left_out_cost: needs a finite p < 0, got p = 0"]
        );
        assert_eq!("pal".parse::<Placement>(), Ok(Placement::Pal));
        assert!("best".parse::<Placement>().unwrap_err().contains("pm-first"));
        // The one params check: typed fields, and the rule that was once
        // only the CLI's (a placement by GPU speed needs variability) now
        // holds for every round.
        let mut q = r.clone();
        q.params.placement = Placement::Pal;
        q.params.exploration_factor = 0;
        let e = q.params.check(false).unwrap_err();
        let fields: Vec<ParamField> = e.iter().map(|e| e.field).collect();
        assert_eq!(fields, vec![ParamField::ExplorationFactor, ParamField::Placement]);
        assert_eq!(
            e[1].problem,
            "pal needs GPU variability: without per-GPU speeds every GPU is alike (use packed)"
        );
        assert!(q
            .check()
            .unwrap_err()
            .iter()
            .any(|m| m.starts_with("params.placement: pal needs")));
        assert_eq!(q.params.check(true).unwrap_err().len(), 1);
    }

    #[test]
    fn legacy_allocations_load_named_in_job_order() {
        let r = load(&[job(0, "[0]"), job(1, "[0]")]);
        assert!(r.check().is_ok());
        let named: Vec<u32> = r
            .jobs
            .iter()
            .map(|j| j.state.allocation.gpus()[0].index)
            .collect();
        assert_eq!(named, vec![0, 1]);
    }

    #[test]
    fn inconsistent_gpus_and_ids_are_named() {
        let e = load(&[job(0, "[[0,1]]"), job(1, "[[0,1]]")]).check().unwrap_err();
        assert_eq!(
            e,
            vec!["jobs[1] (j1).state.allocation: GPU 1 of node 0 is also held by jobs[0]"]
        );
        let e = load(&[job(0, "[[0,2]]")]).check().unwrap_err();
        assert_eq!(
            e,
            vec!["jobs[0] (j0).state.allocation: node 0 has no GPU 2 (it has 2)"]
        );
        let e = load(&[job(3, "[]"), job(3, "[]"), job(3, "[]")])
            .check()
            .unwrap_err();
        assert_eq!(
            e,
            vec![
                "jobs[1] (j3).id: duplicate id 3",
                "jobs[1] (j3).name: duplicate name, also jobs[0]",
                "jobs[2] (j3).id: duplicate id 3",
                "jobs[2] (j3).name: duplicate name, also jobs[0]"
            ]
        );
    }
}
