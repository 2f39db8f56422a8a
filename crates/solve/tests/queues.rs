//! Queues through every planner (docs/tenants.md): hand-solved rounds where
//! the queue rules change the optimum, and the plans every planner gives.

use gpuplan_core::queue::Queue;
use gpuplan_core::{
    objective, validate, Allocation, GpuId, JobId, JobState, NodeId, PlanStatus, PolicyParams, Round,
    RoundJob,
};
use gpuplan_solve::{registry, run_round, Limits};

/// One 8-GPU node; queue a (guarantee 4) runs eight 1-GPU jobs, one per
/// GPU; queue b (guarantee 4) has one waiting 2-GPU job. Pollux's
/// objective alone keeps all eight running (starting b's job would stop
/// two to start one); the rules make b's job start on two of a's GPUs, and
/// a keep six: a holds 8 > its guarantee while b's job fits b's.
fn borrowed_round() -> Round {
    let mut jobs: Vec<RoundJob> = (0..8)
        .map(|i| RoundJob {
            requested_gpus: 1,
            min_gpus: 1,
            max_gpus: 1,
            batch_size: 32,
            queue: Some("a".into()),
            state: JobState {
                age_s: 3600.0,
                max_gpus_used: 1,
                allocation: Allocation::from_gpus(vec![GpuId::new(NodeId(0), i)]),
                ..Default::default()
            },
            ..RoundJob::new(JobId(i), format!("a{i}"), "synthetic")
        })
        .collect();
    jobs.push(RoundJob {
        requested_gpus: 2,
        min_gpus: 2,
        max_gpus: 2,
        batch_size: 64,
        queue: Some("b".into()),
        state: JobState {
            age_s: 600.0,
            ..Default::default()
        },
        ..RoundJob::new(JobId(8), "b0", "synthetic")
    });
    Round {
        now_s: 0.0,
        cluster: "1x8".parse().unwrap(),
        jobs,
        params: PolicyParams::default(),
        variability: None,
        colocation: None,
        reserved: Vec::new(),
        queues: vec![
            Queue {
                guarantee: 4,
                ..Queue::new("a")
            },
            Queue {
                guarantee: 4,
                ..Queue::new("b")
            },
        ],
    }
}

fn limits() -> Limits {
    Limits {
        time_limit_s: 10.0,
        ..Default::default()
    }
}

#[test]
fn without_queues_the_borrower_keeps_everything() {
    let r = Round {
        queues: Vec::new(),
        ..borrowed_round()
    };
    let mut p = registry::create("mip-exact").unwrap();
    let d = run_round(p.as_mut(), &r, &limits()).unwrap();
    assert!(d.plan.gpus_of(JobId(8)).is_empty(), "{:?}", d.plan);
    assert_eq!(d.plan.status, PlanStatus::Optimal);
}

/// The exact MIP keeps the rules itself (no queue-stage note) and proves
/// optimality under them: b's job on 2 GPUs, six of a's kept, two of a's
/// stopped; its objective is the hand-computed one.
#[test]
fn the_exact_mip_reclaims_inside_the_model() {
    let r = borrowed_round();
    for name in ["mip-exact", "pollux-mip", "gpuplan-mip"] {
        let mut p = registry::create(name).unwrap();
        let d = run_round(p.as_mut(), &r, &limits()).unwrap();
        validate(&r, &d.plan).unwrap();
        assert_eq!(d.plan.gpus_of(JobId(8)).num_gpus(), 2, "{name}: {:?}", d.plan);
        let kept = (0..8).filter(|&i| !d.plan.gpus_of(JobId(i)).is_empty()).count();
        assert_eq!(kept, 6, "{name}");
        assert_eq!(d.plan.status, PlanStatus::Optimal, "{name}: {:?}", d.plan.reason);
        assert!(
            !d.plan.reason.as_deref().unwrap_or("").contains("queues:"),
            "{name}: the model kept the rules, the stage had nothing to do: {:?}",
            d.plan.reason
        );
        // By hand (p = −1): six kept jobs at speedup 1, two stopped (0),
        // b's job on 2 GPUs at 2 × its restart factor 600/630; the nested
        // mean: half the weight to a's harmonic mean of eight values (+ε),
        // half to b's one. The bound is above it.
        let eps = objective::EPSILON;
        // (The fair share is ⌈8/9⌉ = 1 GPU, so a model-less job's speedup
        // is its GPU count; the round's params apply to every planner.)
        let vb = 2.0 * 600.0 / 630.0;
        let a = (6.0 / (1.0 + eps) + 2.0 / eps) / 8.0;
        let by_hand = 1.0 / (0.5 * a + 0.5 / (vb + eps));
        let obj = objective::evaluate(&r, &d.plan);
        assert!(
            (obj - by_hand).abs() < 1e-9 * by_hand,
            "{name}: {obj} vs {by_hand}"
        );
        let b = d.plan.bound.unwrap();
        assert!(b >= obj - 1e-9, "{name}: bound {b} below {obj}");
    }
}

/// One 8-GPU node, no guarantees (no rule binds): queue a has three
/// elastic jobs, queue b one, all waiting, model-less (the fair share is
/// ⌈8/4⌉ = 2 GPUs, so a job's speedup is g/2).
fn nesting_round(weights: Option<(f64, f64)>) -> Round {
    let jobs = (0..4)
        .map(|i| RoundJob {
            requested_gpus: 1,
            min_gpus: 1,
            max_gpus: 8,
            batch_size: 32,
            queue: Some(if i < 3 { "a" } else { "b" }.into()),
            state: JobState {
                age_s: 600.0,
                max_gpus_used: 8,
                ..Default::default()
            },
            ..RoundJob::new(JobId(i), format!("j{i}"), "synthetic")
        })
        .collect();
    let queues = weights.map_or(Vec::new(), |(a, b)| {
        vec![
            Queue {
                weight: a,
                ..Queue::new("a")
            },
            Queue {
                weight: b,
                ..Queue::new("b")
            },
        ]
    });
    Round {
        queues,
        jobs,
        ..borrowed_round()
    }
}

/// The nested objective by hand (p = −1, restart factor r = 600/630 for
/// every start, ε aside; values g·r/2). One pool: Σ 1/g over four jobs is
/// least at 2 GPUs each. Queues a (weight 1) and b (weight 3): each of a's
/// three jobs weighs ¼·⅓ = 1/12 and b's job ¾, and ¹⁄₁₂·Σ_a 1/g + ¾·1/g_b
/// is least with b's job on 4 GPUs and a's on 2, 1, 1 (next: 5 | 1, 1, 1,
/// 1% worse). Weights 3 and 1 give each job ¼, the plain mean: the
/// pool's plan. Every goodput MIP finds them and proves them.
#[test]
fn the_nested_objective_gives_a_queue_its_weight_not_its_job_count() {
    let eps = objective::EPSILON;
    let f = 600.0 / 630.0;
    let t = |g: f64| 1.0 / (g / 2.0 * f + eps);
    let nested = 1.0 / ((t(2.0) + 2.0 * t(1.0)) / 12.0 + 0.75 * t(4.0));
    let plain = 1.0 / t(2.0);
    let cases = [
        (None, 2, plain),
        (Some((1.0, 3.0)), 4, nested),
        (Some((3.0, 1.0)), 2, plain),
    ];
    for name in ["mip-exact", "mip-aggregate", "pollux-mip", "gpuplan-mip"] {
        for (weights, b, by_hand) in cases {
            let r = nesting_round(weights);
            let mut p = registry::create(name).unwrap();
            let d = run_round(p.as_mut(), &r, &limits()).unwrap();
            validate(&r, &d.plan).unwrap();
            let got = d.plan.gpus_of(JobId(3)).num_gpus();
            assert_eq!(got, b, "{name} {weights:?}: {:?}", d.plan);
            assert_eq!(
                d.plan.status,
                PlanStatus::Optimal,
                "{name} {weights:?}: {:?}",
                d.plan.reason
            );
            let obj = objective::evaluate(&r, &d.plan);
            assert!(
                (obj - by_hand).abs() < 1e-9 * by_hand,
                "{name} {weights:?}: {obj} vs {by_hand}"
            );
            let bound = d.plan.bound.unwrap();
            assert!(
                bound >= obj - 1e-9,
                "{name} {weights:?}: bound {bound} below {obj}"
            );
        }
    }
}

/// Every registered planner, through the pipeline's queue stage where it
/// does not know the rules, keeps them on this round.
#[test]
fn every_planner_keeps_the_rules() {
    let r = borrowed_round();
    for name in registry::names() {
        let mut p = registry::create(name).unwrap();
        if p.traits().needs_oracle {
            continue;
        }
        let d = run_round(p.as_mut(), &r, &limits()).unwrap_or_else(|e| panic!("{name}: {e}"));
        validate(&r, &d.plan).unwrap_or_else(|v| panic!("{name}: {v:?}"));
        assert_eq!(d.plan.gpus_of(JobId(8)).num_gpus(), 2, "{name}: {:?}", d.plan);
    }
}

/// mip-aggregate states the rules as rows too, and sia builds its model
/// there: on the same round their plans start b's job with no help from
/// the queue stage.
#[test]
fn the_aggregate_mip_reclaims_inside_the_model() {
    let r = borrowed_round();
    for name in ["mip-aggregate", "pollux-mip-aggregate", "sia"] {
        let mut p = registry::create(name).unwrap();
        let d = run_round(p.as_mut(), &r, &limits()).unwrap();
        validate(&r, &d.plan).unwrap();
        assert_eq!(d.plan.gpus_of(JobId(8)).num_gpus(), 2, "{name}: {:?}", d.plan);
        assert!(
            !d.plan.reason.as_deref().unwrap_or("").contains("queues:"),
            "{name}: {:?}",
            d.plan.reason
        );
    }
}
