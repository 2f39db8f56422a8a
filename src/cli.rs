//! Argument definitions and dispatch.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::common::Format;

#[derive(Parser, Debug)]
#[command(
    name = "gpuplan",
    version,
    about = "Plan GPU allocations for deep-learning jobs: goodput models, simulation, MIP planning"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Fit and inspect the goodput model of the bundled applications.
    Models {
        #[command(subcommand)]
        cmd: ModelsCmd,
    },
    /// Simulate a workload under one policy.
    Simulate(crate::simulate::SimulateArgs),
    /// Simulate many workloads × policies in parallel.
    Sweep(crate::sweep::SweepArgs),
    /// Solve one planning round from a round file.
    Plan(crate::plan::PlanArgs),
    /// Solver time vs plan quality on seeded rounds from the real profiles.
    Bench(crate::bench::BenchArgs),
    /// List the registered policies (planners), one per line: the name first,
    /// then what it does, whether it shares GPUs under --sharing, and the
    /// parameters it sets differently from Pollux's.
    Policies {
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// The cluster as the daemon's planner sees it.
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
    },
    /// Run the executor daemon: planning rounds applied to real (NVML) or fake GPUs.
    Serve(crate::serve::ServeArgs),
    /// Submit a job file (TOML) to a running daemon; prints the job id.
    Submit {
        file: PathBuf,
        /// Submit nothing: print when the job would start and finish, and the largest delay it
        /// would cause the others, by the daemon's planner run forward (docs/estimates.md).
        #[arg(long)]
        what_if: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        #[command(flatten)]
        client: crate::serve::ClientArgs,
    },
    /// List the daemon's jobs.
    Jobs {
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Also show each queued and running job's expected start and finish, with their range
        /// (docs/estimates.md).
        #[arg(long)]
        estimate: bool,
        #[command(flatten)]
        client: crate::serve::ClientArgs,
    },
    /// Cancel a job (its processes get SIGTERM, then SIGKILL after the grace period).
    Cancel {
        id: u32,
        #[command(flatten)]
        client: crate::serve::ClientArgs,
    },
    /// Show the last log lines of a job's latest attempt.
    Logs {
        id: u32,
        #[arg(long, default_value_t = 100)]
        lines: usize,
        #[arg(long, default_value_t = 0)]
        rank: u32,
        #[command(flatten)]
        client: crate::serve::ClientArgs,
    },
    /// Predict a job's GPU utilization from model features (ONNX or a bundled app);
    /// `--cross-validate` prints the predictor's leave-one-model-out RMSLE.
    Predict(crate::predict::PredictArgs),
    /// Read public traces: inspect, convert to the native format, sample.
    Trace {
        #[command(subcommand)]
        cmd: crate::trace::TraceCmd,
    },
    /// Set two round logs of one workload side by side (`simulate
    /// --round-log`, or the Pollux artifact's via
    /// scripts/pollux-artifact-rounds.py): GPUs held, jobs running and
    /// waiting, restarts and fitness, over the run and in stretches, and
    /// whether the step models agree where both hold a job alike.
    CompareRounds(crate::compare_rounds::CompareRoundsArgs),
}

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Healthy GPUs by node, with type and round order, as `serve` would plan them;
    /// unhealthy GPUs listed apart.
    Show {
        /// `nvml` (this machine's GPUs) or `fake:NODESxGPUS`, as `serve --devices`.
        #[arg(long, default_value = "nvml")]
        devices: String,
        /// The engine whose device source to show, as `serve --engine`
        /// (`slurm`: the partition's nodes from `sinfo`).
        #[arg(long, default_value = "local", value_parser = crate::serve::engine_names())]
        engine: String,
        #[command(flatten)]
        engine_flags: crate::serve::EngineFlags,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

#[derive(Subcommand, Debug)]
pub enum ModelsCmd {
    /// Fit the 7 throughput parameters to every measured point of an app.
    Fit {
        /// Application name, or `all`.
        #[arg(long)]
        app: String,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Read profiles from this directory instead of the bundled ones.
        #[arg(long)]
        traces: Option<PathBuf>,
    },
    /// Goodput, best batch size and speedup of one configuration.
    Show {
        #[arg(long)]
        app: String,
        #[arg(long)]
        gpus: u32,
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// Epoch whose gradient statistics to use.
        #[arg(long, default_value_t = 0)]
        epoch: u32,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Models {
            cmd: ModelsCmd::Fit { app, format, traces },
        } => crate::models::fit(&app, format, traces),
        Cmd::Models {
            cmd:
                ModelsCmd::Show {
                    app,
                    gpus,
                    nodes,
                    epoch,
                    format,
                },
        } => crate::models::show(&app, gpus, nodes, epoch, format),
        Cmd::Simulate(a) => crate::simulate::simulate(a),
        Cmd::Sweep(a) => crate::sweep::sweep(a),
        Cmd::Plan(a) => crate::plan::plan(a),
        Cmd::Bench(a) => crate::bench::bench(a),
        Cmd::Serve(a) => crate::serve::serve(a),
        Cmd::Submit {
            file,
            what_if: false,
            client,
            ..
        } => crate::serve::submit(client, &file),
        Cmd::Submit {
            file,
            what_if: true,
            format,
            client,
        } => crate::serve::what_if(client, &file, format),
        Cmd::Jobs {
            format,
            estimate: false,
            client,
        } => crate::serve::jobs(client, format),
        Cmd::Jobs {
            format,
            estimate: true,
            client,
        } => crate::serve::estimates(client, format),
        Cmd::Cancel { id, client } => crate::serve::cancel(client, id),
        Cmd::Logs {
            id,
            lines,
            rank,
            client,
        } => crate::serve::logs(client, id, lines, rank),
        Cmd::Trace { cmd } => crate::trace::run(cmd),
        Cmd::Predict(a) => crate::predict::predict(a),
        Cmd::CompareRounds(a) => crate::compare_rounds::compare_rounds(a),
        Cmd::Cluster {
            cmd:
                ClusterCmd::Show {
                    devices,
                    engine,
                    engine_flags,
                    format,
                },
        } => crate::cluster::show(&devices, &engine, &engine_flags.0, format),
        Cmd::Policies { format } => {
            print!("{}", policies(format));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `gpuplan policies`: every registry entry, so a planner added there is
/// listed with no edit here. The table's first word on each line is the
/// name alone, as scripts read it (`scripts/same-results.sh`).
fn policies(format: Format) -> String {
    let entries = gpuplan_solve::registry::entries();
    match format {
        Format::Json => {
            let list: Vec<_> = entries
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "name": e.name,
                        "description": e.description,
                        "params": e.param_defaults(),
                        "shares_gpus": (e.create)().shares_gpus(),
                    })
                })
                .collect();
            format!("{:#}\n", serde_json::Value::Array(list))
        }
        Format::Table => {
            let width = entries.iter().map(|e| e.name.len()).max().unwrap_or(0);
            let mut out = String::new();
            for e in entries {
                let params: Vec<String> = e
                    .param_defaults()
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let params = if params.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", params.join(", "))
                };
                let shares = if (e.create)().shares_gpus() {
                    " (shares GPUs under --sharing)"
                } else {
                    ""
                };
                out += &format!("{:width$}  {}{shares}{params}\n", e.name, e.description);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The engines' flags sit beside `serve`'s and `cluster show`'s own:
    /// a name an engine shares with one of them would fail here, not at an
    /// operator's start (clap checks this only in debug builds).
    #[test]
    fn engine_flags_take_no_name_of_the_commands_own() {
        let cli = super::Cli::command();
        let cluster = cli.find_subcommand("cluster").unwrap();
        for cmd in [
            cli.find_subcommand("serve").unwrap(),
            cluster.find_subcommand("show").unwrap(),
        ] {
            let (mut ids, mut longs) = (std::collections::HashSet::new(), std::collections::HashSet::new());
            for a in cmd.get_arguments() {
                assert!(
                    ids.insert(a.get_id().as_str()),
                    "{}: {} twice",
                    cmd.get_name(),
                    a.get_id()
                );
                if let Some(long) = a.get_long() {
                    assert!(longs.insert(long), "{}: --{long} twice", cmd.get_name());
                }
            }
            assert!(
                longs.contains("partition") && longs.contains("slurm-timeout"),
                "{longs:?}"
            );
        }
    }
}
