//! The placement stage (`gpuplan_solve::Place`) through the round
//! pipeline, as every driver runs it. Here rather than beside the code:
//! these tests go through the registry and pipeline, above the stage.

use gpuplan_core::{
    Allocation, GpuId, Interference, JobId, JobState, NodeId, Placement, Plan, PolicyParams, Round, RoundJob,
    RoundVariability, Sticky,
};
use gpuplan_solve::{
    expected_slowdown, registry, run_round, Bins, Ctx, FreeView, Limits, Packed, Pal, Place,
    DEFAULT_TOLERANCE,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A preemptible fixed-size job; `alloc` is (node, GPUs) pairs.
fn job(id: u32, gpus: u32, submit_s: f64, attained_gpu_s: f64, alloc: &[(u32, u32)]) -> RoundJob {
    let counts: Vec<(NodeId, u32)> = alloc.iter().map(|&(n, k)| (NodeId(n), k)).collect();
    RoundJob {
        submit_s,
        requested_gpus: gpus,
        batch_size: 32,
        max_gpus: 64,
        state: JobState {
            attained_gpu_s,
            allocation: Allocation::from_counts(&counts),
            ..JobState::default()
        },
        ..RoundJob::new(JobId(id), format!("j{id}"), "test")
    }
}

/// A round without the interference rule (the baselines do not apply it).
fn round(cluster: &str, now_s: f64, jobs: Vec<RoundJob>) -> Round {
    Round {
        now_s,
        cluster: cluster.parse().unwrap(),
        jobs,
        params: PolicyParams {
            interference: Interference::Allow,
            ..PolicyParams::default()
        },
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: Vec::new(),
    }
}

/// Class A slowdowns of a 3×4 cluster (other classes 1):
/// node 0 [1.0 1.0 1.1 1.1], node 1 [1.0 1.1 1.1 1.1], node 2 [1.0 1.0 1.0 1.2].
fn variable(jobs: Vec<RoundJob>, placement: Placement) -> Round {
    let a = [[1.0, 1.0, 1.1, 1.1], [1.0, 1.1, 1.1, 1.1], [1.0, 1.0, 1.0, 1.2]];
    let mut r = round("3x4", 0.0, jobs);
    r.variability = Some(RoundVariability {
        per_node: a
            .iter()
            .map(|n| n.iter().map(|&s| [s, 1.0, 1.0, 1.0]).collect())
            .collect(),
        cross_node_factor: 1.7,
    });
    r.params.placement = placement;
    for j in &mut r.jobs {
        j.app = "resnet50".into();
    }
    r
}

fn gpus_of(plan: &Plan, id: u32) -> Vec<(u32, u32)> {
    plan.get(JobId(id))
        .gpus()
        .iter()
        .map(|g| (g.node.0, g.index))
        .collect()
}

fn plan(r: &Round) -> Plan {
    let mut p = registry::create("fifo").unwrap();
    run_round(p.as_mut(), r, &Limits::default()).unwrap().plan
}

/// Each placement picks the GPUs its rule says, for a 3-GPU and a
/// 4-GPU class A job on the hand-made cluster.
#[test]
fn each_placement_picks_the_expected_gpus() {
    let three = |p| plan(&variable(vec![job(0, 3, 0.0, 0.0, &[])], p));
    // packed: the first node with the most free GPUs, lowest indices.
    assert_eq!(
        gpus_of(&three(Placement::Packed), 0),
        vec![(0, 0), (0, 1), (0, 2)]
    );
    // pm-first and pal: node 2's three median GPUs (no 1.1 among them).
    assert_eq!(
        gpus_of(&three(Placement::PmFirst), 0),
        vec![(2, 0), (2, 1), (2, 2)]
    );
    assert_eq!(gpus_of(&three(Placement::Pal), 0), vec![(2, 0), (2, 1), (2, 2)]);
    let four = |p| plan(&variable(vec![job(0, 4, 0.0, 0.0, &[])], p));
    // pm-first: the six median GPUs first, best-matching node first:
    // node 2's three, then node 0's first; across nodes (1.0 × L).
    assert_eq!(
        gpus_of(&four(Placement::PmFirst), 0),
        vec![(0, 0), (2, 0), (2, 1), (2, 2)]
    );
    // pal: a whole node at 1.1 beats 1.0 × 1.7 across nodes; of nodes
    // 0 and 1 (both 1.1), the first.
    assert_eq!(
        gpus_of(&four(Placement::Pal), 0),
        vec![(0, 0), (0, 1), (0, 2), (0, 3)]
    );
    // random: seeded, so the same round gives the same GPUs.
    let r = variable(vec![job(0, 4, 0.0, 0.0, &[])], Placement::Random);
    assert_eq!(gpus_of(&plan(&r), 0), gpus_of(&plan(&r), 0));
    let mut p = registry::create("fifo").unwrap();
    let other = Limits {
        seed: 7,
        ..Limits::default()
    };
    let a = run_round(p.as_mut(), &r, &other).unwrap().plan;
    assert_eq!(a.get(JobId(0)).num_gpus(), 4);
}

/// PM-First and PAL place the most variable class first: a class D job
/// ahead in the queue does not take the fast GPUs a class A job needs.
#[test]
fn variable_classes_choose_first() {
    let mut r = variable(
        vec![job(0, 3, 0.0, 0.0, &[]), job(1, 3, 1.0, 0.0, &[])],
        Placement::Pal,
    );
    r.jobs[0].app = "pointnet".into();
    let p = plan(&r);
    assert_eq!(gpus_of(&p, 1), vec![(2, 0), (2, 1), (2, 2)]);
    assert_eq!(p.get(JobId(0)).num_gpus(), 3);
}

/// Without `sticky`, a running job is placed afresh (here onto faster
/// GPUs); with it, it keeps its GPUs. Pinned jobs always keep theirs.
#[test]
fn sticky_keeps_running_jobs() {
    let mut r = variable(vec![job(0, 2, 0.0, 0.0, &[])], Placement::PmFirst);
    r.jobs[0].state.allocation =
        Allocation::from_gpus(vec![GpuId::new(NodeId(1), 2), GpuId::new(NodeId(1), 3)]);
    assert_eq!(gpus_of(&plan(&r), 0), vec![(0, 0), (0, 1)]);
    r.params.sticky = Sticky::Keep;
    assert_eq!(gpus_of(&plan(&r), 0), vec![(1, 2), (1, 3)]);
    r.params.sticky = Sticky::Replace;
    r.jobs[0].preemptible = false;
    assert_eq!(gpus_of(&plan(&r), 0), vec![(1, 2), (1, 3)]);
}

/// A job never mixes GPU types, and never spans more nodes than
/// allowed: pm-first's spread choice falls back to packing, else waits.
#[test]
fn types_and_node_limits_hold() {
    for pl in [Placement::Random, Placement::PmFirst, Placement::Pal] {
        let mut r = variable(vec![job(0, 4, 0.0, 0.0, &[])], pl);
        r.params.max_nodes_per_job = 1;
        let g = gpus_of(&plan(&r), 0);
        assert_eq!(g.len(), 4);
        assert!(g.iter().all(|x| x.0 == g[0].0), "{pl:?}: {g:?}");
        // 6 GPUs fit no node; a job that may not shrink waits.
        r.jobs[0].requested_gpus = 6;
        r.jobs[0].min_gpus = 6;
        assert!(gpus_of(&plan(&r), 0).is_empty(), "{pl:?}");
        let mut t = variable(vec![job(0, 3, 0.0, 0.0, &[])], pl);
        t.cluster = "1x4:a+2x4:b".parse().unwrap();
        t.jobs[0].requested_gpus = 6;
        let g = gpus_of(&plan(&t), 0);
        assert_eq!(g.len(), 6);
        assert!(g.iter().all(|x| x.0 >= 1), "{pl:?}: {g:?}");
    }
}

/// PAL never expects a job to run slower than packing would place it,
/// under its own cost, on random clusters, slowdowns and occupancy.
#[test]
fn pal_is_never_worse_than_packed_under_its_cost() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for case in 0..400 {
        let nodes = rng.gen_range(1..6);
        let per = rng.gen_range(1..9);
        let per_node: Vec<Vec<[f64; 4]>> = (0..nodes)
            .map(|_| (0..per).map(|_| [rng.gen_range(0.95..1.3); 4]).collect())
            .collect();
        let v = RoundVariability {
            per_node,
            cross_node_factor: rng.gen_range(1.0..3.0),
        };
        let bins = Bins::new(&v, DEFAULT_TOLERANCE);
        let ctx = Ctx {
            bins: Some(&bins),
            cross_node_factor: v.cross_node_factor,
            seed: 0,
        };
        let view = FreeView {
            nodes: (0..nodes)
                .map(|n| {
                    (
                        NodeId(n),
                        (0..per).filter(|_| rng.gen_bool(0.7)).collect::<Vec<u32>>(),
                    )
                })
                .filter(|(_, g)| !g.is_empty())
                .collect(),
        };
        let total = view.total();
        if total == 0 {
            continue;
        }
        let k = rng.gen_range(1..=total);
        let j = job(0, k, 0.0, 0.0, &[]);
        let pal = Pal.choose(&ctx, &j, &view, k).unwrap();
        let packed = Packed.choose(&ctx, &j, &view, k).unwrap();
        assert_eq!(pal.len(), k as usize);
        let (a, b) = (
            expected_slowdown(&ctx, 0, &pal),
            expected_slowdown(&ctx, 0, &packed),
        );
        assert!(a <= b + 1e-12, "case {case}: pal {a} > packed {b}");
    }
}

/// Every placement's plans pass the validator (run_round validates
/// them) under every planner with the stage, with running and pinned
/// jobs, on random variable rounds; other planners refuse the stage.
#[test]
fn plans_validate_and_other_planners_refuse() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for case in 0..30 {
        let mut jobs = Vec::new();
        let mut used = [0u32; 3];
        for id in 0..rng.gen_range(1..8u32) {
            let k = [1, 2, 3, 4, 6, 8][rng.gen_range(0..6)];
            let n = rng.gen_range(0..3);
            let run = k <= 4 - used[n] && rng.gen_bool(0.4);
            let alloc: Vec<(u32, u32)> = if run { vec![(n as u32, k)] } else { vec![] };
            if run {
                used[n] += k;
            }
            let mut j = job(id, k, f64::from(id), 0.0, &alloc);
            j.preemptible = !(run && rng.gen_bool(0.3));
            j.app = ["resnet50", "vgg19", "bert", "pointnet"][rng.gen_range(0..4)].into();
            jobs.push(j);
        }
        for pl in Placement::ALL {
            for sticky in [Sticky::Replace, Sticky::Keep] {
                let mut r = variable(jobs.clone(), pl);
                for (j, orig) in r.jobs.iter_mut().zip(&jobs) {
                    j.app = orig.app.clone();
                }
                r.params.sticky = sticky;
                gpuplan_core::bind_round(&mut r);
                for name in registry::placement_names() {
                    let mut p = registry::create(name).unwrap();
                    let d = run_round(p.as_mut(), &r, &Limits::default())
                        .unwrap_or_else(|e| panic!("case {case} {name} {pl:?}: {e}"));
                    gpuplan_core::validate(
                        &Round {
                            params: PolicyParams {
                                interference: Interference::Allow,
                                ..r.params
                            },
                            ..r.clone()
                        },
                        &d.plan,
                    )
                    .unwrap();
                }
            }
        }
    }
    let r = variable(vec![job(0, 2, 0.0, 0.0, &[])], Placement::Pal);
    let mut p = registry::create("pollux-ga").unwrap();
    let e = run_round(p.as_mut(), &r, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("params.placement: 'pal'") && e.contains("fifo"), "{e}");
}
