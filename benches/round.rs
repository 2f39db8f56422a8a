//! Per-round hot paths: speedup tables, candidate generation (formulation
//! build), solves at 64 and 1024 GPUs, and greedy (every MIP's warm start)
//! at 4,096 and 16,384 GPUs of four types, where its cost must stay near
//! linear. Run with `cargo bench`.

use criterion::{criterion_group, criterion_main, Criterion};
use gpuplan_sim::{fitted_params, generate_round, with_types};
use gpuplan_solve::{job_options, max_gpus, registry, Limits, Shapes, SpeedupCache};

fn benches(c: &mut Criterion) {
    let profiles = gpuplan_sim::pollux_profiles().unwrap();
    let fitted = fitted_params(&profiles);
    let small = generate_round(&profiles, &fitted, 64, 40, 0);
    let large = generate_round(&profiles, &fitted, 1024, 400, 0);

    c.bench_function("speedup_table_64gpus_40jobs", |b| {
        b.iter(|| {
            let mut total = 0.0;
            for j in &small.jobs {
                let m = max_gpus(j, &small);
                let mut cache = SpeedupCache::new(&small, m.min(16), m);
                for k in 1..=m {
                    total += cache.get(j, 0, 1 + (k > 4) as u32, k);
                }
            }
            total
        })
    });

    for (name, round) in [("64gpus_40jobs", &small), ("1024gpus_400jobs", &large)] {
        c.bench_function(&format!("formulation_candidates_{name}"), |b| {
            b.iter(|| {
                let mut caches = SpeedupCache::tables(
                    round,
                    round.jobs.iter().map(|j| {
                        let m = max_gpus(j, round).max(1);
                        (m.min(16), m)
                    }),
                );
                job_options(round, &mut caches, Shapes::Any).len()
            })
        });
    }

    let lim = Limits {
        time_limit_s: 60.0,
        gap: 1e-4,
        threads: 1,
        seed: 0,
        memory_limit_mb: None,
    };
    let mut group = c.benchmark_group("solve");
    group.sample_size(10);
    for planner in ["greedy", "mip-aggregate", "mip-exact", "mip-node"] {
        group.bench_function(format!("{planner}_64gpus_40jobs"), |b| {
            b.iter(|| registry::create(planner).unwrap().plan(&small, &lim).unwrap())
        });
    }
    for planner in ["greedy", "mip-aggregate", "mip-exact"] {
        group.bench_function(format!("{planner}_1024gpus_400jobs"), |b| {
            b.iter(|| registry::create(planner).unwrap().plan(&large, &lim).unwrap())
        });
    }
    group.finish();

    let types: Vec<gpuplan_core::GpuType> = ["t4", "rtx2080ti", "a100", "h100"].map(Into::into).to_vec();
    let mut group = c.benchmark_group("greedy_scale");
    group.sample_size(10);
    for (gpus, jobs) in [(4096, 2000), (16384, 8000)] {
        let round = with_types(generate_round(&profiles, &fitted, gpus, jobs, 0), &types);
        group.bench_function(format!("greedy_{gpus}gpus_{jobs}jobs_4types"), |b| {
            b.iter(|| registry::create("greedy").unwrap().plan(&round, &lim).unwrap())
        });
    }
    group.finish();
}

criterion_group!(round, benches);
criterion_main!(round);
