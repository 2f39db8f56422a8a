//! A sweep's report.md: the summary table, the JCT and allocation plots per
//! workload, and under queues each policy's per-queue figures.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use gpuplan_sim::{SimConfig, SimResult};
use serde::Serialize;

use crate::sim_out::queue_cells;

/// One policy's runs in sweep.json: the mean of their average JCTs and
/// each workload's summary.
#[derive(Serialize)]
pub struct PolicyAgg {
    pub avg_jct_s: f64,
    pub per_workload: BTreeMap<String, gpuplan_sim::Summary>,
}

/// sweep.json: every policy's runs.
#[derive(Serialize)]
pub struct SweepOut {
    pub policies: BTreeMap<String, PolicyAgg>,
}

/// report.md: the summary table and side-by-side plots per workload.
pub fn write_report(dir: &Path, results: &[SimResult], out: &SweepOut, cfg: &SimConfig) -> Result<()> {
    use std::fmt::Write as _;
    let mut md = String::new();
    writeln!(md, "# gpuplan simulation report\n")?;
    writeln!(
        md,
        "Cluster {} GPUs on {} nodes, interval {} s, restart delay {} s, seed {}.\n",
        cfg.cluster.total_gpus(),
        cfg.cluster.num_nodes(),
        cfg.interval_s,
        cfg.restart_delay_s,
        cfg.seed
    )?;
    writeln!(md, "| policy | workload | jobs | avg JCT (h) | p50 (h) | p99 (h) | imagenet mean (h) | makespan (h) | GPU util | GPU busy | restarts | planner ms (mean / p99) | wall s |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in results {
        let s = &r.summary;
        writeln!(
            md,
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} / {:.2} | {:.1} |",
            s.policy,
            s.workload,
            s.jobs,
            s.avg_jct_s / 3600.0,
            s.p50_jct_s / 3600.0,
            s.p99_jct_s / 3600.0,
            s.imagenet_mean_jct_s
                .map_or("-".into(), |v| format!("{:.3}", v / 3600.0)),
            s.makespan_s / 3600.0,
            s.gpu_utilization,
            s.gpu_busy,
            s.restarts,
            s.planner_ms.mean,
            s.planner_ms.p99,
            s.wall_s
        )?;
    }
    writeln!(md, "\nMean average JCT over workloads:\n")?;
    for (p, agg) in &out.policies {
        writeln!(md, "- {p}: {:.3} h", agg.avg_jct_s / 3600.0)?;
    }
    let mut workloads: Vec<&str> = results.iter().map(|r| r.summary.workload.as_str()).collect();
    workloads.dedup();
    workloads.sort();
    workloads.dedup();
    for w in workloads {
        let runs: Vec<(&str, &SimResult)> = results
            .iter()
            .filter(|r| r.summary.workload == w)
            .map(|r| (r.summary.policy.as_str(), r))
            .collect();
        let cdf = format!("{w}-jct_cdf.svg");
        let util = format!("{w}-utilization.svg");
        crate::plots::jct_cdf(&dir.join(&cdf), &runs)?;
        crate::plots::utilization(&dir.join(&util), &runs, cfg.cluster.total_gpus())?;
        writeln!(md, "\n## {w}\n\n![JCT CDF]({cdf})\n\n![GPU allocation]({util})\n")?;
        for (p, _) in &runs {
            writeln!(md, "![{p} allocation Gantt]({p}/{w}/gantt.svg)\n")?;
        }
        queue_section(&mut md, &runs)?;
    }
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// Under queues, the report's per-queue table (JCT, GPU-hours, borrowed
/// and shortfall per policy and queue) and each run's holdings chart.
fn queue_section(md: &mut String, runs: &[(&str, &SimResult)]) -> Result<()> {
    use std::fmt::Write as _;
    if runs.iter().all(|(_, r)| r.queues.is_empty()) {
        return Ok(());
    }
    writeln!(md, "### Per queue\n")?;
    writeln!(md, "| policy | queue | guarantee | jobs | avg JCT (h) | p99 (h) | GPU-h | borrowed (GPU-h) | shortfall (GPU-h) |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
    for (p, r) in runs {
        for q in &r.queues {
            writeln!(
                md,
                "| {p} | {} | {} | {} |",
                q.queue,
                q.guarantee,
                queue_cells(q).join(" | ")
            )?;
        }
    }
    writeln!(md)?;
    let w = runs[0].1.summary.workload.as_str();
    for (p, _) in runs.iter().filter(|(_, r)| !r.queues.is_empty()) {
        writeln!(md, "![{p} GPUs per queue]({p}/{w}/queues.svg)\n")?;
    }
    Ok(())
}
