//! The one list of planners. A new policy is one file plus one [`Entry`]
//! here: every driver (the CLI and `gpuplan policies`, the simulator, the
//! daemon, the explorer's lists and help) reads its name, description and
//! parameter defaults from this list, so nothing else needs an edit.

use crate::mip::aggregate::MipAggregate;
use crate::mip::exact::{MipExact, PolluxMip};
use crate::mip::lagrange::Lagrange;
use crate::mip::node::MipNode;
use crate::mip::sia::Sia;
use crate::planners::greedy::Greedy;
use crate::planners::{
    fair_share::FairShare, fifo::Fifo, optimus::Optimus, pollux_ga::PolluxGa, srtf::Srtf, tiresias::Tiresias,
    tiresias_gittins::TiresiasGittins,
};
use crate::solver::Solver;
use crate::{PlanError, Planner};
use gpuplan_core::PolicyParams;

/// Rounds with at most this many job × node cells use the exact model in
/// `pollux-mip` (400 jobs on 128 nodes: about 0.5 s measured with `gpuplan bench`).
pub const POLLUX_MIP_EXACT_MAX_CELLS: usize = 400 * 128;

/// Clusters of at least this many GPUs go to `lagrange` in `pollux-mip`
/// and `gpuplan-mip` (docs/formulation.md, "At production scale"): at
/// 16,384 GPUs of four types it is 5.5× faster than `mip-aggregate` at
/// the median and 0.3% below it; at 8,192 GPUs of three types still 0.24%
/// below, with mip-aggregate within its limit, so not there.
pub const POLLUX_MIP_LAGRANGE_MIN_GPUS: u32 = 16384;

/// One registered planner: all a driver shows or needs about it, so that
/// no driver keeps its own list of names, help texts or per-policy params.
#[derive(Clone, Copy)]
pub struct Entry {
    /// The kebab-case id used in the CLI, JSON, bench and the explorer;
    /// equal to the planner's own [`Planner::name`].
    pub name: &'static str,
    /// One line for `gpuplan policies` and the explorer's help.
    pub description: &'static str,
    /// Sets the round parameters in which this policy differs from Pollux's
    /// ([`PolicyParams::default`]); most policies change nothing.
    pub params: fn(&mut PolicyParams),
    /// A fresh planner, with no cross-round state.
    pub create: fn() -> Box<dyn Planner>,
}

impl Entry {
    /// The round parameters this policy starts from, before a user's flags
    /// or a round file's keys override them.
    pub fn default_params(&self) -> PolicyParams {
        let mut params = PolicyParams::default();
        (self.params)(&mut params);
        params
    }

    /// [`Entry::params`] as data: the round-file keys whose values differ
    /// from Pollux's, with this policy's values (empty for most), so that
    /// drivers can show them without knowing any field.
    pub fn param_defaults(&self) -> serde_json::Map<String, serde_json::Value> {
        let as_map = |p: &PolicyParams| match serde_json::to_value(p) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => unreachable!("PolicyParams serialises as an object"),
        };
        let pollux = as_map(&PolicyParams::default());
        as_map(&self.default_params())
            .into_iter()
            .filter(|(k, v)| pollux.get(k) != Some(v))
            .collect()
    }
}

/// Pollux's parameters unchanged: what every policy but `gpuplan-mip` uses.
fn pollux_params(_: &mut PolicyParams) {}

const ENTRIES: &[Entry] = &[
    Entry {
        name: "fifo",
        description: "First in, first out: jobs get the GPUs they asked for, in arrival order.",
        params: pollux_params,
        create: || Box::new(Fifo),
    },
    Entry {
        name: "srtf",
        description: "Shortest remaining time first (knows each job's remaining work: an oracle).",
        params: pollux_params,
        create: || Box::new(Srtf),
    },
    Entry {
        name: "optimus",
        description: "Optimus + oracle: GPUs go where they cut remaining time most.",
        params: pollux_params,
        create: || Box::new(Optimus),
    },
    Entry {
        name: "tiresias",
        description: "Tiresias 2D-LAS: least attained GPU-time first, no job-length knowledge.",
        params: pollux_params,
        create: || Box::new(Tiresias::default()),
    },
    Entry {
        name: "tiresias-gittins",
        description: "Tiresias 2D-Gittins: Gittins index over attained service.",
        params: pollux_params,
        create: || Box::new(TiresiasGittins::default()),
    },
    Entry {
        name: "fair-share",
        description: "Operators' quota scheduler (KAI-Scheduler, Kueue): guarantees, then weighted \
            fair shares, reclaim from queues above theirs; 2D-LAS inside a queue.",
        params: pollux_params,
        create: || Box::new(FairShare),
    },
    Entry {
        name: "pollux-ga",
        description: "Pollux as published: a genetic search for the allocation of highest goodput.",
        params: pollux_params,
        create: || Box::new(PolluxGa::default()),
    },
    Entry {
        name: "pollux-ga-prev",
        description: "pollux-ga in its earlier version, kept to reproduce those numbers: \
            parents by fitness alone, every pair crossed in round order, growth chances per free \
            node, where the artifact's GA (pymoo) compares by dominance and crowding, crosses 90% \
            over jobs by attained service and grows per job (docs/fidelity.md, \"Under \
            contention\").",
        params: pollux_params,
        create: || Box::new(PolluxGa::named(crate::GaConfig::prev(), "pollux-ga-prev")),
    },
    Entry {
        name: "greedy",
        description: "Goodput, greedily: repeatedly gives a GPU to the job that gains most.",
        params: pollux_params,
        create: || Box::new(Greedy),
    },
    Entry {
        name: "mip-exact",
        description: "Goodput, exactly: a MIP over every job × node, solved by HiGHS; \
            where HiGHS is not built (the browser) by microlp, the same as mip-exact-microlp.",
        params: pollux_params,
        create: || Box::new(MipExact::new(Solver::default_native(), "mip-exact")),
    },
    Entry {
        name: "mip-aggregate",
        description: "Goodput MIP over node shapes rather than single nodes (smaller, faster), \
            solved by HiGHS; where HiGHS is not built (the browser) by microlp, the same as \
            mip-aggregate-microlp.",
        params: pollux_params,
        create: || Box::new(MipAggregate::new(Solver::default_native(), "mip-aggregate")),
    },
    Entry {
        name: "lagrange",
        description: "Goodput at production scale: Lagrangian prices per GPU type from the count \
            relaxation steer greedy's moves, plain greedy fills the rest, exchanges move GPUs to \
            jobs that gain more; no MIP, and the dual's value as a proven bound \
            (docs/formulation.md). Its prices know no queues: a round with queues is planned \
            by mip-aggregate's model.",
        params: pollux_params,
        create: || Box::new(Lagrange),
    },
    Entry {
        name: "mip-exact-microlp",
        description: "mip-exact with the microlp solver (where HiGHS is not built, as in the \
            browser, mip-exact is this too).",
        params: pollux_params,
        create: || Box::new(MipExact::new(Solver::Microlp, "mip-exact-microlp")),
    },
    Entry {
        name: "mip-aggregate-microlp",
        description: "mip-aggregate with the microlp solver (where HiGHS is not built, as in the \
            browser, mip-aggregate is this too).",
        params: pollux_params,
        create: || Box::new(MipAggregate::new(Solver::Microlp, "mip-aggregate-microlp")),
    },
    Entry {
        name: "mip-node",
        description: "The plain node-level goodput MIP, kept as a cross-check.",
        params: pollux_params,
        create: || Box::new(MipNode::new(Solver::default_native(), "mip-node")),
    },
    Entry {
        name: "pollux-mip",
        description: "Goodput MIP under Pollux's objective: exact up to 400 jobs × 128 nodes, \
            aggregate above, lagrange from 16,384 GPUs (unless GPUs are shared or queues set).",
        params: pollux_params,
        create: || {
            Box::new(PolluxMip {
                solver: Solver::default_native(),
                exact_max_cells: POLLUX_MIP_EXACT_MAX_CELLS,
                lagrange_min_gpus: POLLUX_MIP_LAGRANGE_MIN_GPUS,
                name: "pollux-mip",
            })
        },
    },
    Entry {
        name: "gpuplan-mip",
        description: "pollux-mip's search under gpuplan's objective: a wider exploration cap and \
            restarts charged more (docs/policy.md).",
        params: |p| {
            p.exploration_factor = GPUPLAN_MIP_EXPLORATION_FACTOR;
            p.restart_weight = GPUPLAN_MIP_RESTART_WEIGHT;
        },
        create: || {
            Box::new(PolluxMip {
                solver: Solver::default_native(),
                exact_max_cells: POLLUX_MIP_EXACT_MAX_CELLS,
                lagrange_min_gpus: POLLUX_MIP_LAGRANGE_MIN_GPUS,
                name: "gpuplan-mip",
            })
        },
    },
    Entry {
        name: "sia",
        description: "Sia (SOSP'23) as its paper describes it: a configuration ILP over GPU \
            types (docs/heterogeneity.md).",
        params: pollux_params,
        create: || Box::new(Sia::new(Solver::default_native())),
    },
    Entry {
        name: "pollux-mip-aggregate",
        description: "Goodput MIP over node shapes at every size, under Pollux's objective.",
        params: pollux_params,
        create: || {
            Box::new(MipAggregate::new(
                Solver::default_native(),
                "pollux-mip-aggregate",
            ))
        },
    },
    // Only in this crate's unit tests: proves an entry alone registers a planner.
    #[cfg(test)]
    tests::EXAMPLE,
];

/// Every registered planner, in registry order.
pub fn entries() -> &'static [Entry] {
    ENTRIES
}

/// The entry of a planner id; unknown ids list the valid ones.
pub fn entry(name: &str) -> Result<&'static Entry, PlanError> {
    ENTRIES
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| PlanError::UnknownPlanner {
            name: name.to_string(),
            valid: names().into_iter().map(String::from).collect(),
        })
}

/// A planner's one-line description; `None` for an unknown id.
pub fn describe(name: &str) -> Option<&'static str> {
    entry(name).ok().map(|e| e.description)
}

/// A policy's own round parameters ([`Entry::default_params`]); Pollux's
/// for an unknown id. Every driver starts its rounds' params from this, so
/// a policy means the same everywhere.
pub fn default_params(name: &str) -> PolicyParams {
    entry(name).map(Entry::default_params).unwrap_or_default()
}

/// `gpuplan-mip`'s exploration cap: a job may take 4× the most GPUs it has
/// run on (Pollux: 2×), so it reaches its best size in half the restarts.
pub const GPUPLAN_MIP_EXPLORATION_FACTOR: u32 = 4;

/// `gpuplan-mip` charges a restart twice its duration: besides the lost
/// seconds, a moved job loses its place and often re-grows over later rounds.
pub const GPUPLAN_MIP_RESTART_WEIGHT: f64 = 2.0;

/// Every registered planner id, in registry order.
pub fn names() -> Vec<&'static str> {
    ENTRIES.iter().map(|e| e.name).collect()
}

/// The planners that can run on a live cluster (no oracle), in registry order.
pub fn live_names() -> Vec<&'static str> {
    ENTRIES
        .iter()
        .filter(|e| !(e.create)().traits().needs_oracle)
        .map(|e| e.name)
        .collect()
}

/// The planners whose GPUs the placement stage chooses (`params.placement`).
pub fn placement_names() -> Vec<&'static str> {
    ENTRIES
        .iter()
        .filter(|e| (e.create)().placement_stage())
        .map(|e| e.name)
        .collect()
}

/// The planners that may put several jobs on one GPU under sharing.
pub fn sharing_names() -> Vec<&'static str> {
    ENTRIES
        .iter()
        .filter(|e| (e.create)().shares_gpus())
        .map(|e| e.name)
        .collect()
}

/// A fresh planner by id; unknown ids list the valid ones.
pub fn create(name: &str) -> Result<Box<dyn Planner>, PlanError> {
    entry(name).map(|e| (e.create)())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;
    use gpuplan_core::{Plan, Round};

    /// A planner registered by its entry alone (first in, first out, under
    /// its own name and a changed exploration cap): the proof that a new
    /// planner needs no edit outside its file and this list.
    struct Example;

    impl Planner for Example {
        fn name(&self) -> &str {
            "example"
        }

        fn plan(&mut self, round: &Round, limits: &Limits) -> Result<Plan, PlanError> {
            Fifo.plan(round, limits)
        }
    }

    pub(super) const EXAMPLE: Entry = Entry {
        name: "example",
        description: "A test planner: fifo's plans under its own name.",
        params: |p| p.exploration_factor = 3,
        create: || Box::new(Example),
    };

    #[test]
    fn only_gpuplan_mip_changes_the_objective() {
        for name in names() {
            let p = default_params(name);
            if name == "gpuplan-mip" {
                assert_eq!(p.exploration_factor, GPUPLAN_MIP_EXPLORATION_FACTOR);
                assert_eq!(p.restart_weight, GPUPLAN_MIP_RESTART_WEIGHT);
                assert_eq!(create(name).unwrap().name(), "gpuplan-mip");
            } else if name != EXAMPLE.name {
                assert_eq!(p, PolicyParams::default(), "{name}");
            }
        }
        assert_eq!(default_params("no-such-planner"), PolicyParams::default());
    }

    #[test]
    fn every_entry_names_its_planner_and_describes_it_in_one_line() {
        for e in entries() {
            assert_eq!((e.create)().name(), e.name);
            assert_eq!(describe(e.name), Some(e.description));
            assert!(
                !e.description.is_empty() && !e.description.contains('\n'),
                "{}",
                e.name
            );
            assert!(!e.description.contains("  "), "{}: {:?}", e.name, e.description);
        }
        assert_eq!(describe("no-such-planner"), None);
        let err = entry("no-such-planner").err().unwrap().to_string();
        assert!(err.contains("tiresias-gittins"), "{err}");
    }

    /// The keys shown as a policy's defaults give back its params when laid
    /// over Pollux's, so what the CLI and the explorer show is what runs.
    #[test]
    fn param_defaults_are_the_params_as_round_file_keys() {
        let pollux = serde_json::to_value(PolicyParams::default()).unwrap();
        for e in entries() {
            let mut merged = pollux.clone();
            for (k, v) in e.param_defaults() {
                merged[k] = v;
            }
            let back: PolicyParams = serde_json::from_value(merged).unwrap();
            assert_eq!(back, e.default_params(), "{}", e.name);
        }
        let mip = entry("gpuplan-mip").unwrap().param_defaults();
        assert_eq!(
            serde_json::Value::Object(mip),
            serde_json::json!({"exploration_factor": 4, "restart_weight": 2.0})
        );
        assert!(entry("pollux-mip").unwrap().param_defaults().is_empty());
    }

    #[test]
    fn an_entry_alone_registers_a_planner_everywhere() {
        assert!(names().contains(&"example"));
        assert!(live_names().contains(&"example"));
        assert!(!placement_names().contains(&"example"));
        assert_eq!(describe("example"), Some(EXAMPLE.description));
        assert_eq!(default_params("example").exploration_factor, 3);
        assert_eq!(
            serde_json::Value::Object(entry("example").unwrap().param_defaults()),
            serde_json::json!({"exploration_factor": 3})
        );
        assert_eq!(create("example").unwrap().name(), "example");
    }
}
