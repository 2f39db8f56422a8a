//! The Alibaba PAI v2020 machine spec (`pai_machine_spec.csv`) as a cluster.
//!
//! Columns `machine,gpu_type,cap_cpu,cap_mem,cap_gpu`; the upstream file has
//! no header row (the header is a separate file), so a header line is
//! accepted but not required. CPU-only machines (`cap_gpu` 0) are not part
//! of a GPU cluster and are left out; [`parse`] says how many.

use gpuplan_core::{Cluster, CoreError, Node};

use super::cluster_file::{collect, finish, MAX_GPUS_PER_NODE};
use super::util::{read_tsv, utf8, Row};
use super::Rows;

/// The columns, in order (the upstream file names them elsewhere).
pub const FIELDS: [&str; 5] = ["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"];

/// The cluster and the number of CPU-only machines left out.
pub fn parse(source: &str, bytes: &[u8]) -> Result<(Cluster, usize), CoreError> {
    let text = utf8(source, bytes)?;
    // Reuse the fixed-layout reader with commas turned into its separator;
    // the machine spec has no quoting.
    let tabbed = text.replace('\t', " ").replace(',', "\t");
    let mut rows = Rows::default();
    let parsed: Vec<Row> = read_tsv(source, &tabbed, &[&FIELDS], &mut rows);
    let mut nodes = Vec::new();
    let mut cpu_only = 0;
    for (i, mut r) in parsed.into_iter().enumerate() {
        if i == 0 && r.get("machine") == "machine" && r.get("cap_gpu") == "cap_gpu" {
            continue;
        }
        let name = r.text("machine");
        let ty = r.text("gpu_type");
        r.number("cap_cpu", false);
        r.number("cap_mem", false);
        let gpus = r.int("cap_gpu", false, MAX_GPUS_PER_NODE);
        if r.errors.is_empty() {
            match (name, ty, gpus) {
                (Some(_), Some(_), Some(0)) => cpu_only += 1,
                (Some(name), Some(ty), Some(g)) => nodes.push(Node {
                    name,
                    gpus: g as u32,
                    gpu_type: ty.to_lowercase().into(),
                }),
                _ => {}
            }
        }
        collect(&mut rows, r);
    }
    Ok((finish(source, rows, nodes)?, cpu_only))
}
