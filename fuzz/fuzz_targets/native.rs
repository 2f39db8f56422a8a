//! Fuzz the native-format loader; what it accepts must survive a round trip.
#![no_main]

use gpuplan_sim::trace::{load, native, BadRows, Format, LoadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = LoadOptions {
        bad_rows: BadRows::Skip,
        ..Default::default()
    };
    if let Ok(t) = load(Format::Gpuplan, "fuzz.csv", data, &opts) {
        let mut buf = Vec::new();
        native::write(&mut buf, &t.jobs).expect("writing to memory");
        let back = load(Format::Gpuplan, "back.csv", &buf, &LoadOptions::default())
            .expect("what was read must read back");
        assert_eq!(back.jobs, t.jobs);
    }
});
