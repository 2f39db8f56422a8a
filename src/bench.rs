//! `gpuplan bench`: solver time against plan quality, on seeded rounds
//! drawn from the real application profiles.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_core::{PlanStatus, PolicyParams, Round};
use gpuplan_sim::{fitted_params, generate_round, with_types};
use gpuplan_solve::{registry, run_round, Limits};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use serde::Serialize;

use crate::common::Format;

/// (GPUs, jobs) of the standard sizes.
const SIZES: &[(u32, usize)] = &[
    (16, 8),
    (64, 40),
    (256, 100),
    (512, 200),
    (1024, 400),
    (2048, 800),
    (4096, 2000),
];

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// `small` (up to 256 GPUs), `all`, or a list like `64x40,2048x800` (GPUSxJOBS).
    #[arg(long, default_value = "small")]
    pub sizes: String,
    /// Comma-separated planners (default: every goodput planner in the registry).
    #[arg(long, value_delimiter = ',')]
    pub planners: Vec<String>,
    /// Seeded instances per size.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Time limit per solve, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Relative MIP gap at which a solve may stop (the 2048-GPU target is stated at 1%).
    #[arg(long, default_value_t = 1e-4)]
    pub gap: f64,
    /// Skip pollux-ga above this many GPUs (it needs minutes per round there).
    #[arg(long, default_value_t = 512)]
    pub ga_max_gpus: u32,
    /// Let up to K jobs share a GPU in every round (K = 2 when given alone; off by
    /// default): the same seeded rounds, so a run with and one without compare directly.
    #[arg(long, value_name = "K", num_args = 0..=1, default_missing_value = "2")]
    pub sharing: Option<u32>,
    /// GPU types, comma-separated (e.g. t4,rtx2080ti,a100): the nodes of every round
    /// split into that many equal groups, the jobs' models fitted on t4 (default: one type).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Per-GPU speed variability in every round (as simulate's --variability: none,
    /// longhorn, frontera, ls6 or a file), whole measured nodes drawn per instance
    /// seed, L = 1.7: the same seeded rounds, so runs with and without compare.
    #[arg(long, default_value = "none")]
    pub variability: String,
    /// Plan each instance this many times in a row with one planner value and
    /// report the last plan and its time. A planner that carries state from
    /// round to round (pollux-ga's population) then starts from its own last
    /// search, as it does in a simulation; the stateless ones repeat the same
    /// plan. 1 (the default) is a cold round.
    #[arg(long, default_value_t = 1)]
    pub warm_rounds: u32,
    /// Write each seeded round to DIR/round-GPUSxJOBS-SEED.json (the files
    /// `gpuplan plan` reads), to replay one with any planner or look inside.
    #[arg(long, value_name = "DIR")]
    pub dump_rounds: Option<PathBuf>,
    /// Most memory a planner's model may take, MiB, as `plan --memory-limit`
    /// (default: half the machine's memory; 0: no limit): a larger model
    /// falls back, counted in the `fallb` column, instead of aborting the bench.
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Serialize, Clone)]
pub struct Row {
    pub planner: String,
    pub solver: String,
    pub gpus: u32,
    pub jobs: usize,
    /// Most jobs per GPU the rounds allowed (`params.sharing`; 1 = none).
    pub sharing: u32,
    pub solve_ms_p50: f64,
    pub solve_ms_p95: f64,
    /// Mean over the same seeded instances for every planner.
    pub objective: f64,
    /// Mean relative gap to the best objective any planner found on each instance.
    pub gap_to_best: f64,
    pub failures: u32,
    pub fallbacks: u32,
    pub optimal: u32,
    /// Mean of the plans' proven gaps (bound − objective, relative) over
    /// the instances whose plan kept a bound; `None` if none did.
    pub proven_gap: Option<f64>,
    /// Most resident memory of the bench process during any of the row's
    /// solves, MiB (the rounds it holds included); `None` where the
    /// platform does not tell (only Linux's /proc does).
    pub peak_mib: Option<f64>,
}

fn parse_sizes(s: &str) -> Result<Vec<(u32, usize)>> {
    match s {
        "small" => Ok(SIZES.iter().copied().filter(|(g, _)| *g <= 256).collect()),
        "all" => Ok(SIZES.to_vec()),
        list => list
            .split(',')
            .map(|item| {
                let (g, j) = item
                    .split_once('x')
                    .ok_or_else(|| anyhow::anyhow!("--sizes: '{item}' is not GPUSxJOBS (e.g. 64x40)"))?;
                let g: u32 = g
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sizes: bad GPU count in '{item}'"))?;
                let j: usize = j
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sizes: bad job count in '{item}'"))?;
                if g == 0 || j == 0 {
                    bail!("--sizes: '{item}' needs GPUs and jobs > 0");
                }
                Ok((g, j))
            })
            .collect(),
    }
}

/// (solve ms, objective, status, the plan's proven gap, the process's
/// peak resident MiB during the solve).
type Solved = (f64, f64, PlanStatus, Option<f64>, Option<f64>);

/// Resets the process's resident-memory high-water mark (Linux: "5" to
/// /proc/self/clear_refs), so that [`peak_mib`] after a solve is that
/// solve's peak. Elsewhere, or where the file is not writable, nothing.
fn reset_peak() -> bool {
    // The high-water mark resets to the current resident size, which
    // still holds what the allocator kept of earlier solves: hand that
    // back first, or every row reads the largest solve before it.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The resident-memory high-water mark (VmHWM) since [`reset_peak`], MiB.
fn peak_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    gpuplan_sim::percentile(v, q)
}

pub fn bench(a: BenchArgs) -> Result<ExitCode> {
    let sizes = parse_sizes(&a.sizes)?;
    if a.warm_rounds == 0 {
        bail!("--warm-rounds: must be at least 1, got 0");
    }
    let sharing = a.sharing.unwrap_or(1);
    let params = PolicyParams {
        sharing,
        ..PolicyParams::default()
    };
    // Core's one check; the only field bench sets is --sharing.
    if let Some(e) = params.check(true).err().and_then(|es| es.into_iter().next()) {
        bail!("--sharing: {}", e.problem);
    }
    let planners: Vec<String> = if a.planners.is_empty() {
        registry::names()
            .into_iter()
            .filter(|n| {
                registry::create(n)
                    .map(|p| p.traits().honours_interference)
                    .unwrap_or(false)
            })
            .map(String::from)
            .collect()
    } else {
        a.planners.clone()
    };
    for p in &planners {
        registry::create(p)?;
    }
    if a.types.iter().any(|t| t.trim().is_empty()) {
        bail!("--types: an empty GPU type name in '{}'", a.types.join(","));
    }
    let types: Vec<gpuplan_core::GpuType> = a.types.iter().map(|t| t.trim().into()).collect();
    let measured = match a.variability.as_str() {
        "none" => None,
        // Its error names the flag and the value.
        name => Some(gpuplan_sim::variability::Measurements::load(name)?),
    };
    let memory_limit_mb = crate::common::memory_limit_mb(a.memory_limit);
    let profiles = gpuplan_sim::pollux_profiles()?;
    let fitted = fitted_params(&profiles);
    let total = sizes.len() * a.repeat as usize * planners.len();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} solves  {elapsed_precise} {msg}",
    )?);
    let mut rows = Vec::new();
    for &(gpus, jobs) in &sizes {
        let instances = seeded_rounds(
            &a,
            &profiles,
            &fitted,
            &types,
            measured.as_ref(),
            params,
            (gpus, jobs),
        )?;
        let mut runs = Runs::default();
        for p in &planners {
            for (i, round) in instances.iter().enumerate() {
                bar.set_message(format!("{p} {gpus} GPUs {jobs} jobs"));
                bar.inc(1);
                if p == "pollux-ga" && gpus > a.ga_max_gpus {
                    runs.results.entry(p.clone()).or_default().push(None);
                    continue;
                }
                let last = solve_one(&a, p, i, round, memory_limit_mb)?;
                runs.add(p, last.0, last.1, round);
            }
        }
        rows.extend(runs.rows(&planners, gpus, jobs, sharing));
    }
    bar.finish_and_clear();
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("bench.json"), serde_json::to_string_pretty(&rows)?)?;
        plot_time(&dir.join("solve_time.svg"), &rows)?;
        plot_quality(&dir.join("quality_vs_time.svg"), &rows)?;
    }
    print_rows(a.format, &rows);
    Ok(ExitCode::SUCCESS)
}

/// The seeded rounds of one size (GPU types, variability and the bench's
/// params applied), written to `--dump-rounds` if asked.
fn seeded_rounds(
    a: &BenchArgs,
    profiles: &gpuplan_sim::Profiles,
    fitted: &[(String, gpuplan_core::PerfParams)],
    types: &[gpuplan_core::GpuType],
    measured: Option<&gpuplan_sim::variability::Measurements>,
    params: PolicyParams,
    (gpus, jobs): (u32, usize),
) -> Result<Vec<Round>> {
    let instances: Vec<Round> = (0..a.repeat)
        .map(|s| {
            let mut r = with_types(generate_round(profiles, fitted, gpus, jobs, s as u64), types);
            r.params = params;
            if let Some(m) = measured {
                let l = gpuplan_sim::variability::DEFAULT_CROSS_NODE_FACTOR;
                r.variability = Some(m.sample(&r.cluster, s as u64, l).gpus);
            }
            r
        })
        .collect();
    if let Some(dir) = &a.dump_rounds {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (s, r) in instances.iter().enumerate() {
            let file = dir.join(format!("round-{gpus}x{jobs}-{s}.json"));
            std::fs::write(&file, serde_json::to_string_pretty(r)?)
                .with_context(|| format!("writing {}", file.display()))?;
        }
    }
    Ok(instances)
}

/// One planner on one seeded round, `--warm-rounds` times in a row with one
/// planner value: the last plan (or its error) and whether the peak memory
/// was measured for it.
fn solve_one(
    a: &BenchArgs,
    p: &str,
    seed: usize,
    round: &Round,
    memory_limit_mb: Option<u64>,
) -> Result<(Result<gpuplan_solve::Decision, gpuplan_solve::PlanError>, bool)> {
    let mut planner = registry::create(p)?;
    let limits = Limits {
        time_limit_s: a.time_limit,
        gap: a.gap,
        threads: 1,
        seed: seed as u64,
        memory_limit_mb,
    };
    // The warm-up rounds' plans are dropped; the last one counts.
    let measured = reset_peak();
    let mut last = run_round(planner.as_mut(), round, &limits);
    for _ in 1..a.warm_rounds {
        if last.is_err() {
            break;
        }
        last = run_round(planner.as_mut(), round, &limits);
    }
    Ok((last, measured))
}

/// What one size's solves gave, per planner.
#[derive(Default)]
struct Runs {
    /// Per instance: (ms, objective, status, gap, peak) or None (skipped/failed).
    results: BTreeMap<String, Vec<Option<Solved>>>,
    fails: BTreeMap<String, u32>,
    /// The solvers each planner's plans say they ran (`Plan::solver`;
    /// "none" for a heuristic's), joined by "+" where rounds differ.
    solvers: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl Runs {
    fn add(
        &mut self,
        p: &str,
        last: Result<gpuplan_solve::Decision, gpuplan_solve::PlanError>,
        measured: bool,
        round: &Round,
    ) {
        if let Ok(d) = &last {
            let s = d.plan.solver.clone().unwrap_or_else(|| "none".into());
            self.solvers.entry(p.to_string()).or_default().insert(s);
        }
        let entry = match last {
            Ok(d) => Some((
                d.plan.solve_ms,
                d.objective(round),
                d.plan.status,
                d.plan.bound.and(d.plan.gap),
                peak_mib().filter(|_| measured),
            )),
            Err(_) => {
                *self.fails.entry(p.to_string()).or_default() += 1;
                None
            }
        };
        self.results.entry(p.to_string()).or_default().push(entry);
    }

    /// One row per planner with any solve, its quality against the best
    /// plan of each instance.
    fn rows(&self, planners: &[String], gpus: u32, jobs: usize, sharing: u32) -> Vec<Row> {
        let results = &self.results;
        let instances = results.values().map(Vec::len).max().unwrap_or(0);
        let best: Vec<f64> = (0..instances)
            .map(|i| {
                results
                    .values()
                    .filter_map(|v| v.get(i).copied().flatten().map(|x| x.1))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect();
        let mut rows = Vec::new();
        for p in planners {
            let Some(v) = results.get(p) else { continue };
            let done: Vec<(usize, Solved)> = v
                .iter()
                .enumerate()
                .filter_map(|(i, x)| x.map(|x| (i, x)))
                .collect();
            if done.is_empty() {
                continue;
            }
            let mut ms: Vec<f64> = done.iter().map(|(_, x)| x.0).collect();
            let n = done.len() as f64;
            rows.push(Row {
                planner: p.clone(),
                solver: self.solvers.get(p).map_or_else(
                    || "none".into(),
                    |s| s.iter().cloned().collect::<Vec<_>>().join("+"),
                ),
                gpus,
                jobs,
                sharing,
                solve_ms_p50: pct(&mut ms, 50.0),
                solve_ms_p95: pct(&mut ms, 95.0),
                objective: done.iter().map(|(_, x)| x.1).sum::<f64>() / n,
                gap_to_best: done
                    .iter()
                    .map(|(i, x)| ((best[*i] - x.1) / best[*i].abs().max(1e-12)).max(0.0))
                    .sum::<f64>()
                    / n,
                failures: self.fails.get(p).copied().unwrap_or(0),
                fallbacks: done.iter().filter(|(_, x)| x.2 == PlanStatus::Fallback).count() as u32,
                optimal: done.iter().filter(|(_, x)| x.2 == PlanStatus::Optimal).count() as u32,
                proven_gap: {
                    let g: Vec<f64> = done.iter().filter_map(|(_, x)| x.3).collect();
                    (!g.is_empty()).then(|| g.iter().sum::<f64>() / g.len() as f64)
                },
                peak_mib: done.iter().filter_map(|(_, x)| x.4).reduce(f64::max),
            });
        }
        rows
    }
}

/// The rows as JSON or the table.
fn print_rows(format: Format, rows: &[Row]) {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(rows).unwrap_or_default()),
        Format::Table => {
            println!(
                "{:<22} {:<8} {:>6} {:>6} {:>3} {:>11} {:>11} {:>10} {:>11} {:>5} {:>5} {:>5} {:>9} {:>8}",
                "planner",
                "solver",
                "gpus",
                "jobs",
                "k",
                "p50_ms",
                "p95_ms",
                "objective",
                "gap_to_best",
                "opt",
                "fallb",
                "fail",
                "proven",
                "peak_mib"
            );
            let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            for r in rows {
                println!(
                    "{:<22} {:<8} {:>6} {:>6} {:>3} {:>11.2} {:>11.2} {:>10.4} {:>10.3}% {:>5} {:>5} {:>5} {:>9} {:>8}",
                    r.planner,
                    r.solver,
                    r.gpus,
                    r.jobs,
                    r.sharing,
                    r.solve_ms_p50,
                    r.solve_ms_p95,
                    r.objective,
                    100.0 * r.gap_to_best,
                    r.optimal,
                    r.fallbacks,
                    r.failures,
                    or_dash(r.proven_gap.map(|g| format!("{:.3}%", 100.0 * g))),
                    or_dash(r.peak_mib.map(|m| format!("{m:.0}")))
                );
            }
        }
    }
}

fn by_planner(rows: &[Row]) -> BTreeMap<&str, Vec<&Row>> {
    let mut m: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        m.entry(r.planner.as_str()).or_default().push(r);
    }
    m
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plotting: {e}")
}

/// Median solve time against cluster size, log-log.
fn plot_time(path: &std::path::Path, rows: &[Row]) -> Result<()> {
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_g = rows.iter().map(|r| r.gpus).max().unwrap_or(16) as f64;
    let max_ms = rows.iter().map(|r| r.solve_ms_p50).fold(1.0, f64::max);
    let min_ms = rows
        .iter()
        .map(|r| r.solve_ms_p50)
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let mut chart = ChartBuilder::on(&root)
        .caption("Median solve time vs cluster size", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (8f64..max_g * 1.5).log_scale(),
            (min_ms / 2.0..max_ms * 2.0).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("GPUs")
        .y_desc("solve ms (p50)")
        .draw()
        .map_err(err)?;
    for (i, (name, rs)) in by_planner(rows).into_iter().enumerate() {
        let c = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| (r.gpus as f64, r.solve_ms_p50.max(1e-3)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    crate::plots::finish(&mut chart, &root)
}

/// Gap to the best known objective against solve time: one point per (planner, size).
fn plot_quality(path: &std::path::Path, rows: &[Row]) -> Result<()> {
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_ms = rows.iter().map(|r| r.solve_ms_p50).fold(1.0, f64::max);
    let min_ms = rows
        .iter()
        .map(|r| r.solve_ms_p50)
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let max_gap = rows.iter().map(|r| 100.0 * r.gap_to_best).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("Quality vs time (lower left is better)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((min_ms / 2.0..max_ms * 2.0).log_scale(), 0f64..max_gap * 1.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("solve ms (p50)")
        .y_desc("gap to best objective, %")
        .draw()
        .map_err(err)?;
    for (i, (name, rs)) in by_planner(rows).into_iter().enumerate() {
        let c = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| (r.solve_ms_p50.max(1e-3), 100.0 * r.gap_to_best))
            .collect();
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
    }
    crate::plots::finish(&mut chart, &root)
}
