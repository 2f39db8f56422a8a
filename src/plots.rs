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

/// A line chart's last step: its legend, then the file written.
pub(crate) fn finish<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
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
    finish(&mut chart, &root)
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
    finish(&mut chart, &root)
}

/// Under queues: GPUs each queue holds over time (solid), against its
/// guarantee (dashed, same colour), so borrowing and reclaim show as the
/// lines crossing.
pub fn queue_gpus(path: &Path, r: &SimResult) -> Result<()> {
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_t = r.rounds.last().map_or(0.1, |x| x.time_s / 3600.0).max(0.1);
    let max_g = r
        .rounds
        .iter()
        .flat_map(|x| x.queue_gpus.iter().copied())
        .chain(r.queues.iter().map(|q| q.guarantee))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("GPUs held per queue ({})", r.summary.policy),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_t, 0f64..max_g * 1.05)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (hours)")
        .y_desc("GPUs held (dashed: guarantee)")
        .draw()
        .map_err(err)?;
    for (i, q) in r.queues.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = r
            .rounds
            .iter()
            .filter_map(|x| x.queue_gpus.get(i).map(|&g| (x.time_s / 3600.0, g as f64)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(1)))
            .map_err(err)?
            .label(q.queue.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        if q.guarantee > 0 {
            let g = q.guarantee as f64;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, g), (max_t, g)],
                    6,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(err)?;
        }
    }
    finish(&mut chart, &root)
}

/// One bar of the Gantt: `job` on GPU slots `slots` (rows within the node)
/// of `node` over [start_s, end_s).
#[derive(Debug, Clone, PartialEq)]
pub struct GanttBar {
    pub job: u32,
    pub node: u32,
    pub slots: std::ops::Range<u32>,
    pub start_s: f64,
    pub end_s: f64,
}

/// Places every segment's GPUs on GPU slots of its nodes (interval
/// colouring per node, as the explorer does) and merges what looks like one
/// bar: a job that keeps a node across a reallocation keeps its slots, its
/// bars on one slot joined in time, then side by side slots joined. Each
/// SVG rect costs ~90 bytes: optimus on workload-6 drew 26485 of them (2.4 MB).
pub fn gantt_bars(r: &SimResult, cluster: &Cluster) -> Vec<GanttBar> {
    use std::collections::{BTreeMap, HashSet};
    const EPS: f64 = 1e-9;
    let ends: HashSet<(u32, u64)> = r.segments.iter().map(|s| (s.job.0, s.end_s.to_bits())).collect();
    let mut segs: Vec<&gpuplan_sim::Segment> = r.segments.iter().collect();
    // At equal start, a job continuing from a segment that just ended goes
    // first, so that the slots it held are still free for it.
    segs.sort_by(|a, b| {
        let cont = |s: &gpuplan_sim::Segment| !ends.contains(&(s.job.0, s.start_s.to_bits()));
        a.start_s.total_cmp(&b.start_s).then(cont(a).cmp(&cont(b)))
    });
    let mut free_at: Vec<Vec<f64>> = cluster.nodes.iter().map(|n| vec![0.0; n.gpus as usize]).collect();
    // (job, node) -> (slots it held, until when).
    let mut held: BTreeMap<(u32, u32), (Vec<u32>, f64)> = BTreeMap::new();
    // (node, slot) -> bars on it, in time order: (job, start, end).
    type Lane = Vec<(u32, f64, f64)>;
    let mut lanes: BTreeMap<(u32, u32), Lane> = BTreeMap::new();
    for s in segs {
        for &(node, k) in &s.nodes {
            let slots = &mut free_at[node as usize];
            let mut mine = Vec::with_capacity(k as usize);
            if let Some((before, until)) = held.get(&(s.job.0, node)) {
                if (until - s.start_s).abs() <= EPS {
                    for &slot in before {
                        if mine.len() < k as usize && slots[slot as usize] <= s.start_s + EPS {
                            mine.push(slot);
                            slots[slot as usize] = s.end_s;
                        }
                    }
                }
            }
            for (slot, t) in slots.iter_mut().enumerate() {
                if mine.len() == k as usize {
                    break;
                }
                if *t <= s.start_s + EPS {
                    *t = s.end_s;
                    mine.push(slot as u32);
                }
            }
            for &slot in &mine {
                let lane = lanes.entry((node, slot)).or_default();
                match lane.last_mut() {
                    Some((job, _, end)) if *job == s.job.0 && (*end - s.start_s).abs() <= EPS => {
                        *end = s.end_s
                    }
                    _ => lane.push((s.job.0, s.start_s, s.end_s)),
                }
            }
            held.insert((s.job.0, node), (mine, s.end_s));
        }
    }
    // Side by side slots with the same job and times become one bar.
    let mut bars: Vec<GanttBar> = Vec::new();
    let mut open: BTreeMap<(u32, u32, u64, u64), usize> = BTreeMap::new();
    for ((node, slot), lane) in lanes {
        for (job, start_s, end_s) in lane {
            let key = (node, job, start_s.to_bits(), end_s.to_bits());
            match open.get(&key) {
                Some(&i) if bars[i].slots.end == slot => bars[i].slots.end = slot + 1,
                _ => {
                    open.insert(key, bars.len());
                    bars.push(GanttBar {
                        job,
                        node,
                        slots: slot..slot + 1,
                        start_s,
                        end_s,
                    });
                }
            }
        }
    }
    bars
}

/// A colour per job that tells neighbours apart: hues a golden angle apart
/// (as the explorer's), alternating in lightness.
fn job_color(job: u32) -> HSLColor {
    let hue = (job as f64 * 137.508) % 360.0 / 360.0;
    HSLColor(hue, 0.62, if job.is_multiple_of(2) { 0.52 } else { 0.64 })
}

/// Allocation Gantt chart: one row per GPU, grouped by node (shaded bands,
/// node names on the axis), a colour per job, the policy in the title.
pub fn gantt(path: &Path, r: &SimResult, cluster: &Cluster) -> Result<()> {
    let rows: u32 = cluster.total_gpus();
    let height = (200 + rows * 6).min(4000);
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max_t = r.segments.iter().map(|s| s.end_s / 3600.0).fold(0.1f64, f64::max);
    let first: Vec<u32> = cluster
        .nodes
        .iter()
        .scan(0u32, |acc, n| {
            let s = *acc;
            *acc += n.gpus;
            Some(s)
        })
        .collect();
    let title = format!(
        "Allocation Gantt: {} on {} ({} nodes, {} GPUs; rows = GPUs, grouped by node)",
        r.summary.policy,
        if r.summary.workload.is_empty() {
            "the workload"
        } else {
            &r.summary.workload
        },
        cluster.num_nodes(),
        rows
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..max_t, 0f64..rows as f64)
        .map_err(err)?;
    // A node's name at the middle of its band (labels fall on whole rows).
    let mids: std::collections::HashMap<u32, &str> = cluster
        .nodes
        .iter()
        .zip(&first)
        .map(|(n, &f)| (f + n.gpus / 2, n.name.as_str()))
        .collect();
    let name_of = |y: &f64| {
        if y.fract() != 0.0 || *y < 0.0 {
            return String::new();
        }
        mids.get(&(*y as u32)).map_or(String::new(), |n| n.to_string())
    };
    chart
        .configure_mesh()
        .x_desc("time (hours)")
        .y_desc("node (rows: its GPUs)")
        .y_labels(rows as usize + 1)
        .y_label_formatter(&name_of)
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    // Every other node shaded, so each node's GPUs read as one group.
    let band = RGBColor(236, 240, 244);
    chart
        .draw_series(
            cluster
                .nodes
                .iter()
                .zip(&first)
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, (n, &f))| {
                    Rectangle::new([(0.0, f as f64), (max_t, (f + n.gpus) as f64)], band.filled())
                }),
        )
        .map_err(err)?;
    let rects = gantt_bars(r, cluster).into_iter().map(|b| {
        let y0 = (first[b.node as usize] + b.slots.start) as f64;
        let y1 = (first[b.node as usize] + b.slots.end) as f64;
        Rectangle::new(
            [(b.start_s / 3600.0, y0 + 0.1), (b.end_s / 3600.0, y1 - 0.1)],
            job_color(b.job).filled(),
        )
    });
    chart.draw_series(rects).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplan_core::JobId;
    use gpuplan_sim::Segment;

    fn seg(job: u32, start_s: f64, end_s: f64, nodes: &[(u32, u32)]) -> Segment {
        Segment {
            job: JobId(job),
            start_s,
            end_s,
            nodes: nodes.to_vec(),
        }
    }

    #[test]
    fn gantt_bars_keep_every_gpu_second_never_overlap_and_merge() {
        let cluster = Cluster::homogeneous(2, 4, "t4");
        // Job 1 moves from 2 to 3 GPUs on node 0 at t=100 (continues, keeps
        // its slots); job 2 holds 2 GPUs on node 0 throughout, then node 1.
        let segments = vec![
            seg(2, 0.0, 200.0, &[(0, 2)]),
            seg(1, 0.0, 100.0, &[(0, 2)]),
            seg(1, 100.0, 300.0, &[(0, 2), (1, 1)]),
            seg(2, 200.0, 300.0, &[(1, 3)]),
        ];
        let r = SimResult::new("test", 8, vec![], vec![], segments.clone(), vec![], 0.0);
        let bars = gantt_bars(&r, &cluster);
        let area = |b: &GanttBar| (b.slots.end - b.slots.start) as f64 * (b.end_s - b.start_s);
        let want: f64 = segments
            .iter()
            .map(|s| s.nodes.iter().map(|&(_, k)| k as f64).sum::<f64>() * (s.end_s - s.start_s))
            .sum();
        assert_eq!(bars.iter().map(area).sum::<f64>(), want);
        for (i, a) in bars.iter().enumerate() {
            for b in &bars[i + 1..] {
                let slots = a.slots.start < b.slots.end && b.slots.start < a.slots.end;
                let time = a.start_s < b.end_s && b.start_s < a.end_s;
                assert!(!(a.node == b.node && slots && time), "{a:?} overlaps {b:?}");
            }
        }
        // Job 1 on node 0: one bar of 2 slots from 0 to 300 (joined in time
        // and across slots); job 2 there: one bar of 2 slots.
        let on0: Vec<&GanttBar> = bars.iter().filter(|b| b.node == 0).collect();
        assert_eq!(on0.len(), 2, "{on0:?}");
        assert!(on0
            .iter()
            .any(|b| b.job == 1 && b.start_s == 0.0 && b.end_s == 300.0 && b.slots.len() == 2));
        assert_eq!(bars.len(), 4, "{bars:?}");
    }
}
