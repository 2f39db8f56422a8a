//! Shared body of the per-format fuzz targets.

use gpuplan_sim::trace::{load, BadRows, Format, LoadOptions};

/// Load `data` as `format`, failing on bad rows and skipping them: either
/// way a trace or an error, never a panic.
pub fn load_both_ways(format: Format, data: &[u8]) {
    for bad_rows in [BadRows::Fail, BadRows::Skip] {
        let opts = LoadOptions {
            bad_rows,
            ..Default::default()
        };
        let _ = load(format, "fuzz.csv", data, &opts);
    }
}
