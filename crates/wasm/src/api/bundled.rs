//! The workloads bundled into the page and the trace formats an upload may
//! be in: data only, below the scenario that reads them and the catalog
//! that lists them.

use gpuplan_sim::trace::Format;
use gpuplan_sim::WORKLOADS;

/// The eight workload files of one bundled set.
macro_rules! files {
    ($dir:literal) => {
        [
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-1.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-2.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-3.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-4.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-5.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-6.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-7.csv")),
            include_str!(concat!("../../../../traces/pollux/", $dir, "/workload-8.csv")),
        ]
    };
}

/// Bundled workload sets: (id prefix, label). The files are the artifact's.
const SETS: &[(&str, &str, [&str; 8])] = &[
    (
        "workloads-0.5",
        "Pollux load 0.5 (80 jobs)",
        files!("workloads-0.5"),
    ),
    (
        "workloads-1.5",
        "Pollux load 1.5 (240 jobs)",
        files!("workloads-1.5"),
    ),
    (
        "workloads-2.0",
        "Pollux load 2.0 (320 jobs)",
        files!("workloads-2.0"),
    ),
    (
        "workloads-realistic",
        "Philly sample: GPUs as in the trace",
        files!("workloads-realistic"),
    ),
];

/// Trace formats an upload may be in: the CLI's, Gavel's read through the
/// bundled throughput table ([`GAVEL_THROUGHPUTS`]) as the CLI reads it
/// without `--gavel-throughputs`.
pub(super) const UPLOAD_FORMATS: [Format; 7] = [
    Format::Gpuplan,
    Format::Pollux,
    Format::Philly,
    Format::Tiresias,
    Format::Shockwave,
    Format::Pal,
    Format::Gavel,
];

/// Text of a bundled workload by id.
pub(super) fn bundled(id: &str) -> Option<&'static str> {
    if let Some((_, text)) = WORKLOADS
        .iter()
        .find(|(path, _)| path.strip_suffix(".csv") == Some(id))
    {
        return Some(text);
    }
    let (dir, file) = id.split_once('/')?;
    let (_, _, texts) = SETS.iter().find(|(d, _, _)| *d == dir)?;
    let k: usize = file.strip_prefix("workload-")?.parse().ok()?;
    texts.get(k.checked_sub(1)?).copied()
}

pub(super) fn all_workloads() -> Vec<(String, String, &'static str)> {
    let mut out: Vec<(String, String, &'static str)> = WORKLOADS
        .iter()
        .map(|(path, text)| {
            let id = path.trim_end_matches(".csv").to_string();
            let label = format!("Pollux load 1.0: {}", id.trim_start_matches("workloads/"));
            (id, label, *text)
        })
        .collect();
    for (dir, label, texts) in SETS {
        for (i, text) in texts.iter().enumerate() {
            out.push((
                format!("{dir}/workload-{}", i + 1),
                format!("{label}: workload-{}", i + 1),
                text,
            ));
        }
    }
    out
}

/// Gavel's throughput table (`traces/gavel/simulation_throughputs.json`, as
/// `gpuplan simulate` bundles it): the ground truth of co-located jobs and
/// what a rigid job's model needs to share a GPU. 1.2 MB raw, 88 kB gzipped.
pub(super) const GAVEL_THROUGHPUTS: &[u8] =
    include_bytes!("../../../../traces/gavel/simulation_throughputs.json");
