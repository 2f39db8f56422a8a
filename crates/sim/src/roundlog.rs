//! One line per round of what a simulator decided and what its jobs did,
//! in a format two simulators can both write, and their comparison.
//!
//! It exists to find where `pollux-ga` parts from the Pollux artifact's own
//! simulator (docs/fidelity.md, "Under contention"): `gpuplan simulate
//! --round-log` writes it, `scripts/pollux-artifact-rounds.py` makes the
//! artifact write it, and [`compare`] sets two logs side by side. The
//! artifact's GA is random, so single allocations differ from the first
//! round on; what the comparison looks for is a *systematic* difference:
//! in how many jobs hold GPUs and how many GPUs, in restarts, or (where the
//! two hold the same job in the same shape) in the simulated goodput.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One job's state after a round's allocation is applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogJob {
    /// The workload's job name (the artifact's `name` column).
    pub name: String,
    /// GPUs it holds for the next interval.
    pub gpus: u32,
    /// Nodes those GPUs are on.
    pub nodes: u32,
    /// The node of each of its GPUs (node indices, sorted): the artifact's
    /// `allocation`, so its own fitness can be evaluated on this plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocation: Vec<u32>,
    /// Total batch size of its new configuration.
    pub batch_size: u32,
    /// Scale-invariant iterations done so far.
    pub progress: f64,
    /// Epochs done so far.
    pub epoch: u32,
    /// Re-allocations after its first start.
    pub restarts: u32,
    /// Finished (it is logged once more, in the round it finished).
    #[serde(default)]
    pub done: bool,
    /// True progress rate of its new configuration (iterations per second,
    /// no interference); absent while it holds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// The speedup its new allocation was valued at (before the restart
    /// factor), as the policy's fitness saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
}

/// One round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundLog {
    /// Simulated time of the round (seconds).
    pub time: f64,
    /// Jobs submitted by then: in the system, or finished this round.
    pub jobs: Vec<LogJob>,
    /// Pollux's fitness of the chosen allocation: the power mean of
    /// speedup × restart factor × dominant share × nodes, + 1e-3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitness: Option<f64>,
}

/// Read a round log (JSON lines); errors name the file and line.
pub fn read(path: &std::path::Path) -> Result<Vec<RoundLog>, crate::SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::SimError::Invalid(format!("{}: {e}", path.display())))?;
    parse(&text).map_err(|(line, e)| crate::SimError::Invalid(format!("{}:{line}: {e}", path.display())))
}

/// Parse a round log's text; the error gives the 1-based line.
pub fn parse(text: &str) -> Result<Vec<RoundLog>, (usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| (i + 1, e.to_string())))
        .collect()
}

/// The two logs' figures over one stretch of rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Window {
    /// First and last round time in the stretch (seconds).
    pub from_s: f64,
    /// Last round time in the stretch.
    pub to_s: f64,
    /// Per log: mean jobs in the system per round.
    pub active: [f64; 2],
    /// Per log: mean jobs holding GPUs per round.
    pub running: [f64; 2],
    /// Per log: mean GPUs held per round.
    pub gpus: [f64; 2],
    /// Per log: restarts in the stretch.
    pub restarts: [u32; 2],
    /// Per log: jobs that finished in the stretch.
    pub finished: [u32; 2],
    /// Per log: mean fitness of the chosen allocations.
    pub fitness: [f64; 2],
}

/// Where two logs of one workload differ.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    /// Round times both logs hold.
    pub common_rounds: usize,
    /// The first round at which a job holds a different number of GPUs.
    pub first_gpu_difference_s: Option<f64>,
    /// The first round at which a job is finished in one log only.
    pub first_finish_difference_s: Option<f64>,
    /// Whole run, then equal stretches of `window` rounds.
    pub total: Window,
    /// The run in stretches.
    pub windows: Vec<Window>,
    /// Per application: mean GPUs held per running job in each log.
    pub gpus_per_running_job: BTreeMap<String, [f64; 2]>,
    /// Per application: rounds its jobs spent waiting (in the system, no
    /// GPUs) in each log.
    pub waiting_rounds: BTreeMap<String, [u64; 2]>,
    /// Where both logs hold a job in the same shape (GPUs, nodes, batch
    /// size, epoch): how many such (job, round) pairs, and the largest
    /// relative difference of their goodputs. The step models agree where
    /// this is ~0.
    pub same_shape_pairs: usize,
    /// The largest relative goodput difference among them.
    pub same_shape_max_goodput_diff: f64,
    /// Per log: average JCT (s) of the jobs finished in both.
    pub avg_jct_s: [f64; 2],
}

/// The application of a job name (`cifar10-12` → `cifar10`).
fn app_of(name: &str) -> &str {
    name.rsplit_once('-').map_or(name, |(a, _)| a)
}

/// Compare logs `a` and `b` of one workload, by round time, in stretches
/// of `window` rounds (0: none).
pub fn compare(a: &[RoundLog], b: &[RoundLog], window: usize) -> Comparison {
    let by_time = |l: &[RoundLog]| -> BTreeMap<i64, usize> {
        l.iter()
            .enumerate()
            .map(|(i, r)| (r.time.round() as i64, i))
            .collect()
    };
    let (ta, tb) = (by_time(a), by_time(b));
    let common: Vec<(usize, usize)> = ta
        .iter()
        .filter_map(|(t, &i)| tb.get(t).map(|&j| (i, j)))
        .collect();
    let mut c = Comparison {
        common_rounds: common.len(),
        ..Comparison::default()
    };
    let mut gpus_sum: BTreeMap<String, [(f64, f64); 2]> = BTreeMap::new();
    for &(i, j) in &common {
        let (ra, rb) = (&a[i], &b[j]);
        let jb: BTreeMap<&str, &LogJob> = rb.jobs.iter().map(|x| (x.name.as_str(), x)).collect();
        for x in &ra.jobs {
            let Some(y) = jb.get(x.name.as_str()) else {
                continue;
            };
            if c.first_gpu_difference_s.is_none() && !x.done && !y.done && x.gpus != y.gpus {
                c.first_gpu_difference_s = Some(ra.time);
            }
            if c.first_finish_difference_s.is_none() && x.done != y.done {
                c.first_finish_difference_s = Some(ra.time);
            }
            let same = (x.gpus, x.nodes, x.batch_size, x.epoch) == (y.gpus, y.nodes, y.batch_size, y.epoch);
            if let (true, Some(g), Some(h)) = (same && x.gpus > 0 && !x.done && !y.done, x.goodput, y.goodput)
            {
                c.same_shape_pairs += 1;
                let d = (g - h).abs() / g.abs().max(h.abs()).max(1e-12);
                c.same_shape_max_goodput_diff = c.same_shape_max_goodput_diff.max(d);
            }
        }
        for (k, r) in [ra, rb].into_iter().enumerate() {
            for x in r.jobs.iter().filter(|x| !x.done) {
                let e = gpus_sum.entry(app_of(&x.name).to_string()).or_default();
                let w = c.waiting_rounds.entry(app_of(&x.name).to_string()).or_default();
                if x.gpus > 0 {
                    e[k].0 += f64::from(x.gpus);
                    e[k].1 += 1.0;
                } else {
                    w[k] += 1;
                }
            }
        }
    }
    c.gpus_per_running_job = gpus_sum
        .into_iter()
        .map(|(app, s)| (app, s.map(|(g, n)| if n > 0.0 { g / n } else { 0.0 })))
        .collect();
    let totals = [running_totals(a), running_totals(b)];
    c.total = stretch([a, b], &totals, &common);
    if window > 0 {
        c.windows = common
            .chunks(window)
            .map(|w| stretch([a, b], &totals, w))
            .collect();
    }
    c.avg_jct_s = both_finished_jct(a, b);
    c
}

/// Per round of a log, the restarts and finished jobs so far: each job's
/// latest restart count summed, and the jobs seen finished. A log may
/// drop a job after the round it finished in (gpuplan's does, the
/// artifact's does not), so counts are carried, not re-summed.
fn running_totals(log: &[RoundLog]) -> Vec<(u64, u64)> {
    let mut latest: BTreeMap<&str, (u32, bool)> = BTreeMap::new();
    let (mut restarts, mut finished) = (0u64, 0u64);
    log.iter()
        .map(|r| {
            for x in &r.jobs {
                let e = latest.entry(&x.name).or_insert((0, false));
                restarts += u64::from(x.restarts.saturating_sub(e.0));
                e.0 = e.0.max(x.restarts);
                if x.done && !e.1 {
                    e.1 = true;
                    finished += 1;
                }
            }
            (restarts, finished)
        })
        .collect()
}

/// One stretch's figures; `rounds` pairs indices into `a` and `b`.
fn stretch(logs: [&[RoundLog]; 2], totals: &[Vec<(u64, u64)>; 2], rounds: &[(usize, usize)]) -> Window {
    let [a, _] = logs;
    let mut w = Window::default();
    let (Some(first), Some(last)) = (rounds.first(), rounds.last()) else {
        return w;
    };
    w.from_s = a[first.0].time;
    w.to_s = a[last.0].time;
    let n = rounds.len() as f64;
    for (k, log) in logs.into_iter().enumerate() {
        let idx = |p: &(usize, usize)| if k == 0 { p.0 } else { p.1 };
        let mut fitness = (0.0, 0.0);
        for p in rounds {
            let r = &log[idx(p)];
            let live = r.jobs.iter().filter(|x| !x.done);
            w.active[k] += live.clone().count() as f64 / n;
            w.running[k] += live.clone().filter(|x| x.gpus > 0).count() as f64 / n;
            w.gpus[k] += live.map(|x| f64::from(x.gpus)).sum::<f64>() / n;
            if let Some(f) = r.fitness {
                fitness.0 += f;
                fitness.1 += 1.0;
            }
        }
        w.fitness[k] = if fitness.1 > 0.0 {
            fitness.0 / fitness.1
        } else {
            0.0
        };
        let before = idx(first).checked_sub(1).map_or((0, 0), |i| totals[k][i]);
        let end = totals[k][idx(last)];
        w.restarts[k] = (end.0 - before.0) as u32;
        w.finished[k] = (end.1 - before.1) as u32;
    }
    w
}

/// Per log, the average JCT of the jobs both logs saw finish: a job's JCT
/// is the time of the round that logs it done less its first round, so
/// both logs are measured alike (to the round).
fn both_finished_jct(a: &[RoundLog], b: &[RoundLog]) -> [f64; 2] {
    fn spans(l: &[RoundLog]) -> BTreeMap<&str, f64> {
        let mut first: BTreeMap<&str, f64> = BTreeMap::new();
        let mut done: BTreeMap<&str, f64> = BTreeMap::new();
        for r in l {
            for x in &r.jobs {
                first.entry(&x.name).or_insert(r.time);
                if x.done {
                    done.entry(&x.name).or_insert(r.time);
                }
            }
        }
        done.into_iter().map(|(n, t)| (n, t - first[n])).collect()
    }
    let (sa, sb) = (spans(a), spans(b));
    let both: Vec<(&str, f64, f64)> = sa
        .iter()
        .filter_map(|(n, &x)| sb.get(n).map(|&y| (*n, x, y)))
        .collect();
    if both.is_empty() {
        return [0.0; 2];
    }
    let n = both.len() as f64;
    [
        both.iter().map(|x| x.1).sum::<f64>() / n,
        both.iter().map(|x| x.2).sum::<f64>() / n,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, gpus: u32, restarts: u32, done: bool) -> LogJob {
        LogJob {
            name: name.into(),
            gpus,
            nodes: u32::from(gpus > 0),
            allocation: vec![0; gpus as usize],
            batch_size: 128 * gpus,
            progress: 0.0,
            epoch: 0,
            restarts,
            done,
            goodput: (gpus > 0).then_some(f64::from(gpus)),
            speedup: None,
        }
    }

    #[test]
    fn a_log_line_names_its_line_when_bad() {
        let good = r#"{"time": 60, "jobs": [{"name": "ncf-1", "gpus": 1, "nodes": 1, "batch_size": 32768, "progress": 1.5, "epoch": 0, "restarts": 0}]}"#;
        assert_eq!(parse(good).unwrap()[0].jobs[0].name, "ncf-1");
        let bad = format!("{good}\n{{\"time\": 120, \"jobs\": [{{\"name\": 3}}]}}\n");
        assert_eq!(parse(&bad).unwrap_err().0, 2);
    }

    #[test]
    fn comparison_counts_gpus_restarts_waiting_and_first_differences() {
        let a = vec![
            RoundLog {
                time: 60.0,
                jobs: vec![job("cifar10-0", 2, 0, false), job("ncf-1", 1, 0, false)],
                fitness: Some(0.5),
            },
            RoundLog {
                time: 120.0,
                jobs: vec![job("cifar10-0", 4, 1, false), job("ncf-1", 1, 0, true)],
                fitness: Some(0.7),
            },
        ];
        let b = vec![
            RoundLog {
                time: 60.0,
                jobs: vec![job("cifar10-0", 2, 0, false), job("ncf-1", 0, 0, false)],
                fitness: Some(0.4),
            },
            RoundLog {
                time: 120.0,
                jobs: vec![job("cifar10-0", 2, 0, false), job("ncf-1", 1, 0, false)],
                fitness: Some(0.4),
            },
        ];
        let c = compare(&a, &b, 1);
        assert_eq!(c.common_rounds, 2);
        assert_eq!(c.first_gpu_difference_s, Some(60.0));
        assert_eq!(c.first_finish_difference_s, Some(120.0));
        assert_eq!(c.total.gpus, [(3.0 + 4.0) / 2.0, (2.0 + 3.0) / 2.0]);
        assert_eq!(c.total.running, [1.5, 1.5]);
        assert_eq!(c.total.restarts, [1, 0]);
        assert_eq!(c.windows.len(), 2);
        assert_eq!(c.windows[1].restarts, [1, 0]);
        assert_eq!(c.waiting_rounds["ncf"], [0, 1]);
        assert_eq!(c.gpus_per_running_job["cifar10"], [3.0, 2.0]);
        // cifar10-0 at round 60 is in the same shape in both, same goodput.
        assert_eq!(c.same_shape_pairs, 1);
        assert_eq!(c.same_shape_max_goodput_diff, 0.0);
        assert!((c.total.fitness[0] - 0.6).abs() < 1e-12);
    }
}
