//! Every registered planner on generated rounds: valid plans, determinism,
//! and the exact MIP at least as good as every heuristic; a brute-force
//! oracle for tiny rounds; metamorphic properties.

use gpuplan_core::objective::evaluate;
use gpuplan_core::{
    validate, Allocation, Cluster, Interference, JobId, JobState, NodeId, Plan, PolicyParams, Round, RoundJob,
};
use gpuplan_solve::{registry, Limits};
use proptest::prelude::*;

mod common;
use common::model;

/// (has model, a, sync, var, age, restarts, current per-node GPUs,
/// preemptible, max_gpus_used, rigid size or 0 for elastic)
type JobGen = (bool, f64, f64, f64, f64, u32, Vec<u32>, bool, u32, u32);

fn simple() -> JobGen {
    (false, 0.1, 0.01, 1.0, 1000.0, 0, vec![], true, 2, 0)
}

fn build(nodes: u32, gpn: u32, jobs: Vec<JobGen>, interference: Interference, p: f64) -> Round {
    let cluster = Cluster::homogeneous(nodes, gpn, "t4");
    let mut free = vec![gpn; nodes as usize];
    let mut out = Vec::new();
    for (i, (has, a, sync, var, age, restarts, cur, pre, used, rigid)) in jobs.into_iter().enumerate() {
        // Keep current allocations consistent with capacity (a rigid job starts queued).
        let mut counts = Vec::new();
        let cur = if rigid > 0 { vec![] } else { cur };
        for (n, &k) in cur.iter().enumerate().take(nodes as usize) {
            let k = k.min(free[n]);
            if k > 0 {
                free[n] -= k;
                counts.push((NodeId(n as u32), k));
            }
        }
        let alloc = Allocation::from_counts(&counts);
        out.push(RoundJob {
            submit_s: i as f64,
            requested_gpus: 1 + (i as u32 % gpn.max(1)),
            batch_size: 64,
            min_gpus: rigid.max(1),
            max_gpus: if rigid > 0 { rigid } else { 8 },
            preemptible: pre || alloc.is_empty(),
            state: JobState {
                age_s: age,
                restarts,
                attained_gpu_s: age * alloc.num_gpus() as f64,
                max_gpus_used: used.max(alloc.num_gpus()),
                allocation: alloc,
                ..Default::default()
            },
            model: if has { Some(model(a, sync, var)) } else { None },
            ..RoundJob::new(JobId(i as u32), format!("j{i}"), "synthetic")
        });
    }
    let mut round = Round {
        now_s: 1000.0,
        cluster,
        jobs: out,
        params: PolicyParams {
            p,
            interference,
            ..Default::default()
        },
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: Vec::new(),
    };
    // Pinned multi-node jobs must not already share a node when the rule is on.
    if interference == Interference::Avoid {
        let mut seen = vec![false; nodes as usize];
        for j in round.jobs.iter_mut() {
            let per = j.state.allocation.per_node();
            if per.len() > 1 && !j.preemptible {
                if per.iter().any(|(n, _)| seen[n.0 as usize]) {
                    j.preemptible = true;
                } else {
                    for (n, _) in &per {
                        seen[n.0 as usize] = true;
                    }
                }
            }
        }
    }
    round
}

fn job_gen() -> impl Strategy<Value = JobGen> {
    (
        any::<bool>(),
        0.01f64..0.3,
        0.001f64..0.2,
        0.0f64..50.0,
        10.0f64..5000.0,
        0u32..4,
        prop::collection::vec(0u32..3, 0..3),
        prop::bool::weighted(0.8),
        0u32..5,
        // Mostly elastic; sometimes a rigid size that is no power of two
        // or whole-node multiple on most of the generated clusters.
        prop::sample::select(vec![0u32, 0, 0, 0, 0, 0, 3, 5, 6, 7]),
    )
}

fn check_round(nodes: u32, gpn: u32, max_jobs: usize) -> impl Strategy<Value = Round> {
    (
        prop::collection::vec(job_gen(), 1..max_jobs),
        any::<bool>(),
        prop::sample::select(vec![-1.0, 0.0, 1.0, f64::NEG_INFINITY]),
    )
        .prop_map(move |(jobs, avoid, p)| {
            build(
                nodes,
                gpn,
                jobs,
                if avoid {
                    Interference::Avoid
                } else {
                    Interference::Allow
                },
                p,
            )
        })
}

fn plan(name: &str, round: &Round, seed: u64) -> Plan {
    let mut p = registry::create(name).unwrap();
    let lim = Limits {
        time_limit_s: 30.0,
        gap: 1e-9,
        threads: 1,
        seed,
        memory_limit_mb: None,
    };
    gpuplan_solve::run_round(p.as_mut(), round, &lim).unwrap().plan
}

fn validates(name: &str, round: &Round, plan: &Plan) {
    let p = registry::create(name).unwrap();
    let check = Round {
        params: gpuplan_solve::rules(&p.traits(), &round.params),
        ..round.clone()
    };
    if let Err(v) = validate(&check, plan) {
        panic!(
            "{name}: invalid plan {:?}: {v:?}\nround: {}",
            plan.allocations,
            serde_json::to_string(round).unwrap()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    #[test]
    fn every_planner_is_valid_and_deterministic(round in (1u32..4, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 6))) {
        for name in registry::names() {
            let a = plan(name, &round, 3);
            validates(name, &round, &a);
            let b = plan(name, &round, 3);
            prop_assert_eq!(&a.allocations, &b.allocations, "{} not deterministic", name);
        }
    }

    #[test]
    fn exact_mip_beats_heuristics(round in (1u32..4, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 6))) {
        let best = evaluate(&round, &plan("mip-exact", &round, 0));
        for name in ["greedy", "lagrange", "mip-aggregate", "mip-aggregate-microlp", "mip-exact-microlp", "pollux-ga"] {
            let other = evaluate(&round, &plan(name, &round, 0));
            prop_assert!(best >= other - 1e-6 * other.abs().max(1.0), "{}: {} > mip-exact {}", name, other, best);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    /// A planner's `shares_gpus` is true to what it does: under sharing,
    /// one that says it does not share never gives a GPU two jobs, and
    /// the registry's list of sharers is what the CLI and explorer show.
    #[test]
    fn planners_that_do_not_share_never_do(
        round in (1u32..3, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
    ) {
        let round = shared(round, 0.2, 2, 2.0);
        for name in registry::names() {
            if registry::create(name).unwrap().shares_gpus() {
                continue;
            }
            let a = plan(name, &round, 3);
            let mut seen = std::collections::BTreeSet::new();
            for g in a.allocations.values().flat_map(|a| a.gpus()) {
                prop_assert!(seen.insert(*g), "{} shared {:?} though it says it does not", name, g);
            }
        }
        prop_assert!(registry::sharing_names().contains(&"mip-exact"));
    }
}

/// `round` with some of its free GPUs reserved (held by jobs outside it):
/// `pick[i]` reserves the i-th free GPU, in node and index order.
fn reserve(mut round: Round, pick: &[bool]) -> Round {
    gpuplan_core::bind_round(&mut round);
    let held: std::collections::BTreeSet<gpuplan_core::GpuId> = round
        .jobs
        .iter()
        .flat_map(|j| j.state.allocation.gpus().to_vec())
        .collect();
    let free = round
        .cluster
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(n, node)| (0..node.gpus).map(move |i| gpuplan_core::GpuId::new(NodeId(n as u32), i)));
    round.reserved = free
        .filter(|g| !held.contains(g))
        .zip(pick)
        .filter_map(|(g, &p)| p.then_some(g))
        .collect();
    round
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// GPUs held by jobs outside the round (`reserved`): every planner's
    /// plan leaves them alone (the validator refuses a plan that uses one),
    /// and a round whose free GPUs are all reserved still plans.
    #[test]
    fn every_planner_leaves_reserved_gpus_alone(
        round in (1u32..4, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 6)),
        pick in prop::collection::vec(any::<bool>(), 16),
    ) {
        let round = reserve(round, &pick);
        round.check().unwrap();
        for name in registry::names() {
            let a = plan(name, &round, 3);
            validates(name, &round, &a);
            for g in a.allocations.values().flat_map(|a| a.gpus()) {
                prop_assert!(!round.reserved.contains(g), "{} placed a job on reserved {:?}", name, g);
            }
        }
    }
}

/// Every per-node allocation of every job, checked by the validator, scored by the common objective.
/// `round` with sharing on (k = 2) and every job light enough that
/// pairs can pay (utilization `util`, 2 GiB, so any two fit a T4).
fn shared(mut round: Round, util: f64, k: u32, mem_gib: f64) -> Round {
    round.params.sharing = k;
    for j in &mut round.jobs {
        j.utilization = Some(util);
        j.mem_gib = Some(mem_gib);
    }
    round
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// The planners that share, on generated rounds with sharing on (k = 2
    /// or 3; 6 GiB jobs fit a 16 GiB GPU two at a time, not three):
    /// valid plans (the validator checks k and memory), the same plan
    /// twice, and never worse than greedy (which never shares).
    #[test]
    fn sharing_planners_are_valid_and_deterministic(
        round in (1u32..3, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
        util in prop::sample::select(vec![0.05, 0.2, 0.5, 1.0]),
        k in 2u32..4,
        mem_gib in prop::sample::select(vec![2.0, 6.0]),
    ) {
        let round = shared(round, util, k, mem_gib);
        let greedy = evaluate(&round, &plan("greedy", &round, 0));
        for name in ["mip-exact", "mip-aggregate", "pollux-mip", "pollux-mip-aggregate"] {
            let a = plan(name, &round, 3);
            validates(name, &round, &a);
            let b = plan(name, &round, 3);
            prop_assert_eq!(&a.allocations, &b.allocations, "{} not deterministic", name);
            let v = evaluate(&round, &a);
            prop_assert!(v >= greedy - 1e-6 * greedy.abs().max(1.0), "{}: {} < greedy {}", name, v, greedy);
        }
    }
}

fn brute_force(round: &Round) -> f64 {
    let nodes = round.cluster.num_nodes();
    let cap = round.cluster.nodes[0].gpus;
    let per_job: Vec<Vec<Allocation>> = round
        .jobs
        .iter()
        .map(|j| {
            let mut v = vec![Allocation::default()];
            let total = (cap + 1).pow(nodes as u32);
            for code in 1..total {
                let mut c = code;
                let mut counts = Vec::new();
                for n in 0..nodes {
                    let k = c % (cap + 1);
                    c /= cap + 1;
                    if k > 0 {
                        counts.push((NodeId(n as u32), k));
                    }
                }
                let a = Allocation::from_counts(&counts);
                if a.num_gpus() <= gpuplan_solve::max_gpus(j, round) || a.same_gpus(&j.state.allocation) {
                    v.push(a);
                }
            }
            v
        })
        .collect();
    let mut best = f64::NEG_INFINITY;
    let mut idx = vec![0usize; per_job.len()];
    loop {
        let mut plan = Plan::new("oracle", gpuplan_core::PlanStatus::Optimal);
        for (j, &i) in idx.iter().enumerate() {
            if !per_job[j][i].is_empty() {
                plan.allocations.insert(round.jobs[j].id, per_job[j][i].clone());
            }
        }
        if validate(round, &plan).is_ok() {
            best = best.max(evaluate(round, &plan));
        }
        let mut d = 0;
        loop {
            if d == idx.len() {
                return best;
            }
            idx[d] += 1;
            if idx[d] < per_job[d].len() {
                break;
            }
            idx[d] = 0;
            d += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn exact_mip_matches_brute_force(round in check_round(2, 2, 4)) {
        let want = brute_force(&round);
        for name in ["mip-exact", "mip-exact-microlp"] {
            let got = evaluate(&round, &plan(name, &round, 0));
            prop_assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{}: {} vs oracle {}", name, got, want);
        }
    }

    #[test]
    fn more_gpus_never_lower_the_optimum(round in check_round(2, 2, 5)) {
        let mut bigger = round.clone();
        bigger.cluster.nodes.push(gpuplan_core::Node { name: "extra".into(), gpus: 2, gpu_type: "t4".into() });
        // The speedup baseline (fair share) depends on the cluster size, so compare
        // on the bigger cluster: the old optimum is still feasible there.
        let old = evaluate(&bigger, &plan("mip-exact", &round, 0));
        let new = evaluate(&bigger, &plan("mip-exact", &bigger, 0));
        prop_assert!(new >= old - 1e-9 * old.abs().max(1.0), "{} < {}", new, old);
    }

    #[test]
    fn relabelling_identical_nodes_keeps_the_objective(round in check_round(3, 2, 5)) {
        let a = evaluate(&round, &plan("mip-exact", &round, 0));
        let mut r = round.clone();
        for j in r.jobs.iter_mut() {
            let v: Vec<gpuplan_core::GpuId> = j
                .state
                .allocation
                .gpus()
                .iter()
                .map(|g| gpuplan_core::GpuId::new(NodeId(2 - g.node.0), g.index))
                .collect();
            j.state.allocation = Allocation::from_gpus(v);
        }
        let b = evaluate(&r, &plan("mip-exact", &r, 0));
        prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{} vs {}", a, b);
    }
}

#[test]
fn hand_solved_two_jobs_one_node() {
    // 1 node × 2 GPUs, two new jobs with linear speedup (no model): fair share is
    // 1 GPU, so a job's speedup is its GPU count, times the restart factor
    // 1000/1030 for starting. p = -1: 1 GPU each (harmonic mean of f and f)
    // beats 2 + 0 (harmonic mean of 2f and 0, about 0.002).
    let f = 1000.0 / 1030.0;
    let eps = gpuplan_core::objective::EPSILON;
    for p in [-1.0, 0.0, f64::NEG_INFINITY] {
        let round = build(1, 2, vec![simple(), simple()], Interference::Avoid, p);
        let plan = plan("mip-exact", &round, 0);
        assert_eq!(plan.get(JobId(0)).num_gpus(), 1, "p = {p}");
        assert_eq!(plan.get(JobId(1)).num_gpus(), 1, "p = {p}");
        assert!((evaluate(&round, &plan) - (f + eps)).abs() < 1e-9, "p = {p}");
    }
    // p = +1 (arithmetic mean): 1+1 and 2+0 tie at (f + f)/2 + ε; either is optimal.
    let round = build(1, 2, vec![simple(), simple()], Interference::Avoid, 1.0);
    let v = evaluate(&round, &plan("mip-exact", &round, 0));
    assert!((v - (f + eps)).abs() < 1e-9, "{v}");
}

#[test]
fn infeasible_jobs_get_a_reason_and_the_rest_is_solved() {
    let mut round = build(2, 2, vec![simple(), simple()], Interference::Avoid, -1.0);
    round.jobs[0].min_gpus = 9;
    round.jobs[0].max_gpus = 16;
    for name in ["mip-exact", "mip-aggregate", "greedy"] {
        let p = plan(name, &round, 0);
        validate(&round, &p).unwrap();
        assert!(p.get(JobId(0)).is_empty(), "{name}");
        assert!(!p.get(JobId(1)).is_empty(), "{name}");
        if name != "greedy" {
            let why = p.reason.clone().unwrap_or_default();
            assert!(
                why.contains("j0 needs at least 9 GPUs but the cluster has 4"),
                "{name}: {why}"
            );
        }
    }
}

/// Rigid sizes with no packable shape (12 GPUs on 8-GPU nodes, 6 within a
/// node) still run under the packable-shape planners: they take whole nodes.
#[test]
fn rigid_unpackable_sizes_take_whole_nodes() {
    let rigid = |k: u32| (false, 0.1, 0.01, 1.0, 1000.0, 0, vec![], true, 2, k);
    let round = build(
        4,
        8,
        vec![rigid(12), rigid(6), simple(), simple()],
        Interference::Avoid,
        -1.0,
    );
    for name in ["mip-aggregate", "mip-aggregate-microlp", "greedy", "mip-exact"] {
        let p = plan(name, &round, 0);
        validates(name, &round, &p);
        assert_eq!(p.get(JobId(0)).num_gpus(), 12, "{name}: {:?}", p.allocations);
        assert_eq!(p.get(JobId(0)).num_nodes(), 2, "{name}");
        assert_eq!(p.get(JobId(1)).num_gpus(), 6, "{name}: {:?}", p.allocations);
        assert_eq!(p.get(JobId(1)).num_nodes(), 1, "{name}");
        assert!(
            !p.get(JobId(2)).is_empty() && !p.get(JobId(3)).is_empty(),
            "{name}"
        );
    }
    // On a heterogeneous cluster (the aggregate model's typed path).
    let round = with_types(round, &[false, false, true, true], 4);
    for name in ["mip-aggregate", "greedy"] {
        let p = plan(name, &round, 0);
        validates(name, &round, &p);
        assert_eq!(p.get(JobId(0)).num_gpus(), 12, "{name}: {:?}", p.allocations);
        assert_eq!(p.get(JobId(1)).num_gpus(), 6, "{name}: {:?}", p.allocations);
    }
}

/// Give each node one of two GPU types (and, for "b", `gpus_b` GPUs per node).
fn with_types(round: Round, types: &[bool], gpus_b: u32) -> Round {
    with_named_types(round, types, gpus_b, "b")
}

/// [`with_types`] with the second type named `b` (a100: a type with a speed).
fn with_named_types(mut round: Round, types: &[bool], gpus_b: u32, b: &str) -> Round {
    for (n, node) in round.cluster.nodes.iter_mut().enumerate() {
        if types.get(n).copied().unwrap_or(false) {
            node.gpu_type = b.into();
            // Shrinking a node must not break current allocations: only grow.
            node.gpus = node.gpus.max(gpus_b);
        }
    }
    // Running jobs that straddle types may not exist in a real cluster: stop them.
    let ty: Vec<String> = round
        .cluster
        .nodes
        .iter()
        .map(|n| n.gpu_type.to_string())
        .collect();
    for j in round.jobs.iter_mut() {
        let per = j.state.allocation.per_node();
        if per
            .iter()
            .any(|(n, _)| ty[n.0 as usize] != ty[per[0].0 .0 as usize])
        {
            j.state.allocation = Allocation::default();
            j.preemptible = true;
        }
    }
    round
}

/// No job's GPUs span two GPU types.
fn one_type_per_job(name: &str, round: &Round, plan: &Plan) {
    for (id, a) in &plan.allocations {
        let types: std::collections::BTreeSet<&str> = a
            .per_node()
            .iter()
            .map(|(n, _)| round.cluster.nodes[n.0 as usize].gpu_type.as_str())
            .collect();
        assert!(types.len() <= 1, "{name}: job {id:?} mixes GPU types {types:?}");
    }
}

const GOODPUT_PLANNERS: [&str; 11] = [
    "greedy",
    "lagrange",
    "mip-exact",
    "mip-aggregate",
    "mip-exact-microlp",
    "mip-aggregate-microlp",
    "mip-node",
    "pollux-mip",
    "pollux-mip-aggregate",
    "pollux-ga",
    "sia",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn heterogeneous_types_are_never_mixed(
        round in (2u32..5, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
        types in prop::collection::vec(any::<bool>(), 4),
        gpus_b in 1u32..6,
    ) {
        let round = with_types(round, &types, gpus_b);
        let exact = plan("mip-exact", &round, 0);
        let best = evaluate(&round, &exact);
        for name in GOODPUT_PLANNERS {
            let p = plan(name, &round, 0);
            validates(name, &round, &p);
            if name != "pollux-ga" {
                one_type_per_job(name, &round, &p);
            }
            let v = evaluate(&round, &p);
            if name != "pollux-ga" {
                prop_assert!(best >= v - 1e-6 * v.abs().max(1.0), "{}: {} > mip-exact {}", name, v, best);
            }
        }
        // The two exact models agree.
        let node = evaluate(&round, &plan("mip-node", &round, 0));
        prop_assert!((node - best).abs() <= 1e-6 * best.abs().max(1.0), "mip-node {} vs mip-exact {}", node, best);
    }

    /// Types with different speeds (t4 and a100, the table's ratios): each
    /// job's models were fitted on t4 and some also on a100, so every
    /// configuration's value depends on its type. Still valid, one type per
    /// job, mip-exact at least as good as every other planner, and the node
    /// model agrees with it.
    #[test]
    fn heterogeneous_speeds_are_priced_by_type(
        round in (2u32..5, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
        types in prop::collection::vec(any::<bool>(), 4),
        gpus_b in 1u32..6,
        measured in prop::collection::vec(0.2f64..3.0, 7),
    ) {
        let mut round = with_named_types(round, &types, gpus_b, "a100");
        for (j, f) in round.jobs.iter_mut().zip(&measured) {
            let Some(m) = j.model else { continue };
            j.model_type = Some("t4".into());
            if *f > 1.5 {
                // Measured on the a100 too: its own fit, compute × 1/f.
                let mut on = m;
                on.perf.alpha_c /= f;
                on.perf.beta_c /= f;
                j.type_models.push(gpuplan_core::TypedModel { gpu_type: "a100".into(), model: on });
            }
        }
        let exact = plan("mip-exact", &round, 0);
        let best = evaluate(&round, &exact);
        for name in GOODPUT_PLANNERS {
            let p = plan(name, &round, 0);
            validates(name, &round, &p);
            one_type_per_job(name, &round, &p);
            let v = evaluate(&round, &p);
            // pollux-ga plans under its own rules (as in the test above).
            if name != "pollux-ga" {
                prop_assert!(best >= v - 1e-6 * v.abs().max(1.0), "{}: {} > mip-exact {}", name, v, best);
            }
        }
        let node = evaluate(&round, &plan("mip-node", &round, 0));
        prop_assert!((node - best).abs() <= 1e-6 * best.abs().max(1.0), "mip-node {} vs mip-exact {}", node, best);
    }

    #[test]
    fn pattern_and_node_models_agree(round in (2u32..4, 2u32..5).prop_flat_map(|(n, g)| check_round(n, g, 8))) {
        let a = evaluate(&round, &plan("mip-exact", &round, 0));
        let b = evaluate(&round, &plan("mip-node", &round, 0));
        prop_assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0), "mip-exact {} vs mip-node {}", a, b);
    }

    #[test]
    fn exact_bound_brackets_the_objective(round in (1u32..4, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 6))) {
        let p = plan("mip-exact", &round, 0);
        let obj = evaluate(&round, &p);
        if p.status == gpuplan_core::PlanStatus::Optimal {
            let bound = p.bound.expect("an optimal HiGHS solve reports its bound");
            prop_assert!(bound >= obj - 1e-6 * obj.abs().max(1.0), "bound {} < objective {}", bound, obj);
            prop_assert!(p.gap.unwrap() <= 1e-6, "gap {:?}", p.gap);
        }
    }
}

#[test]
fn hand_solved_heterogeneous_cluster() {
    // Two 4-GPU "t4" nodes and one 4-GPU "a100" node; one new job with linear
    // speedup that may use 8 GPUs. Mixing types could give it 12 GPUs, but a
    // job never mixes types, so the optimum is 8 GPUs on the two t4 nodes.
    let mut round = build(3, 4, vec![simple()], Interference::Avoid, -1.0);
    round.cluster.nodes[2].gpu_type = "a100".into();
    round.jobs[0].max_gpus = 16;
    round.jobs[0].state.max_gpus_used = 8;
    let f = 1000.0 / 1030.0;
    for name in ["mip-exact", "mip-node", "mip-exact-microlp", "mip-aggregate"] {
        let p = plan(name, &round, 0);
        validates(name, &round, &p);
        one_type_per_job(name, &round, &p);
        let a = p.get(JobId(0));
        assert_eq!(a.per_node(), vec![(NodeId(0), 4), (NodeId(1), 4)], "{name}");
        // Fair share: ceil(12 GPUs / 1 job) = 12, so 8 GPUs are worth 8/12 × f.
        let want = 8.0 / 12.0 * f + gpuplan_core::objective::EPSILON;
        assert!((evaluate(&round, &p) - want).abs() < 1e-9, "{name}");
    }
    // A job that needs more GPUs than any one type has gets a per-job reason.
    round.jobs[0].min_gpus = 9;
    let p = plan("mip-exact", &round, 0);
    assert!(p.get(JobId(0)).is_empty());
    let why = p.reason.unwrap_or_default();
    assert!(
        why.contains("j0 needs at least 9 GPUs of one type but the largest GPU type has 8"),
        "{why}"
    );
}

#[test]
fn exact_reports_bound_and_gap_at_the_optimum() {
    let round = build(
        2,
        4,
        vec![simple(), simple(), simple()],
        Interference::Avoid,
        -1.0,
    );
    let p = plan("mip-exact", &round, 0);
    assert_eq!(p.status, gpuplan_core::PlanStatus::Optimal);
    let obj = evaluate(&round, &p);
    let bound = p.bound.unwrap();
    assert!(
        bound >= obj - 1e-9 && bound <= obj * (1.0 + 1e-6),
        "bound {bound}, objective {obj}"
    );
    assert!(p.gap.unwrap() <= 1e-6);
}

/// The model objective (power mean of chosen values) of an aggregate solution.
fn aggregate_value(round: &Round, choices: &[gpuplan_solve::Pick]) -> f64 {
    use gpuplan_core::objective::{fair_share, power_mean, restart_factor, speedup};
    use gpuplan_solve::Choice;
    let fair = fair_share(round);
    let mut v = vec![0.0; round.jobs.len()];
    let types = round.cluster.types();
    for &gpuplan_solve::Pick {
        job: j,
        choice: c,
        gpu_type,
        ..
    } in choices
    {
        let job = &round.jobs[j];
        let cur = job.current();
        v[j] = match c {
            Choice::Keep => speedup(
                job,
                round.cluster.type_of(cur),
                cur.num_nodes(),
                cur.num_gpus(),
                fair,
            ),
            Choice::Config { nodes, gpus } => {
                let ty = gpu_type.map(|t| &types[t]);
                speedup(job, ty, nodes, gpus, fair) * restart_factor(job, &round.params)
            }
        };
    }
    power_mean(&v, round.params.p)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Lagrangian pricing drops only options that cannot beat its incumbent,
    /// so the priced model has the full model's optimum.
    #[test]
    fn aggregate_pricing_keeps_the_optimum(round in (1u32..6, 1u32..9).prop_flat_map(|(n, g)| check_round(n, g, 14))) {
        use gpuplan_solve::{solve_aggregate_with, Pricing};
        use gpuplan_solve::Solver;
        let lim = Limits { time_limit_s: 30.0, gap: 1e-9, threads: 1, seed: 0, memory_limit_mb: None };
        let priced = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Lagrangian).unwrap();
        let full = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Off).unwrap();
        let (a, b) = (aggregate_value(&round, &priced.choices), aggregate_value(&round, &full.choices));
        prop_assert!((a - b).abs() <= 1e-7 * b.abs().max(1.0), "priced {} vs full {}", a, b);
        if let (Some(bound), true) = (priced.bound, b.is_finite()) {
            prop_assert!(bound >= b - 1e-7 * b.abs().max(1.0), "bound {} below optimum {}", bound, b);
        }
    }
    /// The same with two GPU types of different speeds and node sizes:
    /// pricing per type keeps the optimum too.
    #[test]
    fn aggregate_pricing_keeps_the_optimum_with_types(
        round in (2u32..6, 1u32..9).prop_flat_map(|(n, g)| check_round(n, g, 14)),
        types in prop::collection::vec(any::<bool>(), 6),
        gpus_b in 1u32..9,
    ) {
        use gpuplan_solve::{solve_aggregate_with, Pricing};
        use gpuplan_solve::Solver;
        let mut round = with_named_types(round, &types, gpus_b, "a100");
        for j in round.jobs.iter_mut().filter(|j| j.model.is_some()) {
            j.model_type = Some("t4".into());
        }
        let lim = Limits { time_limit_s: 30.0, gap: 1e-9, threads: 1, seed: 0, memory_limit_mb: None };
        let priced = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Lagrangian).unwrap();
        let full = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Off).unwrap();
        let (a, b) = (aggregate_value(&round, &priced.choices), aggregate_value(&round, &full.choices));
        prop_assert!((a - b).abs() <= 1e-7 * b.abs().max(1.0), "priced {} vs full {}", a, b);
        if let (Some(bound), true) = (priced.bound, b.is_finite()) {
            prop_assert!(bound >= b - 1e-7 * b.abs().max(1.0), "bound {} below optimum {}", bound, b);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// `lagrange`'s bound is an upper bound: never below the optimum
    /// mip-exact proves, with one type or two of different speeds and
    /// node sizes; its plan is never above that optimum, and `optimal`
    /// only within its gap.
    #[test]
    fn the_lagrange_bound_is_never_below_the_optimum(
        round in (2u32..6, 1u32..9).prop_flat_map(|(n, g)| check_round(n, g, 14)),
        types in prop::collection::vec(any::<bool>(), 6),
        gpus_b in 1u32..9,
        typed in any::<bool>(),
    ) {
        let mut round = round;
        if typed {
            round = with_named_types(round, &types, gpus_b, "a100");
            for j in round.jobs.iter_mut().filter(|j| j.model.is_some()) {
                j.model_type = Some("t4".into());
            }
        }
        let exact = plan("mip-exact", &round, 0);
        prop_assume!(exact.status == gpuplan_core::PlanStatus::Optimal);
        let best = evaluate(&round, &exact);
        let lag = plan("lagrange", &round, 0);
        validates("lagrange", &round, &lag);
        let v = evaluate(&round, &lag);
        let tol = 1e-7 * best.abs().max(1.0);
        prop_assert!(v <= best + tol, "lagrange {} above the optimum {}", v, best);
        if let Some(bound) = lag.bound {
            prop_assert!(bound >= best - tol, "lagrange's bound {} below the optimum {}", bound, best);
            prop_assert!(lag.gap.is_some());
        }
        if lag.status == gpuplan_core::PlanStatus::Optimal {
            prop_assert!(lag.bound.is_some(), "optimal without a bound");
        }
    }
}

/// Every GPU of `round` at `speeds[n][g]` for every class (cycled), L 1.7.
fn with_variability(mut round: Round, speeds: &[f64], classes: &[u8]) -> Round {
    let mut i = 0usize;
    let per_node = round
        .cluster
        .nodes
        .iter()
        .map(|n| {
            (0..n.gpus)
                .map(|_| {
                    i += 1;
                    let s = speeds[i % speeds.len()];
                    [s, 1.0 + (s - 1.0) / 2.0, s, 1.0]
                })
                .collect()
        })
        .collect();
    round.variability = Some(gpuplan_core::RoundVariability {
        per_node,
        cross_node_factor: 1.7,
    });
    for (j, &c) in round.jobs.iter_mut().zip(classes.iter().cycle()) {
        j.class = Some(gpuplan_core::PerfClass::ALL[c as usize % 4]);
    }
    round
}

/// Two 4-GPU nodes, node 0 2.5× slower for class A, one job that may use
/// all 8 GPUs (the rounds of the two tests below).
fn slow_node_round() -> Round {
    let mut round = build(2, 4, vec![simple()], Interference::Avoid, -1.0);
    round.jobs[0].state.max_gpus_used = 8;
    round.variability = Some(gpuplan_core::RoundVariability {
        per_node: vec![vec![[2.5, 1.0, 1.0, 1.0]; 4], vec![[1.0; 4]; 4]],
        cross_node_factor: 1.7,
    });
    round
}

/// Two 4-GPU nodes, node 0 2.5× slower for the job's class. The job could
/// take all 8 GPUs, but across nodes it steps at the slow node's pace:
/// 8/8 × f / 2.5 = 0.4 f < 4/8 × f = 0.5 f on the fast node alone (f the
/// restart factor of a first start, fair share 8 GPUs). Blind to
/// variability the job takes all 8 GPUs and gets the 0.4 f. The same by
/// hand for the aggregate model: its two nodes differ in speed, so they
/// are two groups of one node, and "all 8 over the whole type" is valued
/// at its slowest node, 0.4 f.
#[test]
fn hand_solved_variable_cluster() {
    let round = slow_node_round();
    let f = 1000.0 / 1030.0;
    let eps = gpuplan_core::objective::EPSILON;
    for name in ["mip-exact", "mip-node", "mip-aggregate", "pollux-mip-aggregate"] {
        let p = plan(name, &round, 0);
        validates(name, &round, &p);
        assert_eq!(p.get(JobId(0)).per_node(), vec![(NodeId(1), 4)], "{name}");
        assert!((evaluate(&round, &p) - (0.5 * f + eps)).abs() < 1e-9, "{name}");
        // The model's own optimum is the same by-hand value (the aggregate
        // planners report the count relaxation's bound instead) ...
        let own = model_plan(name, &round);
        if !name.contains("aggregate") {
            assert_eq!(own.status, gpuplan_core::PlanStatus::Optimal, "{name}");
            assert!(
                (own.bound.unwrap() - (0.5 * f + eps)).abs() < 1e-6,
                "{name}: {:?}",
                own.bound
            );
        }
        // ... but a binned model proves nothing in general, so the
        // pipeline reports no bound under variability (docs/formulation.md).
        assert_eq!(
            (p.status, p.bound),
            (gpuplan_core::PlanStatus::Feasible, None),
            "{name}"
        );
    }
    for name in ["mip-exact", "mip-node", "mip-aggregate"] {
        let mut blind_round = round.clone();
        blind_round.params.variability_blind = gpuplan_core::Sight::Hidden;
        let blind = plan(name, &blind_round, 0);
        assert_eq!(blind.get(JobId(0)).num_gpus(), 8, "{name}");
        assert!(
            (evaluate(&round, &blind) - (0.4 * f + eps)).abs() < 1e-9,
            "{name}"
        );
    }
}

/// The round above for the heuristics: greedy, seeing that node 0 is 2.5×
/// slower, keeps the job on node 1's 4 GPUs (0.5 f), and its own value of
/// its choices is exactly the common objective of the plan it packs.
/// Blind, it grows the job to all 8 GPUs (0.4 f). pollux-ga, seeded, keeps
/// the job off the slow node when it sees it.
#[test]
fn greedy_and_pollux_ga_see_a_slow_node() {
    use gpuplan_solve::{greedy_choices, plan_from_choices};
    let round = slow_node_round();
    let f = 1000.0 / 1030.0;
    let eps = gpuplan_core::objective::EPSILON;
    let p = plan("greedy", &round, 0);
    validates("greedy", &round, &p);
    assert_eq!(p.get(JobId(0)).per_node(), vec![(NodeId(1), 4)]);
    assert!((evaluate(&round, &p) - (0.5 * f + eps)).abs() < 1e-9);
    let ch = greedy_choices(&round);
    let own = plan_from_choices("greedy", &round, &ch, gpuplan_core::PlanStatus::Feasible);
    assert!(
        (ch.value - evaluate(&round, &own)).abs() < 1e-12,
        "{} vs {}",
        ch.value,
        evaluate(&round, &own)
    );
    let mut blind_round = round.clone();
    blind_round.params.variability_blind = gpuplan_core::Sight::Hidden;
    let blind = plan("greedy", &blind_round, 0);
    assert_eq!(blind.get(JobId(0)).num_gpus(), 8);
    assert!((evaluate(&round, &blind) - (0.4 * f + eps)).abs() < 1e-9);
    for seed in 0..3 {
        let ga = plan("pollux-ga", &round, seed);
        validates("pollux-ga", &round, &ga);
        let a = ga.get(JobId(0));
        assert!(
            !a.is_empty() && a.nodes().all(|n| n == NodeId(1)),
            "seed {seed}: {a:?}"
        );
    }
}

/// A node with one slow GPU is valued at that GPU's speed whatever GPUs
/// the job gets (the rule for an unnamed slot), in both models: one GPU
/// on a node whose fourth GPU is 1.5× slower is worth 0.25 f / 1.5 in the
/// model, while the bound plan (GPU 0, median speed) is worth 0.25 f.
#[test]
fn a_mixed_node_is_valued_at_its_slowest_gpu() {
    let mut round = build(1, 4, vec![simple()], Interference::Avoid, -1.0);
    round.jobs[0].max_gpus = 1;
    round.variability = Some(gpuplan_core::RoundVariability {
        per_node: vec![vec![[1.0; 4], [1.0; 4], [1.0; 4], [1.5, 1.0, 1.0, 1.0]]],
        cross_node_factor: 1.7,
    });
    let f = 1000.0 / 1030.0;
    let eps = gpuplan_core::objective::EPSILON;
    for name in ["mip-exact", "mip-aggregate"] {
        let p = plan(name, &round, 0);
        // Fair share 4 GPUs; the job gets one GPU, bound to GPU 0 (speed 1).
        assert_eq!(
            p.get(JobId(0)).gpus()[0],
            gpuplan_core::GpuId::new(NodeId(0), 0),
            "{name}"
        );
        assert!((evaluate(&round, &p) - (0.25 * f + eps)).abs() < 1e-9, "{name}");
        // The model's own bound (the planner alone) is the binned value,
        // below the plan's true objective: so the pipeline reports none.
        // (mip-aggregate reports the count relaxation's bound instead.)
        let own = model_plan(name, &round);
        if name == "mip-exact" {
            assert!(
                (own.bound.unwrap() - (0.25 * f / 1.5 + eps)).abs() < 1e-6,
                "{name}: {:?}",
                own.bound
            );
        }
        assert_eq!(
            (p.bound, p.status),
            (None, gpuplan_core::PlanStatus::Feasible),
            "{name}"
        );
        assert!(
            p.reason.as_deref().unwrap().contains("no proven bound"),
            "{name}: {:?}",
            p.reason
        );
    }
}

/// The planner's own plan, bound and status, without the pipeline's bound
/// rule: for tests about a model's values.
fn model_plan(name: &str, round: &Round) -> Plan {
    let lim = Limits {
        time_limit_s: 30.0,
        gap: 1e-9,
        threads: 1,
        seed: 0,
        memory_limit_mb: None,
    };
    registry::create(name).unwrap().plan(round, &lim).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Generated heterogeneous rounds with per-GPU variability: every
    /// goodput planner's plan is valid and keeps a job on one type;
    /// mip-exact's pattern model never values its plan above the
    /// simulator's rule (its bound at the optimum ≤ the objective of the
    /// bound plan); and all-median GPUs with L = 1 plan exactly as no
    /// variability.
    #[test]
    fn variable_rounds_are_planned_validly_and_never_optimistically(
        round in (2u32..5, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
        types in prop::collection::vec(any::<bool>(), 4),
        gpus_b in 1u32..6,
        speeds in prop::collection::vec(0.95f64..1.6, 1..9),
        classes in prop::collection::vec(0u8..4, 1..4),
    ) {
        let plain = with_named_types(round, &types, gpus_b, "a100");
        let round = with_variability(plain.clone(), &speeds, &classes);
        for name in GOODPUT_PLANNERS {
            let p = plan(name, &round, 0);
            validates(name, &round, &p);
            one_type_per_job(name, &round, &p);
        }
        // Both exact models see variability (the pattern model, and the
        // node-level one that mip-exact solves with interference allowed):
        // neither values its optimum above the simulator's rule.
        for name in ["mip-exact", "mip-node"] {
            let p = model_plan(name, &round);
            if p.status == gpuplan_core::PlanStatus::Optimal {
                let obj = evaluate(&round, &p);
                let bound = p.bound.expect("an optimal HiGHS solve reports its bound");
                prop_assert!(bound <= obj + 1e-6 * obj.abs().max(1.0), "{}: model {} above the true {}", name, bound, obj);
            }
        }
        // (L = 1: a rigid job across nodes pays L under any variability.)
        let mut median = with_variability(plain.clone(), &[1.0], &classes);
        median.variability.as_mut().unwrap().cross_node_factor = 1.0;
        for name in ["mip-exact", "mip-node", "greedy", "pollux-ga"] {
            let a = plan(name, &median, 0);
            let b = plan(name, &plain, 0);
            prop_assert_eq!(&a.allocations, &b.allocations, "{}", name);
        }
        // Greedy's own value of its choices (each at its speed pool's
        // slowest node) is never above the true objective of the plan it
        // packs, when it packs as chosen.
        let ch = gpuplan_solve::greedy_choices(&round);
        let packed = gpuplan_solve::pack_grouped(&round, &ch.picks, &[], &ch.node_group);
        if packed.notes.is_empty() {
            let own = gpuplan_solve::plan_from_choices(
                "greedy", &round, &ch, gpuplan_core::PlanStatus::Feasible);
            let obj = evaluate(&round, &own);
            prop_assert!(ch.value <= obj + 1e-9 * obj.abs().max(1.0), "greedy {} above the true {}", ch.value, obj);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Generated heterogeneous rounds with per-GPU variability, for the
    /// aggregate model with speed groups: its plans are valid; the priced
    /// model keeps the full model's optimum; the model's value of a
    /// solution that packs unchanged is never above its true objective
    /// (never optimistic); the model's optimum is never above mip-exact's
    /// (whose groups are finer, so every aggregate choice is one of its
    /// choices, valued at least as high); and all-median GPUs with L = 1
    /// plan exactly as no variability.
    #[test]
    fn aggregate_sees_variability_soundly(
        round in (2u32..5, 1u32..5).prop_flat_map(|(n, g)| check_round(n, g, 7)),
        types in prop::collection::vec(any::<bool>(), 4),
        gpus_b in 1u32..6,
        speeds in prop::collection::vec(0.95f64..1.6, 1..9),
        classes in prop::collection::vec(0u8..4, 1..4),
    ) {
        use gpuplan_solve::{solve_aggregate_with, Pricing};
        use gpuplan_solve::Solver;
        let plain = with_named_types(round, &types, gpus_b, "a100");
        let round = with_variability(plain.clone(), &speeds, &classes);
        for name in ["mip-aggregate", "pollux-mip-aggregate"] {
            let p = plan(name, &round, 0);
            validates(name, &round, &p);
            one_type_per_job(name, &round, &p);
        }
        let lim = Limits { time_limit_s: 30.0, gap: 1e-9, threads: 1, seed: 0, memory_limit_mb: None };
        let full = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Off).unwrap();
        let priced = solve_aggregate_with(&round, Solver::default_native(), &lim, Pricing::Lagrangian).unwrap();
        let tol = |x: f64| 1e-6 * x.abs().max(1.0);
        prop_assert!((priced.value - full.value).abs() <= tol(full.value), "priced {} vs full {}", priced.value, full.value);
        if let Some(bound) = priced.bound {
            prop_assert!(bound >= full.value - tol(full.value), "bound {} below optimum {}", bound, full.value);
        }
        for sol in [&full, &priced] {
            let packed = gpuplan_solve::pack_grouped(&round, &sol.choices, &sol.pairs, &sol.node_group);
            if packed.notes.is_empty() {
                let mut p = Plan::new("mip-aggregate", gpuplan_core::PlanStatus::Feasible);
                for (i, a) in packed.allocations {
                    p.allocations.insert(round.jobs[i].id, a);
                }
                gpuplan_core::validate(&round, &p).unwrap();
                let obj = evaluate(&round, &p);
                prop_assert!(sol.value <= obj + tol(obj), "model {} above the true {}", sol.value, obj);
            }
        }
        // Only for a solution that packs as chosen: the aggregate's rows
        // count GPUs, not each node's, so a choice the packer must shrink
        // (pinned jobs fragmenting nodes) is valued above any real plan.
        let exact = plan("mip-exact", &round, 0);
        let pattern = !exact.reason.as_deref().unwrap_or("").contains("node-level model");
        let packs = gpuplan_solve::pack_grouped(&round, &full.choices, &full.pairs, &full.node_group)
            .notes
            .is_empty();
        if packs && pattern && exact.status == gpuplan_core::PlanStatus::Optimal {
            let b = exact.bound.expect("an optimal HiGHS solve reports its bound");
            prop_assert!(full.value <= b + tol(b), "aggregate {} above mip-exact {}", full.value, b);
        }
        let mut median = with_variability(plain.clone(), &[1.0], &classes);
        median.variability.as_mut().unwrap().cross_node_factor = 1.0;
        let a = plan("mip-aggregate", &median, 0);
        let b = plan("mip-aggregate", &plain, 0);
        prop_assert_eq!(&a.allocations, &b.allocations);
    }
}

/// A model estimated above `Limits::memory_limit_mb` is not built: the
/// planner falls back to a valid greedy plan, marked with the reason, and
/// without the limit the same round is solved as usual.
#[test]
fn the_memory_limit_is_a_budget_not_a_hope() {
    // Interference allowed: mip-exact solves the node-level model, about
    // 9.5 KiB per (job, node), 10 × 16 pairs ≈ 1.5 MiB.
    let round = build(16, 4, vec![simple(); 10], Interference::Allow, -1.0);
    for name in ["mip-exact", "mip-node"] {
        let run = |mb: Option<u64>| {
            let lim = Limits {
                time_limit_s: 30.0,
                gap: 1e-4,
                threads: 1,
                seed: 0,
                memory_limit_mb: mb,
            };
            let mut p = registry::create(name).unwrap();
            gpuplan_solve::run_round(p.as_mut(), &round, &lim).unwrap().plan
        };
        let capped = run(Some(1));
        assert_eq!(capped.status, gpuplan_core::PlanStatus::Fallback, "{name}");
        let why = capped.reason.clone().unwrap_or_default();
        assert!(why.contains("over the memory limit of 1 MiB"), "{name}: {why}");
        validates(name, &round, &capped);
        assert!(capped.allocations.values().any(|a| a.num_gpus() > 0), "{name}");
        let free = run(None);
        assert_ne!(
            free.status,
            gpuplan_core::PlanStatus::Fallback,
            "{name}: {:?}",
            free.reason
        );
    }
    // The aggregate model (mip-aggregate's and sia's): about 1.6 KiB a
    // column; 400 jobs of up to 16 GPUs on 32 × 4 GPUs pass 1 MiB.
    let mut wide = simple();
    wide.8 = 16;
    let round = build(32, 4, vec![wide; 400], Interference::Avoid, -1.0);
    for name in ["mip-aggregate", "sia"] {
        let lim = Limits {
            time_limit_s: 30.0,
            gap: 1e-4,
            threads: 1,
            seed: 0,
            memory_limit_mb: Some(1),
        };
        let mut p = registry::create(name).unwrap();
        let capped = gpuplan_solve::run_round(p.as_mut(), &round, &lim).unwrap().plan;
        assert_eq!(capped.status, gpuplan_core::PlanStatus::Fallback, "{name}");
        let why = capped.reason.clone().unwrap_or_default();
        assert!(
            why.contains("the aggregate model would need") && why.contains("over the memory limit of 1 MiB"),
            "{name}: {why}"
        );
        validates(name, &round, &capped);
        assert!(capped.allocations.values().any(|a| a.num_gpus() > 0), "{name}");
    }
}
