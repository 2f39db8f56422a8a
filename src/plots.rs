//! SVG plots with plotters (SVG backend only: no fonts or system libraries).

use std::path::Path;

use anyhow::{anyhow, Result};
use gpuplan_core::Cluster;
use gpuplan_sim::SimResult;
use plotters::prelude::*;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Empirical CDF of JCT (hours), one line per run.
pub fn jct_cdf(path: &Path, runs: &[(&str, &SimResult)]) -> Result<()> {
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_h = runs
        .iter()
        .flat_map(|(_, r)| r.jobs.iter().map(|j| j.jct_s / 3600.0))
        .filter(|v| v.is_finite())
        .fold(0.1f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("JCT CDF", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((0.01f64..max_h * 1.1).log_scale(), 0f64..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("JCT (hours, log)")
        .y_desc("fraction of jobs")
        .draw()
        .map_err(err)?;
    for (i, (name, r)) in runs.iter().enumerate() {
        let mut v: Vec<f64> = r.jobs.iter().map(|j| (j.jct_s / 3600.0).max(0.01)).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(k, &x)| (x, (k + 1) as f64 / n))
            .collect();
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Allocated fraction of GPUs over time, one line per run.
pub fn utilization(path: &Path, runs: &[(&str, &SimResult)], total_gpus: u32) -> Result<()> {
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_t = runs
        .iter()
        .flat_map(|(_, r)| r.rounds.last().map(|x| x.time_s / 3600.0))
        .fold(0.1f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("GPU allocation over time", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_t, 0f64..1.05)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (hours)")
        .y_desc("allocated GPUs / capacity")
        .draw()
        .map_err(err)?;
    for (i, (name, r)) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .rounds
            .iter()
            .map(|x| {
                (
                    x.time_s / 3600.0,
                    x.gpus_allocated as f64 / total_gpus.max(1) as f64,
                )
            })
            .collect();
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(1)))
            .map_err(err)?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Allocation Gantt chart: one row per GPU slot of each node, bars coloured by job.
pub fn gantt(path: &Path, r: &SimResult, cluster: &Cluster) -> Result<()> {
    let rows: u32 = cluster.total_gpus();
    let height = (200 + rows * 6).min(4000);
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_t = r.segments.iter().map(|s| s.end_s / 3600.0).fold(0.1f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Allocation per node (rows = GPUs, grouped by node)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_t, 0f64..rows as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (hours)")
        .y_desc("GPU slot")
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    let first: Vec<u32> = cluster
        .nodes
        .iter()
        .scan(0u32, |acc, n| {
            let s = *acc;
            *acc += n.gpus;
            Some(s)
        })
        .collect();
    // Assign GPU slots within a node over time: a simple interval colouring per node.
    let mut busy: Vec<Vec<f64>> = cluster.nodes.iter().map(|n| vec![0.0; n.gpus as usize]).collect();
    let mut segs = r.segments.clone();
    segs.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut rects = Vec::new();
    for s in &segs {
        let c = COLORS[s.job.0 as usize % COLORS.len()].mix(0.85);
        for &(node, k) in &s.nodes {
            let slots = &mut busy[node as usize];
            let mut placed = 0;
            for (slot, free_at) in slots.iter_mut().enumerate() {
                if placed == k {
                    break;
                }
                if *free_at <= s.start_s + 1e-9 {
                    *free_at = s.end_s;
                    placed += 1;
                    let y = (first[node as usize] + slot as u32) as f64;
                    rects.push(Rectangle::new(
                        [(s.start_s / 3600.0, y + 0.1), (s.end_s / 3600.0, y + 0.9)],
                        c.filled(),
                    ));
                }
            }
        }
    }
    chart.draw_series(rects).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
