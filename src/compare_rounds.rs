//! `gpuplan compare-rounds`: two round logs (`simulate --round-log`) side by
//! side (docs/fidelity.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::common::Format;

#[derive(Args, Debug)]
pub struct CompareRoundsArgs {
    /// The first round log (JSON lines).
    pub a: PathBuf,
    /// The second round log.
    pub b: PathBuf,
    /// Names of the two logs in the table.
    #[arg(long, value_delimiter = ',', default_values_t = ["a".to_string(), "b".to_string()])]
    pub labels: Vec<String>,
    /// Rounds per stretch in the table (0: the whole run only).
    #[arg(long, default_value_t = 60)]
    pub window: usize,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// `gpuplan compare-rounds`: two round logs side by side.
pub fn compare_rounds(a: CompareRoundsArgs) -> Result<ExitCode> {
    let la = gpuplan_sim::roundlog::read(&a.a)?;
    let lb = gpuplan_sim::roundlog::read(&a.b)?;
    let c = gpuplan_sim::roundlog::compare(&la, &lb, a.window);
    if a.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (x, y) = (
        a.labels.first().map_or("a", String::as_str),
        a.labels.get(1).map_or("b", String::as_str),
    );
    let opt = |t: Option<f64>| t.map_or("never".to_string(), |t| format!("{t:.0} s"));
    println!("rounds in both: {}", c.common_rounds);
    println!(
        "first round a job holds different GPUs: {}",
        opt(c.first_gpu_difference_s)
    );
    println!(
        "first round a job finished in one only: {}",
        opt(c.first_finish_difference_s)
    );
    println!(
        "same-shape (job, round) pairs: {}, largest goodput difference {:.2e}",
        c.same_shape_pairs, c.same_shape_max_goodput_diff
    );
    println!(
        "avg JCT of jobs finished in both (to the round): {x} {:.0} s, {y} {:.0} s",
        c.avg_jct_s[0], c.avg_jct_s[1]
    );
    println!(
        "\n{:>8} {:>8} | {:>13} | {:>13} | {:>13} | {:>11} | {:>11} | {:>15}",
        "from_h", "to_h", "active", "running", "gpus", "restarts", "finished", "fitness"
    );
    println!(
        "{:>8} {:>8} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>5} {:>5} | {:>5} {:>5} | {:>7} {:>7}",
        "", "", x, y, x, y, x, y, x, y, x, y, x, y
    );
    for w in c.windows.iter().chain(std::iter::once(&c.total)) {
        println!(
            "{:>8.2} {:>8.2} | {:>6.1} {:>6.1} | {:>6.1} {:>6.1} | {:>6.1} {:>6.1} | {:>5} {:>5} | {:>5} {:>5} | {:>7.4} {:>7.4}",
            w.from_s / 3600.0,
            w.to_s / 3600.0,
            w.active[0],
            w.active[1],
            w.running[0],
            w.running[1],
            w.gpus[0],
            w.gpus[1],
            w.restarts[0],
            w.restarts[1],
            w.finished[0],
            w.finished[1],
            w.fitness[0],
            w.fitness[1]
        );
    }
    println!(
        "\n{:<12} {:>17} {:>17}",
        "application", "gpus/running job", "waiting rounds"
    );
    for (app, g) in &c.gpus_per_running_job {
        let w = c.waiting_rounds.get(app).copied().unwrap_or_default();
        println!("{app:<12} {:>8.2} {:>8.2} {:>8} {:>8}", g[0], g[1], w[0], w[1]);
    }
    Ok(ExitCode::SUCCESS)
}
