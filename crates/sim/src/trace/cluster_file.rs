//! Cluster files for `--cluster`: a node list in CSV, `name,gpus,gpu_type`
//! with an optional `count` column that repeats a row (`gpu8-` with count
//! 3 gives `gpu8-0..2`). See `docs/workload-format.md`.

use gpuplan_core::{Cluster, CoreError, Node};

use super::util::{read_csv, Row};
use super::Rows;

/// Most GPUs one node may have (as `NxG` shapes allow).
pub const MAX_GPUS_PER_NODE: u64 = 64;
/// Most nodes one file may describe.
pub const MAX_NODES: u64 = 100_000;

/// The cluster a file describes; every bad row is reported, none skipped.
pub fn parse(source: &str, bytes: &[u8]) -> Result<Cluster, CoreError> {
    let mut rows = Rows::default();
    let csv = read_csv(source, bytes, &["name", "gpus", "gpu_type"], &mut rows)?;
    let mut nodes = Vec::new();
    let mut names = std::collections::HashSet::new();
    for i in 0..csv.records.len() {
        let mut r = csv.row(source, i);
        let name = r.text("name");
        let gpus = r.int("gpus", true, MAX_GPUS_PER_NODE);
        let ty = r.text("gpu_type");
        let count = if r.has("count") && !r.get("count").is_empty() {
            r.int("count", true, MAX_NODES)
        } else {
            Some(1)
        };
        if let (Some(name), Some(gpus), Some(ty), Some(count)) = (name, gpus, ty, count) {
            let expanded: Vec<String> = if r.has("count") && !r.get("count").is_empty() {
                (0..count).map(|k| format!("{name}{k}")).collect()
            } else {
                vec![name]
            };
            if nodes.len() as u64 + expanded.len() as u64 > MAX_NODES {
                r.err("count", format!("more than {MAX_NODES} nodes in total"));
            } else {
                for n in expanded {
                    if !names.insert(n.clone()) {
                        r.err("name", format!("duplicate node name '{n}'"));
                        break;
                    }
                    nodes.push(Node {
                        name: n,
                        gpus: gpus as u32,
                        gpu_type: ty.clone().into(),
                    });
                }
            }
        }
        collect(&mut rows, r);
    }
    finish(source, rows, nodes)
}

pub(crate) fn collect(rows: &mut Rows, mut r: Row) {
    if !r.errors.is_empty() {
        rows.bad_rows += 1;
        rows.errors.append(&mut r.errors);
    }
}

pub(crate) fn finish(source: &str, rows: Rows, nodes: Vec<Node>) -> Result<Cluster, CoreError> {
    if !rows.errors.is_empty() {
        return Err(CoreError::Parse(rows.errors));
    }
    if nodes.is_empty() {
        return Err(CoreError::Invalid(format!("{source}: no nodes with GPUs")));
    }
    Ok(Cluster { nodes })
}

/// Write a cluster as a node list.
pub fn write(cluster: &Cluster) -> String {
    let mut s = String::from("name,gpus,gpu_type\n");
    for n in &cluster.nodes {
        s.push_str(&format!("{},{},{}\n", n.name, n.gpus, n.gpu_type));
    }
    s
}
