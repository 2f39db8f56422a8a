//! Fuzz the Alibaba PAI machine-spec reader (a cluster description).
#![no_main]

use gpuplan_sim::trace::alibaba;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((c, _)) = alibaba::parse("fuzz.csv", data) {
        assert!(c.nodes.iter().all(|n| n.gpus > 0));
    }
});
