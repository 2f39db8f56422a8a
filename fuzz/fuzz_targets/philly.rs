//! Fuzz the philly loader: any bytes give a trace or an error, never a panic.
#![no_main]

use gpuplan_sim::trace::{load, BadRows, Format, LoadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for bad_rows in [BadRows::Fail, BadRows::Skip] {
        let opts = LoadOptions {
            bad_rows,
            ..Default::default()
        };
        let _ = load(Format::Philly, "fuzz.csv", data, &opts);
    }
});
