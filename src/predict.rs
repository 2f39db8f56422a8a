//! `gpuplan predict`: a job's GPU utilization before it runs, from model
//! features (an ONNX file, or a bundled application's table), and the
//! predictor's leave-one-model-out accuracy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use gpuplan_core::predict::{
    app_features, leave_one_family_out, Form, ModelFeatures, PredictAt, Sample, UtilizationPredictor,
    DEFAULT_PREDICTOR,
};
use gpuplan_core::GpuType;
use serde::Serialize;

use crate::common::Format;

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Model features from this ONNX file (a ModelProto).
    #[arg(long, conflicts_with = "app")]
    onnx: Option<PathBuf>,
    /// Model features of a bundled application (cifar10, imagenet, yolov3, bert, deepspeech2, ncf).
    #[arg(long)]
    app: Option<String>,
    /// Local batch size per GPU.
    #[arg(long)]
    local_bsz: Option<u32>,
    #[arg(long, default_value_t = 1)]
    gpus: u32,
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// GPU type (t4, v100, a100, ...); absent: the T4 of the training data.
    #[arg(long)]
    gpu_type: Option<String>,
    /// Print the leave-one-model-out RMSLE table instead of a prediction.
    #[arg(long)]
    cross_validate: bool,
    /// Fit on the training data and write the predictor (JSON) here.
    #[arg(long)]
    fit: Option<PathBuf>,
    /// A predictor written by `--fit`, instead of the shipped one.
    #[arg(long)]
    predictor: Option<PathBuf>,
    /// Extra training samples (a JSON array of samples: family, features,
    /// at, utilization), e.g. the cluster's own history, added to the
    /// bundled profiles' points.
    #[arg(long)]
    records: Option<PathBuf>,
    /// A `gpuplan serve` state dir whose journal's utilization measurements
    /// (jobs with features, measured alone) are added as samples; safe to
    /// read beside the running daemon.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Which coefficients `--fit` and `--cross-validate` fit.
    #[arg(long, value_enum, default_value = "free")]
    form: FormArg,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FormArg {
    Free,
    Physical,
}

impl From<FormArg> for Form {
    fn from(f: FormArg) -> Form {
        match f {
            FormArg::Free => Form::Free,
            FormArg::Physical => Form::Physical,
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))
}

fn training_samples(records: Option<&Path>, state_dir: Option<&Path>) -> Result<Vec<Sample>> {
    let profiles = crate::inputs::load_profiles(None)?;
    let mut s = gpuplan_sim::utilization_samples(&profiles);
    if let Some(p) = records {
        let extra: Vec<Sample> = read_json(p)?;
        for (i, r) in extra.iter().enumerate() {
            if !(0.0..=1.0).contains(&r.utilization) {
                bail!(
                    "{}: [{i}].utilization: must be in [0, 1], got {}",
                    p.display(),
                    r.utilization
                );
            }
        }
        s.extend(extra);
    }
    if let Some(d) = state_dir {
        s.extend(gpuplan_exec::utilization_samples(d)?);
    }
    Ok(s)
}

#[derive(Serialize)]
struct Prediction<'a> {
    source: String,
    features: ModelFeatures,
    at: &'a PredictAt,
    utilization: f64,
    /// Layers whose FLOPs an ONNX file did not let us count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    uncounted: Vec<String>,
}

pub fn predict(a: PredictArgs) -> Result<ExitCode> {
    if a.cross_validate {
        let s = training_samples(a.records.as_deref(), a.state_dir.as_deref())?;
        let cv = leave_one_family_out(&s, a.form.into());
        match a.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&cv)?),
            Format::Table => {
                println!("leave-one-model-out, form {:?}, {} points", cv.form, s.len());
                println!(
                    "{:<12} {:>6} {:>8} {:>10} {:>9} {:>9} {:>9}",
                    "family", "points", "RMSLE", "RMSLE mean", "RMSLE 1", "measured", "predicted"
                );
                for f in &cv.families {
                    println!(
                        "{:<12} {:>6} {:>8.4} {:>10.4} {:>9.4} {:>9.4} {:>9.4}",
                        f.family,
                        f.points,
                        f.rmsle,
                        f.rmsle_mean,
                        f.rmsle_one,
                        f.mean_measured,
                        f.mean_predicted
                    );
                }
                println!(
                    "{:<12} {:>6} {:>8.4} {:>10.4} {:>9.4}",
                    "all",
                    s.len(),
                    cv.rmsle,
                    cv.rmsle_mean,
                    cv.rmsle_one
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(out) = &a.fit {
        let s = training_samples(a.records.as_deref(), a.state_dir.as_deref())?;
        let Some(p) = UtilizationPredictor::fit(&s, a.form.into()) else {
            bail!("no usable training samples");
        };
        std::fs::write(out, serde_json::to_string_pretty(&p)? + "\n")
            .with_context(|| format!("writing {}", out.display()))?;
        println!("{}", serde_json::to_string(&p)?);
        return Ok(ExitCode::SUCCESS);
    }
    let predictor = match &a.predictor {
        Some(p) => read_json::<UtilizationPredictor>(p)?,
        None => DEFAULT_PREDICTOR,
    };
    let Some(local_bsz) = a.local_bsz else {
        bail!("--local-bsz is required for a prediction");
    };
    if local_bsz == 0 || a.gpus == 0 || a.nodes == 0 || a.nodes > a.gpus {
        bail!(
            "need --local-bsz ≥ 1 and 1 ≤ --nodes ≤ --gpus, got local-bsz {local_bsz}, gpus {}, nodes {}",
            a.gpus,
            a.nodes
        );
    }
    let (source, app, features, uncounted) = match (&a.onnx, &a.app) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let f = gpuplan_predict::features_from_onnx(&bytes, &path.display().to_string())?;
            (path.display().to_string(), String::new(), f.features, f.uncounted)
        }
        (None, Some(app)) => match app_features(app) {
            Some(f) => (format!("app {app}"), app.clone(), f, Vec::new()),
            None => bail!(
                "--app: unknown application '{app}'; valid: bert, cifar10, deepspeech2, imagenet, ncf, yolov3"
            ),
        },
        (None, None) => bail!("give --onnx FILE or --app NAME (or --cross-validate, --fit FILE)"),
    };
    let at = PredictAt {
        nodes: a.nodes,
        gpus: a.gpus,
        local_bsz,
        gpu_type: a.gpu_type.map(GpuType),
    };
    let p = Prediction {
        source,
        features,
        at: &at,
        utilization: predictor.predict(&features, &at, &app),
        uncounted,
    };
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&p)?),
        Format::Table => {
            let l = &p.features.layers;
            println!("source            {}", p.source);
            println!(
                "FLOPs per sample  {:.4e} (forward, 2 × MACs)",
                p.features.flops_per_sample
            );
            println!("parameters        {:.0}", p.features.params);
            println!(
                "layers            conv {}, matmul {}, norm {}, recurrent {}, attention {}, other {}",
                l.conv, l.matmul, l.norm, l.recurrent, l.attention, l.other
            );
            if !p.uncounted.is_empty() {
                println!("not counted       {}", p.uncounted.join(", "));
            }
            println!(
                "at                {} node(s), {} GPU(s), local batch {}, type {}",
                at.nodes,
                at.gpus,
                at.local_bsz,
                at.gpu_type.as_ref().map_or("t4", |t| t.as_str())
            );
            println!("utilization       {:.4}", p.utilization);
        }
    }
    Ok(ExitCode::SUCCESS)
}
