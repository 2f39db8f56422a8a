//! Fuzz the Gavel trace loader against a small throughput table.
#![no_main]

use gpuplan_sim::trace::gavel::Throughputs;
use gpuplan_sim::trace::{load, BadRows, Format, LoadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = Throughputs::parse(
        "t.json",
        br#"{"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 2.5}, "('LM (batch size 10)', 2)": {"null": 0.0}}}"#,
    )
    .expect("fixed table parses");
    for bad_rows in [BadRows::Fail, BadRows::Skip] {
        let opts = LoadOptions {
            bad_rows,
            gavel_throughputs: Some(&t),
            gavel_gpu_type: None,
        };
        let _ = load(Format::Gavel, "fuzz.trace", data, &opts);
    }
});
