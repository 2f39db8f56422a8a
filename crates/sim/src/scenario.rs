//! One simulation as a user states it (the CLI's flags, the browser's
//! form), checked once into a [`SimConfig`].
//!
//! Drivers used to check their own flags, each worded differently, and
//! one rule ("pm-first needs variability") lived only in two of them.
//! Here every check is made once and each error names a [`ScenarioField`],
//! so a driver only words the field with its own flag or key.

use std::collections::BTreeMap;
use std::fmt;

use gpuplan_core::{
    Cluster, Interference, ParamError, ParamField, Placement, PolicyParams, SharingPairs, Sticky,
};
use gpuplan_solve::{registry, Planner};

use crate::colocation::{gavel_jobs, ground_truth, GavelTable};
use crate::engine::{IdleRounds, SimConfig};
use crate::variability::{Draw, Measurements, Variability, DEFAULT_CROSS_NODE_FACTOR};

/// The policy parameters a user set; `None` keeps the policy's own default
/// ([`registry::default_params`]), so a sweep of several policies gives
/// each its own objective wherever the user said nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamFlags {
    /// Power-mean exponent of the objective ([`PolicyParams::p`]).
    pub p: Option<f64>,
    /// Absent: the scenario's restart delay, as Pollux charges it.
    pub restart_penalty_s: Option<f64>,
    /// Whether multi-node jobs may share nodes ([`PolicyParams::interference`]).
    pub interference: Option<Interference>,
    /// Pollux's cap on growth over the most GPUs a job has used.
    pub exploration_factor: Option<u32>,
    /// How fixed-size policies choose GPUs ([`PolicyParams::placement`]).
    pub placement: Option<Placement>,
    /// Whether running jobs keep their GPUs under `placement`.
    pub sticky: Option<Sticky>,
    /// Times its duration a restart is charged ([`PolicyParams::restart_weight`]).
    pub restart_weight: Option<f64>,
    /// Sia's cost of a job left without GPUs ([`PolicyParams::left_out_cost`]).
    pub left_out_cost: Option<f64>,
    /// Charge restarts only to running jobs past their penalty (Sia's rule).
    pub spare_waiting: Option<bool>,
    /// Exponent of the least-attained-service priority (0: off).
    pub priority_exponent: Option<f64>,
    /// Attained GPU-seconds at which the priority factor reaches 2^exponent.
    pub priority_scale_gpu_s: Option<f64>,
    /// Most jobs one GPU may hold (k; 1: no sharing).
    pub sharing: Option<u32>,
    /// Which pairs may share a GPU when `sharing` > 1.
    pub sharing_pairs: Option<SharingPairs>,
    /// Plan as Pollux does, not knowing GPU types.
    pub type_blind: Option<bool>,
    /// Plan without knowing per-GPU speed variability.
    pub variability_blind: Option<bool>,
    /// Seconds a job holds its allocation before it may be shrunk or
    /// preempted ([`PolicyParams::min_runtime_s`]).
    pub min_runtime_s: Option<f64>,
}

impl ParamFlags {
    /// `base` with every flag the user set applied over it.
    pub fn over(&self, base: PolicyParams, restart_delay_s: f64) -> PolicyParams {
        let mut p = base;
        let set = |v: Option<f64>, to: &mut f64| {
            if let Some(v) = v {
                *to = v;
            }
        };
        set(self.p, &mut p.p);
        p.restart_penalty_s = self.restart_penalty_s.unwrap_or(restart_delay_s);
        set(self.restart_weight, &mut p.restart_weight);
        set(self.left_out_cost, &mut p.left_out_cost);
        set(self.priority_exponent, &mut p.priority.exponent);
        set(self.priority_scale_gpu_s, &mut p.priority.scale_gpu_s);
        if let Some(v) = self.interference {
            p.interference = v;
        }
        if let Some(v) = self.exploration_factor {
            p.exploration_factor = v;
        }
        if let Some(v) = self.placement {
            p.placement = v;
        }
        if let Some(v) = self.sticky {
            p.sticky = v;
        }
        if let Some(v) = self.spare_waiting {
            p.spare_waiting = v.into();
        }
        if let Some(v) = self.sharing {
            p.sharing = v;
        }
        if let Some(v) = self.sharing_pairs {
            p.sharing_pairs = v;
        }
        if let Some(v) = self.type_blind {
            p.type_blind = v.into();
        }
        if let Some(v) = self.variability_blind {
            p.variability_blind = v.into();
        }
        if let Some(v) = self.min_runtime_s {
            p.min_runtime_s = v;
        }
        p
    }
}

/// A simulation as stated, before any check. Defaults equal `gpuplan
/// simulate`'s flags.
#[derive(Debug, Clone, PartialEq)]
pub struct SimScenario {
    /// As [`SimConfig::cluster`].
    pub cluster: Cluster,
    /// As [`SimConfig::interval_s`]; must be > 0.
    pub interval_s: f64,
    /// As [`SimConfig::restart_delay_s`]; must be >= 0.
    pub restart_delay_s: f64,
    /// As [`SimConfig::interference_slowdown`]; must be in [0, 1).
    pub interference_slowdown: f64,
    /// As [`SimConfig::time_limit_s`]; must be >= 0.
    pub time_limit_s: f64,
    /// As [`SimConfig::max_sim_s`]; must be > 0.
    pub max_sim_s: f64,
    /// As [`SimConfig::seed`].
    pub seed: u64,
    /// As [`SimConfig::idle_rounds`].
    pub idle_rounds: IdleRounds,
    /// Per-GPU speeds are drawn from these when given.
    pub variability: Option<Measurements>,
    /// How they are drawn; set without `variability` it is refused.
    pub variability_draw: Option<Draw>,
    /// PAL's L: checked even without variability, as a flag is.
    pub cross_node_factor: f64,
    /// Ground truth of co-located jobs when sharing (k > 1); `None`: the
    /// shipped curve alone.
    pub colocation: Option<GavelTable>,
    /// The GPU model whose rows of `colocation` describe rigid jobs.
    pub colocation_gpu_type: String,
    /// The policy parameters the user set, over each policy's defaults.
    pub params: ParamFlags,
    /// The teams' queues (docs/tenants.md); empty: one pool.
    pub queues: Vec<gpuplan_core::queue::Queue>,
    /// As [`SimConfig::memory_limit_mb`].
    pub memory_limit_mb: Option<u64>,
    /// As [`SimConfig::checkpoint_interval_s`]; must be > 0.
    pub checkpoint_interval_s: Option<f64>,
    /// As [`SimConfig::restart_charge`].
    pub restart_charge: crate::engine::RestartCost,
}

impl Default for SimScenario {
    fn default() -> Self {
        let d = SimConfig::default();
        SimScenario {
            cluster: d.cluster,
            interval_s: d.interval_s,
            restart_delay_s: d.restart_delay_s,
            interference_slowdown: d.interference_slowdown,
            time_limit_s: d.time_limit_s,
            max_sim_s: d.max_sim_s,
            seed: d.seed,
            idle_rounds: d.idle_rounds,
            variability: None,
            variability_draw: None,
            cross_node_factor: DEFAULT_CROSS_NODE_FACTOR,
            colocation: None,
            colocation_gpu_type: String::new(),
            params: ParamFlags::default(),
            queues: Vec::new(),
            memory_limit_mb: None,
            checkpoint_interval_s: None,
            restart_charge: d.restart_charge,
        }
    }
}

/// What a [`ScenarioError`] is about: a simulator setting, or a policy
/// parameter (then [`ParamField`] says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScenarioField {
    /// [`SimScenario::interval_s`].
    Interval,
    /// [`SimScenario::restart_delay_s`].
    RestartDelay,
    /// [`SimScenario::interference_slowdown`].
    InterferenceSlowdown,
    /// [`SimScenario::time_limit_s`].
    TimeLimit,
    /// [`SimScenario::max_sim_s`].
    MaxSim,
    /// [`SimScenario::cross_node_factor`].
    CrossNodeFactor,
    /// [`SimScenario::variability_draw`].
    VariabilityDraw,
    /// [`SimScenario::queues`].
    Queues,
    /// [`SimScenario::checkpoint_interval_s`].
    CheckpointInterval,
    /// The policy's name.
    Policy,
    /// A policy parameter, as the core's check names it.
    Param(ParamField),
}

impl ScenarioField {
    /// The field's name in a [`SimConfig`] (and a saved scenario).
    pub fn key(self) -> &'static str {
        match self {
            ScenarioField::Interval => "interval_s",
            ScenarioField::RestartDelay => "restart_delay_s",
            ScenarioField::InterferenceSlowdown => "interference_slowdown",
            ScenarioField::TimeLimit => "time_limit_s",
            ScenarioField::MaxSim => "max_sim_s",
            ScenarioField::CrossNodeFactor => "cross_node_factor",
            ScenarioField::VariabilityDraw => "variability_draw",
            ScenarioField::Queues => "queues",
            ScenarioField::CheckpointInterval => "checkpoint_interval_s",
            ScenarioField::Policy => "policy",
            ScenarioField::Param(p) => p.key(),
        }
    }
}

/// One problem with a scenario, without the field's name so each driver
/// puts its own (`--interval`, `interval`) in front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The field at fault.
    pub field: ScenarioField,
    /// What is wrong with it, e.g. "must be > 0, got -1".
    pub problem: String,
}

impl From<ParamError> for ScenarioError {
    fn from(e: ParamError) -> Self {
        ScenarioError {
            field: ScenarioField::Param(e.field),
            problem: e.problem,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field.key(), self.problem)
    }
}

impl std::error::Error for ScenarioError {}

impl SimScenario {
    /// The checked simulator settings, every problem at once. Its params
    /// are the flags over Pollux's defaults; [`SimScenario::config_for`]
    /// checks and gives a policy's own.
    pub fn config(&self) -> Result<SimConfig, Vec<ScenarioError>> {
        self.config_with(self.params.over(PolicyParams::default(), self.restart_delay_s))
    }

    /// The settings with `params` as the run's, checked as they will run
    /// (a policy's own defaults are checked, not Pollux's they replace).
    fn config_with(&self, params: PolicyParams) -> Result<SimConfig, Vec<ScenarioError>> {
        use ScenarioField as F;
        let mut errs = Vec::new();
        let mut bad = |field, problem: String| errs.push(ScenarioError { field, problem });
        if !(self.interval_s.is_finite() && self.interval_s > 0.0) {
            bad(F::Interval, format!("must be > 0, got {}", self.interval_s));
        }
        if !(self.restart_delay_s.is_finite() && self.restart_delay_s >= 0.0) {
            bad(
                F::RestartDelay,
                format!("must be >= 0, got {}", self.restart_delay_s),
            );
        }
        if !(0.0..1.0).contains(&self.interference_slowdown) {
            bad(
                F::InterferenceSlowdown,
                format!("must be in [0, 1), got {}", self.interference_slowdown),
            );
        }
        if !(self.time_limit_s.is_finite() && self.time_limit_s >= 0.0) {
            bad(F::TimeLimit, format!("must be >= 0, got {}", self.time_limit_s));
        }
        // No value in the message: drivers state it in their own unit (days).
        if !(self.max_sim_s.is_finite() && self.max_sim_s > 0.0) {
            bad(F::MaxSim, "must be > 0".into());
        }
        if !(self.cross_node_factor.is_finite() && self.cross_node_factor >= 1.0) {
            bad(
                F::CrossNodeFactor,
                format!("must be >= 1, got {}", self.cross_node_factor),
            );
        }
        if let Some(c) = self.checkpoint_interval_s {
            if let Some(e) = crate::engine::checkpoint_interval_problem(c) {
                bad(F::CheckpointInterval, e);
            }
        }
        if self.variability.is_none() && self.variability_draw.is_some() {
            bad(F::VariabilityDraw, "needs variability".into());
        }
        if !self.queues.is_empty() {
            // The tree's rules and its guarantees against this cluster, by
            // the round check's own words.
            let mut qerrs = Vec::new();
            let capacity = u64::from(self.cluster.total_gpus());
            gpuplan_core::queue::check_parts(&self.queues, capacity, &[], &mut qerrs);
            for e in qerrs {
                bad(F::Queues, e);
            }
        }
        if let Err(es) = params.check(self.variability.is_some()) {
            errs.extend(es.into_iter().map(ScenarioError::from));
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let (colocation, colocation_jobs) = match &self.colocation {
            Some(table) if params.sharing > 1 => (
                Some(ground_truth(table)),
                gavel_jobs(table, &self.colocation_gpu_type),
            ),
            _ => (None, BTreeMap::new()),
        };
        Ok(SimConfig {
            cluster: self.cluster.clone(),
            interval_s: self.interval_s,
            restart_delay_s: self.restart_delay_s,
            interference_slowdown: self.interference_slowdown,
            params,
            seed: self.seed,
            time_limit_s: self.time_limit_s,
            max_sim_s: self.max_sim_s,
            idle_rounds: self.idle_rounds,
            variability: self.variability.clone().map(|measurements| Variability {
                measurements,
                cross_node_factor: self.cross_node_factor,
                draw: self.variability_draw.unwrap_or_default(),
            }),
            colocation,
            colocation_jobs,
            queues: self.queues.clone(),
            memory_limit_mb: self.memory_limit_mb,
            checkpoint_interval_s: self.checkpoint_interval_s,
            restart_charge: self.restart_charge,
            ..SimConfig::default()
        })
    }

    /// The checked settings of a run of `policy`: [`SimScenario::config`]
    /// with the policy's own params ([`SimScenario::params_for`]), and the
    /// policy known and able to honour them ([`SimScenario::planner`]).
    /// Every driver that runs one policy (`gpuplan simulate`, Python's
    /// `simulate`) starts here.
    pub fn config_for(&self, policy: &str) -> Result<SimConfig, Vec<ScenarioError>> {
        let cfg = self.config_with(self.params_for(policy))?;
        Self::planner(policy, &cfg.params).map_err(|e| vec![e])?;
        Ok(cfg)
    }

    /// The run's params under `policy`: its own defaults wherever the
    /// user set no flag.
    pub fn params_for(&self, policy: &str) -> PolicyParams {
        self.params
            .over(registry::default_params(policy), self.restart_delay_s)
    }

    /// A fresh planner for `policy` under `params`, refused when the policy
    /// is unknown or cannot honour the params (only fixed-size policies
    /// place through the placement stage).
    pub fn planner(policy: &str, params: &PolicyParams) -> Result<Box<dyn Planner>, ScenarioError> {
        let planner = registry::create(policy).map_err(|e| ScenarioError {
            field: ScenarioField::Policy,
            problem: e.to_string(),
        })?;
        gpuplan_solve::check_placement(planner.as_ref(), params).map_err(|e| ScenarioError {
            field: ScenarioField::Policy,
            problem: format!("{policy}: {} {}", e.field.key(), e.problem),
        })?;
        Ok(planner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(s: &SimScenario) -> Vec<ScenarioField> {
        s.config().unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn defaults_are_the_simulators() {
        let cfg = SimScenario::default().config().unwrap();
        assert_eq!(cfg, SimConfig::default());
    }

    #[test]
    fn every_problem_is_reported_with_its_field() {
        let s = SimScenario {
            interval_s: 0.0,
            cross_node_factor: 0.5,
            params: ParamFlags {
                sharing: Some(0),
                placement: Some(Placement::Pal),
                left_out_cost: Some(1.1),
                p: Some(1.0),
                ..Default::default()
            },
            ..Default::default()
        };
        let f = fields(&s);
        for want in [
            ScenarioField::Interval,
            ScenarioField::CrossNodeFactor,
            ScenarioField::Param(ParamField::Sharing),
            ScenarioField::Param(ParamField::Placement),
            ScenarioField::Param(ParamField::LeftOutCost),
        ] {
            assert!(f.contains(&want), "{want:?} missing from {f:?}");
        }
    }

    #[test]
    fn a_placement_by_speed_needs_variability_and_a_policy_that_places() {
        let mut s = SimScenario {
            params: ParamFlags {
                placement: Some(Placement::PmFirst),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(fields(&s), vec![ScenarioField::Param(ParamField::Placement)]);
        s.variability = Some(Measurements::load("longhorn").unwrap());
        let cfg = s.config().unwrap();
        assert!(SimScenario::planner("fifo", &cfg.params).is_ok());
        let e = SimScenario::planner("pollux-ga", &cfg.params).err().unwrap();
        assert_eq!(e.field, ScenarioField::Policy);
        assert!(
            e.problem.starts_with("pollux-ga: placement 'pm-first' applies"),
            "{e}"
        );
        assert_eq!(
            SimScenario::planner("nope", &cfg.params).err().unwrap().field,
            ScenarioField::Policy
        );
    }

    #[test]
    fn a_policy_keeps_its_defaults_where_no_flag_is_set() {
        let mut s = SimScenario::default();
        let d = registry::default_params("gpuplan-mip");
        assert_eq!(s.params_for("gpuplan-mip").restart_weight, d.restart_weight);
        s.params.restart_weight = Some(3.0);
        assert_eq!(s.params_for("gpuplan-mip").restart_weight, 3.0);
        assert_eq!(s.params_for("fifo").restart_penalty_s, s.restart_delay_s);
    }
}
