//! `gpuplan serve` (the executor daemon) and its client commands `submit`,
//! `jobs`, `cancel` and `logs`.
//!
//! The admin token: `serve` uses GPUPLAN_TOKEN when set, else STATE/token,
//! which it creates (24 random bytes, hex, mode 0600) on first start. Client
//! commands send GPUPLAN_TOKEN, else the token file of the default state
//! directory, so a user on the daemon's machine needs no setup.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use gpuplan_exec::{JobSubmission, JobView};

use crate::common::Format;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7077";

/// `60s`, `200ms`, `5m`, `1h`, or plain seconds: the engines' flags'
/// grammar, so every duration flag reads alike.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    gpuplan_exec::engine::flag::duration(s)
}

/// `$XDG_STATE_HOME/gpuplan`, else `~/.local/state/gpuplan`.
pub fn default_state_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("gpuplan");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    PathBuf::from(home).join(".local/state/gpuplan")
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// `nvml` (this machine's GPUs) or `fake:NODESxGPUS` (simulated, e.g. fake:2x4).
    #[arg(long, default_value = "nvml")]
    pub devices: String,
    /// How jobs are run (each engine brings its device source: `slurm`
    /// takes the cluster from `sinfo`, not `--devices`).
    #[arg(long, default_value = "local", value_parser = engine_names())]
    pub engine: String,
    #[command(flatten)]
    pub engine_flags: EngineFlags,
    /// Time between planning rounds.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Planner id (see `gpuplan policies`).
    #[arg(long, default_value = "pollux-mip")]
    pub planner: String,
    /// State directory: journal, token, job logs and checkpoints.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Address of the HTTP API; loopback by default.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Time a job gets between SIGTERM and SIGKILL when it is moved or stopped.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Restart delay after a job's first crash; doubles after each further one.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub backoff: Duration,
    /// Crashes after which a job is marked failed.
    #[arg(long, default_value_t = 3)]
    pub max_crashes: u32,
    /// Planner time limit per round.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub time_limit: Duration,
    /// Most memory a round's model may take, MiB, as `plan --memory-limit`: a larger model is not
    /// built and that round falls back to greedy, marked with the reason (default: half the
    /// machine's memory; 0: no limit).
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,
    /// δ of the restart factor (seconds a restart is assumed to cost).
    #[arg(long, default_value_t = 30.0)]
    pub restart_penalty: f64,
    /// Least time a job holds an allocation before a round may shrink, move or preempt it, where
    /// its job file gives no `min_runtime_s` (e.g. 10m; default 0: none). At most a week.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub min_runtime: Option<Duration>,
    /// Longest one start and finish estimate may compute (`gpuplan jobs --estimate`,
    /// `submit --what-if`): its forward simulation stops there and says how far it got.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub estimate_budget: Duration,
    /// Let up to K jobs share a GPU (K = 2 when given alone; off by default). Planners that share
    /// (marked in `gpuplan policies`) decide which;
    /// co-located jobs get the same GPU and time-slice unless --mps is given. Refused with
    /// --engine slurm (docs/slurm.md, "Sharing"). See docs/colocation.md.
    #[arg(long, value_name = "K", num_args = 0..=1, default_missing_value = "2")]
    pub sharing: Option<u32>,
    /// With --sharing: which pairs may share: all (memory permitting) or only pairs this daemon
    /// has measured together.
    #[arg(long, value_enum, default_value = "all")]
    pub sharing_pairs: crate::common::SharingPairsArg,
    /// Run jobs as CUDA MPS clients of the control daemon whose pipe and log directories are
    /// DIR/pipe and DIR/log (start it first: CUDA_MPS_PIPE_DIRECTORY=DIR/pipe
    /// CUDA_MPS_LOG_DIRECTORY=DIR/log nvidia-cuda-mps-control -d). Without it, shared GPUs time-slice.
    #[arg(long, value_name = "DIR")]
    pub mps: Option<PathBuf>,
    /// Start on a damaged journal (which otherwise stops the daemon, naming the line): keep every
    /// intact record, copy the damaged journal to STATE/journal.jsonl.damaged-SEQ, and name the
    /// jobs whose state may be stale (docs/job-protocol.md, "Limits and failure").
    #[arg(long)]
    pub recover: bool,
    /// Teams' queues (TOML, docs/tenants.md): guarantees, borrowing limits and reclaim in every
    /// round. A job names its leaf queue (`queue = "..."`; none: `default`); a submission to a
    /// queue not in FILE is refused with the list. Under --engine slurm a job adopted from
    /// Slurm is in the queue named after its account unless its script names one.
    #[arg(long, value_name = "FILE")]
    pub queues: Option<PathBuf>,
    /// Append the daemon's log (launch failures, engine failures, refused plans, journal damage)
    /// to FILE instead of stderr; GPUPLAN_LOG sets the level (default info).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Label job series in /metrics (which needs no token) with job names too; by default
    /// only job ids: a name can say what a team works on.
    #[arg(long)]
    pub metrics_job_labels: bool,
    /// How long finished jobs are kept: a duration after each finished (7d, 12h, 30m, 90s) or
    /// a count of the latest (100). Past it a job leaves the job table, the journal and
    /// STATE/jobs; its id is never given out again.
    #[arg(long, value_name = "DURATION|COUNT", default_value = "7d", value_parser = gpuplan_exec::Keep::parse)]
    pub keep_finished: gpuplan_exec::Keep,
}

pub fn serve(a: ServeArgs) -> Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GPUPLAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    match &a.log {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("--log {}", path.display()))?;
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        None => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .try_init();
        }
    }
    // An engine's flag given with another engine is refused by the
    // registry, before anything starts.
    gpuplan_exec::engine::check_options(&a.engine, &a.engine_flags.0)?;
    gpuplan_exec::raise_open_file_limit();
    let state = a.state.unwrap_or_else(default_state_dir);
    let mut cfg = gpuplan_exec::Config::new(state, &a.planner);
    cfg.interval_s = a.interval.as_secs_f64();
    cfg.grace_s = a.grace.as_secs_f64();
    cfg.backoff_s = a.backoff.as_secs_f64();
    cfg.max_crashes = a.max_crashes;
    cfg.limits.time_limit_s = a.time_limit.as_secs_f64();
    cfg.limits.memory_limit_mb = crate::common::memory_limit_mb(a.memory_limit);
    cfg.params.restart_penalty_s = a.restart_penalty;
    if let Some(d) = a.min_runtime {
        cfg.params.min_runtime_s = d.as_secs_f64();
    }
    cfg.estimate_budget_s = a.estimate_budget.as_secs_f64();
    if let Some(k) = a.sharing {
        cfg.params.sharing = k;
    }
    cfg.params.sharing_pairs = a.sharing_pairs.into();
    cfg.mps = a.mps;
    if let Some(path) = &a.queues {
        cfg.queues = crate::inputs::read_queues(path)?;
    }
    if a.recover {
        cfg.on_damage = gpuplan_exec::OnDamage::Recover;
    }
    if a.metrics_job_labels {
        cfg.metrics_job_names = gpuplan_exec::JobNames::Shown;
    }
    cfg.keep_finished = a.keep_finished;
    // The executor's one check of its settings; only the flag names are ours.
    if let Err(errs) = cfg.check() {
        use gpuplan_core::ParamField;
        use gpuplan_exec::ConfigField;
        let lines: Vec<String> = errs
            .iter()
            .map(|e| match e.field {
                ConfigField::Param(ParamField::RestartPenalty) => format!("--restart-penalty: {}", e.problem),
                ConfigField::Param(ParamField::Sharing) => format!("--sharing: {}", e.problem),
                ConfigField::Param(ParamField::MinRuntime) => format!("--min-runtime: {}", e.problem),
                ConfigField::Interval => format!("--interval: {}", e.problem),
                ConfigField::Grace => format!("--grace: {}", e.problem),
                ConfigField::Mps => format!("--mps: {}", e.problem),
                ConfigField::Queues => format!("--queues: {}", e.problem),
                ConfigField::EstimateBudget => format!("--estimate-budget: {}", e.problem),
                ConfigField::MaxCrashes => format!("--max-crashes: {}", e.problem),
                ConfigField::Limit("time_limit_s") => format!("--time-limit: {}", e.problem),
                _ => e.to_string(),
            })
            .collect();
        bail!("{}", lines.join("; "));
    }
    let token = std::env::var("GPUPLAN_TOKEN").ok();
    gpuplan_exec::serve_blocking(
        gpuplan_exec::ServeConfig {
            daemon: cfg,
            devices: a.devices,
            engine: a.engine,
            engine_options: a.engine_flags.0,
            listen: a.listen,
            token,
            http: gpuplan_exec::HttpLimits::default(),
        },
        terminated(),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGINT or SIGTERM: the daemon's shutdown. The process's
/// signals are the binary's business; the executor takes any future.
async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    // Without a SIGTERM handler (it could not be installed), Ctrl-C alone.
    let mut term = signal(SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = sigterm => {}
    }
}

#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Daemon URL (default: GPUPLAN_SERVER, else http://127.0.0.1:7077).
    #[arg(long)]
    pub server: Option<String>,
}

struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(a: &ClientArgs) -> Result<Self> {
        let base = a
            .server
            .clone()
            .or_else(|| std::env::var("GPUPLAN_SERVER").ok())
            .unwrap_or_else(|| format!("http://{DEFAULT_LISTEN}"));
        let token = match std::env::var("GPUPLAN_TOKEN") {
            Ok(t) if !t.is_empty() => t,
            _ => {
                let p = default_state_dir().join("token");
                std::fs::read_to_string(&p)
                    .map(|t| t.trim().to_string())
                    .map_err(|_| {
                        anyhow!("no token: set GPUPLAN_TOKEN to the daemon's token (its STATE/token file)")
                    })?
            }
        };
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            agent,
        })
    }

    fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> Result<serde_json::Value> {
        let url = format!("{}{path}", self.base);
        let req = self
            .agent
            .request(method, &url)
            .set("Authorization", &format!("Bearer {}", self.token));
        let res = match body {
            Some(b) => {
                // Checked here too: a body the daemon refuses unread (413)
                // would otherwise end in "Broken pipe" while being sent.
                let text = serde_json::to_string(&b)?;
                if text.len() > gpuplan_exec::MAX_BODY_BYTES {
                    bail!(
                        "{method} {url}: 413: request body is {} bytes; the limit is {} bytes",
                        text.len(),
                        gpuplan_exec::MAX_BODY_BYTES
                    );
                }
                req.set("Content-Type", "application/json").send_string(&text)
            }
            None => req.call(),
        };
        match res {
            Ok(r) => r
                .into_json()
                .with_context(|| format!("{method} {url}: reading the reply")),
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                let msg = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
                    .unwrap_or(text);
                bail!("{method} {url}: {code}: {msg}")
            }
            Err(e) => bail!("{method} {url}: {e} (is `gpuplan serve` running there?)"),
        }
    }
}

/// A job file, checked, with the submitting user's uid filled in.
fn read_job(file: &Path) -> Result<JobSubmission> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    let mut spec = JobSubmission::from_toml(&text, &file.display().to_string())
        .map_err(|e| anyhow!("invalid job spec:\n  {}", e.join("\n  ")))?;
    // Jobs run as the submitting user where the daemon can (it runs as root).
    if spec.uid.is_none() {
        use std::os::unix::fs::MetadataExt;
        spec.uid = std::fs::metadata("/proc/self").ok().map(|m| m.uid());
    }
    Ok(spec)
}

/// A Unix time as seconds from `now` (`+1h02m`), or `-` when unknown.
fn from_now(t: &serde_json::Value, now: f64) -> String {
    let Some(t) = t.as_f64() else {
        return "-".into();
    };
    let s = (t - now).max(0.0).round() as u64;
    match s {
        0..=59 => format!("+{s}s"),
        60..=3599 => format!("+{}m{:02}s", s / 60, s % 60),
        _ => format!("+{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// `start (lo..hi)` of an estimate, relative to `now`.
fn when(e: &serde_json::Value, key: &str, range: &str, now: f64) -> String {
    let r = &e[range];
    format!(
        "{} ({}..{})",
        from_now(&e[key], now),
        from_now(&r["lo"], now),
        from_now(&r["hi"], now)
    )
}

/// `gpuplan jobs --estimate`: every queued and running job's expected start
/// and finish (from now), with their ranges and where its work came from.
pub fn estimates(client: ClientArgs, format: Format) -> Result<ExitCode> {
    let c = Client::new(&client)?;
    let v = c.call("GET", "/v1/estimates", None)?;
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let meta = &v["estimate"];
    let now = meta["computed_unix_s"].as_f64().unwrap_or(0.0);
    println!(
        "estimate by {} after round {}{}{}",
        meta["planner"].as_str().unwrap_or("?"),
        meta["round"],
        if meta["stale"].as_bool() == Some(true) {
            " (stale)"
        } else {
            ""
        },
        if meta["cut_short"].as_bool() == Some(true) {
            " (cut short by --estimate-budget)"
        } else {
            ""
        }
    );
    println!(
        "{:>5}  {:<20} {:<8} {:<26} {:<26} work",
        "id", "name", "state", "start (range)", "finish (range)"
    );
    for e in v["jobs"].as_array().into_iter().flatten() {
        let running = e["running"].as_bool() == Some(true);
        println!(
            "{:>5}  {:<20} {:<8} {:<26} {:<26} {}",
            e["id"],
            e["name"].as_str().unwrap_or(""),
            if running { "running" } else { "queued" },
            if running {
                "now".to_string()
            } else {
                when(e, "start_unix_s", "start_range", now)
            },
            when(e, "finish_unix_s", "finish_range", now),
            e["work"].as_str().unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `gpuplan submit --what-if`: the job's estimate if it were submitted now,
/// and the largest delay it would cause; nothing is submitted.
pub fn what_if(client: ClientArgs, file: &Path, format: Format) -> Result<ExitCode> {
    let spec = read_job(file)?;
    let c = Client::new(&client)?;
    let v = c.call("POST", "/v1/what-if", Some(serde_json::to_value(&spec)?))?;
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let now = v["estimate"]["computed_unix_s"].as_f64().unwrap_or(0.0);
    let j = &v["job"];
    println!(
        "{} (not submitted), by {}:",
        spec.name,
        v["estimate"]["planner"].as_str().unwrap_or("?")
    );
    println!("  start   {}", when(j, "start_unix_s", "start_range", now));
    println!(
        "  finish  {}  (work: {})",
        when(j, "finish_unix_s", "finish_range", now),
        j["work"].as_str().unwrap_or("")
    );
    match v["largest_delay"].as_object() {
        Some(d) => println!(
            "  delays most: job {} ({}), finish by {} s, start by {} s",
            d["id"],
            d["name"].as_str().unwrap_or(""),
            d["finish_s"].as_f64().map_or("?".into(), |x| format!("{x:.0}")),
            d["start_s"].as_f64().map_or("?".into(), |x| format!("{x:.0}"))
        ),
        None => println!("  delays no other job"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn submit(client: ClientArgs, file: &Path) -> Result<ExitCode> {
    let spec = read_job(file)?;
    let c = Client::new(&client)?;
    let v = c.call("POST", "/v1/jobs", Some(serde_json::to_value(&spec)?))?;
    println!("{}", v["id"]);
    Ok(ExitCode::SUCCESS)
}

pub fn jobs(client: ClientArgs, format: Format) -> Result<ExitCode> {
    let c = Client::new(&client)?;
    let v = c.call("GET", "/v1/jobs", None)?;
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let jobs: Vec<JobView> = serde_json::from_value(v).context("unexpected reply from the daemon")?;
    // A queue column under `serve --queues` only, so other output is unchanged.
    let queued = jobs.iter().any(|j| j.queue.is_some());
    let queue = |q: &str| {
        if queued {
            format!(" {q:<12}")
        } else {
            String::new()
        }
    };
    println!(
        "{:>5}  {:<20}{} {:<10} {:>4} {:>8} {:>6} {:>8}  reason",
        "id",
        "name",
        queue("queue"),
        "phase",
        "gpus",
        "restarts",
        "crash",
        "step"
    );
    for j in jobs {
        println!(
            "{:>5}  {:<20}{} {:<10} {:>4} {:>8} {:>6} {:>8}  {}",
            j.id.0,
            j.name,
            queue(j.queue.as_deref().unwrap_or("")),
            j.phase,
            j.gpus.len(),
            j.restarts,
            j.crashes,
            j.step,
            j.reason.unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn cancel(client: ClientArgs, id: u32) -> Result<ExitCode> {
    let c = Client::new(&client)?;
    let v = c.call("POST", &format!("/v1/jobs/{id}/cancel"), None)?;
    println!("job {id}: {}", v["phase"].as_str().unwrap_or("cancelled"));
    Ok(ExitCode::SUCCESS)
}

pub fn logs(client: ClientArgs, id: u32, lines: usize, rank: u32) -> Result<ExitCode> {
    let c = Client::new(&client)?;
    let v = c.call(
        "GET",
        &format!("/v1/jobs/{id}/logs?lines={lines}&rank={rank}"),
        None,
    )?;
    for l in v["lines"].as_array().into_iter().flatten() {
        println!("{}", l.as_str().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--engine`'s values and their help, from the engine registry.
pub fn engine_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        gpuplan_exec::engine::REGISTRY
            .iter()
            .map(|e| clap::builder::PossibleValue::new(e.name).help(e.description)),
    )
}

/// Every engine's own flags, from the engine registry: what an engine
/// declares appears in `serve` and `cluster show` (with the engine it
/// belongs to, its default and its parsing) with no edit here. Only the
/// flags given are kept, so the registry can refuse one given with another
/// engine ([`gpuplan_exec::engine::check_options`]).
#[derive(Debug, Clone, Default)]
pub struct EngineFlags(pub gpuplan_exec::engine::EngineOptions);

fn engine_flags() -> impl Iterator<Item = (&'static str, &'static dyn gpuplan_exec::engine::AnyFlag)> {
    gpuplan_exec::engine::REGISTRY
        .iter()
        .flat_map(|e| e.flags.iter().map(move |f| (e.name, *f)))
}

impl clap::FromArgMatches for EngineFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut given = gpuplan_exec::engine::EngineOptions::new();
        for (_, f) in engine_flags() {
            if m.value_source(f.name()) == Some(clap::parser::ValueSource::CommandLine) {
                if let Some(v) = m.get_one::<String>(f.name()) {
                    given.set(f.name(), v);
                }
            }
        }
        Ok(EngineFlags(given))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for EngineFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        engine_flags().fold(cmd, |cmd, (engine, f)| {
            let arg = clap::Arg::new(f.name())
                .long(f.name())
                .value_name(f.value_name())
                .help(format!("{} (with --engine {engine})", f.help()))
                // A bad value exits 2 as the daemon's own flags do.
                .value_parser(move |s: &str| f.check(s).map(|()| s.to_string()));
            cmd.arg(match f.default() {
                Some(d) => arg.default_value(d),
                None => arg,
            })
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}
