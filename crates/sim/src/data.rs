//! The Pollux application profiles, bundled into the binary.
//!
//! Embedding (rather than reading `traces/` at run time) lets the same
//! simulator run in the browser and from any working directory.

use std::collections::BTreeMap;

use gpuplan_core::{pollux_app_constants, AppProfile, CoreError, POLLUX_APPS};

macro_rules! app_files {
    ($app:literal, [$($m:literal),*]) => {
        (
            $app,
            include_str!(concat!("../../../traces/pollux/", $app, "/placements.csv")),
            include_str!(concat!("../../../traces/pollux/", $app, "/scalability.csv")),
            &[$(($m, include_str!(concat!("../../../traces/pollux/", $app, "/validation-", stringify!($m), ".csv")))),*],
        )
    };
}

type AppFiles = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(u32, &'static str)],
);

const FILES: [AppFiles; 6] = [
    app_files!("bert", [12, 24, 48, 96, 192, 384]),
    app_files!("cifar10", [128, 256, 512, 1024, 2048, 4096]),
    app_files!("deepspeech2", [20, 40, 80, 160, 320, 640]),
    app_files!("imagenet", [200, 400, 800, 1600, 3200, 6400, 12800]),
    app_files!("ncf", [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]),
    app_files!("yolov3", [8, 16, 32, 64, 128, 256, 512]),
];

/// All application profiles by name.
pub type Profiles = BTreeMap<String, AppProfile>;

/// Parse the bundled Pollux profiles (about 50 ms; parse once per process).
pub fn pollux_profiles() -> Result<Profiles, CoreError> {
    let mut out = BTreeMap::new();
    for (app, placements, scalability, validations) in FILES {
        debug_assert!(POLLUX_APPS.contains(&app));
        let constants =
            pollux_app_constants(app).ok_or_else(|| CoreError::Invalid(format!("no constants for {app}")))?;
        let p_src = format!("{app}/placements.csv");
        let s_src = format!("{app}/scalability.csv");
        let v_src: Vec<String> = validations
            .iter()
            .map(|(m, _)| format!("{app}/validation-{m}.csv"))
            .collect();
        let vals = validations
            .iter()
            .zip(&v_src)
            .map(|((m, text), src)| (*m, src.as_str(), text.as_bytes()))
            .collect();
        let profile = AppProfile::parse(
            app,
            constants,
            (p_src.as_str(), placements.as_bytes()),
            (s_src.as_str(), scalability.as_bytes()),
            vals,
        )?;
        out.insert(app.to_string(), profile);
    }
    Ok(out)
}

/// The bundled Pollux workloads: (relative path, CSV text).
pub const WORKLOADS: &[(&str, &str)] = &[
    (
        "workloads/workload-1.csv",
        include_str!("../../../traces/pollux/workloads/workload-1.csv"),
    ),
    (
        "workloads/workload-2.csv",
        include_str!("../../../traces/pollux/workloads/workload-2.csv"),
    ),
    (
        "workloads/workload-3.csv",
        include_str!("../../../traces/pollux/workloads/workload-3.csv"),
    ),
    (
        "workloads/workload-4.csv",
        include_str!("../../../traces/pollux/workloads/workload-4.csv"),
    ),
    (
        "workloads/workload-5.csv",
        include_str!("../../../traces/pollux/workloads/workload-5.csv"),
    ),
    (
        "workloads/workload-6.csv",
        include_str!("../../../traces/pollux/workloads/workload-6.csv"),
    ),
    (
        "workloads/workload-7.csv",
        include_str!("../../../traces/pollux/workloads/workload-7.csv"),
    ),
    (
        "workloads/workload-8.csv",
        include_str!("../../../traces/pollux/workloads/workload-8.csv"),
    ),
];

/// Read profiles from a directory laid out like `traces/pollux/`: one folder
/// per application holding `placements.csv`, `scalability.csv` and
/// `validation-<M>.csv`. Application constants come from the Pollux table.
pub fn load_profiles_dir(dir: &std::path::Path) -> Result<Profiles, crate::SimError> {
    use crate::SimError;
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| SimError::Invalid(format!("{}: cannot read: {e}", path.display())))
    };
    let mut out = BTreeMap::new();
    for app in POLLUX_APPS {
        let app_dir = dir.join(app);
        if !app_dir.is_dir() {
            continue;
        }
        let constants = pollux_app_constants(app).expect("POLLUX_APPS all have constants");
        let p_path = app_dir.join("placements.csv");
        let s_path = app_dir.join("scalability.csv");
        let placements = read(&p_path)?;
        let scalability = read(&s_path)?;
        let mut vals = Vec::new();
        let entries = std::fs::read_dir(&app_dir)
            .map_err(|e| SimError::Invalid(format!("{}: cannot list: {e}", app_dir.display())))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(m) = name
                .strip_prefix("validation-")
                .and_then(|r| r.strip_suffix(".csv"))
            else {
                continue;
            };
            let m: u32 = m.parse().map_err(|_| {
                SimError::Invalid(format!(
                    "{}: batch size in the file name is not an integer",
                    entry.path().display()
                ))
            })?;
            vals.push((m, entry.path().display().to_string(), read(&entry.path())?));
        }
        vals.sort_by_key(|v| v.0);
        if vals.is_empty() {
            return Err(SimError::Invalid(format!(
                "{}: no validation-<M>.csv files",
                app_dir.display()
            )));
        }
        let p_src = p_path.display().to_string();
        let s_src = s_path.display().to_string();
        let profile = AppProfile::parse(
            app,
            constants,
            (p_src.as_str(), placements.as_slice()),
            (s_src.as_str(), scalability.as_slice()),
            vals.iter()
                .map(|(m, src, bytes)| (*m, src.as_str(), bytes.as_slice()))
                .collect(),
        )?;
        out.insert(app.to_string(), profile);
    }
    if out.is_empty() {
        return Err(SimError::Invalid(format!(
            "{}: no application folders found (expected some of {})",
            dir.display(),
            POLLUX_APPS.join(", ")
        )));
    }
    Ok(out)
}

/// Every measured point of every profile with tabulated features, as
/// utilization samples: the data the default predictor is trained on
/// ([`gpuplan_core::predict::DEFAULT_PREDICTOR`]).
pub fn utilization_samples(profiles: &Profiles) -> Vec<gpuplan_core::predict::Sample> {
    profiles
        .iter()
        .filter_map(|(app, p)| gpuplan_core::predict::profile_samples(app, p))
        .flatten()
        .collect()
}

#[cfg(test)]
mod predictor_tests {
    use gpuplan_core::predict::{UtilizationPredictor, DEFAULT_PREDICTOR};

    use super::*;

    /// The shipped coefficients are the fit to the bundled profiles, to 4 decimals.
    #[test]
    fn the_shipped_predictor_is_the_fit_to_the_pollux_profiles() {
        let s = utilization_samples(&pollux_profiles().unwrap());
        let fitted = UtilizationPredictor::fit(&s, DEFAULT_PREDICTOR.form).unwrap();
        println!("{fitted:?}");
        for (a, b) in fitted.coef.iter().zip(&DEFAULT_PREDICTOR.coef) {
            assert!(
                (a - b).abs() < 1e-4,
                "fitted {:?}, shipped {:?}",
                fitted.coef,
                DEFAULT_PREDICTOR.coef
            );
        }
    }
}
