//! A run's outputs, as `simulate` and `sweep` write them: its files
//! ([`write_outputs`]), its row of the summary table ([`print_table`]) and a
//! queue's cells ([`queue_cells`], the CLI's table and the sweep report's).

use std::path::Path;

use anyhow::{Context, Result};
use gpuplan_sim::{SimConfig, SimResult};

pub fn print_table(rows: &[&gpuplan_sim::Summary]) {
    println!(
        "{:<16} {:<14} {:>5} {:>9} {:>9} {:>9} {:>10} {:>9} {:>6} {:>6} {:>8} {:>10} {:>8}",
        "policy",
        "workload",
        "jobs",
        "avg_jct_h",
        "p50_jct_h",
        "p99_jct_h",
        "imagenet_h",
        "makespan_h",
        "util",
        "busy",
        "restarts",
        "plan_ms",
        "wall_s"
    );
    for s in rows {
        println!(
            "{:<16} {:<14} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>9.2} {:>6.2} {:>6.2} {:>8} {:>10.2} {:>8.1}",
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
            s.wall_s
        );
    }
}

/// A queue's figures as table cells, in hours: jobs, average and p99 JCT,
/// GPU-hours, borrowed and shortfall (the CLI table and the report's).
pub fn queue_cells(q: &gpuplan_sim::QueueSummary) -> [String; 6] {
    [
        q.jobs.to_string(),
        format!("{:.3}", q.avg_jct_s / 3600.0),
        format!("{:.3}", q.p99_jct_s / 3600.0),
        format!("{:.2}", q.gpu_hours),
        format!("{:.2}", q.borrowed_gpu_s / 3600.0),
        format!("{:.2}", q.shortfall_gpu_s / 3600.0),
    ]
}

/// jobs.csv, rounds.csv and the plots.
pub fn write_outputs(dir: &Path, r: &SimResult, cfg: &SimConfig) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut w = csv::Writer::from_path(dir.join("jobs.csv"))?;
    w.write_record([
        "name",
        "app",
        "submit_s",
        "completion_s",
        "jct_s",
        "restarts",
        "attained_gpu_s",
        "max_gpus_used",
    ])?;
    for j in &r.jobs {
        w.write_record([
            j.name.clone(),
            j.app.clone(),
            format!("{}", j.submit_s),
            format!("{}", j.completion_s),
            format!("{}", j.jct_s),
            j.restarts.to_string(),
            format!("{:.1}", j.attained_gpu_s),
            j.max_gpus_used.to_string(),
        ])?;
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("rounds.csv"))?;
    w.write_record([
        "time_s",
        "active",
        "running",
        "gpus_allocated",
        "restarts",
        "planner_ms",
        "status",
    ])?;
    for x in &r.rounds {
        w.write_record([
            format!("{}", x.time_s),
            x.active.to_string(),
            x.running.to_string(),
            x.gpus_allocated.to_string(),
            x.restarts.to_string(),
            format!("{:.3}", x.planner_ms),
            serde_json::to_value(x.status)?.as_str().unwrap_or("").to_string(),
        ])?;
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("gpus.csv"))?;
    w.write_record(["node", "gpu", "held_s", "shared_s", "busy_s", "utilization"])?;
    for g in &r.gpus {
        w.write_record([
            g.node.to_string(),
            g.gpu.to_string(),
            format!("{:.1}", g.held_s),
            format!("{:.1}", g.shared_s),
            format!("{:.1}", g.busy_s),
            format!(
                "{:.4}",
                if r.summary.makespan_s > 0.0 {
                    g.busy_s / r.summary.makespan_s
                } else {
                    0.0
                }
            ),
        ])?;
    }
    w.flush()?;
    // Goodput over time in ground truth, the explorer's work chart (sim's
    // `SimResult::work_rate`): jobs' worth of work per hour over each
    // interval, from the first round on.
    let mut w = csv::Writer::from_path(dir.join("work_rate.csv"))?;
    w.write_record(["from_s", "to_s", "jobs_per_h"])?;
    let mut from = r.rounds.first().map_or(0.0, |x| x.time_s);
    for &(t, rate) in &r.work_rate {
        w.write_record([format!("{from}"), format!("{t}"), format!("{rate}")])?;
        from = t;
    }
    w.flush()?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&r.summary)?,
    )?;
    crate::plots::jct_cdf(&dir.join("jct_cdf.svg"), &[(&r.summary.policy, r)])?;
    crate::plots::utilization(
        &dir.join("utilization.svg"),
        &[(&r.summary.policy, r)],
        cfg.cluster.total_gpus(),
    )?;
    crate::plots::gantt(&dir.join("gantt.svg"), r, &cfg.cluster)?;
    if !r.queues.is_empty() {
        crate::plots::queue_gpus(&dir.join("queues.svg"), r)?;
    }
    Ok(())
}
