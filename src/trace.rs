//! `gpuplan trace inspect|convert|sample|import-slurm`. Turning a workload
//! path or a `--cluster` value into library types is `crate::inputs`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use gpuplan_core::Cluster;
use gpuplan_sim::trace::workload::{parse_duration_s, sample};
use gpuplan_sim::trace::{self, alibaba, native};
use serde::Serialize;

use crate::common::Format;
use crate::inputs::{load_cluster, TraceOpts};

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// Format, job count, time span, GPU histogram, load and the first problems of a trace.
    Inspect {
        path: PathBuf,
        #[command(flatten)]
        load: TraceOpts,
        /// Also give the load relative to this cluster (NxG or a cluster file).
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Convert a trace to gpuplan's native workload CSV (docs/workload-format.md).
    Convert {
        path: PathBuf,
        #[command(flatten)]
        load: TraceOpts,
        /// Target format; only `gpuplan` is written.
        #[arg(long, value_enum, default_value = "gpuplan")]
        to: ToFormat,
        #[arg(long)]
        out: PathBuf,
    },
    /// Sample N jobs from a window of a trace by the Pollux method, as a native workload.
    Sample {
        path: PathBuf,
        #[command(flatten)]
        load: TraceOpts,
        #[arg(long)]
        jobs: usize,
        /// Window length: 8h, 30m, 3600s, 1d or seconds.
        #[arg(long, default_value = "8h")]
        window: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Your own cluster's history: `sacct --json` and `sinfo --json` (or
    /// `scontrol show node --json`) as a workload (accounts as queues), a
    /// cluster file and a queues file, for `simulate`/`sweep`.
    ImportSlurm {
        /// `sacct --json` output (e.g. `sacct --json -a -X -S 2026-10-01 -E 2026-11-01`).
        #[arg(long)]
        sacct: PathBuf,
        /// `sinfo --json` or `scontrol show node --json` output.
        #[arg(long)]
        nodes: PathBuf,
        /// The workload to write (native CSV; `group` = the job's account).
        #[arg(long)]
        out: PathBuf,
        /// The cluster file to write (`name,gpus,gpu_type`).
        #[arg(long)]
        cluster_out: PathBuf,
        /// Also write a queues file: one queue per account, guaranteed its
        /// share of the cluster by imported GPU-time.
        #[arg(long)]
        queues_out: Option<PathBuf>,
    },
    /// Kueue's ClusterQueues and Cohorts (YAML manifests, e.g. `kubectl get
    /// clusterqueues,cohorts -o yaml`) as a queues file (docs/estimates.md):
    /// nominal quota per flavour summed, borrowing and lending limits,
    /// cohort trees, fair-sharing weights.
    ImportKueue {
        /// ClusterQueue objects (multi-document YAML; Cohorts may be here too).
        #[arg(long)]
        cluster_queues: PathBuf,
        /// Cohort objects, where they are in another file.
        #[arg(long)]
        cohorts: Option<PathBuf>,
        /// The resource counted as GPUs.
        #[arg(long, default_value = gpuplan_sim::trace::kueue::GPU_RESOURCE)]
        resource: String,
        /// The queues file to write (TOML, docs/tenants.md).
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ToFormat {
    Gpuplan,
}

#[derive(Serialize)]
struct Inspect {
    path: String,
    #[serde(flatten)]
    stats: trace::TraceStats,
    /// mean_gpus_demanded / cluster GPUs, when --cluster is given.
    load_vs_cluster: Option<f64>,
    cluster_gpus: Option<u32>,
    /// The first problems found (rows that fail validation), at most 10.
    problems: Vec<String>,
    problem_count: usize,
}

pub fn run(cmd: TraceCmd) -> Result<ExitCode> {
    match cmd {
        TraceCmd::Inspect {
            path,
            mut load,
            cluster,
            format,
        } => {
            // Inspect reports problems rather than stopping at them.
            load.skip_bad_rows = true;
            if let Some(c) = cluster_description(&path, &load)? {
                return inspect_cluster(&path, &c, format);
            }
            let t = load.load(&path)?;
            let stats = trace::stats(&t);
            let cluster = cluster.as_deref().map(load_cluster).transpose()?;
            let out = Inspect {
                path: path.display().to_string(),
                load_vs_cluster: cluster
                    .as_ref()
                    .map(|c| stats.mean_gpus_demanded / c.total_gpus() as f64),
                cluster_gpus: cluster.as_ref().map(Cluster::total_gpus),
                problems: t.problems.iter().take(10).map(|p| p.to_string()).collect(),
                problem_count: t.problems.len(),
                stats,
            };
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
                Format::Table => print_inspect(&out),
            }
            Ok(if out.problem_count > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        TraceCmd::Convert { path, load, to, out } => {
            let ToFormat::Gpuplan = to;
            let t = load.load(&path)?;
            write_native(&out, &t.jobs)?;
            eprintln!(
                "wrote {} jobs ({} format) to {}",
                t.jobs.len(),
                t.format.name(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        TraceCmd::Sample {
            path,
            load,
            jobs,
            window,
            seed,
            out,
        } => {
            if jobs == 0 {
                bail!("--jobs must be > 0");
            }
            let window_s = parse_duration_s(&window).context("--window")?;
            let t = load.load(&path)?;
            let profiles = gpuplan_sim::pollux_profiles()?;
            let picked = sample(&t, jobs, window_s, seed, &profiles)
                .with_context(|| format!("sampling {}", path.display()))?;
            write_native(&out, &picked)?;
            eprintln!("wrote {} jobs to {}", picked.len(), out.display());
            Ok(ExitCode::SUCCESS)
        }
        TraceCmd::ImportSlurm {
            sacct,
            nodes,
            out,
            cluster_out,
            queues_out,
        } => import_slurm(&sacct, &nodes, &out, &cluster_out, queues_out.as_deref()),
        TraceCmd::ImportKueue {
            cluster_queues,
            cohorts,
            resource,
            out,
        } => import_kueue(&cluster_queues, cohorts.as_deref(), &resource, &out),
    }
}

/// `trace import-slurm`: read both files completely (every problem
/// reported, nothing written) before writing any output.
fn import_slurm(
    sacct: &Path,
    nodes: &Path,
    out: &Path,
    cluster_out: &Path,
    queues_out: Option<&Path>,
) -> Result<ExitCode> {
    let read = |p: &Path| std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()));
    let (sacct_text, nodes_text) = (read(sacct)?, read(nodes)?);
    let jobs = trace::slurm::parse_sacct(&sacct.display().to_string(), &sacct_text)?;
    let cluster = trace::slurm::parse_nodes(&nodes.display().to_string(), &nodes_text)?;
    if jobs.jobs.is_empty() {
        bail!("{}: no job that ran on GPUs to import", sacct.display());
    }
    let largest = cluster
        .types()
        .iter()
        .map(|t| {
            cluster
                .nodes
                .iter()
                .filter(|n| &n.gpu_type == t)
                .map(|n| n.gpus)
                .sum::<u32>()
        })
        .max()
        .unwrap_or(0);
    if let Some(j) = jobs.jobs.iter().find(|j| j.gpus > largest) {
        eprintln!(
            "warning: {} ran on {} GPUs, more than the {largest} of the largest GPU type in {}: \
             simulate with --shrink-to-fit or a larger cluster",
            j.name,
            j.gpus,
            nodes.display()
        );
    }
    write_native(out, &jobs.jobs)?;
    write_file(cluster_out, &trace::cluster_file::write(&cluster))?;
    if let Some(q) = queues_out {
        write_file(q, &trace::slurm::queues_toml(&jobs.jobs, cluster.total_gpus()))?;
    }
    let accounts: std::collections::BTreeSet<_> =
        jobs.jobs.iter().filter_map(|j| j.group.as_deref()).collect();
    let skipped: Vec<String> = jobs.skipped.iter().map(|(why, n)| format!("{n} {why}")).collect();
    eprintln!(
        "wrote {} jobs ({} accounts) to {}, {} nodes ({} GPUs) to {}{}; time 0 is epoch second {}",
        jobs.jobs.len(),
        accounts.len(),
        out.display(),
        cluster.nodes.len(),
        cluster.total_gpus(),
        cluster_out.display(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!("; skipped {}", skipped.join(", "))
        },
        jobs.epoch_s
    );
    Ok(ExitCode::SUCCESS)
}

/// `trace import-kueue`: both files read completely (every problem
/// reported as `FILE:LINE:field`, nothing written) before the queues file.
fn import_kueue(
    cluster_queues: &Path,
    cohorts: Option<&Path>,
    resource: &str,
    out: &Path,
) -> Result<ExitCode> {
    let read = |p: &Path| std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()));
    let cq_text = read(cluster_queues)?;
    let co_text = cohorts.map(read).transpose()?;
    let (cq_name, co_name) = (
        cluster_queues.display().to_string(),
        cohorts.map(|p| p.display().to_string()),
    );
    let imported = trace::kueue::import_kueue(
        (&cq_text, &cq_name),
        co_text.as_deref().zip(co_name.as_deref()),
        resource,
    )
    .map_err(|errs| anyhow::anyhow!("{}", errs.join("\n")))?;
    let sources = match &co_name {
        Some(c) => format!("{cq_name}, {c}"),
        None => cq_name.clone(),
    };
    write_file(out, &trace::kueue::queues_toml(&imported, &sources))?;
    for n in &imported.notes {
        eprintln!("note: {n}");
    }
    eprintln!("wrote {} queues to {}", imported.queues.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}

/// A file that is a cluster description rather than a trace (a cluster file
/// or an Alibaba machine spec), unless a trace format was forced.
fn cluster_description(path: &Path, load: &TraceOpts) -> Result<Option<Cluster>> {
    if load.trace_format.is_some() {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if trace::detect(&bytes).is_some() {
        return Ok(None);
    }
    let first = String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    if first.starts_with("name,") || first.split(',').count() == alibaba::FIELDS.len() {
        return load_cluster(&path.display().to_string()).map(Some);
    }
    Ok(None)
}

#[derive(Serialize)]
struct ClusterInspect {
    path: String,
    format: &'static str,
    nodes: usize,
    gpus: u32,
    /// GPU type → (nodes, GPUs).
    by_gpu_type: std::collections::BTreeMap<String, (usize, u32)>,
}

fn inspect_cluster(path: &Path, c: &Cluster, format: Format) -> Result<ExitCode> {
    let mut by = std::collections::BTreeMap::new();
    for n in &c.nodes {
        let e = by.entry(n.gpu_type.to_string()).or_insert((0usize, 0u32));
        e.0 += 1;
        e.1 += n.gpus;
    }
    let out = ClusterInspect {
        path: path.display().to_string(),
        format: "cluster",
        nodes: c.num_nodes(),
        gpus: c.total_gpus(),
        by_gpu_type: by,
    };
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => {
            println!("path            {}", out.path);
            println!("format          cluster");
            println!("nodes           {} ({} GPUs)", out.nodes, out.gpus);
            for (t, (n, g)) in &out.by_gpu_type {
                println!("  {t:<12}  {n} nodes, {g} GPUs");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_native(out: &Path, jobs: &[trace::TraceJob]) -> Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let f = std::fs::File::create(out).with_context(|| format!("{}: cannot create", out.display()))?;
    native::write(std::io::BufWriter::new(f), jobs).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

fn print_inspect(i: &Inspect) {
    let s = &i.stats;
    println!("path            {}", i.path);
    println!("format          {}", s.format.name());
    println!(
        "jobs            {} ({} profiled, {} duration-only)",
        s.jobs, s.profiled_jobs, s.duration_jobs
    );
    println!(
        "time span       {:.0} s ({:.2} h), submissions {:.0} .. {:.0} s",
        s.span_s,
        s.span_s / 3600.0,
        s.first_submit_s,
        s.last_submit_s
    );
    let hist: Vec<String> = s.gpu_histogram.iter().map(|(g, n)| format!("{g}:{n}")).collect();
    println!("GPUs per job    {}", hist.join(" "));
    if s.duration_jobs + s.profiled_jobs > 0 && s.total_gpu_s == 0.0 {
        println!("load            unknown: no job gives a duration (profiled jobs run until trained)");
    } else {
        print_load(i);
    }
    println!("bad rows        {}", s.skipped_rows);
    for p in &i.problems {
        println!("  {p}");
    }
    if i.problem_count > i.problems.len() {
        println!("  ... and {} more", i.problem_count - i.problems.len());
    }
}

fn print_load(i: &Inspect) {
    let s = &i.stats;
    println!(
        "load            {:.0} GPU-h in total, {:.1} GPUs busy on average{}",
        s.total_gpu_s / 3600.0,
        s.mean_gpus_demanded,
        match (i.load_vs_cluster, i.cluster_gpus) {
            (Some(l), Some(g)) => format!(" ({:.2} of {g} GPUs)", l),
            _ => String::new(),
        }
    );
}
