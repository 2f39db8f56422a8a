//! Sharing through the whole round pipeline (both MIP formulations' group
//! options, the validator, the diff). A module of its own because the pipeline and the
//! registry sit above the formulations in solve's layers (scripts/check-deps.sh).

use gpuplan_core::{GpuId, JobId, Plan, Round};

use crate::pipeline::run_round;
use crate::testutil::{job, round, running};
use crate::Limits;

/// One T4; j0 runs on it, the others wait. p = 1 (total goodput), age
/// 300 s and δ = 30 s: a change costs each job the factor 300/330.
fn one_gpu(apps: &[&str], util: f64) -> Round {
    rigid_on("1x1", 1, apps, util)
}

/// Rigid `gpus`-GPU jobs of these apps on `cluster`, j0 running on the
/// first `gpus` GPUs of node 0, the others waiting; as [`one_gpu`] else.
fn rigid_on(cluster: &str, gpus: u32, apps: &[&str], util: f64) -> Round {
    let jobs = apps
        .iter()
        .enumerate()
        .map(|(i, app)| {
            let mut j = job(i as u32, gpus, 0.0);
            j.app = (*app).into();
            j.min_gpus = gpus;
            j.max_gpus = gpus;
            j.state.age_s = 300.0;
            j.utilization = Some(util);
            if i == 0 {
                j = running(j, &[(0, gpus)]);
            }
            j
        })
        .collect();
    let mut r = round(cluster, jobs, gpuplan_core::Interference::Avoid);
    r.params.p = 1.0;
    r.params.restart_penalty_s = 30.0;
    r.params.sharing = 2;
    r
}

/// `mip-exact`'s bound on a kept group that no one can join is its model's,
/// equal to the plan's objective; `mip-aggregate`'s is the count
/// relaxation's, which values sharers solo, so it is only above it.
fn tight(name: &str, bound: f64, eval: f64) {
    let tol = 1e-6 * eval.abs().max(1.0);
    if name.contains("aggregate") {
        assert!(bound >= eval - tol, "{name}: bound {bound} vs objective {eval}");
    } else {
        assert!(
            (bound - eval).abs() <= tol,
            "{name}: bound {bound} vs objective {eval}"
        );
    }
}

/// The planners that share: the exact formulation (through `pollux-mip`,
/// exact at these sizes) and the aggregate one.
const SHARING: [&str; 2] = ["pollux-mip", "mip-aggregate"];

fn plan(r: &Round) -> Plan {
    plan_by("pollux-mip", r)
}

/// `name`'s plan for `r` through the pipeline, checked against the
/// validator and never a fallback.
fn plan_by(name: &str, r: &Round) -> Plan {
    let mut p = crate::registry::create(name).unwrap();
    let limits = Limits {
        time_limit_s: 30.0,
        ..Limits::default()
    };
    let plan = run_round(p.as_mut(), r, &limits).unwrap().plan;
    assert!(
        !matches!(plan.status, gpuplan_core::PlanStatus::Fallback),
        "{name}: {plan:?}"
    );
    assert!(gpuplan_core::validate(r, &plan).is_ok(), "{name}: {plan:?}");
    plan
}

fn holders(p: &Plan) -> usize {
    p.allocations
        .values()
        .filter(|a| a.gpus().contains(&GpuId::new(gpuplan_core::NodeId(0), 0)))
        .count()
}

#[test]
fn light_jobs_share_and_busy_ones_do_not() {
    // Utilization 0.2 each: slowdown 1.56, 2 × 0.909 / 1.56 = 1.17 > 1.
    let light = plan(&one_gpu(&["cifar10", "ncf"], 0.2));
    assert_eq!(holders(&light), 2, "{light:?}");
    assert_eq!(light.get(JobId(0)), light.get(JobId(1)));
    // Utilization 1 each: slowdown 1.89, 2 × 0.909 / 1.89 = 0.96 < 1: keep j0 alone.
    let busy = plan(&one_gpu(&["cifar10", "ncf"], 1.0));
    assert_eq!(holders(&busy), 1, "{busy:?}");
    assert!(busy.get(JobId(1)).is_empty());
    // Sharing off: the same light round never shares.
    let mut off = one_gpu(&["cifar10", "ncf"], 0.2);
    off.params.sharing = 1;
    assert_eq!(holders(&plan(&off)), 1);
}

/// Under `sharing_pairs = measured` only a measured pair shares, and the
/// planner values it at its measured slowdowns, not the curve's: a pair the
/// curve calls too costly (utilization 1 each, 1.89×) shares when measured
/// at 1.1× each, and not at all once the rule refuses unmeasured pairs.
#[test]
fn measured_pairs_override_the_curve_and_measured_only_refuses_the_rest() {
    for name in SHARING {
        measured_pairs(name);
    }
}

fn measured_pairs(name: &str) {
    use gpuplan_core::colocation::{Colocation, MeasuredPair, GAVEL_CURVE};
    let plan = |r: &Round| plan_by(name, r);
    let mut r = one_gpu(&["cifar10", "ncf"], 1.0);
    assert_eq!(holders(&plan(&r)), 1);
    r.jobs[0].colocation_key = Some("x".into());
    r.jobs[1].colocation_key = Some("y".into());
    r.colocation = Some(Colocation::new(
        GAVEL_CURVE,
        vec![MeasuredPair {
            a: "x".into(),
            b: "y".into(),
            slowdown_a: 1.1,
            slowdown_b: 1.1,
        }],
    ));
    let measured = plan(&r);
    assert_eq!(holders(&measured), 2, "{measured:?}");
    r.params.sharing_pairs = gpuplan_core::SharingPairs::Measured;
    assert_eq!(holders(&plan(&r)), 2);
    // Light jobs the curve would pair (see above), but never measured together.
    let mut light = one_gpu(&["cifar10", "ncf"], 0.2);
    light.params.sharing_pairs = gpuplan_core::SharingPairs::Measured;
    assert_eq!(holders(&plan(&light)), 1);
    light.params.sharing_pairs = gpuplan_core::SharingPairs::All;
    assert_eq!(holders(&plan(&light)), 2);
}

/// The round after `r` with `plan` applied, 60 s later.
fn next(r: &Round, plan: &Plan) -> Round {
    let mut n = r.clone();
    for j in &mut n.jobs {
        let a = plan.get(j.id);
        if !a.is_empty() && j.state.allocation.is_empty() {
            j.state.restarts = 0;
        }
        j.state.allocation = a;
        j.state.age_s += 60.0;
    }
    n
}

/// Two rounds by hand: two light jobs start sharing the one T4; next
/// round the pair keeps it (no restart), and the model values that
/// exactly as the objective does (the pair's keep option, without the
/// restart factor). When one job's memory grows past the GPU, the other
/// keeps its GPU alone.
#[test]
fn a_shared_pair_keeps_its_gpu_and_a_sharer_can_keep_alone() {
    for name in SHARING {
        kept_pair(name);
    }
}

fn kept_pair(name: &str) {
    use crate::pipeline::Change;
    let mut r1 = one_gpu(&["cifar10", "ncf"], 0.2);
    r1.jobs[0].state.allocation = Default::default();
    r1.params.restart_penalty_s = 150.0;
    let mut p = crate::registry::create(name).unwrap();
    let limits = Limits {
        time_limit_s: 30.0,
        ..Limits::default()
    };
    let d1 = run_round(p.as_mut(), &r1, &limits).unwrap();
    assert_eq!(holders(&d1.plan), 2, "{:?}", d1.plan);
    let r2 = next(&r1, &d1.plan);
    let d2 = run_round(p.as_mut(), &r2, &limits).unwrap();
    assert_eq!(d2.change(JobId(0)), Some(Change::Keep), "{:?}", d2.plan);
    assert_eq!(d2.change(JobId(1)), Some(Change::Keep), "{:?}", d2.plan);
    let close = |d: &crate::pipeline::Decision, r: &Round| tight(name, d.plan.bound.unwrap(), d.objective(r));
    close(&d2, &r2);
    // j1 now needs 14 GiB: 4 + 14 > 16, the pair cannot stay; j0 keeps.
    let mut r3 = next(&r2, &d2.plan);
    r3.jobs[1].mem_gib = Some(14.0);
    let d3 = run_round(p.as_mut(), &r3, &limits).unwrap();
    assert_eq!(holders(&d3.plan), 1, "{:?}", d3.plan);
    let keeper = if d3.plan.get(JobId(0)).is_empty() { 1 } else { 0 };
    assert_eq!(d3.change(JobId(keeper)), Some(Change::Keep), "{:?}", d3.plan);
    close(&d3, &r3);
}

#[test]
fn never_past_memory_or_k() {
    for name in SHARING {
        within_memory_and_k(name);
    }
}

fn within_memory_and_k(name: &str) {
    let plan = |r: &Round| plan_by(name, r);
    // cifar10 (4 GiB) + imagenet (14 GiB) exceed a T4's 16 GiB.
    let heavy = plan(&one_gpu(&["cifar10", "imagenet"], 0.2));
    assert_eq!(holders(&heavy), 1, "{heavy:?}");
    // Four light jobs (4 + 2 + 4 + 2 GiB): k jobs on the GPU, never more.
    for k in [2, 3] {
        let mut four = one_gpu(&["cifar10", "ncf", "cifar10", "ncf"], 0.1);
        four.params.sharing = k;
        let p = plan(&four);
        assert_eq!(holders(&p), k as usize, "k = {k}: {p:?}");
    }
    // Three light 6 GiB jobs, k = 3: any two fit a T4 (12 GiB), three do
    // not (18 > 16), so a pair at most.
    let mut three = one_gpu(&["cifar10", "ncf", "cifar10"], 0.1);
    three.params.sharing = 3;
    for j in &mut three.jobs {
        j.mem_gib = Some(6.0);
    }
    let p = plan(&three);
    assert_eq!(holders(&p), 2, "{p:?}");
}

/// Three light jobs on one T4 with k = 3 (utilization 0.1 each, all sums
/// below the curve's knee 0.4, so any group slows each job by base f =
/// 1.5607). The objective is the mean of v + ε (p = 1, ε = 1e-3); j0 keeps
/// its GPU (value 1), a started job is worth 300/330. j0 alone: 1/3; a
/// pair: (1 + 300/330) / f / 3 = 0.4077; all three: (1 + 2·300/330) / f /
/// 3 = 0.6019, the optimum. Both formulations find it, at the same
/// objective; with k = 2 they find the pair.
#[test]
fn three_light_jobs_beat_any_pair_when_k_is_3() {
    let mut r = one_gpu(&["cifar10", "ncf", "cifar10"], 0.1);
    r.params.sharing = 3;
    let f = gpuplan_core::colocation::GAVEL_CURVE.base;
    let (restart, eps) = (300.0 / 330.0, gpuplan_core::objective::EPSILON);
    let by_hand = (1.0 + 2.0 * restart) / f / 3.0 + eps;
    let pair = (1.0 + restart) / f / 3.0 + eps;
    assert!(by_hand > pair && pair > 1.0 / 3.0 + eps);
    let mut objectives = Vec::new();
    for name in ["mip-exact", "mip-aggregate", "pollux-mip", "pollux-mip-aggregate"] {
        let p = plan_by(name, &r);
        assert_eq!(holders(&p), 3, "{name}: {p:?}");
        let one = p.get(JobId(0));
        assert!((1..3).all(|j| p.get(JobId(j)) == one), "{name}: {p:?}");
        let v = gpuplan_core::objective::evaluate(&r, &p);
        assert!((v - by_hand).abs() <= 1e-6, "{name}: {v} vs by hand {by_hand}");
        objectives.push(v);
    }
    assert!(
        objectives.iter().all(|v| (v - objectives[0]).abs() <= 1e-9),
        "{objectives:?}"
    );
    // The same round with k = 2: a pair, as before.
    r.params.sharing = 2;
    for name in ["mip-exact", "mip-aggregate"] {
        let p = plan_by(name, &r);
        assert_eq!(holders(&p), 2, "{name}: {p:?}");
        let v = gpuplan_core::objective::evaluate(&r, &p);
        assert!((v - pair).abs() <= 1e-6, "{name}: {v} vs by hand {pair}");
    }
}

/// A group of three that shares now keeps its GPU next round (no restart
/// for any of them), valued exactly as the objective values the plan; and
/// a three-job group on two GPUs gets the same two named GPUs for all.
#[test]
fn a_shared_triple_keeps_its_gpu_and_spans_gpus_as_one_unit() {
    for name in SHARING {
        use crate::pipeline::Change;
        let mut r1 = one_gpu(&["cifar10", "ncf", "cifar10"], 0.1);
        r1.params.sharing = 3;
        r1.jobs[0].state.allocation = Default::default();
        let mut p = crate::registry::create(name).unwrap();
        let limits = Limits {
            time_limit_s: 30.0,
            ..Limits::default()
        };
        let d1 = run_round(p.as_mut(), &r1, &limits).unwrap();
        assert_eq!(holders(&d1.plan), 3, "{name}: {:?}", d1.plan);
        let r2 = next(&r1, &d1.plan);
        let d2 = run_round(p.as_mut(), &r2, &limits).unwrap();
        for j in 0..3 {
            assert_eq!(d2.change(JobId(j)), Some(Change::Keep), "{name}: {:?}", d2.plan);
        }
        tight(name, d2.plan.bound.unwrap(), d2.objective(&r2));
    }
    let mut r = rigid_on("1x2", 2, &["cifar10", "ncf", "cifar10", "ncf"], 0.1);
    r.params.sharing = 3;
    for name in ["mip-exact", "mip-aggregate"] {
        let p = plan_by(name, &r);
        let placed: Vec<&gpuplan_core::Allocation> =
            p.allocations.values().filter(|a| !a.is_empty()).collect();
        assert_eq!(placed.len(), 3, "{name}: {p:?}");
        assert!(placed.iter().all(|a| *a == placed[0]), "{name}: {p:?}");
        assert!(placed[0].is_bound() && placed[0].num_gpus() == 2, "{name}: {p:?}");
    }
}

/// The aggregate formulation shares where the exact one does, on the
/// hand-made rounds above, and reaches the same objective: light jobs
/// share, busy ones do not, and nothing shares with sharing off.
#[test]
fn aggregate_shares_as_exact_does() {
    let mut off = one_gpu(&["cifar10", "ncf"], 0.2);
    off.params.sharing = 1;
    let cases = [
        (one_gpu(&["cifar10", "ncf"], 0.2), 2),
        (one_gpu(&["cifar10", "ncf"], 1.0), 1),
        (off, 1),
    ];
    for (r, want) in cases {
        let exact = plan_by("mip-exact", &r);
        let agg = plan_by("mip-aggregate", &r);
        assert_eq!(holders(&exact), want, "{exact:?}");
        assert_eq!(holders(&agg), want, "{agg:?}");
        let (e, a) = (
            gpuplan_core::objective::evaluate(&r, &exact),
            gpuplan_core::objective::evaluate(&r, &agg),
        );
        assert!(
            (e - a).abs() <= 1e-9 * e.abs().max(1.0),
            "exact {e} vs aggregate {a}"
        );
    }
}

/// A pair on more than one GPU: three light rigid 2-GPU jobs on one
/// 2-GPU node, j0 running. Both formulations put one pair on both GPUs
/// (the same two named GPUs for its two jobs) and leave the third job
/// waiting, at the same objective. The aggregate model charges the pair's
/// two GPUs once: charged per job, the pair would need four.
#[test]
fn a_pair_takes_its_gpus_once_and_both_jobs_get_the_same_ones() {
    let r = rigid_on("1x2", 2, &["cifar10", "ncf", "cifar10"], 0.2);
    let mut objectives = Vec::new();
    for name in ["mip-exact", "mip-aggregate"] {
        let p = plan_by(name, &r);
        let placed: Vec<&gpuplan_core::Allocation> =
            p.allocations.values().filter(|a| !a.is_empty()).collect();
        assert_eq!(placed.len(), 2, "{name}: {p:?}");
        assert_eq!(placed[0], placed[1], "{name}: {p:?}");
        assert!(placed[0].is_bound() && placed[0].num_gpus() == 2, "{name}: {p:?}");
        objectives.push(gpuplan_core::objective::evaluate(&r, &p));
    }
    assert!(
        (objectives[0] - objectives[1]).abs() <= 1e-9 * objectives[0].abs().max(1.0),
        "{objectives:?}"
    );
}
