//! `gpuplan cluster show`: the cluster as the daemon's planner sees it, from
//! the same mapping the round driver uses ([`gpuplan_exec::device_cluster`]),
//! so an operator reads the nodes, types and GPU order a round will get.

use std::process::ExitCode;

use anyhow::Result;
use gpuplan_exec::Health;
use serde::Serialize;

use crate::common::Format;

#[derive(Serialize)]
struct Unhealthy<'a> {
    uuid: &'a str,
    node: &'a str,
    index: u32,
    reason: &'a str,
}

#[derive(Serialize)]
struct Shown<'a> {
    /// In round-file form: it can be pasted into a round's `cluster`.
    cluster: &'a gpuplan_core::Cluster,
    /// Per round node, its GPUs' UUIDs in round order (GPU k = `gpus[i][k]`).
    gpus: &'a [Vec<String>],
    unhealthy: Vec<Unhealthy<'a>>,
}

pub fn show(
    devices: &str,
    engine: &str,
    options: &gpuplan_exec::engine::EngineOptions,
    format: Format,
) -> Result<ExitCode> {
    let state = std::env::temp_dir();
    let (mut d, _) = gpuplan_exec::engine::build(
        engine,
        &gpuplan_exec::engine::EngineSetup {
            devices,
            options,
            state_dir: &state,
            sharing: 1,
            clock: std::sync::Arc::new(gpuplan_exec::SystemClock),
        },
    )?;
    let gpus = d.collect()?;
    let dc = gpuplan_exec::device_cluster(&gpus);
    let unhealthy: Vec<Unhealthy> = gpus
        .iter()
        .filter_map(|g| match &g.health {
            Health::Ok => None,
            Health::Unhealthy { reason } => Some(Unhealthy {
                uuid: &g.uuid,
                node: &g.node,
                index: g.index,
                reason,
            }),
        })
        .collect();
    match format {
        Format::Json => {
            let shown = Shown {
                cluster: &dc.cluster,
                gpus: &dc.node_gpus,
                unhealthy,
            };
            println!("{}", serde_json::to_string_pretty(&shown)?);
        }
        Format::Table => {
            println!(
                "{:<5} {:<20} {:>4}  {:<16} gpus (round order)",
                "node", "name", "gpus", "type"
            );
            for (i, (n, uuids)) in dc.cluster.nodes.iter().zip(&dc.node_gpus).enumerate() {
                println!(
                    "{i:<5} {:<20} {:>4}  {:<16} {}",
                    n.name,
                    n.gpus,
                    n.gpu_type.as_str(),
                    uuids.join(",")
                );
            }
            let types = dc.cluster.types();
            println!(
                "{} healthy GPUs on {} nodes, {} type(s): {}",
                dc.cluster.total_gpus(),
                dc.cluster.num_nodes(),
                types.len(),
                types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
            );
            for u in &unhealthy {
                println!(
                    "unhealthy: {} (node {}, index {}): {}; left out of rounds",
                    u.uuid, u.node, u.index, u.reason
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
