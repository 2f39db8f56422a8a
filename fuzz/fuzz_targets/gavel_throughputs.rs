//! Fuzz the parser of Gavel's simulation_throughputs.json.
#![no_main]

use gpuplan_sim::trace::gavel::Throughputs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Throughputs::parse("fuzz.json", data);
});
