//! Fuzz the cluster-file reader (`--cluster FILE`).
#![no_main]

use gpuplan_sim::trace::cluster_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = cluster_file::parse("fuzz.csv", data) {
        assert!(!c.nodes.is_empty() && c.nodes.iter().all(|n| n.gpus > 0));
    }
});
