//! Fuzz the pollux loader: any bytes give a trace or an error, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuplan_fuzz::load_both_ways(gpuplan_sim::trace::Format::Pollux, data)
});
